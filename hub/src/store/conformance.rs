//! The suite every storage backend must pass, run against SQLite and PostgreSQL: each
//! function below takes a fresh backend, and `suite!` makes one `#[test]` of it per backend.

use roundtable_protocol::model::{Discoverable, PrincipalKind, RequestState, Routing};

use super::*;
use super::{postgres, sqlite};
use crate::reads::{HistoryPage, HistoryRange, ReplayPosition, StoreReads};
use roundtable_engine::ids::{IdSource, TokenHash};
use roundtable_engine::records::*;

fn principal(id: &str, kind: PrincipalKind, owner: Option<&str>) -> PrincipalRecord {
    PrincipalRecord {
        id: id.into(),
        kind,
        handle: match owner {
            Some(owner) => format!("{owner}/{id}"),
            None => id.into(),
        },
        name: id.to_uppercase(),
        owner: owner.map(str::to_owned),
        discoverable: Discoverable::Contacts,
        description: Some("d".into()),
        card: owner.map(|_| r#"{"framework":"codex"}"#.into()),
        created_ms: 5,
        remote: None,
    }
}

fn event(stream: StreamKey, seq: u64, from: &str, kind: &str, mentions: &[&str]) -> EventRecord {
    EventRecord {
        stream,
        seq,
        id: format!("e{seq}"),
        ts_ms: 1000 + seq as i64,
        from: from.into(),
        kind: kind.into(),
        body: format!(r#"{{"text":"m{seq}"}}"#),
        client_key: Some(format!("{from}-key-{seq:04}")),
        mentions: mentions.iter().map(|m| m.to_string()).collect(),
        pair: false,
    }
}

/// A backend under test: its writer store and reader, and how to open the same data again.
struct Backend {
    store: Box<dyn Store>,
    reader: Box<dyn ReadStore>,
    /// Opens the backend's data again (as a restarted hub does), with ids from `seed`.
    reopen: Box<dyn Fn(u64, i64) -> Box<dyn Store>>,
    /// What must outlive the store: its directory, its database.
    _keep: Box<dyn std::any::Any>,
    /// For a cluster's process: opens another process of the same cluster, by name.
    peer: Option<Box<OpenPeer>>,
}

/// Opens another process of a cluster, by its name: its writer store and its reader.
type OpenPeer = dyn Fn(&str) -> (Box<dyn Store>, Box<dyn ReadStore>);

fn sqlite_backend() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hub.sqlite3");
    let (store, reader) = sqlite::open(&path, &mut IdSource::seeded(3), 1).unwrap();
    Backend {
        store: Box::new(store),
        reader: Box::new(reader),
        reopen: Box::new(move |seed, now_ms| {
            Box::new(
                sqlite::open(&path, &mut IdSource::seeded(seed), now_ms)
                    .unwrap()
                    .0,
            )
        }),
        _keep: Box::new(dir),
        peer: None,
    }
}

fn postgres_backend() -> Backend {
    let database = roundtable_testkit::postgres::TestDatabase::create();
    let url = database.url.clone();
    let (store, reader) = postgres::open(&url, &mut IdSource::seeded(3), 1).unwrap();
    Backend {
        store: Box::new(store),
        reader: Box::new(reader),
        reopen: Box::new(move |seed, now_ms| {
            Box::new(
                postgres::open(&url, &mut IdSource::seeded(seed), now_ms)
                    .unwrap()
                    .0,
            )
        }),
        _keep: Box::new(database),
        peer: None,
    }
}

/// The process `node` of a cluster of hub processes sharing the database at `url`.
fn cluster_process(
    url: &str,
    node: &str,
    seed: u64,
    now_ms: i64,
) -> (Box<dyn Store>, Box<dyn ReadStore>) {
    let (store, reader) =
        postgres::open_as(url, Some(node), &mut IdSource::seeded(seed), now_ms).unwrap();
    (Box::new(store), Box::new(reader))
}

/// The process `n1` of a cluster of hub processes sharing one PostgreSQL database.
fn postgres_cluster_backend() -> Backend {
    let database = roundtable_testkit::postgres::TestDatabase::create();
    let (store, reader) = cluster_process(&database.url, "n1", 3, 1);
    let (reopened, peers) = (database.url.clone(), database.url.clone());
    Backend {
        store,
        reader,
        reopen: Box::new(move |seed, now_ms| cluster_process(&reopened, "n1", seed, now_ms).0),
        _keep: Box::new(database),
        peer: Some(Box::new(move |node: &str| {
            cluster_process(&peers, node, 4, 1)
        })),
    }
}

/// One `#[test]` per function of the suite, for the backend `$open` makes.
macro_rules! suite {
    ($open:path) => {
        suite!($open;
            a_new_store_has_ids_and_nothing_else,
            committed_writes_load_back,
            a_dropped_transaction_writes_nothing,
            an_invite_s_uses_and_withdrawal_are_updated_in_place_and_load_back,
            only_what_can_still_change_is_loaded_and_the_rest_is_read_when_named,
            events_are_found_by_position_inside_and_after_the_transaction,
            the_keys_of_recent_room_events_load_with_the_snapshot,
            a_seq_is_stored_once_per_stream,
            sync_replays_from_cursors_with_gaps_and_agent_filtering,
            a_replay_read_in_small_pages_is_the_same_replay,
            history_pages_in_ascending_order,
            a_history_page_stops_at_its_byte_budget_and_says_more,
            commits_after_the_flusher_takes_over_are_kept_once_flushed,
            reopening_keeps_the_hub_id_and_epoch,
            the_directory_and_the_audit_log_read_what_was_committed,
            a_sender_s_keyed_events_are_listed_newest_first_by_prefix_in_pages,
            calls_to_remote_agents_are_claimed_once_settled_and_listed_when_due,
            read_markers_are_kept_per_device_and_never_move_back,
            controls_are_set_replaced_and_deleted_per_room,
            rooms_and_principals_change_in_place_and_a_member_leaves,
            a_held_message_is_found_by_its_sender_and_key,
            a_cluster_s_processes_read_each_other_s_batches_in_order
        );
    };
    ($open:path; $($test:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                super::$test($open());
            }
        )*
    };
}

mod on_sqlite {
    suite!(super::sqlite_backend);
}

/// Against the PostgreSQL server of `scripts/test.sh` (`ROUNDTABLE_TEST_POSTGRES`), a new
/// database per test.
mod on_postgres {
    suite!(super::postgres_backend);
}

/// The same, each store being one process of a cluster.
mod on_a_postgres_cluster {
    suite!(super::postgres_cluster_backend);
}

/// Users `u` and `v`, agent `a` of `u`, room `r` with all three, 6 messages.
fn populate(store: &mut dyn Store) {
    let mut tx = store.transaction().unwrap();
    tx.insert_principal(&principal("u", PrincipalKind::User, None))
        .unwrap();
    tx.insert_principal(&principal("v", PrincipalKind::User, None))
        .unwrap();
    tx.insert_principal(&principal("a", PrincipalKind::Agent, Some("u")))
        .unwrap();
    tx.insert_token(
        &TokenRecord {
            hash: TokenHash([7; 32]),
            principal: "u".into(),
            revoked: false,
        },
        1,
    )
    .unwrap();
    tx.insert_room(&RoomRecord {
        id: "r".into(),
        title: Some("t".into()),
        topic: None,
        creator: "u".into(),
        created_ms: 2,
    })
    .unwrap();
    for member in ["u", "v", "a"] {
        tx.upsert_member(&MemberRecord {
            room: "r".into(),
            principal: member.into(),
            routing: Routing::Mentions,
            joined_ms: 3,
        })
        .unwrap();
    }
    let room = StreamKey::Room("r".into());
    for seq in 1..=6 {
        let mentions: &[&str] = if seq == 3 { &["a"] } else { &[] };
        let from = if seq == 5 { "a" } else { "u" };
        tx.append_event(&event(room.clone(), seq, from, "message", mentions))
            .unwrap();
    }
    let mut added = event(StreamKey::Inbox("v".into()), 1, "u", "room_added", &[]);
    added.client_key = None;
    tx.append_event(&added).unwrap();
    tx.commit().unwrap();
}

fn a_new_store_has_ids_and_nothing_else(mut backend: Backend) {
    let snapshot = backend.store.load(1).unwrap();
    assert!(snapshot.hub_id.starts_with("h_"));
    assert!(snapshot.epoch.starts_with("ep_"));
    assert!(snapshot.principals.is_empty() && snapshot.rooms.is_empty());
}

fn committed_writes_load_back(mut backend: Backend) {
    populate(&mut *backend.store);
    let snapshot = backend.store.load(1).unwrap();
    assert_eq!(snapshot.principals.len(), 3);
    let agent = snapshot.principals.iter().find(|p| p.id == "a").unwrap();
    assert_eq!(agent, &principal("a", PrincipalKind::Agent, Some("u")));
    assert_eq!(snapshot.tokens.len(), 1);
    assert_eq!(snapshot.members.len(), 3);
    let mut heads = snapshot.heads.clone();
    heads.sort();
    assert_eq!(
        heads,
        vec![
            (StreamKey::Room("r".into()), 6),
            (StreamKey::Inbox("v".into()), 1)
        ]
    );
}

fn a_dropped_transaction_writes_nothing(mut backend: Backend) {
    {
        let mut tx = backend.store.transaction().unwrap();
        tx.insert_principal(&principal("u", PrincipalKind::User, None))
            .unwrap();
    }
    assert!(backend.store.load(1).unwrap().principals.is_empty());
}

fn an_invite_s_uses_and_withdrawal_are_updated_in_place_and_load_back(mut backend: Backend) {
    populate(&mut *backend.store);
    let mut invite = InviteRecord {
        id: "i_1".into(),
        code_hash: TokenHash([9; 32]),
        creator: "u".into(),
        room: Some("r".into()),
        max_uses: 3,
        uses: 0,
        expires_ms: 50_000,
        created_ms: 10,
        revoked_ms: None,
    };
    let mut tx = backend.store.transaction().unwrap();
    tx.upsert_invite(&invite).unwrap();
    tx.commit().unwrap();
    assert_eq!(backend.store.load(1).unwrap().invites, vec![invite.clone()]);
    invite.uses = 1;
    invite.revoked_ms = Some(20);
    let mut tx = backend.store.transaction().unwrap();
    tx.upsert_invite(&invite).unwrap();
    tx.commit().unwrap();
    // Withdrawn, it leaves what is loaded into memory, and is read when named.
    assert_eq!(backend.store.load(1).unwrap().invites, vec![]);
    let mut tx = backend.store.transaction().unwrap();
    assert_eq!(tx.invite("i_1").unwrap(), Some(invite.clone()));
    assert_eq!(
        tx.invite_by_code(&TokenHash([9; 32])).unwrap(),
        Some(invite)
    );
    assert_eq!(tx.invite("i_2").unwrap(), None);
}

fn only_what_can_still_change_is_loaded_and_the_rest_is_read_when_named(mut backend: Backend) {
    populate(&mut *backend.store);
    let invite = |id: &str, byte: u8, uses: u32, expires_ms: i64| InviteRecord {
        id: id.into(),
        code_hash: TokenHash([byte; 32]),
        creator: "u".into(),
        room: None,
        max_uses: 2,
        uses,
        expires_ms,
        created_ms: 1,
        revoked_ms: None,
    };
    let request = |id: &str, state: RequestState| RequestRecord {
        id: id.into(),
        from: "u".into(),
        to: "v".into(),
        state,
        message: None,
        created_ms: 1,
        decided_ms: None,
        held: None,
    };
    let ping = |id: &str, expires_ms: Option<i64>, answered_by: Option<&str>| PingRecord {
        room: "r".into(),
        ping: id.into(),
        seq: 1,
        to: vec![],
        expires_ms,
        answered_by: answered_by.map(str::to_owned),
    };
    let mut tx = backend.store.transaction().unwrap();
    tx.upsert_invite(&invite("i_live", 1, 1, 500)).unwrap();
    tx.upsert_invite(&invite("i_used", 2, 2, 500)).unwrap();
    tx.upsert_invite(&invite("i_old", 3, 0, 100)).unwrap();
    tx.upsert_request(&request("c_pending", RequestState::Pending))
        .unwrap();
    tx.upsert_request(&request("c_accepted", RequestState::Accepted))
        .unwrap();
    tx.upsert_ping(&ping("open", Some(500), None)).unwrap();
    tx.upsert_ping(&ping("answered", None, Some("v"))).unwrap();
    tx.upsert_ping(&ping("expired", Some(100), None)).unwrap();
    tx.revoke_tokens("u", 2).unwrap();
    tx.commit().unwrap();

    let snapshot = backend.store.load(200).unwrap();
    let invites: Vec<&str> = snapshot.invites.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(invites, ["i_live"]);
    let requests: Vec<&str> = snapshot.requests.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(requests, ["c_pending"]);
    let pings: Vec<&str> = snapshot.pings.iter().map(|p| p.ping.as_str()).collect();
    assert_eq!(pings, ["open"]);
    assert!(snapshot.tokens.is_empty(), "a revoked token is not loaded");

    let mut tx = backend.store.transaction().unwrap();
    assert_eq!(tx.invite("i_used").unwrap().unwrap().uses, 2);
    assert_eq!(
        tx.invite_by_code(&TokenHash([3; 32])).unwrap().unwrap().id,
        "i_old"
    );
    assert_eq!(
        tx.request("c_accepted").unwrap().unwrap().state,
        RequestState::Accepted
    );
    assert_eq!(tx.request("c_nothing").unwrap(), None);
    assert_eq!(
        tx.ping("r", "answered")
            .unwrap()
            .unwrap()
            .answered_by
            .as_deref(),
        Some("v")
    );
    assert_eq!(
        tx.ping("r", "expired").unwrap().unwrap().expires_ms,
        Some(100)
    );
    assert_eq!(tx.ping("r", "nothing").unwrap(), None);
}

fn events_are_found_by_position_inside_and_after_the_transaction(mut backend: Backend) {
    populate(&mut *backend.store);
    let room = StreamKey::Room("r".into());
    let mut tx = backend.store.transaction().unwrap();
    let original = tx.event_at(&room, 2).unwrap().unwrap();
    assert_eq!(original, event(room.clone(), 2, "u", "message", &[]));
    assert!(tx.event_at(&room, 99).unwrap().is_none());
    assert!(
        tx.event_at(&StreamKey::Inbox("r".into()), 2)
            .unwrap()
            .is_none()
    );
    let fresh = event(room.clone(), 7, "v", "message", &[]);
    tx.append_event(&fresh).unwrap();
    assert_eq!(tx.event_at(&room, 7).unwrap(), Some(fresh.clone()));
    tx.commit().unwrap();
    let mut tx = backend.store.transaction().unwrap();
    assert_eq!(tx.event_at(&room, 7).unwrap(), Some(fresh));
}

fn the_keys_of_recent_room_events_load_with_the_snapshot(mut backend: Backend) {
    populate(&mut *backend.store);
    let retention = roundtable_engine::sent_keys::RETENTION_MS;
    // Events carry ts 1001..=1006: all within the retention a moment later…
    let mut keys = backend.store.load(2_000).unwrap().sent_keys;
    keys.sort_by_key(|key| key.seq);
    let seqs: Vec<u64> = keys.iter().map(|key| key.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6], "every keyed room event");
    assert_eq!(keys[0].client_key, "u-key-0001");
    assert_eq!(keys[0].room, "r");
    // …and only the younger ones once the older fall out of it.
    let later = backend.store.load(1_004 + retention).unwrap().sent_keys;
    assert!(later.iter().all(|key| key.ts_ms >= 1_004), "{later:?}");
    assert!(!later.is_empty());
    assert!(
        backend
            .store
            .load(10_000 + retention)
            .unwrap()
            .sent_keys
            .is_empty()
    );
}

fn a_sender_s_keyed_events_are_listed_newest_first_by_prefix_in_pages(mut backend: Backend) {
    populate(&mut *backend.store);
    let mut tx = backend.store.transaction().unwrap();
    // Seqs 7..=12 in room "r": keys of two kinds from "u", one from "v"; two share a time.
    let keyed = [
        (7, "u", "a2a:one-000000", 5_000),
        (8, "u", "a2f:follow-000", 5_001),
        (9, "v", "a2a:theirs-000", 5_002),
        (10, "u", "a2a:two-000000", 5_003),
        (11, "u", "a2a:three-0000", 5_003),
        (12, "u", "a2b:other-0000", 5_004),
    ];
    for (seq, from, key, ts_ms) in keyed {
        let mut sent = event(StreamKey::Room("r".into()), seq, from, "message", &[]);
        sent.client_key = Some(key.into());
        sent.ts_ms = ts_ms;
        tx.append_event(&sent).unwrap();
    }
    tx.commit().unwrap();
    let list = |before: Option<(i64, String)>, limit: usize| {
        backend
            .reader
            .sent_with_key_prefix("u", "a2a:", before, limit)
            .unwrap()
            .into_iter()
            .map(|event| event.seq)
            .collect::<Vec<_>>()
    };
    // Newest first; at one time, the greater id first ("e11" > "e10").
    assert_eq!(list(None, 10), [11, 10, 7]);
    assert_eq!(list(None, 2), [11, 10]);
    assert_eq!(list(Some((5_003, "e10".into())), 10), [7]);
    assert_eq!(list(Some((5_003, "e11".into())), 10), [10, 7]);
    assert_eq!(list(Some((5_000, "e7".into())), 10), Vec::<u64>::new());
    // One task's key exactly.
    let exact = backend
        .reader
        .sent_with_key_prefix("u", "a2a:two-000000", None, 10)
        .unwrap();
    assert_eq!(
        exact.iter().map(|event| event.seq).collect::<Vec<_>>(),
        [10]
    );
    assert!(
        backend
            .reader
            .sent_with_key_prefix("nobody", "a2a:", None, 10)
            .unwrap()
            .is_empty()
    );
}

fn a_seq_is_stored_once_per_stream(mut backend: Backend) {
    populate(&mut *backend.store);
    let mut tx = backend.store.transaction().unwrap();
    let mut duplicate = event(StreamKey::Room("r".into()), 6, "u", "message", &[]);
    duplicate.client_key = None;
    duplicate.id = "e_again".into();
    let mut other = event(StreamKey::Room("r".into()), 7, "u", "message", &[]);
    other.client_key = None;
    // A backend may refuse at the append or, holding appends, at the commit; either way
    // nothing of the transaction is kept.
    let refused = if tx.append_event(&other).is_err() || tx.append_event(&duplicate).is_err() {
        drop(tx);
        true
    } else {
        tx.commit().is_err()
    };
    assert!(refused, "a second event at seq 6 is refused");
    let snapshot = backend.store.load(1).unwrap();
    assert!(snapshot.heads.contains(&(StreamKey::Room("r".into()), 6)));
    let mut tx = backend.store.transaction().unwrap();
    assert_eq!(tx.event_at(&StreamKey::Room("r".into()), 7).unwrap(), None);
    assert_eq!(
        tx.event_at(&StreamKey::Room("r".into()), 6)
            .unwrap()
            .unwrap()
            .id,
        "e6"
    );
}

/// One stream of a replay read whole: its head, its gap and the seqs replayed.
#[derive(Debug, PartialEq)]
struct Replayed {
    stream: StreamKey,
    head: u64,
    gap: Option<(u64, u64)>,
    seqs: Vec<u64>,
}

/// Plans a replay and reads every page of it, `page_bytes` at a time; also returns how
/// many pages it took.
fn replay(
    reader: &dyn ReadStore,
    principal: &str,
    is_agent: bool,
    cursors: &dyn Fn(&StreamKey) -> u64,
    replay_max: u64,
    page_bytes: usize,
) -> (Vec<Replayed>, usize) {
    let plan = reader.sync_plan(principal, cursors, replay_max).unwrap();
    let mut replayed: Vec<Replayed> = plan
        .streams
        .iter()
        .map(|planned| Replayed {
            stream: planned.stream.clone(),
            head: planned.head,
            gap: planned.gap,
            seqs: Vec::new(),
        })
        .collect();
    let mut pages = 0;
    let mut position = ReplayPosition::start(&plan.streams);
    while let Some(from) = position {
        let page = reader
            .replay_page(principal, is_agent, &plan.streams, from, page_bytes)
            .unwrap();
        pages += 1;
        for (index, event) in page.events {
            assert_eq!(event.stream, plan.streams[index].stream);
            replayed[index].seqs.push(event.seq);
        }
        position = page.next;
    }
    (replayed, pages)
}

fn replayed_room(replayed: &[Replayed]) -> &Replayed {
    replayed
        .iter()
        .find(|s| s.stream == StreamKey::Room("r".into()))
        .unwrap()
}

fn sync_replays_from_cursors_with_gaps_and_agent_filtering(mut backend: Backend) {
    populate(&mut *backend.store);
    let cursors = |stream: &StreamKey| match stream {
        StreamKey::Room(_) => 1,
        StreamKey::Inbox(_) => 0,
    };
    let (user, _) = replay(&*backend.reader, "v", false, &cursors, 3, 1 << 20);
    let room = replayed_room(&user);
    assert_eq!(room.head, 6);
    assert_eq!(room.gap, Some((2, 3)));
    assert_eq!(room.seqs, vec![4, 5, 6]);
    let inbox = user
        .iter()
        .find(|s| s.stream == StreamKey::Inbox("v".into()))
        .unwrap();
    assert_eq!(inbox.seqs.len(), 1);

    // The agent sees only what mentions it or what it wrote; gap counting uses raw seqs.
    let (agent, _) = replay(&*backend.reader, "a", true, &|_| 0, 500, 1 << 20);
    let room = replayed_room(&agent);
    assert_eq!(room.gap, None);
    assert_eq!(room.seqs, vec![3, 5]);

    // Up to date (or past the head): nothing to replay.
    let (current, pages) = replay(&*backend.reader, "u", false, &|_| 6, 500, 1 << 20);
    assert!(current.iter().all(|s| s.seqs.is_empty()));
    assert_eq!(pages, 1);
    let (ahead, _) = replay(&*backend.reader, "u", false, &|_| 60, 500, 1 << 20);
    assert!(ahead.iter().all(|s| s.seqs.is_empty() && s.gap.is_none()));
}

fn a_replay_read_in_small_pages_is_the_same_replay(mut backend: Backend) {
    populate(&mut *backend.store);
    let cursors = |_: &StreamKey| 0;
    let (whole, one) = replay(&*backend.reader, "v", false, &cursors, 500, 1 << 20);
    assert_eq!(one, 1, "one page holds it all");
    // Each body is 13 bytes: a page of 20 bytes holds two events.
    let (paged, pages) = replay(&*backend.reader, "v", false, &cursors, 500, 20);
    assert_eq!(paged, whole);
    assert_eq!(replayed_room(&paged).seqs, vec![1, 2, 3, 4, 5, 6]);
    assert!(pages >= 4, "{pages} pages");
}

fn history_pages_in_ascending_order(mut backend: Backend) {
    populate(&mut *backend.store);
    let seqs = |page: HistoryPage| {
        assert!(!page.more);
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>()
    };
    let range = |before, after, limit| HistoryRange {
        before,
        after,
        limit,
        max_bytes: 1 << 20,
    };
    let reader = &*backend.reader;
    assert_eq!(
        seqs(
            reader
                .history("u", false, "r", range(None, None, 2))
                .unwrap()
        ),
        vec![5, 6]
    );
    assert_eq!(
        seqs(
            reader
                .history("u", false, "r", range(Some(5), None, 2))
                .unwrap()
        ),
        vec![3, 4]
    );
    assert_eq!(
        seqs(
            reader
                .history("u", false, "r", range(None, Some(1), 2))
                .unwrap()
        ),
        vec![2, 3]
    );
    assert_eq!(
        seqs(
            reader
                .history("u", false, "r", range(None, Some(6), 2))
                .unwrap()
        ),
        Vec::<u64>::new()
    );
    assert_eq!(
        seqs(
            reader
                .history("a", true, "r", range(None, None, 50))
                .unwrap()
        ),
        vec![3, 5]
    );
    assert!(matches!(
        reader.history("u", false, "nope", range(None, None, 5)),
        Err(ReadError::NotFound)
    ));
    assert!(matches!(
        reader.history("x", false, "r", range(None, None, 5)),
        Err(ReadError::NotMember)
    ));
}

fn a_history_page_stops_at_its_byte_budget_and_says_more(mut backend: Backend) {
    populate(&mut *backend.store);
    // Bodies are 13 bytes: 30 bytes hold two of them.
    let page = |before, after| {
        backend
            .reader
            .history(
                "u",
                false,
                "r",
                HistoryRange {
                    before,
                    after,
                    limit: 5,
                    max_bytes: 30,
                },
            )
            .unwrap()
    };
    let first = page(None, Some(0));
    assert_eq!(
        first.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert!(first.more);
    let newest = page(None, None);
    assert_eq!(
        newest.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![5, 6]
    );
    assert!(newest.more);
    // The last page of a range fits: no `more`.
    let last = page(None, Some(4));
    assert_eq!(
        last.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![5, 6]
    );
    assert!(!last.more);
    // One event over the budget still comes alone.
    let single = backend
        .reader
        .history(
            "u",
            false,
            "r",
            HistoryRange {
                before: None,
                after: Some(0),
                limit: 5,
                max_bytes: 1,
            },
        )
        .unwrap();
    assert_eq!(single.events.len(), 1);
    assert!(single.more);
}

fn commits_after_the_flusher_takes_over_are_kept_once_flushed(mut backend: Backend) {
    let mut flush = backend.store.flusher().unwrap();
    populate(&mut *backend.store);
    flush.flush().unwrap();
    // A second flush with nothing new is harmless.
    flush.flush().unwrap();
    drop(flush);
    drop(backend.store);
    drop(backend.reader);
    let mut store = (backend.reopen)(98, 2);
    let snapshot = store.load(1).unwrap();
    assert_eq!(snapshot.principals.len(), 3);
    assert_eq!(snapshot.members.len(), 3);
}

fn reopening_keeps_the_hub_id_and_epoch(mut backend: Backend) {
    let before = backend.store.load(1).unwrap();
    drop(backend.store);
    let mut store = (backend.reopen)(99, 2);
    let after = store.load(1).unwrap();
    assert_eq!((before.hub_id, before.epoch), (after.hub_id, after.epoch));
}

#[test]
fn migrations_apply_once_and_detect_edits_and_newer_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.sqlite3");
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(
        sqlite::migrate(&mut conn, 1).unwrap(),
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    );
    assert_eq!(sqlite::migrate(&mut conn, 2).unwrap(), Vec::<i64>::new());
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 1);

    conn.execute(
        "UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1",
        [],
    )
    .unwrap();
    assert!(matches!(
        sqlite::migrate(&mut conn, 3),
        Err(StoreError::Migration(
            roundtable_sqlite::MigrationError::Edited { version: 1 }
        ))
    ));

    let fresh = dir.path().join("n.sqlite3");
    let mut conn = rusqlite::Connection::open(&fresh).unwrap();
    sqlite::migrate(&mut conn, 1).unwrap();
    conn.execute(
        "INSERT INTO schema_migrations (version, name, checksum, applied_ms) VALUES (999, 'future', 'x', 1)",
        [],
    )
    .unwrap();
    assert!(matches!(
        sqlite::migrate(&mut conn, 2),
        Err(StoreError::Migration(
            roundtable_sqlite::MigrationError::NewerSchema { found: 999, .. }
        ))
    ));
}

fn the_directory_and_the_audit_log_read_what_was_committed(mut backend: Backend) {
    use roundtable_protocol::model::{AuditResult, ContactRelation};
    populate(&mut *backend.store);
    assert_eq!(
        backend.reader.audit_head().unwrap(),
        Some((0, roundtable_engine::audit::GENESIS.to_owned()))
    );
    let mut tx = backend.store.transaction().unwrap();
    tx.insert_contact(&ContactRecord {
        a: "u".into(),
        b: "v".into(),
        since_ms: 4,
        request: None,
    })
    .unwrap();
    for (n, principal) in [(1, "u"), (2, "a"), (3, "v")] {
        tx.append_audit(&AuditRecord {
            n,
            ts_ms: 10 * n as i64,
            principal: principal.into(),
            action: "room_invite".into(),
            target: Some("r".into()),
            reason: (n == 2).then(|| "budget reached".into()),
            via: match n {
                1 => roundtable_engine::records::Via::Ws,
                2 => roundtable_engine::records::Via::Mcp,
                _ => roundtable_engine::records::Via::A2a,
            },
            result: if n == 3 {
                AuditResult::Err
            } else {
                AuditResult::Ok
            },
            code: (n == 3).then(|| "not_member".into()),
            count: (n == 3).then_some(4),
            hash: format!("{n:064}"),
        })
        .unwrap();
    }
    tx.commit().unwrap();

    let directory = |viewer: &str, query: Option<&str>| {
        backend
            .reader
            .directory(&DirectoryQuery {
                viewer: viewer.into(),
                handle: None,
                agents_only: false,
                query: query.map(str::to_owned),
                limit: 10,
                now_ms: 100,
            })
            .unwrap()
            .into_iter()
            .map(|entry| (entry.id, entry.contact))
            .collect::<Vec<_>>()
    };
    // Ascending by handle: "u", "u/a", "v".
    assert_eq!(
        directory("u", None),
        [
            ("a".to_owned(), ContactRelation::Kin),
            ("v".to_owned(), ContactRelation::Accepted)
        ]
    );
    assert_eq!(
        directory("v", None),
        [
            ("u".to_owned(), ContactRelation::Accepted),
            ("a".to_owned(), ContactRelation::None)
        ]
    );
    assert_eq!(
        directory("v", Some("u/a")),
        [("a".to_owned(), ContactRelation::None)]
    );
    assert_eq!(directory("nobody", None), []);

    // A card's lookup: one handle exactly, the viewer itself included, and anonymous
    // viewers see public principals only.
    let mut tx = backend.store.transaction().unwrap();
    let mut public = principal("w", PrincipalKind::Agent, Some("v"));
    public.discoverable = roundtable_protocol::model::Discoverable::Public;
    tx.insert_principal(&public).unwrap();
    tx.commit().unwrap();
    let card = |viewer: &str, handle: &str| {
        backend
            .reader
            .directory(&DirectoryQuery {
                viewer: viewer.into(),
                handle: Some(handle.into()),
                agents_only: false,
                query: None,
                limit: 1,
                now_ms: 100,
            })
            .unwrap()
            .into_iter()
            .map(|entry| (entry.id, entry.contact))
            .collect::<Vec<_>>()
    };
    assert_eq!(card("", "v/w"), [("w".to_owned(), ContactRelation::None)]);
    assert_eq!(
        card("", "u/a"),
        [],
        "contacts-only: not for anonymous viewers"
    );
    assert_eq!(card("", "v/nobody"), []);
    assert_eq!(card("nobody", "v/w"), [], "an unknown viewer sees nothing");
    assert_eq!(card("v", "u/a"), [("a".to_owned(), ContactRelation::None)]);
    assert_eq!(card("a", "u/a"), [("a".to_owned(), ContactRelation::Kin)]);
    assert_eq!(card("u", "u/a"), [("a".to_owned(), ContactRelation::Kin)]);
    assert_eq!(card("u", "u/"), []);
    assert_eq!(
        directory("u", Some("w")),
        [("w".to_owned(), ContactRelation::None)],
        "the search still leaves the viewer out and finds the public one"
    );
    let agents = backend
        .reader
        .directory(&DirectoryQuery {
            viewer: "u".into(),
            handle: None,
            agents_only: true,
            query: None,
            limit: 10,
            now_ms: 100,
        })
        .unwrap()
        .into_iter()
        .map(|entry| entry.id)
        .collect::<Vec<_>>();
    assert_eq!(
        agents,
        ["a", "w"],
        "agents only: the viewer's own and the public one"
    );

    let audit = |viewer: &str, principal: Option<&str>, since_ms: Option<i64>| {
        backend.reader.audit(&AuditQuery {
            viewer: viewer.into(),
            principal: principal.map(str::to_owned),
            since_ms,
            limit: 10,
        })
    };
    let mine = audit("u", None, None).unwrap();
    assert_eq!(mine.iter().map(|entry| entry.n).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(mine[1].reason.as_deref(), Some("budget reached"));
    assert_eq!(
        (mine[0].via, mine[1].via),
        (
            roundtable_engine::records::Via::Ws,
            roundtable_engine::records::Via::Mcp
        ),
        "the way a command came is kept"
    );
    assert_eq!(
        audit("u", Some("a"), Some(15)).unwrap().len(),
        1,
        "since filters by time"
    );
    assert!(matches!(
        audit("u", Some("v"), None),
        Err(ReadError::NotFound)
    ));
    let theirs = audit("v", None, None).unwrap();
    assert_eq!(
        (
            theirs[0].result,
            theirs[0].code.as_deref(),
            theirs[0].count,
            theirs[0].via
        ),
        (
            AuditResult::Err,
            Some("not_member"),
            Some(4),
            roundtable_engine::records::Via::A2a
        )
    );
    assert_eq!(
        backend.reader.audit_head().unwrap(),
        Some((3, format!("{:064}", 3)))
    );
}

fn calls_to_remote_agents_are_claimed_once_settled_and_listed_when_due(mut backend: Backend) {
    use roundtable_protocol::client::{RemoteCredential, RemoteCredentialScheme};
    populate(&mut *backend.store);
    // Three conversations (room r with a, u and v: the store knows nothing of who is
    // remote), and a second call in a's.
    let call = |seq: u64, remote: &str, next_ms: Option<i64>| RemoteCallRecord {
        room: "r".into(),
        seq,
        remote: remote.into(),
        created_ms: 10 + seq as i64,
        attempts: 0,
        next_ms,
    };
    let credential = RemoteCredential {
        scheme: RemoteCredentialScheme::ApiKey,
        value: "k-1".into(),
        header: Some("X-Key".into()),
    };
    let mut tx = backend.store.transaction().unwrap();
    for (seq, remote, next_ms) in [
        (3, "a", Some(100)),
        (4, "u", Some(50)),
        (5, "v", Some(500)),
        (6, "a", Some(10)),
    ] {
        let written = tx
            .remote(&RemoteWrite::Call(&call(seq, remote, next_ms)))
            .unwrap();
        assert_eq!(written, 1);
    }
    // The same event and remote again: nothing new, the first stays.
    tx.remote(&RemoteWrite::Call(&call(3, "a", Some(1))))
        .unwrap();
    tx.remote(&RemoteWrite::Credential {
        principal: "a",
        credential: &credential,
    })
    .unwrap();
    tx.commit().unwrap();
    let due = |backend: &Backend, now_ms: i64| -> Vec<u64> {
        let due = backend.reader.remote_calls_due(now_ms, 10).unwrap();
        due.iter().map(|call| call.seq).collect()
    };
    // Soonest first; a's second call waits for its first, though due sooner.
    assert_eq!(due(&backend, 200), [4, 3]);
    assert_eq!(
        backend.reader.remote_calls_due(200, 10).unwrap()[1],
        call(3, "a", Some(100))
    );
    assert_eq!(backend.reader.remote_calls_due(200, 1).unwrap().len(), 1);

    let claim = |seq: u64, remote: &'static str, now_ms: i64| RemoteWrite::Claim {
        room: "r",
        seq,
        remote,
        now_ms,
        until_ms: now_ms + 60_000,
    };
    let settle =
        |seq: u64, remote: &'static str, attempt: u32, next_ms: Option<i64>| RemoteWrite::Settle {
            room: "r",
            seq,
            remote,
            attempt,
            next_ms,
        };
    let mut tx = backend.store.transaction().unwrap();
    assert_eq!(tx.remote(&claim(6, "a", 200)).unwrap(), 0, "not its turn");
    assert_eq!(
        tx.remote(&claim(3, "a", 200)).unwrap(),
        1,
        "a due call is claimed: attempt 1"
    );
    assert_eq!(tx.remote(&claim(3, "a", 200)).unwrap(), 0, "and only once");
    assert_eq!(
        tx.remote(&claim(5, "v", 200)).unwrap(),
        0,
        "not before it is due"
    );
    // Attempt 1 lapses (its lease ends at 60 200); attempt 2 takes the call.
    assert_eq!(tx.remote(&claim(3, "a", 60_200)).unwrap(), 2);
    // The first attempt's late renewal and settlement change nothing.
    assert_eq!(tx.remote(&settle(3, "a", 1, Some(1))).unwrap(), 0);
    assert_eq!(tx.remote(&settle(3, "a", 1, None)).unwrap(), 0);
    // The second renews its lease.
    assert_eq!(tx.remote(&settle(3, "a", 2, Some(120_200))).unwrap(), 1);
    assert_eq!(tx.remote(&claim(4, "u", 60)).unwrap(), 1);
    assert_eq!(tx.remote(&settle(4, "u", 1, None)).unwrap(), 1);
    assert_eq!(
        tx.remote(&claim(4, "u", 1_000_000)).unwrap(),
        0,
        "a settled call is never due"
    );
    assert_eq!(
        tx.remote(&settle(4, "u", 1, Some(5))).unwrap(),
        0,
        "nor brought back"
    );
    let defer =
        |seq: u64, remote: &'static str, now_ms: i64, next_ms: Option<i64>| RemoteWrite::Defer {
            room: "r",
            seq,
            remote,
            now_ms,
            next_ms,
        };
    assert_eq!(
        tx.remote(&defer(4, "u", 1_000_000, Some(7))).unwrap(),
        0,
        "a settled call stays so"
    );
    assert_eq!(
        tx.remote(&defer(3, "a", 100_000, Some(7))).unwrap(),
        0,
        "a claimed one too"
    );
    tx.remote(&RemoteWrite::Thread(&RemoteThreadRecord {
        room: "r".into(),
        remote: "a".into(),
        context_id: Some("c".into()),
        task_id: Some("t".into()),
        ping: Some("p".into()),
        asker: Some("u".into()),
        mention: Some("e".into()),
    }))
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(due(&backend, 200_000), [5, 3]);
    let held = backend.reader.remote_calls_due(200_000, 10).unwrap();
    let claimed = held.iter().find(|call| call.seq == 3).unwrap();
    assert_eq!((claimed.attempts, claimed.next_ms), (2, Some(120_200)));
    // a's first call settled: its second's turn.
    let mut tx = backend.store.transaction().unwrap();
    assert_eq!(tx.remote(&settle(3, "a", 2, None)).unwrap(), 1);
    tx.commit().unwrap();
    assert_eq!(due(&backend, 200_000), [6, 5]);
    assert_eq!(
        backend.reader.remote_credential("a").unwrap(),
        Some(credential)
    );
    assert_eq!(backend.reader.remote_credential("u").unwrap(), None);
    let thread = backend.reader.remote_thread("r", "a").unwrap().unwrap();
    assert_eq!(thread.task_id.as_deref(), Some("t"));
    // A thread is replaced whole: the question answered, its task and ping go.
    let mut tx = backend.store.transaction().unwrap();
    tx.remote(&RemoteWrite::Thread(&RemoteThreadRecord {
        room: "r".into(),
        remote: "a".into(),
        context_id: Some("c".into()),
        ..RemoteThreadRecord::default()
    }))
    .unwrap();
    tx.commit().unwrap();
    let thread = backend.reader.remote_thread("r", "a").unwrap().unwrap();
    assert_eq!((thread.task_id, thread.ping), (None, None));
    assert_eq!(backend.reader.remote_thread("r", "u").unwrap(), None);
    // Settled calls made before a time are forgotten; the others stay.
    let mut tx = backend.store.transaction().unwrap();
    assert_eq!(tx.remote(&RemoteWrite::Prune { before_ms: 15 }).unwrap(), 2);
    tx.commit().unwrap();
    assert_eq!(due(&backend, i64::MAX), [6, 5]);
    let mut tx = backend.store.transaction().unwrap();
    assert_eq!(
        tx.remote(&settle(4, "u", 1, Some(1))).unwrap(),
        0,
        "call 4 is gone"
    );
    // v's call, never claimed, waits until 500: woken, it is due now; a's second waits
    // nothing (due already) and is left as it is.
    let wake = |remote: &'static str, room: Option<&'static str>| RemoteWrite::Wake {
        remote,
        room,
        now_ms: 300,
    };
    assert_eq!(tx.remote(&wake("v", Some("elsewhere"))).unwrap(), 0);
    assert_eq!(tx.remote(&wake("v", Some("r"))).unwrap(), 1);
    assert_eq!(tx.remote(&wake("a", None)).unwrap(), 0);
    tx.commit().unwrap();
    assert_eq!(due(&backend, 300), [6, 5]);
}

fn read_markers_are_kept_per_device_and_never_move_back(mut backend: Backend) {
    populate(&mut *backend.store);
    let room = StreamKey::Room("r".into());
    let inbox = StreamKey::Inbox("u".into());
    let mut tx = backend.store.transaction().unwrap();
    tx.set_ack("u", "laptop", &room, 3).unwrap();
    tx.set_ack("u", "phone", &room, 5).unwrap();
    tx.set_ack("u", "laptop", &inbox, 1).unwrap();
    // Lower than what the device acknowledged: kept as it was.
    tx.set_ack("u", "phone", &room, 2).unwrap();
    tx.commit().unwrap();
    let mut laptop = backend.reader.device_read_markers("u", "laptop").unwrap();
    laptop.sort();
    assert_eq!(laptop, [(room.clone(), 3), (inbox, 1)]);
    assert_eq!(
        backend.reader.device_read_markers("u", "phone").unwrap(),
        [(room.clone(), 5)]
    );
    assert!(
        backend
            .reader
            .device_read_markers("u", "tablet")
            .unwrap()
            .is_empty()
    );
    // `sync` reads the highest of the principal's devices.
    let plan = backend.reader.sync_plan("u", &|_| 0, 100).unwrap();
    assert!(plan.read_markers.contains(&(room, 5)), "{plan:?}");
}

fn controls_are_set_replaced_and_deleted_per_room(mut backend: Backend) {
    populate(&mut *backend.store);
    let control = |room: Option<&str>, action, by: &str| ControlRecord {
        agent: "a".into(),
        room: room.map(str::to_owned),
        action,
        by: by.into(),
        ts_ms: 40,
        reason: Some("lunch".into()),
    };
    use roundtable_protocol::client::ControlAction;
    let everywhere = control(None, ControlAction::Pause, "u");
    let mut tx = backend.store.transaction().unwrap();
    tx.set_control(&everywhere).unwrap();
    tx.set_control(&control(Some("r"), ControlAction::Pause, "u"))
        .unwrap();
    // The room's control again: replaced, not added.
    tx.set_control(&control(Some("r"), ControlAction::Stop, "v"))
        .unwrap();
    tx.commit().unwrap();
    let mut controls = backend.store.load(1).unwrap().controls;
    controls.sort_by(|a, b| a.room.cmp(&b.room));
    assert_eq!(
        controls,
        [
            everywhere.clone(),
            control(Some("r"), ControlAction::Stop, "v")
        ]
    );
    let mut tx = backend.store.transaction().unwrap();
    tx.delete_control("a", Some("r")).unwrap();
    tx.commit().unwrap();
    assert_eq!(backend.store.load(1).unwrap().controls, [everywhere]);
    let mut tx = backend.store.transaction().unwrap();
    tx.delete_control("a", None).unwrap();
    tx.commit().unwrap();
    assert!(backend.store.load(1).unwrap().controls.is_empty());
}

fn rooms_and_principals_change_in_place_and_a_member_leaves(mut backend: Backend) {
    populate(&mut *backend.store);
    let mut agent = principal("a", PrincipalKind::Agent, Some("u"));
    agent.name = "Reviewer".into();
    agent.discoverable = Discoverable::Public;
    agent.description = None;
    agent.card = Some(r#"{"framework":"claude"}"#.into());
    let room = RoomRecord {
        id: "r".into(),
        title: Some("renamed".into()),
        topic: Some("the release".into()),
        creator: "u".into(),
        created_ms: 2,
    };
    let mut tx = backend.store.transaction().unwrap();
    tx.update_principal(&agent).unwrap();
    tx.update_room(&room).unwrap();
    tx.delete_member("r", "v").unwrap();
    tx.commit().unwrap();
    let snapshot = backend.store.load(1).unwrap();
    assert_eq!(
        snapshot.principals.iter().find(|p| p.id == "a"),
        Some(&agent)
    );
    assert_eq!(snapshot.rooms, [room]);
    let mut members: Vec<&str> = snapshot
        .members
        .iter()
        .map(|m| m.principal.as_str())
        .collect();
    members.sort();
    assert_eq!(members, ["a", "u"]);
    // Who left reads the room no more, and syncs it no more.
    assert!(matches!(
        backend.reader.history(
            "v",
            false,
            "r",
            HistoryRange {
                before: None,
                after: None,
                limit: 10,
                max_bytes: 1 << 20,
            }
        ),
        Err(ReadError::NotMember)
    ));
    let plan = backend.reader.sync_plan("v", &|_| 0, 100).unwrap();
    let streams: Vec<&StreamKey> = plan.streams.iter().map(|planned| &planned.stream).collect();
    assert_eq!(streams, [&StreamKey::Inbox("v".into())]);
}

fn a_held_message_is_found_by_its_sender_and_key(mut backend: Backend) {
    populate(&mut *backend.store);
    let request = RequestRecord {
        id: "c_1".into(),
        from: "u".into(),
        to: "v".into(),
        state: RequestState::Pending,
        message: Some("hello".into()),
        created_ms: 1,
        decided_ms: None,
        held: Some(roundtable_engine::records::HeldMessage {
            client_key: "u-held-1".into(),
            body: Some(r#"{"text":"the held one"}"#.into()),
        }),
    };
    let mut tx = backend.store.transaction().unwrap();
    tx.upsert_request(&request).unwrap();
    tx.commit().unwrap();
    assert_eq!(
        backend.reader.request_holding("u", "u-held-1").unwrap(),
        Some(request.clone())
    );
    assert_eq!(
        backend.reader.request_holding("u", "u-held-2").unwrap(),
        None
    );
    assert_eq!(
        backend.reader.request_holding("v", "u-held-1").unwrap(),
        None
    );
    // Accepted, its message sent: the request no longer holds it.
    let mut accepted = request;
    accepted.state = RequestState::Accepted;
    accepted.decided_ms = Some(9);
    accepted.held = None;
    let mut tx = backend.store.transaction().unwrap();
    tx.upsert_request(&accepted).unwrap();
    tx.commit().unwrap();
    assert_eq!(
        backend.reader.request_holding("u", "u-held-1").unwrap(),
        None
    );
}

fn a_cluster_s_processes_read_each_other_s_batches_in_order(mut backend: Backend) {
    let shared = |id: &str| roundtable_engine::records::SharedBatch {
        ops: vec![roundtable_engine::records::WriteOp::InsertPrincipal {
            principal: principal(id, PrincipalKind::User, None),
        }],
        ..Default::default()
    };
    let Some(peer) = &backend.peer else {
        // A store one hub writes: nothing is shared, and no one is waited for.
        let mut tx = backend.store.transaction().unwrap();
        assert_eq!(tx.position(), None);
        assert!(tx.others().is_empty());
        tx.insert_principal(&principal("u", PrincipalKind::User, None))
            .unwrap();
        tx.share(shared("u")).unwrap();
        tx.commit().unwrap();
        assert!(backend.reader.committed_after(0, 10).unwrap().is_empty());
        backend.reader.record_progress("n2", 1, 5).unwrap();
        backend
            .store
            .wait_for_peers(1, std::time::Duration::from_secs(60));
        assert_eq!(backend.store.load(1).unwrap().shared_position, 0);
        return;
    };
    let (mut other, other_reader) = peer("n2");
    backend.store.load(1).unwrap();
    other.load(1).unwrap();
    // n1 commits a batch and says what it shares.
    let mut tx = backend.store.transaction().unwrap();
    let first = tx.position().expect("a cluster's batch has a position");
    tx.insert_principal(&principal("u", PrincipalKind::User, None))
        .unwrap();
    tx.share(shared("u")).unwrap();
    tx.commit().unwrap();
    // n2 reads it, as the fan-out does and as its next batch does, before its own.
    let committed = other_reader.committed_after(first - 1, 10).unwrap();
    assert_eq!(committed.len(), 1);
    assert_eq!((committed[0].n, committed[0].node.as_str()), (first, "n1"));
    assert_eq!(committed[0].batch.ops, shared("u").ops);
    let mut tx = other.transaction().unwrap();
    let others = tx.others();
    assert_eq!(others.iter().map(|c| c.n).collect::<Vec<_>>(), [first]);
    let second = tx.position().unwrap();
    assert_eq!(second, first + 1);
    tx.insert_principal(&principal("v", PrincipalKind::User, None))
        .unwrap();
    tx.share(shared("v")).unwrap();
    tx.commit().unwrap();
    let both = backend.reader.committed_after(first - 1, 10).unwrap();
    assert_eq!(
        both.iter().map(|c| c.n).collect::<Vec<_>>(),
        [first, second]
    );
    assert_eq!(
        backend.reader.committed_after(first - 1, 1).unwrap().len(),
        1
    );
    assert_eq!(backend.store.load(1).unwrap().shared_position, second);
    // n1 waits for n2 to have fanned a batch out: n2 is behind, so the wait runs out…
    let now_ms = crate::unix_ms();
    other_reader
        .record_progress("n2", first - 1, now_ms)
        .unwrap();
    let wait = std::time::Duration::from_millis(200);
    let started = std::time::Instant::now();
    backend.store.wait_for_peers(first, wait);
    assert!(started.elapsed() >= wait, "returned while n2 was behind");
    // …and once n2 says it has, it returns.
    other_reader.record_progress("n2", first, now_ms).unwrap();
    backend
        .store
        .wait_for_peers(first, std::time::Duration::from_secs(600));
}
