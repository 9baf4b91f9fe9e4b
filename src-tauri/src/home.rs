//! Where the app keeps things, which hub it talks to, and the first run.
//!
//! The app shares its profiles with the `roundtable` CLI (`$ROUNDTABLE_HOME/profiles`, else
//! `$XDG_DATA_HOME/roundtable/profiles`), so the agents it onboards run `roundtable mcp` as
//! the same person, and a person can use the CLI beside it. With no hub chosen, the app runs
//! one itself on 127.0.0.1, over the same data directory `roundtable hub` uses by default,
//! and creates the person on it on the first run: one person with local agents needs nothing
//! else. A remote hub is a second profile; switching back and forth loses nothing.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use roundtable_core::profile::{Profile, Secret, profiles_dir};
use roundtable_hub::embedded::{self, EmbeddedHub};
use roundtable_hub::{HubConfig, SignupMode};
use serde::{Deserialize, Serialize};

/// The profile of the person on the app's own hub.
pub const LOCAL_PROFILE: &str = "default";
/// The profile of the person on a remote hub.
pub const REMOTE_PROFILE: &str = "remote";

#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("{path} is not a settings file Roundtable can read ({detail}); fix or delete it")]
    Settings { path: String, detail: String },
    #[error(
        "cannot start the local hub in {dir}: {detail} (is `roundtable hub` running on it? stop it, or point the app at it in Settings)"
    )]
    Hub { dir: String, detail: String },
    #[error(transparent)]
    Profile(#[from] roundtable_core::profile::ProfileError),
}

/// The app's directories.
#[derive(Debug, Clone)]
pub struct Places {
    /// Every profile (the CLI's too).
    pub profiles: PathBuf,
    /// The app's own hub's data.
    pub hub_data: PathBuf,
    /// `desktop.toml`.
    pub settings: PathBuf,
    pub logs: PathBuf,
}

impl Places {
    /// From `ROUNDTABLE_HOME`, else the XDG data directory.
    pub fn from_env() -> Places {
        let profiles = profiles_dir();
        let base = profiles
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Places::under(&base, profiles)
    }

    fn under(base: &Path, profiles: PathBuf) -> Places {
        Places {
            profiles,
            hub_data: base.join("hub"),
            settings: base.join("desktop.toml"),
            logs: base.join("logs"),
        }
    }
}

/// Which hub the app talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, specta::Type)]
#[serde(rename_all = "snake_case")]
pub enum HubMode {
    /// Its own, on this machine.
    Embedded,
    Remote,
}

/// `desktop.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub hub: HubMode,
    /// The port the app's own hub listens on (kept, so agents' profiles stay right).
    #[serde(default)]
    pub embedded_port: u16,
}

impl Settings {
    /// The settings, or those of a first run: the app's own hub, unless the person already
    /// has a profile on a hub (from the CLI), which is then the remote one.
    pub fn load(places: &Places) -> Result<Settings, HomeError> {
        match std::fs::read_to_string(&places.settings) {
            Ok(text) => toml::from_str(&text).map_err(|error| HomeError::Settings {
                path: places.settings.display().to_string(),
                detail: error.to_string(),
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Settings {
                hub: HubMode::Embedded,
                embedded_port: 0,
            }),
            Err(source) => Err(HomeError::Io {
                context: format!("cannot read {}", places.settings.display()),
                source,
            }),
        }
    }

    /// Writes the settings whole (a temporary file renamed over them).
    pub fn save(&self, places: &Places) -> Result<(), HomeError> {
        let text = toml::to_string(self).expect("settings serialize");
        let temporary = places.settings.with_extension("tmp");
        let io = |context: String| move |source| HomeError::Io { context, source };
        if let Some(dir) = places.settings.parent() {
            std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        }
        std::fs::write(&temporary, text)
            .map_err(io(format!("cannot write {}", temporary.display())))?;
        std::fs::rename(&temporary, &places.settings)
            .map_err(io(format!("cannot write {}", places.settings.display())))
    }

    /// The profile the app uses in this mode.
    pub fn profile_name(&self) -> &'static str {
        match self.hub {
            HubMode::Embedded => LOCAL_PROFILE,
            HubMode::Remote => REMOTE_PROFILE,
        }
    }
}

/// A handle from a login name: lowercase letters, digits, `-` and `_`, starting with a
/// letter (`me` when nothing is left). Pure.
pub fn handle_from(login: &str) -> String {
    let mut handle: String = login
        .chars()
        .filter_map(|c| {
            let c = c.to_ascii_lowercase();
            (c.is_ascii_alphanumeric() || c == '-' || c == '_').then_some(c)
        })
        .take(32)
        .collect();
    while handle.starts_with(|c: char| !c.is_ascii_lowercase()) {
        handle.remove(0);
    }
    if handle.len() < 2 {
        "me".to_owned()
    } else {
        handle
    }
}

/// The person's login name and display name, from the environment.
fn login() -> (String, String) {
    let login = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_default();
    let handle = handle_from(&login);
    let name = if login.trim().is_empty() {
        handle.clone()
    } else {
        login
    };
    (handle, name)
}

/// The app's own hub, with the person's profile on it (created on the first run).
pub fn start_local_hub(
    places: &Places,
    settings: &mut Settings,
) -> Result<(EmbeddedHub, Profile), HomeError> {
    let hub_error = |detail: String| HomeError::Hub {
        dir: places.hub_data.display().to_string(),
        detail,
    };
    let mut config = HubConfig::new(&places.hub_data);
    // Others join with an invite from the person; nobody signs up otherwise.
    config.signup = SignupMode::Invite;
    let existing = Profile::load(&places.profiles, LOCAL_PROFILE).ok();
    let profile = match existing {
        Some(profile) => profile,
        None => {
            let (handle, name) = login();
            let created = roundtable_hub::admin::add_user(&config, &handle, &name)
                .map_err(|error| hub_error(error.to_string()))?;
            // The port is known once the hub listens; the profile is pointed at it below.
            Profile::save(
                &places.profiles,
                LOCAL_PROFILE,
                "127.0.0.1:1",
                &created.principal.id,
                &created.principal.handle,
                &Secret::new(created.token),
                None,
            )?
        }
    };
    let listen = |port| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let hub = match embedded::start(config.clone(), listen(settings.embedded_port)) {
        Ok(hub) => hub,
        // The port it had is taken: another one, and the profiles follow.
        Err(_) if settings.embedded_port != 0 => {
            embedded::start(config, listen(0)).map_err(|error| hub_error(error.to_string()))?
        }
        Err(error) => return Err(hub_error(error.to_string())),
    };
    settings.embedded_port = hub.addr.port();
    settings.save(places)?;
    // This machine's clients (the app, the CLI, agents' bridges and hooks) reach it on its
    // Unix socket, which no other local user can take over; the port is for invite links.
    let address = local_address(&hub);
    let profile = readdress(places, profile, &address)?;
    Ok((hub, profile))
}

/// Where this machine's clients reach the app's hub.
pub fn local_address(hub: &EmbeddedHub) -> String {
    match &hub.socket {
        Some(socket) => format!("unix:{}", socket.display()),
        None => hub.addr.to_string(),
    }
}

/// Points the person's profile, and those of their agents on the same hub, at `address`.
fn readdress(places: &Places, mut person: Profile, address: &str) -> Result<Profile, HomeError> {
    let old = person.hub.authority.clone();
    if old == address {
        return Ok(person);
    }
    let prefix = format!("{}.", person.name_prefix());
    if let Ok(entries) = std::fs::read_dir(&places.profiles) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(&prefix) {
                continue;
            }
            if let Ok(mut agent) = Profile::load(&places.profiles, &name)
                && agent.hub.authority == old
            {
                agent.set_hub(address)?;
            }
        }
    }
    person.set_hub(address)?;
    Ok(person)
}

trait NamePrefix {
    fn name_prefix(&self) -> String;
}

impl NamePrefix for Profile {
    /// Agents' profiles are named after their handles, `dana.writer` for `dana/writer`.
    fn name_prefix(&self) -> String {
        roundtable_core::profile::profile_name_for(&self.handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_comes_from_any_login_name() {
        assert_eq!(handle_from("dana"), "dana");
        assert_eq!(handle_from("Dana.Smith"), "danasmith");
        assert_eq!(handle_from("1root"), "root");
        assert_eq!(handle_from(""), "me");
        assert_eq!(handle_from("é"), "me");
        assert_eq!(handle_from(&"x".repeat(80)).len(), 32);
    }

    #[test]
    fn the_first_run_creates_the_person_and_a_restart_keeps_them_and_the_port() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places::under(dir.path(), dir.path().join("profiles"));
        let mut settings = Settings::load(&places).unwrap();
        assert_eq!(settings.hub, HubMode::Embedded);
        let (hub, profile) = start_local_hub(&places, &mut settings).unwrap();
        // The person's clients use the hub's socket in its data directory.
        assert_eq!(
            profile.hub.authority,
            format!("unix:{}", places.hub_data.join("hub.sock").display())
        );
        assert_eq!(profile.hub.authority, local_address(&hub));
        let port = hub.addr.port();
        hub.stop().unwrap();
        let mut again = Settings::load(&places).unwrap();
        assert_eq!(again.embedded_port, port);
        let (hub, same) = start_local_hub(&places, &mut again).unwrap();
        assert_eq!(same.principal, profile.principal);
        assert_eq!(hub.addr.port(), port);
        hub.stop().unwrap();
    }

    #[test]
    fn profiles_on_the_port_move_to_the_socket_and_a_taken_port_leaves_them_there() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places::under(dir.path(), dir.path().join("profiles"));
        let mut settings = Settings::load(&places).unwrap();
        let (hub, mut person) = start_local_hub(&places, &mut settings).unwrap();
        let old = hub.addr;
        hub.stop().unwrap();
        // As a version that reached the hub on its port left them: the person, and an
        // agent of theirs on the same hub.
        person.set_hub(&old.to_string()).unwrap();
        let agent_handle = format!("{}/writer", person.handle);
        let agent_name = roundtable_core::profile::profile_name_for(&agent_handle);
        Profile::save(
            &places.profiles,
            &agent_name,
            &old.to_string(),
            "p_agent",
            &agent_handle,
            &Secret::new("rt_agent"),
            None,
        )
        .unwrap();
        // Someone took the port meanwhile: the hub moves, the clients are on the socket.
        let squatter = std::net::TcpListener::bind(old).unwrap();
        let (hub, moved) = start_local_hub(&places, &mut settings).unwrap();
        assert_ne!(hub.addr, old);
        assert_eq!(moved.hub.authority, local_address(&hub));
        let agent = Profile::load(&places.profiles, &agent_name).unwrap();
        assert_eq!(agent.hub.authority, local_address(&hub));
        drop(squatter);
        hub.stop().unwrap();
    }

    #[test]
    fn a_broken_settings_file_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places::under(dir.path(), dir.path().join("profiles"));
        std::fs::write(&places.settings, "hub = 42").unwrap();
        let error = Settings::load(&places).unwrap_err().to_string();
        assert!(error.contains("fix or delete it"), "{error}");
    }
}
