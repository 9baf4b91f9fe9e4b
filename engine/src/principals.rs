//! Principals: signup, authentication, agent registration and profiles.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::{MemberAction, MemberBody, RoomBody, RoomChangeBody};
use roundtable_protocol::client::{ProfileSet, RegisterAgent, RegisterRemoteAgent, SignupRequest};
use roundtable_protocol::handles;
use roundtable_protocol::limits;
use roundtable_protocol::model::{AgentCard, Discoverable, PrincipalKind};
use roundtable_protocol::server::{OkReply, ProfileOk, RegisterAgentOk, RegisterRemoteAgentOk};
use serde::Deserialize;

use super::{Caller, Engine, ExecError, NewEvent, Outcome, Refusal, Via, refuse};
use crate::ids::{self, TokenHash};
use crate::records::{MemberRecord, PrincipalRecord, RoomRecord, StreamKey, TokenRecord};
use crate::settings::SignupMode;
use crate::store::{WriteError, WriteTx};

/// A new user and its token (shown once).
#[derive(Debug)]
pub struct SignupOutcome {
    pub principal: roundtable_protocol::model::Principal,
    pub token: String,
    /// Events the redeemed invite wrote (contact, room membership), to deliver.
    pub events: Vec<NewEvent>,
}

/// Checks a display name: 1 to 128 bytes, no control characters.
pub(crate) fn check_name(name: &str, what: &str) -> Result<(), ExecError> {
    if name.trim().is_empty() {
        return refuse(ErrorCode::BadFrame, format!("{what} must not be empty"));
    }
    // A name is part of a principal's identity, like its handle: an invalid one is a bad
    // frame (as signup's contract has it), not an oversized text.
    if name.len() > limits::NAME {
        return refuse(
            ErrorCode::BadFrame,
            format!(
                "{what} is {} bytes; the limit is {}",
                name.len(),
                limits::NAME
            ),
        );
    }
    if name.chars().any(char::is_control) {
        return refuse(
            ErrorCode::BadFrame,
            format!("{what} must not contain control characters"),
        );
    }
    refuse_format_characters(name, what)
}

/// Refuses a name, title, topic or description holding a Unicode format character (bidi
/// controls, zero-width characters: amendment 7, see `roundtable_protocol::text`).
pub(crate) fn refuse_format_characters(text: &str, what: &str) -> Result<(), ExecError> {
    match roundtable_protocol::text::find_format_character(text) {
        None => Ok(()),
        Some(found) => refuse(
            ErrorCode::BadFrame,
            format!(
                "the {what} holds the invisible format character U+{:04X}; remove it (bidi \
                 controls and zero-width characters are not allowed in names, titles, topics \
                 and descriptions)",
                found as u32
            ),
        ),
    }
}

/// How widely a `discoverable` setting shows a principal: an agent may lower it on its
/// own, only its owner may raise it (amendment 3).
fn reach(discoverable: Discoverable) -> u8 {
    match discoverable {
        Discoverable::Private => 0,
        Discoverable::Contacts => 1,
        Discoverable::Public => 2,
    }
}

impl Engine {
    /// Finds the principal a presented token identifies; a refusal is recorded in the
    /// audit log. An agent stopped everywhere may not connect until it is resumed.
    pub fn authenticate(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        token: &str,
        via: Via,
    ) -> Result<Result<PrincipalRecord, Refusal>, WriteError> {
        let result = self.find_token(token);
        if let Err(refusal) = &result {
            self.audit_refusal(tx, now_ms, "", "auth", None, refusal, via)?;
        }
        Ok(result)
    }

    fn find_token(&self, token: &str) -> Result<PrincipalRecord, Refusal> {
        let unauthorized = || {
            Refusal::new(
                ErrorCode::Unauthorized,
                "the token is unknown, revoked or malformed; log in again with a valid token (an agent gets a new one from its owner)",
            )
        };
        if !ids::is_token_shaped(token) {
            return Err(unauthorized());
        }
        let record = self
            .state
            .tokens
            .get(&TokenHash::of(token))
            .ok_or_else(unauthorized)?;
        if record.revoked {
            return Err(unauthorized());
        }
        let principal = self
            .state
            .principal(&record.principal)
            .cloned()
            .ok_or_else(unauthorized)?;
        if self.state.stopped(&principal.id) {
            return Err(Refusal::new(
                ErrorCode::Paused,
                "this agent is stopped by its owner; it can connect again after a resume",
            ));
        }
        Ok(principal)
    }

    /// Creates a user (`POST /v1/signup`, or the operator's `roundtable hub user add` with
    /// `SignupMode::Open`), redeeming the invite it carries; recorded in the audit log.
    pub fn signup(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        mode: SignupMode,
        request: SignupRequest,
    ) -> Result<SignupOutcome, ExecError> {
        let handle = request.handle.clone();
        match self.signup_unaudited(tx, now_ms, mode, request) {
            Ok((outcome, events)) => {
                self.audit(
                    tx,
                    now_ms,
                    &outcome.principal.id,
                    "signup",
                    Some(handle),
                    None,
                )?;
                Ok(SignupOutcome { events, ..outcome })
            }
            Err(ExecError::Refused(refusal)) => {
                self.audit_refusal(tx, now_ms, "", "signup", Some(handle), &refusal, Via::Ws)?;
                Err(ExecError::Refused(refusal))
            }
            Err(error) => Err(error),
        }
    }

    fn signup_unaudited(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        mode: SignupMode,
        request: SignupRequest,
    ) -> Result<(SignupOutcome, Vec<NewEvent>), ExecError> {
        handles::validate_user_handle(&request.handle)
            .map_err(|error| ExecError::Refused(Refusal::new(ErrorCode::BadFrame, error.0)))?;
        check_name(&request.name, "name")?;
        let invite = match (&request.invite, mode) {
            (_, SignupMode::Closed) => {
                return refuse(
                    ErrorCode::Forbidden,
                    "this hub is closed to signups; its operator creates users with \
                     `roundtable hub user add`",
                );
            }
            (None, SignupMode::Invite) => {
                return refuse(
                    ErrorCode::Forbidden,
                    "this hub signs up users with an invite code only; ask a member for one",
                );
            }
            (None, SignupMode::Open) => None,
            (Some(code), _) => Some(self.usable_invite(tx, now_ms, code, None).map_err(
                |error| match error {
                    // Over HTTP every unusable invite is a 403, whatever the reason.
                    ExecError::Refused(refusal) => ExecError::Refused(Refusal::new(
                        ErrorCode::Forbidden,
                        format!("the invite cannot be used: {}", refusal.msg),
                    )),
                    other => other,
                },
            )?),
        };
        self.check_handle_free(&request.handle)?;
        let record = PrincipalRecord {
            id: self.ids.id("p"),
            kind: PrincipalKind::User,
            handle: request.handle,
            name: request.name,
            owner: None,
            discoverable: request.discoverable.unwrap_or_default(),
            description: None,
            card: None,
            created_ms: now_ms,
            remote: None,
        };
        let token = self.create_principal(tx, now_ms, record.clone())?;
        let events = match invite {
            Some(invite) => self.redeem(tx, now_ms, &record.id, invite)?.0,
            None => Vec::new(),
        };
        Ok((
            SignupOutcome {
                principal: self.state.wire_principal(&record),
                token,
                events: Vec::new(),
            },
            events,
        ))
    }

    /// A handle is free when no principal has it, nor one that looks like it.
    fn check_handle_free(&self, handle: &str) -> Result<(), ExecError> {
        if self.state.handles.contains_key(handle) {
            return refuse(
                ErrorCode::Conflict,
                format!("the handle {handle:?} is taken; choose another"),
            );
        }
        if let Some(existing) = self.state.skeletons.get(&handles::skeleton(handle)) {
            return refuse(
                ErrorCode::Conflict,
                format!(
                    "the handle {handle:?} looks too much like the existing {existing:?}; \
                     choose one that cannot be mistaken for it"
                ),
            );
        }
        Ok(())
    }

    /// Stores a new principal and its first token; returns the token.
    fn create_principal(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        record: PrincipalRecord,
    ) -> Result<String, ExecError> {
        let (token, hash) = self.ids.token();
        let token_record = TokenRecord {
            hash,
            principal: record.id.clone(),
            revoked: false,
        };
        self.add_principal(tx, record)?;
        tx.insert_token(&token_record, now_ms)?;
        self.state.add_token(token_record);
        Ok(token)
    }

    /// Writes a new principal and keeps it in memory (its handle reserved from now on).
    fn add_principal(
        &mut self,
        tx: &mut dyn WriteTx,
        record: PrincipalRecord,
    ) -> Result<(), ExecError> {
        tx.insert_principal(&record)?;
        if let Some(owner) = &record.owner {
            *self.state.agents_of.entry(owner.clone()).or_default() += 1;
        }
        self.state
            .handles
            .insert(record.handle.clone(), record.id.clone());
        self.state
            .skeletons
            .insert(handles::skeleton(&record.handle), record.handle.clone());
        self.state.principals.insert(record.id.clone(), record);
        Ok(())
    }

    pub(super) fn register_agent(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        register: RegisterAgent,
    ) -> Result<Outcome, ExecError> {
        let (owner, handle) =
            self.check_new_agent(caller, &register.name, register.description.as_deref())?;
        let card = match &register.card {
            None => None,
            Some(card) if !card.is_object() => {
                return refuse(ErrorCode::BadFrame, "the agent card must be a JSON object");
            }
            Some(card) => {
                let text = serde_json::to_string(card).expect("JSON values serialize");
                if text.len() > limits::CARD {
                    return refuse(
                        ErrorCode::TooLarge,
                        format!(
                            "the agent card is {} bytes; the limit is {}",
                            text.len(),
                            limits::CARD
                        ),
                    );
                }
                if let Err(error) = AgentCard::deserialize(card) {
                    return refuse(
                        ErrorCode::BadFrame,
                        format!(
                            "invalid agent card: {error}; give framework, model and version as \
                             strings and skills as [{{\"id\", \"name\", \"description\"?, \"tags\"?}}]"
                        ),
                    );
                }
                Some(text)
            }
        };
        let agent = self.agent_record(
            &owner,
            handle,
            &register.name,
            register.discoverable,
            register.description,
            now_ms,
        );
        let agent = PrincipalRecord { card, ..agent };
        let token = self.create_principal(tx, now_ms, agent.clone())?;
        let (room, events) = self.open_home_room(tx, now_ms, &owner.id, &agent)?;
        let reply = RegisterAgentOk {
            agent: self.state.wire_principal(&agent),
            token,
            room: Some(self.state.wire_room(&self.state.rooms[&room])),
        };
        let mut outcome = Outcome::with_events(OkReply::with(register.id, &reply), events);
        outcome.audit_target = Some(agent.id.clone());
        Ok(outcome)
    }

    /// An agent another A2A server runs: a principal with no token, called at its card's
    /// endpoint when a message mentions it (see `remote.rs`), with the credential given here.
    pub(super) fn register_remote_agent(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        register: RegisterRemoteAgent,
    ) -> Result<Outcome, ExecError> {
        let (owner, handle) =
            self.check_new_agent(caller, &register.name, register.description.as_deref())?;
        let card_url =
            crate::outbound_guard::check_card_url(&self.config.outbound, &register.card_url)
                .map_err(|error| ExecError::Refused(Refusal::new(ErrorCode::BadFrame, error)))?
                .to_string();
        if let Some(credential) = &register.credential {
            crate::outbound_guard::check_credential(credential)
                .map_err(|error| ExecError::Refused(Refusal::new(ErrorCode::BadFrame, error)))?;
        }
        let agent = self.agent_record(
            &owner,
            handle,
            &register.name,
            register.discoverable,
            register.description,
            now_ms,
        );
        let agent = PrincipalRecord {
            remote: Some(card_url.clone()),
            ..agent
        };
        self.add_principal(tx, agent.clone())?;
        if let Some(credential) = &register.credential {
            tx.remote(&crate::records::RemoteWrite::Credential {
                principal: &agent.id,
                credential,
            })?;
        }
        let (room, events) = self.open_home_room(tx, now_ms, &owner.id, &agent)?;
        let reply = RegisterRemoteAgentOk {
            agent: self.state.wire_principal(&agent),
            card_url,
            room: Some(self.state.wire_room(&self.state.rooms[&room])),
        };
        let mut outcome = Outcome::with_events(OkReply::with(register.id, &reply), events);
        outcome.audit_target = Some(agent.id.clone());
        Ok(outcome)
    }

    /// A new agent of `owner` (no card, not remote), its display name its `<name>`.
    fn agent_record(
        &mut self,
        owner: &PrincipalRecord,
        handle: String,
        name: &str,
        discoverable: Option<Discoverable>,
        description: Option<String>,
        now_ms: i64,
    ) -> PrincipalRecord {
        PrincipalRecord {
            id: self.ids.id("p"),
            kind: PrincipalKind::Agent,
            handle,
            name: name.to_owned(),
            owner: Some(owner.id.clone()),
            discoverable: discoverable.unwrap_or(Discoverable::Contacts),
            description,
            card: None,
            created_ms: now_ms,
            remote: None,
        }
    }

    /// The checks before a user registers an agent: who may, how many, the name and its
    /// description. Returns the owner and the new handle.
    fn check_new_agent(
        &self,
        caller: &Caller,
        name: &str,
        description: Option<&str>,
    ) -> Result<(PrincipalRecord, String), ExecError> {
        let owner = self.caller_record(caller)?.clone();
        if owner.kind != PrincipalKind::User {
            return refuse(
                ErrorCode::Forbidden,
                "only users register agents; ask your owner to register it",
            );
        }
        let max_agents = self.config.max_agents_per_user;
        if self.state.agents_of.get(&owner.id).copied().unwrap_or(0) >= max_agents {
            return refuse(
                ErrorCode::Conflict,
                format!("you have {max_agents} agents, the most this hub allows one user"),
            );
        }
        handles::validate_segment(name, "agent name")
            .map_err(|error| ExecError::Refused(Refusal::new(ErrorCode::BadFrame, error.0)))?;
        let handle = handles::agent_handle(&owner.handle, name);
        if let Some(description) = description {
            if description.len() > limits::DESCRIPTION {
                return refuse(
                    ErrorCode::TooLarge,
                    format!(
                        "the description is {} bytes; the limit is {}",
                        description.len(),
                        limits::DESCRIPTION
                    ),
                );
            }
            refuse_format_characters(description, "description")?;
        }
        self.check_handle_free(&handle)?;
        Ok((owner, handle))
    }

    /// An agent's home room: its owner and itself. Returns the room's id and its events.
    fn open_home_room(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        owner: &str,
        agent: &PrincipalRecord,
    ) -> Result<(String, Vec<NewEvent>), ExecError> {
        let room = RoomRecord {
            id: self.ids.id("r"),
            title: Some(agent.handle.clone()),
            topic: None,
            creator: owner.to_owned(),
            created_ms: now_ms,
        };
        let id = room.id.clone();
        let events = self.open_room(
            tx,
            now_ms,
            owner,
            room,
            &[owner.to_owned(), agent.id.clone()],
        )?;
        Ok((id, events))
    }

    /// Creates a room with its members (already checked) and writes the room's first events:
    /// `room`, a `member` join per member, and each member's `room_added`.
    pub(super) fn open_room(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        creator: &str,
        room: RoomRecord,
        members: &[String],
    ) -> Result<Vec<NewEvent>, ExecError> {
        tx.insert_room(&room)?;
        let room_id = room.id.clone();
        let room_body = RoomBody {
            title: room.title.clone(),
            topic: room.topic.clone(),
        };
        self.state
            .rooms
            .insert(room_id.clone(), crate::state::RoomState::new(room));
        for member in members {
            let record = MemberRecord {
                room: room_id.clone(),
                principal: member.clone(),
                routing: self.default_routing(member),
                joined_ms: now_ms,
            };
            tx.upsert_member(&record)?;
            self.state.add_member(&room_id, member, record.routing);
        }
        let stream = StreamKey::Room(room_id.clone());
        let mut events =
            vec![self.append_hub(tx, now_ms, stream.clone(), creator, "room", &room_body)?];
        for member in members {
            let body = MemberBody {
                principal: member.clone(),
                action: MemberAction::Join,
                by: creator.to_owned(),
            };
            let joined = self.append_hub(tx, now_ms, stream.clone(), creator, "member", &body)?;
            self.owe_remote_notice(tx, now_ms, &joined.record, member)?;
            events.push(joined);
        }
        for member in members {
            let body = RoomChangeBody {
                room: room_id.clone(),
                by: creator.to_owned(),
            };
            events.push(self.append_hub(
                tx,
                now_ms,
                StreamKey::Inbox(member.clone()),
                creator,
                "room_added",
                &body,
            )?);
        }
        Ok(events)
    }

    pub(super) fn profile_set(
        &mut self,
        tx: &mut dyn WriteTx,
        caller: &Caller,
        set: ProfileSet,
    ) -> Result<Outcome, ExecError> {
        let mut record = match set.principal.as_deref() {
            None => self.caller_record(caller)?.clone(),
            Some(id) if id == caller.id => self.caller_record(caller)?.clone(),
            // One of the caller's agents; `not_found` for one it may not see.
            Some(id) => {
                let agent = self.known_agent(caller, id)?;
                if agent.owner.as_deref() != Some(caller.id.as_str()) {
                    return refuse(
                        ErrorCode::Forbidden,
                        format!(
                            "{} is not your agent: set your own profile, or your agents'",
                            agent.handle
                        ),
                    );
                }
                agent
            }
        };
        if let Some(name) = &set.name {
            check_name(name, "name")?;
            record.name = name.clone();
        }
        if let Some(discoverable) = set.discoverable {
            if record.id == caller.id
                && caller.kind == PrincipalKind::Agent
                && reach(discoverable) > reach(record.discoverable)
            {
                return refuse(
                    ErrorCode::Forbidden,
                    format!(
                        "an agent may make itself less discoverable, not more: ask your owner \
                         to set {} (profile_set with principal)",
                        discoverable.as_str()
                    ),
                );
            }
            record.discoverable = discoverable;
        }
        tx.update_principal(&record)?;
        let reply = ProfileOk {
            principal: self.state.wire_principal(&record),
        };
        self.state.principals.insert(record.id.clone(), record);
        Ok(Outcome::ok(OkReply::with(set.id, &reply)))
    }
}
