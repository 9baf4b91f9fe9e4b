//! The boards under load, in the real app (through tauri-driver and WebKitWebDriver, as the
//! desktop tests run it), round after round:
//!
//! - **a tasks board of `--tasks` (5,000) tasks**: written into a room of the app's own hub
//!   as `tasks` events of `--lanes` (25) sessions (the hub opened by the bench without rate
//!   limits, as the person, over the protocol); once the app's cache holds them all, the
//!   time from a click on Tasks to the first frame that shows task cards (the page's own
//!   clock), then the board's list scrolled `--step` px per animation frame for `--frames`
//!   frames, each frame's time recorded (a frame longer than 25 ms is dropped);
//! - **idle memory with every board loaded**: the app launched again, shown each board, left
//!   alone for `--idle-secs` (10), against a blank Tauri window (`roundtable-blank`) launched
//!   the same way: the PSS of each process and every process it started, summed
//!   (`/proc/PID/smaps_rollup`). Also reported: the same for the launch that rendered and
//!   scrolled the tasks board before it showed every board;
//! - **input latency while the core ingests `--log-mb` (1024) MB of logs**: Claude Code
//!   transcripts in the real format in the app's `HOME`, read by its watcher's first pass
//!   while the costs board is on screen (it refetches as figures arrive); every 30 ms the
//!   page queues a task and waits for the frame after it, which is what an input waits for:
//!   its p50, p99 and max, over the whole first pass.
//!
//! `cargo bench -p roundtable-desktop --features bench-peer --bench boards [-- --rounds 3]`; needs what the
//! desktop tests need. Logs of every launch go to `target/bench-boards/`.

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

#[path = "../tests/support/mod.rs"]
#[allow(
    dead_code,
    reason = "shared with the end-to-end tests, which use more of it"
)]
mod support;

#[path = "../tests/support/measure.rs"]
#[allow(
    dead_code,
    reason = "shared with the shell's benchmark, which reports more of each process"
)]
mod measure;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use fantoccini::Client;
use measure::{
    intervals, launch, new_room_by, numbers, open_app_hub, person_token, quantile, run_async,
    sorted, tree, wait_css,
};
use roundtable_protocol::client::{ClientFrame, SendCmd};
use serde_json::{Value, json};
use support::{Bus, Display, Driver, Machine, workspace};

const PATIENCE: Duration = Duration::from_secs(60);
/// A frame interval longer than this is a dropped frame (1.5 × 16.7 ms).
const DROPPED_MS: f64 = 25.0;

struct Args {
    rounds: usize,
    tasks: usize,
    lanes: usize,
    frames: usize,
    step: u32,
    idle: Duration,
    log_mb: usize,
}

impl Args {
    fn parse() -> Result<Args> {
        let mut args = Args {
            rounds: 3,
            tasks: 5_000,
            lanes: 25,
            frames: 300,
            step: 40,
            idle: Duration::from_secs(10),
            log_mb: 1024,
        };
        let mut given = std::env::args().skip(1);
        while let Some(flag) = given.next() {
            if flag == "--bench" {
                continue;
            }
            let mut value = || {
                given
                    .next()
                    .with_context(|| format!("{flag} needs a value"))
            };
            match flag.as_str() {
                "--rounds" => args.rounds = value()?.parse()?,
                "--tasks" => args.tasks = value()?.parse()?,
                "--lanes" => args.lanes = value()?.parse()?,
                "--frames" => args.frames = value()?.parse()?,
                "--step" => args.step = value()?.parse()?,
                "--idle-secs" => args.idle = Duration::from_secs(value()?.parse()?),
                "--log-mb" => args.log_mb = value()?.parse()?,
                "--help" | "-h" => {
                    println!(
                        "cargo bench -p roundtable-desktop --features bench-peer --bench boards -- [--rounds 3] [--tasks 5000] [--lanes 25] [--frames 300] [--step 40] [--idle-secs 10] [--log-mb 1024]"
                    );
                    std::process::exit(0);
                }
                other => bail!("unknown flag {other} (try --help)"),
            }
        }
        ensure!(args.rounds > 0 && args.lanes > 0 && args.tasks >= args.lanes && args.frames > 1);
        Ok(args)
    }
}

struct Round {
    /// Click on Tasks → first frame with task cards, ms.
    render_ms: f64,
    /// Frame intervals while scrolling the board, ms.
    frames: Vec<f64>,
    scrolled_px: f64,
    /// PSS (KiB) of the app with every board loaded, and of the blank window, by process.
    app_pss: Vec<(String, u64)>,
    /// The app before it showed a board (on its start view, with the tasks in its cache).
    app_start_pss: Vec<(String, u64)>,
    /// The app of the tasks board's render and scroll, after it too showed every board.
    app_scrolled_pss: Vec<(String, u64)>,
    blank_pss: Vec<(String, u64)>,
    /// Input latency samples during the first pass over the logs, ms.
    latency: Vec<f64>,
    /// How long the first pass took, and how many files it read.
    ingest: Duration,
    files: u64,
}

fn main() -> Result<()> {
    let args = Args::parse()?;
    let logs = workspace().join("target/bench-boards");
    std::fs::create_dir_all(&logs)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let display = Display::start();
    let mut rounds = Vec::new();
    for round in 1..=args.rounds {
        let log = |what: &str| logs.join(format!("round{round}-{what}.log"));
        eprintln!("[bench] round {round}");
        let done = runtime.block_on(one_round(&args, &display, &log))?;
        eprintln!("[bench] {}", row(round, &done));
        rounds.push(done);
    }
    print!("{}", report(&args, &rounds));
    Ok(())
}

/// A launch of `binary` on `machine` through WebDriver.
struct Launch {
    client: Client,
    driver: Driver,
    _bus: Bus,
}

impl Launch {
    async fn start(
        machine: &Machine,
        display: &Display,
        binary: &Path,
        log: &Path,
    ) -> Result<Launch> {
        let bus = Bus::start(&machine.runtime());
        let mut env = machine.env(&display.name, &bus.address);
        env.push((
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ));
        let (driver, client) = launch(&env, log, binary, PATIENCE).await?;
        Ok(Launch {
            client,
            driver,
            _bus: bus,
        })
    }

    async fn stop(self, binary: &Path) {
        let _ = self.client.close().await;
        let started = Instant::now();
        while self.driver.launched(binary).is_some() && started.elapsed() < PATIENCE {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The PSS (KiB) of the launched process and of every process it started, by name.
    fn pss(&self, binary: &Path) -> Result<Vec<(String, u64)>> {
        let pid = self
            .driver
            .launched(binary)
            .context("the launched process")?;
        Ok(tree(pid)
            .into_iter()
            .map(|process| (process.name, process.pss))
            .collect())
    }
}

fn total(processes: &[(String, u64)]) -> u64 {
    processes.iter().map(|(_, pss)| pss).sum()
}

fn breakdown(processes: &[(String, u64)]) -> String {
    processes
        .iter()
        .map(|(name, pss)| format!("{name} {:.1}", *pss as f64 / 1024.0))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn one_round(args: &Args, display: &Display, log: &dyn Fn(&str) -> PathBuf) -> Result<Round> {
    let app = support::app_bin();
    let blank = PathBuf::from(env!("CARGO_BIN_EXE_roundtable-blank"));
    let machine = Machine::new();

    // The person and the app's hub, then the tasks written into it while the app is closed.
    let first = Launch::start(&machine, display, &app, &log("first")).await?;
    wait_css(&first.client, "[data-testid='nav-rooms']", PATIENCE).await?;
    first.stop(&app).await;
    seed_tasks(&machine, args).await?;

    // The tasks board, then every board, then idle.
    let launch = Launch::start(&machine, display, &app, &log("app")).await?;
    let client = &launch.client;
    wait_css(client, "[data-testid='nav-rooms']", PATIENCE).await?;
    let started = Instant::now();
    loop {
        let board = run_async(
            client,
            "return await window.__TAURI_INTERNALS__.invoke('task_board');",
            vec![],
        )
        .await?;
        let count: usize = board["lanes"]
            .as_array()
            .map(|lanes| {
                lanes
                    .iter()
                    .map(|lane| lane["tasks"].as_array().map_or(0, Vec::len))
                    .sum()
            })
            .unwrap_or(0);
        if count >= args.tasks {
            break;
        }
        ensure!(
            started.elapsed() < PATIENCE * 2,
            "the app's cache holds {count} tasks"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Before any board is shown (the start view), for comparison.
    tokio::time::sleep(args.idle).await;
    let app_start_pss = launch.pss(&app)?;
    let rendered = run_async(client, RENDER, vec![]).await?;
    let render_ms = rendered["ms"].as_f64().context("a render time")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let scrolled = run_async(client, SCROLL, vec![json!(args.frames), json!(args.step)]).await?;
    let times = numbers(&scrolled["times"], "frame times")?;
    ensure!(times.len() == args.frames, "frames: {scrolled}");
    let frames = intervals(&times);
    visit_every_board(client).await?;
    tokio::time::sleep(args.idle).await;
    let app_scrolled_pss = launch.pss(&app)?;
    launch.stop(&app).await;

    // Idle memory with every board loaded: a launch that shows each board, then rests.
    let launch = Launch::start(&machine, display, &app, &log("memory")).await?;
    wait_css(&launch.client, "[data-testid='nav-rooms']", PATIENCE).await?;
    visit_every_board(&launch.client).await?;
    tokio::time::sleep(args.idle).await;
    let app_pss = launch.pss(&app)?;
    launch.stop(&app).await;

    let blank_machine = Machine::new();
    let empty = Launch::start(&blank_machine, display, &blank, &log("blank")).await?;
    tokio::time::sleep(args.idle).await;
    let blank_pss = empty.pss(&blank)?;
    empty.stop(&blank).await;

    // Input latency while the first pass reads the logs.
    let files = write_logs(&machine.home(), args.log_mb)?;
    let launch = Launch::start(&machine, display, &app, &log("ingest")).await?;
    let client = &launch.client;
    wait_css(client, "[data-testid='nav-costs']", PATIENCE)
        .await?
        .click()
        .await?;
    let probed = run_async(client, PROBE, vec![]).await?;
    let latency = numbers(&probed["samples"], "latency samples")?;
    ensure!(
        probed["scanned"] == json!(true),
        "the first pass did not end: {}",
        probed["state"]
    );
    let ingest = Duration::from_secs_f64(probed["ms"].as_f64().unwrap_or(0.0) / 1e3);
    launch.stop(&app).await;

    Ok(Round {
        render_ms,
        frames,
        scrolled_px: scrolled["scrolled"].as_f64().unwrap_or(0.0),
        app_pss,
        app_start_pss,
        app_scrolled_pss,
        blank_pss,
        latency,
        ingest,
        files,
    })
}

/// Shows every board (and the rooms), each until it is on screen.
async fn visit_every_board(client: &Client) -> Result<()> {
    for view in [
        "away",
        "architecture",
        "costs",
        "sessions",
        "tasks",
        "rooms",
    ] {
        wait_css(client, &format!("[data-testid='nav-{view}']"), PATIENCE)
            .await?
            .click()
            .await?;
        wait_css(client, &format!("[data-testid='view-{view}']"), PATIENCE).await?;
    }
    Ok(())
}

/// Writes the tasks into a room of the (stopped) app's hub, as the person.
async fn seed_tasks(machine: &Machine, args: &Args) -> Result<()> {
    let token = person_token(machine)?;
    let hub = open_app_hub(machine, PATIENCE).await?;
    let addr = hub
        .tcp
        .context("the bench opens the app's hub with a port")?;
    let address = format!("ws://{addr}/v1/ws");
    let seeded = write_tasks(&address, &token, args).await;
    // Stopped (off the async workers) whatever happened, then the seeding's outcome.
    tokio::task::spawn_blocking(move || hub.stop()).await??;
    seeded
}

/// The tasks, as `tasks` events of `args.lanes` sessions in a new room.
async fn write_tasks(address: &str, token: &str, args: &Args) -> Result<()> {
    let (mut client, room) = new_room_by(address, token, "Five thousand tasks").await?;
    // The lanes are the person's own sessions: the hub takes work reports only from the
    // agent named or its owner.
    let (room, me) = (room.id, room.creator);
    let statuses = ["pending", "in_progress", "completed", "completed"];
    for lane in 0..args.lanes {
        let count = args.tasks / args.lanes + usize::from(lane < args.tasks % args.lanes);
        let tasks: Vec<Value> = (0..count)
            .map(|n| {
                json!({"title": format!("task {lane}.{n}: {}", if n % 5 == 0 { "wire the loader into the parser and test it" } else { "fix a case" }),
                       "status": statuses[(n + lane) % statuses.len()]})
            })
            .collect();
        let id = client.id();
        client
            .send_frame(&ClientFrame::Send(SendCmd {
                id,
                room: room.clone(),
                client_key: format!("bench-tasks-{lane:04}"),
                kind: "tasks".into(),
                body: json!({"session": {"agent": me, "framework": "claude-code",
                    "session_id": format!("s-{lane}")}, "source": "TodoWrite", "tasks": tasks}),
            }))
            .await?;
        let reply = client.reply_to(id).await?;
        client.backlog.clear();
        if let Err(err) = reply {
            bail!("a tasks event was refused: {} {}", err.code, err.msg);
        }
    }
    Ok(())
}

/// About `mb` MB of Claude Code transcripts (files of 512 KB) under `home`; how many files.
fn write_logs(home: &Path, mb: usize) -> Result<u64> {
    let padding = "x".repeat(400);
    let mut written = 0usize;
    let mut files = 0u64;
    while written < mb * 1_000_000 {
        let dir = home.join(format!(".claude/projects/-work-bench-{}", files % 64));
        std::fs::create_dir_all(&dir)?;
        let session = format!("be7c0000-0000-4000-8000-{files:012}");
        let mut text = String::with_capacity(520_000);
        let mut line = 0;
        while text.len() < 512_000 {
            let record = json!({
                "type": "assistant", "requestId": format!("req_{files}_{line}"), "sessionId": session,
                "cwd": "/work/bench", "uuid": format!("u{files}-{line}"), "parentUuid": null,
                "isSidechain": false, "userType": "external", "version": "2.1.240",
                "timestamp": "2026-11-30T09:00:00.000Z",
                "message": {"id": format!("msg_{files}_{line}"), "model": "claude-sonnet-4-5-20250929",
                    "role": "assistant", "type": "message", "content": [{"type": "text", "text": padding}],
                    "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100,
                        "cache_creation_input_tokens": 0}}
            });
            let _ = writeln!(text, "{record}");
            line += 1;
        }
        written += text.len();
        std::fs::write(dir.join(format!("{session}.jsonl")), text)?;
        files += 1;
    }
    Ok(files)
}

/// Click on Tasks → the first frame that shows task cards, by the page's clock.
const RENDER: &str = r#"
const start = performance.now();
document.querySelector("[data-testid='nav-tasks']").click();
for (;;) {
  await new Promise((resolve) => requestAnimationFrame(resolve));
  if (document.querySelector("[data-testid='task-card']")) break;
  if (performance.now() - start > 30000) return { error: "no task card in 30 s" };
}
return { ms: performance.now() - start };
"#;

/// Scrolls the board's list down by `step` px per animation frame for `frames` frames.
const SCROLL: &str = r#"
const [frames, step] = args;
const root = document.querySelector("[data-testid='tasks-rows']");
const scrolls = (el) => el.scrollHeight > el.clientHeight + 1 && /(auto|scroll)/.test(getComputedStyle(el).overflowY);
const list = scrolls(root) ? root : Array.from(root.querySelectorAll("*")).find(scrolls);
if (!list) return { error: "the tasks board does not scroll" };
const times = [];
let scrolled = 0;
await new Promise((resolve) => {
  const next = (time) => {
    times.push(time);
    const before = list.scrollTop;
    list.scrollTop = before + step;
    scrolled += list.scrollTop - before;
    if (times.length < frames) requestAnimationFrame(next);
    else resolve();
  };
  requestAnimationFrame(() => requestAnimationFrame(next));
});
return { times, scrolled };
"#;

/// Every 30 ms, a task queued and the frame after it, until the first pass has ended.
const PROBE: &str = r#"
const invoke = (command, payload) => window.__TAURI_INTERNALS__.invoke(command, payload);
const start = performance.now();
const samples = [];
let state = null;
let lastAsked = 0;
for (;;) {
  const queued = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 0));
  await new Promise((resolve) => requestAnimationFrame(resolve));
  samples.push(performance.now() - queued);
  if (performance.now() - lastAsked > 500) {
    lastAsked = performance.now();
    state = await invoke("work_scan");
    if (state.state === "watching" && samples.length > 20) break;
    if (state.state === "failed") break;
  }
  if (performance.now() - start > 600000) break;
  await new Promise((resolve) => setTimeout(resolve, 30));
}
return { samples, ms: performance.now() - start, scanned: state?.state === "watching", state };
"#;

fn row(round: usize, done: &Round) -> String {
    let frames = sorted(done.frames.iter().copied());
    let latency = sorted(done.latency.iter().copied());
    format!(
        "| {round} | {:.0} | {:.1} / {:.1} / {:.1} | {} | {:.1} | {:.1} | {:.2}× | {} files, {:.1} s | {:.1} / {:.1} / {:.1} |",
        done.render_ms,
        quantile(&frames, 0.5),
        quantile(&frames, 0.95),
        quantile(&frames, 1.0),
        done.frames.iter().filter(|&&d| d > DROPPED_MS).count(),
        total(&done.app_pss) as f64 / 1024.0,
        total(&done.blank_pss) as f64 / 1024.0,
        total(&done.app_pss) as f64 / total(&done.blank_pss) as f64,
        done.files,
        done.ingest.as_secs_f64(),
        quantile(&latency, 0.5),
        quantile(&latency, 0.99),
        quantile(&latency, 1.0),
    )
}

fn report(args: &Args, rounds: &[Round]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# boards: {} tasks in {} lanes, {} frames × {} px; idle {} s; {} MB of logs; {} rounds\n",
        args.tasks,
        args.lanes,
        args.frames,
        args.step,
        args.idle.as_secs(),
        args.log_mb,
        rounds.len()
    );
    let _ = writeln!(
        out,
        "| round | tasks board render ms | scroll frame median / p95 / max ms | dropped (> {DROPPED_MS} ms) | app PSS MiB (every board) | blank PSS MiB | app/blank | first pass | input latency p50 / p99 / max ms |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for (index, round) in rounds.iter().enumerate() {
        let _ = writeln!(out, "{}", row(index + 1, round));
    }
    for (index, round) in rounds.iter().enumerate() {
        let _ = writeln!(
            out,
            "\nround {}: PSS MiB by process: app with every board: {}; app before any board: {}; app that also scrolled the tasks board: {} ({:.2}× the blank window); blank: {}",
            index + 1,
            breakdown(&round.app_pss),
            breakdown(&round.app_start_pss),
            breakdown(&round.app_scrolled_pss),
            total(&round.app_scrolled_pss) as f64 / total(&round.blank_pss) as f64,
            breakdown(&round.blank_pss)
        );
    }
    let all_frames: Vec<f64> = rounds
        .iter()
        .flat_map(|r| r.frames.iter().copied())
        .collect();
    let all_latency: Vec<f64> = rounds
        .iter()
        .flat_map(|r| r.latency.iter().copied())
        .collect();
    let renders = sorted(rounds.iter().map(|r| r.render_ms));
    let ratios = sorted(
        rounds
            .iter()
            .map(|r| total(&r.app_pss) as f64 / total(&r.blank_pss) as f64),
    );
    let _ = writeln!(
        out,
        "\nmedians: render {:.0} ms (target ≤ 300); {} of {} frames dropped (target 0), {:.0} px scrolled in round 1; memory {:.2}× the blank window (target ≤ 1.25×); input latency p99 {:.1} ms over {} samples (target ≤ 50)",
        quantile(&renders, 0.5),
        all_frames.iter().filter(|&&d| d > DROPPED_MS).count(),
        all_frames.len(),
        rounds.first().map_or(0.0, |r| r.scrolled_px),
        quantile(&ratios, 0.5),
        quantile(&sorted(all_latency.iter().copied()), 0.99),
        all_latency.len()
    );
    out
}
