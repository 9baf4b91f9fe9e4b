//! One WebSocket connection: `hello`, authentication, then two tasks.
//!
//! - The reader (this task) decodes client frames, answers malformed ones, forwards
//!   commands to the writer and reads `history` from the store. It stops reading when the
//!   connection already has `max_in_flight` commands waiting, which is the backpressure
//!   a pipelining client feels.
//! - The sink drains the connection's queue in order: replies, live events and `sync`
//!   requests. Serving `sync` there, in queue order, is what keeps replay and live
//!   delivery from reordering or duplicating: events that arrive while the replay is read
//!   wait in the queue behind it and are skipped when already replayed (per-stream
//!   high-water marks).
//!
//! The socket's sending half and those high-water marks live in the connection's writer
//! ([`ConnWriter`]). The sink holds it while it writes; when it is free and nothing is
//! queued, the flush thread writes a durable batch's frames through it directly, so they
//! leave without waiting for the sink task to be scheduled.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use roundtable_protocol::client::{Audit, ClientFrame, Directory, History};
use roundtable_protocol::decode::decode_client_frame;
use roundtable_protocol::model::PrincipalKind;
use roundtable_protocol::server::{
    AuditOk, AuthOk, DirectoryOk, Gap, Hello, OkReply, ServerFrame, SyncOk,
};
use roundtable_protocol::{CloseCode, ErrorCode, PROTO_VERSION, limits};
use rustc_hash::FxHashMap;
use tokio::sync::{Semaphore, oneshot};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tracing::{debug, warn};

use crate::admission::{Admission, UnauthenticatedPermit};
use crate::config::HubConfig;
use crate::delivery::{
    Closing, ConnControl, ConnHandle, DirectWrite, Outbound, OutboundQueue, err_frame, event_frame,
    history_frame, sent_frame, wait_closing,
};
use crate::dispatch::DispatchHandle;
use crate::engine::{Caller, Command, ConnId, Refusal};
use crate::listener::Peer;
use crate::metrics::Metrics;
use crate::store::{
    AuditQuery, DirectoryQuery, HistoryRange, ReadError, ReadStore, ReplayPosition, StreamKey,
    StreamPlan,
};
use crate::websocket::{PreAuthLimit, Socket};
use crate::writer::{Request, WriterHandle};

/// What every connection shares.
pub struct SessionContext {
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
    pub threads: crate::Threads,
    /// `POST /v1/signup`s per client address, when they are limited.
    pub signups: Option<std::sync::Mutex<crate::admission::AddressBuckets>>,
    /// Set when the hub begins to stop: sockets not yet authenticated, and closed ones
    /// lingering for their peer, end at once.
    pub stopping: tokio::sync::watch::Sender<bool>,
    next_conn: AtomicU64,
}

impl std::fmt::Debug for SessionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionContext").finish_non_exhaustive()
    }
}

impl SessionContext {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        writer: WriterHandle,
        dispatch: DispatchHandle,
        reader: Arc<dyn ReadStore>,
        config: HubConfig,
        metrics: Arc<Metrics>,
        hub_id: String,
        epoch: String,
    ) -> SessionContext {
        let admission = Admission::new(config.connections);
        let signups = config.signups_per_hour.map(|per_hour| {
            let per_hour = per_hour.max(1);
            std::sync::Mutex::new(crate::admission::AddressBuckets::new(
                per_hour,
                Duration::from_secs(3600) / per_hour,
            ))
        });
        SessionContext {
            writer,
            dispatch,
            reader,
            config,
            metrics,
            hub_id,
            epoch,
            admission,
            threads: crate::Threads::default(),
            signups,
            stopping: tokio::sync::watch::Sender::new(false),
            next_conn: AtomicU64::new(1),
        }
    }

    fn hello(&self) -> String {
        ServerFrame::Hello(Hello {
            proto: PROTO_VERSION,
            hub: self.hub_id.clone(),
            epoch: self.epoch.clone(),
            hb_ms: self.config.heartbeat.as_millis() as u64,
            max_frame: self.config.max_frame as u64,
            max_queue: self.config.max_queue as u64,
            replay_max: Some(self.config.replay_max),
            max_queue_bytes: Some(self.config.max_queue_bytes as u64),
        })
        .to_json()
    }
}

type Sink = SplitSink<Socket, Message>;
type Stream = SplitStream<Socket>;
type WsError = tokio_tungstenite::tungstenite::Error;

fn text(frame: String) -> Message {
    Message::Text(Utf8Bytes::from(frame))
}

fn close_message(code: CloseCode) -> Message {
    Message::Close(Some(CloseFrame {
        code: code.code().into(),
        reason: Utf8Bytes::from_static(code.reason()),
    }))
}

/// Whether a read error means the peer sent a frame over `max_frame`.
fn is_too_large(error: &WsError) -> bool {
    matches!(error, WsError::Capacity(_))
}

/// Counts the open connection for the metrics, for as long as it lives.
struct OpenConnection(Arc<Metrics>);

impl OpenConnection {
    fn new(metrics: Arc<Metrics>) -> OpenConnection {
        metrics.connections.fetch_add(1, Ordering::Relaxed);
        metrics.connections_total.fetch_add(1, Ordering::Relaxed);
        OpenConnection(metrics)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Unregisters the connection however the session ends.
struct Registration {
    dispatch: DispatchHandle,
    conn: ConnId,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.dispatch.disconnect(self.conn);
    }
}

/// What a socket brings to its session from the listener and the upgrade.
#[derive(Debug)]
pub struct Arrival {
    /// Where the client is, and the count its connection holds.
    pub peer: Arc<Peer>,
    /// The 8 KiB frame limit before `auth`, lifted when it succeeds.
    pub pre_auth: Arc<PreAuthLimit>,
    /// Counts the socket as waiting to authenticate until `auth` is answered.
    pub unauthenticated: UnauthenticatedPermit,
}

/// Serves one upgraded WebSocket until it closes.
pub async fn run(socket: Socket, context: Arc<SessionContext>, arrival: Arrival) {
    let _open = OpenConnection::new(context.metrics.clone());
    // The connection's count lasts as long as the session.
    let _peer = arrival.peer.clone();
    let (sink, mut stream) = socket.split();
    let writer = Arc::new(ConnWriter {
        state: tokio::sync::Mutex::new(SinkState {
            sink,
            delivered: FxHashMap::default(),
            live: false,
        }),
        metrics: context.metrics.clone(),
    });
    let hello = writer
        .state
        .lock()
        .await
        .sink
        .send(text(context.hello()))
        .await;
    if hello.is_err() {
        return;
    }
    let conn = ConnId(context.next_conn.fetch_add(1, Ordering::Relaxed));
    let Some((principal, device, handle)) =
        authenticate(&writer, &mut stream, &context, conn, arrival).await
    else {
        return;
    };
    let registration = Registration {
        dispatch: context.dispatch.clone(),
        conn,
    };
    debug!(conn = conn.0, principal = %principal.id, "authenticated");
    // Shared with every command the connection sends (no copy of its strings per send).
    let caller = Arc::new(Caller {
        id: principal.id.clone(),
        kind: principal.kind,
        device,
        conn,
    });
    let control = handle.control.clone();
    let sink_task = tokio::spawn(
        SinkTask {
            writer,
            queue: handle.outbound.clone(),
            closing: control.watch(),
            control: control.clone(),
            context: context.clone(),
            caller: caller.clone(),
            bad_frames: VecDeque::new(),
        }
        .run(),
    );
    read_frames(&mut stream, &context, &caller, &handle).await;
    control.end(Closing::PeerGone);
    let finished = async {
        let _ = sink_task.await;
        drop(registration);
    };
    // A hub that is stopping does not wait for its peers. Otherwise the peer is read while
    // the close frame is written, not only after: a peer still sending what it pipelined
    // reads nothing until its sends go through, and the close frame would wait for it.
    if control
        .close_code()
        .is_some_and(|code| code != CloseCode::HubRestarting)
    {
        let grace = close_grace(&context.config);
        tokio::join!(finished, linger(&mut stream, grace * 2, &context));
    } else {
        finished.await;
    }
}

/// How long a closing connection's peer has to read what was written and the close frame.
fn close_grace(config: &HubConfig) -> Duration {
    (config.heartbeat * 2).max(Duration::from_secs(5))
}

/// How long a socket refused before `auth` lingers after its close frame.
const PRE_AUTH_LINGER: Duration = Duration::from_secs(5);

/// Reads and drops what the peer still sends while and after the hub writes its close
/// frame, until the peer closes too or `limit` passes. Why: a socket closed with bytes unread is reset, and a
/// reset peer loses whatever it had not read yet, the close frame included (a client that
/// pipelined requests it was never answered would see a reset instead of 4008).
async fn linger(stream: &mut Stream, limit: Duration, context: &SessionContext) {
    let mut stopping = context.stopping.subscribe();
    let drained = async {
        while let Some(Ok(message)) = stream.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(limit, drained) => {}
        _ = stopping.wait_for(|stopping| *stopping) => {}
    }
}

type Authenticated = (crate::store::PrincipalRecord, String, ConnHandle);

/// How an `auth` was refused, and the close code that follows the `err`.
struct AuthRefusal {
    re: Option<u64>,
    refusal: Refusal,
    close: CloseCode,
    /// Counts against the client address's failed authentications.
    failed: bool,
}

impl AuthRefusal {
    fn unauthorized(re: Option<u64>, msg: &str) -> AuthRefusal {
        AuthRefusal {
            re,
            refusal: Refusal::new(ErrorCode::Unauthorized, msg.to_owned()),
            close: CloseCode::Unauthorized,
            failed: true,
        }
    }

    fn stopping(re: Option<u64>) -> AuthRefusal {
        AuthRefusal {
            re,
            refusal: Refusal::new(ErrorCode::Busy, "the hub is stopping"),
            close: CloseCode::HubRestarting,
            failed: false,
        }
    }
}

/// Waits for `auth` and checks it with the writer, which registers the connection. Any
/// failure answers `err` and closes (4001 for a bad or missing `auth`); a frame over
/// 8 KiB before then closes with 1009.
async fn authenticate(
    writer: &Arc<ConnWriter>,
    stream: &mut Stream,
    context: &SessionContext,
    conn: ConnId,
    arrival: Arrival,
) -> Option<Authenticated> {
    // Held until the answer is written: nothing is written directly before it.
    let mut state = writer.state.lock().await;
    let sink = &mut state.sink;
    let address = arrival.peer.permit.address();
    let result = match read_auth(stream, context, &arrival.pre_auth).await {
        Err(FirstFrame::Gone) => None,
        Err(FirstFrame::TooLarge) => {
            context
                .admission
                .auth_failed(address, std::time::Instant::now());
            let _ = sink.send(close_message(CloseCode::FrameTooLarge)).await;
            // What follows is read (up to max_frame a frame) only to be dropped.
            arrival.pre_auth.lift();
            linger(stream, PRE_AUTH_LINGER, context).await;
            return None;
        }
        Err(FirstFrame::Refused(refused)) => {
            // Refused before a token was even checked: still a refused auth, on record.
            context.writer.submit(Request::Refused {
                principal: String::new(),
                action: "auth",
                target: None,
                refusal: refused.refusal.clone(),
            });
            Some(Err(refused))
        }
        Ok(auth) => Some(check_auth(context, conn, writer, auth).await),
    };
    // Answered: the socket no longer waits to authenticate.
    drop(arrival.unauthenticated);
    match result? {
        Ok((principal, device, handle, re)) => {
            arrival.pre_auth.lift();
            let ok = OkReply::with(
                re,
                &AuthOk {
                    principal: roundtable_protocol::model::Principal {
                        id: principal.id.clone(),
                        kind: principal.kind,
                        handle: principal.handle.clone(),
                        name: principal.name.clone(),
                        owner: principal.owner.clone(),
                    },
                },
            );
            if sink
                .send(text(ServerFrame::Ok(ok).to_json()))
                .await
                .is_err()
            {
                context.dispatch.disconnect(conn);
                return None;
            }
            Some((principal, device, handle))
        }
        Err(refused) => {
            if refused.failed {
                context
                    .admission
                    .auth_failed(address, std::time::Instant::now());
            }
            let _ = sink
                .send(text(err_frame(refused.re, &refused.refusal)))
                .await;
            let _ = sink.send(close_message(refused.close)).await;
            if refused.close != CloseCode::HubRestarting {
                linger(stream, PRE_AUTH_LINGER, context).await;
            }
            None
        }
    }
}

/// Why no `auth` frame could be taken from the socket.
enum FirstFrame {
    /// The peer left.
    Gone,
    /// A frame over 8 KiB.
    TooLarge,
    /// Not an acceptable `auth` frame, or none in time.
    Refused(AuthRefusal),
}

/// Reads the first frame, which must be a well-formed `auth`.
async fn read_auth(
    stream: &mut Stream,
    context: &SessionContext,
    pre_auth: &PreAuthLimit,
) -> Result<roundtable_protocol::client::Auth, FirstFrame> {
    let deadline = tokio::time::Instant::now() + context.config.auth_timeout;
    let refuse = |re, msg: &str| FirstFrame::Refused(AuthRefusal::unauthorized(re, msg));
    let mut stopping = context.stopping.subscribe();
    let frame = loop {
        let next = tokio::select! {
            next = tokio::time::timeout_at(deadline, stream.next()) => next,
            _ = stopping.wait_for(|stopping| *stopping) => {
                return Err(FirstFrame::Refused(AuthRefusal::stopping(None)));
            }
        };
        match next {
            Err(_) => {
                return Err(refuse(
                    None,
                    "no auth frame arrived in time; send auth first, within 10 seconds",
                ));
            }
            Ok(Some(Err(error))) => {
                return Err(if pre_auth.exceeded() || is_too_large(&error) {
                    FirstFrame::TooLarge
                } else {
                    FirstFrame::Gone
                });
            }
            Ok(None) | Ok(Some(Ok(Message::Close(_)))) => return Err(FirstFrame::Gone),
            Ok(Some(Ok(Message::Text(frame)))) => break frame,
            Ok(Some(Ok(Message::Binary(_)))) => {
                return Err(refuse(
                    None,
                    "the first frame must be an auth JSON text frame",
                ));
            }
            Ok(Some(Ok(_))) => continue,
        }
    };
    match decode_client_frame(frame.as_str()) {
        Ok(ClientFrame::Auth(auth)) => {
            if auth.device.is_empty() || auth.device.len() > limits::DEVICE {
                Err(refuse(
                    Some(auth.id),
                    "device must be a stable id of 1 to 128 bytes",
                ))
            } else {
                Ok(auth)
            }
        }
        Ok(other) => Err(refuse(
            Some(other.id()),
            &format!("the first frame must be auth, not {}", other.type_name()),
        )),
        Err(error) => Err(refuse(
            error.re,
            &format!("the first frame must be auth: {}", error.msg),
        )),
    }
}

/// Has the writer check the token; the dispatcher registers the connection when it is
/// good and the principal has room for one more device.
async fn check_auth(
    context: &SessionContext,
    conn: ConnId,
    writer: &Arc<ConnWriter>,
    auth: roundtable_protocol::client::Auth,
) -> Result<(crate::store::PrincipalRecord, String, ConnHandle, u64), AuthRefusal> {
    let handle = ConnHandle {
        id: conn,
        outbound: Arc::new(OutboundQueue::new(
            context.config.max_queue,
            context.config.max_queue_bytes,
        )),
        control: Arc::new(ConnControl::default()),
        direct: Some(writer.clone() as Arc<dyn DirectWrite>),
    };
    let (reply, answer) = oneshot::channel();
    let submitted = context.writer.submit(Request::Auth {
        token: auth.token,
        device: auth.device.clone(),
        conn: handle.clone(),
        reply,
    });
    if !submitted {
        return Err(AuthRefusal::stopping(Some(auth.id)));
    }
    let Ok(result) = answer.await else {
        return Err(AuthRefusal::stopping(Some(auth.id)));
    };
    result
        .map(|principal| (principal, auth.device, handle, auth.id))
        .map_err(|refusal| {
            let (close, failed) = match refusal.code {
                ErrorCode::Unauthorized => (CloseCode::Unauthorized, true),
                // A stopped agent (amendment 1): 4011, not 4010; its token stays valid, and
                // it reconnects with its backoff until a resume lets it in.
                ErrorCode::Paused => (CloseCode::Stopped, false),
                // The principal has `max_devices` connections already.
                ErrorCode::Busy => (CloseCode::TryAgainLater, false),
                _ => (CloseCode::HubRestarting, false),
            };
            AuthRefusal {
                re: Some(auth.id),
                refusal,
                close,
                failed,
            }
        })
}

/// The reader: decodes frames until the peer leaves, errs, falls silent, or the
/// connection is closed by the hub.
async fn read_frames(
    stream: &mut Stream,
    context: &Arc<SessionContext>,
    caller: &Arc<Caller>,
    handle: &ConnHandle,
) {
    let control = &handle.control;
    let in_flight = Arc::new(Semaphore::new(context.config.max_in_flight.max(1)));
    // Reads hold their results until they are queued: a few at a time bound what one
    // connection can make the hub hold besides its queue.
    let reads = Arc::new(Semaphore::new(context.config.max_reads_in_flight.max(1)));
    let silence_limit = context.config.heartbeat * 2;
    let mut closing = control.watch();
    // One timer for the connection, moved on only when it fires, rather than a timer set
    // and cancelled for every frame read. Silence counts from when the reader began to wait
    // for this frame (not while it waited for the writer to make room).
    let silence = tokio::time::sleep(silence_limit);
    tokio::pin!(silence);
    loop {
        let waiting_since = tokio::time::Instant::now();
        let next = loop {
            tokio::select! {
                biased;
                _ = wait_closing(&mut closing) => return,
                next = stream.next() => break next,
                () = &mut silence => {
                    let quiet_until = waiting_since + silence_limit;
                    if tokio::time::Instant::now() >= quiet_until {
                        debug!(conn = caller.conn.0, "silent for two heartbeats; closing");
                        return;
                    }
                    silence.as_mut().reset(quiet_until);
                }
            }
        };
        let message = match next {
            None => return,
            Some(Err(error)) => {
                if is_too_large(&error) {
                    control.close(CloseCode::FrameTooLarge);
                } else {
                    debug!(conn = caller.conn.0, %error, "read error");
                }
                return;
            }
            Some(Ok(message)) => message,
        };
        let frame = match message {
            Message::Text(frame) => frame,
            Message::Binary(_) => {
                let refusal = Refusal::new(
                    ErrorCode::BadFrame,
                    "binary frames are not part of the protocol; send JSON text frames",
                );
                if !handle.push(Outbound::Err { re: None, refusal }) {
                    return;
                }
                continue;
            }
            Message::Close(_) => return,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        let command = match decode_client_frame(frame.as_str()) {
            Ok(command) => command,
            Err(error) => {
                let refusal = Refusal::new(error.code, error.msg);
                if !handle.push(Outbound::Err {
                    re: error.re,
                    refusal,
                }) {
                    return;
                }
                continue;
            }
        };
        let re = command.id();
        let forwarded = match command {
            ClientFrame::Sync(sync) => handle.push(Outbound::Sync {
                re: sync.id,
                cursors: sync.cursors,
            }),
            ClientFrame::History(history) => {
                let Some(permit) = acquire_read(&reads, control).await else {
                    return;
                };
                let context = context.clone();
                let caller = caller.clone();
                let handle = handle.clone();
                tokio::spawn(async move {
                    let reply = serve_history(&context, &caller, history).await;
                    record_refusal(&context, &caller, "history", &reply);
                    handle.push(reply);
                    drop(permit);
                });
                true
            }
            ClientFrame::Directory(directory) => {
                let Some(permit) = acquire_read(&reads, control).await else {
                    return;
                };
                let context = context.clone();
                let caller = caller.clone();
                let handle = handle.clone();
                tokio::spawn(async move {
                    handle.push(serve_directory(&context, &caller, directory).await);
                    drop(permit);
                });
                true
            }
            ClientFrame::Audit(audit) => {
                let Some(permit) = acquire_read(&reads, control).await else {
                    return;
                };
                let context = context.clone();
                let caller = caller.clone();
                let handle = handle.clone();
                tokio::spawn(async move {
                    let reply = serve_audit(&context, &caller, audit).await;
                    record_refusal(&context, &caller, "audit", &reply);
                    handle.push(reply);
                    drop(permit);
                });
                true
            }
            other => match Command::from_frame(other) {
                Ok(command) => {
                    let Ok(permit) = in_flight.clone().acquire_owned().await else {
                        return;
                    };
                    context.writer.submit(Request::Command {
                        caller: caller.clone(),
                        command,
                        submitted: Instant::now(),
                        permit,
                    })
                }
                Err(refusal) => handle.push(Outbound::Err {
                    re: Some(re),
                    refusal,
                }),
            },
        };
        if !forwarded {
            return;
        }
    }
}

/// Waits for a read permit, unless the connection ends first.
async fn acquire_read(
    reads: &Arc<Semaphore>,
    control: &ConnControl,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let mut closing = control.watch();
    tokio::select! {
        permit = reads.clone().acquire_owned() => permit.ok(),
        _ = wait_closing(&mut closing) => None,
    }
}

/// Records a `bad_frame` answered on the connection; past 20 in a minute the connection is
/// closed with 1008.
fn count_bad_frame(recent: &mut VecDeque<Instant>, control: &ConnControl) {
    let now = Instant::now();
    while recent
        .front()
        .is_some_and(|at| now.duration_since(*at) > Duration::from_secs(60))
    {
        recent.pop_front();
    }
    recent.push_back(now);
    if recent.len() > 20 {
        control.close(CloseCode::TooManyBadFrames);
    }
}

/// Sends a read's refusal to the writer for the audit log.
fn record_refusal(
    context: &SessionContext,
    caller: &Caller,
    action: &'static str,
    reply: &Outbound,
) {
    if let Outbound::Err { refusal, .. } = reply {
        context.writer.submit(Request::Refused {
            principal: caller.id.clone(),
            action,
            target: None,
            refusal: refusal.clone(),
        });
    }
}

/// `audit`: a user reads the entries of itself and its agents.
async fn serve_audit(context: &SessionContext, caller: &Caller, audit: Audit) -> Outbound {
    let refuse = |code, msg: String| Outbound::Err {
        re: Some(audit.id),
        refusal: Refusal::new(code, msg),
    };
    if caller.kind != PrincipalKind::User {
        return refuse(
            ErrorCode::Forbidden,
            "only users read the audit log; ask your owner".into(),
        );
    }
    let since_ms = match &audit.since {
        None => None,
        Some(since) => match roundtable_protocol::ts::parse_millis(since) {
            Some(ms) => Some(ms),
            None => {
                return refuse(
                    ErrorCode::BadFrame,
                    format!("since must be an RFC 3339 timestamp, got {since:?}"),
                );
            }
        },
    };
    let limit = audit.limit.unwrap_or(AUDIT_DEFAULT);
    if limit == 0 || limit > AUDIT_MAX {
        return refuse(
            ErrorCode::BadFrame,
            format!("limit must be 1 to {AUDIT_MAX}; page with since"),
        );
    }
    let query = AuditQuery {
        viewer: caller.id.clone(),
        principal: audit.principal.clone(),
        since_ms,
        limit,
    };
    let reader = context.reader.clone();
    match tokio::task::spawn_blocking(move || reader.audit(&query)).await {
        Ok(Ok(entries)) => {
            let entries = entries.iter().map(crate::audit::wire_entry).collect();
            Outbound::Frame(
                ServerFrame::Ok(OkReply::with(audit.id, &AuditOk { entries })).to_json(),
            )
        }
        Ok(Err(ReadError::NotFound | ReadError::NotMember)) => refuse(
            ErrorCode::Forbidden,
            "you may read the audit entries of yourself and your agents only".into(),
        ),
        Ok(Err(ReadError::Store(error))) => {
            warn!(%error, "audit read failed");
            refuse(
                ErrorCode::Internal,
                "the hub could not read the audit log; retry".into(),
            )
        }
        Err(_) => refuse(
            ErrorCode::Internal,
            "the hub could not read the audit log; retry".into(),
        ),
    }
}

/// `directory`: the principals the caller may see, read off the writer (a search reads
/// every principal).
async fn serve_directory(
    context: &SessionContext,
    caller: &Caller,
    directory: Directory,
) -> Outbound {
    let query = DirectoryQuery {
        viewer: caller.id.clone(),
        query: directory
            .query
            .as_deref()
            .map(str::trim)
            .filter(|query| !query.is_empty())
            .map(str::to_lowercase),
        limit: directory
            .limit
            .unwrap_or(DIRECTORY_DEFAULT)
            .clamp(1, DIRECTORY_MAX) as usize,
        now_ms: crate::unix_ms(),
    };
    let reader = context.reader.clone();
    match tokio::task::spawn_blocking(move || reader.directory(&query)).await {
        Ok(Ok(entries)) => Outbound::Frame(
            ServerFrame::Ok(OkReply::with(directory.id, &DirectoryOk { entries })).to_json(),
        ),
        Ok(Err(error)) => {
            warn!(%error, "directory read failed");
            Outbound::Err {
                re: Some(directory.id),
                refusal: Refusal::new(ErrorCode::Internal, "the hub could not read; retry"),
            }
        }
        Err(_) => Outbound::Err {
            re: Some(directory.id),
            refusal: Refusal::new(ErrorCode::Internal, "the hub could not read; retry"),
        },
    }
}

/// `directory` pages: default and most entries.
const DIRECTORY_DEFAULT: u32 = 50;
const DIRECTORY_MAX: u32 = 200;

/// `audit` pages: default and most entries.
const AUDIT_DEFAULT: u32 = 100;
const AUDIT_MAX: u32 = 1000;

async fn serve_history(context: &SessionContext, caller: &Caller, history: History) -> Outbound {
    let refuse = |code, msg: String| Outbound::Err {
        re: Some(history.id),
        refusal: Refusal::new(code, msg),
    };
    let limit = history.limit.unwrap_or(limits::HISTORY_DEFAULT);
    if limit > limits::HISTORY_MAX || limit == 0 {
        return refuse(
            ErrorCode::BadFrame,
            format!(
                "limit must be 1 to {}; page with before/after",
                limits::HISTORY_MAX
            ),
        );
    }
    let reader = context.reader.clone();
    let principal = caller.id.clone();
    let is_agent = caller.kind == PrincipalKind::Agent;
    let room = history.room.clone();
    let range = HistoryRange {
        before: history.before,
        after: history.after,
        limit,
        max_bytes: context.config.page_bytes,
    };
    let read =
        tokio::task::spawn_blocking(move || reader.history(&principal, is_agent, &room, range))
            .await;
    match read {
        Ok(Ok(page)) => Outbound::Frame(history_frame(
            history.id,
            &page.events,
            page.more,
            &caller.id,
        )),
        Ok(Err(ReadError::NotFound)) => refuse(
            ErrorCode::NotFound,
            format!("there is no room {:?}", history.room),
        ),
        Ok(Err(ReadError::NotMember)) => refuse(
            ErrorCode::NotMember,
            format!("you are not a member of room {:?}", history.room),
        ),
        Ok(Err(ReadError::Store(error))) => {
            warn!(%error, "history read failed");
            refuse(
                ErrorCode::Internal,
                "the hub could not read the room; retry".into(),
            )
        }
        Err(_) => refuse(
            ErrorCode::Internal,
            "the hub could not read the room; retry".into(),
        ),
    }
}

/// Why the sink stopped writing.
enum Stop {
    Closing(Closing),
    SocketGone,
}

/// A connection's write half and the state its writes depend on. The sink task holds it
/// while it writes; the flush thread writes through it directly when it is free.
struct SinkState<S = Sink> {
    sink: S,
    /// Per stream (room id or `inbox`), the highest `seq` delivered on this connection.
    delivered: FxHashMap<String, u64>,
    /// Whether the writer delivers live events here (after the first `sync`).
    live: bool,
}

impl<S> SinkState<S> {
    /// The message for an item that needs nothing but this state: `Ok(None)` when there
    /// is nothing to write (an event already delivered), `Err` with the item when it needs
    /// the sink task (an error answer or a `sync`).
    fn message(&mut self, item: Outbound, metrics: &Metrics) -> Result<Option<Message>, Outbound> {
        match item {
            Outbound::Frame(frame) => Ok(Some(text(frame))),
            Outbound::Sent { re, event, dup } => {
                // Its own event counts as delivered on this connection, so a later `sync`
                // does not send it again. Live, every earlier event of the room this
                // connection may see was queued before this reply.
                if self.live
                    && let StreamKey::Room(room) = &event.stream
                {
                    match self.delivered.get_mut(room.as_str()) {
                        Some(high) => *high = (*high).max(event.seq),
                        None => {
                            self.delivered.insert(room.clone(), event.seq);
                        }
                    }
                }
                Ok(Some(text(sent_frame(re, &event, dup))))
            }
            Outbound::Event { event, with_key } => {
                let stream = match &event.record.stream {
                    StreamKey::Room(room) => room.as_str(),
                    StreamKey::Inbox(_) => "inbox",
                };
                let seq = event.record.seq;
                match self.delivered.get_mut(stream) {
                    Some(high) if *high >= seq => return Ok(None),
                    Some(high) => *high = seq,
                    None => {
                        self.delivered.insert(stream.to_owned(), seq);
                    }
                }
                metrics.events_delivered.fetch_add(1, Ordering::Relaxed);
                metrics.delivery_latency.observe(event.committed.elapsed());
                Ok(Some(Message::Text(event.frame(with_key))))
            }
            item @ (Outbound::Err { .. } | Outbound::Sync { .. }) => Err(item),
        }
    }
}

/// The connection's writer, shared by its sink task and whoever releases items to it.
struct ConnWriter<S = Sink> {
    state: tokio::sync::Mutex<SinkState<S>>,
    metrics: Arc<Metrics>,
}

impl<S> std::fmt::Debug for ConnWriter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnWriter").finish_non_exhaustive()
    }
}

impl<S> DirectWrite for ConnWriter<S>
where
    S: futures_util::Sink<Message> + Unpin + Send + 'static,
{
    fn write_now(&self, items: Vec<Outbound>, queue: &OutboundQueue) -> Vec<Outbound> {
        // The sink task holds the writer from before it drains the queue until it has
        // written what it drained: free writer and empty queue mean nothing is ahead.
        let Ok(mut state) = self.state.try_lock() else {
            return items;
        };
        if !queue.is_empty() {
            return items;
        }
        let state = &mut *state;
        // Nothing here waits: whatever cannot be written at once is left to the sink task,
        // which polls again with its own waker.
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let mut items = items.into_iter();
        let mut rest = Vec::new();
        let mut wrote = false;
        for item in items.by_ref() {
            let ready = futures_util::Sink::poll_ready(Pin::new(&mut state.sink), &mut context);
            if !matches!(ready, Poll::Ready(Ok(()))) {
                rest.push(item);
                break;
            }
            match state.message(item, &self.metrics) {
                Ok(Some(message)) => {
                    wrote = true;
                    if futures_util::Sink::start_send(Pin::new(&mut state.sink), message).is_err() {
                        // The socket is gone: the sink task finds out when it flushes.
                        break;
                    }
                }
                Ok(None) => {}
                Err(item) => {
                    rest.push(item);
                    break;
                }
            }
        }
        rest.extend(items);
        if wrote {
            let flushed = futures_util::Sink::poll_flush(Pin::new(&mut state.sink), &mut context);
            if !matches!(flushed, Poll::Ready(Ok(()))) {
                queue.request_flush();
            }
        }
        rest
    }
}

/// The connection's sink task: writes what is queued for it (answers of reads, `sync`
/// replays, whatever could not be written directly), heartbeats, and the closing frame.
struct SinkTask {
    writer: Arc<ConnWriter>,
    queue: Arc<OutboundQueue>,
    /// Watches `control`: the sink stops writing as soon as the connection is to end.
    closing: tokio::sync::watch::Receiver<Option<Closing>>,
    control: Arc<ConnControl>,
    context: Arc<SessionContext>,
    caller: Arc<Caller>,
    /// When the recent `bad_frame` answers were written (for the 1008 rule).
    bad_frames: VecDeque<Instant>,
}

/// How many replayed events the sink writes before it flushes the socket.
const WRITE_BATCH: usize = 64;

impl SinkTask {
    async fn run(mut self) {
        let mut heartbeat = tokio::time::interval(self.context.config.heartbeat);
        heartbeat.tick().await;
        let queue = self.queue.clone();
        let writer = self.writer.clone();
        let mut items = Vec::new();
        // What was drained from the queue but not written when the connection began to
        // close: the close below writes it first (for a 4010 or 4011).
        let mut unwritten = Vec::new();
        let stop = 'serve: loop {
            tokio::select! {
                biased;
                closing = wait_closing(&mut self.closing) => break Stop::Closing(closing),
                () = queue.wait() => {}
                _ = heartbeat.tick() => {
                    let mut state = writer.state.lock().await;
                    match self.write(&mut state, Message::Ping(Default::default())).await {
                        Ok(()) => match self.flush(&mut state).await {
                            Ok(()) => continue,
                            Err(stop) => break stop,
                        },
                        Err(stop) => break stop,
                    }
                }
            };
            // The writer is held from before the queue is drained until it is written, so
            // nothing written directly overtakes what was queued. Then one flush.
            let mut state = writer.state.lock().await;
            queue.drain_into(&mut items);
            let mut drained = items.drain(..);
            while let Some(item) = drained.next() {
                if let Err(stop) = self.handle(&mut state, item).await {
                    unwritten.extend(drained);
                    break 'serve stop;
                }
            }
            if let Err(stop) = self.flush(&mut state).await {
                break stop;
            }
        };
        if let Stop::Closing(Closing::Code(code)) = stop {
            // Give a slow peer time to read what is queued and the close frame itself.
            let grace = close_grace(&self.context.config);
            let metrics = self.context.metrics.clone();
            let _ = tokio::time::timeout(grace, async {
                let mut state = writer.state.lock().await;
                // A revoked or rotated token, or a stopped agent: what was queued before the
                // close still goes out first, above all the `ok` of the `user_token` that
                // closed it, which carries the new token. (A slow consumer's queue is what
                // it could not read: that is dropped.)
                if matches!(code, CloseCode::TokenRevoked | CloseCode::Stopped) {
                    queue.drain_into(&mut items);
                    for item in unwritten.drain(..).chain(items.drain(..)) {
                        let message = match item {
                            Outbound::Err { re, refusal } => Some(text(err_frame(re, &refusal))),
                            item => state.message(item, &metrics).ok().flatten(),
                        };
                        if let Some(message) = message {
                            state.sink.feed(message).await?;
                        }
                    }
                }
                state.sink.send(close_message(code)).await?;
                state.sink.close().await
            })
            .await;
        }
        self.control.end(Closing::PeerGone);
    }

    async fn write(&mut self, state: &mut SinkState, message: Message) -> Result<(), Stop> {
        tokio::select! {
            biased;
            result = state.sink.feed(message) => result.map_err(|_| Stop::SocketGone),
            closing = wait_closing(&mut self.closing) => Err(Stop::Closing(closing)),
        }
    }

    async fn flush(&mut self, state: &mut SinkState) -> Result<(), Stop> {
        tokio::select! {
            biased;
            result = state.sink.flush() => result.map_err(|_| Stop::SocketGone),
            closing = wait_closing(&mut self.closing) => Err(Stop::Closing(closing)),
        }
    }

    async fn handle(&mut self, state: &mut SinkState, item: Outbound) -> Result<(), Stop> {
        match state.message(item, &self.context.metrics) {
            Ok(Some(message)) => self.write(state, message).await,
            Ok(None) => Ok(()),
            Err(Outbound::Err { re, refusal }) => {
                self.write(state, text(err_frame(re, &refusal))).await?;
                if refusal.code == ErrorCode::BadFrame {
                    count_bad_frame(&mut self.bad_frames, &self.control);
                }
                Ok(())
            }
            Err(Outbound::Sync { re, cursors }) => self.serve_sync(state, re, cursors).await,
            Err(_) => unreachable!("SinkState::message hands back only errors and syncs"),
        }
    }

    /// Replays every readable stream from the client's cursors (or from what this
    /// connection already delivered, whichever is later), then answers with the heads.
    /// The replay is planned at once and read page by page, each page written (and, when
    /// the socket is slow, waited for) before the next is read: however much is missing,
    /// the hub holds one page of it.
    async fn serve_sync(
        &mut self,
        state: &mut SinkState,
        re: u64,
        cursors: BTreeMap<String, u64>,
    ) -> Result<(), Stop> {
        if !state.live {
            if !self.context.dispatch.subscribe(self.caller.conn) {
                return Err(Stop::Closing(Closing::Code(CloseCode::HubRestarting)));
            }
            state.live = true;
        }
        let principal = self.caller.id.clone();
        let mut starts: HashMap<StreamKey, u64> = HashMap::new();
        for (name, cursor) in &cursors {
            let key = if name == "inbox" {
                StreamKey::Inbox(principal.clone())
            } else {
                StreamKey::Room(name.clone())
            };
            starts.insert(key, *cursor);
        }
        for (name, high) in &state.delivered {
            let key = if name == "inbox" {
                StreamKey::Inbox(principal.clone())
            } else {
                StreamKey::Room(name.clone())
            };
            let start = starts.entry(key).or_insert(0);
            *start = (*start).max(*high);
        }
        let reader = self.context.reader.clone();
        let replay_max = self.context.config.replay_max;
        let planned = tokio::task::spawn_blocking(move || {
            reader.sync_plan(
                &principal,
                &|stream| starts.get(stream).copied().unwrap_or(0),
                replay_max,
            )
        })
        .await;
        let Ok(Ok(plan)) = planned else {
            if let Ok(Err(error)) = planned {
                warn!(%error, "sync read failed");
            }
            return self.refuse_sync(state, re).await;
        };
        let streams: Arc<[StreamPlan]> = Arc::from(plan.streams);
        // Streams whose `gap` (if any) has been written: each before its first event.
        let mut announced = 0;
        let mut written = 0;
        let mut position = ReplayPosition::start(&streams);
        while let Some(from) = position {
            let reader = self.context.reader.clone();
            let principal = self.caller.id.clone();
            let is_agent = self.caller.kind == PrincipalKind::Agent;
            let page_bytes = self.context.config.page_bytes;
            let plan = streams.clone();
            let read = tokio::task::spawn_blocking(move || {
                reader.replay_page(&principal, is_agent, &plan, from, page_bytes)
            })
            .await;
            let Ok(Ok(page)) = read else {
                if let Ok(Err(error)) = read {
                    warn!(%error, "sync read failed");
                }
                return self.refuse_sync(state, re).await;
            };
            for (index, event) in page.events {
                while announced <= index {
                    self.announce_gap(state, &streams[announced]).await?;
                    announced += 1;
                }
                let with_key = event.from == self.caller.id;
                self.write(state, text(event_frame(&event, with_key)))
                    .await?;
                written += 1;
                if written % WRITE_BATCH == 0 {
                    self.flush(state).await?;
                }
            }
            position = page.next;
        }
        while announced < streams.len() {
            self.announce_gap(state, &streams[announced]).await?;
            announced += 1;
        }
        let mut heads = BTreeMap::new();
        for planned in streams.iter() {
            let name = match &planned.stream {
                StreamKey::Room(room) => room.clone(),
                StreamKey::Inbox(_) => "inbox".to_owned(),
            };
            let high = state.delivered.entry(name.clone()).or_insert(0);
            *high = (*high).max(planned.head);
            heads.insert(name, planned.head);
        }
        let read_markers = plan
            .read_markers
            .into_iter()
            .map(|(stream, seq)| match stream {
                StreamKey::Room(room) => (room, seq),
                StreamKey::Inbox(_) => ("inbox".to_owned(), seq),
            })
            .collect();
        let ok = OkReply::with(
            re,
            &SyncOk {
                heads,
                read: read_markers,
            },
        );
        self.write(state, text(ServerFrame::Ok(ok).to_json())).await
    }

    /// Writes a stream's `gap`, if its plan has one.
    async fn announce_gap(
        &mut self,
        state: &mut SinkState,
        planned: &StreamPlan,
    ) -> Result<(), Stop> {
        if let (Some((from, to)), StreamKey::Room(room)) = (planned.gap, &planned.stream) {
            let gap = ServerFrame::Gap(Gap {
                room: room.clone(),
                from,
                to,
            });
            self.write(state, text(gap.to_json())).await?;
        }
        Ok(())
    }

    async fn refuse_sync(&mut self, state: &mut SinkState, re: u64) -> Result<(), Stop> {
        let refusal = Refusal::new(ErrorCode::Internal, "the hub could not read; sync again");
        self.write(state, text(err_frame(Some(re), &refusal))).await
    }
}

#[cfg(test)]
mod tests {
    //! The direct write's rules: only when nothing is ahead, in order, never waiting.

    use std::time::Duration;

    use super::*;
    use crate::delivery::LiveEvent;
    use crate::store::EventRecord;

    /// A sink that takes `capacity` messages, then is not ready; its flush completes only
    /// when told to.
    struct TestSink {
        written: Vec<String>,
        capacity: usize,
        flushes: bool,
    }

    impl futures_util::Sink<Message> for TestSink {
        type Error = WsError;

        fn poll_ready(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> Poll<Result<(), WsError>> {
            if self.written.len() < self.capacity {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        }

        fn start_send(self: Pin<&mut Self>, message: Message) -> Result<(), WsError> {
            match message {
                Message::Text(text) => self.get_mut().written.push(text.to_string()),
                other => panic!("unexpected {other:?}"),
            }
            Ok(())
        }

        fn poll_flush(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> Poll<Result<(), WsError>> {
            if self.flushes {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        }

        fn poll_close(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> Poll<Result<(), WsError>> {
            Poll::Ready(Ok(()))
        }
    }

    fn writer(capacity: usize, flushes: bool) -> ConnWriter<TestSink> {
        ConnWriter {
            state: tokio::sync::Mutex::new(SinkState {
                sink: TestSink {
                    written: Vec::new(),
                    capacity,
                    flushes,
                },
                delivered: FxHashMap::default(),
                live: true,
            }),
            metrics: Arc::new(Metrics::default()),
        }
    }

    fn event(seq: u64) -> Outbound {
        let record = EventRecord {
            stream: StreamKey::Room("r_1".into()),
            seq,
            id: format!("e_{seq}"),
            ts_ms: 0,
            from: "u_1".into(),
            kind: "message".into(),
            body: format!(r#"{{"text":"m{seq}"}}"#),
            client_key: None,
            mentions: Vec::new(),
            pair: false,
        };
        Outbound::Event {
            event: Arc::new(LiveEvent::new(Arc::new(record), Instant::now())),
            with_key: false,
        }
    }

    fn frame(text: &str) -> Outbound {
        Outbound::Frame(text.into())
    }

    /// The seqs (events) and texts (frames) of what was written or handed back.
    fn labels(texts: &[String]) -> Vec<String> {
        texts
            .iter()
            .map(
                |text| match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(value) => format!("evt {}", value["seq"]),
                    Err(_) => text.clone(),
                },
            )
            .collect()
    }

    fn item_labels(items: &[Outbound]) -> Vec<String> {
        items
            .iter()
            .map(|item| match item {
                Outbound::Frame(text) => text.clone(),
                Outbound::Event { event, .. } => format!("evt {}", event.record.seq),
                Outbound::Err { .. } => "err".into(),
                Outbound::Sync { .. } => "sync".into(),
                Outbound::Sent { .. } => "sent".into(),
            })
            .collect()
    }

    async fn written(writer: &ConnWriter<TestSink>) -> Vec<String> {
        labels(&writer.state.lock().await.sink.written)
    }

    async fn flush_requested(queue: &OutboundQueue) -> bool {
        tokio::time::timeout(Duration::from_millis(50), queue.wait())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_free_writer_writes_at_once_in_order_and_skips_what_was_delivered() {
        let writer = writer(usize::MAX, true);
        let queue = OutboundQueue::new(16, 1 << 20);
        let rest = writer.write_now(vec![event(1), frame("a"), event(2)], &queue);
        assert!(rest.is_empty());
        // Seq 2 was delivered already (by a replay): only 3 goes out.
        let rest = writer.write_now(vec![event(2), event(3)], &queue);
        assert!(rest.is_empty());
        assert_eq!(written(&writer).await, ["evt 1", "a", "evt 2", "evt 3"]);
        assert!(
            !flush_requested(&queue).await,
            "a completed flush asks for none"
        );
    }

    #[tokio::test]
    async fn nothing_is_written_past_a_held_writer_or_a_queued_item() {
        let writer = writer(usize::MAX, true);
        let queue = OutboundQueue::new(16, 1 << 20);
        {
            // The sink task holds the writer (a replay, say).
            let _held = writer.state.lock().await;
            let rest = writer.write_now(vec![event(1), event(2)], &queue);
            assert_eq!(item_labels(&rest), ["evt 1", "evt 2"]);
            assert!(queue.push_many(rest));
        }
        // Free again, but items wait in the queue: newer ones queue behind them.
        let rest = writer.write_now(vec![event(3)], &queue);
        assert_eq!(item_labels(&rest), ["evt 3"]);
        assert!(written(&writer).await.is_empty());
    }

    #[tokio::test]
    async fn what_cannot_be_written_at_once_comes_back_in_order() {
        // Room for two messages, and a flush that does not complete.
        let writer = writer(2, false);
        let queue = OutboundQueue::new(16, 1 << 20);
        let rest = writer.write_now(vec![event(1), event(2), event(3), frame("b")], &queue);
        assert_eq!(item_labels(&rest), ["evt 3", "b"]);
        assert_eq!(written(&writer).await, ["evt 1", "evt 2"]);
        assert!(
            flush_requested(&queue).await,
            "the sink task finishes the flush"
        );
    }

    #[tokio::test]
    async fn errors_and_syncs_are_left_to_the_sink_task_with_all_behind_them() {
        let writer = writer(usize::MAX, true);
        let queue = OutboundQueue::new(16, 1 << 20);
        let refusal = Refusal::new(ErrorCode::BadFrame, "no");
        let rest = writer.write_now(
            vec![
                event(1),
                Outbound::Err {
                    re: Some(7),
                    refusal,
                },
                event(2),
            ],
            &queue,
        );
        assert_eq!(item_labels(&rest), ["err", "evt 2"]);
        let rest = writer.write_now(
            vec![
                Outbound::Sync {
                    re: 8,
                    cursors: BTreeMap::new(),
                },
                frame("c"),
            ],
            &queue,
        );
        assert_eq!(item_labels(&rest), ["sync", "c"]);
        assert_eq!(written(&writer).await, ["evt 1"]);
    }
}
