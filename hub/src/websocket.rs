//! The WebSocket upgrade, done here rather than by axum so the hub owns the socket's bytes
//! from the first one: until `auth` succeeds, every frame is held to 8 KiB
//! ([`limits::PRE_AUTH_FRAME`]) by reading its header, before its payload is read.
//!
//! Why: the frame limit of the WebSocket layer is fixed when the socket is opened, at
//! `max_frame` (1 MiB). Without this, each socket that never authenticates could make the
//! hub buffer a megabyte; with it, an unauthenticated socket costs a few kilobytes. The
//! [`FrameScanner`] is a pure state machine over the bytes read; [`UpgradedIo`] runs it on
//! the socket's reads until the session lifts the limit.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use hyper_util::rt::TokioIo;
use roundtable_protocol::limits;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use crate::listener::Conn;

/// The session's socket.
pub type Socket = WebSocketStream<UpgradedIo>;

/// Checks an upgrade request; returns the `101 Switching Protocols` to answer it with, or
/// the status and message that refuse it.
pub fn accept(headers: &HeaderMap) -> Result<Response, (StatusCode, &'static str)> {
    let has_token = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|value| {
            value.to_str().is_ok_and(|value| {
                value
                    .split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case(token))
            })
        })
    };
    if !has_token(header::CONNECTION, "upgrade") || !has_token(header::UPGRADE, "websocket") {
        return Err((
            StatusCode::UPGRADE_REQUIRED,
            "this is the WebSocket endpoint: connect with a WebSocket client",
        ));
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|version| version.as_bytes() != b"13")
    {
        return Err((
            StatusCode::BAD_REQUEST,
            "only WebSocket version 13 is spoken here",
        ));
    }
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
        return Err((
            StatusCode::BAD_REQUEST,
            "the upgrade lacks Sec-WebSocket-Key",
        ));
    };
    let accept = derive_accept_key(key.as_bytes());
    let mut response = Response::new(axum::body::Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(
        header::SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&accept).expect("base64 is a valid header value"),
    );
    Ok(response)
}

/// Opens the WebSocket over an upgraded connection, frames limited to `max_frame` and,
/// until `pre_auth` is lifted, to [`limits::PRE_AUTH_FRAME`].
pub async fn open(
    upgraded: hyper::upgrade::Upgraded,
    max_frame: usize,
    pre_auth: Arc<PreAuthLimit>,
) -> Option<Socket> {
    let parts = match upgraded.downcast::<TokioIo<Conn>>() {
        Ok(parts) => parts,
        Err(_) => {
            tracing::error!("an upgraded connection is not the listener's; dropping it");
            return None;
        }
    };
    let io = UpgradedIo {
        pending: parts.read_buf,
        conn: parts.io.into_inner(),
        scanner: FrameScanner::new(limits::PRE_AUTH_FRAME as u64),
        pre_auth,
        refused: false,
    };
    // A small read buffer: tungstenite zero-fills it on every read, and frames are small.
    let config = WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .max_message_size(Some(max_frame))
        .max_frame_size(Some(max_frame));
    Some(WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await)
}

/// Whether the pre-auth frame limit still applies, and whether it has refused a frame.
#[derive(Debug, Default)]
pub struct PreAuthLimit {
    lifted: AtomicBool,
    exceeded: AtomicBool,
}

impl PreAuthLimit {
    /// `auth` succeeded: frames may be as large as `max_frame`.
    pub fn lift(&self) {
        self.lifted.store(true, Ordering::Release);
    }

    fn active(&self) -> bool {
        !self.lifted.load(Ordering::Acquire)
    }

    /// Whether a read failed because a frame was over the limit (answer with 1009).
    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::Acquire)
    }
}

/// The socket under the WebSocket: what hyper had read past the upgrade request, then the
/// connection itself, scanned by a [`FrameScanner`] while the pre-auth limit applies.
pub struct UpgradedIo {
    pending: Bytes,
    conn: Conn,
    scanner: FrameScanner,
    pre_auth: Arc<PreAuthLimit>,
    /// The scanner refused a frame; the next read fails while the limit applies.
    refused: bool,
}

impl std::fmt::Debug for UpgradedIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpgradedIo").finish_non_exhaustive()
    }
}

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "a frame over 8 KiB before auth succeeded",
    )
}

impl AsyncRead for UpgradedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let limited = this.pre_auth.active();
        if limited && this.refused {
            return Poll::Ready(Err(too_large()));
        }
        let start = buf.filled().len();
        if this.pending.is_empty() {
            std::task::ready!(Pin::new(&mut this.conn).poll_read(cx, buf))?;
        } else {
            let take = this.pending.len().min(buf.remaining());
            buf.put_slice(&this.pending.split_to(take));
        }
        if !limited {
            return Poll::Ready(Ok(()));
        }
        let read = &buf.filled()[start..];
        if let Some(passed) = this.scanner.scan(read) {
            // Keep what follows the refused frame's header for after the limit is lifted
            // (a frame sent behind `auth`); until then the next read fails.
            let mut kept = read[passed..].to_vec();
            kept.extend_from_slice(&this.pending);
            this.pending = Bytes::from(kept);
            buf.set_filled(start + passed);
            this.refused = true;
            this.pre_auth.exceeded.store(true, Ordering::Release);
            if passed == 0 {
                return Poll::Ready(Err(too_large()));
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for UpgradedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_shutdown(cx)
    }
}

/// Follows the frames of a client's byte stream by their headers (RFC 6455, 5.2) and finds
/// the first frame, or fragmented message, whose payload is over the limit.
#[derive(Debug, Clone)]
pub struct FrameScanner {
    limit: u64,
    /// The header being read, and how much of it has arrived.
    header: [u8; 14],
    have: usize,
    /// Payload bytes of the current frame still to skip.
    payload_left: u64,
    /// Payload of the data message so far (fragments add up).
    message: u64,
}

impl FrameScanner {
    pub fn new(limit: u64) -> FrameScanner {
        FrameScanner {
            limit,
            header: [0; 14],
            have: 0,
            payload_left: 0,
            message: 0,
        }
    }

    /// The length of a header whose first two bytes are known.
    fn header_len(&self) -> usize {
        let masked = self.header[1] & 0x80 != 0;
        let extended = match self.header[1] & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        2 + extended + if masked { 4 } else { 0 }
    }

    /// Scans the next bytes of the stream. `None` when every frame so far is within the
    /// limit; `Some(n)` when one is not, `n` being how many of these bytes come before its
    /// header (0 when the header began in earlier bytes). After `Some`, do not scan again.
    pub fn scan(&mut self, mut bytes: &[u8]) -> Option<usize> {
        let mut offset = 0;
        // Where the current header began, when it began in these bytes.
        let mut header_start = None;
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let skip = self.payload_left.min(bytes.len() as u64) as usize;
                self.payload_left -= skip as u64;
                bytes = &bytes[skip..];
                offset += skip;
                continue;
            }
            if self.have == 0 {
                header_start = Some(offset);
            }
            let wanted = if self.have < 2 { 2 } else { self.header_len() };
            let take = (wanted - self.have).min(bytes.len());
            self.header[self.have..self.have + take].copy_from_slice(&bytes[..take]);
            self.have += take;
            bytes = &bytes[take..];
            offset += take;
            if self.have < 2 || self.have < self.header_len() {
                continue;
            }
            let length = match self.header[1] & 0x7f {
                126 => u64::from(u16::from_be_bytes([self.header[2], self.header[3]])),
                127 => u64::from_be_bytes(self.header[2..10].try_into().expect("8 bytes")),
                short => u64::from(short),
            };
            let finished = self.header[0] & 0x80 != 0;
            let opcode = self.header[0] & 0x0f;
            let size = if opcode < 0x8 {
                // A data frame: its message is the sum of its fragments.
                self.message = self.message.saturating_add(length);
                self.message
            } else {
                length
            };
            if size > self.limit {
                return Some(header_start.unwrap_or(0));
            }
            if opcode < 0x8 && finished {
                self.message = 0;
            }
            self.have = 0;
            self.payload_left = length;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A masked client frame header for a payload of `length` bytes.
    fn header(opcode: u8, finished: bool, length: u64) -> Vec<u8> {
        let mut out = vec![opcode | if finished { 0x80 } else { 0 }];
        match length {
            0..=125 => out.push(0x80 | length as u8),
            126..=0xffff => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(length as u16).to_be_bytes());
            }
            _ => {
                out.push(0x80 | 127);
                out.extend_from_slice(&length.to_be_bytes());
            }
        }
        out.extend_from_slice(&[1, 2, 3, 4]);
        out
    }

    fn frame(opcode: u8, finished: bool, length: usize) -> Vec<u8> {
        let mut out = header(opcode, finished, length as u64);
        out.extend(std::iter::repeat_n(b'x', length));
        out
    }

    /// Scans `stream` in chunks of `chunk` bytes; the offset in the stream of the refused
    /// header, if any.
    fn refused_at(stream: &[u8], chunk: usize) -> Option<usize> {
        let mut scanner = FrameScanner::new(8192);
        let mut position = 0;
        for piece in stream.chunks(chunk) {
            if let Some(before) = scanner.scan(piece) {
                return Some(position + before);
            }
            position += piece.len();
        }
        None
    }

    #[test]
    fn frames_within_the_limit_pass_whatever_the_chunking() {
        let mut stream = frame(0x1, true, 8192);
        stream.extend(frame(0x9, true, 125));
        stream.extend(frame(0x1, true, 0));
        stream.extend(frame(0x1, true, 200));
        for chunk in [1, 2, 3, 7, 100, 4096, stream.len()] {
            assert_eq!(refused_at(&stream, chunk), None, "chunk {chunk}");
        }
    }

    #[test]
    fn a_frame_over_the_limit_is_refused_at_its_header() {
        let mut stream = frame(0x1, true, 100);
        let at = stream.len();
        let refused_header = header(0x1, true, 8193);
        stream.extend(&refused_header);
        for chunk in [1, 5, 64, stream.len()] {
            // Everything before the header passes; the header itself never does whole.
            let refused = refused_at(&stream, chunk).expect("refused");
            assert!(
                refused >= at && refused < at + refused_header.len(),
                "chunk {chunk}: {refused}"
            );
        }
        assert_eq!(refused_at(&stream, stream.len()), Some(at));
        // A 64-bit length is read whole: refused when the 14-byte header is complete.
        let huge = header(0x2, true, 1 << 40);
        assert_eq!(refused_at(&huge, huge.len()), Some(0));
        assert_eq!(
            refused_at(&huge, 3),
            Some(12),
            "in the chunk that completes it"
        );
    }

    #[test]
    fn fragments_count_together_and_control_frames_apart() {
        let mut stream = frame(0x1, false, 5000);
        stream.extend(frame(0x9, true, 100));
        let at = stream.len();
        stream.extend(frame(0x0, true, 5000));
        assert_eq!(refused_at(&stream, stream.len()), Some(at));
        let mut fine = frame(0x1, false, 4000);
        fine.extend(frame(0x0, true, 4000));
        fine.extend(frame(0x1, true, 8000));
        assert_eq!(refused_at(&fine, 1000), None);
    }
}
