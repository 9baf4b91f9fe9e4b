//! Roundtable's hub: the collaboration network people and their agents meet on.
//!
//! It speaks protocol v1 (`roundtable-protocol`) over one WebSocket per client and keeps
//! every stream (a room's log, a principal's inbox) durable, densely ordered and
//! deduplicated by the sender's `client_key`, so delivery is effectively exactly once
//! across reconnects, crashes and restarts.
//!
//! Layout, from the bottom:
//! - [`store`]: durable storage behind traits; SQLite is the embedded backend.
//! - [`state`] and [`engine`]: the command logic over an in-memory view of the store; pure
//!   apart from the transaction it writes to.
//! - [`writer`]: the one thread that batches commands into group commits.
//! - [`durability`]: the thread that flushes commits to disk in groups, behind the writer,
//!   and only then releases what they produced.
//! - [`dispatch`]: the connection registry; on the flush thread, after each flush, it
//!   queues the replies and fans the events out.
//! - [`delivery`]: per-connection queues and event encoding.
//! - [`session`]: one WebSocket connection (reader and sink tasks).
//! - [`http`]: the listener's routes, behind [`browsers`]: the Host and Origin checks that
//!   keep web pages out.
//! - [`listener`]: accepts connections and serves HTTP on them with timeouts, within the
//!   counts of [`admission`]; [`websocket`] takes an upgraded socket over, holding frames
//!   to 8 KiB until `auth`.
//!
//! Start it with [`serve`], or [`Hub::open`] then [`Hub::serve`] to learn its ids first;
//! [`embedded::start`] runs one inside another program, on a runtime of its own.

pub(crate) mod a2a;
pub mod admin;
pub(crate) mod admission;
pub(crate) mod bearer;
pub mod browsers;
pub(crate) mod bus;
pub mod clock;
pub(crate) mod cluster;
pub mod config;
pub(crate) mod context;
pub(crate) mod delivery;
pub(crate) mod dispatch;
pub(crate) mod durability;
pub mod embedded;
#[cfg(test)]
mod engine;
pub(crate) mod gateway;
pub(crate) mod http;
pub(crate) mod http_reply;
pub mod layers;
pub(crate) mod listener;
pub mod mcp;
pub(crate) mod metrics;
pub(crate) mod operator;
pub(crate) mod operator_socket;
pub(crate) mod outbound_lookup;
pub(crate) mod reads;
pub(crate) mod relay;
pub(crate) mod session;
pub mod store;
#[cfg(test)]
mod test_faults;
mod threads;
pub mod tls;
pub(crate) mod websocket;
pub(crate) mod writer;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use config::{HubConfig, SignupMode, StoreLocation, TlsFiles};

/// The hub's Unix socket, in its data directory (see [`Hub::bind_socket`]).
pub const SOCKET: &str = "hub.sock";
use tokio::net::TcpListener;
use tracing::info;

use crate::context::HubContext;
use crate::metrics::Metrics;
use crate::store::StoreError;
use crate::writer::Request;
use roundtable_engine::Engine;
use roundtable_engine::ids::IdSource;
pub use threads::{HubFailure, Threads};

/// Why the hub could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("network error: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "another hub (or `roundtable hub user add`) is using {dir}; stop it first, or give \
         this one another --data directory"
    )]
    Locked { dir: String },
    #[error("TLS setup failed: {0}")]
    Tls(String),
    #[error(
        "the public address {address:?} cannot be used: {reason}; give the host:port clients \
         reach the hub at, e.g. hub.example.com:443"
    )]
    PublicAddress { address: String, reason: String },
    #[error("the hub's limits do not fit together: {0}")]
    Limits(String),
    #[error("{0}: check that the data directory is writable")]
    Mcp(String),
    /// One of the hub's own threads failed; the hub stopped (see [`HubFailure`]).
    #[error("{0}")]
    Failed(HubFailure),
}

/// An opened hub: its store loaded, its writer running, not yet listening.
pub struct Hub {
    context: Arc<HubContext>,
    /// Held until the hub has stopped.
    lock: admin::DataLock,
    /// Set when the hub serves `wss`/`https`.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// `config.public_address`, read for the Host and Origin checks.
    public_address: Option<browsers::PublicAddress>,
    /// What `/mcp` keeps of its sessions and streams across a restart.
    mcp_streams: mcp::streams::McpStreams,
    /// What the flush stage has made durable: abandoned when a thread fails, so reads that
    /// wait for it give up.
    watermark: Arc<durability::Watermark>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("hub_id", &self.context.hub_id)
            .field("epoch", &self.context.epoch)
            .finish()
    }
}

pub(crate) fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

impl Hub {
    /// Opens (or creates) the store in `config.data_dir` and starts the writer.
    pub fn open(config: HubConfig) -> Result<Hub, HubError> {
        // A hub reached on its Unix socket alone has no name for browsers to use.
        let public_address = config
            .public_address
            .as_deref()
            .filter(|address| !address.starts_with("unix:"))
            .map(|address| {
                address
                    .parse::<browsers::PublicAddress>()
                    .map_err(|reason| HubError::PublicAddress {
                        address: address.to_owned(),
                        reason,
                    })
            })
            .transpose()?;
        if config.page_bytes.saturating_mul(2) > config.max_queue_bytes {
            return Err(HubError::Limits(format!(
                "a page of {} bytes must fit twice in max_queue_bytes ({}): a history reply \
                 alone would close every connection that asks for one",
                config.page_bytes, config.max_queue_bytes
            )));
        }
        let lock = admin::DataLock::acquire(&config)?;
        let tls = config.tls.as_ref().map(tls::server_config).transpose()?;
        let mut ids = IdSource::from_os();
        // The process's TLS provider for HTTP clients built without a configuration of
        // their own (the A2A crates'): ring, as everywhere in the hub.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (mut store, reader) = store::open(&config, &mut ids, config.clock.now_ms())?;
        #[cfg(test)]
        {
            store = test_faults::store(&config.data_dir, store);
        }
        let snapshot = store.load(config.clock.now_ms())?;
        let shared_position = snapshot.shared_position;
        let hub_id = snapshot.hub_id.clone();
        let epoch = snapshot.epoch.clone();
        let metrics = Arc::new(Metrics::default());
        let engine = Engine::with_config(
            snapshot,
            ids,
            roundtable_engine::EngineConfig {
                public_address: config
                    .public_address
                    .clone()
                    .unwrap_or_else(|| "127.0.0.1:7300".to_owned()),
                rate_limits: config.rate_limits,
                max_agents_per_user: config.max_agents_per_user,
                shares_buckets: config.node.is_some(),
                outbound: config.outbound.clone(),
            },
        );
        let dispatch = dispatch::DispatchHandle::new(metrics.clone(), config.max_devices);
        let dispatch = match &config.node {
            Some(_) => dispatch.in_cluster(shared_position, cluster::OWN_GAP_WAIT),
            None => dispatch,
        };
        let watermark = Arc::new(durability::Watermark::default());
        let (flushing, flush_thread) = durability::start(
            store.flusher()?,
            watermark.clone(),
            dispatch.clone(),
            metrics.clone(),
        );
        // In a cluster with a bus: the writer announces its batches to the other hubs.
        let (announcer, announced) = match (&config.node, &config.bus) {
            (Some(_), Some(_)) => {
                let (announcer, announced) = bus::announcements();
                (Some(announcer), Some(announced))
            }
            _ => (None, None),
        };
        let (writer, writer_thread) = writer::start(
            store,
            engine,
            flushing,
            watermark.clone(),
            metrics.clone(),
            writer::WriterConfig {
                signup: config.signup,
                max_batch: config.max_batch,
                announcer,
                clock: config.clock.clone(),
            },
        );
        let mut context = HubContext::new(
            writer,
            dispatch,
            Arc::new(durability::DurableReads::new(reader, watermark.clone())),
            config,
            metrics,
            hub_id,
            epoch,
        );
        context.threads = Threads::watch(vec![("writer", writer_thread), ("flush", flush_thread)])?;
        context.announced = std::sync::Mutex::new(announced);
        let mcp_streams = mcp::streams::McpStreams::open(&context.config.data_dir, unix_ms())
            .map_err(|error| HubError::Mcp(error.to_string()))?;
        Ok(Hub {
            context: Arc::new(context),
            lock,
            tls,
            public_address,
            mcp_streams,
            watermark,
        })
    }

    pub fn hub_id(&self) -> &str {
        &self.context.hub_id
    }

    pub fn epoch(&self) -> &str {
        &self.context.epoch
    }

    /// Binds the hub's local socket, [`SOCKET`] in its data directory (a Unix socket in a
    /// directory only its user may enter; on Windows, a named pipe only its user may open):
    /// local clients reach the hub there, where no other local user can stand in for it. A
    /// socket left by a hub that stopped is replaced. Call it within the runtime that will
    /// serve it.
    pub fn bind_socket(
        &self,
    ) -> Result<roundtable_platform::local_socket::LocalListener, HubError> {
        let path = self.context.config.data_dir.join(SOCKET);
        Ok(roundtable_platform::local_socket::LocalListener::bind(
            &path,
        )?)
    }

    /// `wss` when the hub serves TLS, else `ws`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "wss" } else { "ws" }
    }

    /// Serves on `listener` until `shutdown` resolves; then closes every connection with
    /// 1012 and waits for the last commit. When one of the hub's threads fails instead, it
    /// closes every connection with 1011, stops, and returns [`HubError::Failed`].
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), HubError> {
        let listeners = listener::Listeners {
            tcp: Some(listener),
            ..listener::Listeners::default()
        };
        self.serve_on(listeners, shutdown).await
    }

    /// Serves on `listeners` (a TCP port, the Unix socket of [`Hub::bind_socket`], or
    /// both) until `shutdown` resolves; see [`Hub::serve`].
    pub async fn serve_on(
        self,
        listeners: listener::Listeners,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), HubError> {
        let Hub {
            context,
            lock,
            tls,
            public_address,
            mcp_streams,
            watermark,
        } = self;
        // Without a TCP address, only loopback names and the public address are let in
        // (the stricter side).
        let address = match &listeners.tcp {
            Some(listener) => listener.local_addr().unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot read the listening address");
                std::net::SocketAddr::from(([127, 0, 0, 1], 0))
            }),
            None => std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        info!(%address, hub = %context.hub_id, node = ?context.config.node, "hub serving");
        // In a cluster: the other processes' batches, between this one's own, read at each
        // poll or as soon as the bus says one is in.
        let wake = Arc::new(tokio::sync::Notify::new());
        let announced = context
            .announced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let _bus = match (&context.config.bus, announced) {
            (Some(url), Some(announced)) => Some(bus::Bus::start(
                url,
                &context.hub_id,
                announced,
                wake.clone(),
            )),
            _ => None,
        };
        let _follower = context.config.node.clone().map(|node| {
            cluster::follow(
                node,
                context.reader.clone(),
                context.dispatch.clone(),
                context.config.cluster_poll,
                wake.clone(),
            )
        });
        // Calls to remote agents that messages in rooms owe, while the hub serves.
        let _outbound = a2a::outbound::start(context.clone());
        let browsers = browsers::BrowserPolicy::new(
            tls.is_some(),
            address,
            public_address,
            context.config.allowed_origins.clone(),
        );
        let router = http::router(context.clone(), Arc::new(browsers), mcp_streams);
        let stopping = {
            let context = context.clone();
            async move {
                tokio::select! {
                    () = shutdown => info!("hub stopping"),
                    failure = context.threads.failed() => {
                        tracing::error!(%failure, "hub stopping");
                        // Nothing more becomes durable: reads waiting for it give up, and
                        // every connection is told (1011) before it would wait in vain.
                        watermark.abandon();
                        context
                            .dispatch
                            .shutdown_with(roundtable_protocol::CloseCode::HubFailed);
                    }
                }
                context.stopping.send_replace(true);
                context.writer.submit(Request::Shutdown);
            }
        };
        // The operator's socket in the data directory, while the hub serves.
        let (operator_stop, operator_task) = {
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let dir = context.config.data_dir.clone();
            let writer = context.writer.clone();
            let task = tokio::spawn(async move {
                operator_socket::serve(&dir, writer, async {
                    let _ = stopped.await;
                })
                .await;
            });
            (stop, task)
        };
        listener::serve(
            listeners,
            tls,
            router,
            context.admission.clone(),
            context.metrics.clone(),
            stopping,
        )
        .await;
        let _ = operator_stop.send(());
        let _ = operator_task.await;
        // Sessions are closing with 1012; give them a moment to say so.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while context.metrics.connections.load(Ordering::Relaxed) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let threads = context.clone();
        let _ = tokio::task::spawn_blocking(move || threads.threads.join()).await;
        drop(lock);
        if let Some(failure) = context.threads.failure() {
            info!("hub stopped after a failure");
            return Err(HubError::Failed(failure));
        }
        info!("hub stopped");
        Ok(())
    }
}

/// Opens the hub in `config.data_dir` and serves on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    config: HubConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HubError> {
    Hub::open(config)?.serve(listener, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_hub_runs_only_while_both_its_threads_do_and_hears_of_one_that_panics() {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let waiting = std::thread::spawn(move || {
            let _ = stopped.recv();
        });
        let panicking =
            std::thread::spawn(|| crate::threads::stop_on_panic("flush", || panic!("a bug")));
        let threads = Threads::watch(vec![("writer", waiting), ("flush", panicking)]).unwrap();
        let failure = threads.failed().await;
        assert_eq!(
            failure,
            HubFailure {
                thread: "flush",
                panic: "a bug".into()
            }
        );
        assert!(!threads.running(), "the flush stage has ended");
        assert_eq!(threads.failure(), Some(failure));
        let (keep, idle) = std::sync::mpsc::channel::<()>();
        let (keep_too, idle_too) = std::sync::mpsc::channel::<()>();
        let both = Threads::watch(vec![
            (
                "writer",
                std::thread::spawn(move || {
                    let _ = idle.recv();
                }),
            ),
            (
                "flush",
                std::thread::spawn(move || {
                    let _ = idle_too.recv();
                }),
            ),
        ])
        .unwrap();
        assert!(both.running());
        assert!(!Threads::default().running(), "not started");
        drop((stop, keep, keep_too));
        threads.join();
        both.join();
        assert!(!both.running(), "joined");
        assert_eq!(both.failure(), None, "they ended well");
    }
}
