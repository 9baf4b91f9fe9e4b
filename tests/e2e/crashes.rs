//! Crashes and resets on either side: a client killed mid-sync, a hub whose history was
//! replaced (a new epoch), a client too slow for its queue (4008).

use std::time::Duration;

use roundtable_core::client::PATIENCE;
use roundtable_e2e::{
    Home, Hub, cache_view, check_consistent, converge, flood, hub_view, json, settle, synced_core,
};
use roundtable_testkit::{Client, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_mid_sync_restarts_consistent_and_catches_up() {
    let hub = Hub::start(&["--no-rate-limit"]).await;
    let home = Home::default();
    home.ok(
        "dana",
        &["signup", "--hub", &hub.addr(), "--handle", "dana"],
    )
    .await;
    let token = home.profile("dana").token.expose().to_owned();
    let mut writer = Client::connect(&hub.ws_url()).await.unwrap();
    writer.auth(&token, "writer").await.unwrap();
    let mut rooms = Vec::new();
    for n in 0..4 {
        let room = json(
            &home
                .ok(
                    "dana",
                    &["--json", "room", "create", "--title", &format!("r{n}")],
                )
                .await,
        )["id"]
            .as_str()
            .unwrap()
            .to_owned();
        flood(&mut writer, &room, &format!("r{n}-"), 3000, 200).await;
        rooms.push(room);
    }

    // A second device of dana starts from nothing and is killed while it syncs.
    let laptop = Home::default();
    laptop
        .ok("dana", &["login", "--hub", &hub.addr(), "--token", &token])
        .await;
    let mut sync = laptop.command("dana", &["sync"]).spawn().unwrap();
    // Killed as soon as its cache holds some of the history (read beside it, as WAL allows).
    let cache = laptop.profile("dana").cache_path();
    until("the sync stored its first events", PATIENCE, async || {
        rusqlite::Connection::open_with_flags(&cache, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|db| {
                db.query_row("SELECT count(*) FROM events", [], |row| {
                    row.get::<_, i64>(0)
                })
            })
            .is_ok_and(|stored| stored > 0)
    })
    .await;
    sync.kill().await.unwrap();
    let interrupted = roundtable_core::Core::open(laptop.profile("dana"))
        .await
        .unwrap();
    check_consistent(&interrupted).unwrap();
    let partial: usize = cache_view(&interrupted).values().map(Vec::len).sum();
    drop(interrupted);

    let (core, sync) = synced_core(laptop.profile("dana")).await;
    check_consistent(&core).unwrap();
    let expected = hub_view(&hub.ws_url(), &token).await.unwrap();
    assert_eq!(cache_view(&core), expected);
    let total: usize = expected.values().map(Vec::len).sum();
    assert!(
        0 < partial && partial < total,
        "the kill came before the sync stored anything or after it ended ({partial} of {total})"
    );
    sync.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_with_a_new_history_makes_clients_rebuild() {
    let mut hub = Hub::start(&["--no-rate-limit"]).await;
    let home = Home::default();
    home.ok(
        "dana",
        &["signup", "--hub", &hub.addr(), "--handle", "dana"],
    )
    .await;
    home.ok("dana", &["room", "create", "--title", "old"]).await;
    home.ok("dana", &["send", "old", "from the old history"])
        .await;
    let (core, sync) = synced_core(home.profile("dana")).await;
    let old_epoch = core
        .read_blocking(|cache| cache.meta("epoch"))
        .unwrap()
        .unwrap();
    let mut changes = core.changes();
    sync.stop().await;

    // The operator replaces the hub's history (identities kept, as a restored backup whose
    // rooms were dropped would): a new epoch.
    hub.stop().await;
    let db = rusqlite::Connection::open(hub.data().join("hub.sqlite3")).unwrap();
    db.execute_batch(
        "DELETE FROM events; DELETE FROM pings; DELETE FROM members; DELETE FROM invites;
         DELETE FROM controls; DELETE FROM rooms; UPDATE meta SET value = 'ep_fresh' WHERE key = 'epoch';",
    )
    .unwrap();
    drop(db);
    hub.start_again().await;
    // Another device writes into the new history (the profile's own CLI would share, and
    // rebuild, this cache itself).
    let token = home.profile("dana").token.expose().to_owned();
    let mut other = Client::connect(&hub.ws_url()).await.unwrap();
    other.auth(&token, "other-device").await.unwrap();
    let id = other.id();
    let created: roundtable_protocol::server::RoomOk = other
        .ok(roundtable_protocol::ClientFrame::RoomCreate(
            roundtable_protocol::client::RoomCreate {
                id,
                title: Some("new".into()),
                topic: None,
                members: vec![],
            },
        ))
        .await
        .decode()
        .unwrap();
    flood(&mut other, &created.room.id, "new history ", 3, 10).await;

    let sync = core.start();
    settle(&core).await;
    assert_eq!(
        changes.try_recv().ok(),
        Some(roundtable_core::Change::Reset)
    );
    let epoch = core
        .read_blocking(|cache| cache.meta("epoch"))
        .unwrap()
        .unwrap();
    assert_ne!(epoch, old_epoch);
    assert_eq!(epoch, "ep_fresh");
    assert_eq!(
        cache_view(&core),
        hub_view(&hub.ws_url(), &token).await.unwrap()
    );
    let titles: Vec<Option<String>> = core
        .read_blocking(|cache| cache.rooms())
        .unwrap()
        .into_iter()
        .map(|r| r.title)
        .collect();
    assert_eq!(titles, vec![Some("new".to_owned())]);
    sync.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_closed_as_a_slow_consumer_recovers_without_loss() {
    let hub = HubOfItsOwn::start();
    let home = Home::default();
    home.ok(
        "dana",
        &["signup", "--hub", &hub.addr.to_string(), "--handle", "dana"],
    )
    .await;
    let room = json(
        &home
            .ok("dana", &["--json", "room", "create", "--title", "busy"])
            .await,
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = home.profile("dana").token.expose().to_owned();
    let (core, sync) = synced_core(home.profile("dana")).await;

    // Stall the core while another device floods the room until the hub gives up on it
    // (past the socket buffers and its 16-frame queue): another connection holds the
    // cache's write lock, so the core's writer waits, and its sync task with it, and it
    // stops reading the socket. (Its readers and the runtime's workers go on.)
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (locked, is_locked) = std::sync::mpsc::channel::<()>();
    let cache_path = home.profile("dana").cache_path();
    let stall = tokio::task::spawn_blocking(move || {
        let blocker = rusqlite::Connection::open(cache_path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked.send(()).unwrap();
        let _ = released.recv_timeout(Duration::from_secs(8));
        blocker.execute_batch("ROLLBACK").unwrap();
    });
    is_locked.recv().unwrap();
    // The flooder, too, runs on a thread of its own (see `HubOfItsOwn`).
    let flooded = {
        let url = hub.ws_url();
        let addr = hub.addr;
        let token = token.clone();
        let room = room.clone();
        let flooder = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the flooder");
            runtime.block_on(async move {
                let mut flooder = Client::connect(&url).await.unwrap();
                flooder.auth(&token, "flooder").await.unwrap();
                let mut flooded: u32 = 0;
                while slow_consumers(addr).await == 0 {
                    assert!(
                        flooded < 8000,
                        "the stalled core was never closed as a slow consumer"
                    );
                    flood(&mut flooder, &room, &format!("f{flooded}"), 250, 16 * 1024).await;
                    flooded += 250;
                }
                flooded
            })
        });
        tokio::task::spawn_blocking(move || flooder.join().expect("the flooder"))
            .await
            .unwrap()
    };
    release.send(()).unwrap();
    stall.await.unwrap();

    // The hub dropped it (4008); it reconnected and resumed from its cursor, losing nothing.
    converge(&core, &hub.ws_url(), &token).await;
    check_consistent(&core).unwrap();
    let messages = core
        .read_blocking(|cache| cache.messages(&room, 0, flooded + 10))
        .unwrap();
    assert_eq!(messages.len(), flooded as usize);
    sync.stop().await;
}

/// A test hub on a runtime and thread of its own, so that nothing the test does on its own
/// runtime can stall the hub it measures.
struct HubOfItsOwn {
    addr: std::net::SocketAddr,
    ws_url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HubOfItsOwn {
    fn start() -> HubOfItsOwn {
        let (started, started_at) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime for the hub");
            runtime.block_on(async move {
                let mut hub = roundtable_testkit::TestHub::start_with(|config| {
                    config.max_queue = 16;
                    config.replay_max = 100_000;
                })
                .await;
                started
                    .send((hub.addr, hub.ws_url()))
                    .expect("the test waits");
                let _ = stopped.await;
                hub.stop().await;
            });
        });
        let (addr, ws_url) = started_at.recv().expect("the hub starts");
        HubOfItsOwn {
            addr,
            ws_url,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn ws_url(&self) -> String {
        self.ws_url.clone()
    }
}

impl Drop for HubOfItsOwn {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How many connections the hub closed as slow consumers.
async fn slow_consumers(addr: std::net::SocketAddr) -> u64 {
    let metrics = roundtable_testkit::http(addr, "GET", "/metrics", None)
        .await
        .unwrap();
    metrics
        .body
        .lines()
        .find_map(|line| line.strip_prefix("roundtable_slow_consumers_total "))
        .unwrap()
        .parse()
        .unwrap()
}
