//! `roundtable-bench-rehydrate`: how long a fresh cache takes to mirror a hub holding
//! `--events` events, and how that compares with the floor: a bare protocol client that
//! downloads and decodes the same events (same sync, same history pages) and stores nothing.
//!
//! One hub process is seeded once (rooms of messages with mentions, task snapshots, usage
//! and status events, as agents write them); then the two clients alternate for `--runs`
//! rounds, each from nothing. A core run ends when its sync is idle, its gaps are filled
//! and it holds every event; the report gives each run, the medians and their ratio.

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use roundtable_core::profile::{Profile, Secret};
use roundtable_core::{Core, SyncState};
use roundtable_protocol::client::{ClientFrame, History, RoomCreate, SendCmd, SyncCmd};
use roundtable_protocol::server::{HistoryOk, RoomOk, ServerFrame, SyncOk};
use roundtable_testkit::{Client, HubProcess, Incoming};
use serde_json::json;

#[derive(Debug, Parser)]
#[command(
    name = "roundtable-bench-rehydrate",
    about = "Fresh cache from a hub of N events, against a bare download."
)]
struct Args {
    /// Events the hub holds (spread over the rooms).
    #[arg(long, default_value_t = 100_000)]
    events: usize,
    #[arg(long, default_value_t = 10)]
    rooms: usize,
    /// Rounds; each round runs the core and the bare client once.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// The `roundtable` binary (default: next to this one).
    #[arg(long)]
    hub_bin: Option<PathBuf>,
}

const PAGE: u32 = 500;
const PAGES_IN_FLIGHT: usize = 4;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let hub_bin = match &args.hub_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("the bench binary has a directory")?
            .join("roundtable"),
    };
    let data = tempfile::tempdir()?;
    let hub = HubProcess::start(&hub_bin, data.path(), &["--no-rate-limit"]).await;
    let user = roundtable_testkit::signup(hub.addr, "dana").await?;
    let token = user.token.clone();

    let seeding = Instant::now();
    let total = seed(&hub.ws_url(), &token, args.rooms, args.events).await?;
    println!(
        "# roundtable-bench-rehydrate: {} events written by clients in {} rooms ({} in all with the hub's own), seeded in {:.1} s, {} runs",
        args.events,
        args.rooms,
        total,
        seeding.elapsed().as_secs_f64(),
        args.runs
    );
    println!("# run  core_s  bare_s");
    let mut core_times = Vec::new();
    let mut bare_times = Vec::new();
    for run in 1..=args.runs {
        let core = rehydrate_core(&hub, &user, total).await?;
        let bare = download(&hub.ws_url(), &token, total).await?;
        println!(
            "  {run:>3}  {:.3}  {:.3}",
            core.as_secs_f64(),
            bare.as_secs_f64()
        );
        core_times.push(core);
        bare_times.push(bare);
    }
    let core = median(&mut core_times);
    let bare = median(&mut bare_times);
    println!(
        "median: core {:.3} s ({:.0} events/s), bare download {:.3} s; core/bare {:.2}x",
        core.as_secs_f64(),
        total as f64 / core.as_secs_f64(),
        bare.as_secs_f64(),
        core.as_secs_f64() / bare.as_secs_f64()
    );
    Ok(())
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Writes `events` events over `rooms` rooms, 64 sends in flight; returns how many events
/// the user can see in all (the hub's `room` and `member` events and the inbox included).
async fn seed(ws_url: &str, token: &str, rooms: usize, events: usize) -> Result<usize> {
    let mut client = Client::connect(ws_url).await?;
    client.auth(token, "seeder").await?;
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
        let (kind, body) = seed_event(n);
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
/// one task snapshot, one usage delta and one status, as an agent's reporter writes them.
fn seed_event(n: usize) -> (&'static str, serde_json::Value) {
    let session =
        json!({"agent": "p_seed", "framework": "claude-code", "session_id": format!("s{}", n % 7)});
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

/// A fresh profile and cache; timed from opening the core to holding all `total` events.
async fn rehydrate_core(
    hub: &HubProcess,
    user: &roundtable_protocol::server::SignupOk,
    total: usize,
) -> Result<Duration> {
    let home = tempfile::tempdir()?;
    let profile = Profile::save(
        home.path(),
        "bench",
        &hub.addr.to_string(),
        &user.principal.id,
        &user.principal.handle,
        &Secret::new(user.token.clone()),
        None,
    )?;
    let started = Instant::now();
    let core = Core::open(profile).await?;
    let sync = core.start();
    let deadline = started + Duration::from_secs(600);
    loop {
        let idle = matches!(*core.sync_state().borrow(), SyncState::Idle);
        if idle {
            let (gaps, events) =
                core.read_blocking(|cache| Ok((cache.gaps()?.len(), cache.event_count()?)))?;
            if gaps == 0 && events >= total {
                break;
            }
        }
        if let SyncState::Error { reason } = &*core.sync_state().borrow() {
            bail!("the core failed: {reason}");
        }
        ensure!(
            Instant::now() < deadline,
            "the core did not finish in 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    sync.stop().await;
    Ok(elapsed)
}

/// The floor: sync from nothing and fetch every gap with history pages, decoding every
/// event and storing none.
async fn download(ws_url: &str, token: &str, total: usize) -> Result<Duration> {
    let started = Instant::now();
    let mut client = Client::connect(ws_url).await?;
    client.auth(token, "bare").await?;
    let id = client.id();
    client
        .call(ClientFrame::Sync(SyncCmd {
            id,
            cursors: BTreeMap::new(),
        }))
        .await?
        .map_err(|err| anyhow::anyhow!("sync refused: {}", err.msg))?;
    let mut seen = 0usize;
    let mut gaps = VecDeque::new();
    for frame in client.backlog.drain(..) {
        match frame {
            ServerFrame::Evt(_) => seen += 1,
            ServerFrame::Gap(gap) => gaps.push_back((gap.room, gap.from, gap.to)),
            _ => {}
        }
    }
    // Pages in flight, as the core fetches them.
    let mut pending: BTreeMap<u64, (String, u64, u64)> = BTreeMap::new();
    loop {
        while pending.len() < PAGES_IN_FLIGHT
            && let Some((room, from, to)) = gaps.pop_front()
        {
            let id = client.id();
            client
                .send_frame(&ClientFrame::History(History {
                    id,
                    room: room.clone(),
                    before: Some(to + 1),
                    after: Some(from - 1),
                    limit: Some(PAGE),
                }))
                .await?;
            pending.insert(id, (room, from, to));
        }
        if pending.is_empty() {
            break;
        }
        match client.recv().await? {
            Incoming::Frame(ServerFrame::Ok(ok)) => {
                let (room, _, to) = pending.remove(&ok.re).context("an unexpected ok")?;
                let page: HistoryOk = ok.decode()?;
                seen += page.events.len();
                if page.events.len() == PAGE as usize {
                    let last = page.events.last().map_or(to, |event| event.seq);
                    if last < to {
                        gaps.push_back((room, last + 1, to));
                    }
                }
            }
            Incoming::Frame(ServerFrame::Err(err)) => bail!("history refused: {}", err.msg),
            Incoming::Frame(_) => {}
            Incoming::Closed(code) => bail!("the hub closed the connection ({code:?})"),
        }
    }
    let elapsed = started.elapsed();
    ensure!(
        seen == total,
        "the bare client saw {seen} events, not {total}"
    );
    Ok(elapsed)
}
