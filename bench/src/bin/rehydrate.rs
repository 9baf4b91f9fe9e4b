//! `roundtable-bench-rehydrate`: how long a fresh cache takes to mirror a hub holding
//! `--events` events, and how that compares with the floor: a bare protocol client that
//! downloads and decodes the same events (same sync, same history pages) and stores nothing.
//!
//! One hub process is seeded once (rooms of messages with mentions, task snapshots, usage
//! and status events, as agents write them); then the two clients alternate for `--runs`
//! rounds, each from nothing. A core run ends when its sync is idle, its gaps are filled
//! and it holds every event; the report gives each run, the medians and their ratio, and
//! how long reads of the cache took while the core caught up (a view repainting).

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use roundtable_core::profile::{Profile, Secret};
use roundtable_core::{Core, SyncState};
use roundtable_protocol::client::{ClientFrame, History, SyncCmd};
use roundtable_protocol::server::{HistoryOk, ServerFrame};
use roundtable_testkit::{Client, HubProcess, Incoming};

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
        None => roundtable_testkit::roundtable_beside_this_binary()?,
    };
    let data = tempfile::tempdir()?;
    let hub = HubProcess::start(&hub_bin, data.path(), &["--no-rate-limit"]).await;
    let user = roundtable_testkit::signup(hub.addr, "dana").await?;
    let token = user.token.clone();

    let seeding = Instant::now();
    let total =
        roundtable_testkit::seed::seed(&hub.ws_url(), &token, args.rooms, args.events).await?;
    println!(
        "# roundtable-bench-rehydrate: {} events written by clients in {} rooms ({} in all with the hub's own), seeded in {:.1} s, {} runs",
        args.events,
        args.rooms,
        total,
        seeding.elapsed().as_secs_f64(),
        args.runs
    );
    println!("# run  core_s  bare_s  reads  read_p50_ms  read_p99_ms  read_max_ms");
    let mut core_times = Vec::new();
    let mut bare_times = Vec::new();
    let mut all_reads = Vec::new();
    for run in 1..=args.runs {
        let (core, mut reads) = rehydrate_core(&hub, &user, total).await?;
        let bare = download(&hub.ws_url(), &token, total).await?;
        println!(
            "  {run:>3}  {:.3}  {:.3}  {:>5}  {:.2}  {:.2}  {:.2}",
            core.as_secs_f64(),
            bare.as_secs_f64(),
            reads.len(),
            quantile(&mut reads, 0.5).as_secs_f64() * 1e3,
            quantile(&mut reads, 0.99).as_secs_f64() * 1e3,
            quantile(&mut reads, 1.0).as_secs_f64() * 1e3,
        );
        core_times.push(core);
        bare_times.push(bare);
        all_reads.extend(reads);
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
    println!(
        "reads during catch-up: {} in all, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        all_reads.len(),
        quantile(&mut all_reads, 0.5).as_secs_f64() * 1e3,
        quantile(&mut all_reads, 0.99).as_secs_f64() * 1e3,
        quantile(&mut all_reads, 1.0).as_secs_f64() * 1e3,
    );
    Ok(())
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// A fresh profile and cache; timed from opening the core to holding all `total` events.
/// Meanwhile another task reads the cache as a view would on every repaint (the rooms
/// with their unread counts, then the latest 50 messages of one): how long each read took
/// is the second result.
async fn rehydrate_core(
    hub: &HubProcess,
    user: &roundtable_protocol::server::SignupOk,
    total: usize,
) -> Result<(Duration, Vec<Duration>)> {
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
    let (done, mut stopped) = tokio::sync::watch::channel(false);
    let viewer = core.clone();
    let reads = tokio::spawn(async move {
        let mut reads = Vec::new();
        while !*stopped.borrow() {
            let started = Instant::now();
            let rooms = viewer.read(|cache| cache.rooms()).await;
            if let Some(room) = rooms
                .ok()
                .and_then(|rooms| rooms.first().map(|r| r.id.clone()))
            {
                let _ = viewer.read(move |cache| cache.messages(&room, 0, 50)).await;
            }
            reads.push(started.elapsed());
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(2)) => {}
                _ = stopped.changed() => {}
            }
        }
        reads
    });
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
    let _ = done.send(true);
    let reads = reads.await?;
    sync.stop().await;
    Ok((elapsed, reads))
}

/// The `q`-quantile of `samples` (sorted in place).
fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples.get(index).copied().unwrap_or_default()
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
