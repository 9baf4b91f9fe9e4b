//! What lets a person stay in charge of their agents: pausing and stopping them, rotating
//! and revoking their tokens, and the rate limit every principal's sends go through.

use roundtable_protocol::bodies::ControlBody;
use roundtable_protocol::client::{AgentToken, Control, ControlAction, TokenAction};
use roundtable_protocol::model::PrincipalKind;
use roundtable_protocol::server::{AgentTokenOk, OkReply};
use roundtable_protocol::{CloseCode, ErrorCode};

use super::{Caller, Effect, Engine, ExecError, Outcome, Refusal, refuse};
use crate::store::{ControlRecord, StreamKey, TokenRecord, WriteTx};

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

impl Engine {
    /// Takes one token from the caller's bucket, or says how long to wait for one.
    pub(super) fn take_send_token(&mut self, now_ms: i64, caller: &Caller) -> Result<(), Refusal> {
        let Some(limits) = self.config.rate_limits else {
            return Ok(());
        };
        let limit = match caller.kind {
            PrincipalKind::Agent => limits.agent,
            PrincipalKind::User => limits.user,
        };
        let (tokens, last_ms) = self
            .buckets
            .entry(caller.id.clone())
            .or_insert((limit.burst, now_ms));
        let elapsed_s = (now_ms - *last_ms).max(0) as f64 / 1000.0;
        *tokens = (*tokens + elapsed_s * limit.per_second).min(limit.burst);
        *last_ms = now_ms;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            return Ok(());
        }
        let wait_ms = ((1.0 - *tokens) / limit.per_second * 1000.0).ceil() as u64;
        Err(Refusal {
            code: ErrorCode::RateLimited,
            msg: format!(
                "too many sends: at most {} at once and {} per second; retry in {wait_ms} ms",
                limit.burst, limit.per_second
            ),
            retry_after_ms: Some(wait_ms.max(1)),
        })
    }

    /// Gives back a token taken for a send that turned out to be a retry.
    pub(super) fn return_send_token(&mut self, caller: &Caller) {
        if let Some((tokens, _)) = self.buckets.get_mut(&caller.id) {
            *tokens += 1.0;
        }
    }

    /// The agent a command names, which the caller must own (`not_found` hides agents the
    /// caller may not see, `forbidden` those it sees but does not own).
    fn owned_agent(&self, caller: &Caller, agent: &str) -> Result<(), ExecError> {
        let Some(principal) = self.state.principal(agent) else {
            return refuse(ErrorCode::NotFound, format!("there is no agent {agent:?}"));
        };
        if principal.kind != PrincipalKind::Agent {
            return refuse(ErrorCode::NotFound, format!("{agent:?} is not an agent"));
        }
        if principal.owner.as_deref() != Some(caller.id.as_str()) {
            return refuse(
                ErrorCode::Forbidden,
                format!("{} is not your agent", principal.handle),
            );
        }
        Ok(())
    }

    pub(super) fn agent_token(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        command: AgentToken,
    ) -> Result<Outcome, ExecError> {
        self.owned_agent(caller, &command.agent)?;
        tx.revoke_tokens(&command.agent, now_ms)?;
        for token in self.state.tokens.values_mut() {
            if token.principal == command.agent {
                token.revoked = true;
            }
        }
        let token = match command.action {
            TokenAction::Revoke => None,
            TokenAction::Rotate => {
                let (token, hash) = self.ids.token();
                let record = TokenRecord {
                    hash,
                    principal: command.agent.clone(),
                    revoked: false,
                };
                tx.insert_token(&record, now_ms)?;
                self.state.tokens.insert(hash, record);
                Some(token)
            }
        };
        let mut outcome = Outcome::ok(OkReply::with(command.id, &AgentTokenOk { token }));
        outcome.effects.push(Effect::Close {
            principal: command.agent.clone(),
            code: CloseCode::TokenRevoked,
        });
        outcome.audit_target = Some(format!(
            "{} {}",
            command.agent,
            match command.action {
                TokenAction::Rotate => "rotate",
                TokenAction::Revoke => "revoke",
            }
        ));
        Ok(outcome)
    }

    /// Revokes every token of the user `handle` and issues a new one (the operator's
    /// `roundtable hub user token`, for a lost or leaked token). Its connections close with
    /// 4010 when the hub next runs: it is not running while the operator does this.
    pub fn reissue_user_token(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        handle: &str,
    ) -> Result<String, ExecError> {
        let Some(user) = self.state.by_handle(handle).cloned() else {
            return refuse(
                ErrorCode::NotFound,
                format!("no user has the handle {handle:?}"),
            );
        };
        if user.kind != PrincipalKind::User {
            return refuse(
                ErrorCode::BadFrame,
                format!("{handle} is an agent: its owner rotates its token with agent_token"),
            );
        }
        tx.revoke_tokens(&user.id, now_ms)?;
        for token in self.state.tokens.values_mut() {
            if token.principal == user.id {
                token.revoked = true;
            }
        }
        let (token, hash) = self.ids.token();
        let record = TokenRecord {
            hash,
            principal: user.id.clone(),
            revoked: false,
        };
        tx.insert_token(&record, now_ms)?;
        self.state.tokens.insert(hash, record);
        self.audit(tx, now_ms, "", "user_token", Some(user.id), None)?;
        Ok(token)
    }

    pub(super) fn control(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        control: Control,
    ) -> Result<Outcome, ExecError> {
        let Some(agent) = self.state.principal(&control.agent).cloned() else {
            return refuse(
                ErrorCode::NotFound,
                format!("there is no agent {:?}", control.agent),
            );
        };
        if agent.kind != PrincipalKind::Agent {
            return refuse(
                ErrorCode::NotFound,
                format!("{:?} is not an agent", control.agent),
            );
        }
        let owner = agent.owner.as_deref() == Some(caller.id.as_str());
        if let Some(room) = &control.room {
            let Some(state) = self.state.rooms.get(room) else {
                return refuse(ErrorCode::NotFound, format!("there is no room {room:?}"));
            };
            let creator = state.record.creator == caller.id;
            if !owner && !creator {
                return refuse(
                    ErrorCode::Forbidden,
                    "only the agent's owner, or the room's creator, may pause or stop it here",
                );
            }
            if !owner && !state.members.contains_key(&agent.id) {
                return refuse(
                    ErrorCode::NotMember,
                    format!("{} is not a member of this room", agent.handle),
                );
            }
        } else if !owner {
            return refuse(
                ErrorCode::Forbidden,
                "only the agent's owner may pause or stop it in every room",
            );
        }
        let controls = self.state.controls.entry(agent.id.clone()).or_default();
        match control.action {
            ControlAction::Pause | ControlAction::Stop => {
                let record = ControlRecord {
                    agent: agent.id.clone(),
                    room: control.room.clone(),
                    action: control.action,
                    by: caller.id.clone(),
                    ts_ms: now_ms,
                };
                tx.set_control(&record)?;
                controls.retain(|c| c.room != record.room);
                controls.push(record);
            }
            ControlAction::Resume => {
                // The owner's resume without a room lifts everything; otherwise only the
                // control of that room.
                let lifted: Vec<Option<String>> = controls
                    .iter()
                    .filter(|c| (owner && control.room.is_none()) || c.room == control.room)
                    .map(|c| c.room.clone())
                    .collect();
                for room in &lifted {
                    tx.delete_control(&agent.id, room.as_deref())?;
                }
                controls.retain(|c| !lifted.contains(&c.room));
            }
        }
        let body = ControlBody {
            action: control.action,
            room: control.room.clone(),
            by: caller.id.clone(),
        };
        let event = self.append_hub(
            tx,
            now_ms,
            StreamKey::Inbox(agent.id.clone()),
            &caller.id,
            "control",
            &body,
        )?;
        let mut outcome = Outcome::with_events(OkReply::empty(control.id), vec![event]);
        if control.action == ControlAction::Stop && control.room.is_none() {
            outcome.effects.push(Effect::Close {
                principal: agent.id.clone(),
                code: CloseCode::TokenRevoked,
            });
        }
        outcome.audit_target = Some(match &control.room {
            Some(room) => format!("{} {} {room}", agent.id, control.action.as_str()),
            None => format!("{} {}", agent.id, control.action.as_str()),
        });
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_parse() {
        assert_eq!(
            "20/2".parse::<RateLimit>(),
            Ok(RateLimit {
                burst: 20.0,
                per_second: 2.0
            })
        );
        for bad in ["20", "0/2", "20/0", "x/2", "20/-1", "inf/2"] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad}");
        }
    }
}
