//! `send`: the one command on the hot path. The order of checks is the protocol's: frame
//! valid, known `client_key` (which returns the original event, whatever the room or body
//! now), membership, then what the kind itself requires.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::{self, AnswerBody, EventKind, MessageBody, PingBody};
use roundtable_protocol::client::{ControlAction, SendCmd};
use roundtable_protocol::handles;
use roundtable_protocol::limits;
use roundtable_protocol::model::PrincipalKind;
use roundtable_protocol::ts;
use serde_json::Value;

use std::sync::Arc;

use serde::Deserialize;

use super::{Caller, Engine, ExecError, NewEvent, Outcome, Refusal, Reply, refuse};
use crate::store::{EventRecord, PingRecord, WriteTx};

fn duplicate(original: EventRecord) -> Outcome {
    Outcome {
        reply: Reply::Sent {
            event: Arc::new(original),
            dup: true,
        },
        events: Vec::new(),
        effects: Vec::new(),
        audit_target: None,
    }
}

/// A `send` whose frame is checked and whose body is parsed and encoded: the part of the
/// work that needs no state, done by the connection's task so the writer thread only does
/// what must be serialized.
#[derive(Debug)]
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

#[derive(Debug)]
enum SendDetail {
    Message(MessageBody),
    Ping(PingBody),
    Answer(AnswerBody),
    Other,
}

/// Step 1 of the protocol's order of checks: the frame is valid.
pub fn prepare_send(send: SendCmd) -> Result<PreparedSend, Refusal> {
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
    bodies::validate_client_body(&kind, &send.body, body_text.len())
        .map_err(|error| Refusal::new(error.code, error.msg))?;
    let detail = match kind {
        EventKind::Message => {
            SendDetail::Message(MessageBody::deserialize(&send.body).expect("validated"))
        }
        EventKind::Ping => SendDetail::Ping(PingBody::deserialize(&send.body).expect("validated")),
        EventKind::Answer => {
            SendDetail::Answer(AnswerBody::deserialize(&send.body).expect("validated"))
        }
        _ => SendDetail::Other,
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
        send: PreparedSend,
    ) -> Result<Outcome, ExecError> {
        if let Some(original) = self.find_sent(tx, &caller.id, &send.client_key)? {
            return Ok(duplicate(original));
        }
        let plan = self.plan_send(now_ms, caller, &send)?;
        let PreparedSend {
            room,
            client_key,
            kind,
            body_text,
            ..
        } = send;
        let record = self.append_sent(
            tx,
            now_ms,
            room,
            &caller.id,
            kind.as_str(),
            plan.body_text.unwrap_or(body_text),
            client_key,
            plan.mentions,
        )?;
        if let Some(mut ping) = plan.ping {
            if ping.answered_by.is_none() {
                ping.seq = record.seq;
            }
            tx.upsert_ping(&ping)?;
            self.state
                .pings
                .insert((ping.room.clone(), ping.ping.clone()), ping);
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
        })
    }

    /// Membership, pause, rate limit, then what the kind requires. Changes nothing but the
    /// caller's rate bucket, which gets its token back if a later check refuses.
    fn plan_send(
        &mut self,
        now_ms: i64,
        caller: &Caller,
        send: &PreparedSend,
    ) -> Result<SendPlan, ExecError> {
        self.member_room(&send.room, &caller.id)?;
        if caller.kind == PrincipalKind::Agent {
            match self.state.control_in(&caller.id, &send.room) {
                Some(ControlAction::Stop) => {
                    return refuse(
                        ErrorCode::Paused,
                        "you are stopped in this room by your owner or the room's creator; wait \
                         for a resume",
                    );
                }
                Some(ControlAction::Pause) if send.kind == EventKind::Message => {
                    return refuse(
                        ErrorCode::Paused,
                        "you are paused: your messages are refused until your owner (or the \
                         room's creator) resumes you; status, tasks and usage still go through",
                    );
                }
                _ => {}
            }
        }
        self.take_send_token(now_ms, caller)
            .map_err(ExecError::Refused)?;
        let planned = self.plan_kind(now_ms, caller, send);
        if planned.is_err() {
            self.return_send_token(caller);
        }
        planned
    }

    /// What the kind requires.
    fn plan_kind(
        &self,
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
            SendDetail::Message(message) => {
                plan.mentions = self.resolve_mentions(&send.room, message);
                if !plan.mentions.is_empty() && message.mentions.as_ref() != Some(&plan.mentions) {
                    let mut body = send.body.clone();
                    body["mentions"] = Value::from(plan.mentions.clone());
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
                if self
                    .state
                    .pings
                    .contains_key(&(send.room.clone(), ping.ping.clone()))
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
                let mut ping = self.check_answer(now_ms, caller, &send.room, answer)?;
                ping.answered_by = Some(caller.id.clone());
                plan.ping = Some(ping);
            }
            SendDetail::Other => {}
        }
        Ok(plan)
    }

    /// The ids a message mentions: those it lists, then every `@handle` in its text that
    /// names a room member, each once.
    fn resolve_mentions(&self, room: &str, message: &MessageBody) -> Vec<String> {
        let mut mentions: Vec<String> = Vec::new();
        for id in message.mentions.iter().flatten() {
            if !mentions.contains(id) {
                mentions.push(id.clone());
            }
        }
        for handle in handles::mention_candidates(&message.text) {
            if let Some(principal) = self.state.by_handle(handle)
                && self.state.is_member(room, &principal.id)
                && !mentions.contains(&principal.id)
            {
                mentions.push(principal.id.clone());
            }
        }
        mentions
    }

    /// Checks that `caller` may answer the ping now: it exists, is addressed to the caller
    /// (a user), and has no answer yet and has not expired.
    fn check_answer(
        &self,
        now_ms: i64,
        caller: &Caller,
        room: &str,
        answer: &AnswerBody,
    ) -> Result<PingRecord, ExecError> {
        let Some(ping) = self
            .state
            .pings
            .get(&(room.to_owned(), answer.ping.clone()))
        else {
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
            let who = self
                .state
                .principal(by)
                .map_or(by.as_str(), |p| p.handle.as_str());
            return refuse(
                ErrorCode::Conflict,
                format!("this ping was already answered by {who}; the first answer wins"),
            );
        }
        if ping.expires_ms.is_some_and(|expires| now_ms >= expires) {
            return refuse(ErrorCode::Conflict, "this ping has expired");
        }
        Ok(ping.clone())
    }
}
