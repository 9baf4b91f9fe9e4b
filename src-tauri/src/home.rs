//! Where the app keeps things, which hub it talks to, and the first run.
//!
//! The app shares its profiles with the `roundtable` CLI (`$ROUNDTABLE_HOME/profiles`, else
//! `profiles` in the OS's data folder for Roundtable), so the agents it onboards run `roundtable mcp` as
//! the same person, and a person can use the CLI beside it. With no hub chosen, the app runs
//! one itself, over the same data directory `roundtable hub` uses by default, and creates the
//! person on it on the first run: one person with local agents needs nothing else. That hub
//! listens on a Unix socket in its data directory, which no other local user can take over
//! or reach; a TCP port (with TLS, under a certificate of its own that invite links pin)
//! only when the person lets teammates on the network in. A remote hub is a second profile;
//! switching back and forth loses nothing.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
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
    /// From `ROUNDTABLE_HOME`, else the OS's data folder for Roundtable.
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
    /// Whether teammates on the network may reach the app's own hub (on
    /// [`Settings::embedded_port`], with TLS).
    #[serde(default)]
    pub share_on_network: bool,
    /// The port teammates reach the app's own hub at (kept, so invite links stay right).
    #[serde(default)]
    pub embedded_port: u16,
    /// The host invite links name, when the address found is not the one teammates reach
    /// (a machine on several networks): a name or an IP address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_host: Option<String>,
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
                share_on_network: false,
                embedded_port: 0,
                network_host: None,
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

/// The app's own hub, running.
#[derive(Debug)]
pub struct LocalHub {
    pub hub: EmbeddedHub,
    /// The person on it.
    pub profile: Profile,
    /// Where teammates on the network reach it (`wss://HOST:PORT#sha256=…`), when let in.
    pub network_address: Option<String>,
}

/// The app's own hub, with the person's profile on it (created on the first run), and a
/// port for teammates when [`Settings::share_on_network`].
pub fn start_local_hub(places: &Places, settings: &mut Settings) -> Result<LocalHub, HomeError> {
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
            // Where the hub is known once it runs; the profile is pointed there below.
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
    let mut network_address = None;
    let port = if settings.share_on_network {
        let listen = |port| SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        // The port it had, unless taken meanwhile: then another (and links made before
        // name the old one).
        let listener = embedded::bind(listen(settings.embedded_port))
            .or_else(|_| embedded::bind(listen(0)))
            .map_err(|error| hub_error(format!("cannot open a port for teammates: {error}")))?;
        let port = listener
            .local_addr()
            .map_err(|error| hub_error(error.to_string()))?
            .port();
        settings.embedded_port = port;
        let host = settings
            .network_host
            .clone()
            .unwrap_or_else(|| network_host().to_string());
        std::fs::create_dir_all(&places.hub_data).map_err(|source| HomeError::Io {
            context: format!("cannot create {}", places.hub_data.display()),
            source,
        })?;
        let tls =
            roundtable_hub::tls::own_certificate(&places.hub_data, std::slice::from_ref(&host))
                .map_err(|error| hub_error(error.to_string()))?;
        let certificate = roundtable_hub::tls::leaf_certificate(&tls)
            .map_err(|error| hub_error(error.to_string()))?;
        let authority = match host.parse::<IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, port).to_string(),
            Err(_) => format!("{host}:{port}"),
        };
        let address = format!(
            "wss://{authority}#{}",
            roundtable_core::hub_address::pin_of(&certificate)
        );
        config.tls = Some(tls);
        config.public_address = Some(address.clone());
        network_address = Some(address);
        Some(listener)
    } else {
        None
    };
    let hub = embedded::start(config, port).map_err(|error| hub_error(error.to_string()))?;
    settings.save(places)?;
    // This machine's clients (the app, the CLI, agents' bridges and hooks) reach it on its
    // Unix socket, which no other local user can take over; the port is for teammates.
    let profile = readdress(places, profile, &hub.local_address)?;
    Ok(LocalHub {
        hub,
        profile,
        network_address,
    })
}

/// The address of this machine that teammates most likely reach: the one it would send
/// from to the rest of the network (found by a UDP `connect`, which sends nothing), else
/// 127.0.0.1.
fn network_host() -> IpAddr {
    let found = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).and_then(|socket| {
        // TEST-NET-1 (RFC 5737): routed like any outside address, never reached.
        socket.connect((Ipv4Addr::new(192, 0, 2, 1), 9))?;
        socket.local_addr()
    });
    match found {
        Ok(addr) if !addr.ip().is_unspecified() => addr.ip(),
        Ok(_) | Err(_) => {
            tracing::warn!(
                "no network address found; invite links name 127.0.0.1 (set network_host in desktop.toml)"
            );
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        }
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
    fn the_first_run_creates_the_person_on_a_socket_and_no_port() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places::under(dir.path(), dir.path().join("profiles"));
        let mut settings = Settings::load(&places).unwrap();
        assert_eq!(settings.hub, HubMode::Embedded);
        assert!(!settings.share_on_network);
        let local = start_local_hub(&places, &mut settings).unwrap();
        // The person's clients use the hub's socket in its data directory, and nothing
        // listens on a port: no other local user can stand in for the hub, or reach it.
        assert_eq!(
            local.profile.hub.authority,
            format!("unix:{}", places.hub_data.join("hub.sock").display())
        );
        assert_eq!(local.hub.tcp, None);
        assert_eq!(local.network_address, None);
        let principal = local.profile.principal.clone();
        local.hub.stop().unwrap();
        let mut again = Settings::load(&places).unwrap();
        let local = start_local_hub(&places, &mut again).unwrap();
        assert_eq!(local.profile.principal, principal);
        local.hub.stop().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn teammates_on_the_network_reach_the_hub_only_when_let_in_and_only_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places::under(dir.path(), dir.path().join("profiles"));
        let mut settings = Settings::load(&places).unwrap();
        settings.share_on_network = true;
        // 127.0.0.1 stands for the network address this machine has.
        settings.network_host = Some("127.0.0.1".into());
        let start = |places: &Places, settings: &Settings| {
            let places = places.clone();
            let mut settings = settings.clone();
            tokio::task::spawn_blocking(move || {
                let local = start_local_hub(&places, &mut settings).unwrap();
                (local, settings)
            })
        };
        let (local, saved) = start(&places, &settings).await.unwrap();
        let port = local.hub.tcp.unwrap();
        assert!(port.ip().is_unspecified(), "{port}");
        assert_eq!(saved.embedded_port, port.port());
        let address = local.network_address.clone().unwrap();
        let certificate = roundtable_hub::tls::leaf_certificate(&roundtable_hub::TlsFiles {
            cert: places.hub_data.join("network.crt"),
            key: places.hub_data.join("network.key"),
        })
        .unwrap();
        assert_eq!(
            address,
            format!(
                "wss://127.0.0.1:{}#{}",
                port.port(),
                roundtable_core::hub_address::pin_of(&certificate)
            )
        );
        // The person still works on the socket, and the invite they make names the
        // pinned address, with which a teammate signs up.
        assert!(local.profile.hub.authority.starts_with("unix:"));
        let person = roundtable_core::Core::open(local.profile.clone())
            .await
            .unwrap();
        let sync = person.start();
        let invite = person.create_invite(None, None, None).await.unwrap();
        assert!(
            invite.link.ends_with(&format!("?hub={address}")),
            "{}",
            invite.link
        );
        let signup = |handle: &'static str, hub: String| {
            let profiles = places.profiles.clone();
            let code = invite.code.clone();
            async move {
                roundtable_core::signup(
                    &profiles,
                    handle,
                    &hub,
                    roundtable_protocol::client::SignupRequest {
                        handle: handle.into(),
                        name: handle.into(),
                        discoverable: None,
                        invite: Some(code),
                    },
                    None,
                    false,
                )
                .await
            }
        };
        // Without the pin, a self-signed hub is refused before anything is sent.
        let unpinned = format!("wss://127.0.0.1:{}", port.port());
        assert!(signup("sam", unpinned).await.is_err());
        let sam = signup("sam", address.clone()).await.unwrap();
        assert_eq!(
            sam.hub,
            roundtable_core::hub_address::HubAddress::parse(&address).unwrap()
        );
        assert!(sam.hub.tls && sam.hub.pin.is_some());
        drop(sync);
        drop(person);
        local.hub.stop().unwrap();

        // A restart keeps the port and the certificate, so the link still works.
        let (local, _) = start(&places, &saved).await.unwrap();
        assert_eq!(local.hub.tcp.unwrap().port(), port.port());
        assert_eq!(local.network_address.as_deref(), Some(address.as_str()));
        local.hub.stop().unwrap();

        // Let out again: no port.
        let closed = Settings {
            share_on_network: false,
            ..saved
        };
        let (local, _) = start(&places, &closed).await.unwrap();
        assert_eq!(local.hub.tcp, None);
        assert_eq!(local.network_address, None);
        assert!(std::net::TcpStream::connect(("127.0.0.1", port.port())).is_err());
        local.hub.stop().unwrap();
    }

    #[test]
    fn profiles_on_a_port_move_to_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places::under(dir.path(), dir.path().join("profiles"));
        let mut settings = Settings::load(&places).unwrap();
        let local = start_local_hub(&places, &mut settings).unwrap();
        let mut person = local.profile;
        local.hub.stop().unwrap();
        // As a version that reached the hub on its port left them: the person, and an
        // agent of theirs on the same hub.
        let old = "127.0.0.1:47300";
        person.set_hub(old).unwrap();
        let agent_handle = format!("{}/writer", person.handle);
        let agent_name = roundtable_core::profile::profile_name_for(&agent_handle);
        Profile::save(
            &places.profiles,
            &agent_name,
            old,
            "p_agent",
            &agent_handle,
            &Secret::new("rt_agent"),
            None,
        )
        .unwrap();
        let local = start_local_hub(&places, &mut settings).unwrap();
        assert_eq!(local.profile.hub.authority, local.hub.local_address);
        assert!(local.hub.local_address.starts_with("unix:"));
        let agent = Profile::load(&places.profiles, &agent_name).unwrap();
        assert_eq!(agent.hub.authority, local.hub.local_address);
        local.hub.stop().unwrap();
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
