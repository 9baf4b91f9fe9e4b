//! A person's side of the human in the loop: the questions agents asked them, and their
//! answers. The first answer wins on the hub; an answer to a ping already answered (from
//! another device, another room member) is refused with `conflict` and says who answered.

use serde::Serialize;
use serde_json::json;

use crate::cache::{PingState, PingView};
use crate::{Core, CoreError, Delivered, now_ms};

/// Where an answer went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answered {
    pub room: String,
    pub seq: u64,
}

impl Core {
    /// Every ping in our rooms, open ones first.
    pub async fn pings(&self) -> Result<Vec<PingView>, CoreError> {
        let now = now_ms();
        self.read(move |cache| cache.pings(now)).await
    }

    /// The open pings we may answer.
    pub async fn open_pings(&self) -> Result<Vec<PingView>, CoreError> {
        let (me, is_user, now) = (self.me().to_owned(), !self.is_agent(), now_ms());
        self.read(move |cache| cache.open_pings_for(&me, is_user, now))
            .await
    }

    /// Answers ping `ping` (in `room`, or wherever a ping of that id is) with an option or
    /// in words.
    pub async fn answer_ping(
        &self,
        room: Option<&str>,
        ping: &str,
        choice: Option<&str>,
        text: Option<&str>,
    ) -> Result<Answered, CoreError> {
        let pings = self.pings().await?;
        let found: Vec<&PingView> = pings
            .iter()
            .filter(|p| p.ping == ping && room.is_none_or(|room| p.room == room))
            .collect();
        let target = match found.as_slice() {
            [one] => *one,
            [] => {
                return Err(CoreError::NotFound(format!(
                    "no question {ping:?} in your rooms; list them with `roundtable pings`"
                )));
            }
            _ => {
                return Err(CoreError::Ambiguous(format!(
                    "several rooms have a question {ping:?}; name the room"
                )));
            }
        };
        if target.state == PingState::Answered {
            return Err(CoreError::Refused {
                code: roundtable_protocol::ErrorCode::Conflict,
                msg: format!(
                    "already answered by {}",
                    target
                        .answered_by_handle
                        .as_deref()
                        .or(target.answered_by.as_deref())
                        .unwrap_or("someone")
                ),
            });
        }
        if let (Some(choice), false) = (choice, target.options.is_empty())
            && !target.options.iter().any(|option| option == choice)
        {
            return Err(CoreError::Invalid(format!(
                "{choice:?} is not one of the options: {}",
                target.options.join(", ")
            )));
        }
        let mut body = json!({ "ping": ping });
        if let Some(choice) = choice {
            body["choice"] = json!(choice);
        }
        if let Some(text) = text {
            body["text"] = json!(text);
        }
        let room = target.room.clone();
        let n = self.send(&room, "answer", body).await?;
        match self.deliver(n, crate::client::PATIENCE).await? {
            Delivered::Sent { seq, .. } => Ok(Answered { room, seq }),
            Delivered::HandedOff { .. } => Ok(Answered { room, seq: 0 }),
            Delivered::Queued { reason, .. } => Err(CoreError::Offline(reason)),
        }
    }
}
