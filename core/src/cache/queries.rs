//! Reads of the cache, shaped for the apps: every projection with every field it keeps, so
//! the desktop, the MCP bridge and the CLI never reach for SQL of their own.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use roundtable_protocol::bodies::{AgentState, ComponentStatus};
use roundtable_protocol::model::{PrincipalKind, RequestState};

use super::{CacheError, CacheView};
use crate::work::events::TaskStatus;

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
    pub action: String,
    pub by: String,
    pub seq: u64,
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

impl CacheView {
    /// The handle of a principal, if the cache met it.
    pub fn handle_of(&self, id: &str) -> Result<Option<String>, CacheError> {
        Ok(self
            .conn
            .query_row("SELECT handle FROM principals WHERE id = ?1", [id], |row| {
                row.get(0)
            })
            .optional()?)
    }

    /// A principal by id, if the cache met it.
    pub fn principal(&self, id: &str) -> Result<Option<PrincipalRow>, CacheError> {
        self.principal_where("id", id)
    }

    /// A principal by handle, if the cache met it.
    pub fn principal_by_handle(&self, handle: &str) -> Result<Option<PrincipalRow>, CacheError> {
        self.principal_where("handle", handle)
    }

    fn principal_where(
        &self,
        column: &str,
        value: &str,
    ) -> Result<Option<PrincipalRow>, CacheError> {
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT id, kind, handle, name, owner FROM principals WHERE {column} = ?1"
            ))?
            .query_row([value], PrincipalRow::from_row)
            .optional()?)
    }

    /// The rooms we are a member of, with their members and unread counts for `me`.
    pub fn rooms(&self) -> Result<Vec<RoomView>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT r.id, r.title, r.topic, r.creator, coalesce(c.seq, 0), coalesce(m.seq, 0)
             FROM rooms r LEFT JOIN cursors c ON c.stream = r.id
             LEFT JOIN read_markers m ON m.stream = r.id
             WHERE r.joined = 1 ORDER BY r.title, r.id",
        )?;
        let mut rooms: Vec<RoomView> = statement
            .query_map([], |row| {
                Ok(RoomView {
                    id: row.get(0)?,
                    title: row.get(1)?,
                    topic: row.get(2)?,
                    creator: row.get(3)?,
                    head: row.get::<_, i64>(4)? as u64,
                    members: Vec::new(),
                    read_to: row.get::<_, i64>(5)? as u64,
                    unread: 0,
                    unread_mentions: 0,
                })
            })?
            .collect::<Result<_, _>>()?;
        for room in &mut rooms {
            room.members = self.members(&room.id)?;
            let (unread, mentions) = self
                .conn
                .prepare_cached(
                    "SELECT others - others_read, mentions - mentions_read FROM room_counts
                     WHERE room = ?1",
                )?
                .query_row([&room.id], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
                })
                .optional()?
                .unwrap_or((0, 0));
            room.unread = unread.max(0) as u64;
            room.unread_mentions = mentions.max(0) as u64;
        }
        Ok(rooms)
    }

    /// The present members of a room.
    pub fn members(&self, room: &str) -> Result<Vec<MemberView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT m.principal, coalesce(p.handle, m.principal), p.kind FROM members m
             LEFT JOIN principals p ON p.id = m.principal
             WHERE m.room = ?1 AND m.present = 1 ORDER BY 2",
        )?;
        let members = statement
            .query_map([room], |row| {
                Ok(MemberView {
                    id: row.get(0)?,
                    handle: row.get(1)?,
                    kind: closed_opt(row, 2)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(members)
    }

    /// Our read marker of a stream (0: nothing read).
    pub fn read_marker(&self, stream: &str) -> Result<u64, CacheError> {
        Ok(self
            .conn
            .query_row(
                "SELECT seq FROM read_markers WHERE stream = ?1",
                [stream],
                |row| row.get::<_, i64>(0),
            )
            .optional()?
            .unwrap_or(0) as u64)
    }

    /// Read markers the hub has not been told of yet.
    pub fn unsent_read_markers(&self) -> Result<Vec<(String, u64)>, CacheError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT stream, seq FROM read_markers WHERE sent = 0")?;
        let markers = statement
            .query_map([], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as u64)))?
            .collect::<Result<_, _>>()?;
        Ok(markers)
    }

    /// Messages of a room after `after` (oldest first), at most `limit` of the latest, with
    /// our own messages still waiting in the outbox at the end.
    pub fn messages(
        &self,
        room: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<MessageView>, CacheError> {
        let mut messages = self.stored_messages(room, after, u64::MAX, limit, true)?;
        messages.extend(self.pending_messages(room)?);
        Ok(messages)
    }

    /// The latest `limit` stored messages of a room below seq `before`, oldest first.
    pub fn messages_before(
        &self,
        room: &str,
        before: u64,
        limit: u32,
    ) -> Result<Vec<MessageView>, CacheError> {
        self.stored_messages(room, 0, before, limit, true)
    }

    /// The first `limit` stored messages of a room after seq `after`, oldest first.
    pub fn messages_after(
        &self,
        room: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<MessageView>, CacheError> {
        self.stored_messages(room, after, u64::MAX, limit, false)
    }

    /// Stored messages with `after < seq < before`: the `limit` latest or earliest of them,
    /// oldest first.
    fn stored_messages(
        &self,
        room: &str,
        after: u64,
        before: u64,
        limit: u32,
        latest: bool,
    ) -> Result<Vec<MessageView>, CacheError> {
        let order = if latest { "DESC" } else { "ASC" };
        let mut statement = self.conn.prepare_cached(&format!(
            "SELECT * FROM (
                 SELECT {MESSAGE_COLUMNS} FROM events e
                 LEFT JOIN principals p ON p.id = e.sender
                 WHERE e.stream = ?1 AND e.kind = 'message' AND e.seq > ?2 AND e.seq < ?3
                 ORDER BY e.seq {order} LIMIT ?4
             ) ORDER BY seq"
        ))?;
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        let messages = statement
            .query_map(params![room, after as i64, before, limit], message_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(messages)
    }

    /// Unread messages (after our read markers, written by someone else) that are for
    /// `principal`: those that mention it, those in rooms of two members, and, when
    /// `principal` is us and an agent, every message the hub let us see (its routing
    /// decided). Oldest first, at most `limit`.
    pub fn unread_messages_for(
        &self,
        principal: &str,
        everything_visible: bool,
        limit: u32,
    ) -> Result<Vec<MessageView>, CacheError> {
        // Three sources, each read through an index from the read markers on: mentions of
        // the principal, rooms of two members it is one of, and (for an agent's own view)
        // every room.
        let mut statement = self.conn.prepare_cached(&format!(
            "WITH marked AS (
                 SELECT r.id AS room, coalesce(m.seq, 0) AS read FROM rooms r
                 LEFT JOIN read_markers m ON m.stream = r.id WHERE r.joined = 1
             ),
             wanted AS (
                 SELECT mn.room, mn.seq FROM marked k
                 JOIN mentions mn ON mn.principal = ?1 AND mn.room = k.room AND mn.seq > k.read
                 UNION
                 SELECT e.stream, e.seq FROM marked k
                 JOIN events e ON e.stream = k.room AND e.kind = 'message' AND e.seq > k.read
                 WHERE ?2 OR (
                     (SELECT count(*) FROM members m WHERE m.room = k.room AND m.present = 1) = 2
                     AND EXISTS (SELECT 1 FROM members m
                                 WHERE m.room = k.room AND m.principal = ?1 AND m.present = 1))
             )
             SELECT {MESSAGE_COLUMNS} FROM wanted w
             JOIN events e ON e.stream = w.room AND e.seq = w.seq
             LEFT JOIN principals p ON p.id = e.sender
             WHERE e.sender != ?1 AND e.kind = 'message'
             ORDER BY e.ts_ms, e.stream, e.seq LIMIT ?3"
        ))?;
        let messages = statement
            .query_map(
                params![principal, everything_visible, limit],
                message_from_row,
            )?
            .collect::<Result<_, _>>()?;
        Ok(messages)
    }

    /// Task lists: the latest of every agent session that `filter` matches, newest first,
    /// each task with when it changed state.
    pub fn task_sessions(&self, filter: &TaskFilter) -> Result<Vec<TaskSession>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT t.agent, p.handle, t.framework, t.session_id, t.room, t.ts_ms, t.source, t.tasks
             FROM tasks t LEFT JOIN principals p ON p.id = t.agent
             WHERE (?1 IS NULL OR t.room = ?1) AND (?2 IS NULL OR t.agent = ?2)
               AND (?3 IS NULL OR t.session_id = ?3)
             ORDER BY t.ts_ms DESC, t.agent",
        )?;
        let rows: Vec<(TaskSession, String)> = statement
            .query_map(
                params![filter.room, filter.agent, filter.session_id],
                |row| {
                    Ok((
                        TaskSession {
                            agent: row.get(0)?,
                            agent_handle: row.get(1)?,
                            framework: row.get(2)?,
                            session_id: row.get(3)?,
                            room: row.get(4)?,
                            ts_ms: row.get(5)?,
                            source: row.get(6)?,
                            tasks: Vec::new(),
                        },
                        row.get(7)?,
                    ))
                },
            )?
            .collect::<Result<_, _>>()?;
        let mut history = self.conn.prepare_cached(
            "SELECT task, status, ts_ms FROM task_states
             WHERE agent = ?1 AND framework = ?2 AND session_id = ?3
             ORDER BY task, ts_ms, room, seq",
        )?;
        let mut sessions = Vec::with_capacity(rows.len());
        for (mut session, tasks) in rows {
            let mut changes: BTreeMap<String, Vec<TaskStateChange>> = BTreeMap::new();
            let states = history.query_map(
                params![session.agent, session.framework, session.session_id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        closed::<TaskStatus>(row, 1)?,
                        row.get(2)?,
                    ))
                },
            )?;
            for state in states {
                let (task, status, ts_ms) = state?;
                let list = changes.entry(task).or_default();
                if list.last().is_none_or(|last| last.status != status) {
                    list.push(TaskStateChange { status, ts_ms });
                }
            }
            let listed: Vec<roundtable_protocol::bodies::Task> =
                serde_json::from_str(&tasks).unwrap_or_default();
            session.tasks = listed
                .into_iter()
                .map(|task| {
                    let key = task.id.clone().unwrap_or_else(|| task.title.clone());
                    let status = TaskStatus::from(task.status);
                    let history = changes.remove(&key).unwrap_or_default();
                    let since_ms = history
                        .iter()
                        .rev()
                        .find(|change| change.status == status)
                        .map_or(session.ts_ms, |change| change.ts_ms);
                    TaskView {
                        id: task.id,
                        title: task.title,
                        status,
                        active_form: task.active_form,
                        since_ms,
                        history,
                    }
                })
                .collect();
            sessions.push(session);
        }
        Ok(sessions)
    }

    /// The architecture board of a room.
    pub fn components(&self, room: &str) -> Result<Vec<ComponentView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT id, name, description, paths, depends_on, status, note, files, status_by, status_ms
             FROM components WHERE room = ?1 ORDER BY id",
        )?;
        let mut components: Vec<ComponentView> = statement
            .query_map([room], |row| {
                Ok(ComponentView {
                    room: room.to_owned(),
                    id: row.get(0)?,
                    name: row.get(1)?,
                    description: row.get(2)?,
                    paths: strings(row.get(3)?),
                    depends_on: strings(row.get(4)?),
                    status: closed_opt(row, 5)?,
                    note: row.get(6)?,
                    files: strings(row.get(7)?),
                    by: row.get(8)?,
                    status_ms: row.get(9)?,
                    agents: Vec::new(),
                    working: Vec::new(),
                })
            })?
            .collect::<Result<_, _>>()?;
        let mut agents = self.conn.prepare_cached(
            "SELECT c.agent, p.handle, c.status, c.note, c.files, c.ts_ms FROM component_agents c
             LEFT JOIN principals p ON p.id = c.agent
             WHERE c.room = ?1 AND c.component = ?2 ORDER BY c.seq DESC",
        )?;
        for component in &mut components {
            component.agents = agents
                .query_map(params![room, component.id], |row| {
                    Ok(ComponentAgent {
                        agent: row.get(0)?,
                        handle: row.get(1)?,
                        status: closed(row, 2)?,
                        note: row.get(3)?,
                        files: strings(row.get(4)?),
                        ts_ms: row.get(5)?,
                    })
                })?
                .collect::<Result<_, _>>()?;
            component.working = component
                .agents
                .iter()
                .filter(|agent| agent.status == ComponentStatus::Working)
                .map(|agent| agent.agent.clone())
                .collect();
        }
        Ok(components)
    }

    /// Tokens and dollars, grouped as `query` asks (no grouping: one total).
    pub fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, CacheError> {
        let mut keys = query.group_by.clone();
        keys.dedup();
        let columns: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| format!("{} AS g{i}", key.column()))
            .collect();
        let select_groups = if columns.is_empty() {
            String::new()
        } else {
            format!("{}, ", columns.join(", "))
        };
        let group_by = if keys.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = (0..keys.len()).map(|i| format!("g{i}")).collect();
            format!("GROUP BY {0} ORDER BY {0}", names.join(", "))
        };
        // An agent's work is published to its home room and to the rooms its person shares
        // with: unless rooms are asked for, a report in several rooms counts once.
        let source = if keys.contains(&UsageKey::Room) || query.room.is_some() {
            "usage"
        } else {
            "(SELECT DISTINCT '' AS room, agent, framework, session_id, model, input, output,
                     cache_write, cache_read, cost_usd, from_ms, to_ms FROM usage)"
        };
        let sql = format!(
            "SELECT {select_groups} sum(u.input), sum(u.output), sum(u.cache_write),
                    sum(u.cache_read), coalesce(sum(u.cost_usd), 0), sum(u.cost_usd IS NULL),
                    count(*), min(u.from_ms), max(u.to_ms)
             FROM {source} u LEFT JOIN principals p ON p.id = u.agent
             WHERE (?1 IS NULL OR u.to_ms >= ?1) AND (?2 IS NULL OR u.to_ms < ?2)
               AND (?3 IS NULL OR u.room = ?3)
             {group_by}"
        );
        let mut statement = self.conn.prepare(&sql)?;
        let width = keys.len();
        let rows = statement
            .query_map(params![query.since_ms, query.until_ms, query.room], |row| {
                let mut group = BTreeMap::new();
                for (i, key) in keys.iter().enumerate() {
                    let value: Option<String> = row.get(i)?;
                    group.insert(*key, value.unwrap_or_default());
                }
                let count = |i: usize| -> rusqlite::Result<u64> {
                    Ok(row.get::<_, Option<i64>>(width + i)?.unwrap_or(0) as u64)
                };
                Ok(UsageRow {
                    group,
                    input: count(0)?,
                    output: count(1)?,
                    cache_write: count(2)?,
                    cache_read: count(3)?,
                    cost_usd: row.get(width + 4)?,
                    unpriced: count(5)?,
                    entries: count(6)?,
                    from_ms: row.get::<_, Option<i64>>(width + 7)?.unwrap_or(0),
                    to_ms: row.get::<_, Option<i64>>(width + 8)?.unwrap_or(0),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        // Without grouping, an empty table still sums to one row of zeros; drop it.
        Ok(rows.into_iter().filter(|row| row.entries > 0).collect())
    }

    /// Pings, open ones first, each with its state at `now_ms`.
    pub fn pings(&self, now_ms: i64) -> Result<Vec<PingView>, CacheError> {
        self.pings_where(None, false, now_ms)
    }

    /// Open pings that `me` may answer at `now_ms`: addressed to it, or to nobody in
    /// particular when `me_is_user` (any user member may answer those).
    pub fn open_pings_for(
        &self,
        me: &str,
        me_is_user: bool,
        now_ms: i64,
    ) -> Result<Vec<PingView>, CacheError> {
        let mut pings = self.pings_where(None, true, now_ms)?;
        pings.retain(|ping| {
            ping.state == PingState::Open
                && if ping.recipients.is_empty() {
                    me_is_user && ping.asker != me
                } else {
                    ping.recipients.iter().any(|recipient| recipient == me)
                }
        });
        Ok(pings)
    }

    /// One ping.
    pub fn ping(
        &self,
        room: &str,
        ping: &str,
        now_ms: i64,
    ) -> Result<Option<PingView>, CacheError> {
        Ok(self.pings_where(Some((room, ping)), false, now_ms)?.pop())
    }

    /// Pings (only `one` when given; only unanswered ones when `unanswered`).
    fn pings_where(
        &self,
        one: Option<(&str, &str)>,
        unanswered: bool,
        now_ms: i64,
    ) -> Result<Vec<PingView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT g.room, g.ping, g.seq, g.asker, pa.handle, g.question, g.options, g.recipients,
                    asked.ts_ms, g.expires_ms, g.answered_by, pb.handle, answered.ts_ms, g.choice,
                    g.answer_text
             FROM pings g
             LEFT JOIN principals pa ON pa.id = g.asker
             LEFT JOIN principals pb ON pb.id = g.answered_by
             LEFT JOIN events asked ON asked.stream = g.room AND asked.seq = g.seq
             LEFT JOIN events answered ON answered.stream = g.room AND answered.seq = g.answer_seq
             WHERE g.seq > 0 AND (?1 IS NULL OR (g.room = ?1 AND g.ping = ?2))
               AND (NOT ?3 OR g.answer_seq IS NULL)
             ORDER BY g.answered_by IS NOT NULL, g.seq",
        )?;
        let map = |row: &rusqlite::Row<'_>| {
            let expires_ms: Option<i64> = row.get(9)?;
            let answered_by: Option<String> = row.get(10)?;
            let state = if answered_by.is_some() {
                PingState::Answered
            } else if expires_ms.is_some_and(|expires| expires <= now_ms) {
                PingState::Expired
            } else {
                PingState::Open
            };
            Ok(PingView {
                room: row.get(0)?,
                ping: row.get(1)?,
                seq: row.get::<_, i64>(2)? as u64,
                asker: row.get(3)?,
                asker_handle: row.get(4)?,
                question: row.get(5)?,
                options: strings(row.get(6)?),
                recipients: strings(row.get(7)?),
                asked_ms: row.get(8)?,
                expires_ms,
                state,
                answered_by,
                answered_by_handle: row.get(11)?,
                answered_ms: row.get(12)?,
                choice: row.get(13)?,
                text: row.get(14)?,
            })
        };
        let (room, ping) = one.unzip();
        let pings = statement
            .query_map(params![room, ping, unanswered], map)?
            .collect::<Result<_, _>>()?;
        Ok(pings)
    }

    /// The latest message seq of each sender in a room.
    pub fn last_message_seqs(&self, room: &str) -> Result<Vec<(String, u64)>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT sender, max(seq) FROM events WHERE stream = ?1 AND kind = 'message'
             GROUP BY sender",
        )?;
        let seqs = statement
            .query_map([room], |row| {
                Ok((row.get(0)?, row.get::<_, i64>(1)? as u64))
            })?
            .collect::<Result<_, _>>()?;
        Ok(seqs)
    }

    /// The agents of `owner` the cache met.
    pub fn agents_of(&self, owner: &str) -> Result<Vec<PrincipalRow>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT id, kind, handle, name, owner FROM principals
             WHERE owner = ?1 AND kind = 'agent' ORDER BY handle",
        )?;
        let agents = statement
            .query_map([owner], PrincipalRow::from_row)?
            .collect::<Result<_, _>>()?;
        Ok(agents)
    }

    /// The latest status of each agent.
    pub fn agent_statuses(&self) -> Result<Vec<AgentStatusView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT s.agent, p.handle, s.room, s.state, s.detail, s.ts_ms FROM agent_status s
             LEFT JOIN principals p ON p.id = s.agent ORDER BY coalesce(p.handle, s.agent)",
        )?;
        let statuses = statement
            .query_map([], |row| {
                Ok(AgentStatusView {
                    agent: row.get(0)?,
                    handle: row.get(1)?,
                    room: row.get(2)?,
                    state: closed(row, 3)?,
                    detail: row.get(4)?,
                    ts_ms: row.get(5)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(statuses)
    }

    /// Our contacts.
    pub fn contacts(&self) -> Result<Vec<ContactView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT c.principal, p.handle, p.name, p.kind, c.since_ms FROM contacts c
             LEFT JOIN principals p ON p.id = c.principal ORDER BY coalesce(p.handle, c.principal)",
        )?;
        let contacts = statement
            .query_map([], |row| {
                Ok(ContactView {
                    principal: row.get(0)?,
                    handle: row.get(1)?,
                    name: row.get(2)?,
                    kind: closed_opt(row, 3)?,
                    since_ms: row.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(contacts)
    }

    /// Contact requests, pending first, newest first.
    pub fn requests(&self) -> Result<Vec<RequestView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT r.id, r.sender, pf.handle, r.target, pt.handle, r.state, r.message, r.ts_ms
             FROM requests r
             LEFT JOIN principals pf ON pf.id = r.sender
             LEFT JOIN principals pt ON pt.id = r.target
             ORDER BY r.state != 'pending', r.ts_ms DESC",
        )?;
        let requests = statement
            .query_map([], |row| {
                Ok(RequestView {
                    id: row.get(0)?,
                    from: row.get(1)?,
                    from_handle: row.get(2)?,
                    to: row.get(3)?,
                    to_handle: row.get(4)?,
                    state: closed(row, 5)?,
                    message: row.get(6)?,
                    ts_ms: row.get(7)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(requests)
    }

    /// The controls in force on us.
    pub fn controls(&self) -> Result<Vec<ControlView>, CacheError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT room, action, by, seq FROM controls ORDER BY room")?;
        let controls = statement
            .query_map([], |row| {
                let room: String = row.get(0)?;
                Ok(ControlView {
                    room: (!room.is_empty()).then_some(room),
                    action: row.get(1)?,
                    by: row.get(2)?,
                    seq: row.get::<_, i64>(3)? as u64,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(controls)
    }

    /// How many events the cache holds, every stream included.
    pub fn event_count(&self) -> Result<usize, CacheError> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM events", [], |row| {
                row.get::<_, i64>(0)
            })? as usize)
    }

    /// Every event of a stream, ascending (for checks and exports): seq, id, kind.
    pub fn stream_events(&self, stream: &str) -> Result<Vec<(u64, String, String)>, CacheError> {
        let mut statement = self
            .conn
            .prepare("SELECT seq, id, kind FROM events WHERE stream = ?1 ORDER BY seq")?;
        let events = statement
            .query_map([stream], |row| {
                Ok((row.get::<_, i64>(0)? as u64, row.get(1)?, row.get(2)?))
            })?
            .collect::<Result<_, _>>()?;
        Ok(events)
    }

    /// When the event `seq` of `stream` was stored, if the cache has it.
    pub fn event_time(&self, stream: &str, seq: u64) -> Result<Option<i64>, CacheError> {
        Ok(self
            .conn
            .prepare_cached("SELECT ts_ms FROM events WHERE stream = ?1 AND seq = ?2")?
            .query_row(params![stream, seq as i64], |row| row.get(0))
            .optional()?)
    }

    /// Inbox events of `kind` after `after`, ascending: seq and body.
    pub fn inbox_events(
        &self,
        kind: &str,
        after: u64,
    ) -> Result<Vec<(u64, serde_json::Value)>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT seq, body FROM events WHERE stream = 'inbox' AND kind = ?1 AND seq > ?2
             ORDER BY seq",
        )?;
        let events = statement
            .query_map(params![kind, after as i64], |row| {
                let body: String = row.get(1)?;
                Ok((
                    row.get::<_, i64>(0)? as u64,
                    serde_json::from_str(&body).unwrap_or_default(),
                ))
            })?
            .collect::<Result<_, _>>()?;
        Ok(events)
    }
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
