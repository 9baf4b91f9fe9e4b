//! The hub over real sockets: a hub on a free loopback port, clients speaking raw frames.

mod a2a;
mod a2a_outbound;
mod audit_log;
mod bounds;
mod browsers;
mod cluster;
mod consent;
mod control;
mod existence;
mod governance;
mod hostile;
mod hostile_strings;
mod http;
mod lifecycle;
mod malformed;
mod mcp;
mod memory;
mod messaging;
mod pings;
mod rooms;
mod slow;
mod support;
mod tls;
