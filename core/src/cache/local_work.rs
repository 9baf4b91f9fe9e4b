//! The work view of this machine in the cache: what the agent CLIs' logs said, file by file
//! as the watcher reads them, and what changed for views and for publishing. Each read of a
//! file is applied in one transaction with the file's new offset and with the events it
//! publishes (queued in the outbox), so a crash at any point neither loses nor repeats one.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{Cache, CacheError, CacheView};
use crate::work::events::{Framework, LogEvent, TaskItem, TokenCounts};

/// Where the watcher is in one log file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogFileState {
    pub path: String,
    pub kind: String,
    pub device: u64,
    pub inode: u64,
    pub size: u64,
    pub offset: u64,
    /// The line parser's state after the last line read (JSON).
    pub parser: Option<String>,
    pub skipped: u64,
}

/// What one read of a file brought.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRead {
    pub framework: Framework,
    /// The file's state after the read.
    pub state: LogFileState,
    /// Each event with the offset of the line that said it.
    pub events: Vec<(u64, LogEvent)>,
    /// Where the read began in the file (0 when it read it all).
    pub from: u64,
    /// Where the cache held the file when the read began (`None`: not at all).
    pub based_on: Option<FilePosition>,
}

/// A file, and how far into it the watcher is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilePosition {
    pub device: u64,
    pub inode: u64,
    pub offset: u64,
}

impl LogFileState {
    pub fn position(&self) -> FilePosition {
        FilePosition {
            device: self.device,
            inode: self.inode,
            offset: self.offset,
        }
    }
}

/// Tokens a session spent on a model, added by a read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageDelta {
    pub framework: Framework,
    pub session_id: String,
    pub model: String,
    pub tokens: TokenCounts,
    pub first_ms: Option<i64>,
    pub last_ms: Option<i64>,
}

/// A task list that changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskListChange {
    pub framework: Framework,
    pub session_id: String,
    pub lane: String,
    pub source: String,
    pub tasks: Vec<TaskItem>,
    pub at_ms: Option<i64>,
}

/// A file an agent touched for the first time in its session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileTouch {
    pub framework: Framework,
    pub session_id: String,
    pub path: String,
    pub at_ms: Option<i64>,
}

/// What a read changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LocalChanges {
    pub usage: Vec<UsageDelta>,
    pub tasks: Vec<TaskListChange>,
    pub files: Vec<FileTouch>,
    /// Sessions seen (framework, id, working directory).
    pub sessions: Vec<(Framework, String, Option<String>)>,
}

/// An event to publish, built from what changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Publication {
    pub room: String,
    pub client_key: String,
    pub kind: String,
    pub body: serde_json::Value,
}

fn log_file_state(row: &rusqlite::Row<'_>) -> rusqlite::Result<LogFileState> {
    Ok(LogFileState {
        path: row.get(0)?,
        kind: row.get(1)?,
        device: row.get::<_, i64>(2)? as u64,
        inode: row.get::<_, i64>(3)? as u64,
        size: row.get::<_, i64>(4)? as u64,
        offset: row.get::<_, i64>(5)? as u64,
        parser: row.get(6)?,
        skipped: row.get::<_, i64>(7)? as u64,
    })
}

fn framework_text(framework: Framework) -> &'static str {
    framework.as_str()
}

fn counts(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<TokenCounts> {
    Ok(TokenCounts {
        input: row.get::<_, i64>(first)? as u64,
        output: row.get::<_, i64>(first + 1)? as u64,
        cache_write_5m: row.get::<_, i64>(first + 2)? as u64,
        cache_write_1h: row.get::<_, i64>(first + 3)? as u64,
        cache_read: row.get::<_, i64>(first + 4)? as u64,
    })
}

fn minus(new: &TokenCounts, old: &TokenCounts) -> TokenCounts {
    TokenCounts {
        input: new.input.saturating_sub(old.input),
        output: new.output.saturating_sub(old.output),
        cache_write_5m: new.cache_write_5m.saturating_sub(old.cache_write_5m),
        cache_write_1h: new.cache_write_1h.saturating_sub(old.cache_write_1h),
        cache_read: new.cache_read.saturating_sub(old.cache_read),
    }
}

/// Adds usage to the per-(session, model) deltas of a read.
fn add_delta(
    deltas: &mut BTreeMap<(String, String), UsageDelta>,
    framework: Framework,
    session_id: &str,
    model: &str,
    tokens: TokenCounts,
    at_ms: Option<i64>,
) {
    if tokens.total() == 0 {
        return;
    }
    let delta = deltas
        .entry((session_id.to_owned(), model.to_owned()))
        .or_insert_with(|| UsageDelta {
            framework,
            session_id: session_id.to_owned(),
            model: model.to_owned(),
            tokens: TokenCounts::default(),
            first_ms: at_ms,
            last_ms: at_ms,
        });
    delta.tokens.add(&tokens);
    if let Some(at) = at_ms {
        delta.first_ms = Some(delta.first_ms.map_or(at, |first| first.min(at)));
        delta.last_ms = Some(delta.last_ms.map_or(at, |last| last.max(at)));
    }
}

/// One report of a request, de-duplicated as [`crate::work::summary`] does: the largest
/// report of a request counts; a side chain's copy of a main chain's request does not.
/// Returns what it added.
#[allow(clippy::too_many_arguments)]
fn store_usage(
    tx: &rusqlite::Transaction<'_>,
    framework: &str,
    session_id: &str,
    message_id: &str,
    request_id: &str,
    sidechain: bool,
    model: &str,
    tokens: &TokenCounts,
    at_ms: Option<i64>,
) -> Result<TokenCounts, CacheError> {
    let reports: Vec<(String, bool, TokenCounts)> = tx
        .prepare_cached(
            "SELECT request_id, sidechain, input, output, cache_write_5m, cache_write_1h, cache_read
             FROM local_usage WHERE framework = ?1 AND session_id = ?2 AND message_id = ?3",
        )?
        .query_map(params![framework, session_id, message_id], |row| {
            Ok((row.get(0)?, row.get::<_, bool>(1)?, counts(row, 2)?))
        })?
        .collect::<Result<_, _>>()?;
    let insert = |tx: &rusqlite::Transaction<'_>| -> Result<(), CacheError> {
        tx.prepare_cached(
            "INSERT INTO local_usage (framework, session_id, message_id, request_id, sidechain, model,
                 input, output, cache_write_5m, cache_write_1h, cache_read, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
             ON CONFLICT (framework, session_id, message_id, request_id) DO UPDATE SET
                 sidechain = excluded.sidechain, model = excluded.model, input = excluded.input,
                 output = excluded.output, cache_write_5m = excluded.cache_write_5m,
                 cache_write_1h = excluded.cache_write_1h, cache_read = excluded.cache_read,
                 at_ms = excluded.at_ms",
        )?
        .execute(params![
            framework,
            session_id,
            message_id,
            request_id,
            sidechain,
            model,
            tokens.input as i64,
            tokens.output as i64,
            tokens.cache_write_5m as i64,
            tokens.cache_write_1h as i64,
            tokens.cache_read as i64,
            at_ms
        ])?;
        Ok(())
    };
    if let Some((_, same_sidechain, old)) = reports.iter().find(|(id, _, _)| id == request_id) {
        if tokens.total() <= old.total() {
            return Ok(TokenCounts::default());
        }
        let _ = same_sidechain;
        insert(tx)?;
        return Ok(minus(tokens, old));
    }
    if reports.is_empty() {
        insert(tx)?;
        return Ok(*tokens);
    }
    let main_present = reports.iter().any(|(_, side, _)| !side);
    if sidechain && main_present {
        return Ok(TokenCounts::default());
    }
    if sidechain {
        // Only side chains' copies so far: one counts, the largest.
        let (kept_id, _, kept) = &reports[0];
        if tokens.total() <= kept.total() {
            return Ok(TokenCounts::default());
        }
        tx.execute(
            "DELETE FROM local_usage WHERE framework = ?1 AND session_id = ?2 AND message_id = ?3
                 AND request_id = ?4",
            params![framework, session_id, message_id, kept_id],
        )?;
        insert(tx)?;
        return Ok(minus(tokens, kept));
    }
    // A main-chain report arrives after side-chain copies: they go.
    let mut removed = TokenCounts::default();
    for (id, side, old) in &reports {
        if *side {
            removed.add(old);
            tx.execute(
                "DELETE FROM local_usage WHERE framework = ?1 AND session_id = ?2
                     AND message_id = ?3 AND request_id = ?4",
                params![framework, session_id, message_id, id],
            )?;
        }
    }
    insert(tx)?;
    Ok(minus(tokens, &removed))
}

/// Where each session ran, as far as the cache knows.
pub type SessionCwds = BTreeMap<(Framework, String), String>;

impl Cache {
    /// Applies reads of log files in one transaction: each moves its file's offset, and what
    /// `publish` makes of its changes (with where the sessions ran) is queued in the outbox
    /// for process `owner`. A read whose file the cache no longer holds where the read began
    /// (another watcher went on meanwhile) is left out: `None` in its place.
    pub fn apply_log_reads(
        &mut self,
        reads: &[LogRead],
        now_ms: i64,
        owner: &str,
        mut publish: impl FnMut(usize, &LogRead, &LocalChanges, &SessionCwds) -> Vec<Publication>,
    ) -> Result<Vec<Option<LocalChanges>>, CacheError> {
        let tx = self.conn().transaction()?;
        let mut applied = Vec::with_capacity(reads.len());
        for (index, read) in reads.iter().enumerate() {
            let current = tx
                .prepare_cached("SELECT device, inode, \"offset\" FROM log_files WHERE path = ?1")?
                .query_row([&read.state.path], |row| {
                    Ok(FilePosition {
                        device: row.get::<_, i64>(0)? as u64,
                        inode: row.get::<_, i64>(1)? as u64,
                        offset: row.get::<_, i64>(2)? as u64,
                    })
                })
                .optional()?;
            if current != read.based_on {
                applied.push(None);
                continue;
            }
            let changes = apply_one(&tx, read, now_ms)?;
            let mut cwds = SessionCwds::new();
            for (_, event) in &read.events {
                let session = event.session_id();
                if cwds.contains_key(&(read.framework, session.to_owned())) {
                    continue;
                }
                let cwd: Option<Option<String>> = tx
                    .prepare_cached(
                        "SELECT cwd FROM local_sessions WHERE framework = ?1 AND session_id = ?2",
                    )?
                    .query_row(params![read.framework.as_str(), session], |row| row.get(0))
                    .optional()?;
                if let Some(Some(cwd)) = cwd {
                    cwds.insert((read.framework, session.to_owned()), cwd);
                }
            }
            queue_publications(&tx, publish(index, read, &changes, &cwds), now_ms, owner)?;
            applied.push(Some(changes));
        }
        tx.commit()?;
        Ok(applied)
    }

    /// Forgets a file that is gone.
    pub fn forget_log_file(&self, path: &str) -> Result<(), CacheError> {
        self.conn
            .execute("DELETE FROM log_files WHERE path = ?1", [path])?;
        Ok(())
    }
}

/// Applies one read: what its events say, and the file's new state.
fn apply_one(
    tx: &rusqlite::Transaction<'_>,
    read: &LogRead,
    now_ms: i64,
) -> Result<LocalChanges, CacheError> {
    let framework = framework_text(read.framework);
    let mut changes = LocalChanges::default();
    let mut deltas: BTreeMap<(String, String), UsageDelta> = BTreeMap::new();
    let mut lists: BTreeMap<(String, String), TaskListChange> = BTreeMap::new();
    for (offset, event) in &read.events {
        match event {
            LogEvent::Session {
                session_id,
                cwd,
                model,
                at_ms,
            } => {
                tx.prepare_cached(
                        "INSERT INTO local_sessions (framework, session_id, cwd, model, first_ms, last_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                         ON CONFLICT (framework, session_id) DO UPDATE SET
                             cwd = coalesce(excluded.cwd, local_sessions.cwd),
                             model = coalesce(excluded.model, local_sessions.model),
                             first_ms = min(coalesce(local_sessions.first_ms, excluded.first_ms), coalesce(excluded.first_ms, local_sessions.first_ms)),
                             last_ms = max(coalesce(local_sessions.last_ms, excluded.last_ms), coalesce(excluded.last_ms, local_sessions.last_ms))",
                    )?
                    .execute(params![framework, session_id, cwd, model, at_ms])?;
                changes
                    .sessions
                    .push((read.framework, session_id.clone(), cwd.clone()));
            }
            LogEvent::Tasks {
                session_id,
                lane,
                source,
                tasks,
                at_ms,
            } => {
                let lane = lane.clone().unwrap_or_default();
                let text = serde_json::to_string(tasks).expect("tasks serialize");
                let stored: Option<(String, String)> = tx
                    .prepare_cached(
                        "SELECT source, tasks FROM local_tasks
                             WHERE framework = ?1 AND session_id = ?2 AND lane = ?3",
                    )?
                    .query_row(params![framework, session_id, lane], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })
                    .optional()?;
                // The task store only fills in for a transcript without a list.
                let store_only = source == "task_file"
                    && stored
                        .as_ref()
                        .is_some_and(|(source, _)| source != "task_file");
                if store_only || stored.as_ref().is_some_and(|(_, old)| *old == text) {
                    continue;
                }
                tx.prepare_cached(
                        "INSERT INTO local_tasks (framework, session_id, lane, source, tasks, at_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                         ON CONFLICT (framework, session_id, lane) DO UPDATE SET
                             source = excluded.source, tasks = excluded.tasks, at_ms = excluded.at_ms",
                    )?
                    .execute(params![framework, session_id, lane, source, text, at_ms])?;
                lists.insert(
                    (session_id.clone(), lane.clone()),
                    TaskListChange {
                        framework: read.framework,
                        session_id: session_id.clone(),
                        lane,
                        source: source.clone(),
                        tasks: tasks.clone(),
                        at_ms: *at_ms,
                    },
                );
            }
            LogEvent::FileTouched {
                session_id,
                path,
                tool,
                at_ms,
            } => {
                let new = tx
                    .prepare_cached(
                        "INSERT INTO local_files (framework, session_id, path, tool, at_ms)
                             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                    )?
                    .execute(params![framework, session_id, path, tool, at_ms])?;
                if new > 0 {
                    changes.files.push(FileTouch {
                        framework: read.framework,
                        session_id: session_id.clone(),
                        path: path.clone(),
                        at_ms: *at_ms,
                    });
                }
            }
            LogEvent::Usage {
                session_id,
                key,
                sidechain,
                model,
                tokens,
                at_ms,
            } => {
                let (message_id, request_id) = match key {
                    Some(key) => (
                        key.message_id.clone(),
                        key.request_id.clone().unwrap_or_default(),
                    ),
                    // Each keyless report counts once: its line names it.
                    None => (format!("{}:{offset}", read.state.path), String::new()),
                };
                let added = store_usage(
                    tx,
                    framework,
                    session_id,
                    &message_id,
                    &request_id,
                    *sidechain,
                    model,
                    tokens,
                    *at_ms,
                )?;
                add_delta(
                    &mut deltas,
                    read.framework,
                    session_id,
                    model,
                    added,
                    *at_ms,
                );
            }
        }
    }
    changes.usage = deltas.into_values().collect();
    changes.tasks = lists.into_values().collect();
    let state = &read.state;
    tx.prepare_cached(
            "INSERT INTO log_files (path, kind, device, inode, size, \"offset\", parser, skipped, read_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (path) DO UPDATE SET kind = excluded.kind, device = excluded.device,
                 inode = excluded.inode, size = excluded.size, \"offset\" = excluded.\"offset\",
                 parser = excluded.parser, skipped = excluded.skipped, read_ms = excluded.read_ms",
        )?
        .execute(params![
            state.path,
            state.kind,
            state.device as i64,
            state.inode as i64,
            state.size as i64,
            state.offset as i64,
            state.parser,
            state.skipped as i64,
            now_ms
        ])?;
    Ok(changes)
}

/// Queues publications in the outbox, once per key.
fn queue_publications(
    tx: &rusqlite::Transaction<'_>,
    publications: Vec<Publication>,
    now_ms: i64,
    owner: &str,
) -> Result<(), CacheError> {
    for publication in publications {
        let frame = roundtable_protocol::ClientFrame::Send(roundtable_protocol::client::SendCmd {
            id: 0,
            room: publication.room.clone(),
            client_key: publication.client_key.clone(),
            kind: publication.kind.clone(),
            body: publication.body,
        });
        tx.prepare_cached(
            "INSERT INTO outbox (client_key, kind, room, frame, state, created_ms, owner)
             SELECT ?1, 'send', ?2, ?3, 'queued', ?4, ?5
             WHERE NOT EXISTS (SELECT 1 FROM outbox WHERE client_key = ?1)",
        )?
        .execute(params![
            publication.client_key,
            publication.room,
            frame.to_json(),
            now_ms,
            owner
        ])?;
    }
    Ok(())
}

/// One request of this machine's logs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocalUsageEntry {
    pub framework: String,
    pub session_id: String,
    pub model: String,
    pub at_ms: Option<i64>,
    pub tokens: TokenCounts,
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
    pub files: Vec<String>,
    pub tokens: TokenCounts,
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
                    files: Vec::new(),
                    tokens: counts(row, 7)?,
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
                    cache_write_1h, cache_read
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
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }
}
