//! What differs between the operating systems Roundtable runs on (Linux, macOS, Windows),
//! one module per concern, each a small interface with an implementation per OS.
//!
//! Why a crate of its own: the hub, the core, the CLI and the test kit need the same
//! answers (how a child and everything it starts end together, which signals mean "stop"),
//! and the hub and the core never depend on each other. Everything OS-specific that more
//! than one of them needs lives here, so the rest of the code reads the same on every OS.
//!
//! Layout:
//! - [`local_socket`]: a stream between processes of one user, named by a path (a Unix
//!   socket; a named pipe on Windows, kept to its user).
//! - [`private`]: files and directories only their owner may read (modes on Unix, an access
//!   list with one entry on Windows).
//! - [`process_group`]: a child and whatever it starts, ended together (a process group on
//!   Unix, a Job Object on Windows).
//! - [`stop`]: waiting for the OS to ask a program to stop (SIGTERM and SIGINT on Unix,
//!   Ctrl-C, Ctrl-Break and the console closing on Windows).
//! - [`wine`]: whether a Windows build runs under Wine (as its tests do on Linux), for the
//!   few checks Wine cannot answer as Windows would.

pub mod local_socket;
pub mod private;
pub mod process_group;
pub mod stop;
#[cfg(windows)]
pub mod windows_user;
pub mod wine;
