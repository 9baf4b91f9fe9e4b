//! Reads of the cache, shaped for the apps (the CLI today, the desktop next).

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Cache, CacheError};

/// A principal as the cache knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrincipalRow {
    pub id: String,
    pub kind: String,
    pub handle: String,
    pub name: String,
    pub owner: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoomView {
    pub id: String,
    pub title: Option<String>,
    pub topic: Option<String>,
    pub creator: Option<String>,
    /// The highest seq synced.
    pub head: u64,
    /// Member handles (ids when the handle is not known).
    pub members: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageView {
    pub room: String,
    /// `None` while it waits in the outbox.
    pub seq: Option<u64>,
    pub ts_ms: i64,
    pub from: String,
    /// The sender's handle, when known.
    pub from_handle: Option<String>,
    pub text: String,
    pub mentions: Vec<String>,
    /// `stored` (on the hub), `queued` (in the outbox) or `failed` (refused by the hub).
    pub delivery: &'static str,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSession {
    pub agent: String,
    pub framework: String,
    pub session_id: String,
    pub room: String,
    pub ts_ms: i64,
    pub source: String,
    pub tasks: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentView {
    pub id: String,
    pub name: Option<String>,
    pub status: Option<String>,
    pub note: Option<String>,
    pub by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageTotal {
    pub agent: String,
    pub model: String,
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    /// The sum of priced entries.
    pub cost_usd: f64,
    /// Entries without a price (an unpriced model).
    pub unpriced: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PingView {
    pub room: String,
    pub ping: String,
    pub asker: String,
    pub question: String,
    pub options: Vec<String>,
    pub answered_by: Option<String>,
    pub choice: Option<String>,
    pub text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestView {
    pub id: String,
    pub from: String,
    pub to: String,
    pub state: String,
    pub message: Option<String>,
}

impl Cache {
    /// The handle of a principal, if the cache met it.
    pub fn handle_of(&self, id: &str) -> Result<Option<String>, CacheError> {
        Ok(self
            .conn
            .query_row("SELECT handle FROM principals WHERE id = ?1", [id], |row| {
                row.get(0)
            })
            .optional()?)
    }

    /// The id of a principal by handle, if the cache met it.
    pub fn principal_by_handle(&self, handle: &str) -> Result<Option<PrincipalRow>, CacheError> {
        Ok(self
            .conn
            .query_row(
                "SELECT id, kind, handle, name, owner FROM principals WHERE handle = ?1",
                [handle],
                |row| {
                    Ok(PrincipalRow {
                        id: row.get(0)?,
                        kind: row.get(1)?,
                        handle: row.get(2)?,
                        name: row.get(3)?,
                        owner: row.get(4)?,
                    })
                },
            )
            .optional()?)
    }

    /// The rooms we are a member of.
    pub fn rooms(&self) -> Result<Vec<RoomView>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT r.id, r.title, r.topic, r.creator, coalesce(c.seq, 0)
             FROM rooms r LEFT JOIN cursors c ON c.stream = r.id
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
                })
            })?
            .collect::<Result<_, _>>()?;
        let mut members = self.conn.prepare(
            "SELECT coalesce(p.handle, m.principal) FROM members m
             LEFT JOIN principals p ON p.id = m.principal
             WHERE m.room = ?1 AND m.present = 1 ORDER BY 1",
        )?;
        for room in &mut rooms {
            room.members = members
                .query_map([&room.id], |row| row.get(0))?
                .collect::<Result<_, _>>()?;
        }
        Ok(rooms)
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
                 SELECT e.seq, e.ts_ms, e.sender, p.handle, e.body FROM events e
                 LEFT JOIN principals p ON p.id = e.sender
                 WHERE e.stream = ?1 AND e.kind = 'message' AND e.seq > ?2 AND e.seq < ?3
                 ORDER BY e.seq {order} LIMIT ?4
             ) ORDER BY seq"
        ))?;
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        let messages = statement
            .query_map(params![room, after as i64, before, limit], |row| {
                let body: String = row.get(4)?;
                Ok((
                    row.get::<_, i64>(0)? as u64,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, Option<String>>(3)?,
                    body,
                ))
            })?
            .map(|row| {
                row.map(|(seq, ts_ms, from, from_handle, body)| {
                    let (text, mentions) = message_parts(&body);
                    MessageView {
                        room: room.to_owned(),
                        seq: Some(seq),
                        ts_ms,
                        from,
                        from_handle,
                        text,
                        mentions,
                        delivery: "stored",
                        error: None,
                    }
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(messages)
    }

    /// Tasks: the latest list of every agent session, newest first.
    pub fn task_sessions(&self) -> Result<Vec<TaskSession>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT agent, framework, session_id, room, ts_ms, source, tasks FROM tasks
             ORDER BY ts_ms DESC, agent",
        )?;
        let sessions = statement
            .query_map([], |row| {
                let tasks: String = row.get(6)?;
                Ok(TaskSession {
                    agent: row.get(0)?,
                    framework: row.get(1)?,
                    session_id: row.get(2)?,
                    room: row.get(3)?,
                    ts_ms: row.get(4)?,
                    source: row.get(5)?,
                    tasks: serde_json::from_str(&tasks).unwrap_or_default(),
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(sessions)
    }

    /// The architecture board of a room.
    pub fn components(&self, room: &str) -> Result<Vec<ComponentView>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT id, name, status, note, status_by FROM components WHERE room = ?1 ORDER BY id",
        )?;
        let components = statement
            .query_map([room], |row| {
                Ok(ComponentView {
                    id: row.get(0)?,
                    name: row.get(1)?,
                    status: row.get(2)?,
                    note: row.get(3)?,
                    by: row.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(components)
    }

    /// Tokens and dollars per agent and model, for usage that ended at or after `since_ms`.
    pub fn usage_totals(&self, since_ms: i64) -> Result<Vec<UsageTotal>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT agent, model, sum(input), sum(output), sum(cache_write), sum(cache_read),
                    coalesce(sum(cost_usd), 0), sum(cost_usd IS NULL)
             FROM usage WHERE to_ms >= ?1 GROUP BY agent, model ORDER BY agent, model",
        )?;
        let totals = statement
            .query_map([since_ms], |row| {
                Ok(UsageTotal {
                    agent: row.get(0)?,
                    model: row.get(1)?,
                    input: row.get::<_, i64>(2)? as u64,
                    output: row.get::<_, i64>(3)? as u64,
                    cache_write: row.get::<_, i64>(4)? as u64,
                    cache_read: row.get::<_, i64>(5)? as u64,
                    cost_usd: row.get(6)?,
                    unpriced: row.get::<_, i64>(7)? as u64,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(totals)
    }

    /// Pings, open ones first.
    pub fn pings(&self) -> Result<Vec<PingView>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT room, ping, asker, question, options, answered_by, choice, answer_text
             FROM pings WHERE seq > 0 ORDER BY answered_by IS NOT NULL, seq",
        )?;
        let pings = statement
            .query_map([], |row| {
                let options: Option<String> = row.get(4)?;
                Ok(PingView {
                    room: row.get(0)?,
                    ping: row.get(1)?,
                    asker: row.get(2)?,
                    question: row.get(3)?,
                    options: options
                        .and_then(|options| serde_json::from_str(&options).ok())
                        .unwrap_or_default(),
                    answered_by: row.get(5)?,
                    choice: row.get(6)?,
                    text: row.get(7)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(pings)
    }

    /// The latest status of each agent: (agent, state, detail).
    pub fn agent_statuses(&self) -> Result<Vec<(String, String, Option<String>)>, CacheError> {
        let mut statement = self
            .conn
            .prepare("SELECT agent, state, detail FROM agent_status ORDER BY agent")?;
        let statuses = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<Result<_, _>>()?;
        Ok(statuses)
    }

    /// Contact requests, pending first.
    pub fn requests(&self) -> Result<Vec<RequestView>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT id, sender, target, state, message FROM requests
             ORDER BY state != 'pending', ts_ms DESC",
        )?;
        let requests = statement
            .query_map([], |row| {
                Ok(RequestView {
                    id: row.get(0)?,
                    from: row.get(1)?,
                    to: row.get(2)?,
                    state: row.get(3)?,
                    message: row.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(requests)
    }

    /// The controls in force on us: (room or "" for every room, action).
    pub fn controls(&self) -> Result<Vec<(String, String)>, CacheError> {
        let mut statement = self
            .conn
            .prepare("SELECT room, action FROM controls ORDER BY room")?;
        let controls = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
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

    /// Every event of a stream, ascending (for checks and exports).
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
}

/// A message body's text and mentions (an unreadable body shows as empty).
pub(crate) fn message_parts(body: &str) -> (String, Vec<String>) {
    match serde_json::from_str::<roundtable_protocol::bodies::MessageBody>(body) {
        Ok(message) => (message.text, message.mentions.unwrap_or_default()),
        Err(_) => (String::new(), Vec::new()),
    }
}
