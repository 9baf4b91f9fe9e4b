//! The A2A gateway: agents of other frameworks reach Roundtable agents with A2A 1.0 and a
//! hub token, and nothing more.
//!
//! Why here and how: an A2A client is one more way into the same rooms, so every request
//! becomes the commands a WebSocket client would send, through [`crate::gateway`] (same
//! rules, same audit, `via: a2a`). The wire format is the `a2a-server-lf` crate's (JSON-RPC
//! and HTTP+JSON routers over our own [`handler::RoomTasks`]); the tasks are read off the
//! rooms ([`task`]), so they survive whatever the rooms survive.
//!
//! Each agent has its own endpoint, `/a2a/<owner>/<name>`, with its card at
//! `/a2a/<owner>/<name>/.well-known/agent-card.json`. In front of the endpoint, [`gate`]
//! authenticates first (so a missing agent and an invisible one look alike), finds the
//! agent the caller may see, caps the body (1 MiB, sent within 10 s), drops any
//! `x-roundtable-*` header the client sent and sets its own, turns a rate limit into
//! HTTP 429, and keeps a blocking send's connection alive while its agent works.

pub mod card;
pub mod handler;
pub mod outbound;
pub mod task;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use roundtable_protocol::ErrorCode;
use roundtable_protocol::model::{DirectoryEntry, PrincipalKind};
use tower::ServiceExt as _;

use crate::bearer::{caller_of, refusal_response, required_caller};
use crate::context::HubContext;
use crate::gateway::Gateway;
use crate::http_reply::{base_url, json_error};
use crate::listener::Peer;
use roundtable_engine::{Caller, Via};

/// The largest request body taken (a message's text is at most 16 KiB; parts and
/// JSON-RPC around it fit many times).
pub const MAX_BODY: usize = 1024 * 1024;

/// Headers the gate sets for the handler; any a client sends are dropped first.
pub(crate) const PRINCIPAL: &str = "x-roundtable-principal";
pub(crate) const PRINCIPAL_KIND: &str = "x-roundtable-principal-kind";
pub(crate) const PRINCIPAL_HANDLE: &str = "x-roundtable-principal-handle";
pub(crate) const TARGET: &str = "x-roundtable-target";
pub(crate) const TARGET_HANDLE: &str = "x-roundtable-target-handle";

/// How long a blocking `SendMessage` (JSON-RPC) may wait in silence before the gate sends
/// its headers and a first byte of whitespace, and how often it sends one more while the
/// task goes on.
/// Why: an answer is not ready until the agent has worked, which can take longer than a
/// client's read timeout (httpx, which the official Python client uses, gives up after a
/// read timeout with no bytes at all). JSON allows whitespace before a value, so the
/// answer is the same JSON-RPC or JSON body as ever, after a few spaces; a streaming send
/// keeps its connection alive the same way with SSE comments.
const KEEP_ALIVE: Duration = Duration::from_secs(2);

tokio::task_local! {
    /// Set by the handler when the hub answered `rate_limited`: the gate then answers 429
    /// with this `Retry-After`, as A2A wants, instead of an error inside the JSON-RPC body.
    static RETRY_AFTER: Cell<Option<Duration>>;
    /// Told by the handler when a blocking send has been stored and now waits for the
    /// task to end (nothing left that could answer with another status than 200).
    static WAITING: Arc<tokio::sync::Notify>;
    /// The closes of principals' connections, listened to from before the gate checked the
    /// token: a stream the handler opens ends on a revocation made at any moment after.
    static CLOSES: std::cell::RefCell<Option<tokio::sync::broadcast::Receiver<crate::dispatch::PrincipalClosed>>>;
}

/// The gate's listener of closes, for a stream (once; `None` outside a gated request).
pub(crate) fn take_closes()
-> Option<tokio::sync::broadcast::Receiver<crate::dispatch::PrincipalClosed>> {
    CLOSES
        .try_with(|closes| closes.borrow_mut().take())
        .ok()
        .flatten()
}

/// Tells the gate that a blocking send now waits for its task to end (outside a gated
/// request, nothing happens).
pub(crate) fn note_waiting() {
    let _ = WAITING.try_with(|waiting| waiting.notify_one());
}

/// Notes a rate limit for the gate (outside a gated request, nothing happens).
pub(crate) fn note_rate_limit(retry_after_ms: u64) {
    let _ = RETRY_AFTER.try_with(|cell| cell.set(Some(Duration::from_millis(retry_after_ms))));
}

/// What the gateway's routes share.
#[derive(Debug)]
pub struct A2aState {
    pub gateway: Gateway,
    /// The crate's JSON-RPC and HTTP+JSON routes, served under each agent's path.
    endpoint: Router,
}

/// The A2A routes, to merge into the hub's router.
pub fn router(context: Arc<HubContext>) -> Router {
    let gateway = Gateway::new(context, Via::A2a);
    let handler = Arc::new(handler::RoomTasks::new(gateway.clone()));
    let endpoint = a2a_server::jsonrpc::jsonrpc_router(handler.clone())
        .merge(a2a_server::rest::rest_router(handler));
    let state = Arc::new(A2aState { gateway, endpoint });
    Router::new()
        .route("/a2a/agents", axum::routing::get(registry))
        .route("/a2a/{owner}/{name}", axum::routing::any(agent))
        .route("/a2a/{owner}/{name}/{*rest}", axum::routing::any(agent))
        .route("/a2a/{owner}", axum::routing::any(not_found))
        .with_state(state)
}

/// Everything under `/a2a/<owner>/<name>`: the card, or the endpoint behind the [`gate`].
/// The endpoint's routes are served as their own router, on the path after the agent's
/// (`/`, `/message:send`, `/tasks/…`), so they see none of the agent's path parameters.
async fn agent(State(state): State<Arc<A2aState>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let rest = path
        .strip_prefix("/a2a/")
        .and_then(|rest| rest.splitn(3, '/').nth(2))
        .map(|rest| format!("/{rest}"))
        .unwrap_or_else(|| "/".to_owned());
    if rest == WELL_KNOWN_CARD {
        return agent_card(&state, &path, request).await;
    }
    let response = gate(&state, &path, &rest, request).await;
    let metrics = &state.gateway.context().metrics;
    if response.extensions().get::<PastTheGate>().is_some() {
        metrics.a2a_requests.fetch_add(1, Ordering::Relaxed);
    } else {
        metrics.a2a_turned_away.fetch_add(1, Ordering::Relaxed);
    }
    response
}

/// Marks a response that came from the endpoint, not from the gate's refusals.
#[derive(Debug, Clone, Copy)]
struct PastTheGate;

/// The most cards `/a2a/agents` gives at once, and by default.
const REGISTRY_MAX: usize = 200;
const REGISTRY_DEFAULT: usize = 50;

/// `GET /a2a/agents?query=&limit=`: the cards of the agents the caller may see (anonymous:
/// public ones), by handle, matching the query as the directory matches it. A2A defines no
/// registry API; this one answers `{"agents": [card, …]}`.
async fn registry(
    State(state): State<Arc<A2aState>>,
    axum::extract::Query(params): axum::extract::Query<std::collections::HashMap<String, String>>,
    request: Request,
) -> Response {
    let headers = request.headers();
    let peer = request.extensions().get::<Arc<Peer>>().cloned();
    let caller = match caller_of(&state.gateway, headers, peer.as_ref()).await {
        Ok(caller) => caller.map(|(caller, _)| caller),
        Err(response) => return response,
    };
    let limit = params
        .get("limit")
        .and_then(|limit| limit.parse::<usize>().ok())
        .unwrap_or(REGISTRY_DEFAULT)
        .clamp(1, REGISTRY_MAX);
    let query = params
        .get("query")
        .map(|query| query.trim().to_lowercase())
        .filter(|query| !query.is_empty());
    let found = match state
        .gateway
        .visible_agents(caller.as_deref(), query, limit)
        .await
    {
        Ok(found) => found,
        Err(refusal) => return refusal_response(&refusal),
    };
    let origin = card::Origin {
        base_url: base_url(state.gateway.context(), headers),
        organization: organization(state.gateway.context(), headers),
    };
    let cards: Vec<serde_json::Value> = found
        .iter()
        .map(|agent| {
            serde_json::from_str(&card::agent_card(agent, &origin).json)
                .unwrap_or(serde_json::Value::Null)
        })
        .collect();
    let cache = if caller.is_some() {
        "private, max-age=60"
    } else {
        "public, max-age=60"
    };
    let mut response = axum::Json(serde_json::json!({ "agents": cards })).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Authorization"));
    response
}

/// Where each agent's card is, under its path.
const WELL_KNOWN_CARD: &str = "/.well-known/agent-card.json";

/// `/a2a/<user>`: only agents have endpoints.
async fn not_found() -> Response {
    no_such_agent()
}

/// The same answer for an agent that does not exist and one the caller may not see.
fn no_such_agent() -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        "no agent here: check the owner and name, and that it is visible to you".into(),
    )
}

/// The handle an `/a2a/<owner>/<name>…` path names.
fn handle_in(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/a2a/")?;
    let mut segments = rest.splitn(3, '/');
    let owner = segments.next()?;
    let name = segments.next()?;
    Some(format!("{owner}/{name}"))
}

/// The agent a path names, if the viewer may see it (anonymous: public agents only).
async fn visible_agent(
    state: &A2aState,
    viewer: Option<&Caller>,
    path: &str,
) -> Result<DirectoryEntry, Response> {
    let Some(handle) = handle_in(path) else {
        return Err(no_such_agent());
    };
    match state.gateway.visible_principal(viewer, &handle).await {
        Ok(Some(entry)) if entry.kind == PrincipalKind::Agent => Ok(entry),
        Ok(_) => Err(no_such_agent()),
        Err(refusal) => Err(refusal_response(&refusal)),
    }
}

/// In front of an agent's endpoint: authenticate, find the agent, cap the body (its size
/// and the time it takes to arrive), set the headers the handler trusts, and answer a rate
/// limit with 429.
async fn gate(state: &A2aState, path: &str, rest: &str, request: Request) -> Response {
    let closes = state.gateway.context().dispatch.watch_closes();
    let peer = request.extensions().get::<Arc<Peer>>().cloned();
    let (caller, principal) = match required_caller(&state.gateway, request.headers(), peer).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let target = match visible_agent(state, Some(&caller), path).await {
        Ok(target) => target,
        Err(response) => return response,
    };
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if declared.is_some_and(|length| length > MAX_BODY) {
        return too_large();
    }
    let bytes = match crate::http_reply::read_body(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(crate::http_reply::BodyUnread::TooLarge) => return too_large(),
        Err(crate::http_reply::BodyUnread::TooSlow) => return crate::http_reply::body_too_slow(),
    };
    // A new request for the endpoint: the path after the agent's, the client's headers
    // but its own x-roundtable-* ones, and the gate's.
    let uri = match parts.uri.query() {
        Some(query) => format!("{rest}?{query}"),
        None => rest.to_owned(),
    };
    let mut inner = Request::new(Body::from(bytes));
    *inner.method_mut() = parts.method;
    *inner.version_mut() = parts.version;
    *inner.uri_mut() = match uri.parse() {
        Ok(uri) => uri,
        Err(_) => return no_such_agent(),
    };
    let headers = inner.headers_mut();
    for (name, value) in &parts.headers {
        if !name.as_str().starts_with("x-roundtable-") {
            headers.append(name.clone(), value.clone());
        }
    }
    let principal_kind = match caller.kind {
        PrincipalKind::User => "user",
        PrincipalKind::Agent => "agent",
    };
    for (name, value) in [
        (PRINCIPAL, caller.id.as_str()),
        (PRINCIPAL_KIND, principal_kind),
        (PRINCIPAL_HANDLE, principal.handle.as_str()),
        (TARGET, target.id.as_str()),
        (TARGET_HANDLE, target.handle.as_str()),
    ] {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    let endpoint = state.endpoint.clone();
    let waiting = Arc::new(tokio::sync::Notify::new());
    let mut answered: Answered = Box::pin(WAITING.scope(
        waiting.clone(),
        RETRY_AFTER.scope(Cell::new(None), async move {
            let response = CLOSES
                .scope(
                    std::cell::RefCell::new(Some(closes)),
                    endpoint.oneshot(inner),
                )
                .await;
            let response = match response {
                Ok(response) => response,
                Err(never) => match never {},
            };
            (response, RETRY_AFTER.with(Cell::get))
        }),
    ));
    // JSON-RPC answers its errors inside a 200 as well, so a 200 sent early says nothing
    // wrong whatever comes; the HTTP+JSON binding answers an error with its status.
    let keeps_alive = rest == "/";
    let (response, retry_after) = tokio::select! {
        done = &mut answered => done,
        () = waiting.notified(), if keeps_alive => match tokio::time::timeout(KEEP_ALIVE, &mut answered).await {
            Ok(done) => done,
            Err(_) => {
                let mut response = kept_alive(answered);
                response.extensions_mut().insert(PastTheGate);
                return response;
            }
        },
    };
    let mut response = match retry_after {
        Some(retry_after) => crate::http_reply::too_many(
            retry_after,
            "too many writes; wait for Retry-After and send again with the same messageId".into(),
        ),
        None => response,
    };
    response.extensions_mut().insert(PastTheGate);
    response
}

/// The endpoint's answer to a request, with the `Retry-After` a rate limit noted.
type Answered =
    std::pin::Pin<Box<dyn std::future::Future<Output = (Response, Option<Duration>)> + Send>>;

/// A 200 whose body is a byte of whitespace every [`KEEP_ALIVE`] until the endpoint answers,
/// then the answer's body (see [`KEEP_ALIVE`]). The endpoint's work is the body's: a client
/// that goes away drops it, and the wait with it.
fn kept_alive(answered: Answered) -> Response {
    let ticks = tokio::time::interval_at(tokio::time::Instant::now(), KEEP_ALIVE);
    let body = futures_util::stream::unfold(Some((answered, ticks)), |state| async move {
        let (mut answered, mut ticks) = state?;
        tokio::select! {
            (response, _) = &mut answered => {
                // A rate limit cannot come this late (the message is stored); the
                // answer's body is the JSON it always is.
                let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                    .await
                    .map_err(std::io::Error::other);
                Some((bytes, None))
            }
            _ = ticks.tick() => {
                Some((Ok(axum::body::Bytes::from_static(b" ")), Some((answered, ticks))))
            }
        }
    });
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

fn too_large() -> Response {
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::TooLarge,
        format!("the request body is over {MAX_BODY} bytes; send less"),
    )
}

/// `GET /a2a/<owner>/<name>/.well-known/agent-card.json`: anyone may read a public agent's
/// card; a contacts-only or private agent's card needs a token that may see it. Missing
/// and invisible agents are the same 404.
async fn agent_card(state: &A2aState, path: &str, request: Request) -> Response {
    if request.method() != axum::http::Method::GET && request.method() != axum::http::Method::HEAD {
        return json_error(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::BadFrame,
            "an agent card is read with GET".into(),
        );
    }
    let headers = request.headers();
    let peer = request.extensions().get::<Arc<Peer>>().cloned();
    let caller = match caller_of(&state.gateway, headers, peer.as_ref()).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let caller = caller.map(|(caller, _)| caller);
    let agent = match visible_agent(state, caller.as_deref(), path).await {
        Ok(agent) => agent,
        Err(response) => return response,
    };
    let origin = card::Origin {
        base_url: base_url(state.gateway.context(), headers),
        organization: organization(state.gateway.context(), headers),
    };
    let served = card::agent_card(&agent, &origin);
    let cache = if caller.is_some() {
        "private, max-age=60"
    } else {
        "public, max-age=300"
    };
    let not_modified = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| tag.trim() == served.etag || tag.trim() == "*");
    let mut response = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, "application/json")],
            served.json.clone(),
        )
            .into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(header::VARY, HeaderValue::from_static("Authorization"));
    if let Ok(etag) = HeaderValue::from_str(&served.etag) {
        headers.insert(header::ETAG, etag);
    }
    if caller.is_none() {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
    }
    response
}

/// Who runs the hub, for a card's provider: the operator's name when configured, else the
/// hub's host name.
fn organization(context: &HubContext, headers: &HeaderMap) -> String {
    context.config.operator_name.clone().unwrap_or_else(|| {
        let base = base_url(context, headers);
        let host = base
            .split_once("://")
            .map_or(base.as_str(), |(_, host)| host);
        host.rsplit_once(':')
            .map_or(host, |(name, _)| name)
            .to_owned()
    })
}
