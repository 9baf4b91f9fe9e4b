//! The work view: what agents do, read from their own logs. A person who steps away and
//! comes back sees each session's task list (the one the agent keeps for itself), the files
//! and components it touched, and what it cost, without reading a transcript.
//!
//! Layout:
//! - [`events`]: the normalized events every parser produces.
//! - [`claude`], [`codex`], [`gemini`], [`opencode`], [`copilot`]: the parsers, pure (bytes
//!   or rows in, events out), one per agent CLI; [`opencode_db`] and [`copilot_db`] read the
//!   databases some CLIs log to, through [`foreign_db`].
//! - [`summary`]: adding events up per session (each model request counted once).
//! - [`pricing`]: what tokens cost (a data file, with a person's overrides).
//! - [`scan`]: reading every log on this machine in one pass.
//! - [`watch`]: following the logs as they are written, into the cache.
//! - [`publish`]: which onboarded agent a session belongs to, and the `tasks`, `usage` and
//!   `arch` events its work becomes.
//! - [`architecture`]: a repository's components (`.roundtable/architecture.toml`).
//! - [`figures`]: cost and tokens grouped as a person asks, local and shared together.
//! - [`digest`]: "while you were away".
//! - [`boards`]: the desktop's boards (tasks, architecture, costs, sessions), one call each.

pub mod architecture;
pub mod boards;
pub mod claude;
pub mod codex;
pub mod copilot;
pub mod copilot_db;
pub mod digest;
pub mod figures;
pub mod foreign_db;
pub mod gemini;
pub mod inferred;
mod lenient;
pub mod opencode;
pub mod opencode_db;
pub mod overlaps;
pub mod paths;
pub mod pricing;
pub mod publish;
pub mod scan;
pub mod summary;
pub mod watch;
