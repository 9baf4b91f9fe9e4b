//! The tools' arguments: their JSON Schemas (from these types and their doc comments) are
//! what agents read, so the words matter as much as the types.

use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindAgents {
    /// Words to look for in handles, names and descriptions (all agents and people you may
    /// see when empty).
    #[serde(default)]
    pub query: Option<String>,
    /// At most this many (default 20).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RequestContact {
    /// The handle to ask: `user` or `user/agent`.
    pub handle: String,
    /// A short note shown with the request (up to 500 bytes).
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateRoom {
    /// The room's title, used to name it in later calls.
    pub title: String,
    #[serde(default)]
    pub topic: Option<String>,
    /// Handles to add (each must be your kin or a contact).
    #[serde(default)]
    pub members: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Invite {
    /// The room's title or id.
    pub room: String,
    /// The handle to add: `user` or `user/agent`.
    pub handle: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendMessage {
    /// The room's title or id.
    pub room: String,
    /// The message. Write `@handle` to mention a member: a mentioned agent is woken up.
    pub text: String,
    /// The id of the message this one answers.
    #[serde(default)]
    pub reply_to: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadMessages {
    /// Only this room (title or id); all rooms when empty.
    #[serde(default)]
    pub room: Option<String>,
    /// Only messages you have not read yet (default true). With false, `room` is required
    /// and the latest `limit` messages are returned.
    #[serde(default)]
    pub unread_only: Option<bool>,
    /// How many messages at most: with `unread_only: false`, the latest (default 30); with
    /// `since`, the first after it (default 100).
    #[serde(default)]
    pub limit: Option<u32>,
    /// With `room`: the messages after this `seq` (the `seq` of the last message you
    /// handled), read or not, oldest first, at most `limit`. To read again what an answer
    /// you lost held; they stay as read as they were.
    #[serde(default)]
    pub since: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WaitForMessages {
    /// How long to wait, in seconds (default 300, at most 600).
    #[serde(default)]
    pub timeout_s: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Working,
    Idle,
    WaitingHuman,
    Error,
    Stopped,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetStatus {
    /// What you are doing: working, idle, waiting_human, error or stopped.
    pub state: State,
    /// A few words on it.
    #[serde(default)]
    pub detail: Option<String>,
    /// The room to say it in (title or id); your home room when empty.
    #[serde(default)]
    pub room: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Component {
    /// A short stable id (e.g. `parser`).
    pub id: String,
    /// A readable name.
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Globs of the files that belong to it (e.g. `src/parser/**`).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Ids of the components it depends on.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DefineComponents {
    /// The room whose architecture board this is (title or id).
    pub room: String,
    pub components: Vec<Component>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Progress {
    Idle,
    Working,
    Done,
    Blocked,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateComponent {
    /// The room (title or id).
    pub room: String,
    /// The component's id.
    pub component: String,
    /// idle, working, done or blocked.
    pub status: Progress,
    /// Why, or what is left.
    #[serde(default)]
    pub note: Option<String>,
    /// Files you changed in it (at most 32 paths; the ones you changed last).
    #[serde(default)]
    pub files: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClaimComponent {
    /// The room (title or id) whose architecture board has the component.
    pub room: String,
    /// The component's id.
    pub component: String,
    /// What you are doing in it, for the others.
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReleaseComponent {
    /// The room (title or id).
    pub room: String,
    /// The component's id.
    pub component: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Pending,
    InProgress,
    Completed,
    Deleted,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskItem {
    #[serde(default)]
    pub id: Option<String>,
    pub title: String,
    pub status: Step,
    /// What you are doing, as a phrase (e.g. "Writing the parser").
    #[serde(default)]
    pub active_form: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReportTasks {
    /// Your whole task list (it replaces the last one you reported).
    pub tasks: Vec<TaskItem>,
    /// The room to report to (title or id); your home room when empty.
    #[serde(default)]
    pub room: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskHuman {
    /// The question, with what the person needs to answer it.
    pub question: String,
    /// The answers to choose from (free text when empty).
    #[serde(default)]
    pub options: Vec<String>,
    /// How long to wait, in seconds (default 600, at most 600).
    #[serde(default)]
    pub timeout_s: Option<u64>,
}
