//! The dispatcher: the registry of live connections, and the fan-out that puts replies and
//! committed events into their queues. The flush stage runs the fan-out on its own thread
//! right after each flush, so a durable batch reaches the connections' sinks with no
//! further thread hop; sessions subscribe and unsubscribe under the same lock.
//!
//! Ordering is what makes `sync` exact. Batches are fanned out in commit order, each after
//! its commit, under the lock a connection's subscription takes. Every batch fanned out
//! before the subscription was committed before it, so it is in the store when the
//! connection then reads its replay; every batch fanned out after it is delivered live. A
//! batch committed before but fanned out after may be both replayed and delivered, and the
//! connection's per-stream high-water mark drops the second copy.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use roundtable_protocol::CloseCode;
use rustc_hash::FxHashMap as HashMap;
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tracing::{info, warn};

use crate::delivery::{ConnHandle, LiveEvent, Outbound};
use crate::metrics::Metrics;
use crate::relay::{Relay, RelaySettings};
use roundtable_engine::records::PrincipalRecord;
use roundtable_engine::state::Recipients;
use roundtable_engine::visibility;
use roundtable_engine::{ConnId, Refusal, SignupOutcome};

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
    Effect(roundtable_engine::Effect),
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
    /// The answer to the operator's request (see [`crate::operator`]): a new token, if any.
    Operator {
        reply: oneshot::Sender<Result<Option<String>, Refusal>>,
        result: Result<Option<String>, Refusal>,
    },
    /// The answer to a gateway's request (see [`crate::writer::Request::Call`]).
    Answer(Answer),
    /// In a cluster: the deliveries that follow, up to the next position, are those of the
    /// batch at this place in the order of every process's batches.
    Position(u64),
    /// Another process of the cluster authenticated this device: a connection of it here
    /// is replaced (4009).
    Replaced { principal: String, device: String },
}

/// The answer to a request that came through a gateway rather than a connection.
#[derive(Debug)]
pub enum Answer {
    Call {
        reply: oneshot::Sender<Result<roundtable_engine::Reply, Refusal>>,
        result: Result<roundtable_engine::Reply, Refusal>,
    },
    Principal {
        reply: oneshot::Sender<Result<PrincipalRecord, Refusal>>,
        result: Result<PrincipalRecord, Refusal>,
    },
}

impl Delivery {
    /// Whether every process fans it out (an event, a close), rather than only the one
    /// that holds the connection it answers.
    fn is_shared(&self) -> bool {
        matches!(
            self,
            Delivery::Event { .. } | Delivery::Effect(_) | Delivery::Replaced { .. }
        )
    }
}

/// What a batch another process committed delivers here, after its position.
pub fn deliveries_of(
    committed: &roundtable_engine::records::Committed,
    at: std::time::Instant,
) -> Vec<Delivery> {
    let batch = &committed.batch;
    let mut deliveries = vec![Delivery::Position(committed.n)];
    for (record, recipients) in roundtable_engine::replication::delivered_events(batch) {
        deliveries.push(Delivery::Event {
            event: Arc::new(crate::delivery::LiveEvent::new(Arc::new(record), at)),
            recipients,
            origin: None,
        });
    }
    for auth in &batch.auths {
        deliveries.push(Delivery::Replaced {
            principal: auth.principal.clone(),
            device: auth.device.clone(),
        });
    }
    for (principal, code) in batch.close_codes() {
        deliveries.push(Delivery::Effect(roundtable_engine::Effect::Close {
            principal: principal.to_owned(),
            code,
        }));
    }
    deliveries
}

/// The dispatcher, shared by the flush stage (fan-out) and the sessions (subscriptions).
#[derive(Debug, Clone)]
pub struct DispatchHandle {
    dispatcher: Arc<Mutex<Dispatcher>>,
    rooms_written: tokio::sync::broadcast::Sender<RoomWritten>,
    closed: tokio::sync::broadcast::Sender<PrincipalClosed>,
}

/// A principal's connections were closed (its token revoked or rotated, or it was
/// stopped): the gateways end its open streams too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalClosed {
    pub principal: Arc<str>,
    pub code: CloseCode,
}

/// A room event was fanned out: what the gateways' waiters are woken by (they read the
/// room again; a waiter that lagged behind the channel reads it again too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomWritten {
    pub room: Arc<str>,
    pub seq: u64,
}

/// Room events the channel holds for a slow waiter before it lags.
const ROOMS_WRITTEN_CAPACITY: usize = 1024;

impl DispatchHandle {
    /// A dispatcher that lets each principal have at most `max_devices` live connections.
    pub fn new(metrics: Arc<Metrics>, max_devices: usize) -> DispatchHandle {
        let (rooms_written, _) = tokio::sync::broadcast::channel(ROOMS_WRITTEN_CAPACITY);
        let (closed, _) = tokio::sync::broadcast::channel(ROOMS_WRITTEN_CAPACITY);
        DispatchHandle {
            rooms_written: rooms_written.clone(),
            closed: closed.clone(),
            dispatcher: Arc::new(Mutex::new(Dispatcher {
                rooms_written,
                closed,
                conns: HashMap::default(),
                by_principal: HashMap::default(),
                metrics,
                queued: HashMap::default(),
                stopped: false,
                max_devices: max_devices.max(1),
                order: None,
                order_settings: RelaySettings::default(),
                started: std::time::Instant::now(),
            })),
        }
    }

    /// Makes this the dispatcher of one process of a cluster, whose memory includes the
    /// shared batches up to `position`: from now on batches are fanned out by position,
    /// each once and in order, wherever they come from. A position that later ones have
    /// waited on for `own_gap_wait` may be filled from the store even if it is this
    /// process's own (its writer failed after committing it).
    pub fn in_cluster(self, position: u64, own_gap_wait: std::time::Duration) -> DispatchHandle {
        let settings = RelaySettings {
            gap_wait_ms: own_gap_wait.as_millis() as i64,
            max_held: usize::MAX,
        };
        let mut dispatcher = self.lock();
        dispatcher.order = Some(Relay::after(position, settings));
        dispatcher.order_settings = settings;
        drop(dispatcher);
        self
    }

    /// In a cluster, after the batches from the next position on were pruned before this
    /// process fanned them out: goes on after `position`, and closes every connection with
    /// 1012 so each resumes from its cursor (replayed from the store, nothing lost).
    pub fn resync(&self, position: u64) {
        let mut dispatcher = self.lock();
        if dispatcher.order.is_none() {
            return;
        }
        let settings = dispatcher.order_settings;
        dispatcher.order = Some(Relay::after(position, settings));
        for registered in dispatcher.conns.values() {
            registered.handle.control.close(CloseCode::HubRestarting);
        }
    }

    /// In a cluster: the next position to fan out, and whether it has been missing long
    /// enough to be filled from the store whoever committed it.
    pub fn expecting(&self) -> Option<(u64, bool)> {
        let dispatcher = self.lock();
        let now_ms = dispatcher.now_ms();
        dispatcher
            .order
            .as_ref()
            .map(|order| (order.next(), order.fill_due(now_ms).is_some()))
    }

    /// Every room event fanned out from now on, this process's and (in a cluster) the
    /// others'.
    pub fn watch_rooms(&self) -> tokio::sync::broadcast::Receiver<RoomWritten> {
        self.rooms_written.subscribe()
    }

    /// Every principal whose connections are closed from now on (see [`PrincipalClosed`]).
    pub fn watch_closes(&self) -> tokio::sync::broadcast::Receiver<PrincipalClosed> {
        self.closed.subscribe()
    }

    fn lock(&self) -> MutexGuard<'_, Dispatcher> {
        self.dispatcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Fans out everything one or more durable batches produced, in order.
    pub fn batch(&self, deliveries: Vec<Delivery>) {
        self.lock().batch(deliveries);
    }

    /// Starts live delivery to a connection (when its first `sync` begins). False once the
    /// hub is stopping.
    pub fn subscribe(&self, conn: ConnId) -> bool {
        let mut dispatcher = self.lock();
        if dispatcher.stopped {
            return false;
        }
        if let Some(registered) = dispatcher.conns.get_mut(&conn) {
            registered.live = true;
        }
        true
    }

    /// A connection ended.
    pub fn disconnect(&self, conn: ConnId) {
        self.lock().remove(conn);
    }

    /// Closes every connection with 1012; nothing is delivered after this.
    pub fn shutdown(&self) {
        self.shutdown_with(CloseCode::HubRestarting);
    }

    /// Closes every connection with `code` (1011 when the hub failed, 1012 when it stops);
    /// nothing is delivered after this. A connection already closing keeps its code.
    pub fn shutdown_with(&self, code: CloseCode) {
        let mut dispatcher = self.lock();
        dispatcher.stopped = true;
        for registered in dispatcher.conns.values() {
            registered.handle.control.close(code);
        }
        info!(code = code.code(), "dispatcher stopped");
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
    rooms_written: tokio::sync::broadcast::Sender<RoomWritten>,
    closed: tokio::sync::broadcast::Sender<PrincipalClosed>,
    conns: HashMap<ConnId, Registered>,
    by_principal: HashMap<Arc<str>, Vec<ConnId>>,
    metrics: Arc<Metrics>,
    /// Each connection's items of the batch being fanned out (kept to reuse its table).
    queued: HashMap<ConnId, Vec<Outbound>>,
    stopped: bool,
    /// Live connections one principal may have.
    max_devices: usize,
    /// In a cluster: the batches of every process by position, each released once and in
    /// order (the same relay a stream of events would use).
    order: Option<Relay<Vec<Delivery>>>,
    order_settings: RelaySettings,
    /// The dispatcher's clock's zero, for the relay's milliseconds.
    started: std::time::Instant,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("connections", &self.conns.len())
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    fn batch(&mut self, deliveries: Vec<Delivery>) {
        if self.stopped {
            return;
        }
        if self.order.is_none() {
            self.fan_out(deliveries);
            return;
        }
        // Cut at the positions: each piece is one batch of the cluster's order (a piece
        // before any position is the answers of a batch that failed, which has none).
        let mut pieces: Vec<(Option<u64>, Vec<Delivery>)> = vec![(None, Vec::new())];
        for delivery in deliveries {
            match delivery {
                Delivery::Position(n) => pieces.push((Some(n), Vec::new())),
                delivery => pieces
                    .last_mut()
                    .expect("one piece at least")
                    .1
                    .push(delivery),
            }
        }
        let now_ms = self.now_ms();
        for (position, piece) in pieces {
            let Some(n) = position else {
                self.fan_out(piece);
                continue;
            };
            let order = self.order.as_mut().expect("in a cluster");
            if n < order.next() {
                // Fanned out already (another path brought it first): only what answers
                // this process's own connections is left.
                self.fan_out(piece.into_iter().filter(|d| !d.is_shared()).collect());
            } else if let Some(held) = order.held_mut(n) {
                // The same batch from two paths: keep the one with the answers.
                if held.len() < piece.len() {
                    *held = piece;
                }
            } else {
                for (_, ready) in order.on_event(n, piece, now_ms) {
                    self.fan_out(ready);
                }
            }
        }
    }

    /// Milliseconds since the dispatcher began (the relay's clock).
    fn now_ms(&self) -> i64 {
        self.started.elapsed().as_millis() as i64
    }

    fn fan_out(&mut self, deliveries: Vec<Delivery>) {
        if deliveries.is_empty() {
            return;
        }
        // Gather each connection's items, then queue them with one push: one wake-up of
        // its sink per batch, not one per item.
        let mut queued = std::mem::take(&mut self.queued);
        // The gateways hear of closes first, before any reply of the batch leaves: a
        // revoker that has its `ok` finds the old token refused everywhere in this process.
        if self.closed.receiver_count() > 0 {
            for delivery in &deliveries {
                if let Delivery::Effect(roundtable_engine::Effect::Close { principal, code }) =
                    delivery
                {
                    let _ = self.closed.send(PrincipalClosed {
                        principal: Arc::from(principal.as_str()),
                        code: *code,
                    });
                }
            }
        }
        let mut closes = Vec::new();
        for delivery in deliveries {
            match delivery {
                effect @ (Delivery::Effect(_) | Delivery::Replaced { .. }) => closes.push(effect),
                delivery => self.deliver(delivery, &mut queued),
            }
        }
        for (conn, items) in queued.drain() {
            if let Some(registered) = self.conns.get(&conn) {
                self.push(&registered.handle, items);
            }
        }
        // Closes last: what the batch answered or sent a connection is queued before it is
        // told to close, so it goes out first (the `ok` of the `user_token` that closed it,
        // with the new token; the `control` event of a `stop`); and a close also reaches a
        // connection the same batch authenticated.
        for close in closes {
            self.deliver(close, &mut queued);
        }
        self.queued = queued;
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
            } => {
                if let roundtable_engine::records::StreamKey::Room(room) = &event.record.stream
                    && self.rooms_written.receiver_count() > 0
                {
                    let _ = self.rooms_written.send(RoomWritten {
                        room: Arc::from(room.as_str()),
                        seq: event.record.seq,
                    });
                }
                match recipients {
                    Recipients::Room { members, also_to } => {
                        for member in members.iter().chain(also_to.as_ref()) {
                            if member.agent
                                && !visibility::agent_sees(
                                    &event.record,
                                    &member.id,
                                    member.routing,
                                )
                            {
                                continue;
                            }
                            self.to_principal(&member.id, &event, origin, queued);
                        }
                    }
                    Recipients::One(principal) => {
                        self.to_principal(&principal, &event, origin, queued)
                    }
                }
            }
            Delivery::Effect(roundtable_engine::Effect::Close { principal, code }) => {
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
                let result = result.and_then(|principal| {
                    self.register(Arc::from(principal.id.as_str()), device, conn)?;
                    Ok(principal)
                });
                let _ = reply.send(result);
            }
            Delivery::Signup { reply, result } => {
                let _ = reply.send(result);
            }
            Delivery::Operator { reply, result } => {
                let _ = reply.send(result);
            }
            Delivery::Answer(Answer::Call { reply, result }) => {
                let _ = reply.send(result);
            }
            Delivery::Answer(Answer::Principal { reply, result }) => {
                let _ = reply.send(result);
            }
            Delivery::Replaced { principal, device } => {
                let replaced: Vec<ConnId> = self
                    .by_principal
                    .get(principal.as_str())
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|id| self.conns.get(id).is_some_and(|c| c.device == device))
                    .collect();
                for id in replaced {
                    if let Some(old) = self.remove(id) {
                        old.handle.control.close(CloseCode::Replaced);
                    }
                }
            }
            Delivery::Position(_) => {}
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

    /// One live connection per (principal, device): the newer replaces the older. A
    /// principal with `max_devices` connections already (none of them on this device) gets
    /// `busy` instead.
    fn register(
        &mut self,
        principal: Arc<str>,
        device: String,
        handle: ConnHandle,
    ) -> Result<(), Refusal> {
        let (replaced, others): (Vec<ConnId>, Vec<ConnId>) = self
            .by_principal
            .get(&principal)
            .into_iter()
            .flatten()
            .partition(|id| self.conns.get(id).is_some_and(|c| c.device == device));
        if others.len() >= self.max_devices {
            return Err(Refusal::new(
                roundtable_protocol::ErrorCode::Busy,
                format!(
                    "this principal has {} live connections, the most this hub allows; close \
                     one (or reuse its device id) and connect again",
                    others.len()
                ),
            ));
        }
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
        Ok(())
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
