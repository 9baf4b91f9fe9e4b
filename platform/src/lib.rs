//! What differs between the operating systems Roundtable runs on (Linux, macOS, Windows),
//! one module per concern, each a small interface with an implementation per OS.
//!
//! Why a crate of its own: the hub, the core, the CLI and the test kit need the same
//! answers (how a child and everything it starts end together, which signals mean "stop"),
//! and the hub and the core never depend on each other. Everything OS-specific that more
//! than one of them needs lives here, so the rest of the code reads the same on every OS.
//!
//! Layout:
//! - [`file_identity`]: which file a path names (to tell a file replaced under its name).
//! - [`local_socket`]: a stream between processes of one user, named by a path (a Unix
//!   socket; a named pipe on Windows, kept to its user).
//! - [`places`]: where the home, Roundtable's data and its settings are on each OS.
//! - [`private`]: files and directories only their owner may read (modes on Unix, an access
//!   list with one entry on Windows).
//! - [`process_tree`]: the processes above this one, with their command lines and
//!   environments (`/proc` on Linux; the OS's process tables on macOS and Windows).
//! - [`process_group`]: a child and whatever it starts, ended together (a process group on
//!   Unix, a Job Object on Windows).
//! - [`stop`]: asking a program to stop, and waiting to be asked (SIGTERM and SIGINT on Unix,
//!   Ctrl-C, Ctrl-Break, the console closing and a named event on Windows).
//! - [`wine`]: whether a Windows build runs under Wine (as its tests do on Linux), for the
//!   few checks Wine cannot answer as Windows would.

pub mod file_identity;
pub mod local_socket;
pub mod places;
pub mod private;
pub mod process_group;
pub mod process_tree;
pub mod stop;
#[cfg(windows)]
pub mod windows_user;
pub mod wine;
