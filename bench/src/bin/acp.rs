//! `roundtable-bench-acp`: what driving an agent over ACP costs a round trip, side by side
//! with the same agent driven as a plain CLI, in the same run.
//!
//! One `roundtable hub` process (rate limits off), the scripted model server answering at
//! once (so what is measured is Roundtable's runner and the agent program, not a model), and
//! the real OpenCode from npm, onboarded as `dana/coder` in a throwaway HOME. A person's
//! WebSocket client mentions the agent in a room, one mention at a time, and waits for its
//! answer in the room:
//! - `cli`: `roundtable run` starts `opencode run --session …` for each mention (a process per
//!   turn, as for every CLI the runner drives without ACP);
//! - `acp`: `roundtable run --acp` keeps one `opencode acp` process and prompts the room's
//!   session over ACP.
//!
//! Each run starts a runner per way (alternating which goes first) and warms it with one
//! mention, whose session the measured ones resume; the report gives each run's median and
//! p99 and the medians' ratio.

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use roundtable_bench::side_by_side::RunMedians;
use roundtable_protocol::ServerFrame;
use roundtable_protocol::client::{ClientFrame, SendCmd, SyncCmd};
use roundtable_testkit::agent_clis::{self, CliSetup};
use roundtable_testkit::model_server::{ModelServer, Reply, Request, script};
use roundtable_testkit::{Client, HubProcess, Incoming};
use serde_json::json;

#[derive(Debug, Parser)]
#[command(
    name = "roundtable-bench-acp",
    about = "An agent over ACP vs as a plain CLI: a mention's round trip, one run."
)]
struct Args {
    /// Round trips measured per way and run.
    #[arg(long, default_value_t = 10)]
    trips: usize,
    /// Runs; each runs both ways.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The `roundtable` binary (default: next to this one).
    #[arg(long)]
    roundtable: Option<PathBuf>,
    /// Where the agent CLIs from npm are (default: the tests' `target/agent-clis`).
    #[arg(long)]
    agent_clis: Option<PathBuf>,
}

/// The person's machine: Roundtable's home and the agent CLIs' HOME.
struct Machine {
    roundtable: PathBuf,
    home: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Machine {
    fn user_home(&self) -> PathBuf {
        self.home.path().join("user-home")
    }

    fn work(&self) -> PathBuf {
        self.home.path().join("project")
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.roundtable);
        command
            .args(["--profile", "dana"])
            .args(args)
            .current_dir(self.work())
            .env("ROUNDTABLE_HOME", self.home.path())
            .env("HOME", self.user_home())
            .env("ROUNDTABLE_LOG", "warn")
            .envs(self.env.iter().cloned())
            .kill_on_drop(true);
        command
    }

    async fn ok(&self, args: &[&str]) -> Result<String> {
        let output = self.command(args).output().await?;
        if !output.status.success() {
            bail!(
                "roundtable {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// `roundtable run` for the agent, over ACP or not.
    fn runner(&self, acp: bool) -> Result<tokio::process::Child> {
        let mut args = vec!["run", "--agent", "dana/coder"];
        if acp {
            args.push("--acp");
        }
        Ok(self
            .command(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?)
    }
}

/// The model: a title for OpenCode's untooled calls, else `ok: TAG` for the newest `bench-…`
/// tag it was sent.
fn model_script() -> roundtable_testkit::model_server::Script {
    script(|request: &Request| {
        if request.tools.is_empty() {
            return Reply::text("Bench");
        }
        let tag = request
            .last_input()
            .unwrap_or_default()
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .rfind(|word| word.starts_with("bench-"))
            .unwrap_or("none")
            .to_owned();
        Reply::text(format!("ok: {tag}"))
    })
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("histogram bounds")
}

/// Mentions the agent with `tag-N` for each trip and waits for its `ok: tag-N`.
async fn trips(client: &mut Client, room: &str, trips: usize, tag: &str) -> Result<Histogram<u64>> {
    let mut latencies = histogram();
    for n in 0..trips {
        let text = format!("bench-{tag}-{n}");
        let started = Instant::now();
        let id = client.id();
        client
            .send_frame(&ClientFrame::Send(SendCmd {
                id,
                room: room.to_owned(),
                client_key: format!("acp-bench-{tag}-{n:06}"),
                kind: "message".into(),
                body: json!({"text": format!("@dana/coder {text}")}),
            }))
            .await?;
        let wanted = format!("ok: {text}");
        let deadline = started + Duration::from_secs(300);
        loop {
            let frame = match client.backlog.pop_front() {
                Some(frame) => frame,
                None => match client
                    .recv_within(deadline.saturating_duration_since(Instant::now()))
                    .await?
                {
                    Some(Incoming::Frame(frame)) => frame,
                    Some(Incoming::Closed(code)) => {
                        bail!("the client's connection closed ({code:?})")
                    }
                    None => bail!("no answer to {text} in 300 s"),
                },
            };
            if let ServerFrame::Evt(event) = frame
                && event.body["text"] == wanted.as_str()
            {
                break;
            }
        }
        latencies.record(started.elapsed().as_micros() as u64)?;
    }
    Ok(latencies)
}

/// The person's client, live in `room` from its head on.
async fn person(hub: &HubProcess, machine: &Machine, room_title: &str) -> Result<(Client, String)> {
    let profile =
        roundtable_core::profile::Profile::load(&machine.home.path().join("profiles"), "dana")?;
    let mut client = Client::connect(&hub.ws_url()).await?;
    client.auth(profile.token.expose(), "bench").await?;
    let id = client.id();
    let room = client
        .ok(ClientFrame::Rooms(roundtable_protocol::client::Rooms {
            id,
        }))
        .await
        .decode::<roundtable_protocol::server::RoomsOk>()?
        .rooms
        .into_iter()
        .find(|room| room.title.as_deref() == Some(room_title))
        .context("the room")?;
    let id = client.id();
    client
        .ok(ClientFrame::Sync(SyncCmd {
            id,
            cursors: [(room.id.clone(), room.head)].into_iter().collect(),
        }))
        .await;
    client.backlog.clear();
    Ok((client, room.id))
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let roundtable = match &args.roundtable {
        Some(path) => path.clone(),
        None => roundtable_testkit::roundtable_beside_this_binary()?,
    };
    let clis = args
        .agent_clis
        .clone()
        .unwrap_or_else(agent_clis::cli_bin_dir);
    if !clis.join("opencode").exists() {
        bail!(
            "OpenCode is not in {}: run ./scripts/test.sh once (it installs the agent CLIs), or give --agent-clis",
            clis.display()
        );
    }
    let data = tempfile::tempdir()?;
    let hub = HubProcess::start(&roundtable, data.path(), &["--no-rate-limit"]).await;
    let server = ModelServer::start(model_script()).await;
    let mut machine = Machine {
        roundtable,
        home: tempfile::tempdir()?,
        env: Vec::new(),
    };
    std::fs::create_dir_all(machine.work())?;
    let mut setup = CliSetup::new(machine.user_home(), machine.work(), "");
    setup.bin_dir = clis.clone();
    agent_clis::prepare_opencode(&server.base_url(), &setup)?;
    machine.env = agent_clis::opencode_command(&setup).env;
    let path = std::env::join_paths(std::iter::once(clis).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    machine
        .env
        .push(("PATH".into(), path.to_string_lossy().into_owned()));
    let addr = hub.addr.to_string();
    machine
        .ok(&["signup", "--hub", &addr, "--handle", "dana"])
        .await?;
    machine
        .ok(&["agents", "onboard", "opencode", "--name", "coder"])
        .await?;

    println!(
        "# roundtable-bench-acp: {} round trips per way and run, {} runs; OpenCode {}, the scripted model answering at once",
        args.trips,
        args.runs,
        opencode_version(&setup.bin_dir)
    );
    let mut medians = RunMedians::default();
    for run in 1..=args.runs {
        let ways: [&str; 2] = if run % 2 == 1 {
            ["cli", "acp"]
        } else {
            ["acp", "cli"]
        };
        for way in ways {
            // A room per way and run: each way resumes its own session.
            let title = format!("{way}-{run}");
            machine
                .ok(&[
                    "room",
                    "create",
                    "--title",
                    &title,
                    "--member",
                    "dana/coder",
                ])
                .await?;
            let (mut client, room) = person(&hub, &machine, &title).await?;
            let mut runner = machine.runner(way == "acp")?;
            trips(&mut client, &room, 1, &format!("{title}-warm")).await?;
            let latencies = trips(&mut client, &room, args.trips, &title).await?;
            let _ = runner.start_kill();
            let _ = runner.wait().await;
            medians.record(run, way, &latencies, 0);
        }
    }
    let (cli, acp) = (medians.of("cli"), medians.of("acp"));
    println!();
    println!(
        "median of medians: cli {cli:.0} ms, acp {acp:.0} ms; acp / cli = {:.2}x",
        acp / cli
    );
    Ok(())
}

/// `opencode --version`, for the report.
fn opencode_version(dir: &Path) -> String {
    std::process::Command::new(dir.join("opencode"))
        .arg("--version")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|_| "(unknown)".into())
}
