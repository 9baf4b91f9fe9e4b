//! Three `roundtable hub --node` processes on one PostgreSQL database, one of them killed
//! with SIGKILL again and again under load and started again: every acknowledged message
//! is stored once at the seq its `ok` announced, every room's log is dense, and clients
//! of a killed hub go on from another one without losing or repeating anything.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use roundtable_protocol::client::{ClientFrame, RoomCreate};
use roundtable_protocol::server::{RoomOk, SendOk};
use roundtable_testkit::postgres::TestDatabase;
use roundtable_testkit::{Client, HubProcess, message, signup};

const BIN: &str = env!("CARGO_BIN_EXE_roundtable");
const NODES: usize = 3;
const SENDERS: usize = 6;
const PER_SENDER: usize = 200;
const KILLS: usize = 5;

async fn start(dir: &std::path::Path, url: &str, node: usize) -> HubProcess {
    HubProcess::start(
        std::path::Path::new(BIN),
        &dir.join(format!("hub-{node}")),
        &[
            "--store",
            url,
            "--node",
            &format!("hub-{node}"),
            "--no-rate-limit",
        ],
    )
    .await
}

/// Sends its keys one after another, each until acknowledged, moving to the next hub
/// whenever its connection breaks; returns key -> (room, seq).
async fn send_all(
    sender: usize,
    token: String,
    rooms: Vec<String>,
    urls: Arc<Mutex<Vec<String>>>,
) -> (HashMap<String, (String, u64)>, usize) {
    let mut acked = HashMap::new();
    let mut moves = 0;
    let mut node = sender % NODES;
    let mut client: Option<Client> = None;
    let mut n = 0;
    while n < PER_SENDER {
        let Some(connected) = client.as_mut() else {
            let url = urls.lock().unwrap()[node].clone();
            let device = format!("sender-{sender}");
            let fresh = match Client::connect(&url).await {
                Ok(mut fresh) => fresh.auth(&token, &device).await.is_ok().then_some(fresh),
                Err(_) => None,
            };
            if fresh.is_none() {
                node = (node + 1) % NODES;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            client = fresh;
            continue;
        };
        let key = format!("s{sender}-{n:04}-key");
        let room = &rooms[n % rooms.len()];
        let id = connected.id();
        match connected.call(message(id, room, &key, &key)).await {
            Ok(Ok(ok)) => {
                let sent: SendOk = ok.decode().unwrap();
                assert_eq!(
                    sent.event.body["text"],
                    key.as_str(),
                    "the original event of {key}"
                );
                acked.insert(key, (room.clone(), sent.event.seq));
                n += 1;
            }
            Ok(Err(err)) => {
                // Only the retryable answers of a hub whose store is away.
                assert!(
                    matches!(
                        err.code,
                        roundtable_protocol::ErrorCode::Internal
                            | roundtable_protocol::ErrorCode::Busy
                    ),
                    "{key}: {err:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(_) => {
                // The hub died: the same key again, on the next one.
                client = None;
                node = (node + 1) % NODES;
                moves += 1;
            }
        }
    }
    (acked, moves)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_keeps_every_acknowledged_message_through_sigkills_of_its_hubs() {
    let seed: u64 = rand::rng().random();
    println!("cluster crash test seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let database = TestDatabase::create();
    let dir = tempfile::tempdir().unwrap();
    let mut hubs = Vec::new();
    for node in 0..NODES {
        hubs.push(start(dir.path(), &database.url, node).await);
    }
    let urls = Arc::new(Mutex::new(
        hubs.iter().map(HubProcess::ws_url).collect::<Vec<_>>(),
    ));

    let user = signup(hubs[0].addr, "crash").await.unwrap();
    let mut owner = Client::connect(&hubs[1].ws_url()).await.unwrap();
    owner.auth(&user.token, "setup").await.unwrap();
    let mut rooms = Vec::new();
    for _ in 0..3 {
        let id = owner.id();
        let room: RoomOk = owner
            .ok(ClientFrame::RoomCreate(RoomCreate {
                id,
                title: None,
                topic: None,
                members: vec![],
            }))
            .await
            .decode()
            .unwrap();
        rooms.push(room.room.id);
    }
    drop(owner);

    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            tokio::spawn(send_all(
                sender,
                user.token.clone(),
                rooms.clone(),
                urls.clone(),
            ))
        })
        .collect();
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..350))).await;
        let victim = rng.random_range(0..NODES);
        hubs.remove(victim).kill().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        hubs.insert(victim, start(dir.path(), &database.url, victim).await);
        urls.lock().unwrap()[victim] = hubs[victim].ws_url();
    }
    let mut acked = HashMap::new();
    let mut moves = 0;
    for sender in senders {
        let (theirs, moved) = sender.await.unwrap();
        acked.extend(theirs);
        moves += moved;
    }
    assert_eq!(acked.len(), SENDERS * PER_SENDER);
    assert!(
        moves > 0,
        "no sender lost its hub: the kills came too late to test anything"
    );

    // Every hub serves the same logs: dense, each key once, at its acknowledged seq.
    let mut logs = Vec::new();
    for hub in &hubs {
        let mut reader = Client::connect(&hub.ws_url()).await.unwrap();
        reader.auth(&user.token, "reader").await.unwrap();
        let mut log: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
        for room in &rooms {
            let events = reader.room_log(room).await.unwrap();
            log.insert(
                room.clone(),
                events
                    .iter()
                    .map(|event| {
                        let text = event.body["text"].as_str().unwrap_or_default();
                        (event.seq, text.to_owned())
                    })
                    .collect::<Vec<_>>(),
            );
        }
        logs.push(log);
    }
    assert!(
        logs.windows(2).all(|pair| pair[0] == pair[1]),
        "every hub serves one log"
    );
    let log = &logs[0];
    let mut stored: HashMap<&str, (&str, u64)> = HashMap::new();
    for (room, events) in log {
        let seqs: Vec<u64> = events.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "room {room}: dense"
        );
        for (seq, text) in events.iter().filter(|(_, text)| !text.is_empty()) {
            assert!(
                stored.insert(text, (room, *seq)).is_none(),
                "{text} stored twice"
            );
        }
    }
    for (key, (room, seq)) in &acked {
        assert_eq!(
            stored.get(key.as_str()),
            Some(&(room.as_str(), *seq)),
            "{key}"
        );
    }
    assert_eq!(
        stored.len(),
        acked.len(),
        "nothing stored that was not acknowledged in the end"
    );
    println!(
        "{} messages across {KILLS} kills of {NODES} hubs; senders moved {moves} times",
        acked.len()
    );
    for hub in hubs {
        hub.terminate().await;
    }
}
