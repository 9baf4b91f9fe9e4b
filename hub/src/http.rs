//! HTTP on the hub's one listener: the WebSocket endpoint, signup, health, discovery and
//! metrics. Every request, to any path, first passes the [`BrowserPolicy`] (Host and
//! Origin), so no route is reachable from a web page; signup also insists on a JSON content
//! type, which a page cannot send across origins without the `Origin` that gives it away.

use std::sync::Arc;

use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use roundtable_protocol::client::SignupRequest;
use roundtable_protocol::server::{AuditHead, Health, SignupOk, WellKnown};
use roundtable_protocol::{ErrorCode, PROTO_VERSION, WS_PATH};
use tokio::sync::oneshot;

use crate::admission::Turned;
use crate::browsers::BrowserPolicy;
use crate::context::HubContext;
use crate::http_reply::{BodyUnread, body_too_slow, json_error, read_body, too_many};
use crate::listener::Peer;
use crate::session;
use crate::websocket::{self, PreAuthLimit};
use crate::writer::Request;
use roundtable_engine::Refusal;

/// The largest signup body read: a handle, a name and an invite code fit many times over.
const SIGNUP_BODY: usize = 16 * 1024;

/// The hub's routes; `browsers` guards all of them, unknown paths included.
pub fn router(
    context: Arc<HubContext>,
    browsers: Arc<BrowserPolicy>,
    mcp_streams: crate::mcp::streams::McpStreams,
) -> Router {
    Router::new()
        .route(WS_PATH, get(websocket))
        .route("/v1/signup", post(signup))
        .route("/v1/health", get(health))
        .route("/.well-known/roundtable.json", get(well_known))
        .route("/metrics", get(metrics))
        .with_state(context.clone())
        .merge(crate::a2a::router(context.clone()))
        .merge(crate::mcp::router(context, mcp_streams))
        .layer(middleware::from_fn_with_state(browsers, keep_browsers_out))
}

/// Answers a request the [`BrowserPolicy`] refuses (400, 421 or 403) before any route, so
/// a refused WebSocket upgrade never opens a socket.
async fn keep_browsers_out(
    State(browsers): State<Arc<BrowserPolicy>>,
    request: axum::extract::Request,
    next: Next,
) -> Response {
    match browsers.admit(request.headers(), request.uri()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::debug!(path = %request.uri().path(), %refusal, "request refused");
            json_error(refusal.status(), refusal.code(), refusal.to_string())
        }
    }
}

/// The WebSocket upgrade. It counts as a socket waiting to authenticate from here until
/// its `auth` is answered; past those limits, or from an address that failed to
/// authenticate too often, it is refused before the upgrade (503 or 429).
async fn websocket(
    State(context): State<Arc<HubContext>>,
    Extension(peer): Extension<Arc<Peer>>,
    mut request: axum::extract::Request,
) -> Response {
    let switching = match websocket::accept(request.headers()) {
        Ok(switching) => switching,
        Err((status, msg)) => return json_error(status, ErrorCode::BadFrame, msg.into()),
    };
    let address = peer.permit.address();
    let unauthenticated = match context.admission.upgrade(address, Instant::now()) {
        Ok(permit) => permit,
        Err(Turned::FailedAuths { retry_after }) => {
            return too_many(
                retry_after,
                format!(
                    "too many failed authentications from {address}; check the token and \
                     retry in {} s",
                    retry_after.as_secs().max(1)
                ),
            );
        }
        Err(_) => {
            return json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Busy,
                "too many connections are waiting to authenticate; retry with backoff".into(),
            );
        }
    };
    let upgrading = hyper::upgrade::on(&mut request);
    let max_frame = context.config.max_frame;
    tokio::spawn(async move {
        let upgraded = match upgrading.await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!(%error, "the WebSocket upgrade failed");
                return;
            }
        };
        let pre_auth = Arc::new(PreAuthLimit::default());
        if let Some(socket) = websocket::open(upgraded, max_frame, pre_auth.clone()).await {
            let arrival = session::Arrival {
                peer,
                pre_auth,
                unauthenticated,
            };
            session::run(socket, context, arrival).await;
        }
    });
    switching
}

fn error_response(refusal: &Refusal) -> Response {
    let status = StatusCode::from_u16(refusal.code.http_status())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_error(status, refusal.code, refusal.msg.clone())
}

/// `Ok` when the request declares a JSON body: `application/json`, parameters such as
/// `; charset=utf-8` allowed. Otherwise the message for a 415.
fn declares_json(headers: &HeaderMap) -> Result<(), String> {
    let mut content_types = headers.get_all(header::CONTENT_TYPE).iter();
    let sent = match (content_types.next(), content_types.next()) {
        (None, _) => "no Content-Type".to_owned(),
        (Some(_), Some(_)) => "several Content-Type headers".to_owned(),
        (Some(content_type), None) => {
            let content_type = String::from_utf8_lossy(content_type.as_bytes());
            let media_type = content_type.split(';').next().unwrap_or_default().trim();
            if media_type.eq_ignore_ascii_case("application/json") {
                return Ok(());
            }
            format!("Content-Type {content_type:?}")
        }
    };
    Err(format!(
        "POST /v1/signup takes a JSON body: send the header Content-Type: application/json \
         (this request sent {sent})"
    ))
}

async fn signup(
    State(context): State<Arc<HubContext>>,
    Extension(peer): Extension<Arc<Peer>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Err(msg) = declares_json(&headers) {
        return json_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, ErrorCode::BadFrame, msg);
    }
    if let Some(signups) = &context.signups {
        let address = peer.permit.address();
        let taken = signups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .try_take(address, Instant::now());
        if let Err(retry_after) = taken {
            return too_many(
                retry_after,
                format!(
                    "too many signups from {address}; retry in {} s",
                    retry_after.as_secs().max(1)
                ),
            );
        }
    }
    let body = match read_body(body, SIGNUP_BODY).await {
        Ok(body) => body,
        Err(BodyUnread::TooLarge) => {
            return error_response(&Refusal::new(
                ErrorCode::TooLarge,
                format!("the signup body must be at most {SIGNUP_BODY} bytes of JSON"),
            ));
        }
        Err(BodyUnread::TooSlow) => return body_too_slow(),
    };
    let request: SignupRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            return error_response(&Refusal::new(
                ErrorCode::BadFrame,
                format!(
                    "the body must be JSON {{\"handle\", \"name\", \"discoverable\"?, \"invite\"?}}: {error}"
                ),
            ));
        }
    };
    if let Err(refused) = request.check_strings() {
        return error_response(&Refusal::new(
            ErrorCode::BadFrame,
            format!("invalid signup: {refused}"),
        ));
    }
    let (reply, answer) = oneshot::channel();
    if !context.writer.submit(Request::Signup { request, reply }) {
        return error_response(&Refusal::new(ErrorCode::Busy, "the hub is stopping"));
    }
    match answer.await {
        Ok(Ok(outcome)) => axum::Json(SignupOk {
            principal: outcome.principal,
            token: outcome.token,
        })
        .into_response(),
        Ok(Err(refusal)) => error_response(&refusal),
        Err(_) => error_response(&Refusal::new(ErrorCode::Busy, "the hub is stopping")),
    }
}

/// 200 while the writer and the flush stage run; 503 with `ok: false` once either has
/// stopped (nothing more would be written or released).
async fn health(State(context): State<Arc<HubContext>>) -> Response {
    let running = context.threads.running();
    let status = if running {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let health = Health {
        ok: running,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        epoch: context.epoch.clone(),
        audit_head: if running {
            durable_audit_head(&context).await
        } else {
            None
        },
    };
    (status, axum::Json(health)).into_response()
}

/// The audit log's last durable entry, for `GET /v1/health` (amendment 9): read from the
/// store once every commit it could be part of is flushed, so a head shown here survives a
/// crash. Absent when the read fails or takes over two seconds (health answers anyway).
async fn durable_audit_head(context: &HubContext) -> Option<AuditHead> {
    let reader = context.reader.clone();
    let read = tokio::task::spawn_blocking(move || reader.audit_head());
    match tokio::time::timeout(std::time::Duration::from_secs(2), read).await {
        Ok(Ok(Ok(Some((n, hash))))) => Some(AuditHead { n, hash }),
        Ok(Ok(Err(error))) => {
            tracing::warn!(%error, "cannot read the audit log's head");
            None
        }
        _ => None,
    }
}

async fn well_known(State(context): State<Arc<HubContext>>) -> Response {
    axum::Json(WellKnown {
        hub: context.hub_id.clone(),
        proto: vec![PROTO_VERSION],
        signup: context.config.signup.as_str().to_owned(),
    })
    .into_response()
}

async fn metrics(State(context): State<Arc<HubContext>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        context.metrics.render(),
    )
        .into_response()
}
