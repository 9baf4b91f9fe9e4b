//! How an agent's hooks behave, as its person set them: a leaf of its own, because
//! onboarding writes these settings and the hooks read them, and neither should reach into
//! the other for it.

use serde::Deserialize;

/// How a hook behaves; kept in the agent's profile (`hooks.toml`), with defaults.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct HookSettings {
    /// How long a finished turn listens for messages before the session rests.
    pub listen_s: u64,
    /// How long a permission request waits for the person before the terminal asks.
    pub permission_wait_s: u64,
    /// Whether a run with no person at it (`claude -p`) listens too; also asked for with
    /// `ROUNDTABLE_LISTEN=1` in its environment.
    pub listen_unattended: bool,
}

impl Default for HookSettings {
    fn default() -> HookSettings {
        HookSettings {
            listen_s: 600,
            permission_wait_s: 120,
            listen_unattended: false,
        }
    }
}

impl HookSettings {
    /// The settings in the agent's profile directory, or the defaults; an unreadable file
    /// is reported and the defaults used (a hook never fails a session).
    pub fn load(profile_dir: &std::path::Path) -> HookSettings {
        let path = profile_dir.join("hooks.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).unwrap_or_else(|error| {
                tracing::warn!(%error, path = %path.display(), "unreadable hook settings; using the defaults");
                HookSettings::default()
            }),
            Err(_) => HookSettings::default(),
        }
    }

    /// Writes the settings into the agent's profile directory.
    pub fn save(&self, profile_dir: &std::path::Path) -> Result<(), crate::profile::ProfileError> {
        let text = toml::to_string(self).expect("hook settings serialize");
        crate::profile::write_private(&profile_dir.join("hooks.toml"), &text)
    }
}
