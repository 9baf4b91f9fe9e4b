//! Whose session is it? Every agent CLI session on this machine belongs to exactly one agent,
//! or to none (then it stays this machine's own, as sessions from before onboarding do).
//!
//! A claim is a file `sessions/<framework>/<session>` beside the profiles directory, holding
//! the agent's handle. It appears whole or not at all (written aside, then linked into place)
//! and a link never replaces a file, so the first claim stands and no later one changes it.
//! The runner claims the sessions it starts, and marks them through the environment
//! ([`crate::runner::AGENT_ENV`]) so that any agent's hook claims them for the runner's agent;
//! otherwise the hook of the agent whose session starts claims it at its first moment
//! (Claude Code's and Gemini CLI's `SessionStart`, Codex's `SessionStart` or `notify`). The
//! watcher reads a session's claim before it charges a line of it to anyone.
//!
//! Why files: the claimers are short-lived processes of different agents' profiles (hooks,
//! runners) and the reader is the person's watcher; a file per claim needs no lock and no
//! database shared between profiles, is visible the moment it exists, and costs one `stat`
//! to look up.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::log_events::Framework;

/// The claims of one Roundtable home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionClaims {
    dir: PathBuf,
}

/// A file name for a session id: the id itself when it is a plain name, else a digest of it.
fn file_name(session_id: &str) -> String {
    let plain = !session_id.is_empty()
        && session_id.len() <= 128
        && !session_id.starts_with('.')
        && session_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if plain {
        session_id.to_owned()
    } else {
        let digest = Sha256::digest(session_id.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("_{hex}")
    }
}

/// Writes a claim's content to a file of its own, durably.
fn write_aside(path: &Path, handle: &str) -> std::io::Result<()> {
    let mut file = roundtable_platform::private::open(
        std::fs::OpenOptions::new().write(true).create_new(true),
        path,
    )?;
    file.write_all(handle.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

impl SessionClaims {
    /// The claims of the Roundtable home whose profiles are in `profiles`.
    pub fn beside(profiles: &Path) -> SessionClaims {
        let home = profiles.parent().unwrap_or(profiles);
        SessionClaims {
            dir: home.join("sessions"),
        }
    }

    /// Where the claims are (the watcher follows it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, framework: Framework, session_id: &str) -> PathBuf {
        self.dir
            .join(framework.as_str())
            .join(file_name(session_id))
    }

    /// Claims a session for `handle`, unless it is claimed already; returns its owner (the
    /// first claimant, whoever it was).
    pub fn claim(
        &self,
        framework: Framework,
        session_id: &str,
        handle: &str,
    ) -> std::io::Result<String> {
        if let Some(owner) = self.owner(framework, session_id) {
            return Ok(owner);
        }
        let path = self.path(framework, session_id);
        let dir = path.parent().expect("a claim has a directory");
        crate::profile::create_private_dir(&self.dir)?;
        crate::profile::create_private_dir(dir)?;
        let aside = dir.join(format!(
            ".claim-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let linked = write_aside(&aside, handle).and_then(|()| std::fs::hard_link(&aside, &path));
        let _ = std::fs::remove_file(&aside);
        match linked {
            Ok(()) => Ok(handle.to_owned()),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(self
                .owner(framework, session_id)
                .unwrap_or_else(|| handle.to_owned())),
            Err(error) => Err(error),
        }
    }

    /// The agent a session belongs to, if any claimed it.
    pub fn owner(&self, framework: Framework, session_id: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.path(framework, session_id)).ok()?;
        let handle = text.trim();
        (!handle.is_empty() && handle.len() <= 128).then(|| handle.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_claim_stands() {
        let home = tempfile::tempdir().unwrap();
        let claims = SessionClaims::beside(&home.path().join("profiles"));
        assert_eq!(claims.owner(Framework::ClaudeCode, "s1"), None);
        assert_eq!(
            claims
                .claim(Framework::ClaudeCode, "s1", "dana/writer")
                .unwrap(),
            "dana/writer"
        );
        assert_eq!(
            claims
                .claim(Framework::ClaudeCode, "s1", "dana/claude")
                .unwrap(),
            "dana/writer"
        );
        assert_eq!(
            claims.owner(Framework::ClaudeCode, "s1").as_deref(),
            Some("dana/writer")
        );
        // Frameworks keep their own ids.
        assert_eq!(claims.owner(Framework::Codex, "s1"), None);
        // Nothing half-written is left beside the claims.
        let names: Vec<String> = std::fs::read_dir(home.path().join("sessions/claude-code"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["s1"]);
    }

    #[test]
    fn odd_session_ids_stay_inside_the_claims() {
        let home = tempfile::tempdir().unwrap();
        let claims = SessionClaims::beside(&home.path().join("profiles"));
        for id in ["../../etc/passwd", "", ".hidden", "a/b", &"x".repeat(300)] {
            claims.claim(Framework::Codex, id, "dana/reviewer").unwrap();
            assert_eq!(
                claims.owner(Framework::Codex, id).as_deref(),
                Some("dana/reviewer")
            );
        }
        assert!(!home.path().join("etc").exists());
        assert_eq!(
            std::fs::read_dir(home.path().join("sessions/codex"))
                .unwrap()
                .count(),
            5
        );
    }
}
