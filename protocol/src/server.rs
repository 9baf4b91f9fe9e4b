//! Frames the hub sends, and the typed payloads of `ok` replies.
//!
//! An `ok` frame's fields depend on the command it answers, so [`OkReply`] keeps them as a
//! JSON object; a client that knows which command it sent decodes them with
//! [`OkReply::decode`] into one of the `*Ok` structs below.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::codes::ErrorCode;
use crate::model::{AuditEntry, Contact, ContactRequest, DirectoryEntry, Invite, Principal, Room};

/// Every frame the hub may send, tagged by `t`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ServerFrame {
    Hello(Hello),
    Ok(OkReply),
    Err(ErrReply),
    Evt(Event),
    Gap(Gap),
}

impl ServerFrame {
    /// Encodes the frame as the JSON text of one WebSocket frame.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("server frames always serialize")
    }

    /// Decodes one text frame from the hub.
    pub fn from_json(text: &str) -> Result<ServerFrame, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// The hub's first frame on every connection. (Its `Default`, all zeros, is what a client
/// holds until the hub's arrives.)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub proto: u32,
    /// The hub's id.
    pub hub: String,
    /// Identifies the hub's history; a client whose stored epoch differs drops its cache.
    pub epoch: String,
    pub hb_ms: u64,
    pub max_frame: u64,
    pub max_queue: u64,
    /// Events of one room replayed by `sync` before a `gap` (an extension of `hello`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_max: Option<u64>,
    /// Outbound bytes buffered per connection before it is closed with 4008 (amendment 7;
    /// absent from hubs that predate it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queue_bytes: Option<u64>,
}

/// A successful reply; the fields besides `re` depend on the command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OkReply {
    pub re: u64,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl OkReply {
    /// An `ok` with no fields besides `re`.
    pub fn empty(re: u64) -> OkReply {
        OkReply {
            re,
            fields: Map::new(),
        }
    }

    /// An `ok` carrying the fields of `payload` (which must serialize as a JSON object).
    pub fn with<T: Serialize>(re: u64, payload: &T) -> OkReply {
        let fields = match serde_json::to_value(payload) {
            Ok(Value::Object(fields)) => fields,
            Ok(Value::Null) => Map::new(),
            Ok(other) => panic!("ok payloads serialize as objects, got {other}"),
            Err(error) => panic!("ok payloads always serialize: {error}"),
        };
        OkReply { re, fields }
    }

    /// Decodes the fields as the payload of a known command.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(Value::Object(self.fields.clone()))
    }
}

/// A failed command. `re` is absent when the failing frame had no usable `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrReply {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub re: Option<u64>,
    pub code: ErrorCode,
    pub msg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

/// One event of a stream: a room's log (`room`) or the principal's `inbox` (`stream`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<String>,
    /// `"inbox"` for inbox events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    pub seq: u64,
    pub id: String,
    pub ts: String,
    pub from: String,
    pub kind: String,
    pub body: Value,
    /// The sender's idempotency key, shown to its sender only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<String>,
}

impl Event {
    /// The stream the event belongs to, as `sync` cursors name it: a room id or `inbox`.
    pub fn stream_name(&self) -> &str {
        match (&self.room, &self.stream) {
            (Some(room), _) => room,
            (None, Some(stream)) => stream,
            (None, None) => "",
        }
    }

    /// Decodes the body as a known kind's body.
    pub fn body_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(self.body.clone())
    }
}

/// Events `from..=to` of `room` were skipped by `sync`; fetch them with `history` if needed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    pub room: String,
    pub from: u64,
    pub to: u64,
}

/// `ok` of `auth`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthOk {
    pub principal: Principal,
}

/// `ok` of `sync`: the head of every readable stream when catch-up ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncOk {
    pub heads: BTreeMap<String, u64>,
    /// The principal's read markers (an extension): per stream, the highest seq any of its
    /// devices acknowledged with `ack`, so a second device starts where the first one read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub read: BTreeMap<String, u64>,
}

/// `ok` of `send`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendOk {
    pub event: Event,
    /// True when the `client_key` was already used and `event` is the original.
    pub dup: bool,
}

/// `ok` of `history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryOk {
    pub events: Vec<Event>,
    /// True when the page was cut short of `limit` by its size (an extension): more events
    /// follow in the asked range; page on from the last (or first) one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
}

/// `ok` of `room_create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomOk {
    pub room: Room,
}

/// `ok` of `rooms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomsOk {
    pub rooms: Vec<Room>,
}

/// `ok` of `profile_set`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileOk {
    pub principal: Principal,
}

/// `ok` of `directory`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectoryOk {
    pub entries: Vec<DirectoryEntry>,
}

/// `ok` of `register_agent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterAgentOk {
    pub agent: Principal,
    /// Shown once.
    pub token: String,
    /// The agent's home room (owner + agent), an extension of the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<Room>,
}

/// `ok` of `register_remote_agent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterRemoteAgentOk {
    pub agent: Principal,
    /// The card's address, as registered.
    pub card_url: String,
    /// The agent's home room (owner + agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<Room>,
}

/// `ok` of `agent_token`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentTokenOk {
    /// The new token, for `rotate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// `ok` of `user_token`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserTokenOk {
    /// The new token, for `rotate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// `ok` of `contact_request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContactRequestOk {
    pub request: ContactRequest,
}

/// `ok` of `contacts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContactsOk {
    pub contacts: Vec<Contact>,
    pub requests: Vec<ContactRequest>,
}

/// `ok` of `invite_create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InviteCreateOk {
    pub code: String,
    pub link: String,
    /// The invite's id, for `invite_revoke` and `invites`. Hubs from before invites could be
    /// withdrawn (protocol amendment 5) do not send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invite: Option<String>,
}

/// `ok` of `invite_redeem`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InviteRedeemOk {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<Room>,
}

/// `ok` of `invites`: the caller's invites that can still be redeemed (neither withdrawn,
/// used up nor expired), oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvitesOk {
    pub invites: Vec<Invite>,
}

/// `ok` of `audit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditOk {
    pub entries: Vec<AuditEntry>,
}

/// `POST /v1/signup` success body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignupOk {
    pub principal: Principal,
    pub token: String,
}

/// The body of every HTTP error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpError {
    pub code: ErrorCode,
    pub msg: String,
}

/// `GET /v1/health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    pub ok: bool,
    pub version: String,
    pub epoch: String,
    /// The audit log's last durable entry: record it somewhere else, and verification
    /// later proves the log still holds it and extends it (nothing cut or rewritten).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_head: Option<AuditHead>,
}

/// An audit log entry's place in the hash chain: its `n` and `hash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditHead {
    pub n: u64,
    pub hash: String,
}

/// `GET /.well-known/roundtable.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WellKnown {
    pub hub: String,
    pub proto: Vec<u32>,
    pub signup: String,
}
