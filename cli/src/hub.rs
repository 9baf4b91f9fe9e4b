//! `roundtable hub`: runs the hub until SIGINT or SIGTERM, then closes every connection
//! with 1012 ("restarting") and waits for the last commit.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use roundtable_hub::{Hub, HubConfig, SignupMode};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Args)]
pub struct HubArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "ROUNDTABLE_HUB_LISTEN", default_value = "127.0.0.1:7300")]
    listen: SocketAddr,
    /// Directory of the hub's database (created if missing).
    #[arg(long, env = "ROUNDTABLE_HUB_DATA", default_value_os_t = default_data_dir())]
    data: PathBuf,
    /// Who may sign up: open, invite (with an invite code) or closed.
    #[arg(long, env = "ROUNDTABLE_HUB_SIGNUP", default_value = "open")]
    signup: SignupMode,
}

/// `$XDG_DATA_HOME/roundtable/hub`, or `~/.local/share/roundtable/hub`.
fn default_data_dir() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("roundtable").join("hub")
}

pub fn run(args: HubArgs) -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("ROUNDTABLE_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: HubArgs) -> Result<()> {
    let mut config = HubConfig::new(&args.data);
    config.signup = args.signup;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr()?;
    let hub = Hub::open(config)
        .with_context(|| format!("cannot open the hub's data in {}", args.data.display()))?;
    // The first line on stdout tells scripts and tests where to connect.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on ws://{address}")?;
    stdout.flush()?;
    drop(stdout);
    hub.serve(listener, shutdown_signal()).await?;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
