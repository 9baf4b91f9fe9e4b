//! Numbered, embedded, append-only SQLite migrations.
//!
//! Each database the project keeps (the hub's store, a client's cache) lists its migrations
//! as `(version, name, sql)`, embedded in the binary with `include_str!`. [`migrate`]
//! applies the missing ones in order, each in its own transaction, and records a checksum
//! of each: a migration edited after it was applied, or a database written by a newer
//! build, is refused rather than silently misread.

use rusqlite::{Connection, TransactionBehavior, params};
use sha2::{Digest, Sha256};

/// One migration: its number, a name, its SQL.
pub type Migration = (i64, &'static str, &'static str);

#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(
        "the database was written by a newer version (schema {found}, this one knows up to \
         {known}); run a newer roundtable"
    )]
    NewerSchema { found: i64, known: i64 },
    #[error(
        "migration {version} was changed after it was applied (checksum mismatch); migrations \
         are append-only: restore the original"
    )]
    Edited { version: i64 },
}

fn checksum(sql: &str) -> String {
    Sha256::digest(sql.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Applies every migration the database lacks; returns the versions applied.
pub fn migrate(
    conn: &mut Connection,
    migrations: &[Migration],
    now_ms: i64,
) -> Result<Vec<i64>, MigrationError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    INTEGER PRIMARY KEY,
             name       TEXT NOT NULL,
             checksum   TEXT NOT NULL,
             applied_ms INTEGER NOT NULL
         ) STRICT;",
    )?;
    let known = migrations.last().map_or(0, |(version, _, _)| *version);
    let applied: Vec<(i64, String)> = conn
        .prepare("SELECT version, checksum FROM schema_migrations ORDER BY version")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (version, stored) in &applied {
        match migrations.iter().find(|(known, _, _)| known == version) {
            None => {
                return Err(MigrationError::NewerSchema {
                    found: *version,
                    known,
                });
            }
            Some((_, _, sql)) if checksum(sql) != *stored => {
                return Err(MigrationError::Edited { version: *version });
            }
            Some(_) => {}
        }
    }
    let mut newly = Vec::new();
    for migration in migrations {
        if applied.iter().any(|(done, _)| *done == migration.0) {
            continue;
        }
        if apply(conn, migration, now_ms)? {
            newly.push(migration.0);
        }
    }
    Ok(newly)
}

/// Applies one migration in its own transaction, unless another process applied it since
/// this one read the list (two processes opening a new database at once, such as an agent
/// CLI's hook and its MCP server): the check is made under the write lock. Whether it
/// applied it.
fn apply(
    conn: &mut Connection,
    (version, name, sql): &Migration,
    now_ms: i64,
) -> Result<bool, MigrationError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let done: bool = tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?1)",
        [version],
        |row| row.get(0),
    )?;
    if done {
        return Ok(false);
    }
    tx.execute_batch(sql)?;
    tx.execute(
        "INSERT INTO schema_migrations (version, name, checksum, applied_ms) VALUES (?1, ?2, ?3, ?4)",
        params![version, name, checksum(sql), now_ms],
    )?;
    tx.commit()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &[Migration] = &[(1, "one", "CREATE TABLE a (x INTEGER) STRICT;")];
    const TWO: &[Migration] = &[
        (1, "one", "CREATE TABLE a (x INTEGER) STRICT;"),
        (2, "two", "CREATE TABLE b (y INTEGER) STRICT;"),
    ];

    #[test]
    fn a_migration_another_process_applied_meanwhile_is_not_applied_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut first = Connection::open(&path).unwrap();
        let mut second = Connection::open(&path).unwrap();
        // Both read the (empty) list of applied migrations; the first applies them.
        migrate(&mut second, &[], 1).unwrap();
        assert_eq!(migrate(&mut first, TWO, 1).unwrap(), vec![1, 2]);
        // The second, going on from what it read, skips them under the lock.
        assert!(!apply(&mut second, &TWO[0], 2).unwrap());
        assert!(!apply(&mut second, &TWO[1], 2).unwrap());
        assert_eq!(migrate(&mut second, TWO, 3).unwrap(), Vec::<i64>::new());
        let rows: i64 = second
            .query_row("SELECT count(*) FROM schema_migrations", [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(rows, 2);
    }

    #[test]
    fn applies_in_order_once_and_refuses_edits_and_newer_databases() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut conn, ONE, 1).unwrap(), vec![1]);
        assert_eq!(migrate(&mut conn, TWO, 2).unwrap(), vec![2]);
        assert_eq!(migrate(&mut conn, TWO, 3).unwrap(), Vec::<i64>::new());
        assert!(matches!(
            migrate(&mut conn, ONE, 4),
            Err(MigrationError::NewerSchema { found: 2, known: 1 })
        ));
        let edited: &[Migration] = &[
            (1, "one", "CREATE TABLE a (x TEXT) STRICT;"),
            (2, "two", "CREATE TABLE b (y INTEGER) STRICT;"),
        ];
        assert!(matches!(
            migrate(&mut conn, edited, 5),
            Err(MigrationError::Edited { version: 1 })
        ));
    }

    #[test]
    fn a_failing_migration_leaves_nothing_behind() {
        let mut conn = Connection::open_in_memory().unwrap();
        let broken: &[Migration] = &[(1, "broken", "CREATE TABLE a (x INTEGER); NOT SQL;")];
        assert!(migrate(&mut conn, broken, 1).is_err());
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'a'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0);
        assert_eq!(migrate(&mut conn, ONE, 2).unwrap(), vec![1]);
    }
}
