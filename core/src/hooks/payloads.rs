//! What each agent CLI hands its hooks, read into one set of moments: the JSON on stdin
//! (the event's name in it, or on the command line for Copilot), and Codex's notify argument.

use super::*;

/// A moment of an agent CLI's session, with what Roundtable uses of it.
#[derive(Debug, Clone, PartialEq)]
pub enum HookEvent {
    SessionStarted {
        session_id: String,
        transcript: Option<String>,
        cwd: Option<String>,
        source: Option<String>,
    },
    /// Claude's and Codex's `UserPromptSubmit`, Gemini's `BeforeAgent`.
    PromptSubmitted { session_id: String },
    /// Claude's and Codex's `PostToolUse`, Gemini's `AfterTool`.
    ToolDone { session_id: String },
    Notification {
        session_id: String,
        message: String,
        kind: Option<String>,
    },
    PermissionRequest {
        session_id: String,
        tool: String,
        input: Value,
    },
    /// Claude's and Codex's `Stop`, Gemini's `AfterAgent`.
    TurnEnded {
        session_id: String,
        transcript: Option<String>,
        /// The turn follows a continuation a hook asked for.
        active: bool,
    },
    /// An event Roundtable does not act on.
    Other(String),
}

impl HookEvent {
    /// The session the event is about (empty when the input named none).
    pub fn session_id(&self) -> &str {
        match self {
            HookEvent::SessionStarted { session_id, .. }
            | HookEvent::PromptSubmitted { session_id }
            | HookEvent::ToolDone { session_id }
            | HookEvent::Notification { session_id, .. }
            | HookEvent::PermissionRequest { session_id, .. }
            | HookEvent::TurnEnded { session_id, .. } => session_id,
            HookEvent::Other(_) => "",
        }
    }
}

/// A hook's input: Claude Code's field names, which Codex, Gemini CLI and Roundtable's
/// OpenCode plugin share; GitHub Copilot CLI's camelCase names are read as the same fields.
#[derive(Debug, Default, Deserialize)]
pub(super) struct HookInput {
    #[serde(default)]
    hook_event_name: Option<String>,
    /// Antigravity CLI's `conversationId`.
    #[serde(default, alias = "sessionId", alias = "conversationId")]
    session_id: Option<String>,
    #[serde(default, alias = "transcriptPath")]
    transcript_path: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    /// Antigravity CLI's folders of the session, the first its working directory.
    #[serde(default, rename = "workspacePaths")]
    workspace_paths: Option<Vec<String>>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    notification_type: Option<String>,
    #[serde(default, alias = "toolName")]
    tool_name: Option<String>,
    /// Copilot's `toolInput` (a permission request) or `toolArgs` (other events), which
    /// some versions send as JSON in a string.
    #[serde(default, alias = "toolInput", alias = "toolArgs")]
    tool_input: Option<Value>,
    #[serde(default)]
    stop_hook_active: Option<bool>,
}

/// Antigravity CLI's name for a moment, as the name Claude Code gives it: `PreInvocation`
/// (before each model call: a prompt's start, and after each tool) hands over messages as
/// a prompt's start does.
pub(super) fn antigravity_event(name: &str) -> &str {
    match name {
        "PreInvocation" => "UserPromptSubmit",
        other => other,
    }
}

/// GitHub Copilot CLI's name for a moment, as the name Claude Code gives it (Copilot's
/// PascalCase hooks use those names already).
pub(super) fn copilot_event(name: &str) -> &str {
    match name {
        "sessionStart" => "SessionStart",
        "userPromptSubmitted" => "UserPromptSubmit",
        "postToolUse" => "PostToolUse",
        "permissionRequest" => "PermissionRequest",
        "agentStop" => "Stop",
        other => other,
    }
}

/// Reads a hook's stdin as `cli` writes it; `event` (from the command line) is used when
/// the input does not name its event.
pub fn parse(cli: AgentCli, input: &[u8], event: Option<&str>) -> Result<HookEvent, HookError> {
    if input.len() > MAX_INPUT {
        return Err(HookError::TooLarge);
    }
    let parsed: HookInput =
        serde_json::from_slice(input).map_err(|error| HookError::NotJson(error.to_string()))?;
    let name = parsed
        .hook_event_name
        .clone()
        .or_else(|| event.map(str::to_owned))
        .unwrap_or_default();
    let name = match cli {
        AgentCli::Copilot => copilot_event(&name).to_owned(),
        AgentCli::Antigravity => antigravity_event(&name).to_owned(),
        _ => name,
    };
    let cwd = parsed
        .cwd
        .clone()
        .or_else(|| parsed.workspace_paths.as_ref()?.first().cloned());
    let session_id = parsed.session_id.clone().unwrap_or_default();
    let gemini = cli == AgentCli::Gemini;
    Ok(match name.as_str() {
        "SessionStart" => HookEvent::SessionStarted {
            session_id,
            transcript: parsed.transcript_path,
            cwd,
            source: parsed.source,
        },
        "UserPromptSubmit" if !gemini => HookEvent::PromptSubmitted { session_id },
        "BeforeAgent" if gemini => HookEvent::PromptSubmitted { session_id },
        "PostToolUse" if !gemini => HookEvent::ToolDone { session_id },
        "AfterTool" if gemini => HookEvent::ToolDone { session_id },
        "Notification" if cli == AgentCli::Claude => HookEvent::Notification {
            session_id,
            message: parsed.message.unwrap_or_default(),
            kind: parsed.notification_type,
        },
        "PermissionRequest" if !gemini => HookEvent::PermissionRequest {
            session_id,
            tool: parsed.tool_name.unwrap_or_default(),
            input: match parsed.tool_input {
                Some(Value::String(text)) => {
                    serde_json::from_str(&text).unwrap_or(Value::String(text))
                }
                input => input.unwrap_or(Value::Null),
            },
        },
        "Stop" if !gemini => HookEvent::TurnEnded {
            session_id,
            transcript: parsed.transcript_path,
            active: parsed.stop_hook_active.unwrap_or(false),
        },
        "AfterAgent" if gemini => HookEvent::TurnEnded {
            session_id,
            transcript: parsed.transcript_path,
            active: parsed.stop_hook_active.unwrap_or(false),
        },
        other => HookEvent::Other(other.to_owned()),
    })
}

/// Codex's `notify` payload (the JSON appended as the last argument).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CodexNotify {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(rename = "thread-id", default)]
    pub thread: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(rename = "last-assistant-message", default)]
    pub last_message: Option<String>,
    /// Every user message of the thread so far.
    #[serde(rename = "input-messages", default)]
    pub input_messages: Vec<String>,
}

impl CodexNotify {
    /// A thread the person never sees: the TUI's own title-generation turns, which Codex
    /// also reports.
    pub fn is_hidden_thread(&self) -> bool {
        self.input_messages
            .first()
            .is_some_and(|first| first.starts_with("Generate a concise, single-line task title"))
    }
}

/// Reads Codex's `notify` argument.
pub fn parse_codex_notify(argument: &str) -> Result<CodexNotify, HookError> {
    if argument.len() > MAX_INPUT {
        return Err(HookError::TooLarge);
    }
    serde_json::from_str(argument).map_err(|error| HookError::NotJson(error.to_string()))
}
