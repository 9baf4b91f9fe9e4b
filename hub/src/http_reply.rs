//! How the hub's HTTP routes answer and read: the protocol's error body, 429 with
//! `Retry-After`, a body read whole within its time, the URL the hub is reached at.
//!
//! Why a module of its own: every HTTP edge (signup, A2A, `/mcp`, bearer tokens) answers
//! alike, and the router that mounts them must not be what they import to do so.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use roundtable_protocol::ErrorCode;
use roundtable_protocol::server::HttpError;

use crate::context::HubContext;

/// Time a client has to send a request's body once it is let in (signup, A2A, `/mcp`): a
/// body that drips in would otherwise hold its connection slot and its task for as long as
/// the client likes.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request's body was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyUnread {
    /// Past the size the route takes.
    TooLarge,
    /// Not all there within [`BODY_TIMEOUT`].
    TooSlow,
}

/// A request's body, read whole: at most `max` bytes, within [`BODY_TIMEOUT`].
pub(crate) async fn read_body(body: Body, max: usize) -> Result<axum::body::Bytes, BodyUnread> {
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, max)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(BodyUnread::TooLarge),
        Err(_) => Err(BodyUnread::TooSlow),
    }
}

/// The answer to a body that took too long: 408 `bad_frame`.
pub(crate) fn body_too_slow() -> Response {
    json_error(
        StatusCode::REQUEST_TIMEOUT,
        ErrorCode::BadFrame,
        format!(
            "the body took over {} s to arrive; send it at once",
            BODY_TIMEOUT.as_secs()
        ),
    )
}

/// 429 with `Retry-After` (whole seconds, rounded up) and the protocol's error body.
pub(crate) fn too_many(retry_after: Duration, msg: String) -> Response {
    let mut response = json_error(StatusCode::TOO_MANY_REQUESTS, ErrorCode::RateLimited, msg);
    let seconds = retry_after.as_millis().div_ceil(1000).max(1);
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_str(&seconds.to_string()).expect("digits are a valid header value"),
    );
    response
}

/// The protocol's HTTP error body, `{"code","msg"}`, with a status of the caller's choosing
/// (415, 421 have no code of their own).
pub(crate) fn json_error(status: StatusCode, code: ErrorCode, msg: String) -> Response {
    (status, axum::Json(HttpError { code, msg })).into_response()
}

/// The URL clients reach the hub at: its configured public address, else the `Host` the
/// request came with (already checked against the names the hub answers to).
pub(crate) fn base_url(context: &HubContext, headers: &HeaderMap) -> String {
    let scheme = if context.config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let host = context
        .config
        .public_address
        .clone()
        .filter(|address| !address.starts_with("unix:"))
        .or_else(|| {
            headers
                .get(header::HOST)
                .and_then(|host| host.to_str().ok())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "127.0.0.1".to_owned());
    format!("{scheme}://{host}")
}
