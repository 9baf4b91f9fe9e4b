//! Roundtable's wire protocol, version 1.
//!
//! The hub and every client (the desktop core, the CLI, the MCP bridge, SDKs) exchange JSON
//! text frames over one WebSocket. This crate is the single definition of those frames, so a
//! change to the wire is a change to this crate and shows up in its snapshot tests. It holds
//! plain data and pure functions only: no I/O, no async runtime, nothing but serde.
//!
//! Layout:
//! - [`client`]: frames a client sends (`auth`, `sync`, `send`, …), one struct per command.
//! - [`server`]: frames the hub sends (`hello`, `ok`, `err`, `evt`, `gap`) and the typed
//!   payloads an `ok` carries.
//! - [`bodies`]: the bodies of event kinds, as the hub validates them.
//! - [`model`]: records shared by replies (principals, rooms, contacts, audit entries).
//! - [`codes`]: error codes and WebSocket close codes.
//! - [`decode`]: decoding of untrusted client frames into either a frame or the exact error
//!   the protocol prescribes.
//! - [`handles`]: handle syntax and `@mention` scanning.
//! - [`text`]: what the strings of client frames may hold (ids, lines, prose), and what
//!   names, titles, topics and descriptions may not contain.

pub mod bodies;
pub mod client;
pub mod codes;
pub mod decode;
pub mod handles;
pub mod model;
pub mod server;
pub mod text;
pub mod ts;

pub use client::ClientFrame;
pub use codes::{CloseCode, ErrorCode};
pub use server::ServerFrame;

/// The protocol version this crate speaks (`hello.proto`).
pub const PROTO_VERSION: u32 = 1;

/// The WebSocket endpoint on the hub's listener.
pub const WS_PATH: &str = "/v1/ws";

/// Defaults the hub announces in `hello` unless configured otherwise.
pub mod defaults {
    /// Largest accepted frame, in bytes; a larger one closes the connection with 1009.
    pub const MAX_FRAME: usize = 1024 * 1024;
    /// Outbound frames buffered per connection before it is closed as a slow consumer.
    pub const MAX_QUEUE: usize = 4096;
    /// Outbound bytes buffered per connection before it is closed as a slow consumer.
    pub const MAX_QUEUE_BYTES: usize = 8 * 1024 * 1024;
    /// Live connections of one principal; one more gets `err busy` and close 1013.
    pub const MAX_DEVICES: usize = 32;
    /// Heartbeat period; a connection silent for twice this is dead.
    pub const HB_MS: u64 = 20_000;
    /// Missing events of one room replayed by `sync` before a `gap` is announced.
    pub const REPLAY_MAX: u64 = 500;
    /// Time a new connection has to send `auth`.
    pub const AUTH_TIMEOUT_MS: u64 = 10_000;
}

/// Size limits that are part of the contract (all in UTF-8 bytes).
pub mod limits {
    /// A message's `text`.
    pub const MESSAGE_TEXT: usize = 16 * 1024;
    /// Any event `body`, serialized.
    pub const EVENT_BODY: usize = 64 * 1024;
    /// A contact request's `message`.
    pub const CONTACT_MESSAGE: usize = 500;
    /// `client_key` length bounds.
    pub const CLIENT_KEY_MIN: usize = 8;
    pub const CLIENT_KEY_MAX: usize = 64;
    /// `history.limit` default and maximum.
    pub const HISTORY_DEFAULT: u32 = 50;
    pub const HISTORY_MAX: u32 = 500;
    /// A `control`'s `reason` (a Roundtable extension).
    pub const CONTROL_REASON: usize = 500;
    /// A display name, a room title or topic.
    pub const NAME: usize = 128;
    pub const TITLE: usize = 256;
    pub const TOPIC: usize = 4096;
    /// An agent's description and card, serialized.
    pub const DESCRIPTION: usize = 4096;
    pub const CARD: usize = 16 * 1024;
    /// A device id.
    pub const DEVICE: usize = 128;
    /// An event `kind` (`x-…` extensions included).
    pub const KIND: usize = 64;
    /// Paths an `arch` status lists in `files`.
    pub const ARCH_FILES: usize = 32;
    /// A file path or glob in an `arch` body.
    pub const PATH: usize = 1024;
    /// Distinct `mentions` of one message, listed and resolved together.
    pub const MENTIONS: usize = 64;
    /// Any frame before `auth` succeeds; a larger one closes the connection with 1009.
    pub const PRE_AUTH_FRAME: usize = 8 * 1024;
}
