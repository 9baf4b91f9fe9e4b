//! The `roundtable` binary as users and scripts run it.
#![allow(clippy::print_stdout, reason = "tests print their seeds and figures")]

mod cluster_crash;
mod crash;
mod hub_command;
mod independent;
mod operator;
mod postgres;
