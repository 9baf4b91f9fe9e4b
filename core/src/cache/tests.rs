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
        cache.task_sessions().unwrap(),
        cache.components("r").unwrap(),
        cache.pings().unwrap(),
        cache.agent_statuses().unwrap(),
        cache.usage_totals(0).unwrap()
    )
}

#[test]
fn projections_hold_the_latest_of_everything_and_the_first_answer() {
    let (_dir, mut cache) = open();
    cache.apply("p_dana", "r", &history(), None).unwrap();
    let tasks = cache.task_sessions().unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].tasks[0]["title"], "new");
    let components = cache.components("r").unwrap();
    assert_eq!(components[0].status.as_deref(), Some("done"));
    assert_eq!(components[0].note.as_deref(), Some("shipped"));
    assert_eq!(components[0].name.as_deref(), Some("Parser"));
    let pings = cache.pings().unwrap();
    assert_eq!(pings[0].answered_by.as_deref(), Some("p_dana"));
    assert_eq!(pings[0].choice.as_deref(), Some("yes"));
    assert_eq!(
        cache.agent_statuses().unwrap(),
        vec![("p_agent".into(), "idle".into(), Some("done".into()))]
    );
    let usage = cache.usage_totals(0).unwrap();
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
    assert!(cache.task_sessions().unwrap().is_empty());
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
