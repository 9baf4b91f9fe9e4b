//! Roundtable end to end: `roundtable hub` processes, `roundtable` CLI processes and cores
//! over real sockets and real SQLite files, in temporary directories.

mod a2a_clients;
mod a2a_outbound;
mod agents;
mod budgets;
mod build_settings;
mod cli;
mod convergence;
mod crashes;
mod engine;
mod hand_off;
mod hostile_agents;
mod hostile_load;
mod hub_faults;
mod liveness;
mod mcp;
mod offline;
mod overlaps;
mod real_clis;
mod sdk_python;
mod work;
