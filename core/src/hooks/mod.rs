//! Agent CLI hooks: what `roundtable hook claude|codex|gemini|opencode|copilot` does when an
//! agent CLI calls it. The CLIs name their moments differently and say the same
//! things (a session started, a prompt was submitted, a tool ran, a turn ended); each is read
//! into one [`HookEvent`] and answered in the CLI's own format.
//!
//! A hook runs at every turn of a session, so it must be quick, and it must never fail or
//! stall the session: when the hub is down it does what it can locally and lets the
//! session go on. Its writes (a status, a ping) reach the hub through a running process on
//! the agent's profile (its MCP bridge) when there is one, else by itself. So do its reads:
//! the messages it hands over are the cache's, which a running bridge keeps in step with the
//! hub; with none in step (no bridge runs: `claude --strict-mcp-config`, a bridge that could
//! not start, or one still catching up), the hook catches up with the hub itself first,
//! for at most [`CATCH_UP_PATIENCE`] ([`Core::catch_up`]).
//!
//! - A session starting is claimed for its agent and bound (id, transcript, directory).
//! - A prompt submitted gets the agent's unread messages added to its context; so does every
//!   tool that ends mid-turn, so a mention reaches a working agent at its next tool boundary.
//! - A notification (Claude: a permission prompt, an idle prompt) raises a ping for the
//!   agent's person and says the agent waits for a human.
//! - A permission request asks the person (a ping with Allow and Deny) and answers the CLI
//!   with the decision; after the configured wait it lets the terminal ask instead.
//! - A turn ending with messages for the agent unread continues with them (the stop is
//!   blocked with them as the reason), so agents prompt each other with no person in the
//!   path. A Claude Code session a person sits at then listens for messages for a while, and
//!   stops listening the moment the person types (Claude writes the typed prompt to the
//!   transcript as a `queue-operation` at once); a run with no person (`claude -p`) does not
//!   listen unless asked. A Codex session waits for nothing: its turn ends at once, and a
//!   watcher of its own ([`Core::wake_codex`]) hands messages that arrive later to the idle
//!   session through Codex's queue.
//! - Codex's `notify` (a turn completed; onboarding before hooks) binds the thread and says
//!   the agent is idle.
//!
//! Parsing is pure ([`parse`], [`parse_codex_notify`]); [`Core::on_hook`] and
//! [`Core::on_codex_notify`] act.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roundtable_protocol::bodies::AgentState;
use serde::Deserialize;
use serde_json::{Value, json};

mod codex_wake;

pub use codex_wake::*;

use crate::agent_work::HumanAnswer;
use crate::cache::MessageView;
use crate::local_agents::AgentCli;
use crate::{Core, CoreError, now_ms};

/// The largest hook input read: a hook's JSON is small, a tool input can be large.
pub const MAX_INPUT: usize = 4 * 1024 * 1024;

/// How long a write waits for the hub within a hook before it stays queued.
const WRITE_PATIENCE: Duration = Duration::from_secs(3);

/// How long a hook with nothing keeping the agent's cache in step waits for its own sync
/// to catch up before it answers from what the cache holds (the hub is slow or down).
pub const CATCH_UP_PATIENCE: Duration = Duration::from_millis(2500);

/// How often a listening hook looks at its transcript for the person's typing.
const TYPING_CHECK: Duration = Duration::from_millis(100);

/// How a hook behaves; kept in the agent's profile (`hooks.toml`), with defaults.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct HookSettings {
    /// How long a finished turn listens for messages before the session rests.
    pub listen_s: u64,
    /// How long a permission request waits for the person before the terminal asks.
    pub permission_wait_s: u64,
    /// Whether a run with no person at it (`claude -p`) listens too; also asked for with
    /// `ROUNDTABLE_LISTEN=1` in its environment.
    pub listen_unattended: bool,
}

impl Default for HookSettings {
    fn default() -> HookSettings {
        HookSettings {
            listen_s: 600,
            permission_wait_s: 120,
            listen_unattended: false,
        }
    }
}

impl HookSettings {
    /// The settings in the agent's profile directory, or the defaults; an unreadable file
    /// is reported and the defaults used (a hook never fails a session).
    pub fn load(profile_dir: &std::path::Path) -> HookSettings {
        let path = profile_dir.join("hooks.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).unwrap_or_else(|error| {
                tracing::warn!(%error, path = %path.display(), "unreadable hook settings; using the defaults");
                HookSettings::default()
            }),
            Err(_) => HookSettings::default(),
        }
    }

    /// Writes the settings into the agent's profile directory.
    pub fn save(&self, profile_dir: &std::path::Path) -> Result<(), crate::profile::ProfileError> {
        let text = toml::to_string(self).expect("hook settings serialize");
        crate::profile::write_private(&profile_dir.join("hooks.toml"), &text)
    }
}

/// Why a hook's input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("the hook's input is not JSON: {0}")]
    NotJson(String),
    #[error("the hook's input is larger than {MAX_INPUT} bytes")]
    TooLarge,
}

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
struct HookInput {
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
fn antigravity_event(name: &str) -> &str {
    match name {
        "PreInvocation" => "UserPromptSubmit",
        other => other,
    }
}

/// GitHub Copilot CLI's name for a moment, as the name Claude Code gives it (Copilot's
/// PascalCase hooks use those names already).
fn copilot_event(name: &str) -> &str {
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

/// Where a hook runs: what of its session the CLI's environment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookContext {
    pub cli: AgentCli,
    /// Whether a person sits at the session (`None`: the CLI does not say).
    pub attended: Option<bool>,
    /// Listening was asked for (`ROUNDTABLE_LISTEN=1`) whoever sits at the session.
    pub listen_asked: bool,
    /// The room whose messages the session answers, when `roundtable run` started it for
    /// one ([`crate::runner::ROOM_ENV`]): other rooms' messages are not handed to it.
    pub room: Option<String>,
    /// The CLI runs every tool without asking anyone (Copilot's `--allow-all-tools`).
    pub tools_allowed: bool,
}

impl HookContext {
    /// What the environment says besides whether a person sits at the session.
    pub fn from_env(
        cli: AgentCli,
        attended: Option<bool>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> HookContext {
        HookContext {
            cli,
            attended,
            listen_asked: env("ROUNDTABLE_LISTEN").as_deref() == Some("1"),
            room: env(crate::runner::RUNNER_ENV).and_then(|_| env(crate::runner::ROOM_ENV)),
            tools_allowed: false,
        }
    }

    /// What GitHub Copilot CLI's command line (`argv`, its program's arguments, when the
    /// hook found it among its ancestors) and environment say: `-p` or a runner's turn has
    /// no person at it; `--allow-all-tools`, `--allow-all`, `--yolo` or `COPILOT_ALLOW_ALL`
    /// run every tool without asking.
    pub fn copilot(argv: Option<&[String]>, env: &dyn Fn(&str) -> Option<String>) -> HookContext {
        let has = |names: &[&str]| {
            argv.is_some_and(|argv| {
                argv.iter().any(|word| {
                    names.iter().any(|name| {
                        word == name
                            || word
                                .strip_prefix(name)
                                .is_some_and(|rest| rest.starts_with('='))
                    })
                })
            })
        };
        let unattended = env(crate::runner::RUNNER_ENV).is_some() || has(&["-p", "--prompt"]);
        let attended = if unattended {
            Some(false)
        } else {
            argv.map(|_| true)
        };
        let allow_all = env("COPILOT_ALLOW_ALL")
            .is_some_and(|value| !matches!(value.trim(), "" | "0" | "false"));
        HookContext {
            tools_allowed: allow_all || has(&["--allow-all-tools", "--allow-all", "--yolo"]),
            ..HookContext::from_env(AgentCli::Copilot, attended, env)
        }
    }

    /// What Claude Code's environment says: `CLAUDE_CODE_SESSION_ATTENDED` is `1` when a
    /// person sits at the session and `0` for `claude -p` and SDK runs; older versions say
    /// it with `CLAUDE_CODE_ENTRYPOINT` (`cli` for the terminal, `sdk-…` otherwise).
    pub fn claude(env: &dyn Fn(&str) -> Option<String>) -> HookContext {
        let attended = match env("CLAUDE_CODE_SESSION_ATTENDED").as_deref() {
            Some("1") => Some(true),
            Some("0") => Some(false),
            _ => env("CLAUDE_CODE_ENTRYPOINT").map(|entry| entry == "cli"),
        };
        HookContext::from_env(AgentCli::Claude, attended, env)
    }
}

/// What a hook answers its agent CLI.
#[derive(Debug, Clone, PartialEq)]
pub enum HookReply {
    /// Nothing: the session goes on as it would have.
    Nothing,
    /// Text added to the model's context.
    Context(String),
    /// Do not stop: go on with this (a turn's end).
    Block(String),
    /// The person allowed the tool call.
    Allow,
    /// The person denied it; the message says why.
    Deny(String),
}

impl HookReply {
    /// What to print on stdout for `cli`, at `event` (its own name for it); nothing for
    /// [`HookReply::Nothing`]. Claude Code, Codex and Gemini CLI read the same shapes;
    /// GitHub Copilot CLI reads flat ones (it ignores `hookSpecificOutput` but for
    /// `preToolUse`, checked against 1.0.102).
    pub fn stdout_for(&self, cli: AgentCli, event: &str) -> Option<String> {
        if cli == AgentCli::Antigravity {
            return Some(self.antigravity(event));
        }
        if cli != AgentCli::Copilot {
            return self.stdout(event);
        }
        match self {
            HookReply::Nothing => None,
            HookReply::Context(text) => Some(json!({"additionalContext": text}).to_string()),
            HookReply::Block(reason) => {
                Some(json!({"decision": "block", "reason": reason}).to_string())
            }
            HookReply::Allow => Some(json!({"behavior": "allow"}).to_string()),
            HookReply::Deny(message) => {
                Some(json!({"behavior": "deny", "message": message}).to_string())
            }
        }
    }

    /// Antigravity CLI's answer, from its documentation: context as an ephemeral message
    /// injected before the model call, a stop continued with `decision: continue`. Always
    /// JSON (its hooks may read anything else as a failure), `decision` always given at a
    /// stop (its documentation says it is required).
    fn antigravity(&self, event: &str) -> String {
        match (self, event) {
            (HookReply::Context(text), _) => {
                json!({"injectSteps": [{"ephemeralMessage": text}]}).to_string()
            }
            (HookReply::Block(reason), _) => {
                json!({"decision": "continue", "reason": reason}).to_string()
            }
            (_, "Stop") => json!({"decision": "stop"}).to_string(),
            _ => "{}".to_owned(),
        }
    }

    /// What to print on stdout for Claude Code, Codex, Gemini CLI and Roundtable's OpenCode
    /// plugin, at `event` (the CLI's own name for it); nothing for [`HookReply::Nothing`].
    pub fn stdout(&self, event: &str) -> Option<String> {
        match self {
            HookReply::Nothing => None,
            HookReply::Context(text) => Some(
                json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})
                    .to_string(),
            ),
            HookReply::Block(reason) => {
                Some(json!({"decision": "block", "reason": reason}).to_string())
            }
            HookReply::Allow => Some(
                json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                       "decision": {"behavior": "allow"}}})
                .to_string(),
            ),
            HookReply::Deny(message) => Some(
                json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                       "decision": {"behavior": "deny", "message": message}}})
                .to_string(),
            ),
        }
    }
}

/// Messages as the model reads them: who wrote, where, what (see [`crate::room_text`]).
pub fn render_messages(messages: &[MessageView], rooms: &[crate::cache::RoomView]) -> String {
    let mut text = String::from("New Roundtable messages for you.\n");
    text.push_str(&crate::room_text::messages_block(messages.iter().map(
        |message| {
            let room = rooms
                .iter()
                .find(|room| room.id == message.room)
                .map_or(message.room.as_str(), |room| room.label());
            (message, room)
        },
    )));
    text.push_str(
        "Answer with the Roundtable tools (send_message, mentioning who you answer), then go on.",
    );
    text
}

/// Whether lines appended to a Claude Code transcript show the person typed a prompt: Claude
/// writes it as a `queue-operation` `enqueue` the moment it is submitted, while a hook runs.
/// Only whole lines count. Pure.
pub fn person_typed(appended: &[u8]) -> bool {
    let whole = match appended.iter().rposition(|&b| b == b'\n') {
        Some(end) => &appended[..end],
        None => return false,
    };
    whole.split(|&b| b == b'\n').any(|line| {
        serde_json::from_slice::<Value>(line).is_ok_and(|record| {
            record["type"] == "queue-operation" && record["operation"] == "enqueue"
        })
    })
}

/// Waits until the person types into the session whose transcript is `path` (after its
/// first `from` bytes); never returns when there is no transcript to watch.
async fn person_types(path: Option<PathBuf>, from: u64) {
    appended_until(path, from, person_typed).await
}

/// Waits until what was appended to `path` after its first `from` bytes `says` so, looking
/// whenever the file grew; never returns without a file to watch.
async fn appended_until(path: Option<PathBuf>, from: u64, says: fn(&[u8]) -> bool) {
    let Some(path) = path else {
        return std::future::pending().await;
    };
    let mut seen = from;
    loop {
        tokio::time::sleep(TYPING_CHECK).await;
        let Ok(metadata) = tokio::fs::metadata(&path).await else {
            continue;
        };
        if metadata.len() <= seen {
            continue;
        }
        if read_range(&path, from)
            .await
            .is_ok_and(|bytes| says(&bytes))
        {
            return;
        }
        seen = metadata.len();
    }
}

async fn read_range(path: &Path, from: u64) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(std::io::SeekFrom::Start(from)).await?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT as u64).read_to_end(&mut bytes).await?;
    Ok(bytes)
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

/// Whether `tool` (as `cli` names it in a permission request) is one of Roundtable's own
/// MCP server's: the agent was onboarded to use them, and asking its person each time it
/// reads or sends a message would only be in the way.
fn is_roundtable_tool(cli: AgentCli, tool: &str) -> bool {
    use crate::local_agents::edits::SERVER_NAME;
    match cli {
        AgentCli::Claude => tool
            .strip_prefix("mcp__")
            .and_then(|rest| rest.strip_prefix(SERVER_NAME))
            .is_some_and(|rest| rest.starts_with("__")),
        // `SERVER/TOOL` in a permission request (`SERVER-TOOL` elsewhere).
        AgentCli::Copilot => tool
            .strip_prefix(SERVER_NAME)
            .is_some_and(|rest| rest.starts_with('/')),
        _ => false,
    }
}

/// A short description of a tool call for a person: the command, the file, or the input.
fn describe_call(tool: &str, input: &Value) -> String {
    let detail = input["command"]
        .as_str()
        .or_else(|| input["file_path"].as_str())
        .or_else(|| input["path"].as_str())
        .or_else(|| input["url"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| {
            let mut text = input.to_string();
            if text.len() > 300 {
                let mut cut = 300;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push('…');
            }
            text
        });
    format!("{tool}: {detail}")
}

impl Core {
    /// Acts on a hook and says what to answer it. Never fails: what cannot be done (the hub
    /// down, the profile's home room unknown) is logged and skipped.
    pub async fn on_hook(
        &self,
        event: HookEvent,
        context: &HookContext,
        settings: &HookSettings,
    ) -> HookReply {
        match self.hook(event, context, settings).await {
            Ok(reply) => reply,
            Err(error) => {
                tracing::warn!(%error, "the hook could not do its work; the session goes on");
                HookReply::Nothing
            }
        }
    }

    /// Brings the cache up to date before a hook hands messages over, when no process on
    /// the profile keeps it so: a running process that serves hand-offs (the MCP bridge,
    /// the desktop app) and is in step with the hub already has everything there is, and
    /// the hook reads at once. Otherwise (none runs, or it is catching up or offline) the
    /// hook syncs itself, waiting at most [`CATCH_UP_PATIENCE`]; the hub down, it goes on
    /// with the cache as it is. Returns the hook's own sync, to stop once it has answered
    /// (stopping tells the hub what the hook marked read).
    pub async fn catch_up(&self) -> Option<crate::SyncHandle> {
        if self.is_syncing() {
            return None;
        }
        if crate::hand_off::serving_state(&self.shared.lock).await == Some(crate::SyncState::Idle) {
            return None;
        }
        let sync = self.start();
        if let Err(error) = self.synced(CATCH_UP_PATIENCE).await {
            tracing::debug!(%error, "the hook answers from the cache as it is");
        }
        Some(sync)
    }

    /// What the session is to be told now: the unread messages for us (of `room` only, if
    /// given), then the overlaps it has not been told of.
    async fn to_tell(&self, room: Option<&str>) -> Result<Vec<String>, CoreError> {
        let unread = self.unread_rendered(room).await?;
        let told = self.overlap_notice(now_ms()).await?;
        Ok(unread.into_iter().chain(told).collect())
    }

    /// The unread messages for us (of `room` only, if given), rendered, if any.
    async fn unread_rendered(&self, room: Option<&str>) -> Result<Option<String>, CoreError> {
        let messages = self.read_messages(room).await?;
        if messages.is_empty() {
            return Ok(None);
        }
        let rooms = self.rooms().await?;
        Ok(Some(render_messages(&messages, &rooms)))
    }

    async fn hook(
        &self,
        event: HookEvent,
        context: &HookContext,
        settings: &HookSettings,
    ) -> Result<HookReply, CoreError> {
        match event {
            HookEvent::SessionStarted {
                session_id,
                transcript,
                cwd,
                source,
            } => {
                self.bind_session(
                    context.cli.framework(),
                    &session_id,
                    transcript.as_deref(),
                    cwd.as_deref(),
                )
                .await?;
                let detail = format!(
                    "{} session {} ({})",
                    context.cli.display_name(),
                    short(&session_id),
                    source.as_deref().unwrap_or("startup")
                );
                self.status_now(AgentState::Working, &detail).await;
                Ok(HookReply::Context(format!(
                    "You are {} on Roundtable, where you meet other agents and your person. \
                     Use the roundtable tools to read and send messages.",
                    self.profile().handle
                )))
            }
            HookEvent::PromptSubmitted { .. } | HookEvent::ToolDone { .. } => {
                let caught_up = self.catch_up().await;
                let said = self.to_tell(context.room.as_deref()).await;
                if let Some(sync) = caught_up {
                    sync.stop().await;
                }
                let context = said?;
                Ok(if context.is_empty() {
                    HookReply::Nothing
                } else {
                    HookReply::Context(context.join("\n\n"))
                })
            }
            HookEvent::Notification {
                session_id,
                message,
                kind,
            } => {
                self.status_now(AgentState::WaitingHuman, &message).await;
                let key = format!("{}-{}", short(&session_id), now_ms());
                let question = forwarded(&format!(
                    "{} ({}): {message}",
                    self.profile().handle,
                    kind.as_deref().unwrap_or("notification")
                ));
                let room = self.home_room().await?;
                let raised = tokio::time::timeout(
                    WRITE_PATIENCE,
                    self.raise_ping(&room, &question, &[], Duration::from_secs(3600), Some(&key)),
                )
                .await;
                if !matches!(raised, Ok(Ok(_))) {
                    tracing::warn!("the notification's ping could not reach the hub now");
                }
                Ok(HookReply::Nothing)
            }
            HookEvent::PermissionRequest {
                session_id,
                tool,
                input,
            } => {
                if is_roundtable_tool(context.cli, &tool) {
                    return Ok(HookReply::Allow);
                }
                // Copilot asks its hook before its own rules: a tool its rules allow, or
                // one a person at the terminal will be asked about, is left to it.
                if context.cli == AgentCli::Copilot
                    && (context.tools_allowed || context.attended != Some(false))
                {
                    return Ok(HookReply::Nothing);
                }
                let wait = Duration::from_secs(settings.permission_wait_s);
                let sync = self.start();
                if self.synced(WRITE_PATIENCE).await.is_err() {
                    // The hub is down: the terminal asks, as it would have.
                    return Ok(HookReply::Nothing);
                }
                let room = self.home_room().await?;
                let question = forwarded(&format!(
                    "{} asks permission for {}",
                    self.profile().handle,
                    describe_call(&tool, &input)
                ));
                let key = format!("{}-{}", short(&session_id), now_ms());
                let options = ["Allow".to_owned(), "Deny".to_owned()];
                let ping = self
                    .raise_ping(&room, &question, &options, wait, Some(&key))
                    .await?;
                self.status_now(AgentState::WaitingHuman, &question).await;
                let answer = self.await_answer(&room, &ping, wait).await?;
                sync.stop().await;
                Ok(match answer {
                    HumanAnswer::Yes {
                        choice, by, text, ..
                    } => {
                        if choice.as_deref() == Some("Allow") {
                            HookReply::Allow
                        } else {
                            HookReply::Deny(format!(
                                "denied by {} on Roundtable{}",
                                by.as_deref().unwrap_or("your person"),
                                text.map(|text| format!(": {text}")).unwrap_or_default()
                            ))
                        }
                    }
                    HumanAnswer::TimedOut { .. } => HookReply::Nothing,
                })
            }
            HookEvent::TurnEnded { transcript, .. } => {
                let caught_up = self.catch_up().await;
                match self.to_tell(context.room.as_deref()).await {
                    Ok(said) if said.is_empty() => {}
                    told => {
                        // Told (or failed): what it marked read reaches the hub as its own
                        // sync stops.
                        if let Some(sync) = caught_up {
                            sync.stop().await;
                        }
                        return told.map(|said| HookReply::Block(said.join("\n\n")));
                    }
                }
                // Listen for a while, where that holds no one up: a Claude Code session a
                // person sits at (until they type), or a run that asked for it. A Codex
                // turn ends at once: its waker listens instead ([`Core::wake_codex`]).
                let listens = context.cli != AgentCli::Codex
                    && (context.listen_asked
                        || settings.listen_unattended
                        || (context.cli == AgentCli::Claude && context.attended == Some(true)));
                if !listens || settings.listen_s == 0 {
                    self.status_now(AgentState::Idle, "turn ended").await;
                    if let Some(sync) = caught_up {
                        sync.stop().await;
                    }
                    return Ok(HookReply::Nothing);
                }
                // Listening needs a sync of this process's own, whose changes it hears.
                let sync = caught_up.unwrap_or_else(|| self.start());
                if self.synced(WRITE_PATIENCE).await.is_err() {
                    return Ok(HookReply::Nothing);
                }
                let transcript = transcript.map(PathBuf::from);
                let from = match &transcript {
                    Some(path) => tokio::fs::metadata(path).await.map_or(0, |m| m.len()),
                    None => 0,
                };
                let listen = Duration::from_secs(settings.listen_s);
                let filter = crate::wait_for::WaitFilter::MessagesFor {
                    principal: self.me().to_owned(),
                };
                // Waiting marks nothing read: only the branch that hands the messages over
                // does, so a person typing at the same moment loses none of them.
                let reply = tokio::select! {
                    arrived = self.wait_for(&filter, listen.min(crate::agent_work::LONGEST_WAIT)) => {
                        match arrived? {
                            crate::wait_for::Arrived::Messages { messages } if !messages.is_empty() => {
                                self.mark_read_through(&messages).await?;
                                let rooms = self.rooms().await?;
                                HookReply::Block(render_messages(&messages, &rooms))
                            }
                            _ => {
                                self.status_now(AgentState::Idle, "resting: no messages").await;
                                HookReply::Nothing
                            }
                        }
                    }
                    () = person_types(transcript, from) => {
                        self.status_now(AgentState::Idle, "the person took the turn").await;
                        HookReply::Nothing
                    }
                };
                sync.stop().await;
                Ok(reply)
            }
            HookEvent::Other(_) => Ok(HookReply::Nothing),
        }
    }

    /// Acts on Codex's `notify` (a turn completed): binds the thread, says the agent is
    /// idle. Never fails.
    pub async fn on_codex_notify(&self, notify: CodexNotify) {
        if let Some(thread) = &notify.thread
            && let Err(error) = self
                .bind_session("codex", thread, None, notify.cwd.as_deref())
                .await
        {
            tracing::warn!(%error, "cannot bind the Codex thread");
        }
        if notify.kind == "agent-turn-complete" {
            self.status_now(AgentState::Idle, "turn complete").await;
        }
    }

    /// Records a session of this agent (see [`crate::cache::SessionRow`]).
    pub async fn bind_session(
        &self,
        framework: &str,
        session_id: &str,
        transcript: Option<&str>,
        cwd: Option<&str>,
    ) -> Result<(), CoreError> {
        if session_id.is_empty() {
            return Ok(());
        }
        let (framework, session_id) = (framework.to_owned(), session_id.to_owned());
        let (transcript, cwd) = (transcript.map(str::to_owned), cwd.map(str::to_owned));
        self.write_job(move |cache| {
            cache.bind_session(
                &framework,
                &session_id,
                transcript.as_deref(),
                cwd.as_deref(),
                now_ms(),
            )
        })
        .await
    }

    /// Reports a status, waiting briefly for the hub (the write is handed to the running
    /// bridge, or sent by this process); it stays queued otherwise.
    async fn status_now(&self, state: AgentState, detail: &str) {
        let detail = forwarded(detail);
        let sent =
            tokio::time::timeout(WRITE_PATIENCE, self.set_status(state, Some(&detail), None)).await;
        if !matches!(sent, Ok(Ok(_))) {
            tracing::debug!("the status waits in the outbox");
        }
    }
}

/// What the agent CLI says (a notification, a tool's command), as the hub takes prose: a
/// control character in it (a command's escape sequence) is left out rather than make the
/// ping or the status be refused.
fn forwarded(text: &str) -> String {
    roundtable_protocol::text::cleaned(text, roundtable_protocol::text::Shape::Prose).into_owned()
}

/// The first eight characters of an id, for people and keys.
fn short(id: &str) -> &str {
    let end = id
        .char_indices()
        .nth(8)
        .map_or(id.len(), |(index, _)| index);
    &id[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_hooks_parse_from_their_real_payloads() {
        let start = br#"{"session_id":"c45af7b1-cb7c","transcript_path":"/root/.claude/projects/-w/c45.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup"}"#;
        assert_eq!(
            parse(AgentCli::Claude, start, None).unwrap(),
            HookEvent::SessionStarted {
                session_id: "c45af7b1-cb7c".into(),
                transcript: Some("/root/.claude/projects/-w/c45.jsonl".into()),
                cwd: Some("/w".into()),
                source: Some("startup".into()),
            }
        );
        // The event may come from the command line instead.
        let stop = br#"{"session_id":"s","cwd":"/w","stop_hook_active":true,"transcript_path":"/t.jsonl"}"#;
        assert_eq!(
            parse(AgentCli::Claude, stop, Some("Stop")).unwrap(),
            HookEvent::TurnEnded {
                session_id: "s".into(),
                transcript: Some("/t.jsonl".into()),
                active: true
            }
        );
        let permission = br#"{"hook_event_name":"PermissionRequest","session_id":"s","tool_name":"Bash","tool_input":{"command":"rm -rf target"}}"#;
        let HookEvent::PermissionRequest { tool, input, .. } =
            parse(AgentCli::Claude, permission, None).unwrap()
        else {
            panic!()
        };
        assert_eq!(describe_call(&tool, &input), "Bash: rm -rf target");
        let post = br#"{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Bash","tool_input":{},"tool_response":{"stdout":"hi"}}"#;
        assert_eq!(
            parse(AgentCli::Claude, post, None).unwrap(),
            HookEvent::ToolDone {
                session_id: "s".into()
            }
        );
        assert_eq!(
            parse(
                AgentCli::Claude,
                br#"{"hook_event_name":"PreCompact"}"#,
                None
            )
            .unwrap(),
            HookEvent::Other("PreCompact".into())
        );
        assert!(matches!(
            parse(AgentCli::Claude, b"not json", None),
            Err(HookError::NotJson(_))
        ));
    }

    #[test]
    fn codex_and_gemini_name_the_same_moments_their_own_way() {
        let codex_stop = br#"{"session_id":"t1","transcript_path":"/c/rollout.jsonl","cwd":"/w","hook_event_name":"Stop","model":"gpt-5.5","permission_mode":"default","turn_id":"u1","stop_hook_active":false,"last_assistant_message":"done"}"#;
        assert!(matches!(
            parse(AgentCli::Codex, codex_stop, None).unwrap(),
            HookEvent::TurnEnded { session_id, .. } if session_id == "t1"
        ));
        let after_agent = br#"{"session_id":"g1","transcript_path":"/g/chat.jsonl","cwd":"/w","hook_event_name":"AfterAgent","timestamp":"2026-12-02T03:00:00Z","prompt":"hi","prompt_response":"ok","stop_hook_active":false}"#;
        assert!(matches!(
            parse(AgentCli::Gemini, after_agent, None).unwrap(),
            HookEvent::TurnEnded { session_id, .. } if session_id == "g1"
        ));
        let before_agent = br#"{"session_id":"g1","hook_event_name":"BeforeAgent","prompt":"hi"}"#;
        assert!(matches!(
            parse(AgentCli::Gemini, before_agent, None).unwrap(),
            HookEvent::PromptSubmitted { .. }
        ));
        let after_tool = br#"{"session_id":"g1","hook_event_name":"AfterTool","tool_name":"write_file","tool_input":{},"tool_response":{"llmContent":"ok"}}"#;
        assert!(matches!(
            parse(AgentCli::Gemini, after_tool, None).unwrap(),
            HookEvent::ToolDone { .. }
        ));
        // A name of one CLI means nothing in another's input.
        assert!(matches!(
            parse(AgentCli::Gemini, br#"{"hook_event_name":"Stop"}"#, None).unwrap(),
            HookEvent::Other(_)
        ));
    }

    #[test]
    fn copilot_hooks_parse_from_their_real_payloads_with_the_event_from_the_command_line() {
        // GitHub Copilot CLI 1.0.102's camelCase payloads, which name no event.
        let start = br#"{"sessionId":"b07144cc-1074","timestamp":1796578729802,"cwd":"/p","source":"new","initialPrompt":"go"}"#;
        assert_eq!(
            parse(AgentCli::Copilot, start, Some("sessionStart")).unwrap(),
            HookEvent::SessionStarted {
                session_id: "b07144cc-1074".into(),
                transcript: None,
                cwd: Some("/p".into()),
                source: Some("new".into()),
            }
        );
        let prompt = br#"{"sessionId":"s","timestamp":1796578730092,"cwd":"/p","prompt":"go"}"#;
        assert_eq!(
            parse(AgentCli::Copilot, prompt, Some("userPromptSubmitted")).unwrap(),
            HookEvent::PromptSubmitted {
                session_id: "s".into()
            }
        );
        let post = br#"{"sessionId":"s","timestamp":1,"cwd":"/p","toolName":"bash","toolArgs":{"command":"echo hi"},"toolResult":{"resultType":"success","textResultForLlm":"hi"}}"#;
        assert_eq!(
            parse(AgentCli::Copilot, post, Some("postToolUse")).unwrap(),
            HookEvent::ToolDone {
                session_id: "s".into()
            }
        );
        let permission = br#"{"hookName":"permissionRequest","sessionId":"s","timestamp":1,"cwd":"/p","toolName":"edit","toolInput":{"path":"/p/a.rs","old_str":"a","new_str":"b"},"permissionSuggestions":[]}"#;
        let HookEvent::PermissionRequest { tool, input, .. } =
            parse(AgentCli::Copilot, permission, Some("permissionRequest")).unwrap()
        else {
            panic!()
        };
        assert_eq!(describe_call(&tool, &input), "edit: /p/a.rs");
        // Some versions send the arguments as JSON in a string.
        let stringly = br#"{"sessionId":"s","toolName":"bash","toolInput":"{\"command\":\"ls\"}"}"#;
        let HookEvent::PermissionRequest { tool, input, .. } =
            parse(AgentCli::Copilot, stringly, Some("permissionRequest")).unwrap()
        else {
            panic!()
        };
        assert_eq!(describe_call(&tool, &input), "bash: ls");
        let stop = br#"{"sessionId":"s","timestamp":1,"cwd":"/p","transcriptPath":"/h/.copilot/session-state/s/events.jsonl","stopReason":"end_turn","stop_hook_active":true}"#;
        assert_eq!(
            parse(AgentCli::Copilot, stop, Some("agentStop")).unwrap(),
            HookEvent::TurnEnded {
                session_id: "s".into(),
                transcript: Some("/h/.copilot/session-state/s/events.jsonl".into()),
                active: true,
            }
        );
        // Its PascalCase hooks name their event, as Claude Code's do.
        let pascal = br#"{"hook_event_name":"Stop","session_id":"s","stop_hook_active":false}"#;
        assert!(matches!(
            parse(AgentCli::Copilot, pascal, None).unwrap(),
            HookEvent::TurnEnded { .. }
        ));
        assert!(matches!(
            parse(
                AgentCli::Copilot,
                br#"{"sessionId":"s"}"#,
                Some("sessionEnd")
            )
            .unwrap(),
            HookEvent::Other(_)
        ));
        // Its answers are flat.
        let context: Value = serde_json::from_str(
            &HookReply::Context("hi".into())
                .stdout_for(AgentCli::Copilot, "postToolUse")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(context, json!({"additionalContext": "hi"}));
        let deny: Value = serde_json::from_str(
            &HookReply::Deny("no".into())
                .stdout_for(AgentCli::Copilot, "permissionRequest")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(deny, json!({"behavior": "deny", "message": "no"}));
        // Roundtable's own tools are its agent's to use.
        assert!(is_roundtable_tool(
            AgentCli::Copilot,
            "roundtable/send_message"
        ));
        assert!(!is_roundtable_tool(AgentCli::Copilot, "roundtablex/send"));
        assert!(!is_roundtable_tool(AgentCli::Copilot, "bash"));
        assert!(is_roundtable_tool(
            AgentCli::Claude,
            "mcp__roundtable__wait_for_messages"
        ));
        assert!(!is_roundtable_tool(AgentCli::Claude, "mcp__roundtables__x"));
    }

    #[test]
    fn claudes_environment_says_whether_a_person_sits_at_the_session() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| value.to_string())
            }
        };
        let attended = |pairs| HookContext::claude(&env(pairs)).attended;
        assert_eq!(
            attended(&[("CLAUDE_CODE_SESSION_ATTENDED", "1")]),
            Some(true)
        );
        assert_eq!(
            attended(&[
                ("CLAUDE_CODE_SESSION_ATTENDED", "0"),
                ("CLAUDE_CODE_ENTRYPOINT", "cli")
            ]),
            Some(false)
        );
        assert_eq!(
            attended(&[("CLAUDE_CODE_ENTRYPOINT", "sdk-cli")]),
            Some(false)
        );
        assert_eq!(attended(&[("CLAUDE_CODE_ENTRYPOINT", "cli")]), Some(true));
        assert_eq!(attended(&[]), None);
        assert!(HookContext::claude(&env(&[("ROUNDTABLE_LISTEN", "1")])).listen_asked);
        // A session the runner started for one room is handed that room's messages only;
        // the room alone (no runner) means nothing.
        let room = |pairs| HookContext::from_env(AgentCli::Codex, None, &env(pairs)).room;
        assert_eq!(
            room(&[("ROUNDTABLE_RUN", "1"), ("ROUNDTABLE_ROOM", "r_design")]).as_deref(),
            Some("r_design")
        );
        assert_eq!(room(&[("ROUNDTABLE_ROOM", "r_design")]), None);
        assert_eq!(room(&[("ROUNDTABLE_RUN", "1")]), None);
    }

    #[test]
    fn antigravity_hooks_read_its_documented_payloads_and_always_answer_json() {
        // From Antigravity CLI's documentation (not run here): camelCase, no event name.
        let before = br#"{"conversationId":"c-1","workspacePaths":["/w/app"],"transcriptPath":"/h/.gemini/antigravity-cli/brain/c-1/.system_generated/logs/transcript.jsonl","artifactDirectoryPath":"/h/a","modelName":"gemini-3-pro","invocationNum":2,"initialNumSteps":5}"#;
        assert_eq!(
            parse(AgentCli::Antigravity, before, Some("PreInvocation")).unwrap(),
            HookEvent::PromptSubmitted {
                session_id: "c-1".into()
            }
        );
        let stop = br#"{"conversationId":"c-1","workspacePaths":["/w/app"],"transcriptPath":"/t.jsonl","executionNum":1,"terminationReason":"model_done","fullyIdle":true}"#;
        assert!(matches!(
            parse(AgentCli::Antigravity, stop, Some("Stop")).unwrap(),
            HookEvent::TurnEnded { session_id, transcript: Some(_), .. } if session_id == "c-1"
        ));
        let answer = |reply: HookReply, event: &str| -> Value {
            serde_json::from_str(&reply.stdout_for(AgentCli::Antigravity, event).unwrap()).unwrap()
        };
        assert_eq!(
            answer(HookReply::Context("hi".into()), "PreInvocation"),
            json!({"injectSteps": [{"ephemeralMessage": "hi"}]})
        );
        assert_eq!(
            answer(HookReply::Block("go on".into()), "Stop"),
            json!({"decision": "continue", "reason": "go on"})
        );
        assert_eq!(
            answer(HookReply::Nothing, "Stop"),
            json!({"decision": "stop"})
        );
        assert_eq!(answer(HookReply::Nothing, "PreInvocation"), json!({}));
    }

    #[test]
    fn copilots_command_line_says_whether_anyone_is_asked_before_a_tool_runs() {
        let words = |line: &str| -> Vec<String> { line.split(' ').map(str::to_owned).collect() };
        let none = |_: &str| None;
        let context = |line: Option<&str>, env: &dyn Fn(&str) -> Option<String>| {
            let argv = line.map(words);
            let context = HookContext::copilot(argv.as_deref(), env);
            (context.attended, context.tools_allowed)
        };
        assert_eq!(
            context(Some("-p go --output-format json"), &none),
            (Some(false), false)
        );
        assert_eq!(
            context(Some("--prompt=go --yolo"), &none),
            (Some(false), true)
        );
        assert_eq!(
            context(Some("-p go --allow-all-tools"), &none),
            (Some(false), true)
        );
        assert_eq!(context(Some("--resume"), &none), (Some(true), false));
        // `--allow-tool X` allows some tools only: Copilot's rules decide, not this.
        assert_eq!(
            context(Some("--allow-tool=shell(git)"), &none),
            (Some(true), false)
        );
        assert_eq!(context(None, &none), (None, false));
        let allow_all = |name: &str| (name == "COPILOT_ALLOW_ALL").then(|| "true".to_owned());
        assert_eq!(context(None, &allow_all), (None, true));
        let off = |name: &str| (name == "COPILOT_ALLOW_ALL").then(|| "false".to_owned());
        assert_eq!(context(None, &off), (None, false));
        let runner = |name: &str| (name == "ROUNDTABLE_RUN").then(|| "1".to_owned());
        assert_eq!(context(None, &runner), (Some(false), false));
    }

    #[test]
    fn the_person_typing_shows_as_an_enqueued_prompt_in_whole_lines() {
        let enqueue = br#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-12-02T02:46:14.167Z","sessionId":"d807","content":"third prompt"}"#;
        let mut lines = b"{\"type\":\"system\",\"subtype\":\"stop_hook_summary\"}\n".to_vec();
        assert!(!person_typed(&lines));
        lines.extend_from_slice(enqueue);
        assert!(!person_typed(&lines), "a torn line does not count yet");
        lines.push(b'\n');
        assert!(person_typed(&lines));
        let dequeue = b"{\"type\":\"queue-operation\",\"operation\":\"dequeue\"}\n";
        assert!(!person_typed(dequeue));
        assert!(!person_typed(b"not json\n"));
    }

    #[test]
    fn a_codex_rollout_shows_its_next_turn_beginning() {
        let begun = b"{\"timestamp\":\"t\",\"type\":\"event_msg\",\"payload\":{\"type\":\"task_started\",\"turn_id\":\"u2\"}}\n";
        assert!(codex_turn_began(begun));
        assert!(
            !codex_turn_began(&begun[..begun.len() - 1]),
            "a torn line waits"
        );
        let other = b"{\"type\":\"event_msg\",\"payload\":{\"type\":\"token_count\"}}\n";
        assert!(!codex_turn_began(other));
        assert_eq!(thread_file("019c8a4d-8f45/../x"), "019c8a4d-8f45____x");
    }

    #[test]
    fn replies_print_in_the_clis_format() {
        assert_eq!(HookReply::Nothing.stdout("Stop"), None);
        let block: Value =
            serde_json::from_str(&HookReply::Block("go on".into()).stdout("Stop").unwrap())
                .unwrap();
        assert_eq!(block, json!({"decision": "block", "reason": "go on"}));
        let allow: Value =
            serde_json::from_str(&HookReply::Allow.stdout("PermissionRequest").unwrap()).unwrap();
        assert_eq!(allow["hookSpecificOutput"]["decision"]["behavior"], "allow");
        let context: Value = serde_json::from_str(
            &HookReply::Context("hi".into())
                .stdout("PostToolUse")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            context["hookSpecificOutput"],
            json!({"hookEventName": "PostToolUse", "additionalContext": "hi"})
        );
    }

    #[test]
    fn codex_notify_parses_its_kebab_case_payload() {
        let notify = parse_codex_notify(
            r#"{"type":"agent-turn-complete","thread-id":"b5f6","turn-id":"1","cwd":"/p","input-messages":["x"],"last-assistant-message":"done"}"#,
        )
        .unwrap();
        assert_eq!(notify.thread.as_deref(), Some("b5f6"));
        assert_eq!(notify.last_message.as_deref(), Some("done"));
        assert!(!notify.is_hidden_thread());
        let title = parse_codex_notify(
            r#"{"type":"agent-turn-complete","thread-id":"c1","input-messages":["Generate a concise, single-line task title for this: …"]}"#,
        )
        .unwrap();
        assert!(title.is_hidden_thread());
        assert!(parse_codex_notify("{").is_err());
    }

    #[test]
    fn long_tool_inputs_are_cut_on_a_character_boundary() {
        let input = json!({"text": "é".repeat(400)});
        let described = describe_call("Write", &input);
        assert!(described.ends_with('…'));
        assert!(described.len() < 320);
    }

    #[test]
    fn a_command_s_escape_sequences_are_left_out_of_the_question_and_status() {
        let input = json!({"command": "printf '\u{1b}[31mred\u{1b}[0m'\nls"});
        let question = forwarded(&describe_call("Bash", &input));
        assert_eq!(question, "Bash: printf '[31mred[0m'\nls");
        roundtable_protocol::text::check(
            || "question".into(),
            &question,
            roundtable_protocol::text::Shape::Prose,
        )
        .unwrap();
    }
}
