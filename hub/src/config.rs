//! The hub's settings. The command line fills them from flags and `ROUNDTABLE_HUB_*`
//! variables; tests build them directly, with short heartbeats and small queues.

use std::path::PathBuf;
use std::time::Duration;

use roundtable_protocol::defaults;

use crate::browsers::Origin;
pub use roundtable_engine::outbound_guard::OutboundPolicy;
pub use roundtable_engine::settings::{RateLimit, RateLimits, SignupMode};

/// Where the hub keeps its data.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum StoreLocation {
    /// SQLite, `hub.sqlite3` in the data directory (the default).
    #[default]
    DataDir,
    /// A PostgreSQL database, by its `postgres://` URL.
    Postgres(String),
}

impl std::fmt::Debug for StoreLocation {
    // The URL may hold a password: never in a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreLocation::DataDir => f.write_str("DataDir"),
            StoreLocation::Postgres(_) => f.write_str("Postgres(..)"),
        }
    }
}

impl std::str::FromStr for StoreLocation {
    type Err = String;

    fn from_str(text: &str) -> Result<StoreLocation, String> {
        if text.is_empty() || text == "sqlite" {
            Ok(StoreLocation::DataDir)
        } else if is_postgres_url(text) {
            Ok(StoreLocation::Postgres(text.to_owned()))
        } else {
            Err(
                "the store is `sqlite` (in the data directory) or a PostgreSQL URL, \
                 postgres://user@host:port/database"
                    .to_owned(),
            )
        }
    }
}

/// Checks a cluster process's name: 1 to 64 of `a-z 0-9 _ -`.
pub fn node_name(text: &str) -> Result<String, String> {
    let valid = (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if valid {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "a node name is 1 to 64 of a-z, 0-9, _ and -, such as hub-1; got {text:?}"
        ))
    }
}

/// Everything the hub needs to run.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// The hub's own files: its SQLite database (created if missing) unless `store` says
    /// otherwise, its lock, its Unix sockets.
    pub data_dir: PathBuf,
    /// Where the hub's data is.
    pub store: StoreLocation,
    /// This process's name in a cluster of hub processes sharing a PostgreSQL store
    /// (`None`: the only hub on its store).
    pub node: Option<String>,
    /// How often a process of a cluster looks for the others' batches.
    pub cluster_poll: Duration,
    /// A NATS server (`nats://host:port`) the processes of a cluster tell each other of
    /// their commits on, so they need not wait for the next poll.
    pub bus: Option<String>,
    pub signup: SignupMode,
    /// The time the hub decides by (the system's; tests move it forward rather than wait).
    pub clock: crate::clock::Clock,
    /// Heartbeat period announced in `hello`; a connection silent for twice this is closed.
    pub heartbeat: Duration,
    /// Largest accepted frame in bytes; a larger one closes the connection with 1009.
    pub max_frame: usize,
    /// Outbound frames buffered per connection before it is closed with 4008.
    pub max_queue: usize,
    /// Outbound bytes buffered per connection before it is closed with 4008 (announced in
    /// `hello`).
    pub max_queue_bytes: usize,
    /// Reads (`history`, `audit`) one connection may have in flight; past them the hub
    /// stops reading its frames until one is answered.
    pub max_reads_in_flight: usize,
    /// Most bytes of events one `history` reply carries; a page cut short by them says
    /// `more`. Also the size of each page a `sync` replay is read in.
    pub page_bytes: usize,
    /// Live connections of one principal; one more gets `err busy` and close 1013.
    pub max_devices: usize,
    /// Bounds on sockets, most of them before authentication (see [`crate::listener`]).
    pub connections: ConnectionLimits,
    /// `POST /v1/signup`s per client address and hour; `None`: unlimited (tests and
    /// benchmarks).
    pub signups_per_hour: Option<u32>,
    /// Events of one room replayed by `sync` before a `gap` is announced.
    pub replay_max: u64,
    /// Time a new connection has to authenticate.
    pub auth_timeout: Duration,
    /// Commands one connection may have in flight before the hub stops reading its frames.
    pub max_in_flight: usize,
    /// Most commands committed in one transaction.
    pub max_batch: usize,
    /// `host:port` clients reach the hub at, written into invite links (default: the
    /// listening address). Requests whose `Host` names it are accepted besides loopback
    /// names and the listening address (see [`crate::browsers`]).
    pub public_address: Option<String>,
    /// Web origins (`https://app.example.com`) whose pages may call the hub besides its
    /// own; any other request carrying an `Origin` gets 403 (see [`crate::browsers`]).
    /// Empty by default: the hub's clients are programs, which send no `Origin`.
    pub allowed_origins: Vec<Origin>,
    /// Token buckets for every write (`send` and each other state-changing command);
    /// `None` turns rate limiting off (for benchmarks).
    pub rate_limits: Option<RateLimits>,
    /// Agents one user may register.
    pub max_agents_per_user: usize,
    /// Certificate chain and private key (PEM) to serve `wss`/`https` instead of plain
    /// `ws`/`http`.
    pub tls: Option<TlsFiles>,
    /// Who runs the hub, named as the provider on agents' A2A cards (default: the hub's
    /// host name).
    pub operator_name: Option<String>,
    /// The longest a blocking A2A `SendMessage` waits for the agent before it answers with
    /// the task still working (the client then polls or subscribes).
    pub a2a_block_max: Duration,
    /// Which addresses remote A2A agents may have (the SSRF guard's exceptions).
    pub outbound: roundtable_engine::outbound_guard::OutboundPolicy,
    /// How long the hub keeps trying a call to a remote agent before it posts that the
    /// call timed out.
    pub outbound_ttl: Duration,
    /// How long a process holds a claimed call before another may take it (a crashed
    /// process's calls are retried after it).
    pub outbound_lease: Duration,
}

/// Bounds on the sockets a hostile client can hold open, mostly before it has
/// authenticated. Client addresses are counted by IP address (an IPv6 address by its /64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open TCP connections in total; past it, new ones are closed at once.
    pub max_connections: usize,
    /// Open TCP connections from one client address.
    pub max_connections_per_address: usize,
    /// WebSockets that have not authenticated yet, in total; past it, an upgrade gets 503.
    pub max_unauthenticated: usize,
    /// WebSockets that have not authenticated yet, from one client address.
    pub max_unauthenticated_per_address: usize,
    /// Time a client has to send a request's headers, and the longest an HTTP connection
    /// may sit idle between requests.
    pub header_timeout: Duration,
    /// Failed authentications one client address may make in a burst; then one more per
    /// `failed_auth_interval`. Past them, its upgrades get 429 with `Retry-After`.
    pub failed_auth_burst: u32,
    pub failed_auth_interval: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 10_000,
            max_connections_per_address: 512,
            max_unauthenticated: 1024,
            max_unauthenticated_per_address: 256,
            header_timeout: Duration::from_secs(10),
            failed_auth_burst: 20,
            failed_auth_interval: Duration::from_secs(3),
        }
    }
}

/// Where the hub's TLS certificate and key are.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl HubConfig {
    /// The defaults of the protocol, storing in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> HubConfig {
        HubConfig {
            data_dir: data_dir.into(),
            store: StoreLocation::DataDir,
            node: None,
            cluster_poll: Duration::from_millis(20),
            bus: None,
            signup: SignupMode::Open,
            clock: Default::default(),
            heartbeat: Duration::from_millis(defaults::HB_MS),
            max_frame: defaults::MAX_FRAME,
            max_queue: defaults::MAX_QUEUE,
            max_queue_bytes: defaults::MAX_QUEUE_BYTES,
            max_reads_in_flight: 4,
            page_bytes: 1024 * 1024,
            max_devices: defaults::MAX_DEVICES,
            connections: ConnectionLimits::default(),
            signups_per_hour: Some(10),
            replay_max: defaults::REPLAY_MAX,
            auth_timeout: Duration::from_millis(defaults::AUTH_TIMEOUT_MS),
            max_in_flight: 1024,
            max_batch: 2048,
            public_address: None,
            allowed_origins: Vec::new(),
            rate_limits: Some(RateLimits::default()),
            max_agents_per_user: 100,
            tls: None,
            operator_name: None,
            a2a_block_max: Duration::from_secs(300),
            outbound: roundtable_engine::outbound_guard::OutboundPolicy::default(),
            outbound_ttl: Duration::from_secs(3600),
            outbound_lease: Duration::from_secs(60),
        }
    }

    /// The lock file that keeps two hubs (or a hub and `roundtable hub user add`) from
    /// using one data directory at once.
    pub fn lock_path(&self) -> PathBuf {
        self.data_dir.join("hub.lock")
    }

    /// The database file inside `data_dir`.
    pub fn database_path(&self) -> PathBuf {
        self.data_dir.join("hub.sqlite3")
    }
}

/// How the hub names a PostgreSQL store: `postgres://user@host/db` or
/// `postgresql:///db?host=/run/postgresql`, as libpq takes them.
pub fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}
