//! The byte stream to a hub: TCP, TCP with rustls, or the embedded hub's local socket (a
//! Unix socket; on Windows, a named pipe). One type, so the WebSocket link and the few HTTP
//! requests open it the same way.
//!
//! Why a local socket: the app's own hub listens in its data directory, which only the
//! person may enter (on Windows, on a pipe only the person may open, whose server is checked
//! to run as them); a loopback port can be taken by any local user while the hub is down,
//! and a client would send its token to whatever answered there.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::hub_address::HubAddress;

/// An open connection to a hub.
#[derive(Debug)]
pub enum HubStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Local(roundtable_platform::local_socket::LocalStream),
}

/// Why a hub could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot reach the hub at {address}: {source}")]
    Unreachable { address: String, source: io::Error },
    #[error("TLS with the hub failed: {0}")]
    Tls(String),
}

/// Connects to `hub` (TLS when its address says so, with `tls`).
pub async fn open(
    hub: &HubAddress,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<HubStream, OpenError> {
    let unreachable = |source| OpenError::Unreachable {
        address: hub.authority.clone(),
        source,
    };
    if let Some(path) = &hub.unix {
        return roundtable_platform::local_socket::LocalStream::connect(path)
            .await
            .map(HubStream::Local)
            .map_err(unreachable);
    }
    let stream = TcpStream::connect(&hub.authority)
        .await
        .map_err(unreachable)?;
    // Frames are small and latency matters: never hold them back for Nagle.
    let _ = stream.set_nodelay(true);
    if !hub.tls {
        return Ok(HubStream::Plain(stream));
    }
    let config = tls.ok_or_else(|| OpenError::Tls("no TLS configuration".into()))?;
    let name = rustls_pki_types::ServerName::try_from(hub.host.clone())
        .map_err(|error| OpenError::Tls(error.to_string()))?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, stream)
        .await
        .map_err(|error| OpenError::Tls(error.to_string()))?;
    Ok(HubStream::Tls(Box::new(stream)))
}

macro_rules! each {
    ($self:expr, $stream:ident => $body:expr) => {
        match $self.get_mut() {
            HubStream::Plain($stream) => {
                let $stream = Pin::new($stream);
                $body
            }
            HubStream::Tls($stream) => {
                let $stream = Pin::new($stream.as_mut());
                $body
            }
            HubStream::Local($stream) => {
                let $stream = Pin::new($stream);
                $body
            }
        }
    };
}

impl AsyncRead for HubStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, stream => stream.poll_read(cx, buf))
    }
}

impl AsyncWrite for HubStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, stream => stream.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, stream => stream.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, stream => stream.poll_shutdown(cx))
    }
}
