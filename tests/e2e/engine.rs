//! The core as an engine for long-running clients: reads that stay fast while it catches
//! up, `wait_for` waking as soon as what it waits for is applied, read markers shared
//! between devices through the hub, and tokens kept out of caches.

use std::time::{Duration, Instant};

use roundtable_core::cache::PingState;
use roundtable_core::profile::{Profile, Secret};
use roundtable_core::wait_for::{Arrived, WaitFilter};
use roundtable_core::{Change, Core, SyncState, client::PATIENCE};
use roundtable_e2e::{Home, Hub, json, settle};
use roundtable_protocol::client::{Control, ControlAction, RoomCreate};
use serde_json::json as body;

async fn profile_for(
    base: &std::path::Path,
    name: &str,
    hub: std::net::SocketAddr,
    user: &roundtable_protocol::server::SignupOk,
) -> Profile {
    Profile::save(
        base,
        name,
        &hub.to_string(),
        &user.principal.id,
        &user.principal.handle,
        &Secret::new(user.token.clone()),
        None,
    )
    .unwrap()
}

fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q).round() as usize]
}

/// A core and an embedded hub share one process and a 2-worker runtime; while the core
/// catches up 100,000 events, another task keeps reading the cache as a view would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_stay_fast_while_the_core_catches_up_a_hundred_thousand_events() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = roundtable_hub::HubConfig::new(dir.path().join("hub"));
    config.rate_limits = None;
    let hub = roundtable_hub::embedded::start(
        config,
        Some(roundtable_hub::embedded::bind("127.0.0.1:0".parse().unwrap()).unwrap()),
    )
    .unwrap();
    let user = roundtable_testkit::signup(hub.tcp.unwrap(), "dana")
        .await
        .unwrap();
    let ws_url = format!("ws://{}/v1/ws", hub.tcp.unwrap());
    let total = roundtable_testkit::seed::seed(&ws_url, &user.token, 10, 100_000)
        .await
        .unwrap();

    let profile = profile_for(
        &dir.path().join("profiles"),
        "dana",
        hub.tcp.unwrap(),
        &user,
    )
    .await;
    let core = Core::open(profile).await.unwrap();
    let started = Instant::now();
    let sync = core.start();
    let (done, stopped) = tokio::sync::watch::channel(false);
    let viewer = core.clone();
    let reads = tokio::spawn(async move {
        let mut reads = Vec::new();
        while !*stopped.borrow() {
            let started = Instant::now();
            let rooms = viewer.read(|cache| cache.rooms()).await.unwrap();
            if let Some(room) = rooms.first().map(|room| room.id.clone()) {
                viewer
                    .read(move |cache| cache.messages(&room, 0, 50))
                    .await
                    .unwrap();
            }
            reads.push(started.elapsed());
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        reads
    });
    loop {
        let caught_up = matches!(*core.sync_state().borrow(), SyncState::Idle)
            && core
                .read(move |cache| Ok(cache.gaps()?.is_empty() && cache.event_count()? >= total))
                .await
                .unwrap();
        if caught_up {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the core did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let catch_up = started.elapsed();
    done.send(true).unwrap();
    let mut reads = reads.await.unwrap();
    sync.stop().await;
    let p99 = quantile(&mut reads, 0.99);
    eprintln!(
        "caught up {total} events in {catch_up:?}; {} reads meanwhile: p50 {:?}, p99 {p99:?}, max {:?}",
        reads.len(),
        quantile(&mut reads, 0.5),
        quantile(&mut reads, 1.0)
    );
    assert!(reads.len() >= 50, "the viewer read {} times", reads.len());
    assert!(
        p99 < Duration::from_millis(20),
        "reads during catch-up: p99 {p99:?}"
    );
    drop(hub);
}

/// When the first change that `matches` reaches a subscriber of `core`'s changes: when the
/// event was applied to the cache.
fn applied_at(
    core: &Core,
    matches: impl Fn(&Change) -> bool + Send + 'static,
) -> tokio::task::JoinHandle<Instant> {
    let mut changes = core.changes();
    tokio::spawn(async move {
        loop {
            if let Ok(change) = changes.recv().await
                && matches(&change)
            {
                return Instant::now();
            }
        }
    })
}

/// How long after the event was applied a `wait_for` woke up.
async fn woke(
    waiting: tokio::task::JoinHandle<(Arrived, Instant)>,
    applied: tokio::task::JoinHandle<Instant>,
) -> (Arrived, Duration) {
    let (arrived, at) = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("wait_for woke up")
        .unwrap();
    let applied = tokio::time::timeout(PATIENCE, applied)
        .await
        .expect("the event was applied")
        .unwrap();
    (arrived, at.saturating_duration_since(applied))
}

/// A `wait_for` in a task of its own, returned once it is waiting: its first poll
/// subscribes to the core's changes (before its first look), so nothing the test does next
/// can slip past it.
async fn wait_in_background(
    core: &Core,
    filter: WaitFilter,
) -> tokio::task::JoinHandle<(Arrived, Instant)> {
    let core = core.clone();
    let (subscribed, waiting) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut wait = std::pin::pin!(core.wait_for(&filter, PATIENCE));
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(wait.as_mut().poll(cx))).await;
        let _ = subscribed.send(());
        let arrived = match first {
            std::task::Poll::Ready(arrived) => arrived,
            std::task::Poll::Pending => wait.await,
        };
        (arrived.unwrap(), Instant::now())
    });
    waiting.await.unwrap();
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_wakes_as_soon_as_each_kind_of_event_arrives() {
    let hub = roundtable_testkit::TestHub::start().await;
    let base = tempfile::tempdir().unwrap();
    let user = roundtable_testkit::signup(hub.addr, "dana").await.unwrap();
    let dana = Core::open(profile_for(base.path(), "dana", hub.addr, &user).await)
        .await
        .unwrap();
    let dana_sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    let registered = dana
        .register_agent("writer", Default::default(), PATIENCE)
        .await
        .unwrap();
    let writer = Core::open(registered.profile).await.unwrap();
    let writer_sync = writer.start();
    writer.synced(PATIENCE).await.unwrap();
    let room = dana
        .call(
            RoomCreate {
                id: 0,
                title: Some("work".into()),
                topic: None,
                members: vec!["dana/writer".into()],
            },
            PATIENCE,
        )
        .await
        .unwrap()
        .room
        .id;
    settle(&writer).await;
    let mut delays = Vec::new();

    // A message for the agent.
    let waiting = wait_in_background(
        &writer,
        WaitFilter::MessagesFor {
            principal: writer.me().to_owned(),
        },
    )
    .await;
    let applied = applied_at(&writer, |change| matches!(change, Change::Messages { .. }));
    let n = dana
        .send_message(&room, "@dana/writer the parser, please")
        .await
        .unwrap();
    dana.wait(n, PATIENCE).await.unwrap();
    let (arrived, delay) = woke(waiting, applied).await;
    let Arrived::Messages { messages } = arrived else {
        panic!("{arrived:?}")
    };
    assert_eq!(messages[0].text, "@dana/writer the parser, please");
    delays.push(("message", delay));
    // Read, it is no longer waited for.
    writer
        .mark_read(&room, messages[0].seq.unwrap())
        .await
        .unwrap();
    let nothing = writer
        .wait_for(
            &WaitFilter::MessagesFor {
                principal: writer.me().to_owned(),
            },
            Duration::from_millis(100),
        )
        .await
        .unwrap();
    assert_eq!(nothing, Arrived::Nothing);

    // A ping answered.
    let n = writer
        .send(
            &room,
            "ping",
            body!({"ping": "q1", "question": "keep the old format?", "options": ["yes", "no"]}),
        )
        .await
        .unwrap();
    writer.wait(n, PATIENCE).await.unwrap();
    let waiting = wait_in_background(
        &writer,
        WaitFilter::PingAnswered {
            room: room.clone(),
            ping: "q1".into(),
        },
    )
    .await;
    settle(&dana).await;
    let applied = applied_at(&writer, |change| matches!(change, Change::Ping { .. }));
    let n = dana
        .send(&room, "answer", body!({"ping": "q1", "choice": "yes"}))
        .await
        .unwrap();
    dana.wait(n, PATIENCE).await.unwrap();
    let (arrived, delay) = woke(waiting, applied).await;
    let Arrived::Ping { ping } = arrived else {
        panic!("{arrived:?}")
    };
    assert_eq!(
        (ping.state, ping.choice.as_deref()),
        (PingState::Answered, Some("yes"))
    );
    delays.push(("ping answered", delay));

    // A control for the agent.
    let after = writer.read(|cache| cache.cursor("inbox")).await.unwrap();
    let waiting = wait_in_background(&writer, WaitFilter::Control { after }).await;
    let applied = applied_at(&writer, |change| matches!(change, Change::Controls));
    dana.call(
        Control {
            id: 0,
            agent: writer.me().to_owned(),
            action: ControlAction::Pause,
            room: None,
            reason: None,
        },
        PATIENCE,
    )
    .await
    .unwrap();
    let (arrived, delay) = woke(waiting, applied).await;
    let Arrived::Control { controls } = arrived else {
        panic!("{arrived:?}")
    };
    assert_eq!(controls[0].action, ControlAction::Pause);
    delays.push(("control", delay));

    // Each wait woke with its event (a missed wake would have waited out its patience and
    // said `Nothing`); how soon is a figure, not a verdict.
    eprintln!("wait_for woke after the event was applied: {delays:?}");
    writer_sync.stop().await;
    dana_sync.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_markers_survive_restarts_and_reach_another_device_through_the_hub() {
    let hub = roundtable_testkit::TestHub::start().await;
    let user = roundtable_testkit::signup(hub.addr, "dana").await.unwrap();
    let laptop = tempfile::tempdir().unwrap();
    let desktop = tempfile::tempdir().unwrap();
    let core = Core::open(profile_for(laptop.path(), "dana", hub.addr, &user).await)
        .await
        .unwrap();
    let sync = core.start();
    core.synced(PATIENCE).await.unwrap();
    let room = core
        .call(
            RoomCreate {
                id: 0,
                title: Some("notes".into()),
                topic: None,
                members: Vec::new(),
            },
            PATIENCE,
        )
        .await
        .unwrap()
        .room
        .id;
    // Someone else's messages (another device of a second user would do; the unread count
    // leaves out our own): three from a second device are still "ours", so count by seq.
    let mut last = 0;
    for text in ["one", "two", "three"] {
        let n = core.send_message(&room, text).await.unwrap();
        let outcome = core.wait(n, PATIENCE).await.unwrap();
        let roundtable_core::Outcome::Done(reply) = outcome else {
            panic!("{outcome:?}")
        };
        last = json(&reply)["event"]["seq"].as_u64().unwrap();
    }
    core.mark_read(&room, last - 1).await.unwrap();
    // The next ack carries it to the hub.
    let deadline = Instant::now() + PATIENCE;
    while !core
        .read(|cache| cache.unsent_read_markers())
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the marker never reached the hub"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sync.stop().await;
    drop(core);

    // After a restart, the marker is where it was.
    let core = Core::open(Profile::load(laptop.path(), "dana").unwrap())
        .await
        .unwrap();
    let owned = room.clone();
    assert_eq!(
        core.read(move |cache| cache.read_marker(&owned))
            .await
            .unwrap(),
        last - 1
    );
    drop(core);

    // Another device of the same principal, with an empty cache, learns it from the hub.
    let other = Core::open(profile_for(desktop.path(), "dana", hub.addr, &user).await)
        .await
        .unwrap();
    let other_sync = other.start();
    other.synced(PATIENCE).await.unwrap();
    let rooms = other.rooms().await.unwrap();
    let notes = rooms.iter().find(|r| r.id == room).unwrap();
    assert_eq!(notes.read_to, last - 1);
    other_sync.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_token_is_kept_only_in_its_own_profile() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    let registered = json(
        &home
            .ok("dana", &["--json", "agents", "register", "writer"])
            .await,
    );
    let token = registered["token"].as_str().unwrap().to_owned();
    assert_eq!(registered["profile"], "dana.writer");
    let rotated = json(
        &home
            .ok("dana", &["--json", "agents", "rotate", "writer"])
            .await,
    );
    let new_token = rotated["token"].as_str().unwrap().to_owned();
    assert_ne!(token, new_token);

    // The agent's profile holds the rotated token, readable by its owner only, and works.
    let agent_dir = home.profiles().join("dana.writer");
    assert_eq!(
        std::fs::read_to_string(agent_dir.join("token")).unwrap(),
        new_token
    );
    home.ok("dana.writer", &["rooms"]).await;
    // Neither token is anywhere in the owner's profile: not its cache, not its journal.
    let owner_dir = home.profiles().join("dana");
    for entry in walk(&owner_dir) {
        if entry.is_file() {
            let bytes = std::fs::read(&entry).unwrap();
            for secret in [&token, &new_token] {
                assert!(
                    !bytes
                        .windows(secret.len())
                        .any(|window| window == secret.as_bytes()),
                    "{} holds an agent's token",
                    entry.display()
                );
            }
        }
    }
    // Every file of every profile is its owner's alone, in directories only it may enter.
    for dir in [&owner_dir, &agent_dir] {
        for entry in walk(dir) {
            roundtable_e2e::assert_owner_only(&entry);
        }
    }
}

/// A directory and everything under it.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = vec![dir.to_path_buf()];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_who_joins_a_room_live_is_known_by_handle() {
    let hub = roundtable_testkit::TestHub::start().await;
    let user = roundtable_testkit::signup(hub.addr, "dana").await.unwrap();
    let laptop = tempfile::tempdir().unwrap();
    let core = Core::open(profile_for(laptop.path(), "dana", hub.addr, &user).await)
        .await
        .unwrap();
    let sync = core.start();
    core.synced(PATIENCE).await.unwrap();
    let room = core
        .call(
            RoomCreate {
                id: 0,
                title: Some("design".into()),
                topic: None,
                members: Vec::new(),
            },
            PATIENCE,
        )
        .await
        .unwrap()
        .room
        .id;
    let invite = core.create_invite(Some(&room), None, None).await.unwrap();
    // Sam joins through the invite while Dana's core is live: the `member` event names
    // only an id; the core learns the handle.
    roundtable_testkit::signup_with(
        hub.addr,
        roundtable_protocol::client::SignupRequest {
            handle: "sam".into(),
            name: "Sam".into(),
            discoverable: None,
            invite: Some(invite.code),
        },
    )
    .await
    .unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let owned = room.clone();
        let members = core.read(move |cache| cache.members(&owned)).await.unwrap();
        if members.iter().any(|member| member.handle == "sam") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sam is only known as {members:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sync.stop().await;
}

/// A stop is not a revocation (protocol amendment 1): the stopped agent's core goes
/// offline, not into an error the user must fix; it keeps its token, retries with its
/// backoff, and is back by itself once its owner resumes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_agent_keeps_its_token_and_comes_back_after_a_resume() {
    let hub = roundtable_testkit::TestHub::start().await;
    let base = tempfile::tempdir().unwrap();
    let user = roundtable_testkit::signup(hub.addr, "dana").await.unwrap();
    let dana = Core::open(profile_for(base.path(), "dana", hub.addr, &user).await)
        .await
        .unwrap();
    let dana_sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    let registered = dana
        .register_agent("writer", Default::default(), PATIENCE)
        .await
        .unwrap();
    let token = registered.profile.token.expose().to_owned();
    let profile_dir = registered.profile.dir.clone();
    let writer = Core::open(registered.profile).await.unwrap();
    let writer_sync = writer.start();
    writer.synced(PATIENCE).await.unwrap();
    let agent = writer.me().to_owned();
    let control = |action| Control {
        id: 0,
        agent: agent.clone(),
        action,
        room: None,
        reason: None,
    };

    let mut state = writer.sync_state();
    dana.call(control(ControlAction::Stop), PATIENCE)
        .await
        .unwrap();
    let offline = tokio::time::timeout(
        PATIENCE,
        state.wait_for(|state| matches!(state, SyncState::Offline { .. })),
    )
    .await
    .expect("the stopped agent goes offline")
    .unwrap()
    .clone();
    let SyncState::Offline { reason } = offline else {
        unreachable!()
    };
    assert!(reason.contains("stopped"), "{reason}");
    // Several attempts while it lasts (each `err paused`, then 4011): never an error.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let now = writer.sync_state().borrow().clone();
        assert!(!matches!(now, SyncState::Error { .. }), "{now:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    dana.call(control(ControlAction::Resume), PATIENCE)
        .await
        .unwrap();
    // Back within its backoff (at most 30 s between attempts), with the same token.
    tokio::time::timeout(
        Duration::from_secs(45),
        writer
            .sync_state()
            .wait_for(|state| matches!(state, SyncState::Idle)),
    )
    .await
    .expect("the resumed agent reconnects by itself")
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(profile_dir.join("token")).unwrap(),
        token
    );
    writer_sync.stop().await;
    dana_sync.stop().await;
}
