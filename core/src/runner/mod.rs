//! Headless agents: `roundtable run --agent HANDLE` supervises an agent with no terminal.
//! For the messages meant for the agent in a room, it resumes the agent CLI session bound
//! to that (agent, room) — Claude Code `claude -p --resume SESSION --output-format
//! stream-json`, Codex `codex exec resume THREAD --json`, Gemini CLI `gemini --resume
//! SESSION -o stream-json`, OpenCode `opencode run --session SESSION --format json` — or
//! starts one and binds it, then posts the reply into the room and reports the agent's
//! status.
//!
//! One execution per (agent, room) at a time; messages that arrive meanwhile wait for the
//! next. The binding is recorded as soon as the CLI names its session, and a message counts
//! as handled (its read marker moves) only once its turn has ended: a runner killed at any
//! point resumes the same session for the same messages when it starts again, and the
//! reply, posted with a key derived from those messages, is stored once. A batch whose reply
//! is already stored (the runner was killed between the two) is not run again.
//!
//! Every turn is a paid model call, so a batch of messages is handled once whatever the
//! outcome: a reply the hub refuses (paused, stopped, too large), a CLI that cannot start or
//! that crashes are reported once, as the agent's status in the room (where the person sees
//! the mention failed), and the messages count as handled; nothing runs again until new
//! messages arrive. Only what is transient is tried again, a bounded number of times with
//! growing pauses: a rate-limited reply is sent again, a turn the model's service refused
//! for load runs again. Controls are read before each turn: a paused or stopped agent runs
//! nothing (its messages wait for a resume) and says so once. Prompts go to the CLI on
//! stdin (no argument-length limit), and the CLI runs in a process group of its own, so
//! ending a turn ends everything it started.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use roundtable_platform::process_group::ProcessGroup;
use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::AgentState;
use roundtable_protocol::client::ControlAction;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument as _;

mod acp_turn;
mod turn;

pub use acp_turn::AcpMode;
pub use turn::*;

use crate::cache::{ControlView, MessageView};
use crate::local_agents::AgentCli;
use crate::{Core, CoreError, Delivered, now_ms};

/// Set in the environment of the agent CLIs the runner starts.
pub const RUNNER_ENV: &str = "ROUNDTABLE_RUN";

/// Names the room a runner's turn answers, in the same environment: the session's hooks
/// hand it that room's messages only (the runner brings each room's to its own session).
pub const ROOM_ENV: &str = "ROUNDTABLE_ROOM";

/// Set beside [`RUNNER_ENV`] when the runner drives the CLI over ACP, where the runner puts
/// the permissions the CLI asks to the person, with the agent's own options
/// ([`crate::hooks::HookContext::permissions_asked_over_acp`]).
pub const ACP_ENV: &str = "ROUNDTABLE_ACP";

/// Names the agent a session belongs to, in the environment of the agent CLIs the runner
/// starts: hooks and MCP servers of other agents leave such a session alone.
pub const AGENT_ENV: &str = "ROUNDTABLE_AGENT";

/// The longest an agent CLI may take over one turn.
const TURN_LIMIT: Duration = Duration::from_secs(3600);

/// How many times something transient is tried again, and the first pause by default (each
/// next one four times longer).
const RETRIES: u32 = 3;
pub const FIRST_RETRY: Duration = Duration::from_secs(5);

/// How much of a failed CLI's stderr is kept (its last line is reported); the rest is read
/// and dropped, so the CLI never writes into a closed pipe.
const STDERR_KEPT: usize = 64 * 1024;

/// What became of a batch of messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Answered, or failed and reported: nothing runs again for these messages.
    Done,
    /// Something transient stopped it: the same messages run again later.
    Later { reason: String },
}

/// Where the runner is with one room.
#[derive(Debug, Default)]
struct RoomRun {
    busy: bool,
    /// Transient failures of the current batch so far.
    attempts: u32,
    retry_at: Option<Instant>,
    /// The control (its seq) whose hold on this room was reported, so it is said once.
    held: Option<u64>,
}

/// Why a turn did not run or did not end well.
#[derive(Debug)]
enum TurnFailure {
    /// The CLI could not be started (not found, arguments too long…).
    Spawn(String),
}

impl Core {
    /// Runs the agent until `stop` turns true: each room's messages for it, one execution
    /// per room at a time.
    pub async fn run_agent(
        &self,
        settings: RunSettings,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), CoreError> {
        let settings = Arc::new(settings);
        let mut rooms: HashMap<String, RoomRun> = HashMap::new();
        let mut executions = tokio::task::JoinSet::new();
        let mut changes = self.changes();
        let mut idle_said = false;
        loop {
            // Unread messages for us, by room, and the controls in force.
            let me = self.me().to_owned();
            let (pending, controls) = self
                .read(move |cache| {
                    Ok((
                        cache.unread_messages_for(&me, true, 500)?,
                        cache.controls()?,
                    ))
                })
                .await?;
            let mut by_room: BTreeMap<String, Vec<MessageView>> = BTreeMap::new();
            for message in pending {
                by_room
                    .entry(message.room.clone())
                    .or_default()
                    .push(message);
            }
            let now = Instant::now();
            for (room, messages) in by_room {
                let run = rooms.entry(room.clone()).or_default();
                if run.busy {
                    continue;
                }
                if let Some(control) = control_in(&controls, &room) {
                    if run.held != Some(control.seq) {
                        run.held = Some(control.seq);
                        self.say_held(&room, control, messages.len()).await;
                    }
                    continue;
                }
                run.held = None;
                if run.retry_at.is_some_and(|at| at > now) {
                    continue;
                }
                run.busy = true;
                idle_said = false;
                let (core, settings, attempt) = (self.clone(), settings.clone(), run.attempts);
                // What a turn logs names its agent and room.
                let span = tracing::info_span!("turn", agent = %self.profile().handle, %room);
                executions.spawn(
                    async move {
                        let last = messages.iter().filter_map(|m| m.seq).max();
                        let handled = core.execute(&settings, &room, &messages, attempt).await;
                        (room, last, handled)
                    }
                    .instrument(span),
                );
            }
            let next_retry = rooms
                .values()
                .filter(|run| !run.busy)
                .filter_map(|run| run.retry_at)
                .min();
            tokio::select! {
                received = changes.recv() => {
                    if matches!(received, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                        executions.shutdown().await;
                        return Ok(());
                    }
                }
                Some(joined) = executions.join_next(), if !executions.is_empty() => {
                    if let Ok((room, last, handled)) = joined {
                        let run = rooms.entry(room.clone()).or_default();
                        run.busy = false;
                        match handled {
                            Ok(Handled::Done) => {
                                run.attempts = 0;
                                run.retry_at = None;
                            }
                            // `execute` says Later only while tries are left.
                            Ok(Handled::Later { reason }) => {
                                run.attempts += 1;
                                let pause = retry_pause(settings.first_retry, run.attempts);
                                tracing::info!(%room, %reason, ?pause, "trying again later");
                                run.retry_at = Some(Instant::now() + pause);
                            }
                            Err(error) => {
                                // The cache or the hub failed us, not the turn: the messages
                                // stay unread and run again later, a bounded number of times;
                                // then the batch is reported and counted as handled.
                                run.attempts += 1;
                                tracing::warn!(%room, %error, "an execution failed");
                                if run.attempts > RETRIES {
                                    run.attempts = 0;
                                    run.retry_at = None;
                                    self.report_failure(&room, &format!(
                                        "gave up on these messages after {} tries: {error}",
                                        RETRIES + 1
                                    )).await;
                                    if let Some(last) = last {
                                        let _ = self.mark_read(&room, last).await;
                                    }
                                } else {
                                    run.retry_at = Some(
                                        Instant::now() + retry_pause(settings.first_retry, run.attempts),
                                    );
                                }
                            }
                        }
                    }
                    if executions.is_empty() && !idle_said {
                        idle_said = true;
                        let _ = self.set_status(AgentState::Idle, Some("waiting for messages"), None).await;
                    }
                }
                _ = tokio::time::sleep_until(next_retry.unwrap_or(now)), if next_retry.is_some() => {}
                _ = stop.changed() => {
                    executions.shutdown().await;
                    return Ok(());
                }
            }
        }
    }

    /// Says once that a control holds the agent's messages in `room`.
    async fn say_held(&self, room: &str, control: &ControlView, waiting: usize) {
        let action = if control.action == ControlAction::Stop {
            "stopped"
        } else {
            "paused"
        };
        let detail = format!(
            "{action} by {}: {waiting} message{} here wait{} for a resume",
            control.by,
            if waiting == 1 { "" } else { "s" },
            if waiting == 1 { "s" } else { "" },
        );
        // A stop in the room refuses even a status there: then it goes home.
        if self
            .set_status(AgentState::Stopped, Some(&detail), Some(room))
            .await
            .is_err()
        {
            let _ = self
                .set_status(AgentState::Stopped, Some(&detail), None)
                .await;
        }
    }

    /// Reports a failure once, in the room where it happened.
    async fn report_failure(&self, room: &str, detail: &str) {
        let detail = &shareable(detail);
        tracing::warn!(%room, %detail, "a turn failed");
        if self
            .set_status(AgentState::Error, Some(detail), Some(room))
            .await
            .is_err()
        {
            let _ = self.set_status(AgentState::Error, Some(detail), None).await;
        }
    }

    /// One turn for `messages` of `room`: resume (or start) the bound session, post the
    /// reply, and count the messages handled, whatever became of them. `failures` is how
    /// many turns for them a busy model service turned away so far: while tries are left,
    /// such a turn is [`Handled::Later`].
    async fn execute(
        &self,
        settings: &RunSettings,
        room: &str,
        messages: &[MessageView],
        failures: u32,
    ) -> Result<Handled, CoreError> {
        let Some(last) = messages.iter().filter_map(|m| m.seq).max() else {
            return Ok(Handled::Done);
        };
        // A runner killed after storing a batch's reply, before its read marker moved,
        // answered it already: the turn is not paid for twice.
        let (key, in_room) = (reply_key(room, last), room.to_owned());
        if self
            .read(move |cache| cache.holds_client_key(&in_room, &key))
            .await?
        {
            self.mark_read(room, last).await?;
            return Ok(Handled::Done);
        }
        let framework = settings.framework();
        let bound = {
            let (room, framework) = (room.to_owned(), framework.to_owned());
            self.read(move |cache| cache.room_session(&room, &framework))
                .await?
        };
        let title = self
            .rooms()
            .await?
            .into_iter()
            .find(|r| r.id == room)
            .map(|r| r.label().to_owned())
            .unwrap_or_else(|| room.to_owned());
        let instructions = if bound.is_none() {
            settings.instructions.as_deref()
        } else {
            None
        };
        let prompt = prompt(&self.profile().handle, &title, messages, instructions);
        let session = bound.map(|row| row.session_id);
        let _ = self
            .set_status(
                AgentState::Working,
                Some(&format!("answering in {title}")),
                Some(room),
            )
            .await;
        let turn = match self.turn(settings, room, session.as_deref(), &prompt).await {
            Ok(turn) => turn,
            Err(TurnFailure::Spawn(reason)) => {
                self.report_failure(room, &reason).await;
                self.mark_read(room, last).await?;
                return Ok(Handled::Done);
            }
        };
        if let Some(error) = &turn.error
            && turn.reply.is_none()
        {
            if is_transient(error) {
                if failures < RETRIES {
                    return Ok(Handled::Later {
                        reason: error.clone(),
                    });
                }
                self.report_failure(
                    room,
                    &format!("gave up after {} tries: {error}", failures + 1),
                )
                .await;
                self.mark_read(room, last).await?;
                return Ok(Handled::Done);
            }
            self.report_failure(room, error).await;
            self.mark_read(room, last).await?;
            return Ok(Handled::Done);
        }
        if let Some(reply) = turn.reply.filter(|reply| !reply.trim().is_empty()) {
            // The reply answers the last message it was woken for: clients that follow a
            // question (an A2A task, say) see it answered.
            let answers = messages
                .iter()
                .filter(|message| message.seq == Some(last))
                .find_map(|message| message.id.as_deref());
            self.post_reply(
                room,
                &reply_key(room, last),
                &reply,
                answers,
                settings.first_retry,
            )
            .await?;
        }
        self.mark_read(room, last).await?;
        Ok(Handled::Done)
    }

    /// Posts a turn's reply: a refusal is reported once; a rate limit waits and tries again,
    /// a bounded number of times; an unreachable hub leaves it in the outbox.
    async fn post_reply(
        &self,
        room: &str,
        key: &str,
        reply: &str,
        answers: Option<&str>,
        first_retry: Duration,
    ) -> Result<(), CoreError> {
        let mut body = json!({ "text": reply });
        if let Some(answers) = answers {
            body["reply_to"] = json!(answers);
        }
        let n = self.send_with_key(room, key, "message", body).await?;
        let mut attempt = 0;
        loop {
            match self.deliver(n, crate::client::PATIENCE).await {
                Ok(Delivered::Queued { reason, .. }) => {
                    // It stays in the outbox; the messages are answered all the same.
                    tracing::warn!(%reason, "the reply waits in the outbox");
                    return Ok(());
                }
                Ok(_) => return Ok(()),
                Err(CoreError::Refused {
                    code: ErrorCode::RateLimited | ErrorCode::Busy,
                    msg,
                }) if attempt < RETRIES => {
                    attempt += 1;
                    tracing::info!(%msg, attempt, "the reply was refused for now; trying again");
                    tokio::time::sleep(retry_pause(first_retry, attempt)).await;
                    // The refusal failed the outbox entry: back in the queue, same key.
                    self.retry(n).await?;
                }
                Err(CoreError::Refused { code, msg }) => {
                    self.report_failure(
                        room,
                        &format!("my reply was refused ({}): {msg}", code.as_str()),
                    )
                    .await;
                    return Ok(());
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Runs the agent CLI once, the prompt on its stdin; binds the session as soon as the
    /// CLI names it.
    async fn turn(
        &self,
        settings: &RunSettings,
        room: &str,
        session: Option<&str>,
        prompt: &str,
    ) -> Result<Turn, TurnFailure> {
        if let Some(acp) = &settings.acp {
            return self.acp_turn(settings, acp, room, session, prompt).await;
        }
        let Some(cli) = settings.cli else {
            return Err(TurnFailure::Spawn(
                "no agent CLI to start: name one with --cli, or an ACP agent with --acp-agent"
                    .into(),
            ));
        };
        let args = command_line(cli, settings, session);
        let handle = self.profile().handle.clone();
        let mut command = tokio::process::Command::new(&settings.executable);
        // Its own process group (a Job Object on Windows): ending the turn ends whatever the
        // CLI started (Codex's launcher starts the real binary as a child).
        roundtable_platform::process_group::start_own_group(&mut command);
        let mut child = command
            .args(&args)
            .current_dir(&settings.cwd)
            // The session's hooks see they run under the runner, which brings the messages
            // itself: they neither listen for messages nor add them to the prompt.
            .env(RUNNER_ENV, "1")
            // The session is this agent's: hooks and MCP servers installed for another
            // agent on this CLI leave it alone.
            .env(AGENT_ENV, &handle)
            .env(ROOM_ENV, room)
            .envs(command_env(cli, settings))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| {
                TurnFailure::Spawn(format!(
                    "cannot start {} ({}): {error}",
                    cli,
                    settings.executable.display()
                ))
            })?;
        let group = ProcessGroup::of(&child).map_err(|error| {
            TurnFailure::Spawn(format!(
                "cannot keep {} and what it starts together: {error}",
                cli
            ))
        })?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let prompt = prompt.to_owned();
        // The prompt is written beside the reading, so a CLI that answers before it has read
        // all of it cannot stall the pipe.
        let writing = tokio::spawn(async move {
            let _ = stdin.write_all(prompt.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let errors = tokio::spawn(async move {
            let mut kept = Vec::new();
            let _ = (&mut stderr)
                .take(STDERR_KEPT as u64)
                .read_to_end(&mut kept)
                .await;
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            String::from_utf8_lossy(&kept).into_owned()
        });
        let mut lines = BufReader::new(stdout).lines();
        let mut output = String::new();
        let mut bound = session.is_some();
        let reading = async {
            while let Ok(Some(line)) = lines.next_line().await {
                if !bound && let Some(session) = session_of(cli, &line) {
                    bound = true;
                    self.bind_turn_session(Some(cli), cli.framework(), room, &session)
                        .await;
                }
                output.push_str(&line);
                output.push('\n');
            }
        };
        let deadline = tokio::time::Instant::now() + TURN_LIMIT;
        let read = tokio::time::timeout_at(deadline, reading).await;
        writing.abort();
        // Its output closed: it ends, within what is left of the limit.
        let status = match read {
            Ok(()) => tokio::time::timeout_at(deadline, child.wait()).await.ok(),
            Err(_) => None,
        };
        let Some(status) = status else {
            drop(group);
            let _ = child.kill().await;
            return Ok(Turn {
                session: session.map(str::to_owned),
                reply: None,
                error: Some(format!(
                    "no answer in {} minutes",
                    TURN_LIMIT.as_secs() / 60
                )),
            });
        };
        // Ended by itself: what it left running on purpose (Codex's `notify` program, which
        // reports the turn) finishes on its own.
        group.release();
        let mut turn = parse_turn(cli, &output);
        let failed = !matches!(&status, Ok(status) if status.success());
        if failed && turn.reply.is_none() && turn.error.is_none() {
            let stderr = errors.await.unwrap_or_default();
            let how = match status {
                Ok(status) => status.to_string(),
                Err(error) => error.to_string(),
            };
            turn.error = Some(format!(
                "{} ended ({how}) without an answer: {}",
                cli,
                stderr.lines().last().unwrap_or("").trim()
            ));
        }
        if turn.session.is_none() {
            turn.session = session.map(str::to_owned);
        }
        Ok(turn)
    }

    /// Claims a session the runner started for this agent and binds it to its room, at
    /// once: a runner that dies mid-turn resumes it.
    async fn bind_turn_session(
        &self,
        cli: Option<AgentCli>,
        framework: &'static str,
        room: &str,
        session: &str,
    ) {
        if let Some(cli) = cli {
            self.claim_session(cli, session).await;
        }
        let (room, session) = (room.to_owned(), session.to_owned());
        if let Err(error) = self
            .write_job(move |cache| cache.bind_room(&room, framework, &session, now_ms()))
            .await
        {
            tracing::warn!(%error, "cannot bind the session to its room");
        }
    }

    /// Claims a session the runner started for this agent (see [`crate::session_claims`]).
    async fn claim_session(&self, cli: AgentCli, session: &str) {
        let Some(framework) = cli.work_framework() else {
            return;
        };
        let claims = crate::session_claims::SessionClaims::beside(self.profile().base());
        let (session, handle) = (session.to_owned(), self.profile().handle.clone());
        let claimed =
            tokio::task::spawn_blocking(move || claims.claim(framework, &session, &handle)).await;
        if let Ok(Err(error)) = claimed {
            tracing::warn!(%error, "cannot record whose session this is");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_stream_json_gives_the_session_and_the_result() {
        let output = r#"{"type":"system","subtype":"init","session_id":"6f0c","tools":[],"model":"claude-sonnet-4-5"}
{"type":"assistant","message":{"content":[{"type":"text","text":"thinking"}]},"session_id":"6f0c"}
not json at all
{"type":"result","subtype":"success","is_error":false,"result":"@dana/reviewer round 1","session_id":"6f0c"}"#;
        assert_eq!(
            parse_turn(AgentCli::Claude, output),
            Turn {
                session: Some("6f0c".into()),
                reply: Some("@dana/reviewer round 1".into()),
                error: None
            }
        );
        let failed =
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s"}"#;
        assert_eq!(
            parse_turn(AgentCli::Claude, failed).error.as_deref(),
            Some("error_max_turns")
        );
    }

    #[test]
    fn codex_json_gives_the_thread_and_its_messages() {
        let output = r#"{"type":"thread.started","thread_id":"0199a213-81c0"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Plan**"}}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"@dana/writer round 2"}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}"#;
        let turn = parse_turn(AgentCli::Codex, output);
        assert_eq!(turn.session.as_deref(), Some("0199a213-81c0"));
        assert_eq!(turn.reply.as_deref(), Some("@dana/writer round 2"));
    }

    #[test]
    fn copilot_json_gives_the_main_agents_texts_the_session_at_its_end_and_an_error() {
        // GitHub Copilot CLI 1.0.102's `--output-format json`, abridged.
        let output = r#"{"type":"session.mcp_servers_loaded","data":{"servers":[]},"ephemeral":true}
{"type":"user.message","data":{"content":"hi\n"}}
{"type":"assistant.message","data":{"content":"","toolRequests":[{"name":"bash"}]}}
{"type":"assistant.message","data":{"content":"A sub-agent's note.","parentToolCallId":"toolu_1"}}
{"type":"assistant.message","data":{"content":"Parsed."}}
{"type":"result","timestamp":"2026-12-06T18:34:47.389Z","sessionId":"ee399260-6058","exitCode":0}"#;
        let turn = parse_turn(AgentCli::Copilot, output);
        assert_eq!(turn.session.as_deref(), Some("ee399260-6058"));
        assert_eq!(turn.reply.as_deref(), Some("Parsed."));
        assert_eq!(turn.error, None);
        let failed = r#"{"type":"session.error","data":{"errorType":"rate_limit","message":"429 overloaded"}}
{"type":"result","sessionId":"s2","exitCode":1}"#;
        assert_eq!(
            parse_turn(AgentCli::Copilot, failed).error.as_deref(),
            Some("429 overloaded")
        );
        let exited = r#"{"type":"result","sessionId":"s3","exitCode":2}"#;
        assert_eq!(
            parse_turn(AgentCli::Copilot, exited).error.as_deref(),
            Some("copilot exited with 2")
        );
        let settings = RunSettings {
            cli: Some(AgentCli::Copilot),
            executable: "copilot".into(),
            cwd: ".".into(),
            instructions: None,
            extra_args: vec!["--allow-all-tools".into()],
            mcp: None,
            acp: None,
            first_retry: FIRST_RETRY,
        };
        assert_eq!(
            command_line(settings.cli.unwrap(), &settings, Some("ee399260-6058")),
            [
                "--output-format",
                "json",
                "--allow-tool",
                "roundtable",
                "--resume=ee399260-6058",
                "--allow-all-tools"
            ]
        );
        // A team's agent gets the server on its command line.
        let teamed = RunSettings {
            mcp: Some(McpServer {
                roundtable: "/bin/roundtable".into(),
                handle: "dana/x-developer".into(),
                roundtable_home: None,
            }),
            ..settings
        };
        let line = command_line(teamed.cli.unwrap(), &teamed, None);
        let at = line
            .iter()
            .position(|arg| arg == "--additional-mcp-config")
            .unwrap();
        let config: Value = serde_json::from_str(&line[at + 1]).unwrap();
        assert_eq!(
            config["mcpServers"]["roundtable"],
            json!({
                "type": "local",
                "command": "/bin/roundtable",
                "args": ["mcp", "--agent", "dana/x-developer"],
                "tools": ["*"],
            })
        );
        assert!(command_env(teamed.cli.unwrap(), &teamed).is_empty());
    }

    #[test]
    fn opencode_json_gives_the_session_the_texts_and_an_error() {
        let output = r#"{"type":"step_start","timestamp":1,"sessionID":"ses_1","part":{"type":"step-start"}}
{"type":"tool_use","timestamp":2,"sessionID":"ses_1","part":{"type":"tool","tool":"bash","state":{"status":"completed"}}}
{"type":"text","timestamp":3,"sessionID":"ses_1","part":{"type":"text","text":"Parsed."}}
{"type":"step_finish","timestamp":4,"sessionID":"ses_1","part":{"type":"step-finish","reason":"stop"}}"#;
        let turn = parse_turn(AgentCli::Opencode, output);
        assert_eq!(turn.session.as_deref(), Some("ses_1"));
        assert_eq!(turn.reply.as_deref(), Some("Parsed."));
        assert_eq!(turn.error, None);
        let failed = r#"{"type":"error","timestamp":1,"sessionID":"ses_2","error":{"name":"APIError","data":{"message":"overloaded"}}}"#;
        let turn = parse_turn(AgentCli::Opencode, failed);
        assert_eq!(turn.error.as_deref(), Some("overloaded"));
        let settings = RunSettings {
            cli: Some(AgentCli::Opencode),
            executable: "opencode".into(),
            cwd: ".".into(),
            instructions: None,
            extra_args: vec!["--model".into(), "anthropic/claude-sonnet-4-5".into()],
            mcp: None,
            acp: None,
            first_retry: FIRST_RETRY,
        };
        assert_eq!(
            command_line(settings.cli.unwrap(), &settings, Some("ses_1")),
            [
                "run",
                "--format",
                "json",
                "--session",
                "ses_1",
                "--model",
                "anthropic/claude-sonnet-4-5"
            ]
        );
        // Onboarded: its configuration has the server. A team's agent gets it in the
        // configuration OpenCode merges over its files.
        assert!(command_env(settings.cli.unwrap(), &settings).is_empty());
        let teamed = RunSettings {
            mcp: Some(McpServer {
                roundtable: "/bin/roundtable".into(),
                handle: "dana/x-developer".into(),
                roundtable_home: Some("/home/dana/.rt".into()),
            }),
            ..settings
        };
        let env = command_env(teamed.cli.unwrap(), &teamed);
        assert_eq!(env[0].0, "OPENCODE_CONFIG_CONTENT");
        let config: Value = serde_json::from_str(&env[0].1).unwrap();
        assert_eq!(
            config["mcp"]["roundtable"],
            json!({
                "type": "local",
                "command": ["/bin/roundtable", "mcp", "--agent", "dana/x-developer"],
                "enabled": true,
                "environment": {"ROUNDTABLE_HOME": "/home/dana/.rt"},
            })
        );
    }

    #[test]
    fn gemini_stream_json_gives_the_session_and_the_reply() {
        let output = r#"{"type":"init","timestamp":"2026-12-02T02:50:01.000Z","session_id":"8d1f","model":"gemini-2.5-pro"}
{"type":"message","role":"user","content":"hi"}
{"type":"message","role":"assistant","content":"@dana/writer ","delta":true}
{"type":"message","role":"assistant","content":"round 2","delta":true}
{"type":"result","status":"success","stats":{"total_tokens":10}}"#;
        let turn = parse_turn(AgentCli::Gemini, output);
        assert_eq!(turn.session.as_deref(), Some("8d1f"));
        assert_eq!(turn.reply.as_deref(), Some("@dana/writer round 2"));
        let failed = r#"{"type":"init","session_id":"8d1f"}
{"type":"result","status":"error","error":{"type":"api","message":"quota exceeded (429)"}}"#;
        let turn = parse_turn(AgentCli::Gemini, failed);
        assert_eq!(turn.error.as_deref(), Some("quota exceeded (429)"));
        assert!(is_transient(turn.error.as_deref().unwrap()));
        assert!(!is_transient("No conversation found with session ID: 9"));
    }

    #[test]
    fn command_lines_resume_the_bound_session_and_leave_the_prompt_to_stdin() {
        let settings = RunSettings {
            cli: Some(AgentCli::Codex),
            executable: "codex".into(),
            cwd: ".".into(),
            instructions: None,
            extra_args: vec![],
            mcp: None,
            acp: None,
            first_retry: FIRST_RETRY,
        };
        assert_eq!(
            command_line(settings.cli.unwrap(), &settings, Some("t1")),
            [
                "exec",
                "resume",
                "t1",
                "--json",
                "--skip-git-repo-check",
                "-"
            ]
        );
        let claude = RunSettings {
            cli: Some(AgentCli::Claude),
            ..settings.clone()
        };
        assert_eq!(
            command_line(claude.cli.unwrap(), &claude, None),
            ["-p", "--output-format", "stream-json", "--verbose"]
        );
        assert_eq!(
            command_line(claude.cli.unwrap(), &claude, Some("s1"))[4..6],
            ["--resume".to_owned(), "s1".to_owned()]
        );
        let gemini = RunSettings {
            cli: Some(AgentCli::Gemini),
            extra_args: vec!["--yolo".into()],
            ..settings
        };
        assert_eq!(
            command_line(gemini.cli.unwrap(), &gemini, Some("g1")),
            ["-o", "stream-json", "--resume", "g1", "--yolo"]
        );
        // A team's agent gets Roundtable's MCP server on the command line.
        let mcp = McpServer {
            roundtable: "/bin/roundtable".into(),
            handle: "dana/x-developer".into(),
            roundtable_home: None,
        };
        let teamed = RunSettings {
            mcp: Some(mcp.clone()),
            ..claude
        };
        let line = command_line(teamed.cli.unwrap(), &teamed, None);
        assert_eq!(line[1], "--mcp-config");
        let config: Value = serde_json::from_str(&line[2]).unwrap();
        assert_eq!(
            config["mcpServers"]["roundtable"]["args"],
            json!(["mcp", "--agent", "dana/x-developer"])
        );
        let codex = RunSettings {
            cli: Some(AgentCli::Codex),
            ..teamed
        };
        let line = command_line(codex.cli.unwrap(), &codex, None);
        assert_eq!(
            line[..4],
            [
                "-c".to_owned(),
                r#"mcp_servers.roundtable.command="/bin/roundtable""#.to_owned(),
                "-c".to_owned(),
                r#"mcp_servers.roundtable.args=["mcp","--agent","dana/x-developer"]"#.to_owned()
            ]
        );
    }

    #[test]
    fn a_control_holds_its_room_or_every_room() {
        let control = |room: Option<&str>, action: ControlAction| ControlView {
            room: room.map(str::to_owned),
            action,
            by: "p_dana".into(),
            seq: 3,
            reason: None,
        };
        let everywhere = [control(None, ControlAction::Pause)];
        assert!(control_in(&everywhere, "r1").is_some());
        let one_room = [control(Some("r1"), ControlAction::Stop)];
        assert!(control_in(&one_room, "r1").is_some());
        assert!(control_in(&one_room, "r2").is_none());
        assert!(control_in(&[control(None, ControlAction::Resume)], "r1").is_none());
        assert!(control_in(&[], "r1").is_none());
    }

    #[test]
    fn transient_failures_wait_longer_each_time() {
        assert_eq!(retry_pause(FIRST_RETRY, 1), FIRST_RETRY);
        assert_eq!(retry_pause(FIRST_RETRY, 2), FIRST_RETRY * 4);
        assert!(retry_pause(FIRST_RETRY, RETRIES) < Duration::from_secs(600));
        // Never past the last try's pause, whatever it is asked.
        assert_eq!(
            retry_pause(FIRST_RETRY, u32::MAX),
            retry_pause(FIRST_RETRY, RETRIES)
        );
    }

    #[test]
    fn failures_reach_the_room_short_and_without_keys() {
        let quoted = "Incorrect API key provided: sk-proj-abcd****wxyz. You can find your key";
        assert_eq!(
            shareable(quoted),
            "Incorrect API key provided: [redacted] You can find your key"
        );
        let bearer =
            "401: token 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 refused";
        assert_eq!(shareable(bearer), "401: token [redacted] refused");
        // Ordinary words, ids and paths stay.
        let plain = "No conversation found with session ID: 5290e1c2-7b1d-4c3e-9f2a-1234567890ab /work/app/src/main.rs";
        assert_eq!(shareable(plain), plain);
        let long = "x ".repeat(400);
        assert!(shareable(&long).chars().count() <= 301);
    }

    #[test]
    fn only_a_busy_service_is_transient() {
        for busy in [
            "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}",
            "API Error: Request rejected (429) · rate limited",
            "stream error: 503 Service Unavailable",
            "[API Error: RESOURCE_EXHAUSTED]",
            "Too Many Requests",
        ] {
            assert!(is_transient(busy), "{busy}");
        }
        for lasting in [
            "prompt is too long: 205293 tokens > 200000 maximum",
            "No conversation found with session ID: 5290e1c2",
            "Invalid API key · Fix external API key and try again",
            "cannot start claude (/no/claude): No such file or directory",
        ] {
            assert!(!is_transient(lasting), "{lasting}");
        }
    }

    #[test]
    fn a_replys_key_depends_on_the_messages_it_answers_only() {
        assert_eq!(reply_key("r_1", 7), reply_key("r_1", 7));
        assert_ne!(reply_key("r_1", 7), reply_key("r_1", 8));
        assert!((8..=64).contains(&reply_key("r_1", 7).len()));
    }
}
