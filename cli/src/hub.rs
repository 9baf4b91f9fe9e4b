//! `roundtable hub`: runs the hub until SIGINT or SIGTERM, then closes every connection
//! with 1012 ("restarting") and waits for the last commit; when one of the hub's threads
//! fails, the hub closes them with 1011 and the process exits with status 70. Its
//! subcommands are the operator's: `user add` creates a user on a closed hub, `user token`
//! rotates or revokes a user's tokens (through the running hub's operator socket when it
//! runs), `audit verify` checks the audit log's hash chain, against a head recorded earlier
//! if given one.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use roundtable_hub::browsers::Origin;
use roundtable_hub::config::{ConnectionLimits, TlsFiles};
use roundtable_hub::config::{RateLimit, RateLimits};
use roundtable_hub::{Hub, HubConfig, SignupMode, StoreLocation, admin};
use roundtable_protocol::client::TokenAction;
use roundtable_protocol::defaults;

#[derive(Debug, Args)]
pub struct HubArgs {
    #[command(subcommand)]
    command: Option<HubCommand>,
    /// Directory of the hub's database (created if missing).
    #[arg(long, env = "ROUNDTABLE_HUB_DATA", global = true, default_value_os_t = default_data_dir())]
    data: PathBuf,
    /// Where the hub's data is: `sqlite` (in --data) or a PostgreSQL database,
    /// postgres://user@host:port/database (or postgres:///database?host=/socket/dir).
    #[arg(
        long,
        env = "ROUNDTABLE_HUB_STORE",
        global = true,
        default_value = "sqlite",
        hide_default_value = true
    )]
    store: StoreLocation,
    /// This hub's name in a cluster of hubs sharing one PostgreSQL --store (clients may
    /// use any of them): 1 to 64 of a-z, 0-9, _ and -, different for each.
    #[arg(long, env = "ROUNDTABLE_HUB_NODE", global = true, value_parser = roundtable_hub::config::node_name)]
    node: Option<String>,
    /// A NATS server (nats://host:port) the hubs of a cluster tell each other of their
    /// commits on, so events cross between them at once rather than at the next poll.
    #[arg(long, env = "ROUNDTABLE_HUB_BUS", global = true, requires = "node")]
    bus: Option<String>,
    #[command(flatten)]
    serve: ServeArgs,
}

impl HubArgs {
    /// The hub's settings as far as the operator's commands need them.
    fn config(&self) -> HubConfig {
        let mut config = HubConfig::new(&self.data);
        config.store = self.store.clone();
        config.node = self.node.clone();
        config.bus = self.bus.clone();
        config
    }
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
    /// host:port clients reach the hub at, for invite links (default: the listening address);
    /// requests naming another host than this, loopback or the listening address get 421.
    #[arg(long, env = "ROUNDTABLE_HUB_PUBLIC_ADDRESS", value_parser = public_address)]
    public_address: Option<String>,
    /// A web origin (scheme://host[:port]) whose pages may call the hub; repeat it, or give
    /// a comma-separated list in the variable. Requests from any other origin get 403.
    #[arg(
        long = "allowed-origin",
        value_name = "ORIGIN",
        env = "ROUNDTABLE_HUB_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    allowed_origins: Vec<Origin>,
    /// Who runs this hub, named as the provider on agents' A2A cards (default: the hub's
    /// host name).
    #[arg(long, env = "ROUNDTABLE_HUB_OPERATOR_NAME")]
    operator_name: Option<String>,
    /// The longest, in seconds, a blocking A2A `SendMessage` waits for the agent before it
    /// answers with the task as it is (the client then polls or subscribes).
    #[arg(long, env = "ROUNDTABLE_HUB_A2A_BLOCK_MAX", default_value_t = 300)]
    a2a_block_max: u64,
    /// A host remote A2A agents may be at although the SSRF guard would refuse it (a
    /// private address, plain http); repeat it, or give a comma-separated list in the
    /// variable.
    #[arg(
        long = "a2a-outbound-allow",
        value_name = "HOST",
        env = "ROUNDTABLE_HUB_A2A_OUTBOUND_ALLOW",
        value_delimiter = ','
    )]
    a2a_outbound_allow: Vec<String>,
    /// Let remote A2A agents be at any private or loopback address, over plain http too
    /// (for tests and a trusted LAN only). Link-local and cloud metadata addresses stay
    /// refused unless named with --a2a-outbound-allow.
    #[arg(long, env = "ROUNDTABLE_HUB_A2A_OUTBOUND_ALLOW_PRIVATE")]
    a2a_outbound_allow_private: bool,
    /// How long, in seconds, the hub keeps trying to reach a remote A2A agent before it
    /// posts that the call failed.
    #[arg(long, env = "ROUNDTABLE_HUB_A2A_OUTBOUND_TTL", default_value_t = 3600)]
    a2a_outbound_ttl: u64,
    /// Agents' rate limit of writes (sends and other commands that change state), BURST/PER_SECOND.
    #[arg(long, env = "ROUNDTABLE_HUB_RATE_LIMIT_AGENT", default_value = "20/2")]
    rate_limit_agent: RateLimit,
    /// Users' rate limit of writes, BURST/PER_SECOND; an agent's writes also draw from its owner's.
    #[arg(long, env = "ROUNDTABLE_HUB_RATE_LIMIT_USER", default_value = "200/50")]
    rate_limit_user: RateLimit,
    /// Turn rate limits off, of writes and of signups (for benchmarks).
    #[arg(long, env = "ROUNDTABLE_HUB_NO_RATE_LIMIT")]
    no_rate_limit: bool,
    #[command(flatten)]
    limits: LimitArgs,
    /// Serve plain ws/http on a network address (without TLS); the default refuses to,
    /// since tokens would cross the network in clear.
    #[arg(long, env = "ROUNDTABLE_HUB_ALLOW_PLAIN")]
    allow_plain: bool,
}

/// The hub's bounds under load (docs/protocol.md, "Limits"); the defaults suit most hubs.
#[derive(Debug, Args)]
struct LimitArgs {
    /// Outbound bytes queued per connection before it is closed as a slow consumer (4008).
    #[arg(long, env = "ROUNDTABLE_HUB_MAX_QUEUE_BYTES", default_value_t = defaults::MAX_QUEUE_BYTES)]
    max_queue_bytes: usize,
    /// Most bytes of events in one history reply, and in each page of a sync replay.
    #[arg(long, env = "ROUNDTABLE_HUB_PAGE_BYTES", default_value_t = 1024 * 1024)]
    page_bytes: usize,
    /// Reads (history, audit) one connection may have in flight.
    #[arg(long, env = "ROUNDTABLE_HUB_MAX_READS_IN_FLIGHT", default_value_t = 4)]
    max_reads_in_flight: usize,
    /// Live connections one principal may have (one more: err busy, close 1013).
    #[arg(long, env = "ROUNDTABLE_HUB_MAX_DEVICES", default_value_t = defaults::MAX_DEVICES)]
    max_devices: usize,
    /// Agents one user may register.
    #[arg(
        long,
        env = "ROUNDTABLE_HUB_MAX_AGENTS_PER_USER",
        default_value_t = 100
    )]
    max_agents_per_user: usize,
    /// Signups per client address and hour.
    #[arg(long, env = "ROUNDTABLE_HUB_SIGNUPS_PER_HOUR", default_value_t = 10)]
    signups_per_hour: u32,
    /// Open TCP connections in total.
    #[arg(long, env = "ROUNDTABLE_HUB_MAX_CONNECTIONS", default_value_t = 10_000)]
    max_connections: usize,
    /// Open TCP connections from one client address (behind a proxy, all share its address).
    #[arg(
        long,
        env = "ROUNDTABLE_HUB_MAX_CONNECTIONS_PER_ADDRESS",
        default_value_t = 512
    )]
    max_connections_per_address: usize,
    /// WebSockets waiting to authenticate, in total.
    #[arg(
        long,
        env = "ROUNDTABLE_HUB_MAX_UNAUTHENTICATED",
        default_value_t = 1024
    )]
    max_unauthenticated: usize,
    /// WebSockets waiting to authenticate, from one client address.
    #[arg(
        long,
        env = "ROUNDTABLE_HUB_MAX_UNAUTHENTICATED_PER_ADDRESS",
        default_value_t = 256
    )]
    max_unauthenticated_per_address: usize,
    /// Milliseconds a client has to send a request's headers (also the idle timeout of HTTP
    /// connections).
    #[arg(
        long,
        env = "ROUNDTABLE_HUB_HEADER_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    header_timeout_ms: u64,
    /// Failed authentications one client address may make at once.
    #[arg(long, env = "ROUNDTABLE_HUB_FAILED_AUTH_BURST", default_value_t = 20)]
    failed_auth_burst: u32,
    /// Then one more every this many milliseconds.
    #[arg(
        long,
        env = "ROUNDTABLE_HUB_FAILED_AUTH_INTERVAL_MS",
        default_value_t = 3_000
    )]
    failed_auth_interval_ms: u64,
}

impl LimitArgs {
    fn apply(&self, config: &mut HubConfig, rate_limited: bool) {
        config.max_queue_bytes = self.max_queue_bytes;
        config.page_bytes = self.page_bytes;
        config.max_reads_in_flight = self.max_reads_in_flight;
        config.max_devices = self.max_devices;
        config.max_agents_per_user = self.max_agents_per_user;
        config.signups_per_hour = rate_limited.then_some(self.signups_per_hour);
        config.connections = ConnectionLimits {
            max_connections: self.max_connections,
            max_connections_per_address: self.max_connections_per_address,
            max_unauthenticated: self.max_unauthenticated,
            max_unauthenticated_per_address: self.max_unauthenticated_per_address,
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            failed_auth_burst: self.failed_auth_burst,
            failed_auth_interval: Duration::from_millis(self.failed_auth_interval_ms),
        };
    }
}

#[derive(Debug, Subcommand)]
enum HubCommand {
    /// Manage users (on this machine; `user add` with the hub stopped).
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
    /// Revoke a user's tokens and print a new one (for a lost or leaked token); with
    /// --revoke, issue none. Works while the hub runs: its connections of the user close
    /// at once.
    Token {
        #[arg(long)]
        handle: String,
        /// Only revoke: the user gets no new token (until the operator issues one).
        #[arg(long)]
        revoke: bool,
    },
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Check the hash chain; report the first broken link.
    Verify {
        /// A head recorded earlier (`audit_head` of GET /v1/health), as N:HASH: the log
        /// must still hold entry N with that hash and extend it, so a log cut back or
        /// rewritten since fails.
        #[arg(long, value_name = "N:HASH", value_parser = audit_head)]
        expect_head: Option<(u64, String)>,
    },
}

/// Parses `N:HASH` (the hash: 64 hex digits).
fn audit_head(text: &str) -> Result<(u64, String), String> {
    let bad = || {
        format!(
            "{text:?} is not a recorded head: give N:HASH, the \"n\" and \"hash\" of \
             audit_head in GET /v1/health, e.g. 42:9f86d08…"
        )
    };
    let (n, hash) = text.trim().split_once(':').ok_or_else(bad)?;
    let n: u64 = n.trim().parse().map_err(|_| bad())?;
    let hash = hash.trim().to_ascii_lowercase();
    if hash.len() != 64 || !hash.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(bad());
    }
    Ok((n, hash))
}

/// Checks `--public-address` as the hub will read it, so a bad one fails as a bad flag.
fn public_address(text: &str) -> Result<String, String> {
    text.parse::<roundtable_hub::browsers::PublicAddress>()
        .map(|_| text.to_owned())
        .map_err(|reason| format!("{reason}; give the host:port clients reach the hub at"))
}

/// `hub` in the OS's data folder for Roundtable (`~/.local/share/roundtable/hub` on Linux;
/// `roundtable_platform::places`).
fn default_data_dir() -> PathBuf {
    roundtable_platform::places::data()
        .unwrap_or_else(|| PathBuf::from("roundtable"))
        .join("hub")
}

pub fn run(args: HubArgs) -> Result<()> {
    match args.command {
        Some(HubCommand::User(UserCommand::Add {
            ref handle,
            ref name,
        })) => {
            let config = args.config();
            let created = admin::add_user(&config, handle, name.as_deref().unwrap_or(handle))
                .with_context(|| format!("cannot create the user {handle:?}"))?;
            eprintln!(
                "created user {} ({}); this is its token, shown once:",
                created.principal.handle, created.principal.id
            );
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", created.token)?;
            Ok(())
        }
        Some(HubCommand::User(UserCommand::Token { ref handle, revoke })) => {
            let config = args.config();
            let action = if revoke {
                TokenAction::Revoke
            } else {
                TokenAction::Rotate
            };
            let token = admin::user_token(&config, handle, action)
                .with_context(|| format!("cannot change the tokens of {handle:?}"))?;
            match token {
                Some(token) => {
                    eprintln!(
                        "every earlier token of {handle} is revoked; the new one, shown once:"
                    );
                    let mut stdout = std::io::stdout().lock();
                    writeln!(stdout, "{token}")?;
                }
                None => eprintln!("every token of {handle} is revoked"),
            }
            Ok(())
        }
        Some(HubCommand::Audit(AuditCommand::Verify { ref expect_head })) => {
            let expected = expect_head.as_ref().map(|(n, hash)| (*n, hash.as_str()));
            match admin::verify_audit(&args.config(), expected) {
                Ok((count, head)) => {
                    let mut stdout = std::io::stdout().lock();
                    match expected {
                        Some((n, _)) => writeln!(
                            stdout,
                            "audit log intact: {count} entries, head {head}; it holds and \
                             extends the recorded entry {n}"
                        )?,
                        None => writeln!(stdout, "audit log intact: {count} entries, head {head}")?,
                    }
                    Ok(())
                }
                Err(admin::AdminError::Broken(broken)) => {
                    bail!("audit log broken at entry {}: {}", broken.n, broken.reason)
                }
                Err(error) => Err(error).context("cannot check the audit log"),
            }
        }
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
            let config = args.config();
            runtime.block_on(serve(config, args.serve))
        }
    }
}

async fn serve(mut config: HubConfig, args: ServeArgs) -> Result<()> {
    config.signup = args.signup;
    config.allowed_origins = args.allowed_origins;
    config.operator_name = args.operator_name;
    config.a2a_block_max = Duration::from_secs(args.a2a_block_max);
    config.outbound = roundtable_hub::config::OutboundPolicy {
        allow_hosts: args
            .a2a_outbound_allow
            .iter()
            .map(|host| {
                host.trim()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .trim_end_matches('.')
                    .to_ascii_lowercase()
            })
            .filter(|host| !host.is_empty())
            .collect(),
        allow_private: args.a2a_outbound_allow_private,
    };
    config.outbound_ttl = Duration::from_secs(args.a2a_outbound_ttl.max(1));
    config.rate_limits = (!args.no_rate_limit).then_some(RateLimits {
        agent: args.rate_limit_agent,
        user: args.rate_limit_user,
    });
    args.limits.apply(&mut config, !args.no_rate_limit);
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
    let pinnable = config.tls.clone();
    let opening = match &config.store {
        StoreLocation::DataDir => format!(
            "cannot open the hub's data in {}",
            config.data_dir.display()
        ),
        StoreLocation::Postgres(_) => "cannot open the hub's PostgreSQL store".to_owned(),
    };
    let hub = Hub::open(config).context(opening)?;
    // Listening for requests to stop before the first line: whoever reads it may ask at once.
    let stop_requests = roundtable_platform::stop::StopRequests::listen();
    // The first line on stdout tells scripts and tests where to connect.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}://{address}", hub.scheme())?;
    // What clients that do not trust the certificate's issuer pin (a certificate of its own).
    if let Some(files) = &pinnable {
        let pin =
            roundtable_core::hub_address::pin_of(&roundtable_hub::tls::leaf_certificate(files)?);
        writeln!(
            stdout,
            "certificate {pin}: clients that do not trust its issuer reach the hub as wss://HOST:PORT#{pin}"
        )?;
    }
    stdout.flush()?;
    drop(stdout);
    match hub.serve(listener, shutdown_signal(stop_requests)).await {
        // The hub has closed its connections and let go of its data: the process goes too,
        // so whatever supervises it starts it again.
        Err(roundtable_hub::HubError::Failed(failure)) => {
            eprintln!("roundtable hub: {failure}");
            std::process::exit(EXIT_HUB_FAILED);
        }
        served => Ok(served?),
    }
}

/// `roundtable hub`'s exit status when one of the hub's threads failed (`EX_SOFTWARE`).
const EXIT_HUB_FAILED: i32 = 70;

/// Resolves when the hub is asked to stop (SIGTERM or Ctrl-C; on Windows, Ctrl-C,
/// Ctrl-Break, the console closing or its stop event).
async fn shutdown_signal(requests: std::io::Result<roundtable_platform::stop::StopRequests>) {
    match requests {
        Ok(mut requests) => requests.requested().await,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
