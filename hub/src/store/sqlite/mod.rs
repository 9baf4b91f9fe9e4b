//! The embedded SQLite backend: one file in the data directory, WAL journal,
//! `synchronous=FULL` (every commit is fsync'd before it returns) until the hub's writer
//! takes durability over with [`Store::flusher`](super::Store::flusher), one writer connection
//! owned by the writer thread and a small pool of read-only connections for replay and
//! history. Migrations are numbered SQL files embedded in the binary, applied in order,
//! each in its own transaction, and checksummed so an edited migration is detected.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use roundtable_protocol::model::Routing;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use super::{
    AuditQuery, DirectoryQuery, EventOrder, Flush, Membership, ReadError, ReadStore, ReadTx,
    SeqRange, Snapshot, SnapshotRead, Store, StoreError, WriteError, WriteTx, credential_scheme,
    credential_scheme_from, store_only,
};
use roundtable_engine::ids::{IdSource, TokenHash};
use roundtable_engine::records::{
    AuditRecord, ContactRecord, ControlRecord, EventRecord, InviteRecord, MemberRecord, PingRecord,
    PrincipalRecord, RemoteCallRecord, RemoteThreadRecord, RemoteWrite, RequestRecord, RoomRecord,
    StreamKey, TokenRecord,
};
use roundtable_engine::sent_keys::SentKeyRecord;

mod read;
mod rows;
#[cfg(test)]
mod tests;
mod write;

pub use read::{SqliteReader, read_audit_log};
use rows::*;
use write::SqliteTx;

/// The embedded migrations, in order. Append only: never edit or remove one.
const MIGRATIONS: &[roundtable_sqlite::Migration] = &[
    (
        1,
        "messaging",
        include_str!("../migrations/0001_messaging.sql"),
    ),
    (
        2,
        "consent_and_governance",
        include_str!("../migrations/0002_consent_and_governance.sql"),
    ),
    (
        3,
        "client_keys_in_memory",
        include_str!("../migrations/0003_client_keys_in_memory.sql"),
    ),
    (
        4,
        "invite_revocation",
        include_str!("../migrations/0004_invite_revocation.sql"),
    ),
    (
        5,
        "audit_folding",
        include_str!("../migrations/0005_audit_folding.sql"),
    ),
    (
        6,
        "control_reasons",
        include_str!("../migrations/0006_control_reasons.sql"),
    ),
    (
        7,
        "audit_via",
        include_str!("../migrations/0007_audit_via.sql"),
    ),
    (
        8,
        "held_messages",
        include_str!("../migrations/0008_held_messages.sql"),
    ),
    (
        9,
        "a2a_task_keys",
        include_str!("../migrations/0009_a2a_task_keys.sql"),
    ),
    (
        10,
        "remote_agents",
        include_str!("../migrations/0010_remote_agents.sql"),
    ),
];

/// Applies every embedded migration the database lacks. Returns the versions applied.
pub fn migrate(conn: &mut Connection, now_ms: i64) -> Result<Vec<i64>, StoreError> {
    Ok(roundtable_sqlite::migrate(conn, MIGRATIONS, now_ms)?)
}

/// The writer's connection.
pub struct SqliteStore {
    conn: Connection,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteStore")
    }
}

/// Opens (creating if needed) the database at `path`: the writer's store and a reader pool.
/// `ids` mints the hub id and epoch of a new database.
pub fn open(
    path: &Path,
    ids: &mut IdSource,
    now_ms: i64,
) -> Result<(SqliteStore, SqliteReader), StoreError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::DataDir {
            path: dir.display().to_string(),
            source,
        })?;
        restrict_permissions(dir);
    }
    let mut conn = Connection::open(path)?;
    // Before the WAL exists, so that it is made with the same mode (SQLite copies it).
    restrict_file(path);
    // WAL with synchronous=FULL: every commit is fsync'd before it returns (the hub's writer
    // switches to its own flushes, see `flusher`). The page cache
    // is larger than the default: measured, it saves the writer re-reading hot index pages.
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = ON;
         PRAGMA busy_timeout = 10000;
         PRAGMA cache_size = -8192;",
    )?;
    migrate(&mut conn, now_ms)?;
    let existing: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'hub_id'", [], |row| {
            row.get(0)
        })
        .optional()?;
    if existing.is_none() {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('hub_id', ?1), ('epoch', ?2), ('created_ms', ?3)",
            params![ids.id("h"), ids.id("ep"), now_ms.to_string()],
        )?;
        tx.commit()?;
    }
    let reader = SqliteReader {
        path: path.to_owned(),
        pool: Mutex::new(Vec::new()),
    };
    Ok((SqliteStore { conn }, reader))
}

/// The database holds token hashes and private messages: keep it to its owner.
fn restrict_permissions(dir: &Path) {
    if let Err(error) = roundtable_platform::private::restrict(dir) {
        tracing::warn!(dir = %dir.display(), %error, "cannot restrict the data directory to its owner");
    }
}

/// The database file holds remote agents' credentials besides hashes: its owner's only.
fn restrict_file(path: &Path) {
    if let Err(error) = roundtable_platform::private::restrict(path) {
        tracing::warn!(path = %path.display(), %error, "cannot restrict the database to its owner");
    }
}

impl Store for SqliteStore {
    fn load(&mut self, now_ms: i64) -> Result<Snapshot, StoreError> {
        let tx = self.conn.transaction()?;
        let meta = |key: &str| -> Result<String, StoreError> {
            tx.query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| {
                row.get(0)
            })
            .map_err(StoreError::from)
        };
        let mut snapshot = Snapshot {
            hub_id: meta("hub_id")?,
            epoch: meta("epoch")?,
            ..Snapshot::default()
        };
        {
            let mut statement =
                tx.prepare(&format!("SELECT {PRINCIPAL_COLUMNS} FROM principals"))?;
            snapshot.principals = decode_all(statement.query([])?, principal_from)?;
        }
        {
            let mut statement =
                // Revoked tokens stay on record but not in memory: unknown and revoked
                // answer alike.
                tx.prepare(
                    "SELECT hash, principal, revoked_ms IS NOT NULL FROM tokens
                     WHERE revoked_ms IS NULL",
                )?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                snapshot.tokens.push(TokenRecord {
                    hash: hash_from(row.get(0)?, "tokens")?,
                    principal: row.get(1)?,
                    revoked: row.get(2)?,
                });
            }
        }
        {
            let mut statement = tx.prepare(&format!("SELECT {ROOM_COLUMNS} FROM rooms"))?;
            snapshot.rooms = decode_all(statement.query([])?, room_from)?;
        }
        {
            let mut statement = tx.prepare(&format!("SELECT {MEMBER_COLUMNS} FROM members"))?;
            snapshot.members = decode_all(statement.query([])?, member_from)?;
        }
        {
            let mut head = tx.prepare("SELECT MAX(seq) FROM events WHERE stream = ?1")?;
            let streams = snapshot
                .rooms
                .iter()
                .map(|room| StreamKey::Room(room.id.clone()))
                .chain(
                    snapshot
                        .principals
                        .iter()
                        .map(|principal| StreamKey::Inbox(principal.id.clone())),
                );
            for stream in streams {
                let seq: Option<i64> = head.query_row([stream.storage_key()], |row| row.get(0))?;
                if let Some(seq) = seq {
                    snapshot.heads.push((stream, seq as u64));
                }
            }
        }
        {
            // Each room's events from the newest back to the retention: the keys are in
            // rooms only (a `send` targets a room), and seq order is commit order.
            let cutoff = now_ms.saturating_sub(roundtable_engine::sent_keys::RETENTION_MS);
            let mut statement = tx.prepare(
                "SELECT sender, client_key, seq, ts_ms FROM events WHERE stream = ?1 ORDER BY seq DESC",
            )?;
            for room in &snapshot.rooms {
                let mut rows = statement.query([&room.id])?;
                while let Some(row) = rows.next()? {
                    let ts_ms: i64 = row.get(3)?;
                    if ts_ms < cutoff {
                        break;
                    }
                    if let Some(client_key) = row.get::<_, Option<String>>(1)? {
                        snapshot.sent_keys.push(SentKeyRecord {
                            sender: row.get(0)?,
                            client_key,
                            room: room.id.clone(),
                            seq: row.get::<_, i64>(2)? as u64,
                            ts_ms,
                        });
                    }
                }
            }
        }
        {
            // Only pings that can still be answered; the rest are read when asked for.
            let mut statement = tx.prepare(&format!(
                "SELECT {PING_COLUMNS} FROM pings
                 WHERE answered_by IS NULL AND (expires_ms IS NULL OR expires_ms > ?1)"
            ))?;
            let mut rows = statement.query([now_ms])?;
            while let Some(row) = rows.next()? {
                snapshot.pings.push(ping_from(row)?);
            }
        }
        {
            let mut statement = tx.prepare(&format!("SELECT {CONTACT_COLUMNS} FROM contacts"))?;
            snapshot.contacts = decode_all(statement.query([])?, contact_from)?;
        }
        {
            // Only pending requests; final ones are read when asked for.
            let mut statement = tx.prepare(&format!(
                "SELECT {REQUEST_COLUMNS} FROM contact_requests WHERE state = 'pending'"
            ))?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                snapshot.requests.push(request_from(row)?);
            }
        }
        {
            // Only invites that can still be redeemed; used up, expired or withdrawn ones
            // are read when a code or id names them.
            let mut statement = tx.prepare(&format!(
                "SELECT {INVITE_COLUMNS} FROM invites
                 WHERE revoked_ms IS NULL AND uses < max_uses AND expires_ms > ?1"
            ))?;
            let mut rows = statement.query([now_ms])?;
            while let Some(row) = rows.next()? {
                snapshot.invites.push(invite_from(row)?);
            }
        }
        {
            let mut statement =
                tx.prepare("SELECT agent, room, action, by, ts_ms, reason FROM controls")?;
            snapshot.controls = decode_all(statement.query([])?, control_from)?;
        }
        snapshot.audit_head = tx
            .query_row(
                "SELECT n, hash FROM audit ORDER BY n DESC LIMIT 1",
                [],
                |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, String>(1)?)),
            )
            .optional()?
            .unwrap_or_else(|| (0, roundtable_engine::audit::GENESIS.to_owned()));
        drop(tx);
        Ok(snapshot)
    }

    fn transaction(&mut self) -> Result<Box<dyn WriteTx + '_>, StoreError> {
        // `&mut self` already keeps a second transaction from starting on this connection.
        let conn: &Connection = &self.conn;
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
        Ok(Box::new(SqliteTx {
            append: None,
            tx,
            conn,
        }))
    }

    /// Commits stop waiting for `fsync` (`synchronous = NORMAL`: a commit writes its WAL
    /// frames and returns; checkpoints still sync the WAL before copying it and the database
    /// after), and the returned flush `fdatasync`s the WAL file, which holds every commit
    /// not yet checkpointed.
    fn flusher(&mut self) -> Result<Box<dyn Flush>, StoreError> {
        let database = self
            .conn
            .path()
            .filter(|path| !path.is_empty())
            .ok_or_else(|| StoreError::Corrupt {
                table: "database",
                detail: "an in-memory database cannot be made durable".into(),
            })?;
        let wal = PathBuf::from(format!("{database}-wal"));
        self.conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
        Ok(Box::new(WalFlush { wal, file: None }))
    }
}

/// `fdatasync` of the WAL file. The file is reopened if SQLite ever replaced it, so the
/// sync always reaches the file SQLite writes to.
struct WalFlush {
    wal: PathBuf,
    file: Option<(std::fs::File, u64)>,
}

impl Flush for WalFlush {
    fn flush(&mut self) -> std::io::Result<()> {
        let current = match std::fs::metadata(&self.wal) {
            Ok(metadata) => file_id(&self.wal, &metadata),
            // SQLite removes the WAL only once it is fully checkpointed into the database
            // file, and the checkpoint syncs that file: nothing is left to flush.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                self.file = None;
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        let file = match self.file.take() {
            Some((file, id)) if id == current => (file, id),
            // Open for writing: Windows flushes only a handle that may write.
            _ => match std::fs::OpenOptions::new().write(true).open(&self.wal) {
                Ok(file) => {
                    let id = file_id(&self.wal, &file.metadata()?);
                    (file, id)
                }
                // Checkpointed and removed since it was looked at (the writer closing its
                // connection as the hub stops): as above, nothing is left to flush.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(error) => return Err(error),
            },
        };
        let result = file.0.sync_data();
        self.file = Some(file);
        result
    }
}

/// What tells two files at one path apart.
fn file_id(path: &Path, metadata: &std::fs::Metadata) -> u64 {
    roundtable_platform::file_identity::of(path, metadata).1
}
