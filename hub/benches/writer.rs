//! The writer's cost per `send`, without sockets: the engine and the SQLite store executing
//! batches of prepared sends and committing each batch, as the writer thread does.
//! `cargo bench -p roundtable-hub --bench writer` prints sends/s and µs per send.

#![allow(clippy::print_stdout, reason = "the result goes to stdout")]

use std::time::Instant;

use roundtable_engine::ids::IdSource;
use roundtable_engine::{Caller, Command, ConnId, Engine, EngineConfig, Via, prepare_send};
use roundtable_hub::store::Store;
use roundtable_hub::store::sqlite;
use roundtable_protocol::client::{ClientFrame, RegisterAgent, RoomCreate, SendCmd, SignupRequest};
use roundtable_protocol::model::PrincipalKind;

fn main() {
    let batch: usize = std::env::var("BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let total: usize = std::env::var("SENDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let dir = tempfile::tempdir().unwrap();
    let mut ids = IdSource::seeded(1);
    let (mut store, _reader) = sqlite::open(&dir.path().join("hub.sqlite3"), &mut ids, 0).unwrap();
    let snapshot = store.load(0).unwrap();
    // The writer's own cost: no rate limit refuses the load (the load generator runs its
    // hub without one too).
    let config = EngineConfig {
        rate_limits: None,
        ..EngineConfig::default()
    };
    let mut engine = Engine::with_config(snapshot, ids, config);
    let now = 1_800_000_000_000;

    // 10 rooms of a user and 3 agents each, as roundtable-bench's default shape.
    let mut senders = Vec::new();
    let mut tx = store.transaction().unwrap();
    for room_index in 0..10 {
        let user = engine
            .signup(
                &mut *tx,
                now,
                roundtable_hub::SignupMode::Open,
                SignupRequest {
                    handle: format!("bench{room_index}"),
                    name: "bench".into(),
                    discoverable: None,
                    invite: None,
                },
            )
            .unwrap();
        let owner = Caller {
            id: user.principal.id.clone(),
            kind: PrincipalKind::User,
            device: "d".into(),
            conn: ConnId(0),
            via: Via::Ws,
        };
        let mut members = vec![owner.clone()];
        for agent_index in 1..4 {
            let outcome = engine
                .execute(
                    &mut *tx,
                    now,
                    &owner,
                    &Command::Frame(ClientFrame::RegisterAgent(RegisterAgent {
                        id: 1,
                        name: format!("m{agent_index}"),
                        description: None,
                        card: None,
                        discoverable: None,
                    })),
                )
                .unwrap();
            let roundtable_engine::Reply::Ok(ok) = outcome.reply else {
                panic!()
            };
            let agent: roundtable_protocol::server::RegisterAgentOk = ok.decode().unwrap();
            members.push(Caller {
                id: agent.agent.id,
                kind: PrincipalKind::Agent,
                device: "d".into(),
                conn: ConnId(0),
                via: Via::Ws,
            });
        }
        let handles = (1..4).map(|i| format!("bench{room_index}/m{i}")).collect();
        let outcome = engine
            .execute(
                &mut *tx,
                now,
                &owner,
                &Command::Frame(ClientFrame::RoomCreate(RoomCreate {
                    id: 2,
                    title: None,
                    topic: None,
                    members: handles,
                })),
            )
            .unwrap();
        let roundtable_engine::Reply::Ok(ok) = outcome.reply else {
            panic!()
        };
        let room: roundtable_protocol::server::RoomOk = ok.decode().unwrap();
        for member in members {
            senders.push((member, room.room.id.clone()));
        }
    }
    tx.commit().unwrap();

    let started = Instant::now();
    let mut sent = 0usize;
    let mut n = 0u64;
    while sent < total {
        let mut tx = store.transaction().unwrap();
        for _ in 0..batch {
            let (caller, room) = &senders[(n as usize) % senders.len()];
            n += 1;
            let send = prepare_send(SendCmd {
                id: n,
                room: room.clone(),
                client_key: format!("k-{}-{n:010}", caller.id),
                kind: "message".into(),
                body: serde_json::json!({ "text": format!("{n}:123456") }),
            })
            .unwrap();
            engine
                .execute(&mut *tx, now, caller, &Command::Send(send))
                .unwrap();
            sent += 1;
        }
        tx.commit().unwrap();
    }
    let elapsed = started.elapsed();
    println!(
        "writer: {sent} sends in batches of {batch}: {:.0} sends/s, {:.2} µs per send",
        sent as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / sent as f64
    );
}
