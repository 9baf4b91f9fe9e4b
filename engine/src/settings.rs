//! The settings of the command logic that the hub's configuration holds (and parses from
//! its flags): who may sign up, and the rate limits. The rest of the configuration is the
//! hub's own.

/// Who may create users over `POST /v1/signup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignupMode {
    /// Anyone.
    #[default]
    Open,
    /// Only with a valid invite code.
    Invite,
    /// Nobody: the operator creates users on the hub's machine.
    Closed,
}

impl SignupMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SignupMode::Open => "open",
            SignupMode::Invite => "invite",
            SignupMode::Closed => "closed",
        }
    }
}

impl std::str::FromStr for SignupMode {
    type Err = String;

    fn from_str(text: &str) -> Result<SignupMode, String> {
        match text {
            "open" => Ok(SignupMode::Open),
            "invite" => Ok(SignupMode::Invite),
            "closed" => Ok(SignupMode::Closed),
            other => Err(format!(
                "unknown signup mode {other:?}: use open, invite or closed"
            )),
        }
    }
}

/// A token bucket: up to `burst` sends at once, refilled at `per_second`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub burst: f64,
    pub per_second: f64,
}

impl std::str::FromStr for RateLimit {
    type Err = String;

    /// `BURST/PER_SECOND`, e.g. `20/2`.
    fn from_str(text: &str) -> Result<RateLimit, String> {
        let bad = || format!("invalid rate limit {text:?}: write BURST/PER_SECOND, e.g. 20/2");
        let (burst, rate) = text.split_once('/').ok_or_else(bad)?;
        let burst: f64 = burst.trim().parse().map_err(|_| bad())?;
        let per_second: f64 = rate.trim().parse().map_err(|_| bad())?;
        if !(burst >= 1.0 && per_second > 0.0 && burst.is_finite() && per_second.is_finite()) {
            return Err(bad());
        }
        Ok(RateLimit { burst, per_second })
    }
}

/// The limits for agents and for users.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimits {
    pub agent: RateLimit,
    pub user: RateLimit,
}

impl Default for RateLimits {
    /// The protocol's defaults: agents 20 burst and 2 per second, users 200 and 50.
    fn default() -> RateLimits {
        RateLimits {
            agent: RateLimit {
                burst: 20.0,
                per_second: 2.0,
            },
            user: RateLimit {
                burst: 200.0,
                per_second: 50.0,
            },
        }
    }
}
