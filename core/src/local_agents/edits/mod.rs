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
use crate::hook_settings::HookSettings;
use roundtable_platform::places::Os;

mod claude;
mod codex;
mod toml_json;

use claude::claude_settings;
pub use codex::codex_hook_hash;
use codex::{codex_config, codex_hooks};
use toml_json::{inline_table, json_of_toml_table};

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
    include_str!("../opencode_plugin.js")
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

#[cfg(test)]
mod tests;
