//! Durable storage, behind traits so another backend (Postgres) can replace SQLite without
//! touching the protocol code.
//!
//! The split follows how the hub uses storage:
//! - [`Store`] belongs to the single writer thread. It loads the whole [`Snapshot`] the
//!   command logic keeps in memory, and opens [`WriteTx`]s. One transaction carries a whole
//!   batch of commands (group commit); nothing is visible to readers before `commit`
//!   returns. `commit` itself may return before the data is durable: the
//!   [`Flush`] from [`Store::flusher`] makes it so, and the hub lets nothing out before that.
//! - [`ReadStore`] serves many readers at once (`sync` replay, `history`) from committed
//!   data only.
//!
//! `conformance` holds the suite every backend must pass.

pub mod sqlite;

#[cfg(test)]
mod conformance;

use roundtable_protocol::client::ControlAction;
use roundtable_protocol::model::{AuditResult, Discoverable, PrincipalKind, RequestState, Routing};

use crate::ids::TokenHash;

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
    #[error("corrupt record in {table}: {detail}")]
    Corrupt { table: &'static str, detail: String },
}

/// A stream: a room's log or a principal's inbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamKey {
    Room(String),
    Inbox(String),
}

impl StreamKey {
    /// The key under which the stream's events are stored.
    pub fn storage_key(&self) -> std::borrow::Cow<'_, str> {
        match self {
            StreamKey::Room(room) => std::borrow::Cow::Borrowed(room),
            StreamKey::Inbox(principal) => std::borrow::Cow::Owned(format!("inbox:{principal}")),
        }
    }

    pub fn from_storage_key(key: &str) -> StreamKey {
        match key.strip_prefix("inbox:") {
            Some(principal) => StreamKey::Inbox(principal.to_owned()),
            None => StreamKey::Room(key.to_owned()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrincipalRecord {
    pub id: String,
    pub kind: PrincipalKind,
    pub handle: String,
    pub name: String,
    /// The owning user, for agents.
    pub owner: Option<String>,
    pub discoverable: Discoverable,
    pub description: Option<String>,
    /// The agent card, as JSON text.
    pub card: Option<String>,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TokenRecord {
    pub hash: TokenHash,
    pub principal: String,
    pub revoked: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoomRecord {
    pub id: String,
    pub title: Option<String>,
    pub topic: Option<String>,
    pub creator: String,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MemberRecord {
    pub room: String,
    pub principal: String,
    pub routing: Routing,
    pub joined_ms: i64,
}

/// An event as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub stream: StreamKey,
    pub seq: u64,
    pub id: String,
    pub ts_ms: i64,
    pub from: String,
    pub kind: String,
    /// The body, as JSON text.
    pub body: String,
    pub client_key: Option<String>,
    /// Principal ids a `message` mentions, for routing to agents.
    pub mentions: Vec<String>,
    /// Whether the room had exactly two members when the event was stored (agents then see
    /// every message).
    pub pair: bool,
}

/// A question for a human, and its answer once there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct PingRecord {
    pub room: String,
    pub ping: String,
    pub seq: u64,
    /// User ids who may answer; empty means any user member.
    pub to: Vec<String>,
    pub expires_ms: Option<i64>,
    /// The principal whose answer won.
    pub answered_by: Option<String>,
}

/// An accepted contact; `a < b`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContactRecord {
    pub a: String,
    pub b: String,
    pub since_ms: i64,
    /// The request that made it, if any (an invite makes contacts without one).
    pub request: Option<String>,
}

/// A contact request and its decision.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    pub id: String,
    pub from: String,
    pub to: String,
    pub state: RequestState,
    pub message: Option<String>,
    pub created_ms: i64,
    pub decided_ms: Option<i64>,
}

/// An invite code (only its hash is kept).
#[derive(Debug, Clone, PartialEq)]
pub struct InviteRecord {
    pub id: String,
    pub code_hash: TokenHash,
    pub creator: String,
    pub room: Option<String>,
    pub max_uses: u32,
    pub uses: u32,
    pub expires_ms: i64,
    pub created_ms: i64,
}

/// A pause or stop in force on an agent, in one room or (room `None`) everywhere.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlRecord {
    pub agent: String,
    pub room: Option<String>,
    /// `Pause` or `Stop`; a resume deletes the record.
    pub action: ControlAction,
    pub by: String,
    pub ts_ms: i64,
}

/// One audit log entry.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    pub n: u64,
    pub ts_ms: i64,
    /// The acting principal; empty when unknown (a bad token, a refused signup).
    pub principal: String,
    pub action: String,
    pub target: Option<String>,
    pub result: AuditResult,
    pub code: Option<String>,
    /// Hex SHA-256 chaining this entry to the previous one.
    pub hash: String,
}

/// Everything the writer keeps in memory, as loaded at start.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub hub_id: String,
    pub epoch: String,
    pub principals: Vec<PrincipalRecord>,
    pub tokens: Vec<TokenRecord>,
    pub rooms: Vec<RoomRecord>,
    pub members: Vec<MemberRecord>,
    /// The head `seq` of every stream that has events.
    pub heads: Vec<(StreamKey, u64)>,
    pub pings: Vec<PingRecord>,
    pub contacts: Vec<ContactRecord>,
    pub requests: Vec<RequestRecord>,
    pub invites: Vec<InviteRecord>,
    pub controls: Vec<ControlRecord>,
    /// The last audit entry's `n` and hash (0 and 64 zeros for an empty log).
    pub audit_head: (u64, String),
    /// The `client_key`s of room events younger than the retention
    /// ([`crate::sent_keys::RETENTION_MS`] before `now_ms` given to `load`).
    pub sent_keys: Vec<crate::sent_keys::SentKeyRecord>,
}

/// The writer's handle on durable storage.
pub trait Store: Send {
    /// Reads everything the command logic keeps in memory; `now_ms` dates the retention of
    /// the `client_key`s.
    fn load(&mut self, now_ms: i64) -> Result<Snapshot, StoreError>;

    /// Opens a transaction; dropping it without `commit` rolls it back.
    fn transaction(&mut self) -> Result<Box<dyn WriteTx + '_>, StoreError>;

    /// Hands durability to the returned [`Flush`]: from now on `commit` may return before
    /// its data is on disk, and each `Flush::flush` makes every commit returned before it
    /// durable. The writer calls it once, before its first batch; a backend whose commits
    /// are durable by themselves returns a flush that does nothing.
    fn flusher(&mut self) -> Result<Box<dyn Flush>, StoreError>;
}

/// Makes every commit that has returned durable (see [`Store::flusher`]).
pub trait Flush: Send {
    fn flush(&mut self) -> std::io::Result<()>;
}

/// One write transaction (a batch of commands).
pub trait WriteTx {
    fn insert_principal(&mut self, principal: &PrincipalRecord) -> Result<(), StoreError>;
    fn update_principal(&mut self, principal: &PrincipalRecord) -> Result<(), StoreError>;
    fn insert_token(&mut self, token: &TokenRecord, now_ms: i64) -> Result<(), StoreError>;
    /// Marks every live token of `principal` revoked.
    fn revoke_tokens(&mut self, principal: &str, now_ms: i64) -> Result<(), StoreError>;
    fn insert_room(&mut self, room: &RoomRecord) -> Result<(), StoreError>;
    fn update_room(&mut self, room: &RoomRecord) -> Result<(), StoreError>;
    fn upsert_member(&mut self, member: &MemberRecord) -> Result<(), StoreError>;
    fn delete_member(&mut self, room: &str, principal: &str) -> Result<(), StoreError>;
    fn append_event(&mut self, event: &EventRecord) -> Result<(), StoreError>;
    /// The event at `seq` of `stream`, if stored (also within this transaction).
    fn event_at(&mut self, stream: &StreamKey, seq: u64)
    -> Result<Option<EventRecord>, StoreError>;
    fn upsert_ping(&mut self, ping: &PingRecord) -> Result<(), StoreError>;
    fn set_ack(
        &mut self,
        principal: &str,
        device: &str,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<(), StoreError>;
    fn insert_contact(&mut self, contact: &ContactRecord) -> Result<(), StoreError>;
    fn upsert_request(&mut self, request: &RequestRecord) -> Result<(), StoreError>;
    fn upsert_invite(&mut self, invite: &InviteRecord) -> Result<(), StoreError>;
    fn set_control(&mut self, control: &ControlRecord) -> Result<(), StoreError>;
    /// Deletes the control of `agent` in `room` (`None`: the all-rooms one).
    fn delete_control(&mut self, agent: &str, room: Option<&str>) -> Result<(), StoreError>;
    fn append_audit(&mut self, entry: &AuditRecord) -> Result<(), StoreError>;
    /// Makes the transaction durable; returns only once it is.
    fn commit(self: Box<Self>) -> Result<(), StoreError>;
}

/// What `sync` needs to replay one principal's streams, read from one consistent snapshot.
#[derive(Debug, Default)]
pub struct SyncRead {
    /// Per readable stream: its head, the gap announced (if any) and the events to replay.
    pub streams: Vec<StreamReplay>,
    /// The principal's read markers on those streams: the highest seq any of its devices
    /// acknowledged.
    pub read_markers: Vec<(StreamKey, u64)>,
}

#[derive(Debug)]
pub struct StreamReplay {
    pub stream: StreamKey,
    pub head: u64,
    /// `(from, to)`, both inclusive.
    pub gap: Option<(u64, u64)>,
    /// Events after the cursor, already filtered by visibility, ascending.
    pub events: Vec<EventRecord>,
}

/// Where `sync` starts reading one stream.
#[derive(Debug, Clone)]
pub struct ReplayFrom {
    pub stream: StreamKey,
    pub after: u64,
}

/// What `history` asks for.
#[derive(Debug, Clone, Copy)]
pub struct HistoryRange {
    pub before: Option<u64>,
    pub after: Option<u64>,
    pub limit: u32,
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

/// Reads of committed data, safe to run from many threads at once.
pub trait ReadStore: Send + Sync {
    /// Audit entries the viewer may see, ascending `n`. `ReadError::NotFound` when
    /// `principal` is neither the viewer nor one of its agents.
    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, ReadError>;

    /// Reads everything `principal` may replay: each room it is a member of and its inbox,
    /// from `cursors` (missing streams start at 0), with rooms gapped past `replay_max`.
    fn sync_read(
        &self,
        principal: &str,
        is_agent: bool,
        cursors: &dyn Fn(&StreamKey) -> u64,
        replay_max: u64,
    ) -> Result<SyncRead, StoreError>;

    /// A page of a room's log as `principal` may see it.
    fn history(
        &self,
        principal: &str,
        is_agent: bool,
        room: &str,
        range: HistoryRange,
    ) -> Result<Vec<EventRecord>, ReadError>;
}
