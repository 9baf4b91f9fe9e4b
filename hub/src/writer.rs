//! The single writer: one OS thread that owns the store's write connection and the command
//! logic's state.
//!
//! Why one thread: `seq`s must be dense and assigned in commit order, and SQLite has one
//! writer anyway. Why batches: an fsync costs milliseconds, so the writer takes every
//! request waiting in its queue, executes them all in one transaction and commits once
//! (group commit). Replies and live events are handed to the [`dispatch`](crate::dispatch)
//! thread only after that commit returns, so an `ok` always means durable and no reader
//! sees an uncommitted event; meanwhile the writer already executes the next batch.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::SignupRequest;
use roundtable_protocol::model::Routing;
use roundtable_protocol::server::ServerFrame;
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tracing::{error, info};

use crate::config::SignupMode;
use crate::delivery::{ConnHandle, LiveEvent, Outbound, err_frame};
use crate::dispatch::{Delivery, Dispatch, DispatchHandle, Recipients};
use crate::engine::{Caller, Command, Engine, ExecError, NewEvent, Refusal, Reply, SignupOutcome};
use crate::metrics::Metrics;
use crate::state::Recipient;
use crate::store::{PrincipalRecord, Store, StreamKey};

/// A request to the writer.
#[derive(Debug)]
pub enum Request {
    /// Authenticate a new connection; the dispatcher registers it if the token is good.
    Auth {
        token: String,
        device: String,
        conn: ConnHandle,
        reply: oneshot::Sender<Result<PrincipalRecord, Refusal>>,
    },
    /// A command of an authenticated connection.
    Command {
        caller: Caller,
        command: Command,
        /// Held until the reply is queued: bounds each connection's commands in flight.
        permit: OwnedSemaphorePermit,
    },
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

/// The result of one request, delivered once its batch is committed.
enum Pending {
    Command {
        conn: crate::engine::ConnId,
        re: u64,
        result: Result<crate::engine::Outcome, Refusal>,
        permit: OwnedSemaphorePermit,
    },
    Auth {
        conn: ConnHandle,
        device: String,
        reply: oneshot::Sender<Result<PrincipalRecord, Refusal>>,
        result: Result<PrincipalRecord, Refusal>,
    },
    Signup {
        reply: oneshot::Sender<Result<SignupOutcome, Refusal>>,
        result: Result<SignupOutcome, Refusal>,
    },
}

impl Pending {
    /// The same request, answered with `internal` because its batch failed.
    fn fail(self) -> Pending {
        match self {
            Pending::Command {
                conn, re, permit, ..
            } => Pending::Command {
                conn,
                re,
                result: Err(internal()),
                permit,
            },
            Pending::Auth {
                conn,
                device,
                reply,
                ..
            } => Pending::Auth {
                conn,
                device,
                reply,
                result: Err(internal()),
            },
            Pending::Signup { reply, .. } => Pending::Signup {
                reply,
                result: Err(internal()),
            },
        }
    }
}

struct Writer {
    store: Box<dyn Store>,
    engine: Engine,
    dispatch: DispatchHandle,
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
    dispatch: DispatchHandle,
    metrics: Arc<Metrics>,
    signup: SignupMode,
    max_batch: usize,
) -> (WriterHandle, std::thread::JoinHandle<()>) {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let writer = Writer {
        store,
        engine,
        dispatch,
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
        self.dispatch.send(Dispatch::Shutdown);
        info!("writer stopped");
    }

    /// Executes a batch in one transaction, commits, then hands the results to the
    /// dispatcher. Returns true when the hub is shutting down.
    fn process(&mut self, batch: Vec<Request>) -> bool {
        let now = now_ms();
        let mut shutdown = false;
        let mut pending = Vec::with_capacity(batch.len());
        let mut failure = None;
        let started = Instant::now();
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
                    command,
                    permit,
                } => {
                    self.metrics.commands.fetch_add(1, Ordering::Relaxed);
                    let re = command.id();
                    let result = match tx.as_deref_mut() {
                        Some(tx) if failure.is_none() => {
                            match self.engine.execute(tx, now, &caller, command) {
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
                        permit,
                    });
                }
                Request::Auth {
                    token,
                    device,
                    conn,
                    reply,
                } => {
                    let result = self.engine.authenticate(&token);
                    pending.push(Pending::Auth {
                        conn,
                        device,
                        reply,
                        result,
                    });
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
            pending = pending.into_iter().map(Pending::fail).collect();
        } else {
            self.metrics.commits.fetch_add(1, Ordering::Relaxed);
            self.metrics.commit_latency.observe(committed - started);
        }
        let deliveries = pending
            .into_iter()
            .flat_map(|item| self.deliveries(item, committed))
            .collect();
        self.dispatch.send(Dispatch::Batch(deliveries));
        shutdown
    }

    /// Rebuilds the in-memory state from the store after a failed batch.
    fn recover(&mut self) {
        match self.store.load() {
            Ok(snapshot) => self.engine.reload(snapshot),
            Err(error) => {
                // The state may now be ahead of the store; refuse to go on with it.
                error!(%error, "cannot reload the hub state after a failed commit; stopping");
                std::process::abort();
            }
        }
    }

    /// What the dispatcher must do for one committed (or failed) request, in order.
    fn deliveries(&self, item: Pending, committed: Instant) -> Vec<Delivery> {
        match item {
            Pending::Command {
                conn,
                re,
                result,
                permit,
            } => match result {
                Ok(outcome) => {
                    let reply = match outcome.reply {
                        Reply::Ok(ok) => Outbound::Frame(ServerFrame::Ok(ok).to_json()),
                        Reply::Sent { event, dup } => Outbound::Sent { re, event, dup },
                    };
                    let mut deliveries = Vec::with_capacity(1 + outcome.events.len());
                    deliveries.push(Delivery::Reply {
                        conn,
                        item: reply,
                        permit: Some(permit),
                    });
                    self.metrics
                        .events_written
                        .fetch_add(outcome.events.len() as u64, Ordering::Relaxed);
                    for event in outcome.events {
                        deliveries.push(self.event_delivery(event, committed));
                    }
                    deliveries
                }
                Err(refusal) => {
                    self.metrics.refused.fetch_add(1, Ordering::Relaxed);
                    vec![Delivery::Reply {
                        conn,
                        item: Outbound::Frame(err_frame(Some(re), &refusal)),
                        permit: Some(permit),
                    }]
                }
            },
            Pending::Auth {
                conn,
                device,
                reply,
                result,
            } => vec![Delivery::Auth {
                conn,
                device,
                reply,
                result,
            }],
            Pending::Signup { reply, result } => {
                let _ = reply.send(result);
                Vec::new()
            }
        }
    }

    /// Who may receive a committed event, decided with the state as of this commit.
    fn event_delivery(&self, event: NewEvent, committed: Instant) -> Delivery {
        let NewEvent {
            record,
            origin,
            also_to,
        } = event;
        let recipients = match &record.stream {
            StreamKey::Room(room) => Recipients::Room {
                members: self
                    .engine
                    .state
                    .rooms
                    .get(room)
                    .map(|room| room.recipients.clone())
                    .unwrap_or_else(|| Arc::from(Vec::new())),
                also_to: also_to.map(|id| Recipient {
                    agent: self.engine.state.is_agent(&id),
                    id: Arc::from(id),
                    routing: Routing::All,
                }),
            },
            StreamKey::Inbox(principal) => Recipients::One(Arc::from(principal.as_str())),
        };
        Delivery::Event {
            event: Arc::new(LiveEvent::new(record, committed)),
            recipients,
            origin,
        }
    }
}
