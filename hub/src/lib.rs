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
//! - [`http`]: the listener's routes.
//!
//! Start it with [`serve`], or [`Hub::open`] then [`Hub::serve`] to learn its ids first;
//! [`embedded::start`] runs one inside another program, on a runtime of its own.

pub mod admin;
pub mod audit;
pub mod config;
pub mod delivery;
pub mod dispatch;
pub mod durability;
pub mod embedded;
pub mod engine;
pub mod http;
pub mod ids;
pub mod metrics;
pub mod sent_keys;
pub mod session;
pub mod state;
pub mod store;
pub mod tls;
pub mod visibility;
pub mod writer;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use config::{HubConfig, SignupMode};
use tokio::net::TcpListener;
use tracing::info;

use crate::engine::Engine;
use crate::ids::IdSource;
use crate::metrics::Metrics;
use crate::session::SessionContext;
use crate::store::{Store, StoreError};
use crate::writer::Request;

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
}

/// An opened hub: its store loaded, its writer running, not yet listening.
pub struct Hub {
    context: Arc<SessionContext>,
    writer_thread: std::thread::JoinHandle<()>,
    flush_thread: std::thread::JoinHandle<()>,
    /// Held until the hub has stopped.
    lock: admin::DataLock,
    /// Set when the hub serves `wss`/`https`.
    tls: Option<Arc<rustls::ServerConfig>>,
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
        let lock = admin::DataLock::acquire(&config)?;
        let tls = config.tls.as_ref().map(tls::server_config).transpose()?;
        let mut ids = IdSource::from_os();
        let (mut store, reader) =
            store::sqlite::open(&config.database_path(), &mut ids, unix_ms())?;
        let snapshot = store.load(unix_ms())?;
        let hub_id = snapshot.hub_id.clone();
        let epoch = snapshot.epoch.clone();
        let metrics = Arc::new(Metrics::default());
        let engine = Engine::with_config(
            snapshot,
            ids,
            engine::EngineConfig {
                public_address: config
                    .public_address
                    .clone()
                    .unwrap_or_else(|| "127.0.0.1:7300".to_owned()),
                rate_limits: config.rate_limits,
            },
        );
        let dispatch = dispatch::DispatchHandle::new(metrics.clone());
        let watermark = Arc::new(durability::Watermark::default());
        let (flushing, flush_thread) = durability::start(
            store.flusher()?,
            watermark.clone(),
            dispatch.clone(),
            metrics.clone(),
        );
        let (writer, writer_thread) = writer::start(
            Box::new(store) as Box<dyn Store>,
            engine,
            flushing,
            watermark.clone(),
            metrics.clone(),
            writer::WriterConfig {
                signup: config.signup,
                max_batch: config.max_batch,
            },
        );
        let context = Arc::new(SessionContext::new(
            writer,
            dispatch,
            Arc::new(durability::DurableReads::new(Arc::new(reader), watermark)),
            config,
            metrics,
            hub_id,
            epoch,
        ));
        Ok(Hub {
            context,
            writer_thread,
            flush_thread,
            lock,
            tls,
        })
    }

    pub fn hub_id(&self) -> &str {
        &self.context.hub_id
    }

    pub fn epoch(&self) -> &str {
        &self.context.epoch
    }

    /// `wss` when the hub serves TLS, else `ws`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "wss" } else { "ws" }
    }

    /// Serves on `listener` until `shutdown` resolves; then closes every connection with
    /// 1012 and waits for the last commit.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), HubError> {
        let Hub {
            context,
            writer_thread,
            flush_thread,
            lock,
            tls,
        } = self;
        if let Ok(address) = listener.local_addr() {
            info!(%address, hub = %context.hub_id, "hub serving");
        }
        let router = http::router(context.clone());
        let writer = context.writer.clone();
        let stopping = async move {
            shutdown.await;
            info!("hub stopping");
            writer.submit(Request::Shutdown);
        };
        match tls {
            Some(tls) => {
                let listener = tls::TlsListener::new(listener, tls)?;
                axum::serve(listener, router)
                    .with_graceful_shutdown(stopping)
                    .await?;
            }
            None => {
                // Frames are small and latency matters: never hold them back for Nagle.
                let listener = axum::serve::ListenerExt::tap_io(
                    listener,
                    |stream: &mut tokio::net::TcpStream| {
                        if let Err(error) = stream.set_nodelay(true) {
                            tracing::debug!(%error, "cannot set TCP_NODELAY");
                        }
                    },
                );
                axum::serve(listener, router)
                    .with_graceful_shutdown(stopping)
                    .await?;
            }
        }
        // Sessions are closing with 1012; give them a moment to say so.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while context.metrics.connections.load(Ordering::Relaxed) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = tokio::task::spawn_blocking(move || {
            let _ = writer_thread.join();
            let _ = flush_thread.join();
        })
        .await;
        drop(lock);
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
