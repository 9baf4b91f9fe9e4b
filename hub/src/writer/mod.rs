//! The single writer: one OS thread that owns the store's write connection and the command
//! logic's state.
//!
//! Why one thread: `seq`s must be dense and assigned in commit order, and SQLite has one
//! writer anyway. Why batches: an fsync costs milliseconds, so the writer takes every
//! request waiting in its queue, executes them all in one transaction and commits once
//! (group commit). What a batch produced (replies, live events) goes to the
//! [`durability`](crate::durability) stage once the commit returns, and reaches the
//! dispatcher only after the flush that makes it durable, so an `ok` always means durable
//! and no reader sees an uncommitted event; meanwhile the writer already executes the next
//! batch.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::SignupRequest;
use roundtable_protocol::server::ServerFrame;
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tracing::{error, info};

use crate::clock::Clock;
use crate::config::SignupMode;
use crate::delivery::{ConnHandle, LiveEvent, Outbound};
use crate::dispatch::Delivery;
use crate::durability::{FlushHandle, Flushing, Watermark};
use crate::metrics::Metrics;
use crate::store::{Store, WriteTx as _};
use roundtable_engine::records::PrincipalRecord;
use roundtable_engine::records::SharedBatch;
use roundtable_engine::replication::RecordingTx;
use roundtable_engine::{
    Caller, Command, Engine, ExecError, NewEvent, Refusal, Reply, SignupOutcome, Via,
};

mod deliveries;
mod execute;

use deliveries::shared_batch;
use execute::{BatchState, ExecContext};

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
        caller: Arc<Caller>,
        command: Command,
        /// When the connection handed it over: the writer measures how long it waited.
        submitted: Instant,
        /// Held until the reply is queued: bounds each connection's commands in flight.
        permit: OwnedSemaphorePermit,
    },
    /// A command that came through a gateway (A2A, MCP): answered once durable, after the
    /// events it wrote are fanned out. The same path as a connection's command: the same
    /// checks, limits, deduplication and audit.
    Call {
        caller: Arc<Caller>,
        command: Command,
        /// When the gateway handed it over: the writer measures how long it waited.
        submitted: Instant,
        reply: oneshot::Sender<Result<Reply, Refusal>>,
    },
    /// A gateway's bearer token, checked as `auth` checks it (a failure is audited with the
    /// way it came); no connection is registered.
    Authenticate {
        token: String,
        via: roundtable_engine::Via,
        reply: oneshot::Sender<Result<PrincipalRecord, Refusal>>,
    },
    /// `POST /v1/signup`.
    Signup {
        request: SignupRequest,
        reply: oneshot::Sender<Result<SignupOutcome, Refusal>>,
    },
    /// A command refused outside the writer (a read), to record in the audit log.
    Refused(RefusalToRecord),
    /// The operator's request through [`crate::operator`]: answered, with a new token
    /// when it issued one, once durable.
    Operator {
        request: crate::operator::OperatorRequest,
        reply: oneshot::Sender<Result<Option<String>, Refusal>>,
    },
    /// Close every connection with 1012 and stop.
    Shutdown,
}

/// A refusal made outside the writer (a read it would not serve), for the audit log.
#[derive(Debug)]
pub struct RefusalToRecord {
    pub principal: String,
    pub action: &'static str,
    pub target: Option<String>,
    pub refusal: Refusal,
    pub via: roundtable_engine::Via,
}

/// How often the writer expires what time ends (contact requests after 14 days) and walks a
/// few shards of the remembered `client_key`s.
const HOUSEKEEPING_PERIOD: std::time::Duration = std::time::Duration::from_secs(60);

/// How long the writer keeps trying to read the store again after a failed commit (a
/// database server restarting) before it gives up and stops the hub.
const RECOVERY_PATIENCE: Duration = Duration::from_secs(120);

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

/// A command's answer from its execution (`None`: the batch had already failed). A refusal
/// is the answer; a store error fails the whole batch, and this command is answered
/// `internal` like the rest, for now: a batch that failed on a value the store refused runs
/// its commands again one by one ([`Writer::process_as`]).
fn answer<T>(
    executed: Option<Result<T, ExecError>>,
    failure: &mut Option<crate::store::StoreError>,
) -> Result<T, Refusal> {
    match executed {
        Some(Ok(outcome)) => Ok(outcome),
        Some(Err(ExecError::Refused(refusal))) => Err(refusal),
        Some(Err(ExecError::Store(error))) => {
            *failure = Some(error.into());
            Err(internal())
        }
        None => Err(internal()),
    }
}

fn internal() -> Refusal {
    Refusal::new(
        ErrorCode::Internal,
        "the hub could not store this; nothing was written, retry",
    )
}

/// The answer to a command holding a value the store refused: not retryable as it is. (The
/// store's own words stay in the hub's log: they may quote other principals' records.)
fn unstorable() -> Refusal {
    Refusal::new(
        ErrorCode::BadFrame,
        "the hub's store cannot keep a value of this command (a character or a value it \
         refuses); nothing was written: change the command rather than retry it as it is",
    )
}

/// A request as its batch executed it: the request, kept until the batch commits, and its
/// result. A batch whose commit fails because the store refused a value of one of its
/// commands runs its requests again one by one (see [`Writer::process`]), so that only
/// that command is refused.
enum Pending {
    Command {
        caller: Arc<Caller>,
        command: Command,
        submitted: Instant,
        permit: OwnedSemaphorePermit,
        result: Result<roundtable_engine::Outcome, Refusal>,
    },
    Auth {
        token: String,
        conn: ConnHandle,
        device: String,
        reply: oneshot::Sender<Result<PrincipalRecord, Refusal>>,
        result: Result<PrincipalRecord, Refusal>,
    },
    Signup {
        request: SignupRequest,
        reply: oneshot::Sender<Result<SignupOutcome, Refusal>>,
        result: Result<SignupOutcome, Refusal>,
    },
    Call {
        caller: Arc<Caller>,
        command: Command,
        submitted: Instant,
        reply: oneshot::Sender<Result<Reply, Refusal>>,
        result: Result<roundtable_engine::Outcome, Refusal>,
    },
    Authenticated {
        token: String,
        via: Via,
        reply: oneshot::Sender<Result<PrincipalRecord, Refusal>>,
        result: Result<PrincipalRecord, Refusal>,
    },
    Operator {
        request: crate::operator::OperatorRequest,
        reply: oneshot::Sender<Result<Option<String>, Refusal>>,
        result: Result<(Option<String>, roundtable_engine::Effect), Refusal>,
    },
    /// A refusal recorded in the audit log (nothing to answer).
    Refused(RefusalToRecord),
    /// Events written by the writer itself (expiries).
    Events(Vec<NewEvent>),
}

impl Pending {
    /// The same request, answered with `refusal` because its batch failed.
    fn fail(self, refusal: Refusal) -> Pending {
        match self {
            Pending::Command {
                caller,
                command,
                submitted,
                permit,
                ..
            } => Pending::Command {
                caller,
                command,
                submitted,
                permit,
                result: Err(refusal.clone()),
            },
            Pending::Auth {
                token,
                conn,
                device,
                reply,
                ..
            } => Pending::Auth {
                token,
                conn,
                device,
                reply,
                result: Err(refusal.clone()),
            },
            Pending::Signup { request, reply, .. } => Pending::Signup {
                request,
                reply,
                result: Err(refusal.clone()),
            },
            Pending::Call {
                caller,
                command,
                submitted,
                reply,
                ..
            } => Pending::Call {
                caller,
                command,
                submitted,
                reply,
                result: Err(refusal.clone()),
            },
            Pending::Authenticated {
                token, via, reply, ..
            } => Pending::Authenticated {
                token,
                via,
                reply,
                result: Err(refusal.clone()),
            },
            Pending::Operator { request, reply, .. } => Pending::Operator {
                request,
                reply,
                result: Err(refusal.clone()),
            },
            Pending::Refused(request) => Pending::Refused(request),
            Pending::Events(_) => Pending::Events(Vec::new()),
        }
    }

    /// The request again, to run anew (the writer's own expiries are not requests: they
    /// are found again at the next housekeeping).
    fn into_request(self) -> Option<Request> {
        Some(match self {
            Pending::Command {
                caller,
                command,
                submitted,
                permit,
                ..
            } => Request::Command {
                caller,
                command,
                submitted,
                permit,
            },
            Pending::Auth {
                token,
                conn,
                device,
                reply,
                ..
            } => Request::Auth {
                token,
                device,
                conn,
                reply,
            },
            Pending::Signup { request, reply, .. } => Request::Signup { request, reply },
            Pending::Call {
                caller,
                command,
                submitted,
                reply,
                ..
            } => Request::Call {
                caller,
                command,
                submitted,
                reply,
            },
            Pending::Authenticated {
                token, via, reply, ..
            } => Request::Authenticate { token, via, reply },
            Pending::Operator { request, reply, .. } => Request::Operator { request, reply },
            Pending::Refused(refused) => Request::Refused(refused),
            Pending::Events(_) => return None,
        })
    }
}

/// How a batch takes its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Batching {
    /// Those waiting, and while the previous commit is flushed, those that arrive.
    Grouped,
    /// One request alone (a batch's request run again after another's value was refused).
    Alone,
}

struct Writer {
    store: Box<dyn Store>,
    engine: Engine,
    flushing: FlushHandle,
    watermark: Arc<Watermark>,
    metrics: Arc<Metrics>,
    signup: SignupMode,
    max_batch: usize,
    requests: crossbeam_channel::Receiver<Request>,
    announcer: Option<crate::bus::Announcer>,
    clock: Clock,
}

/// The writer's settings.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    pub signup: SignupMode,
    /// Most requests in one transaction.
    pub max_batch: usize,
    /// In a cluster with a bus: where committed batches are announced.
    pub announcer: Option<crate::bus::Announcer>,
    /// The time the engine decides by.
    pub clock: Clock,
}

/// Starts the writer thread. It stops after a `Shutdown` request, or once every handle is
/// dropped; join the returned thread to wait for its last commit. Each batch is numbered
/// with `watermark` and handed to `flushing`.
pub fn start(
    store: Box<dyn Store>,
    engine: Engine,
    flushing: FlushHandle,
    watermark: Arc<Watermark>,
    metrics: Arc<Metrics>,
    config: WriterConfig,
) -> (WriterHandle, std::thread::JoinHandle<()>) {
    let WriterConfig {
        signup,
        max_batch,
        announcer,
        clock,
    } = config;
    let (sender, receiver) = crossbeam_channel::unbounded();
    let writer = Writer {
        store,
        engine,
        flushing,
        watermark,
        metrics,
        signup,
        max_batch,
        requests: receiver,
        announcer,
        clock,
    };
    // Before the hub answers anything, so the gauges are right from the first request.
    writer.publish_memory();
    let thread = std::thread::Builder::new()
        .name("roundtable-writer".into())
        .spawn(move || crate::threads::stop_on_panic("writer", move || writer.run()))
        .expect("spawning the writer thread");
    (WriterHandle { requests: sender }, thread)
}

impl Writer {
    fn run(mut self) {
        let mut housekeeping_due = Instant::now();
        loop {
            let mut batch = Vec::new();
            // Wake when a window of folded refusals closes, to write its audit entry.
            let wake = match self.engine.next_refusal_fold_ms() {
                Some(close_ms) => {
                    let wait_ms = (close_ms - self.clock.now_ms()).max(0) as u64;
                    housekeeping_due.min(Instant::now() + Duration::from_millis(wait_ms))
                }
                None => housekeeping_due,
            };
            match self.requests.recv_deadline(wake) {
                Ok(first) => batch.push(first),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            }
            while batch.len() < self.max_batch {
                match self.requests.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            let housekeeping = Instant::now() >= housekeeping_due;
            if housekeeping {
                housekeeping_due = Instant::now() + HOUSEKEEPING_PERIOD;
            }
            if self.process(batch, housekeeping) {
                break;
            }
        }
        self.flushing.send(Flushing::Shutdown);
        info!("writer stopped");
    }

    /// Executes a batch in one transaction, commits, then hands the results to the flush
    /// stage. Returns true when the hub is shutting down.
    ///
    /// While the previous commit is still being flushed, the transaction stays open and
    /// takes in the requests that arrive meanwhile: their flush could not start earlier
    /// anyway, and one larger commit writes each hot page (a room's last leaf, an index's)
    /// once instead of once per small commit.
    fn process(&mut self, batch: Vec<Request>, housekeeping: bool) -> bool {
        self.process_as(batch, housekeeping, Batching::Grouped)
    }

    /// [`Writer::process`], taking more requests while the previous commit is flushed
    /// (`Grouped`) or not (`Alone`). A commit that fails because the store refused a value
    /// (a character PostgreSQL cannot keep, say) fails the one command that wrote it: a
    /// grouped batch's requests then run again one by one, and the one whose value is
    /// refused is answered `bad_frame`, the others as if nothing had happened. Any other
    /// failure answers the whole batch `internal` (retryable: nothing was written).
    fn process_as(&mut self, batch: Vec<Request>, housekeeping: bool, batching: Batching) -> bool {
        let clock = self.clock.clone();
        let mut now = clock.now_ms();
        self.engine.begin_batch();
        let mut state = BatchState {
            pending: Vec::with_capacity(batch.len() + 1),
            failure: None,
            shutdown: false,
        };
        let started = Instant::now();
        // In a cluster the transaction comes after the other processes' batches it names:
        // their changes reach this memory before anything is decided, and their
        // deliveries go out here ahead of this batch's.
        let mut caught_up = Vec::new();
        let mut tx = match self.store.transaction() {
            Ok(mut tx) => {
                for committed in tx.others() {
                    self.engine.apply_shared(&committed.batch, now);
                    caught_up.push(committed);
                }
                let position = tx.position();
                Some((RecordingTx::new(tx, position.is_some()), position))
            }
            Err(error) => {
                state.failure = Some(error);
                None
            }
        };
        let mut context = ExecContext {
            engine: &mut self.engine,
            metrics: &self.metrics,
            signup: self.signup,
            // A request run again alone was counted when it first ran.
            counted: batching == Batching::Grouped,
        };
        if housekeeping && let Some((tx, _)) = tx.as_mut() {
            context.engine.forget_old_keys(now);
            context.engine.forget_expired(now);
            match context.engine.expire_requests(tx, now) {
                Ok(events) => state.pending.push(Pending::Events(events)),
                Err(ExecError::Store(error)) => state.failure = Some(error.into()),
                Err(ExecError::Refused(_)) => {}
            }
        }
        for request in batch {
            context.execute(writing(&mut tx), now, request, &mut state);
        }
        let advanced = self.watermark.advanced();
        while batching == Batching::Grouped
            && !state.shutdown
            && state.failure.is_none()
            && state.pending.len() < self.max_batch
            && self.watermark.durable() < self.watermark.begun()
        {
            crossbeam_channel::select! {
                recv(self.requests) -> request => {
                    let Ok(request) = request else { break };
                    now = clock.now_ms();
                    context.execute(writing(&mut tx), now, request, &mut state);
                    while state.pending.len() < self.max_batch
                        && let Ok(request) = self.requests.try_recv()
                    {
                        context.execute(writing(&mut tx), now, request, &mut state);
                    }
                }
                recv(advanced) -> _ => {}
            }
        }
        // Refusal windows that have closed become their audit entries (every one when the
        // hub stops, so nothing counted is lost to a clean shutdown).
        if state.failure.is_none()
            && let Some((tx, _)) = tx.as_mut()
            && let Err(error) =
                context
                    .engine
                    .close_refusal_folds(tx, clock.now_ms(), state.shutdown)
        {
            state.failure = Some(error.into());
        }
        let buckets = self.engine.take_touched_buckets();
        let BatchState {
            mut pending,
            mut failure,
            shutdown,
        } = state;
        // What the other processes of a cluster learn from this batch.
        let mut closes = false;
        if failure.is_none()
            && let Some((tx, Some(_))) = tx.as_mut()
        {
            let shared = shared_batch(std::mem::take(&mut tx.ops), &pending, buckets);
            closes = !shared.closes.is_empty();
            if let Err(error) = tx.share(shared) {
                failure = Some(error.into());
            }
        }
        // Numbered before the commit can become visible to readers (see `DurableReads`).
        let commit = self.watermark.begin();
        let mut position = None;
        if failure.is_none()
            && let Some((tx, at)) = tx.take()
        {
            match Box::new(tx).commit() {
                Ok(()) => {
                    position = at;
                    if let (Some(n), Some(announcer)) = (at, &self.announcer) {
                        announcer.announce(n);
                    }
                }
                Err(error) => failure = Some(error.into()),
            }
        }
        drop(tx);
        // A revocation answers once the other processes have closed its connections too
        // (or a second has passed).
        if let (Some(n), true) = (position, closes) {
            self.store
                .wait_for_peers(n, crate::cluster::REVOCATION_WAIT);
        }
        let committed = Instant::now();
        let mut isolate = Vec::new();
        if let Some(error) = failure {
            let requests = pending
                .iter()
                .filter(|item| !matches!(item, Pending::Events(_)))
                .count();
            let refusal = if !error.refuses_value() {
                error!(%error, "a write batch failed; every command in it is answered with internal");
                internal()
            } else if batching == Batching::Grouped {
                // Which command wrote it is not known (PostgreSQL writes a batch's events
                // together, at its end), nor whether the writer's own writes did.
                error!(%error, requests, "the store refused a value of a write batch; its requests run again one by one");
                isolate = std::mem::take(&mut pending);
                internal()
            } else {
                error!(%error, "the store refused a value of a command; it is answered with bad_frame");
                unstorable()
            };
            self.recover();
            // Nothing of the batch happened: its commands' rate tokens are given back (and
            // those run again draw once).
            self.engine.rewind_batch();
            pending = pending
                .into_iter()
                .map(|item| item.fail(refusal.clone()))
                .collect();
        } else {
            self.metrics.commits.fetch_add(1, Ordering::Relaxed);
            self.metrics.commit_latency.observe(committed - started);
        }
        self.publish_memory();
        // A send is its reply and its event; other commands grow the list as they need.
        let mut deliveries = Vec::with_capacity(2 * pending.len() + 1);
        for other in &caught_up {
            deliveries.extend(crate::dispatch::deliveries_of(other, committed));
        }
        if let Some(position) = position {
            deliveries.push(Delivery::Position(position));
        }
        for item in pending {
            self.deliveries(item, committed, &mut deliveries);
        }
        self.flushing.send(Flushing::Batch {
            commit,
            committed,
            deliveries,
        });
        let mut shutdown = shutdown;
        if !isolate.is_empty() {
            for request in isolate.into_iter().filter_map(Pending::into_request) {
                shutdown |= self.process_as(vec![request], false, Batching::Alone);
            }
            if shutdown {
                // What a clean stop writes (the refusals still being folded) was in the
                // batch rolled back: a batch of the stop alone writes it.
                self.process_as(vec![Request::Shutdown], false, Batching::Alone);
            }
        }
        shutdown
    }

    /// Publishes how much of what time or a decision ends the writer holds (metrics).
    fn publish_memory(&self) {
        let state = &self.engine.state;
        for (gauge, len) in [
            (&self.metrics.memory_tokens, state.tokens.len()),
            (&self.metrics.memory_requests, state.requests.len()),
            (&self.metrics.memory_invites, state.invites.len()),
            (&self.metrics.memory_pings, state.pings.len()),
        ] {
            gauge.store(len as u64, Ordering::Relaxed);
        }
    }

    /// Rebuilds the in-memory state from the store after a failed batch. A store that
    /// cannot be read (a database restarting) is tried again, less and less often, while
    /// nothing is decided on the state, which may be ahead of the store; past
    /// [`RECOVERY_PATIENCE`] the hub stops rather than guess.
    fn recover(&mut self) {
        let started = Instant::now();
        let mut pause = Duration::from_millis(50);
        loop {
            match self.store.load(self.clock.now_ms()) {
                Ok(snapshot) => {
                    self.engine.reload(snapshot);
                    return;
                }
                Err(error) if started.elapsed() < RECOVERY_PATIENCE => {
                    error!(%error, "cannot reload the hub state after a failed commit; trying again");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Err(error) => {
                    // The hub cannot go on without a state it can trust: the writer thread
                    // ends, and whoever started the hub hears of it (`roundtable hub` exits,
                    // an embedded hub reports it and lets its program go on).
                    panic!("cannot reload the hub state after a failed commit: {error}");
                }
            }
        }
    }
}

/// The batch's transaction, as commands write to it.
fn writing<'t>(
    tx: &'t mut Option<(RecordingTx<'_>, Option<u64>)>,
) -> Option<&'t mut (dyn crate::store::WriteTx + 't)> {
    match tx {
        Some((tx, _)) => Some(tx),
        None => None,
    }
}

#[cfg(test)]
mod tests;
