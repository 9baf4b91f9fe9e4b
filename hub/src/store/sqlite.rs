//! The embedded SQLite backend: one file in the data directory, WAL journal,
//! `synchronous=FULL` (every commit is fsync'd before it returns) until the hub's writer
//! takes durability over with [`Store::flusher`](super::Store::flusher), one writer connection
//! owned by the writer thread and a small pool of read-only connections for replay and
//! history. Migrations are numbered SQL files embedded in the binary, applied in order,
//! each in its own transaction, and checksummed so an edited migration is detected.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use roundtable_protocol::client::ControlAction;
use roundtable_protocol::model::{AuditResult, Discoverable, PrincipalKind, RequestState, Routing};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use super::{
    AuditQuery, AuditRecord, ContactRecord, ControlRecord, DirectoryQuery, EventRecord, Flush,
    HistoryPage, HistoryRange, InviteRecord, MemberRecord, PingRecord, PrincipalRecord, ReadError,
    ReadStore, ReplayPage, ReplayPosition, RequestRecord, RoomRecord, Snapshot, Store, StoreError,
    StreamKey, StreamPlan, SyncPlan, TokenRecord, WriteTx,
};
use crate::ids::{IdSource, TokenHash};
use crate::sent_keys::SentKeyRecord;
use crate::visibility;

/// The embedded migrations, in order. Append only: never edit or remove one.
const MIGRATIONS: &[roundtable_sqlite::Migration] = &[
    (
        1,
        "messaging",
        include_str!("migrations/0001_messaging.sql"),
    ),
    (
        2,
        "consent_and_governance",
        include_str!("migrations/0002_consent_and_governance.sql"),
    ),
    (
        3,
        "client_keys_in_memory",
        include_str!("migrations/0003_client_keys_in_memory.sql"),
    ),
    (
        4,
        "invite_revocation",
        include_str!("migrations/0004_invite_revocation.sql"),
    ),
    (
        5,
        "audit_folding",
        include_str!("migrations/0005_audit_folding.sql"),
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
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(error) = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)) {
            tracing::warn!(dir = %dir.display(), %error, "cannot restrict the data directory to its owner");
        }
    }
}

fn kind_from(text: &str) -> Result<PrincipalKind, StoreError> {
    match text {
        "user" => Ok(PrincipalKind::User),
        "agent" => Ok(PrincipalKind::Agent),
        other => Err(StoreError::Corrupt {
            table: "principals",
            detail: format!("kind {other:?}"),
        }),
    }
}

fn event_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<EventRecord> {
    let stream: String = row.get(0)?;
    let mentions: Option<String> = row.get(8)?;
    Ok(EventRecord {
        stream: StreamKey::from_storage_key(&stream),
        seq: row.get::<_, i64>(1)? as u64,
        id: row.get(2)?,
        ts_ms: row.get(3)?,
        from: row.get(4)?,
        kind: row.get(5)?,
        body: row.get(6)?,
        client_key: row.get(7)?,
        mentions: mentions
            .map(|text| text.split(' ').map(str::to_owned).collect())
            .unwrap_or_default(),
        pair: row.get::<_, i64>(9)? != 0,
    })
}

const EVENT_COLUMNS: &str =
    "stream, seq, id, ts_ms, sender, kind, body, client_key, mentions, pair";

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
            let mut statement = tx.prepare(
                "SELECT id, kind, handle, name, owner, discoverable, description, card, created_ms
                 FROM principals",
            )?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                let discoverable: String = row.get(5)?;
                snapshot.principals.push(PrincipalRecord {
                    id: row.get(0)?,
                    kind: kind_from(&row.get::<_, String>(1)?)?,
                    handle: row.get(2)?,
                    name: row.get(3)?,
                    owner: row.get(4)?,
                    discoverable: Discoverable::parse(&discoverable).ok_or_else(|| {
                        StoreError::Corrupt {
                            table: "principals",
                            detail: format!("discoverable {discoverable:?}"),
                        }
                    })?,
                    description: row.get(6)?,
                    card: row.get(7)?,
                    created_ms: row.get(8)?,
                });
            }
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
                let hash: Vec<u8> = row.get(0)?;
                let hash: [u8; 32] = hash.try_into().map_err(|_| StoreError::Corrupt {
                    table: "tokens",
                    detail: "a hash is not 32 bytes".into(),
                })?;
                snapshot.tokens.push(TokenRecord {
                    hash: TokenHash(hash),
                    principal: row.get(1)?,
                    revoked: row.get(2)?,
                });
            }
        }
        {
            let mut statement =
                tx.prepare("SELECT id, title, topic, creator, created_ms FROM rooms")?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                snapshot.rooms.push(RoomRecord {
                    id: row.get(0)?,
                    title: row.get(1)?,
                    topic: row.get(2)?,
                    creator: row.get(3)?,
                    created_ms: row.get(4)?,
                });
            }
        }
        {
            let mut statement =
                tx.prepare("SELECT room, principal, routing, joined_ms FROM members")?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                let routing: String = row.get(2)?;
                snapshot.members.push(MemberRecord {
                    room: row.get(0)?,
                    principal: row.get(1)?,
                    routing: Routing::parse(&routing).ok_or_else(|| StoreError::Corrupt {
                        table: "members",
                        detail: format!("routing {routing:?}"),
                    })?,
                    joined_ms: row.get(3)?,
                });
            }
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
            let cutoff = now_ms.saturating_sub(crate::sent_keys::RETENTION_MS);
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
                snapshot.pings.push(ping_from_row(row)?);
            }
        }
        {
            let mut statement = tx.prepare("SELECT a, b, since_ms, request FROM contacts")?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                snapshot.contacts.push(ContactRecord {
                    a: row.get(0)?,
                    b: row.get(1)?,
                    since_ms: row.get(2)?,
                    request: row.get(3)?,
                });
            }
        }
        {
            // Only pending requests; final ones are read when asked for.
            let mut statement = tx.prepare(&format!(
                "SELECT {REQUEST_COLUMNS} FROM contact_requests WHERE state = 'pending'"
            ))?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                snapshot.requests.push(request_from_row(row)?);
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
                snapshot.invites.push(invite_from_row(row)?);
            }
        }
        {
            let mut statement =
                tx.prepare("SELECT agent, room, action, by, ts_ms FROM controls")?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                let room: String = row.get(1)?;
                let action: String = row.get(2)?;
                snapshot.controls.push(ControlRecord {
                    agent: row.get(0)?,
                    room: (!room.is_empty()).then_some(room),
                    action: match action.as_str() {
                        "pause" => ControlAction::Pause,
                        "stop" => ControlAction::Stop,
                        other => {
                            return Err(StoreError::Corrupt {
                                table: "controls",
                                detail: format!("action {other:?}"),
                            });
                        }
                    },
                    by: row.get(3)?,
                    ts_ms: row.get(4)?,
                });
            }
        }
        snapshot.audit_head = tx
            .query_row(
                "SELECT n, hash FROM audit ORDER BY n DESC LIMIT 1",
                [],
                |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, String>(1)?)),
            )
            .optional()?
            .unwrap_or_else(|| (0, crate::audit::GENESIS.to_owned()));
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
            Ok(metadata) => file_id(&metadata),
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
            _ => match std::fs::File::open(&self.wal) {
                Ok(file) => {
                    let id = file_id(&file.metadata()?);
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
fn file_id(metadata: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        std::os::unix::fs::MetadataExt::ino(metadata)
    }
    #[cfg(not(unix))]
    {
        let _ = metadata;
        0
    }
}

/// Fields drop in order: the held statement goes back to the cache before an uncommitted
/// transaction rolls back.
struct SqliteTx<'conn> {
    /// The event insert, looked up once per transaction rather than once per event: nearly
    /// every command runs it, and the cache hashes the whole SQL text on each lookup.
    append: Option<rusqlite::CachedStatement<'conn>>,
    tx: rusqlite::Transaction<'conn>,
    conn: &'conn Connection,
}

const APPEND_EVENT: &str =
    "INSERT INTO events (stream, seq, id, ts_ms, sender, kind, body, client_key, mentions, pair)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

impl WriteTx for SqliteTx<'_> {
    fn insert_principal(&mut self, p: &PrincipalRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO principals (id, kind, handle, name, owner, discoverable, description, card, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                p.id,
                p.kind.as_str(),
                p.handle,
                p.name,
                p.owner,
                p.discoverable.as_str(),
                p.description,
                p.card,
                p.created_ms
            ])?;
        Ok(())
    }

    fn update_principal(&mut self, p: &PrincipalRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "UPDATE principals SET name = ?2, discoverable = ?3, description = ?4, card = ?5
                 WHERE id = ?1",
            )?
            .execute(params![
                p.id,
                p.name,
                p.discoverable.as_str(),
                p.description,
                p.card
            ])?;
        Ok(())
    }

    fn insert_token(&mut self, token: &TokenRecord, now_ms: i64) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO tokens (hash, principal, created_ms, revoked_ms) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                &token.hash.0[..],
                token.principal,
                now_ms,
                token.revoked.then_some(now_ms)
            ])?;
        Ok(())
    }

    fn revoke_tokens(&mut self, principal: &str, now_ms: i64) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "UPDATE tokens SET revoked_ms = ?2 WHERE principal = ?1 AND revoked_ms IS NULL",
            )?
            .execute(params![principal, now_ms])?;
        Ok(())
    }

    fn insert_room(&mut self, room: &RoomRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO rooms (id, title, topic, creator, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                room.id,
                room.title,
                room.topic,
                room.creator,
                room.created_ms
            ])?;
        Ok(())
    }

    fn update_room(&mut self, room: &RoomRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached("UPDATE rooms SET title = ?2, topic = ?3 WHERE id = ?1")?
            .execute(params![room.id, room.title, room.topic])?;
        Ok(())
    }

    fn upsert_member(&mut self, member: &MemberRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO members (room, principal, routing, joined_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (room, principal) DO UPDATE SET routing = excluded.routing",
            )?
            .execute(params![
                member.room,
                member.principal,
                member.routing.as_str(),
                member.joined_ms
            ])?;
        Ok(())
    }

    fn delete_member(&mut self, room: &str, principal: &str) -> Result<(), StoreError> {
        self.tx
            .prepare_cached("DELETE FROM members WHERE room = ?1 AND principal = ?2")?
            .execute(params![room, principal])?;
        Ok(())
    }

    fn append_event(&mut self, event: &EventRecord) -> Result<(), StoreError> {
        let mentions = (!event.mentions.is_empty()).then(|| event.mentions.join(" "));
        let append = match &mut self.append {
            Some(append) => append,
            None => self.append.insert(self.conn.prepare_cached(APPEND_EVENT)?),
        };
        append.execute(params![
            event.stream.storage_key(),
            event.seq as i64,
            event.id,
            event.ts_ms,
            event.from,
            event.kind,
            event.body,
            event.client_key,
            mentions,
            i64::from(event.pair)
        ])?;
        Ok(())
    }

    fn event_at(
        &mut self,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<Option<EventRecord>, StoreError> {
        Ok(self
            .tx
            .prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE stream = ?1 AND seq = ?2"
            ))?
            .query_row(params![stream.storage_key(), seq as i64], event_from_row)
            .optional()?)
    }

    fn request(&mut self, id: &str) -> Result<Option<RequestRecord>, StoreError> {
        let mut statement = self.tx.prepare_cached(&format!(
            "SELECT {REQUEST_COLUMNS} FROM contact_requests WHERE id = ?1"
        ))?;
        let mut rows = statement.query([id])?;
        rows.next()?.map(request_from_row).transpose()
    }

    fn invite_by_code(
        &mut self,
        code_hash: &TokenHash,
    ) -> Result<Option<InviteRecord>, StoreError> {
        let mut statement = self.tx.prepare_cached(&format!(
            "SELECT {INVITE_COLUMNS} FROM invites WHERE code_hash = ?1"
        ))?;
        let mut rows = statement.query([&code_hash.0[..]])?;
        rows.next()?.map(invite_from_row).transpose()
    }

    fn invite(&mut self, id: &str) -> Result<Option<InviteRecord>, StoreError> {
        let mut statement = self.tx.prepare_cached(&format!(
            "SELECT {INVITE_COLUMNS} FROM invites WHERE id = ?1"
        ))?;
        let mut rows = statement.query([id])?;
        rows.next()?.map(invite_from_row).transpose()
    }

    fn ping(&mut self, room: &str, ping: &str) -> Result<Option<PingRecord>, StoreError> {
        let mut statement = self.tx.prepare_cached(&format!(
            "SELECT {PING_COLUMNS} FROM pings WHERE room = ?1 AND ping = ?2"
        ))?;
        let mut rows = statement.query([room, ping])?;
        rows.next()?.map(ping_from_row).transpose()
    }

    fn upsert_ping(&mut self, ping: &PingRecord) -> Result<(), StoreError> {
        let recipients = serde_json::to_string(&ping.to).expect("strings serialize");
        self.tx
            .prepare_cached(
                "INSERT INTO pings (room, ping, seq, recipients, expires_ms, answered_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (room, ping) DO UPDATE SET answered_by = excluded.answered_by",
            )?
            .execute(params![
                ping.room,
                ping.ping,
                ping.seq as i64,
                recipients,
                ping.expires_ms,
                ping.answered_by
            ])?;
        Ok(())
    }

    fn set_ack(
        &mut self,
        principal: &str,
        device: &str,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO acks (principal, device, stream, seq) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (principal, device, stream) DO UPDATE SET seq = max(seq, excluded.seq)",
            )?
            .execute(params![principal, device, stream.storage_key(), seq as i64])?;
        Ok(())
    }

    fn insert_contact(&mut self, contact: &ContactRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO contacts (a, b, since_ms, request) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (a, b) DO NOTHING",
            )?
            .execute(params![
                contact.a,
                contact.b,
                contact.since_ms,
                contact.request
            ])?;
        Ok(())
    }

    fn upsert_request(&mut self, request: &RequestRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO contact_requests (id, sender, target, state, message, created_ms, decided_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, decided_ms = excluded.decided_ms",
            )?
            .execute(params![
                request.id,
                request.from,
                request.to,
                request.state.as_str(),
                request.message,
                request.created_ms,
                request.decided_ms
            ])?;
        Ok(())
    }

    fn upsert_invite(&mut self, invite: &InviteRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO invites
                     (id, code_hash, creator, room, max_uses, uses, expires_ms, created_ms, revoked_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (id) DO UPDATE SET uses = excluded.uses, revoked_ms = excluded.revoked_ms",
            )?
            .execute(params![
                invite.id,
                &invite.code_hash.0[..],
                invite.creator,
                invite.room,
                invite.max_uses,
                invite.uses,
                invite.expires_ms,
                invite.created_ms,
                invite.revoked_ms
            ])?;
        Ok(())
    }

    fn set_control(&mut self, control: &ControlRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO controls (agent, room, action, by, ts_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (agent, room) DO UPDATE SET action = excluded.action, by = excluded.by,
                     ts_ms = excluded.ts_ms",
            )?
            .execute(params![
                control.agent,
                control.room.as_deref().unwrap_or(""),
                control.action.as_str(),
                control.by,
                control.ts_ms
            ])?;
        Ok(())
    }

    fn delete_control(&mut self, agent: &str, room: Option<&str>) -> Result<(), StoreError> {
        self.tx
            .prepare_cached("DELETE FROM controls WHERE agent = ?1 AND room = ?2")?
            .execute(params![agent, room.unwrap_or("")])?;
        Ok(())
    }

    fn append_audit(&mut self, entry: &AuditRecord) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO audit (n, ts_ms, principal, action, target, result, code, hash, count)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                entry.n as i64,
                entry.ts_ms,
                entry.principal,
                entry.action,
                entry.target,
                audit_result_str(entry.result),
                entry.code,
                entry.hash,
                entry.count.map(|count| count as i64)
            ])?;
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        let SqliteTx { append, tx, .. } = *self;
        drop(append);
        tx.commit()?;
        Ok(())
    }
}

const PING_COLUMNS: &str = "room, ping, seq, recipients, expires_ms, answered_by";

fn ping_from_row(row: &rusqlite::Row<'_>) -> Result<PingRecord, StoreError> {
    let recipients: String = row.get(3)?;
    Ok(PingRecord {
        room: row.get(0)?,
        ping: row.get(1)?,
        seq: row.get::<_, i64>(2)? as u64,
        to: serde_json::from_str(&recipients).map_err(|error| StoreError::Corrupt {
            table: "pings",
            detail: error.to_string(),
        })?,
        expires_ms: row.get(4)?,
        answered_by: row.get(5)?,
    })
}

const REQUEST_COLUMNS: &str = "id, sender, target, state, message, created_ms, decided_ms";

fn request_from_row(row: &rusqlite::Row<'_>) -> Result<RequestRecord, StoreError> {
    let state: String = row.get(3)?;
    Ok(RequestRecord {
        id: row.get(0)?,
        from: row.get(1)?,
        to: row.get(2)?,
        state: RequestState::parse(&state).ok_or_else(|| StoreError::Corrupt {
            table: "contact_requests",
            detail: format!("state {state:?}"),
        })?,
        message: row.get(4)?,
        created_ms: row.get(5)?,
        decided_ms: row.get(6)?,
    })
}

const INVITE_COLUMNS: &str =
    "id, code_hash, creator, room, max_uses, uses, expires_ms, created_ms, revoked_ms";

fn invite_from_row(row: &rusqlite::Row<'_>) -> Result<InviteRecord, StoreError> {
    let hash: Vec<u8> = row.get(1)?;
    Ok(InviteRecord {
        id: row.get(0)?,
        code_hash: TokenHash(hash.try_into().map_err(|_| StoreError::Corrupt {
            table: "invites",
            detail: "a code hash is not 32 bytes".into(),
        })?),
        creator: row.get(2)?,
        room: row.get(3)?,
        max_uses: row.get::<_, i64>(4)? as u32,
        uses: row.get::<_, i64>(5)? as u32,
        expires_ms: row.get(6)?,
        created_ms: row.get(7)?,
        revoked_ms: row.get(8)?,
    })
}

fn audit_result_str(result: AuditResult) -> &'static str {
    match result {
        AuditResult::Ok => "ok",
        AuditResult::Err => "err",
    }
}

fn audit_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AuditRecord> {
    let result: String = row.get(5)?;
    Ok(AuditRecord {
        n: row.get::<_, i64>(0)? as u64,
        ts_ms: row.get(1)?,
        principal: row.get(2)?,
        action: row.get(3)?,
        target: row.get(4)?,
        result: if result == "ok" {
            AuditResult::Ok
        } else {
            AuditResult::Err
        },
        code: row.get(6)?,
        hash: row.get(7)?,
        count: row.get::<_, Option<i64>>(8)?.map(|count| count as u64),
    })
}

const AUDIT_COLUMNS: &str = "n, ts_ms, principal, action, target, result, code, hash, count";

/// Reads the whole audit log of the database at `path`, ascending, calling `visit` for each
/// entry (read-only: safe while the hub runs).
pub fn read_audit_log(
    path: &Path,
    mut visit: impl FnMut(AuditRecord) -> bool,
) -> Result<(), StoreError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut statement = conn.prepare(&format!("SELECT {AUDIT_COLUMNS} FROM audit ORDER BY n"))?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        if !visit(audit_from_row(row)?) {
            break;
        }
    }
    Ok(())
}

/// Read-only connections for replay and history; a connection per concurrent reader,
/// reused.
pub struct SqliteReader {
    path: std::path::PathBuf,
    pool: Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for SqliteReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteReader")
    }
}

impl SqliteReader {
    fn with_connection<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, ReadError>,
    ) -> Result<T, ReadError> {
        let pooled = self.pool.lock().expect("reader pool lock").pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => {
                let conn = Connection::open_with_flags(
                    &self.path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(StoreError::from)?;
                conn.execute_batch("PRAGMA busy_timeout = 10000; PRAGMA query_only = ON;")
                    .map_err(StoreError::from)?;
                conn
            }
        };
        let result = work(&mut conn);
        let mut pool = self.pool.lock().expect("reader pool lock");
        if pool.len() < 8 {
            pool.push(conn);
        }
        result
    }
}

/// Rows one replay page reads at most: bounds its time for an agent that sees few of a
/// room's events, as `max_bytes` bounds its memory.
const REPLAY_PAGE_ROWS: usize = 4096;

fn head_of(tx: &rusqlite::Transaction<'_>, stream: &StreamKey) -> Result<u64, StoreError> {
    let seq: Option<i64> = tx
        .prepare_cached("SELECT MAX(seq) FROM events WHERE stream = ?1")?
        .query_row([stream.storage_key()], |row| row.get(0))?;
    Ok(seq.unwrap_or(0) as u64)
}

impl ReadStore for SqliteReader {
    fn audit_head(&self) -> Result<Option<(u64, String)>, StoreError> {
        let head = self.with_connection(|conn| {
            let head = conn
                .prepare_cached("SELECT n, hash FROM audit ORDER BY n DESC LIMIT 1")
                .map_err(StoreError::from)?
                .query_row([], |row| {
                    Ok((row.get::<_, i64>(0)? as u64, row.get::<_, String>(1)?))
                })
                .optional()
                .map_err(StoreError::from)?;
            Ok(head.unwrap_or_else(|| (0, crate::audit::GENESIS.to_owned())))
        });
        match head {
            Ok(head) => Ok(Some(head)),
            Err(ReadError::Store(error)) => Err(error),
            Err(other) => Err(StoreError::Corrupt {
                table: "audit",
                detail: other.to_string(),
            }),
        }
    }

    fn directory(
        &self,
        query: &DirectoryQuery,
    ) -> Result<Vec<roundtable_protocol::model::DirectoryEntry>, StoreError> {
        use roundtable_protocol::model::{ContactRelation, DirectoryEntry};
        let result = self.with_connection(|conn| {
            let tx = conn.transaction().map_err(StoreError::from)?;
            let viewer_owner: Option<String> = tx
                .prepare_cached("SELECT coalesce(owner, id) FROM principals WHERE id = ?1")
                .and_then(|mut statement| {
                    statement
                        .query_row([&query.viewer], |row| row.get(0))
                        .optional()
                })
                .map_err(StoreError::from)?;
            let Some(viewer_owner) = viewer_owner else {
                return Ok(Vec::new());
            };
            let mut pending_out = std::collections::HashSet::new();
            let mut pending_in = std::collections::HashSet::new();
            {
                let mut statement = tx
                    .prepare_cached(
                        "SELECT sender, target FROM contact_requests WHERE state = 'pending' \
                         AND created_ms > ?2 AND (sender = ?1 OR target = ?1)",
                    )
                    .map_err(StoreError::from)?;
                let lifetime = crate::engine::REQUEST_LIFETIME_MS;
                let mut rows = statement
                    .query(params![query.viewer, query.now_ms - lifetime])
                    .map_err(StoreError::from)?;
                while let Some(row) = rows.next().map_err(StoreError::from)? {
                    let sender: String = row.get(0).map_err(StoreError::from)?;
                    let target: String = row.get(1).map_err(StoreError::from)?;
                    if sender == query.viewer {
                        pending_out.insert(target);
                    } else {
                        pending_in.insert(sender);
                    }
                }
            }
            let contact = "EXISTS (SELECT 1 FROM contacts WHERE (a = ?1 AND b = {x}) \
                           OR (a = {x} AND b = ?1))";
            let sql = format!(
                "SELECT id, kind, handle, name, owner, description, card, \
                 coalesce(owner, id) = ?2, {is_contact} \
                 FROM principals WHERE id != ?1 AND (coalesce(owner, id) = ?2 \
                 OR discoverable = 'public' OR (discoverable = 'contacts' AND ({is_contact} \
                 OR {owner_is_contact}))) ORDER BY handle",
                is_contact = contact.replace("{x}", "id"),
                owner_is_contact = contact.replace("{x}", "coalesce(owner, id)"),
            );
            let mut statement = tx.prepare_cached(&sql).map_err(StoreError::from)?;
            let mut rows = statement
                .query(params![query.viewer, viewer_owner])
                .map_err(StoreError::from)?;
            let mut entries = Vec::new();
            while entries.len() < query.limit {
                let Some(row) = rows.next().map_err(StoreError::from)? else {
                    break;
                };
                let handle: String = row.get(2).map_err(StoreError::from)?;
                let name: String = row.get(3).map_err(StoreError::from)?;
                let description: Option<String> = row.get(5).map_err(StoreError::from)?;
                if let Some(wanted) = &query.query
                    && !handle.contains(wanted.as_str())
                    && !name.to_lowercase().contains(wanted.as_str())
                    && !description
                        .as_deref()
                        .is_some_and(|d| d.to_lowercase().contains(wanted.as_str()))
                {
                    continue;
                }
                let id: String = row.get(0).map_err(StoreError::from)?;
                let kin: bool = row.get(7).map_err(StoreError::from)?;
                let is_contact: bool = row.get(8).map_err(StoreError::from)?;
                let contact = if kin {
                    ContactRelation::Kin
                } else if is_contact {
                    ContactRelation::Accepted
                } else if pending_out.contains(&id) {
                    ContactRelation::PendingOut
                } else if pending_in.contains(&id) {
                    ContactRelation::PendingIn
                } else {
                    ContactRelation::None
                };
                let card: Option<String> = row.get(6).map_err(StoreError::from)?;
                entries.push(DirectoryEntry {
                    kind: kind_from(&row.get::<_, String>(1).map_err(StoreError::from)?)?,
                    owner: row.get(4).map_err(StoreError::from)?,
                    card: card.and_then(|card| serde_json::from_str(&card).ok()),
                    id,
                    handle,
                    name,
                    description,
                    contact,
                });
            }
            Ok(entries)
        });
        result.map_err(|error| match error {
            ReadError::Store(error) => error,
            other => StoreError::Corrupt {
                table: "principals",
                detail: other.to_string(),
            },
        })
    }

    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, ReadError> {
        self.with_connection(|conn| {
            let tx = conn.transaction().map_err(StoreError::from)?;
            let visible: Vec<String> = tx
                .prepare_cached("SELECT id FROM principals WHERE id = ?1 OR owner = ?1")
                .and_then(|mut statement| {
                    statement
                        .query_map([&query.viewer], |row| row.get(0))?
                        .collect()
                })
                .map_err(StoreError::from)?;
            let principals: Vec<String> = match &query.principal {
                Some(principal) if visible.contains(principal) => vec![principal.clone()],
                Some(_) => return Err(ReadError::NotFound),
                None => visible,
            };
            let placeholders = vec!["?"; principals.len()].join(", ");
            let sql = format!(
                "SELECT {AUDIT_COLUMNS} FROM audit WHERE principal IN ({placeholders}) AND ts_ms >= ? ORDER BY n LIMIT ?"
            );
            let mut statement = tx.prepare(&sql).map_err(StoreError::from)?;
            let mut values: Vec<rusqlite::types::Value> = principals
                .into_iter()
                .map(rusqlite::types::Value::Text)
                .collect();
            values.push(rusqlite::types::Value::Integer(query.since_ms.unwrap_or(i64::MIN)));
            values.push(rusqlite::types::Value::Integer(i64::from(query.limit)));
            let entries = statement
                .query_map(rusqlite::params_from_iter(values), audit_from_row)
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(StoreError::from)?;
            Ok(entries)
        })
    }

    fn sync_plan(
        &self,
        principal: &str,
        cursors: &dyn Fn(&StreamKey) -> u64,
        replay_max: u64,
    ) -> Result<SyncPlan, StoreError> {
        let result = self.with_connection(|conn| {
            let tx = conn.transaction().map_err(StoreError::from)?;
            let rooms: Vec<(String, String)> = tx
                .prepare_cached("SELECT room, routing FROM members WHERE principal = ?1")
                .and_then(|mut statement| {
                    statement
                        .query_map([principal], |row| Ok((row.get(0)?, row.get(1)?)))?
                        .collect()
                })
                .map_err(StoreError::from)?;
            let mut plan = SyncPlan::default();
            let streams = rooms
                .into_iter()
                .map(|(room, routing)| {
                    (
                        StreamKey::Room(room),
                        Routing::parse(&routing).unwrap_or_default(),
                    )
                })
                .chain(std::iter::once((
                    StreamKey::Inbox(principal.to_owned()),
                    Routing::All,
                )));
            for (stream, routing) in streams {
                let head = head_of(&tx, &stream)?;
                let mut after = cursors(&stream).min(head);
                let mut gap = None;
                if matches!(stream, StreamKey::Room(_)) && head - after > replay_max {
                    let start = head - replay_max;
                    gap = Some((after + 1, start));
                    after = start;
                }
                plan.streams.push(StreamPlan {
                    stream,
                    routing,
                    head,
                    gap,
                    after,
                });
            }
            let mut markers = tx
                .prepare_cached(
                    "SELECT stream, max(seq) FROM acks WHERE principal = ?1 GROUP BY stream",
                )
                .map_err(StoreError::from)?;
            let mut rows = markers.query([principal]).map_err(StoreError::from)?;
            while let Some(row) = rows.next().map_err(StoreError::from)? {
                let key: String = row.get(0).map_err(StoreError::from)?;
                let seq: i64 = row.get(1).map_err(StoreError::from)?;
                let stream = StreamKey::from_storage_key(&key);
                if plan.streams.iter().any(|planned| planned.stream == stream) {
                    plan.read_markers.push((stream, seq as u64));
                }
            }
            drop(rows);
            drop(markers);
            Ok(plan)
        });
        result.map_err(|error| match error {
            ReadError::Store(error) => error,
            other => StoreError::Corrupt {
                table: "members",
                detail: other.to_string(),
            },
        })
    }

    fn replay_page(
        &self,
        principal: &str,
        is_agent: bool,
        plan: &[StreamPlan],
        from: ReplayPosition,
        max_bytes: usize,
    ) -> Result<ReplayPage, StoreError> {
        let result = self.with_connection(|conn| {
            let tx = conn.transaction().map_err(StoreError::from)?;
            let mut page = ReplayPage::default();
            let mut bytes = 0;
            let mut rows_read = 0;
            let mut position = from;
            while let Some(planned) = plan.get(position.stream) {
                if position.after >= planned.head {
                    position.stream += 1;
                    if let Some(next) = plan.get(position.stream) {
                        position.after = next.after;
                    }
                    continue;
                }
                if bytes >= max_bytes || rows_read >= REPLAY_PAGE_ROWS {
                    page.next = Some(position);
                    return Ok(page);
                }
                let mut statement = tx
                    .prepare_cached(&format!(
                        "SELECT {EVENT_COLUMNS} FROM events WHERE stream = ?1 AND seq > ?2 \
                         AND seq <= ?3 ORDER BY seq LIMIT ?4"
                    ))
                    .map_err(StoreError::from)?;
                let mut rows = statement
                    .query(params![
                        planned.stream.storage_key(),
                        position.after as i64,
                        planned.head as i64,
                        (REPLAY_PAGE_ROWS - rows_read) as i64
                    ])
                    .map_err(StoreError::from)?;
                let mut exhausted = true;
                while let Some(row) = rows.next().map_err(StoreError::from)? {
                    let event = event_from_row(row).map_err(StoreError::from)?;
                    rows_read += 1;
                    position.after = event.seq;
                    if !is_agent || visibility::agent_sees(&event, principal, planned.routing) {
                        bytes += event.body.len();
                        page.events.push((position.stream, event));
                    }
                    if bytes >= max_bytes || rows_read >= REPLAY_PAGE_ROWS {
                        exhausted = false;
                        break;
                    }
                }
                if exhausted {
                    // Fewer rows than asked: nothing more up to the head.
                    position.after = planned.head;
                }
            }
            Ok(page)
        });
        result.map_err(|error| match error {
            ReadError::Store(error) => error,
            other => StoreError::Corrupt {
                table: "events",
                detail: other.to_string(),
            },
        })
    }

    fn history(
        &self,
        principal: &str,
        is_agent: bool,
        room: &str,
        range: HistoryRange,
    ) -> Result<HistoryPage, ReadError> {
        self.with_connection(|conn| {
            let tx = conn.transaction().map_err(StoreError::from)?;
            let exists: bool = tx
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM rooms WHERE id = ?1)")
                .and_then(|mut statement| statement.query_row([room], |row| row.get(0)))
                .map_err(StoreError::from)?;
            if !exists {
                return Err(ReadError::NotFound);
            }
            let routing: Option<String> = tx
                .prepare_cached("SELECT routing FROM members WHERE room = ?1 AND principal = ?2")
                .and_then(|mut statement| {
                    statement
                        .query_row([room, principal], |row| row.get(0))
                        .optional()
                })
                .map_err(StoreError::from)?;
            let Some(routing) = routing else {
                return Err(ReadError::NotMember);
            };
            let routing = Routing::parse(&routing).unwrap_or_default();
            let limit = range.limit as usize;
            let (sql, bound, ascending) = match (range.after, range.before) {
                (Some(after), before) => (
                    format!(
                        "SELECT {EVENT_COLUMNS} FROM events WHERE stream = ?1 AND seq > ?2 AND seq < ?3 ORDER BY seq ASC"
                    ),
                    (after, before.unwrap_or(i64::MAX as u64)),
                    true,
                ),
                (None, before) => (
                    format!(
                        "SELECT {EVENT_COLUMNS} FROM events WHERE stream = ?1 AND seq > ?2 AND seq < ?3 ORDER BY seq DESC"
                    ),
                    (0, before.unwrap_or(i64::MAX as u64)),
                    false,
                ),
            };
            let mut statement = tx.prepare_cached(&sql).map_err(StoreError::from)?;
            let mut rows = statement
                .query(params![
                    room,
                    bound.0.min(i64::MAX as u64) as i64,
                    bound.1.min(i64::MAX as u64) as i64
                ])
                .map_err(StoreError::from)?;
            let mut page = HistoryPage::default();
            let mut bytes = 0;
            while page.events.len() < limit {
                let Some(row) = rows.next().map_err(StoreError::from)? else {
                    break;
                };
                let event = event_from_row(row).map_err(StoreError::from)?;
                if !is_agent || visibility::agent_sees(&event, principal, routing) {
                    if !page.events.is_empty() && bytes + event.body.len() > range.max_bytes {
                        page.more = true;
                        break;
                    }
                    bytes += event.body.len();
                    page.events.push(event);
                }
            }
            if !ascending {
                page.events.reverse();
            }
            Ok(page)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flusher_relaxes_commits_and_syncs_the_wal_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.sqlite3");
        let (mut store, _reader) = open(&path, &mut IdSource::seeded(4), 1).unwrap();
        let synchronous = |store: &SqliteStore| -> i64 {
            store
                .conn
                .query_row("PRAGMA synchronous", [], |row| row.get(0))
                .unwrap()
        };
        assert_eq!(synchronous(&store), 2, "FULL until the flusher takes over");
        let mut flush = store.flusher().unwrap();
        assert_eq!(synchronous(&store), 1, "NORMAL: the flusher syncs");
        flush.flush().unwrap();
        #[cfg(target_os = "linux")]
        {
            let wal = std::fs::canonicalize(format!("{}-wal", path.display())).unwrap();
            let open_files: Vec<_> = std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
                .collect();
            assert!(
                open_files.contains(&wal),
                "the flush holds the WAL file open: {open_files:?}"
            );
        }
    }

    #[test]
    fn a_schema_2_database_keeps_its_client_keys_after_the_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.sqlite3");
        {
            let mut conn = Connection::open(&path).unwrap();
            roundtable_sqlite::migrate(&mut conn, &MIGRATIONS[..2], 1).unwrap();
            conn.execute_batch(
                "INSERT INTO principals (id, kind, handle, name, discoverable, created_ms)
                     VALUES ('u', 'user', 'u', 'U', 'contacts', 1);
                 INSERT INTO rooms (id, creator, created_ms) VALUES ('r', 'u', 1);
                 INSERT INTO events (stream, seq, id, ts_ms, sender, kind, body, client_key, pair)
                     VALUES ('r', 1, 'e1', 5, 'u', 'message', '{}', 'key-before-upgrade', 0),
                            ('r', 2, 'e2', 6, 'u', 'room_updated', '{}', NULL, 0);",
            )
            .unwrap();
        }
        let (mut store, _reader) = open(&path, &mut IdSource::seeded(4), 10).unwrap();
        let index: i64 = store
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'events_client_key'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(index, 0, "migration 3 drops the unique index");
        let keys = store.load(10).unwrap().sent_keys;
        assert_eq!(
            keys,
            vec![SentKeyRecord {
                sender: "u".into(),
                client_key: "key-before-upgrade".into(),
                room: "r".into(),
                seq: 1,
                ts_ms: 5,
            }]
        );
    }

    #[test]
    fn a_schema_3_database_keeps_its_invites_usable_after_the_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.sqlite3");
        {
            let mut conn = Connection::open(&path).unwrap();
            roundtable_sqlite::migrate(&mut conn, &MIGRATIONS[..3], 1).unwrap();
            conn.execute(
                "INSERT INTO principals (id, kind, handle, name, discoverable, created_ms)
                     VALUES ('u', 'user', 'u', 'U', 'contacts', 1)",
                [],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO invites (id, code_hash, creator, max_uses, uses, expires_ms, created_ms)
                     VALUES ('i_1', ?1, 'u', 2, 1, 900, 5)",
                [&[3u8; 32][..]],
            )
            .unwrap();
        }
        let (mut store, _reader) = open(&path, &mut IdSource::seeded(4), 10).unwrap();
        let invites = store.load(10).unwrap().invites;
        assert_eq!(
            invites,
            vec![InviteRecord {
                id: "i_1".into(),
                code_hash: TokenHash([3; 32]),
                creator: "u".into(),
                room: None,
                max_uses: 2,
                uses: 1,
                expires_ms: 900,
                created_ms: 5,
                revoked_ms: None,
            }],
            "an invite from before withdrawals is not withdrawn"
        );
    }

    #[test]
    fn a_schema_4_audit_log_still_verifies_after_the_upgrade_and_extends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.sqlite3");
        let first = crate::audit::next_entry(
            &(0, crate::audit::GENESIS.to_owned()),
            5,
            "p_dana",
            "room_create",
            Some("r_1".into()),
            None,
            None,
        );
        {
            let mut conn = Connection::open(&path).unwrap();
            roundtable_sqlite::migrate(&mut conn, &MIGRATIONS[..4], 1).unwrap();
            conn.execute(
                "INSERT INTO audit (n, ts_ms, principal, action, target, result, code, hash)
                     VALUES (1, 5, 'p_dana', 'room_create', 'r_1', 'ok', NULL, ?1)",
                [&first.hash],
            )
            .unwrap();
        }
        let (mut store, reader) = open(&path, &mut IdSource::seeded(4), 10).unwrap();
        let head = store.load(10).unwrap().audit_head;
        assert_eq!(head, (1, first.hash.clone()));
        let folded = crate::audit::next_entry(
            &head,
            6,
            "p_eve",
            "send",
            Some("r_2".into()),
            Some("not_member"),
            Some(12),
        );
        let mut tx = store.transaction().unwrap();
        tx.append_audit(&folded).unwrap();
        tx.commit().unwrap();
        assert_eq!(reader.audit_head().unwrap(), Some((2, folded.hash.clone())));
        let mut check = crate::audit::ChainCheck::expecting(1, &first.hash);
        read_audit_log(&path, |entry| check.feed(&entry)).unwrap();
        assert_eq!(check.finish(), Ok((2, folded.hash.clone())));
        let mut entries = Vec::new();
        read_audit_log(&path, |entry| {
            entries.push(entry);
            true
        })
        .unwrap();
        assert_eq!(entries[0].count, None);
        assert_eq!(entries[1].count, Some(12));
    }

    #[test]
    fn an_in_memory_database_has_no_flusher() {
        let mut store = SqliteStore {
            conn: Connection::open_in_memory().unwrap(),
        };
        assert!(store.flusher().is_err());
    }
}
