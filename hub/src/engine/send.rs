//! `send`: the one command on the hot path. The order of checks is the protocol's: frame
//! valid, known `client_key` (which returns the original event, whatever the room or body
//! now), membership, then what the kind itself requires.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::{self, AnswerBody, EventKind, MessageBody, PingBody};
use roundtable_protocol::client::Send;
use roundtable_protocol::handles;
use roundtable_protocol::limits;
use roundtable_protocol::model::PrincipalKind;
use roundtable_protocol::ts;
use serde_json::Value;

use super::{Caller, Engine, ExecError, NewEvent, Outcome, Reply, refuse};
use crate::store::{PingRecord, StreamKey, WriteTx};

impl Engine {
    pub(super) fn send(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        send: Send,
    ) -> Result<Outcome, ExecError> {
        // 1. The frame is valid.
        let key_len = send.client_key.len();
        if !(limits::CLIENT_KEY_MIN..=limits::CLIENT_KEY_MAX).contains(&key_len) {
            return refuse(
                ErrorCode::BadFrame,
                format!(
                    "client_key must be {} to {} bytes long, got {key_len}; use a fresh random \
                     key per message",
                    limits::CLIENT_KEY_MIN,
                    limits::CLIENT_KEY_MAX
                ),
            );
        }
        let Some(kind) = EventKind::parse(&send.kind) else {
            return refuse(
                ErrorCode::BadFrame,
                format!(
                    "unknown event kind {:?}; send message, tasks, arch, usage, status, ping, \
                     answer or x-<name>",
                    send.kind
                ),
            );
        };
        let mut body = send.body;
        let body_text = serde_json::to_string(&body).expect("JSON values serialize");
        if let Err(error) = bodies::validate_client_body(&kind, &body, body_text.len()) {
            return refuse(error.code, error.msg);
        }
        // 2. A known key returns the original event.
        if let Some(original) = tx.find_sent(&caller.id, &send.client_key)? {
            return Ok(Outcome {
                reply: Reply::Sent {
                    event: original,
                    dup: true,
                },
                events: Vec::new(),
            });
        }
        // 3. Membership.
        self.member_room(&send.room, &caller.id)?;
        // 4. What the kind requires.
        let mut mentions = Vec::new();
        let mut ping_to_store = None;
        let mut body_text = body_text;
        match kind {
            EventKind::Message => {
                let message: MessageBody =
                    serde_json::from_value(body.clone()).expect("validated above");
                mentions = self.resolve_mentions(&send.room, &message);
                if !mentions.is_empty() && message.mentions.as_ref() != Some(&mentions) {
                    body["mentions"] = Value::from(mentions.clone());
                    body_text = serde_json::to_string(&body).expect("JSON values serialize");
                    if body_text.len() > limits::EVENT_BODY {
                        return refuse(
                            ErrorCode::TooLarge,
                            "with its mentions the message is over the body limit; shorten it",
                        );
                    }
                }
            }
            EventKind::Ping => {
                let ping: PingBody = serde_json::from_value(body.clone()).expect("validated");
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
                ping_to_store = Some(PingRecord {
                    room: send.room.clone(),
                    ping: ping.ping,
                    seq: 0,
                    to: ping.to.unwrap_or_default(),
                    expires_ms: ping.expires_at.as_deref().and_then(ts::parse_millis),
                    answered_by: None,
                });
            }
            EventKind::Answer => {
                let answer: AnswerBody = serde_json::from_value(body.clone()).expect("validated");
                let mut ping = self.check_answer(now_ms, caller, &send.room, &answer)?;
                ping.answered_by = Some(caller.id.clone());
                ping_to_store = Some(ping);
            }
            _ => {}
        }
        let record = self.append(
            tx,
            now_ms,
            StreamKey::Room(send.room.clone()),
            &caller.id,
            kind.as_str(),
            body_text,
            Some(send.client_key),
            mentions,
        )?;
        if let Some(mut ping) = ping_to_store {
            if ping.answered_by.is_none() {
                ping.seq = record.seq;
            }
            tx.upsert_ping(&ping)?;
            self.state
                .pings
                .insert((ping.room.clone(), ping.ping.clone()), ping);
        }
        Ok(Outcome {
            reply: Reply::Sent {
                event: record.clone(),
                dup: false,
            },
            events: vec![NewEvent {
                record,
                origin: Some(caller.conn),
                also_to: None,
            }],
        })
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
