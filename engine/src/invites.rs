//! Invite codes: how a remote teammate joins. The creator's consent is the code itself,
//! the redeemer's is redeeming it; the two become contacts, and with a room the redeemer a
//! member. Codes carry 256 random bits and are stored hashed.
//!
//! The creator may take its consent back: `invite_revoke` withdraws an invite for good, and
//! a room invite is void while its creator is not a member of the room (it cannot bring
//! anyone into a room it left, or was kicked from). `invites` lists what is still usable.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::ContactBody;
use roundtable_protocol::client::{InviteCreate, InviteRedeem, InviteRevoke};
use roundtable_protocol::model::{self, PrincipalKind, RequestState};
use roundtable_protocol::server::{InviteCreateOk, InviteRedeemOk, InvitesOk, OkReply};

use super::{Caller, Engine, ExecError, NewEvent, Outcome, Refusal, refuse};
use crate::ids::TokenHash;
use crate::records::{InviteRecord, RequestRecord, StreamKey};
use crate::store::WriteTx;

use roundtable_protocol::client::{
    INVITE_DEFAULT_EXPIRY_S as DEFAULT_EXPIRY_S, INVITE_MAX_EXPIRY_S as MAX_EXPIRY_S,
    INVITE_MAX_USES as MAX_USES,
};

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
            revoked_ms: None,
        };
        tx.upsert_invite(&invite)?;
        let link = format!(
            "roundtable://invite/{code}?hub={}",
            self.config.public_address
        );
        let reply = InviteCreateOk {
            code,
            link,
            invite: Some(invite.id.clone()),
        };
        let mut outcome = Outcome::ok(OkReply::with(create.id, &reply));
        outcome.audit_target = Some(match &invite.room {
            Some(room) => format!("{} {room}", invite.id),
            None => invite.id.clone(),
        });
        self.state.put_invite(invite, now_ms);
        Ok(outcome)
    }

    /// The invite a code names, if it can still be redeemed by `redeemer`. One that cannot
    /// is no longer in memory, and is read from the store to say why.
    pub(super) fn usable_invite(
        &self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        code: &str,
        redeemer: Option<&str>,
    ) -> Result<InviteRecord, ExecError> {
        let hash = TokenHash::of(code.trim());
        let invite = match self.state.invites.get(&hash) {
            Some(invite) => Some(invite.clone()),
            None => tx.invite_by_code(&hash)?,
        };
        Self::check_usable(&self.state, invite, now_ms, redeemer).map_err(ExecError::Refused)
    }

    fn check_usable(
        state: &crate::state::HubState,
        invite: Option<InviteRecord>,
        now_ms: i64,
        redeemer: Option<&str>,
    ) -> Result<InviteRecord, Refusal> {
        let Some(invite) = invite else {
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
        // Withdrawn is `conflict`, like used up and expired, not `not_found`: whoever holds
        // the code already knows the invite exists (a code is 256 random bits, never
        // guessed), so nothing leaks, and the person learns to ask for a new one instead of
        // doubting the link.
        if invite.revoked_ms.is_some() {
            return Err(Refusal::new(
                ErrorCode::Conflict,
                "this invite was withdrawn by the person who created it; ask them for a new one",
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
        if let Some(room) = &invite.room
            && state.rooms.contains_key(room)
            && !state.is_member(room, &invite.creator)
        {
            return Err(Refusal::new(
                ErrorCode::Conflict,
                "this invite is void while the person who created it is not in its room; \
                 ask them to rejoin the room or to send a new invite",
            ));
        }
        Ok(invite)
    }

    /// The caller's invites that can still be redeemed, oldest first: neither withdrawn,
    /// used up nor expired. A room invite the caller cannot honour now, having left the
    /// room, is listed too: it works again if the caller rejoins, so the caller may want to
    /// withdraw it. Invites are few per hub, so a scan of them all is cheap enough here.
    pub(super) fn invites(
        &self,
        now_ms: i64,
        caller: &Caller,
        re: u64,
    ) -> Result<Outcome, ExecError> {
        if caller.kind != PrincipalKind::User {
            return refuse(
                ErrorCode::Forbidden,
                "only users have invites; ask your owner",
            );
        }
        let mut mine: Vec<&InviteRecord> = self
            .state
            .invites
            .values()
            .filter(|invite| invite.creator == caller.id)
            .filter(|invite| {
                invite.revoked_ms.is_none()
                    && invite.uses < invite.max_uses
                    && now_ms < invite.expires_ms
            })
            .collect();
        mine.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        let invites = mine
            .into_iter()
            .map(|invite| model::Invite {
                id: invite.id.clone(),
                room: invite.room.clone(),
                uses_left: invite.max_uses - invite.uses,
                expires_at: roundtable_protocol::ts::format_millis(invite.expires_ms),
                created_at: roundtable_protocol::ts::format_millis(invite.created_ms),
            })
            .collect();
        Ok(Outcome::ok(OkReply::with(re, &InvitesOk { invites })))
    }

    /// Withdraws one of the caller's invites for good. An id that is unknown or names
    /// someone else's invite is `not_found` either way, so ids reveal nothing. Withdrawing
    /// an invite again, or one already used up or expired, is `ok` and changes nothing more.
    pub(super) fn invite_revoke(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        revoke: InviteRevoke,
    ) -> Result<Outcome, ExecError> {
        if caller.kind != PrincipalKind::User {
            return refuse(
                ErrorCode::Forbidden,
                "only users have invites to withdraw; ask your owner",
            );
        }
        // Read from the store, where every invite is (memory keeps only redeemable ones).
        let Some(invite) = tx
            .invite(&revoke.invite)?
            .filter(|invite| invite.creator == caller.id)
        else {
            return refuse(
                ErrorCode::NotFound,
                "you have no invite with this id; `invites` lists yours \
                 (withdraw one by its id, i_…, not by its code)",
            );
        };
        let mut outcome = Outcome::ok(OkReply::empty(revoke.id));
        outcome.audit_target = Some(invite.id.clone());
        if invite.revoked_ms.is_none() {
            let mut invite = invite;
            invite.revoked_ms = Some(now_ms);
            tx.upsert_invite(&invite)?;
            self.state.put_invite(invite, now_ms);
        }
        Ok(outcome)
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
        let invite = self.usable_invite(tx, now_ms, &redeem.code, Some(&caller.id))?;
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
        self.state.put_invite(invite.clone(), now_ms);
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
                held: None,
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
