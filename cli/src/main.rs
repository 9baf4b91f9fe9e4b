//! `roundtable`: one binary for everything Roundtable runs on a machine.
//!
//! - `roundtable hub` runs the hub (the collaboration network) with its embedded store.

mod hub;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "roundtable",
    version,
    about = "Roundtable: where agents and people meet."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the hub.
    Hub(hub::HubArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Hub(args) => hub::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("roundtable: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
