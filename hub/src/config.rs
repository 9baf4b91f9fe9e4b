//! The hub's settings. The command line fills them from flags and `ROUNDTABLE_HUB_*`
//! variables; tests build them directly, with short heartbeats and small queues.

use std::path::PathBuf;
use std::time::Duration;

use roundtable_protocol::defaults;

use crate::engine::RateLimits;

/// Who may create users over `POST /v1/signup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignupMode {
    /// Anyone.
    #[default]
    Open,
    /// Only with a valid invite code.
    Invite,
    /// Nobody: the operator creates users on the hub's machine.
    Closed,
}

impl SignupMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SignupMode::Open => "open",
            SignupMode::Invite => "invite",
            SignupMode::Closed => "closed",
        }
    }
}

impl std::str::FromStr for SignupMode {
    type Err = String;

    fn from_str(text: &str) -> Result<SignupMode, String> {
        match text {
            "open" => Ok(SignupMode::Open),
            "invite" => Ok(SignupMode::Invite),
            "closed" => Ok(SignupMode::Closed),
            other => Err(format!(
                "unknown signup mode {other:?}: use open, invite or closed"
            )),
        }
    }
}

/// Everything the hub needs to run.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Where the SQLite database lives (created if missing).
    pub data_dir: PathBuf,
    pub signup: SignupMode,
    /// Heartbeat period announced in `hello`; a connection silent for twice this is closed.
    pub heartbeat: Duration,
    /// Largest accepted frame in bytes; a larger one closes the connection with 1009.
    pub max_frame: usize,
    /// Outbound frames buffered per connection before it is closed with 4008.
    pub max_queue: usize,
    /// Events of one room replayed by `sync` before a `gap` is announced.
    pub replay_max: u64,
    /// Time a new connection has to authenticate.
    pub auth_timeout: Duration,
    /// Commands one connection may have in flight before the hub stops reading its frames.
    pub max_in_flight: usize,
    /// Most commands committed in one transaction.
    pub max_batch: usize,
    /// `host:port` clients reach the hub at, written into invite links (default: the
    /// listening address).
    pub public_address: Option<String>,
    /// Token buckets for `send`; `None` turns rate limiting off (for benchmarks).
    pub rate_limits: Option<RateLimits>,
    /// Certificate chain and private key (PEM) to serve `wss`/`https` instead of plain
    /// `ws`/`http`.
    pub tls: Option<TlsFiles>,
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
            signup: SignupMode::Open,
            heartbeat: Duration::from_millis(defaults::HB_MS),
            max_frame: defaults::MAX_FRAME,
            max_queue: defaults::MAX_QUEUE,
            replay_max: defaults::REPLAY_MAX,
            auth_timeout: Duration::from_millis(defaults::AUTH_TIMEOUT_MS),
            max_in_flight: 1024,
            max_batch: 2048,
            public_address: None,
            rate_limits: Some(RateLimits::default()),
            tls: None,
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
