//! Three hub processes sharing one PostgreSQL database: a client on any of them cannot
//! tell them from one hub. Each test starts its own cluster (in this process, each hub on
//! its own port) on a fresh database of the server `scripts/test.sh` starts.

use std::collections::BTreeMap;
use std::time::Duration;

use roundtable_protocol::ServerFrame;
use roundtable_protocol::client::{AgentToken, ClientFrame, TokenAction};
use roundtable_protocol::server::SendOk;
use roundtable_testkit::{TestCluster, message};

use crate::support::{
    agent, invite, login, make_public, request_contact, respond, room, say, sync,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_written_on_one_hub_reaches_members_on_the_others_live_and_once() {
    let cluster = TestCluster::start(3, |_| {}).await;
    let [one, two, three] = &cluster.hubs[..] else {
        unreachable!()
    };
    let (mut dana, created) = one.user("dana").await;
    let (mut sam, _) = two.user("sam").await;
    let mut dana_phone = login(three, &created.token, "phone").await;
    // Consent across hubs: sam is found, asked on hub one and accepts on hub two.
    make_public(&mut sam).await;
    let request = request_contact(&mut dana, "sam").await;
    respond(&mut sam, &request.id, true).await;
    let room_id = room(&mut dana, &[]).await;
    invite(&mut dana, &room_id, "sam").await;
    sync(&mut sam, &[]).await;
    sync(&mut dana_phone, &[]).await;

    let sent = say(&mut dana, &room_id, "across-hubs-1", "hello").await;
    let on_two = sam.next_event().await.unwrap();
    assert_eq!(on_two.seq, sent.seq);
    assert_eq!(
        on_two.client_key, None,
        "another principal never sees the key"
    );
    let on_three = dana_phone.next_event().await.unwrap();
    assert_eq!(
        on_three, sent,
        "the sender's other device, on a third hub, with the key"
    );
    // Sam answers from hub two; dana reads it on hub one, after her own.
    let answer = say(&mut sam, &room_id, "across-hubs-2", "hi dana").await;
    assert_eq!(answer.seq, sent.seq + 1);
    let (replayed, heads) = sync(&mut dana, &[(room_id.as_str(), sent.seq)]).await;
    assert_eq!(heads[&room_id], answer.seq);
    let in_room: Vec<(String, u64)> = crate::support::seqs(&replayed)
        .into_iter()
        .filter(|(stream, _)| *stream == room_id)
        .collect();
    assert_eq!(
        in_room,
        [(room_id.clone(), answer.seq)],
        "what another hub stored is replayed from the cursor"
    );
    assert_eq!(dana_phone.next_event().await.unwrap(), {
        let mut keyless = answer.clone();
        keyless.client_key = None;
        keyless
    });
    // Live from now on: dana's phone, on hub three, says something; dana on hub one gets it.
    let third = say(&mut dana_phone, &room_id, "across-hubs-3", "from the phone").await;
    let on_one = dana.next_event().await.unwrap();
    assert_eq!(on_one, third);
    assert_eq!(sam.next_event().await.unwrap().seq, third.seq);
    for client in [&mut dana, &mut sam, &mut dana_phone] {
        client
            .expect_silence(Duration::from_millis(200))
            .await
            .unwrap();
    }
}

/// Writers on every hub into the same rooms at once: every reader, on every hub, sees
/// each room dense and in order, with nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_on_three_hubs_into_the_same_rooms_are_seen_dense_and_in_order_everywhere() {
    const PER_WRITER: usize = 60;
    let cluster = TestCluster::start(3, |_| {}).await;
    let (mut owner, created) = cluster.hubs[0].user("dana").await;
    let rooms = [room(&mut owner, &[]).await, room(&mut owner, &[]).await];
    let mut readers = Vec::new();
    for hub in &cluster.hubs {
        let mut reader = login(hub, &created.token, &format!("reader-{}", hub.addr.port())).await;
        let (_, heads) = sync(&mut reader, &[]).await;
        readers.push((reader, heads));
    }
    let mut writers = Vec::new();
    for (index, hub) in cluster.hubs.iter().enumerate() {
        let mut writer = login(hub, &created.token, &format!("writer-{index}")).await;
        let rooms = rooms.clone();
        writers.push(tokio::spawn(async move {
            for n in 0..PER_WRITER {
                let room = &rooms[n % rooms.len()];
                let key = format!("w{index}-{n:04}-key");
                let id = writer.id();
                let ok: SendOk = writer
                    .ok(message(id, room, &key, &key))
                    .await
                    .decode()
                    .unwrap();
                assert!(!ok.dup);
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let total = 3 * PER_WRITER;
    let mut orders = Vec::new();
    for (reader, heads) in &mut readers {
        let mut by_room: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let mut texts = 0;
        while texts < total {
            let frame = tokio::time::timeout(Duration::from_secs(10), reader.next_event())
                .await
                .expect("every event arrives")
                .unwrap();
            let room = frame.room.clone().unwrap();
            if frame.kind == "message" {
                texts += 1;
            }
            by_room.entry(room).or_default().push(frame.seq);
        }
        for (room, seqs) in &by_room {
            let first = heads[room] + 1;
            let expected: Vec<u64> = (first..first + seqs.len() as u64).collect();
            assert_eq!(seqs, &expected, "room {room}: dense, in order, once");
        }
        orders.push(by_room);
    }
    assert!(orders.windows(2).all(|pair| pair[0] == pair[1]));
    let deadlocks = roundtable_testkit::postgres::select(
        &cluster.database.url,
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
    );
    assert_eq!(deadlocks[0][0], "0");
}

/// The same device signing in on another hub replaces the first connection (4009), as on
/// one hub; the newest always survives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_signs_in_on_another_hub_replaces_its_first_connection() {
    let cluster = TestCluster::start(3, |_| {}).await;
    let (_, created) = cluster.hubs[0].user("dana").await;
    let mut connections = Vec::new();
    for round in 0..6 {
        let hub = &cluster.hubs[round % 3];
        connections.push(login(hub, &created.token, "laptop").await);
    }
    let newest = connections.pop().unwrap();
    for (index, mut old) in connections.into_iter().enumerate() {
        let code = tokio::time::timeout(Duration::from_secs(5), old.closed())
            .await
            .unwrap_or_else(|_| panic!("connection {index} still open"))
            .unwrap();
        assert_eq!(code, Some(4009), "connection {index}");
    }
    let mut newest = newest;
    sync(&mut newest, &[]).await;
    newest
        .expect_silence(Duration::from_millis(200))
        .await
        .unwrap();
}

/// An owner rotating an agent's token on one hub closes the agent's connections on the
/// others (4010), and no write of the old token is taken after the rotation's `ok`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_rotated_on_one_hub_closes_its_connections_on_the_others() {
    // Hubs that look for each other's batches only every 400 ms: the rotation's answer
    // waits for them.
    let cluster = TestCluster::start(3, |config| {
        config.cluster_poll = Duration::from_millis(400);
    })
    .await;
    let (mut dana, _) = cluster.hubs[0].user("dana").await;
    let registered = agent(&mut dana, "worker").await;
    let home = room(&mut dana, &["dana/worker"]).await;
    let mut on_two = login(&cluster.hubs[1], &registered.token, "two").await;
    let mut on_three = login(&cluster.hubs[2], &registered.token, "three").await;
    say(&mut on_two, &home, "before-rotation", "working").await;
    let id = dana.id();
    dana.ok(ClientFrame::AgentToken(AgentToken {
        id,
        agent: registered.agent.id.clone(),
        action: TokenAction::Rotate,
    }))
    .await;
    // By the rotation's `ok`, the other hubs have fanned its batch out: the agent's
    // connections there were told to close before the owner heard the rotation was done.
    let rows = roundtable_testkit::postgres::select(
        &cluster.database.url,
        "SELECT (SELECT max(n) FROM shared_batches WHERE node = 'hub-1'), \
                (SELECT min(dispatched) FROM nodes WHERE node <> 'hub-1'), \
                (SELECT count(*) FROM nodes WHERE node <> 'hub-1')",
    );
    let (rotation, slowest, others): (u64, u64, u64) = (
        rows[0][0].parse().unwrap(),
        rows[0][1].parse().unwrap(),
        rows[0][2].parse().unwrap(),
    );
    assert_eq!(others, 2, "both other hubs say how far they are");
    assert!(
        slowest >= rotation,
        "the other hubs had fanned out up to {slowest} when the rotation ({rotation}) was answered"
    );
    for (name, client) in [("two", &mut on_two), ("three", &mut on_three)] {
        let code = tokio::time::timeout(Duration::from_secs(5), client.closed())
            .await
            .unwrap_or_else(|_| panic!("the agent's connection on hub {name} stayed open"))
            .unwrap();
        assert_eq!(code, Some(4010), "hub {name}");
    }
    for hub in &cluster.hubs {
        let mut again = hub.connect().await;
        assert!(again.auth(&registered.token, "again").await.is_err());
    }
}

/// One `client_key` sent on two hubs at once is stored once: both get the same event,
/// one of them as a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_raced_on_two_hubs_is_stored_once() {
    let cluster = TestCluster::start(2, |_| {}).await;
    let (mut dana, created) = cluster.hubs[0].user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let mut elsewhere = login(&cluster.hubs[1], &created.token, "other").await;
    for n in 0..40 {
        let key = format!("raced-key-{n:03}");
        let (first, second) = tokio::join!(
            async {
                let id = dana.id();
                dana.ok(message(id, &room_id, &key, "once"))
                    .await
                    .decode::<SendOk>()
                    .unwrap()
            },
            async {
                let id = elsewhere.id();
                elsewhere
                    .ok(message(id, &room_id, &key, "once"))
                    .await
                    .decode::<SendOk>()
                    .unwrap()
            }
        );
        assert_eq!(first.event.id, second.event.id, "key {n}");
        assert!(
            first.dup != second.dup,
            "key {n}: exactly one is the original"
        );
    }
    let (frames, _) = sync(&mut dana, &[]).await;
    let messages = frames
        .iter()
        .filter(|frame| matches!(frame, ServerFrame::Evt(event) if event.kind == "message"))
        .count();
    assert_eq!(messages, 40);
}

/// A rate limit holds across hubs: an agent sending as fast as it can from three hubs
/// gets no more than its burst and refill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_holds_across_hubs() {
    let cluster = TestCluster::start(3, |config| {
        config.rate_limits = Some(roundtable_engine::RateLimits {
            agent: "10/1".parse().unwrap(),
            user: "1000/1000".parse().unwrap(),
        });
    })
    .await;
    let (mut dana, _) = cluster.hubs[0].user("dana").await;
    let registered = agent(&mut dana, "eager").await;
    let home = room(&mut dana, &["dana/eager"]).await;
    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for (index, hub) in cluster.hubs.iter().enumerate() {
        let mut client = login(hub, &registered.token, &format!("d{index}")).await;
        let home = home.clone();
        tasks.push(tokio::spawn(async move {
            let mut accepted = 0;
            for n in 0..30 {
                let id = client.id();
                let key = format!("eager-{index}-{n:03}");
                match client.call(message(id, &home, &key, "go")).await.unwrap() {
                    Ok(_) => accepted += 1,
                    Err(err) => {
                        assert_eq!(err.code, roundtable_protocol::ErrorCode::RateLimited);
                        assert!(err.retry_after_ms.is_some());
                    }
                }
            }
            accepted
        }));
    }
    let mut accepted = 0;
    for task in tasks {
        accepted += task.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let bound = 10.0 + elapsed * 1.0 + 1.0;
    assert!(
        accepted as f64 <= bound,
        "{accepted} sends accepted in {elapsed:.2} s; at most {bound:.1}"
    );
    assert!(accepted >= 10, "the burst itself is taken: {accepted}");
}

/// With a bus, hubs tell each other of their commits: a message crosses to another hub at
/// once, though that hub would not poll the database for ten minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_bus_a_message_crosses_hubs_without_waiting_for_the_poll() {
    let nats = std::env::var("ROUNDTABLE_TEST_NATS").unwrap_or_else(|_| {
        panic!(
            "ROUNDTABLE_TEST_NATS is not set: run scripts/test.sh (it starts a nats-server), \
             or set it to nats://HOST:PORT"
        )
    });
    let cluster = TestCluster::start(2, |config| {
        config.bus = Some(nats.clone());
        config.cluster_poll = Duration::from_secs(600);
    })
    .await;
    let (mut dana, created) = cluster.hubs[0].user("dana").await;
    let mut phone = login(&cluster.hubs[1], &created.token, "phone").await;
    let room_id = room(&mut dana, &[]).await;
    sync(&mut phone, &[]).await;
    for n in 0..5 {
        let sent = say(&mut dana, &room_id, &format!("over-the-bus-{n}"), "hello").await;
        let crossed = tokio::time::timeout(Duration::from_secs(10), phone.next_event())
            .await
            .expect("the bus wakes the other hub long before its poll")
            .unwrap();
        assert_eq!(crossed, sent);
    }
}

/// The bus going away and coming back under load changes nothing a client sees: sends keep
/// being acknowledged (they never wait on it), and a reader on another hub gets every
/// message once and in order, by the poll while the bus is away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_and_deliveries_go_on_while_the_bus_is_away() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let start_nats = || {
        tokio::process::Command::new(nats_server())
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("nats-server starts (scripts/test.sh installs it)")
    };
    let mut nats = start_nats();
    let url = format!("nats://127.0.0.1:{port}");
    let cluster = TestCluster::start(2, |config| {
        config.bus = Some(url.clone());
        config.cluster_poll = Duration::from_millis(100);
    })
    .await;
    let (mut dana, created) = cluster.hubs[0].user("dana").await;
    let mut reader = login(&cluster.hubs[1], &created.token, "reader").await;
    let room_id = room(&mut dana, &[]).await;
    sync(&mut reader, &[]).await;
    let mut sent = Vec::new();
    for n in 0..90 {
        if n == 30 {
            nats.kill().await.unwrap();
        }
        if n == 60 {
            nats = start_nats();
        }
        sent.push(
            say(&mut dana, &room_id, &format!("through-outage-{n:03}"), "x")
                .await
                .seq,
        );
    }
    let mut received = Vec::new();
    while received.len() < sent.len() {
        let event = tokio::time::timeout(Duration::from_secs(10), reader.next_event())
            .await
            .expect("every message arrives")
            .unwrap();
        received.push(event.seq);
    }
    assert_eq!(received, sent, "each once, in order");
    drop(nats);
}

/// The nats-server binary: on the PATH, or where Debian puts it.
fn nats_server() -> std::path::PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .chain([std::path::PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nats-server"))
        .find(|path| path.exists())
        .expect("nats-server is installed (scripts/test.sh installs it)")
}

/// Audited commands taken on three hubs at once make one hash chain: dense, and it verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audited_commands_on_three_hubs_make_one_chain_that_verifies() {
    let mut cluster = TestCluster::start(3, |_| {}).await;
    let mut tasks = Vec::new();
    for (index, hub) in cluster.hubs.iter().enumerate() {
        let (mut client, _) = hub.user(&format!("auditor{index}")).await;
        tasks.push(tokio::spawn(async move {
            for n in 0..15 {
                let room_id = room(&mut client, &[]).await;
                // A refusal too: its audit entry joins the chain as well.
                let id = client.id();
                let refused = client
                    .call(ClientFrame::RoomKick(
                        roundtable_protocol::client::RoomKick {
                            id,
                            room: room_id,
                            handle: format!("nobody{n}"),
                        },
                    ))
                    .await
                    .unwrap();
                assert!(refused.is_err());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    cluster.stop().await;
    let (count, _) = roundtable_hub::admin::verify_audit(&cluster.hubs[0].config, None).unwrap();
    let rows = roundtable_testkit::postgres::select(
        &cluster.database.url,
        "SELECT count(*), min(n), max(n) FROM audit",
    );
    assert_eq!(rows[0][0], count.to_string());
    assert_eq!(rows[0][1], "1");
    assert_eq!(rows[0][2], count.to_string(), "n dense");
    assert!(count >= 3 * 15, "{count} entries");
}
