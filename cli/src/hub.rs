//! `roundtable hub`: runs the hub until SIGINT or SIGTERM, then closes every connection
//! with 1012 ("restarting") and waits for the last commit. Its subcommands are the
//! operator's: `user add` creates a user on a closed hub, `audit verify` checks the audit
//! log's hash chain.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use roundtable_hub::config::TlsFiles;
use roundtable_hub::engine::{RateLimit, RateLimits};
use roundtable_hub::{Hub, HubConfig, SignupMode, admin};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Args)]
pub struct HubArgs {
    #[command(subcommand)]
    command: Option<HubCommand>,
    /// Directory of the hub's database (created if missing).
    #[arg(long, env = "ROUNDTABLE_HUB_DATA", global = true, default_value_os_t = default_data_dir())]
    data: PathBuf,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "ROUNDTABLE_HUB_LISTEN", default_value = "127.0.0.1:7300")]
    listen: SocketAddr,
    /// Who may sign up: open, invite (with an invite code) or closed.
    #[arg(long, env = "ROUNDTABLE_HUB_SIGNUP", default_value = "open")]
    signup: SignupMode,
    /// Certificate chain (PEM) to serve wss/https; needs --tls-key.
    #[arg(long, env = "ROUNDTABLE_HUB_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, env = "ROUNDTABLE_HUB_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// host:port clients reach the hub at, for invite links (default: the listening address).
    #[arg(long, env = "ROUNDTABLE_HUB_PUBLIC_ADDRESS")]
    public_address: Option<String>,
    /// Agents' send rate limit, BURST/PER_SECOND.
    #[arg(long, env = "ROUNDTABLE_HUB_RATE_LIMIT_AGENT", default_value = "20/2")]
    rate_limit_agent: RateLimit,
    /// Users' send rate limit, BURST/PER_SECOND.
    #[arg(long, env = "ROUNDTABLE_HUB_RATE_LIMIT_USER", default_value = "200/50")]
    rate_limit_user: RateLimit,
    /// Turn send rate limits off (for benchmarks).
    #[arg(long, env = "ROUNDTABLE_HUB_NO_RATE_LIMIT")]
    no_rate_limit: bool,
    /// Serve plain ws/http on a network address (without TLS); the default refuses to,
    /// since tokens would cross the network in clear.
    #[arg(long, env = "ROUNDTABLE_HUB_ALLOW_PLAIN")]
    allow_plain: bool,
}

#[derive(Debug, Subcommand)]
enum HubCommand {
    /// Manage users (on this machine, with the hub stopped).
    #[command(subcommand)]
    User(UserCommand),
    /// Check the audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Create a user, whatever the signup mode; prints its token (shown once).
    Add {
        /// The user's handle.
        #[arg(long)]
        handle: String,
        /// The user's display name (default: the handle).
        #[arg(long)]
        name: Option<String>,
    },
    /// Revoke a user's tokens and print a new one (for a lost or leaked token).
    Token {
        #[arg(long)]
        handle: String,
    },
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Check the hash chain; report the first broken link.
    Verify,
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
    match args.command {
        Some(HubCommand::User(UserCommand::Add { handle, name })) => {
            let config = HubConfig::new(&args.data);
            let created = admin::add_user(&config, &handle, name.as_deref().unwrap_or(&handle))
                .with_context(|| format!("cannot create the user {handle:?}"))?;
            eprintln!(
                "created user {} ({}); this is its token, shown once:",
                created.principal.handle, created.principal.id
            );
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", created.token)?;
            Ok(())
        }
        Some(HubCommand::User(UserCommand::Token { handle })) => {
            let config = HubConfig::new(&args.data);
            let token = admin::reissue_user_token(&config, &handle)
                .with_context(|| format!("cannot issue a new token for {handle:?}"))?;
            eprintln!("every earlier token of {handle} is revoked; the new one, shown once:");
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{token}")?;
            Ok(())
        }
        Some(HubCommand::Audit(AuditCommand::Verify)) => match admin::verify_audit(&args.data) {
            Ok((count, head)) => {
                let mut stdout = std::io::stdout().lock();
                writeln!(stdout, "audit log intact: {count} entries, head {head}")?;
                Ok(())
            }
            Err(admin::AdminError::Broken(broken)) => {
                bail!("audit log broken at entry {}: {}", broken.n, broken.reason)
            }
            Err(error) => Err(error).context("cannot check the audit log"),
        },
        None => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.enable_all();
            // Live events are handed to the connections by the flush thread, from outside
            // the runtime, so they wait in the runtime's shared queue; the sends that follow
            // them wait for the next poll of the sockets. A worker that looks at both every
            // few tasks instead of every few dozen turns a send around sooner: +5 % durable
            // throughput at 10 rooms × 4 members (docs/benchmarks.md).
            builder.global_queue_interval(4).event_interval(8);
            let runtime = builder.build().context("starting the async runtime")?;
            runtime.block_on(serve(args.data, args.serve))
        }
    }
}

async fn serve(data: PathBuf, args: ServeArgs) -> Result<()> {
    let mut config = HubConfig::new(&data);
    config.signup = args.signup;
    config.rate_limits = (!args.no_rate_limit).then_some(RateLimits {
        agent: args.rate_limit_agent,
        user: args.rate_limit_user,
    });
    config.tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        _ => None,
    };
    if config.tls.is_none() && !args.listen.ip().is_loopback() && !args.allow_plain {
        bail!(
            "refusing to serve plain ws on the network address {}: give --tls-cert and --tls-key, \
             listen on 127.0.0.1 behind a TLS proxy, or pass --allow-plain",
            args.listen
        );
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr()?;
    config.public_address = Some(args.public_address.unwrap_or_else(|| address.to_string()));
    let hub = Hub::open(config)
        .with_context(|| format!("cannot open the hub's data in {}", data.display()))?;
    // The first line on stdout tells scripts and tests where to connect.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}://{address}", hub.scheme())?;
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
