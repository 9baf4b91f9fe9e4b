//! Records that replies carry: principals, rooms, members, contacts, requests, invites,
//! directory and audit entries. Ids are opaque strings; clients never parse them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A person, or a program acting for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    User,
    Agent,
}

impl PrincipalKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::User => "user",
            PrincipalKind::Agent => "agent",
        }
    }
}

/// Who may find a principal in the directory and reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Discoverable {
    /// Kin only.
    Private,
    /// Kin, contacts of the principal and contacts of its owner.
    #[default]
    Contacts,
    /// Everyone.
    Public,
}

impl Discoverable {
    pub fn as_str(self) -> &'static str {
        match self {
            Discoverable::Private => "private",
            Discoverable::Contacts => "contacts",
            Discoverable::Public => "public",
        }
    }

    pub fn parse(text: &str) -> Option<Discoverable> {
        match text {
            "private" => Some(Discoverable::Private),
            "contacts" => Some(Discoverable::Contacts),
            "public" => Some(Discoverable::Public),
            _ => None,
        }
    }
}

/// An agent's routing setting in a room: which messages it sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// Only messages that mention it (or its own, or in a two-member room).
    #[default]
    Mentions,
    /// Every message.
    All,
}

impl Routing {
    pub fn as_str(self) -> &'static str {
        match self {
            Routing::Mentions => "mentions",
            Routing::All => "all",
        }
    }

    pub fn parse(text: &str) -> Option<Routing> {
        match text {
            "mentions" => Some(Routing::Mentions),
            "all" => Some(Routing::All),
            _ => None,
        }
    }
}

/// A principal as replies show it (`auth`, `register_agent`, `profile_set`, signup).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    pub id: String,
    pub kind: PrincipalKind,
    pub handle: String,
    pub name: String,
    /// The owning user's id, for agents; `null` for users.
    pub owner: Option<String>,
}

/// A room as replies show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Room {
    pub id: String,
    pub title: Option<String>,
    pub topic: Option<String>,
    /// The room's latest `seq`.
    pub head: u64,
    /// The creator's principal id.
    pub creator: String,
    pub members: Vec<Member>,
}

/// A room member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub id: String,
    pub kind: PrincipalKind,
    pub handle: String,
    pub name: String,
    pub routing: Routing,
}

/// The state of a contact request; every state but `pending` is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum RequestState {
    Pending,
    Accepted,
    Rejected,
    Cancelled,
    Expired,
}

impl RequestState {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestState::Pending => "pending",
            RequestState::Accepted => "accepted",
            RequestState::Rejected => "rejected",
            RequestState::Cancelled => "cancelled",
            RequestState::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<RequestState> {
        match text {
            "pending" => Some(RequestState::Pending),
            "accepted" => Some(RequestState::Accepted),
            "rejected" => Some(RequestState::Rejected),
            "cancelled" => Some(RequestState::Cancelled),
            "expired" => Some(RequestState::Expired),
            _ => None,
        }
    }
}

/// A contact request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContactRequest {
    pub id: String,
    /// Principal ids.
    pub from: String,
    pub to: String,
    pub state: RequestState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub ts: String,
}

/// A principal the caller has an accepted contact with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contact {
    pub id: String,
    pub kind: PrincipalKind,
    pub handle: String,
    pub name: String,
    pub owner: Option<String>,
    /// When the contact was accepted.
    pub since: String,
}

/// One of the caller's invites, as `invites` lists it (never its code, which only its
/// creator saw, once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invite {
    pub id: String,
    /// The room its redeemer joins, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<String>,
    /// Redemptions left before it is used up.
    pub uses_left: u32,
    pub expires_at: String,
    pub created_at: String,
}

/// How a directory entry relates to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum ContactRelation {
    Kin,
    Accepted,
    PendingOut,
    PendingIn,
    None,
}

/// One `directory` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectoryEntry {
    pub id: String,
    pub kind: PrincipalKind,
    pub handle: String,
    pub name: String,
    pub description: Option<String>,
    pub owner: Option<String>,
    /// The agent card (framework, model, skills…); `null` for users.
    pub card: Option<Value>,
    pub contact: ContactRelation,
}

/// The result of an audited action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditResult {
    Ok,
    Err,
}

/// One audit log entry; `hash = SHA-256(previous hash ‖ canonical JSON of the entry without
/// hash)`, hex-encoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub n: u64,
    pub ts: String,
    /// The acting principal's id (empty when unknown, e.g. a bad token).
    pub principal: String,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Why, when the command gave a reason (a `control`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub result: AuditResult,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// How many refusals this entry stands for, when more than one: refusals with the
    /// same (principal, action, code) within one second are folded into one entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// How the command came, when not over the WebSocket: `"a2a"` or `"mcp"` (a
    /// Roundtable extension; chained like the other fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    pub hash: String,
}

/// An agent's card: what it is and what it can do. Shaped after the A2A agent card
/// (`name`, `description`, `version`, `skills`), so a hub can later serve it as one; fields
/// not listed here are kept as sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AgentCard {
    /// `claude-code`, `codex`, `gemini-cli`…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<String>,
    /// The model it runs on, e.g. `claude-sonnet-4-5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<AgentSkill>,
}

/// One thing an agent can do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}
