//! What an ACP agent says, in Roundtable's terms: its messages (JSON-RPC 2.0, one per
//! line) read into [`Incoming`], and a session's updates into [`Update`]s — the reply's
//! text, the plan as a task list, the files a tool call touches, the tokens spent — and a
//! permission request into a question with the agent's own options. Pure: bytes in, values
//! out. The agent is another program: a field of an unexpected kind reads as absent, an
//! update of a kind not known here is [`Update::Other`], and nothing it sends fails more
//! than its own line.

use serde_json::Value;

use crate::log_events::{TaskItem, TaskStatus, TokenCounts};
use crate::work::paths;

/// The ACP version Roundtable speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// One message from the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to one of our requests.
    Response {
        id: u64,
        result: Result<Value, RpcError>,
    },
    /// A request of the agent's, which must be answered (`session/request_permission`, or
    /// a file or terminal request, which Roundtable declines: it offers neither).
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification (`session/update`).
    Notification { method: String, params: Value },
}

/// A JSON-RPC error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// Why a line is not a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("a JSON-RPC message names a method, or answers an id of ours")]
    NotAMessage,
}

/// Reads one line the agent wrote.
pub fn read_line(line: &[u8]) -> Result<Incoming, LineError> {
    let value: Value =
        serde_json::from_slice(line).map_err(|error| LineError::NotJson(error.to_string()))?;
    let method = value["method"].as_str().map(str::to_owned);
    let has_id = value.get("id").is_some_and(|id| !id.is_null());
    match method {
        Some(method) if has_id => Ok(Incoming::Request {
            id: value["id"].clone(),
            method,
            params: value.get("params").cloned().unwrap_or(Value::Null),
        }),
        Some(method) => Ok(Incoming::Notification {
            method,
            params: value.get("params").cloned().unwrap_or(Value::Null),
        }),
        None => {
            let id = value["id"].as_u64().ok_or(LineError::NotAMessage)?;
            let result = match value.get("error") {
                Some(error) if !error.is_null() => Err(RpcError {
                    code: error["code"].as_i64().unwrap_or(0),
                    message: error["message"]
                        .as_str()
                        .unwrap_or("the agent refused")
                        .to_owned(),
                }),
                _ => Ok(value.get("result").cloned().unwrap_or(Value::Null)),
            };
            Ok(Incoming::Response { id, result })
        }
    }
}

/// One thing a session's `session/update` says.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// Text of the agent's reply (chunks, in order).
    Message(String),
    /// The agent's whole plan, replacing the last.
    Plan(Vec<TaskItem>),
    /// A tool call started or changed: the files it names (locations and diffs, resolved
    /// against the session's directory), and whether it completed.
    ToolCall {
        id: String,
        files: Vec<String>,
        edits: bool,
        completed: bool,
    },
    /// How much of the context window is used (not what was spent).
    Context { used: u64, size: u64 },
    /// Anything else (thoughts, commands, modes, the user's own chunks).
    Other(String),
}

/// Reads a `session/update`'s `params`: the session it is about and what it says; `cwd`
/// resolves relative paths.
pub fn read_update(params: &Value, cwd: &str) -> Option<(String, Update)> {
    let session = params["sessionId"].as_str()?.to_owned();
    let update = &params["update"];
    let kind = update["sessionUpdate"].as_str().unwrap_or_default();
    let read = match kind {
        "agent_message_chunk" => Update::Message(text_of(&update["content"])),
        "plan" => Update::Plan(plan(&update["entries"])),
        "tool_call" | "tool_call_update" => {
            let files = files_of(update, cwd);
            Update::ToolCall {
                id: update["toolCallId"].as_str().unwrap_or_default().to_owned(),
                edits: update["kind"]
                    .as_str()
                    .is_some_and(|kind| matches!(kind, "edit" | "delete" | "move"))
                    || has_diff(update),
                files,
                completed: update["status"] == "completed",
            }
        }
        "usage_update" => Update::Context {
            used: update["used"].as_u64().unwrap_or(0),
            size: update["size"].as_u64().unwrap_or(0),
        },
        other => Update::Other(other.to_owned()),
    };
    Some((session, read))
}

/// The text of a content block (`{"type": "text", "text"}`); other kinds give nothing.
fn text_of(content: &Value) -> String {
    match content["type"].as_str() {
        Some("text") | None => content["text"].as_str().unwrap_or_default().to_owned(),
        Some(_) => String::new(),
    }
}

/// A plan's entries (`{content, priority, status}`) as a task list; an entry without text
/// is left out, a status not known here reads as pending.
fn plan(entries: &Value) -> Vec<TaskItem> {
    entries
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|entry| {
            let title = entry["content"].as_str()?.trim();
            (!title.is_empty()).then(|| TaskItem {
                id: None,
                title: title.to_owned(),
                status: match entry["status"].as_str() {
                    Some("in_progress") => TaskStatus::InProgress,
                    Some("completed") => TaskStatus::Completed,
                    _ => TaskStatus::Pending,
                },
                active_form: None,
            })
        })
        .collect()
}

fn has_diff(update: &Value) -> bool {
    update["content"]
        .as_array()
        .is_some_and(|content| content.iter().any(|block| block["type"] == "diff"))
}

/// The files a tool call names: its `locations[].path` and its diffs' `path`, each once.
fn files_of(update: &Value, cwd: &str) -> Vec<String> {
    let locations = update["locations"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let diffs = update["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut files: Vec<String> = Vec::new();
    let named = locations
        .iter()
        .filter_map(|location| location["path"].as_str())
        .chain(
            diffs
                .iter()
                .filter(|block| block["type"] == "diff")
                .filter_map(|block| block["path"].as_str()),
        );
    for path in named.filter(|path| !path.is_empty()) {
        let path = paths::resolve(Some(cwd), path);
        if !files.contains(&path) {
            files.push(path);
        }
    }
    files
}

/// A turn's end, from `session/prompt`'s result: why it stopped, and the tokens it spent
/// when the agent says so in a way that can be read without guessing (see [`turn_tokens`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    pub stop_reason: String,
    pub tokens: Option<TokenCounts>,
}

pub fn read_turn_end(result: &Value) -> TurnEnd {
    TurnEnd {
        stop_reason: result["stopReason"]
            .as_str()
            .unwrap_or("end_turn")
            .to_owned(),
        tokens: turn_tokens(&result["usage"]),
    }
}

/// A prompt's `usage`, in Roundtable's terms (input without the cache's tokens). Agents
/// disagree on what ACP's `inputTokens` holds: with the cache's tokens (GitHub Copilot CLI
/// 1.0.102), or without them (codex-acp 2.6.0, OpenCode); and `thoughtTokens` is inside
/// `outputTokens` for some, beside it for others. `totalTokens` says which: it is the sum of
/// what was counted once. With no total, or one that adds up no way, the tokens are not
/// read (the session stays unpriced rather than priced wrong).
fn turn_tokens(usage: &Value) -> Option<TokenCounts> {
    let count = |key: &str| usage[key].as_u64().unwrap_or(0);
    let total = usage["totalTokens"].as_u64()?;
    let (input, output, thought) = (
        count("inputTokens"),
        count("outputTokens"),
        count("thoughtTokens"),
    );
    let (cache_read, cache_write) = (count("cachedReadTokens"), count("cachedWriteTokens"));
    let cached = cache_read.saturating_add(cache_write);
    let counted = input.saturating_add(output);
    let (uncached, output) = if total == counted {
        (input.checked_sub(cached)?, output)
    } else if total == counted.saturating_add(thought) {
        (input.checked_sub(cached)?, output.saturating_add(thought))
    } else if total == counted.saturating_add(cached) {
        (input, output)
    } else if total == counted.saturating_add(cached).saturating_add(thought) {
        (input, output.saturating_add(thought))
    } else {
        return None;
    };
    Some(TokenCounts {
        input: uncached,
        output,
        cache_write_5m: cache_write,
        cache_write_1h: 0,
        cache_read,
    })
}

/// The model a session uses, from `session/new`'s or `session/load`'s result: its
/// `models.currentModelId`, else the current value of its configuration option of the
/// `model` category.
pub fn session_model(result: &Value) -> Option<String> {
    let current = result["models"]["currentModelId"].as_str().or_else(|| {
        result["configOptions"]
            .as_array()?
            .iter()
            .find(|option| option["category"] == "model")?["currentValue"]
            .as_str()
    })?;
    (!current.is_empty()).then(|| current.to_owned())
}

/// A permission the agent asks for, as a question for the person.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAsked {
    pub session: String,
    /// What the tool call is (its title, else its kind), for the question.
    pub what: String,
    /// The agent's options: their id and the name to show.
    pub options: Vec<(String, String)>,
}

pub fn read_permission(params: &Value) -> Option<PermissionAsked> {
    let session = params["sessionId"].as_str()?.to_owned();
    let call = &params["toolCall"];
    let what = call["title"]
        .as_str()
        .or_else(|| call["kind"].as_str())
        .unwrap_or("a tool call")
        .to_owned();
    let options: Vec<(String, String)> = params["options"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|option| {
            let id = option["optionId"].as_str()?;
            let name = option["name"].as_str().unwrap_or(id);
            Some((id.to_owned(), name.to_owned()))
        })
        .collect();
    (!options.is_empty()).then_some(PermissionAsked {
        session,
        what,
        options,
    })
}
