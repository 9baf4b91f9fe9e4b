//! What the desktop benchmarks (`benches/desktop.rs`, `benches/boards.rs`) share to measure
//! the app: quantiles, the memory of a process tree from `/proc`, scripts run in the window,
//! and the app's own hub opened by the bench to give it data.
//!
//! Included by path from each bench (`#[path = "../tests/support/measure.rs"] mod measure;`)
//! beside [`support`](super::support), whose [`Machine`] it uses.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use fantoccini::{Client, Locator};
use serde_json::Value;

use crate::support::{Driver, Machine, descendants};

/// [`Driver::launch`], its output and the app's into the file `log`.
pub async fn launch(
    env: &[(String, String)],
    log: &std::path::Path,
    binary: &std::path::Path,
    patience: Duration,
) -> Result<(Driver, Client)> {
    let log = std::fs::File::create(log)?;
    Driver::launch(env, &log, binary, patience)
        .await
        .context("a WebDriver session")
}

/// A connection to the hub at `ws_url` as the holder of `token`, and a new room of theirs
/// titled `title`: where a bench writes its data.
pub async fn new_room(
    ws_url: &str,
    token: &str,
    title: &str,
) -> Result<(roundtable_testkit::Client, String)> {
    let (client, room) = new_room_by(ws_url, token, title).await?;
    Ok((client, room.id))
}

/// As [`new_room`], with the room as the hub describes it (its creator is the token's
/// principal).
pub async fn new_room_by(
    ws_url: &str,
    token: &str,
    title: &str,
) -> Result<(roundtable_testkit::Client, roundtable_protocol::model::Room)> {
    use roundtable_protocol::client::{ClientFrame, RoomCreate};
    use roundtable_protocol::server::RoomOk;
    let mut client = roundtable_testkit::Client::connect(ws_url).await?;
    client.auth(token, "bench").await?;
    let id = client.id();
    let room = client
        .call(ClientFrame::RoomCreate(RoomCreate {
            id,
            title: Some(title.into()),
            topic: None,
            members: Vec::new(),
        }))
        .await?
        .map_err(|err| anyhow::anyhow!("room_create refused: {}", err.msg))?
        .decode::<RoomOk>()?
        .room;
    Ok((client, room))
}

/// The numbers of the JSON array `value` (`what` names it in the error when it is not one).
pub fn numbers(value: &Value, what: &str) -> Result<Vec<f64>> {
    Ok(value
        .as_array()
        .with_context(|| format!("{what}: {value}"))?
        .iter()
        .filter_map(Value::as_f64)
        .collect())
}

/// The time between each of `times` and the next.
pub fn intervals(times: &[f64]) -> Vec<f64> {
    times.windows(2).map(|pair| pair[1] - pair[0]).collect()
}

/// The `q` quantile of `sorted` (nearest rank); NaN when empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// `values`, sorted.
pub fn sorted(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut values: Vec<f64> = values.into_iter().collect();
    values.sort_by(f64::total_cmp);
    values
}

pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    quantile(&sorted(values), 0.5)
}

/// One process's memory, in KiB.
#[derive(Debug, Clone)]
pub struct Process {
    pub name: String,
    pub pss: u64,
    pub pss_anon: u64,
    pub pss_file: u64,
    pub rss: u64,
    pub threads: u64,
}

/// A process's memory from `/proc`, if it still runs.
pub fn process(pid: u32) -> Option<Process> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|value| value.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let name = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|exe| {
            exe.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .unwrap_or_default()
                .trim()
                .to_owned()
        });
    Some(Process {
        name,
        pss: field(&rollup, "Pss:"),
        pss_anon: field(&rollup, "Pss_Anon:"),
        pss_file: field(&rollup, "Pss_File:"),
        rss: field(&rollup, "Rss:"),
        threads: field(&status, "Threads:"),
    })
}

/// The memory of `root` and of every process it started (WebKit's web and network
/// processes…), those still running.
pub fn tree(root: u32) -> Vec<Process> {
    std::iter::once(root)
        .chain(descendants(root))
        .filter_map(process)
        .collect()
}

/// Runs `script` asynchronously in the window (`args` in scope); what it returns. A script
/// that throws, or returns `{error}`, is an error.
pub async fn run_async(client: &Client, script: &str, args: Vec<Value>) -> Result<Value> {
    let wrapped = format!(
        "const done = arguments[arguments.length - 1]; const args = Array.from(arguments).slice(0, -1);
         (async () => {{ {script} }})().then(done, (error) => done({{ error: String(error) }}));"
    );
    let value = client.execute_async(&wrapped, args).await?;
    if let Some(error) = value.get("error").and_then(Value::as_str) {
        bail!("the script failed: {error}");
    }
    Ok(value)
}

/// The first element matching `css`, waiting up to `patience` for it.
pub async fn wait_css(
    client: &Client,
    css: &str,
    patience: Duration,
) -> Result<fantoccini::elements::Element> {
    client
        .wait()
        .at_most(patience)
        .for_element(Locator::Css(css))
        .await
        .with_context(|| format!("no {css} in the window"))
}

/// The (stopped) app's own hub, opened by the bench on its data as the app opens it, but
/// without rate limits (a bench writes faster than a person), on a runtime of its own. The
/// app that just quit may hold the data a moment longer: tried again for up to `patience`.
pub async fn open_app_hub(
    machine: &Machine,
    patience: Duration,
) -> Result<roundtable_hub::embedded::EmbeddedHub> {
    let mut config = roundtable_hub::HubConfig::new(machine.roundtable_home().join("hub"));
    config.rate_limits = None;
    let asked = Instant::now();
    loop {
        let config = config.clone();
        let started = tokio::task::spawn_blocking(move || {
            roundtable_hub::embedded::start(
                config,
                Some(roundtable_hub::embedded::bind("127.0.0.1:0".parse()?)?),
            )
            .context("the app's hub, opened by the bench")
        })
        .await?;
        match started {
            Ok(hub) => return Ok(hub),
            Err(error) if asked.elapsed() < patience => {
                eprintln!("[bench] waiting for the app's hub: {error:#}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// The person's token on `machine` (the app wrote it on its first run).
pub fn person_token(machine: &Machine) -> Result<String> {
    let token = std::fs::read_to_string(machine.roundtable_home().join("profiles/default/token"))
        .context("the person's token")?;
    Ok(token.trim().to_owned())
}
