//! The operator's door into a running hub: a local socket named `operator.sock` in the data
//! directory (a Unix socket there; on Windows, a named pipe made from that path, kept to the
//! hub's user). Whoever may enter the directory (which the hub keeps to its owner), or is
//! the hub's user, is the hub's operator; nothing on the network reaches it, so no secret is
//! needed. One JSON
//! request per connection, one JSON answer, each a line.
//!
//! Why: most operator commands need the data directory to themselves, since the running
//! hub keeps its state in memory. Revoking a leaked token cannot wait for a restart
//! (protocol amendment 6): through this socket the running hub's writer does it, closes the
//! user's connections with 4010 at once, and answers once the change is durable.
//!
//! This module holds what is asked and answered; [`crate::operator_socket`] serves it.

use serde::{Deserialize, Serialize};

use roundtable_protocol::client::TokenAction;

/// The socket's file name in the data directory.
pub const SOCKET_NAME: &str = "operator.sock";

/// The largest request read (a request is a handle and a word or two).
pub(crate) const MAX_REQUEST: u64 = 64 * 1024;

/// What the operator asks of the running hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum OperatorRequest {
    /// Revokes every token of the user `handle`; a rotation also issues a new one.
    UserToken { handle: String, action: TokenAction },
}

/// The hub's answer: `ok` with what the request produced, or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorReply {
    pub ok: bool,
    /// A new token (shown once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Why the request was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why the operator's request did not reach the hub, or was refused.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(
        "the hub is running but its operator socket {path} cannot be reached ({source}); \
         stop the hub and run the command again"
    )]
    Unreachable {
        path: String,
        source: std::io::Error,
    },
    #[error("the hub answered something unexpected: {0}")]
    Garbled(String),
    #[error("{0}")]
    Refused(String),
}
