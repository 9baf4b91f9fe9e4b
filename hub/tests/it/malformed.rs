//! Malformed and oversized input: each gets the right error, the connection survives (until
//! the protocol says otherwise), and nothing is written.

use roundtable_protocol::client::{ClientFrame, Rooms};
use roundtable_protocol::{ErrorCode, ServerFrame};
use roundtable_testkit::{Client, Incoming, TestHub};
use tokio_tungstenite::tungstenite::Message;

use crate::support::room;

async fn expect_err(client: &mut Client, code: ErrorCode, re: Option<u64>, what: &str) {
    match client.recv().await.unwrap() {
        Incoming::Frame(ServerFrame::Err(err)) => {
            assert_eq!((err.code, err.re), (code, re), "{what}: {}", err.msg);
            assert!(!err.msg.is_empty());
        }
        other => panic!("{what}: expected err, got {other:?}"),
    }
}

fn event_count(hub: &TestHub) -> i64 {
    hub.select_i64("SELECT count(*) FROM events")
}

#[tokio::test]
async fn each_malformed_frame_gets_its_error_and_the_connection_survives() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let before = event_count(&hub);

    let cases: Vec<(String, ErrorCode, Option<u64>)> = vec![
        ("{not json".into(), ErrorCode::BadFrame, None),
        ("[1,2]".into(), ErrorCode::BadFrame, None),
        ("\"rooms\"".into(), ErrorCode::BadFrame, None),
        (r#"{"id":5}"#.into(), ErrorCode::BadFrame, Some(5)),
        (
            r#"{"t":"teleport","id":6}"#.into(),
            ErrorCode::Unsupported,
            Some(6),
        ),
        (r#"{"t":"rooms"}"#.into(), ErrorCode::BadFrame, None),
        (
            r#"{"t":"rooms","id":"7"}"#.into(),
            ErrorCode::BadFrame,
            None,
        ),
        (
            format!(
                r#"{{"t":"send","id":8,"room":{room_id:?},"client_key":12345678,"kind":"message","body":{{"text":"x"}}}}"#
            ),
            ErrorCode::BadFrame,
            Some(8),
        ),
        (
            format!(
                r#"{{"t":"send","id":9,"room":{room_id:?},"client_key":"abcdefgh","kind":"message","body":{{"text":["x"]}}}}"#
            ),
            ErrorCode::BadFrame,
            Some(9),
        ),
        (
            r#"{"t":"history","id":10,"room":"r","limit":-1}"#.into(),
            ErrorCode::BadFrame,
            Some(10),
        ),
        (
            r#"{"t":"member_set","id":11,"room":"r","routing":"loud"}"#.into(),
            ErrorCode::BadFrame,
            Some(11),
        ),
        (
            format!(
                r#"{{"t":"send","id":12,"room":{room_id:?},"client_key":"abcdefgh","kind":"message","body":{}}}"#,
                "[".repeat(300) + &"]".repeat(300)
            ),
            ErrorCode::BadFrame,
            Some(12),
        ),
    ];
    for (text, code, re) in &cases {
        dana.send_text(text.clone()).await.unwrap();
        expect_err(&mut dana, *code, *re, text).await;
    }
    dana.send_message(Message::Binary(vec![1, 2, 3].into()))
        .await
        .unwrap();
    expect_err(&mut dana, ErrorCode::BadFrame, None, "binary").await;

    // Still usable, and nothing was written.
    let id = dana.id();
    dana.ok(ClientFrame::Rooms(Rooms { id })).await;
    assert_eq!(event_count(&hub), before);
}

#[tokio::test]
async fn a_frame_over_max_frame_closes_with_1009() {
    let hub = TestHub::start_with(|config| config.max_frame = 64 * 1024).await;
    let (mut dana, _) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let before = event_count(&hub);
    let big = format!(
        r#"{{"t":"send","id":1,"room":{room_id:?},"client_key":"big-frame-1","kind":"message","body":{{"text":"{}"}}}}"#,
        "a".repeat(70 * 1024)
    );
    dana.send_text(big).await.unwrap();
    assert_eq!(dana.closed().await.unwrap(), Some(1009));
    assert_eq!(event_count(&hub), before);
}

#[tokio::test]
async fn more_than_twenty_bad_frames_a_minute_close_with_1008() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    for _ in 0..20 {
        dana.send_text("nonsense").await.unwrap();
        expect_err(&mut dana, ErrorCode::BadFrame, None, "nonsense").await;
    }
    dana.send_text("nonsense").await.unwrap();
    assert_eq!(dana.closed().await.unwrap(), Some(1008));
}

#[tokio::test]
async fn unsupported_frames_do_not_count_as_bad() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    for n in 0..30 {
        dana.send_text(format!(r#"{{"t":"warp","id":{n}}}"#))
            .await
            .unwrap();
        expect_err(&mut dana, ErrorCode::Unsupported, Some(n), "warp").await;
    }
    let id = dana.id();
    dana.ok(ClientFrame::Rooms(Rooms { id })).await;
}

#[tokio::test]
async fn bad_frames_found_after_decoding_count_too() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    // A short client_key is a bad frame found by the send check, not by the decoder.
    for n in 0..20u64 {
        dana.send_frame(&roundtable_testkit::message(
            100 + n,
            &room_id,
            "short",
            "x",
        ))
        .await
        .unwrap();
        expect_err(&mut dana, ErrorCode::BadFrame, Some(100 + n), "short key").await;
    }
    dana.send_frame(&roundtable_testkit::message(200, &room_id, "short", "x"))
        .await
        .unwrap();
    assert_eq!(dana.closed().await.unwrap(), Some(1008));
}
