//! HTTP on the hub's one listener: the WebSocket endpoint, signup, health, discovery and
//! metrics.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{State, WebSocketUpgrade};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use roundtable_protocol::client::SignupRequest;
use roundtable_protocol::server::{Health, HttpError, SignupOk, WellKnown};
use roundtable_protocol::{ErrorCode, PROTO_VERSION, WS_PATH};
use tokio::sync::oneshot;

use crate::engine::Refusal;
use crate::session::{self, SessionContext};
use crate::writer::Request;

pub fn router(context: Arc<SessionContext>) -> Router {
    Router::new()
        .route(WS_PATH, get(websocket))
        .route("/v1/signup", post(signup))
        .route("/v1/health", get(health))
        .route("/.well-known/roundtable.json", get(well_known))
        .route("/metrics", get(metrics))
        .with_state(context)
}

async fn websocket(
    State(context): State<Arc<SessionContext>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let max_frame = context.config.max_frame;
    // A small read buffer: tungstenite zero-fills it on every read, and frames are small.
    upgrade
        .max_frame_size(max_frame)
        .max_message_size(max_frame)
        .read_buffer_size(16 * 1024)
        .on_upgrade(move |socket| session::run(socket, context))
}

fn error_response(refusal: &Refusal) -> Response {
    let status = StatusCode::from_u16(refusal.code.http_status())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = HttpError {
        code: refusal.code,
        msg: refusal.msg.clone(),
    };
    (status, axum::Json(body)).into_response()
}

async fn signup(State(context): State<Arc<SessionContext>>, body: Bytes) -> Response {
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

async fn health(State(context): State<Arc<SessionContext>>) -> Response {
    axum::Json(Health {
        ok: true,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        epoch: context.epoch.clone(),
    })
    .into_response()
}

async fn well_known(State(context): State<Arc<SessionContext>>) -> Response {
    axum::Json(WellKnown {
        hub: context.hub_id.clone(),
        proto: vec![PROTO_VERSION],
        signup: context.config.signup.as_str().to_owned(),
    })
    .into_response()
}

async fn metrics(State(context): State<Arc<SessionContext>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        context.metrics.render(),
    )
        .into_response()
}
