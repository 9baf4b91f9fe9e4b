//! A hub keeping its data in PostgreSQL rides out the database going away under it: sends
//! in flight are answered with a retryable error (never `ok` without a commit), the hub
//! reconnects by itself, and a retry of the same `client_key` stores exactly one event.

use std::time::Duration;

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::{ClientFrame, RoomCreate};
use roundtable_protocol::server::{RoomOk, SendOk};
use roundtable_testkit::postgres::{TestDatabase, select};
use roundtable_testkit::{Client, HubProcess, message, signup};

const BIN: &str = env!("CARGO_BIN_EXE_roundtable");

#[tokio::test]
async fn a_hub_on_postgres_rides_out_its_database_connections_being_cut() {
    let database = TestDatabase::create();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(
        std::path::Path::new(BIN),
        dir.path(),
        &["--store", &database.url, "--no-rate-limit"],
    )
    .await;
    let user = signup(hub.addr, "dana").await.unwrap();
    let mut client = Client::connect(&hub.ws_url()).await.unwrap();
    client.auth(&user.token, "laptop").await.unwrap();
    let id = client.id();
    let room: RoomOk = client
        .ok(ClientFrame::RoomCreate(RoomCreate {
            id,
            title: None,
            topic: None,
            members: vec![],
        }))
        .await
        .decode()
        .unwrap();
    let room = room.room.id;

    // The server ends every session of the hub over and over (as a database restarting
    // would), while the client sends and retries each key until it is acknowledged.
    let cutting = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let cutter = {
        let cutting = cutting.clone();
        let url = database.url.clone();
        std::thread::spawn(move || {
            while cutting.load(std::sync::atomic::Ordering::Relaxed) {
                select(
                    &url,
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                );
                std::thread::sleep(Duration::from_millis(150));
            }
        })
    };
    let mut keys = Vec::new();
    let mut refusals = 0;
    while keys.len() < 2_000 && (refusals < 3 || keys.len() < 100) {
        let key = format!("cut-key-{:05}", keys.len());
        let mut tries = 0;
        loop {
            let id = client.id();
            match client.call(message(id, &room, &key, &key)).await.unwrap() {
                Ok(ok) => {
                    ok.decode::<SendOk>().unwrap();
                    break;
                }
                Err(err) => {
                    // Never a definite refusal: the outcome is unknown or the store is
                    // away, and a retry settles it.
                    assert!(
                        matches!(err.code, ErrorCode::Internal | ErrorCode::Busy),
                        "{err:?}"
                    );
                    refusals += 1;
                    tries += 1;
                    assert!(tries < 100, "the hub never came back");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        keys.push(key);
    }
    cutting.store(false, std::sync::atomic::Ordering::Relaxed);
    cutter.join().unwrap();
    println!(
        "{} keys acknowledged, {refusals} retryable errors on the way",
        keys.len()
    );
    assert!(
        refusals >= 3,
        "the cuts never hit a send: nothing was tested"
    );

    let stored: Vec<(u64, String, Option<String>)> = client
        .room_log(&room)
        .await
        .unwrap()
        .into_iter()
        .map(|event| {
            let text = event.body["text"].as_str().map(str::to_owned);
            (event.seq, event.kind, text)
        })
        .collect();
    let seqs: Vec<u64> = stored.iter().map(|(seq, _, _)| *seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "dense from 1"
    );
    let texts: Vec<String> = stored
        .into_iter()
        .filter(|(_, kind, _)| kind == "message")
        .filter_map(|(_, _, text)| text)
        .collect();
    assert_eq!(
        texts, keys,
        "each key stored once, in the order it was acknowledged"
    );
    hub.terminate().await;
}

/// Two hubs of a cluster on a PostgreSQL server that is stopped as in a crash
/// (`pg_ctl stop -m immediate`) and cleanly (`-m fast`), each time started again, under
/// load: sends in flight are answered with a retryable error or lose their connection,
/// never an `ok` without a commit; the hubs recover without a restart; a retry of each key
/// stores exactly one event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_loses_nothing_acknowledged_through_database_restarts() {
    const PER_SENDER: usize = 600;
    let server = roundtable_testkit::postgres::PrivateServer::start();
    let database = TestDatabase::create_on(&server.url);
    let dir = tempfile::tempdir().unwrap();
    let mut hubs = Vec::new();
    for node in 0..2 {
        hubs.push(
            HubProcess::start(
                std::path::Path::new(BIN),
                &dir.path().join(format!("hub-{node}")),
                &[
                    "--store",
                    &database.url,
                    "--node",
                    &format!("hub-{node}"),
                    "--no-rate-limit",
                ],
            )
            .await,
        );
    }
    let user = signup(hubs[0].addr, "dana").await.unwrap();
    let mut owner = Client::connect(&hubs[0].ws_url()).await.unwrap();
    owner.auth(&user.token, "setup").await.unwrap();
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
    let room = room.room.id;
    drop(owner);

    // Every acknowledgement counted, so that each restart comes while sends flow.
    let acked_so_far = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let senders: Vec<_> = hubs
        .iter()
        .enumerate()
        .map(|(index, hub)| {
            let url = hub.ws_url();
            let token = user.token.clone();
            let room = room.clone();
            let acked_so_far = acked_so_far.clone();
            tokio::spawn(async move {
                let mut acked = Vec::new();
                let mut retryable = 0;
                let mut client: Option<Client> = None;
                while acked.len() < PER_SENDER {
                    let Some(connected) = client.as_mut() else {
                        let fresh = match Client::connect(&url).await {
                            Ok(mut fresh) => fresh
                                .auth(&token, &format!("sender-{index}"))
                                .await
                                .is_ok()
                                .then_some(fresh),
                            Err(_) => None,
                        };
                        if fresh.is_none() {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        client = fresh;
                        continue;
                    };
                    let key = format!("restart-{index}-{:04}", acked.len());
                    let id = connected.id();
                    match connected.call(message(id, &room, &key, &key)).await {
                        Ok(Ok(ok)) => {
                            let sent: SendOk = ok.decode().unwrap();
                            assert_eq!(sent.event.body["text"], key.as_str());
                            acked.push((key, sent.event.seq));
                            acked_so_far.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Ok(Err(err)) => {
                            assert!(
                                matches!(err.code, ErrorCode::Internal | ErrorCode::Busy),
                                "{key}: {err:?}"
                            );
                            retryable += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Err(_) => {
                            retryable += 1;
                            client = None;
                        }
                    }
                }
                (acked, retryable)
            })
        })
        .collect();
    // Each restart once sends flow: a few acknowledged since the start, or the last restart.
    let acked_now = || acked_so_far.load(std::sync::atomic::Ordering::Relaxed);
    let flowing = async |since: usize| {
        roundtable_testkit::until(
            "sends are acknowledged",
            Duration::from_secs(60),
            async || acked_now() >= since + 30,
        )
        .await;
    };
    flowing(0).await;
    server.restart("immediate");
    flowing(acked_now()).await;
    server.restart("fast");
    let mut acked = Vec::new();
    let mut retryable = 0;
    for sender in senders {
        let (theirs, retried) = sender.await.unwrap();
        acked.extend(theirs);
        retryable += retried;
    }
    println!(
        "{} sends acknowledged, {retryable} answered retryable on the way",
        acked.len()
    );
    assert!(
        retryable > 0,
        "the restarts hit no send in flight: nothing was tested"
    );

    let mut reader = Client::connect(&hubs[1].ws_url()).await.unwrap();
    reader.auth(&user.token, "reader").await.unwrap();
    let mut stored = std::collections::HashMap::new();
    let mut seqs = Vec::new();
    for event in reader.room_log(&room).await.unwrap() {
        seqs.push(event.seq);
        if let Some(text) = event.body["text"].as_str() {
            assert!(
                stored.insert(text.to_owned(), event.seq).is_none(),
                "{text} twice"
            );
        }
    }
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "dense");
    for (key, seq) in &acked {
        assert_eq!(
            stored.get(key),
            Some(seq),
            "{key} stored once, where its ok said"
        );
    }
    assert_eq!(stored.len(), acked.len());
    for hub in hubs {
        hub.terminate().await;
    }
}
