//! Rooms and membership: create, invite, kick, update, leave, list, routing, read markers.

use std::sync::Arc;

use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::{MemberAction, MemberBody, RoomBody, RoomChangeBody};
use roundtable_protocol::client::{
    Ack, MemberSet, RoomCreate, RoomInvite, RoomKick, RoomLeave, RoomUpdate,
};
use roundtable_protocol::limits;
use roundtable_protocol::model::{PrincipalKind, Routing};
use roundtable_protocol::server::{OkReply, RoomOk, RoomsOk};

use super::existence::shown;
use super::governance::RoomWrite;
use super::principals::refuse_format_characters;
use super::{Caller, Engine, ExecError, NewEvent, Outcome, refuse};
use crate::records::{MemberRecord, PrincipalRecord, RoomRecord, StreamKey};
use crate::state::{Recipient, Recipients};
use crate::store::WriteTx;

pub(super) fn check_text(
    value: &Option<String>,
    what: &str,
    limit: usize,
) -> Result<(), ExecError> {
    if let Some(text) = value {
        if text.len() > limit {
            return refuse(
                ErrorCode::TooLarge,
                format!("the {what} is {} bytes; the limit is {limit}", text.len()),
            );
        }
        if text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            return refuse(
                ErrorCode::BadFrame,
                format!("the {what} must not contain control characters"),
            );
        }
        refuse_format_characters(text, what)?;
    }
    Ok(())
}

impl Engine {
    /// The room, if it exists and `caller` is a member; the protocol's `not_found` and
    /// `not_member` otherwise.
    pub(super) fn member_room(&self, room: &str, caller: &str) -> Result<(), ExecError> {
        match self.state.rooms.get(room) {
            None => refuse(
                ErrorCode::NotFound,
                format!("there is no room {}; list yours with rooms", shown(room)),
            ),
            Some(state) if !state.members.contains_key(caller) => refuse(
                ErrorCode::NotMember,
                format!(
                    "you are not a member of room {}; ask a member to invite you",
                    shown(room)
                ),
            ),
            Some(_) => Ok(()),
        }
    }

    /// Whether `inviter` may add `invitee` to a room: they are kin, or the invitee is a
    /// contact of the inviter or of the inviter's owner.
    pub(super) fn may_invite(&self, inviter: &PrincipalRecord, invitee: &PrincipalRecord) -> bool {
        self.state.are_kin(inviter, invitee)
            || self.state.is_contact(&inviter.id, &invitee.id)
            || self
                .state
                .is_contact(self.state.owner_of(inviter), &invitee.id)
    }

    /// Resolves a handle to invite, applying the invite rule.
    fn invitee(
        &self,
        inviter: &PrincipalRecord,
        handle: &str,
    ) -> Result<PrincipalRecord, ExecError> {
        let Some(invitee) = self.state.by_handle(handle) else {
            return refuse(
                ErrorCode::NotFound,
                format!("no principal has the handle {}", shown(handle)),
            );
        };
        if !self.may_invite(inviter, invitee) {
            if !self.state.may_see(inviter, invitee) {
                // Whom the inviter may not see does not exist, as far as it can tell.
                return refuse(
                    ErrorCode::NotFound,
                    format!("no principal has the handle {}", shown(handle)),
                );
            }
            return refuse(
                ErrorCode::NoConsent,
                format!("{handle} is not your kin nor a contact; send a contact request first"),
            );
        }
        Ok(invitee.clone())
    }

    pub(super) fn room_create(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        create: RoomCreate,
    ) -> Result<Outcome, ExecError> {
        check_text(&create.title, "title", limits::TITLE)?;
        check_text(&create.topic, "topic", limits::TOPIC)?;
        let creator = self.caller_record(caller)?.clone();
        let mut members = vec![creator.id.clone()];
        for handle in &create.members {
            let invitee = self.invitee(&creator, handle)?;
            if !members.contains(&invitee.id) {
                members.push(invitee.id);
            }
        }
        let room = RoomRecord {
            id: self.ids.id("r"),
            title: create.title,
            topic: create.topic,
            creator: creator.id.clone(),
            created_ms: now_ms,
        };
        let room_id = room.id.clone();
        let events = self.open_room(tx, now_ms, &creator.id, room, &members)?;
        let reply = RoomOk {
            room: self.state.wire_room(&self.state.rooms[&room_id]),
        };
        let mut outcome = Outcome::with_events(OkReply::with(create.id, &reply), events);
        outcome.audit_target = Some(room_id);
        Ok(outcome)
    }

    pub(super) fn room_invite(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        invite: RoomInvite,
    ) -> Result<Outcome, ExecError> {
        self.member_room(&invite.room, &caller.id)?;
        self.check_control(caller, &invite.room, RoomWrite::Change)?;
        // Inviting a member again is `ok` and changes nothing, whatever the invite rule
        // would say (amendment 4): the caller sees the members anyway.
        if let Some(member) = self.state.by_handle(&invite.handle)
            && self.state.is_member(&invite.room, &member.id)
        {
            return Ok(Outcome::ok(OkReply::empty(invite.id)));
        }
        let inviter = self.caller_record(caller)?.clone();
        let invitee = self.invitee(&inviter, &invite.handle)?;
        let events = self.join(tx, now_ms, &invite.room, &invitee.id, &inviter.id)?;
        Ok(Outcome {
            reply: super::Reply::Ok(OkReply::empty(invite.id)),
            events,
            effects: Vec::new(),
            audit_target: None,
            audit_reason: None,
        })
    }

    /// Adds a member: `member` join in the room, `room_added` in its inbox.
    pub(super) fn join(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        room: &str,
        principal: &str,
        by: &str,
    ) -> Result<Vec<NewEvent>, ExecError> {
        let record = MemberRecord {
            room: room.to_owned(),
            principal: principal.to_owned(),
            routing: self.default_routing(principal),
            joined_ms: now_ms,
        };
        tx.upsert_member(&record)?;
        self.state.add_member(room, principal, record.routing);
        let member = MemberBody {
            principal: principal.to_owned(),
            action: MemberAction::Join,
            by: by.to_owned(),
        };
        let added = RoomChangeBody {
            room: room.to_owned(),
            by: by.to_owned(),
        };
        let joined = self.append_hub(
            tx,
            now_ms,
            StreamKey::Room(room.to_owned()),
            by,
            "member",
            &member,
        )?;
        self.owe_remote_notice(tx, now_ms, &joined.record, principal)?;
        Ok(vec![
            joined,
            self.append_hub(
                tx,
                now_ms,
                StreamKey::Inbox(principal.to_owned()),
                by,
                "room_added",
                &added,
            )?,
        ])
    }

    /// Removes a member: `member` leave or kick in the room (which the departing principal
    /// still receives), `room_removed` in its inbox.
    fn depart(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        room: &str,
        principal: &str,
        by: &str,
        action: MemberAction,
    ) -> Result<Vec<NewEvent>, ExecError> {
        tx.delete_member(room, principal)?;
        self.state.remove_member(room, principal);
        let member = MemberBody {
            principal: principal.to_owned(),
            action,
            by: by.to_owned(),
        };
        let removed = RoomChangeBody {
            room: room.to_owned(),
            by: by.to_owned(),
        };
        let mut departure = self.append_hub(
            tx,
            now_ms,
            StreamKey::Room(room.to_owned()),
            by,
            "member",
            &member,
        )?;
        if let Recipients::Room { also_to, .. } = &mut departure.recipients {
            *also_to = Some(Recipient {
                id: Arc::from(principal),
                routing: Routing::All,
                agent: self.state.is_agent(principal),
            });
        }
        Ok(vec![
            departure,
            self.append_hub(
                tx,
                now_ms,
                StreamKey::Inbox(principal.to_owned()),
                by,
                "room_removed",
                &removed,
            )?,
        ])
    }

    pub(super) fn room_kick(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        kick: RoomKick,
    ) -> Result<Outcome, ExecError> {
        let Some(room) = self.state.rooms.get(&kick.room) else {
            return refuse(
                ErrorCode::NotFound,
                format!("there is no room {}", shown(&kick.room)),
            );
        };
        let creator = room.record.creator.clone();
        // An owner may always take its agent out of a room, member or not. Anyone else must
        // be a member (the creator acts as one), and names whom it may see: someone it may
        // not see is answered as no one (amendment 11).
        let own_agent = self
            .state
            .by_handle(&kick.handle)
            .filter(|target| target.owner.as_deref() == Some(caller.id.as_str()))
            .cloned();
        let target = match own_agent {
            Some(agent) => agent,
            None => {
                if !self.state.is_member(&kick.room, &caller.id) {
                    return refuse(
                        ErrorCode::NotMember,
                        format!("you are not a member of room {}", shown(&kick.room)),
                    );
                }
                let target = self.known_handle(caller, &kick.handle)?;
                if caller.id != creator {
                    return refuse(
                        ErrorCode::Forbidden,
                        "only the room's creator, or the owner of the agent, may remove it from \
                         the room",
                    );
                }
                target
            }
        };
        if !self.state.is_member(&kick.room, &target.id) {
            return refuse(
                ErrorCode::NotMember,
                format!("{} is not a member of this room", kick.handle),
            );
        }
        let events = self.depart(
            tx,
            now_ms,
            &kick.room,
            &target.id,
            &caller.id,
            MemberAction::Kick,
        )?;
        Ok(Outcome {
            reply: super::Reply::Ok(OkReply::empty(kick.id)),
            events,
            effects: Vec::new(),
            audit_target: None,
            audit_reason: None,
        })
    }

    pub(super) fn room_update(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        update: RoomUpdate,
    ) -> Result<Outcome, ExecError> {
        self.member_room(&update.room, &caller.id)?;
        self.check_control(caller, &update.room, RoomWrite::Change)?;
        check_text(&update.title, "title", limits::TITLE)?;
        check_text(&update.topic, "topic", limits::TOPIC)?;
        if update.title.is_none() && update.topic.is_none() {
            return refuse(ErrorCode::BadFrame, "give a title, a topic or both");
        }
        let room = self
            .state
            .rooms
            .get_mut(&update.room)
            .expect("checked above");
        if let Some(title) = &update.title {
            room.record.title = Some(title.clone());
        }
        if let Some(topic) = &update.topic {
            room.record.topic = Some(topic.clone());
        }
        let record = room.record.clone();
        tx.update_room(&record)?;
        let body = RoomBody {
            title: update.title,
            topic: update.topic,
        };
        let event = self.append_hub(
            tx,
            now_ms,
            StreamKey::Room(update.room),
            &caller.id,
            "room",
            &body,
        )?;
        Ok(Outcome {
            reply: super::Reply::Ok(OkReply::empty(update.id)),
            events: vec![event],
            effects: Vec::new(),
            audit_target: None,
            audit_reason: None,
        })
    }

    pub(super) fn room_leave(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        leave: RoomLeave,
    ) -> Result<Outcome, ExecError> {
        self.member_room(&leave.room, &caller.id)?;
        let events = self.depart(
            tx,
            now_ms,
            &leave.room,
            &caller.id,
            &caller.id,
            MemberAction::Leave,
        )?;
        Ok(Outcome {
            reply: super::Reply::Ok(OkReply::empty(leave.id)),
            events,
            effects: Vec::new(),
            audit_target: None,
            audit_reason: None,
        })
    }

    pub(super) fn rooms(&self, caller: &Caller, re: u64) -> Outcome {
        let rooms = self
            .state
            .rooms_of
            .get(&caller.id)
            .into_iter()
            .flatten()
            .filter_map(|room| self.state.rooms.get(room))
            .map(|room| self.state.wire_room(room))
            .collect();
        Outcome::ok(OkReply::with(re, &RoomsOk { rooms }))
    }

    pub(super) fn member_set(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        set: MemberSet,
    ) -> Result<Outcome, ExecError> {
        self.member_room(&set.room, &caller.id)?;
        if caller.kind == PrincipalKind::User {
            // Users always see every event of their rooms; the setting is an agent's.
            return Ok(Outcome::ok(OkReply::empty(set.id)));
        }
        let record = MemberRecord {
            room: set.room.clone(),
            principal: caller.id.clone(),
            routing: set.routing,
            joined_ms: now_ms,
        };
        tx.upsert_member(&record)?;
        self.state.add_member(&set.room, &caller.id, set.routing);
        Ok(Outcome::ok(OkReply::empty(set.id)))
    }

    pub(super) fn ack(
        &mut self,
        tx: &mut dyn WriteTx,
        caller: &Caller,
        ack: Ack,
    ) -> Result<Outcome, ExecError> {
        for (stream, seq) in &ack.cursors {
            let key = if stream == "inbox" {
                StreamKey::Inbox(caller.id.clone())
            } else if self.state.is_member(stream, &caller.id) {
                StreamKey::Room(stream.clone())
            } else {
                // Streams the caller cannot read are ignored, as the protocol says.
                continue;
            };
            let clamped = (*seq).min(self.state.head(&key));
            tx.set_ack(&caller.id, &caller.device, &key, clamped)?;
        }
        Ok(Outcome::ok(OkReply::empty(ack.id)))
    }
}
