//! A profile: one identity on one hub, with its cache. It lives in a directory of its own,
//! which only its owner may enter (0700), every file in it readable by its owner only
//! (0600): `profile.toml` (the hub, who we are), `token` (never logged), `device` (a stable
//! id for this installation), `cache.sqlite3` and `run/` (the processes using it).
//!
//! A user's profile is named as the user likes (`default`); an agent's is named after its
//! handle, `dana/writer` as `dana.writer` (see [`profile_name_for`]).

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::hub_address::HubAddress;

/// A secret that never shows in `Debug` or logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ProfileFile {
    /// The hub's address, as the user gave it.
    hub: String,
    /// Our principal on it.
    principal: String,
    handle: String,
    /// A PEM file of the CA that signed the hub's certificate, for hubs with a private CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca_file: Option<PathBuf>,
    /// An agent's home room (the room the hub made for it and its owner), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    home_room: Option<String>,
    /// Rooms (ids) this person shares their agents' work with, besides each home room.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    share_rooms: Vec<String>,
    /// The token is in the OS secret store, not in the `token` file (a person's profile,
    /// where a store answered; see [`crate::secret_store`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    secret_store: bool,
}

/// One identity on one hub.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub dir: PathBuf,
    pub hub: HubAddress,
    pub principal: String,
    pub handle: String,
    pub ca_file: Option<PathBuf>,
    /// An agent's home room, when known (see [`Profile::set_home_room`]).
    pub home_room: Option<String>,
    /// Rooms (ids) this person shares their agents' work with (see
    /// [`Profile::set_share_rooms`]).
    pub share_rooms: Vec<String>,
    pub token: Secret,
    /// Whether the token is kept in the OS secret store rather than the `token` file.
    pub in_secret_store: bool,
    /// Stable per profile: the hub keeps one connection per (principal, device).
    pub device: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "there is no profile {name:?} (in {dir}); create it with `roundtable signup` or `roundtable login`"
    )]
    Missing { name: String, dir: String },
    #[error(
        "profile names use a-z, 0-9, '-', '_' and '.' (1 to 64 characters, not starting with '.'), not {0:?}"
    )]
    BadName(String),
    #[error("the profile {path} is unreadable: {detail}; fix or remove it")]
    Corrupt { path: String, detail: String },
    /// `--agent` named something other than an agent: only an agent's own profile may run
    /// an agent's bridge, hooks or runner, never its person's.
    #[error(
        "{given:?} is not an agent: {why}. Give an agent's handle, `owner/name` (`roundtable agents` lists yours); an agent never runs as its person"
    )]
    NotAnAgent { given: String, why: String },
    #[error("cannot write the profile in {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ProfileError + '_ {
    move |source| ProfileError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Loads the profile of the agent `handle` (`owner/name`) for `--agent`: refused unless the
/// handle is an agent's and the profile is that agent's own (a person's profile, or one
/// saved under another name, is never an agent's).
pub fn load_agent(base: &Path, handle: &str) -> Result<Profile, ProfileError> {
    let not_an_agent = |why: String| ProfileError::NotAnAgent {
        given: handle.to_owned(),
        why,
    };
    let Some((owner, name)) = handle.split_once('/') else {
        return Err(not_an_agent(
            "an agent's handle is its owner's and its name, joined by '/'".to_owned(),
        ));
    };
    roundtable_protocol::handles::validate_user_handle(owner)
        .and_then(|()| roundtable_protocol::handles::validate_segment(name, "agent name"))
        .map_err(|error| not_an_agent(error.to_string()))?;
    let profile = Profile::load(base, &profile_name_for(handle))?;
    if profile.handle != handle {
        return Err(not_an_agent(format!(
            "its profile holds {:?}'s token",
            profile.handle
        )));
    }
    Ok(profile)
}

/// The directory of every profile: `$ROUNDTABLE_HOME/profiles`, else `profiles` in the OS's
/// data folder for Roundtable (`roundtable_platform::places`: `~/.local/share/roundtable` on
/// Linux, `~/Library/Application Support/roundtable` on macOS, `%LOCALAPPDATA%\roundtable` on
/// Windows).
pub fn profiles_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("ROUNDTABLE_HOME") {
        return PathBuf::from(home).join("profiles");
    }
    roundtable_platform::places::data()
        .unwrap_or_else(|| PathBuf::from("roundtable"))
        .join("profiles")
}

/// The profile name of an agent's handle: `dana/writer` is `dana.writer`.
pub fn profile_name_for(handle: &str) -> String {
    handle.replace('/', ".")
}

fn check_name(name: &str) -> Result<(), ProfileError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && !name.contains("..")
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_' || b == b'.'
        });
    if valid {
        Ok(())
    } else {
        Err(ProfileError::BadName(name.to_owned()))
    }
}

/// Creates a directory (and its parents) that only its owner may enter, or tightens one
/// that exists.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    roundtable_platform::private::create_dir(dir)
}

/// Writes a file readable by its owner only, whole or not at all (a temporary file renamed
/// over it).
pub(crate) fn write_private(path: &Path, contents: &str) -> Result<(), ProfileError> {
    let temporary = path.with_extension("tmp");
    write_private_in_place(&temporary, contents)?;
    std::fs::rename(&temporary, path).map_err(io(path))
}

fn write_private_in_place(path: &Path, contents: &str) -> Result<(), ProfileError> {
    let mut file = roundtable_platform::private::open(
        OpenOptions::new().write(true).create(true).truncate(true),
        path,
    )
    .map_err(io(path))?;
    // A file left by an earlier attempt keeps no looser access than a new one.
    roundtable_platform::private::restrict(path).map_err(io(path))?;
    file.write_all(contents.as_bytes()).map_err(io(path))?;
    file.sync_all().map_err(io(path))
}

impl Profile {
    /// The handle the profile `name` in `base` belongs to, read without its token (which
    /// may sit in the OS secret store): to decide whether it may be loaded at all.
    pub fn handle_of(base: &Path, name: &str) -> Option<String> {
        check_name(name).ok()?;
        let text = std::fs::read_to_string(base.join(name).join("profile.toml")).ok()?;
        toml::from_str::<ProfileFile>(&text)
            .ok()
            .map(|file| file.handle)
    }

    /// Loads the profile `name` from `base` (see [`profiles_dir`]).
    pub fn load(base: &Path, name: &str) -> Result<Profile, ProfileError> {
        check_name(name)?;
        let dir = base.join(name);
        let path = dir.join("profile.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(ProfileError::Missing {
                    name: name.to_owned(),
                    dir: base.display().to_string(),
                });
            }
            Err(error) => return Err(io(&path)(error)),
        };
        let corrupt = |detail: String| ProfileError::Corrupt {
            path: path.display().to_string(),
            detail,
        };
        let file: ProfileFile =
            toml::from_str(&text).map_err(|error| corrupt(error.to_string()))?;
        let hub = HubAddress::parse(&file.hub).map_err(corrupt)?;
        let token = if file.secret_store {
            crate::secret_store::fetch(&dir).map_err(|error| {
                corrupt(format!(
                    "its token is in the OS secret store, which did not give it ({error}); \
                     unlock the store (your desktop's keyring), or log in again with {}=file to keep it in a file",
                    crate::secret_store::STORE_ENV
                ))
            })?
        } else {
            std::fs::read_to_string(dir.join("token"))
                .map_err(|error| corrupt(format!("its token: {error}")))?
        };
        let device = std::fs::read_to_string(dir.join("device"))
            .map_err(|error| corrupt(format!("its device id: {error}")))?;
        Ok(Profile {
            name: name.to_owned(),
            hub,
            principal: file.principal,
            handle: file.handle,
            ca_file: file.ca_file,
            home_room: file.home_room,
            share_rooms: file.share_rooms,
            token: Secret::new(token.trim()),
            in_secret_store: file.secret_store,
            device: device.trim().to_owned(),
            dir,
        })
    }

    /// Creates (or replaces) the profile `name` in `base`.
    pub fn save(
        base: &Path,
        name: &str,
        hub: &str,
        principal: &str,
        handle: &str,
        token: &Secret,
        ca_file: Option<PathBuf>,
    ) -> Result<Profile, ProfileError> {
        check_name(name)?;
        let hub_address = HubAddress::parse(hub).map_err(|detail| ProfileError::Corrupt {
            path: "the hub address".into(),
            detail,
        })?;
        let dir = base.join(name);
        create_private_dir(base).map_err(io(base))?;
        create_private_dir(&dir).map_err(io(&dir))?;
        // A person's token goes to the OS secret store when one answers; an agent's stays
        // in its file, for its bridge and hooks.
        let secret_store =
            !handle.contains('/') && crate::secret_store::store(&dir, token.expose());
        let file = ProfileFile {
            hub: hub.to_owned(),
            principal: principal.to_owned(),
            handle: handle.to_owned(),
            ca_file: ca_file.clone(),
            home_room: None,
            share_rooms: Vec::new(),
            secret_store,
        };
        let path = dir.join("profile.toml");
        let text = toml::to_string(&file).expect("profiles serialize");
        if secret_store {
            // Said first, then the file goes: a crash between leaves a stale file, unread.
            write_private(&path, &text)?;
            match std::fs::remove_file(dir.join("token")) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(io(&dir.join("token"))(error)),
            }
        } else {
            write_private(&dir.join("token"), token.expose())?;
            write_private(&path, &text)?;
        }
        let device_path = dir.join("device");
        let device = match std::fs::read_to_string(&device_path) {
            Ok(device) if !device.trim().is_empty() => device.trim().to_owned(),
            _ => {
                let device = crate::random_key("d");
                write_private(&device_path, &device)?;
                device
            }
        };
        Ok(Profile {
            name: name.to_owned(),
            dir,
            hub: hub_address,
            principal: principal.to_owned(),
            handle: handle.to_owned(),
            ca_file,
            home_room: None,
            share_rooms: Vec::new(),
            token: token.clone(),
            in_secret_store: secret_store,
            device,
        })
    }

    /// Rewrites `profile.toml` with a change.
    fn update(&self, change: impl FnOnce(&mut ProfileFile)) -> Result<(), ProfileError> {
        let path = self.dir.join("profile.toml");
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let mut file: ProfileFile =
            toml::from_str(&text).map_err(|error| ProfileError::Corrupt {
                path: path.display().to_string(),
                detail: error.to_string(),
            })?;
        change(&mut file);
        write_private(&path, &toml::to_string(&file).expect("profiles serialize"))
    }

    /// Records an agent's home room in its profile.
    pub fn set_home_room(&mut self, room: &str) -> Result<(), ProfileError> {
        self.update(|file| file.home_room = Some(room.to_owned()))?;
        self.home_room = Some(room.to_owned());
        Ok(())
    }

    /// Points this profile at the hub at `hub` (the same hub, reached at a new address).
    pub fn set_hub(&mut self, hub: &str) -> Result<(), ProfileError> {
        let address = HubAddress::parse(hub).map_err(|detail| ProfileError::Corrupt {
            path: "the hub address".into(),
            detail,
        })?;
        self.update(|file| file.hub = hub.to_owned())?;
        self.hub = address;
        Ok(())
    }

    /// Records the rooms this person shares their agents' work with.
    pub fn set_share_rooms(&mut self, rooms: Vec<String>) -> Result<(), ProfileError> {
        self.update(|file| file.share_rooms = rooms.clone())?;
        self.share_rooms = rooms;
        Ok(())
    }

    pub fn cache_path(&self) -> PathBuf {
        self.dir.join("cache.sqlite3")
    }

    /// The directory holding every profile, this one's included.
    pub fn base(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    /// Replaces this profile's token (a rotated one), atomically.
    pub fn replace_token(&mut self, token: &Secret) -> Result<(), ProfileError> {
        let path = self.dir.join("profile.toml");
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let in_store = toml::from_str::<ProfileFile>(&text).is_ok_and(|file| file.secret_store);
        if !(in_store && crate::secret_store::store(&self.dir, token.expose())) {
            write_private(&self.dir.join("token"), token.expose())?;
            if in_store {
                // The store no longer answers: the file holds it from now on.
                self.update(|file| file.secret_store = false)?;
                self.in_secret_store = false;
            }
        }
        self.token = token.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_profile_loads_back_with_a_private_token() {
        let base = tempfile::tempdir().unwrap();
        let token = Secret::new("rt_secret");
        let saved = Profile::save(
            base.path(),
            "work",
            "127.0.0.1:7300",
            "p_1",
            "dana",
            &token,
            None,
        )
        .unwrap();
        let loaded = Profile::load(base.path(), "work").unwrap();
        assert_eq!(loaded.token, token);
        assert_eq!(loaded.device, saved.device);
        assert_eq!(loaded.hub.ws_url(), "ws://127.0.0.1:7300/v1/ws");
        assert!(!format!("{loaded:?}").contains("rt_secret"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(base.path().join("work/token"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Saving again keeps the device id.
        let again = Profile::save(
            base.path(),
            "work",
            "127.0.0.1:7300",
            "p_1",
            "dana",
            &token,
            None,
        )
        .unwrap();
        assert_eq!(again.device, saved.device);
    }

    #[test]
    fn missing_and_bad_profiles_say_what_to_do() {
        let base = tempfile::tempdir().unwrap();
        let missing = Profile::load(base.path(), "nope").unwrap_err().to_string();
        assert!(missing.contains("roundtable signup"), "{missing}");
        assert!(matches!(
            Profile::load(base.path(), "../etc"),
            Err(ProfileError::BadName(_))
        ));
        std::fs::create_dir_all(base.path().join("broken")).unwrap();
        std::fs::write(base.path().join("broken/profile.toml"), "hub = 5").unwrap();
        assert!(matches!(
            Profile::load(base.path(), "broken"),
            Err(ProfileError::Corrupt { .. })
        ));
    }
}
