//! The PostgreSQL backend, for teams that keep their hub's data in a database they already
//! run (and, with the bus, for several hub processes sharing it: `../shared/SCALEOUT.md`).
//!
//! Every commit is durable when `COMMIT` returns (`synchronous_commit` is on by default, and
//! the store refuses a server where it is off), so [`Store::flusher`] hands back a flush with
//! nothing to do. The writer keeps one connection; readers share a small pool. Both run
//! their I/O on a runtime of the store's own, so the synchronous store traits can be called
//! from the writer thread, from blocking tasks, or while the hub opens, and a slow database
//! never occupies the threads that serve WebSockets.
//!
//! Migrations are numbered SQL files embedded in the binary, applied in order, each in one
//! transaction under an advisory lock (hub processes starting together apply each once), and
//! checksummed like the SQLite ones.

use std::future::Future;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use roundtable_protocol::model::Routing;
use sha2::{Digest, Sha256};
use tokio_postgres::Row;

use super::{
    Flush, Snapshot, Store, StoreError, WriteError, WriteTx, credential_scheme,
    credential_scheme_from,
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
mod write;

pub use read::{PostgresReader, read_audit_log};
use rows::*;
use write::PostgresTx;

/// The embedded migrations, in order. Append only: never edit or remove one.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "hub", include_str!("migrations/0001_hub.sql")),
    (
        2,
        "shared_batches",
        include_str!("migrations/0002_shared_batches.sql"),
    ),
    (3, "nodes", include_str!("migrations/0003_nodes.sql")),
    (
        4,
        "audit_via",
        include_str!("migrations/0004_audit_via.sql"),
    ),
    (
        5,
        "held_messages",
        include_str!("migrations/0005_held_messages.sql"),
    ),
    (
        6,
        "a2a_task_keys",
        include_str!("migrations/0006_a2a_task_keys.sql"),
    ),
    (
        7,
        "remote_agents",
        include_str!("migrations/0007_remote_agents.sql"),
    ),
];

/// A process that has not said how far it is for this long counts as gone: nobody waits
/// for it.
const NODE_SILENCE_MS: i64 = 3_000;

/// The `pg_advisory_xact_lock` key every batch of a cluster's processes takes first
/// ("rtbatchs"): one batch at a time, in one order (see [`roundtable_engine::replication`]).
const BATCH_LOCK: i64 = 0x7274_6261_7463_6873;

/// How long shared batches are kept: a process that fell further behind reloads.
const SHARED_RETENTION_MS: i64 = 10 * 60 * 1000;

/// Any `pg_advisory_xact_lock` key the hub's migrations serialise on ("rtmigrat").
const MIGRATION_LOCK: i64 = 0x7274_6d69_6772_6174;

/// The `pg_advisory_lock` key the writing hub holds for as long as it runs ("rthubwrt"):
/// one hub writes a database, as one hub writes a data directory.
const WRITER_LOCK: i64 = 0x7274_6875_6277_7274;

/// Connections the readers (replay, history, directory, audit) share.
const READ_CONNECTIONS: usize = 8;

pub use crate::config::is_postgres_url;

/// A failure reaching or using PostgreSQL.
#[derive(Debug, thiserror::Error)]
pub enum PostgresError {
    #[error("PostgreSQL: {0}")]
    Database(#[from] tokio_postgres::Error),
    #[error("cannot get a PostgreSQL connection: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error(
        "the store address is not a PostgreSQL connection string ({0}); give \
         postgres://user@host:port/database, or postgres:///database?host=/socket/dir"
    )]
    Address(String),
    #[error(
        "the PostgreSQL server runs with synchronous_commit = {0}: a commit could be lost \
         after the hub acknowledged it; set synchronous_commit = on for the hub's database"
    )]
    NotDurable(String),
    #[error(
        "another hub (or `roundtable hub user add`) is writing this database; stop it \
         first, or give this one a database of its own (hubs of one cluster each take a \
         --node name)"
    )]
    InUse,
    #[error(
        "this hub fell behind the others of its cluster by more than the shared batches \
         kept; it reloads its state"
    )]
    Behind,
    #[error(
        "hub processes of a cluster share a PostgreSQL store: give --store postgres://… \
         with --node"
    )]
    ClusterNeedsPostgres,
    #[error("a shared batch is unreadable: {0}")]
    SharedBatch(String),
    #[error("the hub's store cannot start its PostgreSQL runtime: {0}")]
    Runtime(std::io::Error),
    #[error(
        "the store address answered no PostgreSQL connection within {0} s: check that its \
         host and port (or ?host=/socket/dir) are those of the PostgreSQL server"
    )]
    NoAnswer(u64),
}

impl PostgresError {
    /// Whether the server refused a value (SQLSTATE class 22, data exception: a NUL in
    /// `text`, a string or number out of its type's range), not a failure of its own.
    pub fn refuses_value(&self) -> bool {
        match self {
            PostgresError::Database(error) => error
                .code()
                .is_some_and(|state| state.code().starts_with("22")),
            _ => false,
        }
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> StoreError {
        StoreError::Postgres(PostgresError::Database(error))
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(error: deadpool_postgres::PoolError) -> StoreError {
        StoreError::Postgres(match error {
            deadpool_postgres::PoolError::Timeout(deadpool_postgres::TimeoutType::Create) => {
                PostgresError::NoAnswer(CONNECT_WAIT.as_secs())
            }
            error => PostgresError::Pool(error),
        })
    }
}

/// The runtime the store's connections live on, and how synchronous code waits on them.
pub(super) struct Io {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Io {
    fn new() -> Result<Io, PostgresError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("roundtable-postgres")
            .enable_all()
            .build()
            .map_err(PostgresError::Runtime)?;
        Ok(Io {
            runtime: Some(runtime),
        })
    }

    /// Runs `work` to completion on the calling thread, with the store's runtime as the one
    /// new connections and timers register with. Safe on any thread: the connections' own
    /// tasks run on the store's runtime, not on the caller's.
    pub(super) fn wait<F: Future>(&self, work: F) -> F::Output {
        let _runtime = self
            .runtime
            .as_ref()
            .expect("the runtime lives as long as the store")
            .enter();
        futures_executor::block_on(work)
    }
}

impl Drop for Io {
    fn drop(&mut self) {
        // Dropped wherever the last handle goes, maybe on an async thread, where a blocking
        // shutdown would panic.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The writer's connection.
pub struct PostgresStore {
    io: Arc<Io>,
    pool: Pool,
    client: Option<deadpool_postgres::Object>,
    /// This process's name in its cluster; `None`: the only hub writing the database.
    node: Option<String>,
    /// The last shared batch this process's memory includes.
    seen: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PostgresStore")
    }
}

/// TLS for connections over the network (rustls, the Mozilla roots), as the URL's
/// `sslmode` asks: `prefer` (the default) and `require` use it when the server offers it;
/// a Unix socket never does.
fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|error| StoreError::Postgres(PostgresError::Address(error.to_string())))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// How long a new connection may take, from the socket to the server's first "ready":
/// an address where something else listens (or a server that hangs) otherwise holds the
/// hub's start, or a reader, for ever.
const CONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn pool(config: &tokio_postgres::Config, size: usize) -> Result<Pool, StoreError> {
    pool_waiting(config, size, CONNECT_WAIT)
}

fn pool_waiting(
    config: &tokio_postgres::Config,
    size: usize,
    connect_wait: std::time::Duration,
) -> Result<Pool, StoreError> {
    let manager = Manager::from_config(
        config.clone(),
        tls()?,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .create_timeout(Some(connect_wait))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .map_err(|error| StoreError::Postgres(PostgresError::Address(error.to_string())))
}

/// Connects to the database at `url` (creating the hub's tables if needed): the writer's
/// store and a reader pool, for the only hub writing it. `ids` mints the hub id and epoch
/// of a new database.
pub fn open(
    url: &str,
    ids: &mut IdSource,
    now_ms: i64,
) -> Result<(PostgresStore, PostgresReader), StoreError> {
    open_as(url, None, ids, now_ms)
}

/// Connects as the process `node` of a cluster sharing the database at `url` (`None`: the
/// only hub writing it).
pub fn open_as(
    url: &str,
    node: Option<&str>,
    ids: &mut IdSource,
    now_ms: i64,
) -> Result<(PostgresStore, PostgresReader), StoreError> {
    let config: tokio_postgres::Config = url.parse().map_err(|error: tokio_postgres::Error| {
        StoreError::Postgres(PostgresError::Address(error.to_string()))
    })?;
    let io = Arc::new(Io::new().map_err(StoreError::Postgres)?);
    let writer_pool = pool(&config, 1)?;
    let mut client = io.wait(writer_pool.get())?;
    let synchronous: String = io
        .wait(client.query_one("SHOW synchronous_commit", &[]))?
        .try_get(0)?;
    if !matches!(synchronous.as_str(), "on" | "remote_write" | "remote_apply") {
        return Err(StoreError::Postgres(PostgresError::NotDurable(synchronous)));
    }
    io.wait(migrate(&mut client, now_ms))?;
    io.wait(hold_writer_lock(&client, node.is_some()))?;
    io.wait(client.execute(
        "INSERT INTO hub_meta (key, value) VALUES ('hub_id', $1), ('epoch', $2), ('created_ms', $3)
         ON CONFLICT (key) DO NOTHING",
        &[&ids.id("h"), &ids.id("ep"), &now_ms.to_string()],
    ))?;
    let reader = PostgresReader {
        io: io.clone(),
        pool: pool(&config, READ_CONNECTIONS)?,
    };
    Ok((
        PostgresStore {
            io,
            pool: writer_pool,
            client: Some(client),
            node: node.map(str::to_owned),
            seen: Default::default(),
        },
        reader,
    ))
}

fn checksum(sql: &str) -> String {
    Sha256::digest(sql.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Applies every embedded migration the database lacks, each in its own transaction under
/// an advisory lock; returns the versions this call applied.
pub(super) async fn migrate(
    client: &mut tokio_postgres::Client,
    now_ms: i64,
) -> Result<Vec<i64>, StoreError> {
    migrate_with(client, MIGRATIONS, now_ms).await
}

pub(super) async fn migrate_with(
    client: &mut tokio_postgres::Client,
    migrations: &[(i64, &str, &str)],
    now_ms: i64,
) -> Result<Vec<i64>, StoreError> {
    let known = migrations.last().map_or(0, |(version, _, _)| *version);
    let mut applied = Vec::new();
    for &(version, name, sql) in migrations {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version    bigint PRIMARY KEY,
                 name       text NOT NULL,
                 checksum   text NOT NULL,
                 applied_ms bigint NOT NULL
             )",
        )
        .await?;
        let done: Vec<(i64, String)> = tx
            .query(
                "SELECT version, checksum FROM schema_migrations ORDER BY version",
                &[],
            )
            .await?
            .into_iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()?;
        for (found, stored) in &done {
            match migrations.iter().find(|(known, _, _)| known == found) {
                None => {
                    return Err(StoreError::Migration(
                        roundtable_sqlite::MigrationError::NewerSchema {
                            found: *found,
                            known,
                        },
                    ));
                }
                Some((_, _, sql)) if checksum(sql) != *stored => {
                    return Err(StoreError::Migration(
                        roundtable_sqlite::MigrationError::Edited { version: *found },
                    ));
                }
                Some(_) => {}
            }
        }
        if done.iter().any(|(found, _)| *found == version) {
            continue;
        }
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_ms) VALUES ($1, $2, $3, $4)",
            &[&version, &name, &checksum(sql), &now_ms],
        )
        .await?;
        tx.commit().await?;
        applied.push(version);
    }
    Ok(applied)
}

/// Takes the writer's lock on this connection, for as long as the connection lives:
/// shared by the processes of a cluster, exclusive for a lone hub (and `user add`).
async fn hold_writer_lock(client: &tokio_postgres::Client, shared: bool) -> Result<(), StoreError> {
    let sql = if shared {
        "SELECT pg_try_advisory_lock_shared($1)"
    } else {
        "SELECT pg_try_advisory_lock($1)"
    };
    let held: bool = client.query_one(sql, &[&WRITER_LOCK]).await?.try_get(0)?;
    if held {
        Ok(())
    } else {
        Err(StoreError::Postgres(PostgresError::InUse))
    }
}

/// Nothing to do: a PostgreSQL commit is durable when it returns.
struct DurableAlready;

impl Flush for DurableAlready {
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl PostgresStore {
    /// The writer's connection, a new one if the last broke (a restarted server).
    fn client(&mut self) -> Result<&mut deadpool_postgres::Object, StoreError> {
        if self
            .client
            .as_ref()
            .is_some_and(|client| client.is_closed())
        {
            self.client = None;
        }
        if self.client.is_none() {
            // A new connection: the last one's lock went with it.
            let client = self.io.wait(self.pool.get())?;
            self.io
                .wait(hold_writer_lock(&client, self.node.is_some()))?;
            self.client = Some(client);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Let go of the lock now rather than when the server notices the closed socket, so
        // a hub restarted at once finds the database free.
        if let Some(client) = self.client.take()
            && !client.is_closed()
        {
            let unlock = if self.node.is_some() {
                "SELECT pg_advisory_unlock_shared($1)"
            } else {
                "SELECT pg_advisory_unlock($1)"
            };
            let _ = self.io.wait(client.execute(unlock, &[&WRITER_LOCK]));
        }
    }
}

impl Store for PostgresStore {
    fn load(&mut self, now_ms: i64) -> Result<Snapshot, StoreError> {
        let io = self.io.clone();
        let client = self.client()?;
        let snapshot = io.wait(load(client, now_ms))?;
        self.seen.store(
            snapshot.shared_position,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(snapshot)
    }

    fn transaction(&mut self) -> Result<Box<dyn WriteTx + '_>, StoreError> {
        let io = self.io.clone();
        let node = self.node.clone();
        let seen = self.seen.clone();
        let client = self.client()?;
        let tx = io.wait(client.transaction())?;
        let mut tx = PostgresTx::new(io, tx);
        if let Some(node) = node {
            tx.join_cluster(node, seen)?;
        }
        Ok(Box::new(tx))
    }

    fn flusher(&mut self) -> Result<Box<dyn Flush>, StoreError> {
        Ok(Box::new(DurableAlready))
    }

    fn wait_for_peers(&mut self, position: u64, within: std::time::Duration) {
        let Some(node) = self.node.clone() else {
            return;
        };
        let io = self.io.clone();
        let deadline = std::time::Instant::now() + within;
        let Ok(client) = self.client() else { return };
        loop {
            let behind = io.wait(client.query_one(
                "SELECT count(*) FROM nodes WHERE node <> $1 AND seen_ms > $2 AND dispatched < $3",
                &[
                    &node,
                    &(crate::unix_ms() - NODE_SILENCE_MS),
                    &signed(position),
                ],
            ));
            match behind.and_then(|row| row.try_get::<_, i64>(0)) {
                Ok(0) => return,
                Ok(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Ok(behind) => {
                    tracing::warn!(
                        behind,
                        "hub processes did not fan a revocation out within the wait; answering anyway"
                    );
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot see how far the other hub processes are");
                    return;
                }
            }
        }
    }
}

async fn load(client: &mut deadpool_postgres::Object, now_ms: i64) -> Result<Snapshot, StoreError> {
    // One snapshot of the whole database, as the writer starts from it.
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let meta = |rows: &[Row], key: &str| -> Result<String, StoreError> {
        for row in rows {
            if row.try_get::<_, &str>(0)? == key {
                return Ok(row.try_get(1)?);
            }
        }
        Err(StoreError::Corrupt {
            table: "hub_meta",
            detail: format!("{key} is missing"),
        })
    };
    let rows = tx.query("SELECT key, value FROM hub_meta", &[]).await?;
    let mut snapshot = Snapshot {
        hub_id: meta(&rows, "hub_id")?,
        epoch: meta(&rows, "epoch")?,
        ..Snapshot::default()
    };
    for row in tx
        .query(&format!("SELECT {PRINCIPAL_COLUMNS} FROM principals"), &[])
        .await?
    {
        snapshot.principals.push(principal_from(&row)?);
    }
    // Revoked tokens stay on record but not in memory: unknown and revoked answer alike.
    for row in tx
        .query(
            "SELECT hash, principal FROM tokens WHERE revoked_ms IS NULL",
            &[],
        )
        .await?
    {
        snapshot.tokens.push(TokenRecord {
            hash: hash_from(row.try_get(0)?, "tokens")?,
            principal: row.try_get(1)?,
            revoked: false,
        });
    }
    for row in tx
        .query(&format!("SELECT {ROOM_COLUMNS} FROM rooms"), &[])
        .await?
    {
        snapshot.rooms.push(room_from(&row)?);
    }
    for row in tx
        .query(&format!("SELECT {MEMBER_COLUMNS} FROM members"), &[])
        .await?
    {
        snapshot.members.push(member_from(&row)?);
    }
    for row in tx
        .query("SELECT stream, head FROM stream_heads", &[])
        .await?
    {
        let stream: &str = row.try_get(0)?;
        snapshot.heads.push((
            StreamKey::from_storage_key(stream),
            unsigned(row.try_get(1)?),
        ));
    }
    // The keys are in rooms only (a `send` targets a room).
    let cutoff = now_ms.saturating_sub(roundtable_engine::sent_keys::RETENTION_MS);
    for row in tx
        .query(
            "SELECT sender, client_key, stream, seq, ts_ms FROM events
             WHERE client_key IS NOT NULL AND ts_ms >= $1 AND stream NOT LIKE 'inbox:%'
             ORDER BY ts_ms, stream, seq",
            &[&cutoff],
        )
        .await?
    {
        snapshot.sent_keys.push(SentKeyRecord {
            sender: row.try_get(0)?,
            client_key: row.try_get(1)?,
            room: row.try_get(2)?,
            seq: unsigned(row.try_get(3)?),
            ts_ms: row.try_get(4)?,
        });
    }
    // Only pings that can still be answered; the rest are read when asked for.
    for row in tx
        .query(
            &format!(
                "SELECT {PING_COLUMNS} FROM pings
                 WHERE answered_by IS NULL AND (expires_ms IS NULL OR expires_ms > $1)"
            ),
            &[&now_ms],
        )
        .await?
    {
        snapshot.pings.push(ping_from(&row)?);
    }
    for row in tx
        .query(&format!("SELECT {CONTACT_COLUMNS} FROM contacts"), &[])
        .await?
    {
        snapshot.contacts.push(contact_from(&row)?);
    }
    // Only pending requests; final ones are read when asked for.
    for row in tx
        .query(
            &format!("SELECT {REQUEST_COLUMNS} FROM contact_requests WHERE state = 'pending'"),
            &[],
        )
        .await?
    {
        snapshot.requests.push(request_from(&row)?);
    }
    // Only invites that can still be redeemed; the others are read when named.
    for row in tx
        .query(
            &format!(
                "SELECT {INVITE_COLUMNS} FROM invites
                 WHERE revoked_ms IS NULL AND uses < max_uses AND expires_ms > $1"
            ),
            &[&now_ms],
        )
        .await?
    {
        snapshot.invites.push(invite_from(&row)?);
    }
    for row in tx
        .query(
            "SELECT agent, room, action, by_id, ts_ms, reason FROM controls",
            &[],
        )
        .await?
    {
        snapshot.controls.push(control_from(&row)?);
    }
    snapshot.shared_position = unsigned(
        tx.query_one("SELECT coalesce(max(n), 0) FROM shared_batches", &[])
            .await?
            .try_get(0)?,
    );
    snapshot.audit_head = tx
        .query_opt("SELECT n, hash FROM audit ORDER BY n DESC LIMIT 1", &[])
        .await?
        .map(|row| -> Result<_, StoreError> { Ok((unsigned(row.try_get(0)?), row.try_get(1)?)) })
        .transpose()?
        .unwrap_or_else(|| (0, roundtable_engine::audit::GENESIS.to_owned()));
    tx.commit().await?;
    Ok(snapshot)
}

// Rows to records: the column lists and decoders the writer and the readers share.

#[cfg(test)]
mod tests;
