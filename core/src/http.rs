//! The few HTTP requests a client makes (signup, health): HTTP/1.1 over plain TCP, rustls
//! or a Unix socket, one request per connection. A full HTTP client would be a large dependency for
//! two endpoints.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::hub_address::HubAddress;

/// A response: status and body.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot reach the hub at {address}: {source}")]
    Unreachable {
        address: String,
        source: std::io::Error,
    },
    #[error("the hub at {0} did not answer in time")]
    Timeout(String),
    #[error("TLS with the hub failed: {0}")]
    Tls(String),
    #[error("the hub's answer is not HTTP: {0}")]
    Malformed(String),
}

const TIMEOUT: Duration = Duration::from_secs(15);

/// Sends one request; `body` is JSON.
pub async fn request(
    hub: &HubAddress,
    tls: Option<Arc<rustls::ClientConfig>>,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<Response, HttpError> {
    let exchange = async {
        let stream = crate::transport::open(hub, tls)
            .await
            .map_err(|error| match error {
                crate::transport::OpenError::Unreachable { address, source } => {
                    HttpError::Unreachable { address, source }
                }
                crate::transport::OpenError::Tls(detail) => HttpError::Tls(detail),
            })?;
        exchange(stream, hub, method, path, body).await
    };
    tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| HttpError::Timeout(hub.authority.clone()))?
}

async fn exchange(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    hub: &HubAddress,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<Response, HttpError> {
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        hub.host_header(),
        body.len()
    );
    let io = |source| HttpError::Unreachable {
        address: hub.authority.clone(),
        source,
    };
    stream.write_all(head.as_bytes()).await.map_err(io)?;
    stream.write_all(body.as_bytes()).await.map_err(io)?;
    let mut raw = Vec::new();
    if let Err(error) = stream.read_to_end(&mut raw).await {
        // A TLS peer closing without close_notify has still sent the whole response.
        if raw.is_empty() {
            return Err(io(error));
        }
    }
    parse(&raw)
}

/// Parses a whole HTTP/1.1 response (Content-Length or chunked).
pub fn parse(raw: &[u8]) -> Result<Response, HttpError> {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| HttpError::Malformed("no header end".into()))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| {
            HttpError::Malformed(format!("bad status line {:?}", head.lines().next()))
        })?;
    let chunked = head.lines().any(|line| {
        line.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_owned()
    };
    Ok(Response { status, body })
}

fn dechunk(mut rest: &str) -> Result<String, HttpError> {
    let mut body = String::new();
    loop {
        let (size, after) = rest
            .split_once("\r\n")
            .ok_or_else(|| HttpError::Malformed("a chunk without a size line".into()))?;
        let size = usize::from_str_radix(size.trim(), 16)
            .map_err(|_| HttpError::Malformed(format!("a bad chunk size {size:?}")))?;
        if size == 0 {
            return Ok(body);
        }
        let chunk = after
            .get(..size)
            .ok_or_else(|| HttpError::Malformed("a chunk shorter than its size".into()))?;
        body.push_str(chunk);
        rest = after.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_body_framings() {
        let plain = parse(b"HTTP/1.1 409 Conflict\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((plain.status, plain.body.as_str()), (409, "{}"));
        let chunked =
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!((chunked.status, chunked.body.as_str()), (200, "abcde"));
        assert!(parse(b"garbage").is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
    }
}
