//! The agent CLIs installed on this machine: which there are, where their configuration and
//! logs live, and onboarding one (registering it as an agent and wiring Roundtable's MCP
//! server and hooks into its configuration) or offboarding it.
//!
//! Every location follows `HOME`, and `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `GEMINI_CLI_HOME`,
//! `XDG_CONFIG_HOME`/`XDG_DATA_HOME` (OpenCode) and `COPILOT_HOME` as the CLIs do; the environment is passed in ([`Environment`]), so detection is testable.
//!
//! Layout:
//! - [`detect`]: finding the executables (on `PATH` and in the usual install places) and
//!   their versions.
//! - [`edits`]: the configuration edits, planned as pure text → text functions that keep
//!   every byte of the user's content, and undone exactly.
//! - [`support`]: what Roundtable does with each CLI, as detection lists it.
//! - [`onboarding`]: putting it together: register, edit atomically with a backup, record
//!   what was done so offboarding removes exactly that.

pub mod acp;
pub mod detect;
pub mod edits;
pub mod json_text;
pub mod onboarding;
pub mod support;
pub mod toml_text;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// An agent CLI Roundtable knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub enum AgentCli {
    Claude,
    Codex,
    Gemini,
    Opencode,
    CursorAgent,
    Copilot,
    /// Antigravity CLI (`agy`), Gemini CLI's successor: onboarded from its documentation
    /// (it cannot be installed where Roundtable is tested).
    Antigravity,
}

impl AgentCli {
    pub const ALL: [AgentCli; 7] = [
        AgentCli::Claude,
        AgentCli::Codex,
        AgentCli::Gemini,
        AgentCli::Opencode,
        AgentCli::CursorAgent,
        AgentCli::Copilot,
        AgentCli::Antigravity,
    ];

    /// Its executable's name.
    pub fn command(self) -> &'static str {
        match self {
            AgentCli::Claude => "claude",
            AgentCli::Codex => "codex",
            AgentCli::Gemini => "gemini",
            AgentCli::Opencode => "opencode",
            AgentCli::CursorAgent => "cursor-agent",
            AgentCli::Copilot => "copilot",
            AgentCli::Antigravity => "agy",
        }
    }

    pub fn parse(text: &str) -> Option<AgentCli> {
        AgentCli::ALL.into_iter().find(|cli| {
            cli.command() == text
                || (text == "claude-code" && *cli == AgentCli::Claude)
                || (text == "antigravity" && *cli == AgentCli::Antigravity)
        })
    }

    /// The name people know it by.
    pub fn display_name(self) -> &'static str {
        match self {
            AgentCli::Claude => "Claude Code",
            AgentCli::Codex => "Codex",
            AgentCli::Gemini => "Gemini CLI",
            AgentCli::Opencode => "OpenCode",
            AgentCli::CursorAgent => "Cursor Agent",
            AgentCli::Copilot => "GitHub Copilot CLI",
            AgentCli::Antigravity => "Antigravity CLI",
        }
    }

    /// The framework name its sessions carry in `tasks` and `usage` events.
    pub fn framework(self) -> &'static str {
        match self {
            AgentCli::Claude => "claude-code",
            AgentCli::Codex => "codex",
            AgentCli::Gemini => "gemini",
            AgentCli::Opencode => "opencode",
            AgentCli::CursorAgent => "cursor-agent",
            AgentCli::Copilot => "copilot",
            AgentCli::Antigravity => "antigravity",
        }
    }

    /// The framework of its logs, for the CLIs whose logs Roundtable reads.
    pub fn work_framework(self) -> Option<crate::log_events::Framework> {
        use crate::log_events::Framework;
        match self {
            AgentCli::Claude => Some(Framework::ClaudeCode),
            AgentCli::Codex => Some(Framework::Codex),
            AgentCli::Gemini => Some(Framework::Gemini),
            AgentCli::Opencode => Some(Framework::Opencode),
            AgentCli::Copilot => Some(Framework::Copilot),
            // Its conversations hold their usage as undocumented protobuf: not read, so its
            // sessions are never priced (rather than priced at nothing).
            AgentCli::Antigravity | AgentCli::CursorAgent => None,
        }
    }

    /// Whether `roundtable run` drives it with no terminal (see [`crate::runner`]): every
    /// CLI Roundtable onboards but Antigravity, whose headless mode could not be tried.
    pub fn runs_headless(self) -> bool {
        self.supported() && self != AgentCli::Antigravity
    }

    /// Whether Roundtable can onboard it (the others are detected and listed).
    pub fn supported(self) -> bool {
        matches!(
            self,
            AgentCli::Claude
                | AgentCli::Codex
                | AgentCli::Gemini
                | AgentCli::Opencode
                | AgentCli::Copilot
                | AgentCli::Antigravity
        )
    }
}

impl std::fmt::Display for AgentCli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.command())
    }
}

/// The parts of the process environment that locate agent CLIs and their files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Environment {
    pub home: PathBuf,
    pub path: Option<OsString>,
    pub claude_config_dir: Option<PathBuf>,
    pub codex_home: Option<PathBuf>,
    pub gemini_dir: Option<PathBuf>,
    /// `XDG_CONFIG_HOME` and `XDG_DATA_HOME`, which OpenCode follows on every OS.
    pub xdg_config_home: Option<PathBuf>,
    pub xdg_data_home: Option<PathBuf>,
    /// `COPILOT_HOME`, which replaces GitHub Copilot CLI's whole `~/.copilot`.
    pub copilot_home: Option<PathBuf>,
    /// Windows only: the folders npm, Node.js and the other installers put programs in
    /// (from `%APPDATA%`, `%LOCALAPPDATA%`, `%ProgramFiles%`, `%NVM_SYMLINK%`).
    pub windows: WindowsPlaces,
}

/// The Windows variables that locate agent CLIs (empty elsewhere).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowsPlaces {
    pub appdata: Option<PathBuf>,
    pub local_appdata: Option<PathBuf>,
    pub program_files: Option<PathBuf>,
    pub nvm_symlink: Option<PathBuf>,
}

impl Environment {
    /// This process's environment.
    pub fn current() -> Environment {
        let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        Environment {
            home: roundtable_platform::places::home().unwrap_or_else(|| PathBuf::from(".")),
            path: var("PATH"),
            // Claude Code accepts a list; its first directory is where it writes.
            claude_config_dir: var("CLAUDE_CONFIG_DIR").map(|dirs| {
                let dirs = dirs.to_string_lossy().into_owned();
                PathBuf::from(dirs.split(',').next().unwrap_or_default())
            }),
            codex_home: var("CODEX_HOME").map(PathBuf::from),
            // Gemini CLI's stand-in for the home directory: its files are in
            // `$GEMINI_CLI_HOME/.gemini`.
            gemini_dir: var("GEMINI_CLI_HOME").map(|home| PathBuf::from(home).join(".gemini")),
            xdg_config_home: var("XDG_CONFIG_HOME").map(PathBuf::from),
            xdg_data_home: var("XDG_DATA_HOME").map(PathBuf::from),
            copilot_home: var("COPILOT_HOME").map(PathBuf::from),
            windows: if cfg!(windows) {
                WindowsPlaces {
                    appdata: var("APPDATA").map(PathBuf::from),
                    local_appdata: var("LOCALAPPDATA").map(PathBuf::from),
                    program_files: var("ProgramFiles").map(PathBuf::from),
                    nvm_symlink: var("NVM_SYMLINK").map(PathBuf::from),
                }
            } else {
                WindowsPlaces::default()
            },
        }
    }

    /// Claude Code's directory: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
    pub fn claude_dir(&self) -> PathBuf {
        self.claude_config_dir
            .clone()
            .unwrap_or_else(|| self.home.join(".claude"))
    }

    /// Claude Code's global configuration (MCP servers of user scope):
    /// `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`.
    pub fn claude_json(&self) -> PathBuf {
        match &self.claude_config_dir {
            Some(dir) => dir.join(".claude.json"),
            None => self.home.join(".claude.json"),
        }
    }

    /// Codex's directory: `$CODEX_HOME`, else `~/.codex`.
    pub fn codex_dir(&self) -> PathBuf {
        self.codex_home
            .clone()
            .unwrap_or_else(|| self.home.join(".codex"))
    }

    /// Gemini CLI's directory: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
    pub fn gemini_dir(&self) -> PathBuf {
        self.gemini_dir
            .clone()
            .unwrap_or_else(|| self.home.join(".gemini"))
    }

    /// OpenCode's configuration folder: `$XDG_CONFIG_HOME/opencode`, else
    /// `~/.config/opencode` (on every OS: OpenCode follows the XDG layout everywhere).
    pub fn opencode_config_dir(&self) -> PathBuf {
        self.xdg_config_home
            .clone()
            .unwrap_or_else(|| self.home.join(".config"))
            .join("opencode")
    }

    /// OpenCode's data folder (its database, `opencode.db`): `$XDG_DATA_HOME/opencode`,
    /// else `~/.local/share/opencode`.
    pub fn opencode_data_dir(&self) -> PathBuf {
        self.xdg_data_home
            .clone()
            .unwrap_or_else(|| self.home.join(".local").join("share"))
            .join("opencode")
    }

    /// GitHub Copilot CLI's directory (configuration, hooks, session logs):
    /// `$COPILOT_HOME`, else `~/.copilot` (on every OS).
    pub fn copilot_dir(&self) -> PathBuf {
        self.copilot_home
            .clone()
            .unwrap_or_else(|| self.home.join(".copilot"))
    }

    /// Antigravity CLI's shared configuration folder, `~/.gemini/config` (no variable moves
    /// it; `~/.gemini/antigravity-cli/` holds its older files and its conversations).
    pub fn antigravity_config_dir(&self) -> PathBuf {
        self.home.join(".gemini").join("config")
    }

    /// The configuration files Roundtable edits (or would edit) for `cli`. OpenCode's are
    /// its configuration (`opencode.json`, or the `opencode.jsonc` beside it, which
    /// [`edits::plan`] prefers when there is one) and Roundtable's plugin.
    pub fn config_files(&self, cli: AgentCli, project: Option<&Path>) -> Vec<PathBuf> {
        match (cli, project) {
            (AgentCli::Claude, None) => {
                vec![self.claude_json(), self.claude_dir().join("settings.json")]
            }
            (AgentCli::Claude, Some(project)) => vec![
                project.join(".mcp.json"),
                project.join(".claude").join("settings.json"),
            ],
            (AgentCli::Codex, _) => vec![
                self.codex_dir().join("config.toml"),
                self.codex_dir().join("hooks.json"),
            ],
            (AgentCli::Gemini, None) => vec![self.gemini_dir().join("settings.json")],
            (AgentCli::Gemini, Some(project)) => {
                vec![project.join(".gemini").join("settings.json")]
            }
            (AgentCli::Opencode, None) => {
                let dir = self.opencode_config_dir();
                vec![
                    dir.join("opencode.json"),
                    dir.join("opencode.jsonc"),
                    dir.join("plugins").join(edits::OPENCODE_PLUGIN),
                ]
            }
            (AgentCli::Opencode, Some(project)) => vec![
                project.join("opencode.json"),
                project.join("opencode.jsonc"),
                project
                    .join(".opencode")
                    .join("plugins")
                    .join(edits::OPENCODE_PLUGIN),
            ],
            (AgentCli::Antigravity, None) => {
                let dir = self.antigravity_config_dir();
                vec![dir.join("mcp_config.json"), dir.join("hooks.json")]
            }
            (AgentCli::Antigravity, Some(project)) => {
                let dir = project.join(".agents");
                vec![dir.join("mcp_config.json"), dir.join("hooks.json")]
            }
            (AgentCli::CursorAgent, _) => vec![self.home.join(".cursor/mcp.json")],
            // Copilot loads a project's MCP servers and hooks only once the folder is
            // trusted: the person's own files are the ones every session reads.
            (AgentCli::Copilot, _) => vec![
                self.copilot_dir().join("mcp-config.json"),
                self.copilot_dir()
                    .join("hooks")
                    .join(edits::COPILOT_HOOKS_FILE),
            ],
        }
    }

    /// Where `cli` writes its session logs.
    pub fn log_dirs(&self, cli: AgentCli) -> Vec<PathBuf> {
        match cli {
            AgentCli::Claude => vec![
                self.claude_dir().join("projects"),
                self.claude_dir().join("tasks"),
            ],
            AgentCli::Codex => vec![
                self.codex_dir().join("sessions"),
                self.codex_dir().join("archived_sessions"),
            ],
            AgentCli::Gemini => vec![self.gemini_dir().join("tmp")],
            AgentCli::Opencode => vec![self.opencode_data_dir()],
            AgentCli::CursorAgent => vec![self.home.join(".cursor/chats")],
            AgentCli::Copilot => vec![self.copilot_dir().join("session-state")],
            AgentCli::Antigravity => {
                vec![self.home.join(".gemini/antigravity-cli/conversations")]
            }
        }
    }
}

/// 1-based line and column (in characters) of a byte offset into a config file, for the
/// errors that point a person at what to fix.
pub(crate) fn line_and_column(text: &str, position: usize) -> (usize, usize) {
    let mut position = position.min(text.len());
    while !text.is_char_boundary(position) {
        position -= 1;
    }
    let before = &text[..position];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |index| index + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}
