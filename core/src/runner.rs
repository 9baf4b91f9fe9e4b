//! Headless agents: `roundtable run --agent HANDLE` supervises an agent with no terminal.
//! For the messages meant for the agent in a room, it resumes the agent CLI session bound
//! to that (agent, room) — Claude Code `claude -p --resume SESSION --output-format
//! stream-json`, Codex `codex exec resume THREAD --json` — or starts one and binds it, then
//! posts the reply into the room and reports the agent's status.
//!
//! One execution per (agent, room) at a time; messages that arrive meanwhile wait for the
//! next. The binding is recorded as soon as the CLI names its session, and a message counts
//! as handled (its read marker moves) only once the reply is on the hub: a runner killed at
//! any point resumes the same session for the same messages when it starts again, and the
//! reply, posted with a key derived from those messages, is stored once.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roundtable_protocol::bodies::AgentState;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::watch;

use crate::cache::MessageView;
use crate::local_agents::AgentCli;
use crate::{Core, CoreError, Delivered, now_ms};

/// Set in the environment of the agent CLIs the runner starts.
pub const RUNNER_ENV: &str = "ROUNDTABLE_RUN";

/// Names the agent a run is for, in the environment of the agent CLIs the runner starts.
pub const AGENT_ENV: &str = "ROUNDTABLE_AGENT";

/// The longest an agent CLI may take over one turn.
const TURN_LIMIT: Duration = Duration::from_secs(3600);

/// How an agent is run.
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub cli: AgentCli,
    /// The agent CLI's executable.
    pub executable: PathBuf,
    /// Where it runs (its project).
    pub cwd: PathBuf,
    /// Instructions given with the first message of each new session (a team role's).
    pub instructions: Option<String>,
    /// More arguments for every run (a permission mode, a model).
    pub extra_args: Vec<String>,
    /// Roundtable's MCP server for the runs, when the agent CLI's own configuration does not
    /// have it for this agent (a team's agents): given on the command line.
    pub mcp: Option<McpServer>,
}

/// How an agent CLI launches `roundtable mcp` for the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    pub roundtable: PathBuf,
    pub handle: String,
    pub roundtable_home: Option<PathBuf>,
}

impl McpServer {
    fn args(&self) -> Vec<String> {
        vec!["mcp".into(), "--agent".into(), self.handle.clone()]
    }

    /// Claude Code's `--mcp-config` JSON.
    fn claude_config(&self) -> String {
        let mut server = json!({
            "type": "stdio",
            "command": self.roundtable.display().to_string(),
            "args": self.args(),
        });
        if let Some(home) = &self.roundtable_home {
            server["env"] = json!({"ROUNDTABLE_HOME": home.display().to_string()});
        }
        json!({ "mcpServers": { "roundtable": server } }).to_string()
    }

    /// Codex's `-c` overrides.
    fn codex_overrides(&self) -> Vec<String> {
        let quote = |text: &str| serde_json::to_string(text).expect("strings serialize");
        let args: Vec<String> = self.args().iter().map(|arg| quote(arg)).collect();
        let mut overrides = vec![
            format!(
                "mcp_servers.roundtable.command={}",
                quote(&self.roundtable.display().to_string())
            ),
            format!("mcp_servers.roundtable.args=[{}]", args.join(",")),
        ];
        if let Some(home) = &self.roundtable_home {
            overrides.push(format!(
                "mcp_servers.roundtable.env={{ROUNDTABLE_HOME={}}}",
                quote(&home.display().to_string())
            ));
        }
        overrides
    }
}

/// What one turn of an agent CLI gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub session: Option<String>,
    pub reply: Option<String>,
    pub error: Option<String>,
}

/// Reads the session id from one line of a CLI's machine output, as soon as it shows.
pub fn session_of(cli: AgentCli, line: &str) -> Option<String> {
    let value: Value = serde_json::from_str(line).ok()?;
    match cli {
        AgentCli::Claude => value["session_id"].as_str().map(str::to_owned),
        AgentCli::Codex => (value["type"] == "thread.started")
            .then(|| value["thread_id"].as_str().map(str::to_owned))
            .flatten(),
        _ => None,
    }
}

/// Reads a turn from a CLI's machine output (Claude Code's `stream-json`, Codex's
/// `--json`; Gemini CLI prints the reply as text). Lines that are not JSON are skipped.
pub fn parse_turn(cli: AgentCli, output: &str) -> Turn {
    let mut turn = Turn {
        session: None,
        reply: None,
        error: None,
    };
    if cli == AgentCli::Gemini {
        let text = output.trim();
        turn.reply = (!text.is_empty()).then(|| text.to_owned());
        return turn;
    }
    let mut messages: Vec<String> = Vec::new();
    for line in output.lines() {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if turn.session.is_none() {
            turn.session = session_of(cli, line);
        }
        match (cli, value["type"].as_str()) {
            (AgentCli::Claude, Some("result")) => {
                if value["is_error"] == json!(true) {
                    turn.error = Some(
                        value["result"]
                            .as_str()
                            .or(value["subtype"].as_str())
                            .unwrap_or("the session failed")
                            .to_owned(),
                    );
                } else {
                    turn.reply = value["result"].as_str().map(str::to_owned);
                }
            }
            (AgentCli::Codex, Some("item.completed")) => {
                if value["item"]["type"] == "agent_message"
                    && let Some(text) = value["item"]["text"].as_str()
                {
                    messages.push(text.to_owned());
                }
            }
            (AgentCli::Codex, Some("turn.failed") | Some("error")) => {
                turn.error = Some(
                    value["error"]["message"]
                        .as_str()
                        .or(value["message"].as_str())
                        .unwrap_or("the turn failed")
                        .to_owned(),
                );
            }
            _ => {}
        }
    }
    if cli == AgentCli::Codex && !messages.is_empty() {
        turn.reply = Some(messages.join("\n\n"));
    }
    turn
}

/// The command line of one turn.
pub fn command_line(settings: &RunSettings, session: Option<&str>, prompt: &str) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    match settings.cli {
        AgentCli::Claude => {
            args.push("-p".into());
            if let Some(mcp) = &settings.mcp {
                args.extend(["--mcp-config".to_owned(), mcp.claude_config()]);
            }
            args.extend(["--output-format", "stream-json", "--verbose"].map(str::to_owned));
            if let Some(session) = session {
                args.extend(["--resume".to_owned(), session.to_owned()]);
            }
            args.extend(settings.extra_args.iter().cloned());
            args.push(prompt.to_owned());
        }
        AgentCli::Codex => {
            if let Some(mcp) = &settings.mcp {
                for value in mcp.codex_overrides() {
                    args.extend(["-c".to_owned(), value]);
                }
            }
            args.push("exec".into());
            if let Some(session) = session {
                args.extend(["resume".to_owned(), session.to_owned()]);
            }
            args.extend(["--json", "--skip-git-repo-check"].map(str::to_owned));
            args.extend(settings.extra_args.iter().cloned());
            args.push(prompt.to_owned());
        }
        _ => {
            args.extend(settings.extra_args.iter().cloned());
            args.extend(["-p".to_owned(), prompt.to_owned()]);
        }
    }
    args
}

/// The prompt for a turn: who the agent is, the messages, and (for a new session) its
/// instructions.
pub fn prompt(
    handle: &str,
    room_title: &str,
    messages: &[MessageView],
    instructions: Option<&str>,
) -> String {
    let mut text = String::new();
    if let Some(instructions) = instructions {
        text.push_str(instructions.trim());
        text.push_str("\n\n");
    }
    text.push_str(&format!(
        "[Roundtable] You are {handle}. New messages in the room {room_title:?}:\n"
    ));
    for message in messages {
        let who = message.from_handle.as_deref().unwrap_or(&message.from);
        text.push_str(&format!("- {who}: {}\n", message.text));
    }
    text.push_str(
        "\nYour answer is posted to the room as your message. Mention a member with @handle \
         to ask them something; mention no one when you are done.",
    );
    text
}

/// The `client_key` of the reply to messages of `room` up to `seq`: the same after any
/// crash, so the reply is stored once.
fn reply_key(room: &str, seq: u64) -> String {
    let digest = Sha256::digest(format!("{room}:{seq}").as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("run-{hex}")
}

impl Core {
    /// Runs the agent until `stop` turns true: each room's messages for it, one execution
    /// per room at a time.
    pub async fn run_agent(
        &self,
        settings: RunSettings,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), CoreError> {
        let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
        let mut executions = tokio::task::JoinSet::new();
        let settings = Arc::new(settings);
        let mut changes = self.changes();
        loop {
            // Unread messages for us, by room, where nothing runs yet.
            let me = self.me().to_owned();
            let pending = self
                .read(move |cache| cache.unread_messages_for(&me, true, 500))
                .await?;
            let mut by_room: BTreeMap<String, Vec<MessageView>> = BTreeMap::new();
            for message in pending {
                by_room
                    .entry(message.room.clone())
                    .or_default()
                    .push(message);
            }
            for (room, messages) in by_room {
                if !busy
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .insert(room.clone())
                {
                    continue;
                }
                let (core, settings, busy) = (self.clone(), settings.clone(), busy.clone());
                executions.spawn(async move {
                    if let Err(error) = core.execute(&settings, &room, &messages).await {
                        tracing::warn!(%room, %error, "an execution failed");
                    }
                    busy.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .remove(&room);
                });
            }
            tokio::select! {
                _ = changes.recv() => {}
                Some(_) = executions.join_next(), if !executions.is_empty() => {
                    if executions.is_empty() {
                        let _ = self.set_status(AgentState::Idle, Some("waiting for messages"), None).await;
                    }
                }
                _ = stop.changed() => {
                    executions.shutdown().await;
                    return Ok(());
                }
            }
        }
    }

    /// One turn for `messages` of `room`: resume (or start) the bound session, post the
    /// reply, and count the messages handled.
    async fn execute(
        &self,
        settings: &RunSettings,
        room: &str,
        messages: &[MessageView],
    ) -> Result<(), CoreError> {
        let Some(last) = messages.iter().filter_map(|m| m.seq).max() else {
            return Ok(());
        };
        let framework = settings.cli.framework();
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
        let turn = self
            .turn(settings, room, session.as_deref(), &prompt)
            .await?;
        if let Some(error) = &turn.error {
            let _ = self
                .set_status(AgentState::Error, Some(error), Some(room))
                .await;
        }
        if let Some(reply) = turn.reply.filter(|reply| !reply.trim().is_empty()) {
            let n = self
                .send_with_key(
                    room,
                    &reply_key(room, last),
                    "message",
                    json!({ "text": reply }),
                )
                .await?;
            if let Delivered::Queued { reason, .. } =
                self.deliver(n, crate::client::PATIENCE).await?
            {
                // It stays in the outbox; the messages are answered all the same.
                tracing::warn!(%reason, "the reply waits in the outbox");
            }
        }
        // Handled, even when the CLI failed: the error is reported, not retried forever.
        self.mark_read(room, last).await
    }

    /// Runs the agent CLI once; binds the session as soon as the CLI names it.
    async fn turn(
        &self,
        settings: &RunSettings,
        room: &str,
        session: Option<&str>,
        prompt: &str,
    ) -> Result<Turn, CoreError> {
        let args = command_line(settings, session, prompt);
        let mut child = tokio::process::Command::new(&settings.executable)
            .args(&args)
            .current_dir(&settings.cwd)
            // The session's hooks see they run under the runner, which brings the messages
            // itself: they neither listen for messages nor add them to the prompt.
            .env(RUNNER_ENV, "1")
            // Hooks installed for another agent on this CLI leave this session alone.
            .env(AGENT_ENV, &self.profile().handle)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| CoreError::Io {
                context: format!("cannot run {}", settings.executable.display()),
                source,
            })?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let errors = tokio::spawn(async move {
            let mut text = String::new();
            let _ = (&mut stderr)
                .take(64 * 1024)
                .read_to_string(&mut text)
                .await;
            text
        });
        let mut lines = BufReader::new(stdout).lines();
        let mut output = String::new();
        let mut bound = session.is_some();
        let reading = async {
            while let Ok(Some(line)) = lines.next_line().await {
                if !bound && let Some(session) = session_of(settings.cli, &line) {
                    let (room, framework) = (room.to_owned(), settings.cli.framework());
                    self.write_job(move |cache| {
                        cache.bind_room(&room, framework, &session, now_ms())
                    })
                    .await?;
                    bound = true;
                }
                output.push_str(&line);
                output.push('\n');
            }
            Ok::<_, CoreError>(())
        };
        match tokio::time::timeout(TURN_LIMIT, reading).await {
            Ok(result) => result?,
            Err(_) => {
                let _ = child.kill().await;
                return Ok(Turn {
                    session: session.map(str::to_owned),
                    reply: None,
                    error: Some(format!(
                        "no answer in {} minutes",
                        TURN_LIMIT.as_secs() / 60
                    )),
                });
            }
        }
        let status = child.wait().await.map_err(|source| CoreError::Io {
            context: "the agent CLI".into(),
            source,
        })?;
        let mut turn = parse_turn(settings.cli, &output);
        if !status.success() && turn.reply.is_none() {
            let stderr = errors.await.unwrap_or_default();
            turn.error = Some(format!(
                "{} exited with {status}: {}",
                settings.cli,
                stderr.lines().last().unwrap_or("").trim()
            ));
        }
        if turn.session.is_none() {
            turn.session = session.map(str::to_owned);
        }
        Ok(turn)
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
    fn command_lines_resume_the_bound_session() {
        let settings = RunSettings {
            cli: AgentCli::Codex,
            executable: "codex".into(),
            cwd: ".".into(),
            instructions: None,
            extra_args: vec![],
            mcp: None,
        };
        assert_eq!(
            command_line(&settings, Some("t1"), "hi"),
            [
                "exec",
                "resume",
                "t1",
                "--json",
                "--skip-git-repo-check",
                "hi"
            ]
        );
        let claude = RunSettings {
            cli: AgentCli::Claude,
            ..settings
        };
        assert_eq!(
            command_line(&claude, None, "hi"),
            ["-p", "--output-format", "stream-json", "--verbose", "hi"]
        );
        assert_eq!(
            command_line(&claude, Some("s1"), "hi")[4..6],
            ["--resume".to_owned(), "s1".to_owned()]
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
        let line = command_line(&teamed, None, "hi");
        assert_eq!(line[1], "--mcp-config");
        let config: Value = serde_json::from_str(&line[2]).unwrap();
        assert_eq!(
            config["mcpServers"]["roundtable"]["args"],
            json!(["mcp", "--agent", "dana/x-developer"])
        );
        let codex = RunSettings {
            cli: AgentCli::Codex,
            ..teamed
        };
        let line = command_line(&codex, None, "hi");
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
    fn a_replys_key_depends_on_the_messages_it_answers_only() {
        assert_eq!(reply_key("r_1", 7), reply_key("r_1", 7));
        assert_ne!(reply_key("r_1", 7), reply_key("r_1", 8));
        assert!((8..=64).contains(&reply_key("r_1", 7).len()));
    }
}
