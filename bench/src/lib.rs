//! What the bench binaries share. The watcher's figures are measured the same way for every
//! kind of agent log (`roundtable-bench-scan`, `roundtable-bench-opencode`).

#![allow(clippy::print_stdout, reason = "the benches' reports go to stdout")]

pub mod side_by_side;
pub mod watching;
