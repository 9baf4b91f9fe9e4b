//! The hub over real sockets: a hub on a free loopback port, clients speaking raw frames.

mod consent;
mod governance;
mod hostile;
mod http;
mod lifecycle;
mod malformed;
mod messaging;
mod pings;
mod rooms;
mod slow;
mod support;
mod tls;
