//! The outbox: every write is stored here first, then sent. A `send` carries its
//! `client_key`, so it is sent again after any interruption and the hub stores it once; any
//! other command is sent at most once, and one interrupted in flight is reported as failed
//! rather than repeated.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Cache, CacheError, CacheView};
use crate::cache::queries::{Delivery, MessageView, message_parts};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxKind {
    Send,
    Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxState {
    Queued,
    Inflight,
    Done,
    Failed,
}

impl OutboxState {
    fn parse(text: &str) -> OutboxState {
        match text {
            "inflight" => OutboxState::Inflight,
            "done" => OutboxState::Done,
            "failed" => OutboxState::Failed,
            _ => OutboxState::Queued,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OutboxState::Queued => "queued",
            OutboxState::Inflight => "inflight",
            OutboxState::Done => "done",
            OutboxState::Failed => "failed",
        }
    }
}

/// One outbox entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutboxEntry {
    pub n: u64,
    pub client_key: Option<String>,
    pub kind: OutboxKind,
    pub room: Option<String>,
    /// The command frame, as JSON (its `id` is set when sent).
    pub frame: String,
    pub state: OutboxState,
    pub error_code: Option<String>,
    pub error_msg: Option<String>,
    /// Not before (Unix ms): set by `rate_limited`.
    pub retry_ms: Option<i64>,
    /// The hub's `ok`, for commands whose caller waits for it.
    pub reply: Option<String>,
    pub created_ms: i64,
    /// The process handling it (see [`crate::process_lock`]); none: any process may.
    pub owner: Option<String>,
}

const COLUMNS: &str = "n, client_key, kind, room, frame, state, error_code, error_msg, retry_ms, reply, created_ms, owner";

fn entry_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxEntry> {
    let kind: String = row.get(2)?;
    let state: String = row.get(5)?;
    Ok(OutboxEntry {
        n: row.get::<_, i64>(0)? as u64,
        client_key: row.get(1)?,
        kind: if kind == "send" {
            OutboxKind::Send
        } else {
            OutboxKind::Command
        },
        room: row.get(3)?,
        frame: row.get(4)?,
        state: OutboxState::parse(&state),
        error_code: row.get(6)?,
        error_msg: row.get(7)?,
        retry_ms: row.get(8)?,
        reply: row.get(9)?,
        created_ms: row.get(10)?,
        owner: row.get(11)?,
    })
}

const INTERRUPTED: &str = "the connection ended before the hub answered; it may or may not have been applied: check, then retry";

/// What `owner` had in flight can no longer be answered: its sends go back to the queue,
/// its commands are failed. Returns how many sends were requeued.
fn release_in_flight(tx: &rusqlite::Transaction<'_>, owner: &str) -> Result<usize, CacheError> {
    let requeued = tx.execute(
        "UPDATE outbox SET state = 'queued' WHERE owner = ?1 AND state = 'inflight' AND kind = 'send'",
        [owner],
    )?;
    tx.execute(
        &format!("UPDATE outbox SET state = 'failed', error_code = 'interrupted', error_msg = '{INTERRUPTED}'
         WHERE owner = ?1 AND state = 'inflight' AND kind = 'command'"),
        [owner],
    )?;
    Ok(requeued)
}

impl Cache {
    /// Stores a write, owned by process `owner`; returns its number. A send whose
    /// `client_key` is already in the outbox is not stored twice: its entry's number is
    /// returned (a publisher that re-runs after a crash queues each event once).
    pub fn enqueue(
        &mut self,
        kind: OutboxKind,
        client_key: Option<&str>,
        room: Option<&str>,
        frame: &str,
        now_ms: i64,
        owner: &str,
    ) -> Result<u64, CacheError> {
        let tx = self.conn().transaction()?;
        if let Some(key) = client_key {
            let existing: Option<i64> = tx
                .query_row("SELECT n FROM outbox WHERE client_key = ?1", [key], |row| {
                    row.get(0)
                })
                .optional()?;
            if let Some(n) = existing {
                return Ok(n as u64);
            }
        }
        tx.execute(
            "INSERT INTO outbox (client_key, kind, room, frame, state, created_ms, owner)
             VALUES (?1, ?2, ?3, ?4, 'queued', ?5, ?6)",
            params![
                client_key,
                match kind {
                    OutboxKind::Send => "send",
                    OutboxKind::Command => "command",
                },
                room,
                frame,
                now_ms,
                owner
            ],
        )?;
        let n = tx.last_insert_rowid() as u64;
        tx.commit()?;
        Ok(n)
    }

    /// Takes over queued entries another process on this profile hands to `owner` (see
    /// [`crate::hand_off`]); returns the ones taken.
    pub fn adopt(
        &mut self,
        entries: &[u64],
        from: &str,
        owner: &str,
    ) -> Result<Vec<u64>, CacheError> {
        let tx = self.conn().transaction()?;
        let mut adopted = Vec::new();
        for n in entries {
            let changed = tx.execute(
                "UPDATE outbox SET owner = ?3
                 WHERE n = ?1 AND state = 'queued' AND (owner IS NULL OR owner = ?2 OR owner = ?3)",
                params![*n as i64, from, owner],
            )?;
            if changed == 1 {
                adopted.push(*n);
            }
        }
        tx.commit()?;
        Ok(adopted)
    }

    /// Whether some queued or in-flight entry belongs to a process other than `owner`.
    pub fn others_own_entries(&self, owner: &str) -> Result<bool, CacheError> {
        Ok(self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM outbox
                            WHERE state IN ('queued', 'inflight') AND owner IS NOT NULL AND owner != ?1)",
            [owner],
            |row| row.get(0),
        )?)
    }

    /// Releases the entries of processes that are gone (`alive` says which owners still
    /// run): sends interrupted in flight go back to the queue (their key makes a resend
    /// safe); other commands interrupted in flight are failed (they may have run); queued
    /// entries become anyone's.
    pub fn recover_outbox(&mut self, alive: impl Fn(&str) -> bool) -> Result<(), CacheError> {
        let owners: Vec<String> = self
            .conn
            .prepare(
                "SELECT DISTINCT owner FROM outbox
                 WHERE owner IS NOT NULL AND state IN ('queued', 'inflight')",
            )?
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        let gone: Vec<String> = owners.into_iter().filter(|owner| !alive(owner)).collect();
        let tx = self.conn().transaction()?;
        for owner in &gone {
            release_in_flight(&tx, owner)?;
            tx.execute(
                "UPDATE outbox SET owner = NULL WHERE owner = ?1 AND state = 'queued'",
                [owner],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// This process's connection ended: its sends in flight go back to the queue, its
    /// commands in flight are failed. Returns how many sends were requeued, and the failed
    /// commands' numbers.
    pub fn release_inflight(&mut self, owner: &str) -> Result<(usize, Vec<u64>), CacheError> {
        let tx = self.conn().transaction()?;
        let failed: Vec<u64> = tx
            .prepare(
                "SELECT n FROM outbox WHERE owner = ?1 AND state = 'inflight' AND kind = 'command'",
            )?
            .query_map([owner], |row| Ok(row.get::<_, i64>(0)? as u64))?
            .collect::<Result<_, _>>()?;
        let requeued = release_in_flight(&tx, owner)?;
        tx.commit()?;
        Ok((requeued, failed))
    }

    /// Takes entry `n` for sending, if it is still queued and `owner` may send it; false
    /// when another process took it first.
    pub fn claim(&self, n: u64, owner: &str) -> Result<bool, CacheError> {
        let changed = self.conn.execute(
            "UPDATE outbox SET state = 'inflight', owner = ?2
             WHERE n = ?1 AND state = 'queued' AND (owner IS NULL OR owner = ?2)",
            params![n as i64, owner],
        )?;
        Ok(changed == 1)
    }

    /// Withdraws a command nobody sent yet (its caller gave up waiting); false when it is
    /// already in flight or ended.
    pub fn cancel_queued(&self, n: u64) -> Result<bool, CacheError> {
        let changed = self.conn.execute(
            "UPDATE outbox SET state = 'failed', error_code = 'cancelled',
                 error_msg = 'not sent: the hub could not be reached in time'
             WHERE n = ?1 AND state = 'queued' AND kind = 'command'",
            [n as i64],
        )?;
        Ok(changed == 1)
    }

    /// The hub accepted it: the entry keeps the reply for whoever waits on it (who then
    /// forgets it); entries nobody collects are forgotten a little later.
    pub fn mark_done(&self, n: u64, reply: &str, now_ms: i64) -> Result<(), CacheError> {
        self.conn.execute(
            "UPDATE outbox SET state = 'done', reply = ?2, done_ms = ?3 WHERE n = ?1",
            params![n as i64, reply, now_ms],
        )?;
        Ok(())
    }

    /// Forgets entries finished before `before_ms` that nobody collected.
    pub fn forget_done_before(&self, before_ms: i64) -> Result<(), CacheError> {
        self.conn.execute(
            "DELETE FROM outbox WHERE state = 'done' AND coalesce(done_ms, 0) < ?1",
            [before_ms],
        )?;
        Ok(())
    }

    pub fn mark_failed(&self, n: u64, code: &str, msg: &str) -> Result<(), CacheError> {
        self.conn.execute(
            "UPDATE outbox SET state = 'failed', error_code = ?2, error_msg = ?3 WHERE n = ?1",
            params![n as i64, code, msg],
        )?;
        Ok(())
    }

    /// Back to the queue, not before `retry_ms` (rate limited, or the connection dropped).
    pub fn requeue(&self, n: u64, retry_ms: Option<i64>) -> Result<(), CacheError> {
        self.conn.execute(
            "UPDATE outbox SET state = 'queued', retry_ms = ?2 WHERE n = ?1",
            params![n as i64, retry_ms],
        )?;
        Ok(())
    }

    /// Puts a failed entry back in the queue (the user asked to retry it), owned by `owner`.
    pub fn retry(&self, n: u64, owner: &str) -> Result<bool, CacheError> {
        let changed = self.conn.execute(
            "UPDATE outbox SET state = 'queued', error_code = NULL, error_msg = NULL, retry_ms = NULL,
                 owner = ?2
             WHERE n = ?1 AND state = 'failed'",
            params![n as i64, owner],
        )?;
        Ok(changed == 1)
    }

    /// Forgets a finished entry (its caller had the reply).
    pub fn forget_done(&self, n: u64) -> Result<(), CacheError> {
        self.conn.execute(
            "DELETE FROM outbox WHERE n = ?1 AND state = 'done'",
            [n as i64],
        )?;
        Ok(())
    }
}

impl CacheView {
    /// The oldest entry `owner` may send: its own, or one nobody owns.
    pub fn next_queued(&self, owner: &str) -> Result<Option<OutboxEntry>, CacheError> {
        Ok(self
            .conn
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM outbox
                     WHERE state = 'queued' AND (owner IS NULL OR owner = ?1) ORDER BY n LIMIT 1"
                ),
                [owner],
                entry_from_row,
            )
            .optional()?)
    }

    pub fn outbox_entry(&self, n: u64) -> Result<Option<OutboxEntry>, CacheError> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM outbox WHERE n = ?1"),
                [n as i64],
                entry_from_row,
            )
            .optional()?)
    }

    /// Entries not done (queued, in flight, failed), oldest first.
    pub fn outbox_pending(&self) -> Result<Vec<OutboxEntry>, CacheError> {
        let mut statement = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM outbox WHERE state != 'done' ORDER BY n"
        ))?;
        let entries = statement
            .query_map([], entry_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(entries)
    }

    /// Whether a write to `room` with `client_key` was queued here (still in the outbox) or
    /// came back stored (an event of ours in the room carries it).
    pub(crate) fn holds_client_key(
        &self,
        room: &str,
        client_key: &str,
    ) -> Result<bool, CacheError> {
        let held: bool = self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM outbox WHERE client_key = ?2)
                 OR EXISTS (SELECT 1 FROM events WHERE stream = ?1 AND client_key = ?2)",
            [room, client_key],
            |row| row.get(0),
        )?;
        Ok(held)
    }

    /// Our messages to `room` still in the outbox, as messages, each with its `client_key`
    /// (which its event carries once stored).
    pub(crate) fn pending_messages(
        &self,
        room: &str,
    ) -> Result<Vec<(MessageView, Option<String>)>, CacheError> {
        let mut statement = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM outbox WHERE kind = 'send' AND room = ?1 AND state != 'done' ORDER BY n"
        ))?;
        let entries: Vec<OutboxEntry> = statement
            .query_map([room], entry_from_row)?
            .collect::<Result<_, _>>()?;
        let me = self.meta("principal")?.unwrap_or_default();
        let handle = self.handle_of(&me)?;
        Ok(entries
            .into_iter()
            .filter_map(|entry| {
                let frame: serde_json::Value = serde_json::from_str(&entry.frame).ok()?;
                if frame["kind"] != "message" {
                    return None;
                }
                let parts = message_parts(&frame["body"].to_string());
                let message = MessageView {
                    room: room.to_owned(),
                    seq: None,
                    id: None,
                    ts_ms: entry.created_ms,
                    from: me.clone(),
                    from_handle: handle.clone(),
                    from_kind: None,
                    text: parts.text,
                    mentions: parts.mentions,
                    reply_to: parts.reply_to,
                    delivery: if entry.state == OutboxState::Failed {
                        Delivery::Failed
                    } else {
                        Delivery::Queued
                    },
                    error: entry.error_msg,
                    outbox: Some(entry.n),
                };
                Some((message, entry.client_key))
            })
            .collect())
    }
}

/// An `ok` reply with its secrets (tokens) taken out, to keep in the cache: the caller gets
/// the whole reply in memory, and a token is written only to the profile it belongs to.
pub fn without_secrets(reply: &str) -> String {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(reply) else {
        return String::new();
    };
    if let Some(object) = value.as_object_mut() {
        object.remove("token");
    }
    value.to_string()
}
