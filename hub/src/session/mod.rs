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
use std::sync::atomic::Ordering;
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
use tracing::{Instrument as _, debug, warn};

use crate::admission::UnauthenticatedPermit;
use crate::config::HubConfig;
use crate::context::HubContext;
use crate::delivery::{
    Closing, ConnControl, ConnHandle, DirectWrite, Outbound, OutboundQueue, err_frame, event_frame,
    history_frame, sent_frame, wait_closing,
};
use crate::dispatch::DispatchHandle;
use crate::listener::Peer;
use crate::metrics::Metrics;
use crate::reads::{HistoryRange, ReplayPosition, StreamPlan};
use crate::store::{AuditQuery, DirectoryQuery, ReadError};
use crate::websocket::{PreAuthLimit, Socket};
use crate::writer::Request;
use roundtable_engine::records::StreamKey;
use roundtable_engine::{Caller, Command, ConnId, Refusal};

mod handshake;
mod reader;
mod sink;

use handshake::authenticate;
use reader::read_frames;
use sink::{ConnWriter, SinkState, SinkTask};

/// The `hello` a new connection gets.
fn hello(context: &HubContext) -> String {
    ServerFrame::Hello(Hello {
        proto: PROTO_VERSION,
        hub: context.hub_id.clone(),
        epoch: context.epoch.clone(),
        hb_ms: context.config.heartbeat.as_millis() as u64,
        max_frame: context.config.max_frame as u64,
        max_queue: context.config.max_queue as u64,
        replay_max: Some(context.config.replay_max),
        max_queue_bytes: Some(context.config.max_queue_bytes as u64),
    })
    .to_json()
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
pub async fn run(socket: Socket, context: Arc<HubContext>, arrival: Arrival) {
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
        .send(text(hello(&context)))
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
    // Everything this connection's tasks log names it, its principal and its device.
    let span = tracing::debug_span!(
        "connection",
        conn = conn.0,
        principal = %principal.id,
        device = %device
    );
    debug!(parent: &span, "authenticated");
    // Shared with every command the connection sends (no copy of its strings per send).
    let caller = Arc::new(Caller {
        id: principal.id.clone(),
        kind: principal.kind,
        device,
        conn,
        via: roundtable_engine::Via::Ws,
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
        .run()
        .instrument(span.clone()),
    );
    read_frames(&mut stream, &context, &caller, &handle)
        .instrument(span)
        .await;
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
        .is_some_and(|code| !hub_stops_with(code))
    {
        let grace = close_grace(&context.config);
        tokio::join!(finished, linger(&mut stream, grace * 2, &context));
    } else {
        finished.await;
    }
}

/// Whether a close says the hub itself is stopping (restarting, or failed), when it does not
/// wait for its peers.
fn hub_stops_with(code: CloseCode) -> bool {
    matches!(code, CloseCode::HubRestarting | CloseCode::HubFailed)
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
async fn linger(stream: &mut Stream, limit: Duration, context: &HubContext) {
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
