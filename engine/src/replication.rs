//! What one hub process tells the others when several share a database.
//!
//! Each process keeps the whole command state in memory and decides commands from it, as a
//! lone hub does. To stay exact with others writing the same database, every process's
//! batches are serialised by one lock taken at the start of the batch's transaction, and
//! every committed batch leaves a [`SharedBatch`] numbered in that order: the changes it
//! wrote ([`WriteOp`], which the others apply to their memory before deciding anything
//! after it) and what it delivered (events with the recipients of their moment, connections
//! to close, devices that authenticated), which every other process fans out to its own
//! connections in the same order. So the processes make one hub: one order of commands,
//! one order of events per stream, wherever a client is connected.

use std::sync::Arc;

use crate::ids::TokenHash;
use crate::records::{
    AuditRecord, ContactRecord, ControlRecord, EventRecord, InviteRecord, MemberRecord, PingRecord,
    PrincipalRecord, RequestRecord, RoomRecord, StreamKey, TokenRecord,
};
use crate::records::{Committed, SharedBatch, SharedRecipient, SharedRecipients, WriteOp};
use crate::state::{Recipient, Recipients};
use crate::store::{WriteError, WriteTx};

impl From<&Recipient> for SharedRecipient {
    fn from(recipient: &Recipient) -> SharedRecipient {
        SharedRecipient {
            id: recipient.id.to_string(),
            routing: recipient.routing,
            agent: recipient.agent,
        }
    }
}

impl From<&SharedRecipient> for Recipient {
    fn from(recipient: &SharedRecipient) -> Recipient {
        Recipient {
            id: Arc::from(recipient.id.as_str()),
            routing: recipient.routing,
            agent: recipient.agent,
        }
    }
}

impl From<&Recipients> for SharedRecipients {
    fn from(recipients: &Recipients) -> SharedRecipients {
        match recipients {
            Recipients::Room { members, also_to } => SharedRecipients::Room {
                members: members.iter().map(SharedRecipient::from).collect(),
                also_to: also_to.as_ref().map(SharedRecipient::from),
            },
            Recipients::One(principal) => SharedRecipients::One {
                principal: principal.to_string(),
            },
        }
    }
}

impl From<&SharedRecipients> for Recipients {
    fn from(recipients: &SharedRecipients) -> Recipients {
        match recipients {
            SharedRecipients::Room { members, also_to } => Recipients::Room {
                members: members.iter().map(Recipient::from).collect(),
                also_to: also_to.as_ref().map(Recipient::from),
            },
            SharedRecipients::One { principal } => Recipients::One(Arc::from(principal.as_str())),
        }
    }
}

/// The delivered events with their stored records, in order.
pub fn delivered_events(batch: &SharedBatch) -> Vec<(EventRecord, Recipients)> {
    let mut stored: rustc_hash::FxHashMap<(&StreamKey, u64), &EventRecord> = Default::default();
    for op in &batch.ops {
        if let WriteOp::AppendEvent { event } = op {
            stored.insert((&event.stream, event.seq), event);
        }
    }
    batch
        .events
        .iter()
        .filter_map(|shared| {
            let record = stored.get(&(&shared.stream, shared.seq))?;
            Some(((*record).clone(), Recipients::from(&shared.recipients)))
        })
        .collect()
}

/// A transaction that also notes each change it writes, to share them (when `recording`:
/// a lone hub has nobody to tell).
pub struct RecordingTx<'a> {
    pub inner: Box<dyn WriteTx + 'a>,
    pub ops: Vec<WriteOp>,
    recording: bool,
}

impl<'a> RecordingTx<'a> {
    pub fn new(inner: Box<dyn WriteTx + 'a>, recording: bool) -> RecordingTx<'a> {
        RecordingTx {
            inner,
            ops: Vec::new(),
            recording,
        }
    }

    fn note(&mut self, op: impl FnOnce() -> WriteOp) {
        if self.recording {
            self.ops.push(op());
        }
    }
}

impl WriteTx for RecordingTx<'_> {
    /// Nothing to share: no process keeps remote agents' calls or threads in memory.
    fn remote(&mut self, write: &crate::records::RemoteWrite<'_>) -> Result<u64, WriteError> {
        self.inner.remote(write)
    }

    fn insert_principal(&mut self, principal: &PrincipalRecord) -> Result<(), WriteError> {
        self.inner.insert_principal(principal)?;
        self.note(|| WriteOp::InsertPrincipal {
            principal: principal.clone(),
        });
        Ok(())
    }

    fn update_principal(&mut self, principal: &PrincipalRecord) -> Result<(), WriteError> {
        self.inner.update_principal(principal)?;
        self.note(|| WriteOp::UpdatePrincipal {
            principal: principal.clone(),
        });
        Ok(())
    }

    fn insert_token(&mut self, token: &TokenRecord, now_ms: i64) -> Result<(), WriteError> {
        self.inner.insert_token(token, now_ms)?;
        self.note(|| WriteOp::InsertToken {
            token: token.clone(),
        });
        Ok(())
    }

    fn revoke_tokens(&mut self, principal: &str, now_ms: i64) -> Result<(), WriteError> {
        self.inner.revoke_tokens(principal, now_ms)?;
        self.note(|| WriteOp::RevokeTokens {
            principal: principal.to_owned(),
        });
        Ok(())
    }

    fn insert_room(&mut self, room: &RoomRecord) -> Result<(), WriteError> {
        self.inner.insert_room(room)?;
        self.note(|| WriteOp::InsertRoom { room: room.clone() });
        Ok(())
    }

    fn update_room(&mut self, room: &RoomRecord) -> Result<(), WriteError> {
        self.inner.update_room(room)?;
        self.note(|| WriteOp::UpdateRoom { room: room.clone() });
        Ok(())
    }

    fn upsert_member(&mut self, member: &MemberRecord) -> Result<(), WriteError> {
        self.inner.upsert_member(member)?;
        self.note(|| WriteOp::UpsertMember {
            member: member.clone(),
        });
        Ok(())
    }

    fn delete_member(&mut self, room: &str, principal: &str) -> Result<(), WriteError> {
        self.inner.delete_member(room, principal)?;
        self.note(|| WriteOp::DeleteMember {
            room: room.to_owned(),
            principal: principal.to_owned(),
        });
        Ok(())
    }

    fn append_event(&mut self, event: &EventRecord) -> Result<(), WriteError> {
        self.inner.append_event(event)?;
        self.note(|| WriteOp::AppendEvent {
            event: event.clone(),
        });
        Ok(())
    }

    fn event_at(
        &mut self,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<Option<EventRecord>, WriteError> {
        self.inner.event_at(stream, seq)
    }

    fn request(&mut self, id: &str) -> Result<Option<RequestRecord>, WriteError> {
        self.inner.request(id)
    }

    fn invite_by_code(
        &mut self,
        code_hash: &TokenHash,
    ) -> Result<Option<InviteRecord>, WriteError> {
        self.inner.invite_by_code(code_hash)
    }

    fn invite(&mut self, id: &str) -> Result<Option<InviteRecord>, WriteError> {
        self.inner.invite(id)
    }

    fn ping(&mut self, room: &str, ping: &str) -> Result<Option<PingRecord>, WriteError> {
        self.inner.ping(room, ping)
    }

    fn upsert_ping(&mut self, ping: &PingRecord) -> Result<(), WriteError> {
        self.inner.upsert_ping(ping)?;
        self.note(|| WriteOp::UpsertPing { ping: ping.clone() });
        Ok(())
    }

    fn set_ack(
        &mut self,
        principal: &str,
        device: &str,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<(), WriteError> {
        self.inner.set_ack(principal, device, stream, seq)
    }

    fn insert_contact(&mut self, contact: &ContactRecord) -> Result<(), WriteError> {
        self.inner.insert_contact(contact)?;
        self.note(|| WriteOp::InsertContact {
            contact: contact.clone(),
        });
        Ok(())
    }

    fn upsert_request(&mut self, request: &RequestRecord) -> Result<(), WriteError> {
        self.inner.upsert_request(request)?;
        self.note(|| WriteOp::UpsertRequest {
            request: request.clone(),
        });
        Ok(())
    }

    fn upsert_invite(&mut self, invite: &InviteRecord) -> Result<(), WriteError> {
        self.inner.upsert_invite(invite)?;
        self.note(|| WriteOp::UpsertInvite {
            invite: invite.clone(),
        });
        Ok(())
    }

    fn set_control(&mut self, control: &ControlRecord) -> Result<(), WriteError> {
        self.inner.set_control(control)?;
        self.note(|| WriteOp::SetControl {
            control: control.clone(),
        });
        Ok(())
    }

    fn delete_control(&mut self, agent: &str, room: Option<&str>) -> Result<(), WriteError> {
        self.inner.delete_control(agent, room)?;
        self.note(|| WriteOp::DeleteControl {
            agent: agent.to_owned(),
            room: room.map(str::to_owned),
        });
        Ok(())
    }

    fn append_audit(&mut self, entry: &AuditRecord) -> Result<(), WriteError> {
        self.inner.append_audit(entry)?;
        self.note(|| WriteOp::AppendAudit {
            entry: entry.clone(),
        });
        Ok(())
    }

    fn others(&mut self) -> Vec<Committed> {
        self.inner.others()
    }

    fn position(&self) -> Option<u64> {
        self.inner.position()
    }

    fn share(&mut self, batch: SharedBatch) -> Result<(), WriteError> {
        self.inner.share(batch)
    }

    fn commit(self: Box<Self>) -> Result<(), WriteError> {
        self.inner.commit()
    }
}
