//! Errors typed end to end: the hub's [`ErrorCode`] travels as itself, a failure of the
//! local cache is never reported as something the hub said, and every error has a stable
//! [`CoreError::code`] for IPC and exit statuses, so no client matches on message text.

use roundtable_protocol::ErrorCode;
use serde::{Deserialize, Serialize};

use crate::cache::CacheError;
use crate::http::HttpError;
use crate::profile::ProfileError;

/// Why an outbox entry failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureCode {
    /// The hub refused it with this code.
    Hub(ErrorCode),
    /// The connection ended while it was in flight; a command may or may not have run.
    Interrupted,
    /// Withdrawn before it was sent (its caller gave up waiting).
    Cancelled,
    /// The entry could not be read back from the outbox; it was not sent.
    Unreadable,
}

impl FailureCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::Hub(code) => code.as_str(),
            FailureCode::Interrupted => "interrupted",
            FailureCode::Cancelled => "cancelled",
            FailureCode::Unreadable => "unreadable",
        }
    }

    /// Reads a code stored in the outbox.
    pub fn parse(text: &str) -> FailureCode {
        match text {
            "interrupted" => FailureCode::Interrupted,
            "cancelled" => FailureCode::Cancelled,
            "unreadable" => FailureCode::Unreadable,
            other => FailureCode::Hub(
                serde_json::from_value(serde_json::Value::String(other.to_owned()))
                    .unwrap_or(ErrorCode::Unknown),
            ),
        }
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FailureCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(FailureCode::parse(&text))
    }
}

/// How a queued write ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The hub stored it (a send) or did it (a command); the `ok` frame as JSON.
    Done(String),
    /// It failed: the hub refused it, or it could not be sent.
    Failed { code: FailureCode, msg: String },
}

/// Why a core call failed.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("the hub refused: {msg} ({code})", code = code.as_str())]
    Refused { code: ErrorCode, msg: String },
    #[error("{0}")]
    Interrupted(String),
    #[error(
        "the hub did not answer in time; the command was sent and may still be applied: see `roundtable outbox`"
    )]
    Timeout,
    #[error("the hub could not be reached in time; nothing was sent")]
    NotSent,
    #[error("the hub is unreachable: {0}")]
    Offline(String),
    #[error("{0}")]
    TokenRefused(String),
    /// The agent is stopped by its owner (close 4011): its token stays valid, and it
    /// connects again once resumed.
    #[error("{0}")]
    Stopped(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Ambiguous(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl CoreError {
    /// A stable code for IPC and exit statuses: the hub's code when the hub refused.
    pub fn code(&self) -> ReportCode {
        let client = |code: ClientCode| ReportCode::Client(code);
        match self {
            CoreError::Cache(_) => client(ClientCode::Cache),
            CoreError::Profile(_) => client(ClientCode::Profile),
            CoreError::Http(HttpError::Unreachable { .. } | HttpError::Timeout(_)) => {
                client(ClientCode::Unreachable)
            }
            CoreError::Http(_) => client(ClientCode::Http),
            CoreError::Refused { code, .. } => ReportCode::Hub(*code),
            CoreError::Interrupted(_) => client(ClientCode::Interrupted),
            CoreError::Timeout => client(ClientCode::Timeout),
            CoreError::NotSent => client(ClientCode::NotSent),
            CoreError::Offline(_) => client(ClientCode::Unreachable),
            CoreError::TokenRefused(_) => ReportCode::Hub(ErrorCode::Unauthorized),
            CoreError::Stopped(_) => client(ClientCode::Stopped),
            CoreError::NotFound(_) => ReportCode::Hub(ErrorCode::NotFound),
            CoreError::Ambiguous(_) => client(ClientCode::Ambiguous),
            CoreError::Invalid(_) => client(ClientCode::Invalid),
            CoreError::Io { .. } => client(ClientCode::Io),
        }
    }

    /// The failure of an outbox entry, as an error.
    pub fn from_failure(code: FailureCode, msg: String) -> CoreError {
        match code {
            FailureCode::Hub(ErrorCode::Unauthorized) => CoreError::TokenRefused(msg),
            FailureCode::Hub(code) => CoreError::Refused { code, msg },
            FailureCode::Interrupted => CoreError::Interrupted(msg),
            FailureCode::Cancelled => CoreError::NotSent,
            FailureCode::Unreadable => CoreError::Invalid(msg),
        }
    }
}

/// Every code an error can carry across IPC, `--json` and the MCP bridge: the hub's own
/// [`ErrorCode`] or the client's [`ClientCode`], each written as its name. Closed, so the
/// window's types name each one and a code nothing emits does not type-check there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(untagged)]
pub enum ReportCode {
    /// First: the hub's codes read any name they do not know as `unknown`.
    Client(ClientCode),
    Hub(ErrorCode),
}

/// The codes of failures on the client's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum ClientCode {
    /// The local cache failed.
    Cache,
    /// A profile is missing or unreadable.
    Profile,
    /// The hub could not be reached.
    Unreachable,
    /// The hub answered HTTP with something unexpected.
    Http,
    /// The connection ended while a command was in flight.
    Interrupted,
    /// Sent, not answered in time (it may still apply).
    Timeout,
    /// Not sent: the hub was not reached in time.
    NotSent,
    /// The agent is stopped by its owner.
    Stopped,
    /// A name matched several things.
    Ambiguous,
    /// The input is not valid; the message says what to give instead.
    Invalid,
    /// A local file could not be read or written.
    Io,
    /// The app could not start its session (its hub, its settings).
    Setup,
    /// The app is quitting.
    ShuttingDown,
}

impl ClientCode {
    pub const ALL: [ClientCode; 13] = [
        ClientCode::Cache,
        ClientCode::Profile,
        ClientCode::Unreachable,
        ClientCode::Http,
        ClientCode::Interrupted,
        ClientCode::Timeout,
        ClientCode::NotSent,
        ClientCode::Stopped,
        ClientCode::Ambiguous,
        ClientCode::Invalid,
        ClientCode::Io,
        ClientCode::Setup,
        ClientCode::ShuttingDown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClientCode::Cache => "cache",
            ClientCode::Profile => "profile",
            ClientCode::Unreachable => "unreachable",
            ClientCode::Http => "http",
            ClientCode::Interrupted => "interrupted",
            ClientCode::Timeout => "timeout",
            ClientCode::NotSent => "not_sent",
            ClientCode::Stopped => "stopped",
            ClientCode::Ambiguous => "ambiguous",
            ClientCode::Invalid => "invalid",
            ClientCode::Io => "io",
            ClientCode::Setup => "setup",
            ClientCode::ShuttingDown => "shutting_down",
        }
    }
}

impl ReportCode {
    /// The code as it is written (`not_member`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReportCode::Client(code) => code.as_str(),
            ReportCode::Hub(code) => code.as_str(),
        }
    }
}

impl From<ErrorCode> for ReportCode {
    fn from(code: ErrorCode) -> ReportCode {
        ReportCode::Hub(code)
    }
}

impl From<ClientCode> for ReportCode {
    fn from(code: ClientCode) -> ReportCode {
        ReportCode::Client(code)
    }
}

impl std::fmt::Display for ReportCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error as it crosses IPC: a stable code and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ErrorReport {
    pub code: ReportCode,
    pub message: String,
}

impl ErrorReport {
    pub fn new(code: impl Into<ReportCode>, message: impl Into<String>) -> ErrorReport {
        ErrorReport {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl From<CoreError> for ErrorReport {
    fn from(error: CoreError) -> ErrorReport {
        ErrorReport::from(&error)
    }
}

impl From<&CoreError> for ErrorReport {
    fn from(error: &CoreError) -> ErrorReport {
        ErrorReport {
            code: error.code(),
            message: error.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_codes_round_trip_through_their_text() {
        let mut codes: Vec<FailureCode> =
            ErrorCode::ALL.into_iter().map(FailureCode::Hub).collect();
        codes.extend([
            FailureCode::Interrupted,
            FailureCode::Cancelled,
            FailureCode::Unreadable,
        ]);
        for code in codes {
            assert_eq!(FailureCode::parse(code.as_str()), code);
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(serde_json::from_str::<FailureCode>(&json).unwrap(), code);
        }
        assert_eq!(
            FailureCode::parse("from_a_newer_hub"),
            FailureCode::Hub(ErrorCode::Unknown)
        );
    }

    #[test]
    fn report_codes_are_written_as_they_serialize_and_read_back_as_themselves() {
        let codes = ErrorCode::ALL
            .into_iter()
            .chain([ErrorCode::Unknown])
            .map(ReportCode::Hub)
            .chain(ClientCode::ALL.into_iter().map(ReportCode::Client));
        for code in codes {
            let written = serde_json::to_value(code).unwrap();
            assert_eq!(written, serde_json::Value::String(code.as_str().into()));
            assert_eq!(serde_json::from_value::<ReportCode>(written).unwrap(), code);
        }
    }

    #[test]
    fn a_refusal_keeps_the_hubs_code_and_a_cache_failure_is_not_the_hubs() {
        let refused = CoreError::from_failure(
            FailureCode::Hub(ErrorCode::NotMember),
            "not a member".into(),
        );
        assert_eq!(refused.code(), ReportCode::Hub(ErrorCode::NotMember));
        assert!(matches!(
            CoreError::from_failure(FailureCode::Hub(ErrorCode::Unauthorized), "no".into()),
            CoreError::TokenRefused(_)
        ));
        let cache = CoreError::Cache(CacheError::WriterGone);
        assert_eq!(cache.code(), ReportCode::Client(ClientCode::Cache));
        assert_eq!(ErrorReport::from(&cache).code.as_str(), "cache");
    }
}
