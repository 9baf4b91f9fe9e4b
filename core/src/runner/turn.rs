//! What one turn is, without running it: the agent CLI's command line and prompt for a batch
//! of messages, what its output says (session, reply, error), and which errors are worth
//! another turn. Pure, so the rules for every CLI are tested on strings.

use super::*;

/// How an agent is run.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The agent CLI; `None` for an ACP agent that is none of the CLIs Roundtable knows
    /// (`acp` then says how to start it).
    pub cli: Option<AgentCli>,
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
    /// Drive the CLI over ACP (one process, a session per room) rather than once per turn.
    pub acp: Option<AcpMode>,
    /// The pause before a turn the model's service turned away is tried again
    /// ([`FIRST_RETRY`] by default; each next one four times longer).
    pub first_retry: Duration,
}

/// The framework a session of an ACP agent that is none of the known CLIs is bound under.
pub const ACP_FRAMEWORK: &str = "acp";

impl RunSettings {
    /// The framework the agent's sessions are bound to rooms under: its CLI's, or
    /// [`ACP_FRAMEWORK`].
    pub fn framework(&self) -> &'static str {
        self.cli.map_or(ACP_FRAMEWORK, AgentCli::framework)
    }
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

    /// OpenCode's `OPENCODE_CONFIG_CONTENT`: configuration OpenCode merges over its files'.
    fn opencode_config(&self) -> String {
        let mut command = vec![self.roundtable.display().to_string()];
        command.extend(self.args());
        let mut server = json!({"type": "local", "command": command, "enabled": true});
        if let Some(home) = &self.roundtable_home {
            server["environment"] = json!({"ROUNDTABLE_HOME": home.display().to_string()});
        }
        json!({ "mcp": { "roundtable": server } }).to_string()
    }

    /// GitHub Copilot CLI's `--additional-mcp-config` JSON (its `mcp-config.json` shape).
    fn copilot_config(&self) -> String {
        let mut server = json!({
            "type": "local",
            "command": self.roundtable.display().to_string(),
            "args": self.args(),
            "tools": ["*"],
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
        AgentCli::Gemini => (value["type"] == "init")
            .then(|| value["session_id"].as_str().map(str::to_owned))
            .flatten(),
        // Every line of `opencode run --format json` names its session.
        AgentCli::Opencode => value["sessionID"].as_str().map(str::to_owned),
        // Copilot's `--output-format json` names it in its last line.
        AgentCli::Copilot => (value["type"] == "result")
            .then(|| value["sessionId"].as_str().map(str::to_owned))
            .flatten(),
        _ => None,
    }
}

/// Reads a turn from a CLI's machine output (Claude Code's `stream-json`, Codex's
/// `--json`, Gemini CLI's `stream-json`, OpenCode's `--format json`, GitHub Copilot CLI's
/// `--output-format json`). Lines that are not
/// JSON are skipped.
pub fn parse_turn(cli: AgentCli, output: &str) -> Turn {
    let mut turn = Turn {
        session: None,
        reply: None,
        error: None,
    };
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
            (AgentCli::Gemini, Some("message")) => {
                if value["role"] == "assistant"
                    && let Some(text) = value["content"].as_str()
                {
                    // Deltas of one reply, in order.
                    match (value["delta"] == json!(true), messages.last_mut()) {
                        (true, Some(last)) => last.push_str(text),
                        _ => messages.push(text.to_owned()),
                    }
                }
            }
            // OpenCode: a line per finished part; each text part is one reply text.
            (AgentCli::Opencode, Some("text")) => {
                if let Some(text) = value["part"]["text"].as_str() {
                    messages.push(text.to_owned());
                }
            }
            (AgentCli::Opencode, Some("error")) => {
                turn.error = Some(
                    value["error"]["data"]["message"]
                        .as_str()
                        .or(value["error"]["message"].as_str())
                        .or(value["error"]["name"].as_str())
                        .unwrap_or("the turn failed")
                        .to_owned(),
                );
            }
            // Copilot: the main agent's messages (a sub-agent's name the tool call they
            // answer); an error as the session says it, or the exit code it ends with.
            (AgentCli::Copilot, Some("assistant.message")) => {
                if value["data"].get("parentToolCallId").is_none()
                    && let Some(text) = value["data"]["content"].as_str()
                    && !text.trim().is_empty()
                {
                    messages.push(text.to_owned());
                }
            }
            (AgentCli::Copilot, Some("session.error")) => {
                turn.error = Some(
                    value["data"]["message"]
                        .as_str()
                        .unwrap_or("the turn failed")
                        .to_owned(),
                );
            }
            (AgentCli::Copilot, Some("result"))
                if value["exitCode"].as_i64().is_some_and(|code| code != 0)
                    && turn.error.is_none() =>
            {
                turn.error = Some(format!("copilot exited with {}", value["exitCode"]));
            }
            (AgentCli::Gemini, Some("result")) if value["status"] == "error" => {
                turn.error = Some(
                    value["error"]["message"]
                        .as_str()
                        .unwrap_or("the turn failed")
                        .to_owned(),
                );
            }
            _ => {}
        }
    }
    if cli != AgentCli::Claude && !messages.is_empty() {
        let text = messages.join("\n\n");
        turn.reply = (!text.trim().is_empty()).then_some(text);
    }
    turn
}

/// The command line of one turn; the prompt goes on stdin.
pub fn command_line(cli: AgentCli, settings: &RunSettings, session: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    match cli {
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
            // `-`: the prompt is stdin.
            args.push("-".into());
        }
        // The prompt on stdin, never as an argument (OpenCode sends an argument holding
        // spaces in quotes).
        AgentCli::Opencode => {
            args.extend(["run", "--format", "json"].map(str::to_owned));
            if let Some(session) = session {
                args.extend(["--session".to_owned(), session.to_owned()]);
            }
            args.extend(settings.extra_args.iter().cloned());
        }
        // The prompt on stdin (Copilot reads a piped prompt as `-p`'s). Roundtable's own
        // tools are allowed: with no person at the run, Copilot would refuse them.
        AgentCli::Copilot => {
            args.extend(
                ["--output-format", "json", "--allow-tool", "roundtable"].map(str::to_owned),
            );
            if let Some(mcp) = &settings.mcp {
                args.extend(["--additional-mcp-config".to_owned(), mcp.copilot_config()]);
            }
            if let Some(session) = session {
                args.push(format!("--resume={session}"));
            }
            args.extend(settings.extra_args.iter().cloned());
        }
        _ => {
            args.extend(["-o", "stream-json"].map(str::to_owned));
            if let Some(session) = session {
                args.extend(["--resume".to_owned(), session.to_owned()]);
            }
            args.extend(settings.extra_args.iter().cloned());
        }
    }
    args
}

/// Variables a turn's CLI gets besides the runner's own: Roundtable's MCP server for
/// OpenCode, which takes no server on its command line.
pub fn command_env(cli: AgentCli, settings: &RunSettings) -> Vec<(&'static str, String)> {
    match (cli, &settings.mcp) {
        (AgentCli::Opencode, Some(mcp)) => vec![("OPENCODE_CONFIG_CONTENT", mcp.opencode_config())],
        _ => Vec::new(),
    }
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
        "[Roundtable] You are {handle}. New messages for you.\n"
    ));
    text.push_str(&crate::room_text::messages_block(
        messages.iter().map(|message| (message, room_title)),
    ));
    text.push_str(
        "\nYour answer is posted to the room as your message. Mention a member with @handle \
         to ask them something; mention no one when you are done.",
    );
    text
}

/// The `client_key` of the reply to messages of `room` up to `seq`: the same after any
/// crash, so the reply is stored once.
pub(super) fn reply_key(room: &str, seq: u64) -> String {
    let digest = Sha256::digest(format!("{room}:{seq}").as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("run-{hex}")
}

/// Whether a CLI's error says the model's service was only busy: worth another turn later.
/// Status codes count as whole words only (`205293 tokens` is no 529).
pub fn is_transient(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    let busy_words = [
        "overloaded",
        "overloaded_error",
        "rate limit",
        "rate limited",
        "rate_limit_error",
        "rate_limit_exceeded",
        "too many requests",
        "temporarily unavailable",
        "resource_exhausted",
        "service unavailable",
    ];
    let busy_codes = ["429", "503", "529"];
    busy_words.iter().any(|sign| error.contains(sign))
        || error
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| busy_codes.contains(&word))
}

/// A CLI's error as the room may read it: short, and with anything that looks like a key or
/// a token masked (an API's error may quote part of one).
pub(super) fn shareable(error: &str) -> String {
    const LONGEST: usize = 300;
    let is_uuid = |word: &str| {
        let groups: Vec<&str> = word.split('-').collect();
        groups.iter().map(|group| group.len()).eq([8, 4, 4, 4, 12])
            && groups
                .iter()
                .all(|group| group.chars().all(|c| c.is_ascii_hexdigit()))
    };
    let looks_secret = |word: &str| {
        let word = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let known = ["sk-", "sk_", "rt_", "AIza", "ghp_", "gho_", "xoxb-"]
            .iter()
            .any(|prefix| word.starts_with(prefix));
        let random = word.len() >= 32
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
            && word.chars().any(|c| c.is_ascii_digit())
            && !is_uuid(word);
        known || random
    };
    let mut text = error
        .split(' ')
        .map(|word| {
            if looks_secret(word) {
                "[redacted]"
            } else {
                word
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    if text.len() > LONGEST {
        let mut cut = LONGEST;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The pause before try number `attempt` (1-based, at most [`RETRIES`]) of something
/// transient.
pub(super) fn retry_pause(first: Duration, attempt: u32) -> Duration {
    first * 4u32.pow(attempt.clamp(1, RETRIES) - 1)
}

/// The control in force on us in `room`: a pause or stop there, or everywhere.
pub fn control_in<'c>(controls: &'c [ControlView], room: &str) -> Option<&'c ControlView> {
    controls
        .iter()
        .filter(|control| control.action != ControlAction::Resume)
        .find(|control| control.room.as_deref().is_none_or(|r| r == room))
}
