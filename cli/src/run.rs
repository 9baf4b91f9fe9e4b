//! `roundtable run --agent HANDLE …`: agents with no terminal. Each agent's messages are
//! answered by its agent CLI in the session bound to the room (see
//! `roundtable_core::runner`), until Ctrl-C or SIGTERM.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use roundtable_core::local_agents::acp::AcpRoute;
use roundtable_core::local_agents::detect::{find_executable, search_dirs};
use roundtable_core::local_agents::onboarding::onboarded;
use roundtable_core::local_agents::{AgentCli, Environment};
use roundtable_core::runner::{AcpMode, McpServer, RunSettings};
use roundtable_core::teams::bound_cli;
use roundtable_core::{Core, SyncOptions, profile};

/// What `roundtable run` was asked.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// An agent to run (`user/name`); repeat for more.
    #[arg(long = "agent", required = true)]
    agents: Vec<String>,
    /// The agent CLI (claude, codex, gemini, opencode, copilot); by default the one the
    /// agent was onboarded on.
    #[arg(long)]
    cli: Option<String>,
    /// The agent CLI's executable (default: found like `roundtable agents detect` does).
    #[arg(long)]
    executable: Option<PathBuf>,
    /// Where the agents work (default: here).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Drive the agent over ACP (the Agent Client Protocol): one process for all its
    /// rooms, a session per room with Roundtable's tools attached. A CLI with an ACP mode
    /// of its own is started in it (`opencode acp`, `copilot --acp`, `gemini
    /// --experimental-acp`); Claude Code and Codex are driven through their ACP adapters
    /// (`claude-agent-acp`, `codex-acp`, found like the CLIs), which run the CLI's own
    /// executable.
    #[arg(long)]
    acp: bool,
    /// With `--acp`: the ACP agent's program, when it is not the one found; for an agent
    /// registered with no CLI, any program that speaks ACP (its arguments with `--arg`).
    #[arg(long, requires = "acp")]
    acp_agent: Option<PathBuf>,
    /// An argument passed to every run of the agent CLI (repeat for more), e.g.
    /// `--arg=--permission-mode --arg=acceptEdits`; with `--acp`, the ACP agent's arguments.
    #[arg(long = "arg", allow_hyphen_values = true)]
    extra_args: Vec<String>,
    /// Seconds before a turn the model's service turned away (busy, rate limited) is tried
    /// again; each next pause is four times longer, and the fourth failure is reported.
    #[arg(long, default_value_t = roundtable_core::runner::FIRST_RETRY.as_secs_f64())]
    retry_seconds: f64,
}

/// Runs the agents until interrupted.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let base = profile::profiles_dir();
    let env = Environment::current();
    let records = onboarded(&base);
    let cwd = match args.cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().context("the current directory")?,
    };
    let first_retry = std::time::Duration::try_from_secs_f64(args.retry_seconds)
        .ok()
        .filter(|pause| !pause.is_zero())
        .context("--retry-seconds takes a positive number of seconds")?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut running = tokio::task::JoinSet::new();
    for handle in &args.agents {
        let profile = match profile::load_agent(&base, handle) {
            Err(error @ profile::ProfileError::Missing { .. }) => {
                return Err(error)
                    .with_context(|| format!("no profile for {handle}: onboard it first"));
            }
            loaded => loaded?,
        };
        let onboarded = records.iter().find(|record| &record.handle == handle);
        let cli = match &args.cli {
            Some(cli) => {
                Some(AgentCli::parse(cli).with_context(|| format!("no agent CLI {cli:?}"))?)
            }
            None => match (onboarded, bound_cli(&profile.dir)) {
                (Some(record), _) => Some(record.cli),
                (None, Some(cli)) => Some(cli),
                // An ACP agent that is none of the CLIs, whose program is given (below).
                (None, None) => None,
            },
        };
        if let Some(cli) = cli
            && !cli.runs_headless()
            && !args.acp
        {
            bail!(
                "roundtable run cannot drive {} yet: its headless mode could not be tested here; \
                 keep it at its terminal, where its hooks bring it the messages",
                cli.display_name()
            );
        }
        // An agent whose CLI configuration does not have Roundtable's server for it gets it
        // on the command line.
        let mcp = onboarded.is_none().then(|| McpServer {
            roundtable: std::env::current_exe().unwrap_or_else(|_| "roundtable".into()),
            handle: handle.clone(),
            roundtable_home: std::env::var_os("ROUNDTABLE_HOME").map(PathBuf::from),
        });
        let (executable, acp) = match (cli, &args.acp_agent) {
            (Some(cli), _) => {
                let executable = match &args.executable {
                    Some(path) => path.clone(),
                    None => {
                        find_executable(&search_dirs(&env), cli.command()).with_context(|| {
                            format!(
                                "{cli} is not installed here (or not on PATH): give --executable"
                            )
                        })?
                    }
                };
                let acp = match args.acp {
                    true => Some(acp_mode(
                        cli,
                        args.acp_agent.as_deref(),
                        &args.extra_args,
                        &executable,
                        &env,
                    )?),
                    false => None,
                };
                (executable, acp)
            }
            (None, Some(program)) => (
                program.clone(),
                Some(AcpMode::new(program.clone(), args.extra_args.clone())),
            ),
            (None, None) => bail!(
                "{handle} is not onboarded on an agent CLI: say which with --cli, or give the \
                 ACP agent that answers for it with --acp --acp-agent"
            ),
        };
        let instructions = std::fs::read_to_string(profile.dir.join("instructions.md")).ok();
        let settings = RunSettings {
            cli,
            executable,
            cwd: cwd.clone(),
            instructions,
            extra_args: args.extra_args.clone(),
            mcp,
            acp,
            first_retry,
        };
        let core = Core::open(profile).await?;
        let sync = core.start_with(SyncOptions {
            serve_hand_offs: true,
        });
        let stopped = stopped.clone();
        let handle = handle.clone();
        running.spawn(async move {
            let result = core.run_agent(settings, stopped).await;
            sync.stop().await;
            (handle, result)
        });
    }
    let mut stop_requests = roundtable_platform::stop::StopRequests::listen()
        .context("listening for the OS's requests to stop")?;
    tokio::select! {
        _ = stop_requests.requested() => {}
        Some(ended) = running.join_next() => {
            if let Ok((handle, Err(error))) = ended {
                let _ = stop.send(true);
                bail!("{handle} stopped: {error}");
            }
        }
    }
    let _ = stop.send(true);
    while let Some(ended) = running.join_next().await {
        if let Ok((handle, Err(error))) = ended {
            eprintln!("roundtable run: {handle}: {error}");
        }
    }
    Ok(())
}

/// How `cli` is driven over ACP: the adapter that runs it (found, or given), or the CLI in
/// its own ACP mode (its ACP arguments unless others are given), or the program given.
fn acp_mode(
    cli: AgentCli,
    given: Option<&Path>,
    extra_args: &[String],
    executable: &Path,
    env: &Environment,
) -> anyhow::Result<AcpMode> {
    match (cli.acp(), given) {
        (Some(AcpRoute::Adapter(adapter)), given) => {
            let program = match given {
                Some(program) => program.to_owned(),
                None => find_executable(&search_dirs(env), adapter.command).with_context(|| {
                    format!(
                        "{}'s ACP agent `{}` is not installed here (or not on PATH): install it \
                         with `npm install -g {}`, or give it with --acp-agent",
                        cli.display_name(),
                        adapter.command,
                        adapter.package
                    )
                })?,
            };
            Ok(AcpMode::new(program, extra_args.to_vec())
                .with_env(adapter.executable_env, executable.display().to_string()))
        }
        (Some(AcpRoute::OwnMode(own)), given) => {
            let arguments = match extra_args.is_empty() {
                true => own.iter().map(|arg| (*arg).to_owned()).collect(),
                false => extra_args.to_vec(),
            };
            Ok(AcpMode::new(
                given.unwrap_or(executable).to_owned(),
                arguments,
            ))
        }
        (None, Some(program)) => Ok(AcpMode::new(program.to_owned(), extra_args.to_vec())),
        (None, None) => bail!(
            "{} has no ACP mode Roundtable knows: give its ACP program with --acp-agent",
            cli.display_name()
        ),
    }
}
