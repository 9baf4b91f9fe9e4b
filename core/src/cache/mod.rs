//! The local cache: one SQLite file per profile mirroring what its principal may see on the
//! hub, the projections the apps read, and the outbox.
//!
//! Applying events and advancing the stream's cursor happen in one transaction, so a client
//! killed at any moment restarts from a cache that is consistent with its cursors, and
//! simply syncs on. Projections come from [`crate::projection::project`]; this module only
//! applies their writes, keeping for every value the seq (or time) that set it so that no
//! older event overwrites a newer one.

mod apply;
mod board_queries;
mod budgets;
mod local_work;
mod outbox;
mod queries;
mod readers;
mod sessions;
#[cfg(test)]
mod tests;
mod writer;

use std::collections::BTreeSet;
use std::path::Path;

use roundtable_protocol::client::ControlAction;
use roundtable_protocol::server::Event;
use rusqlite::{Connection, OptionalExtension, params};

pub use board_queries::*;
pub use local_work::*;
pub use outbox::{OutboxEntry, OutboxKind, OutboxState, without_secrets};
pub use queries::*;
pub(crate) use readers::CacheReaders;
pub use sessions::SessionRow;
pub(crate) use writer::CacheWriter;

use apply::{apply_event, move_marker};

use crate::changes::Change;
use crate::projection::{self, Write};

const MIGRATIONS: &[roundtable_sqlite::Migration] = &[
    (1, "cache", include_str!("migrations/0001_cache.sql")),
    (
        2,
        "outbox_owner",
        include_str!("migrations/0002_outbox_owner.sql"),
    ),
    (
        3,
        "readers_and_history",
        include_str!("migrations/0003_readers_and_history.sql"),
    ),
    (4, "sessions", include_str!("migrations/0004_sessions.sql")),
    (
        5,
        "local_work",
        include_str!("migrations/0005_local_work.sql"),
    ),
    (
        6,
        "published_sessions_and_billing",
        include_str!("migrations/0006_published_sessions_and_billing.sql"),
    ),
    (
        7,
        "issued_controls",
        include_str!("migrations/0007_issued_controls.sql"),
    ),
    (
        8,
        "component_sources",
        include_str!("migrations/0008_component_sources.sql"),
    ),
    (9, "budgets", include_str!("migrations/0009_budgets.sql")),
    (10, "claims", include_str!("migrations/0010_claims.sql")),
    (
        11,
        "ping_withdrawals",
        include_str!("migrations/0011_ping_withdrawals.sql"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Migration(#[from] roundtable_sqlite::MigrationError),
    #[error("cannot create the cache {path}: {source}")]
    Create {
        path: String,
        source: std::io::Error,
    },
    #[error("the cache's writer thread has stopped; restart the program")]
    WriterGone,
    #[error("a cache job failed unexpectedly: {0}")]
    JobPanicked(String),
}

/// Reads of one cache: every query the apps make. [`Cache`] (the writer) reads through the
/// same methods; readers elsewhere get a `CacheView` over a connection of their own, which
/// in WAL mode never waits for a write.
pub struct CacheView {
    conn: Connection,
}

impl std::fmt::Debug for CacheView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheView")
    }
}

/// The cache of one profile, as its one writer holds it.
pub struct Cache {
    view: CacheView,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cache")
    }
}

impl std::ops::Deref for Cache {
    type Target = CacheView;

    fn deref(&self) -> &CacheView {
        &self.view
    }
}

/// What a stream's replay or page brought, applied in one transaction.
#[derive(Debug, Default)]
pub struct Applied {
    /// Events not seen before (already-known ones are skipped).
    pub new_events: usize,
    /// What views must refresh. Events another process on this profile stored first still
    /// count: they are news to this process's views all the same.
    pub changes: BTreeSet<Change>,
}

/// Creates a file only its owner may read (0600) in a directory only its owner may enter
/// (0700), or tightens one that exists: a cache holds everything its principal can see.
pub(crate) fn create_private_file(path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        crate::profile::create_private_dir(dir)?;
    }
    roundtable_platform::private::open(
        std::fs::OpenOptions::new().append(true).create(true),
        path,
    )?;
    roundtable_platform::private::restrict(path)
}

/// The writing connection's settings. The busy timeout comes first: switching to WAL takes a
/// lock that another process's writer (the app's, while a CLI opens the same profile) may
/// hold. Write transactions begin `IMMEDIATE`: a deferred one that read first and then writes
/// after another process committed fails at once (SQLite cannot wait on that), where an
/// immediate one waits its turn.
fn configure(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "PRAGMA busy_timeout = 10000;
         PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;",
    )?;
    conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
    Ok(())
}

impl CacheView {
    /// Opens a reading connection to the cache at `path` (which its writer created). It
    /// refuses writes.
    pub(crate) fn open_reader(path: &Path) -> Result<CacheView, CacheError> {
        let conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA busy_timeout = 10000;
             PRAGMA query_only = ON;",
        )?;
        Ok(CacheView { conn })
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>, CacheError> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| {
                row.get(0)
            })
            .optional()?)
    }

    /// Every stream's cursor.
    pub fn cursors(&self) -> Result<Vec<(String, u64)>, CacheError> {
        let mut statement = self.conn.prepare("SELECT stream, seq FROM cursors")?;
        let cursors = statement
            .query_map([], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as u64)))?
            .collect::<Result<_, _>>()?;
        Ok(cursors)
    }

    pub fn cursor(&self, stream: &str) -> Result<u64, CacheError> {
        Ok(self
            .conn
            .query_row(
                "SELECT seq FROM cursors WHERE stream = ?1",
                [stream],
                |row| row.get::<_, i64>(0),
            )
            .optional()?
            .unwrap_or(0) as u64)
    }

    pub fn gaps(&self) -> Result<Vec<(String, u64, u64)>, CacheError> {
        let mut statement = self
            .conn
            .prepare("SELECT room, from_seq, to_seq FROM gaps ORDER BY room, from_seq")?;
        let gaps = statement
            .query_map([], |row| {
                Ok((
                    row.get(0)?,
                    row.get::<_, i64>(1)? as u64,
                    row.get::<_, i64>(2)? as u64,
                ))
            })?
            .collect::<Result<_, _>>()?;
        Ok(gaps)
    }
}

impl Cache {
    /// Opens (or creates) the cache at `path`, private to its owner, and brings its schema
    /// up to date.
    pub fn open(path: &Path, now_ms: i64) -> Result<Cache, CacheError> {
        create_private_file(path).map_err(|source| CacheError::Create {
            path: path.display().to_string(),
            source,
        })?;
        // SQLite gives the WAL and shared-memory files the database file's permissions.
        let mut conn = Connection::open(path)?;
        configure(&mut conn)?;
        roundtable_sqlite::migrate(&mut conn, MIGRATIONS, now_ms)?;
        Ok(Cache {
            view: CacheView { conn },
        })
    }

    fn conn(&mut self) -> &mut Connection {
        &mut self.view.conn
    }

    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), CacheError> {
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    /// Forgets everything learned from the hub (a new epoch: the hub's history is another
    /// one). The outbox stays: what the user wrote is theirs.
    pub fn reset(&mut self, epoch: &str) -> Result<(), CacheError> {
        let tx = self.conn().transaction()?;
        tx.execute_batch(
            "DELETE FROM cursors; DELETE FROM gaps; DELETE FROM events; DELETE FROM principals;
             DELETE FROM rooms; DELETE FROM members; DELETE FROM mentions; DELETE FROM tasks;
             DELETE FROM components; DELETE FROM usage; DELETE FROM pings;
             DELETE FROM agent_status; DELETE FROM requests; DELETE FROM contacts;
             DELETE FROM controls; DELETE FROM read_markers; DELETE FROM task_states;
             DELETE FROM component_agents; DELETE FROM room_counts;",
        )?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('epoch', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [epoch],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Applies events of one stream (`room` id, or `inbox`) in one transaction and moves its
    /// cursor to `cursor_to` (at least). `me` is the cache's principal.
    pub fn apply(
        &mut self,
        me: &str,
        stream: &str,
        events: &[Event],
        cursor_to: Option<u64>,
    ) -> Result<Applied, CacheError> {
        let tx = self.conn().transaction()?;
        let mut applied = Applied::default();
        for event in events {
            if apply_event(&tx, me, stream, event, &mut applied.changes)? {
                applied.new_events += 1;
            }
        }
        let highest = events.iter().map(|e| e.seq).max().unwrap_or(0);
        let cursor = cursor_to.unwrap_or(0).max(highest);
        if cursor > 0 {
            tx.execute(
                "INSERT INTO cursors (stream, seq) VALUES (?1, ?2)
                 ON CONFLICT (stream) DO UPDATE SET seq = max(seq, excluded.seq)",
                params![stream, cursor as i64],
            )?;
        }
        tx.commit()?;
        Ok(applied)
    }

    /// Records that `from..=to` of `room` was skipped by a replay, to fetch with history.
    pub fn add_gap(&self, room: &str, from: u64, to: u64) -> Result<(), CacheError> {
        self.conn.execute(
            "INSERT INTO gaps (room, from_seq, to_seq) VALUES (?1, ?2, ?3)
             ON CONFLICT (room, from_seq) DO UPDATE SET to_seq = max(to_seq, excluded.to_seq)",
            params![room, from as i64, to as i64],
        )?;
        Ok(())
    }

    /// Applies a page of history inside a gap and shrinks the gap to what is still missing,
    /// in one transaction.
    pub fn fill_gap(
        &mut self,
        me: &str,
        room: &str,
        gap_from: u64,
        filled_to: u64,
        events: &[Event],
    ) -> Result<Applied, CacheError> {
        let tx = self.conn().transaction()?;
        let mut applied = Applied::default();
        for event in events {
            if apply_event(&tx, me, room, event, &mut applied.changes)? {
                applied.new_events += 1;
            }
        }
        let to_seq: Option<i64> = tx
            .query_row(
                "SELECT to_seq FROM gaps WHERE room = ?1 AND from_seq = ?2",
                params![room, gap_from as i64],
                |row| row.get(0),
            )
            .optional()?;
        tx.execute(
            "DELETE FROM gaps WHERE room = ?1 AND from_seq = ?2",
            params![room, gap_from as i64],
        )?;
        if let Some(to_seq) = to_seq
            && (filled_to as i64) < to_seq
        {
            tx.execute(
                "INSERT INTO gaps (room, from_seq, to_seq) VALUES (?1, ?2, ?3)",
                params![room, filled_to as i64 + 1, to_seq],
            )?;
        }
        tx.commit()?;
        Ok(applied)
    }

    /// Applies the hub's `rooms` reply: each room's title, topic, creator and members as of
    /// its head. A room joined after a long history is usable by title at once, before
    /// history fills its gap; the snapshot counts as set at `head`, so older events filled
    /// later do not overwrite it and newer ones do. Returns what changed.
    pub fn apply_rooms(
        &mut self,
        rooms: &[roundtable_protocol::model::Room],
    ) -> Result<BTreeSet<Change>, CacheError> {
        let tx = self.conn().transaction()?;
        let mut changed = BTreeSet::new();
        for room in rooms {
            let seq = room.head as i64;
            let mut fields = 0;
            fields += tx
                .prepare_cached(
                    "INSERT INTO rooms (id, creator) VALUES (?1, ?2)
                     ON CONFLICT (id) DO UPDATE SET creator = excluded.creator
                     WHERE rooms.creator IS NOT excluded.creator",
                )?
                .execute(params![room.id, room.creator])?;
            if let Some(title) = &room.title {
                fields += tx
                    .prepare_cached(
                        "UPDATE rooms SET title = ?2, title_seq = ?3 WHERE id = ?1 AND title_seq < ?3",
                    )?
                    .execute(params![room.id, title, seq])?;
            }
            if let Some(topic) = &room.topic {
                fields += tx
                    .prepare_cached(
                        "UPDATE rooms SET topic = ?2, topic_seq = ?3 WHERE id = ?1 AND topic_seq < ?3",
                    )?
                    .execute(params![room.id, topic, seq])?;
            }
            // Members as of the head: listed ones present, others known before it gone.
            let mut members = tx
                .prepare_cached(
                    "UPDATE members SET present = 0, seq = ?2
                     WHERE room = ?1 AND present = 1 AND seq < ?2
                       AND principal NOT IN (SELECT value FROM json_each(?3))",
                )?
                .execute(params![
                    room.id,
                    seq,
                    serde_json::to_string(&room.members.iter().map(|m| &m.id).collect::<Vec<_>>())
                        .expect("strings serialize")
                ])?;
            for member in &room.members {
                members += tx
                    .prepare_cached(
                        "INSERT INTO members (room, principal, present, seq) VALUES (?1, ?2, 1, ?3)
                         ON CONFLICT (room, principal) DO UPDATE SET present = 1, seq = excluded.seq
                         WHERE excluded.seq > members.seq",
                    )?
                    .execute(params![room.id, member.id, seq])?;
                tx.prepare_cached(
                    "INSERT INTO principals (id, kind, handle, name) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (id) DO UPDATE SET handle = excluded.handle, name = excluded.name",
                )?
                .execute(params![
                    member.id,
                    member.kind.as_str(),
                    member.handle,
                    member.name
                ])?;
            }
            if fields > 0 {
                changed.insert(Change::Room {
                    room: room.id.clone(),
                });
            }
            if members > 0 {
                changed.insert(Change::Members {
                    room: room.id.clone(),
                });
            }
        }
        tx.commit()?;
        Ok(changed)
    }

    /// Records a control the hub accepted from us on `agent` (in `room`, or everywhere):
    /// a pause or stop is kept, a resume lifts what it covers (everywhere: every room).
    pub fn record_issued_control(
        &mut self,
        agent: &str,
        room: Option<&str>,
        action: ControlAction,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<(), CacheError> {
        let room = room.unwrap_or("");
        let tx = self.conn().transaction()?;
        match action {
            ControlAction::Resume if room.is_empty() => {
                tx.execute("DELETE FROM issued_controls WHERE agent = ?1", [agent])?;
            }
            ControlAction::Resume => {
                tx.execute(
                    "DELETE FROM issued_controls WHERE agent = ?1 AND room = ?2",
                    [agent, room],
                )?;
            }
            ControlAction::Pause | ControlAction::Stop => {
                tx.execute(
                    "INSERT INTO issued_controls (agent, room, action, ts_ms, reason)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (agent, room) DO UPDATE SET action = excluded.action,
                         ts_ms = excluded.ts_ms, reason = excluded.reason",
                    params![agent, room, action.as_str(), now_ms, reason],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Records that the agent was told of others on its components (room, component,
    /// other) at `now_ms`.
    pub fn record_overlaps_told(
        &mut self,
        keys: &[(String, String, String)],
        now_ms: i64,
    ) -> Result<(), CacheError> {
        let tx = self.conn().transaction()?;
        {
            let mut statement = tx.prepare_cached(
                "INSERT INTO overlaps_told (room, component, other, told_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (room, component, other) DO UPDATE SET told_ms = excluded.told_ms",
            )?;
            for (room, component, other) in keys {
                statement.execute(params![room, component, other, now_ms])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Remembers a principal known only by what we called them (a handle we asked for), unless
    /// the cache knows them already: what it knows comes from the hub, and stays.
    pub fn meet(&mut self, principal: PrincipalRow) -> Result<(), CacheError> {
        self.conn().execute(
            "INSERT INTO principals (id, kind, handle, name, owner) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (id) DO NOTHING",
            params![
                principal.id,
                principal.kind,
                principal.handle,
                principal.name,
                principal.owner
            ],
        )?;
        Ok(())
    }

    /// Remembers principals met in replies, to show handles.
    pub fn remember_principals(
        &mut self,
        principals: impl IntoIterator<Item = PrincipalRow>,
    ) -> Result<(), CacheError> {
        let tx = self.conn().transaction()?;
        {
            let mut statement = tx.prepare_cached(
                "INSERT INTO principals (id, kind, handle, name, owner) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (id) DO UPDATE SET handle = excluded.handle, name = excluded.name,
                     owner = coalesce(excluded.owner, principals.owner)",
            )?;
            for p in principals {
                statement.execute(params![p.id, p.kind, p.handle, p.name, p.owner])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Moves our read marker of `stream` to `seq` (never back); true when it moved. The hub
    /// hears of it with the next `ack`.
    pub fn mark_read(&mut self, stream: &str, seq: u64) -> Result<bool, CacheError> {
        let me = self.meta("principal")?.unwrap_or_default();
        let tx = self.conn().transaction()?;
        let moved = move_marker(&tx, &me, stream, seq, false)?;
        tx.commit()?;
        Ok(moved)
    }

    /// Merges the markers the hub holds for us (our other devices' included); returns the
    /// streams whose marker moved.
    pub fn merge_read_markers(
        &mut self,
        markers: &std::collections::BTreeMap<String, u64>,
    ) -> Result<Vec<String>, CacheError> {
        let me = self.meta("principal")?.unwrap_or_default();
        let tx = self.conn().transaction()?;
        let mut moved = Vec::new();
        for (stream, seq) in markers {
            if move_marker(&tx, &me, stream, *seq, true)? {
                moved.push(stream.clone());
            }
            // The hub has it (or more): nothing to tell it.
            tx.execute(
                "UPDATE read_markers SET sent = 1 WHERE stream = ?1 AND seq <= ?2",
                params![stream, *seq as i64],
            )?;
        }
        tx.commit()?;
        Ok(moved)
    }

    /// The hub has the markers `sent` (each as it was when sent; a marker moved since stays
    /// unsent).
    pub fn read_markers_sent(&mut self, sent: &[(String, u64)]) -> Result<(), CacheError> {
        let tx = self.conn().transaction()?;
        for (stream, seq) in sent {
            tx.execute(
                "UPDATE read_markers SET sent = 1 WHERE stream = ?1 AND seq = ?2",
                params![stream, *seq as i64],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}
