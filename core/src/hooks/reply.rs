//! What a hook answers its CLI: the messages to show, as each CLI reads a hook's output.

use super::*;

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
