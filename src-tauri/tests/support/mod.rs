//! What the end-to-end tests (`tests/desktop/`) and the desktop benchmark
//! (`benches/desktop.rs`) share to run the app for real: an X server (the one in `DISPLAY`,
//! else an Xvfb of their own), a private D-Bus session per launch, a fresh machine (a
//! temporary `HOME`, `ROUNDTABLE_HOME` and XDG directories), process trees that die with
//! their owner, and tauri-driver with a WebDriver session on a binary.
//!
//! Included by path (`#[path = "../support/mod.rs"] mod support;`) from each, so it is not a
//! test target of its own.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

/// A child process killed with every process it started when dropped (they stay in the
/// owner's process group, so a runner that kills the owner kills them too).
pub struct Tree(pub Child);

impl Tree {
    pub fn spawn(command: &mut Command) -> Tree {
        Tree(
            command
                .spawn()
                .unwrap_or_else(|error| panic!("cannot start {command:?}: {error}")),
        )
    }

    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let mut pids: Vec<String> = descendants(self.0.id())
            .iter()
            .map(u32::to_string)
            .collect();
        pids.push(self.0.id().to_string());
        // Some may have exited already: `kill` saying so is not news.
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .stderr(Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

/// The processes `root` started, and theirs, from `/proc`.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (name) state ppid …`: the name may hold spaces and parentheses.
        let Some(after_name) = stat.rfind(')').map(|end| &stat[end + 1..]) else {
            continue;
        };
        if let Some(ppid) = after_name
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
        {
            parents.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            parents
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        index += 1;
    }
    found.remove(0);
    found
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The app of this build.
pub fn app_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_roundtable-desktop"))
}

pub fn tauri_driver() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("tauri-driver"))
            .find(|path| path.is_file())
    });
    let in_cargo = std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".cargo/bin/tauri-driver"))
        .filter(|path| path.is_file());
    on_path.or(in_cargo).expect(
        "tauri-driver is missing: `cargo install tauri-driver --version '^2' --locked` (scripts/test.sh does)",
    )
}

/// An X server: the one in `DISPLAY`, else an Xvfb of our own (stopped when dropped).
pub struct Display {
    pub name: String,
    _xvfb: Option<Tree>,
}

impl Display {
    pub fn start() -> Display {
        match std::env::var("DISPLAY") {
            Ok(name) if !name.is_empty() => Display { name, _xvfb: None },
            _ => {
                let mut xvfb = Tree::spawn(
                    Command::new("Xvfb")
                        .args([
                            "-displayfd",
                            "1",
                            "-screen",
                            "0",
                            "1280x800x24",
                            "-nolisten",
                            "tcp",
                        ])
                        .stdout(Stdio::piped())
                        .stderr(Stdio::null()),
                );
                let mut number = String::new();
                BufReader::new(xvfb.0.stdout.take().unwrap())
                    .read_line(&mut number)
                    .unwrap();
                Display {
                    name: format!(":{}", number.trim()),
                    _xvfb: Some(xvfb),
                }
            }
        }
    }
}

/// A private D-Bus session bus (stopped when dropped), its socket in `runtime`.
pub struct Bus {
    pub address: String,
    _daemon: Tree,
}

impl Bus {
    pub fn start(runtime: &Path) -> Bus {
        let mut daemon = Tree::spawn(
            Command::new("dbus-daemon")
                .args(["--session", "--nofork", "--print-address=1"])
                .arg(format!("--address=unix:tmpdir={}", runtime.display()))
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        );
        let mut address = String::new();
        BufReader::new(daemon.0.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        Bus {
            address: address.trim().to_owned(),
            _daemon: daemon,
        }
    }
}

/// A fresh machine for the app: a temporary directory holding its `HOME`, its Roundtable
/// data, its XDG directories and its runtime directory (0700).
pub struct Machine {
    pub dir: tempfile::TempDir,
}

impl Default for Machine {
    fn default() -> Self {
        Machine::new()
    }
}

impl Machine {
    pub fn new() -> Machine {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let runtime = dir.path().join("run");
        std::fs::create_dir_all(&runtime).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        Machine { dir }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn roundtable_home(&self) -> PathBuf {
        self.dir.path().join("roundtable")
    }

    pub fn runtime(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// The environment of an app on this machine: its directories, the display, the bus.
    pub fn env(&self, display: &str, bus_address: &str) -> Vec<(String, String)> {
        let path = |name: &str| self.dir.path().join(name).display().to_string();
        vec![
            ("HOME".into(), self.home().display().to_string()),
            ("USER".into(), "dana".into()),
            // Tokens in profile files: the private bus has no secret store to keep them.
            ("ROUNDTABLE_TOKEN_STORE".into(), "file".into()),
            (
                "ROUNDTABLE_HOME".into(),
                self.roundtable_home().display().to_string(),
            ),
            ("XDG_DATA_HOME".into(), path("data")),
            ("XDG_CONFIG_HOME".into(), path("config")),
            ("XDG_CACHE_HOME".into(), path("cache")),
            (
                "XDG_RUNTIME_DIR".into(),
                self.runtime().display().to_string(),
            ),
            ("DISPLAY".into(), display.into()),
            ("DBUS_SESSION_BUS_ADDRESS".into(), bus_address.into()),
            ("NO_AT_BRIDGE".into(), "1".into()),
        ]
    }

    /// Where this machine's clients reach the app's own hub (its socket, `unix:PATH`), as
    /// the person's profile says once the app has started it.
    pub fn hub_address(&self) -> Option<String> {
        let profile = std::fs::read_to_string(
            self.roundtable_home()
                .join("profiles")
                .join("default")
                .join("profile.toml"),
        )
        .ok()?;
        let line = profile
            .lines()
            .find_map(|line| line.strip_prefix("hub = "))?;
        Some(line.trim().trim_matches('"').to_owned())
    }
}

/// Variables of the runner's own agent CLIs that must not reach the app.
pub const UNSET: [&str; 2] = ["CLAUDE_CONFIG_DIR", "CODEX_HOME"];

/// tauri-driver on free ports, in `env`, its output and the app's into `log`.
pub struct Driver {
    pub port: u16,
    pub tree: Tree,
    /// The tries [`Driver::launch`] took to get its session (1 when the first did).
    pub tries: u32,
}

impl Driver {
    /// tauri-driver in `env`, its output and the app's into `log`, with a WebDriver session
    /// that launched `application`. tauri-driver now and then fails to reach WebKitWebDriver
    /// on its first try (the request is cut short): up to three tries, each with a fresh
    /// driver. A try with no session within `patience` (the app never came up: WebKit's
    /// driver waits for it without end) fails.
    pub async fn launch(
        env: &[(String, String)],
        log: &std::fs::File,
        application: &Path,
        patience: Duration,
    ) -> Result<(Driver, Client), fantoccini::error::NewSessionError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut driver = Driver::start(env, log.try_clone().unwrap(), patience);
            let session = tokio::time::timeout(patience, driver.session(application))
                .await
                .unwrap_or_else(|_| {
                    Err(fantoccini::error::NewSessionError::Lost(
                        std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!("no session within {patience:?}: did the app start?"),
                        ),
                    ))
                });
            match session {
                Ok(client) => {
                    driver.tries = attempt;
                    return Ok((driver, client));
                }
                Err(error) if attempt < 3 => {
                    eprintln!("no WebDriver session ({error}); again");
                    drop(driver);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    pub fn start(env: &[(String, String)], log: std::fs::File, patience: Duration) -> Driver {
        let port = free_port();
        let native = free_port();
        let mut driver = Command::new(tauri_driver());
        driver
            .args([
                "--port",
                &port.to_string(),
                "--native-port",
                &native.to_string(),
            ])
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        for name in UNSET {
            driver.env_remove(name);
        }
        let tree = Tree::spawn(&mut driver);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < patience, "tauri-driver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver {
            port,
            tree,
            tries: 1,
        }
    }

    /// A WebDriver session on `application` (creating it launches the application).
    pub async fn session(
        &self,
        application: &Path,
    ) -> Result<Client, fantoccini::error::NewSessionError> {
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("wry"));
        capabilities.insert(
            "tauri:options".into(),
            json!({ "application": application.display().to_string() }),
        );
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
    }

    /// The TCP ports process `pid` listens on (read from `/proc`: its sockets, matched
    /// against the listening ones of its network namespace).
    pub fn listening_ports(pid: u32) -> Vec<u16> {
        let sockets: std::collections::HashSet<String> =
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|entries| {
                    entries
                        .flatten()
                        .filter_map(|entry| std::fs::read_link(entry.path()).ok())
                        .filter_map(|target| {
                            let target = target.to_string_lossy().into_owned();
                            Some(
                                target
                                    .strip_prefix("socket:[")?
                                    .strip_suffix(']')?
                                    .to_owned(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
        let mut ports = Vec::new();
        for table in ["tcp", "tcp6"] {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
                continue;
            };
            for line in text.lines().skip(1) {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // local_address, rem_address, st (0A: LISTEN), …, inode (the tenth).
                let (Some(local), Some(state), Some(inode)) =
                    (fields.get(1), fields.get(3), fields.get(9))
                else {
                    continue;
                };
                if *state == "0A"
                    && sockets.contains(*inode)
                    && let Some(port) = local
                        .rsplit_once(':')
                        .and_then(|(_, port)| u16::from_str_radix(port, 16).ok())
                {
                    ports.push(port);
                }
            }
        }
        ports
    }

    /// The process of `binary` that this driver launched, if it runs.
    pub fn launched(&self, binary: &Path) -> Option<u32> {
        let binary = binary.canonicalize().ok()?;
        descendants(self.tree.id()).into_iter().find(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == binary)
        })
    }
}
