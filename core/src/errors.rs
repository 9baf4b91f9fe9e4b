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
    pub fn code(&self) -> &'static str {
        match self {
            CoreError::Cache(_) => "cache",
            CoreError::Profile(_) => "profile",
            CoreError::Http(HttpError::Unreachable { .. } | HttpError::Timeout(_)) => "unreachable",
            CoreError::Http(_) => "http",
            CoreError::Refused { code, .. } => code.as_str(),
            CoreError::Interrupted(_) => "interrupted",
            CoreError::Timeout => "timeout",
            CoreError::NotSent => "not_sent",
            CoreError::Offline(_) => "unreachable",
            CoreError::TokenRefused(_) => "unauthorized",
            CoreError::Stopped(_) => "stopped",
            CoreError::NotFound(_) => "not_found",
            CoreError::Ambiguous(_) => "ambiguous",
            CoreError::Invalid(_) => "invalid",
            CoreError::Io { .. } => "io",
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

/// An error as it crosses IPC: a stable code and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ErrorReport {
    pub code: String,
    pub message: String,
}

impl From<CoreError> for ErrorReport {
    fn from(error: CoreError) -> ErrorReport {
        ErrorReport::from(&error)
    }
}

impl From<&CoreError> for ErrorReport {
    fn from(error: &CoreError) -> ErrorReport {
        ErrorReport {
            code: error.code().to_owned(),
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
    fn a_refusal_keeps_the_hubs_code_and_a_cache_failure_is_not_the_hubs() {
        let refused = CoreError::from_failure(
            FailureCode::Hub(ErrorCode::NotMember),
            "not a member".into(),
        );
        assert_eq!(refused.code(), "not_member");
        assert!(matches!(
            CoreError::from_failure(FailureCode::Hub(ErrorCode::Unauthorized), "no".into()),
            CoreError::TokenRefused(_)
        ));
        let cache = CoreError::Cache(CacheError::WriterGone);
        assert_eq!(cache.code(), "cache");
        assert_eq!(ErrorReport::from(&cache).code, "cache");
    }
}
