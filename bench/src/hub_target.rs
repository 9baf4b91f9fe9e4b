//! The workload against `roundtable hub`: each room has a user and `members - 1` agents
//! (agents set routing `all`, so every member receives every message), each member its own
//! WebSocket connection.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::{FutureExt, SinkExt, StreamExt};
use roundtable_protocol::client::{ClientFrame, MemberSet, RegisterAgent, RoomCreate};
use roundtable_protocol::model::Routing;
use roundtable_protocol::server::{RegisterAgentOk, RoomOk};
use roundtable_testkit::{Client, signup};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Barrier;
use tokio_tungstenite::tungstenite::Message;

use crate::measure::{Clock, CpuUse, Outcome, Shape, Tally, parse_payload, payload};

struct Member {
    index: usize,
    token: String,
    room: String,
    agent: bool,
}

/// Where the hubs keep their data: each its own SQLite, or one PostgreSQL database shared
/// by `nodes` hub processes of a cluster.
#[derive(Debug, Clone)]
pub enum Store {
    Sqlite,
    Cluster {
        postgres: String,
        nodes: usize,
        bus: Option<String>,
    },
}

/// Starts one `roundtable hub`; its process and address.
async fn start_hub(
    hub_bin: &Path,
    data: &Path,
    extra: &[String],
) -> Result<(tokio::process::Child, std::net::SocketAddr)> {
    let mut child = tokio::process::Command::new(hub_bin)
        .args([
            "hub",
            "--listen",
            "127.0.0.1:0",
            "--no-rate-limit",
            "--data",
        ])
        .arg(data)
        .args(extra)
        .env("ROUNDTABLE_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", hub_bin.display()))?;
    let mut lines = BufReader::new(child.stdout.take().context("hub stdout")?).lines();
    let first = lines
        .next_line()
        .await?
        .context("the hub printed nothing")?;
    let addr: std::net::SocketAddr = first
        .strip_prefix("listening on ws://")
        .ok_or_else(|| anyhow!("unexpected first line {first:?}"))?
        .parse()?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, addr))
}

pub async fn run(hub_bin: &Path, shape: Shape, store: &Store) -> Result<Outcome> {
    let data = tempfile::tempdir()?;
    let database = match store {
        Store::Sqlite => None,
        Store::Cluster { postgres, .. } => Some(
            roundtable_testkit::postgres::TestDatabase::create_on(postgres),
        ),
    };
    let nodes = match store {
        Store::Sqlite => 1,
        Store::Cluster { nodes, .. } => *nodes,
    };
    let mut children = Vec::new();
    let mut urls = Vec::new();
    for node in 0..nodes {
        let mut extra = match &database {
            Some(database) => vec![
                "--store".to_owned(),
                database.url.clone(),
                "--node".to_owned(),
                format!("hub-{node}"),
            ],
            None => Vec::new(),
        };
        if let Store::Cluster { bus: Some(bus), .. } = store {
            extra.extend(["--bus".to_owned(), bus.clone()]);
        }
        let (child, addr) =
            start_hub(hub_bin, &data.path().join(format!("hub-{node}")), &extra).await?;
        children.push((child, addr));
        urls.push(format!("ws://{addr}/v1/ws"));
    }
    let addr = children[0].1;
    let url = urls[0].clone();

    let mut members = Vec::new();
    for room_index in 0..shape.rooms {
        let user = signup(addr, &format!("bench{room_index}")).await?;
        let mut owner = Client::connect(&url).await?;
        owner.auth(&user.token, "setup").await?;
        let mut handles = Vec::new();
        let mut tokens = Vec::new();
        for agent_index in 1..shape.members {
            let id = owner.id();
            let agent: RegisterAgentOk = owner
                .ok(ClientFrame::RegisterAgent(RegisterAgent {
                    id,
                    name: format!("m{agent_index}"),
                    description: None,
                    card: None,
                    discoverable: None,
                }))
                .await
                .decode()?;
            handles.push(agent.agent.handle);
            tokens.push(agent.token);
        }
        let id = owner.id();
        let room: RoomOk = owner
            .ok(ClientFrame::RoomCreate(RoomCreate {
                id,
                title: Some(format!("bench {room_index}")),
                topic: None,
                members: handles,
            }))
            .await
            .decode()?;
        let base = room_index * shape.members;
        members.push(Member {
            index: base,
            token: user.token,
            room: room.room.id.clone(),
            agent: false,
        });
        for (offset, token) in tokens.into_iter().enumerate() {
            members.push(Member {
                index: base + offset + 1,
                token,
                room: room.room.id.clone(),
                agent: true,
            });
        }
    }

    let barrier = Arc::new(Barrier::new(members.len() + 1));
    let clock_cell = Arc::new(OnceLock::new());
    let tasks: Vec<_> = members
        .into_iter()
        .map(|member| {
            // A cluster's members spread over its hubs: most events cross from one to
            // another.
            let url = urls[member.index % urls.len()].clone();
            tokio::spawn(member_task(
                url,
                member,
                shape,
                barrier.clone(),
                clock_cell.clone(),
            ))
        })
        .collect();
    barrier.wait().await;
    let clock = Clock::new(&shape);
    clock_cell
        .set(clock)
        .map_err(|_| anyhow!("clock set twice"))?;
    let cpu = CpuUse::sample(
        children
            .iter()
            .filter_map(|(child, _)| child.id())
            .collect(),
        clock,
    );
    barrier.wait().await;
    let mut total = Tally::default();
    for task in tasks {
        total.merge(task.await??);
    }
    for (mut child, _) in children {
        let _ = child.kill().await;
    }
    drop(database);
    Ok(Outcome::from_tally(&total, shape.measure, cpu.await?))
}

#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(borrow)]
    t: &'a str,
    #[serde(default)]
    msg: Option<String>,
}

/// The bench payload in an `evt` frame's `"text":"…"` (digits and a colon: no escapes).
fn payload_of(frame: &str) -> Option<(usize, u64)> {
    let start = frame.find(r#""text":""#)? + 8;
    let end = start + frame[start..].find('"')?;
    parse_payload(&frame[start..end])
}

async fn member_task(
    url: String,
    member: Member,
    shape: Shape,
    barrier: Arc<Barrier>,
    clock_cell: Arc<OnceLock<Clock>>,
) -> Result<Tally> {
    let mut client = Client::connect(&url).await?;
    client.auth(&member.token, "bench").await?;
    if member.agent {
        let id = client.id();
        client
            .ok(ClientFrame::MemberSet(MemberSet {
                id,
                room: member.room.clone(),
                routing: Routing::All,
            }))
            .await;
    }
    let id = client.id();
    client
        .ok(ClientFrame::Sync(roundtable_protocol::client::SyncCmd {
            id,
            cursors: Default::default(),
        }))
        .await;
    let mut socket = client.into_socket();
    barrier.wait().await;
    barrier.wait().await;
    let clock = *clock_cell.get().context("clock")?;

    let mut tally = Tally::default();
    let mut in_flight = 0usize;
    let mut next_id = 1_000_000u64;
    let grace = clock.measure_until + Duration::from_secs(5);
    let mut ticker = shape.send_interval().map(|interval| {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        ticker
    });
    let frame = |id: u64, micros: u64| {
        format!(
            r#"{{"t":"send","id":{id},"room":"{}","client_key":"b{}-{id}","kind":"message","body":{{"text":"{}"}}}}"#,
            member.room,
            member.index,
            payload(member.index, micros)
        )
    };
    loop {
        let done = clock.done();
        if done && in_flight == 0 {
            break;
        }
        if !done && ticker.is_none() {
            while in_flight < shape.window {
                next_id += 1;
                socket
                    .feed(Message::Text(frame(next_id, clock.micros()).into()))
                    .await?;
                in_flight += 1;
            }
            socket.flush().await?;
        }
        let next = tokio::select! {
            next = socket.next() => next,
            _ = async {
                match ticker.as_mut() {
                    Some(ticker) if !done => { ticker.tick().await; }
                    _ => std::future::pending::<()>().await,
                }
            } => {
                if in_flight < 10_000 {
                    next_id += 1;
                    socket.send(Message::Text(frame(next_id, clock.micros()).into())).await?;
                    in_flight += 1;
                }
                continue;
            }
            _ = tokio::time::sleep_until(grace.into()) => break,
            _ = tokio::time::sleep_until(clock.measure_until.into()), if !done => continue,
        };
        let Some(message) = next else {
            bail!("the hub closed member {}'s connection", member.index)
        };
        // Take every frame already read before the window is topped up again, so that one
        // write carries all the sends they make room for (async-nats coalesces its writes
        // the same way).
        let mut message = message?;
        loop {
            if let Message::Text(text) = &message
                && let Received::Ok = receive(text.as_str(), &clock, &member, &mut tally)?
            {
                in_flight = in_flight.saturating_sub(1);
            }
            match socket.next().now_or_never() {
                Some(Some(next)) => message = next?,
                Some(None) => bail!("the hub closed member {}'s connection", member.index),
                None => break,
            }
        }
    }
    let _ = socket.close(None).await;
    Ok(tally)
}

enum Received {
    Ok,
    Other,
}

/// Reads one frame: an `ok` (counted by the caller), a delivered event, or an error.
fn receive(text: &str, clock: &Clock, member: &Member, tally: &mut Tally) -> Result<Received> {
    // The hub writes `t` first; reading only what the load needs keeps the load
    // generator's share of the two cores small, as async-nats's is for NATS.
    if text.starts_with(r#"{"t":"ok""#) {
        tally.acknowledged(clock);
        return Ok(Received::Ok);
    }
    if text.starts_with(r#"{"t":"evt""#) {
        if let Some((sender, micros)) = payload_of(text) {
            tally.delivered(clock, member.index, sender, micros);
        }
    } else {
        let incoming: Incoming<'_> = serde_json::from_str(text)?;
        if incoming.t == "err" {
            bail!(
                "the hub refused a send: {}",
                incoming.msg.unwrap_or_default()
            );
        }
    }
    Ok(Received::Other)
}
