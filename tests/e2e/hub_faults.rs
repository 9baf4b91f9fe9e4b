//! A core against a hub that fails in ways the real one rarely does: a history page
//! refused for a passing reason (`internal`) is asked again, not given up; a `gap` frame
//! that cannot be is refused without a panic and the core reconnects.
//!
//! The "hub" here is a script over a real WebSocket: it answers what the test needs, in the
//! protocol's frames, and records what the core asked.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use roundtable_core::Core;
use roundtable_core::profile::{Profile, Secret};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

/// How the scripted hub answers the first `history`, and what gap it announces.
#[derive(Clone, Copy)]
enum Script {
    /// `err internal` for the first history, the page after.
    FlakyHistory,
    /// A `gap` from 0, which no hub may send.
    ImpossibleGap,
}

const ME: &str = "p_dana";
const ROOM: &str = "r_one";

fn event(seq: u64) -> Value {
    json!({"t": "evt", "room": ROOM, "seq": seq, "id": format!("e{seq}"),
           "ts": "2026-11-30T09:00:00.000Z", "from": ME, "kind": "message",
           "body": {"text": format!("m{seq}")}})
}

/// Serves connections forever; returns its address and the `t` of every frame received.
async fn scripted_hub(script: Script) -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let histories = Arc::new(Mutex::new(0usize));
        while let Ok((stream, _)) = listener.accept().await {
            let log = log.clone();
            let histories = histories.clone();
            tokio::spawn(async move {
                let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let hello = json!({"t": "hello", "proto": 1, "hub": "h_script", "epoch": "ep_1",
                                   "hb_ms": 20000, "max_frame": 1048576, "max_queue": 4096});
                if socket.send(Message::text(hello.to_string())).await.is_err() {
                    return;
                }
                while let Some(Ok(message)) = socket.next().await {
                    let Message::Text(text) = message else {
                        continue;
                    };
                    let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                    let t = frame["t"].as_str().unwrap_or_default().to_owned();
                    log.lock().unwrap().push(t.clone());
                    let id = frame["id"].clone();
                    let mut replies = Vec::new();
                    match t.as_str() {
                        "auth" => replies.push(json!({"t": "ok", "re": id, "principal":
                            {"id": ME, "kind": "user", "handle": "dana", "name": "Dana", "owner": null}})),
                        "sync" => {
                            let from = match script {
                                Script::FlakyHistory => 1,
                                Script::ImpossibleGap => 0,
                            };
                            replies.push(json!({"t": "gap", "room": ROOM, "from": from, "to": 3}));
                            replies.push(event(4));
                            replies.push(json!({"t": "ok", "re": id, "heads": {ROOM: 4}}));
                        }
                        "rooms" => replies.push(json!({"t": "ok", "re": id, "rooms": [
                            {"id": ROOM, "title": "one", "topic": null, "head": 4, "creator": ME,
                             "members": [{"id": ME, "kind": "user", "handle": "dana", "name": "Dana", "routing": "all"}]}]})),
                        "history" => {
                            let first = {
                                let mut count = histories.lock().unwrap();
                                *count += 1;
                                *count == 1
                            };
                            if first {
                                replies.push(json!({"t": "err", "re": id, "code": "internal",
                                                    "msg": "the hub could not read the room; retry"}));
                            } else {
                                let events: Vec<Value> = (1..=3)
                                    .map(|seq| {
                                        let mut e = event(seq);
                                        e.as_object_mut().unwrap().remove("t");
                                        e
                                    })
                                    .collect();
                                replies.push(json!({"t": "ok", "re": id, "events": events}));
                            }
                        }
                        _ => replies.push(json!({"t": "ok", "re": id})),
                    }
                    for reply in replies {
                        if socket.send(Message::text(reply.to_string())).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn core_for(addr: std::net::SocketAddr, home: &std::path::Path) -> Core {
    let profile = Profile::save(
        home,
        "dana",
        &addr.to_string(),
        ME,
        "dana",
        &Secret::new("rt_x"),
        None,
    )
    .unwrap();
    Core::open_blocking(profile).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_page_refused_for_a_passing_reason_is_asked_again() {
    let (addr, seen) = scripted_hub(Script::FlakyHistory).await;
    let home = tempfile::tempdir().unwrap();
    let core = core_for(addr, home.path());
    let sync = core.start();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (gaps, events) = core
            .read_blocking(|cache| Ok((cache.gaps()?, cache.stream_events(ROOM)?)))
            .unwrap();
        if gaps.is_empty() && events.len() == 4 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gap was never filled: gaps {gaps:?}, {} events",
            events.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let histories = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|t| *t == "history")
        .count();
    assert_eq!(histories, 2, "one refused, one answered");
    sync.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impossible_gap_is_refused_and_the_core_reconnects() {
    let (addr, seen) = scripted_hub(Script::ImpossibleGap).await;
    let home = tempfile::tempdir().unwrap();
    let core = core_for(addr, home.path());
    let mut state = core.sync_state();
    let sync = core.start();
    let offline = tokio::time::timeout(
        Duration::from_secs(30),
        state.wait_for(|state| matches!(state, roundtable_core::SyncState::Offline { .. })),
    )
    .await
    .expect("the core gave up on that connection")
    .unwrap()
    .clone();
    assert!(format!("{offline:?}").contains("gap"), "{offline:?}");
    // Nothing of that connection's replay was kept half-applied.
    assert!(core.read_blocking(|cache| cache.gaps()).unwrap().is_empty());
    assert!(
        core.read_blocking(|cache| cache.stream_events(ROOM))
            .unwrap()
            .is_empty()
    );
    // And it tries again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().iter().filter(|t| *t == "auth").count() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "no second attempt");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sync.stop().await;
}
