//! Durable storage, behind traits so PostgreSQL can replace the embedded SQLite without
//! touching the protocol code.
//!
//! The split follows how the hub uses storage:
//! - [`Store`] belongs to the single writer thread. It loads the whole [`Snapshot`] the
//!   command logic keeps in memory, and opens [`WriteTx`]s. One transaction carries a whole
//!   batch of commands (group commit); nothing is visible to readers before `commit`
//!   returns. `commit` itself may return before the data is durable: the
//!   [`Flush`] from [`Store::flusher`] makes it so, and the hub lets nothing out before that.
//! - [`ReadStore`] serves many readers at once from committed data only: the directory,
//!   the audit log, and the snapshots ([`ReadTx`]) `sync` and `history` are read from, whose
//!   policy is written once, above every backend, in [`crate::reads`].
//!
//! `conformance` holds the suite every backend must pass.

pub mod postgres;
pub mod sqlite;

mod rows;

#[cfg(test)]
mod conformance;

pub use roundtable_engine::store::{Snapshot, WriteError, WriteTx};

use roundtable_protocol::model::{PrincipalKind, Routing};

use roundtable_engine::records::{
    AuditRecord, EventRecord, RemoteCallRecord, RemoteThreadRecord, RequestRecord, StreamKey,
};

/// A storage failure. The hub answers the affected commands with `internal`, reloads its
/// memory from the store and goes on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot open the data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Migration(#[from] roundtable_sqlite::MigrationError),
    #[error(transparent)]
    Postgres(#[from] postgres::PostgresError),
    #[error("corrupt record in {table}: {detail}")]
    Corrupt { table: &'static str, detail: String },
    /// The hub failed before what was read was durable: it is not answered.
    #[error("the hub stopped before this read could be answered")]
    Stopped,
    /// A failure of another kind a store raised under a write.
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

impl From<WriteError> for StoreError {
    /// A write's failure, back from the engine as the store raised it: the store's own
    /// error, or its database driver's, so that [`StoreError::refuses_value`] can tell.
    fn from(error: WriteError) -> StoreError {
        let error = match error.downcast::<StoreError>() {
            Ok(error) => return error,
            Err(error) => error,
        };
        let error = match error.downcast::<rusqlite::Error>() {
            Ok(error) => return StoreError::Sqlite(error),
            Err(error) => error,
        };
        match error.downcast::<postgres::PostgresError>() {
            Ok(error) => StoreError::Postgres(error),
            Err(error) => StoreError::Backend(error.into_inner()),
        }
    }
}

impl StoreError {
    /// Whether the store refused a value it was given (a character PostgreSQL's `text`
    /// cannot hold, a string or number too big for it), rather than failing by itself (a
    /// connection lost, a disk full) or finding the hub's memory out of step with it (a
    /// constraint: a bug, answered `internal` like the rest): the command that wrote it
    /// fails alone, and trying it again as it is would fail again.
    pub fn refuses_value(&self) -> bool {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(error, _)) => {
                error.code == rusqlite::ErrorCode::TooBig
            }
            StoreError::Sqlite(rusqlite::Error::ToSqlConversionFailure(_)) => true,
            StoreError::Postgres(error) => error.refuses_value(),
            _ => false,
        }
    }
}

/// A store opened: the writer's half and the readers'.
pub type Opened = (Box<dyn Store>, std::sync::Arc<dyn ReadStore>);

/// Opens the store `config` names (creating its tables if needed): the writer's store and
/// the readers. `ids` mints the hub id and epoch of a new one.
pub fn open(
    config: &crate::HubConfig,
    ids: &mut roundtable_engine::ids::IdSource,
    now_ms: i64,
) -> Result<Opened, StoreError> {
    Ok(match &config.store {
        crate::config::StoreLocation::DataDir if config.node.is_some() => {
            return Err(StoreError::Postgres(
                postgres::PostgresError::ClusterNeedsPostgres,
            ));
        }
        crate::config::StoreLocation::DataDir => {
            let (store, reader) = sqlite::open(&config.database_path(), ids, now_ms)?;
            (Box::new(store), std::sync::Arc::new(reader))
        }
        crate::config::StoreLocation::Postgres(url) => {
            let (store, reader) = postgres::open_as(url, config.node.as_deref(), ids, now_ms)?;
            (Box::new(store), std::sync::Arc::new(reader))
        }
    })
}

/// Calls `visit` on each entry of the audit log of the store `config` names, ascending,
/// until it returns false. Reads only: safe while the hub runs.
pub fn read_audit_log(
    config: &crate::HubConfig,
    visit: impl FnMut(AuditRecord) -> bool,
) -> Result<(), StoreError> {
    match &config.store {
        crate::config::StoreLocation::DataDir => {
            sqlite::read_audit_log(&config.database_path(), visit)
        }
        crate::config::StoreLocation::Postgres(url) => postgres::read_audit_log(url, visit),
    }
}

/// How a credential's scheme is stored.
pub(crate) fn credential_scheme(
    scheme: roundtable_protocol::client::RemoteCredentialScheme,
) -> &'static str {
    match scheme {
        roundtable_protocol::client::RemoteCredentialScheme::Bearer => "bearer",
        roundtable_protocol::client::RemoteCredentialScheme::ApiKey => "api_key",
    }
}

/// A stored credential's scheme.
pub(crate) fn credential_scheme_from(
    text: &str,
) -> Result<roundtable_protocol::client::RemoteCredentialScheme, StoreError> {
    match text {
        "bearer" => Ok(roundtable_protocol::client::RemoteCredentialScheme::Bearer),
        "api_key" => Ok(roundtable_protocol::client::RemoteCredentialScheme::ApiKey),
        other => Err(StoreError::Corrupt {
            table: "remote_credentials",
            detail: format!("scheme {other:?}"),
        }),
    }
}

/// The writer's handle on durable storage.
pub trait Store: Send {
    /// Reads everything the command logic keeps in memory; `now_ms` dates the retention of
    /// the `client_key`s and what has expired (invites, pings).
    fn load(&mut self, now_ms: i64) -> Result<Snapshot, StoreError>;

    /// Opens a transaction; dropping it without `commit` rolls it back.
    fn transaction(&mut self) -> Result<Box<dyn WriteTx + '_>, StoreError>;

    /// Hands durability to the returned [`Flush`]: from now on `commit` may return before
    /// its data is on disk, and each `Flush::flush` makes every commit returned before it
    /// durable. The writer calls it once, before its first batch; a backend whose commits
    /// are durable by themselves returns a flush that does nothing.
    fn flusher(&mut self) -> Result<Box<dyn Flush>, StoreError>;

    /// In a cluster: waits, at most `within`, until every other live process has fanned
    /// out the batch at `position` (a revocation's, so its connections everywhere are
    /// closed before its `ok`). Returns at once for a store one hub writes.
    fn wait_for_peers(&mut self, _position: u64, _within: std::time::Duration) {}
}

/// Makes every commit that has returned durable (see [`Store::flusher`]).
pub trait Flush: Send {
    fn flush(&mut self) -> std::io::Result<()>;
}

/// The seqs of a stream strictly between `after` and `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqRange {
    pub after: u64,
    pub before: u64,
}

impl SeqRange {
    /// The seqs strictly between `after` and `before`.
    pub fn between(after: u64, before: u64) -> SeqRange {
        SeqRange { after, before }
    }

    /// The seqs after `after`, up to `head` included.
    pub fn after_through(after: u64, head: u64) -> SeqRange {
        SeqRange {
            after,
            before: head.saturating_add(1),
        }
    }
}

/// The order a stream's events are read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventOrder {
    Ascending,
    Descending,
}

/// A room a principal is a member of, as of a read's snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub room: String,
    pub routing: Routing,
    /// The room's last seq (0: no event yet).
    pub head: u64,
}

/// One read-only snapshot of committed data: the primitives the hub's reads
/// ([`crate::reads`]) are written over, the same for every backend. They decide nothing of
/// what a reader may see: that policy is `reads`'.
pub trait ReadTx {
    /// The rooms `principal` is a member of, with its routing in each and the room's head.
    fn memberships(&mut self, principal: &str) -> Result<Vec<Membership>, StoreError>;
    /// The last seq of `stream` (0: no event yet).
    fn head(&mut self, stream: &StreamKey) -> Result<u64, StoreError>;
    /// The highest seq any device of `principal` acknowledged, per stream.
    fn read_markers(&mut self, principal: &str) -> Result<Vec<(StreamKey, u64)>, StoreError>;
    fn room_exists(&mut self, room: &str) -> Result<bool, StoreError>;
    /// `principal`'s routing in `room`; `None` when it is not a member.
    fn routing(&mut self, room: &str, principal: &str) -> Result<Option<Routing>, StoreError>;
    /// Calls `visit` on the events of `stream` in `seqs`, in `order`, at most `limit` of
    /// them, until it returns false. A backend fetches rows as they are visited, so a read
    /// that stops early has not fetched the rest.
    fn events(
        &mut self,
        stream: &StreamKey,
        seqs: SeqRange,
        order: EventOrder,
        limit: usize,
        visit: &mut dyn FnMut(EventRecord) -> bool,
    ) -> Result<(), StoreError>;
}

/// A read run in a snapshot ([`ReadStore::read`]).
pub type SnapshotRead<'a> = dyn FnMut(&mut dyn ReadTx) -> Result<(), ReadError> + 'a;

/// The keys that start with `prefix` are those from `prefix` (inclusive) to this bound
/// (exclusive): `prefix` with its last character moved on by one.
pub fn key_prefix_bound(prefix: &str) -> String {
    let mut bound: Vec<char> = prefix.chars().collect();
    match bound.pop() {
        Some(last) => {
            let next = char::from_u32(last as u32 + 1).unwrap_or(char::MAX);
            bound.push(next);
            bound.into_iter().collect()
        }
        None => char::MAX.to_string(),
    }
}

/// Why a read was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("unknown room")]
    NotFound,
    #[error("not a member of the room")]
    NotMember,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A read that can only fail in the store, as a store error (a refusal such a read never
/// makes would say the store is corrupt: `table`).
pub(crate) fn store_only<T>(
    result: Result<T, ReadError>,
    table: &'static str,
) -> Result<T, StoreError> {
    result.map_err(|error| match error {
        ReadError::Store(error) => error,
        other => StoreError::Corrupt {
            table,
            detail: other.to_string(),
        },
    })
}

/// What `audit` asks for.
#[derive(Debug, Clone)]
pub struct AuditQuery {
    /// The user asking; it sees entries of itself and its agents.
    pub viewer: String,
    /// Only this principal's entries (the viewer or one of its agents).
    pub principal: Option<String>,
    pub since_ms: Option<i64>,
    pub limit: u32,
}

/// What `directory` asks for.
#[derive(Debug, Clone)]
pub struct DirectoryQuery {
    /// Who looks: empty for an anonymous viewer, who sees public principals only.
    pub viewer: String,
    /// Exactly this handle (an agent card's lookup), the viewer itself included.
    pub handle: Option<String>,
    /// Agents only (the A2A registry).
    pub agents_only: bool,
    /// Lower case, trimmed, not empty; `None` lists everyone the viewer may see.
    pub query: Option<String>,
    pub limit: usize,
    /// Pending contact requests older than their lifetime at this time are not pending.
    pub now_ms: i64,
}

/// A principal as a backend's directory query finds it, before the search text and the
/// viewer's relation to it are applied ([`DirectoryFound::entry`], the same for every
/// backend).
#[derive(Debug)]
pub struct DirectoryFound {
    pub id: String,
    pub kind: PrincipalKind,
    pub handle: String,
    pub name: String,
    pub owner: Option<String>,
    pub description: Option<String>,
    /// The agent card, as JSON text.
    pub card: Option<String>,
    /// Same owner as the viewer.
    pub kin: bool,
    /// An accepted contact of the viewer.
    pub is_contact: bool,
}

impl DirectoryFound {
    /// The entry the viewer sees, or none when the search text matches neither its
    /// handle, its name nor its description. `pending_out` and `pending_in` are the
    /// principals with a pending contact request from and to the viewer.
    pub fn entry(
        self,
        query: &DirectoryQuery,
        pending_out: &std::collections::HashSet<String>,
        pending_in: &std::collections::HashSet<String>,
    ) -> Option<roundtable_protocol::model::DirectoryEntry> {
        use roundtable_protocol::model::{ContactRelation, DirectoryEntry};
        if let Some(wanted) = &query.query
            && !self.handle.contains(wanted.as_str())
            && !self.name.to_lowercase().contains(wanted.as_str())
            && !self
                .description
                .as_deref()
                .is_some_and(|d| d.to_lowercase().contains(wanted.as_str()))
        {
            return None;
        }
        let contact = if self.kin {
            ContactRelation::Kin
        } else if self.is_contact {
            ContactRelation::Accepted
        } else if pending_out.contains(&self.id) {
            ContactRelation::PendingOut
        } else if pending_in.contains(&self.id) {
            ContactRelation::PendingIn
        } else {
            ContactRelation::None
        };
        Some(DirectoryEntry {
            kind: self.kind,
            owner: self.owner,
            card: self.card.and_then(|card| serde_json::from_str(&card).ok()),
            id: self.id,
            handle: self.handle,
            name: self.name,
            description: self.description,
            contact,
        })
    }
}

/// Reads of committed data, safe to run from many threads at once.
pub trait ReadStore: Send + Sync {
    /// A cluster's process says how far it has fanned the shared batches out (its
    /// heartbeat too; not data, and not durable). Nothing for a store one hub writes.
    fn record_progress(
        &self,
        _node: &str,
        _dispatched: u64,
        _now_ms: i64,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// The batches every process of a cluster committed after the `after`th, ascending, at
    /// most `limit` (see [`roundtable_engine::replication`]); none for a store one hub writes.
    fn committed_after(
        &self,
        _after: u64,
        _limit: usize,
    ) -> Result<Vec<roundtable_engine::records::Committed>, StoreError> {
        Ok(Vec::new())
    }

    /// The audit log's last committed entry, `(n, hash)`; `(0, GENESIS)` while it is empty.
    /// `None` from a backend that cannot tell (test doubles).
    fn audit_head(&self) -> Result<Option<(u64, String)>, StoreError> {
        Ok(None)
    }

    /// The principals `viewer` may see (kin, public ones, and those whose `discoverable` is
    /// `contacts` when the viewer is a contact of them or of their owner), but the viewer
    /// itself, that match the query, ascending by handle, at most `limit`. An anonymous
    /// viewer (empty) sees public principals; an unknown one sees none. With a `handle`,
    /// only that principal, if the viewer may see it (itself included).
    fn directory(
        &self,
        query: &DirectoryQuery,
    ) -> Result<Vec<roundtable_protocol::model::DirectoryEntry>, StoreError>;

    /// The contact request of `sender` that holds (or held) the message with `client_key`.
    fn request_holding(
        &self,
        sender: &str,
        client_key: &str,
    ) -> Result<Option<RequestRecord>, StoreError>;

    /// What `sender` stored with a `client_key` that starts with `prefix`, itself starting
    /// with `a2a:` (an A2A client's tasks: only those keys are indexed), newest first by
    /// time then id, older than `before` when given, at most `limit`.
    fn sent_with_key_prefix(
        &self,
        sender: &str,
        prefix: &str,
        before: Option<(i64, String)>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError>;

    /// Calls to remote agents due at `now_ms` whose turn it is (the earliest unsettled one
    /// of each room and remote agent), soonest first, at most `limit`.
    fn remote_calls_due(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<RemoteCallRecord>, StoreError>;

    /// The credential the hub presents to a remote agent.
    fn remote_credential(
        &self,
        principal: &str,
    ) -> Result<Option<roundtable_protocol::client::RemoteCredential>, StoreError>;

    /// A remote agent's conversation in a room.
    fn remote_thread(
        &self,
        room: &str,
        remote: &str,
    ) -> Result<Option<RemoteThreadRecord>, StoreError>;

    /// The read markers one device of `principal` acknowledged, per stream (a client that
    /// keeps no cache of its own, as an MCP client over HTTP, reads from them).
    fn device_read_markers(
        &self,
        principal: &str,
        device: &str,
    ) -> Result<Vec<(StreamKey, u64)>, StoreError>;

    /// Audit entries the viewer may see, ascending `n`. `ReadError::NotFound` when
    /// `principal` is neither the viewer nor one of its agents.
    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, ReadError>;

    /// Runs `read` in one read-only snapshot of committed data ([`crate::reads`]' reads).
    fn read(&self, read: &mut SnapshotRead<'_>) -> Result<(), ReadError>;

    /// Runs `read` as [`ReadStore::read`] does, for data already known to be durable (a
    /// replay's events up to the heads of its plan): a store that holds reads back until
    /// what they may see is durable does not hold this one.
    fn read_settled(&self, read: &mut SnapshotRead<'_>) -> Result<(), ReadError> {
        self.read(read)
    }
}
