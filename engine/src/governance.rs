//! What lets a person stay in charge of their agents: pausing and stopping them, rotating
//! and revoking their tokens, and the rate limit every principal's writes go through (an
//! agent's also through its owner's bucket).

use roundtable_protocol::bodies::ControlBody;
use roundtable_protocol::client::{AgentToken, Control, ControlAction, TokenAction, UserToken};
use roundtable_protocol::model::PrincipalKind;
use roundtable_protocol::server::{AgentTokenOk, OkReply, UserTokenOk};
use roundtable_protocol::{CloseCode, ErrorCode};

use super::{Caller, Effect, Engine, ExecError, Outcome, Refusal, refuse};
use crate::records::{ControlRecord, StreamKey, TokenRecord};
use crate::store::{WriteError, WriteTx};

pub use crate::settings::{RateLimit, RateLimits};

/// Takes one token from `id`'s bucket (created full), or says how many milliseconds until
/// one is back.
fn take_from(
    buckets: &mut rustc_hash::FxHashMap<String, (f64, i64)>,
    id: &str,
    limit: RateLimit,
    now_ms: i64,
) -> Result<(), u64> {
    if !buckets.contains_key(id) {
        buckets.insert(id.to_owned(), (limit.burst, now_ms));
    }
    let (tokens, last_ms) = buckets.get_mut(id).expect("inserted just above");
    let elapsed_s = (now_ms - *last_ms).max(0) as f64 / 1000.0;
    *tokens = (*tokens + elapsed_s * limit.per_second).min(limit.burst);
    *last_ms = now_ms;
    if *tokens >= 1.0 {
        *tokens -= 1.0;
        return Ok(());
    }
    let wait_ms = ((1.0 - *tokens) / limit.per_second * 1000.0).ceil() as u64;
    Err(wait_ms.max(1))
}

fn give_back(buckets: &mut rustc_hash::FxHashMap<String, (f64, i64)>, id: &str) {
    if let Some((tokens, _)) = buckets.get_mut(id) {
        *tokens += 1.0;
    }
}

impl Engine {
    /// Takes one token for a `send`: see [`Engine::take_write_token`].
    pub(super) fn take_send_token(&mut self, now_ms: i64, caller: &Caller) -> Result<(), Refusal> {
        self.take_token(now_ms, caller, "sends")
    }

    /// Takes one token for a write from the caller's bucket and, for an agent, one from
    /// its owner's too (so many agents do not multiply a user's rate); or says how long to
    /// wait.
    pub(super) fn take_write_token(&mut self, now_ms: i64, caller: &Caller) -> Result<(), Refusal> {
        self.take_token(now_ms, caller, "writes")
    }

    fn take_token(&mut self, now_ms: i64, caller: &Caller, what: &str) -> Result<(), Refusal> {
        let Some(limits) = self.config.rate_limits else {
            return Ok(());
        };
        let refusal = |limit: RateLimit, whose: &str, wait_ms: u64| Refusal {
            code: ErrorCode::RateLimited,
            msg: format!(
                "too many {what}: {whose} at most {} at once and {} per second; retry in \
                 {wait_ms} ms",
                limit.burst, limit.per_second
            ),
            retry_after_ms: Some(wait_ms),
        };
        let (limit, owner) = match caller.kind {
            PrincipalKind::Agent => (
                limits.agent,
                self.state
                    .principal(&caller.id)
                    .and_then(|agent| agent.owner.clone()),
            ),
            PrincipalKind::User => (limits.user, None),
        };
        if self.config.shares_buckets {
            self.touched_buckets.insert(caller.id.clone());
        }
        self.note_bucket(&caller.id);
        if let Some(owner) = &owner {
            self.note_bucket(owner);
        }
        take_from(&mut self.buckets, &caller.id, limit, now_ms)
            .map_err(|wait_ms| refusal(limit, "you may make", wait_ms))?;
        if let Some(owner) = &owner
            && self.config.shares_buckets
        {
            self.touched_buckets.insert(owner.clone());
        }
        if let Some(owner) = owner
            && let Err(wait_ms) = take_from(&mut self.buckets, &owner, limits.user, now_ms)
        {
            give_back(&mut self.buckets, &caller.id);
            return Err(refusal(
                limits.user,
                "your owner and its agents together may make",
                wait_ms,
            ));
        }
        Ok(())
    }

    /// Gives back the tokens taken for a send that turned out to be a retry or was refused
    /// by a later check.
    pub(super) fn return_send_token(&mut self, caller: &Caller) {
        if self.config.rate_limits.is_none() {
            return;
        }
        self.note_bucket(&caller.id);
        give_back(&mut self.buckets, &caller.id);
        if caller.kind == PrincipalKind::Agent
            && let Some(owner) = self
                .state
                .principal(&caller.id)
                .and_then(|agent| agent.owner.clone())
        {
            self.note_bucket(&owner);
            give_back(&mut self.buckets, &owner);
        }
    }

    /// The agent a command names, which the caller must own: `not_found` (the answer for an
    /// id that names nothing) for agents the caller may not see, `forbidden` for those it
    /// sees but does not own.
    fn owned_agent(&self, caller: &Caller, agent: &str) -> Result<(), ExecError> {
        let principal = self.known_agent(caller, agent)?;
        if principal.owner.as_deref() != Some(caller.id.as_str()) {
            return refuse(
                ErrorCode::Forbidden,
                format!("{} is not your agent", principal.handle),
            );
        }
        Ok(())
    }

    /// Revokes every token of `principal` and, for a rotation, issues a new one (returned,
    /// to be shown once).
    fn replace_tokens(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        principal: &str,
        action: TokenAction,
    ) -> Result<Option<String>, WriteError> {
        tx.revoke_tokens(principal, now_ms)?;
        self.state.revoke_tokens_of(principal);
        match action {
            TokenAction::Revoke => Ok(None),
            TokenAction::Rotate => {
                let (token, hash) = self.ids.token();
                let record = TokenRecord {
                    hash,
                    principal: principal.to_owned(),
                    revoked: false,
                };
                tx.insert_token(&record, now_ms)?;
                self.state.add_token(record);
                Ok(Some(token))
            }
        }
    }

    pub(super) fn agent_token(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        command: AgentToken,
    ) -> Result<Outcome, ExecError> {
        self.owned_agent(caller, &command.agent)?;
        if self
            .state
            .principal(&command.agent)
            .is_some_and(|agent| agent.remote.is_some())
        {
            return refuse(
                ErrorCode::Conflict,
                "a remote agent has no token: the hub calls it with the credential it was \
                 registered with",
            );
        }
        let token = self.replace_tokens(tx, now_ms, &command.agent, command.action)?;
        let mut outcome = Outcome::ok(OkReply::with(command.id, &AgentTokenOk { token }));
        outcome.effects.push(Effect::Close {
            principal: command.agent.clone(),
            code: CloseCode::TokenRevoked,
        });
        outcome.audit_target = Some(format!(
            "{} {}",
            command.agent,
            token_action_str(command.action)
        ));
        Ok(outcome)
    }

    /// A user's own token, rotated or revoked (amendment 6). Every connection of the old
    /// token closes with 4010, the calling one too, after its `ok` (with the new token).
    pub(super) fn user_token(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        command: UserToken,
    ) -> Result<Outcome, ExecError> {
        if caller.kind != PrincipalKind::User {
            return refuse(
                ErrorCode::Forbidden,
                "an agent's token is its owner's to rotate or revoke (agent_token)",
            );
        }
        let token = self.replace_tokens(tx, now_ms, &caller.id, command.action)?;
        let mut outcome = Outcome::ok(OkReply::with(command.id, &UserTokenOk { token }));
        outcome.effects.push(Effect::Close {
            principal: caller.id.clone(),
            code: CloseCode::TokenRevoked,
        });
        outcome.audit_target = Some(format!(
            "{} {}",
            caller.id,
            token_action_str(command.action)
        ));
        Ok(outcome)
    }

    /// Revokes every token of the user `handle` and, for a rotation, issues a new one: the
    /// operator's `roundtable hub user token`, for a lost or leaked token, on a stopped hub
    /// or (through the operator socket) a running one, whose connections of the user then
    /// close with 4010. Recorded in the audit log with no principal (the operator is none).
    pub fn operator_user_token(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        handle: &str,
        action: TokenAction,
    ) -> Result<(Option<String>, Effect), ExecError> {
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
        let token = self.replace_tokens(tx, now_ms, &user.id, action)?;
        let target = format!("{} {}", user.id, token_action_str(action));
        self.audit(tx, now_ms, "", "user_token", Some(target), None)?;
        let close = Effect::Close {
            principal: user.id,
            code: CloseCode::TokenRevoked,
        };
        Ok((token, close))
    }

    /// Refuses an agent's write in `room` that a pause or stop in force there forbids
    /// (amendment 1): a stop refuses every write (`send` of any kind, `room_update`,
    /// `room_invite`), a pause the same except `send` of kinds other than `message`.
    ///
    /// The refusal says who set the control and as what (the agent's owner, or the room's
    /// creator, who is not), and hands its reason over as that person's words: JSON-quoted,
    /// on one line, so a creator's reason cannot pass for the owner's instructions.
    pub(super) fn check_control(
        &self,
        caller: &Caller,
        room: &str,
        write: RoomWrite,
    ) -> Result<(), ExecError> {
        if caller.kind != PrincipalKind::Agent {
            return Ok(());
        }
        let Some(control) = self.state.control_in(&caller.id, room) else {
            return Ok(());
        };
        let by = self
            .state
            .principal(&control.by)
            .map_or(control.by.as_str(), |setter| setter.handle.as_str());
        let owner = self
            .state
            .principal(&caller.id)
            .and_then(|agent| agent.owner.as_deref());
        let role = if owner == Some(control.by.as_str()) {
            "your owner"
        } else if self
            .state
            .rooms
            .get(room)
            .is_some_and(|state| state.record.creator == control.by)
        {
            "the room's creator, not your owner"
        } else {
            "not your owner"
        };
        let told = |what: &str, refused: &str| {
            let mut text = format!("you are {what} in this room by {by} ({role}): {refused}");
            if let Some(reason) = &control.reason {
                text.push_str(&format!(
                    ". Reason, as {by} wrote it (JSON-quoted): {}",
                    quoted(reason)
                ));
            }
            text
        };
        match control.action {
            ControlAction::Stop => refuse(
                ErrorCode::Paused,
                told("stopped", "your writes here are refused until a resume"),
            ),
            ControlAction::Pause if write != RoomWrite::OtherSend => refuse(
                ErrorCode::Paused,
                told(
                    "paused",
                    "your messages, room changes and invitations are refused until a resume; \
                     status, tasks and usage still go through",
                ),
            ),
            _ => Ok(()),
        }
    }

    pub(super) fn control(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        control: Control,
    ) -> Result<Outcome, ExecError> {
        let agent = self.known_agent(caller, &control.agent)?;
        super::rooms::check_text(
            &control.reason,
            "reason",
            roundtable_protocol::limits::CONTROL_REASON,
        )?;
        let owner = agent.owner.as_deref() == Some(caller.id.as_str());
        if let Some(room) = &control.room {
            // A room the caller has nothing to do with is answered as one that does not
            // exist: it is a member or its creator, or owns an agent in it.
            let Some(state) = self.state.rooms.get(room).filter(|state| {
                state.members.contains_key(&caller.id)
                    || state.record.creator == caller.id
                    || (owner && state.members.contains_key(&agent.id))
            }) else {
                return refuse(
                    ErrorCode::NotFound,
                    "there is no room with this id that you are in; list yours with rooms",
                );
            };
            if !owner && state.record.creator != caller.id {
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
        // Amendment 2: a control the owner set is the owner's to lift or replace; a room's
        // creator changes only what a creator set in that room.
        let set_by_owner = |record: &ControlRecord| agent.owner.as_deref() == Some(&record.by);
        if !owner
            && self
                .state
                .controls
                .get(&agent.id)
                .into_iter()
                .flatten()
                .any(|record| record.room == control.room && set_by_owner(record))
        {
            return refuse(
                ErrorCode::Forbidden,
                format!(
                    "{}'s owner set the control in force here; only the owner may lift or \
                     replace it",
                    agent.handle
                ),
            );
        }
        match control.action {
            ControlAction::Pause | ControlAction::Stop => {
                let record = ControlRecord {
                    agent: agent.id.clone(),
                    room: control.room.clone(),
                    action: control.action,
                    by: caller.id.clone(),
                    ts_ms: now_ms,
                    reason: control.reason.clone(),
                };
                tx.set_control(&record)?;
                let controls = self.state.controls.entry(agent.id.clone()).or_default();
                controls.retain(|c| c.room != record.room);
                controls.push(record);
            }
            ControlAction::Resume => {
                // The owner's resume without a room lifts everything; otherwise only the
                // control of that room.
                let lifted: Vec<Option<String>> = self
                    .state
                    .controls
                    .get(&agent.id)
                    .into_iter()
                    .flatten()
                    .filter(|c| (owner && control.room.is_none()) || c.room == control.room)
                    .map(|c| c.room.clone())
                    .collect();
                for room in &lifted {
                    tx.delete_control(&agent.id, room.as_deref())?;
                }
                if let Some(controls) = self.state.controls.get_mut(&agent.id) {
                    controls.retain(|c| !lifted.contains(&c.room));
                    if controls.is_empty() {
                        self.state.controls.remove(&agent.id);
                    }
                }
                if agent.remote.is_some() && !lifted.is_empty() {
                    // A remote agent's calls waiting out the pause are made now.
                    let everywhere = lifted.iter().any(Option::is_none);
                    tx.remote(&crate::records::RemoteWrite::Wake {
                        remote: &agent.id,
                        room: if everywhere {
                            None
                        } else {
                            control.room.as_deref()
                        },
                        now_ms,
                    })?;
                }
            }
        }
        let body = ControlBody {
            action: control.action,
            room: control.room.clone(),
            by: caller.id.clone(),
            reason: control.reason.clone(),
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
            // Stopped, not revoked: the agent keeps its token and comes back after a resume.
            outcome.effects.push(Effect::Close {
                principal: agent.id.clone(),
                code: CloseCode::Stopped,
            });
        }
        outcome.audit_target = Some(match &control.room {
            Some(room) => format!("{} {} {room}", agent.id, control.action.as_str()),
            None => format!("{} {}", agent.id, control.action.as_str()),
        });
        outcome.audit_reason = control.reason;
        Ok(outcome)
    }
}

/// Someone's words as one line of JSON: a string, with `<` and `>` escaped (a reader sees
/// where they begin and end, and no tag in them).
fn quoted(text: &str) -> String {
    roundtable_protocol::text::tagless_json(&serde_json::to_string(text).unwrap_or_default())
}

fn token_action_str(action: TokenAction) -> &'static str {
    match action {
        TokenAction::Rotate => "rotate",
        TokenAction::Revoke => "revoke",
    }
}

/// An agent's write in a room, as pauses and stops see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RoomWrite {
    /// `send` of a `message`.
    Message,
    /// `send` of any other kind (status, tasks, usage…): a pause lets it through.
    OtherSend,
    /// `room_update`, `room_invite`.
    Change,
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
