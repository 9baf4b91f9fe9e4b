//! A consumer that stops reading is closed with 4008 once its queue overflows, and loses
//! nothing: it reconnects and resumes from its cursor.

use std::collections::VecDeque;

use roundtable_protocol::ServerFrame;
use roundtable_testkit::{Incoming, TestHub, message};

use crate::support::{login, room, sync};

#[tokio::test]
async fn a_slow_consumer_is_closed_with_4008_and_recovers_without_loss() {
    let hub = TestHub::start_with(|config| {
        config.max_queue = 16;
        config.replay_max = 10_000;
    })
    .await;
    let (mut dana, created) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let mut slow = login(&hub, &created.token, "slow").await;
    sync(&mut slow, &[(&room_id, 2), ("inbox", 1)]).await;

    // ~30 MB of messages, far more than the socket buffers and the 16-frame queue hold.
    let total = 2000u64;
    let text = "x".repeat(15 * 1024);
    let mut window = VecDeque::new();
    for n in 0..total {
        let id = dana.id();
        dana.send_frame(&message(id, &room_id, &format!("flood-{n:06}"), &text))
            .await
            .unwrap();
        window.push_back(id);
        if window.len() == 8 {
            dana.reply_to(window.pop_front().unwrap())
                .await
                .unwrap()
                .unwrap();
        }
    }
    for id in window {
        dana.reply_to(id).await.unwrap().unwrap();
    }

    // The slow client now reads what reached it, then the close.
    let mut seen = Vec::new();
    let code = loop {
        match slow.recv().await.unwrap() {
            Incoming::Frame(ServerFrame::Evt(event)) => seen.push(event.seq),
            Incoming::Frame(other) => panic!("unexpected {other:?}"),
            Incoming::Closed(code) => break code,
        }
    };
    assert_eq!(code, Some(4008));
    assert!(
        (seen.len() as u64) < total,
        "it was closed before everything arrived"
    );
    let cursor = seen.last().copied().unwrap_or(2);

    // Resume from the cursor: the rest arrives, each once, in order.
    let mut again = login(&hub, &created.token, "slow").await;
    let id = again.id();
    again
        .send_frame(&roundtable_protocol::client::ClientFrame::Sync(
            roundtable_protocol::client::SyncCmd {
                id,
                cursors: [(room_id.clone(), cursor), ("inbox".to_owned(), 1)]
                    .into_iter()
                    .collect(),
            },
        ))
        .await
        .unwrap();
    loop {
        match again.recv().await.unwrap() {
            Incoming::Frame(ServerFrame::Evt(event)) => seen.push(event.seq),
            Incoming::Frame(ServerFrame::Gap(gap)) => panic!("replay_max covers the tail: {gap:?}"),
            Incoming::Frame(ServerFrame::Ok(ok)) if ok.re == id => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, (3..3 + total).collect::<Vec<_>>());
}
