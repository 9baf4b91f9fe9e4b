//! The `roundtable` binary as users and scripts run it.

mod crash;
mod hub_command;
mod process;
