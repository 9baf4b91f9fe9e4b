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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::SignupRequest;
use roundtable_protocol::server::ServerFrame;
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tracing::{error, info};

use crate::config::SignupMode;
use crate::delivery::{ConnHandle, LiveEvent, Outbound};
use crate::dispatch::Delivery;
use crate::durability::{FlushHandle, Flushing, Watermark};
use crate::engine::{
    Caller, Command, Engine, ExecError, NewEvent, Refusal, Reply, SignupOutcome, Via,
};
use crate::metrics::Metrics;
use crate::replication::{RecordingTx, SharedBatch};
use crate::store::{PrincipalRecord, Store, WriteTx as _};

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
        via: crate::engine::Via,
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
    pub via: crate::engine::Via,
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
            *failure = Some(error);
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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
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
        result: Result<crate::engine::Outcome, Refusal>,
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
        result: Result<crate::engine::Outcome, Refusal>,
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
        result: Result<(Option<String>, crate::engine::Effect), Refusal>,
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
}

/// The writer's settings.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    pub signup: SignupMode,
    /// Most requests in one transaction.
    pub max_batch: usize,
    /// In a cluster with a bus: where committed batches are announced.
    pub announcer: Option<crate::bus::Announcer>,
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
    };
    // Before the hub answers anything, so the gauges are right from the first request.
    writer.publish_memory();
    let thread = std::thread::Builder::new()
        .name("roundtable-writer".into())
        .spawn(move || crate::stop_on_panic("writer", move || writer.run()))
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
                    let wait_ms = (close_ms - now_ms()).max(0) as u64;
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
        let mut now = now_ms();
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
                Err(ExecError::Store(error)) => state.failure = Some(error),
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
                    now = now_ms();
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
            && let Err(error) = context
                .engine
                .close_refusal_folds(tx, now_ms(), state.shutdown)
        {
            state.failure = Some(error);
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
                failure = Some(error);
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
                Err(error) => failure = Some(error),
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
            match self.store.load(now_ms()) {
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

    /// What the dispatcher must do for one committed (or failed) request, in order.
    fn deliveries(&self, item: Pending, committed: Instant, out: &mut Vec<Delivery>) {
        match item {
            Pending::Command {
                caller,
                command,
                result,
                permit,
                ..
            } => match result {
                Ok(outcome) => {
                    let reply = match outcome.reply {
                        Reply::Ok(ok) => Outbound::Frame(ServerFrame::Ok(ok).to_json()),
                        Reply::Sent { event, dup } => Outbound::Sent {
                            re: command.id(),
                            event,
                            dup,
                        },
                    };
                    out.push(Delivery::Reply {
                        conn: caller.conn,
                        item: reply,
                        permit: Some(permit),
                    });
                    self.outcome_deliveries(outcome.events, outcome.effects, committed, out);
                }
                Err(refusal) => {
                    self.metrics.refused.fetch_add(1, Ordering::Relaxed);
                    out.push(Delivery::Reply {
                        conn: caller.conn,
                        item: Outbound::Err {
                            re: Some(command.id()),
                            refusal,
                        },
                        permit: Some(permit),
                    });
                }
            },
            Pending::Auth {
                conn,
                device,
                reply,
                result,
                ..
            } => out.push(Delivery::Auth {
                conn,
                device,
                reply,
                result,
            }),
            Pending::Call { reply, result, .. } => {
                let result = match result {
                    Ok(outcome) => {
                        self.outcome_deliveries(outcome.events, outcome.effects, committed, out);
                        Ok(outcome.reply)
                    }
                    Err(refusal) => {
                        self.metrics.refused.fetch_add(1, Ordering::Relaxed);
                        Err(refusal)
                    }
                };
                out.push(Delivery::Answer(crate::dispatch::Answer::Call {
                    reply,
                    result,
                }));
            }
            Pending::Authenticated { reply, result, .. } => {
                out.push(Delivery::Answer(crate::dispatch::Answer::Principal {
                    reply,
                    result,
                }));
            }
            Pending::Signup { reply, result, .. } => {
                let result = result.map(|mut outcome| {
                    for event in std::mem::take(&mut outcome.events) {
                        out.push(self.event_delivery(event, committed));
                    }
                    outcome
                });
                out.push(Delivery::Signup { reply, result });
            }
            Pending::Operator { reply, result, .. } => {
                let result = result.map(|(token, close)| {
                    out.push(Delivery::Effect(close));
                    token
                });
                out.push(Delivery::Operator { reply, result });
            }
            Pending::Events(events) => {
                for event in events {
                    out.push(self.event_delivery(event, committed));
                }
            }
            Pending::Refused(_) => {}
        }
    }

    /// A command's events and effects, counted and queued for the dispatcher.
    fn outcome_deliveries(
        &self,
        events: Vec<NewEvent>,
        effects: Vec<crate::engine::Effect>,
        committed: Instant,
        out: &mut Vec<Delivery>,
    ) {
        self.metrics
            .events_written
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        for event in events {
            out.push(self.event_delivery(event, committed));
        }
        out.extend(effects.into_iter().map(Delivery::Effect));
    }

    /// A committed event, for the dispatcher.
    fn event_delivery(&self, event: NewEvent, committed: Instant) -> Delivery {
        Delivery::Event {
            event: Arc::new(LiveEvent::new(event.record, committed)),
            recipients: event.recipients,
            origin: event.origin,
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

/// What a committed batch tells the other processes of a cluster: its changes, and what
/// it delivers to everyone (events, closes, authenticated devices).
fn shared_batch(
    ops: Vec<crate::replication::WriteOp>,
    pending: &[Pending],
    buckets: Vec<crate::replication::SharedBucket>,
) -> SharedBatch {
    let mut shared = SharedBatch {
        ops,
        buckets,
        ..SharedBatch::default()
    };
    let mut events = |events: &[NewEvent]| {
        for event in events {
            shared.events.push(crate::replication::SharedEvent {
                stream: event.record.stream.clone(),
                seq: event.record.seq,
                recipients: (&event.recipients).into(),
            });
        }
    };
    let mut closes = Vec::new();
    let mut auths = Vec::new();
    for item in pending {
        match item {
            Pending::Command {
                result: Ok(outcome),
                ..
            }
            | Pending::Call {
                result: Ok(outcome),
                ..
            } => {
                events(&outcome.events);
                closes.extend(outcome.effects.iter().map(close_of));
            }
            Pending::Signup {
                result: Ok(outcome),
                ..
            } => events(&outcome.events),
            Pending::Events(written) => events(written),
            Pending::Auth {
                device,
                result: Ok(principal),
                ..
            } => auths.push(crate::replication::SharedAuth {
                principal: principal.id.clone(),
                device: device.clone(),
            }),
            Pending::Operator {
                result: Ok((_, close)),
                ..
            } => closes.push(close_of(close)),
            _ => {}
        }
    }
    shared.closes = closes;
    shared.auths = auths;
    shared
}

fn close_of(effect: &crate::engine::Effect) -> (String, u16) {
    let crate::engine::Effect::Close { principal, code } = effect;
    (principal.clone(), code.code())
}

/// What a batch has produced so far.
struct BatchState {
    pending: Vec<Pending>,
    failure: Option<crate::store::StoreError>,
    shutdown: bool,
}

/// The parts of the writer a request executes with, borrowed beside the open transaction.
struct ExecContext<'a> {
    engine: &'a mut Engine,
    metrics: &'a Metrics,
    signup: SignupMode,
    /// Whether the commands executed are counted in the metrics.
    counted: bool,
}

impl ExecContext<'_> {
    /// Checks a token (a store error fails the batch, and the answer is `internal`).
    fn authenticate(
        &mut self,
        tx: Option<&mut (dyn crate::store::WriteTx + '_)>,
        now: i64,
        token: &str,
        via: Via,
        state: &mut BatchState,
    ) -> Result<PrincipalRecord, Refusal> {
        match tx {
            Some(tx) => match self.engine.authenticate(tx, now, token, via) {
                Ok(result) => result,
                Err(error) => {
                    state.failure = Some(error);
                    Err(internal())
                }
            },
            None => Err(internal()),
        }
    }

    /// Counts a command executed, and how long it waited for the writer.
    fn count(&self, submitted: Instant) {
        if self.counted {
            self.metrics.commands.fetch_add(1, Ordering::Relaxed);
            self.metrics
                .writer_queue_latency
                .observe(submitted.elapsed());
        }
    }

    /// Executes one request in `tx` (answering `internal` once the batch has failed).
    fn execute(
        &mut self,
        tx: Option<&mut (dyn crate::store::WriteTx + '_)>,
        now: i64,
        request: Request,
        state: &mut BatchState,
    ) {
        let tx = tx.filter(|_| state.failure.is_none());
        match request {
            Request::Command {
                caller,
                command,
                submitted,
                permit,
            } => {
                self.count(submitted);
                let result = answer(
                    tx.map(|tx| self.engine.execute(tx, now, &caller, &command)),
                    &mut state.failure,
                );
                state.pending.push(Pending::Command {
                    caller,
                    command,
                    submitted,
                    permit,
                    result,
                });
            }
            Request::Auth {
                token,
                device,
                conn,
                reply,
            } => {
                let result = self.authenticate(tx, now, &token, Via::Ws, state);
                state.pending.push(Pending::Auth {
                    token,
                    conn,
                    device,
                    reply,
                    result,
                });
            }
            Request::Signup { request, reply } => {
                let result = answer(
                    tx.map(|tx| self.engine.signup(tx, now, self.signup, request.clone())),
                    &mut state.failure,
                );
                state.pending.push(Pending::Signup {
                    request,
                    reply,
                    result,
                });
            }
            Request::Call {
                caller,
                command,
                submitted,
                reply,
            } => {
                self.count(submitted);
                let result = answer(
                    tx.map(|tx| self.engine.execute(tx, now, &caller, &command)),
                    &mut state.failure,
                );
                state.pending.push(Pending::Call {
                    caller,
                    command,
                    submitted,
                    reply,
                    result,
                });
            }
            Request::Authenticate { token, via, reply } => {
                let result = self.authenticate(tx, now, &token, via, state);
                state.pending.push(Pending::Authenticated {
                    token,
                    via,
                    reply,
                    result,
                });
            }
            Request::Refused(refused) => {
                if let Some(tx) = tx
                    && let Err(error) = self.engine.audit_refusal(
                        tx,
                        now,
                        &refused.principal,
                        refused.action,
                        refused.target.clone(),
                        &refused.refusal,
                        refused.via,
                    )
                {
                    state.failure = Some(error);
                }
                state.pending.push(Pending::Refused(refused));
            }
            Request::Operator { request, reply } => {
                let crate::operator::OperatorRequest::UserToken { handle, action } = &request;
                let result = answer(
                    tx.map(|tx| self.engine.operator_user_token(tx, now, handle, *action)),
                    &mut state.failure,
                );
                state.pending.push(Pending::Operator {
                    request,
                    reply,
                    result,
                });
            }
            Request::Shutdown => state.shutdown = true,
        }
    }
}

#[cfg(test)]
mod tests {
    //! A failed commit: every command of the batch is answered `internal`, nothing of it
    //! is visible afterwards, and the state goes on from what the store holds.

    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use roundtable_protocol::client::{ClientFrame, RoomCreate, SendCmd};
    use roundtable_protocol::model::PrincipalKind;
    use tokio::sync::Semaphore;

    use super::*;
    use crate::engine::ConnId;
    use crate::ids::IdSource;
    use crate::store::sqlite::{self, SqliteStore};
    use crate::store::{
        AuditRecord, ContactRecord, ControlRecord, EventRecord, InviteRecord, MemberRecord,
        PingRecord, PrincipalRecord, ReadStore, RequestRecord, RoomRecord, Snapshot, StoreError,
        StreamKey, TokenRecord, WriteTx,
    };

    /// SQLite whose next commit fails when told to, and which refuses, as PostgreSQL refuses
    /// a NUL in `text`, an event with the client key `refused_key`: at commit, with a
    /// value too big (a value refused, not a failure of the store's own).
    struct FlakyStore {
        inner: SqliteStore,
        fail_next_commit: Arc<AtomicBool>,
        refused_key: Option<&'static str>,
    }

    struct FlakyTx<'a> {
        inner: Box<dyn WriteTx + 'a>,
        fail: bool,
        refused_key: Option<&'static str>,
        holds_refused: bool,
    }

    impl Store for FlakyStore {
        fn load(&mut self, now_ms: i64) -> Result<Snapshot, StoreError> {
            self.inner.load(now_ms)
        }

        fn flusher(&mut self) -> Result<Box<dyn crate::store::Flush>, StoreError> {
            self.inner.flusher()
        }

        fn transaction(&mut self) -> Result<Box<dyn WriteTx + '_>, StoreError> {
            let fail = self.fail_next_commit.swap(false, Ordering::SeqCst);
            Ok(Box::new(FlakyTx {
                inner: self.inner.transaction()?,
                fail,
                refused_key: self.refused_key,
                holds_refused: false,
            }))
        }
    }

    impl WriteTx for FlakyTx<'_> {
        fn remote(&mut self, w: &crate::store::RemoteWrite<'_>) -> Result<u64, StoreError> {
            self.inner.remote(w)
        }
        fn insert_principal(&mut self, p: &PrincipalRecord) -> Result<(), StoreError> {
            self.inner.insert_principal(p)
        }
        fn update_principal(&mut self, p: &PrincipalRecord) -> Result<(), StoreError> {
            self.inner.update_principal(p)
        }
        fn insert_token(&mut self, t: &TokenRecord, now_ms: i64) -> Result<(), StoreError> {
            self.inner.insert_token(t, now_ms)
        }
        fn revoke_tokens(&mut self, p: &str, now_ms: i64) -> Result<(), StoreError> {
            self.inner.revoke_tokens(p, now_ms)
        }
        fn insert_room(&mut self, r: &RoomRecord) -> Result<(), StoreError> {
            self.inner.insert_room(r)
        }
        fn update_room(&mut self, r: &RoomRecord) -> Result<(), StoreError> {
            self.inner.update_room(r)
        }
        fn upsert_member(&mut self, m: &MemberRecord) -> Result<(), StoreError> {
            self.inner.upsert_member(m)
        }
        fn delete_member(&mut self, r: &str, p: &str) -> Result<(), StoreError> {
            self.inner.delete_member(r, p)
        }
        fn append_event(&mut self, e: &EventRecord) -> Result<(), StoreError> {
            if self.refused_key.is_some() && e.client_key.as_deref() == self.refused_key {
                self.holds_refused = true;
            }
            self.inner.append_event(e)
        }
        fn event_at(&mut self, s: &StreamKey, q: u64) -> Result<Option<EventRecord>, StoreError> {
            self.inner.event_at(s, q)
        }
        fn request(&mut self, id: &str) -> Result<Option<RequestRecord>, StoreError> {
            self.inner.request(id)
        }
        fn invite_by_code(
            &mut self,
            hash: &crate::ids::TokenHash,
        ) -> Result<Option<InviteRecord>, StoreError> {
            self.inner.invite_by_code(hash)
        }
        fn invite(&mut self, id: &str) -> Result<Option<InviteRecord>, StoreError> {
            self.inner.invite(id)
        }
        fn ping(&mut self, room: &str, ping: &str) -> Result<Option<PingRecord>, StoreError> {
            self.inner.ping(room, ping)
        }
        fn upsert_ping(&mut self, p: &PingRecord) -> Result<(), StoreError> {
            self.inner.upsert_ping(p)
        }
        fn set_ack(&mut self, p: &str, d: &str, s: &StreamKey, q: u64) -> Result<(), StoreError> {
            self.inner.set_ack(p, d, s, q)
        }
        fn insert_contact(&mut self, c: &ContactRecord) -> Result<(), StoreError> {
            self.inner.insert_contact(c)
        }
        fn upsert_request(&mut self, r: &RequestRecord) -> Result<(), StoreError> {
            self.inner.upsert_request(r)
        }
        fn upsert_invite(&mut self, i: &InviteRecord) -> Result<(), StoreError> {
            self.inner.upsert_invite(i)
        }
        fn set_control(&mut self, c: &ControlRecord) -> Result<(), StoreError> {
            self.inner.set_control(c)
        }
        fn delete_control(&mut self, a: &str, r: Option<&str>) -> Result<(), StoreError> {
            self.inner.delete_control(a, r)
        }
        fn append_audit(&mut self, e: &AuditRecord) -> Result<(), StoreError> {
            self.inner.append_audit(e)
        }
        fn commit(self: Box<Self>) -> Result<(), StoreError> {
            if self.holds_refused {
                return Err(StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_TOOBIG),
                    Some("injected: a value the store refuses".into()),
                )));
            }
            if self.fail {
                // Dropping the inner transaction rolls it back, as a failed fsync would.
                return Err(StoreError::Corrupt {
                    table: "events",
                    detail: "injected commit failure".into(),
                });
            }
            self.inner.commit()
        }
    }

    /// The next batch with something in it, flushed at once (as the flush stage would).
    fn next_batch(
        receiver: &crossbeam_channel::Receiver<Flushing>,
        watermark: &Watermark,
    ) -> Vec<Delivery> {
        loop {
            match receiver
                .recv_timeout(Duration::from_secs(10))
                .expect("a batch")
            {
                Flushing::Batch {
                    commit, deliveries, ..
                } => {
                    watermark.advance(commit);
                    if !deliveries.is_empty() {
                        return deliveries;
                    }
                }
                Flushing::Shutdown => continue,
            }
        }
    }

    fn reply_text(deliveries: &[Delivery]) -> String {
        match deliveries.first() {
            Some(Delivery::Reply {
                item: Outbound::Frame(text),
                ..
            }) => text.clone(),
            Some(Delivery::Reply {
                item: Outbound::Sent { event, dup, .. },
                ..
            }) => format!("sent seq {} dup {dup}", event.seq),
            Some(Delivery::Reply {
                item: Outbound::Err { refusal, .. },
                ..
            }) => format!("err {}", refusal.code),
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_failed_commit_answers_internal_and_loses_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let mut ids = IdSource::seeded(5);
        let (inner, reader) = sqlite::open(&dir.path().join("hub.sqlite3"), &mut ids, 1).unwrap();
        let fail = Arc::new(AtomicBool::new(false));
        let harness = Harness::start(Box::new(FlakyStore {
            inner,
            fail_next_commit: fail.clone(),
            refused_key: None,
        }));
        let next = || reply_text(&next_batch(&harness.dispatched, &harness.watermark));

        assert!(harness.writer.submit(harness.send(1, "first-message")));
        assert_eq!(next(), "sent seq 3 dup false");

        fail.store(true, Ordering::SeqCst);
        assert!(harness.writer.submit(harness.send(2, "lost-message")));
        assert_eq!(next(), "err internal");

        // The failed event was never stored, its seq is reused, and its key is free again.
        assert!(harness.writer.submit(harness.send(3, "third-message")));
        assert_eq!(next(), "sent seq 4 dup false");
        assert!(harness.writer.submit(harness.send(4, "lost-message")));
        assert_eq!(next(), "sent seq 5 dup false");
        let history = reader
            .history(
                &harness.caller.id,
                false,
                &harness.room,
                crate::store::HistoryRange {
                    before: None,
                    after: Some(2),
                    limit: 10,
                    max_bytes: 1 << 20,
                },
            )
            .unwrap();
        let keys: Vec<_> = history
            .events
            .iter()
            .map(|e| e.client_key.clone().unwrap())
            .collect();
        assert_eq!(keys, vec!["first-message", "third-message", "lost-message"]);

        assert!(harness.writer.submit(Request::Shutdown));
        harness.thread.join().unwrap();
    }

    /// A writer over `store` with a user and a room of theirs, its batches flushed only when
    /// the test says.
    struct Harness {
        writer: WriterHandle,
        thread: std::thread::JoinHandle<()>,
        dispatched: crossbeam_channel::Receiver<Flushing>,
        watermark: Arc<Watermark>,
        metrics: Arc<Metrics>,
        permits: Arc<Semaphore>,
        caller: Caller,
        room: String,
    }

    impl Harness {
        fn start(mut store: Box<dyn Store>) -> Harness {
            let ids = IdSource::seeded(7);
            // Rate limits that a command charged twice would run out of: a burst of four.
            let limits = crate::engine::RateLimits {
                user: crate::engine::RateLimit {
                    burst: 4.0,
                    per_second: 0.0001,
                },
                ..crate::engine::RateLimits::default()
            };
            let config = crate::engine::EngineConfig {
                rate_limits: Some(limits),
                ..crate::engine::EngineConfig::default()
            };
            let mut engine = Engine::with_config(store.load(1).unwrap(), ids, config);
            let mut tx = store.transaction().unwrap();
            let user = engine
                .signup(
                    &mut *tx,
                    1,
                    SignupMode::Open,
                    roundtable_protocol::client::SignupRequest {
                        handle: "dana".into(),
                        name: "Dana".into(),
                        discoverable: None,
                        invite: None,
                    },
                )
                .unwrap();
            let caller = Caller {
                id: user.principal.id.clone(),
                kind: PrincipalKind::User,
                device: "d".into(),
                conn: ConnId(1),
                via: crate::engine::Via::Ws,
            };
            let created = engine
                .execute(
                    &mut *tx,
                    1,
                    &caller,
                    &Command::Frame(ClientFrame::RoomCreate(RoomCreate {
                        id: 1,
                        title: None,
                        topic: None,
                        members: vec![],
                    })),
                )
                .unwrap();
            tx.commit().unwrap();
            let Reply::Ok(ok) = created.reply else {
                panic!()
            };
            let room = ok
                .decode::<roundtable_protocol::server::RoomOk>()
                .unwrap()
                .room
                .id;
            let (flushing, dispatched) = FlushHandle::detached();
            let watermark = Arc::new(Watermark::default());
            let metrics = Arc::new(Metrics::default());
            let (writer, thread) = start(
                store,
                engine,
                flushing,
                watermark.clone(),
                metrics.clone(),
                WriterConfig {
                    signup: SignupMode::Open,
                    max_batch: 64,
                    announcer: None,
                },
            );
            Harness {
                writer,
                thread,
                dispatched,
                watermark,
                metrics,
                permits: Arc::new(Semaphore::new(16)),
                caller,
                room,
            }
        }

        /// A send as a connection hands it over, past the decoder (which would refuse a
        /// NUL in a key before the store ever saw it).
        fn send(&self, id: u64, key: &str) -> Request {
            Request::Command {
                caller: Arc::new(self.caller.clone()),
                command: Command::from_frame(ClientFrame::Send(SendCmd {
                    id,
                    room: self.room.clone(),
                    client_key: key.into(),
                    kind: "message".into(),
                    body: serde_json::json!({"text": format!("message {id}")}),
                }))
                .unwrap(),
                submitted: Instant::now(),
                permit: self.permits.clone().try_acquire_owned().unwrap(),
            }
        }

        /// The next batch with something in it handed to the flush stage, not yet durable
        /// (one with nothing to deliver, which a writer on PostgreSQL may commit before the
        /// first command, is flushed at once, as the flush stage would).
        fn next_unflushed(&self) -> (u64, Vec<Delivery>) {
            loop {
                match self
                    .dispatched
                    .recv_timeout(Duration::from_secs(10))
                    .expect("a batch")
                {
                    Flushing::Batch {
                        commit, deliveries, ..
                    } if deliveries.is_empty() => self.watermark.advance(commit),
                    Flushing::Batch {
                        commit, deliveries, ..
                    } => return (commit, deliveries),
                    Flushing::Shutdown => continue,
                }
            }
        }
    }

    /// One command of a batch holds a value the store refuses: it alone is refused, with
    /// `bad_frame` (retrying it as it is would fail again), and the batch's other commands
    /// are stored as if it had not been there, each charged to its rate limit once.
    async fn a_value_the_store_refuses_fails_its_command_alone(
        store: Box<dyn Store>,
        refused_key: &str,
    ) {
        let harness = Harness::start(store);
        assert!(harness.writer.submit(harness.send(1, "first-message")));
        // The first batch stays unflushed, so the next requests wait in one transaction.
        let (first, deliveries) = harness.next_unflushed();
        assert_eq!(reply_text(&deliveries), "sent seq 3 dup false");
        for request in [
            harness.send(2, "second-message"),
            harness.send(3, refused_key),
            harness.send(4, "fourth-message"),
        ] {
            assert!(harness.writer.submit(request));
        }
        roundtable_testkit::until(
            "the writer executing the three sends in one batch",
            Duration::from_secs(10),
            async || harness.metrics.commands.load(Ordering::SeqCst) == 4,
        )
        .await;
        harness.watermark.advance(first);
        let mut replies = Vec::new();
        while replies.len() < 3 {
            let deliveries = next_batch(&harness.dispatched, &harness.watermark);
            replies.push(reply_text(&deliveries));
            if let Some(Delivery::Reply {
                item: Outbound::Err { refusal, .. },
                ..
            }) = deliveries.first()
            {
                assert!(
                    refusal.msg.contains("cannot keep a value"),
                    "{}",
                    refusal.msg
                );
            }
        }
        assert_eq!(
            replies,
            [
                "sent seq 4 dup false",
                "err bad_frame",
                "sent seq 5 dup false"
            ]
        );
        // Each command that happened drew one rate token, the runs again included, and the
        // refused one none: four sends are the whole burst.
        assert!(harness.writer.submit(harness.send(5, "fifth-message")));
        assert_eq!(
            reply_text(&next_batch(&harness.dispatched, &harness.watermark)),
            "sent seq 6 dup false"
        );
        assert!(harness.writer.submit(harness.send(6, "sixth-message")));
        assert_eq!(
            reply_text(&next_batch(&harness.dispatched, &harness.watermark)),
            "err rate_limited"
        );
        assert!(harness.writer.submit(Request::Shutdown));
        harness.thread.join().unwrap();
    }

    #[tokio::test]
    async fn a_value_sqlite_refuses_fails_its_command_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut ids = IdSource::seeded(5);
        let (inner, _reader) = sqlite::open(&dir.path().join("hub.sqlite3"), &mut ids, 1).unwrap();
        let store = FlakyStore {
            inner,
            fail_next_commit: Arc::new(AtomicBool::new(false)),
            refused_key: Some("refused-message"),
        };
        a_value_the_store_refuses_fails_its_command_alone(Box::new(store), "refused-message").await;
    }

    #[tokio::test]
    async fn a_nul_postgresql_refuses_fails_its_command_alone() {
        let database = roundtable_testkit::postgres::TestDatabase::create();
        let (store, _reader) =
            crate::store::postgres::open(&database.url, &mut IdSource::seeded(5), 1).unwrap();
        a_value_the_store_refuses_fails_its_command_alone(Box::new(store), "refused\u{0}").await;
    }
}
