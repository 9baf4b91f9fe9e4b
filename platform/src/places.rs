//! Where things live on each OS: the person's home, Roundtable's data (profiles and their
//! tokens, caches, the local hub) and its settings (team templates, prices).
//!
//! Why here: the core, the CLI and the app must agree on these to the byte, and each OS has
//! its own convention:
//!
//! | | data | settings |
//! |---|---|---|
//! | Linux (and other Unix) | `$XDG_DATA_HOME/roundtable`, else `~/.local/share/roundtable` | `$XDG_CONFIG_HOME/roundtable`, else `~/.config/roundtable` |
//! | macOS | `~/Library/Application Support/roundtable` | the same folder |
//! | Windows | `%LOCALAPPDATA%\roundtable` | `%APPDATA%\roundtable` |
//!
//! On Windows the data is in the local, not the roaming, folder: tokens, caches and the
//! hub's database belong to one machine and must not follow the person to another.
//!
//! Each answer is read from the variables the OS sets for a session (`HOME`; Windows'
//! `USERPROFILE`, `LOCALAPPDATA`, `APPDATA`), through a lookup passed in: every OS's answer
//! is tested on every OS, and a test gives a program a home of its own by setting them. An
//! empty variable counts as unset, as a relative one does where the XDG convention says so.

use std::ffi::OsString;
use std::path::PathBuf;

/// An OS family, as far as where things live goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux and the other Unix systems (the XDG convention).
    Linux,
    MacOs,
    Windows,
}

impl Os {
    /// The OS this program was built for.
    pub const CURRENT: Os = if cfg!(windows) {
        Os::Windows
    } else if cfg!(target_os = "macos") {
        Os::MacOs
    } else {
        Os::Linux
    };
}

/// The environment, one variable at a time.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<OsString>;

fn set(var: Lookup<'_>, name: &str) -> Option<PathBuf> {
    var(name)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// An XDG variable counts only when it holds an absolute path (the XDG specification).
fn xdg(var: Lookup<'_>, name: &str) -> Option<PathBuf> {
    set(var, name).filter(|path| path.is_absolute() || path.starts_with("/"))
}

/// The person's home directory on `os`.
pub fn home_in(os: Os, var: Lookup<'_>) -> Option<PathBuf> {
    match os {
        Os::Windows => set(var, "USERPROFILE").or_else(|| {
            let drive = set(var, "HOMEDRIVE")?;
            let path = set(var, "HOMEPATH")?;
            let mut home = drive.into_os_string();
            home.push(path.into_os_string());
            Some(PathBuf::from(home))
        }),
        Os::Linux | Os::MacOs => set(var, "HOME"),
    }
}

/// Roundtable's data directory on `os`.
pub fn data_in(os: Os, var: Lookup<'_>) -> Option<PathBuf> {
    let base = match os {
        Os::Linux => xdg(var, "XDG_DATA_HOME")
            .or_else(|| Some(home_in(os, var)?.join(".local").join("share"))),
        Os::MacOs => Some(
            home_in(os, var)?
                .join("Library")
                .join("Application Support"),
        ),
        Os::Windows => set(var, "LOCALAPPDATA")
            .or_else(|| Some(home_in(os, var)?.join("AppData").join("Local"))),
    };
    Some(base?.join("roundtable"))
}

/// Roundtable's settings directory on `os`.
pub fn config_in(os: Os, var: Lookup<'_>) -> Option<PathBuf> {
    let base = match os {
        Os::Linux => {
            xdg(var, "XDG_CONFIG_HOME").or_else(|| Some(home_in(os, var)?.join(".config")))
        }
        Os::MacOs => Some(
            home_in(os, var)?
                .join("Library")
                .join("Application Support"),
        ),
        Os::Windows => {
            set(var, "APPDATA").or_else(|| Some(home_in(os, var)?.join("AppData").join("Roaming")))
        }
    };
    Some(base?.join("roundtable"))
}

fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// This process's home directory (on Windows, the OS's own answer when the variables are
/// missing).
pub fn home() -> Option<PathBuf> {
    home_in(Os::CURRENT, &process_env).or_else(|| {
        if cfg!(windows) {
            std::env::home_dir()
        } else {
            None
        }
    })
}

/// This process's Roundtable data directory.
pub fn data() -> Option<PathBuf> {
    data_in(Os::CURRENT, &process_env)
}

/// This process's Roundtable settings directory.
pub fn config() -> Option<PathBuf> {
    config_in(Os::CURRENT, &process_env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| OsString::from(value))
        }
    }

    fn path(parts: &[&str]) -> PathBuf {
        parts.iter().collect()
    }

    #[test]
    fn linux_follows_xdg_and_falls_back_to_the_home_s_dot_folders() {
        let plain = env(&[("HOME", "/home/dana")]);
        assert_eq!(
            data_in(Os::Linux, &plain),
            Some(path(&["/home/dana", ".local", "share", "roundtable"]))
        );
        assert_eq!(
            config_in(Os::Linux, &plain),
            Some(path(&["/home/dana", ".config", "roundtable"]))
        );
        let xdg = env(&[
            ("HOME", "/home/dana"),
            ("XDG_DATA_HOME", "/data"),
            ("XDG_CONFIG_HOME", "/settings"),
        ]);
        assert_eq!(
            data_in(Os::Linux, &xdg),
            Some(path(&["/data", "roundtable"]))
        );
        assert_eq!(
            config_in(Os::Linux, &xdg),
            Some(path(&["/settings", "roundtable"]))
        );
        // Relative or empty XDG paths are ignored, as the specification says.
        let odd = env(&[
            ("HOME", "/home/dana"),
            ("XDG_DATA_HOME", "data"),
            ("XDG_CONFIG_HOME", ""),
        ]);
        assert_eq!(
            data_in(Os::Linux, &odd),
            Some(path(&["/home/dana", ".local", "share", "roundtable"]))
        );
        assert_eq!(
            config_in(Os::Linux, &odd),
            Some(path(&["/home/dana", ".config", "roundtable"]))
        );
        assert_eq!(data_in(Os::Linux, &env(&[])), None);
        assert_eq!(home_in(Os::Linux, &env(&[("HOME", "")])), None);
    }

    #[test]
    fn macos_keeps_data_and_settings_in_application_support() {
        let mac = env(&[("HOME", "/Users/dana"), ("XDG_DATA_HOME", "/data")]);
        let support = path(&[
            "/Users/dana",
            "Library",
            "Application Support",
            "roundtable",
        ]);
        assert_eq!(data_in(Os::MacOs, &mac), Some(support.clone()));
        assert_eq!(config_in(Os::MacOs, &mac), Some(support));
        assert_eq!(home_in(Os::MacOs, &mac), Some(path(&["/Users/dana"])));
    }

    #[test]
    fn windows_keeps_data_local_and_settings_roaming() {
        let win = env(&[
            ("USERPROFILE", r"C:\Users\dana"),
            ("HOME", "/c/Users/dana"),
            ("LOCALAPPDATA", r"C:\Users\dana\AppData\Local"),
            ("APPDATA", r"C:\Users\dana\AppData\Roaming"),
        ]);
        assert_eq!(
            home_in(Os::Windows, &win),
            Some(PathBuf::from(r"C:\Users\dana")),
            "Git Bash's HOME is not the home Windows programs use"
        );
        assert_eq!(
            data_in(Os::Windows, &win),
            Some(path(&[r"C:\Users\dana\AppData\Local", "roundtable"]))
        );
        assert_eq!(
            config_in(Os::Windows, &win),
            Some(path(&[r"C:\Users\dana\AppData\Roaming", "roundtable"]))
        );
        // Without the folder variables, the folders under the profile.
        let bare = env(&[("HOMEDRIVE", "D:"), ("HOMEPATH", r"\Users\dana")]);
        assert_eq!(
            home_in(Os::Windows, &bare),
            Some(PathBuf::from(r"D:\Users\dana"))
        );
        assert_eq!(
            data_in(Os::Windows, &bare),
            Some(path(&[r"D:\Users\dana", "AppData", "Local", "roundtable"]))
        );
        assert_eq!(
            config_in(Os::Windows, &bare),
            Some(path(&[
                r"D:\Users\dana",
                "AppData",
                "Roaming",
                "roundtable"
            ]))
        );
    }
}
