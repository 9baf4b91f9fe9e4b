//! The dispatcher: one thread that owns the registry of connections and puts replies and
//! committed events into their queues, while the writer executes the next batch.
//!
//! Ordering is what makes `sync` exact. Batches arrive here in commit order, and a
//! connection's `Subscribe` arrives on the same queue. Every batch handed over before the
//! subscription was committed before it, so it is in the store when the connection then
//! reads its replay; every batch handed over after it is delivered live. A batch committed
//! before but handed over after may be both replayed and delivered, and the connection's
//! per-stream high-water mark drops the second copy.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use roundtable_protocol::CloseCode;
use rustc_hash::FxHashMap as HashMap;
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tracing::{info, warn};

use crate::delivery::{ConnHandle, LiveEvent, Outbound};
use crate::engine::{ConnId, Refusal, SignupOutcome};
use crate::metrics::Metrics;
use crate::state::Recipients;
use crate::store::PrincipalRecord;
use crate::visibility;

/// One thing to deliver after a commit.
#[derive(Debug)]
pub enum Delivery {
    /// A reply to a command; the permit returns to the connection once it is queued.
    Reply {
        conn: ConnId,
        item: Outbound,
        permit: Option<OwnedSemaphorePermit>,
    },
    /// A committed event.
    Event {
        event: Arc<LiveEvent>,
        recipients: Recipients,
        /// The connection that wrote it with `send` (it got the event in its `ok`).
        origin: Option<ConnId>,
    },
    /// Something to do to connections (close those of a principal).
    Effect(crate::engine::Effect),
    /// An authentication: register the connection if it succeeded, then answer.
    Auth {
        conn: ConnHandle,
        device: String,
        reply: oneshot::Sender<Result<PrincipalRecord, Refusal>>,
        result: Result<PrincipalRecord, Refusal>,
    },
    /// The answer to `POST /v1/signup`.
    Signup {
        reply: oneshot::Sender<Result<SignupOutcome, Refusal>>,
        result: Result<SignupOutcome, Refusal>,
    },
}

/// What the dispatcher's queue carries.
#[derive(Debug)]
pub enum Dispatch {
    /// Everything one committed batch produced, in order.
    Batch(Vec<Delivery>),
    /// Start live delivery to a connection.
    Subscribe {
        conn: ConnId,
        done: oneshot::Sender<()>,
    },
    /// A connection ended.
    Disconnect { conn: ConnId },
    /// Close every connection with 1012 and stop.
    Shutdown,
}

#[derive(Debug, Clone)]
pub struct DispatchHandle {
    queue: crossbeam_channel::Sender<Dispatch>,
}

impl DispatchHandle {
    pub fn send(&self, dispatch: Dispatch) -> bool {
        self.queue.send(dispatch).is_ok()
    }

    /// A handle whose dispatches the caller reads itself (tests of the writer).
    #[cfg(test)]
    pub(crate) fn detached() -> (DispatchHandle, crossbeam_channel::Receiver<Dispatch>) {
        let (queue, receiver) = crossbeam_channel::unbounded();
        (DispatchHandle { queue }, receiver)
    }
}

struct Registered {
    handle: ConnHandle,
    principal: Arc<str>,
    device: String,
    /// Receives live events (after its first `sync` began).
    live: bool,
}

struct Dispatcher {
    conns: HashMap<ConnId, Registered>,
    by_principal: HashMap<Arc<str>, Vec<ConnId>>,
    metrics: Arc<Metrics>,
    queue: crossbeam_channel::Receiver<Dispatch>,
}

/// Starts the dispatcher thread; it stops after `Shutdown`.
pub fn start(metrics: Arc<Metrics>) -> (DispatchHandle, std::thread::JoinHandle<()>) {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let dispatcher = Dispatcher {
        conns: HashMap::default(),
        by_principal: HashMap::default(),
        metrics,
        queue: receiver,
    };
    let thread = std::thread::Builder::new()
        .name("roundtable-dispatch".into())
        .spawn(move || dispatcher.run())
        .expect("spawning the dispatcher thread");
    (DispatchHandle { queue: sender }, thread)
}

impl Dispatcher {
    fn run(mut self) {
        while let Ok(dispatch) = self.queue.recv() {
            match dispatch {
                Dispatch::Batch(deliveries) => {
                    // Gather each connection's items, then queue them with one push: one
                    // wake-up of its sink per commit, not one per item.
                    let mut queued: HashMap<ConnId, Vec<Outbound>> = HashMap::default();
                    for delivery in deliveries {
                        self.deliver(delivery, &mut queued);
                    }
                    for (conn, items) in queued {
                        if let Some(registered) = self.conns.get(&conn) {
                            self.push(&registered.handle, items);
                        }
                    }
                }
                Dispatch::Subscribe { conn, done } => {
                    if let Some(registered) = self.conns.get_mut(&conn) {
                        registered.live = true;
                    }
                    let _ = done.send(());
                }
                Dispatch::Disconnect { conn } => {
                    self.remove(conn);
                }
                Dispatch::Shutdown => break,
            }
        }
        for registered in self.conns.values() {
            registered.handle.control.close(CloseCode::HubRestarting);
        }
        info!("dispatcher stopped");
    }

    fn deliver(&mut self, delivery: Delivery, queued: &mut HashMap<ConnId, Vec<Outbound>>) {
        match delivery {
            Delivery::Reply { conn, item, permit } => {
                queued.entry(conn).or_default().push(item);
                drop(permit);
            }
            Delivery::Event {
                event,
                recipients,
                origin,
            } => match recipients {
                Recipients::Room { members, also_to } => {
                    for member in members.iter().chain(also_to.as_ref()) {
                        if member.agent
                            && !visibility::agent_sees(&event.record, &member.id, member.routing)
                        {
                            continue;
                        }
                        self.to_principal(&member.id, &event, origin, queued);
                    }
                }
                Recipients::One(principal) => self.to_principal(&principal, &event, origin, queued),
            },
            Delivery::Effect(crate::engine::Effect::Close { principal, code }) => {
                for id in self
                    .by_principal
                    .get(principal.as_str())
                    .into_iter()
                    .flatten()
                {
                    if let Some(registered) = self.conns.get(id) {
                        registered.handle.control.close(code);
                    }
                }
            }
            Delivery::Auth {
                conn,
                device,
                reply,
                result,
            } => {
                if let Ok(principal) = &result {
                    self.register(Arc::from(principal.id.as_str()), device, conn);
                }
                let _ = reply.send(result);
            }
            Delivery::Signup { reply, result } => {
                let _ = reply.send(result);
            }
        }
    }

    fn to_principal(
        &self,
        principal: &str,
        event: &Arc<LiveEvent>,
        origin: Option<ConnId>,
        queued: &mut HashMap<ConnId, Vec<Outbound>>,
    ) {
        let Some(conns) = self.by_principal.get(principal) else {
            return;
        };
        let with_key = event.record.from == principal;
        for id in conns {
            let Some(registered) = self.conns.get(id) else {
                continue;
            };
            if !registered.live || Some(*id) == origin {
                continue;
            }
            queued.entry(*id).or_default().push(Outbound::Event {
                event: event.clone(),
                with_key,
            });
        }
    }

    fn push(&self, handle: &ConnHandle, items: Vec<Outbound>) {
        if !handle.push_many(items) && handle.control.close_code() == Some(CloseCode::SlowConsumer)
        {
            self.metrics.slow_consumers.fetch_add(1, Ordering::Relaxed);
            warn!(conn = handle.id.0, "closing a slow consumer (4008)");
        }
    }

    /// One live connection per (principal, device): the newer replaces the older.
    fn register(&mut self, principal: Arc<str>, device: String, handle: ConnHandle) {
        let replaced: Vec<ConnId> = self
            .by_principal
            .get(&principal)
            .into_iter()
            .flatten()
            .filter(|id| self.conns.get(id).is_some_and(|c| c.device == device))
            .copied()
            .collect();
        for id in replaced {
            if let Some(old) = self.remove(id) {
                old.handle.control.close(CloseCode::Replaced);
            }
        }
        self.by_principal
            .entry(principal.clone())
            .or_default()
            .push(handle.id);
        self.conns.insert(
            handle.id,
            Registered {
                handle,
                principal,
                device,
                live: false,
            },
        );
    }

    fn remove(&mut self, id: ConnId) -> Option<Registered> {
        let registered = self.conns.remove(&id)?;
        if let Some(ids) = self.by_principal.get_mut(&registered.principal) {
            ids.retain(|other| *other != id);
            if ids.is_empty() {
                self.by_principal.remove(&registered.principal);
            }
        }
        Some(registered)
    }
}
