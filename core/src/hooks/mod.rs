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
mod payloads;
mod reply;
mod typing;

pub use codex_wake::*;
pub use payloads::{CodexNotify, HookEvent, parse, parse_codex_notify};
pub use reply::{HookReply, render_messages};
pub use typing::person_typed;
use typing::{appended_until, person_types};

use crate::agent_work::HumanAnswer;
use crate::cache::MessageView;
use crate::hook_settings::HookSettings;
use crate::local_agents::AgentCli;
use crate::{Core, CoreError, now_ms};

/// The largest hook input read: a hook's JSON is small, a tool input can be large.
pub const MAX_INPUT: usize = 4 * 1024 * 1024;

/// How long a write waits for the hub within a hook before it stays queued.
const WRITE_PATIENCE: Duration = Duration::from_secs(3);

/// How long a hook with nothing keeping the agent's cache in step waits for its own sync
/// to catch up before it answers from what the cache holds (the hub is slow or down).
pub const CATCH_UP_PATIENCE: Duration = Duration::from_millis(2500);

/// The status of an agent whose turn ended and that listens for messages to it (a
/// mention, a reply) until the person types or its window closes.
pub const LISTENING: &str = "listening for messages";

/// The kind of Claude Code's notification that it waits for a permission (the question
/// its `PermissionRequest` hook is asked as well).
const PERMISSION_PROMPT: &str = "permission_prompt";

/// How often a listening hook looks at its transcript for the person's typing.
const TYPING_CHECK: Duration = Duration::from_millis(100);

/// Why a hook's input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("the hook's input is not JSON: {0}")]
    NotJson(String),
    #[error("the hook's input is larger than {MAX_INPUT} bytes")]
    TooLarge,
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
    /// A runner drives the CLI over ACP ([`crate::runner::ACP_ENV`]).
    pub over_acp: bool,
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
            over_acp: env(crate::runner::RUNNER_ENV).is_some()
                && env(crate::runner::ACP_ENV).as_deref() == Some("1"),
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

    /// Whether the CLI asks its permissions over ACP, where the runner asks the person (so a
    /// hook asking too would put one tool call to them twice, and leave one question open
    /// after the tool ran). Claude Code asks both its `PermissionRequest` hook and its ACP
    /// client at once, and notifies that it waits: over ACP, its hooks leave that to the
    /// runner. Codex under its adapter asks its hook alone (a tool the hook does not allow
    /// does not run), so its hook goes on asking; OpenCode asks over ACP alone.
    pub fn permissions_asked_over_acp(&self) -> bool {
        self.over_acp && self.cli == AgentCli::Claude
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
                self.session_started(context, &session_id, transcript, cwd, source)
                    .await
            }
            HookEvent::PromptSubmitted { .. } | HookEvent::ToolDone { .. } => {
                self.tell_unread(context).await
            }
            // The runner asks the person, with the agent's own options.
            HookEvent::Notification { kind, .. }
                if context.permissions_asked_over_acp()
                    && kind.as_deref() == Some(PERMISSION_PROMPT) =>
            {
                Ok(HookReply::Nothing)
            }
            HookEvent::PermissionRequest { .. } if context.permissions_asked_over_acp() => {
                Ok(HookReply::Nothing)
            }
            HookEvent::Notification {
                session_id,
                message,
                kind,
            } => {
                self.forward_notification(&session_id, &message, kind.as_deref())
                    .await
            }
            HookEvent::PermissionRequest {
                session_id,
                tool,
                input,
            } => {
                self.ask_permission(context, settings, &session_id, &tool, &input)
                    .await
            }
            HookEvent::TurnEnded { transcript, .. } => {
                self.turn_ended(context, settings, transcript).await
            }
            HookEvent::Other(_) => Ok(HookReply::Nothing),
        }
    }

    /// A session began: bound to the agent, the agent working, and the session told who it
    /// is on Roundtable.
    async fn session_started(
        &self,
        context: &HookContext,
        session_id: &str,
        transcript: Option<String>,
        cwd: Option<String>,
        source: Option<String>,
    ) -> Result<HookReply, CoreError> {
        self.bind_session(
            context.cli.framework(),
            session_id,
            transcript.as_deref(),
            cwd.as_deref(),
        )
        .await?;
        let detail = format!(
            "{} session {} ({})",
            context.cli.display_name(),
            short(session_id),
            source.as_deref().unwrap_or("startup")
        );
        self.status_now(AgentState::Working, &detail).await;
        Ok(HookReply::Context(format!(
            "You are {} on Roundtable, where you meet other agents and your person. \
             Use the roundtable tools to read and send messages.",
            self.profile().handle
        )))
    }

    /// A prompt began or a tool ended: the messages waiting, as context.
    async fn tell_unread(&self, context: &HookContext) -> Result<HookReply, CoreError> {
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

    /// The CLI notified its person: the agent waits for them, and the notification reaches
    /// them as a ping in the home room.
    async fn forward_notification(
        &self,
        session_id: &str,
        message: &str,
        kind: Option<&str>,
    ) -> Result<HookReply, CoreError> {
        self.status_now(AgentState::WaitingHuman, message).await;
        let key = format!("{}-{}", short(session_id), now_ms());
        let question = forwarded(&format!(
            "{} ({}): {message}",
            self.profile().handle,
            kind.unwrap_or("notification")
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

    /// The CLI asks whether a tool may run: Roundtable's own tools may; otherwise the
    /// person is asked with a ping, and their answer (or, with none in time, the terminal)
    /// decides.
    async fn ask_permission(
        &self,
        context: &HookContext,
        settings: &HookSettings,
        session_id: &str,
        tool: &str,
        input: &Value,
    ) -> Result<HookReply, CoreError> {
        if is_roundtable_tool(context.cli, tool) {
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
            describe_call(tool, input)
        ));
        let key = format!("{}-{}", short(session_id), now_ms());
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

    /// A turn ended: what waits is handed over (the turn goes on); with nothing waiting,
    /// the hook listens for more where that holds no one up, until a message comes, the
    /// person types, or its time is up.
    async fn turn_ended(
        &self,
        context: &HookContext,
        settings: &HookSettings,
        transcript: Option<String>,
    ) -> Result<HookReply, CoreError> {
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
        let reply = self
            .listen_until_told(settings, transcript.map(PathBuf::from))
            .await?;
        sync.stop().await;
        Ok(reply)
    }

    /// Listens at a turn's end for messages to the agent, until the person types in the
    /// session's transcript or `settings.listen_s` is up.
    async fn listen_until_told(
        &self,
        settings: &HookSettings,
        transcript: Option<PathBuf>,
    ) -> Result<HookReply, CoreError> {
        let from = match &transcript {
            Some(path) => tokio::fs::metadata(path).await.map_or(0, |m| m.len()),
            None => 0,
        };
        let listen = Duration::from_secs(settings.listen_s);
        let filter = crate::wait_for::WaitFilter::MessagesFor {
            principal: self.me().to_owned(),
        };
        // Said once the transcript's end is known: the person's typing from here on ends it.
        self.status_now(AgentState::Idle, LISTENING).await;
        // Waiting marks nothing read: only the branch that hands the messages over
        // does, so a person typing at the same moment loses none of them.
        Ok(tokio::select! {
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
        })
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
mod tests;
