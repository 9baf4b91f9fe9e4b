//! The desktop app against a blank Tauri window built the same way (`roundtable-blank`:
//! same `tauri` crate and features, same `tauri.conf.json`, same WebKitGTK, a page of one
//! word), in one run, round after round (app, then blank):
//!
//! - **idle memory**: each launched directly (no WebDriver) on a fresh machine (temporary
//!   `HOME`, `ROUNDTABLE_HOME`, XDG directories, private D-Bus), and after `--idle-secs`
//!   (10) the PSS and RSS of its process and every process it started (WebKit's web and
//!   network processes…), summed, from `/proc/PID/smaps_rollup`;
//! - **cold start to first paint**: each launched on a fresh machine through tauri-driver
//!   and WebKitWebDriver; the page's first contentful paint (`window.__roundtableFirstPaint`,
//!   epoch ms, stored by a `PerformanceObserver` in both pages) minus the start of the
//!   process (from `/proc/PID/stat`, read the same way for both). For the app, also minus
//!   its own clock at the top of `run()` (`started_at_ms`), as a cross-check;
//! - **scrolling a room of `--messages` (10,000) messages** (the app only): the app of the
//!   memory launch, stopped, has that many messages written into a room of its own hub's data
//!   (the hub opened by the bench without rate limits, as the person, over the protocol), is
//!   started again through WebDriver, waits until its cache holds them all and its sync is
//!   idle, opens the room, and scrolls the message list from the bottom up, `--step` px per
//!   animation frame for `--frames` frames, recording each frame's time. Older pages load
//!   while it scrolls (as when a person scrolls up): their loading is part of what is timed.
//!
//! `cargo bench -p roundtable-desktop --features bench-peer --bench desktop [-- --rounds 5]`; needs Xvfb (unless
//! `DISPLAY` is set), dbus-daemon, tauri-driver and WebKitWebDriver, as the desktop tests do.
//! Logs of every launch go to `target/bench-desktop/`.

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

#[path = "../tests/support/mod.rs"]
#[allow(
    dead_code,
    reason = "shared with the end-to-end tests, which use more of it"
)]
mod support;

#[path = "../tests/support/measure.rs"]
mod measure;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use fantoccini::Client;
use measure::{
    Process, intervals, launch, median, new_room, numbers, open_app_hub, person_token, quantile,
    run_async, sorted, tree, wait_css,
};
use roundtable_desktop::CPU_RENDERING;
use roundtable_protocol::client::{ClientFrame, SendCmd};
use serde_json::json;
use support::{Bus, Display, Machine, Tree, UNSET, workspace};

/// How long the bench waits for anything the app should do.
const PATIENCE: Duration = Duration::from_secs(60);
/// Sends in flight while seeding.
const IN_FLIGHT: usize = 64;
/// A frame interval longer than this is a dropped frame (1.5 × 16.7 ms: WebKitGTK's
/// timestamps are quantized to about 1 ms, so one budget plus a millisecond is noise).
const DROPPED_MS: f64 = 25.0;
const FRAME_MS: f64 = 1000.0 / 60.0;
/// Frames timed with the room open before it scrolls.
const IDLE_FRAMES: usize = 120;

struct Args {
    rounds: usize,
    idle: Duration,
    messages: usize,
    frames: usize,
    step: u32,
    /// Only the scrolling (the app's memory launch prepares its machine): for working on it.
    scroll_only: bool,
    /// Only the Markdown rendering of the largest message a room holds.
    markdown_only: bool,
}

impl Args {
    fn parse() -> Result<Args> {
        let mut args = Args {
            rounds: 5,
            idle: Duration::from_secs(10),
            messages: 10_000,
            frames: 300,
            step: 40,
            scroll_only: false,
            markdown_only: false,
        };
        let mut given = std::env::args().skip(1);
        while let Some(flag) = given.next() {
            // `cargo bench` passes `--bench` to every bench target.
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
                "--idle-secs" => args.idle = Duration::from_secs(value()?.parse()?),
                "--messages" => args.messages = value()?.parse()?,
                "--frames" => args.frames = value()?.parse()?,
                "--step" => args.step = value()?.parse()?,
                "--scroll-only" => args.scroll_only = true,
                "--markdown-only" => args.markdown_only = true,
                "--help" | "-h" => {
                    println!(
                        "cargo bench -p roundtable-desktop --features bench-peer --bench desktop -- [--rounds 5] [--idle-secs 10] [--messages 10000] [--frames 300] [--step 40] [--scroll-only] [--markdown-only]"
                    );
                    std::process::exit(0);
                }
                other => bail!("unknown flag {other} (try --help)"),
            }
        }
        ensure!(args.rounds > 0 && args.frames > 1 && args.messages > 0);
        Ok(args)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    App,
    Blank,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::App => "app",
            Target::Blank => "blank",
        }
    }

    fn binary(self) -> PathBuf {
        match self {
            Target::App => support::app_bin(),
            Target::Blank => PathBuf::from(env!("CARGO_BIN_EXE_roundtable-blank")),
        }
    }
}

#[derive(Debug, Clone)]
struct Memory {
    processes: Vec<Process>,
}

impl Memory {
    fn pss(&self) -> u64 {
        self.processes.iter().map(|p| p.pss).sum()
    }

    fn rss(&self) -> u64 {
        self.processes.iter().map(|p| p.rss).sum()
    }
}

#[derive(Debug, Clone, Copy)]
struct Paint {
    /// First contentful paint − process start (from `/proc`), ms.
    from_process: f64,
    /// First contentful paint − the app's own start clock, ms (the app only).
    from_own_clock: Option<f64>,
}

#[derive(Debug, Clone)]
struct Scroll {
    seeded: Duration,
    caught_up: Duration,
    intervals: Vec<f64>,
    /// Pixels actually scrolled (the list's offset moved by), and frames that found the
    /// list at its top (waiting for an older page).
    scrolled_px: f64,
    at_top: u64,
    /// The oldest message the list showed at the end, and how many the room holds.
    oldest_shown: Option<u64>,
    /// Per interval: whether an older page was loading at its start or in the two frames
    /// before (its arrival is drawn in those that follow).
    near_load: Vec<bool>,
    /// Frame intervals of the open room before scrolling: what the page drops doing nothing.
    idle_intervals: Vec<f64>,
}

impl Scroll {
    /// Every round's frames as one run.
    fn combined<'a>(scrolls: impl Iterator<Item = &'a Scroll>) -> Scroll {
        let mut all = Scroll {
            seeded: Duration::ZERO,
            caught_up: Duration::ZERO,
            intervals: Vec::new(),
            scrolled_px: 0.0,
            at_top: 0,
            oldest_shown: None,
            near_load: Vec::new(),
            idle_intervals: Vec::new(),
        };
        for s in scrolls {
            all.intervals.extend(&s.intervals);
            all.near_load.extend(&s.near_load);
            all.idle_intervals.extend(&s.idle_intervals);
            all.scrolled_px += s.scrolled_px;
            all.at_top += s.at_top;
        }
        all
    }

    fn sorted(&self) -> Vec<f64> {
        sorted(self.intervals.iter().copied())
    }

    fn median(&self) -> f64 {
        quantile(&self.sorted(), 0.5)
    }

    fn p95(&self) -> f64 {
        quantile(&self.sorted(), 0.95)
    }

    fn max(&self) -> f64 {
        quantile(&self.sorted(), 1.0)
    }

    fn dropped(&self) -> usize {
        self.intervals.iter().filter(|&&d| d > DROPPED_MS).count()
    }

    /// Dropped frames next to the loading of an older page.
    fn dropped_near_load(&self) -> usize {
        self.intervals
            .iter()
            .zip(&self.near_load)
            .filter(|&(&d, &near)| d > DROPPED_MS && near)
            .count()
    }

    /// Frames lost in all: an interval of n budgets lost n − 1.
    fn lost(&self) -> f64 {
        self.intervals
            .iter()
            .map(|d| ((d / FRAME_MS).round() - 1.0).max(0.0))
            .sum()
    }
}

struct Round {
    memory: [Memory; 2],
    paint: [Paint; 2],
    /// The app's room, and the blank window's static rows.
    scroll: [Scroll; 2],
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() -> Result<()> {
    let args = Args::parse()?;
    let logs = workspace().join("target/bench-desktop");
    std::fs::create_dir_all(&logs)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let display = Display::start();
    let ticks = clock_ticks();
    eprintln!(
        "[bench] app {}, blank {}, display {}, logs in {}",
        Target::App.binary().display(),
        Target::Blank.binary().display(),
        display.name,
        logs.display()
    );
    let mut rounds = Vec::new();
    let mut scrolls = Vec::new();
    let mut renders = Vec::new();
    for round in 1..=args.rounds {
        let log = |what: &str| logs.join(format!("round{round}-{what}.log"));
        eprintln!("[bench] round {round}: idle memory");
        let (app_memory, machine) = memory(Target::App, &display, args.idle, &log("app-memory"))?;
        if args.markdown_only {
            eprintln!("[bench] round {round}: Markdown");
            let times = runtime.block_on(markdown(&machine, &display, &log("app-markdown")))?;
            eprintln!("[bench] {}", markdown_line(&times));
            renders.extend(times);
            continue;
        }
        if args.scroll_only {
            eprintln!("[bench] round {round}: scrolling");
            let scroll = [
                runtime.block_on(scroll(&machine, &display, &args, &log("app-scroll")))?,
                runtime.block_on(blank_scroll(&display, &args, &log("blank-scroll")))?,
            ];
            eprint!("{}", scroll_report(&args, std::slice::from_ref(&scroll)));
            scrolls.push(scroll);
            continue;
        }
        let (blank_memory, _) = memory(Target::Blank, &display, args.idle, &log("blank-memory"))?;
        eprintln!("[bench] round {round}: first paint");
        let app_paint =
            runtime.block_on(first_paint(Target::App, &display, ticks, &log("app-paint")))?;
        let blank_paint = runtime.block_on(first_paint(
            Target::Blank,
            &display,
            ticks,
            &log("blank-paint"),
        ))?;
        eprintln!("[bench] round {round}: scrolling");
        let scroll = [
            runtime.block_on(scroll(&machine, &display, &args, &log("app-scroll")))?,
            runtime.block_on(blank_scroll(&display, &args, &log("blank-scroll")))?,
        ];
        let done = Round {
            memory: [app_memory, blank_memory],
            paint: [app_paint, blank_paint],
            scroll,
        };
        eprintln!("[bench] {}", row(round, &done));
        rounds.push(done);
    }
    if args.markdown_only {
        println!("{}", markdown_line(&renders));
    } else if args.scroll_only {
        print!("{}", scroll_report(&args, &scrolls));
    } else {
        print!("{}", report(&args, &rounds));
    }
    Ok(())
}

/// The environment of a launch on `machine`: the runner's, with the machine's directories,
/// the display and the bus, and a plain system `PATH` (no agent CLIs to detect).
fn launch_env(machine: &Machine, display: &Display, bus: &Bus) -> Vec<(String, String)> {
    let mut env = machine.env(&display.name, &bus.address);
    env.push((
        "PATH".into(),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
    ));
    env
}

/// Starts `target` directly on a fresh machine, waits `idle`, and reads the memory of its
/// process tree. The machine is returned (the app's person and hub are on it).
fn memory(
    target: Target,
    display: &Display,
    idle: Duration,
    log: &Path,
) -> Result<(Memory, Machine)> {
    let machine = Machine::new();
    let bus = Bus::start(&machine.runtime());
    let env = launch_env(&machine, display, &bus);
    let log = std::fs::File::create(log)?;
    let mut command = Command::new(target.binary());
    command
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(log.try_clone()?)
        .stderr(log);
    for name in UNSET {
        command.env_remove(name);
    }
    let mut app = Tree::spawn(&mut command);
    std::thread::sleep(idle);
    ensure!(
        app.running(),
        "the {} exited before its memory was read",
        target.name()
    );
    let processes = tree(app.id());
    ensure!(
        processes.iter().any(|p| p.name == "WebKitWebProcess"),
        "the {} has no web process after {idle:?}: {processes:?}",
        target.name()
    );
    if target == Target::App {
        ensure!(
            machine.hub_address().is_some(),
            "the app has not started its hub after {idle:?}"
        );
    }
    drop(app);
    drop(bus);
    Ok((Memory { processes }, machine))
}

/// Clock ticks per second of `/proc/PID/stat`'s start time.
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64() * 1e3)
}

/// When process `pid` started, in ms since the epoch (to a clock tick, 10 ms).
fn process_start_ms(pid: u32, ticks: f64) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let uptime = std::fs::read_to_string("/proc/uptime")?;
    let now = epoch_ms();
    let after_name = &stat[stat.rfind(')').context("a stat line")? + 1..];
    let started: f64 = after_name
        .split_whitespace()
        .nth(19)
        .context("a start time")?
        .parse()?;
    let uptime: f64 = uptime
        .split_whitespace()
        .next()
        .context("an uptime")?
        .parse()?;
    Ok(now - (uptime - started / ticks) * 1e3)
}

/// Launches `target` on a fresh machine through WebDriver and times its first paint.
async fn first_paint(target: Target, display: &Display, ticks: f64, log: &Path) -> Result<Paint> {
    let machine = Machine::new();
    let bus = Bus::start(&machine.runtime());
    let env = launch_env(&machine, display, &bus);
    let (driver, client) = launch(&env, log, &target.binary(), PATIENCE).await?;
    let measured = async {
        let pid = driver
            .launched(&target.binary())
            .with_context(|| format!("the {} process under tauri-driver", target.name()))?;
        let started = process_start_ms(pid, ticks)?;
        let asked = Instant::now();
        let painted = loop {
            let value = client
                .execute("return window.__roundtableFirstPaint ?? null;", vec![])
                .await?;
            if let Some(painted) = value.as_f64() {
                break painted;
            }
            ensure!(asked.elapsed() < PATIENCE, "no first paint in {PATIENCE:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let own = match target {
            Target::App => run_async(
                &client,
                "return await window.__TAURI_INTERNALS__.invoke('started_at_ms');",
                vec![],
            )
            .await?
            .as_f64(),
            Target::Blank => None,
        };
        Ok(Paint {
            from_process: painted - started,
            from_own_clock: own.map(|own| painted - own),
        })
    }
    .await;
    let _ = client.close().await;
    drop(driver);
    drop(bus);
    measured
}

/// The peer of the scrolling: the blank window given the same messages as plain rows, all of
/// them in the page (no virtualization, no script, nothing to load), scrolled the same way.
/// What WebKit on this machine does when a page has nothing to do but paint.
async fn blank_scroll(display: &Display, args: &Args, log: &Path) -> Result<Scroll> {
    let machine = Machine::new();
    let bus = Bus::start(&machine.runtime());
    let mut env = launch_env(&machine, display, &bus);
    // Painted as the app paints (`roundtable_desktop::choose_rendering`), unless the person
    // running the bench chose otherwise for both.
    if std::env::var_os(CPU_RENDERING).is_none() {
        env.push((CPU_RENDERING.into(), "1".into()));
    }
    let (driver, client) = launch(&env, log, &Target::Blank.binary(), PATIENCE).await?;
    let measured = async {
        let texts: Vec<String> = (1..=args.messages).map(seed_text).collect();
        run_async(&client, STATIC_ROWS, vec![json!(texts)]).await?;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        time_scroll(&client, args, &log.with_extension("json")).await
    }
    .await;
    let _ = client.close().await;
    drop(driver);
    drop(bus);
    measured
}

/// The blank page's rows: who, when and the text, as the app shows a message; at the end.
const STATIC_ROWS: &str = r#"
const [texts] = args;
document.body.replaceChildren();
document.body.style.margin = "0";
const list = document.createElement("div");
list.dataset.testid = "messages";
list.style.cssText = "height: 100vh; overflow-y: auto; font: 15px system-ui, sans-serif; line-height: 1.45";
const rows = texts.map((text) => {
  const row = document.createElement("article");
  row.dataset.testid = "message";
  row.style.cssText = "padding: 0.45rem 1rem";
  const header = document.createElement("header");
  header.innerHTML = "<b>person</b> <small>10:42</small>";
  const body = document.createElement("p");
  body.dataset.testid = "message-text";
  body.style.cssText = "margin: 0.15rem 0 0; white-space: pre-wrap";
  body.textContent = text;
  row.append(header, body);
  return row;
});
list.append(...rows);
document.body.append(list);
list.scrollTop = list.scrollHeight;
return {};
"#;

/// The text of the n-th seeded message: a line of work talk, every fifth a paragraph, so
/// rows differ in height as in a real room.
fn seed_text(n: usize) -> String {
    if n.is_multiple_of(5) {
        format!(
            "message {n}: ran the whole suite after the rebase; 214 passed, 3 skipped. The parser now \
             handles nested blocks and the lexer keeps line numbers across includes, so the error \
             messages point at the right file. Next I will look at the slow test in the sync module."
        )
    } else {
        format!("message {n}: ran the suite, 214 passed, moving on to the lexer")
    }
}

/// Writes `messages` messages into a new room as the person, `IN_FLIGHT` at a time; the
/// room's id.
async fn seed(ws_url: &str, token: &str, messages: usize) -> Result<String> {
    let (mut client, room) = new_room(ws_url, token, "Ten thousand").await?;
    let mut in_flight = std::collections::VecDeque::new();
    for n in 1..=messages {
        let id = client.id();
        client
            .send_frame(&ClientFrame::Send(SendCmd {
                id,
                room: room.clone(),
                client_key: format!("bench-{n:08}"),
                kind: "message".into(),
                body: json!({ "text": seed_text(n) }),
            }))
            .await?;
        in_flight.push_back(id);
        if in_flight.len() >= IN_FLIGHT {
            confirm(&mut client, in_flight.pop_front().unwrap()).await?;
        }
    }
    while let Some(id) = in_flight.pop_front() {
        confirm(&mut client, id).await?;
    }
    Ok(room)
}

async fn confirm(client: &mut roundtable_testkit::Client, id: u64) -> Result<()> {
    let reply = client.reply_to(id).await?;
    // Our own messages come back as events; nothing reads them.
    client.backlog.clear();
    match reply {
        Ok(_) => Ok(()),
        Err(err) => bail!("a seeded message was refused: {} {}", err.code, err.msg),
    }
}

/// Seeds a room on the (stopped) app's hub, starts the app through WebDriver, and scrolls
/// the room.
async fn scroll(machine: &Machine, display: &Display, args: &Args, log: &Path) -> Result<Scroll> {
    let token = person_token(machine)?;
    let seeding = Instant::now();
    let hub = open_app_hub(machine, PATIENCE).await?;
    let addr = hub
        .tcp
        .context("the bench opens the app's hub with a port")?;
    let seeded_room = seed(&format!("ws://{addr}/v1/ws"), &token, args.messages).await;
    // Stopped (off the async workers) whatever happened, then the seeding's outcome.
    tokio::task::spawn_blocking(move || hub.stop()).await??;
    let room = seeded_room?;
    let seeded = seeding.elapsed();

    let bus = Bus::start(&machine.runtime());
    let env = launch_env(machine, display, &bus);
    let started = Instant::now();
    let (driver, client) = launch(&env, log, &Target::App.binary(), PATIENCE).await?;
    let measured = scroll_room(&client, &room, args, started, &log.with_extension("json")).await;
    let _ = client.close().await;
    drop(driver);
    drop(bus);
    Ok(Scroll {
        seeded,
        ..measured?
    })
}

const CATCH_UP: &str = r#"
const [room, total] = args;
const invoke = (command, payload) => window.__TAURI_INTERNALS__.invoke(command, payload);
const state = await invoke("app_state");
let count = 0;
let before = null;
for (;;) {
  const page = await invoke("room_messages", { room, beforeSeq: before, limit: 500 });
  count += page.length;
  if (page.length < 500 || page[0].seq === null) break;
  before = page[0].seq;
}
return { sync: state.sync.state, count, total };
"#;

/// Scrolls the list up from the bottom by `step` px per animation frame for `frames` frames.
const SCROLL: &str = r#"
const [frames, step, idleFrames] = args;
const root = document.querySelector("[data-testid='messages']");
const scrolls = (el) => el.scrollHeight > el.clientHeight + 1 && /(auto|scroll)/.test(getComputedStyle(el).overflowY);
const list = scrolls(root) ? root : Array.from(root.querySelectorAll("*")).find(scrolls);
if (!list) return { error: "the message list does not scroll" };
const status = document.querySelector(".conversation .status");
const frame = (count, each) => new Promise((resolve) => {
  const seen = [];
  const step_ = (time) => {
    seen.push(each(time));
    if (seen.length < count) requestAnimationFrame(step_);
    else resolve(seen);
  };
  requestAnimationFrame(() => requestAnimationFrame(step_));
});
let mutations = 0;
new MutationObserver((records) => { mutations += records.length; }).observe(root, { childList: true, subtree: true });
const idle = await frame(idleFrames, (time) => time);
let scrolled = 0;
let atTop = 0;
let expected = null;
const seen = await frame(frames, (time) => {
  const start = performance.now();
  const loading = (status?.textContent ?? "").includes("Loading");
  const at = list.scrollTop;
  if (at <= 0) atTop += 1;
  const corrected = expected === null ? 0 : at - expected;
  list.scrollTop = Math.max(0, at - step);
  expected = list.scrollTop;
  scrolled += at - expected;
  const done = { time, loading, corrected, mutations, rows: root.querySelectorAll("[data-testid='message']").length, work: performance.now() - start, late: start - time };
  mutations = 0;
  return done;
});
const shown = Array.from(root.querySelectorAll("[data-testid='message-text']"))
  .map((el) => /^message (\d+):/.exec(el.textContent ?? ""))
  .filter(Boolean)
  .map((match) => Number(match[1]));
return { idle, frames: seen, scrolled, atTop, oldest: shown.length ? Math.min(...shown) : null, status: status?.textContent ?? null };
"#;

async fn scroll_room(
    client: &Client,
    room: &str,
    args: &Args,
    started: Instant,
    raw: &Path,
) -> Result<Scroll> {
    wait_css(client, "[data-testid='nav-rooms']", PATIENCE).await?;
    // Until the app's cache holds every message and its sync is idle.
    let caught_up = loop {
        let state = run_async(client, CATCH_UP, vec![json!(room), json!(args.messages)]).await?;
        let count = state["count"].as_u64().unwrap_or(0) as usize;
        if count >= args.messages && state["sync"] == "idle" {
            break started.elapsed();
        }
        ensure!(
            started.elapsed() < PATIENCE * 2,
            "the app did not catch up: {state}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    wait_css(client, "[data-testid='nav-rooms']", PATIENCE)
        .await?
        .click()
        .await?;
    wait_css(client, "[data-testid='view-rooms']", PATIENCE).await?;
    wait_css(client, &format!("[data-testid='room-{room}']"), PATIENCE)
        .await?
        .click()
        .await?;
    wait_css(
        client,
        "[data-testid='messages'] [data-testid='message']",
        PATIENCE,
    )
    .await?;
    // Let it settle at the newest message (and mark the room read).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Ok(Scroll {
        caught_up,
        ..time_scroll(client, args, raw).await?
    })
}

/// Runs `SCROLL` on the page's `[data-testid='messages']` and keeps its raw frames in `raw`.
async fn time_scroll(client: &Client, args: &Args, raw: &Path) -> Result<Scroll> {
    let result = run_async(
        client,
        SCROLL,
        vec![json!(args.frames), json!(args.step), json!(IDLE_FRAMES)],
    )
    .await?;
    let frames = result["frames"].as_array().context("frames")?;
    let times: Vec<f64> = frames.iter().filter_map(|f| f["time"].as_f64()).collect();
    ensure!(times.len() == args.frames, "frames: {result}");
    let between = intervals(&times);
    let loading: Vec<bool> = frames
        .iter()
        .map(|f| f["loading"].as_bool().unwrap_or(false))
        .collect();
    let near_load = (1..times.len())
        .map(|end| loading[end.saturating_sub(3)..end].iter().any(|&flag| flag))
        .collect();
    let idle = numbers(&result["idle"], "idle frames")?;
    std::fs::write(raw, serde_json::to_vec_pretty(&result)?)?;
    Ok(Scroll {
        seeded: Duration::ZERO,
        caught_up: Duration::ZERO,
        intervals: between,
        scrolled_px: result["scrolled"].as_f64().unwrap_or(0.0),
        at_top: result["atTop"].as_u64().unwrap_or(0),
        oldest_shown: result["oldest"].as_u64(),
        near_load,
        idle_intervals: intervals(&idle),
    })
}

fn row(round: usize, done: &Round) -> String {
    let [app, blank] = &done.memory;
    let [s, b] = &done.scroll;
    format!(
        "| {round} | {:.1} | {:.1} | {:.2}× | {:.1} | {:.1} | {:.0} | {:.0} | {:.1} / {:.1} / {:.1} | {} | {:.1} / {:.1} / {:.1} | {} |",
        mib(app.pss()),
        mib(blank.pss()),
        app.pss() as f64 / blank.pss() as f64,
        mib(app.rss()),
        mib(blank.rss()),
        done.paint[0].from_process,
        done.paint[1].from_process,
        s.median(),
        s.p95(),
        s.max(),
        s.dropped(),
        b.median(),
        b.p95(),
        b.max(),
        b.dropped(),
    )
}

fn report(args: &Args, rounds: &[Round]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# desktop: the app against a blank Tauri window, {} rounds (idle {} s; {} messages, {} frames × {} px)\n",
        rounds.len(),
        args.idle.as_secs(),
        args.messages,
        args.frames,
        args.step
    );
    let _ = writeln!(
        out,
        "| round | app PSS MiB | blank PSS MiB | app/blank | app RSS MiB | blank RSS MiB | app first paint ms | blank first paint ms | app scroll frame median / p95 / max ms | app dropped (> {DROPPED_MS} ms) | blank scroll frame median / p95 / max ms | blank dropped |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for (index, done) in rounds.iter().enumerate() {
        let _ = writeln!(out, "{}", row(index + 1, done));
    }
    let app_pss = median(rounds.iter().map(|r| r.memory[0].pss() as f64));
    let blank_pss = median(rounds.iter().map(|r| r.memory[1].pss() as f64));
    let app_rss = median(rounds.iter().map(|r| r.memory[0].rss() as f64));
    let blank_rss = median(rounds.iter().map(|r| r.memory[1].rss() as f64));
    let ratios = median(
        rounds
            .iter()
            .map(|r| r.memory[0].pss() as f64 / r.memory[1].pss() as f64),
    );
    let app_paint = median(rounds.iter().map(|r| r.paint[0].from_process));
    let blank_paint = median(rounds.iter().map(|r| r.paint[1].from_process));
    let own_clock = median(rounds.iter().filter_map(|r| r.paint[0].from_own_clock));
    let all = Scroll::combined(rounds.iter().map(|r| &r.scroll[0]));
    let all_blank = Scroll::combined(rounds.iter().map(|r| &r.scroll[1]));
    let _ = writeln!(
        out,
        "| **median** | **{:.1}** | **{:.1}** | **{:.2}×** (ratio of medians {:.2}×) | {:.1} | {:.1} | **{:.0}** | **{:.0}** | {:.1} / {:.1} / {:.1} (all frames) | {} in all | {:.1} / {:.1} / {:.1} (all frames) | {} in all |",
        app_pss / 1024.0,
        blank_pss / 1024.0,
        ratios,
        app_pss / blank_pss,
        app_rss / 1024.0,
        blank_rss / 1024.0,
        app_paint,
        blank_paint,
        all.median(),
        all.p95(),
        all.max(),
        all.dropped(),
        all_blank.median(),
        all_blank.p95(),
        all_blank.max(),
        all_blank.dropped()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "idle memory: app {:.1} MiB PSS against blank {:.1} MiB: {:.2}× (target ≤ 1.25×: {}); RSS {:.1} against {:.1} MiB",
        app_pss / 1024.0,
        blank_pss / 1024.0,
        ratios,
        verdict(ratios <= 1.25),
        app_rss / 1024.0,
        blank_rss / 1024.0
    );
    let _ = writeln!(
        out,
        "first paint after the process started: app {app_paint:.0} ms, blank {blank_paint:.0} ms (target app ≤ 1500 ms: {}); app from its own clock in run(): {own_clock:.0} ms",
        verdict(app_paint <= 1500.0)
    );
    let scrolls: Vec<[Scroll; 2]> = rounds.iter().map(|r| r.scroll.clone()).collect();
    out.push_str(&scroll_report(args, &scrolls));
    let _ = writeln!(out);
    // Where the memory is, in the median round of the app.
    let mut order: Vec<usize> = (0..rounds.len()).collect();
    order.sort_by_key(|&index| rounds[index].memory[0].pss());
    let middle = &rounds[order[order.len() / 2]];
    for (target, memory) in [("app", &middle.memory[0]), ("blank", &middle.memory[1])] {
        let _ = writeln!(
            out,
            "{target} processes (round of the app's median PSS): process, PSS (anon + file) MiB, RSS MiB, threads"
        );
        for p in &memory.processes {
            let _ = writeln!(
                out,
                "  {:<22} {:>7.1} ({:.1} + {:.1}) {:>7.1} {:>4}",
                p.name,
                mib(p.pss),
                mib(p.pss_anon),
                mib(p.pss_file),
                mib(p.rss),
                p.threads
            );
        }
    }
    out
}

/// The scrolling lines of the report, over every round's scroll.
fn scroll_report(args: &Args, scrolls: &[[Scroll; 2]]) -> String {
    let mut out = String::new();
    let all = Scroll::combined(scrolls.iter().map(|[app, _]| app));
    let blank = Scroll::combined(scrolls.iter().map(|[_, blank]| blank));
    let _ = writeln!(
        out,
        "scrolling {} messages up, {} frames × {} px a round: frame interval median {:.1} ms, p95 {:.1} ms, max {:.1} ms; {} of {} intervals over {DROPPED_MS} ms, {} of them next to an older page's loading ({:.0} frames lost in all) (target none: {})",
        args.messages,
        args.frames,
        args.step,
        all.median(),
        all.p95(),
        all.max(),
        all.dropped(),
        all.intervals.len(),
        all.dropped_near_load(),
        all.lost(),
        verdict(all.dropped() == 0)
    );
    let _ = writeln!(
        out,
        "the blank window scrolling the same messages as static rows: frame interval median {:.1} ms, p95 {:.1} ms, max {:.1} ms; {} of {} intervals over {DROPPED_MS} ms ({:.0} frames lost in all)",
        blank.median(),
        blank.p95(),
        blank.max(),
        blank.dropped(),
        blank.intervals.len(),
        blank.lost()
    );
    for (index, [s, b]) in scrolls.iter().enumerate() {
        let _ = writeln!(
            out,
            "  round {}: seeded in {:.1} s, the app caught up {:.1} s after launch; scrolled {:.0} px, oldest message shown {} ({} older); {} frames found the list at its top; {:.0} frames lost; the blank window {} dropped, {:.0} lost",
            index + 1,
            s.seeded.as_secs_f64(),
            s.caught_up.as_secs_f64(),
            s.scrolled_px,
            s.oldest_shown
                .map_or_else(|| "none".to_owned(), |n| n.to_string()),
            s.oldest_shown
                .map_or(0, |n| (args.messages as u64).saturating_sub(n)),
            s.at_top,
            s.lost(),
            b.dropped(),
            b.lost()
        );
    }
    for (what, scroll) in [("the open room", &all), ("the blank window's rows", &blank)] {
        let idle = sorted(scroll.idle_intervals.iter().copied());
        let _ = writeln!(
            out,
            "{what} before scrolling, {} frames a round: frame interval median {:.1} ms, p95 {:.1} ms, max {:.1} ms; {} of {} over {DROPPED_MS} ms",
            IDLE_FRAMES,
            quantile(&idle, 0.5),
            quantile(&idle, 0.95),
            quantile(&idle, 1.0),
            idle.iter().filter(|&&d| d > DROPPED_MS).count(),
            idle.len()
        );
    }
    out
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

/// The largest message a room holds (the protocol's 16 KiB), as agents write them: a heading,
/// prose, lists, a table and code blocks, as many lines as fit.
fn largest_markdown() -> String {
    let limit = roundtable_protocol::limits::MESSAGE_TEXT;
    let mut text =
        String::from("## Test run\n\nRan the suite after the rebase. Failures below.\n\n");
    let mut n = 0;
    loop {
        let part = match n % 6 {
            0 => format!("- case {n}: `parser::lex_{n}` **failed** after 12 ms\n"),
            1 => format!("- case {n}: passed\n"),
            2 => format!(
                "\n```rust\nfn case_{n}() {{\n    assert_eq!(lex(\"{n}\"), Ok(()));\n}}\n```\n\n"
            ),
            3 => format!("| case | ms |\n| --- | ---: |\n| {n} | {} |\n\n", n * 3),
            4 => format!("See [run {n}](https://ci.example.com/runs/{n}) for the log.\n\n"),
            _ => format!("{n}. retried once, *flaky*\n"),
        };
        if text.len() + part.len() > limit {
            return text;
        }
        text.push_str(&part);
        n += 1;
    }
}

/// Expands the message (its "Show more") and collapses it again, `times` times: each
/// expansion timed from the click to the frame after the one that shows it (render, style,
/// layout and paint).
const EXPAND: &str = r#"
const [times] = args;
const button = () => document.querySelector("[data-testid='show-more']");
if (!button()) return { error: "no collapsed message" };
const frames = (n) => new Promise((resolve) => {
  const next = (left) => requestAnimationFrame(() => (left <= 1 ? resolve() : next(left - 1)));
  next(n);
});
const taken = [];
const script = [];
const layout = [];
for (let n = 0; n < times; n++) {
  await frames(3);
  const start = performance.now();
  button().click();
  // Svelte applies the change in a microtask: then the DOM holds the rendered message.
  await Promise.resolve();
  await Promise.resolve();
  const rendered = performance.now();
  void document.body.offsetHeight;
  const laidOut = performance.now();
  await frames(2);
  taken.push(performance.now() - start);
  script.push(rendered - start);
  layout.push(laidOut - rendered);
  const items = document.querySelectorAll("[data-testid='message-text'] li").length;
  if (items < 100) return { error: `expanded to ${items} list items` };
  if (n === times - 1) {
    // The DOM the message's HTML makes, built apart from the page: what the parser costs.
    const html = [...document.querySelectorAll("[data-testid='message-text']")].find((m) => m.querySelectorAll("li").length >= 100).innerHTML;
    const parse = [];
    for (let k = 0; k < 5; k++) {
      const at = performance.now();
      document.createElement("div").innerHTML = html;
      parse.push(performance.now() - at);
    }
    globalThis.__parse = parse;
  }
  button().click();
}
return { taken, script, layout, parse: globalThis.__parse };
"#;

/// Seeds the largest message into a room of the (stopped) app's hub, starts the app and times
/// its expansion.
async fn markdown(machine: &Machine, display: &Display, log: &Path) -> Result<Vec<f64>> {
    let token = person_token(machine)?;
    let hub = open_app_hub(machine, PATIENCE).await?;
    let addr = hub
        .tcp
        .context("the bench opens the app's hub with a port")?;
    let seeded = async {
        let (mut client, room) =
            new_room(&format!("ws://{addr}/v1/ws"), &token, "Test run").await?;
        let id = client.id();
        client
            .send_frame(&ClientFrame::Send(SendCmd {
                id,
                room: room.clone(),
                client_key: "bench-markdown".into(),
                kind: "message".into(),
                body: json!({ "text": largest_markdown() }),
            }))
            .await?;
        confirm(&mut client, id).await?;
        anyhow::Ok(room)
    }
    .await;
    tokio::task::spawn_blocking(move || hub.stop()).await??;
    let room = seeded?;

    let bus = Bus::start(&machine.runtime());
    let env = launch_env(machine, display, &bus);
    let (driver, client) = launch(&env, log, &Target::App.binary(), PATIENCE).await?;
    let measured = async {
        wait_css(&client, "[data-testid='nav-rooms']", PATIENCE)
            .await?
            .click()
            .await?;
        wait_css(&client, &format!("[data-testid='room-{room}']"), PATIENCE)
            .await?
            .click()
            .await?;
        wait_css(&client, "[data-testid='show-more']", PATIENCE).await?;
        let result = run_async(&client, EXPAND, vec![json!(15)]).await?;
        let numbers_of = |key: &str| -> Result<Vec<f64>> {
            Ok(result[key]
                .as_array()
                .with_context(|| format!("the expansion was not timed: {result}"))?
                .iter()
                .filter_map(serde_json::Value::as_f64)
                .collect())
        };
        let (script, layout) = (numbers_of("script")?, numbers_of("layout")?);
        eprintln!(
            "[bench] of which rendering (script) median {:.1} ms, style and layout {:.1} ms; its HTML parsed apart {:.1} ms",
            median(script),
            median(layout),
            median(numbers_of("parse")?)
        );
        numbers_of("taken")
    }
    .await;
    let _ = client.close().await;
    drop(driver);
    drop(bus);
    measured
}

fn markdown_line(times: &[f64]) -> String {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    format!(
        "Markdown, the largest message ({} bytes) expanded: median {:.1} ms, p95 {:.1} ms, max {:.1} ms over {} expansions (target ≤ 50 ms)",
        largest_markdown().len(),
        quantile(&sorted, 0.5),
        quantile(&sorted, 0.95),
        sorted.last().copied().unwrap_or(0.0),
        sorted.len()
    )
}
