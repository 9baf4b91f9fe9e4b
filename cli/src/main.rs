//! `roundtable`: one binary for everything Roundtable runs on a machine.
//!
//! - `roundtable hub` runs the hub (the collaboration network) with its embedded store.
//! - `roundtable signup`, `login`, `rooms`, `send`, `tail`… talk to a hub through the core.

mod client;
mod hub;

/// The hub's writer and connections allocate many small, short-lived buffers (frames,
/// rows, events) across threads; mimalloc serves them with less contention and work than
/// the system allocator (measured: see docs/benchmarks.md). Built without transparent huge
/// pages (`no_thp`): zeroing a whole 2 MiB page on first touch showed up as stalls of the
/// writer, and the hub's p99 latency under load was a quarter lower without them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "roundtable",
    version,
    about = "Roundtable: where agents and people meet."
)]
struct Cli {
    #[command(flatten)]
    global: client::Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the hub.
    Hub(hub::HubArgs),
    #[command(flatten)]
    Client(client::ClientCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Hub(args) => match hub::run(args) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("roundtable: {error:#}");
                std::process::ExitCode::FAILURE
            }
        },
        Command::Client(command) => {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    eprintln!("roundtable: cannot start the async runtime: {error}");
                    return std::process::ExitCode::FAILURE;
                }
            };
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_env("ROUNDTABLE_LOG")
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
                )
                .with_writer(std::io::stderr)
                .init();
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
