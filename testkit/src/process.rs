//! Running `roundtable` as a child process: the hub, and the client commands.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A `roundtable hub` child process and the address it printed.
pub struct HubProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

/// The `roundtable` binary beside the running one (a bench binary's `target/<profile>/`).
pub fn roundtable_beside_this_binary() -> anyhow::Result<PathBuf> {
    use anyhow::Context as _;
    Ok(std::env::current_exe()?
        .parent()
        .context("the running binary has a directory")?
        .join(format!("roundtable{}", std::env::consts::EXE_SUFFIX)))
}

/// The `roundtable` binary of this build: `ROUNDTABLE_BIN`, else the one next to the test
/// binary's directory (`target/<profile>/roundtable`), which `cargo build -p roundtable-cli`
/// (or any workspace test run) produces.
pub fn roundtable_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("ROUNDTABLE_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>");
    let bin = profile_dir.join(format!("roundtable{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p roundtable-cli` (or set ROUNDTABLE_BIN)",
        bin.display()
    );
    bin
}

impl HubProcess {
    /// Starts the hub on a free port over `data` and waits for its first line.
    pub async fn start(bin: &Path, data: &Path, extra: &[&str]) -> HubProcess {
        HubProcess::start_on(bin, data, "127.0.0.1:0", extra).await
    }

    /// Starts the hub on `listen` over `data` and waits for its first line.
    pub async fn start_on(bin: &Path, data: &Path, listen: &str, extra: &[&str]) -> HubProcess {
        let mut child = Command::new(bin)
            .args(["hub", "--listen", listen, "--data"])
            .arg(data)
            .args(extra)
            .env("ROUNDTABLE_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawning roundtable hub");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(crate::PATIENCE, lines.next_line())
            .await
            .expect("the hub prints its address in time")
            .unwrap()
            .expect("a first line");
        let addr = first
            .strip_prefix("listening on ws://")
            .or_else(|| first.strip_prefix("listening on wss://"))
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .parse()
            .unwrap();
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        HubProcess { child, addr }
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/v1/ws", self.addr)
    }

    /// SIGKILL: no chance to flush or say goodbye.
    pub async fn kill(mut self) {
        self.child.kill().await.expect("killing the hub");
    }

    /// A request to stop (SIGTERM on Unix; its stop event on Windows), then wait for a
    /// clean exit.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running");
        roundtable_platform::stop::request(pid).expect("asking the hub to stop");
        tokio::time::timeout(crate::PATIENCE, self.child.wait())
            .await
            .expect("the hub exits when asked to stop")
            .unwrap()
    }
}
