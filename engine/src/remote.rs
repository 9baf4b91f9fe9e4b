//! Calls owed to remote agents (agents another A2A server runs).
//!
//! Why here: whether an event owes a remote agent a call is decided in the transaction that
//! stores the event, so a call is never lost (a crash after the commit finds it in
//! `remote_calls`) and never made for an event that was not stored. The outbound worker
//! (`a2a::outbound`) does the talking and keeps its bookkeeping through
//! [`RemoteCommand`]s, which take the writer's path like every other change.

use roundtable_protocol::client::ControlAction;
use roundtable_protocol::server::OkReply;
use serde::{Deserialize, Serialize};

use super::{Caller, Engine, ExecError, Outcome};
use crate::records::{RemoteCallRecord, RemoteThreadRecord, RemoteWrite};
use crate::store::{WriteError, WriteTx};

/// The outbound worker's bookkeeping, run as the hub itself.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteCommand {
    /// Takes a due call until `until_ms` (see [`RemoteClaim`]); `asker` wrote the event
    /// (empty when the remote agent can no longer read it: the call is settled). A paused
    /// agent's call waits, unless it is past `expires_ms`; a stopped agent's is dropped,
    /// unless it `waits` (a notice, which calls no one: it waits for the resume).
    Claim {
        room: String,
        seq: u64,
        remote: String,
        asker: String,
        until_ms: i64,
        expires_ms: i64,
        waits: bool,
    },
    /// Settles a call, or sets when it is tried again, while the claim numbered `attempt`
    /// is the latest.
    Settle {
        room: String,
        seq: u64,
        remote: String,
        attempt: u32,
        next_ms: Option<i64>,
    },
    /// Where the remote agent's conversation in a room is now.
    Thread(RemoteThreadRecord),
    /// Forgets calls settled and made before `before_ms`.
    Prune { before_ms: i64 },
}

impl RemoteCommand {
    pub(super) fn audit_target(&self) -> String {
        match self {
            RemoteCommand::Claim { room, remote, .. }
            | RemoteCommand::Settle { room, remote, .. } => format!("{remote} {room}"),
            RemoteCommand::Thread(thread) => format!("{} {}", thread.remote, thread.room),
            RemoteCommand::Prune { .. } => "settled calls".to_owned(),
        }
    }
}

/// What a claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteClaim {
    /// The call is this worker's until the lease ends.
    Claimed,
    /// Settled, claimed by another, or not owed any more (nothing to call).
    NotDue,
    /// The remote agent is paused in the room: the call waits, tried again later.
    Paused,
    /// The remote agent is stopped in the room (or was paused past the call's life): the
    /// call is dropped, settled.
    Stopped,
}

/// The answer to a [`RemoteCommand`]: for a claim that took, its attempt's number (which
/// later settlements name) and who is called and who asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimReply {
    pub claim: RemoteClaim,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parties: Option<CallParties>,
}

/// Who a claimed call is between.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallParties {
    pub remote_handle: String,
    pub card_url: String,
    /// The remote agent's owner (a user id).
    pub owner: String,
    pub asker_handle: String,
    pub asker_is_user: bool,
}

impl ClaimReply {
    /// The answer an `ok` of a [`RemoteCommand`] carries.
    pub fn of(reply: &OkReply) -> Option<ClaimReply> {
        reply.decode::<ClaimReply>().ok()
    }

    fn just(claim: RemoteClaim) -> ClaimReply {
        ClaimReply {
            claim,
            attempt: 0,
            parties: None,
        }
    }
}

/// How long a paused remote agent's call waits before it is looked at again.
pub const PAUSED_RETRY_MS: i64 = 5_000;

impl Engine {
    pub(super) fn remote_command(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        _caller: &Caller,
        command: RemoteCommand,
    ) -> Result<Outcome, ExecError> {
        let reply = match command {
            RemoteCommand::Claim {
                room,
                seq,
                remote,
                asker,
                until_ms,
                expires_ms,
                waits,
            } => {
                let control = self
                    .state
                    .control_in(&remote, &room)
                    .map(|control| control.action);
                let deferred = match control {
                    Some(ControlAction::Stop | ControlAction::Pause) if waits => {
                        Some((RemoteClaim::Paused, Some(now_ms + PAUSED_RETRY_MS)))
                    }
                    Some(ControlAction::Stop) => Some((RemoteClaim::Stopped, None)),
                    Some(ControlAction::Pause) if now_ms >= expires_ms => {
                        Some((RemoteClaim::Stopped, None))
                    }
                    Some(ControlAction::Pause) => {
                        Some((RemoteClaim::Paused, Some(now_ms + PAUSED_RETRY_MS)))
                    }
                    _ => None,
                };
                match deferred {
                    // Only a due call, claimed by no one, is deferred or dropped.
                    Some((claim, next_ms)) => {
                        let changed = tx.remote(&RemoteWrite::Defer {
                            room: &room,
                            seq,
                            remote: &remote,
                            now_ms,
                            next_ms,
                        })?;
                        ClaimReply::just(if changed > 0 {
                            claim
                        } else {
                            RemoteClaim::NotDue
                        })
                    }
                    None => {
                        let attempt = tx.remote(&RemoteWrite::Claim {
                            room: &room,
                            seq,
                            remote: &remote,
                            now_ms,
                            until_ms,
                        })?;
                        let attempt = u32::try_from(attempt).unwrap_or(u32::MAX);
                        match (attempt, self.call_parties(&remote, &asker)) {
                            (0, _) => ClaimReply::just(RemoteClaim::NotDue),
                            (attempt, Some(parties)) => ClaimReply {
                                claim: RemoteClaim::Claimed,
                                attempt,
                                parties: Some(parties),
                            },
                            (attempt, None) => {
                                // Not a remote agent (any more), or an event it cannot read:
                                // nothing to call.
                                tx.remote(&RemoteWrite::Settle {
                                    room: &room,
                                    seq,
                                    remote: &remote,
                                    attempt,
                                    next_ms: None,
                                })?;
                                ClaimReply::just(RemoteClaim::NotDue)
                            }
                        }
                    }
                }
            }
            RemoteCommand::Settle {
                room,
                seq,
                remote,
                attempt,
                next_ms,
            } => {
                let changed = tx.remote(&RemoteWrite::Settle {
                    room: &room,
                    seq,
                    remote: &remote,
                    attempt,
                    next_ms,
                })?;
                // Still the claim's: `claimed`; a lapsed claim's settlement: `not_due`.
                ClaimReply::just(if changed > 0 {
                    RemoteClaim::Claimed
                } else {
                    RemoteClaim::NotDue
                })
            }
            RemoteCommand::Thread(thread) => {
                tx.remote(&RemoteWrite::Thread(&thread))?;
                ClaimReply::just(RemoteClaim::NotDue)
            }
            RemoteCommand::Prune { before_ms } => {
                tx.remote(&RemoteWrite::Prune { before_ms })?;
                ClaimReply::just(RemoteClaim::NotDue)
            }
        };
        Ok(Outcome::ok(OkReply::with(0, &reply)))
    }

    fn call_parties(&self, remote: &str, asker: &str) -> Option<CallParties> {
        let remote = self.state.principal(remote)?;
        let asker = self.state.principal(asker)?;
        Some(CallParties {
            remote_handle: remote.handle.clone(),
            card_url: remote.remote.clone()?,
            owner: remote.owner.clone()?,
            asker_handle: asker.handle.clone(),
            asker_is_user: asker.kind == roundtable_protocol::model::PrincipalKind::User,
        })
    }

    /// The remote agents a stored event owes a call: those a message mentions, or the one
    /// whose ping an answer answers, unless a remote agent wrote it. Written in the event's
    /// transaction.
    pub(super) fn owe_remote_calls(
        &self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        record: &crate::records::EventRecord,
        asker_of_answered: Option<&str>,
    ) -> Result<(), ExecError> {
        let crate::records::StreamKey::Room(room) = &record.stream else {
            return Ok(());
        };
        // What a remote agent posts calls no remote agent: two that quote what they are
        // sent (an echo, a model repeating the question) would call each other for ever.
        if self
            .state
            .principal(&record.from)
            .is_some_and(|sender| sender.remote.is_some())
        {
            return Ok(());
        }
        // A remote agent stopped in the room when the event is written is owed nothing:
        // what reaches it while stopped is dropped, whenever its turn would have come.
        let remote = |id: &str| {
            self.state
                .principal(id)
                .is_some_and(|principal| principal.remote.is_some())
                && id != record.from
                && self
                    .state
                    .control_in(id, room)
                    .is_none_or(|control| control.action != ControlAction::Stop)
        };
        let owed: Vec<&str> = match record.kind.as_str() {
            "message" => record
                .mentions
                .iter()
                .map(String::as_str)
                .filter(|id| remote(id))
                .collect(),
            "answer" => asker_of_answered
                .filter(|id| remote(id))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        for id in owed {
            tx.remote(&RemoteWrite::Call(&RemoteCallRecord {
                room: room.clone(),
                seq: record.seq,
                remote: id.to_owned(),
                created_ms: now_ms,
                attempts: 0,
                next_ms: Some(now_ms),
            }))?;
        }
        Ok(())
    }

    /// A remote agent's joining a room owes the room a notice (posted by the worker as the
    /// agent, without calling it): where what mentions it goes. Written with the join.
    pub(super) fn owe_remote_notice(
        &self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        joined: &crate::records::EventRecord,
        member: &str,
    ) -> Result<(), WriteError> {
        let crate::records::StreamKey::Room(room) = &joined.stream else {
            return Ok(());
        };
        if self
            .state
            .principal(member)
            .is_none_or(|principal| principal.remote.is_none())
        {
            return Ok(());
        }
        tx.remote(&RemoteWrite::Call(&RemoteCallRecord {
            room: room.clone(),
            seq: joined.seq,
            remote: member.to_owned(),
            created_ms: now_ms,
            attempts: 0,
            next_ms: Some(now_ms),
        }))?;
        Ok(())
    }

    /// Whether a room has a remote agent among its members (only then can its events owe
    /// calls, so only then is an answered ping's asker looked up).
    pub(super) fn room_has_remote(&self, room: &str) -> bool {
        self.state.rooms.get(room).is_some_and(|room| {
            room.members.keys().any(|member| {
                self.state
                    .principal(member)
                    .is_some_and(|principal| principal.remote.is_some())
            })
        })
    }
}
