//! Event kinds and their bodies.
//!
//! Bodies travel as JSON objects; fields not listed here are extensions and pass through
//! untouched. [`validate_client_body`] is the check the hub applies to every `send`, exposed
//! so clients can refuse a bad body before it reaches the network.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::codes::ErrorCode;
use crate::limits;
use crate::ts;

/// The kind of an event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EventKind {
    // Written by clients.
    Message,
    Tasks,
    Arch,
    Usage,
    Status,
    Ping,
    Answer,
    /// `x-<anything>`: opaque, for extensions.
    Extension(String),
    // Written by the hub, in rooms.
    Member,
    Room,
    // Written by the hub, in inboxes.
    Contact,
    RoomAdded,
    RoomRemoved,
    Control,
}

impl EventKind {
    /// Parses a kind; `None` for an unknown one.
    pub fn parse(kind: &str) -> Option<EventKind> {
        Some(match kind {
            "message" => EventKind::Message,
            "tasks" => EventKind::Tasks,
            "arch" => EventKind::Arch,
            "usage" => EventKind::Usage,
            "status" => EventKind::Status,
            "ping" => EventKind::Ping,
            "answer" => EventKind::Answer,
            "member" => EventKind::Member,
            "room" => EventKind::Room,
            "contact" => EventKind::Contact,
            "room_added" => EventKind::RoomAdded,
            "room_removed" => EventKind::RoomRemoved,
            "control" => EventKind::Control,
            other if other.len() > 2 && other.starts_with("x-") => {
                EventKind::Extension(other.to_owned())
            }
            _ => return None,
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            EventKind::Message => "message",
            EventKind::Tasks => "tasks",
            EventKind::Arch => "arch",
            EventKind::Usage => "usage",
            EventKind::Status => "status",
            EventKind::Ping => "ping",
            EventKind::Answer => "answer",
            EventKind::Extension(kind) => kind,
            EventKind::Member => "member",
            EventKind::Room => "room",
            EventKind::Contact => "contact",
            EventKind::RoomAdded => "room_added",
            EventKind::RoomRemoved => "room_removed",
            EventKind::Control => "control",
        }
    }

    /// Whether clients may write this kind with `send`.
    pub fn is_client_writable(&self) -> bool {
        matches!(
            self,
            EventKind::Message
                | EventKind::Tasks
                | EventKind::Arch
                | EventKind::Usage
                | EventKind::Status
                | EventKind::Ping
                | EventKind::Answer
                | EventKind::Extension(_)
        )
    }
}

/// `message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageBody {
    pub text: String,
    /// Principal ids. The hub adds the `@handle`s it resolves in `text` and stores the union.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mentions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
}

/// Identifies one agent session (one `claude` or `codex` run).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionRef {
    /// The agent's principal id.
    pub agent: String,
    /// `claude-code`, `codex`, `gemini-cli`…
    pub framework: String,
    pub session_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    InProgress,
    Completed,
    Deleted,
}

impl TaskStatus {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
            TaskStatus::Deleted => "deleted",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub title: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
}

/// `tasks`: a snapshot that replaces the last list of its session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TasksBody {
    pub session: SessionRef,
    /// Where the list was read from (e.g. `TodoWrite`, `update_plan`).
    pub source: String,
    pub tasks: Vec<Task>,
}

/// One architecture component in an `arch` definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentDef {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub paths: Vec<String>,
    pub depends_on: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum ComponentStatus {
    Idle,
    Working,
    Done,
    Blocked,
}

impl ComponentStatus {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentStatus::Idle => "idle",
            ComponentStatus::Working => "working",
            ComponentStatus::Done => "done",
            ComponentStatus::Blocked => "blocked",
        }
    }
}

/// `arch`: either defines components or reports one component's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArchBody {
    Define {
        define: Vec<ComponentDef>,
        /// Where the components came from when a program inferred them from the repository
        /// (`Cargo workspace`, `npm packages`…); absent when a person or an agent wrote them.
        /// A written definition replaces inferred components; an inferred one never replaces
        /// written ones.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    Status {
        component: String,
        status: ComponentStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        files: Option<Vec<String>>,
        /// The agent the status is about, when its owner reports it for the agent (an
        /// extension: a person's machine sees its agents' edits in their logs). Absent: the
        /// sender.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// `true`: the agent claims the component (others editing it are told who holds
        /// it); `false`: it releases its claim. Advisory, never a lock (an extension).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        claim: Option<bool>,
    },
}

/// `usage`: tokens and dollars spent between `from` and `to` (a delta, never a total).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageBody {
    pub session: SessionRef,
    pub model: String,
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    /// Absent when the model is unpriced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    Working,
    Idle,
    WaitingHuman,
    Error,
    Stopped,
}

impl AgentState {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Working => "working",
            AgentState::Idle => "idle",
            AgentState::WaitingHuman => "waiting_human",
            AgentState::Error => "error",
            AgentState::Stopped => "stopped",
        }
    }
}

/// `status`: what an agent is doing now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusBody {
    pub state: AgentState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `ping`: a question for a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingBody {
    /// The ping's id, unique in its room.
    pub ping: String,
    pub question: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    /// User ids who may answer; any user member when empty or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// `answer`: the first answer to a ping wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerBody {
    pub ping: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberAction {
    Join,
    Leave,
    Kick,
}

/// `member` (hub-written): someone joined, left or was kicked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberBody {
    pub principal: String,
    pub action: MemberAction,
    pub by: String,
}

/// `room` (hub-written): the room's title or topic changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

/// `contact` (inbox).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContactBody {
    pub request: String,
    pub from: String,
    pub to: String,
    pub state: crate::model::RequestState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `room_added` and `room_removed` (inbox).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomChangeBody {
    pub room: String,
    pub by: String,
}

/// `control` (inbox).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlBody {
    pub action: crate::client::ControlAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<String>,
    pub by: String,
    /// The control's `reason`, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError {
    /// `bad_frame` or `too_large`.
    pub code: ErrorCode,
    pub msg: String,
}

impl BodyError {
    fn bad(msg: impl Into<String>) -> BodyError {
        BodyError {
            code: ErrorCode::BadFrame,
            msg: msg.into(),
        }
    }
}

/// Checks that `body` is a valid body of the client-writable `kind`, within size limits.
/// `serialized_len` is the length in bytes of the body as it will be stored.
pub fn validate_client_body(
    kind: &EventKind,
    body: &Value,
    serialized_len: usize,
) -> Result<(), BodyError> {
    if !kind.is_client_writable() {
        return Err(BodyError::bad(format!(
            "kind {:?} is written by the hub only; send message, tasks, arch, usage, status, \
             ping, answer or x-<name>",
            kind.as_str()
        )));
    }
    if !body.is_object() {
        return Err(BodyError::bad(format!(
            "the body of a {} event must be a JSON object",
            kind.as_str()
        )));
    }
    if serialized_len > limits::EVENT_BODY {
        return Err(BodyError {
            code: ErrorCode::TooLarge,
            msg: format!(
                "the body is {serialized_len} bytes; the limit is {} bytes",
                limits::EVENT_BODY
            ),
        });
    }
    fn typed<T: serde::de::DeserializeOwned>(kind: &str, body: &Value) -> Result<T, BodyError> {
        T::deserialize(body)
            .map_err(|error| BodyError::bad(format!("invalid {kind} body: {error}")))
    }
    let name = kind.as_str();
    match kind {
        EventKind::Message => {
            let message: MessageBody = typed(name, body)?;
            if message.text.len() > limits::MESSAGE_TEXT {
                return Err(BodyError {
                    code: ErrorCode::TooLarge,
                    msg: format!(
                        "the message text is {} bytes; the limit is {} bytes: split it into \
                         several messages",
                        message.text.len(),
                        limits::MESSAGE_TEXT
                    ),
                });
            }
        }
        EventKind::Tasks => {
            typed::<TasksBody>(name, body)?;
        }
        EventKind::Arch => {
            if body.get("define").is_some() {
                typed::<DefineOnly>(name, body)?;
            } else if body.get("component").is_some() {
                typed::<StatusOnly>(name, body)?;
            } else {
                return Err(BodyError::bad(
                    "invalid arch body: give either \"define\" (a list of components) or \
                     \"component\" and \"status\"",
                ));
            }
        }
        EventKind::Usage => {
            let usage: UsageBody = typed(name, body)?;
            for (field, value) in [("from", &usage.from), ("to", &usage.to)] {
                if ts::parse_millis(value).is_none() {
                    return Err(BodyError::bad(format!(
                        "invalid usage body: {field} must be an RFC 3339 timestamp"
                    )));
                }
            }
            if usage
                .cost_usd
                .is_some_and(|cost| !cost.is_finite() || cost < 0.0)
            {
                return Err(BodyError::bad(
                    "invalid usage body: cost_usd must be a finite, non-negative number",
                ));
            }
        }
        EventKind::Status => {
            typed::<StatusBody>(name, body)?;
        }
        EventKind::Ping => {
            let ping: PingBody = typed(name, body)?;
            if ping.ping.is_empty() || ping.ping.len() > 128 {
                return Err(BodyError::bad(
                    "invalid ping body: ping must be an id of 1 to 128 bytes",
                ));
            }
            if let Some(expires_at) = &ping.expires_at
                && ts::parse_millis(expires_at).is_none()
            {
                return Err(BodyError::bad(
                    "invalid ping body: expires_at must be an RFC 3339 timestamp",
                ));
            }
        }
        EventKind::Answer => {
            let answer: AnswerBody = typed(name, body)?;
            if answer.choice.is_none() && answer.text.is_none() {
                return Err(BodyError::bad(
                    "invalid answer body: give a choice or a text",
                ));
            }
        }
        EventKind::Extension(_) => {}
        EventKind::Member
        | EventKind::Room
        | EventKind::Contact
        | EventKind::RoomAdded
        | EventKind::RoomRemoved
        | EventKind::Control => unreachable!("refused above as hub-written"),
    }
    Ok(())
}

/// The `define` form of `arch`, checked on its own so errors name the right fields.
#[derive(Deserialize)]
struct DefineOnly {
    #[allow(dead_code)]
    define: Vec<ComponentDef>,
}

/// The status form of `arch`.
#[derive(Deserialize)]
struct StatusOnly {
    #[allow(dead_code)]
    component: String,
    #[allow(dead_code)]
    status: ComponentStatus,
    #[allow(dead_code)]
    #[serde(default)]
    note: Option<String>,
    #[allow(dead_code)]
    #[serde(default)]
    files: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(kind: &str, body: Value) -> Result<(), BodyError> {
        let len = body.to_string().len();
        validate_client_body(&EventKind::parse(kind).unwrap(), &body, len)
    }

    #[test]
    fn kinds_parse_and_classify() {
        for kind in [
            "message", "tasks", "arch", "usage", "status", "ping", "answer",
        ] {
            let parsed = EventKind::parse(kind).unwrap();
            assert!(parsed.is_client_writable());
            assert_eq!(parsed.as_str(), kind);
        }
        for kind in [
            "member",
            "room",
            "contact",
            "room_added",
            "room_removed",
            "control",
        ] {
            assert!(!EventKind::parse(kind).unwrap().is_client_writable());
        }
        assert_eq!(
            EventKind::parse("x-cursor"),
            Some(EventKind::Extension("x-cursor".into()))
        );
        assert_eq!(EventKind::parse("x-"), None);
        assert_eq!(EventKind::parse("Message"), None);
    }

    #[test]
    fn valid_bodies_pass() {
        let session = json!({"agent": "p1", "framework": "codex", "session_id": "s"});
        check("message", json!({"text": "hi", "extra": 1})).unwrap();
        check(
            "tasks",
            json!({"session": session, "source": "TodoWrite",
                   "tasks": [{"title": "a", "status": "in_progress"}]}),
        )
        .unwrap();
        check(
            "arch",
            json!({"define": [{"id": "p", "name": "Parser", "paths": ["src/**"], "depends_on": []}]}),
        )
        .unwrap();
        check("arch", json!({"component": "p", "status": "working"})).unwrap();
        check(
            "usage",
            json!({"session": session, "model": "m", "input": 1, "output": 2, "cache_write": 0,
                   "cache_read": 0, "from": "2026-11-30T09:00:00.000Z",
                   "to": "2026-11-30T09:01:00.000Z"}),
        )
        .unwrap();
        check("status", json!({"state": "waiting_human"})).unwrap();
        check(
            "ping",
            json!({"ping": "q1", "question": "ok?", "options": ["yes", "no"]}),
        )
        .unwrap();
        check("answer", json!({"ping": "q1", "choice": "yes"})).unwrap();
        check("x-anything", json!({"whatever": [1, 2]})).unwrap();
    }

    #[test]
    fn invalid_bodies_get_bad_frame() {
        let cases = [
            ("message", json!({"txt": "hi"})),
            ("message", json!({"text": 5})),
            ("message", json!("hi")),
            ("tasks", json!({"tasks": []})),
            ("arch", json!({})),
            ("arch", json!({"component": "p", "status": "asleep"})),
            ("status", json!({"state": "sleeping"})),
            ("ping", json!({"ping": "", "question": "?"})),
            (
                "ping",
                json!({"ping": "a", "question": "?", "expires_at": "soon"}),
            ),
            ("answer", json!({"ping": "a"})),
            (
                "member",
                json!({"principal": "p", "action": "join", "by": "p"}),
            ),
        ];
        for (kind, body) in cases {
            let error = check(kind, body.clone()).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadFrame, "{kind} {body}");
        }
    }

    #[test]
    fn oversized_text_and_bodies_get_too_large() {
        let text = "a".repeat(limits::MESSAGE_TEXT + 1);
        assert_eq!(
            check("message", json!({ "text": text })).unwrap_err().code,
            ErrorCode::TooLarge
        );
        let blob = "b".repeat(limits::EVENT_BODY);
        assert_eq!(
            check("x-blob", json!({ "blob": blob })).unwrap_err().code,
            ErrorCode::TooLarge
        );
        let exactly = "a".repeat(limits::MESSAGE_TEXT);
        check("message", json!({ "text": exactly })).unwrap();
    }
}
