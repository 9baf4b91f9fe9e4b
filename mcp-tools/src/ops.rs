//! What the tools need of a hub: the seam between the tools (one definition, here) and the
//! ways an agent reaches its hub (the stdio bridge over the core and its cache; later the
//! hub itself, at `/mcp`).

use std::time::Duration;

use roundtable_protocol::bodies::{AgentState, ComponentDef, ComponentStatus, Task};
use roundtable_protocol::model::DirectoryEntry;
use serde_json::Value;

/// A refusal or failure, as the model reads it: what happened and what to do, and a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub message: String,
    pub code: String,
}

impl ToolError {
    pub fn new(message: impl Into<String>, code: impl Into<String>) -> ToolError {
        ToolError {
            message: message.into(),
            code: code.into(),
        }
    }
}

/// A record as the model reads it: JSON written by the side that knows the record's type,
/// so its fields keep their order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown(String);

impl Shown {
    pub fn of(record: &impl serde::Serialize) -> Shown {
        Shown(serde_json::to_string_pretty(record).unwrap_or_else(|_| "null".into()))
    }

    pub fn text(&self) -> &str {
        &self.0
    }
}

/// What became of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// Stored by the hub (at `seq` when known).
    Stored { seq: Option<u64> },
    /// Not sent yet: kept, and sent once the hub is back.
    Queued { reason: String },
}

/// What a person answered to `ask_human` through Roundtable (a ping).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HumanAnswer {
    Yes {
        by: Option<String>,
        choice: Option<String>,
        text: Option<String>,
    },
    TimedOut,
}

/// A question raised for a person: its room, its id, and the seq it was stored at (answers
/// come after it; 0 when unknown).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ping {
    pub room: String,
    pub ping: String,
    #[serde(default)]
    pub seq: u64,
}

/// The operations behind the tools, as the agent they serve. Rooms are named by title or
/// id. Results that are records are JSON values, shown to the model as they are.
#[async_trait::async_trait]
pub trait HubOps: Send + Sync + 'static {
    /// Who the agent is: handle, id, hub, owner, home room.
    async fn whoami(&self) -> Value;
    async fn find_agents(
        &self,
        query: Option<String>,
        limit: u32,
    ) -> Result<Vec<DirectoryEntry>, ToolError>;
    /// The contact request made.
    async fn request_contact(
        &self,
        handle: String,
        message: Option<String>,
    ) -> Result<Shown, ToolError>;
    /// The rooms the agent is in, with members and unread counts.
    async fn list_rooms(&self) -> Result<Shown, ToolError>;
    /// The room made.
    async fn create_room(
        &self,
        title: String,
        topic: Option<String>,
        members: Vec<String>,
    ) -> Result<Shown, ToolError>;
    /// Adds `handle` to `room`; returns the room's id.
    async fn invite(&self, room: &str, handle: &str) -> Result<String, ToolError>;
    /// Sends a `message` with this body.
    async fn send_message(&self, room: &str, body: Value) -> Result<Sent, ToolError>;
    /// The messages for the agent it has not read (in `room`, or all rooms); they count as
    /// read once returned.
    async fn unread_messages(&self, room: Option<&str>) -> Result<Shown, ToolError>;
    /// The latest `limit` messages of a room.
    async fn latest_messages(&self, room: &str, limit: u32) -> Result<Shown, ToolError>;
    /// The first `limit` messages of a room after seq `after`, read or not (their read
    /// markers stay).
    async fn messages_since(&self, room: &str, after: u64, limit: u32) -> Result<Shown, ToolError>;
    /// Waits for messages for the agent, up to `timeout`; none when it passes.
    async fn wait_for_messages(&self, timeout: Duration) -> Result<Vec<Value>, ToolError>;
    async fn set_status(
        &self,
        state: AgentState,
        detail: Option<&str>,
        room: Option<&str>,
    ) -> Result<Sent, ToolError>;
    async fn define_components(
        &self,
        room: &str,
        components: Vec<ComponentDef>,
    ) -> Result<Sent, ToolError>;
    async fn update_component(
        &self,
        room: &str,
        component: &str,
        status: ComponentStatus,
        note: Option<&str>,
        files: Vec<String>,
    ) -> Result<Sent, ToolError>;
    /// Claims (`claim`) or releases a component.
    async fn claim_component(
        &self,
        room: &str,
        component: &str,
        claim: bool,
        note: Option<&str>,
    ) -> Result<Sent, ToolError>;
    /// Reports the agent's whole task list.
    async fn report_tasks(&self, tasks: Vec<Task>, room: Option<&str>) -> Result<Sent, ToolError>;
    /// Asks the agent's person with a ping (in its home room, addressed to its owner), where
    /// every Roundtable client of theirs sees it, expiring after `timeout`.
    async fn raise_ping(
        &self,
        question: &str,
        options: &[String],
        timeout: Duration,
    ) -> Result<Ping, ToolError>;
    /// Waits up to `timeout` for the first answer to `ping` (at once, with no wait, for a
    /// zero timeout).
    async fn await_answer(&self, ping: &Ping, timeout: Duration) -> Result<HumanAnswer, ToolError>;
    /// Marks `ping` as answered elsewhere (at the agent's own client, which is not the
    /// person's `answer`), so other clients stop offering it.
    async fn withdraw_ping(&self, ping: &Ping, reason: &str) -> Result<(), ToolError>;
    /// The agent's principal id (what a question's state is bound to).
    fn principal(&self) -> String;
}
