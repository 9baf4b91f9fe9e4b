//! The local cache: one SQLite file per profile mirroring what its principal may see on the
//! hub, the projections the apps read, and the outbox.
//!
//! Applying events and advancing the stream's cursor happen in one transaction, so a client
//! killed at any moment restarts from a cache that is consistent with its cursors, and
//! simply syncs on. Projections come from [`crate::projection::project`]; this module only
//! applies their writes, keeping for every value the seq (or time) that set it so that no
//! older event overwrites a newer one.

mod board_queries;
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
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA busy_timeout = 10000;",
    )
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
        configure(&conn)?;
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

/// Stores one event and its projections; false when it was already there.
fn apply_event(
    tx: &rusqlite::Transaction<'_>,
    me: &str,
    stream: &str,
    event: &Event,
    changes: &mut BTreeSet<Change>,
) -> Result<bool, CacheError> {
    let ts_ms = roundtable_protocol::ts::parse_millis(&event.ts).unwrap_or(0);
    let body = serde_json::to_string(&event.body).expect("JSON values serialize");
    let inserted = tx
        .prepare_cached(
            "INSERT INTO events (stream, seq, id, ts_ms, sender, kind, body, client_key)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
        )?
        .execute(params![
            stream,
            event.seq as i64,
            event.id,
            ts_ms,
            event.from,
            event.kind,
            body,
            event.client_key
        ])?;
    let writes = projection::project(me, event);
    changes.extend(crate::changes::of_event(me, event, &writes));
    if inserted == 0 {
        return Ok(false);
    }
    if event.kind == "message" && stream != "inbox" {
        count_message(tx, me, stream, event)?;
    }
    for write in writes {
        if let Some(agent) = write.reported_agent()
            && !may_report(tx, agent, &event.from)?
        {
            continue;
        }
        if let Some(moved) = apply_write(tx, write)? {
            changes.insert(moved);
        }
    }
    Ok(true)
}

/// Whether `reporter` may report the work (usage, tasks, a component's status) of `agent`:
/// the agent itself or its owner. A hub refuses anyone else's report; this keeps one that
/// a hub stored before it did (or a hub that does not check) off the boards. An agent this
/// cache does not know yet is taken on the hub's word.
fn may_report(
    tx: &rusqlite::Transaction<'_>,
    agent: &str,
    reporter: &str,
) -> Result<bool, CacheError> {
    if agent == reporter {
        return Ok(true);
    }
    let known: Option<(Option<String>, String, Option<String>)> = tx
        .prepare_cached(
            "SELECT p.owner, p.handle, (SELECT handle FROM principals WHERE id = ?2)
             FROM principals p WHERE p.id = ?1",
        )?
        .query_row(params![agent, reporter], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let Some((owner, handle, reporter_handle)) = known else {
        return Ok(true);
    };
    Ok(match (owner, handle.split_once('/')) {
        (Some(owner), _) => owner == reporter,
        // An agent's handle starts with its owner's.
        (None, Some((owner_handle, _))) => {
            reporter_handle.is_none_or(|reporter_handle| reporter_handle == owner_handle)
        }
        // A person's work is their own to report.
        (None, None) => false,
    })
}

/// Moves the read marker of `stream` up to `seq` (never back), counting the messages it
/// passes as read; true when it moved. `sent`: the hub already has it.
fn move_marker(
    tx: &rusqlite::Transaction<'_>,
    me: &str,
    stream: &str,
    seq: u64,
    sent: bool,
) -> Result<bool, CacheError> {
    let old: i64 = tx
        .query_row(
            "SELECT seq FROM read_markers WHERE stream = ?1",
            [stream],
            |row| row.get(0),
        )
        .optional()?
        .unwrap_or(0);
    let seq = seq as i64;
    if seq <= old {
        return Ok(false);
    }
    tx.execute(
        "INSERT INTO read_markers (stream, seq, sent) VALUES (?1, ?2, ?3)
         ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, sent = excluded.sent",
        params![stream, seq, sent],
    )?;
    let passed: i64 = tx
        .prepare_cached(
            "SELECT count(*) FROM events
             WHERE stream = ?1 AND kind = 'message' AND seq > ?2 AND seq <= ?3 AND sender != ?4",
        )?
        .query_row(params![stream, old, seq, me], |row| row.get(0))?;
    let mentions: i64 = tx
        .prepare_cached(
            "SELECT count(*) FROM mentions m JOIN events e ON e.stream = m.room AND e.seq = m.seq
             WHERE m.principal = ?4 AND m.room = ?1 AND m.seq > ?2 AND m.seq <= ?3
               AND e.sender != ?4",
        )?
        .query_row(params![stream, old, seq, me], |row| row.get(0))?;
    tx.prepare_cached(
        "INSERT INTO room_counts (room, others_read, mentions_read) VALUES (?1, ?2, ?3)
         ON CONFLICT (room) DO UPDATE SET others_read = others_read + excluded.others_read,
             mentions_read = mentions_read + excluded.mentions_read",
    )?
    .execute(params![stream, passed, mentions])?;
    Ok(true)
}

/// Counts a newly stored message in its room's unread counters.
fn count_message(
    tx: &rusqlite::Transaction<'_>,
    me: &str,
    room: &str,
    event: &Event,
) -> Result<(), CacheError> {
    if event.from == me {
        return Ok(());
    }
    let mentions_me = event.body["mentions"]
        .as_array()
        .is_some_and(|mentions| mentions.iter().any(|m| m.as_str() == Some(me)));
    tx.prepare_cached(
        "INSERT INTO room_counts (room, others, others_read, mentions, mentions_read)
         SELECT ?1, 1, read, ?3, ?3 * read FROM (
             SELECT ?2 <= coalesce((SELECT seq FROM read_markers WHERE stream = ?1), 0) AS read)
         WHERE true
         ON CONFLICT (room) DO UPDATE SET others = others + 1,
             others_read = others_read + excluded.others_read,
             mentions = mentions + excluded.mentions,
             mentions_read = mentions_read + excluded.mentions_read",
    )?
    .execute(params![room, event.seq as i64, mentions_me as i64])?;
    Ok(())
}

/// The room a session's task list, or an agent's status, was shown in before `room` took
/// it over: that room's view changes too.
fn moved_from(
    tx: &rusqlite::Transaction<'_>,
    sql: &str,
    key: impl rusqlite::Params,
    room: &str,
) -> Result<Option<String>, CacheError> {
    let previous: Option<String> = tx
        .prepare_cached(sql)?
        .query_row(key, |row| row.get(0))
        .optional()?;
    Ok(previous.filter(|previous| previous != room))
}

/// Applies one write; returns a change beyond the write's own, when it moved something out
/// of another room's view.
fn apply_write(tx: &rusqlite::Transaction<'_>, write: Write) -> Result<Option<Change>, CacheError> {
    let mut moved = None;
    match write {
        Write::RoomFields {
            room,
            title,
            topic,
            creator,
            seq,
        } => {
            tx.prepare_cached("INSERT INTO rooms (id) VALUES (?1) ON CONFLICT DO NOTHING")?
                .execute([&room])?;
            if let Some(title) = title {
                tx.prepare_cached(
                    "UPDATE rooms SET title = ?2, title_seq = ?3 WHERE id = ?1 AND title_seq < ?3",
                )?
                .execute(params![room, title, seq as i64])?;
            }
            if let Some(topic) = topic {
                tx.prepare_cached(
                    "UPDATE rooms SET topic = ?2, topic_seq = ?3 WHERE id = ?1 AND topic_seq < ?3",
                )?
                .execute(params![room, topic, seq as i64])?;
            }
            if let Some(creator) = creator {
                tx.prepare_cached("UPDATE rooms SET creator = ?2 WHERE id = ?1")?
                    .execute(params![room, creator])?;
            }
        }
        Write::RoomJoined { room, joined, seq } => {
            tx.prepare_cached(
                "INSERT INTO rooms (id, joined, joined_seq) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET joined = excluded.joined, joined_seq = excluded.joined_seq
                 WHERE excluded.joined_seq > rooms.joined_seq",
            )?
            .execute(params![room, joined, seq as i64])?;
        }
        Write::Member {
            room,
            principal,
            present,
            seq,
        } => {
            tx.prepare_cached("INSERT INTO rooms (id) VALUES (?1) ON CONFLICT DO NOTHING")?
                .execute([&room])?;
            tx.prepare_cached(
                "INSERT INTO members (room, principal, present, seq) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (room, principal) DO UPDATE SET present = excluded.present, seq = excluded.seq
                 WHERE excluded.seq > members.seq",
            )?
            .execute(params![room, principal, present, seq as i64])?;
        }
        Write::Mentions {
            room,
            seq,
            principals,
        } => {
            let mut statement = tx.prepare_cached(
                "INSERT INTO mentions (room, seq, principal) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
            )?;
            for principal in principals {
                statement.execute(params![room, seq as i64, principal])?;
            }
        }
        Write::Tasks {
            agent,
            framework,
            session_id,
            room,
            seq,
            ts_ms,
            source,
            tasks,
            states,
        } => {
            let previous = moved_from(
                tx,
                "SELECT room FROM tasks WHERE agent = ?1 AND framework = ?2 AND session_id = ?3",
                params![agent, framework, session_id],
                &room,
            )?;
            let replaced = tx.prepare_cached(
                "INSERT INTO tasks (agent, framework, session_id, room, seq, ts_ms, source, tasks)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (agent, framework, session_id) DO UPDATE SET
                     room = excluded.room, seq = excluded.seq, ts_ms = excluded.ts_ms,
                     source = excluded.source, tasks = excluded.tasks
                 WHERE (excluded.ts_ms, excluded.seq) > (tasks.ts_ms, tasks.seq)",
            )?
            .execute(params![
                agent, framework, session_id, room, seq as i64, ts_ms, source, tasks
            ])?;
            if replaced > 0 {
                moved = previous.map(|room| Change::Tasks { room });
            }
            let mut statement = tx.prepare_cached(
                "INSERT INTO task_states (agent, framework, session_id, task, ts_ms, room, seq, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
            )?;
            for (task, status) in states {
                statement.execute(params![
                    agent, framework, session_id, task, ts_ms, room, seq as i64, status
                ])?;
            }
        }
        Write::ComponentDef {
            room,
            id,
            name,
            description,
            paths,
            depends_on,
            seq,
        } => {
            tx.prepare_cached(
                "INSERT INTO components (room, id, name, description, paths, depends_on, def_seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (room, id) DO UPDATE SET name = excluded.name,
                     description = excluded.description, paths = excluded.paths,
                     depends_on = excluded.depends_on, def_seq = excluded.def_seq
                 WHERE excluded.def_seq > components.def_seq",
            )?
            .execute(params![
                room,
                id,
                name,
                description,
                paths,
                depends_on,
                seq as i64
            ])?;
        }
        Write::ComponentStatus {
            room,
            id,
            status,
            note,
            files,
            by,
            seq,
            ts_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO components (room, id, status, note, files, status_by, status_seq, status_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (room, id) DO UPDATE SET status = excluded.status, note = excluded.note,
                     files = excluded.files, status_by = excluded.status_by,
                     status_seq = excluded.status_seq, status_ms = excluded.status_ms
                 WHERE excluded.status_seq > components.status_seq",
            )?
            .execute(params![room, id, status, note, files, by, seq as i64, ts_ms])?;
            tx.prepare_cached(
                "INSERT INTO component_agents (room, component, agent, status, note, files, seq, ts_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (room, component, agent) DO UPDATE SET status = excluded.status,
                     note = excluded.note, files = excluded.files, seq = excluded.seq,
                     ts_ms = excluded.ts_ms
                 WHERE excluded.seq > component_agents.seq",
            )?
            .execute(params![room, id, by, status, note, files, seq as i64, ts_ms])?;
        }
        Write::Usage {
            room,
            seq,
            agent,
            framework,
            session_id,
            model,
            input,
            output,
            cache_write,
            cache_read,
            cost_usd,
            from_ms,
            to_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO usage (room, seq, agent, framework, session_id, model, input, output,
                     cache_write, cache_read, cost_usd, from_ms, to_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT DO NOTHING",
            )?
            .execute(params![
                room,
                seq as i64,
                agent,
                framework,
                session_id,
                model,
                input as i64,
                output as i64,
                cache_write as i64,
                cache_read as i64,
                cost_usd,
                from_ms,
                to_ms
            ])?;
        }
        Write::Ping {
            room,
            ping,
            seq,
            asker,
            question,
            options,
            to,
            expires_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO pings (room, ping, seq, asker, question, options, recipients, expires_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (room, ping) DO UPDATE SET seq = excluded.seq, asker = excluded.asker,
                     question = excluded.question, options = excluded.options,
                     recipients = excluded.recipients, expires_ms = excluded.expires_ms",
            )?
            .execute(params![room, ping, seq as i64, asker, question, options, to, expires_ms])?;
        }
        Write::Answer {
            room,
            ping,
            seq,
            by,
            choice,
            text,
        } => {
            // The first answer wins: an answer only replaces a later one. The ping's row may
            // not be here yet (gap filling), so it is created with placeholders.
            tx.prepare_cached(
                "INSERT INTO pings (room, ping, seq, asker, question, answer_seq, answered_by, choice, answer_text)
                 VALUES (?1, ?2, 0, '', '', ?3, ?4, ?5, ?6)
                 ON CONFLICT (room, ping) DO UPDATE SET answer_seq = excluded.answer_seq,
                     answered_by = excluded.answered_by, choice = excluded.choice,
                     answer_text = excluded.answer_text
                 WHERE pings.answer_seq IS NULL OR excluded.answer_seq < pings.answer_seq",
            )?
            .execute(params![room, ping, seq as i64, by, choice, text])?;
        }
        Write::AgentStatus {
            agent,
            room,
            seq,
            ts_ms,
            state,
            detail,
        } => {
            let previous = moved_from(
                tx,
                "SELECT room FROM agent_status WHERE agent = ?1",
                params![agent],
                &room,
            )?;
            let replaced = tx
                .prepare_cached(
                    "INSERT INTO agent_status (agent, room, seq, ts_ms, state, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (agent) DO UPDATE SET room = excluded.room, seq = excluded.seq,
                     ts_ms = excluded.ts_ms, state = excluded.state, detail = excluded.detail
                 WHERE (excluded.ts_ms, excluded.seq) > (agent_status.ts_ms, agent_status.seq)",
                )?
                .execute(params![agent, room, seq as i64, ts_ms, state, detail])?;
            if replaced > 0 {
                moved = previous.map(|room| Change::Status { room });
            }
        }
        Write::Request {
            id,
            from,
            to,
            state,
            message,
            seq,
            ts_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO requests (id, sender, target, state, message, seq, ts_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, seq = excluded.seq
                 WHERE excluded.seq > requests.seq",
            )?
            .execute(params![
                id,
                from,
                to,
                state.as_str(),
                message,
                seq as i64,
                ts_ms
            ])?;
        }
        Write::Contact {
            principal,
            since_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO contacts (principal, since_ms) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            )?
            .execute(params![principal, since_ms])?;
        }
        Write::Control {
            room,
            action,
            by,
            seq,
        } => match action {
            ControlAction::Pause | ControlAction::Stop => {
                tx.prepare_cached(
                    "INSERT INTO controls (room, action, by, seq) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (room) DO UPDATE SET action = excluded.action, by = excluded.by,
                         seq = excluded.seq
                     WHERE excluded.seq > controls.seq",
                )?
                .execute(params![
                    room.unwrap_or_default(),
                    action.as_str(),
                    by,
                    seq as i64
                ])?;
            }
            ControlAction::Resume => match room {
                Some(room) => {
                    tx.prepare_cached("DELETE FROM controls WHERE room = ?1 AND seq < ?2")?
                        .execute(params![room, seq as i64])?;
                }
                None => {
                    tx.prepare_cached("DELETE FROM controls WHERE seq < ?1")?
                        .execute(params![seq as i64])?;
                }
            },
        },
    }
    Ok(moved)
}
