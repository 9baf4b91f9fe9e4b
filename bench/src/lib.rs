//! What the bench binaries share. The watcher's figures are measured the same way for every
//! kind of agent log (`roundtable-bench-scan`, `roundtable-bench-opencode`).

pub mod watching;
