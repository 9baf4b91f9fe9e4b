//! Reads the boards need beyond the projections: a component's history (its `arch` events),
//! how much each principal wrote lately, unread counts since a moment, and the sessions
//! usage was reported for. Rows only; [`crate::work::boards`] shapes them.

use rusqlite::params;
use serde::Serialize;

use super::{CacheError, CacheView};

/// One `arch` event of a room, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchEventRow {
    pub seq: u64,
    pub ts_ms: i64,
    pub sender: String,
    pub sender_handle: Option<String>,
    pub body: String,
}

/// How many messages a principal wrote in a room since a moment, and when the last.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageCount {
    pub room: String,
    pub sender: String,
    pub count: u64,
    pub last_ms: i64,
}

/// A session usage was reported for, in one room.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageSession {
    pub agent: String,
    pub framework: String,
    pub session_id: String,
    pub room: String,
    /// When its latest reported usage ended.
    pub last_ms: i64,
}

impl CacheView {
    /// The `arch` events of a room, oldest first.
    pub fn arch_events(&self, room: &str) -> Result<Vec<ArchEventRow>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT e.seq, e.ts_ms, e.sender, p.handle, e.body FROM events e
             LEFT JOIN principals p ON p.id = e.sender
             WHERE e.kind = 'arch' AND e.stream = ?1 ORDER BY e.seq",
        )?;
        let rows = statement
            .query_map([room], |row| {
                Ok(ArchEventRow {
                    seq: row.get::<_, i64>(0)? as u64,
                    ts_ms: row.get(1)?,
                    sender: row.get(2)?,
                    sender_handle: row.get(3)?,
                    body: row.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Messages written at or after `since_ms`, counted per room and sender.
    pub fn message_counts_since(&self, since_ms: i64) -> Result<Vec<MessageCount>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT stream, sender, count(*), max(ts_ms) FROM events
             WHERE kind = 'message' AND ts_ms >= ?1 GROUP BY stream, sender ORDER BY stream, sender",
        )?;
        let rows = statement
            .query_map([since_ms], |row| {
                Ok(MessageCount {
                    room: row.get(0)?,
                    sender: row.get(1)?,
                    count: row.get::<_, i64>(2)? as u64,
                    last_ms: row.get(3)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Messages of a room after seq `after` and after time `since_ms` that someone other than
    /// `me` wrote, and how many of those mention `me`.
    pub fn unread_since(
        &self,
        room: &str,
        after: u64,
        since_ms: i64,
        me: &str,
    ) -> Result<(u64, u64), CacheError> {
        let counted = self
            .conn
            .prepare_cached(
                "SELECT count(*), coalesce(sum(EXISTS (SELECT 1 FROM mentions m
                     WHERE m.room = e.stream AND m.seq = e.seq AND m.principal = ?4)), 0)
                 FROM events e
                 WHERE e.stream = ?1 AND e.kind = 'message' AND e.seq > ?2 AND e.ts_ms > ?3
                   AND e.sender != ?4",
            )?
            .query_row(params![room, after as i64, since_ms, me], |row| {
                Ok((row.get::<_, i64>(0)? as u64, row.get::<_, i64>(1)? as u64))
            })?;
        Ok(counted)
    }

    /// Who wrote the messages of `room` after seq `after` and later than `since_ms`, other
    /// than `me`: each sender with their count, the most first (then by id).
    pub fn message_authors_since(
        &self,
        room: &str,
        after: u64,
        since_ms: i64,
        me: &str,
    ) -> Result<Vec<(String, u64)>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT e.sender, count(*) FROM events e
             WHERE e.stream = ?1 AND e.kind = 'message' AND e.seq > ?2 AND e.ts_ms > ?3
               AND e.sender != ?4
             GROUP BY e.sender ORDER BY 2 DESC, 1",
        )?;
        let authors = statement
            .query_map(params![room, after as i64, since_ms, me], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)? as u64))
            })?
            .collect::<Result<_, _>>()?;
        Ok(authors)
    }

    /// Every session usage was reported for, per room, the latest first.
    pub fn usage_sessions(&self) -> Result<Vec<UsageSession>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT agent, framework, session_id, room, max(to_ms) FROM usage
             GROUP BY agent, framework, session_id, room ORDER BY 5 DESC",
        )?;
        let rows = statement
            .query_map([], |row| {
                Ok(UsageSession {
                    agent: row.get(0)?,
                    framework: row.get(1)?,
                    session_id: row.get(2)?,
                    room: row.get(3)?,
                    last_ms: row.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }
}
