//! A hub seeded with many events, as agents and people write them: messages (a tenth of
//! them mentioning the user), task snapshots, usage deltas and statuses. Used by the
//! rehydrate benchmark and by tests that need a large history.

use std::collections::{BTreeMap, VecDeque};

use anyhow::{Result, bail};
use roundtable_protocol::client::{ClientFrame, RoomCreate, SendCmd, SyncCmd};
use roundtable_protocol::server::{AuthOk, RoomOk, SyncOk};
use serde_json::json;

use crate::Client;

/// Writes `events` events over `rooms` rooms, 64 sends in flight; returns how many events
/// the user can see in all (the hub's `room` and `member` events and the inbox included).
pub async fn seed(ws_url: &str, token: &str, rooms: usize, events: usize) -> Result<usize> {
    let mut client = Client::connect(ws_url).await?;
    // Work reports name their sender (the hub refuses reports about anyone else's agent).
    let me = client
        .auth(token, "seeder")
        .await?
        .decode::<AuthOk>()?
        .principal
        .id;
    let mut ids = Vec::new();
    for n in 0..rooms {
        let id = client.id();
        let ok = client
            .call(ClientFrame::RoomCreate(RoomCreate {
                id,
                title: Some(format!("room-{n}")),
                topic: None,
                members: Vec::new(),
            }))
            .await?
            .map_err(|err| anyhow::anyhow!("room_create refused: {}", err.msg))?;
        ids.push(ok.decode::<RoomOk>()?.room.id);
    }
    let mut in_flight = VecDeque::new();
    for n in 0..events {
        let id = client.id();
        let room = ids[n % rooms].clone();
        let (kind, body) = seed_event(n, &me);
        client
            .send_frame(&ClientFrame::Send(SendCmd {
                id,
                room,
                client_key: format!("seed-{n:08}"),
                kind: kind.into(),
                body,
            }))
            .await?;
        in_flight.push_back(id);
        if in_flight.len() >= 64 {
            confirm(&mut client, in_flight.pop_front().unwrap()).await?;
        }
    }
    while let Some(id) = in_flight.pop_front() {
        confirm(&mut client, id).await?;
    }
    client.backlog.clear();
    // Count what a fresh reader sees: heads of every stream.
    let id = client.id();
    let ok = client
        .call(ClientFrame::Sync(SyncCmd {
            id,
            cursors: BTreeMap::new(),
        }))
        .await?
        .map_err(|err| anyhow::anyhow!("sync refused: {}", err.msg))?;
    let heads: SyncOk = ok.decode()?;
    Ok(heads.heads.values().map(|&head| head as usize).sum())
}

async fn confirm(client: &mut Client, id: u64) -> Result<()> {
    match client.reply_to(id).await? {
        Ok(_) => Ok(()),
        Err(err) => bail!("a seed send was refused: {} {}", err.code, err.msg),
    }
}

/// The n-th seeded event: mostly messages (every tenth mentions the user), and per twenty
/// one task snapshot, one usage delta and one status, as an agent's reporter writes them
/// (the work of `sender`).
pub fn seed_event(n: usize, sender: &str) -> (&'static str, serde_json::Value) {
    let session =
        json!({"agent": sender, "framework": "claude-code", "session_id": format!("s{}", n % 7)});
    match n % 20 {
        0 => (
            "tasks",
            json!({"session": session, "source": "TodoWrite", "tasks": [
                {"title": format!("step {n}"), "status": "in_progress"},
                {"title": "write the tests", "status": "pending"}]}),
        ),
        1 => (
            "usage",
            json!({"session": session, "model": "claude-sonnet-4-5", "input": 1200, "output": 300,
                   "cache_write": 0, "cache_read": 5000, "cost_usd": 0.0123,
                   "from": "2026-11-30T09:00:00.000Z", "to": "2026-11-30T09:00:05.000Z"}),
        ),
        2 => (
            "status",
            json!({"state": "working", "detail": format!("event {n}")}),
        ),
        m if m % 10 == 3 => (
            "message",
            json!({"text": format!("@dana message {n}: the parser now handles nested blocks; see the diff")}),
        ),
        _ => (
            "message",
            json!({"text": format!("message {n}: ran the suite, 214 passed, moving on to the lexer")}),
        ),
    }
}
