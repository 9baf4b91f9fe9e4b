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
        match self {
            CoreError::Cache(_) => ReportCode::Cache,
            CoreError::Profile(_) => ReportCode::Profile,
            CoreError::Http(HttpError::Unreachable { .. } | HttpError::Timeout(_)) => {
                ReportCode::Unreachable
            }
            CoreError::Http(_) => ReportCode::Http,
            CoreError::Refused { code, .. } => ReportCode::from(*code),
            CoreError::Interrupted(_) => ReportCode::Interrupted,
            CoreError::Timeout => ReportCode::Timeout,
            CoreError::NotSent => ReportCode::NotSent,
            CoreError::Offline(_) => ReportCode::Unreachable,
            CoreError::TokenRefused(_) => ReportCode::Unauthorized,
            CoreError::Stopped(_) => ReportCode::Stopped,
            CoreError::NotFound(_) => ReportCode::NotFound,
            CoreError::Ambiguous(_) => ReportCode::Ambiguous,
            CoreError::Invalid(_) => ReportCode::Invalid,
            CoreError::Io { .. } => ReportCode::Io,
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
/// ([`ErrorCode`], which it keeps the names of) and the client's. Closed, so the window's
/// types name each one and a code nothing emits does not type-check there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum ReportCode {
    // The hub's codes (`ErrorCode`).
    BadFrame,
    Unsupported,
    /// The hub refused the token (or the hub's `unauthorized`).
    Unauthorized,
    Forbidden,
    NotFound,
    NotMember,
    NoConsent,
    Conflict,
    RateLimited,
    Paused,
    TooLarge,
    Busy,
    Internal,
    /// A hub's code this client does not know.
    Unknown,
    // The client's.
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

impl ReportCode {
    pub const ALL: [ReportCode; 27] = [
        ReportCode::BadFrame,
        ReportCode::Unsupported,
        ReportCode::Unauthorized,
        ReportCode::Forbidden,
        ReportCode::NotFound,
        ReportCode::NotMember,
        ReportCode::NoConsent,
        ReportCode::Conflict,
        ReportCode::RateLimited,
        ReportCode::Paused,
        ReportCode::TooLarge,
        ReportCode::Busy,
        ReportCode::Internal,
        ReportCode::Unknown,
        ReportCode::Cache,
        ReportCode::Profile,
        ReportCode::Unreachable,
        ReportCode::Http,
        ReportCode::Interrupted,
        ReportCode::Timeout,
        ReportCode::NotSent,
        ReportCode::Stopped,
        ReportCode::Ambiguous,
        ReportCode::Invalid,
        ReportCode::Io,
        ReportCode::Setup,
        ReportCode::ShuttingDown,
    ];

    /// The code as it is written (`not_member`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReportCode::BadFrame => "bad_frame",
            ReportCode::Unsupported => "unsupported",
            ReportCode::Unauthorized => "unauthorized",
            ReportCode::Forbidden => "forbidden",
            ReportCode::NotFound => "not_found",
            ReportCode::NotMember => "not_member",
            ReportCode::NoConsent => "no_consent",
            ReportCode::Conflict => "conflict",
            ReportCode::RateLimited => "rate_limited",
            ReportCode::Paused => "paused",
            ReportCode::TooLarge => "too_large",
            ReportCode::Busy => "busy",
            ReportCode::Internal => "internal",
            ReportCode::Unknown => "unknown",
            ReportCode::Cache => "cache",
            ReportCode::Profile => "profile",
            ReportCode::Unreachable => "unreachable",
            ReportCode::Http => "http",
            ReportCode::Interrupted => "interrupted",
            ReportCode::Timeout => "timeout",
            ReportCode::NotSent => "not_sent",
            ReportCode::Stopped => "stopped",
            ReportCode::Ambiguous => "ambiguous",
            ReportCode::Invalid => "invalid",
            ReportCode::Io => "io",
            ReportCode::Setup => "setup",
            ReportCode::ShuttingDown => "shutting_down",
        }
    }
}

impl From<ErrorCode> for ReportCode {
    fn from(code: ErrorCode) -> ReportCode {
        match code {
            ErrorCode::BadFrame => ReportCode::BadFrame,
            ErrorCode::Unsupported => ReportCode::Unsupported,
            ErrorCode::Unauthorized => ReportCode::Unauthorized,
            ErrorCode::Forbidden => ReportCode::Forbidden,
            ErrorCode::NotFound => ReportCode::NotFound,
            ErrorCode::NotMember => ReportCode::NotMember,
            ErrorCode::NoConsent => ReportCode::NoConsent,
            ErrorCode::Conflict => ReportCode::Conflict,
            ErrorCode::RateLimited => ReportCode::RateLimited,
            ErrorCode::Paused => ReportCode::Paused,
            ErrorCode::TooLarge => ReportCode::TooLarge,
            ErrorCode::Busy => ReportCode::Busy,
            ErrorCode::Internal => ReportCode::Internal,
            ErrorCode::Unknown => ReportCode::Unknown,
        }
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
    pub fn new(code: ReportCode, message: impl Into<String>) -> ErrorReport {
        ErrorReport {
            code,
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
    fn report_codes_are_written_as_they_serialize_and_keep_the_hubs_names() {
        for code in ErrorCode::ALL.into_iter().chain([ErrorCode::Unknown]) {
            assert_eq!(ReportCode::from(code).as_str(), code.as_str());
        }
        for code in ReportCode::ALL {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::String(code.as_str().into())
            );
        }
    }

    #[test]
    fn a_refusal_keeps_the_hubs_code_and_a_cache_failure_is_not_the_hubs() {
        let refused = CoreError::from_failure(
            FailureCode::Hub(ErrorCode::NotMember),
            "not a member".into(),
        );
        assert_eq!(refused.code(), ReportCode::NotMember);
        assert!(matches!(
            CoreError::from_failure(FailureCode::Hub(ErrorCode::Unauthorized), "no".into()),
            CoreError::TokenRefused(_)
        ));
        let cache = CoreError::Cache(CacheError::WriterGone);
        assert_eq!(cache.code(), ReportCode::Cache);
        assert_eq!(ErrorReport::from(&cache).code, ReportCode::Cache);
    }
}
