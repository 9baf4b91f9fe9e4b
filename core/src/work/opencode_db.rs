//! Reading OpenCode's database while OpenCode writes it: opened read-only (never a write,
//! never a lock that holds OpenCode up: a WAL reader sees the last committed state), rows
//! changed since a position read, and what they say made events by [`super::opencode`].
//!
//! The position is the largest `time_updated` (milliseconds) read; the next read starts
//! at it again (rows written in the same millisecond after the read are not missed; what
//! is read twice counts once: usage by message id, task lists replace, files are a set).
//! A database of another OpenCode version, without some table or column, reads as what
//! the tables it has say.

use std::path::Path;

use rusqlite::{Connection, params};

use super::opencode::{self, DataRow, OpencodeRead, SessionRow, TodoRow};

/// The database's file name in OpenCode's data folder.
pub const DATABASE: &str = "opencode.db";

/// What one read found, and the position to read from next.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DatabaseRead {
    pub read: OpencodeRead,
    pub position: i64,
}

/// Rows of `sql`, or none when the table or a column is missing (another OpenCode version).
fn rows<T>(
    connection: &Connection,
    sql: &str,
    since: i64,
    each: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut statement = match connection.prepare(sql) {
        Ok(statement) => statement,
        Err(error) => {
            tracing::debug!(%error, "OpenCode's database lacks what this query reads");
            return Ok(Vec::new());
        }
    };
    statement
        .query_map(params![since], |row| each(row))?
        .collect::<rusqlite::Result<Vec<T>>>()
}

/// Reads what changed in the database at `path` since `since` (0: everything), in one
/// read transaction, so the rows agree with each other.
pub fn read_since(path: &Path, since: i64) -> rusqlite::Result<DatabaseRead> {
    let mut connection = super::foreign_db::open_read_only(path)?;
    let transaction = connection.transaction()?;
    let mut position = since;
    // Every session, for the directories and parents of changed rows; events for the
    // changed ones.
    let sessions: Vec<(SessionRow, i64)> = rows(
        &transaction,
        "SELECT id, directory, parent_id, model, time_created, time_updated FROM session \
         WHERE ?1 >= 0",
        since,
        |row| {
            Ok((
                SessionRow {
                    id: row.get(0)?,
                    directory: row.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    parent_id: row.get(2)?,
                    model: row.get(3)?,
                    time_created: row.get::<_, Option<i64>>(4)?.unwrap_or_default(),
                },
                row.get::<_, Option<i64>>(5)?.unwrap_or_default(),
            ))
        },
    )?;
    let data_row = |row: &rusqlite::Row<'_>| {
        Ok((
            DataRow {
                id: row.get(0)?,
                session_id: row.get(1)?,
                time_created: row.get::<_, Option<i64>>(2)?.unwrap_or_default(),
                data: row.get::<_, Option<String>>(3)?.unwrap_or_default(),
            },
            row.get::<_, Option<i64>>(4)?.unwrap_or_default(),
        ))
    };
    let messages = rows(
        &transaction,
        "SELECT id, session_id, time_created, data, time_updated FROM message \
         WHERE time_updated >= ?1",
        since,
        data_row,
    )?;
    // Only the parts that can say something: tools and patches, not the text.
    let parts = rows(
        &transaction,
        "SELECT id, session_id, time_created, data, time_updated FROM part \
         WHERE time_updated >= ?1 AND json_valid(data) \
         AND json_extract(data, '$.type') IN ('tool', 'patch')",
        since,
        data_row,
    )?;
    // The whole list of every session whose list changed.
    let todos: Vec<(TodoRow, i64)> = rows(
        &transaction,
        "SELECT session_id, content, status, position, time_updated FROM todo \
         WHERE session_id IN (SELECT session_id FROM todo WHERE time_updated >= ?1)",
        since,
        |row| {
            Ok((
                TodoRow {
                    session_id: row.get(0)?,
                    content: row.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    status: row.get::<_, Option<String>>(2)?.unwrap_or_default(),
                    position: row.get::<_, Option<i64>>(3)?.unwrap_or_default(),
                },
                row.get::<_, Option<i64>>(4)?.unwrap_or_default(),
            ))
        },
    )?;
    drop(transaction);
    for updated in sessions
        .iter()
        .map(|(_, at)| *at)
        .chain(messages.iter().map(|(_, at)| *at))
        .chain(parts.iter().map(|(_, at)| *at))
        .chain(todos.iter().map(|(_, at)| *at))
    {
        position = position.max(updated);
    }
    let changed: Vec<String> = sessions
        .iter()
        .filter(|(_, at)| *at >= since)
        .map(|(row, _)| row.id.clone())
        .collect();
    let all: Vec<SessionRow> = sessions.into_iter().map(|(row, _)| row).collect();
    let messages: Vec<DataRow> = messages.into_iter().map(|(row, _)| row).collect();
    let parts: Vec<DataRow> = parts.into_iter().map(|(row, _)| row).collect();
    let todos: Vec<TodoRow> = todos.into_iter().map(|(row, _)| row).collect();
    let read = opencode::read_rows(&all, &changed, &messages, &parts, &todos);
    Ok(DatabaseRead { read, position })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_events::LogEvent;

    /// The tables Roundtable reads, as OpenCode 1.18 declares them.
    const SCHEMA: &str = "
        CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text,
            slug text NOT NULL, directory text NOT NULL, title text NOT NULL,
            version text NOT NULL, cost real DEFAULT 0 NOT NULL, model text,
            time_created integer NOT NULL, time_updated integer NOT NULL);
        CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
            time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
        CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL,
            session_id text NOT NULL, time_created integer NOT NULL,
            time_updated integer NOT NULL, data text NOT NULL);
        CREATE TABLE todo (session_id text NOT NULL, content text NOT NULL,
            status text NOT NULL, priority text NOT NULL, position integer NOT NULL,
            time_created integer NOT NULL, time_updated integer NOT NULL,
            CONSTRAINT todo_pk PRIMARY KEY(session_id, position));";

    fn step(input: u64) -> String {
        format!(
            r#"{{"role":"assistant","modelID":"claude-sonnet-4-5","tokens":{{"input":{input},"output":10,"reasoning":0,"cache":{{"read":0,"write":0}}}}}}"#
        )
    }

    fn database(dir: &Path) -> (std::path::PathBuf, Connection) {
        let path = dir.join(DATABASE);
        let writer = Connection::open(&path).unwrap();
        writer.pragma_update(None, "journal_mode", "wal").unwrap();
        writer.execute_batch(SCHEMA).unwrap();
        writer
            .execute(
                "INSERT INTO session VALUES ('ses_a', 'global', NULL, 's', '/src/app', 't', '1.18.33', 0,
                 '{\"id\":\"claude-sonnet-4-5\"}', 100, 100)",
                [],
            )
            .unwrap();
        (path, writer)
    }

    fn usage_keys(read: &DatabaseRead) -> Vec<String> {
        read.read
            .events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Usage { key, .. } => key.as_ref().map(|key| key.message_id.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn reads_go_on_from_the_last_time_read_and_see_only_what_opencode_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (path, writer) = database(dir.path());
        let insert = |id: &str, at: i64, data: &str| {
            writer
                .execute(
                    "INSERT INTO message VALUES (?1, 'ses_a', ?2, ?2, ?3)",
                    params![id, at, data],
                )
                .unwrap();
        };
        insert("msg_1", 200, &step(100));
        writer
            .execute(
                "INSERT INTO todo VALUES ('ses_a', 'Parse', 'in_progress', 'high', 0, 210, 210)",
                [],
            )
            .unwrap();
        let first = read_since(&path, 0).unwrap();
        assert_eq!(first.position, 210);
        assert_eq!(usage_keys(&first), ["msg_1"]);
        assert!(
            first
                .read
                .events
                .iter()
                .any(|e| matches!(e, LogEvent::Tasks { .. }))
        );
        // A step written since: read from the position, only it (and nothing of the
        // session, unchanged). One still in an open transaction is not seen.
        insert("msg_2", 300, &step(5));
        writer.execute_batch("BEGIN").unwrap();
        insert("msg_3", 400, &step(7));
        let second = read_since(&path, first.position).unwrap();
        assert_eq!(usage_keys(&second), ["msg_2"]);
        assert_eq!(second.position, 300);
        assert!(
            !second
                .read
                .events
                .iter()
                .any(|e| matches!(e, LogEvent::Session { .. }))
        );
        writer.execute_batch("COMMIT").unwrap();
        assert_eq!(
            usage_keys(&read_since(&path, 300).unwrap()),
            ["msg_2", "msg_3"]
        );
        // The reads never wrote: OpenCode's own connection goes on as before.
        insert("msg_4", 500, &step(1));
    }

    #[test]
    fn another_versions_database_reads_as_far_as_its_tables_go_and_a_stranger_file_fails() {
        let dir = tempfile::tempdir().unwrap();
        let (path, writer) = database(dir.path());
        writer
            .execute_batch("DROP TABLE todo; DROP TABLE part;")
            .unwrap();
        writer
            .execute(
                "INSERT INTO message VALUES ('msg_1', 'ses_a', 5, 5, ?1)",
                [step(3)],
            )
            .unwrap();
        drop(writer);
        assert_eq!(usage_keys(&read_since(&path, 0).unwrap()), ["msg_1"]);
        let stranger = dir.path().join("other.db");
        std::fs::write(
            &stranger,
            b"not a database at all, but long enough to look like one......",
        )
        .unwrap();
        assert!(read_since(&stranger, 0).is_err());
    }
}
