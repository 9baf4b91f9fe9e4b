//! The single writer: one OS thread that owns the store's write connection, the command
//! logic's state and the registry of connections.
//!
//! Why one thread: `seq`s must be dense and assigned in commit order, and SQLite has one
//! writer anyway. Why batches: an fsync costs milliseconds, so the writer takes every
//! request waiting in its queue, executes them all in one transaction and commits once
//! (group commit). Replies and live events leave only after that commit returns, so an
//! `ok` always means durable and no reader sees an uncommitted event. The connection
//! registry lives here too, so registering a connection for live delivery is ordered with
//! commits: everything committed before the registration is in the store when the
//! connection then reads its replay, and everything after is delivered live.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use roundtable_protocol::client::{ClientFrame, SignupRequest};
use roundtable_protocol::model::Routing;
use roundtable_protocol::server::ServerFrame;
use roundtable_protocol::{CloseCode, ErrorCode};
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tracing::{error, info, warn};

use crate::config::SignupMode;
use crate::delivery::{ConnHandle, LiveEvent, Outbound, err_frame};
use crate::engine::{
    Caller, ConnId, Engine, ExecError, NewEvent, Outcome, Refusal, Reply, SignupOutcome,
};
use crate::metrics::Metrics;
use crate::state::HubState;
use crate::store::{PrincipalRecord, Store};
use crate::visibility;

/// A request to the writer.
#[derive(Debug)]
pub enum Request {
    /// Authenticate a new connection and register it (replacing an older connection of the
    /// same principal and device).
    Auth {
        token: String,
        device: String,
        conn: ConnHandle,
        reply: oneshot::Sender<Result<PrincipalRecord, Refusal>>,
    },
    /// A command of an authenticated connection.
    Command {
        caller: Caller,
        frame: ClientFrame,
        /// Held until the reply is queued: bounds each connection's commands in flight.
        permit: OwnedSemaphorePermit,
    },
    /// Start live delivery to a connection.
    Subscribe {
        conn: ConnId,
        done: oneshot::Sender<()>,
    },
    /// A connection ended.
    Disconnect { conn: ConnId },
    /// `POST /v1/signup`.
    Signup {
        request: SignupRequest,
        reply: oneshot::Sender<Result<SignupOutcome, Refusal>>,
    },
    /// Close every connection with 1012 and stop.
    Shutdown,
}

/// The handle the rest of the hub uses to reach the writer.
#[derive(Debug, Clone)]
pub struct WriterHandle {
    requests: crossbeam_channel::Sender<Request>,
}

impl WriterHandle {
    /// Queues a request; false when the writer has stopped.
    pub fn submit(&self, request: Request) -> bool {
        self.requests.send(request).is_ok()
    }
}

struct Registered {
    handle: ConnHandle,
    principal: String,
    device: String,
    /// Receives live events (after its first `sync` began).
    live: bool,
}

#[derive(Default)]
struct Registry {
    conns: HashMap<ConnId, Registered>,
    by_principal: HashMap<String, Vec<ConnId>>,
}

impl Registry {
    fn insert(&mut self, principal: &str, device: &str, handle: ConnHandle) {
        // One live connection per (principal, device): the newer replaces the older.
        let replaced: Vec<ConnId> = self
            .by_principal
            .get(principal)
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
            .entry(principal.to_owned())
            .or_default()
            .push(handle.id);
        self.conns.insert(
            handle.id,
            Registered {
                handle,
                principal: principal.to_owned(),
                device: device.to_owned(),
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

    fn handle(&self, id: ConnId) -> Option<&ConnHandle> {
        self.conns.get(&id).map(|registered| &registered.handle)
    }
}

/// What to do for one request once its batch is committed.
enum Pending {
    Command {
        conn: ConnId,
        re: u64,
        result: Result<Outcome, Refusal>,
        _permit: OwnedSemaphorePermit,
    },
    Auth {
        reply: oneshot::Sender<Result<PrincipalRecord, Refusal>>,
        result: Result<PrincipalRecord, Refusal>,
    },
    Subscribe {
        done: oneshot::Sender<()>,
    },
    Signup {
        reply: oneshot::Sender<Result<SignupOutcome, Refusal>>,
        result: Result<SignupOutcome, Refusal>,
    },
}

fn internal() -> Refusal {
    Refusal::new(
        ErrorCode::Internal,
        "the hub could not store this; nothing was written, retry",
    )
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

struct Writer {
    store: Box<dyn Store>,
    engine: Engine,
    registry: Registry,
    metrics: Arc<Metrics>,
    signup: SignupMode,
    max_batch: usize,
    requests: crossbeam_channel::Receiver<Request>,
}

/// Starts the writer thread. It stops after a `Shutdown` request, or once every handle is
/// dropped; join the returned thread to wait for its last commit.
pub fn start(
    store: Box<dyn Store>,
    engine: Engine,
    metrics: Arc<Metrics>,
    signup: SignupMode,
    max_batch: usize,
) -> (WriterHandle, std::thread::JoinHandle<()>) {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let writer = Writer {
        store,
        engine,
        registry: Registry::default(),
        metrics,
        signup,
        max_batch,
        requests: receiver,
    };
    let thread = std::thread::Builder::new()
        .name("roundtable-writer".into())
        .spawn(move || writer.run())
        .expect("spawning the writer thread");
    (WriterHandle { requests: sender }, thread)
}

impl Writer {
    fn run(mut self) {
        while let Ok(first) = self.requests.recv() {
            let mut batch = vec![first];
            while batch.len() < self.max_batch {
                match self.requests.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            if self.process(batch) {
                break;
            }
        }
        for registered in self.registry.conns.values() {
            registered.handle.control.close(CloseCode::HubRestarting);
        }
        info!("writer stopped");
    }

    /// Executes a batch in one transaction, commits, then replies and delivers. Returns
    /// true when the hub is shutting down.
    fn process(&mut self, batch: Vec<Request>) -> bool {
        let now = now_ms();
        let mut shutdown = false;
        let mut pending = Vec::with_capacity(batch.len());
        let mut failure = None;
        let mut tx = match self.store.transaction() {
            Ok(tx) => Some(tx),
            Err(error) => {
                failure = Some(error);
                None
            }
        };
        for request in batch {
            match request {
                Request::Command {
                    caller,
                    frame,
                    permit,
                } => {
                    self.metrics
                        .commands
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let re = frame.id();
                    let result = match tx.as_deref_mut() {
                        Some(tx) if failure.is_none() => {
                            match self.engine.execute(tx, now, &caller, frame) {
                                Ok(outcome) => Ok(outcome),
                                Err(ExecError::Refused(refusal)) => Err(refusal),
                                Err(ExecError::Store(error)) => {
                                    failure = Some(error);
                                    Err(internal())
                                }
                            }
                        }
                        _ => Err(internal()),
                    };
                    pending.push(Pending::Command {
                        conn: caller.conn,
                        re,
                        result,
                        _permit: permit,
                    });
                }
                Request::Auth {
                    token,
                    device,
                    conn,
                    reply,
                } => {
                    let result = self.engine.authenticate(&token);
                    if let Ok(principal) = &result {
                        self.registry.insert(&principal.id, &device, conn);
                    }
                    pending.push(Pending::Auth { reply, result });
                }
                Request::Subscribe { conn, done } => {
                    if let Some(registered) = self.registry.conns.get_mut(&conn) {
                        registered.live = true;
                    }
                    pending.push(Pending::Subscribe { done });
                }
                Request::Disconnect { conn } => {
                    self.registry.remove(conn);
                }
                Request::Signup { request, reply } => {
                    let result = match tx.as_deref_mut() {
                        Some(tx) if failure.is_none() => {
                            match self.engine.signup(tx, now, self.signup, request) {
                                Ok(outcome) => Ok(outcome),
                                Err(ExecError::Refused(refusal)) => Err(refusal),
                                Err(ExecError::Store(error)) => {
                                    failure = Some(error);
                                    Err(internal())
                                }
                            }
                        }
                        _ => Err(internal()),
                    };
                    pending.push(Pending::Signup { reply, result });
                }
                Request::Shutdown => shutdown = true,
            }
        }
        let started = Instant::now();
        if failure.is_none()
            && let Some(tx) = tx.take()
            && let Err(error) = tx.commit()
        {
            failure = Some(error);
        }
        drop(tx);
        let committed = Instant::now();
        if let Some(error) = failure {
            error!(%error, "a write batch failed; every command in it is answered with internal");
            self.recover();
            for item in pending {
                self.finish(item.fail(), committed);
            }
        } else {
            self.metrics
                .commits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.metrics.commit_latency.observe(committed - started);
            for item in pending {
                self.finish(item, committed);
            }
        }
        if shutdown {
            for registered in self.registry.conns.values() {
                registered.handle.control.close(CloseCode::HubRestarting);
            }
        }
        shutdown
    }

    /// Rebuilds the in-memory state from the store after a failed batch.
    fn recover(&mut self) {
        match self.store.load() {
            Ok(snapshot) => self.engine.reload(snapshot),
            Err(error) => {
                // The state may now be ahead of the store; refuse to go on with it.
                error!(%error, "cannot reload the hub state after a failed commit; stopping");
                for registered in self.registry.conns.values() {
                    registered.handle.control.close(CloseCode::HubRestarting);
                }
                std::process::abort();
            }
        }
    }

    fn finish(&mut self, item: Pending, committed: Instant) {
        match item {
            Pending::Command {
                conn, re, result, ..
            } => match result {
                Ok(outcome) => {
                    if let Some(handle) = self.registry.handle(conn) {
                        let reply = match outcome.reply {
                            Reply::Ok(ok) => Outbound::Frame(ServerFrame::Ok(ok).to_json()),
                            Reply::Sent { event, dup } => Outbound::Sent { re, event, dup },
                        };
                        self.push(handle, reply);
                    }
                    let written = outcome.events.len() as u64;
                    self.metrics
                        .events_written
                        .fetch_add(written, std::sync::atomic::Ordering::Relaxed);
                    for event in outcome.events {
                        self.fanout(event, committed);
                    }
                }
                Err(refusal) => {
                    self.metrics
                        .refused
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if let Some(handle) = self.registry.handle(conn) {
                        self.push(handle, Outbound::Frame(err_frame(Some(re), &refusal)));
                    }
                }
            },
            Pending::Auth { reply, result } => {
                let _ = reply.send(result);
            }
            Pending::Subscribe { done } => {
                let _ = done.send(());
            }
            Pending::Signup { reply, result } => {
                let _ = reply.send(result);
            }
        }
    }

    fn push(&self, handle: &ConnHandle, item: Outbound) {
        if !handle.push(item) && handle.control.close_code() == Some(CloseCode::SlowConsumer) {
            self.metrics
                .slow_consumers
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            warn!(conn = handle.id.0, "closing a slow consumer (4008)");
        }
    }

    /// Delivers a committed event to every live connection that may see it.
    fn fanout(&self, event: NewEvent, committed: Instant) {
        let NewEvent {
            record,
            origin,
            also_to,
        } = event;
        let state = &self.engine.state;
        let live = Arc::new(LiveEvent::new(record, committed));
        match &live.record.stream {
            crate::store::StreamKey::Room(room) => {
                if let Some(room) = state.rooms.get(room) {
                    for (member, routing) in &room.members {
                        self.deliver(state, &live, member, *routing, origin);
                    }
                }
                if let Some(departed) = &also_to {
                    self.deliver(state, &live, departed, Routing::All, origin);
                }
            }
            crate::store::StreamKey::Inbox(principal) => {
                self.deliver(state, &live, principal, Routing::All, origin);
            }
        }
    }

    fn deliver(
        &self,
        state: &HubState,
        live: &Arc<LiveEvent>,
        principal: &str,
        routing: Routing,
        origin: Option<ConnId>,
    ) {
        let Some(conns) = self.registry.by_principal.get(principal) else {
            return;
        };
        if state.is_agent(principal) && !visibility::agent_sees(&live.record, principal, routing) {
            return;
        }
        let with_key = live.record.from == principal;
        for id in conns {
            let Some(registered) = self.registry.conns.get(id) else {
                continue;
            };
            if !registered.live || Some(*id) == origin {
                continue;
            }
            self.push(
                &registered.handle,
                Outbound::Event {
                    event: live.clone(),
                    with_key,
                },
            );
        }
    }
}

impl Pending {
    /// The same request, answered with `internal` because its batch failed.
    fn fail(self) -> Pending {
        match self {
            Pending::Command {
                conn, re, _permit, ..
            } => Pending::Command {
                conn,
                re,
                result: Err(internal()),
                _permit,
            },
            Pending::Auth { reply, .. } => Pending::Auth {
                reply,
                result: Err(internal()),
            },
            Pending::Signup { reply, .. } => Pending::Signup {
                reply,
                result: Err(internal()),
            },
            subscribe @ Pending::Subscribe { .. } => subscribe,
        }
    }
}
