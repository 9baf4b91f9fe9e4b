//! Where a person's token is kept: the OS secret store (the Secret Service on Linux, the
//! Keychain, the Credential Manager) when one answers, else the profile's 0600 `token`
//! file.
//!
//! Why: agent CLIs run as the person's Unix user and read files as they please; a token
//! in a file is one `cat` away from an injected prompt. The secret store is not a wall
//! against a process of the same user (it answers any of them once unlocked), but agents
//! do not go looking there, and Claude Code's file tools are denied the profiles besides.
//! An agent's own token stays in its profile file: its bridge and hooks are the agent.
//!
//! `ROUNDTABLE_TOKEN_STORE=file` keeps tokens in files (machines with no secret store
//! running, the tests).

use std::path::Path;

/// Set to `file` to keep tokens in profile files.
pub const STORE_ENV: &str = "ROUNDTABLE_TOKEN_STORE";

/// The secret store's service name for Roundtable's tokens.
const SERVICE: &str = "roundtable";

/// Whether tokens may go to the OS secret store here.
pub fn wanted() -> bool {
    std::env::var(STORE_ENV).map_or(true, |value| value != "file")
}

/// The secret store's entry for the profile in `dir` (one per profile directory).
fn entry(dir: &Path) -> keyring::Result<keyring::Entry> {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    keyring::Entry::new(SERVICE, &dir.display().to_string())
}

/// Keeps `token` for the profile in `dir` in the secret store; whether it did (no store
/// answering is not an error: the caller keeps it in the file).
pub fn store(dir: &Path, token: &str) -> bool {
    if !wanted() {
        return false;
    }
    match entry(dir).and_then(|entry| entry.set_password(token)) {
        Ok(()) => true,
        Err(error) => {
            tracing::info!(%error, "no OS secret store; the token is kept in the profile's file");
            false
        }
    }
}

/// The token of the profile in `dir`, from the secret store.
pub fn fetch(dir: &Path) -> Result<String, String> {
    entry(dir)
        .and_then(|entry| entry.get_password())
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_never_write_to_the_secret_store_of_whoever_runs_them() {
        // `.cargo/config.toml` sets it for every test process and what they start.
        assert!(!wanted(), "{STORE_ENV} is not `file` in the tests");
    }
}
