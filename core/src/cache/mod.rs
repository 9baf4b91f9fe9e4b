//! The local cache: one SQLite file per profile mirroring what its principal may see on the
//! hub, the projections the apps read, and the outbox.
//!
//! Applying events and advancing the stream's cursor happen in one transaction, so a client
//! killed at any moment restarts from a cache that is consistent with its cursors, and
//! simply syncs on. Projections come from [`crate::projection::project`]; this module only
//! applies their writes, keeping for every value the seq (or time) that set it so that no
//! older event overwrites a newer one.

mod outbox;
mod queries;
#[cfg(test)]
mod tests;

use std::path::Path;

use roundtable_protocol::client::ControlAction;
use roundtable_protocol::server::Event;
use rusqlite::{Connection, OptionalExtension, params};

pub use outbox::{OutboxEntry, OutboxKind, OutboxState};
pub use queries::*;

use crate::projection::{self, Write};

const MIGRATIONS: &[roundtable_sqlite::Migration] = &[
    (1, "cache", include_str!("migrations/0001_cache.sql")),
    (
        2,
        "outbox_owner",
        include_str!("migrations/0002_outbox_owner.sql"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Migration(#[from] roundtable_sqlite::MigrationError),
    #[error("cannot create the cache directory {path}: {source}")]
    Dir {
        path: String,
        source: std::io::Error,
    },
}

/// The cache of one profile.
pub struct Cache {
    conn: Connection,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cache")
    }
}

/// What a stream's replay or page brought, applied in one transaction.
#[derive(Debug, Default)]
pub struct Applied {
    /// Events not seen before (already-known ones are skipped).
    pub new_events: usize,
    /// Rooms that received events (new to this cache or not), for views to refresh.
    pub rooms: Vec<String>,
    pub inbox_changed: bool,
}

impl Cache {
    pub fn open(path: &Path, now_ms: i64) -> Result<Cache, CacheError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| CacheError::Dir {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let mut conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             PRAGMA busy_timeout = 10000;",
        )?;
        roundtable_sqlite::migrate(&mut conn, MIGRATIONS, now_ms)?;
        Ok(Cache { conn })
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>, CacheError> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| {
                row.get(0)
            })
            .optional()?)
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
        let tx = self.conn.transaction()?;
        tx.execute_batch(
            "DELETE FROM cursors; DELETE FROM gaps; DELETE FROM events; DELETE FROM principals;
             DELETE FROM rooms; DELETE FROM members; DELETE FROM mentions; DELETE FROM tasks;
             DELETE FROM components; DELETE FROM usage; DELETE FROM pings;
             DELETE FROM agent_status; DELETE FROM requests; DELETE FROM contacts;
             DELETE FROM controls;",
        )?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('epoch', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [epoch],
        )?;
        tx.commit()?;
        Ok(())
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

    /// Applies events of one stream (`room` id, or `inbox`) in one transaction and moves its
    /// cursor to `cursor_to` (at least). `me` is the cache's principal.
    pub fn apply(
        &mut self,
        me: &str,
        stream: &str,
        events: &[Event],
        cursor_to: Option<u64>,
    ) -> Result<Applied, CacheError> {
        let tx = self.conn.transaction()?;
        let mut applied = Applied::default();
        for event in events {
            if apply_event(&tx, me, stream, event)? {
                applied.new_events += 1;
            }
        }
        // Another process on this profile may have stored these events first (its own
        // send, from its `ok`): what this process received is news to its views all the same.
        if !events.is_empty() {
            if stream == "inbox" {
                applied.inbox_changed = true;
            } else {
                applied.rooms.push(stream.to_owned());
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
        let tx = self.conn.transaction()?;
        let mut applied = Applied::default();
        for event in events {
            if apply_event(&tx, me, room, event)? {
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
        if !events.is_empty() {
            applied.rooms.push(room.to_owned());
        }
        tx.commit()?;
        Ok(applied)
    }

    /// Applies the hub's `rooms` reply: each room's title, topic, creator and members as of
    /// its head. A room joined after a long history is usable by title at once, before
    /// history fills its gap; the snapshot counts as set at `head`, so older events filled
    /// later do not overwrite it and newer ones do. Returns the rooms that changed.
    pub fn apply_rooms(
        &mut self,
        rooms: &[roundtable_protocol::model::Room],
    ) -> Result<Vec<String>, CacheError> {
        let tx = self.conn.transaction()?;
        let mut changed = Vec::new();
        for room in rooms {
            let seq = room.head as i64;
            let mut writes = 0;
            writes += tx
                .prepare_cached(
                    "INSERT INTO rooms (id, creator) VALUES (?1, ?2)
                     ON CONFLICT (id) DO UPDATE SET creator = excluded.creator
                     WHERE rooms.creator IS NOT excluded.creator",
                )?
                .execute(params![room.id, room.creator])?;
            if let Some(title) = &room.title {
                writes += tx
                    .prepare_cached(
                        "UPDATE rooms SET title = ?2, title_seq = ?3 WHERE id = ?1 AND title_seq < ?3",
                    )?
                    .execute(params![room.id, title, seq])?;
            }
            if let Some(topic) = &room.topic {
                writes += tx
                    .prepare_cached(
                        "UPDATE rooms SET topic = ?2, topic_seq = ?3 WHERE id = ?1 AND topic_seq < ?3",
                    )?
                    .execute(params![room.id, topic, seq])?;
            }
            // Members as of the head: listed ones present, others known before it gone.
            writes += tx
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
                writes += tx
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
            if writes > 0 {
                changed.push(room.id.clone());
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
        let tx = self.conn.transaction()?;
        {
            let mut statement = tx.prepare_cached(
                "INSERT INTO principals (id, kind, handle, name, owner) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (id) DO UPDATE SET handle = excluded.handle, name = excluded.name",
            )?;
            for p in principals {
                statement.execute(params![p.id, p.kind, p.handle, p.name, p.owner])?;
            }
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
    if inserted == 0 {
        return Ok(false);
    }
    for write in projection::project(me, event) {
        apply_write(tx, write)?;
    }
    Ok(true)
}

fn apply_write(tx: &rusqlite::Transaction<'_>, write: Write) -> Result<(), CacheError> {
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
        } => {
            tx.prepare_cached(
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
        } => {
            tx.prepare_cached(
                "INSERT INTO components (room, id, status, note, files, status_by, status_seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (room, id) DO UPDATE SET status = excluded.status, note = excluded.note,
                     files = excluded.files, status_by = excluded.status_by,
                     status_seq = excluded.status_seq
                 WHERE excluded.status_seq > components.status_seq",
            )?
            .execute(params![room, id, status, note, files, by, seq as i64])?;
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
            tx.prepare_cached(
                "INSERT INTO agent_status (agent, room, seq, ts_ms, state, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (agent) DO UPDATE SET room = excluded.room, seq = excluded.seq,
                     ts_ms = excluded.ts_ms, state = excluded.state, detail = excluded.detail
                 WHERE (excluded.ts_ms, excluded.seq) > (agent_status.ts_ms, agent_status.seq)",
            )?
            .execute(params![agent, room, seq as i64, ts_ms, state, detail])?;
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
    Ok(())
}
