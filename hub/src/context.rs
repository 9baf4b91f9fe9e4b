//! The hub's context: what every edge (a WebSocket session, the gateway, A2A, MCP, HTTP)
//! shares of one running hub.
//!
//! Why a module of its own: the edges all reach the write pipeline (the writer, the
//! dispatcher), the read store and the configuration through this one value, so it sits
//! between those and the edges, and no edge imports another to get at the hub.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::admission::Admission;
use crate::config::HubConfig;
use crate::dispatch::DispatchHandle;
use crate::metrics::Metrics;
use crate::store::ReadStore;
use crate::writer::WriterHandle;

/// What every connection shares.
pub struct HubContext {
    pub writer: WriterHandle,
    pub dispatch: DispatchHandle,
    pub reader: Arc<dyn ReadStore>,
    pub config: HubConfig,
    pub metrics: Arc<Metrics>,
    pub hub_id: String,
    pub epoch: String,
    /// The counts of sockets and failed authentications (see [`crate::admission`]).
    pub admission: Arc<Admission>,
    /// The writer and flush threads (for `GET /v1/health`).
    pub threads: crate::threads::Threads,
    /// `POST /v1/signup`s per client address, when they are limited.
    pub signups: Option<std::sync::Mutex<crate::admission::AddressBuckets>>,
    /// Set when the hub begins to stop: sockets not yet authenticated, and closed ones
    /// lingering for their peer, end at once.
    pub stopping: tokio::sync::watch::Sender<bool>,
    /// In a cluster with a bus: the writer's announcements, until the bus takes them.
    pub announced: std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<u64>>>,
    pub(crate) next_conn: AtomicU64,
}

impl std::fmt::Debug for HubContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubContext").finish_non_exhaustive()
    }
}

impl HubContext {
    /// The hub's time ([`HubConfig::clock`]): what the engine decides by, and so what any
    /// time compared with one it wrote (a call's due time, a request's expiry) is read with.
    pub fn now_ms(&self) -> i64 {
        self.config.clock.now_ms()
    }

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        writer: WriterHandle,
        dispatch: DispatchHandle,
        reader: Arc<dyn ReadStore>,
        config: HubConfig,
        metrics: Arc<Metrics>,
        hub_id: String,
        epoch: String,
    ) -> HubContext {
        let admission = Admission::new(config.connections);
        let signups = config.signups_per_hour.map(|per_hour| {
            let per_hour = per_hour.max(1);
            std::sync::Mutex::new(crate::admission::AddressBuckets::new(
                per_hour,
                Duration::from_secs(3600) / per_hour,
            ))
        });
        HubContext {
            writer,
            dispatch,
            reader,
            config,
            metrics,
            hub_id,
            epoch,
            admission,
            threads: crate::threads::Threads::default(),
            signups,
            stopping: tokio::sync::watch::Sender::new(false),
            announced: std::sync::Mutex::new(None),
            next_conn: AtomicU64::new(1),
        }
    }
}
