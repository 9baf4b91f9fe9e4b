//! `send`: the one command on the hot path. The order of checks is the protocol's: frame
//! valid, known `client_key` (which returns the original event, whatever the room or body
//! now), membership, then what the kind itself requires.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::{self, AnswerBody, ClientBody, EventKind, MessageBody, PingBody};
use roundtable_protocol::client::SendCmd;
use roundtable_protocol::handles;
use roundtable_protocol::limits;
use roundtable_protocol::model::PrincipalKind;
use roundtable_protocol::ts;
use serde_json::Value;

use std::sync::Arc;

use super::governance::RoomWrite;
use super::{Caller, Engine, ExecError, NewEvent, Outcome, Refusal, Reply, refuse};
use crate::records::{EventRecord, PingRecord, StreamKey};
use crate::store::WriteTx;

fn duplicate(original: EventRecord) -> Outcome {
    Outcome {
        reply: Reply::Sent {
            event: Arc::new(original),
            dup: true,
        },
        events: Vec::new(),
        effects: Vec::new(),
        audit_target: None,
        audit_reason: None,
    }
}

/// A `send` whose frame is checked and whose body is parsed and encoded: the part of the
/// work that needs no state, done by the connection's task so the writer thread only does
/// what must be serialized.
#[derive(Debug, Clone)]
pub struct PreparedSend {
    pub id: u64,
    pub room: String,
    pub client_key: String,
    pub kind: EventKind,
    /// The body as sent.
    body: Value,
    /// The body as stored (unless mentions are added).
    body_text: String,
    detail: SendDetail,
}

#[derive(Debug, Clone)]
enum SendDetail {
    /// A message, and the distinct `@handle` runs of its text (found here, off the writer).
    Message(MessageBody, Candidates),
    Ping(PingBody),
    Answer(AnswerBody),
    /// `usage`, `tasks` or an `arch` status that names the agent whose work it reports (as
    /// its typed body names it: the one field the projection reads too).
    WorkOf(String),
    Other,
}

/// The distinct `@handle` runs of a message's text, in order, and where each one is: found
/// by the connection, so the writer only looks up what it must.
#[derive(Debug, Default, Clone)]
struct Candidates {
    ordered: Vec<String>,
    position: rustc_hash::FxHashMap<String, usize>,
}

impl Candidates {
    fn of(text: &str) -> Candidates {
        let ordered: Vec<String> = handles::mention_candidates(text)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let position = ordered
            .iter()
            .enumerate()
            .map(|(index, handle)| (handle.clone(), index))
            .collect();
        Candidates { ordered, position }
    }
}

/// Step 1 of the protocol's order of checks: the frame is valid.
pub fn prepare_send(send: SendCmd) -> Result<PreparedSend, Refusal> {
    if send.kind.len() > limits::KIND {
        return Err(Refusal::new(
            ErrorCode::TooLarge,
            format!(
                "kind is {} bytes; the limit is {}",
                send.kind.len(),
                limits::KIND
            ),
        ));
    }
    let key_len = send.client_key.len();
    if !(limits::CLIENT_KEY_MIN..=limits::CLIENT_KEY_MAX).contains(&key_len) {
        return Err(Refusal::new(
            ErrorCode::BadFrame,
            format!(
                "client_key must be {} to {} bytes long, got {key_len}; use a fresh random key \
                 per message",
                limits::CLIENT_KEY_MIN,
                limits::CLIENT_KEY_MAX
            ),
        ));
    }
    let Some(kind) = EventKind::parse(&send.kind) else {
        return Err(Refusal::new(
            ErrorCode::BadFrame,
            format!(
                "unknown event kind {:?}; send message, tasks, arch, usage, status, ping, \
                 answer or x-<name>",
                send.kind
            ),
        ));
    };
    let body_text = serde_json::to_string(&send.body).expect("JSON values serialize");
    let parsed = bodies::parse_client_body(&kind, &send.body, body_text.len())
        .map_err(|error| Refusal::new(error.code, error.msg))?;
    let detail = match parsed {
        ClientBody::Message(message) => {
            let listed: std::collections::HashSet<&str> = message
                .mentions
                .iter()
                .flatten()
                .map(String::as_str)
                .collect();
            if listed.len() > limits::MENTIONS {
                return Err(too_many_mentions(listed.len()));
            }
            let candidates = Candidates::of(&message.text);
            SendDetail::Message(message, candidates)
        }
        ClientBody::Ping(ping) => SendDetail::Ping(ping),
        ClientBody::Answer(answer) => SendDetail::Answer(answer),
        work @ (ClientBody::Usage(_) | ClientBody::Tasks(_) | ClientBody::Arch(_)) => {
            match work.reported_agent() {
                Some(agent) => SendDetail::WorkOf(agent.to_owned()),
                None => SendDetail::Other,
            }
        }
        ClientBody::Status(_) | ClientBody::Extension => SendDetail::Other,
    };
    Ok(PreparedSend {
        id: send.id,
        room: send.room,
        client_key: send.client_key,
        kind,
        body: send.body,
        body_text,
        detail,
    })
}

fn too_many_mentions(count: usize) -> Refusal {
    Refusal::new(
        ErrorCode::TooLarge,
        format!(
            "the message mentions {count} principals or more; the limit is {}",
            limits::MENTIONS
        ),
    )
}

/// What a `send` will store, once every check passed.
struct SendPlan {
    /// The body to store when it is not the body as sent: a message with mentions added.
    body_text: Option<String>,
    mentions: Vec<String>,
    /// The ping to record: a new one, or one now answered.
    ping: Option<PingRecord>,
}

impl Engine {
    /// Steps 2 to 4 of the protocol's order of checks: a known key first (it returns the
    /// original whatever else changed since, and uses no rate token), then the rest.
    pub(super) fn send(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        send: &PreparedSend,
    ) -> Result<Outcome, ExecError> {
        if let Some(original) = self.find_sent(tx, &caller.id, &send.client_key)? {
            return Ok(duplicate(original));
        }
        let plan = self.plan_send(tx, now_ms, caller, send)?;
        let record = self.append_sent(
            tx,
            now_ms,
            send.room.clone(),
            &caller.id,
            send.kind.as_str(),
            plan.body_text.unwrap_or_else(|| send.body_text.clone()),
            send.client_key.clone(),
            plan.mentions,
        )?;
        let answered_asker = match &plan.ping {
            Some(ping) if ping.answered_by.is_some() && self.room_has_remote(&ping.room) => tx
                .event_at(&StreamKey::Room(ping.room.clone()), ping.seq)?
                .map(|asked| asked.from),
            _ => None,
        };
        self.owe_remote_calls(tx, now_ms, &record, answered_asker.as_deref())?;
        if let Some(mut ping) = plan.ping {
            if ping.answered_by.is_none() {
                ping.seq = record.seq;
            }
            tx.upsert_ping(&ping)?;
            // An answered ping leaves the memory (the store keeps it).
            self.state.put_ping(ping, now_ms);
        }
        let record = Arc::new(record);
        Ok(Outcome {
            reply: Reply::Sent {
                event: record.clone(),
                dup: false,
            },
            events: vec![NewEvent {
                recipients: self.state.recipients(&record.stream),
                record,
                origin: Some(caller.conn),
            }],
            effects: Vec::new(),
            audit_target: None,
            audit_reason: None,
        })
    }

    /// Membership, pause, rate limit, then what the kind requires. Changes nothing but the
    /// caller's rate bucket, which gets its token back if a later check refuses.
    fn plan_send(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        send: &PreparedSend,
    ) -> Result<SendPlan, ExecError> {
        self.member_room(&send.room, &caller.id)?;
        let write = if send.kind == EventKind::Message {
            RoomWrite::Message
        } else {
            RoomWrite::OtherSend
        };
        self.check_control(caller, &send.room, write)?;
        self.take_send_token(now_ms, caller)
            .map_err(ExecError::Refused)?;
        let planned = self.plan_kind(tx, now_ms, caller, send);
        // A state the sender could not know about gives the token back; a message too
        // large with its mentions is the sender's doing, and keeps it (so refused mention
        // floods are rate limited too).
        if let Err(ExecError::Refused(refusal)) = &planned
            && refusal.code != ErrorCode::TooLarge
        {
            self.return_send_token(caller);
        }
        planned
    }

    /// What the kind requires.
    fn plan_kind(
        &self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        send: &PreparedSend,
    ) -> Result<SendPlan, ExecError> {
        let mut plan = SendPlan {
            body_text: None,
            mentions: Vec::new(),
            ping: None,
        };
        match &send.detail {
            SendDetail::Message(message, candidates) => {
                plan.mentions = self.resolve_mentions(&send.room, message, candidates)?;
                let stored = (!plan.mentions.is_empty()).then_some(&plan.mentions);
                if message.mentions.as_ref() != stored {
                    let mut body = send.body.clone();
                    if let Value::Object(fields) = &mut body {
                        match stored {
                            Some(mentions) => {
                                fields.insert("mentions".into(), Value::from(mentions.clone()));
                            }
                            None => {
                                fields.remove("mentions");
                            }
                        }
                    }
                    let body_text = serde_json::to_string(&body).expect("JSON values serialize");
                    if body_text.len() > limits::EVENT_BODY {
                        return refuse(
                            ErrorCode::TooLarge,
                            "with its mentions the message is over the body limit; shorten it",
                        );
                    }
                    plan.body_text = Some(body_text);
                }
            }
            SendDetail::Ping(ping) => {
                // Open pings are in memory; answered or expired ones only in the store.
                if self
                    .state
                    .pings
                    .contains_key(&(send.room.clone(), ping.ping.clone()))
                    || tx.ping(&send.room, &ping.ping)?.is_some()
                {
                    return refuse(
                        ErrorCode::Conflict,
                        format!(
                            "a ping {:?} already exists in this room; use a new ping id",
                            ping.ping
                        ),
                    );
                }
                plan.ping = Some(PingRecord {
                    room: send.room.clone(),
                    ping: ping.ping.clone(),
                    seq: 0,
                    to: ping.to.clone().unwrap_or_default(),
                    expires_ms: ping.expires_at.as_deref().and_then(ts::parse_millis),
                    answered_by: None,
                });
            }
            SendDetail::Answer(answer) => {
                let mut ping = self.check_answer(tx, now_ms, caller, &send.room, answer)?;
                ping.answered_by = Some(caller.id.clone());
                plan.ping = Some(ping);
            }
            SendDetail::WorkOf(agent) => {
                // Work is reported by the agent that did it or by its owner (whose machine
                // reads its logs), never by another member on its behalf.
                let owned = self
                    .state
                    .principal(agent)
                    .is_some_and(|named| named.owner.as_deref() == Some(caller.id.as_str()));
                if *agent != caller.id && !owned {
                    return refuse(
                        ErrorCode::Forbidden,
                        format!(
                            "this {} names {agent:?}: only that agent or its owner reports its work",
                            send.kind.as_str()
                        ),
                    );
                }
            }
            SendDetail::Other => {}
        }
        Ok(plan)
    }

    /// The ids a message mentions: the room members it lists, then every room member whose
    /// `@handle` its text holds (in the text's order), each once; more than
    /// [`limits::MENTIONS`] is `too_large`. The writer walks the smaller of the text's
    /// candidates and the room's members, so a text of thousands of `@`s in a small room
    /// costs it a lookup per member.
    fn resolve_mentions(
        &self,
        room: &str,
        message: &MessageBody,
        candidates: &Candidates,
    ) -> Result<Vec<String>, ExecError> {
        let Some(members) = self.state.rooms.get(room).map(|room| &room.members) else {
            return Ok(Vec::new());
        };
        let written: Vec<&String> = if candidates.ordered.len() <= members.len() {
            candidates
                .ordered
                .iter()
                .filter_map(|handle| self.state.handles.get(handle))
                .filter(|id| members.contains_key(id.as_str()))
                .collect()
        } else {
            let mut found: Vec<(usize, &String)> = members
                .keys()
                .filter_map(|id| {
                    let handle = &self.state.principals.get(id)?.handle;
                    Some((*candidates.position.get(handle)?, id))
                })
                .collect();
            found.sort_unstable();
            found.into_iter().map(|(_, id)| id).collect()
        };
        let listed = message
            .mentions
            .iter()
            .flatten()
            .filter(|id| members.contains_key(id.as_str()));
        let mut seen = std::collections::HashSet::new();
        let mut mentions: Vec<String> = Vec::new();
        for id in listed.chain(written) {
            if seen.insert(id.as_str()) {
                if mentions.len() == limits::MENTIONS {
                    return Err(ExecError::Refused(too_many_mentions(mentions.len() + 1)));
                }
                mentions.push(id.clone());
            }
        }
        Ok(mentions)
    }

    /// Checks that `caller` may answer the ping now: it exists, is addressed to the caller
    /// (a user), and has no answer yet and has not expired.
    fn check_answer(
        &self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        room: &str,
        answer: &AnswerBody,
    ) -> Result<PingRecord, ExecError> {
        let ping = match self
            .state
            .pings
            .get(&(room.to_owned(), answer.ping.clone()))
        {
            Some(ping) => Some(ping.clone()),
            None => tx.ping(room, &answer.ping)?,
        };
        let Some(ping) = ping else {
            return refuse(
                ErrorCode::NotFound,
                format!("there is no ping {:?} in this room", answer.ping),
            );
        };
        if caller.kind != PrincipalKind::User {
            return refuse(ErrorCode::Forbidden, "only people answer pings");
        }
        if !ping.to.is_empty() && !ping.to.contains(&caller.id) {
            return refuse(
                ErrorCode::Forbidden,
                "this ping is addressed to someone else",
            );
        }
        if let Some(by) = &ping.answered_by {
            // Named only if the caller may know the one who answered (amendment 11).
            let who = self
                .state
                .principal(by)
                .filter(|answerer| self.knows(&caller.id, answerer))
                .map(|answerer| format!(" by {}", answerer.handle))
                .unwrap_or_default();
            return refuse(
                ErrorCode::Conflict,
                format!("this ping was already answered{who}; the first answer wins"),
            );
        }
        if ping.expires_ms.is_some_and(|expires| now_ms >= expires) {
            return refuse(ErrorCode::Conflict, "this ping has expired");
        }
        Ok(ping)
    }
}
