//! Writes made offline wait in the outbox and reach the hub once each, in order, even when
//! the process sending them is killed halfway.

use std::time::Duration;

use roundtable_e2e::{Home, Hub, hub_view, json, room_texts_by_id};
use roundtable_protocol::ServerFrame;
use roundtable_protocol::client::{ClientFrame, SyncCmd};
use roundtable_testkit::{Client, Incoming};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_offline_sends_arrive_once_in_order_despite_a_sigkill() {
    // A slow user rate limit makes flushing take seconds, so the kill lands halfway (and the
    // client must honour rate_limited on the way).
    let mut hub = Hub::start(&["--rate-limit-user", "20/40"]).await;
    let home = Home::default();
    home.ok(
        "dana",
        &["signup", "--hub", &hub.addr(), "--handle", "dana"],
    )
    .await;
    let room = json(
        &home
            .ok("dana", &["--json", "room", "create", "--title", "log"])
            .await,
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    hub.stop().await;

    for n in 0..200 {
        let out = home
            .ok("dana", &["--json", "send", &room, &format!("m{n:03}")])
            .await;
        assert_eq!(json(&out)["state"], "queued", "{out}");
    }
    let status = json(&home.ok("dana", &["--json", "status"]).await);
    assert_eq!(status["outbox"]["waiting"], 200);

    hub.start_again().await;
    let token = home.profile("dana").token.expose().to_owned();
    let mut watcher = Client::connect(&hub.ws_url()).await.unwrap();
    watcher.auth(&token, "e2e-watcher").await.unwrap();
    let id = watcher.id();
    watcher
        .ok(ClientFrame::Sync(SyncCmd {
            id,
            cursors: [(room.clone(), 100)].into_iter().collect(),
        }))
        .await;
    watcher.backlog.clear();

    // Flush, and kill the flushing process once about a third has arrived.
    let mut flusher = home.command("dana", &["sync"]).spawn().unwrap();
    let mut seen = 0;
    while seen < 60 {
        match watcher.recv().await.unwrap() {
            Incoming::Frame(ServerFrame::Evt(event)) if event.kind == "message" => seen += 1,
            Incoming::Frame(_) => {}
            Incoming::Closed(code) => panic!("watcher closed: {code:?}"),
        }
    }
    flusher.kill().await.unwrap();
    let partial = room_texts_by_id(&hub.ws_url(), &token, &room).await;
    assert!(
        partial.len() < 200,
        "the kill came after everything was sent"
    );

    // The next run sends the rest; every message is there once, in order.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        home.ok("dana", &["sync"]).await;
        let waiting = json(&home.ok("dana", &["--json", "status"]).await)["outbox"]["waiting"]
            .as_u64()
            .unwrap();
        if waiting == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the outbox does not drain"
        );
    }
    let texts = room_texts_by_id(&hub.ws_url(), &token, &room).await;
    let expected: Vec<String> = (0..200).map(|n| format!("m{n:03}")).collect();
    assert_eq!(texts, expected);
    // And the cache agrees.
    let tail = home
        .ok("dana", &["--json", "tail", &room, "--limit", "500"])
        .await;
    let cached: Vec<String> = tail
        .lines()
        .map(|l| json(l)["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(cached, expected);
    let _ = hub_view(&hub.ws_url(), &token).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_times_out_unsent_is_withdrawn_not_run_later() {
    let mut hub = Hub::start(&[]).await;
    let home = Home::default();
    home.ok(
        "dana",
        &["signup", "--hub", &hub.addr(), "--handle", "dana"],
    )
    .await;
    hub.stop().await;

    // Offline: the command cannot go; its caller gives up, and so does the outbox.
    let core = roundtable_core::Core::open(home.profile("dana"))
        .await
        .unwrap();
    let sync = core.start();
    let create = |title: &str| roundtable_protocol::client::RoomCreate {
        id: 0,
        title: Some(title.into()),
        topic: None,
        members: Vec::new(),
    };
    let refused = core.call(create("never"), Duration::from_millis(500)).await;
    assert!(
        matches!(refused, Err(roundtable_core::CoreError::NotSent)),
        "{refused:?}"
    );
    let withdrawn = core.read_blocking(|cache| cache.outbox_pending()).unwrap();
    assert_eq!(withdrawn.len(), 1);
    assert_eq!(withdrawn[0].error_code.as_deref(), Some("cancelled"));

    // Back online: what was withdrawn stays withdrawn; a new command runs once.
    hub.start_again().await;
    core.call(create("now"), Duration::from_secs(30))
        .await
        .unwrap();
    sync.stop().await;
    let rooms = json(&home.ok("dana", &["--json", "rooms"]).await);
    let titles: Vec<&str> = rooms
        .as_array()
        .unwrap()
        .iter()
        .map(|room| room["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, vec!["now"]);
}
