//! Driving an agent over ACP (the Agent Client Protocol, version 1): `roundtable run --acp`
//! keeps one agent process for the runner's life and one ACP session per room, instead of
//! starting the agent CLI once per turn. Roundtable's MCP server is attached to each session
//! when it is made (`session/new`), so no configuration file is edited; each batch of
//! messages is one `session/prompt`; after a restart the room's session is loaded again
//! (`session/load`) when the agent can; a turn is cancelled (`session/cancel`) when the
//! agent is paused or stopped in the room. What the session says becomes Roundtable's: the
//! reply's text is posted in the room, a plan is the agent's task list, a permission the
//! agent asks for is a ping for its person with the agent's own options (the first answer
//! wins; with none in time the request is cancelled).
//!
//! Layout: [`updates`] reads what the agent says (pure); [`connection`] is the agent's
//! process and its stdio; the runner's side is `runner::acp_turn`.

pub mod connection;
pub mod updates;

#[cfg(test)]
mod tests;
