//! The configuration edits that wire an agent CLI to Roundtable, as pure functions of the
//! files' text: an MCP server entry that runs `roundtable mcp --agent HANDLE`, hooks that run
//! `roundtable hook …`, and the CLI's own task tool turned on where today's default models
//! go without one. Each edit keeps every byte it does not own and returns the record that
//! undoes it exactly ([`Undo`]); a file that cannot be parsed is refused and left as it is.
//!
//! Per CLI:
//! - Claude Code: `mcpServers.roundtable` in `~/.claude.json` (or a project's `.mcp.json`);
//!   hooks, `env.CLAUDE_CODE_ENABLE_TODO_TOOLS`, `env.ROUNDTABLE_AGENT_SESSION` (which keeps
//!   a `roundtable` run inside the session from acting as the person) and `permissions.deny`
//!   rules that keep its file tools out of Roundtable's profiles, in `settings.json`.
//! - Codex: `[mcp_servers.roundtable]` and `[tools.update_plan] enabled = true` in
//!   `config.toml`; hooks in `hooks.json`, each trusted in `config.toml` (`[hooks.state]`)
//!   by the hash Codex computes of it, since Codex skips hooks it does not trust.
//! - Gemini CLI: `mcpServers.roundtable` (trusted, so a run with no person may use it) and
//!   hooks in `settings.json`.
//! - OpenCode: `mcp.roundtable` in `opencode.json` (or the `opencode.jsonc` beside it); it
//!   has no command hooks but plugins, so Roundtable's plugin (`plugins/roundtable.js`, a
//!   file of ours whole: [`opencode_plugin`]) hands its moments to `roundtable hook
//!   opencode` as Claude Code's hooks would.
//! - Antigravity CLI, from its documentation: `mcpServers.roundtable` in
//!   `~/.gemini/config/mcp_config.json`, and a hook group named `roundtable` in
//!   `~/.gemini/config/hooks.json` (a project's `.agents/` files with `--project`), whose top
//!   level maps hook names to their events: `PreInvocation` (before each model call) and
//!   `Stop`.
//! - GitHub Copilot CLI: `mcpServers.roundtable` in `~/.copilot/mcp-config.json`, and hooks
//!   in `~/.copilot/hooks/roundtable.json`, a file of ours whole ([`copilot_hooks_text`]):
//!   Copilot reads every file in that folder, and runs each hook as a program with its
//!   arguments (`exec`), so no shell reads them on any OS.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{AgentCli, Environment, json_text, toml_text};
use crate::hooks::HookSettings;
use roundtable_platform::places::Os;

/// The name of Roundtable's MCP server in every agent CLI's configuration.
pub const SERVER_NAME: &str = "roundtable";

/// Claude Code hook events Roundtable installs, with their matcher.
const CLAUDE_HOOKS: [(&str, Option<&str>); 6] = [
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    ("PostToolUse", None),
    ("Notification", Some("permission_prompt|idle_prompt")),
    ("PermissionRequest", None),
    ("Stop", None),
];

/// Codex hook events Roundtable installs, with the name Codex's trust keys use.
const CODEX_HOOKS: [(&str, &str); 5] = [
    ("SessionStart", "session_start"),
    ("UserPromptSubmit", "user_prompt_submit"),
    ("PostToolUse", "post_tool_use"),
    ("PermissionRequest", "permission_request"),
    ("Stop", "stop"),
];

/// Gemini CLI hook events Roundtable installs.
const GEMINI_HOOKS: [&str; 4] = ["SessionStart", "BeforeAgent", "AfterTool", "AfterAgent"];

/// The file name of Roundtable's OpenCode plugin, in OpenCode's `plugins/` folder.
pub const OPENCODE_PLUGIN: &str = "roundtable.js";

/// The file name of Roundtable's hooks in GitHub Copilot CLI's `hooks/` folder.
pub const COPILOT_HOOKS_FILE: &str = "roundtable.json";

/// GitHub Copilot CLI hook events Roundtable installs (its own camelCase names: their
/// payloads do not name the event, so each hook is told it on its command line).
const COPILOT_HOOKS: [&str; 5] = [
    "sessionStart",
    "userPromptSubmitted",
    "postToolUse",
    "permissionRequest",
    "agentStop",
];

/// Antigravity CLI hook events Roundtable installs: before each model call (the
/// equivalent of a prompt's start and a tool's end: its `PostToolUse` cannot add context),
/// and when the agent would stop. Both take a flat list of handlers.
const ANTIGRAVITY_HOOKS: [&str; 2] = ["PreInvocation", "Stop"];

/// What OpenCode writes into any configuration file that lacks it (on every start): a
/// configuration file Roundtable creates has it already, so OpenCode leaves it as written.
const OPENCODE_SCHEMA: &str = "https://opencode.ai/config.json";

/// The variable that gives Claude Code's current models their task tools.
const CLAUDE_TASK_TOOLS: &str = "CLAUDE_CODE_ENABLE_TODO_TOOLS";

use crate::agent_session::SESSION_ENV;

/// What the entries run.
#[derive(Debug, Clone, PartialEq)]
pub struct Wiring {
    /// The agent's handle (`dana/writer`).
    pub handle: String,
    /// The `roundtable` executable, by absolute path (agent CLIs do not share a shell's PATH).
    pub roundtable: PathBuf,
    /// `ROUNDTABLE_HOME`, when this installation uses one: the entries pass it on.
    pub roundtable_home: Option<PathBuf>,
    pub settings: HookSettings,
    /// Turn on the CLI's own task tool where it is off.
    pub task_tools: bool,
    /// Roundtable's profiles (every token on the machine): the CLI's own file tools are
    /// denied them where its settings can say so.
    pub profiles: PathBuf,
    /// The OS the CLIs run on: it decides the shell their hooks run in ([`HookShell::of`]).
    pub os: Os,
}

/// One recorded edit, to undo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Undo {
    Json {
        inserted: json_text::Inserted,
    },
    TomlTable {
        appended: toml_text::Appended,
    },
    TomlKey {
        set: toml_text::TopLevelEdit,
    },
    /// A whole file Roundtable wrote (OpenCode's plugin): undone while it is still this
    /// text; a file the person changed since is theirs and stays.
    OwnFile {
        text: String,
    },
}

/// The planned new content of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFile {
    pub path: PathBuf,
    /// The text before (`None`: the file does not exist).
    pub before: Option<String>,
    pub after: String,
    /// The edits, in the order made.
    pub undo: Vec<Undo>,
}

/// Why a configuration cannot be edited.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error(
        "{path} cannot be parsed ({detail}); it was left untouched: fix it, then onboard again"
    )]
    Unparsable { path: String, detail: String },
    #[error(
        "{path} already has an MCP server named {SERVER_NAME:?} for {other}; offboard that agent first (or onboard this one in another project with --project)"
    )]
    Taken { path: String, other: String },
    #[error(
        "{path} is there already and is not the one Roundtable writes; rename or remove it, then onboard again"
    )]
    NotOurs { path: String },
    #[error(
        "{0} is not an agent CLI Roundtable onboards yet (claude, codex, gemini, opencode, copilot)"
    )]
    Unsupported(AgentCli),
}

fn unparsable(path: &Path, detail: impl std::fmt::Display) -> EditError {
    EditError::Unparsable {
        path: path.display().to_string(),
        detail: detail.to_string(),
    }
}

/// The shell an agent CLI runs its hook commands in: a hook command is written for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookShell {
    /// `sh -c` (Unix; Claude Code's Git Bash on Windows).
    Posix,
    /// `cmd.exe /C` (Codex on Windows).
    Cmd,
    /// `powershell -Command` (Gemini CLI on Windows).
    PowerShell,
}

impl HookShell {
    /// The shell `cli` runs hooks in on `os` (Gemini CLI 0.61's and Codex 0.169's sources;
    /// Claude Code runs them in Git Bash on Windows, per its documentation).
    pub fn of(cli: AgentCli, os: Os) -> HookShell {
        match (cli, os) {
            (AgentCli::Codex, Os::Windows) => HookShell::Cmd,
            (AgentCli::Gemini, Os::Windows) => HookShell::PowerShell,
            _ => HookShell::Posix,
        }
    }

    /// `word` as this shell reads it back, quoted when it needs it.
    fn word(self, word: &str) -> String {
        match self {
            HookShell::Posix => shell_word(word),
            // Windows paths cannot hold `"`. A quoted program followed by plain words keeps
            // its quotes through `cmd /C`. (A `%NAME%` in a path would still expand: no
            // profile or install folder Windows makes holds one.)
            HookShell::Cmd if plain(word, b"\\/._-+=:@,") => word.to_owned(),
            HookShell::Cmd => format!("\"{word}\""),
            HookShell::PowerShell if plain(word, b"\\/._-+=:@,") => word.to_owned(),
            HookShell::PowerShell => format!("'{}'", word.replace('\'', "''")),
        }
    }
}

fn plain(word: &str, allowed: &[u8]) -> bool {
    !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || allowed.contains(&b))
}

/// Quotes a word for `/bin/sh` when it needs it.
fn shell_word(word: &str) -> String {
    if plain(word, b"/._-+=:@,") {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

impl Wiring {
    fn bin(&self) -> String {
        self.roundtable.display().to_string()
    }

    fn mcp_args(&self) -> Vec<String> {
        vec!["mcp".into(), "--agent".into(), self.handle.clone()]
    }

    fn env(&self) -> Value {
        match &self.roundtable_home {
            Some(home) => json!({ "ROUNDTABLE_HOME": home.display().to_string() }),
            None => json!({}),
        }
    }

    /// The shell command an agent CLI's hook runs: `roundtable hook CLI --agent HANDLE`,
    /// with `ROUNDTABLE_HOME` set first when the wiring names one.
    fn hook_command(&self, cli: AgentCli) -> String {
        let shell = HookShell::of(cli, self.os);
        self.hook_command_for(cli.command(), shell)
    }

    fn hook_command_for(&self, cli: &str, shell: HookShell) -> String {
        let mut line = String::new();
        if let Some(home) = &self.roundtable_home {
            let home = home.display().to_string();
            line.push_str(&match shell {
                HookShell::Posix => format!("ROUNDTABLE_HOME={} ", shell_word(&home)),
                HookShell::Cmd => format!("set \"ROUNDTABLE_HOME={home}\" && "),
                HookShell::PowerShell => {
                    format!("$env:ROUNDTABLE_HOME = '{}'; ", home.replace('\'', "''"))
                }
            });
        }
        if shell == HookShell::PowerShell {
            // A quoted program is a string to PowerShell until `&` runs it.
            line.push_str("& ");
        }
        let words = [
            shell.word(&self.bin()),
            "hook".to_owned(),
            cli.to_owned(),
            "--agent".to_owned(),
            shell.word(&self.handle),
        ];
        line.push_str(&words.join(" "));
        line
    }

    /// How long a CLI lets each hook run, in seconds: the hook's own wait and a margin.
    fn hook_timeout(&self, event: &str) -> u64 {
        match event {
            "Stop" | "AfterAgent" | "agentStop" => self.settings.listen_s + 60,
            "PermissionRequest" | "permissionRequest" => self.settings.permission_wait_s + 30,
            _ => 30,
        }
    }
}

/// The hash Codex trusts a hook by: SHA-256 of the hook's identity as canonical JSON (keys
/// sorted, no spaces) — its event (as in the trust key), its matcher if any, and its one
/// command handler with Codex's defaults filled in. Checked against the hashes Codex 0.169
/// reports for the same hooks (`hooks/list`).
pub fn codex_hook_hash(event: &str, matcher: Option<&str>, command: &str, timeout: u64) -> String {
    use sha2::Digest as _;
    let quote = |text: &str| serde_json::to_string(text).expect("strings serialize");
    // Written out in key order, so it cannot depend on how serde_json orders maps.
    let mut identity = format!(
        r#"{{"event_name":{},"hooks":[{{"async":false,"command":{},"timeout":{timeout},"type":"command"}}]"#,
        quote(event),
        quote(command),
    );
    if let Some(matcher) = matcher {
        identity.push_str(&format!(r#","matcher":{}"#, quote(matcher)));
    }
    identity.push('}');
    let digest = sha2::Sha256::digest(identity.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Plans the edits onboarding makes for `cli`; `read` gives a file's current text (`None`
/// when it does not exist).
pub fn plan(
    env: &Environment,
    cli: AgentCli,
    project: Option<&Path>,
    wiring: &Wiring,
    read: impl Fn(&Path) -> std::io::Result<Option<String>>,
) -> Result<Vec<PlannedFile>, PlanError> {
    let files = env.config_files(cli, project);
    let read = |path: &Path| {
        read(path).map_err(|source| PlanError::Read {
            path: path.display().to_string(),
            source,
        })
    };
    let mut planned = Vec::new();
    match cli {
        AgentCli::Claude => {
            let (mcp, settings) = (&files[0], &files[1]);
            let before = read(mcp)?;
            let entry = json!({
                "type": "stdio", "command": wiring.bin(), "args": wiring.mcp_args(), "env": wiring.env(),
            });
            planned.push(json_server(mcp, before, "mcpServers", &entry)?);
            let before = read(settings)?;
            planned.push(claude_settings(settings, before, wiring)?);
        }
        AgentCli::Codex => {
            let (config, hooks) = (&files[0], &files[1]);
            let before = read(hooks)?;
            let (hooks_file, groups) = codex_hooks(hooks, before, wiring)?;
            let before = read(config)?;
            planned.push(codex_config(config, before, wiring, hooks, &groups)?);
            planned.push(hooks_file);
        }
        AgentCli::Gemini => {
            let settings = &files[0];
            let before = read(settings)?;
            let entry = json!({
                "command": wiring.bin(), "args": wiring.mcp_args(), "env": wiring.env(),
                // Milliseconds: waiting for messages or an answer takes up to ten minutes.
                "timeout": (crate::agent_work::LONGEST_WAIT.as_millis() as u64) + 60_000,
                // Gemini CLI offers an untrusted server's tools only to a person at a terminal.
                "trust": true,
            });
            let mut file = json_server(settings, before, "mcpServers", &entry)?;
            let hooks: Vec<(&str, Option<&str>)> =
                GEMINI_HOOKS.iter().map(|event| (*event, None)).collect();
            let command = wiring.hook_command(AgentCli::Gemini);
            let (after, undo, _) = json_hooks(settings, &file.after, &hooks, &command, |event| {
                // Milliseconds.
                wiring.hook_timeout(event) * 1000
            })?;
            file.after = after;
            file.undo.extend(undo);
            planned.push(file);
        }
        AgentCli::Opencode => {
            let (json, jsonc, plugin) = (&files[0], &files[1], &files[2]);
            // OpenCode reads both and the `.jsonc` last: the one there is gets the entry,
            // the `.jsonc` when both are.
            let (config, before) = match read(jsonc)? {
                Some(text) => (jsonc, Some(text)),
                None => (json, read(json)?),
            };
            let mut command = vec![wiring.bin()];
            command.extend(wiring.mcp_args());
            let entry = json!({
                "type": "local", "command": command, "environment": wiring.env(), "enabled": true,
            });
            let mut file = match before {
                // A file of ours: with the schema first, as OpenCode would write it.
                None => {
                    let schema = json!(OPENCODE_SCHEMA);
                    let (text, inserted) = json_text::insert_member("", &[], "$schema", &schema)
                        .map_err(|error| unparsable(config, error))?;
                    let mut file = json_server(config, Some(text), "mcp", &entry)?;
                    file.before = None;
                    file.undo.insert(0, Undo::Json { inserted });
                    file
                }
                before => json_server(config, before, "mcp", &entry)?,
            };
            file.path = config.clone();
            planned.push(file);
            let before = read(plugin)?;
            planned.push(own_file(plugin, before, opencode_plugin_text(wiring))?);
        }
        AgentCli::Antigravity => {
            let (mcp, hooks) = (&files[0], &files[1]);
            let before = read(mcp)?;
            let entry = json!({
                "command": wiring.bin(), "args": wiring.mcp_args(), "env": wiring.env(),
            });
            planned.push(json_server(mcp, before, "mcpServers", &entry)?);
            let before = read(hooks)?;
            planned.push(json_server(hooks, before, "", &antigravity_hooks(wiring))?);
        }
        AgentCli::Copilot => {
            let (mcp, hooks) = (&files[0], &files[1]);
            let before = read(mcp)?;
            let entry = json!({
                "type": "local", "command": wiring.bin(), "args": wiring.mcp_args(),
                "env": wiring.env(), "tools": ["*"],
                // Milliseconds: waiting for messages or an answer takes up to ten minutes.
                "timeout": (crate::agent_work::LONGEST_WAIT.as_millis() as u64) + 60_000,
            });
            planned.push(json_server(mcp, before, "mcpServers", &entry)?);
            let before = read(hooks)?;
            planned.push(own_file(hooks, before, copilot_hooks_text(wiring))?);
        }
        other => return Err(EditError::Unsupported(other).into()),
    }
    planned.retain(|file| file.before.as_deref() != Some(file.after.as_str()));
    Ok(planned)
}

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Edit(#[from] EditError),
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// Roundtable's hook group in Antigravity CLI's `hooks.json`: each event runs
/// `roundtable hook agy --agent HANDLE EVENT` (its payloads do not name their event), as a
/// shell command (the only kind it runs).
fn antigravity_hooks(wiring: &Wiring) -> Value {
    let command = wiring.hook_command(AgentCli::Antigravity);
    let mut group = serde_json::Map::new();
    for event in ANTIGRAVITY_HOOKS {
        group.insert(
            event.to_owned(),
            json!([{
                "type": "command", "command": format!("{command} {event}"),
                "timeout": wiring.hook_timeout(event),
            }]),
        );
    }
    Value::Object(group)
}

/// `<servers>.roundtable` in a JSON configuration (`mcpServers`; OpenCode's `mcp`; `""`: at
/// the top, as Antigravity's hook groups are).
fn json_server(
    path: &Path,
    before: Option<String>,
    servers: &str,
    entry: &Value,
) -> Result<PlannedFile, EditError> {
    let text = before.clone().unwrap_or_default();
    let at: Vec<&str> = [servers, SERVER_NAME]
        .into_iter()
        .filter(|key| !key.is_empty())
        .collect();
    let present = json_text::value_at(&text, &at).map_err(|error| unparsable(path, error))?;
    let mut planned = PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text.clone(),
        undo: Vec::new(),
    };
    match present {
        Some(existing) if existing == *entry => {}
        Some(existing) => {
            return Err(EditError::Taken {
                path: path.display().to_string(),
                // The agent is the last word of its command: `args` in most CLIs,
                // OpenCode's `command` list.
                other: existing["args"]
                    .as_array()
                    .or_else(|| existing["command"].as_array())
                    .and_then(|args| args.last())
                    .and_then(Value::as_str)
                    // A hook group: the agent is its command's last word but the event.
                    .or_else(|| {
                        existing["Stop"][0]["command"]
                            .as_str()
                            .and_then(|command| command.split(' ').rev().nth(1))
                    })
                    .unwrap_or("another agent")
                    .to_owned(),
            });
        }
        None => {
            let (after, inserted) =
                json_text::insert_member(&text, &at[..at.len() - 1], SERVER_NAME, entry)
                    .map_err(|error| unparsable(path, error))?;
            planned.after = after;
            planned.undo.push(Undo::Json { inserted });
        }
    }
    Ok(planned)
}

/// A file of ours whole (OpenCode's plugin, Copilot's hooks): written when it is not
/// there, left when it is ours already, refused when it is someone else's.
fn own_file(path: &Path, before: Option<String>, text: String) -> Result<PlannedFile, EditError> {
    match &before {
        Some(existing) if *existing == text => {}
        Some(_) => {
            return Err(EditError::NotOurs {
                path: path.display().to_string(),
            });
        }
        None => {}
    }
    let undo = if before.is_none() {
        vec![Undo::OwnFile { text: text.clone() }]
    } else {
        Vec::new()
    };
    Ok(PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text,
        undo,
    })
}

/// Roundtable's hooks for GitHub Copilot CLI (`hooks/roundtable.json`): each event runs
/// `roundtable hook copilot --agent HANDLE EVENT` as a program with its arguments.
pub fn copilot_hooks_text(wiring: &Wiring) -> String {
    let mut hooks = serde_json::Map::new();
    for event in COPILOT_HOOKS {
        let mut args = vec!["hook".to_owned(), "copilot".to_owned()];
        args.extend([
            "--agent".to_owned(),
            wiring.handle.clone(),
            event.to_owned(),
        ]);
        let mut hook = json!({
            "type": "command", "exec": wiring.bin(), "args": args,
            "timeoutSec": wiring.hook_timeout(event),
        });
        if wiring.roundtable_home.is_some() {
            hook["env"] = wiring.env();
        }
        hooks.insert(event.to_owned(), json!([hook]));
    }
    let mut text = serde_json::to_string_pretty(&json!({"version": 1, "hooks": hooks}))
        .expect("JSON values serialize");
    text.push('\n');
    text
}

/// The plugin's text for `wiring`: `opencode_plugin.js` with its values written in as JSON
/// (which JavaScript reads as the same literals).
pub fn opencode_plugin_text(wiring: &Wiring) -> String {
    let mut hook = vec![wiring.bin(), "hook".to_owned(), "opencode".to_owned()];
    hook.extend(["--agent".to_owned(), wiring.handle.clone()]);
    include_str!("opencode_plugin.js")
        .replace("__HOOK_COMMAND__", &json!(hook).to_string())
        .replace("__ENVIRONMENT__", &wiring.env().to_string())
        .replace("__AGENT__", &json!(wiring.handle).to_string())
        .replace(
            "__STOP_PATIENCE__",
            &wiring.hook_timeout("Stop").to_string(),
        )
}

/// Hook groups in a JSON configuration (`{"hooks": {EVENT: [group…]}}`), one per event,
/// appended after any the person has, each running `command`; an event that has ours
/// already is left alone. Returns the text, the undo records, and each event's group index
/// of ours (what Codex's trust keys name).
#[allow(clippy::type_complexity)]
fn json_hooks(
    path: &Path,
    text: &str,
    events: &[(&str, Option<&str>)],
    command: &str,
    timeout: impl Fn(&str) -> u64,
) -> Result<(String, Vec<Undo>, Vec<(String, usize)>), EditError> {
    let mut text = text.to_owned();
    let mut undo = Vec::new();
    let mut indexes = Vec::new();
    for (event, matcher) in events {
        let existing = json_text::value_at(&text, &["hooks", event])
            .map_err(|error| unparsable(path, error))?;
        let groups = existing
            .as_ref()
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let ours = groups.iter().position(|group| {
            group["hooks"]
                .as_array()
                .is_some_and(|hooks| hooks.iter().any(|hook| hook["command"] == json!(command)))
        });
        if let Some(index) = ours {
            indexes.push(((*event).to_owned(), index));
            continue;
        }
        let mut group = json!({
            "hooks": [{"type": "command", "command": command, "timeout": timeout(event)}],
        });
        if let Some(matcher) = matcher {
            group["matcher"] = json!(matcher);
        }
        let (after, inserted) = json_text::append_element(&text, &["hooks", event], &group)
            .map_err(|error| unparsable(path, error))?;
        text = after;
        undo.push(Undo::Json { inserted });
        indexes.push(((*event).to_owned(), groups.len()));
    }
    Ok((text, undo, indexes))
}

/// Claude Code's `settings.json`: our hooks, and its task tools for the current models
/// (`env.CLAUDE_CODE_ENABLE_TODO_TOOLS`, unless the person set it either way).
fn claude_settings(
    path: &Path,
    before: Option<String>,
    wiring: &Wiring,
) -> Result<PlannedFile, EditError> {
    let text = before.clone().unwrap_or_default();
    let command = wiring.hook_command(AgentCli::Claude);
    let (mut text, mut undo, _) = json_hooks(path, &text, &CLAUDE_HOOKS, &command, |event| {
        wiring.hook_timeout(event)
    })?;
    let mut variables = vec![(SESSION_ENV, wiring.handle.as_str())];
    if wiring.task_tools {
        variables.push((CLAUDE_TASK_TOOLS, "1"));
    }
    for (name, value) in variables {
        let set =
            json_text::value_at(&text, &["env", name]).map_err(|error| unparsable(path, error))?;
        if set.is_none() {
            let (after, inserted) = json_text::insert_member(&text, &["env"], name, &json!(value))
                .map_err(|error| unparsable(path, error))?;
            text = after;
            undo.push(Undo::Json { inserted });
        }
    }
    let denied = json_text::value_at(&text, &["permissions", "deny"])
        .map_err(|error| unparsable(path, error))?;
    for rule in claude_profile_rules(&wiring.profiles) {
        let present = denied
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(|rules| rules.iter().any(|existing| *existing == json!(rule)));
        if !present {
            let (after, inserted) =
                json_text::append_element(&text, &["permissions", "deny"], &json!(rule))
                    .map_err(|error| unparsable(path, error))?;
            text = after;
            undo.push(Undo::Json { inserted });
        }
    }
    Ok(PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text,
        undo,
    })
}

/// Claude Code's rules that deny its file tools Roundtable's profiles (`//` starts an
/// absolute path in its rules).
fn claude_profile_rules(profiles: &Path) -> [String; 2] {
    let dir = profiles.display().to_string();
    let dir = dir.trim_end_matches('/');
    let pattern = format!("/{dir}/**");
    [format!("Read({pattern})"), format!("Edit({pattern})")]
}

/// One of our hooks in Codex's `hooks.json`, as Codex's trust names it.
struct CodexHook {
    /// The event as trust keys spell it (`stop`).
    event: String,
    /// Our group's index among the event's groups.
    index: usize,
    /// What Codex will compute for it ([`codex_hook_hash`]).
    hash: String,
}

/// Codex's `hooks.json`: our hooks. Returns the file and our hooks in it.
fn codex_hooks(
    path: &Path,
    before: Option<String>,
    wiring: &Wiring,
) -> Result<(PlannedFile, Vec<CodexHook>), EditError> {
    let text = before.clone().unwrap_or_default();
    let command = wiring.hook_command(AgentCli::Codex);
    let events: Vec<(&str, Option<&str>)> = CODEX_HOOKS
        .iter()
        .map(|(event, _)| (*event, None))
        .collect();
    let (text, undo, indexes) = json_hooks(path, &text, &events, &command, |event| {
        wiring.hook_timeout(event)
    })?;
    let groups = indexes
        .into_iter()
        .filter_map(|(event, index)| {
            let (_, key_name) = CODEX_HOOKS.iter().find(|(name, _)| *name == event)?;
            let hash = codex_hook_hash(key_name, None, &command, wiring.hook_timeout(&event));
            Some(CodexHook {
                event: (*key_name).to_owned(),
                index,
                hash,
            })
        })
        .collect();
    let file = PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text,
        undo,
    };
    Ok((file, groups))
}

/// Codex's `config.toml`: `[mcp_servers.roundtable]`; `[tools.update_plan] enabled = true`
/// (unless the person set `tools.update_plan` either way); and `[hooks.state."KEY"]
/// trusted_hash` for each of our hooks in `hooks_file` (Codex runs no hook it does not
/// trust).
fn codex_config(
    path: &Path,
    before: Option<String>,
    wiring: &Wiring,
    hooks_file: &Path,
    hooks: &[CodexHook],
) -> Result<PlannedFile, EditError> {
    let mut text = before.clone().unwrap_or_default();
    let mut undo = Vec::new();
    let existing = toml_text::table_at(&text, &["mcp_servers", SERVER_NAME])
        .map_err(|error| unparsable(path, error))?
        .map(|table| json_of_toml_table(&table));
    match existing {
        Some(existing) => {
            let theirs = existing["args"]
                .as_array()
                .and_then(|args| args.last())
                .and_then(Value::as_str)
                .unwrap_or("another agent")
                .to_owned();
            if theirs != wiring.handle {
                return Err(EditError::Taken {
                    path: path.display().to_string(),
                    other: theirs,
                });
            }
        }
        None => {
            let entry = json!({
                "command": wiring.bin(),
                "args": wiring.mcp_args(),
                "env": wiring.env(),
                "startup_timeout_sec": 20,
                // Waiting for messages or an answer takes up to ten minutes.
                "tool_timeout_sec": crate::agent_work::LONGEST_WAIT.as_secs() + 60,
            });
            let (after, appended) = toml_text::append_table(
                &text,
                &["mcp_servers", SERVER_NAME],
                &inline_table(&entry),
            )
            .map_err(|error| unparsable(path, error))?;
            text = after;
            undo.push(Undo::TomlTable { appended });
        }
    }
    if wiring.task_tools && !toml_has(&text, &["tools", "update_plan"]) {
        let (after, appended) = toml_text::append_table(
            &text,
            &["tools", "update_plan"],
            &inline_table(&json!({"enabled": true})),
        )
        .map_err(|error| unparsable(path, error))?;
        text = after;
        undo.push(Undo::TomlTable { appended });
    }
    for CodexHook { event, index, hash } in hooks {
        let key = format!("{}:{event}:{index}:0", hooks_file.display());
        let trusted = toml_text::table_at(&text, &["hooks", "state", &key])
            .map_err(|error| unparsable(path, error))?
            .map(|table| json_of_toml_table(&table));
        match trusted {
            Some(table) if table["trusted_hash"] == json!(hash.as_str()) => {}
            // Another hash for the same place: the person's, or ours from an older
            // command; left as it is, and the hook is not trusted until they look.
            Some(_) => {}
            None => {
                let (after, appended) = toml_text::append_table(
                    &text,
                    &["hooks", "state", &key],
                    &inline_table(&json!({ "trusted_hash": hash })),
                )
                .map_err(|error| unparsable(path, error))?;
                text = after;
                undo.push(Undo::TomlTable { appended });
            }
        }
    }
    Ok(PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text,
        undo,
    })
}

/// Whether `path` names anything in a TOML text (a table, an inline table, a value).
fn toml_has(text: &str, path: &[&str]) -> bool {
    let Ok(document) = text.parse::<toml_edit::DocumentMut>() else {
        return false;
    };
    let mut item = document.as_item();
    for key in path {
        match item.get(key) {
            Some(next) => item = next,
            None => return false,
        }
    }
    true
}

/// Undoes `undo` (edits made in that order) on `text`; the person's later changes stay.
pub fn undo_all(path: &Path, text: &str, undo: &[Undo]) -> Result<String, EditError> {
    let mut text = text.to_owned();
    for edit in undo.iter().rev() {
        text = match edit {
            Undo::Json { inserted } => {
                json_text::remove_inserted(&text, inserted).map_err(|error| unparsable(path, error))
            }
            Undo::TomlTable { appended } => {
                toml_text::remove_appended(&text, appended).map_err(|error| unparsable(path, error))
            }
            Undo::TomlKey { set } => {
                toml_text::revert_top_level(&text, set).map_err(|error| unparsable(path, error))
            }
            Undo::OwnFile { text: ours } => Ok(if text == *ours { String::new() } else { text }),
        }?;
    }
    Ok(text)
}

/// The lines added and removed between two texts, for a person to read: the edits are
/// insertions, so the common beginning and end are set aside.
pub fn changed_lines(before: &str, after: &str) -> (Vec<String>, Vec<String>) {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let removed = old[prefix..old.len() - suffix]
        .iter()
        .map(|line| (*line).to_owned())
        .collect();
    let added = new[prefix..new.len() - suffix]
        .iter()
        .map(|line| (*line).to_owned())
        .collect();
    (added, removed)
}

/// A JSON value as a TOML value (objects as inline tables; `null` is dropped by callers).
fn toml_value(value: &Value) -> toml_edit::Value {
    match value {
        Value::String(text) => text.as_str().into(),
        Value::Bool(flag) => (*flag).into(),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => integer.into(),
            None => number.as_f64().unwrap_or_default().into(),
        },
        Value::Array(items) => {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(toml_value(item));
            }
            toml_edit::Value::Array(array)
        }
        Value::Object(_) => toml_edit::Value::InlineTable(inline_table(value)),
        Value::Null => "".into(),
    }
}

fn inline_table(value: &Value) -> toml_edit::InlineTable {
    let mut table = toml_edit::InlineTable::new();
    if let Value::Object(members) = value {
        for (key, member) in members {
            if !member.is_null() {
                table.insert(key, toml_value(member));
            }
        }
    }
    table
}

/// A TOML value as JSON, to compare with what we write.
fn json_of_toml(value: &toml_edit::Value) -> Value {
    match value {
        toml_edit::Value::String(text) => json!(text.value()),
        toml_edit::Value::Integer(integer) => json!(integer.value()),
        toml_edit::Value::Float(float) => json!(float.value()),
        toml_edit::Value::Boolean(flag) => json!(flag.value()),
        toml_edit::Value::Datetime(datetime) => json!(datetime.value().to_string()),
        toml_edit::Value::Array(array) => Value::Array(array.iter().map(json_of_toml).collect()),
        toml_edit::Value::InlineTable(table) => Value::Object(
            table
                .iter()
                .map(|(key, value)| (key.to_owned(), json_of_toml(value)))
                .collect(),
        ),
    }
}

fn json_of_toml_table(table: &toml_edit::Table) -> Value {
    Value::Object(
        table
            .iter()
            .filter_map(|(key, item)| {
                let value = match item {
                    toml_edit::Item::Value(value) => json_of_toml(value),
                    toml_edit::Item::Table(table) => json_of_toml_table(table),
                    _ => return None,
                };
                Some((key.to_owned(), value))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn wiring(handle: &str) -> Wiring {
        Wiring {
            handle: handle.into(),
            roundtable: PathBuf::from("/opt/round table/bin/roundtable"),
            roundtable_home: Some(PathBuf::from("/home/dana/.rt")),
            settings: HookSettings::default(),
            task_tools: true,
            profiles: PathBuf::from("/home/dana/.rt/profiles"),
            os: Os::Linux,
        }
    }

    fn env() -> Environment {
        Environment {
            home: PathBuf::from("/home/dana"),
            ..Environment::default()
        }
    }

    /// Plans over an in-memory set of files; applies the plan to it.
    fn onboard(
        files: &mut HashMap<PathBuf, String>,
        cli: AgentCli,
        project: Option<&Path>,
        wiring: &Wiring,
    ) -> Result<Vec<PlannedFile>, PlanError> {
        let snapshot = files.clone();
        let planned = plan(&env(), cli, project, wiring, |path| {
            Ok(snapshot.get(path).cloned())
        })?;
        for file in &planned {
            files.insert(file.path.clone(), file.after.clone());
        }
        Ok(planned)
    }

    #[test]
    fn a_projects_claude_configuration_gets_the_server_and_the_hooks() {
        let project = Path::new("/home/dana/src/parser");
        let mut files = HashMap::new();
        files.insert(
            project.join(".mcp.json"),
            "{\n    \"mcpServers\": {}\n}\n".to_owned(),
        );
        let planned = onboard(
            &mut files,
            AgentCli::Claude,
            Some(project),
            &wiring("dana/writer"),
        )
        .unwrap();
        assert_eq!(planned.len(), 2);
        let mcp: Value = serde_json::from_str(&files[&project.join(".mcp.json")]).unwrap();
        assert_eq!(
            mcp["mcpServers"]["roundtable"]["env"],
            json!({"ROUNDTABLE_HOME": "/home/dana/.rt"})
        );
        let settings: Value =
            serde_json::from_str(&files[&project.join(".claude/settings.json")]).unwrap();
        let stop = &settings["hooks"]["Stop"][0]["hooks"][0];
        assert_eq!(
            stop["command"],
            "ROUNDTABLE_HOME=/home/dana/.rt '/opt/round table/bin/roundtable' hook claude --agent dana/writer"
        );
        assert_eq!(stop["timeout"], 660);
        assert_eq!(
            settings["hooks"]["Notification"][0]["matcher"],
            "permission_prompt|idle_prompt"
        );
        // A mention reaches a working agent at its next tool boundary.
        assert_eq!(
            settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
            stop["command"]
        );
        // Today's default models get Claude Code's own task tools.
        assert_eq!(settings["env"]["CLAUDE_CODE_ENABLE_TODO_TOOLS"], "1");
        // A `roundtable` run in the session knows it is in one, and the file tools are
        // kept out of every profile.
        assert_eq!(settings["env"]["ROUNDTABLE_AGENT_SESSION"], "dana/writer");
        assert_eq!(
            settings["permissions"]["deny"],
            json!([
                "Read(//home/dana/.rt/profiles/**)",
                "Edit(//home/dana/.rt/profiles/**)"
            ])
        );
        // Again: nothing to do.
        assert!(
            onboard(
                &mut files,
                AgentCli::Claude,
                Some(project),
                &wiring("dana/writer")
            )
            .unwrap()
            .is_empty()
        );
        // Another agent in the same place is refused.
        assert!(matches!(
            onboard(
                &mut files,
                AgentCli::Claude,
                Some(project),
                &wiring("dana/other")
            ),
            Err(PlanError::Edit(EditError::Taken { .. }))
        ));
        // Undone, the files are what they were (the settings file was created).
        for file in &planned {
            let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
            assert_eq!(
                Some(undone.as_str()).filter(|t| !t.is_empty()),
                file.before.as_deref()
            );
        }
    }

    #[test]
    fn the_persons_own_task_tool_setting_stays_and_no_task_tools_leaves_it_off() {
        let mut files = HashMap::new();
        let settings = PathBuf::from("/home/dana/.claude/settings.json");
        files.insert(
            settings.clone(),
            "{\"env\": {\"CLAUDE_CODE_ENABLE_TODO_TOOLS\": \"0\"}}\n".to_owned(),
        );
        onboard(&mut files, AgentCli::Claude, None, &wiring("dana/writer")).unwrap();
        let value: Value = serde_json::from_str(&files[&settings]).unwrap();
        assert_eq!(value["env"]["CLAUDE_CODE_ENABLE_TODO_TOOLS"], "0");
        let mut files = HashMap::new();
        let without = Wiring {
            task_tools: false,
            ..wiring("dana/writer")
        };
        onboard(&mut files, AgentCli::Claude, None, &without).unwrap();
        onboard(&mut files, AgentCli::Codex, None, &without).unwrap();
        let value: Value = serde_json::from_str(&files[&settings]).unwrap();
        assert!(value["env"].get(CLAUDE_TASK_TOOLS).is_none(), "{value}");
        let config = &files[&PathBuf::from("/home/dana/.codex/config.toml")];
        assert!(!config.contains("update_plan"), "{config}");
    }

    #[test]
    fn opencode_gets_its_server_and_our_plugin_and_gives_back_every_byte() {
        // The person's `.jsonc`, with comments, is the one edited (OpenCode reads it after
        // the `.json`).
        let mut files = HashMap::new();
        let dir = PathBuf::from("/home/dana/.config/opencode");
        let jsonc = dir.join("opencode.jsonc");
        let original = "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  // my model\n  \"model\": \"anthropic/claude-sonnet-4-5\"\n}\n";
        files.insert(jsonc.clone(), original.to_owned());
        let planned = onboard(&mut files, AgentCli::Opencode, None, &wiring("dana/coder")).unwrap();
        assert_eq!(planned.len(), 2, "{planned:#?}");
        assert!(!files.contains_key(&dir.join("opencode.json")));
        assert!(files[&jsonc].contains("// my model"), "{}", files[&jsonc]);
        let server = json_text::value_at(&files[&jsonc], &["mcp", SERVER_NAME])
            .unwrap()
            .unwrap();
        assert_eq!(
            server,
            json!({
                "type": "local",
                "command": ["/opt/round table/bin/roundtable", "mcp", "--agent", "dana/coder"],
                "environment": {"ROUNDTABLE_HOME": "/home/dana/.rt"},
                "enabled": true,
            })
        );
        // The plugin runs the hook by its program and arguments (no shell), passes
        // ROUNDTABLE_HOME on, and marks the session's shell commands.
        let plugin = files[&dir.join("plugins").join(OPENCODE_PLUGIN)].clone();
        assert!(plugin.contains(
            r#"const HOOK = ["/opt/round table/bin/roundtable","hook","opencode","--agent","dana/coder"];"#
        ), "{plugin}");
        assert!(plugin.contains(r#"const ENVIRONMENT = {"ROUNDTABLE_HOME":"/home/dana/.rt"};"#));
        assert!(plugin.contains(r#"const AGENT = "dana/coder";"#));
        assert!(plugin.contains("Stop: 660,"), "{plugin}");
        assert!(!plugin.contains("__"), "a value was left out: {plugin}");
        // Again: nothing to do. Another agent: refused, as is a plugin of someone else's.
        assert!(
            onboard(&mut files, AgentCli::Opencode, None, &wiring("dana/coder"))
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            onboard(&mut files, AgentCli::Opencode, None, &wiring("dana/other")),
            Err(PlanError::Edit(EditError::Taken { other, .. })) if other == "dana/coder"
        ));
        // Undone: the configuration byte for byte, the plugin gone (empty: removed).
        for file in &planned {
            let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
            assert_eq!(
                Some(undone.as_str()).filter(|t| !t.is_empty()),
                file.before.as_deref()
            );
        }
        // A plugin the person changed since is theirs: it stays.
        let changed = format!("{plugin}// mine\n");
        let undone = undo_all(&dir, &changed, &planned[1].undo).unwrap();
        assert_eq!(undone, changed);
        // A trailing comma (which OpenCode reads) is refused with what to do, the file
        // untouched: the edit keeps every byte it does not own, so it reads JSON exactly.
        let mut files = HashMap::new();
        let trailing = "{\n  \"model\": \"anthropic/claude-sonnet-4-5\",\n}\n";
        files.insert(jsonc.clone(), trailing.to_owned());
        let refused = onboard(&mut files, AgentCli::Opencode, None, &wiring("dana/coder"));
        let Err(PlanError::Edit(EditError::Unparsable { detail, .. })) = refused else {
            panic!("{refused:?}");
        };
        assert!(detail.contains("trailing commas"), "{detail}");
        assert_eq!(files[&jsonc], trailing);
    }

    #[test]
    fn antigravity_gets_its_server_and_a_hook_group_of_ours_beside_the_persons() {
        // Written from Antigravity CLI's documentation: hook names at the top level, each
        // mapping events to handlers (flat lists for the lifecycle events).
        let mut files = HashMap::new();
        let dir = PathBuf::from("/home/dana/.gemini/config");
        let hooks_path = dir.join("hooks.json");
        let theirs = "{\n  // lint after edits\n  \"my-linter\": {\n    \"PostToolUse\": [{\"matcher\": \"run_command\", \"hooks\": [{\"command\": \"./lint.sh\", \"timeout\": 10}]}]\n  }\n}\n";
        files.insert(hooks_path.clone(), theirs.to_owned());
        let planned = onboard(
            &mut files,
            AgentCli::Antigravity,
            None,
            &wiring("dana/scout"),
        )
        .unwrap();
        assert_eq!(planned.len(), 2, "{planned:#?}");
        let mcp: Value = serde_json::from_str(&files[&dir.join("mcp_config.json")]).unwrap();
        assert_eq!(
            mcp["mcpServers"]["roundtable"],
            json!({
                "command": "/opt/round table/bin/roundtable",
                "args": ["mcp", "--agent", "dana/scout"],
                "env": {"ROUNDTABLE_HOME": "/home/dana/.rt"},
            })
        );
        let hooks = &files[&hooks_path];
        assert!(hooks.contains("// lint after edits"), "{hooks}");
        let group = json_text::value_at(hooks, &[SERVER_NAME]).unwrap().unwrap();
        assert_eq!(
            group["Stop"],
            json!([{
                "type": "command",
                "command": "ROUNDTABLE_HOME=/home/dana/.rt '/opt/round table/bin/roundtable' hook agy --agent dana/scout Stop",
                "timeout": 660,
            }])
        );
        assert_eq!(group["PreInvocation"][0]["timeout"], 30);
        assert!(
            group.get("PreToolUse").is_none(),
            "a failing hook there would block tools"
        );
        // Again: nothing to do. Another agent: refused, naming the one there.
        assert!(
            onboard(
                &mut files,
                AgentCli::Antigravity,
                None,
                &wiring("dana/scout")
            )
            .unwrap()
            .is_empty()
        );
        assert!(matches!(
            onboard(&mut files, AgentCli::Antigravity, None, &wiring("dana/other")),
            Err(PlanError::Edit(EditError::Taken { other, .. })) if other == "dana/scout"
        ));
        // Undone: both files as they were, byte for byte.
        for file in &planned {
            let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
            assert_eq!(
                Some(undone.as_str()).filter(|t| !t.is_empty()),
                file.before.as_deref()
            );
        }
        // A project's files are its `.agents/` folder's.
        let project = Path::new("/home/dana/src/app");
        assert_eq!(
            env().config_files(AgentCli::Antigravity, Some(project)),
            [
                project.join(".agents/mcp_config.json"),
                project.join(".agents/hooks.json")
            ]
        );
    }

    #[test]
    fn copilot_gets_its_server_and_a_hooks_file_of_ours_that_no_shell_reads() {
        let mut files = HashMap::new();
        let dir = PathBuf::from("/home/dana/.copilot");
        let mcp = dir.join("mcp-config.json");
        let original = "{\n  \"mcpServers\": {\n    \"github\": {\"type\": \"http\", \"url\": \"https://example.com/mcp\", \"tools\": [\"*\"]}\n  }\n}\n";
        files.insert(mcp.clone(), original.to_owned());
        let planned = onboard(&mut files, AgentCli::Copilot, None, &wiring("dana/pilot")).unwrap();
        assert_eq!(planned.len(), 2, "{planned:#?}");
        let config: Value = serde_json::from_str(&files[&mcp]).unwrap();
        assert_eq!(config["mcpServers"]["github"]["type"], "http");
        let server = &config["mcpServers"]["roundtable"];
        assert_eq!(server["type"], "local");
        assert_eq!(server["command"], "/opt/round table/bin/roundtable");
        assert_eq!(server["args"], json!(["mcp", "--agent", "dana/pilot"]));
        assert_eq!(server["tools"], json!(["*"]));
        assert_eq!(server["env"], json!({"ROUNDTABLE_HOME": "/home/dana/.rt"}));
        // Each hook is a program and its arguments, told its event; the path with a space
        // needs no quoting.
        let hooks_path = dir.join("hooks").join(COPILOT_HOOKS_FILE);
        let hooks: Value = serde_json::from_str(&files[&hooks_path]).unwrap();
        assert_eq!(hooks["version"], 1);
        for event in COPILOT_HOOKS {
            let hook = &hooks["hooks"][event][0];
            assert_eq!(hook["exec"], "/opt/round table/bin/roundtable", "{hooks}");
            assert_eq!(
                hook["args"],
                json!(["hook", "copilot", "--agent", "dana/pilot", event])
            );
            assert_eq!(hook["env"], json!({"ROUNDTABLE_HOME": "/home/dana/.rt"}));
            assert!(hook.get("bash").is_none() && hook.get("command").is_none());
        }
        assert_eq!(hooks["hooks"]["agentStop"][0]["timeoutSec"], 660);
        assert_eq!(hooks["hooks"]["permissionRequest"][0]["timeoutSec"], 150);
        assert_eq!(hooks["hooks"]["postToolUse"][0]["timeoutSec"], 30);
        // Again: nothing to do; another agent, or a hooks file that is not ours: refused.
        assert!(
            onboard(&mut files, AgentCli::Copilot, None, &wiring("dana/pilot"))
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            onboard(&mut files, AgentCli::Copilot, None, &wiring("dana/other")),
            Err(PlanError::Edit(EditError::Taken { other, .. })) if other == "dana/pilot"
        ));
        let mut theirs = HashMap::new();
        theirs.insert(
            hooks_path.clone(),
            "{\"version\": 1, \"hooks\": {}}".to_owned(),
        );
        assert!(matches!(
            onboard(&mut theirs, AgentCli::Copilot, None, &wiring("dana/pilot")),
            Err(PlanError::Edit(EditError::NotOurs { .. }))
        ));
        // Undone: the person's configuration byte for byte, our hooks gone.
        for file in &planned {
            let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
            assert_eq!(
                Some(undone.as_str()).filter(|t| !t.is_empty()),
                file.before.as_deref()
            );
        }
        // `$COPILOT_HOME` moves everything.
        let moved = Environment {
            copilot_home: Some(PathBuf::from("/srv/copilot")),
            ..env()
        };
        assert_eq!(
            moved.config_files(AgentCli::Copilot, None),
            [
                PathBuf::from("/srv/copilot/mcp-config.json"),
                PathBuf::from("/srv/copilot/hooks/roundtable.json")
            ]
        );
        assert_eq!(
            moved.log_dirs(AgentCli::Copilot),
            [PathBuf::from("/srv/copilot/session-state")]
        );
    }

    #[test]
    fn opencode_with_no_configuration_gets_a_file_of_ours_with_the_schema_it_would_add() {
        let mut files = HashMap::new();
        let project = Path::new("/home/dana/src/app");
        let planned = onboard(
            &mut files,
            AgentCli::Opencode,
            Some(project),
            &wiring("dana/coder"),
        )
        .unwrap();
        let config = &files[&project.join("opencode.json")];
        let value: Value = serde_json::from_str(config).unwrap();
        assert_eq!(value["$schema"], OPENCODE_SCHEMA);
        assert_eq!(value["mcp"][SERVER_NAME]["command"][3], "dana/coder");
        // `$schema` comes first, as OpenCode puts it.
        assert!(
            config.trim_start()[1..]
                .trim_start()
                .starts_with("\"$schema\""),
            "{config}"
        );
        assert!(files.contains_key(&project.join(".opencode/plugins").join(OPENCODE_PLUGIN)));
        // Both files were created: undone, both are empty (offboarding removes them).
        for file in &planned {
            assert_eq!(file.before, None);
            assert_eq!(
                undo_all(&file.path, &files[&file.path], &file.undo).unwrap(),
                ""
            );
        }
        // A plugin of that name that is not ours is never overwritten.
        let mut files = HashMap::new();
        files.insert(
            project.join(".opencode/plugins").join(OPENCODE_PLUGIN),
            "export const Mine = async () => ({});\n".to_owned(),
        );
        assert!(matches!(
            onboard(
                &mut files,
                AgentCli::Opencode,
                Some(project),
                &wiring("dana/coder")
            ),
            Err(PlanError::Edit(EditError::NotOurs { .. }))
        ));
    }

    #[test]
    fn gemini_gets_a_trusted_server_with_a_timeout_long_enough_to_wait_and_its_hooks() {
        let mut files = HashMap::new();
        let path = PathBuf::from("/home/dana/.gemini/settings.json");
        let original = "// Gemini CLI settings\n{\n  \"theme\": \"GitHub\"\n}\n";
        files.insert(path.clone(), original.to_owned());
        let planned = onboard(&mut files, AgentCli::Gemini, None, &wiring("dana/helper")).unwrap();
        assert!(files[&path].starts_with("// Gemini CLI settings\n{\n  \"theme\": \"GitHub\""));
        let server = json_text::value_at(&files[&path], &["mcpServers", SERVER_NAME])
            .unwrap()
            .unwrap();
        assert_eq!(server["timeout"], 660_000);
        assert_eq!(server["trust"], true);
        assert_eq!(server["args"], json!(["mcp", "--agent", "dana/helper"]));
        for event in GEMINI_HOOKS {
            let hook = json_text::value_at(&files[&path], &["hooks", event, "0"])
                .unwrap()
                .map(|group| group["hooks"][0].clone())
                .or_else(|| {
                    json_text::value_at(&files[&path], &["hooks", event])
                        .unwrap()
                        .map(|groups| groups[0]["hooks"][0].clone())
                })
                .unwrap();
            assert!(
                hook["command"]
                    .as_str()
                    .unwrap()
                    .ends_with("hook gemini --agent dana/helper"),
                "{hook}"
            );
        }
        // Milliseconds: the turn's end listens as long as the others'.
        let after_agent = json_text::value_at(&files[&path], &["hooks", "AfterAgent"])
            .unwrap()
            .unwrap();
        assert_eq!(after_agent[0]["hooks"][0]["timeout"], 660_000);
        let undone = undo_all(&path, &files[&path], &planned[0].undo).unwrap();
        assert_eq!(undone, original);
    }

    #[test]
    fn codex_gets_its_hooks_trusted_by_the_hash_it_computes_and_its_plan_tool() {
        let mut files = HashMap::new();
        let config_path = env().codex_dir().join("config.toml");
        let hooks_path = env().codex_dir().join("hooks.json");
        let config = "model = \"o3\"\nnotify = [\"notify-send\", \"codex\"]\n";
        // The person has a Stop hook of their own: ours comes after it.
        let hooks = "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"say done\"}]}]}}\n";
        files.insert(config_path.clone(), config.to_owned());
        files.insert(hooks_path.clone(), hooks.to_owned());
        let planned = onboard(&mut files, AgentCli::Codex, None, &wiring("dana/reviewer")).unwrap();
        let parsed: toml::Table = toml::from_str(&files[&config_path]).unwrap();
        // The person's notify is theirs: Codex's hooks do the work now.
        assert_eq!(parsed["notify"].as_array().unwrap().len(), 2);
        assert_eq!(
            parsed["mcp_servers"]["roundtable"]["tool_timeout_sec"].as_integer(),
            Some(660)
        );
        assert_eq!(
            parsed["tools"]["update_plan"]["enabled"].as_bool(),
            Some(true)
        );
        let written: Value = serde_json::from_str(&files[&hooks_path]).unwrap();
        let command = written["hooks"]["Stop"][1]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            command.ends_with("hook codex --agent dana/reviewer"),
            "{command}"
        );
        let state = parsed["hooks"]["state"].as_table().unwrap();
        let stop = &state[&format!("{}:stop:1:0", hooks_path.display())];
        assert_eq!(
            stop["trusted_hash"].as_str(),
            Some(codex_hook_hash("stop", None, &command, 660).as_str())
        );
        assert_eq!(state.len(), CODEX_HOOKS.len());
        assert!(state.contains_key(&format!("{}:session_start:0:0", hooks_path.display())));
        // Onboarding again changes nothing.
        assert!(
            onboard(&mut files, AgentCli::Codex, None, &wiring("dana/reviewer"))
                .unwrap()
                .is_empty()
        );
        for file in &planned {
            let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
            assert_eq!(Some(undone.as_str()), file.before.as_deref());
        }
    }

    #[test]
    fn codexs_trust_hash_is_the_one_codex_reports() {
        // `hooks/list` of Codex 0.169.0 for these hooks (a research run's hooks.json).
        let command = "python3 /tmp/research/codex/hooklog.py /tmp/research/codex/r3/hooks.log /tmp/research/codex/r3/resp";
        assert_eq!(
            codex_hook_hash("stop", None, command, 30),
            "sha256:48ce08bd28a08b793fddc32a90a8a6552a19a2317b02e816647671e191b28c9f"
        );
        assert_eq!(
            codex_hook_hash("pre_tool_use", Some("*"), command, 30),
            "sha256:f63faccac555f6f5a6148721cb87fe8d61b5be0c98a1259bcde72d5a66b8d76a"
        );
    }

    #[test]
    fn changed_lines_show_what_was_added_and_removed() {
        let (added, removed) = changed_lines("a\nb\nc\n", "a\nb\nx\ny\nc\n");
        assert_eq!(
            (added, removed),
            (vec!["x".to_owned(), "y".to_owned()], vec![])
        );
        let (added, removed) = changed_lines("a\nb\n", "a\n");
        assert_eq!((added, removed), (vec![], vec!["b".to_owned()]));
    }

    #[test]
    fn each_cli_s_hook_command_is_written_for_the_shell_it_runs_hooks_in_on_each_os() {
        assert_eq!(
            HookShell::of(AgentCli::Claude, Os::Windows),
            HookShell::Posix
        );
        assert_eq!(HookShell::of(AgentCli::Codex, Os::Windows), HookShell::Cmd);
        assert_eq!(
            HookShell::of(AgentCli::Gemini, Os::Windows),
            HookShell::PowerShell
        );
        for cli in [AgentCli::Claude, AgentCli::Codex, AgentCli::Gemini] {
            assert_eq!(HookShell::of(cli, Os::MacOs), HookShell::Posix);
            assert_eq!(HookShell::of(cli, Os::Linux), HookShell::Posix);
        }
        let windows = Wiring {
            roundtable: PathBuf::from(r"C:\Program Files\Roundtable\roundtable.exe"),
            roundtable_home: None,
            os: Os::Windows,
            ..wiring("dana/writer")
        };
        assert_eq!(
            windows.hook_command_for("codex", HookShell::Cmd),
            r#""C:\Program Files\Roundtable\roundtable.exe" hook codex --agent dana/writer"#
        );
        assert_eq!(
            windows.hook_command_for("gemini", HookShell::PowerShell),
            r"& 'C:\Program Files\Roundtable\roundtable.exe' hook gemini --agent dana/writer"
        );
        assert_eq!(
            windows.hook_command_for("claude", HookShell::Posix),
            r"'C:\Program Files\Roundtable\roundtable.exe' hook claude --agent dana/writer"
        );
        let at_home = Wiring {
            roundtable: PathBuf::from(r"C:\Users\o'neil\bin\roundtable.exe"),
            roundtable_home: Some(PathBuf::from(r"C:\Users\o'neil\rt home")),
            ..windows
        };
        assert_eq!(
            at_home.hook_command_for("codex", HookShell::Cmd),
            r#"set "ROUNDTABLE_HOME=C:\Users\o'neil\rt home" && "C:\Users\o'neil\bin\roundtable.exe" hook codex --agent dana/writer"#
        );
        assert_eq!(
            at_home.hook_command_for("gemini", HookShell::PowerShell),
            r"$env:ROUNDTABLE_HOME = 'C:\Users\o''neil\rt home'; & 'C:\Users\o''neil\bin\roundtable.exe' hook gemini --agent dana/writer"
        );
        assert_eq!(
            at_home.hook_command_for("claude", HookShell::Posix),
            r"ROUNDTABLE_HOME='C:\Users\o'\''neil\rt home' 'C:\Users\o'\''neil\bin\roundtable.exe' hook claude --agent dana/writer"
        );
        // A path with nothing to quote stays bare where a backslash is no escape.
        let bare = Wiring {
            roundtable: PathBuf::from(r"C:\rt\roundtable.exe"),
            roundtable_home: None,
            ..at_home
        };
        assert_eq!(
            bare.hook_command_for("codex", HookShell::Cmd),
            r"C:\rt\roundtable.exe hook codex --agent dana/writer"
        );
        assert_eq!(
            bare.hook_command_for("gemini", HookShell::PowerShell),
            r"& C:\rt\roundtable.exe hook gemini --agent dana/writer"
        );
    }
}
