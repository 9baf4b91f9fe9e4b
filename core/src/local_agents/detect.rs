//! Finding the agent CLIs installed here. People install them with npm (often under nvm or
//! volta, outside a desktop app's `PATH`), with their vendors' installers (`~/.local/bin`,
//! `~/.claude/local`), with Homebrew or cargo: each is looked for on `PATH`, then in those
//! places. Its version comes from `--version`, with a timeout (a CLI that hangs is listed
//! without one).
//!
//! On Windows a program is a file with one of `%PATHEXT%`'s extensions (`claude.exe`;
//! npm's `codex.cmd`), a native `.exe` first: npm also leaves an extensionless `sh` script
//! beside each `.cmd`, which Windows cannot start.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::{AgentCli, Environment};

/// How long `--version` may take.
const VERSION_PATIENCE: Duration = Duration::from_secs(5);

/// An agent CLI found on this machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct Detected {
    pub cli: AgentCli,
    /// The name people know it by ("Claude Code").
    pub name: String,
    pub path: PathBuf,
    /// What `--version` printed (its first line), when it answered.
    pub version: Option<String>,
    /// Whether Roundtable onboards it (the others are listed only).
    pub supported: bool,
    /// What Roundtable does with it ([`AgentCli::support`]).
    pub support: Vec<super::support::Support>,
    /// The configuration files onboarding edits.
    pub config: Vec<PathBuf>,
    /// Where it writes its session logs.
    pub logs: Vec<PathBuf>,
    /// Whether an agent is onboarded on it (at user scope), and which.
    pub onboarded: bool,
    pub handle: Option<String>,
}

/// The directories to look in, in order: `PATH`, then the usual install places.
pub fn search_dirs(env: &Environment) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = env
        .path
        .as_ref()
        .map(|path| std::env::split_paths(path).collect())
        .unwrap_or_default();
    // A relative entry (`.`, `node_modules/.bin`, an empty one) names whatever directory
    // this runs in: a repository could plant a `claude` there, and onboarding would wire
    // Roundtable to it.
    dirs.retain(|dir| dir.is_absolute());
    let home = &env.home;
    for relative in [
        ".local/bin",
        ".claude/local",
        ".npm-global/bin",
        ".volta/bin",
        ".bun/bin",
        ".cargo/bin",
        ".opencode/bin",
        "bin",
    ] {
        dirs.push(home.join(relative));
    }
    // Every node version nvm installed, newest first.
    if let Ok(entries) = std::fs::read_dir(home.join(".nvm/versions/node")) {
        let mut versions: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        versions.sort();
        dirs.extend(
            versions
                .into_iter()
                .rev()
                .map(|version| version.join("bin")),
        );
    }
    if cfg!(windows) {
        let windows = &env.windows;
        let places = [
            // npm's global programs, nvm-windows' and Node.js' own folder.
            windows.appdata.as_ref().map(|dir| dir.join("npm")),
            windows.nvm_symlink.clone(),
            windows.program_files.as_ref().map(|dir| dir.join("nodejs")),
            windows
                .local_appdata
                .as_ref()
                .map(|dir| dir.join("Volta").join("bin")),
            // Antigravity CLI's installer.
            windows
                .local_appdata
                .as_ref()
                .map(|dir| dir.join("agy").join("bin")),
            Some(home.join("scoop").join("shims")),
        ];
        dirs.extend(places.into_iter().flatten());
    } else {
        for absolute in ["/usr/local/bin", "/opt/homebrew/bin", "/usr/bin"] {
            dirs.push(PathBuf::from(absolute));
        }
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|dir| seen.insert(dir.clone()));
    dirs
}

/// The first executable called `command` in `dirs`.
pub fn find_executable(dirs: &[PathBuf], command: &str) -> Option<PathBuf> {
    let pathext = std::env::var_os("PATHEXT");
    let names = program_names(
        command,
        cfg!(windows).then(|| pathext.as_deref().unwrap_or_default()),
    );
    dirs.iter()
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| is_executable(candidate))
}

/// The file names `command`'s program may have, most wanted first: itself on Unix; on
/// Windows (`pathext` given, `%PATHEXT%`'s value) itself with each extension, `.exe`
/// first (a native program takes arguments as given; a `.cmd` goes through `cmd.exe`).
pub fn program_names(command: &str, pathext: Option<&std::ffi::OsStr>) -> Vec<String> {
    let Some(pathext) = pathext else {
        return vec![command.to_owned()];
    };
    let pathext = pathext.to_string_lossy();
    let mut extensions: Vec<String> = pathext
        .split(';')
        .map(|extension| extension.trim().to_ascii_lowercase())
        .filter(|extension| extension.starts_with('.') && extension.len() > 1)
        .collect();
    if extensions.is_empty() {
        extensions = [".com", ".exe", ".bat", ".cmd"].map(String::from).to_vec();
    }
    extensions.sort_by_key(|extension| extension != ".exe");
    let mut seen = std::collections::HashSet::new();
    extensions.retain(|extension| seen.insert(extension.clone()));
    extensions
        .into_iter()
        .map(|extension| format!("{command}{extension}"))
        .collect()
}

fn is_executable(path: &Path) -> bool {
    let Ok(metadata) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        metadata.is_file()
    }
}

/// The first line `path --version` prints, if it answers in time.
pub async fn version(path: &Path) -> Option<String> {
    let output = tokio::time::timeout(
        VERSION_PATIENCE,
        tokio::process::Command::new(path)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().map(str::trim).find(|line| !line.is_empty())?;
    Some(line.chars().take(200).collect())
}

/// Every agent CLI found, with what onboarding records say of it (see
/// [`super::onboarding::onboarded`]).
pub async fn detect(env: &Environment, profiles: &Path) -> Vec<Detected> {
    let dirs = search_dirs(env);
    let onboarded = super::onboarding::onboarded(profiles);
    let mut found = Vec::new();
    for cli in AgentCli::ALL {
        let Some(path) = find_executable(&dirs, cli.command()) else {
            continue;
        };
        let record = onboarded
            .iter()
            .find(|record| record.cli == cli && record.project.is_none());
        found.push(Detected {
            cli,
            name: cli.display_name().to_owned(),
            version: version(&path).await,
            path,
            supported: cli.supported(),
            support: support_here(cli, &dirs),
            config: env.config_files(cli, None),
            logs: env.log_dirs(cli),
            onboarded: record.is_some(),
            handle: record.map(|record| record.handle.clone()),
        });
    }
    found
}

/// What Roundtable does with `cli`, and whether its ACP adapter is installed here.
fn support_here(cli: AgentCli, dirs: &[PathBuf]) -> Vec<super::support::Support> {
    let mut support = cli.support();
    if let Some(super::acp::AcpRoute::Adapter(adapter)) = cli.acp()
        && let Some(row) = support
            .iter_mut()
            .find(|row| row.aspect == super::support::Aspect::Acp)
    {
        match find_executable(dirs, adapter.command) {
            Some(path) => row.how.push_str(&format!("; found at {}", path.display())),
            None => row.how.push_str(&format!(
                "; not installed: npm install -g {}",
                adapter.package
            )),
        }
    }
    support
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn executable(path: &Path, script: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, script).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    // The fake CLIs are `sh` scripts, which Windows cannot start; Windows' own way of
    // finding programs is tested by `a_windows_program_is_its_name_with_an_extension`.
    #[cfg(unix)]
    #[tokio::test]
    async fn clis_are_found_on_path_and_in_usual_places_with_their_versions() {
        let home = tempfile::tempdir().unwrap();
        let on_path = home.path().join("somewhere/bin");
        executable(
            &on_path.join("claude"),
            "#!/bin/sh\necho '2.1.240 (Claude Code)'\n",
        );
        // Codex installed with npm under nvm, not on PATH.
        executable(
            &home.path().join(".nvm/versions/node/v22.1.0/bin/codex"),
            "#!/bin/sh\necho 'codex-cli 0.144.0'\n",
        );
        // A file that is not executable is not a CLI.
        std::fs::write(on_path.join("gemini"), "not a program").unwrap();
        // One that hangs is listed without a version? It must answer; this one fails.
        executable(
            &home.path().join(".local/bin/opencode"),
            "#!/bin/sh\nexit 3\n",
        );
        executable(
            &home.path().join(".local/bin/copilot"),
            "#!/bin/sh\necho 'GitHub Copilot CLI 1.0.102.'\necho \"Run 'copilot update' to check for updates.\"\n",
        );
        // Claude Code's ACP adapter is installed, Codex's is not.
        executable(&on_path.join("claude-agent-acp"), "#!/bin/sh\nexit 0\n");
        // A CLI Roundtable lists but does not onboard yet.
        executable(
            &home.path().join(".local/bin/cursor-agent"),
            "#!/bin/sh\nexit 3\n",
        );
        let env = Environment {
            home: home.path().to_path_buf(),
            path: Some(on_path.clone().into_os_string()),
            codex_home: Some(home.path().join("codex-home")),
            ..Environment::default()
        };
        let profiles = home.path().join("profiles");
        let found = detect(&env, &profiles).await;
        let names: Vec<AgentCli> = found.iter().map(|d| d.cli).collect();
        assert_eq!(
            names,
            [
                AgentCli::Claude,
                AgentCli::Codex,
                AgentCli::Opencode,
                AgentCli::CursorAgent,
                AgentCli::Copilot
            ]
        );
        assert_eq!(found[0].version.as_deref(), Some("2.1.240 (Claude Code)"));
        assert_eq!(found[0].path, on_path.join("claude"));
        assert_eq!(
            found[0].config,
            [
                home.path().join(".claude.json"),
                home.path().join(".claude/settings.json")
            ]
        );
        assert_eq!(found[1].version.as_deref(), Some("codex-cli 0.144.0"));
        assert_eq!(
            found[1].config,
            [
                home.path().join("codex-home/config.toml"),
                home.path().join("codex-home/hooks.json")
            ]
        );
        assert_eq!(
            found[1].logs,
            [
                home.path().join("codex-home/sessions"),
                home.path().join("codex-home/archived_sessions")
            ]
        );
        assert!(found[0].supported && found[2].supported && !found[3].supported);
        assert!(found[4].supported);
        assert_eq!(
            found[4].version.as_deref(),
            Some("GitHub Copilot CLI 1.0.102.")
        );
        assert_eq!(
            found[4].config,
            [
                home.path().join(".copilot/mcp-config.json"),
                home.path().join(".copilot/hooks/roundtable.json")
            ]
        );
        assert_eq!(
            found[2].config[0],
            home.path().join(".config/opencode/opencode.json")
        );
        assert_eq!(found[2].version, None);
        assert!(found.iter().all(|d| !d.onboarded));
        let over_acp = |detected: &Detected| {
            detected
                .support
                .iter()
                .find(|row| row.aspect == super::super::support::Aspect::Acp)
                .map(|row| row.how.clone())
                .unwrap()
        };
        assert!(
            over_acp(&found[0]).ends_with(&format!(
                "; found at {}",
                on_path.join("claude-agent-acp").display()
            )),
            "{}",
            over_acp(&found[0])
        );
        assert!(
            over_acp(&found[1])
                .ends_with("; not installed: npm install -g @agentclientprotocol/codex-acp"),
            "{}",
            over_acp(&found[1])
        );
        assert_eq!(over_acp(&found[2]), "opencode acp");
    }

    // A Unix `PATH` (`:`-separated, `/usr/bin` absolute).
    #[cfg(unix)]
    #[test]
    fn relative_path_entries_are_not_searched() {
        let env = Environment {
            home: PathBuf::from("/home/dana"),
            path: Some(std::ffi::OsString::from(
                "/usr/bin:.:node_modules/.bin::/opt/tools/bin",
            )),
            ..Environment::default()
        };
        let dirs = search_dirs(&env);
        assert!(dirs.iter().all(|dir| dir.is_absolute()), "{dirs:?}");
        assert_eq!(
            dirs[..2],
            [PathBuf::from("/usr/bin"), PathBuf::from("/opt/tools/bin")]
        );
    }

    #[test]
    fn claude_config_dir_moves_its_files() {
        let env = Environment {
            home: PathBuf::from("/home/dana"),
            claude_config_dir: Some(PathBuf::from("/cfg/claude")),
            ..Environment::default()
        };
        assert_eq!(env.claude_json(), PathBuf::from("/cfg/claude/.claude.json"));
        assert_eq!(
            env.log_dirs(AgentCli::Claude)[0],
            PathBuf::from("/cfg/claude/projects")
        );
        assert_eq!(
            env.config_files(AgentCli::Claude, Some(Path::new("/p"))),
            [
                PathBuf::from("/p/.mcp.json"),
                PathBuf::from("/p/.claude/settings.json")
            ]
        );
    }

    #[test]
    fn windows_programs_are_named_with_pathext_s_extensions_a_native_one_first() {
        assert_eq!(program_names("claude", None), ["claude"]);
        let pathext = std::ffi::OsString::from(".COM;.BAT;.CMD;.EXE;.VBS;;.JS");
        assert_eq!(
            program_names("claude", Some(&pathext)),
            [
                "claude.exe",
                "claude.com",
                "claude.bat",
                "claude.cmd",
                "claude.vbs",
                "claude.js"
            ]
        );
        // An empty or odd PATHEXT is Windows' default.
        assert_eq!(
            program_names("codex", Some(std::ffi::OsStr::new("junk"))),
            ["codex.exe", "codex.com", "codex.bat", "codex.cmd"]
        );
    }

    #[cfg(windows)]
    #[test]
    fn a_windows_program_is_its_name_with_an_extension() {
        let dir = tempfile::tempdir().unwrap();
        let npm = dir.path().join("npm");
        let native = dir.path().join("native");
        for file in [
            npm.join("claude"),
            npm.join("claude.cmd"),
            npm.join("codex.cmd"),
            native.join("codex.exe"),
            npm.join("gemini"),
        ] {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, "@echo off").unwrap();
        }
        let dirs = [npm.clone(), native.clone()];
        // npm's extensionless `sh` script beside the `.cmd` is not a Windows program.
        assert_eq!(
            find_executable(&dirs, "claude"),
            Some(npm.join("claude.cmd"))
        );
        assert_eq!(find_executable(&dirs, "codex"), Some(npm.join("codex.cmd")));
        assert_eq!(
            find_executable(&[native.clone(), npm], "codex"),
            Some(native.join("codex.exe"))
        );
        assert_eq!(find_executable(&dirs, "gemini"), None);
    }
}
