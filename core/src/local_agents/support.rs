//! What Roundtable does with each agent CLI, said once: `roundtable agents detect`, the
//! desktop's Onboarding view and the table at the top of `docs/agents.md` say the same, so a
//! person choosing a CLI knows what they will get before onboarding it. A test keeps the
//! window's demo data (`ui/src/backend/fixtures/agent-clis.json`) equal to this.

use serde::Serialize;

use super::AgentCli;

/// One aspect of what Roundtable does with an agent CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub enum Aspect {
    /// Roundtable's tools in its sessions (the MCP server).
    Tools,
    /// Its own task list, on the tasks board.
    Tasks,
    /// The files it edits, on the architecture board.
    Files,
    /// Its tokens and what they cost.
    Costs,
    /// When messages for the agent reach its session.
    Messages,
    /// Its permission requests.
    Permissions,
    /// How `roundtable run --acp` drives it.
    Acp,
}

impl Aspect {
    /// The aspect as a person reads it, in a list.
    pub fn label(self) -> &'static str {
        match self {
            Aspect::Tools => "tools",
            Aspect::Tasks => "task list",
            Aspect::Files => "files",
            Aspect::Costs => "costs",
            Aspect::Messages => "messages",
            Aspect::Permissions => "permissions",
            Aspect::Acp => "over ACP",
        }
    }
}

/// What Roundtable does with a CLI in one aspect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct Support {
    pub aspect: Aspect,
    pub how: String,
}

impl AgentCli {
    /// What Roundtable does with this CLI (nothing yet for one it only lists).
    pub fn support(self) -> Vec<Support> {
        use Aspect::*;
        let turn_end = "at a prompt's start, at a tool's end, and at a turn's end (the turn goes on with them)";
        let rows: &[(Aspect, &str)] = match self {
            AgentCli::Claude => &[
                (Tools, "Roundtable's MCP server in every session"),
                (
                    Tasks,
                    "TaskCreate and TaskUpdate, TodoWrite (turned on for today's models)",
                ),
                (Files, "Edit, Write, MultiEdit, NotebookEdit"),
                (
                    Costs,
                    "per request, from its transcripts, as Claude Code bills",
                ),
                (
                    Messages,
                    "at a prompt's start, at a tool's end, and at a turn's end; a session you sit at listens after its turn until you type",
                ),
                (Permissions, "asked of you in Roundtable"),
                (
                    Acp,
                    "through claude-agent-acp (npm @agentclientprotocol/claude-agent-acp), which runs your claude",
                ),
            ],
            AgentCli::Codex => &[
                (Tools, "Roundtable's MCP server in every session"),
                (Tasks, "update_plan (turned on)"),
                (Files, "apply_patch"),
                (
                    Costs,
                    "per request, from its rollouts, with the thread's service tier",
                ),
                (
                    Messages,
                    "at a prompt's start, at a tool's end, and at a turn's end; a resting session is woken through Codex's queue",
                ),
                (Permissions, "asked of you in Roundtable"),
                (
                    Acp,
                    "through codex-acp (npm @agentclientprotocol/codex-acp), which runs your codex",
                ),
            ],
            AgentCli::Gemini => &[
                (Tools, "Roundtable's MCP server, trusted"),
                (Tasks, "write_todos, or Roundtable's report_tasks"),
                (Files, "write_file, replace"),
                (Costs, "per request, from its chats"),
                (Messages, turn_end),
                (Permissions, "asked at its terminal"),
                (Acp, "gemini --experimental-acp (not tried here)"),
            ],
            AgentCli::Opencode => &[
                (Tools, "Roundtable's MCP server in every session"),
                (Tasks, "todowrite"),
                (
                    Files,
                    "write, edit, multiedit, and every file a step changed",
                ),
                (
                    Costs,
                    "per model step, from its database, priced by Roundtable",
                ),
                (
                    Messages,
                    "at a prompt's start and at a tool's end; at a turn's end in a session kept open",
                ),
                (Permissions, "asked at its terminal"),
                (Acp, "opencode acp"),
            ],
            AgentCli::Copilot => &[
                (
                    Tools,
                    "Roundtable's MCP server, its tools allowed without asking",
                ),
                (Tasks, "its todos table (the sql tool)"),
                (Files, "every file its own tools committed"),
                (
                    Costs,
                    "per request, from its session logs, priced by Roundtable",
                ),
                (Messages, turn_end),
                (
                    Permissions,
                    "asked of you in Roundtable when no one sits at it; at its terminal otherwise",
                ),
                (Acp, "copilot --acp (not tried here)"),
            ],
            // From its documentation: it could not be run here.
            AgentCli::Antigravity => &[
                (
                    Tools,
                    "Roundtable's MCP server in every session (from its documentation, not run here)",
                ),
                (
                    Tasks,
                    "Roundtable's report_tasks (its own list is not readable)",
                ),
                (
                    Files,
                    "not read: its conversations are undocumented protobuf",
                ),
                (
                    Costs,
                    "not read: its sessions are unpriced, never shown as free",
                ),
                (
                    Messages,
                    "before each model call, and at a turn's end (the turn goes on with them)",
                ),
                (Permissions, "asked at its terminal"),
                (
                    Acp,
                    "its ACP program, given with --acp-agent (not tried here)",
                ),
            ],
            AgentCli::CursorAgent => &[],
        };
        rows.iter()
            .map(|(aspect, how)| Support {
                aspect: *aspect,
                how: (*how).to_owned(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_cli_roundtable_onboards_says_every_aspect_and_the_others_none() {
        for cli in AgentCli::ALL {
            let aspects: Vec<Aspect> = cli.support().iter().map(|row| row.aspect).collect();
            if cli.supported() {
                assert_eq!(
                    aspects,
                    [
                        Aspect::Tools,
                        Aspect::Tasks,
                        Aspect::Files,
                        Aspect::Costs,
                        Aspect::Messages,
                        Aspect::Permissions,
                        Aspect::Acp
                    ],
                    "{cli}"
                );
            } else {
                assert!(aspects.is_empty(), "{cli}");
            }
        }
    }

    /// The window's demo data lists each CLI as the core does.
    #[test]
    fn the_uis_agent_clis_are_the_cores_own() {
        let clis: Vec<_> = AgentCli::ALL
            .iter()
            .map(|cli| {
                json!({
                    "cli": cli, "name": cli.display_name(), "supported": cli.supported(),
                    "support": cli.support(),
                })
            })
            .collect();
        crate::keep_ui_fixture("agent-clis.json", &json!(clis), "agent_clis");
    }
}
