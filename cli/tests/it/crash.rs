//! The hub survives SIGKILL: concurrent senders in several rooms, the `roundtable hub`
//! process killed at random moments and restarted on the same data, and then every event
//! that got an `ok` is stored exactly once, every room's `seq`s are dense and ordered, and a
//! reader's view after `sync` (plus `history` for announced gaps) is complete.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use roundtable_protocol::ServerFrame;
use roundtable_protocol::client::{ClientFrame, History, RegisterAgent, RoomCreate, SyncCmd};
use roundtable_protocol::server::{HistoryOk, RegisterAgentOk, RoomOk, SendOk, SyncOk};
use roundtable_testkit::{Client, message, signup};

use roundtable_testkit::HubProcess;

const BIN: &str = env!("CARGO_BIN_EXE_roundtable");

const KILLS: usize = 6;
const WINDOW: usize = 16;

#[derive(Default)]
struct Sender {
    token: String,
    name: String,
    next: u64,
    /// Sent, no reply yet: (key, room).
    in_flight: BTreeMap<String, String>,
    /// Acknowledged: key -> (room, seq).
    acked: HashMap<String, (String, u64)>,
}

fn key_of(name: &str, n: u64) -> String {
    format!("{name}-{n:08}")
}

/// Sends until the connection breaks: first the keys left in flight by the last crash
/// (the same key, room and text), then new messages with a window of commands in flight.
async fn run_sender(url: String, rooms: Vec<String>, sender: Arc<Mutex<Sender>>, only_retry: bool) {
    let (token, name) = {
        let s = sender.lock().unwrap();
        (s.token.clone(), s.name.clone())
    };
    let Ok(mut client) = Client::connect(&url).await else {
        return;
    };
    if client.auth(&token, &format!("crash-{name}")).await.is_err() {
        return;
    }
    let mut pending: VecDeque<(u64, String, String)> = VecDeque::new();
    let retries: Vec<(String, String)> = sender
        .lock()
        .unwrap()
        .in_flight
        .iter()
        .map(|(key, room)| (key.clone(), room.clone()))
        .collect();
    let mut retries = retries.into_iter();
    loop {
        while pending.len() < WINDOW {
            let (key, room) = match retries.next() {
                Some(retry) => retry,
                None if only_retry => break,
                None => {
                    let mut s = sender.lock().unwrap();
                    let n = s.next;
                    s.next += 1;
                    let key = key_of(&name, n);
                    let room = rooms[(n as usize) % rooms.len()].clone();
                    s.in_flight.insert(key.clone(), room.clone());
                    (key, room)
                }
            };
            let id = client.id();
            if client
                .send_frame(&message(id, &room, &key, &key))
                .await
                .is_err()
            {
                return;
            }
            pending.push_back((id, key, room));
        }
        let Some((id, key, room)) = pending.pop_front() else {
            return;
        };
        match client.reply_to(id).await {
            Ok(Ok(ok)) => {
                let sent: SendOk = ok.decode().expect("a send ok");
                assert_eq!(sent.event.room.as_deref(), Some(room.as_str()));
                assert_eq!(
                    sent.event.body["text"],
                    key.as_str(),
                    "the original event of {key}"
                );
                let mut s = sender.lock().unwrap();
                s.in_flight.remove(&key);
                let previous = s.acked.insert(key.clone(), (room, sent.event.seq));
                if let Some((_, seq)) = previous {
                    assert_eq!(
                        seq, sent.event.seq,
                        "{key} acknowledged twice with different seqs"
                    );
                }
            }
            Ok(Err(err)) => panic!("send {key} refused: {err:?}"),
            Err(_) => return,
        }
    }
}

fn acked_total(senders: &[Arc<Mutex<Sender>>]) -> usize {
    senders.iter().map(|s| s.lock().unwrap().acked.len()).sum()
}

fn in_flight_total(senders: &[Arc<Mutex<Sender>>]) -> usize {
    senders
        .iter()
        .map(|s| s.lock().unwrap().in_flight.len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_sigkill_exactly_once() {
    survives_sigkill(&["--no-rate-limit"]).await;
}

/// The same, the hub keeping its data in PostgreSQL: a killed hub's transaction in flight is
/// rolled back by the server, and every acknowledged one was committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_sigkill_exactly_once_on_postgres() {
    let database = roundtable_testkit::postgres::TestDatabase::create();
    survives_sigkill(&["--no-rate-limit", "--store", &database.url]).await;
}

async fn survives_sigkill(hub_args: &[&str]) {
    let seed: u64 = rand::rng().random();
    println!("crash test seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut hub = HubProcess::start(std::path::Path::new(BIN), dir.path(), hub_args).await;

    // One user, three agents (kin, so they share rooms), three rooms with all four.
    let user = signup(hub.addr, "crash").await.unwrap();
    let mut owner = Client::connect(&hub.ws_url()).await.unwrap();
    owner.auth(&user.token, "setup").await.unwrap();
    let mut senders = vec![Sender {
        token: user.token.clone(),
        name: "user".into(),
        ..Sender::default()
    }];
    for name in ["a1", "a2", "a3"] {
        let id = owner.id();
        let agent: RegisterAgentOk = owner
            .ok(ClientFrame::RegisterAgent(RegisterAgent {
                id,
                name: name.into(),
                description: None,
                card: None,
                discoverable: None,
            }))
            .await
            .decode()
            .unwrap();
        senders.push(Sender {
            token: agent.token,
            name: name.into(),
            ..Sender::default()
        });
    }
    let mut rooms = Vec::new();
    for _ in 0..3 {
        let id = owner.id();
        let room: RoomOk = owner
            .ok(ClientFrame::RoomCreate(RoomCreate {
                id,
                title: None,
                topic: None,
                members: vec!["crash/a1".into(), "crash/a2".into(), "crash/a3".into()],
            }))
            .await
            .decode()
            .unwrap();
        rooms.push(room.room.id);
    }
    drop(owner);
    let senders: Vec<_> = senders
        .into_iter()
        .map(|s| Arc::new(Mutex::new(s)))
        .collect();

    for round in 0..=KILLS {
        let final_round = round == KILLS;
        let tasks: Vec<_> = senders
            .iter()
            .map(|sender| {
                tokio::spawn(run_sender(
                    hub.ws_url(),
                    rooms.clone(),
                    sender.clone(),
                    final_round,
                ))
            })
            .collect();
        if final_round {
            for task in tasks {
                task.await.unwrap();
            }
            break;
        }
        // Killed mid-stream: after a random number of this round's sends were acknowledged,
        // with more still in flight.
        let before = acked_total(&senders);
        let target = before + rng.random_range(20..300);
        roundtable_testkit::until(
            "acknowledgements before the kill",
            Duration::from_secs(60),
            async || acked_total(&senders) >= target,
        )
        .await;
        hub.kill().await;
        for task in tasks {
            task.await.unwrap();
        }
        let partial = acked_total(&senders) - before;
        let total = partial + in_flight_total(&senders);
        assert!(
            0 < partial && partial < total,
            "round {round}: the kill came after {partial} of {total} sends were acknowledged"
        );
        hub = HubProcess::start(std::path::Path::new(BIN), dir.path(), hub_args).await;
    }

    // Every key sent was acknowledged by the end (in-flight keys were retried).
    let mut acked: HashMap<String, (String, u64)> = HashMap::new();
    for sender in &senders {
        let s = sender.lock().unwrap();
        assert!(
            s.in_flight.is_empty(),
            "{} still has keys in flight",
            s.name
        );
        assert_eq!(
            s.acked.len() as u64,
            s.next,
            "{}: every key acknowledged",
            s.name
        );
        acked.extend(s.acked.clone());
    }
    assert!(
        acked.len() > 200,
        "the senders sent {} messages",
        acked.len()
    );
    println!("{} messages acknowledged across {KILLS} kills", acked.len());

    // A reader's view: sync from nothing, then history for any announced gap.
    let mut reader = Client::connect(&hub.ws_url()).await.unwrap();
    reader.auth(&user.token, "reader").await.unwrap();
    let id = reader.id();
    let heads = reader
        .ok(ClientFrame::Sync(SyncCmd {
            id,
            cursors: BTreeMap::new(),
        }))
        .await
        .decode::<SyncOk>()
        .unwrap()
        .heads;
    let mut views: HashMap<String, BTreeMap<u64, String>> = HashMap::new();
    let mut gaps = Vec::new();
    for frame in reader.backlog.drain(..) {
        match frame {
            ServerFrame::Evt(event) if event.room.is_some() => {
                let text = event.body["text"].as_str().unwrap_or_default().to_owned();
                let previous = views
                    .entry(event.room.unwrap())
                    .or_default()
                    .insert(event.seq, text);
                assert!(previous.is_none(), "an event replayed twice");
            }
            ServerFrame::Gap(gap) => gaps.push(gap),
            _ => {}
        }
    }
    for gap in gaps {
        let mut after = gap.from - 1;
        while after < gap.to {
            let id = reader.id();
            let page: HistoryOk = reader
                .ok(ClientFrame::History(History {
                    id,
                    room: gap.room.clone(),
                    before: Some(gap.to + 1),
                    after: Some(after),
                    limit: Some(500),
                }))
                .await
                .decode()
                .unwrap();
            for event in &page.events {
                let text = event.body["text"].as_str().unwrap_or_default().to_owned();
                views
                    .entry(gap.room.clone())
                    .or_default()
                    .insert(event.seq, text);
            }
            after = page.events.last().expect("a non-empty page").seq;
        }
    }
    let mut texts_seen = BTreeSet::new();
    for room in &rooms {
        let view = &views[room];
        let head = heads[room];
        // Dense and ordered: 1..=head, each once.
        assert_eq!(
            view.keys().copied().collect::<Vec<_>>(),
            (1..=head).collect::<Vec<_>>(),
            "room {room}"
        );
        for text in view.values().filter(|text| !text.is_empty()) {
            assert!(texts_seen.insert(text.clone()), "{text} stored twice");
        }
    }
    // Every acknowledged event is there, at the seq its ok announced.
    for (key, (room, seq)) in &acked {
        assert_eq!(
            views[room].get(seq),
            Some(key),
            "{key} missing from {room} at {seq}"
        );
    }
    assert_eq!(
        texts_seen.len(),
        acked.len(),
        "nothing stored that was never acknowledged"
    );
    hub.terminate().await;
}
