//! Sending, idempotency, history, sync and visibility.

use std::collections::BTreeMap;
use std::time::Duration;

use roundtable_protocol::client::*;
use roundtable_protocol::server::{HistoryOk, SendOk};
use roundtable_protocol::{ErrorCode, ServerFrame};
use roundtable_testkit::{TestHub, message};
use serde_json::json;

use crate::support::{agent, invite, login, room, say, seqs, sync};

fn send(id: u64, room: &str, key: &str, kind: &str, body: serde_json::Value) -> ClientFrame {
    ClientFrame::Send(SendCmd {
        id,
        room: room.into(),
        client_key: key.into(),
        kind: kind.into(),
        body,
    })
}

#[tokio::test]
async fn a_message_reaches_every_other_connection_once() {
    let hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let mut dana_phone = login(&hub, &created.token, "phone").await;
    let room_id = room(&mut dana, &[]).await;
    sync(&mut dana, &[]).await;
    sync(&mut dana_phone, &[]).await;

    let sent = say(&mut dana, &room_id, "first-message", "hello").await;
    assert_eq!(sent.seq, 3);
    assert_eq!(sent.client_key.as_deref(), Some("first-message"));
    assert_eq!(sent.room.as_deref(), Some(room_id.as_str()));

    // The writer's other device gets it live, with the key (it is the same sender).
    let live = dana_phone.next_event().await.unwrap();
    assert_eq!(live, sent);
    // The writing connection got it in its ok, not live.
    dana.expect_silence(Duration::from_millis(200))
        .await
        .unwrap();
    dana_phone
        .expect_silence(Duration::from_millis(100))
        .await
        .unwrap();
}

#[tokio::test]
async fn send_errors_come_in_the_protocols_order() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    let room_id = room(&mut dana, &[]).await;
    let cases = [
        (
            send(1, &room_id, "short", "message", json!({"text": "x"})),
            ErrorCode::BadFrame,
        ),
        (
            send(
                2,
                &room_id,
                &"k".repeat(65),
                "message",
                json!({"text": "x"}),
            ),
            ErrorCode::BadFrame,
        ),
        (
            send(3, &room_id, "unknown-kind", "shout", json!({"text": "x"})),
            ErrorCode::BadFrame,
        ),
        (
            send(
                4,
                &room_id,
                "hub-written1",
                "member",
                json!({"principal": "p", "action": "join", "by": "p"}),
            ),
            ErrorCode::BadFrame,
        ),
        (
            send(5, &room_id, "not-object-1", "message", json!("x")),
            ErrorCode::BadFrame,
        ),
        (
            send(6, &room_id, "wrong-shape1", "message", json!({"txt": "x"})),
            ErrorCode::BadFrame,
        ),
        (
            send(
                7,
                &room_id,
                "too-large-01",
                "message",
                json!({"text": "a".repeat(16 * 1024 + 1)}),
            ),
            ErrorCode::TooLarge,
        ),
        (
            send(
                8,
                &room_id,
                "too-large-02",
                "x-blob",
                json!({"blob": "b".repeat(64 * 1024)}),
            ),
            ErrorCode::TooLarge,
        ),
        (
            send(
                9,
                "r_missing",
                "missing-room",
                "message",
                json!({"text": "x"}),
            ),
            ErrorCode::NotFound,
        ),
    ];
    for (frame, code) in cases {
        let id = frame.id();
        assert_eq!(dana.err(frame).await.code, code, "command {id}");
    }
    let refused = sam
        .err(send(
            10,
            &room_id,
            "not-a-member",
            "message",
            json!({"text": "x"}),
        ))
        .await;
    assert_eq!(refused.code, ErrorCode::NotMember);
    // None of it was stored: the room holds its room event and dana's join only.
    let id = dana.id();
    let history: HistoryOk = dana
        .ok(ClientFrame::History(History {
            id,
            room: room_id.clone(),
            before: None,
            after: None,
            limit: None,
        }))
        .await
        .decode()
        .unwrap();
    assert_eq!(history.events.len(), 2);
    // Refused keys stay unused: the same key now succeeds.
    say(&mut dana, &room_id, "too-large-01", "fits").await;
}

#[tokio::test]
async fn a_retried_key_returns_the_original_across_reconnects_and_restarts() {
    let mut hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let other_room = room(&mut dana, &[]).await;
    let original = say(&mut dana, &room_id, "retry-key-01", "once").await;

    let id = dana.id();
    let again: SendOk = dana
        .ok(message(id, &room_id, "retry-key-01", "once"))
        .await
        .decode()
        .unwrap();
    assert!(again.dup);
    assert_eq!(again.event, original);
    // Even with another room and body, the key returns the original event.
    let id = dana.id();
    let other: SendOk = dana
        .ok(message(id, &other_room, "retry-key-01", "changed"))
        .await
        .decode()
        .unwrap();
    assert!(other.dup);
    assert_eq!(other.event, original);

    drop(dana);
    let mut dana = login(&hub, &created.token, "laptop").await;
    let id = dana.id();
    let reconnected: SendOk = dana
        .ok(message(id, &room_id, "retry-key-01", "once"))
        .await
        .decode()
        .unwrap();
    assert!(reconnected.dup);
    assert_eq!(reconnected.event, original);

    hub.restart().await;
    let mut dana = login(&hub, &created.token, "laptop").await;
    let id = dana.id();
    let restarted: SendOk = dana
        .ok(message(id, &room_id, "retry-key-01", "once"))
        .await
        .decode()
        .unwrap();
    assert!(restarted.dup);
    assert_eq!(restarted.event, original);

    // Stored once.
    let id = dana.id();
    let history: HistoryOk = dana
        .ok(ClientFrame::History(History {
            id,
            room: room_id.clone(),
            before: None,
            after: None,
            limit: None,
        }))
        .await
        .decode()
        .unwrap();
    assert_eq!(
        history
            .events
            .iter()
            .filter(|e| e.kind == "message")
            .count(),
        1
    );
    // Another principal may use the same key independently.
    let (mut sam, _) = hub.user("sam").await;
    let sam_room = room(&mut sam, &[]).await;
    say(&mut sam, &sam_room, "retry-key-01", "mine").await;
}

#[tokio::test]
async fn history_pages_and_refuses_outsiders() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    let room_id = room(&mut dana, &[]).await;
    for n in 0..10 {
        say(
            &mut dana,
            &room_id,
            &format!("history-{n:04}"),
            &format!("m{n}"),
        )
        .await;
    }
    let page = |client: &mut roundtable_testkit::Client, before, after, limit| {
        let id = client.id();
        ClientFrame::History(History {
            id,
            room: room_id.clone(),
            before,
            after,
            limit,
        })
    };
    let seq_list = |ok: roundtable_protocol::server::OkReply| {
        ok.decode::<HistoryOk>()
            .unwrap()
            .events
            .iter()
            .map(|e| e.seq)
            .collect::<Vec<_>>()
    };
    let f = page(&mut dana, None, None, Some(3));
    assert_eq!(seq_list(dana.ok(f).await), vec![10, 11, 12]);
    let f = page(&mut dana, Some(10), None, Some(3));
    assert_eq!(seq_list(dana.ok(f).await), vec![7, 8, 9]);
    let f = page(&mut dana, None, Some(0), Some(2));
    assert_eq!(seq_list(dana.ok(f).await), vec![1, 2]);
    let f = page(&mut dana, None, None, None);
    assert_eq!(seq_list(dana.ok(f).await).len(), 12);
    let f = page(&mut dana, None, None, Some(501));
    assert_eq!(dana.err(f).await.code, ErrorCode::BadFrame);
    let f = page(&mut sam, None, None, None);
    assert_eq!(sam.err(f).await.code, ErrorCode::NotMember);
    let id = sam.id();
    let missing = sam
        .err(ClientFrame::History(History {
            id,
            room: "r_gone".into(),
            before: None,
            after: None,
            limit: None,
        }))
        .await;
    assert_eq!(missing.code, ErrorCode::NotFound);
    // Own events carry the key; history of a fresh device too.
    let f = page(&mut dana, None, None, Some(1));
    let events = dana.ok(f).await.decode::<HistoryOk>().unwrap().events;
    assert_eq!(events[0].client_key.as_deref(), Some("history-0009"));
}

#[tokio::test]
async fn sync_replays_from_cursors_then_goes_live_without_duplicates() {
    let hub = TestHub::start_with(|config| config.replay_max = 5).await;
    let (mut dana, created) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    for n in 0..10 {
        say(
            &mut dana,
            &room_id,
            &format!("replay-{n:05}"),
            &format!("m{n}"),
        )
        .await;
    }
    let mut laptop = login(&hub, &created.token, "other").await;

    // From cursor 9: the three events after it, no gap.
    let (frames, heads) = sync(&mut laptop, &[(&room_id, 9), ("inbox", 1)]).await;
    assert_eq!(
        seqs(&frames),
        vec![
            (room_id.clone(), 10),
            (room_id.clone(), 11),
            (room_id.clone(), 12)
        ]
    );
    assert_eq!(heads[&room_id], 12);
    assert_eq!(heads["inbox"], 1);
    assert!(!frames.iter().any(|f| matches!(f, ServerFrame::Gap(_))));

    // A later sync on the same connection never re-sends what it delivered.
    let (frames, _) = sync(&mut laptop, &[(&room_id, 0), ("inbox", 0)]).await;
    assert!(seqs(&frames).is_empty(), "{frames:?}");

    // Live from now on, in order.
    say(&mut dana, &room_id, "live-000001", "live").await;
    let live = laptop.next_event().await.unwrap();
    assert_eq!((live.seq, live.body["text"].as_str()), (13, Some("live")));

    // A fresh connection from 0 with replay_max 5: a gap, then the last five; the inbox is
    // never gapped.
    let mut phone = login(&hub, &created.token, "phone").await;
    let (frames, _) = sync(&mut phone, &[]).await;
    let gap = frames.iter().find_map(|f| match f {
        ServerFrame::Gap(gap) => Some(gap.clone()),
        _ => None,
    });
    let gap = gap.expect("a gap");
    assert_eq!(
        (gap.room.as_str(), gap.from, gap.to),
        (room_id.as_str(), 1, 8)
    );
    let room_seqs: Vec<u64> = seqs(&frames)
        .into_iter()
        .filter(|(s, _)| *s == room_id)
        .map(|(_, n)| n)
        .collect();
    assert_eq!(room_seqs, vec![9, 10, 11, 12, 13]);
    let gap_position = frames
        .iter()
        .position(|f| matches!(f, ServerFrame::Gap(_)))
        .unwrap();
    let first_event = frames
        .iter()
        .position(|f| matches!(f, ServerFrame::Evt(e) if e.room.as_deref() == Some(&room_id)))
        .unwrap();
    assert!(
        gap_position < first_event,
        "the gap comes before the events"
    );
    assert!(seqs(&frames).contains(&("inbox".into(), 1)));
}

#[tokio::test]
async fn concurrent_senders_are_seen_dense_and_in_order_by_every_reader() {
    let hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let reviewer = agent(&mut dana, "reviewer").await;
    let room_id = room(&mut dana, &["dana/writer", "dana/reviewer"]).await;
    let mut reader = login(&hub, &created.token, "reader").await;
    sync(&mut reader, &[(&room_id, 0)]).await;

    let senders: Vec<_> = [
        (created.token.clone(), "d"),
        (writer.token.clone(), "w"),
        (reviewer.token.clone(), "r"),
    ]
    .into_iter()
    .map(|(token, name)| {
        let url = hub.ws_url();
        let room_id = room_id.clone();
        tokio::spawn(async move {
            let mut client = roundtable_testkit::Client::connect(&url).await.unwrap();
            client
                .auth(&token, &format!("sender-{name}"))
                .await
                .unwrap();
            pipeline(&mut client, &room_id, name, 50).await;
        })
    })
    .collect();
    for sender in senders {
        sender.await.unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < 150 {
        let event = reader.next_event().await.unwrap();
        if event.room.as_deref() == Some(&room_id) {
            seen.push(event.seq);
        }
    }
    let first = seen[0];
    assert_eq!(seen, (first..first + 150).collect::<Vec<_>>());
    // Each sender's own messages arrive in the order it sent them.
    let (_, heads) = sync(&mut reader, &[]).await;
    assert_eq!(heads[&room_id], first + 149);
}

#[tokio::test]
async fn agents_see_messages_that_mention_them_and_everything_else() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let reviewer = agent(&mut dana, "reviewer").await;
    let room_id = room(&mut dana, &["dana/writer", "dana/reviewer"]).await;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    let mut reviewer_client = login(&hub, &reviewer.token, "r").await;
    sync(&mut writer_client, &[(&room_id, 100), ("inbox", 100)]).await;
    sync(&mut reviewer_client, &[(&room_id, 100), ("inbox", 100)]).await;

    // An @handle in the text becomes a mention (only of members).
    let sent = say(
        &mut dana,
        &room_id,
        "mention-0001",
        "@dana/reviewer please look; cc @sam",
    )
    .await;
    assert_eq!(sent.body["mentions"], json!([reviewer.agent.id]));
    let got = reviewer_client.next_event().await.unwrap();
    assert_eq!(got.id, sent.id);
    assert_eq!(got.client_key, None, "keys are shown to their sender only");
    writer_client
        .expect_silence(Duration::from_millis(200))
        .await
        .unwrap();

    // Explicit mentions by id count too.
    let id = dana.id();
    dana.ok(send(
        id,
        &room_id,
        "mention-0002",
        "message",
        json!({"text": "quiet ping", "mentions": [writer.agent.id]}),
    ))
    .await;
    assert_eq!(
        writer_client.next_event().await.unwrap().body["text"],
        "quiet ping"
    );

    // Non-message kinds reach every agent.
    let id = dana.id();
    dana.ok(send(
        id,
        &room_id,
        "status-00001",
        "status",
        json!({"state": "working"}),
    ))
    .await;
    assert_eq!(writer_client.next_event().await.unwrap().kind, "status");
    assert_eq!(reviewer_client.next_event().await.unwrap().kind, "status");

    // An agent sees its own messages (from another device, live) and history applies the
    // same filter.
    let id = writer_client.id();
    writer_client
        .ok(message(id, &room_id, "writer-own-1", "my own words"))
        .await;
    let id = writer_client.id();
    let history: HistoryOk = writer_client
        .ok(ClientFrame::History(History {
            id,
            room: room_id.clone(),
            before: None,
            after: None,
            limit: None,
        }))
        .await
        .decode()
        .unwrap();
    let texts: Vec<_> = history
        .events
        .iter()
        .filter(|e| e.kind == "message")
        .map(|e| e.body["text"].clone())
        .collect();
    assert_eq!(texts, vec![json!("quiet ping"), json!("my own words")]);
}

#[tokio::test]
async fn ack_records_read_markers_clamped_to_the_head() {
    let hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let mut cursors = BTreeMap::new();
    cursors.insert(room_id.clone(), 999);
    cursors.insert("inbox".to_owned(), 1);
    cursors.insert("r_not_mine".to_owned(), 5);
    let id = dana.id();
    dana.ok(ClientFrame::Ack(Ack { id, cursors })).await;
    let mut rows: Vec<(String, i64)> = hub
        .select(&format!(
            "SELECT stream, seq FROM acks WHERE principal = '{}' AND device = 'test-device'",
            created.principal.id
        ))
        .into_iter()
        .map(|row| (row[0].clone(), row[1].parse().unwrap()))
        .collect();
    rows.sort();
    let mut expected = vec![
        (format!("inbox:{}", created.principal.id), 1),
        (room_id.clone(), 2),
    ];
    expected.sort();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn a_room_joined_after_sync_is_delivered_live_from_its_join() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    sync(&mut writer_client, &[]).await;
    let room_id = room(&mut dana, &[]).await;
    say(&mut dana, &room_id, "before-join", "before").await;
    invite(&mut dana, &room_id, "dana/writer").await;
    let join = writer_client.next_event().await.unwrap();
    assert_eq!(
        (join.room.as_deref(), join.kind.as_str(), join.seq),
        (Some(room_id.as_str()), "member", 4)
    );
    assert_eq!(writer_client.next_event().await.unwrap().kind, "room_added");
}

#[tokio::test]
async fn a_later_sync_does_not_resend_the_connections_own_events() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    sync(&mut dana, &[]).await;
    say(&mut dana, &room_id, "own-event-01", "mine").await;
    // The client's cursor lags (it has not processed its own ok yet); the hub remembers what
    // this connection already has.
    let (frames, heads) = sync(&mut dana, &[(&room_id, 2), ("inbox", 1)]).await;
    assert!(seqs(&frames).is_empty(), "{frames:?}");
    assert_eq!(heads[&room_id], 3);
}

/// Sends pipelined from one connection; returns the highest `seq` they were stored at.
async fn pipeline(
    client: &mut roundtable_testkit::Client,
    room: &str,
    name: &str,
    n: usize,
) -> u64 {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = client.id();
        client
            .send_frame(&message(
                id,
                room,
                &format!("{name}-key-{i:05}"),
                &format!("{name}{i}"),
            ))
            .await
            .unwrap();
        ids.push(id);
    }
    let mut highest = 0;
    for id in ids {
        let sent: SendOk = client
            .reply_to(id)
            .await
            .unwrap()
            .unwrap()
            .decode()
            .unwrap();
        highest = highest.max(sent.event.seq);
    }
    highest
}

/// Live events are written to a connection straight from the flush when nothing is ahead
/// of them; while its `sync` is being replayed they must wait behind the replay. Whatever
/// the timing, the reader sees every seq of the room once and in order.
#[tokio::test]
async fn events_sent_during_a_replay_follow_it_once_and_in_order() {
    let hub = TestHub::start_with(|config| config.replay_max = 10_000).await;
    let (mut dana, created) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let room_id = room(&mut dana, &["dana/writer"]).await;
    // A replay long enough to take several flushes of the socket.
    pipeline(&mut dana, &room_id, "before", 400).await;
    let mut reader = login(&hub, &created.token, "reader").await;

    // The writer agent sends without pause from before the sync until after it.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (started, sending) = tokio::sync::oneshot::channel();
    let sender = tokio::spawn({
        let url = hub.ws_url();
        let room_id = room_id.clone();
        let token = writer.token.clone();
        let stop = stop.clone();
        async move {
            let mut client = roundtable_testkit::Client::connect(&url).await.unwrap();
            client.auth(&token, "sender").await.unwrap();
            let mut last = pipeline(&mut client, &room_id, "first", 20).await;
            started.send(()).unwrap();
            let mut round = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                last = pipeline(&mut client, &room_id, &format!("during{round}"), 20).await;
                round += 1;
            }
            last
        }
    });
    sending.await.unwrap();
    let (frames, _) = sync(&mut reader, &[(&room_id, 0)]).await;
    let mut seen: Vec<u64> = seqs(&frames)
        .into_iter()
        .filter(|(stream, _)| *stream == room_id)
        .map(|(_, seq)| seq)
        .collect();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let last = sender.await.unwrap();
    while seen.last() != Some(&last) {
        let event = tokio::time::timeout(Duration::from_secs(10), reader.next_event())
            .await
            .expect("every event arrives")
            .unwrap();
        if event.room.as_deref() == Some(&room_id) {
            seen.push(event.seq);
        }
    }
    assert_eq!(seen, (1..=last).collect::<Vec<_>>());
}

#[tokio::test]
async fn sync_returns_the_highest_read_marker_of_all_the_principals_devices() {
    let hub = TestHub::start().await;
    let (mut laptop, dana) = hub.user("dana").await;
    let shared = room(&mut laptop, &[]).await;
    let left = room(&mut laptop, &[]).await;
    for n in 0..6 {
        say(&mut laptop, &shared, &format!("k-marker-{n}"), "hello").await;
    }
    let ack = |client: &mut roundtable_testkit::Client, cursors: Vec<(&str, u64)>| {
        let id = client.id();
        ClientFrame::Ack(roundtable_protocol::client::Ack {
            id,
            cursors: cursors
                .into_iter()
                .map(|(stream, seq)| (stream.to_owned(), seq))
                .collect(),
        })
    };
    let frame = ack(
        &mut laptop,
        vec![(shared.as_str(), 5), (left.as_str(), 1), ("inbox", 1)],
    );
    laptop.ok(frame).await;
    let mut desktop = login(&hub, &dana.token, "desktop").await;
    let frame = ack(&mut desktop, vec![(shared.as_str(), 3)]);
    desktop.ok(frame).await;
    // Leaving a room takes its marker out of what sync reports.
    let id = laptop.id();
    laptop
        .ok(ClientFrame::RoomLeave(
            roundtable_protocol::client::RoomLeave {
                id,
                room: left.clone(),
            },
        ))
        .await;

    let mut phone = login(&hub, &dana.token, "phone").await;
    let id = phone.id();
    let ok = phone
        .ok(ClientFrame::Sync(roundtable_protocol::client::SyncCmd {
            id,
            cursors: Default::default(),
        }))
        .await;
    let synced: roundtable_protocol::server::SyncOk = ok.decode().unwrap();
    assert_eq!(
        synced.read,
        [(shared.clone(), 5), ("inbox".to_owned(), 1)]
            .into_iter()
            .collect()
    );
    // A principal with no markers gets none (and the field is left out).
    let (mut sam, _) = hub.user("sam").await;
    let id = sam.id();
    let ok = sam
        .ok(ClientFrame::Sync(roundtable_protocol::client::SyncCmd {
            id,
            cursors: Default::default(),
        }))
        .await;
    assert!(!ok.fields.contains_key("read"), "{:?}", ok.fields);
}
