//! Agent CLI hooks: what `roundtable hook claude|codex` does when an agent CLI calls it.
//!
//! A hook runs at every turn of a session, so it must be quick, and it must never fail or
//! stall the session: when the hub is down it does what it can locally and lets the
//! session go on. Its writes (a status, a ping) reach the hub through a running process on
//! the agent's profile (its MCP bridge) when there is one, else by itself.
//!
//! - SessionStart binds the session (id, transcript, directory) to the agent.
//! - UserPromptSubmit adds the agent's unread messages to the prompt's context.
//! - Notification (a permission prompt, an idle prompt) raises a ping for the agent's person
//!   and says the agent waits for a human.
//! - PermissionRequest asks the person (a ping with Allow and Deny) and answers Claude Code
//!   with the decision; after the configured wait it lets the terminal ask instead.
//! - Stop: when messages for the agent are unread, or arrive within the listening window,
//!   the stop is blocked with them as the reason, so the session goes on with them: agents
//!   prompt each other with no person in the path. A quiet window lets the session rest.
//! - Codex's `notify` (a turn completed) binds the thread and says the agent is idle.
//!
//! Parsing is pure ([`parse_claude`], [`parse_codex_notify`]); [`Core::on_claude_hook`]
//! and [`Core::on_codex_notify`] act.

use std::time::Duration;

use roundtable_protocol::bodies::AgentState;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent_work::HumanAnswer;
use crate::cache::MessageView;
use crate::{Core, CoreError, now_ms};

/// The largest hook input read: a hook's JSON is small, a tool input can be large.
pub const MAX_INPUT: usize = 4 * 1024 * 1024;

/// How long a write waits for the hub within a hook before it stays queued.
const WRITE_PATIENCE: Duration = Duration::from_secs(3);

/// How a hook behaves; kept in the agent's profile (`hooks.toml`), with defaults.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct HookSettings {
    /// How long a finished turn listens for messages before the session rests.
    pub listen_s: u64,
    /// How long a permission request waits for the person before the terminal asks.
    pub permission_wait_s: u64,
}

impl Default for HookSettings {
    fn default() -> HookSettings {
        HookSettings {
            listen_s: 600,
            permission_wait_s: 120,
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

/// A Claude Code hook event, with what Roundtable uses of it.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaudeHook {
    SessionStart {
        session_id: String,
        transcript: Option<String>,
        cwd: Option<String>,
        source: Option<String>,
    },
    UserPromptSubmit {
        session_id: String,
    },
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
    Stop {
        session_id: String,
        /// The stop follows a continuation a Stop hook asked for.
        active: bool,
    },
    /// An event Roundtable does not act on.
    Other(String),
}

impl ClaudeHook {
    /// The session the event is about (empty when the input named none).
    pub fn session_id(&self) -> &str {
        match self {
            ClaudeHook::SessionStart { session_id, .. }
            | ClaudeHook::UserPromptSubmit { session_id }
            | ClaudeHook::Notification { session_id, .. }
            | ClaudeHook::PermissionRequest { session_id, .. }
            | ClaudeHook::Stop { session_id, .. } => session_id,
            ClaudeHook::Other(_) => "",
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ClaudeInput {
    #[serde(default)]
    hook_event_name: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    transcript_path: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    notification_type: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_input: Option<Value>,
    #[serde(default)]
    stop_hook_active: Option<bool>,
}

/// Reads a Claude Code hook's stdin; `event` (from the command line) is used when the
/// input does not name its event.
pub fn parse_claude(input: &[u8], event: Option<&str>) -> Result<ClaudeHook, HookError> {
    if input.len() > MAX_INPUT {
        return Err(HookError::TooLarge);
    }
    let parsed: ClaudeInput =
        serde_json::from_slice(input).map_err(|error| HookError::NotJson(error.to_string()))?;
    let name = parsed
        .hook_event_name
        .clone()
        .or_else(|| event.map(str::to_owned))
        .unwrap_or_default();
    let session_id = parsed.session_id.clone().unwrap_or_default();
    Ok(match name.as_str() {
        "SessionStart" => ClaudeHook::SessionStart {
            session_id,
            transcript: parsed.transcript_path,
            cwd: parsed.cwd,
            source: parsed.source,
        },
        "UserPromptSubmit" => ClaudeHook::UserPromptSubmit { session_id },
        "Notification" => ClaudeHook::Notification {
            session_id,
            message: parsed.message.unwrap_or_default(),
            kind: parsed.notification_type,
        },
        "PermissionRequest" => ClaudeHook::PermissionRequest {
            session_id,
            tool: parsed.tool_name.unwrap_or_default(),
            input: parsed.tool_input.unwrap_or(Value::Null),
        },
        "Stop" => ClaudeHook::Stop {
            session_id,
            active: parsed.stop_hook_active.unwrap_or(false),
        },
        other => ClaudeHook::Other(other.to_owned()),
    })
}

/// What a hook answers its agent CLI.
#[derive(Debug, Clone, PartialEq)]
pub enum HookReply {
    /// Nothing: the session goes on as it would have.
    Nothing,
    /// Text added to the model's context (SessionStart, UserPromptSubmit).
    Context(String),
    /// Do not stop: go on with this (Stop).
    Block(String),
    /// The person allowed the tool call.
    Allow,
    /// The person denied it; the message says why.
    Deny(String),
}

impl HookReply {
    /// What to print on stdout for Claude Code (nothing for [`HookReply::Nothing`]).
    pub fn claude_stdout(&self, event: &str) -> Option<String> {
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

/// Messages as the model reads them: who wrote, where, what.
pub fn render_messages(messages: &[MessageView], rooms: &[crate::cache::RoomView]) -> String {
    let mut text = String::from("New Roundtable messages for you:\n");
    for message in messages {
        let room = rooms
            .iter()
            .find(|room| room.id == message.room)
            .map_or(message.room.as_str(), |room| room.label());
        let who = message.from_handle.as_deref().unwrap_or(&message.from);
        text.push_str(&format!("- in {room:?}, {who} wrote: {}\n", message.text));
    }
    text.push_str(
        "Answer with the Roundtable tools (send_message, mentioning who you answer), then go on.",
    );
    text
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

/// A short description of a tool call for a person: the command, the file, or the input.
fn describe_call(tool: &str, input: &Value) -> String {
    let detail = input["command"]
        .as_str()
        .or_else(|| input["file_path"].as_str())
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
    /// Acts on a Claude Code hook and says what to answer it. Never fails: what cannot be
    /// done (the hub down, the profile's home room unknown) is logged and skipped.
    pub async fn on_claude_hook(&self, hook: ClaudeHook, settings: &HookSettings) -> HookReply {
        match self.claude_hook(hook, settings).await {
            Ok(reply) => reply,
            Err(error) => {
                tracing::warn!(%error, "the hook could not do its work; the session goes on");
                HookReply::Nothing
            }
        }
    }

    async fn claude_hook(
        &self,
        hook: ClaudeHook,
        settings: &HookSettings,
    ) -> Result<HookReply, CoreError> {
        match hook {
            ClaudeHook::SessionStart {
                session_id,
                transcript,
                cwd,
                source,
            } => {
                self.bind_session(
                    "claude-code",
                    &session_id,
                    transcript.as_deref(),
                    cwd.as_deref(),
                )
                .await?;
                let detail = format!(
                    "Claude Code session {} ({})",
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
            ClaudeHook::UserPromptSubmit { .. } => {
                let messages = self.read_messages(None).await?;
                if messages.is_empty() {
                    return Ok(HookReply::Nothing);
                }
                let rooms = self.rooms().await?;
                Ok(HookReply::Context(render_messages(&messages, &rooms)))
            }
            ClaudeHook::Notification {
                session_id,
                message,
                kind,
            } => {
                self.status_now(AgentState::WaitingHuman, &message).await;
                let key = format!("{}-{}", short(&session_id), now_ms());
                let question = format!(
                    "{} ({}): {message}",
                    self.profile().handle,
                    kind.as_deref().unwrap_or("notification")
                );
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
            ClaudeHook::PermissionRequest {
                session_id,
                tool,
                input,
            } => {
                let wait = Duration::from_secs(settings.permission_wait_s);
                let sync = self.start();
                if self.synced(WRITE_PATIENCE).await.is_err() {
                    // The hub is down: the terminal asks, as it would have.
                    return Ok(HookReply::Nothing);
                }
                let room = self.home_room().await?;
                let question = format!(
                    "{} asks permission for {}",
                    self.profile().handle,
                    describe_call(&tool, &input)
                );
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
            ClaudeHook::Stop { .. } => {
                let messages = self.read_messages(None).await?;
                if !messages.is_empty() {
                    let rooms = self.rooms().await?;
                    return Ok(HookReply::Block(render_messages(&messages, &rooms)));
                }
                // Listen for a while: another agent may be about to answer.
                let sync = self.start();
                if self.synced(WRITE_PATIENCE).await.is_err() {
                    return Ok(HookReply::Nothing);
                }
                let listen = Duration::from_secs(settings.listen_s);
                let messages = self.wait_for_messages(listen).await?;
                let reply = if messages.is_empty() {
                    self.status_now(AgentState::Idle, "resting: no messages")
                        .await;
                    HookReply::Nothing
                } else {
                    let rooms = self.rooms().await?;
                    HookReply::Block(render_messages(&messages, &rooms))
                };
                sync.stop().await;
                Ok(reply)
            }
            ClaudeHook::Other(_) => Ok(HookReply::Nothing),
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

    /// Reports a status, waiting briefly for the hub; it stays queued otherwise.
    async fn status_now(&self, state: AgentState, detail: &str) {
        let sent =
            tokio::time::timeout(WRITE_PATIENCE, self.set_status(state, Some(detail), None)).await;
        if !matches!(sent, Ok(Ok(_))) {
            tracing::debug!("the status waits in the outbox");
        }
    }
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
            parse_claude(start, None).unwrap(),
            ClaudeHook::SessionStart {
                session_id: "c45af7b1-cb7c".into(),
                transcript: Some("/root/.claude/projects/-w/c45.jsonl".into()),
                cwd: Some("/w".into()),
                source: Some("startup".into()),
            }
        );
        // The event may come from the command line instead.
        let stop = br#"{"session_id":"s","cwd":"/w","stop_hook_active":true}"#;
        assert_eq!(
            parse_claude(stop, Some("Stop")).unwrap(),
            ClaudeHook::Stop {
                session_id: "s".into(),
                active: true
            }
        );
        let permission = br#"{"hook_event_name":"PermissionRequest","session_id":"s","tool_name":"Bash","tool_input":{"command":"rm -rf target"}}"#;
        let ClaudeHook::PermissionRequest { tool, input, .. } =
            parse_claude(permission, None).unwrap()
        else {
            panic!()
        };
        assert_eq!(describe_call(&tool, &input), "Bash: rm -rf target");
        assert_eq!(
            parse_claude(br#"{"hook_event_name":"PreCompact"}"#, None).unwrap(),
            ClaudeHook::Other("PreCompact".into())
        );
        assert!(matches!(
            parse_claude(b"not json", None),
            Err(HookError::NotJson(_))
        ));
    }

    #[test]
    fn replies_print_in_claude_codes_format() {
        assert_eq!(HookReply::Nothing.claude_stdout("Stop"), None);
        let block: Value = serde_json::from_str(
            &HookReply::Block("go on".into())
                .claude_stdout("Stop")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(block, json!({"decision": "block", "reason": "go on"}));
        let allow: Value =
            serde_json::from_str(&HookReply::Allow.claude_stdout("PermissionRequest").unwrap())
                .unwrap();
        assert_eq!(allow["hookSpecificOutput"]["decision"]["behavior"], "allow");
        let context: Value = serde_json::from_str(
            &HookReply::Context("hi".into())
                .claude_stdout("UserPromptSubmit")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            context["hookSpecificOutput"],
            json!({"hookEventName": "UserPromptSubmit", "additionalContext": "hi"})
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
        assert!(parse_codex_notify("{").is_err());
    }

    #[test]
    fn long_tool_inputs_are_cut_on_a_character_boundary() {
        let input = json!({"text": "é".repeat(400)});
        let described = describe_call("Write", &input);
        assert!(described.ends_with('…'));
        assert!(described.len() < 320);
    }
}
