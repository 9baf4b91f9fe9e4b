//! One WebSocket connection to the hub: connect, read `hello`, authenticate, then frames
//! in and out. It is owned by the sync engine's task; nothing else touches the socket.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use roundtable_protocol::ClientFrame;
use roundtable_protocol::client::{Auth, ClientInfo};
use roundtable_protocol::model::Principal;
use roundtable_protocol::server::{AuthOk, Hello, ServerFrame};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::hub_address::HubAddress;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the link failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinkError {
    #[error("cannot reach the hub at {0}")]
    Unreachable(String),
    #[error("the hub refused the token: {0}")]
    Unauthorized(String),
    #[error("the token was revoked or rotated: {0}")]
    Revoked(String),
    /// Close 4011, or `err paused` to `auth`: the agent is stopped by its owner. Not
    /// fatal: the token stays valid, and the engine reconnects with its backoff until a
    /// resume lets it in.
    #[error("stopped by its owner until a resume: {0}")]
    Stopped(String),
    #[error("the connection closed ({code:?}): {reason}")]
    Closed { code: Option<u16>, reason: String },
    #[error("the hub sent something unexpected: {0}")]
    Protocol(String),
}

impl LinkError {
    /// Errors retrying cannot fix.
    pub fn is_fatal(&self) -> bool {
        matches!(self, LinkError::Unauthorized(_) | LinkError::Revoked(_))
    }
}

pub struct Link {
    socket: WebSocketStream<crate::transport::HubStream>,
    pub hello: Hello,
    next_id: u64,
    /// When the hub was last heard from (a frame or a ping).
    last_heard: tokio::time::Instant,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("hub", &self.hello.hub)
            .finish()
    }
}

fn closed(frame: Option<tokio_tungstenite::tungstenite::protocol::CloseFrame>) -> LinkError {
    let code = frame.as_ref().map(|frame| u16::from(frame.code));
    let reason = frame
        .map(|frame| frame.reason.to_string())
        .unwrap_or_default();
    match code {
        Some(4001) => LinkError::Unauthorized(reason),
        Some(4010) => LinkError::Revoked(reason),
        Some(4011) => LinkError::Stopped(reason),
        _ => LinkError::Closed { code, reason },
    }
}

impl Link {
    /// Connects and reads `hello`.
    pub async fn connect(
        hub: &HubAddress,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Result<Link, LinkError> {
        let config = WebSocketConfig::default()
            .read_buffer_size(16 * 1024)
            .max_message_size(Some(roundtable_protocol::defaults::MAX_FRAME * 4))
            .max_frame_size(Some(roundtable_protocol::defaults::MAX_FRAME * 4));
        let connect = async {
            let stream = crate::transport::open(hub, tls)
                .await
                .map_err(|error| LinkError::Unreachable(error.to_string()))?;
            tokio_tungstenite::client_async_with_config(hub.ws_url(), stream, Some(config))
                .await
                .map_err(|error| LinkError::Unreachable(format!("{}: {error}", hub.authority)))
        };
        let (socket, _) = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| LinkError::Unreachable(hub.authority.clone()))??;
        let mut link = Link {
            socket,
            hello: Hello::default(),
            next_id: 1,
            last_heard: tokio::time::Instant::now(),
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, link.next()).await {
            Ok(Ok(ServerFrame::Hello(hello))) => {
                if hello.proto != roundtable_protocol::PROTO_VERSION {
                    return Err(LinkError::Protocol(format!(
                        "the hub speaks protocol {}, this client {}",
                        hello.proto,
                        roundtable_protocol::PROTO_VERSION
                    )));
                }
                link.hello = hello;
                Ok(link)
            }
            Ok(Ok(other)) => Err(LinkError::Protocol(format!(
                "expected hello, got {other:?}"
            ))),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(LinkError::Unreachable(hub.authority.clone())),
        }
    }

    /// Authenticates; returns who we are.
    pub async fn auth(&mut self, token: &str, device: &str) -> Result<Principal, LinkError> {
        let id = self.id();
        self.send(&ClientFrame::Auth(Auth {
            id,
            token: token.to_owned(),
            device: device.to_owned(),
            client: ClientInfo {
                name: "roundtable-core".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
        }))
        .await?;
        loop {
            match tokio::time::timeout(CONNECT_TIMEOUT, self.next()).await {
                Err(_) => return Err(LinkError::Protocol("no answer to auth".into())),
                Ok(Err(error)) => return Err(error),
                Ok(Ok(ServerFrame::Ok(ok))) if ok.re == id => {
                    let auth: AuthOk = ok
                        .decode()
                        .map_err(|error| LinkError::Protocol(error.to_string()))?;
                    return Ok(auth.principal);
                }
                Ok(Ok(ServerFrame::Err(err))) if err.re == Some(id) => {
                    return Err(match err.code {
                        roundtable_protocol::ErrorCode::Paused => LinkError::Stopped(err.msg),
                        _ => LinkError::Unauthorized(err.msg),
                    });
                }
                Ok(Ok(_)) => continue,
            }
        }
    }

    /// A fresh command id.
    pub fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub async fn send(&mut self, frame: &ClientFrame) -> Result<(), LinkError> {
        self.socket
            .send(Message::Text(frame.to_json().into()))
            .await
            .map_err(|error| LinkError::Closed {
                code: None,
                reason: error.to_string(),
            })
    }

    /// Whether the hub has been silent for longer than two heartbeats: the connection is
    /// dead even if TCP has not noticed (a laptop that slept, a network that changed).
    pub fn silent(&self, now: tokio::time::Instant) -> bool {
        self.hello.hb_ms > 0
            && now.duration_since(self.last_heard)
                > Duration::from_millis(self.hello.hb_ms.saturating_mul(2))
    }

    /// The next frame from the hub (pings are answered underneath). Cancel-safe.
    pub async fn next(&mut self) -> Result<ServerFrame, LinkError> {
        loop {
            let message = self.socket.next().await;
            if let Some(Ok(_)) = message {
                self.last_heard = tokio::time::Instant::now();
            }
            match message {
                None => {
                    return Err(LinkError::Closed {
                        code: None,
                        reason: "the hub closed the connection".into(),
                    });
                }
                Some(Err(error)) => {
                    return Err(LinkError::Closed {
                        code: None,
                        reason: error.to_string(),
                    });
                }
                Some(Ok(Message::Text(text))) => {
                    return ServerFrame::from_json(text.as_str()).map_err(|error| {
                        LinkError::Protocol(format!("an undecodable frame: {error}"))
                    });
                }
                Some(Ok(Message::Close(frame))) => return Err(closed(frame)),
                Some(Ok(_)) => continue,
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }
}
