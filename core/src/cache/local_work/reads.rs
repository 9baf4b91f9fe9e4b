//! What the views read of this machine's work: the files read so far, the sessions with
//! their owners, and every request's usage.

use super::*;

/// One request of this machine's logs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocalUsageEntry {
    pub framework: String,
    pub session_id: String,
    pub model: String,
    pub at_ms: Option<i64>,
    pub tokens: TokenCounts,
    pub billing: Billing,
}

/// A session of this machine, as its logs describe it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocalSession {
    pub framework: String,
    pub session_id: String,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub first_ms: Option<i64>,
    pub last_ms: Option<i64>,
    /// Its own task list (not its subagents').
    pub tasks: Vec<TaskItem>,
    /// The tool its list came from.
    pub task_source: Option<String>,
    pub files: Vec<String>,
    pub tokens: TokenCounts,
    /// The agent that claimed it, if one did (the cache does not know; views fill it in
    /// from the claims).
    pub claimed_by: Option<SessionOwner>,
}

/// The agent a session of this machine belongs to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionOwner {
    /// Its principal, when the cache knows its handle.
    pub id: Option<String>,
    pub handle: String,
}

impl CacheView {
    /// Where the watcher is in every file it read.
    pub fn log_files(&self) -> Result<Vec<LogFileState>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT path, kind, device, inode, size, \"offset\", parser, skipped FROM log_files",
        )?;
        let rows = statement.query_map([], log_file_state)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Where the watcher is in a file.
    pub fn log_file(&self, path: &str) -> Result<Option<LogFileState>, CacheError> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT path, kind, device, inode, size, \"offset\", parser, skipped
                 FROM log_files WHERE path = ?1",
            )?
            .query_row([path], log_file_state)
            .optional()?)
    }

    /// Every session of this machine (framework, session id).
    pub fn local_session_keys(&self) -> Result<Vec<(String, String)>, CacheError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT framework, session_id FROM local_sessions")?;
        let keys = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(keys)
    }

    /// Where a session of this machine ran, when its logs said.
    pub fn local_session_cwd(
        &self,
        framework: &str,
        session_id: &str,
    ) -> Result<Option<String>, CacheError> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT cwd FROM local_sessions WHERE framework = ?1 AND session_id = ?2",
            )?
            .query_row(params![framework, session_id], |row| row.get(0))
            .optional()?
            .flatten())
    }

    /// The sessions of this machine, the latest first.
    pub fn local_sessions(&self) -> Result<Vec<LocalSession>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT s.framework, s.session_id, s.cwd, s.model, s.first_ms, s.last_ms,
                    (SELECT tasks FROM local_tasks t WHERE t.framework = s.framework
                         AND t.session_id = s.session_id AND t.lane = ''),
                    (SELECT source FROM local_tasks t WHERE t.framework = s.framework
                         AND t.session_id = s.session_id AND t.lane = ''),
                    coalesce(sum(u.input), 0), coalesce(sum(u.output), 0),
                    coalesce(sum(u.cache_write_5m), 0), coalesce(sum(u.cache_write_1h), 0),
                    coalesce(sum(u.cache_read), 0)
             FROM local_sessions s LEFT JOIN local_usage u
                 ON u.framework = s.framework AND u.session_id = s.session_id
             GROUP BY s.framework, s.session_id ORDER BY s.last_ms DESC",
        )?;
        let mut sessions: Vec<LocalSession> = statement
            .query_map([], |row| {
                let tasks: Option<String> = row.get(6)?;
                Ok(LocalSession {
                    framework: row.get(0)?,
                    session_id: row.get(1)?,
                    cwd: row.get(2)?,
                    model: row.get(3)?,
                    first_ms: row.get(4)?,
                    last_ms: row.get(5)?,
                    tasks: tasks
                        .and_then(|text| serde_json::from_str(&text).ok())
                        .unwrap_or_default(),
                    task_source: row.get(7)?,
                    files: Vec::new(),
                    tokens: counts(row, 8)?,
                    claimed_by: None,
                })
            })?
            .collect::<Result<_, _>>()?;
        let mut files = self.conn.prepare_cached(
            "SELECT path FROM local_files WHERE framework = ?1 AND session_id = ?2 ORDER BY path",
        )?;
        for session in &mut sessions {
            session.files = files
                .query_map(params![session.framework, session.session_id], |row| {
                    row.get(0)
                })?
                .collect::<Result<_, _>>()?;
        }
        Ok(sessions)
    }

    /// Every request of this machine's logs that ended in a period.
    pub fn local_usage_entries(
        &self,
        since_ms: Option<i64>,
        until_ms: Option<i64>,
    ) -> Result<Vec<LocalUsageEntry>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT framework, session_id, model, at_ms, input, output, cache_write_5m,
                    cache_write_1h, cache_read, billing
             FROM local_usage
             WHERE (?1 IS NULL OR at_ms >= ?1) AND (?2 IS NULL OR at_ms < ?2)",
        )?;
        let rows = statement
            .query_map(params![since_ms, until_ms], |row| {
                Ok(LocalUsageEntry {
                    framework: row.get(0)?,
                    session_id: row.get(1)?,
                    model: row.get(2)?,
                    at_ms: row.get(3)?,
                    tokens: counts(row, 4)?,
                    billing: billing_of(row.get(9)?),
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }
}
