//! The MCP tools with which agents join Roundtable, defined once for every way an agent
//! reaches its hub: the stdio bridge (`roundtable mcp`, over the core and its cache) and the
//! hub's own `/mcp`. One definition keeps the two lists the same, word for word, which a
//! golden test pins.

pub mod args;
pub mod ops;
pub mod tools;

pub use ops::{HubOps, HumanAnswer, Ping, Sent, Shown, ToolError};
pub use tools::{LONGEST_WAIT, OneAgent, OpsSource, Tools};
