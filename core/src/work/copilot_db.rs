//! Reading a GitHub Copilot CLI session's task list from its own database
//! (`session-state/<session>/session.db`, table `todos`) while Copilot may write it:
//! opened read-only ([`super::foreign_db`]), the whole list read in one statement.
//!
//! Copilot 1.0.102 keeps this database in rollback-journal mode and rewrites its pages in
//! place, so a status changing leaves the file's size as it was: whether it changed is told
//! by its header's change counter, which SQLite increments at every commit in that mode
//! (and, should Copilot turn on write-ahead logging, by its log's size and time).

use std::io::Read as _;
use std::path::Path;

use super::copilot::{self, TodoRow};
use super::lenient::timestamp_ms;
use crate::log_events::LogEvent;

/// What identifies the database's content as last committed: equal versions, same content.
pub fn version(path: &Path) -> std::io::Result<u64> {
    let mut header = [0u8; 100];
    let mut file = std::fs::File::open(path)?;
    let read = file.read(&mut header)?;
    let counter = if read >= 28 {
        u32::from_be_bytes([header[24], header[25], header[26], header[27]])
    } else {
        0
    };
    let mut version = u64::from(counter);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if let Ok(metadata) = std::fs::metadata(&wal) {
        let modified = metadata
            .modified()
            .ok()
            .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |since| since.as_nanos() as u64);
        version ^= (metadata.len().rotate_left(32) ^ modified).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    Ok(version)
}

/// The task list of the session `session_id` in the database at `path`; `None` when the
/// database has no `todos` table (a session whose agent never kept a list).
pub fn read_todos(path: &Path, session_id: &str) -> rusqlite::Result<Option<LogEvent>> {
    let connection = super::foreign_db::open_read_only(path)?;
    let has_table: bool = connection.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'todos'",
        [],
        |row| row.get(0),
    )?;
    if !has_table {
        return Ok(None);
    }
    // In the order the agent made them: `todos` is a table with row ids.
    let mut statement =
        connection.prepare("SELECT id, title, status, updated_at FROM todos ORDER BY rowid")?;
    let mut latest: Option<i64> = None;
    let rows = statement
        .query_map([], |row| {
            let text = |index: usize| -> rusqlite::Result<String> {
                Ok(row
                    .get::<_, Option<String>>(index)
                    .unwrap_or_default()
                    .unwrap_or_default())
            };
            Ok((
                TodoRow {
                    id: text(0)?,
                    title: text(1)?,
                    status: text(2)?,
                },
                text(3)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let rows: Vec<TodoRow> = rows
        .into_iter()
        .map(|(row, updated)| {
            if let Some(at) = timestamp_ms(&updated) {
                latest = Some(latest.map_or(at, |latest| latest.max(at)));
            }
            row
        })
        .collect();
    Ok(Some(copilot::todos(session_id, &rows, latest)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_events::TaskStatus;
    use rusqlite::Connection;

    /// The table as Copilot 1.0.102 makes it.
    const SCHEMA: &str = "CREATE TABLE todos (id TEXT PRIMARY KEY, title TEXT NOT NULL,
        description TEXT, status TEXT DEFAULT 'pending'
        CHECK(status IN ('pending','in_progress','done','blocked')),
        created_at TEXT DEFAULT (datetime('now')), updated_at TEXT DEFAULT (datetime('now')));";

    #[test]
    fn the_list_is_read_in_its_order_and_a_status_change_shows_in_the_version_not_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(copilot::SESSION_DB);
        let writer = Connection::open(&path).unwrap();
        assert_eq!(read_todos(&path, "s").unwrap(), None, "no table yet");
        writer.execute_batch(SCHEMA).unwrap();
        writer
            .execute_batch(
                "INSERT INTO todos (id, title, status, updated_at) VALUES
                 ('zeta', 'Write the parser', 'in_progress', '2026-12-06 18:29:27'),
                 ('alpha', 'Tell the room', 'pending', '2026-12-06 18:29:28');",
            )
            .unwrap();
        let Some(LogEvent::Tasks { tasks, at_ms, .. }) = read_todos(&path, "s").unwrap() else {
            panic!()
        };
        let titles: Vec<&str> = tasks.iter().map(|task| task.title.as_str()).collect();
        assert_eq!(titles, ["Write the parser", "Tell the room"]);
        assert_eq!(at_ms, timestamp_ms("2026-12-06T18:29:28Z"));
        let (before, size) = (
            version(&path).unwrap(),
            std::fs::metadata(&path).unwrap().len(),
        );
        writer
            .execute("UPDATE todos SET status = 'done' WHERE id = 'zeta'", [])
            .unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        assert_ne!(version(&path).unwrap(), before);
        let Some(LogEvent::Tasks { tasks, .. }) = read_todos(&path, "s").unwrap() else {
            panic!()
        };
        assert_eq!(tasks[0].status, TaskStatus::Completed);
        // Read, nothing changes.
        let read = version(&path).unwrap();
        read_todos(&path, "s").unwrap();
        assert_eq!(version(&path).unwrap(), read);
        // A file that is no database is an error, not a list.
        let other = dir.path().join("other.db");
        std::fs::write(&other, b"not a database at all, not even close").unwrap();
        assert!(read_todos(&other, "s").is_err());
    }
}
