//! A hub keeping its data in PostgreSQL rides out the database going away under it: sends
//! in flight are answered with a retryable error (never `ok` without a commit), the hub
//! reconnects by itself, and a retry of the same `client_key` stores exactly one event.

use std::time::Duration;

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::{ClientFrame, History, RoomCreate};
use roundtable_protocol::server::{HistoryOk, RoomOk, SendOk};
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
                std::thread::sleep(Duration::from_millis(5));
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

    let mut stored = Vec::new();
    let mut after = 0;
    loop {
        let id = client.id();
        let page: HistoryOk = client
            .ok(ClientFrame::History(History {
                id,
                room: room.clone(),
                before: None,
                after: Some(after),
                limit: Some(500),
            }))
            .await
            .decode()
            .unwrap();
        let Some(last) = page.events.last() else {
            break;
        };
        after = last.seq;
        stored.extend(page.events.iter().map(|event| {
            (
                event.seq,
                event.kind.clone(),
                event.body["text"].as_str().map(str::to_owned),
            )
        }));
    }
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
