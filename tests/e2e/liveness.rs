//! A connection that dies silently (no close, no reset: a laptop that slept, a network
//! that changed) is noticed by the missing heartbeats; what was in flight on it is not
//! lost: a command is reported interrupted, never repeated, and what waited behind it is
//! sent on the next connection, once.

use std::time::Duration;

use roundtable_core::profile::{Profile, Secret};
use roundtable_core::{Core, FailureCode, Outcome};
use roundtable_e2e::{Blackhole, settle};
use roundtable_protocol::client::{ClientFrame, RoomCreate};
use roundtable_testkit::TestHub;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_dead_connection_is_replaced_and_nothing_in_flight_is_lost() {
    let hub = TestHub::start_with(|config| config.heartbeat = Duration::from_millis(300)).await;
    let proxy = Blackhole::start(hub.addr).await;
    let user = roundtable_testkit::signup(hub.addr, "dana").await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let profile = Profile::save(
        home.path(),
        "dana",
        &proxy.addr.to_string(),
        &user.principal.id,
        &user.principal.handle,
        &Secret::new(user.token.clone()),
        None,
    )
    .unwrap();
    let core = Core::open(profile).await.unwrap();
    let sync = core.start();
    settle(&core).await;
    let created = core
        .call(
            RoomCreate {
                id: 0,
                title: Some("work".into()),
                topic: None,
                members: Vec::new(),
            },
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let room = created.room.id;

    // The network goes away under the open socket. A command goes into it (entries go
    // one at a time: the message waits behind it).
    proxy.cut();
    let command = core
        .command(RoomCreate {
            id: 0,
            title: Some("maybe".into()),
            topic: None,
            members: Vec::new(),
        })
        .await
        .unwrap();
    let message = core
        .send_message(&room, "written after the cut")
        .await
        .unwrap();

    let interrupted = core.wait(command, Duration::from_secs(60)).await.unwrap();
    assert!(
        matches!(&interrupted, Outcome::Failed { code, .. } if *code == FailureCode::Interrupted),
        "{interrupted:?}"
    );
    let sent = core.wait(message, Duration::from_secs(60)).await.unwrap();
    assert!(matches!(sent, Outcome::Done(_)), "{sent:?}");

    // Again, with a message in flight: it goes again on the next connection, and the hub
    // (by its client key) stores it once.
    settle(&core).await;
    proxy.cut();
    let in_flight = core
        .send_message(&room, "in flight at the cut")
        .await
        .unwrap();
    let sent = core.wait(in_flight, Duration::from_secs(60)).await.unwrap();
    assert!(matches!(sent, Outcome::Done(_)), "{sent:?}");

    // The hub holds the message once; the cache agrees.
    let mut reader = hub.connect().await;
    reader.auth(&user.token, "reader").await.unwrap();
    let id = reader.id();
    let page: roundtable_protocol::server::HistoryOk = reader
        .ok(ClientFrame::History(roundtable_protocol::client::History {
            id,
            room: room.clone(),
            before: None,
            after: Some(0),
            limit: Some(100),
        }))
        .await
        .decode()
        .unwrap();
    let texts: Vec<&str> = page
        .events
        .iter()
        .filter(|e| e.kind == "message")
        .map(|e| e.body["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, vec!["written after the cut", "in flight at the cut"]);
    settle(&core).await;
    let cached = core
        .read_blocking(|cache| cache.messages(&room, 0, 100))
        .unwrap();
    let hub_seqs: Vec<Option<u64>> = page
        .events
        .iter()
        .filter(|e| e.kind == "message")
        .map(|e| Some(e.seq))
        .collect();
    assert_eq!(cached.iter().map(|m| m.seq).collect::<Vec<_>>(), hub_seqs);
    sync.stop().await;
}
