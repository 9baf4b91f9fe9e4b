//! `roundtable`: one binary for everything Roundtable runs on a machine.
//!
//! - `roundtable hub` runs the hub (the collaboration network) with its embedded store.
//! - `roundtable signup`, `login`, `rooms`, `send`, `tail`… talk to a hub through the core.

mod args;
mod client;
mod hook;
mod hub;
mod mcp;
mod run;
mod work;

/// The hub's writer and connections allocate many small, short-lived buffers (frames,
/// rows, events) across threads; mimalloc serves them with less contention and work than
/// the system allocator (measured: see docs/benchmarks.md). Built without transparent huge
/// pages (`no_thp`): zeroing a whole 2 MiB page on first touch showed up as stalls of the
/// writer, and the hub's p99 latency under load was a quarter lower without them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use args::{Cli, Command};
use clap::Parser as _;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Hub(args) => {
            init_logging("info");
            match hub::run(args) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("roundtable: {error:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Command::Mcp { agent } => {
            init_logging("warn");
            // Tool calls run side by side (one may wait for messages for minutes).
            let Some(runtime) = runtime(true) else {
                return std::process::ExitCode::FAILURE;
            };
            match runtime.block_on(mcp::run(&agent)) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("roundtable mcp: {error:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Command::Run(args) => {
            init_logging("warn");
            let Some(runtime) = runtime(true) else {
                return std::process::ExitCode::FAILURE;
            };
            match runtime.block_on(run::run(args)) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("roundtable run: {error:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Command::Hook { cli, agent, rest } => {
            init_logging("warn");
            // A hook installed for something other than an agent is refused outright.
            if let Err(
                error @ (roundtable_core::profile::ProfileError::NotAnAgent { .. }
                | roundtable_core::profile::ProfileError::BadName(_)),
            ) = roundtable_core::profile::load_agent(
                &roundtable_core::profile::profiles_dir(),
                &agent,
            ) {
                eprintln!("roundtable hook: {error}");
                return std::process::ExitCode::FAILURE;
            }
            // Otherwise a hook never fails its session: whatever happens, it exits 0.
            if let Some(runtime) = runtime(false) {
                hook::print(runtime.block_on(hook::run(&cli, &agent, &rest)));
            }
            std::process::ExitCode::SUCCESS
        }
        Command::Client(command) => {
            init_logging("warn");
            let Some(runtime) = runtime(false) else {
                return std::process::ExitCode::FAILURE;
            };
            match runtime.block_on(client::run(cli.global, command)) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(failure) => {
                    eprintln!("roundtable: {}", failure.message);
                    std::process::ExitCode::from(failure.exit as u8)
                }
            }
        }
    }
}

/// Logs go to stderr (stdout carries the commands' output, or the MCP protocol), at
/// `ROUNDTABLE_LOG` or else `default` (an `EnvFilter`). Coloured only on a terminal: stderr
/// kept in a file (a service's log, an agent CLI's capture) stays plain text.
fn init_logging(default: &str) {
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ROUNDTABLE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}

/// A runtime for a client: one thread for one-off commands, two for long-running ones.
fn runtime(long_running: bool) -> Option<tokio::runtime::Runtime> {
    let built = if long_running {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    match built {
        Ok(runtime) => Some(runtime),
        Err(error) => {
            eprintln!("roundtable: cannot start the async runtime: {error}");
            None
        }
    }
}
