//! `/mcp`: Roundtable's tools for MCP clients that reach the hub over HTTP (Streamable
//! HTTP, both MCP generations), with a hub token and nothing on the machine.
//!
//! Why here and how: a remote MCP client is one more way into the same rooms, so its tools
//! are the stdio bridge's (`roundtable-mcp-tools`, one definition) over operations that
//! turn into the commands a WebSocket client sends, through [`crate::gateway`] (same rules,
//! audit `via: mcp`). The wire is rmcp's `StreamableHttpService`; in front of it, [`gate`]
//! authenticates every request (only from `Authorization`), binds each MCP session to the
//! principal that opened it (another token naming it gets the 404 of an unknown session),
//! drops any `x-roundtable-*` header but `X-Roundtable-Device`, caps the body, and ends the
//! caller's open streams the moment its token is revoked or it is stopped. `Host` and
//! `Origin` (DNS rebinding, pages) are the hub's browser policy's, as on every route.

pub mod ops;
pub mod streams;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use rmcp::model::Extensions;
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use roundtable_mcp_tools::{OpsSource, ToolError, Tools};
use roundtable_protocol::ErrorCode;

use crate::bearer::required_caller;
use crate::context::HubContext;
use crate::gateway::Gateway;
use crate::http_reply::json_error;
use crate::listener::Peer;
use ops::CallerOps;
use roundtable_engine::{Refusal, Via};
use streams::McpStreams;

/// The path.
pub const PATH: &str = "/mcp";

/// The largest request body taken (a message's text is at most 16 KiB; JSON-RPC around a
/// tool call fits many times).
pub const MAX_BODY: usize = 1024 * 1024;

/// The one `x-roundtable-*` header a client may send: its device, so two clients of one
/// agent keep apart read markers.
const DEVICE: &str = "x-roundtable-device";

/// rmcp's session header.
const SESSION: &str = "mcp-session-id";

/// What the routes share.
struct McpState {
    gateway: Gateway,
    service: StreamableHttpService<Tools<FromRequest>, LocalSessionManager>,
    /// Which principal opened each session (and, for rmcp, their events and states).
    streams: McpStreams,
}

/// The operations of a tool call: those of the caller the gate put into the request.
pub struct FromRequest;

impl OpsSource for FromRequest {
    type Ops = CallerOps;

    fn ops(&self, context: &RequestContext<RoleServer>) -> Result<Arc<CallerOps>, ToolError> {
        ops_in(&context.extensions).ok_or_else(|| {
            ToolError::new(
                "this request carries no caller: call /mcp with Authorization: Bearer rt_…",
                "unauthorized",
            )
        })
    }
}

fn ops_in(extensions: &Extensions) -> Option<Arc<CallerOps>> {
    extensions
        .get::<axum::http::request::Parts>()?
        .extensions
        .get::<Arc<CallerOps>>()
        .cloned()
}

/// The `/mcp` route, to merge into the hub's router.
pub fn router(context: Arc<HubContext>, streams: McpStreams) -> Router {
    let gateway = Gateway::new(context.clone(), Via::Mcp);
    let tools = match streams.state_key() {
        Ok(key) => Tools::over(FromRequest).sealing_with(key),
        Err(error) => {
            // Questions then cannot span a restart (a fresh key each time), nothing worse.
            tracing::warn!(%error, "the MCP state key could not be kept");
            Tools::over(FromRequest)
        }
    };
    let config = StreamableHttpServerConfig::default()
        // The hub's browser policy has checked `Host` against its names, and `Origin`
        // against its own and the configured ones, for every route (403 otherwise).
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_sse_retry(Some(Duration::from_secs(2)))
        .with_max_request_body_bytes(MAX_BODY)
        .with_legacy_session_mode(true);
    let mut config = config;
    config.session_store = Some(Arc::new(streams.clone()));
    {
        // The hub stopping ends every session and stream.
        let cancel = config.cancellation_token.clone();
        let mut stopping = context.stopping.subscribe();
        tokio::spawn(async move {
            let _ = stopping.wait_for(|stopping| *stopping).await;
            cancel.cancel();
        });
    }
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(LocalSessionManager::default().with_event_store(Arc::new(streams.clone()))),
        config,
    );
    let state = Arc::new(McpState {
        gateway,
        service,
        streams,
    });
    Router::new()
        .route(PATH, axum::routing::any(gate))
        .with_state(state)
}

/// The device a request's read markers are kept under: `mcp`, or `mcp-<name>` with a valid
/// `X-Roundtable-Device: <name>`.
fn device_of(request: &Request) -> Result<String, Box<Response>> {
    let Some(value) = request.headers().get(DEVICE) else {
        return Ok(Via::Mcp.as_str().to_owned());
    };
    let name = value.to_str().unwrap_or_default();
    let valid = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !valid {
        return Err(Box::new(json_error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadFrame,
            "X-Roundtable-Device names a device in 1 to 32 letters, digits, '-', '_' or '.'".into(),
        )));
    }
    Ok(format!("mcp-{name}"))
}

fn no_session() -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        "no such MCP session: initialize a new one (read_messages shows what you have not read)"
            .into(),
    )
}

/// A POST's body must be one JSON-RPC message: a JSON object.
fn one_message(body: &[u8]) -> Result<serde_json::Value, Box<Response>> {
    let refused = |msg: String| {
        Box::new(json_error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadFrame,
            msg,
        ))
    };
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(message @ serde_json::Value::Object(_)) => Ok(message),
        Ok(_) => Err(refused(
            "send one JSON-RPC message, a JSON object (batches are not taken)".into(),
        )),
        Err(error) => Err(refused(format!(
            "the body is not JSON ({error}): send one JSON-RPC message"
        ))),
    }
}

fn unavailable() -> Response {
    json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Internal,
        "the hub could not keep MCP sessions just now; retry".into(),
    )
}

fn too_large() -> Response {
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::TooLarge,
        format!("the request body is over {MAX_BODY} bytes; send less"),
    )
}

/// Every `/mcp` request: authenticate, check the session's owner, set the caller, serve,
/// and end the response's stream when the caller is closed.
async fn gate(State(state): State<Arc<McpState>>, request: Request) -> Response {
    let closes = state.gateway.context().dispatch.watch_closes();
    let peer = request.extensions().get::<Arc<Peer>>().cloned();
    let (caller, principal) = match required_caller(&state.gateway, request.headers(), peer).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let device = match device_of(&request) {
        Ok(device) => device,
        Err(response) => return *response,
    };
    let device_name = device.clone();
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if declared.is_some_and(|length| length > MAX_BODY) {
        return too_large();
    }
    let session = request
        .headers()
        .get(SESSION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let now_ms = crate::unix_ms();
    if let Some(session) = &session {
        let owner = match state.streams.owner(session, now_ms).await {
            Ok(owner) => owner,
            Err(error) => {
                tracing::warn!(%error, "the MCP session file could not be read");
                return unavailable();
            }
        };
        if owner.as_deref() != Some(caller.id.as_str()) {
            if owner.is_some() {
                // Someone else's session: refused as if unknown, and recorded.
                state.gateway.record_refusal(
                    &caller.id,
                    "mcp_session",
                    &Refusal::new(ErrorCode::NotFound, "another principal's MCP session"),
                );
            }
            return no_session();
        }
    }
    let method = request.method().clone();
    let (mut parts, body) = request.into_parts();
    let kept: Vec<_> = parts
        .headers
        .iter()
        .filter(|(name, _)| !name.as_str().starts_with("x-roundtable-") || name.as_str() == DEVICE)
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    parts.headers.clear();
    for (name, value) in kept {
        parts.headers.append(name, value);
    }
    let mut caller_on_device = (*caller).clone();
    caller_on_device.device = device;
    let ops = Arc::new(CallerOps {
        hub_url: crate::http_reply::base_url(state.gateway.context(), &parts.headers),
        gateway: state.gateway.clone(),
        caller: Arc::new(caller_on_device),
        principal,
        // Names the task lists it reports: its session's, else its device's.
        session: session.clone().unwrap_or_else(|| device_name.clone()),
    });
    parts.extensions.insert(ops);
    // A POST is one JSON-RPC message, read whole (at most MAX_BODY, however it is sent,
    // within `http::BODY_TIMEOUT`) and checked before rmcp sees it, so a bad one gets a clear
    // 400.
    let body = if parts.method == axum::http::Method::POST {
        let bytes = match crate::http_reply::read_body(body, MAX_BODY).await {
            Ok(bytes) => bytes,
            Err(crate::http_reply::BodyUnread::TooLarge) => return too_large(),
            Err(crate::http_reply::BodyUnread::TooSlow) => {
                return crate::http_reply::body_too_slow();
            }
        };
        let message = match one_message(&bytes) {
            Ok(message) => message,
            Err(refused) => return *refused,
        };
        // A new session: at most SESSIONS_PER_PRINCIPAL each.
        if session.is_none() && message.get("method").and_then(|m| m.as_str()) == Some("initialize")
        {
            match state.streams.open_sessions(&caller.id, now_ms).await {
                Ok(open) if open >= streams::SESSIONS_PER_PRINCIPAL => {
                    return crate::http_reply::too_many(
                        Duration::from_secs(60),
                        format!(
                            "you have {open} MCP sessions open: end one you no longer use \
                             (DELETE /mcp with its Mcp-Session-Id); unused ones lapse after a day"
                        ),
                    );
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "the MCP session file could not be read");
                    return unavailable();
                }
            }
        }
        Body::from(bytes)
    } else {
        body
    };
    let request = Request::from_parts(parts, body);
    let principal: Arc<str> = Arc::from(caller.id.as_str());
    let response = streams::CALLER
        .scope(principal.clone(), state.service.handle(request))
        .await;
    let (mut parts, body) = response.into_parts();
    // A new session is its opener's; an ended one is forgotten.
    match (&session, parts.headers.get(SESSION)) {
        (None, Some(opened)) if parts.status.is_success() => {
            if let Ok(opened) = opened.to_str()
                && let Err(error) = state
                    .streams
                    .opened(opened, &caller.id, crate::unix_ms())
                    .await
            {
                tracing::warn!(%error, "an MCP session could not be recorded");
                return unavailable();
            }
        }
        (Some(session), _) if method == axum::http::Method::DELETE && parts.status.is_success() => {
            let _ = state.streams.ended(session).await;
        }
        _ => {}
    }
    let streaming = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if parts.status == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large();
    }
    if !streaming {
        return Response::from_parts(parts, Body::new(body));
    }
    // A stream ends the moment its caller is closed (revoked, rotated, stopped). The events
    // it passes are bound to its caller first, so only the caller replays from them.
    let ends = closed(closes, principal.clone());
    let mut ids = EventIds::default();
    let streams = state.streams.clone();
    let stream = http_body_util::BodyStream::new(body)
        .filter_map(|frame| async move { frame.ok().and_then(|frame| frame.into_data().ok()) })
        .then(move |chunk| {
            let found = ids.in_chunk(&chunk);
            let (streams, principal) = (streams.clone(), principal.clone());
            async move {
                if !found.is_empty()
                    && let Err(error) = streams.bind_events(found, &principal).await
                {
                    tracing::warn!(%error, "MCP events could not be bound to their caller");
                }
                Ok::<_, std::convert::Infallible>(chunk)
            }
        })
        .take_until(ends);
    parts
        .headers
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Response::from_parts(parts, Body::from_stream(stream)).into_response()
}

/// The SSE event ids (`id:` lines) of a stream, read chunk by chunk (a line may span two).
#[derive(Debug, Default)]
struct EventIds {
    partial: Vec<u8>,
}

impl EventIds {
    /// The ids whose lines end in `chunk`.
    fn in_chunk(&mut self, chunk: &[u8]) -> Vec<String> {
        self.partial.extend_from_slice(chunk);
        let mut ids = Vec::new();
        let mut start = 0;
        while let Some(end) = self.partial[start..].iter().position(|b| *b == b'\n') {
            let line = &self.partial[start..start + end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(id) = line.strip_prefix(b"id:") {
                let id = String::from_utf8_lossy(id).trim().to_owned();
                if !id.is_empty() {
                    ids.push(id);
                }
            }
            start += end + 1;
        }
        self.partial.drain(..start);
        // A line longer than any id is data: only its start could matter, and it does not.
        if self.partial.len() > 4096 && !self.partial.starts_with(b"id:") {
            self.partial.clear();
        }
        ids
    }
}

/// Resolves once `principal`'s connections are closed (or closes were missed: then its
/// streams end too, and the client reconnects with its token checked again).
async fn closed(
    mut closes: tokio::sync::broadcast::Receiver<crate::dispatch::PrincipalClosed>,
    principal: Arc<str>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match closes.recv().await {
            Ok(closed) if closed.principal == principal => return,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_read_from_lines_split_across_chunks() {
        let mut ids = EventIds::default();
        assert!(ids.in_chunk(b"data: \nid: 1-ab").is_empty());
        assert_eq!(
            ids.in_chunk(b"cd\r\nretry: 2000\n\ndata: {\"x\":1}\nid:"),
            ["1-abcd"]
        );
        assert_eq!(ids.in_chunk(b" 2-ef\n\n"), ["2-ef"]);
        assert!(ids.in_chunk(b"id:\n").is_empty(), "an empty id is none");
        // A long data line is not kept whole.
        ids.in_chunk(&[b'x'; 10_000]);
        assert!(ids.partial.is_empty());
        assert_eq!(ids.in_chunk(b"\nid: 3-gh\n"), ["3-gh"]);
    }
}
