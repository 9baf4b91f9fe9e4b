//! The hub's listeners: accepts TCP connections (and, for the app's own hub, connections on
//! its local socket: a Unix socket in its data directory, a named pipe on Windows), counts
//! them ([`Admission`]: by address, or by local user on the socket), completes TLS handshakes, and serves HTTP/1.1 on each with
//! hyper, with a timer.
//!
//! Why not `axum::serve`: it runs hyper without a timer, so a client that sends half a
//! request line is held forever, and a thousand such clients hold a thousand sockets. Here
//! every connection has [`ConnectionLimits::header_timeout`] to send a request's headers,
//! which also closes an HTTP connection idle between requests; the counts turn away
//! sockets past the limits before they cost more than an `accept`. A WebSocket upgrade
//! takes the socket over (see [`crate::websocket`]) and keeps its count until it closes.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tower::ServiceExt as _;
use tracing::{debug, warn};

use roundtable_platform::local_socket::{LocalListener, LocalStream, PeerUser};

use crate::admission::{Admission, ClientAddress, ConnectionPermit};
use crate::metrics::Metrics;

/// How long a client has to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// After shutdown, how long open HTTP requests may take to finish.
const DRAIN: Duration = Duration::from_secs(5);

/// An accepted connection's byte stream, with or without TLS: one type, so a WebSocket
/// upgrade can take it back from hyper ([`hyper::upgrade::Upgraded::downcast`]).
#[derive(Debug)]
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    Local(LocalStream),
}

/// Where the hub accepts connections: a TCP port, its local socket, or both.
#[derive(Debug, Default)]
pub struct Listeners {
    pub tcp: Option<TcpListener>,
    pub local: Option<LocalListener>,
}

/// A connection just accepted, before TLS.
enum Accepted {
    Tcp(TcpStream, SocketAddr),
    Local(LocalStream, PeerUser),
}

impl Listeners {
    async fn accept(&self) -> io::Result<Accepted> {
        async fn tcp(listener: &Option<TcpListener>) -> io::Result<Accepted> {
            match listener {
                Some(listener) => listener
                    .accept()
                    .await
                    .map(|(stream, addr)| Accepted::Tcp(stream, addr)),
                None => std::future::pending().await,
            }
        }
        let local = async {
            match &self.local {
                Some(listener) => listener
                    .accept()
                    .await
                    .map(|(stream, peer)| Accepted::Local(stream, peer)),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            accepted = tcp(&self.tcp) => accepted,
            accepted = local => accepted,
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Conn::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
            Conn::Local(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Conn::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
            Conn::Local(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Conn::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
            Conn::Local(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Conn::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
            Conn::Local(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Conn::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
            Conn::Local(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(stream) => stream.is_write_vectored(),
            Conn::Tls(stream) => stream.is_write_vectored(),
            Conn::Local(stream) => stream.is_write_vectored(),
        }
    }
}

/// What every request on one connection knows about it (a request extension): the count it
/// holds, which a WebSocket takes over.
#[derive(Debug)]
pub struct Peer {
    pub permit: ConnectionPermit,
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting, lets
/// open requests finish (at most [`DRAIN`]) and returns. WebSockets are not waited for:
/// the hub closes them itself (1012).
pub async fn serve(
    listeners: Listeners,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: Router,
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let tls = tls.map(TlsAcceptor::from);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(admission.limits().header_timeout)
        .keep_alive(true);
    let http = Arc::new(http);
    let (stopping, stop) = tokio::sync::watch::channel(false);
    // One clone per connection still speaking HTTP (a WebSocket lets go of it).
    let serving = Arc::new(());
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listeners.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, most likely: give connections time to close.
                    warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let address = match &accepted {
            Accepted::Tcp(stream, addr) => {
                // Frames are small and latency matters: never hold them back for Nagle.
                if let Err(error) = stream.set_nodelay(true) {
                    debug!(%error, "cannot set TCP_NODELAY");
                }
                ClientAddress::of(addr.ip())
            }
            Accepted::Local(_, peer) => ClientAddress::LocalUser(peer.0),
        };
        let permit = match admission.connect(address) {
            Ok(permit) => permit,
            Err(turned) => {
                metrics
                    .connections_turned_away
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                debug!(%address, ?turned, "connection turned away");
                continue;
            }
        };
        let peer = Arc::new(Peer { permit });
        let serving = serving.clone();
        let connection = serve_connection(
            accepted,
            peer,
            tls.clone(),
            http.clone(),
            router.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            connection.await;
            drop(serving);
        });
    }
    drop(listeners);
    let _ = stopping.send(true);
    let deadline = tokio::time::Instant::now() + DRAIN;
    while Arc::strong_count(&serving) > 1 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One connection: the TLS handshake, then HTTP until the client leaves, falls silent,
/// upgrades, or the hub stops.
async fn serve_connection(
    accepted: Accepted,
    peer: Arc<Peer>,
    tls: Option<TlsAcceptor>,
    http: Arc<hyper::server::conn::http1::Builder>,
    router: Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let conn = match (accepted, tls) {
        // The local socket needs no TLS: only its user reaches it.
        (Accepted::Local(stream, _), _) => Conn::Local(stream),
        (Accepted::Tcp(stream, _), None) => Conn::Plain(stream),
        (Accepted::Tcp(stream, addr), Some(acceptor)) => {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => Conn::Tls(Box::new(stream)),
                Ok(Err(error)) => {
                    debug!(peer = %addr, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    debug!(peer = %addr, "TLS handshake timed out");
                    return;
                }
            }
        }
    };
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(peer.clone());
        router.clone().oneshot(request)
    });
    let connection = http
        .serve_connection(TokioIo::new(conn), service)
        .with_upgrades();
    tokio::pin!(connection);
    let stopping = async move {
        // Either the hub stops, or the listener (and the sender with it) is gone.
        let _ = stop.wait_for(|stopping| *stopping).await;
    };
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = stopping => {
            connection.as_mut().graceful_shutdown();
            match tokio::time::timeout(DRAIN, connection.as_mut()).await {
                Ok(result) => result,
                Err(_) => return,
            }
        }
    };
    if let Err(error) = result {
        debug!(%error, "HTTP connection ended");
    }
}
