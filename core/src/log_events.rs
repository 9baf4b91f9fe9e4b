//! What Roundtable reads from agents' own logs, normalized across agent CLIs: the sessions,
//! the task lists the agents keep for themselves, the files they change, and the tokens
//! they spend. Each agent CLI's parser turns its log's bytes into these events; everything
//! after (aggregation, pricing, attribution, publishing) knows nothing of the formats.

use serde::{Deserialize, Serialize};

/// The agent CLI that wrote a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    ClaudeCode,
    Codex,
    Gemini,
    Opencode,
    Copilot,
}

impl Framework {
    pub fn as_str(self) -> &'static str {
        match self {
            Framework::ClaudeCode => "claude-code",
            Framework::Codex => "codex",
            Framework::Gemini => "gemini",
            Framework::Opencode => "opencode",
            Framework::Copilot => "copilot",
        }
    }

    pub fn parse(text: &str) -> Option<Framework> {
        [
            Framework::ClaudeCode,
            Framework::Codex,
            Framework::Gemini,
            Framework::Opencode,
            Framework::Copilot,
        ]
        .into_iter()
        .find(|framework| framework.as_str() == text)
    }
}

/// A task's status, as agents' task tools know it (a superset of the `tasks` event's: the
/// boards show this machine's sessions as their logs say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    InProgress,
    Completed,
    Deleted,
    /// Given up on (Gemini CLI's `write_todos`).
    Cancelled,
    /// Waiting on something else (Gemini CLI's `write_todos`).
    Blocked,
}

impl From<roundtable_protocol::bodies::TaskStatus> for TaskStatus {
    fn from(status: roundtable_protocol::bodies::TaskStatus) -> TaskStatus {
        use roundtable_protocol::bodies::TaskStatus as Wire;
        match status {
            Wire::Pending => TaskStatus::Pending,
            Wire::InProgress => TaskStatus::InProgress,
            Wire::Completed => TaskStatus::Completed,
            Wire::Deleted => TaskStatus::Deleted,
        }
    }
}

impl TaskStatus {
    /// Its name (`in_progress`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
            TaskStatus::Deleted => "deleted",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Blocked => "blocked",
        }
    }

    /// The status as the `tasks` event carries it (pending, in progress, completed,
    /// deleted): a cancelled task left the list; a blocked one waits.
    pub fn on_the_wire(self) -> roundtable_protocol::bodies::TaskStatus {
        use roundtable_protocol::bodies::TaskStatus as Wire;
        match self {
            TaskStatus::Pending | TaskStatus::Blocked => Wire::Pending,
            TaskStatus::InProgress => Wire::InProgress,
            TaskStatus::Completed => Wire::Completed,
            TaskStatus::Deleted | TaskStatus::Cancelled => Wire::Deleted,
        }
    }
}

/// One task of an agent's own list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskItem {
    /// The id the agent's tool gave it, when it has one (Claude's Task tools, old TodoWrite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub title: String,
    pub status: TaskStatus,
    /// What the agent is doing, as a phrase ("Writing the parser").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
}

/// Tokens of one model request (or, for Codex, one increase of the session's totals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCounts {
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens (reasoning included, counted once).
    pub output: u64,
    /// Tokens written to the cache for five minutes.
    pub cache_write_5m: u64,
    /// Tokens written to the cache for an hour (priced higher).
    pub cache_write_1h: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
}

impl TokenCounts {
    pub fn cache_write(&self) -> u64 {
        self.cache_write_5m + self.cache_write_1h
    }

    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_write() + self.cache_read
    }

    pub fn add(&mut self, other: &TokenCounts) {
        self.input += other.input;
        self.output += other.output;
        self.cache_write_5m += other.cache_write_5m;
        self.cache_write_1h += other.cache_write_1h;
        self.cache_read += other.cache_read;
    }
}

/// How a request is billed beyond its tokens, as its CLI recorded it (AGENT-FORMATS §8):
/// each vendor charges more for some of these, and [`super::pricing`] knows by how much.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Billing {
    /// Claude Code's fast mode (`usage.speed: "fast"`): the model's fast prices.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fast: bool,
    /// The service tier it ran at (Codex's `thread_settings_applied`: `priority`, `flex`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    /// Where it ran (Claude's `inference_geo`): `us` costs more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geo: Option<String>,
    /// Web searches it ran (`server_tool_use.web_search_requests`), charged each.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub web_searches: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Billing {
    /// Billed by its tokens alone.
    pub fn is_standard(&self) -> bool {
        *self == Billing::default()
    }
}

/// What identifies one model request across the lines (and files) that repeat it: Claude
/// Code writes a line per content block of a response, each with the response's usage, and
/// copies history on resume; only the largest count of a request counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestKey {
    pub message_id: String,
    pub request_id: Option<String>,
}

/// One thing a log says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LogEvent {
    /// A session runs: where, with which model (the latest seen), since when.
    Session {
        session_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<i64>,
    },
    /// The whole task list of a session, or of one of its subagents (`lane`: the
    /// subagent's id), replacing the last one of that lane.
    Tasks {
        session_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lane: Option<String>,
        /// Where the list came from: `TodoWrite`, `TaskCreate`/`TaskUpdate` (as `tasks`),
        /// `update_plan`, `task_file`.
        source: String,
        tasks: Vec<TaskItem>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<i64>,
    },
    /// A file the agent changed, by absolute path (a relative one resolved against the
    /// session's working directory at the time); edits that failed are not reported.
    FileTouched {
        session_id: String,
        path: String,
        /// The tool: `Edit`, `Write`, `MultiEdit`, `NotebookEdit`, `apply_patch`.
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<i64>,
    },
    /// Tokens spent. With a `key`, the request may be reported again (by another line or
    /// file of the session): only the largest report of a key counts. Without one, each
    /// event counts once.
    Usage {
        session_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<RequestKey>,
        /// Reported by a subagent's side chain (a duplicate of the main chain's request is
        /// dropped in favour of the main chain's).
        #[serde(default)]
        sidechain: bool,
        model: String,
        tokens: TokenCounts,
        /// What besides its tokens the request is billed for.
        #[serde(default, skip_serializing_if = "Billing::is_standard")]
        billing: Billing,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<i64>,
    },
}

impl LogEvent {
    pub fn session_id(&self) -> &str {
        match self {
            LogEvent::Session { session_id, .. }
            | LogEvent::Tasks { session_id, .. }
            | LogEvent::FileTouched { session_id, .. }
            | LogEvent::Usage { session_id, .. } => session_id,
        }
    }
}

/// What a parser made of one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineOutcome {
    /// A JSON object (it may have said nothing of interest).
    Read,
    /// Not a JSON object: invalid JSON, invalid UTF-8, or another JSON value. Counted as a
    /// skipped line.
    Skipped,
}
