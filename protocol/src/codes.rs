//! Error codes and close codes: stable strings and numbers clients branch on, so no one ever
//! has to match on a human-readable message.

use serde::{Deserialize, Serialize};

/// The `code` of an `err` frame (and of an HTTP error body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The frame is not valid JSON, lacks a field, has a field of the wrong type, or breaks a
    /// rule of the command.
    BadFrame,
    /// Unknown frame type `t`.
    Unsupported,
    /// Missing, bad, revoked or rotated token.
    Unauthorized,
    /// The caller may not do this.
    Forbidden,
    /// Unknown id, handle, code, or something the caller may not see.
    NotFound,
    /// The caller is not a member of the room.
    NotMember,
    /// The target has not consented (no contact between the owners).
    NoConsent,
    /// The state does not allow it (duplicate, already answered, used up…).
    Conflict,
    /// Too many sends; retry after `retry_after_ms`.
    RateLimited,
    /// The agent is paused by its owner or the room's creator.
    Paused,
    /// A text or body over its size limit.
    TooLarge,
    /// The hub is overloaded; retry later.
    Busy,
    /// The hub failed; the command had no effect.
    Internal,
    /// A code this client does not know (newer hub). Never sent by this hub.
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::BadFrame,
        ErrorCode::Unsupported,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::NotMember,
        ErrorCode::NoConsent,
        ErrorCode::Conflict,
        ErrorCode::RateLimited,
        ErrorCode::Paused,
        ErrorCode::TooLarge,
        ErrorCode::Busy,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadFrame => "bad_frame",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::NotMember => "not_member",
            ErrorCode::NoConsent => "no_consent",
            ErrorCode::Conflict => "conflict",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Paused => "paused",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Busy => "busy",
            ErrorCode::Internal => "internal",
            ErrorCode::Unknown => "unknown",
        }
    }

    /// The HTTP status used when this code answers an HTTP request.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadFrame | ErrorCode::Unsupported | ErrorCode::TooLarge => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden
            | ErrorCode::NotMember
            | ErrorCode::NoConsent
            | ErrorCode::Paused => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::Conflict => 409,
            ErrorCode::RateLimited => 429,
            ErrorCode::Busy => 503,
            ErrorCode::Internal | ErrorCode::Unknown => 500,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// WebSocket close codes the hub uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseCode {
    /// 1008: more than 20 `bad_frame`s in a minute.
    TooManyBadFrames,
    /// 1009: a frame over `max_frame`.
    FrameTooLarge,
    /// 1011: the hub failed (one of its own threads did) and stopped; it recovers
    /// everything it acknowledged when it starts again.
    HubFailed,
    /// 1012: the hub is restarting.
    HubRestarting,
    /// 1013: try again later: the principal already has `max_devices` live connections.
    TryAgainLater,
    /// 4001: unauthorized, or no `auth` in time.
    Unauthorized,
    /// 4008: the outbound queue passed `max_queue`; reconnect and resume from the cursor.
    SlowConsumer,
    /// 4009: a newer connection of the same principal and device replaced this one.
    Replaced,
    /// 4010: the token was revoked or rotated. Sign in again with a new token.
    TokenRevoked,
    /// 4011: the agent is stopped by its owner. The token stays valid: keep it and
    /// reconnect with the usual backoff; `auth` succeeds again after a `resume`.
    Stopped,
}

impl CloseCode {
    pub fn code(self) -> u16 {
        match self {
            CloseCode::TooManyBadFrames => 1008,
            CloseCode::FrameTooLarge => 1009,
            CloseCode::HubFailed => 1011,
            CloseCode::HubRestarting => 1012,
            CloseCode::TryAgainLater => 1013,
            CloseCode::Unauthorized => 4001,
            CloseCode::SlowConsumer => 4008,
            CloseCode::Replaced => 4009,
            CloseCode::TokenRevoked => 4010,
            CloseCode::Stopped => 4011,
        }
    }

    pub fn from_code(code: u16) -> Option<CloseCode> {
        Some(match code {
            1008 => CloseCode::TooManyBadFrames,
            1009 => CloseCode::FrameTooLarge,
            1011 => CloseCode::HubFailed,
            1012 => CloseCode::HubRestarting,
            1013 => CloseCode::TryAgainLater,
            4001 => CloseCode::Unauthorized,
            4008 => CloseCode::SlowConsumer,
            4009 => CloseCode::Replaced,
            4010 => CloseCode::TokenRevoked,
            4011 => CloseCode::Stopped,
            _ => return None,
        })
    }

    /// The close frame's reason text.
    pub fn reason(self) -> &'static str {
        match self {
            CloseCode::TooManyBadFrames => "too many bad frames",
            CloseCode::FrameTooLarge => "frame too large",
            CloseCode::HubFailed => "hub failed",
            CloseCode::HubRestarting => "hub restarting",
            CloseCode::TryAgainLater => "too many connections",
            CloseCode::Unauthorized => "unauthorized",
            CloseCode::SlowConsumer => "slow consumer",
            CloseCode::Replaced => "replaced",
            CloseCode::TokenRevoked => "token revoked",
            CloseCode::Stopped => "stopped",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_code_strings_match_serde() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            let back: ErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, code);
        }
        let unknown: ErrorCode = serde_json::from_str("\"brand_new\"").unwrap();
        assert_eq!(unknown, ErrorCode::Unknown);
    }

    #[test]
    fn close_codes_round_trip() {
        for close in [
            CloseCode::TooManyBadFrames,
            CloseCode::FrameTooLarge,
            CloseCode::HubFailed,
            CloseCode::HubRestarting,
            CloseCode::TryAgainLater,
            CloseCode::Unauthorized,
            CloseCode::SlowConsumer,
            CloseCode::Replaced,
            CloseCode::TokenRevoked,
            CloseCode::Stopped,
        ] {
            assert_eq!(CloseCode::from_code(close.code()), Some(close));
        }
        assert_eq!(CloseCode::from_code(1000), None);
    }
}
