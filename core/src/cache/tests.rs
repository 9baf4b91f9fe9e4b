//! The cache applies events in any order to the same projections (gap filling brings old
//! events after new ones), keeps cursors and events together, and keeps the outbox's
//! promises across restarts.

use proptest::prelude::*;
use roundtable_protocol::server::Event;
use serde_json::{Value, json};

use super::*;

fn event(room: &str, seq: u64, ts: &str, from: &str, kind: &str, body: Value) -> Event {
    Event {
        room: Some(room.into()),
        stream: None,
        seq,
        id: format!("e{seq}"),
        ts: ts.into(),
        from: from.into(),
        kind: kind.into(),
        body,
        client_key: None,
    }
}

fn session(id: &str) -> Value {
    json!({"agent": "p_agent", "framework": "claude-code", "session_id": id})
}

/// One room's worth of every kind, with later events overriding earlier ones.
fn history() -> Vec<Event> {
    let t = |minute: u32| format!("2026-11-30T09:{minute:02}:00.000Z");
    vec![
        event("r", 1, &t(0), "p_dana", "room", json!({"title": "first"})),
        event(
            "r",
            2,
            &t(1),
            "p_dana",
            "member",
            json!({"principal": "p_agent", "action": "join", "by": "p_dana"}),
        ),
        event(
            "r",
            3,
            &t(2),
            "p_agent",
            "tasks",
            json!({"session": session("s1"), "source": "TodoWrite", "tasks": [{"title": "old", "status": "pending"}]}),
        ),
        event(
            "r",
            4,
            &t(3),
            "p_agent",
            "arch",
            json!({"define": [{"id": "parser", "name": "Parser", "paths": ["src/**"], "depends_on": []}]}),
        ),
        event(
            "r",
            5,
            &t(4),
            "p_agent",
            "arch",
            json!({"component": "parser", "status": "working"}),
        ),
        event(
            "r",
            6,
            &t(5),
            "p_agent",
            "ping",
            json!({"ping": "q", "question": "keep it?", "options": ["yes", "no"]}),
        ),
        event(
            "r",
            7,
            &t(6),
            "p_dana",
            "answer",
            json!({"ping": "q", "choice": "yes"}),
        ),
        event(
            "r",
            8,
            &t(7),
            "p_sam",
            "answer",
            json!({"ping": "q", "choice": "no"}),
        ),
        event(
            "r",
            9,
            &t(8),
            "p_agent",
            "tasks",
            json!({"session": session("s1"), "source": "TodoWrite", "tasks": [{"title": "new", "status": "completed"}]}),
        ),
        event(
            "r",
            10,
            &t(9),
            "p_agent",
            "status",
            json!({"state": "working"}),
        ),
        event(
            "r",
            11,
            &t(10),
            "p_agent",
            "status",
            json!({"state": "idle", "detail": "done"}),
        ),
        event(
            "r",
            12,
            &t(11),
            "p_dana",
            "room",
            json!({"topic": "parsing", "title": "second"}),
        ),
        event(
            "r",
            13,
            &t(12),
            "p_agent",
            "arch",
            json!({"component": "parser", "status": "done", "note": "shipped"}),
        ),
        event(
            "r",
            14,
            &t(13),
            "p_dana",
            "member",
            json!({"principal": "p_agent", "action": "kick", "by": "p_dana"}),
        ),
        event(
            "r",
            15,
            &t(14),
            "p_agent",
            "usage",
            json!({"session": session("s1"), "model": "m", "input": 10, "output": 1, "cache_write": 0, "cache_read": 0, "cost_usd": 0.25, "from": t(13), "to": t(14)}),
        ),
        event(
            "r",
            16,
            &t(15),
            "p_agent",
            "usage",
            json!({"session": session("s1"), "model": "m", "input": 5, "output": 1, "cache_write": 0, "cache_read": 0, "from": t(14), "to": t(15)}),
        ),
    ]
}

fn open() -> (tempfile::TempDir, Cache) {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(&dir.path().join("cache.sqlite3"), 0).unwrap();
    (dir, cache)
}

/// Everything the projections hold, as comparable text.
fn state(cache: &Cache) -> String {
    let rooms: Vec<(String, Option<String>, Option<String>)> = cache
        .conn
        .prepare("SELECT id, title, topic FROM rooms ORDER BY id")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let members: Vec<(String, bool)> = cache
        .conn
        .prepare("SELECT principal, present FROM members ORDER BY principal")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    format!(
        "{rooms:?}\n{members:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
        cache.task_sessions(&TaskFilter::default()).unwrap(),
        cache.components("r").unwrap(),
        cache.pings(0).unwrap(),
        cache.agent_statuses().unwrap(),
        cache.usage(&by_agent_and_model()).unwrap()
    )
}

fn by_agent_and_model() -> UsageQuery {
    UsageQuery {
        group_by: vec![UsageKey::Agent, UsageKey::Model],
        ..UsageQuery::default()
    }
}

#[test]
fn projections_hold_the_latest_of_everything_and_the_first_answer() {
    let (_dir, mut cache) = open();
    cache.apply("p_dana", "r", &history(), None).unwrap();
    let tasks = cache.task_sessions(&TaskFilter::default()).unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].tasks[0].title, "new");
    let components = cache.components("r").unwrap();
    assert_eq!(components[0].status, Some(crate::wire("done")));
    assert_eq!(components[0].note.as_deref(), Some("shipped"));
    assert_eq!(components[0].name.as_deref(), Some("Parser"));
    assert_eq!(components[0].paths, vec!["src/**".to_owned()]);
    let pings = cache.pings(0).unwrap();
    assert_eq!(pings[0].answered_by.as_deref(), Some("p_dana"));
    assert_eq!(pings[0].choice.as_deref(), Some("yes"));
    assert_eq!(pings[0].state, PingState::Answered);
    let statuses = cache.agent_statuses().unwrap();
    assert_eq!(
        (
            statuses[0].agent.as_str(),
            statuses[0].state.as_str(),
            statuses[0].detail.as_deref()
        ),
        ("p_agent", "idle", Some("done"))
    );
    let usage = cache.usage(&by_agent_and_model()).unwrap();
    assert_eq!((usage[0].input, usage[0].unpriced), (15, 1));
    assert!((usage[0].cost_usd - 0.25).abs() < 1e-9);
    assert!(state(&cache).contains("(\"p_agent\", false)"), "kicked");
    assert!(state(&cache).contains("Some(\"second\"), Some(\"parsing\")"));
}

/// The hub's `rooms` reply for `r` as of seq 16, agreeing with `history()`.
fn snapshot() -> roundtable_protocol::model::Room {
    serde_json::from_value(json!({
        "id": "r", "title": "second", "topic": "parsing", "head": 16, "creator": "p_dana",
        "members": [{"id": "p_dana", "kind": "user", "handle": "dana", "name": "Dana", "routing": "all"}]
    }))
    .unwrap()
}

#[test]
fn a_rooms_snapshot_agrees_with_events_before_or_after_it() {
    let events = history();
    let (_a, mut snapshot_first) = open();
    snapshot_first.apply_rooms(&[snapshot()]).unwrap();
    assert!(state(&snapshot_first).contains("Some(\"second\"), Some(\"parsing\")"));
    // History filled later (older than the snapshot) changes none of it.
    snapshot_first.apply("p_dana", "r", &events, None).unwrap();
    let (_b, mut events_first) = open();
    events_first.apply("p_dana", "r", &events, None).unwrap();
    events_first.apply_rooms(&[snapshot()]).unwrap();
    assert_eq!(state(&snapshot_first), state(&events_first));
    assert!(
        state(&events_first).contains("(\"p_agent\", false)"),
        "kicked before the head"
    );
    assert!(state(&events_first).contains("(\"p_dana\", true)"));
    // A newer event overrides the snapshot.
    let newer = event(
        "r",
        17,
        "2026-11-30T10:00:00.000Z",
        "p_dana",
        "room",
        json!({"title": "third"}),
    );
    snapshot_first.apply("p_dana", "r", &[newer], None).unwrap();
    assert!(state(&snapshot_first).contains("Some(\"third\"), Some(\"parsing\")"));
    // A member the snapshot no longer lists has left.
    let mut later = snapshot();
    later.head = 20;
    later.members.clear();
    snapshot_first.apply_rooms(&[later]).unwrap();
    assert!(state(&snapshot_first).contains("(\"p_dana\", false)"));

    // A member known present before the snapshot: a leave older than it, filled later
    // (she left and came back while we were away), does not undo it.
    let (_c, mut cache) = open();
    let member = |seq, action| {
        event(
            "r",
            seq,
            "2026-11-30T09:00:00.000Z",
            "p_dana",
            "member",
            json!({"principal": "p_dana", "action": action, "by": "p_dana"}),
        )
    };
    cache
        .apply("p_dana", "r", &[member(1, "join")], None)
        .unwrap();
    cache.apply_rooms(&[snapshot()]).unwrap();
    cache
        .apply("p_dana", "r", &[member(8, "leave")], None)
        .unwrap();
    assert!(
        state(&cache).contains("(\"p_dana\", true)"),
        "{}",
        state(&cache)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_order_of_application_gives_the_same_projections(
        order in Just((0..16usize).collect::<Vec<_>>()).prop_shuffle(),
        split in 1..15usize,
    ) {
        let events = history();
        let (_a, mut in_order) = open();
        in_order.apply("p_dana", "r", &events, None).unwrap();
        // Shuffled, in two batches (as a replay then a gap fill would).
        let shuffled: Vec<Event> = order.iter().map(|&i| events[i].clone()).collect();
        let (_b, mut shuffled_cache) = open();
        shuffled_cache.apply("p_dana", "r", &shuffled[..split], None).unwrap();
        shuffled_cache.apply("p_dana", "r", &shuffled[split..], None).unwrap();
        prop_assert_eq!(state(&in_order), state(&shuffled_cache));
    }
}

#[test]
fn events_apply_once_and_move_the_cursor_with_them() {
    let (_dir, mut cache) = open();
    let events = history();
    let first = cache.apply("p_dana", "r", &events[..10], Some(10)).unwrap();
    assert_eq!(first.new_events, 10);
    assert_eq!(cache.cursor("r").unwrap(), 10);
    let again = cache.apply("p_dana", "r", &events[..12], None).unwrap();
    assert_eq!(again.new_events, 2);
    assert_eq!(cache.cursor("r").unwrap(), 12);
    // A head past the last visible event (an agent's filtered view) moves the cursor too.
    cache.apply("p_dana", "r", &[], Some(20)).unwrap();
    assert_eq!(cache.cursor("r").unwrap(), 20);
    // Cursors never go back.
    cache.apply("p_dana", "r", &events[..1], Some(3)).unwrap();
    assert_eq!(cache.cursor("r").unwrap(), 20);
}

#[test]
fn gaps_shrink_as_history_fills_them() {
    let (_dir, mut cache) = open();
    cache.add_gap("r", 1, 10).unwrap();
    let events = history();
    cache.fill_gap("p_dana", "r", 1, 4, &events[..4]).unwrap();
    assert_eq!(cache.gaps().unwrap(), vec![("r".to_owned(), 5, 10)]);
    cache
        .fill_gap("p_dana", "r", 5, 10, &events[4..10])
        .unwrap();
    assert!(cache.gaps().unwrap().is_empty());
    assert_eq!(cache.stream_events("r").unwrap().len(), 10);
}

#[test]
fn a_reset_forgets_the_hub_but_keeps_the_outbox() {
    let (_dir, mut cache) = open();
    cache.apply("p_dana", "r", &history(), Some(16)).unwrap();
    let n = cache
        .enqueue(OutboxKind::Send, Some("k-1"), Some("r"), "{}", 1, "o_a")
        .unwrap();
    cache.reset("epoch-2").unwrap();
    assert!(cache.cursors().unwrap().is_empty());
    assert!(
        cache
            .task_sessions(&TaskFilter::default())
            .unwrap()
            .is_empty()
    );
    assert_eq!(cache.meta("epoch").unwrap().as_deref(), Some("epoch-2"));
    assert_eq!(
        cache.outbox_entry(n).unwrap().unwrap().state,
        OutboxState::Queued
    );
}

#[test]
fn an_interrupted_send_is_resent_and_an_interrupted_command_is_not() {
    let (_dir, mut cache) = open();
    let send = cache
        .enqueue(OutboxKind::Send, Some("k-1"), Some("r"), "{}", 1, "o_gone")
        .unwrap();
    let command = cache
        .enqueue(OutboxKind::Command, None, None, "{}", 1, "o_gone")
        .unwrap();
    let queued = cache
        .enqueue(OutboxKind::Send, Some("k-2"), Some("r"), "{}", 1, "o_gone")
        .unwrap();
    assert!(cache.claim(send, "o_gone").unwrap());
    assert!(cache.claim(command, "o_gone").unwrap());
    // Another process sees nothing it may send while the owner lives.
    assert!(cache.next_queued("o_other").unwrap().is_none());
    assert!(!cache.claim(queued, "o_other").unwrap());
    // Still alive: nothing changes.
    cache.recover_outbox(|_| true).unwrap();
    assert_eq!(
        cache.outbox_entry(send).unwrap().unwrap().state,
        OutboxState::Inflight
    );
    // Gone: its send is queued again and anyone's, its command failed.
    cache.recover_outbox(|owner| owner != "o_gone").unwrap();
    let resent = cache.outbox_entry(send).unwrap().unwrap();
    assert_eq!((resent.state, resent.owner), (OutboxState::Queued, None));
    let failed = cache.outbox_entry(command).unwrap().unwrap();
    assert_eq!(failed.state, OutboxState::Failed);
    assert_eq!(failed.error_code.as_deref(), Some("interrupted"));
    assert_eq!(cache.outbox_entry(queued).unwrap().unwrap().owner, None);
    assert!(cache.retry(command, "o_other").unwrap());
    assert_eq!(cache.next_queued("o_other").unwrap().unwrap().n, send);
    // A claim is taken once.
    assert!(cache.claim(send, "o_other").unwrap());
    assert!(!cache.claim(send, "o_third").unwrap());
}

#[test]
fn a_dropped_connection_releases_what_this_process_had_in_flight() {
    let (_dir, mut cache) = open();
    let send = cache
        .enqueue(OutboxKind::Send, Some("k-1"), Some("r"), "{}", 1, "o_me")
        .unwrap();
    let command = cache
        .enqueue(OutboxKind::Command, None, None, "{}", 1, "o_me")
        .unwrap();
    let theirs = cache
        .enqueue(OutboxKind::Command, None, None, "{}", 1, "o_them")
        .unwrap();
    for (n, owner) in [(send, "o_me"), (command, "o_me"), (theirs, "o_them")] {
        assert!(cache.claim(n, owner).unwrap());
    }
    assert_eq!(cache.release_inflight("o_me").unwrap(), (1, vec![command]));
    assert_eq!(
        cache.outbox_entry(send).unwrap().unwrap().state,
        OutboxState::Queued
    );
    assert_eq!(
        cache.outbox_entry(command).unwrap().unwrap().state,
        OutboxState::Failed
    );
    assert_eq!(
        cache.outbox_entry(theirs).unwrap().unwrap().state,
        OutboxState::Inflight
    );
    // A command nobody sent can be withdrawn; one in flight cannot.
    let waiting = cache
        .enqueue(OutboxKind::Command, None, None, "{}", 1, "o_me")
        .unwrap();
    assert!(cache.cancel_queued(waiting).unwrap());
    assert_eq!(
        cache
            .outbox_entry(waiting)
            .unwrap()
            .unwrap()
            .error_code
            .as_deref(),
        Some("cancelled")
    );
    assert!(!cache.cancel_queued(theirs).unwrap());
    // A finished entry keeps its reply a while for a late waiter, then goes.
    assert!(cache.claim(send, "o_me").unwrap());
    cache.mark_done(send, r#"{"t":"ok"}"#, 100).unwrap();
    cache.forget_done_before(100).unwrap();
    assert_eq!(
        cache.outbox_entry(send).unwrap().unwrap().reply.as_deref(),
        Some(r#"{"t":"ok"}"#)
    );
    assert!(
        cache
            .outbox_pending()
            .unwrap()
            .iter()
            .all(|entry| entry.n != send)
    );
    cache.forget_done_before(101).unwrap();
    assert!(cache.outbox_entry(send).unwrap().is_none());
}

#[test]
fn a_cache_from_the_first_schema_upgrades_with_its_outbox_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.sqlite3");
    {
        let mut conn = Connection::open(&path).unwrap();
        roundtable_sqlite::migrate(&mut conn, &MIGRATIONS[..1], 0).unwrap();
        conn.execute(
            "INSERT INTO outbox (client_key, kind, room, frame, state, created_ms)
             VALUES ('k-old', 'send', 'r', '{}', 'queued', 1)",
            [],
        )
        .unwrap();
    }
    let cache = Cache::open(&path, 0).unwrap();
    let entry = cache.next_queued("o_new").unwrap().unwrap();
    assert_eq!(
        (entry.client_key.as_deref(), entry.owner),
        (Some("k-old"), None)
    );
}

/// Every row of each projection table, keyed by what a change names (its room, or its
/// room and ping), so a test can see which projections an event touched.
fn projection_rows(cache: &Cache) -> Vec<(&'static str, String, String)> {
    const TABLES: &[(&str, &str)] = &[
        ("rooms", "id"),
        ("members", "room"),
        ("mentions", "room"),
        ("tasks", "room"),
        ("task_states", "room"),
        ("components", "room"),
        ("component_agents", "room"),
        ("usage", "room"),
        ("pings", "room || '/' || ping"),
        ("agent_status", "room"),
        ("requests", "''"),
        ("contacts", "''"),
        ("controls", "''"),
    ];
    let mut rows = Vec::new();
    for (table, key) in TABLES {
        let mut statement = cache
            .conn
            .prepare(&format!("SELECT {key}, * FROM {table}"))
            .unwrap();
        let width = statement.column_count();
        let found: Vec<(String, String)> = statement
            .query_map([], |row| {
                let key: String = row.get(0)?;
                let mut values = Vec::new();
                for i in 1..width {
                    values.push(format!("{:?}", row.get_ref(i)?));
                }
                Ok((key, values.join("|")))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        rows.extend(found.into_iter().map(|(key, row)| (*table, key, row)));
    }
    rows
}

/// The change that names a touched row of `table` under `key`.
fn change_for(table: &str, key: &str) -> Change {
    let room = key.to_owned();
    match table {
        "rooms" => Change::Room { room },
        "members" => Change::Members { room },
        "mentions" => Change::Messages { room },
        "tasks" | "task_states" => Change::Tasks { room },
        "components" | "component_agents" => Change::Components { room },
        "usage" => Change::Usage { room },
        "pings" => {
            let (room, ping) = key.split_once('/').unwrap();
            Change::Ping {
                room: room.to_owned(),
                ping: ping.to_owned(),
            }
        }
        "agent_status" => Change::Status { room },
        "requests" | "contacts" => Change::Contacts,
        "controls" => Change::Controls,
        other => panic!("no change for table {other}"),
    }
}

/// One event of any kind the projections know, in room `r1` or `r2` or the inbox.
fn any_event() -> impl Strategy<Value = Event> {
    let room = prop_oneof![Just("r1"), Just("r2")];
    let who = prop_oneof![Just("p_dana"), Just("p_agent"), Just("p_sam")];
    let status = prop_oneof![
        Just("pending"),
        Just("in_progress"),
        Just("completed"),
        Just("deleted")
    ];
    let part = prop_oneof![Just("parser"), Just("lexer")];
    let ping = prop_oneof![Just("q1"), Just("q2")];
    (
        0..14u8,
        room,
        who,
        1..40u64,
        0..30u32,
        status,
        part,
        ping,
    )
        .prop_map(|(kind, room, who, seq, minute, status, part, ping)| {
            let ts = format!("2026-11-30T09:{minute:02}:00.000Z");
            let room_event = |kind: &str, body: Value| event(room, seq, &ts, who, kind, body);
            let inbox_event = |kind: &str, body: Value| Event {
                room: None,
                stream: Some("inbox".into()),
                ..event(room, seq, &ts, who, kind, body)
            };
            match kind {
                0 => room_event("room", json!({"title": format!("t{seq}")})),
                1 => room_event(
                    "member",
                    json!({"principal": who, "action": if seq % 2 == 0 { "join" } else { "leave" }, "by": "p_dana"}),
                ),
                2 => room_event("message", json!({"text": "hi", "mentions": [who]})),
                3 => room_event("message", json!({"text": "plain"})),
                4 => room_event(
                    "tasks",
                    json!({"session": session("s1"), "source": "TodoWrite",
                           "tasks": [{"title": "a", "status": status}, {"id": "7", "title": "b", "status": "pending"}]}),
                ),
                5 => room_event(
                    "arch",
                    json!({"define": [{"id": part, "name": part, "paths": ["src/**"], "depends_on": []}]}),
                ),
                6 => room_event(
                    "arch",
                    json!({"component": part, "status": "working", "files": ["src/a.rs"]}),
                ),
                7 => room_event(
                    "usage",
                    json!({"session": session("s1"), "model": "m", "input": seq, "output": 1, "cache_write": 0,
                           "cache_read": 0, "from": ts, "to": ts}),
                ),
                8 => room_event("status", json!({"state": "working"})),
                9 => room_event("ping", json!({"ping": ping, "question": "ok?"})),
                10 => room_event("answer", json!({"ping": ping, "choice": "yes"})),
                11 => inbox_event(
                    if seq % 2 == 0 { "room_added" } else { "room_removed" },
                    json!({"room": room, "by": "p_dana"}),
                ),
                12 => inbox_event(
                    "contact",
                    json!({"request": format!("c{}", seq % 3), "from": "p_dana", "to": who,
                           "state": if seq % 2 == 0 { "accepted" } else { "pending" }}),
                ),
                _ => inbox_event(
                    "control",
                    json!({"action": if seq % 2 == 0 { "pause" } else { "resume" }, "by": "p_dana"}),
                ),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn typed_changes_name_every_projection_an_event_touched(
        events in proptest::collection::vec(any_event(), 1..40),
    ) {
        let (_dir, mut cache) = open();
        for event in events {
            let before: std::collections::BTreeSet<_> = projection_rows(&cache).into_iter().collect();
            let stream = event.stream_name().to_owned();
            let applied = cache.apply("p_dana", &stream, std::slice::from_ref(&event), None).unwrap();
            let after: std::collections::BTreeSet<_> = projection_rows(&cache).into_iter().collect();
            let touched: std::collections::BTreeSet<(&str, String)> = before
                .symmetric_difference(&after)
                .map(|(table, key, _)| (*table, key.clone()))
                .collect();
            for (table, key) in touched {
                let expected = change_for(table, &key);
                let named = applied.changes.contains(&expected)
                    || (table == "rooms" && applied.changes.contains(&Change::Rooms));
                prop_assert!(named, "{} touched {table} ({key}) but the changes were {:?}",
                    event.kind, applied.changes);
            }
            if event.kind == "message" {
                let messages = Change::Messages { room: stream.clone() };
                prop_assert!(applied.changes.contains(&messages));
            }
        }
    }
}

#[test]
fn a_mention_of_us_is_a_change_of_its_own() {
    let (_dir, mut cache) = open();
    let mention = event(
        "r",
        3,
        "2026-11-30T09:00:00.000Z",
        "p_sam",
        "message",
        json!({"text": "@dana hi", "mentions": ["p_dana"]}),
    );
    let applied = cache.apply("p_dana", "r", &[mention], None).unwrap();
    assert!(applied.changes.contains(&Change::Mentioned {
        room: "r".into(),
        seq: 3
    }));
    // Our own mention of someone else is not.
    let own = event(
        "r",
        4,
        "2026-11-30T09:00:00.000Z",
        "p_dana",
        "message",
        json!({"text": "@sam hi", "mentions": ["p_sam"]}),
    );
    let applied = cache.apply("p_dana", "r", &[own], None).unwrap();
    assert!(
        !applied
            .changes
            .iter()
            .any(|change| matches!(change, Change::Mentioned { .. }))
    );
}

#[test]
fn tasks_remember_when_they_changed_state() {
    let (_dir, mut cache) = open();
    let snapshot = |seq: u64, minute: u32, first: &str| {
        event(
            "r",
            seq,
            &format!("2026-11-30T09:{minute:02}:00.000Z"),
            "p_agent",
            "tasks",
            json!({"session": session("s1"), "source": "TodoWrite",
                   "tasks": [{"title": "parse", "status": first}, {"id": "t2", "title": "test", "status": "pending"}]}),
        )
    };
    // Applied out of order, as gap filling would.
    cache
        .apply(
            "p_dana",
            "r",
            &[
                snapshot(3, 20, "completed"),
                snapshot(1, 0, "pending"),
                snapshot(2, 10, "in_progress"),
            ],
            None,
        )
        .unwrap();
    let sessions = cache.task_sessions(&TaskFilter::default()).unwrap();
    let parse = &sessions[0].tasks[0];
    assert_eq!(parse.status.as_str(), "completed");
    let minute = |m: i64| 1_796_029_200_000 + m * 60_000;
    assert_eq!(parse.since_ms, minute(20));
    assert_eq!(
        parse
            .history
            .iter()
            .map(|change| (change.status.as_str(), change.ts_ms))
            .collect::<Vec<_>>(),
        vec![
            ("pending", minute(0)),
            ("in_progress", minute(10)),
            ("completed", minute(20))
        ]
    );
    let test = &sessions[0].tasks[1];
    assert_eq!((test.id.as_deref(), test.since_ms), (Some("t2"), minute(0)));
    // Filters narrow by room, agent and session.
    let filter = TaskFilter {
        room: Some("elsewhere".into()),
        ..TaskFilter::default()
    };
    assert!(cache.task_sessions(&filter).unwrap().is_empty());
    let filter = TaskFilter {
        agent: Some("p_agent".into()),
        session_id: Some("s1".into()),
        ..TaskFilter::default()
    };
    assert_eq!(cache.task_sessions(&filter).unwrap().len(), 1);
}

#[test]
fn every_projection_reads_back_with_every_field() {
    let (_dir, mut cache) = open();
    cache.apply("p_dana", "r", &history(), None).unwrap();
    // A later ping with recipients and an expiry, and a second agent on the component.
    let t = "2026-11-30T10:00:00.000Z";
    cache
        .apply(
            "p_dana",
            "r",
            &[
                event(
                    "r",
                    17,
                    t,
                    "p_agent",
                    "ping",
                    json!({"ping": "late", "question": "ship?", "to": ["p_dana"], "expires_at": "2026-11-30T11:00:00Z"}),
                ),
                event(
                    "r",
                    18,
                    t,
                    "p_sam",
                    "arch",
                    json!({"component": "parser", "status": "working", "files": ["src/lex.rs"]}),
                ),
                event(
                    "r",
                    19,
                    t,
                    "p_sam",
                    "message",
                    json!({"text": "see above", "mentions": ["p_dana"], "reply_to": "e3"}),
                ),
            ],
            None,
        )
        .unwrap();
    let ten = 1_796_032_800_000;
    let late = cache.ping("r", "late", ten).unwrap().unwrap();
    assert_eq!(late.recipients, vec!["p_dana".to_owned()]);
    assert_eq!(late.expires_ms, Some(ten + 3_600_000));
    assert_eq!(late.state, PingState::Open);
    assert_eq!(late.asked_ms, Some(ten));
    assert_eq!(
        cache
            .ping("r", "late", ten + 3_600_000)
            .unwrap()
            .unwrap()
            .state,
        PingState::Expired
    );
    let open_for_dana = cache.open_pings_for("p_dana", true, ten).unwrap();
    assert_eq!(
        open_for_dana
            .iter()
            .map(|p| p.ping.as_str())
            .collect::<Vec<_>>(),
        vec!["late"]
    );
    assert!(cache.open_pings_for("p_sam", true, ten).unwrap().is_empty());
    let answered = cache.ping("r", "q", ten).unwrap().unwrap();
    assert_eq!(
        (
            answered.state,
            answered.answered_by.as_deref(),
            answered.answered_ms
        ),
        (PingState::Answered, Some("p_dana"), Some(1_796_029_560_000))
    );

    let parser = cache.components("r").unwrap().remove(0);
    assert_eq!(parser.depends_on, Vec::<String>::new());
    assert_eq!(parser.working, vec!["p_sam".to_owned()]);
    assert_eq!(parser.agents.len(), 2);
    assert_eq!(parser.files, vec!["src/lex.rs".to_owned()]);

    let messages = cache.messages("r", 0, 10).unwrap();
    let last = messages.last().unwrap();
    assert_eq!(
        (
            last.id.as_deref(),
            last.reply_to.as_deref(),
            last.mentions.clone()
        ),
        (Some("e19"), Some("e3"), vec!["p_dana".to_owned()])
    );
    assert_eq!(last.delivery, Delivery::Stored);

    let by_day = cache
        .usage(&UsageQuery {
            group_by: vec![UsageKey::Day, UsageKey::Session],
            ..UsageQuery::default()
        })
        .unwrap();
    assert_eq!(by_day.len(), 1);
    assert_eq!(by_day[0].group[&UsageKey::Day], "2026-11-30");
    assert_eq!(by_day[0].group[&UsageKey::Session], "claude-code:s1");
    assert_eq!((by_day[0].entries, by_day[0].unpriced), (2, 1));
    let later = cache
        .usage(&UsageQuery {
            since_ms: Some(ten),
            ..UsageQuery::default()
        })
        .unwrap();
    assert!(later.is_empty(), "{later:?}");
}

#[test]
fn read_markers_move_forward_and_count_unread_messages() {
    let (_dir, mut cache) = open();
    cache.set_meta("principal", "p_dana").unwrap();
    cache.apply("p_dana", "r", &history(), Some(16)).unwrap();
    cache
        .apply(
            "p_dana",
            "inbox",
            &[Event {
                room: None,
                stream: Some("inbox".into()),
                ..event(
                    "r",
                    1,
                    "2026-11-30T09:00:00.000Z",
                    "p_dana",
                    "room_added",
                    json!({"room": "r", "by": "p_dana"}),
                )
            }],
            None,
        )
        .unwrap();
    let message = |seq: u64, from: &str, body: Value| {
        event("r", seq, "2026-11-30T10:00:00.000Z", from, "message", body)
    };
    cache
        .apply(
            "p_dana",
            "r",
            &[
                message(17, "p_sam", json!({"text": "one"})),
                message(
                    18,
                    "p_sam",
                    json!({"text": "@dana two", "mentions": ["p_dana"]}),
                ),
                message(19, "p_dana", json!({"text": "mine"})),
            ],
            None,
        )
        .unwrap();
    let room = |cache: &Cache| cache.rooms().unwrap().remove(0);
    assert_eq!((room(&cache).unread, room(&cache).unread_mentions), (2, 1));
    assert!(cache.mark_read("r", 17).unwrap());
    assert!(!cache.mark_read("r", 10).unwrap(), "never back");
    assert_eq!((room(&cache).unread, room(&cache).read_to), (1, 17));
    assert_eq!(
        cache.unsent_read_markers().unwrap(),
        vec![("r".to_owned(), 17)]
    );
    // The hub has it; another device read further.
    cache.read_markers_sent(&[("r".to_owned(), 17)]).unwrap();
    assert!(cache.unsent_read_markers().unwrap().is_empty());
    let moved = cache
        .merge_read_markers(&[("r".to_owned(), 19)].into_iter().collect())
        .unwrap();
    assert_eq!(moved, vec!["r".to_owned()]);
    assert_eq!((room(&cache).unread, room(&cache).read_to), (0, 19));
    // An older marker from the hub changes nothing.
    assert!(
        cache
            .merge_read_markers(&[("r".to_owned(), 5)].into_iter().collect())
            .unwrap()
            .is_empty()
    );
    // A message filled in later below the marker counts as read; one above it, unread.
    assert!(cache.mark_read("r", 22).unwrap());
    cache
        .apply(
            "p_dana",
            "r",
            &[
                message(21, "p_sam", json!({"text": "late, old"})),
                message(23, "p_sam", json!({"text": "new", "mentions": ["p_dana"]})),
            ],
            None,
        )
        .unwrap();
    assert_eq!((room(&cache).unread, room(&cache).unread_mentions), (1, 1));
    cache.mark_read("r", 23).unwrap();
    assert_eq!((room(&cache).unread, room(&cache).unread_mentions), (0, 0));
    // Unread messages for dana: the mention only (three members in the room), or
    // everything for an agent's own view.
    cache.conn.execute("DELETE FROM read_markers", []).unwrap();
    let for_dana = cache.unread_messages_for("p_dana", false, 10).unwrap();
    assert_eq!(
        for_dana.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
        vec!["@dana two", "new"]
    );
    let everything = cache.unread_messages_for("p_dana", true, 10).unwrap();
    assert_eq!(everything.len(), 4);
}

#[test]
fn a_client_key_is_held_once_queued_and_once_stored_in_its_room() {
    let (_dir, mut cache) = open();
    assert!(!cache.holds_client_key("r", "k-queued").unwrap());
    cache
        .enqueue(
            OutboxKind::Send,
            Some("k-queued"),
            Some("r"),
            "{}",
            1,
            "o_a",
        )
        .unwrap();
    assert!(cache.holds_client_key("r", "k-queued").unwrap());
    let mut stored = event(
        "r",
        1,
        "2026-12-06T10:00:00Z",
        "p_a",
        "message",
        json!({"text": "hi"}),
    );
    stored.client_key = Some("k-stored".into());
    cache.apply("p_a", "r", &[stored], None).unwrap();
    assert!(cache.holds_client_key("r", "k-stored").unwrap());
    assert!(!cache.holds_client_key("elsewhere", "k-stored").unwrap());
    assert!(!cache.holds_client_key("r", "k-other").unwrap());
}

#[test]
fn a_client_key_is_queued_once_and_secrets_stay_out_of_the_cache() {
    let (dir, mut cache) = open();
    let first = cache
        .enqueue(
            OutboxKind::Send,
            Some("k-stable-1"),
            Some("r"),
            "{}",
            1,
            "o_a",
        )
        .unwrap();
    let again = cache
        .enqueue(
            OutboxKind::Send,
            Some("k-stable-1"),
            Some("r"),
            "{}",
            2,
            "o_b",
        )
        .unwrap();
    assert_eq!(first, again);
    assert_eq!(cache.outbox_pending().unwrap().len(), 1);
    let reply = r#"{"t":"ok","re":3,"agent":{"id":"p_a"},"token":"rt_secret_secret"}"#;
    let kept = without_secrets(reply);
    assert!(!kept.contains("rt_secret"), "{kept}");
    assert!(kept.contains("p_a"));
    // Its files are its owner's alone. (Wine answers its own default access list whatever
    // was set: only Windows itself can be asked.)
    if !roundtable_platform::wine::is_wine() {
        for file in ["cache.sqlite3", "cache.sqlite3-wal", "cache.sqlite3-shm"] {
            let path = dir.path().join(file);
            assert!(
                roundtable_platform::private::is_owner_only(&path).unwrap(),
                "{file}"
            );
        }
    }
}

/// A publisher for the cache's tests: publishes the sessions it is told, one `usage` event
/// per delta, and records what it was asked.
#[derive(Default)]
struct Recorder {
    claimed: Vec<String>,
    /// (first publication?, session, usage deltas' input tokens)
    calls: Vec<(bool, String, Vec<u64>)>,
}

impl crate::cache::Publishing for Recorder {
    fn price(
        &self,
        _: &str,
        tokens: &crate::log_events::TokenCounts,
        _: &crate::log_events::Billing,
    ) -> Option<f64> {
        Some(tokens.input as f64 / 1e6)
    }

    fn publishes(&self, _: crate::log_events::Framework, session_id: &str) -> bool {
        self.claimed.iter().any(|claimed| claimed == session_id)
    }

    fn publications(
        &mut self,
        read: Option<crate::cache::ReadSpan<'_>>,
        changes: &crate::cache::LocalChanges,
    ) -> Vec<crate::cache::Publication> {
        let session = changes.session_ids()[0].1.clone();
        let inputs: Vec<u64> = changes.usage.iter().map(|d| d.tokens.input).collect();
        self.calls
            .push((read.is_none(), session.clone(), inputs.clone()));
        inputs
            .iter()
            .enumerate()
            .map(|(i, input)| crate::cache::Publication {
                room: "r_home".into(),
                client_key: format!("k-{session}-{}-{i}-{input}", self.calls.len()),
                kind: "usage".into(),
                body: json!({"input": input}),
            })
            .collect()
    }
}

#[test]
fn a_session_claimed_late_is_published_whole_once_then_read_by_read() {
    use crate::log_events::{Framework, LogEvent, RequestKey, TokenCounts};
    let (_dir, mut cache) = open();
    let usage = |offset: u64, message: &str, input: u64| {
        (
            offset,
            LogEvent::Usage {
                session_id: "s1".into(),
                key: Some(RequestKey {
                    message_id: message.into(),
                    request_id: Some("q".into()),
                }),
                sidechain: false,
                model: "claude-sonnet-4-5".into(),
                tokens: TokenCounts {
                    input,
                    ..TokenCounts::default()
                },
                billing: Default::default(),
                at_ms: Some(offset as i64),
            },
        )
    };
    let read = |from: u64, to: u64, events: Vec<(u64, LogEvent)>| LogRead {
        framework: Framework::ClaudeCode,
        state: LogFileState {
            path: "/s1.jsonl".into(),
            kind: "claude_transcript".into(),
            device: 1,
            inode: 7,
            size: to,
            offset: to,
            parser: None,
            skipped: 0,
        },
        events,
        from,
        based_on: (from > 0).then_some(FilePosition {
            device: 1,
            inode: 7,
            offset: from,
        }),
    };
    let mut publisher = Recorder::default();
    // Read before anyone claimed it: kept, not published.
    cache
        .apply_log_reads(
            &[read(0, 10, vec![usage(0, "m1", 100), usage(5, "m2", 20)])],
            1,
            "o_a",
            &mut publisher,
        )
        .unwrap();
    assert!(publisher.calls.is_empty());
    assert_eq!(cache.publish_claimed(2, "o_a", &mut publisher).unwrap(), 0);
    // Claimed: everything read so far goes at once, once.
    publisher.claimed.push("s1".into());
    assert_eq!(cache.publish_claimed(3, "o_a", &mut publisher).unwrap(), 1);
    assert_eq!(cache.publish_claimed(4, "o_a", &mut publisher).unwrap(), 0);
    assert_eq!(publisher.calls, [(true, "s1".to_owned(), vec![120])]);
    // Then what each read adds.
    cache
        .apply_log_reads(
            &[read(10, 20, vec![usage(12, "m3", 7)])],
            5,
            "o_a",
            &mut publisher,
        )
        .unwrap();
    assert_eq!(publisher.calls[1], (false, "s1".to_owned(), vec![7]));
    let queued: Vec<Option<String>> = cache
        .outbox_pending()
        .unwrap()
        .into_iter()
        .map(|entry| entry.client_key)
        .collect();
    assert_eq!(queued.len(), 2, "{queued:?}");

    // A session first read after its claim is published from its first read, whole.
    let mut fresh = Recorder {
        claimed: vec!["s2".into()],
        ..Recorder::default()
    };
    let mut first = read(0, 10, vec![usage(0, "n1", 3)]);
    first.state.path = "/s2.jsonl".into();
    if let LogEvent::Usage { session_id, .. } = &mut first.events[0].1 {
        *session_id = "s2".into();
    }
    cache
        .apply_log_reads(&[first], 6, "o_a", &mut fresh)
        .unwrap();
    assert_eq!(fresh.calls, [(true, "s2".to_owned(), vec![3])]);
}

#[test]
fn log_reads_apply_in_one_batch_and_a_read_from_a_stale_position_is_left_out() {
    use crate::log_events::{Framework, LogEvent};
    let (_dir, mut cache) = open();
    let read = |path: &str, from: u64, to: u64, based_on: Option<FilePosition>| LogRead {
        framework: Framework::ClaudeCode,
        state: LogFileState {
            path: path.into(),
            kind: "claude_transcript".into(),
            device: 1,
            inode: 7,
            size: to,
            offset: to,
            parser: None,
            skipped: 0,
        },
        events: vec![(
            from,
            LogEvent::Session {
                session_id: format!("s-{path}"),
                cwd: Some("/work/lexer".into()),
                model: None,
                at_ms: Some(1),
            },
        )],
        from,
        based_on,
    };
    let at = |offset| {
        Some(FilePosition {
            device: 1,
            inode: 7,
            offset,
        })
    };
    let mut nobody = Recorder::default();
    let applied = cache
        .apply_log_reads(
            &[
                read("/a.jsonl", 0, 100, None),
                read("/b.jsonl", 0, 50, None),
            ],
            10,
            "o_a",
            &mut nobody,
        )
        .unwrap();
    assert!(applied.iter().all(Option::is_some));
    assert_eq!(cache.log_files().unwrap().len(), 2);
    // Nobody claimed these sessions: nothing is published.
    assert!(nobody.calls.is_empty());

    // Another watcher went on with /a.jsonl: a read based on where it was is left out.
    let applied = cache
        .apply_log_reads(
            &[
                read("/a.jsonl", 100, 160, at(100)),
                read("/a.jsonl", 100, 170, at(100)),
                read("/b.jsonl", 0, 60, None),
            ],
            20,
            "o_a",
            &mut nobody,
        )
        .unwrap();
    assert!(applied[0].is_some());
    assert_eq!(applied[1], None);
    assert_eq!(applied[2], None);
    assert_eq!(cache.log_file("/a.jsonl").unwrap().unwrap().offset, 160);
    assert_eq!(cache.log_file("/b.jsonl").unwrap().unwrap().offset, 50);
}

#[test]
fn the_digest_begins_where_the_person_last_looked_and_the_boards_read_their_rows() {
    use crate::work::digest::digest;
    let (_dir, mut cache) = open();
    cache.set_meta("principal", "p_dana").unwrap();
    cache.apply("p_dana", "r", &history(), Some(16)).unwrap();
    cache
        .apply(
            "p_dana",
            "inbox",
            &[Event {
                room: None,
                stream: Some("inbox".into()),
                ..event(
                    "r",
                    1,
                    "2026-11-30T09:00:00.000Z",
                    "p_dana",
                    "room_added",
                    json!({"room": "r", "by": "p_dana"}),
                )
            }],
            None,
        )
        .unwrap();
    let at = |time: &str| format!("2026-11-30T{time}:00.000Z");
    let ms = |time: &str| roundtable_protocol::ts::parse_millis(&at(time)).unwrap();
    let tasks = |seq: u64, time: &str, lint: &str| {
        event(
            "r",
            seq,
            &at(time),
            "p_agent",
            "tasks",
            json!({"session": session("s2"), "source": "TodoWrite", "tasks": [
                {"title": "parse", "status": "completed"}, {"title": "lint", "status": lint}]}),
        )
    };
    cache
        .apply(
            "p_dana",
            "r",
            &[
                event(
                    "r",
                    17,
                    &at("10:00"),
                    "p_sam",
                    "message",
                    json!({"text": "read"}),
                ),
                tasks(18, "10:10", "pending"),
                event(
                    "r",
                    19,
                    &at("10:20"),
                    "p_sam",
                    "message",
                    json!({"text": "seen"}),
                ),
                event(
                    "r",
                    20,
                    &at("11:00"),
                    "p_sam",
                    "message",
                    json!({"text": "@dana new", "mentions": ["p_dana"]}),
                ),
                tasks(21, "11:05", "completed"),
            ],
            None,
        )
        .unwrap();
    cache.mark_read("r", 17).unwrap();
    let completed = |digest: &crate::work::digest::RoomDigest| -> Vec<String> {
        digest
            .tasks_completed
            .iter()
            .map(|task| task.title.clone())
            .collect()
    };
    // From the read marker: both messages after it, both completions after it.
    let from_marker = digest(&cache, "p_dana", true, ms("12:00"), None).unwrap();
    assert_eq!((from_marker[0].messages, from_marker[0].mentions), (2, 1));
    assert_eq!(completed(&from_marker[0]), ["lint", "parse"]);
    // Who wrote them, counted over the same messages.
    let writers = |digest: &crate::work::digest::RoomDigest| -> Vec<(String, u64)> {
        digest
            .writers
            .iter()
            .map(|writer| (writer.author.clone(), writer.messages))
            .collect()
    };
    let sam = cache
        .handle_of("p_sam")
        .unwrap()
        .unwrap_or_else(|| "p_sam".into());
    assert_eq!(writers(&from_marker[0]), [(sam.clone(), 2)]);
    // Looked at 10:30: only what came after.
    let from_look = digest(&cache, "p_dana", true, ms("12:00"), Some(ms("10:30"))).unwrap();
    assert_eq!((from_look[0].messages, from_look[0].mentions), (1, 1));
    assert_eq!(writers(&from_look[0]), [(sam, 1)]);
    assert_eq!(completed(&from_look[0]), ["lint"]);
    assert_eq!(from_look[0].since_ms, ms("10:30"));
    // Looked before the marker: the marker wins.
    let earlier = digest(&cache, "p_dana", true, ms("12:00"), Some(ms("09:00"))).unwrap();
    assert_eq!(earlier, from_marker);
    // Looked after everything: nothing to say.
    assert!(
        digest(&cache, "p_dana", true, ms("12:00"), Some(ms("11:30")))
            .unwrap()
            .iter()
            .all(|room| room.messages == 0 && room.tasks_completed.is_empty())
    );

    // The rows the boards read.
    let counts = cache.message_counts_since(ms("10:15")).unwrap();
    assert_eq!(
        counts
            .iter()
            .map(|c| (c.sender.as_str(), c.count, c.last_ms))
            .collect::<Vec<_>>(),
        [("p_sam", 2, ms("11:00"))]
    );
    let usage = cache.usage_sessions().unwrap();
    assert_eq!(
        usage
            .iter()
            .map(|u| (u.agent.as_str(), u.session_id.as_str(), u.room.as_str()))
            .collect::<Vec<_>>(),
        [("p_agent", "s1", "r")]
    );
    let arch = cache.arch_events("r").unwrap();
    assert_eq!(arch.iter().map(|a| a.seq).collect::<Vec<_>>(), [4, 5, 13]);
    assert!(arch[1].body.contains("working") && arch[2].body.contains("shipped"));
    assert_eq!(arch[0].sender, "p_agent");
}

#[test]
fn work_reported_by_anyone_but_the_agent_or_its_owner_stays_off_the_boards() {
    let (_dir, mut cache) = open();
    let principal = |id: &str, kind: &str, handle: &str, owner: Option<&str>| PrincipalRow {
        id: id.into(),
        kind: kind.into(),
        handle: handle.into(),
        name: handle.into(),
        owner: owner.map(str::to_owned),
    };
    cache
        .remember_principals([
            principal("p_dana", "user", "dana", None),
            principal("p_sam", "user", "sam", None),
            // Known with its owner, and known only by its handle (a room member).
            principal("p_agent", "agent", "dana/writer", Some("p_dana")),
            principal("p_helper", "agent", "dana/helper", None),
            principal("p_samsbot", "agent", "sam/bot", None),
        ])
        .unwrap();
    let t = |minute: u32| format!("2026-11-30T09:{minute:02}:00.000Z");
    let usage = |agent: &str| {
        json!({"session": {"agent": agent, "framework": "claude-code", "session_id": "s1"},
               "model": "m", "input": 10, "output": 1, "cache_write": 0, "cache_read": 0,
               "cost_usd": 1.0, "from": t(0), "to": t(1)})
    };
    let cases = [
        ("p_sam", "p_agent", false),
        ("p_samsbot", "p_agent", false),
        ("p_sam", "p_helper", false),
        ("p_sam", "p_dana", false),
        ("p_agent", "p_agent", true),
        ("p_dana", "p_agent", true),
        ("p_dana", "p_helper", true),
        ("p_sam", "p_samsbot", true),
        // Not known here: the hub's word stands.
        ("p_sam", "p_unknown", true),
    ];
    for (n, (from, agent, _)) in cases.iter().enumerate() {
        let seq = n as u64 + 1;
        cache
            .apply(
                "p_dana",
                "r",
                &[event("r", seq, &t(2), from, "usage", usage(agent))],
                None,
            )
            .unwrap();
        let tasks = json!({"session": {"agent": agent, "framework": "claude-code", "session_id": format!("s{seq}")},
                           "source": "TodoWrite", "tasks": [{"title": "x", "status": "pending"}]});
        cache
            .apply(
                "p_dana",
                "r",
                &[event("r", seq + 100, &t(2), from, "tasks", tasks)],
                None,
            )
            .unwrap();
        let status = json!({"component": format!("c{seq}"), "status": "working", "agent": agent});
        cache
            .apply(
                "p_dana",
                "r",
                &[event("r", seq + 200, &t(2), from, "arch", status)],
                None,
            )
            .unwrap();
    }
    let count = |sql: &str, seq: i64| -> i64 {
        cache.conn.query_row(sql, [seq], |row| row.get(0)).unwrap()
    };
    for (n, (from, agent, projected)) in cases.iter().enumerate() {
        let seq = n as i64 + 1;
        let expected = i64::from(*projected);
        assert_eq!(
            count("SELECT count(*) FROM usage WHERE seq = ?1", seq),
            expected,
            "usage of {agent} by {from}"
        );
        assert_eq!(
            count("SELECT count(*) FROM tasks WHERE seq = ?1", seq + 100),
            expected,
            "tasks of {agent} by {from}"
        );
        assert_eq!(
            count(
                "SELECT count(*) FROM component_agents WHERE seq = ?1",
                seq + 200
            ),
            expected,
            "status of {agent} by {from}"
        );
        // The event itself stays in the log, as any event does.
        assert_eq!(count("SELECT count(*) FROM events WHERE seq = ?1", seq), 1);
    }
}

#[test]
fn controls_we_issue_are_kept_until_a_resume_lifts_them() {
    let (_dir, mut cache) = open();
    let actions = |cache: &Cache, agent: &str| -> Vec<(Option<String>, ControlAction)> {
        let issued = cache.issued_controls("p_dana").unwrap();
        issued
            .get(agent)
            .into_iter()
            .flatten()
            .map(|control| (control.room.clone(), control.action))
            .collect()
    };
    cache
        .record_issued_control("p_bot", None, ControlAction::Pause, None, 1)
        .unwrap();
    cache
        .record_issued_control("p_bot", Some("r1"), ControlAction::Stop, None, 2)
        .unwrap();
    cache
        .record_issued_control("p_other", Some("r1"), ControlAction::Pause, None, 3)
        .unwrap();
    assert_eq!(
        actions(&cache, "p_bot"),
        [
            (None, ControlAction::Pause),
            (Some("r1".into()), ControlAction::Stop)
        ]
    );
    // A resume in one room lifts that room's control only; everywhere, every control.
    cache
        .record_issued_control("p_bot", Some("r1"), ControlAction::Resume, None, 4)
        .unwrap();
    assert_eq!(actions(&cache, "p_bot"), [(None, ControlAction::Pause)]);
    cache
        .record_issued_control("p_bot", None, ControlAction::Resume, None, 5)
        .unwrap();
    assert!(actions(&cache, "p_bot").is_empty());
    assert_eq!(
        actions(&cache, "p_other"),
        [(Some("r1".into()), ControlAction::Pause)]
    );
}

#[test]
fn written_components_override_inferred_ones_in_either_order() {
    let defined = |seq: u64, ids: &[&str], source: Option<&str>| {
        let define: Vec<Value> = ids
            .iter()
            .map(
                |id| json!({"id": id, "name": id, "paths": [format!("{id}/**")], "depends_on": []}),
            )
            .collect();
        let mut body = json!({ "define": define });
        if let Some(source) = source {
            body["source"] = json!(source);
        }
        event("r", seq, "2026-11-30T09:00:00.000Z", "p_dana", "arch", body)
    };
    let status = |seq: u64, id: &str| {
        event(
            "r",
            seq,
            "2026-11-30T09:00:00.000Z",
            "p_agent",
            "arch",
            json!({"component": id, "status": "working"}),
        )
    };
    let board = |cache: &Cache| -> Vec<(String, Option<String>)> {
        cache
            .components("r")
            .unwrap()
            .into_iter()
            .map(|component| (component.id, component.source))
            .collect()
    };
    let written = vec![("lexer".to_owned(), None), ("parser".to_owned(), None)];
    // Inferred first, then written: the inferred ones go, shared ids become written.
    let (_dir, mut cache) = open();
    cache
        .apply(
            "p_dana",
            "r",
            &[
                defined(1, &["core", "lexer"], Some("Cargo workspace")),
                status(2, "core"),
            ],
            None,
        )
        .unwrap();
    assert_eq!(
        board(&cache),
        [
            ("core".to_owned(), Some("Cargo workspace".to_owned())),
            ("lexer".to_owned(), Some("Cargo workspace".to_owned()))
        ]
    );
    cache
        .apply(
            "p_dana",
            "r",
            &[defined(3, &["lexer", "parser"], None)],
            None,
        )
        .unwrap();
    assert_eq!(board(&cache), written);
    // A later inferred definition does not come back over written ones.
    cache
        .apply(
            "p_dana",
            "r",
            &[defined(4, &["core"], Some("Cargo workspace"))],
            None,
        )
        .unwrap();
    assert_eq!(board(&cache), written);
    // The same events the other way round (gap filling brings old events late): the same.
    let (_dir, mut cache) = open();
    cache
        .apply(
            "p_dana",
            "r",
            &[
                defined(3, &["lexer", "parser"], None),
                defined(4, &["core"], Some("Cargo workspace")),
            ],
            None,
        )
        .unwrap();
    cache
        .apply(
            "p_dana",
            "r",
            &[
                defined(1, &["core", "lexer"], Some("Cargo workspace")),
                status(2, "core"),
            ],
            None,
        )
        .unwrap();
    let ids: Vec<String> = board(&cache).into_iter().map(|(id, _)| id).collect();
    assert!(
        !ids.contains(&"core".to_owned())
            || cache
                .components("r")
                .unwrap()
                .iter()
                .all(|c| c.source.is_none()),
        "{ids:?}"
    );
    assert_eq!(
        board(&cache)
            .into_iter()
            .filter(|(_, source)| source.is_some())
            .count(),
        0
    );

    // A newer inferred definition replaces an older one (a crate renamed); an older one
    // arriving late changes nothing.
    let (_dir, mut cache) = open();
    cache
        .apply(
            "p_dana",
            "r",
            &[defined(5, &["lexer", "syntax"], Some("Cargo workspace"))],
            None,
        )
        .unwrap();
    cache
        .apply(
            "p_dana",
            "r",
            &[defined(1, &["lexer", "parser"], Some("Cargo workspace"))],
            None,
        )
        .unwrap();
    let ids: Vec<String> = board(&cache).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["lexer", "syntax"]);
    // A written definition keeps the work reported on the inferred components it names,
    // whatever their order in it; a status for a component no one defined shows nothing.
    let (_dir, mut cache) = open();
    cache
        .apply(
            "p_dana",
            "r",
            &[
                defined(1, &["api", "core"], Some("Cargo workspace")),
                status(2, "core"),
            ],
            None,
        )
        .unwrap();
    cache
        .apply(
            "p_dana",
            "r",
            &[defined(3, &["core", "api"], None), status(4, "ghost")],
            None,
        )
        .unwrap();
    let core = cache
        .components("r")
        .unwrap()
        .into_iter()
        .find(|component| component.id == "core")
        .unwrap();
    assert_eq!((core.source, core.agents.len()), (None, 1));
    let ids: Vec<String> = board(&cache).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["api", "core"], "no bare `ghost`");
}

#[test]
fn a_ping_its_asker_withdraws_waits_no_more_and_others_cannot_withdraw_it() {
    let (_dir, mut cache) = open();
    let t = |minute: u32| format!("2026-11-30T09:{minute:02}:00.000Z");
    let ping = |seq, id: &str| {
        event(
            "r",
            seq,
            &t(0),
            "p_agent",
            "ping",
            json!({"ping": id, "question": "ship?", "to": ["p_dana"]}),
        )
    };
    let withdraw = |seq, from: &str, id: &str| {
        event(
            "r",
            seq,
            &t(5),
            from,
            "x-ping-withdrawn",
            json!({"ping": id, "reason": "answered_at_client"}),
        )
    };
    let events = vec![
        ping(1, "a"),
        ping(2, "b"),
        ping(3, "c"),
        event(
            "r",
            4,
            &t(1),
            "p_dana",
            "answer",
            json!({"ping": "c", "choice": "yes"}),
        ),
        withdraw(5, "p_agent", "a"),
        withdraw(6, "p_sam", "b"),
        withdraw(7, "p_agent", "c"),
    ];
    cache.apply("p_dana", "r", &events, None).unwrap();
    let later = roundtable_protocol::ts::parse_millis(&t(30)).unwrap();
    let state = |id: &str| cache.ping("r", id, later).unwrap().unwrap().state;
    assert_eq!(state("a"), PingState::Expired, "withdrawn by its asker");
    assert_eq!(state("b"), PingState::Open, "only the asker withdraws");
    assert_eq!(state("c"), PingState::Answered, "an answer stands");
    let open: Vec<String> = cache
        .open_pings_for("p_dana", true, later)
        .unwrap()
        .into_iter()
        .map(|p| p.ping)
        .collect();
    assert_eq!(open, ["b"]);

    // Gap filling: the withdrawal arrives before its ping; the ping still waits no more.
    cache
        .apply("p_dana", "r", &[withdraw(9, "p_agent", "d")], None)
        .unwrap();
    cache.apply("p_dana", "r", &[ping(8, "d")], None).unwrap();
    assert_eq!(
        cache.ping("r", "d", later).unwrap().unwrap().state,
        PingState::Expired,
        "withdrawn before it arrived"
    );
}

#[test]
fn a_principal_met_by_the_handle_we_asked_for_never_hides_what_the_hub_told() {
    let (_dir, mut cache) = open();
    let row = |id: &str, handle: &str, name: &str| PrincipalRow {
        id: id.into(),
        kind: "agent".into(),
        handle: handle.into(),
        name: name.into(),
        owner: None,
    };
    // Unknown: known by what we asked for.
    cache.meet(row("p_bot", "bob/bot", "bob/bot")).unwrap();
    assert_eq!(
        cache.principal("p_bot").unwrap(),
        Some(row("p_bot", "bob/bot", "bob/bot"))
    );
    // What the hub tells replaces it; meeting them again changes nothing.
    cache
        .remember_principals([row("p_bot", "bob/bot", "Bob's reviewer")])
        .unwrap();
    cache.meet(row("p_bot", "bob/bot", "bob/bot")).unwrap();
    assert_eq!(
        cache.principal("p_bot").unwrap().unwrap().name,
        "Bob's reviewer"
    );
}
