//! The work view of this machine in the cache: what the agent CLIs' logs said, file by file
//! as the watcher reads them, and what changed for views and for publishing. Each read of a
//! file is applied in one transaction with the file's new offset and with the events it
//! publishes (queued in the outbox), so a crash at any point neither loses nor repeats one.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{Cache, CacheError, CacheView};
use crate::log_events::{Billing, Framework, LogEvent, TaskItem, TokenCounts};

mod reads;
mod usage;

pub use reads::*;
use usage::*;

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
    /// What the requests behind these tokens cost, each priced whole (`None`: the model is
    /// unpriced).
    pub cost_usd: Option<f64>,
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

/// What the watcher publishes of this machine's sessions: which sessions it publishes (an
/// agent claimed them), and the events their changes become.
pub trait Publishing {
    /// What one whole request costs (`None`: its model is unpriced).
    fn price(&self, model: &str, tokens: &TokenCounts, billing: &Billing) -> Option<f64>;
    /// Whether a session's work is published.
    fn publishes(&self, framework: Framework, session_id: &str) -> bool;
    /// The events for one session's changes: what one read added (`read`), or everything the
    /// cache knows of it (`None`: its first publication, which may come long after its
    /// lines were read, when an agent claims it late).
    fn publications(
        &mut self,
        read: Option<ReadSpan<'_>>,
        changes: &LocalChanges,
    ) -> Vec<Publication>;
}

/// A read of a file, as its publications' keys name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSpan<'a> {
    pub file: &'a str,
    pub from: u64,
    pub to: u64,
}

impl LocalChanges {
    /// The sessions these changes are about, each once, in order.
    pub fn session_ids(&self) -> Vec<(Framework, String)> {
        let mut seen = Vec::new();
        let mentioned = self
            .sessions
            .iter()
            .map(|(framework, session, _)| (*framework, session))
            .chain(self.usage.iter().map(|d| (d.framework, &d.session_id)))
            .chain(self.tasks.iter().map(|t| (t.framework, &t.session_id)))
            .chain(self.files.iter().map(|f| (f.framework, &f.session_id)));
        for (framework, session) in mentioned {
            if !seen
                .iter()
                .any(|(f, s): &(Framework, String)| *f == framework && s == session)
            {
                seen.push((framework, session.clone()));
            }
        }
        seen
    }

    /// The part of these changes about one session.
    pub fn of_session(&self, framework: Framework, session_id: &str) -> LocalChanges {
        let mine = |f: Framework, s: &str| f == framework && s == session_id;
        LocalChanges {
            usage: self
                .usage
                .iter()
                .filter(|d| mine(d.framework, &d.session_id))
                .cloned()
                .collect(),
            tasks: self
                .tasks
                .iter()
                .filter(|t| mine(t.framework, &t.session_id))
                .cloned()
                .collect(),
            files: self
                .files
                .iter()
                .filter(|f| mine(f.framework, &f.session_id))
                .cloned()
                .collect(),
            sessions: self
                .sessions
                .iter()
                .filter(|(f, s, _)| mine(*f, s))
                .cloned()
                .collect(),
        }
    }
}

impl Cache {
    /// Applies reads of log files in one transaction: each moves its file's offset, and
    /// what `publishing` makes of the changes of the sessions it publishes is queued in the
    /// outbox for process `owner` (a session's first publication carries everything known
    /// of it). A read whose file the cache no longer holds where the read began (another
    /// watcher went on meanwhile) is left out: `None` in its place.
    pub fn apply_log_reads(
        &mut self,
        reads: &[LogRead],
        now_ms: i64,
        owner: &str,
        publishing: &mut dyn Publishing,
    ) -> Result<Vec<Option<LocalChanges>>, CacheError> {
        let tx = self.conn().transaction()?;
        let mut applied = Vec::with_capacity(reads.len());
        for read in reads {
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
            let changes = apply_one(&tx, read, now_ms, &|model, tokens, billing| {
                publishing.price(model, tokens, billing)
            })?;
            let span = ReadSpan {
                file: &read.state.path,
                from: read.from,
                to: read.state.offset,
            };
            for (framework, session) in changes.session_ids() {
                if !publishing.publishes(framework, &session) {
                    continue;
                }
                let publications = if first_publication(&tx, framework, &session, now_ms)? {
                    let everything =
                        session_changes(&tx, framework, &session, &|model, tokens, billing| {
                            publishing.price(model, tokens, billing)
                        })?;
                    publishing.publications(None, &everything)
                } else {
                    publishing.publications(Some(span), &changes.of_session(framework, &session))
                };
                queue_publications(&tx, publications, now_ms, owner)?;
            }
            applied.push(Some(changes));
        }
        tx.commit()?;
        Ok(applied)
    }

    /// Publishes, in one transaction, everything known of the sessions read earlier that are
    /// published now (an agent claimed them since) and were not yet; returns how many.
    pub fn publish_claimed(
        &mut self,
        now_ms: i64,
        owner: &str,
        publishing: &mut dyn Publishing,
    ) -> Result<usize, CacheError> {
        let tx = self.conn().transaction()?;
        let waiting: Vec<(String, String)> = tx
            .prepare_cached(
                "SELECT s.framework, s.session_id FROM local_sessions s
                 WHERE NOT EXISTS (SELECT 1 FROM published_sessions p
                     WHERE p.framework = s.framework AND p.session_id = s.session_id)",
            )?
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let mut published = 0;
        for (framework, session) in waiting {
            let Some(framework) = Framework::parse(&framework) else {
                continue;
            };
            if !publishing.publishes(framework, &session)
                || !first_publication(&tx, framework, &session, now_ms)?
            {
                continue;
            }
            let everything =
                session_changes(&tx, framework, &session, &|model, tokens, billing| {
                    publishing.price(model, tokens, billing)
                })?;
            let publications = publishing.publications(None, &everything);
            queue_publications(&tx, publications, now_ms, owner)?;
            published += 1;
        }
        tx.commit()?;
        Ok(published)
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
    price: &dyn Fn(&str, &TokenCounts, &Billing) -> Option<f64>,
) -> Result<LocalChanges, CacheError> {
    let framework = framework_text(read.framework);
    let mut changes = LocalChanges::default();
    let mut deltas: BTreeMap<(String, String), UsageDelta> = BTreeMap::new();
    let mut lists: BTreeMap<(String, String), TaskListChange> = BTreeMap::new();
    let mut sessions_seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (offset, event) in &read.events {
        // Every session a log speaks of has its row, whatever the first thing said of it.
        if sessions_seen.insert(event.session_id()) {
            tx.prepare_cached(
                "INSERT INTO local_sessions (framework, session_id) VALUES (?1, ?2)
                 ON CONFLICT DO NOTHING",
            )?
            .execute(params![framework, event.session_id()])?;
        }
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
                billing,
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
                    billing,
                    *at_ms,
                    price,
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

/// Records that a session's work is published from now on; `true` the first time.
fn first_publication(
    tx: &rusqlite::Transaction<'_>,
    framework: Framework,
    session_id: &str,
    now_ms: i64,
) -> Result<bool, CacheError> {
    let inserted = tx
        .prepare_cached(
            "INSERT INTO published_sessions (framework, session_id, since_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
        )?
        .execute(params![framework.as_str(), session_id, now_ms])?;
    Ok(inserted > 0)
}

/// Everything the cache knows of one session, as changes: its tokens by model, each lane's
/// list, the files it touched, where it ran.
fn session_changes(
    tx: &rusqlite::Transaction<'_>,
    framework: Framework,
    session_id: &str,
    price: &dyn Fn(&str, &TokenCounts, &Billing) -> Option<f64>,
) -> Result<LocalChanges, CacheError> {
    let name = framework.as_str();
    let mut by_model: BTreeMap<(String, String), UsageDelta> = BTreeMap::new();
    let rows = tx
        .prepare_cached(
            "SELECT model, input, output, cache_write_5m, cache_write_1h, cache_read, at_ms,
                    billing
             FROM local_usage WHERE framework = ?1 AND session_id = ?2",
        )?
        .query_map(params![name, session_id], |row| {
            Ok((
                row.get::<_, String>(0)?,
                counts(row, 1)?,
                row.get::<_, Option<i64>>(6)?,
                billing_of(row.get(7)?),
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    for (model, tokens, at_ms, billing) in rows {
        let added = Added {
            tokens,
            cost_usd: price(&model, &tokens, &billing),
        };
        add_delta(&mut by_model, framework, session_id, &model, added, at_ms);
    }
    let usage: Vec<UsageDelta> = by_model.into_values().collect();
    let tasks = tx
        .prepare_cached(
            "SELECT lane, source, tasks, at_ms FROM local_tasks
             WHERE framework = ?1 AND session_id = ?2 ORDER BY lane",
        )?
        .query_map(params![name, session_id], |row| {
            let text: String = row.get(2)?;
            Ok(TaskListChange {
                framework,
                session_id: session_id.to_owned(),
                lane: row.get(0)?,
                source: row.get(1)?,
                tasks: serde_json::from_str(&text).unwrap_or_default(),
                at_ms: row.get(3)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let files = tx
        .prepare_cached(
            "SELECT path, at_ms FROM local_files WHERE framework = ?1 AND session_id = ?2
             ORDER BY at_ms, path",
        )?
        .query_map(params![name, session_id], |row| {
            Ok(FileTouch {
                framework,
                session_id: session_id.to_owned(),
                path: row.get(0)?,
                at_ms: row.get(1)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let cwd: Option<Option<String>> = tx
        .prepare_cached("SELECT cwd FROM local_sessions WHERE framework = ?1 AND session_id = ?2")?
        .query_row(params![name, session_id], |row| row.get(0))
        .optional()?;
    Ok(LocalChanges {
        usage,
        tasks,
        files,
        sessions: vec![(framework, session_id.to_owned(), cwd.flatten())],
    })
}
