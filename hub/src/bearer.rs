//! Bearer tokens on the HTTP gateways (`/a2a/…`, `/mcp`): who a request comes from, and
//! the HTTP answer to each refusal, alike on every gateway.
//!
//! Why one place: a token is taken only from `Authorization` (never a query string, which
//! logs and histories keep), failures count against the address's budget as a WebSocket
//! `auth` does, and a refusal maps to the same status everywhere (401 with
//! `WWW-Authenticate`, 403 for a stopped agent, 429 with `Retry-After`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use roundtable_protocol::ErrorCode;

use crate::gateway::Gateway;
use crate::http_reply::json_error;
use crate::listener::Peer;
use roundtable_engine::records::PrincipalRecord;
use roundtable_engine::{Caller, Refusal};

/// 401 with the scheme to use.
pub(crate) fn unauthorized(msg: &str) -> Response {
    let mut response = json_error(
        StatusCode::UNAUTHORIZED,
        ErrorCode::Unauthorized,
        msg.into(),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"roundtable\""),
    );
    response
}

/// The bearer token of a request: only from `Authorization` (never the query string).
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// Who is calling: authenticated by its token, within the failed-authentication budget of
/// its address; `Err` is the response to give.
pub(crate) async fn caller_of(
    gateway: &Gateway,
    headers: &HeaderMap,
    peer: Option<&Arc<Peer>>,
) -> Result<Option<(Arc<Caller>, PrincipalRecord)>, Response> {
    let Some(token) = bearer(headers) else {
        return Ok(None);
    };
    let admission = &gateway.context().admission;
    let address = peer.map(|peer| peer.permit.address());
    if let Some(address) = address
        && let Err(retry_after) = admission.may_authenticate(address, Instant::now())
    {
        return Err(crate::http_reply::too_many(
            retry_after,
            "too many failed authentications from this address; wait and retry".into(),
        ));
    }
    match gateway.authenticate(token).await {
        Ok(caller) => Ok(Some(caller)),
        Err(refusal) => {
            if refusal.code == ErrorCode::Unauthorized
                && let Some(address) = address
            {
                admission.auth_failed(address, Instant::now());
            }
            Err(refusal_response(&refusal))
        }
    }
}

pub(crate) fn refusal_response(refusal: &Refusal) -> Response {
    match refusal.code {
        ErrorCode::Unauthorized => unauthorized(&refusal.msg),
        // A stopped agent's token: refused until its owner resumes it.
        ErrorCode::Paused => json_error(StatusCode::FORBIDDEN, refusal.code, refusal.msg.clone()),
        ErrorCode::RateLimited => crate::http_reply::too_many(
            Duration::from_millis(refusal.retry_after_ms.unwrap_or(1000)),
            refusal.msg.clone(),
        ),
        _ => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            refusal.code,
            refusal.msg.clone(),
        ),
    }
}

/// The caller of a request that must have one: a missing token is 401 with the scheme to
/// use, as are the refusals of [`caller_of`].
pub(crate) async fn required_caller(
    gateway: &Gateway,
    headers: &HeaderMap,
    peer: Option<Arc<Peer>>,
) -> Result<(Arc<Caller>, PrincipalRecord), Response> {
    match caller_of(gateway, headers, peer.as_ref()).await {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(unauthorized(
            "send the token of a user or agent of this hub: Authorization: Bearer rt_…",
        )),
        Err(response) => Err(response),
    }
}
