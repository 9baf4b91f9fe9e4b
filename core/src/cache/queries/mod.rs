//! Reads of the cache, shaped for the apps: every projection with every field it keeps, so
//! the desktop, the MCP bridge and the CLI never reach for SQL of their own.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use roundtable_protocol::bodies::{AgentState, ComponentStatus};
use roundtable_protocol::model::{PrincipalKind, RequestState};

use super::{CacheError, CacheView};
use crate::log_events::TaskStatus;

mod events;
mod people;
mod rooms;
mod work;

pub use work::Touch;

/// A value of a closed set the cache keeps as its wire name (`in_progress`): read back as
/// the type, or a conversion error naming the column (the cache was written otherwise).
fn closed<T: serde::de::DeserializeOwned>(
    row: &rusqlite::Row<'_>,
    column: usize,
) -> rusqlite::Result<T> {
    let text: String = row.get(column)?;
    parse_closed(&text).map_err(|error| {
        rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, error)
    })
}

/// [`closed`] for a column that may be NULL.
fn closed_opt<T: serde::de::DeserializeOwned>(
    row: &rusqlite::Row<'_>,
    column: usize,
) -> rusqlite::Result<Option<T>> {
    match row.get::<_, Option<String>>(column)? {
        None => Ok(None),
        Some(text) => parse_closed(&text).map(Some).map_err(|error| {
            rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, error)
        }),
    }
}

fn parse_closed<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<T, Box<dyn std::error::Error + Send + Sync>> {
    Ok(serde_json::from_value(serde_json::Value::String(
        text.to_owned(),
    ))?)
}

/// A principal as the cache knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrincipalRow {
    pub id: String,
    pub kind: String,
    pub handle: String,
    pub name: String,
    pub owner: Option<String>,
}

impl PrincipalRow {
    /// From `SELECT id, kind, handle, name, owner FROM principals`.
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<PrincipalRow> {
        Ok(PrincipalRow {
            id: row.get(0)?,
            kind: row.get(1)?,
            handle: row.get(2)?,
            name: row.get(3)?,
            owner: row.get(4)?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct MemberView {
    pub id: String,
    /// The handle, when the cache met it (else the id).
    pub handle: String,
    pub kind: Option<PrincipalKind>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RoomView {
    pub id: String,
    pub title: Option<String>,
    pub topic: Option<String>,
    pub creator: Option<String>,
    /// The highest seq synced.
    pub head: u64,
    pub members: Vec<MemberView>,
    /// Our read marker: we have read up to this seq.
    pub read_to: u64,
    /// Messages after the read marker that others wrote.
    pub unread: u64,
    /// Of those, the ones that mention us.
    pub unread_mentions: u64,
}

impl RoomView {
    /// The title, or the id of an untitled room.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.id)
    }
}

/// Where a message is on its way to the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub enum Delivery {
    /// On the hub: it has a seq.
    Stored,
    /// In the outbox, waiting for the hub.
    Queued,
    /// Refused by the hub (see `error`).
    Failed,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Stored => "stored",
            Delivery::Queued => "queued",
            Delivery::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct MessageView {
    pub room: String,
    /// `None` while it waits in the outbox.
    pub seq: Option<u64>,
    /// The event's id (`None` while it waits in the outbox).
    pub id: Option<String>,
    pub ts_ms: i64,
    pub from: String,
    /// The sender's handle, when known.
    pub from_handle: Option<String>,
    /// When known.
    pub from_kind: Option<PrincipalKind>,
    pub text: String,
    /// Ids of the principals mentioned.
    pub mentions: Vec<String>,
    /// The event this one answers.
    pub reply_to: Option<String>,
    pub delivery: Delivery,
    pub error: Option<String>,
    /// Its outbox entry while it has one.
    pub outbox: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct TaskStateChange {
    pub status: TaskStatus,
    /// When the snapshot that first showed this status was written.
    pub ts_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct TaskView {
    pub id: Option<String>,
    pub title: String,
    pub status: TaskStatus,
    pub active_form: Option<String>,
    /// When the task entered its current status.
    pub since_ms: i64,
    /// Every status it had, oldest first, each with when it began.
    pub history: Vec<TaskStateChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSession {
    pub agent: String,
    pub agent_handle: Option<String>,
    pub framework: String,
    pub session_id: String,
    /// The room the latest list came from.
    pub room: String,
    pub ts_ms: i64,
    pub source: String,
    pub tasks: Vec<TaskView>,
}

/// Which task lists to read; `None` fields match everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskFilter {
    pub room: Option<String>,
    pub agent: Option<String>,
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ComponentAgent {
    pub agent: String,
    pub handle: Option<String>,
    pub status: ComponentStatus,
    pub note: Option<String>,
    pub files: Vec<String>,
    pub ts_ms: i64,
    /// It claims the component (advisory: others editing it are told).
    pub claimed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ComponentView {
    pub room: String,
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub paths: Vec<String>,
    pub depends_on: Vec<String>,
    /// The latest status anyone reported.
    pub status: Option<ComponentStatus>,
    pub note: Option<String>,
    pub files: Vec<String>,
    /// Who reported the latest status.
    pub by: Option<String>,
    pub status_ms: Option<i64>,
    /// What it was inferred from (`Cargo workspace`…); `None` when someone wrote it.
    pub source: Option<String>,
    /// Each agent's latest report on it.
    pub agents: Vec<ComponentAgent>,
    /// Agents whose latest report says they are working on it.
    pub working: Vec<String>,
}

/// What usage rows are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageKey {
    Room,
    Session,
    Agent,
    /// The agent's owner (by handle).
    Person,
    Model,
    /// The UTC day the usage ended.
    Day,
}

impl UsageKey {
    pub fn parse(text: &str) -> Option<UsageKey> {
        Some(match text {
            "room" => UsageKey::Room,
            "session" => UsageKey::Session,
            "agent" => UsageKey::Agent,
            "person" => UsageKey::Person,
            "model" => UsageKey::Model,
            "day" => UsageKey::Day,
            _ => return None,
        })
    }

    fn column(self) -> &'static str {
        match self {
            UsageKey::Room => "u.room",
            UsageKey::Session => "u.framework || ':' || u.session_id",
            UsageKey::Agent => "coalesce(p.handle, u.agent)",
            UsageKey::Person => {
                "CASE WHEN instr(p.handle, '/') > 0 THEN substr(p.handle, 1, instr(p.handle, '/') - 1)
                      ELSE coalesce(p.handle, u.agent) END"
            }
            UsageKey::Model => "u.model",
            UsageKey::Day => "date(u.to_ms / 1000, 'unixepoch')",
        }
    }
}

/// Which usage to add up, and how to group it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageQuery {
    pub group_by: Vec<UsageKey>,
    /// Usage that ended at or after this time (Unix ms).
    pub since_ms: Option<i64>,
    /// Usage that ended before this time.
    pub until_ms: Option<i64>,
    pub room: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRow {
    /// The value of each grouping key, in the order asked.
    pub group: BTreeMap<UsageKey, String>,
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    /// The sum of priced entries.
    pub cost_usd: f64,
    /// Entries without a price (an unpriced model): their tokens count, their cost is
    /// unknown, never zero.
    pub unpriced: u64,
    pub entries: u64,
    /// The span the entries cover.
    pub from_ms: i64,
    pub to_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub enum PingState {
    Open,
    Answered,
    Expired,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct PingView {
    pub room: String,
    pub ping: String,
    pub seq: u64,
    pub asker: String,
    pub asker_handle: Option<String>,
    pub question: String,
    pub options: Vec<String>,
    /// The users addressed (ids); empty: any user member of the room.
    pub recipients: Vec<String>,
    pub asked_ms: Option<i64>,
    pub expires_ms: Option<i64>,
    pub state: PingState,
    pub answered_by: Option<String>,
    pub answered_by_handle: Option<String>,
    pub answered_ms: Option<i64>,
    pub choice: Option<String>,
    pub text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct AgentStatusView {
    pub agent: String,
    pub handle: Option<String>,
    pub room: String,
    pub state: AgentState,
    pub detail: Option<String>,
    pub ts_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ContactView {
    pub principal: String,
    pub handle: Option<String>,
    pub name: Option<String>,
    pub kind: Option<PrincipalKind>,
    pub since_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RequestView {
    pub id: String,
    pub from: String,
    pub from_handle: Option<String>,
    pub to: String,
    pub to_handle: Option<String>,
    pub state: RequestState,
    pub message: Option<String>,
    pub ts_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ControlView {
    /// `None`: every room.
    pub room: Option<String>,
    pub action: roundtable_protocol::client::ControlAction,
    pub by: String,
    pub seq: u64,
    /// Why, when the control said (a budget reached, say).
    pub reason: Option<String>,
}

fn strings(json: Option<String>) -> Vec<String> {
    json.and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

const MESSAGE_COLUMNS: &str = "e.stream, e.seq, e.id, e.ts_ms, e.sender, p.handle, p.kind, e.body";

fn message_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<MessageView> {
    let body: String = row.get(7)?;
    let parts = message_parts(&body);
    Ok(MessageView {
        room: row.get(0)?,
        seq: Some(row.get::<_, i64>(1)? as u64),
        id: Some(row.get(2)?),
        ts_ms: row.get(3)?,
        from: row.get(4)?,
        from_handle: row.get(5)?,
        from_kind: closed_opt(row, 6)?,
        text: parts.text,
        mentions: parts.mentions,
        reply_to: parts.reply_to,
        delivery: Delivery::Stored,
        error: None,
        outbox: None,
    })
}

/// What a message body holds (an unreadable body shows as empty).
pub(crate) struct MessageParts {
    pub text: String,
    pub mentions: Vec<String>,
    pub reply_to: Option<String>,
}

pub(crate) fn message_parts(body: &str) -> MessageParts {
    match serde_json::from_str::<roundtable_protocol::bodies::MessageBody>(body) {
        Ok(message) => MessageParts {
            text: message.text,
            mentions: message.mentions.unwrap_or_default(),
            reply_to: message.reply_to,
        },
        Err(_) => MessageParts {
            text: String::new(),
            mentions: Vec::new(),
            reply_to: None,
        },
    }
}
