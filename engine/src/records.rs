//! What the hub records: the rows of its store, as the command logic, the store and the
//! cluster's shared batches all speak of them.
//!
//! Why a module of its own: these types are data that every layer reads (the engine decides
//! on them, each store backend writes them, the audit chains them), so they sit below all
//! of those, and none of them has to import another's module to name a row.

use roundtable_protocol::CloseCode;
use roundtable_protocol::client::ControlAction;
use roundtable_protocol::model::{AuditResult, Discoverable, PrincipalKind, RequestState, Routing};
use serde::{Deserialize, Serialize};

use crate::ids::TokenHash;

/// The way a command reached the hub: every way runs the same command path and is audited
/// alike, and the entry says which it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// A WebSocket client (the protocol): not written in an entry.
    #[default]
    Ws,
    /// An A2A client, through `/a2a/…`.
    A2a,
    /// An MCP client, through `/mcp`.
    Mcp,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Ws => "ws",
            Via::A2a => "a2a",
            Via::Mcp => "mcp",
        }
    }

    /// What an entry stores: nothing for the WebSocket.
    pub fn recorded(self) -> Option<&'static str> {
        (self != Via::Ws).then_some(self.as_str())
    }

    /// Reads a stored value back; `None` (and anything unknown) is the WebSocket.
    pub fn parse(stored: Option<&str>) -> Via {
        match stored {
            Some("a2a") => Via::A2a,
            Some("mcp") => Via::Mcp,
            _ => Via::Ws,
        }
    }
}

/// A stream: a room's log or a principal's inbox.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
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

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// For an agent another A2A server runs: the address of its A2A card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

/// A call owed to a remote agent: the event at `(room, seq)` (a message mentioning it, or
/// an answer to its question) is to be sent to it. `next_ms` is when it may next be tried
/// (a claim pushes it on); `None` once it is settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteCallRecord {
    pub room: String,
    pub seq: u64,
    pub remote: String,
    pub created_ms: i64,
    pub attempts: u32,
    pub next_ms: Option<i64>,
}

/// What a remote agent's conversation in one room has reached: its `contextId`, and the
/// task that waits for input (with the ping that asks for it, who asked the remote, and the
/// message that did) while one does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RemoteThreadRecord {
    pub room: String,
    pub remote: String,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    pub ping: Option<String>,
    pub asker: Option<String>,
    pub mention: Option<String>,
}

/// A change to what the hub keeps for remote agents (see [`WriteTx::remote`](crate::store::WriteTx::remote)).
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteWrite<'a> {
    /// The credential presented to the remote agent, replaced whole.
    Credential {
        principal: &'a str,
        credential: &'a roundtable_protocol::client::RemoteCredential,
    },
    /// A call to make; nothing when one exists for the same event and remote.
    Call(&'a RemoteCallRecord),
    /// Claims a call that is due at `now_ms` and is the earliest unsettled one of its room
    /// and remote agent (so that a conversation goes one message at a time, in order, in
    /// every process): pushes `next_ms` to `until_ms` and counts an attempt, whose number is
    /// the claim's (0: not due, not its turn, settled or claimed by another).
    Claim {
        room: &'a str,
        seq: u64,
        remote: &'a str,
        now_ms: i64,
        until_ms: i64,
    },
    /// Settles a call (`next_ms` `None`) or sets when it is tried again (a renewed lease,
    /// a retry), while the claim numbered `attempt` is the latest: a lapsed claim's late
    /// renewal or settlement changes nothing.
    Settle {
        room: &'a str,
        seq: u64,
        remote: &'a str,
        attempt: u32,
        next_ms: Option<i64>,
    },
    /// Sets `next_ms` of a call due at `now_ms` and claimed by no one (a paused agent's,
    /// deferred; a stopped one's, settled).
    Defer {
        room: &'a str,
        seq: u64,
        remote: &'a str,
        now_ms: i64,
        next_ms: Option<i64>,
    },
    Thread(&'a RemoteThreadRecord),
    /// Forgets calls settled and made before `before_ms`.
    Prune {
        before_ms: i64,
    },
    /// Makes due now the calls of a remote agent (in `room`, or everywhere) that wait for
    /// their time and were never claimed (a paused agent's, resumed).
    Wake {
        remote: &'a str,
        room: Option<&'a str>,
        now_ms: i64,
    },
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TokenRecord {
    pub hash: TokenHash,
    pub principal: String,
    pub revoked: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RoomRecord {
    pub id: String,
    pub title: Option<String>,
    pub topic: Option<String>,
    pub creator: String,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MemberRecord {
    pub room: String,
    pub principal: String,
    pub routing: Routing,
    pub joined_ms: i64,
}

/// An event as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ContactRecord {
    pub a: String,
    pub b: String,
    pub since_ms: i64,
    /// The request that made it, if any (an invite makes contacts without one).
    pub request: Option<String>,
}

/// A contact request and its decision.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RequestRecord {
    pub id: String,
    pub from: String,
    pub to: String,
    pub state: RequestState,
    pub message: Option<String>,
    pub created_ms: i64,
    pub decided_ms: Option<i64>,
    /// A message an A2A client sent without consent, held with the request: delivered
    /// when it is accepted, its body deleted otherwise.
    #[serde(default)]
    pub held: Option<HeldMessage>,
}

/// A message held until its sender has consent (see [`RequestRecord::held`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HeldMessage {
    /// The `client_key` it is sent with once accepted (its task's key).
    pub client_key: String,
    /// The `message` body, as JSON text, while held; `None` once delivered or dropped.
    pub body: Option<String>,
}

/// An invite code (only its hash is kept).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InviteRecord {
    pub id: String,
    pub code_hash: TokenHash,
    pub creator: String,
    pub room: Option<String>,
    pub max_uses: u32,
    pub uses: u32,
    pub expires_ms: i64,
    pub created_ms: i64,
    /// When its creator withdrew it (`invite_revoke`); a withdrawn invite never redeems.
    pub revoked_ms: Option<i64>,
}

/// A pause or stop in force on an agent, in one room or (room `None`) everywhere.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ControlRecord {
    pub agent: String,
    pub room: Option<String>,
    /// `Pause` or `Stop`; a resume deletes the record.
    pub action: ControlAction,
    pub by: String,
    pub ts_ms: i64,
    /// Why, when the control said.
    pub reason: Option<String>,
}

/// A pending request expires after 14 days (the engine refuses it then, and the stores
/// read it as expired).
pub const REQUEST_LIFETIME_MS: i64 = 14 * 24 * 60 * 60 * 1000;

/// One audit log entry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuditRecord {
    pub n: u64,
    pub ts_ms: i64,
    /// The acting principal; empty when unknown (a bad token, a refused signup).
    pub principal: String,
    pub action: String,
    pub target: Option<String>,
    /// Why, when the command gave a reason (a `control`'s).
    pub reason: Option<String>,
    /// How the command came (a gateway or the WebSocket).
    #[serde(default)]
    pub via: Via,
    pub result: AuditResult,
    pub code: Option<String>,
    /// How many refusals the entry stands for, when more than one (see
    /// `RefusalFolds` in the audit module).
    pub count: Option<u64>,
    /// Hex SHA-256 chaining this entry to the previous one.
    pub hash: String,
}

/// One change a batch wrote: a [`WriteTx`](crate::store::WriteTx) call, as data. Read markers are left out: no
/// process keeps them in memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WriteOp {
    InsertPrincipal { principal: PrincipalRecord },
    UpdatePrincipal { principal: PrincipalRecord },
    InsertToken { token: TokenRecord },
    RevokeTokens { principal: String },
    InsertRoom { room: RoomRecord },
    UpdateRoom { room: RoomRecord },
    UpsertMember { member: MemberRecord },
    DeleteMember { room: String, principal: String },
    AppendEvent { event: EventRecord },
    UpsertPing { ping: PingRecord },
    InsertContact { contact: ContactRecord },
    UpsertRequest { request: RequestRecord },
    UpsertInvite { invite: InviteRecord },
    SetControl { control: ControlRecord },
    DeleteControl { agent: String, room: Option<String> },
    AppendAudit { entry: AuditRecord },
}

/// Who receives an event, as the process that stored it saw the room.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "snake_case")]
pub enum SharedRecipients {
    Room {
        members: Vec<SharedRecipient>,
        also_to: Option<SharedRecipient>,
    },
    One {
        principal: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedRecipient {
    pub id: String,
    pub routing: Routing,
    pub agent: bool,
}

/// An event a batch delivered: the stored event is its [`WriteOp::AppendEvent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedEvent {
    pub stream: StreamKey,
    pub seq: u64,
    pub recipients: SharedRecipients,
}

/// A device that authenticated: the others close their connection of it (4009).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedAuth {
    pub principal: String,
    pub device: String,
}

/// A rate bucket as the batch left it: tokens left, and when they were counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedBucket {
    pub principal: String,
    pub tokens: f64,
    pub at_ms: i64,
}

/// Everything a committed batch tells the other processes, in its order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SharedBatch {
    pub ops: Vec<WriteOp>,
    pub events: Vec<SharedEvent>,
    /// Principals whose connections close, with the code.
    pub closes: Vec<(String, u16)>,
    pub auths: Vec<SharedAuth>,
    pub buckets: Vec<SharedBucket>,
}

impl SharedBatch {
    /// Whether another process has anything to learn from it (a batch of reads and
    /// refusals only still moves audit heads and buckets, so this is rare).
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
            && self.events.is_empty()
            && self.closes.is_empty()
            && self.auths.is_empty()
            && self.buckets.is_empty()
    }

    /// The connections to close (a code no version knows closes as revoked: the safe
    /// side).
    pub fn close_codes(&self) -> impl Iterator<Item = (&str, CloseCode)> {
        self.closes.iter().map(|(principal, code)| {
            (
                principal.as_str(),
                CloseCode::from_code(*code).unwrap_or(CloseCode::TokenRevoked),
            )
        })
    }
}

/// A batch another process committed, numbered in the order batches took the lock.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    pub n: u64,
    pub node: String,
    pub batch: SharedBatch,
}
