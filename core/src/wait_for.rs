//! Waiting for something to arrive. A long-running client (the MCP bridge in
//! `wait_for_messages` or `ask_human`, a hook listening before its session rests) blocks
//! until a matching event is in the cache, or until its timeout. It wakes on the cache's
//! typed changes, so it answers as soon as the event is applied, with no polling.

use std::time::Duration;

use roundtable_protocol::bodies::ControlBody;
use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;

use crate::cache::{ControlView, MessageView, PingState, PingView};
use crate::{Change, Core, CoreError, now_ms};

/// What to wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitFilter {
    /// Unread messages (after our read markers) for `principal`: mentions of it, messages
    /// in rooms of two members, and — when `principal` is us and an agent — every message
    /// the hub routes to us (its routing setting decided what we see).
    MessagesFor { principal: String },
    /// The ping `ping` of `room` answered (or expired).
    PingAnswered { room: String, ping: String },
    /// A pause, stop or resume for us (we are an agent) after inbox seq `after`.
    Control { after: u64 },
}

/// What arrived.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "arrived", rename_all = "snake_case")]
pub enum Arrived {
    Messages {
        messages: Vec<MessageView>,
    },
    Ping {
        ping: PingView,
    },
    Control {
        controls: Vec<ControlEvent>,
    },
    /// Nothing matched before the timeout.
    Nothing,
}

/// A control event from our inbox.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlEvent {
    pub seq: u64,
    pub action: roundtable_protocol::client::ControlAction,
    pub room: Option<String>,
    pub by: String,
    /// Why, when the control said.
    pub reason: Option<String>,
}

/// The most messages one wait returns.
const MESSAGES_AT_ONCE: u32 = 100;

impl Core {
    /// Returns as soon as something matching `filter` is in the cache (already there, or
    /// arriving), or [`Arrived::Nothing`] at `timeout`. It does not move read markers: the
    /// caller does, once it has handled what arrived ([`Core::mark_read`]).
    pub async fn wait_for(
        &self,
        filter: &WaitFilter,
        timeout: Duration,
    ) -> Result<Arrived, CoreError> {
        let deadline = tokio::time::Instant::now() + timeout;
        // Subscribed before the first look, so nothing applied in between is missed.
        let mut changes = self.changes();
        loop {
            let (arrived, look_again_at) = self.look(filter).await?;
            if let Some(arrived) = arrived {
                return Ok(arrived);
            }
            // A ping's expiry comes with time, not with a change.
            let wake = look_again_at.map_or(deadline, |at| at.min(deadline));
            loop {
                let change = match tokio::time::timeout_at(wake, changes.recv()).await {
                    Err(_) if wake < deadline => break,
                    Err(_) => return Ok(Arrived::Nothing),
                    Ok(Err(RecvError::Closed)) => return Ok(Arrived::Nothing),
                    // Missed changes: look again.
                    Ok(Err(RecvError::Lagged(_))) => break,
                    Ok(Ok(change)) => change,
                };
                if concerns(filter, &change) {
                    break;
                }
            }
        }
    }

    /// What has arrived, and when to look again even if nothing changes.
    async fn look(
        &self,
        filter: &WaitFilter,
    ) -> Result<(Option<Arrived>, Option<tokio::time::Instant>), CoreError> {
        match filter {
            WaitFilter::MessagesFor { principal } => {
                let principal = principal.clone();
                let everything = principal == self.me() && self.is_agent();
                let messages = self
                    .read(move |cache| {
                        cache.unread_messages_for(&principal, everything, MESSAGES_AT_ONCE)
                    })
                    .await?;
                Ok((
                    (!messages.is_empty()).then_some(Arrived::Messages { messages }),
                    None,
                ))
            }
            WaitFilter::PingAnswered { room, ping } => {
                let (room, ping) = (room.clone(), ping.clone());
                let now = now_ms();
                let found = self
                    .read(move |cache| cache.ping(&room, &ping, now))
                    .await?;
                let expires = found
                    .as_ref()
                    .and_then(|ping| ping.expires_ms)
                    .map(|expires| {
                        tokio::time::Instant::now()
                            + Duration::from_millis((expires - now).max(0) as u64 + 1)
                    });
                Ok((
                    found
                        .filter(|ping| ping.state != PingState::Open)
                        .map(|ping| Arrived::Ping { ping }),
                    expires,
                ))
            }
            WaitFilter::Control { after } => {
                let after = *after;
                let events = self
                    .read(move |cache| cache.inbox_events("control", after))
                    .await?;
                // A body this version cannot read (a newer hub's action) is left out, as
                // the projection leaves it out of the controls in force.
                let controls: Vec<ControlEvent> = events
                    .into_iter()
                    .filter_map(|(seq, body)| {
                        let control: ControlBody = serde_json::from_value(body).ok()?;
                        Some(ControlEvent {
                            seq,
                            action: control.action,
                            room: control.room,
                            by: control.by,
                            reason: control.reason,
                        })
                    })
                    .collect();
                Ok((
                    (!controls.is_empty()).then_some(Arrived::Control { controls }),
                    None,
                ))
            }
        }
    }

    /// The controls in force on us now.
    pub async fn controls(&self) -> Result<Vec<ControlView>, CoreError> {
        self.read(|cache| cache.controls()).await
    }
}

/// Whether `change` may bring something `filter` waits for.
fn concerns(filter: &WaitFilter, change: &Change) -> bool {
    match filter {
        WaitFilter::MessagesFor { .. } => matches!(
            change,
            Change::Messages { .. }
                | Change::Mentioned { .. }
                | Change::Members { .. }
                | Change::Rooms
                | Change::ReadMarker { .. }
                | Change::Reset
        ),
        WaitFilter::PingAnswered { room, ping } => match change {
            Change::Ping {
                room: changed_room,
                ping: changed_ping,
            } => changed_room == room && changed_ping == ping,
            Change::Reset => true,
            _ => false,
        },
        WaitFilter::Control { .. } => matches!(change, Change::Controls | Change::Reset),
    }
}
