//! The agent CLI sessions of this profile's agent: bound by its hooks (a session started,
//! here is its transcript) and by its runner (this session answers that room).

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Cache, CacheError, CacheView};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRow {
    pub framework: String,
    pub session_id: String,
    pub transcript: Option<String>,
    pub cwd: Option<String>,
    pub room: Option<String>,
    pub started_ms: i64,
    pub updated_ms: i64,
}

fn row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        framework: row.get(0)?,
        session_id: row.get(1)?,
        transcript: row.get(2)?,
        cwd: row.get(3)?,
        room: row.get(4)?,
        started_ms: row.get(5)?,
        updated_ms: row.get(6)?,
    })
}

const COLUMNS: &str = "framework, session_id, transcript, cwd, room, started_ms, updated_ms";

impl Cache {
    /// Records that a session runs (or ran): its transcript and working directory, when
    /// known, are kept; a later call fills in what an earlier one lacked.
    pub fn bind_session(
        &self,
        framework: &str,
        session_id: &str,
        transcript: Option<&str>,
        cwd: Option<&str>,
        now_ms: i64,
    ) -> Result<(), CacheError> {
        self.conn.execute(
            "INSERT INTO sessions (framework, session_id, transcript, cwd, started_ms, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)
             ON CONFLICT (framework, session_id) DO UPDATE SET
                 transcript = coalesce(excluded.transcript, sessions.transcript),
                 cwd = coalesce(excluded.cwd, sessions.cwd), updated_ms = excluded.updated_ms",
            params![framework, session_id, transcript, cwd, now_ms],
        )?;
        Ok(())
    }

    /// Binds `room` to a session of `framework`: the runner resumes it for the room's
    /// messages. A room has one session per framework.
    pub fn bind_room(
        &mut self,
        room: &str,
        framework: &str,
        session_id: &str,
        now_ms: i64,
    ) -> Result<(), CacheError> {
        let tx = self.conn().transaction()?;
        tx.execute(
            "UPDATE sessions SET room = NULL WHERE room = ?1 AND framework = ?2 AND session_id != ?3",
            params![room, framework, session_id],
        )?;
        tx.execute(
            "INSERT INTO sessions (framework, session_id, room, started_ms, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?4)
             ON CONFLICT (framework, session_id) DO UPDATE SET room = excluded.room,
                 updated_ms = excluded.updated_ms",
            params![framework, session_id, room, now_ms],
        )?;
        tx.commit()?;
        Ok(())
    }
}

impl CacheView {
    /// The session bound to `room` for `framework`.
    pub fn room_session(
        &self,
        room: &str,
        framework: &str,
    ) -> Result<Option<SessionRow>, CacheError> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM sessions WHERE room = ?1 AND framework = ?2"),
                params![room, framework],
                row,
            )
            .optional()?)
    }

    /// Every session known, the latest first.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, CacheError> {
        let mut statement = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM sessions ORDER BY updated_ms DESC"
        ))?;
        let rows = statement.query_map([], row)?.collect::<Result<_, _>>()?;
        Ok(rows)
    }
}
