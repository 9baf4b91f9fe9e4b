//! Frames a client sends. Every command carries `id`, which the hub echoes as `re` in the
//! `ok` or `err` that answers it. Fields named `handle`, `to` and `members` take handles;
//! fields named `room`, `agent`, `principal` and `request` take ids.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{Discoverable, Routing};
use crate::text::{self, RefusedString, Shape};

/// Every frame a client may send, tagged by `t`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ClientFrame {
    Auth(Auth),
    Sync(SyncCmd),
    Ack(Ack),
    Send(SendCmd),
    History(History),
    RoomCreate(RoomCreate),
    RoomInvite(RoomInvite),
    RoomKick(RoomKick),
    RoomUpdate(RoomUpdate),
    RoomLeave(RoomLeave),
    Rooms(Rooms),
    MemberSet(MemberSet),
    ProfileSet(ProfileSet),
    Directory(Directory),
    RegisterAgent(RegisterAgent),
    /// An extension: an agent served by another A2A server, called when mentioned.
    RegisterRemoteAgent(RegisterRemoteAgent),
    AgentToken(AgentToken),
    UserToken(UserToken),
    ContactRequest(ContactRequestCmd),
    ContactRespond(ContactRespond),
    Contacts(Contacts),
    InviteCreate(InviteCreate),
    InviteRedeem(InviteRedeem),
    InviteRevoke(InviteRevoke),
    Invites(Invites),
    Control(Control),
    Audit(Audit),
}

impl ClientFrame {
    /// Every `t` a client may send, in the order of [`ClientFrame`]'s variants.
    pub const TYPES: [&'static str; 27] = [
        "auth",
        "sync",
        "ack",
        "send",
        "history",
        "room_create",
        "room_invite",
        "room_kick",
        "room_update",
        "room_leave",
        "rooms",
        "member_set",
        "profile_set",
        "directory",
        "register_agent",
        "register_remote_agent",
        "agent_token",
        "user_token",
        "contact_request",
        "contact_respond",
        "contacts",
        "invite_create",
        "invite_redeem",
        "invite_revoke",
        "invites",
        "control",
        "audit",
    ];

    /// The frame's `t`.
    pub fn type_name(&self) -> &'static str {
        match self {
            ClientFrame::Auth(_) => "auth",
            ClientFrame::Sync(_) => "sync",
            ClientFrame::Ack(_) => "ack",
            ClientFrame::Send(_) => "send",
            ClientFrame::History(_) => "history",
            ClientFrame::RoomCreate(_) => "room_create",
            ClientFrame::RoomInvite(_) => "room_invite",
            ClientFrame::RoomKick(_) => "room_kick",
            ClientFrame::RoomUpdate(_) => "room_update",
            ClientFrame::RoomLeave(_) => "room_leave",
            ClientFrame::Rooms(_) => "rooms",
            ClientFrame::MemberSet(_) => "member_set",
            ClientFrame::ProfileSet(_) => "profile_set",
            ClientFrame::Directory(_) => "directory",
            ClientFrame::RegisterAgent(_) => "register_agent",
            ClientFrame::RegisterRemoteAgent(_) => "register_remote_agent",
            ClientFrame::AgentToken(_) => "agent_token",
            ClientFrame::UserToken(_) => "user_token",
            ClientFrame::ContactRequest(_) => "contact_request",
            ClientFrame::ContactRespond(_) => "contact_respond",
            ClientFrame::Contacts(_) => "contacts",
            ClientFrame::InviteCreate(_) => "invite_create",
            ClientFrame::InviteRedeem(_) => "invite_redeem",
            ClientFrame::InviteRevoke(_) => "invite_revoke",
            ClientFrame::Invites(_) => "invites",
            ClientFrame::Control(_) => "control",
            ClientFrame::Audit(_) => "audit",
        }
    }

    /// The command's `id`.
    pub fn id(&self) -> u64 {
        match self {
            ClientFrame::Auth(c) => c.id,
            ClientFrame::Sync(c) => c.id,
            ClientFrame::Ack(c) => c.id,
            ClientFrame::Send(c) => c.id,
            ClientFrame::History(c) => c.id,
            ClientFrame::RoomCreate(c) => c.id,
            ClientFrame::RoomInvite(c) => c.id,
            ClientFrame::RoomKick(c) => c.id,
            ClientFrame::RoomUpdate(c) => c.id,
            ClientFrame::RoomLeave(c) => c.id,
            ClientFrame::Rooms(c) => c.id,
            ClientFrame::MemberSet(c) => c.id,
            ClientFrame::ProfileSet(c) => c.id,
            ClientFrame::Directory(c) => c.id,
            ClientFrame::RegisterAgent(c) => c.id,
            ClientFrame::RegisterRemoteAgent(c) => c.id,
            ClientFrame::AgentToken(c) => c.id,
            ClientFrame::UserToken(c) => c.id,
            ClientFrame::ContactRequest(c) => c.id,
            ClientFrame::ContactRespond(c) => c.id,
            ClientFrame::Contacts(c) => c.id,
            ClientFrame::InviteCreate(c) => c.id,
            ClientFrame::InviteRedeem(c) => c.id,
            ClientFrame::InviteRevoke(c) => c.id,
            ClientFrame::Invites(c) => c.id,
            ClientFrame::Control(c) => c.id,
            ClientFrame::Audit(c) => c.id,
        }
    }

    /// Checks every string of the frame against its [`Shape`]: the first one holding a
    /// character its shape refuses (a NUL, a control character, an invisible format
    /// character in an id) is named. A `send`'s body is checked with the body
    /// ([`crate::bodies::parse_client_body`]).
    pub fn check_strings(&self) -> Result<(), RefusedString> {
        use Shape::{Identifier, Line, Prose};
        match self {
            ClientFrame::Auth(c) => {
                one("token", &c.token, Identifier)?;
                one("device", &c.device, Identifier)?;
                one("client.name", &c.client.name, Line)?;
                one("client.version", &c.client.version, Line)
            }
            ClientFrame::Sync(c) => keys("cursors", &c.cursors),
            ClientFrame::Ack(c) => keys("cursors", &c.cursors),
            ClientFrame::Send(c) => {
                one("room", &c.room, Identifier)?;
                one("client_key", &c.client_key, Identifier)?;
                one("kind", &c.kind, Identifier)
            }
            ClientFrame::History(c) => one("room", &c.room, Identifier),
            ClientFrame::RoomCreate(c) => {
                maybe("title", &c.title, Prose)?;
                maybe("topic", &c.topic, Prose)?;
                each("members", &c.members, Identifier)
            }
            ClientFrame::RoomInvite(c) => {
                one("room", &c.room, Identifier)?;
                one("handle", &c.handle, Identifier)
            }
            ClientFrame::RoomKick(c) => {
                one("room", &c.room, Identifier)?;
                one("handle", &c.handle, Identifier)
            }
            ClientFrame::RoomUpdate(c) => {
                one("room", &c.room, Identifier)?;
                maybe("title", &c.title, Prose)?;
                maybe("topic", &c.topic, Prose)
            }
            ClientFrame::RoomLeave(c) => one("room", &c.room, Identifier),
            ClientFrame::Rooms(_)
            | ClientFrame::Contacts(_)
            | ClientFrame::Invites(_)
            | ClientFrame::UserToken(_) => Ok(()),
            ClientFrame::MemberSet(c) => one("room", &c.room, Identifier),
            ClientFrame::ProfileSet(c) => {
                maybe("principal", &c.principal, Identifier)?;
                maybe("name", &c.name, Line)
            }
            ClientFrame::Directory(c) => maybe("query", &c.query, Line),
            ClientFrame::RegisterAgent(c) => {
                one("name", &c.name, Identifier)?;
                maybe("description", &c.description, Prose)?;
                match &c.card {
                    Some(card) => crate::text::check_no_nul("card", card),
                    None => Ok(()),
                }
            }
            ClientFrame::RegisterRemoteAgent(c) => {
                one("name", &c.name, Identifier)?;
                one("card_url", &c.card_url, Identifier)?;
                if let Some(credential) = &c.credential {
                    one("credential.value", &credential.value, Identifier)?;
                    maybe("credential.header", &credential.header, Identifier)?;
                }
                maybe("description", &c.description, Prose)
            }
            ClientFrame::AgentToken(c) => one("agent", &c.agent, Identifier),
            ClientFrame::ContactRequest(c) => {
                one("to", &c.to, Identifier)?;
                maybe("message", &c.message, Prose)
            }
            ClientFrame::ContactRespond(c) => one("request", &c.request, Identifier),
            ClientFrame::InviteCreate(c) => maybe("room", &c.room, Identifier),
            ClientFrame::InviteRedeem(c) => one("code", &c.code, Identifier),
            ClientFrame::InviteRevoke(c) => one("invite", &c.invite, Identifier),
            ClientFrame::Control(c) => {
                one("agent", &c.agent, Identifier)?;
                maybe("room", &c.room, Identifier)?;
                maybe("reason", &c.reason, Prose)
            }
            ClientFrame::Audit(c) => {
                maybe("principal", &c.principal, Identifier)?;
                maybe("since", &c.since, Identifier)
            }
        }
    }

    /// Encodes the frame as the JSON text of one WebSocket frame.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("client frames always serialize")
    }
}

fn one(field: &'static str, text: &str, shape: Shape) -> Result<(), RefusedString> {
    text::check(|| field.to_owned(), text, shape)
}

fn maybe(field: &'static str, text: &Option<String>, shape: Shape) -> Result<(), RefusedString> {
    text.as_deref()
        .map_or(Ok(()), |text| one(field, text, shape))
}

fn each(field: &'static str, texts: &[String], shape: Shape) -> Result<(), RefusedString> {
    texts
        .iter()
        .enumerate()
        .try_for_each(|(index, text)| text::check(|| format!("{field}[{index}]"), text, shape))
}

/// A map's keys (streams, in `cursors`).
fn keys(field: &'static str, map: &BTreeMap<String, u64>) -> Result<(), RefusedString> {
    map.keys()
        .try_for_each(|key| text::check(|| format!("a key of {field}"), key, Shape::Identifier))
}

/// Which program is connecting (for logs and the sessions view).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClientInfo {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
}

/// The first frame of every connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Auth {
    pub id: u64,
    pub token: String,
    /// A stable id of the client's device; one live connection per (principal, device).
    pub device: String,
    #[serde(default)]
    pub client: ClientInfo,
}

/// Replay every readable stream from the given cursors, then go live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncCmd {
    pub id: u64,
    /// Stream (a room id, or `inbox`) -> last processed `seq`. Missing streams start at 0.
    #[serde(default)]
    pub cursors: BTreeMap<String, u64>,
}

/// Read markers: "I have processed up to seq", per stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    pub id: u64,
    pub cursors: BTreeMap<String, u64>,
}

/// Append an event to a room.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendCmd {
    pub id: u64,
    pub room: String,
    /// The sender's idempotency key (8..64 bytes): a retry returns the original event.
    pub client_key: String,
    pub kind: String,
    pub body: Value,
}

/// Page through a room's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub id: u64,
    pub room: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomCreate {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Handles to add besides the creator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomInvite {
    pub id: u64,
    pub room: String,
    pub handle: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomKick {
    pub id: u64,
    pub room: String,
    pub handle: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomUpdate {
    pub id: u64,
    pub room: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomLeave {
    pub id: u64,
    pub room: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rooms {
    pub id: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberSet {
    pub id: u64,
    pub room: String,
    pub routing: Routing,
}

/// Sets a profile: the caller's own, or (`principal`) one of the caller's agents. An agent
/// may narrow its own `discoverable`; only its owner may widen it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileSet {
    pub id: u64,
    /// One of the caller's agents (an id); absent: the caller itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discoverable: Option<Discoverable>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Directory {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterAgent {
    pub id: u64,
    /// The `<name>` part of the agent's handle `<owner>/<name>`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discoverable: Option<Discoverable>,
}

/// Registers an agent that another A2A server runs (`register_remote_agent`, an
/// extension): the hub calls it at `card_url`'s endpoint when a room message mentions it,
/// with `credential` and never a Roundtable token, and posts its answers as it. Users only.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterRemoteAgent {
    pub id: u64,
    /// The `<name>` part of the agent's handle `<owner>/<name>`.
    pub name: String,
    /// Where its A2A agent card is (`https://…/.well-known/agent-card.json`).
    pub card_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<RemoteCredential>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discoverable: Option<Discoverable>,
}

impl std::fmt::Debug for RegisterRemoteAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterRemoteAgent")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("card_url", &self.card_url)
            .field("credential", &self.credential)
            .field("description", &self.description)
            .field("discoverable", &self.discoverable)
            .finish()
    }
}

/// What the hub presents to a remote agent: `Authorization: Bearer <value>`, or `value` in
/// the header `header` (`X-API-Key` when absent).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteCredential {
    pub scheme: RemoteCredentialScheme,
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
}

impl std::fmt::Debug for RemoteCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteCredential")
            .field("scheme", &self.scheme)
            .field("value", &"<secret>")
            .field("header", &self.header)
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteCredentialScheme {
    Bearer,
    ApiKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAction {
    Rotate,
    Revoke,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentToken {
    pub id: u64,
    pub agent: String,
    pub action: TokenAction,
}

/// Rotates or revokes the calling user's own token; the old token's connections (this one
/// included) close with 4010.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserToken {
    pub id: u64,
    pub action: TokenAction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContactRequestCmd {
    pub id: u64,
    /// The target's handle.
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContactRespond {
    pub id: u64,
    pub request: String,
    pub accept: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contacts {
    pub id: u64,
}

/// How many times an invite may be redeemed at most (`max_uses`, 1 when absent).
pub const INVITE_MAX_USES: u32 = 1000;
/// How long an invite lives when `expires_in_s` is absent: 7 days.
pub const INVITE_DEFAULT_EXPIRY_S: u64 = 7 * 24 * 60 * 60;
/// The longest an invite may live: 90 days.
pub const INVITE_MAX_EXPIRY_S: u64 = 90 * 24 * 60 * 60;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InviteCreate {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_uses: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InviteRedeem {
    pub id: u64,
    pub code: String,
}

/// Withdraws one of the caller's invites, so its code no longer redeems.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InviteRevoke {
    pub id: u64,
    /// The invite's id (`invite` in `invite_create`'s `ok`), never its code.
    pub invite: String,
}

/// Lists the caller's invites that can still be redeemed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invites {
    pub id: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum ControlAction {
    Pause,
    Resume,
    Stop,
}

impl ControlAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ControlAction::Pause => "pause",
            ControlAction::Resume => "resume",
            ControlAction::Stop => "stop",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Control {
    pub id: u64,
    pub agent: String,
    pub action: ControlAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<String>,
    /// Why, in words the agent is told and the audit log keeps (a Roundtable extension:
    /// a budget reached, say); at most [`crate::limits::CONTROL_REASON`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// `POST /v1/signup` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignupRequest {
    pub handle: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discoverable: Option<Discoverable>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invite: Option<String>,
}

impl SignupRequest {
    /// Checks every string of the request against its [`Shape`], as
    /// [`ClientFrame::check_strings`] does for frames.
    pub fn check_strings(&self) -> Result<(), RefusedString> {
        one("handle", &self.handle, Shape::Identifier)?;
        one("name", &self.name, Shape::Line)?;
        maybe("invite", &self.invite, Shape::Identifier)
    }
}

/// A command that expects a reply: its frame, and the type of the `ok` that answers it. So
/// a client decodes every reply once, as what its command promises, and never the wrong type.
pub trait Command: Into<ClientFrame> {
    /// The payload of the `ok` that answers this command.
    type Reply: serde::de::DeserializeOwned;
    /// Whether the reply carries a secret (a token), which a client must keep only where it
    /// belongs and never in a cache.
    const REPLY_HAS_SECRET: bool = false;
}

/// The payload of an `ok` that carries nothing besides `re`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Done {}

macro_rules! commands {
    ($($command:ident => $variant:ident: $reply:ty),* $(,)?) => {
        $(
            impl From<$command> for ClientFrame {
                fn from(command: $command) -> ClientFrame {
                    ClientFrame::$variant(command)
                }
            }

            impl Command for $command {
                type Reply = $reply;
            }
        )*
    };
}

commands! {
    History => History: crate::server::HistoryOk,
    RoomCreate => RoomCreate: crate::server::RoomOk,
    RoomInvite => RoomInvite: Done,
    RoomKick => RoomKick: Done,
    RoomUpdate => RoomUpdate: Done,
    RoomLeave => RoomLeave: Done,
    Rooms => Rooms: crate::server::RoomsOk,
    MemberSet => MemberSet: Done,
    ProfileSet => ProfileSet: crate::server::ProfileOk,
    Directory => Directory: crate::server::DirectoryOk,
    ContactRequestCmd => ContactRequest: crate::server::ContactRequestOk,
    ContactRespond => ContactRespond: Done,
    Contacts => Contacts: crate::server::ContactsOk,
    InviteCreate => InviteCreate: crate::server::InviteCreateOk,
    InviteRedeem => InviteRedeem: crate::server::InviteRedeemOk,
    InviteRevoke => InviteRevoke: Done,
    Invites => Invites: crate::server::InvitesOk,
    Control => Control: Done,
    Audit => Audit: crate::server::AuditOk,
}

impl From<RegisterRemoteAgent> for ClientFrame {
    fn from(command: RegisterRemoteAgent) -> ClientFrame {
        ClientFrame::RegisterRemoteAgent(command)
    }
}

impl Command for RegisterRemoteAgent {
    type Reply = crate::server::RegisterRemoteAgentOk;
}

impl From<RegisterAgent> for ClientFrame {
    fn from(command: RegisterAgent) -> ClientFrame {
        ClientFrame::RegisterAgent(command)
    }
}

impl Command for RegisterAgent {
    type Reply = crate::server::RegisterAgentOk;
    const REPLY_HAS_SECRET: bool = true;
}

impl From<AgentToken> for ClientFrame {
    fn from(command: AgentToken) -> ClientFrame {
        ClientFrame::AgentToken(command)
    }
}

impl Command for AgentToken {
    type Reply = crate::server::AgentTokenOk;
    const REPLY_HAS_SECRET: bool = true;
}

impl From<UserToken> for ClientFrame {
    fn from(command: UserToken) -> ClientFrame {
        ClientFrame::UserToken(command)
    }
}

impl Command for UserToken {
    type Reply = crate::server::UserTokenOk;
    const REPLY_HAS_SECRET: bool = true;
}

impl ClientFrame {
    /// Whether the `ok` answering this frame carries a secret (a token).
    pub fn reply_has_secret(&self) -> bool {
        matches!(
            self,
            ClientFrame::RegisterAgent(_) | ClientFrame::AgentToken(_) | ClientFrame::UserToken(_)
        )
    }
}
