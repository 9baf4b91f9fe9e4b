//! Invite codes: how a remote teammate joins. The creator's consent is the code itself,
//! the redeemer's is redeeming it; the two become contacts, and with a room the redeemer a
//! member. Codes carry 256 random bits and are stored hashed.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::ContactBody;
use roundtable_protocol::client::{InviteCreate, InviteRedeem};
use roundtable_protocol::model::{PrincipalKind, RequestState};
use roundtable_protocol::server::{InviteCreateOk, InviteRedeemOk, OkReply};

use super::{Caller, Engine, ExecError, NewEvent, Outcome, Refusal, refuse};
use crate::ids::TokenHash;
use crate::store::{InviteRecord, RequestRecord, StreamKey, WriteTx};

const DEFAULT_EXPIRY_S: u64 = 7 * 24 * 60 * 60;
const MAX_EXPIRY_S: u64 = 90 * 24 * 60 * 60;
const MAX_USES: u32 = 1000;

impl Engine {
    pub(super) fn invite_create(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        create: InviteCreate,
    ) -> Result<Outcome, ExecError> {
        if caller.kind != PrincipalKind::User {
            return refuse(
                ErrorCode::Forbidden,
                "only users create invites; ask your owner",
            );
        }
        if let Some(room) = &create.room {
            self.member_room(room, &caller.id)?;
        }
        let max_uses = create.max_uses.unwrap_or(1);
        if !(1..=MAX_USES).contains(&max_uses) {
            return refuse(
                ErrorCode::BadFrame,
                format!("max_uses must be 1 to {MAX_USES}"),
            );
        }
        let expires_in_s = create.expires_in_s.unwrap_or(DEFAULT_EXPIRY_S);
        if !(1..=MAX_EXPIRY_S).contains(&expires_in_s) {
            return refuse(
                ErrorCode::BadFrame,
                format!("expires_in_s must be 1 to {MAX_EXPIRY_S} (90 days)"),
            );
        }
        let code = self.ids.secret("");
        let invite = InviteRecord {
            id: self.ids.id("i"),
            code_hash: TokenHash::of(&code),
            creator: caller.id.clone(),
            room: create.room,
            max_uses,
            uses: 0,
            expires_ms: now_ms + (expires_in_s as i64) * 1000,
            created_ms: now_ms,
        };
        tx.upsert_invite(&invite)?;
        let link = format!(
            "roundtable://invite/{code}?hub={}",
            self.config.public_address
        );
        let mut outcome = Outcome::ok(OkReply::with(create.id, &InviteCreateOk { code, link }));
        outcome.audit_target = Some(match &invite.room {
            Some(room) => format!("{} {room}", invite.id),
            None => invite.id.clone(),
        });
        self.state.invites.insert(invite.code_hash, invite);
        Ok(outcome)
    }

    /// The invite a code names, if it can still be redeemed by `redeemer`.
    pub(super) fn usable_invite(
        &self,
        now_ms: i64,
        code: &str,
        redeemer: Option<&str>,
    ) -> Result<InviteRecord, Refusal> {
        let Some(invite) = self.state.invites.get(&TokenHash::of(code.trim())) else {
            return Err(Refusal::new(
                ErrorCode::NotFound,
                "this invite code is not known to this hub; check the link",
            ));
        };
        if redeemer == Some(invite.creator.as_str()) {
            return Err(Refusal::new(
                ErrorCode::Conflict,
                "this is your own invite; send it to the person you want to invite",
            ));
        }
        if invite.uses >= invite.max_uses {
            return Err(Refusal::new(
                ErrorCode::Conflict,
                "this invite has been used up; ask for a new one",
            ));
        }
        if now_ms >= invite.expires_ms {
            return Err(Refusal::new(
                ErrorCode::Conflict,
                "this invite has expired; ask for a new one",
            ));
        }
        Ok(invite.clone())
    }

    pub(super) fn invite_redeem(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        redeem: InviteRedeem,
    ) -> Result<Outcome, ExecError> {
        if caller.kind != PrincipalKind::User {
            return refuse(
                ErrorCode::Forbidden,
                "only users redeem invites; your owner can, then invite you",
            );
        }
        let invite = self
            .usable_invite(now_ms, &redeem.code, Some(&caller.id))
            .map_err(ExecError::Refused)?;
        let invite_id = invite.id.clone();
        let (events, room) = self.redeem(tx, now_ms, &caller.id, invite)?;
        let room =
            room.and_then(|room| self.state.rooms.get(&room).map(|r| self.state.wire_room(r)));
        let mut outcome =
            Outcome::with_events(OkReply::with(redeem.id, &InviteRedeemOk { room }), events);
        outcome.audit_target = Some(invite_id);
        Ok(outcome)
    }

    /// Uses an invite: counts the use, makes the redeemer and the creator contacts (a
    /// request accepted on both sides, announced to both), and adds the redeemer to the
    /// invite's room. Returns the events and the room joined.
    pub(super) fn redeem(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        redeemer: &str,
        mut invite: InviteRecord,
    ) -> Result<(Vec<NewEvent>, Option<String>), ExecError> {
        invite.uses += 1;
        tx.upsert_invite(&invite)?;
        self.state.invites.insert(invite.code_hash, invite.clone());
        let mut events = Vec::new();
        let kin = match (
            self.state.principal(redeemer),
            self.state.principal(&invite.creator),
        ) {
            (Some(a), Some(b)) => self.state.are_kin(a, b),
            _ => false,
        };
        if !kin && !self.state.is_contact(redeemer, &invite.creator) {
            let request = RequestRecord {
                id: self.ids.id("c"),
                from: redeemer.to_owned(),
                to: invite.creator.clone(),
                state: RequestState::Accepted,
                message: None,
                created_ms: now_ms,
                decided_ms: Some(now_ms),
            };
            tx.upsert_request(&request)?;
            self.state.put_request(request.clone());
            self.make_contact(tx, now_ms, redeemer, &invite.creator, Some(&request.id))?;
            let body = ContactBody {
                request: request.id.clone(),
                from: request.from.clone(),
                to: request.to.clone(),
                state: RequestState::Accepted,
                message: None,
            };
            for principal in [redeemer.to_owned(), invite.creator.clone()] {
                events.push(self.append_hub(
                    tx,
                    now_ms,
                    StreamKey::Inbox(principal),
                    redeemer,
                    "contact",
                    &body,
                )?);
            }
        }
        let room = invite
            .room
            .clone()
            .filter(|room| self.state.rooms.contains_key(room));
        if let Some(room) = &room
            && !self.state.is_member(room, redeemer)
        {
            events.extend(self.join(tx, now_ms, room, redeemer, &invite.creator)?);
        }
        Ok((events, room))
    }
}
