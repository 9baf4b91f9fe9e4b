//! How `roundtable run --acp` reaches each agent CLI over the Agent Client Protocol: some
//! CLIs have an ACP mode of their own, Claude Code and Codex have adapter programs that run
//! the CLI. Said once here, for the runner that starts them and for `agents detect` and the
//! Onboarding view that tell a person what to install.

use super::AgentCli;

/// How a CLI is driven over ACP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcpRoute {
    /// The CLI's own executable, with these arguments.
    OwnMode(&'static [&'static str]),
    /// An adapter program that runs the CLI.
    Adapter(AcpAdapter),
}

/// An ACP agent that drives a CLI which has no ACP mode of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcpAdapter {
    /// Its executable's name.
    pub command: &'static str,
    /// Its npm package, to install it from.
    pub package: &'static str,
    /// The environment variable naming the CLI's executable it drives (the person's own,
    /// so the copy the adapter would bundle is never needed).
    pub executable_env: &'static str,
}

impl AgentCli {
    /// How `roundtable run --acp` drives it; `None` when Roundtable knows no way (its ACP
    /// program is then given with `--acp-agent`).
    pub fn acp(self) -> Option<AcpRoute> {
        match self {
            AgentCli::Opencode => Some(AcpRoute::OwnMode(&["acp"])),
            AgentCli::Copilot => Some(AcpRoute::OwnMode(&["--acp"])),
            AgentCli::Gemini => Some(AcpRoute::OwnMode(&["--experimental-acp"])),
            AgentCli::Claude => Some(AcpRoute::Adapter(AcpAdapter {
                command: "claude-agent-acp",
                package: "@agentclientprotocol/claude-agent-acp",
                executable_env: "CLAUDE_CODE_EXECUTABLE",
            })),
            AgentCli::Codex => Some(AcpRoute::Adapter(AcpAdapter {
                command: "codex-acp",
                package: "@agentclientprotocol/codex-acp",
                executable_env: "CODEX_PATH",
            })),
            AgentCli::Antigravity | AgentCli::CursorAgent => None,
        }
    }
}
