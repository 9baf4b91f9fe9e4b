//! Short-lived processes beside a long-running one on the same profile: a `roundtable send`
//! (as a hook would) hands its message to the running `tail --follow` and exits at once;
//! with nothing running it sends the message itself; and whichever process is killed,
//! whenever, a message that reached the outbox arrives exactly once.

use std::path::Path;
use std::time::{Duration, Instant};

use roundtable_e2e::{Home, Hub, json, room_texts};
use roundtable_testkit::{Client, Incoming, until};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// A `tail --follow` on `profile`'s room, once it has caught up and serves hand-offs.
async fn follower(home: &Home, profile: &str, room: &str) -> Child {
    let mut follow = home
        .command(
            profile,
            &["--json", "tail", room, "--follow", "--limit", "1"],
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The room holds a message: the tail prints it once synced.
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the follower caught up")
        .unwrap()
        .expect("the follower printed the last message");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let run = home.profiles().join(profile).join("run");
    until(
        "the running process listens",
        Duration::from_secs(10),
        async || sockets(&run) > 0,
    )
    .await;
    follow
}

fn sockets(run: &Path) -> usize {
    std::fs::read_dir(run)
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.file_name().to_string_lossy().ends_with(".sock"))
                .count()
        })
        .unwrap_or(0)
}

/// A second device of the profile's principal, live on its rooms.
async fn observer(hub: &Hub, home: &Home, profile: &str) -> Client {
    let token = home.profile(profile).token.expose().to_owned();
    let mut client = Client::connect(&hub.ws_url()).await.unwrap();
    client.auth(&token, "observer").await.unwrap();
    let id = client.id();
    client
        .ok(roundtable_protocol::ClientFrame::Sync(
            roundtable_protocol::client::SyncCmd {
                id,
                cursors: Default::default(),
            },
        ))
        .await;
    client.backlog.clear();
    client
}

/// Waits for the live message `text` on `client`; how long it took from `since`.
async fn arrival(client: &mut Client, text: &str, since: Instant) -> Duration {
    loop {
        let incoming = tokio::time::timeout(Duration::from_secs(10), client.recv())
            .await
            .unwrap_or_else(|_| panic!("{text:?} never arrived"))
            .unwrap();
        if let Incoming::Frame(roundtable_protocol::ServerFrame::Evt(event)) = incoming
            && event.body["text"] == text
        {
            return since.elapsed();
        }
    }
}

async fn dana_with_a_room(hub: &Hub) -> Home {
    let home = Home::default();
    home.signup(hub, "dana").await;
    home.ok("dana", &["room", "create", "--title", "design"])
        .await;
    home.ok("dana", &["send", "design", "first"]).await;
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_beside_a_running_process_is_handed_over_and_exits_at_once() {
    let hub = Hub::start(&[]).await;
    let home = dana_with_a_room(&hub).await;
    let mut watcher = observer(&hub, &home, "dana").await;
    let mut follow = follower(&home, "dana", "design").await;

    let mut exits = Vec::new();
    let mut arrivals = Vec::new();
    for n in 0..5 {
        let text = format!("handed {n}");
        let started = Instant::now();
        let output = home
            .command("dana", &["--json", "send", "design", &text])
            .output()
            .await
            .unwrap();
        exits.push(started.elapsed());
        assert!(output.status.success(), "{output:?}");
        let reported = json(&String::from_utf8_lossy(&output.stdout));
        assert_eq!(reported["state"], "sent", "{reported}");
        arrivals.push(arrival(&mut watcher, &text, started).await);
    }
    eprintln!("hand-off: send exited after {exits:?}; arrived after {arrivals:?}");
    let slowest_exit = exits.iter().max().unwrap();
    let slowest_arrival = arrivals.iter().max().unwrap();
    assert!(
        *slowest_exit < Duration::from_millis(300),
        "a send beside a running process exits in under 300 ms: {exits:?}"
    );
    assert!(
        *slowest_arrival < Duration::from_millis(500),
        "its message reaches the hub within 500 ms: {arrivals:?}"
    );
    follow.kill().await.unwrap();

    // With nothing running, the same command delivers the message itself.
    let started = Instant::now();
    let sent = json(
        &home
            .ok("dana", &["--json", "send", "design", "alone"])
            .await,
    );
    assert_eq!(sent["state"], "sent", "{sent}");
    arrival(&mut watcher, "alone", started).await;
    let token = home.profile("dana").token.expose().to_owned();
    let texts = room_texts(&hub.ws_url(), &token, "design").await;
    assert_eq!(
        texts,
        [
            "first", "handed 0", "handed 1", "handed 2", "handed 3", "handed 4", "alone"
        ]
    );
}

/// The message's count on the hub, and whether it ever became durable in the outbox (or on
/// the hub): then it must arrive, once.
fn in_outbox(home: &Home, text: &str) -> bool {
    let path = home.profile("dana").cache_path();
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    let pattern = format!("%\"text\":\"{text}\"%");
    conn.query_row(
        "SELECT count(*) FROM outbox WHERE frame LIKE ?1",
        [pattern],
        |row| row.get::<_, i64>(0),
    )
    .unwrap()
        > 0
}

async fn settles_exactly_once(hub: &Hub, home: &Home, text: &str, durable: bool) {
    let token = home.profile("dana").token.expose().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let texts = room_texts(&hub.ws_url(), &token, "design").await;
        let count = texts.iter().filter(|t| t.as_str() == text).count();
        assert!(count <= 1, "{text:?} is on the hub {count} times");
        if count == usize::from(durable) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{text:?}: durable {durable}, on the hub {count} times"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sender_or_runner_loses_nothing_and_duplicates_nothing() {
    let hub = Hub::start(&[]).await;
    let home = dana_with_a_room(&hub).await;
    let mut follow = follower(&home, "dana", "design").await;

    // The short-lived process killed at any point: what reached the outbox arrives once
    // (the running process takes over entries whose owner died).
    for (n, delay) in [0u64, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 40]
        .into_iter()
        .enumerate()
    {
        let text = format!("sender killed {n}");
        let mut send = home
            .command("dana", &["send", "design", &text])
            .spawn()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let _ = send.start_kill();
        let _ = send.wait().await;
        let token = home.profile("dana").token.expose().to_owned();
        let on_hub = room_texts(&hub.ws_url(), &token, "design")
            .await
            .contains(&text);
        let durable = on_hub || in_outbox(&home, &text);
        eprintln!("{text}: killed after {delay} ms; durable {durable}");
        settles_exactly_once(&hub, &home, &text, durable).await;
    }

    // The running process killed while it holds handed-off messages: the next one sends
    // them, once.
    for (n, delay) in [0u64, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 40]
        .into_iter()
        .enumerate()
    {
        let text = format!("runner killed {n}");
        let send = home.command("dana", &["send", "design", &text]).output();
        let kill = async {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let _ = follow.start_kill();
        };
        let (output, ()) = tokio::join!(send, kill);
        let output = output.unwrap();
        assert!(output.status.success(), "{output:?}");
        let _ = follow.wait().await;
        follow = follower(&home, "dana", "design").await;
        settles_exactly_once(&hub, &home, &text, true).await;
    }
    follow.kill().await.unwrap();
}
