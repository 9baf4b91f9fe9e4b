//! Running `roundtable hub` as a child process.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A `roundtable hub` child process and the address it printed.
pub struct HubProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

impl HubProcess {
    /// Starts the hub on a free port over `data` and waits for its first line.
    pub async fn start(data: &Path, extra: &[&str]) -> HubProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_roundtable"))
            .args(["hub", "--listen", "127.0.0.1:0", "--data"])
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
        let first = tokio::time::timeout(roundtable_testkit::PATIENCE, lines.next_line())
            .await
            .expect("the hub prints its address in time")
            .unwrap()
            .expect("a first line");
        let addr = first
            .strip_prefix("listening on ws://")
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

    /// SIGTERM, then wait for a clean exit.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running");
        send_signal(pid, "TERM");
        tokio::time::timeout(roundtable_testkit::PATIENCE, self.child.wait())
            .await
            .expect("the hub exits after SIGTERM")
            .unwrap()
    }
}

/// Sends a signal with kill(1), so the tests need no unsafe code.
fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("running kill");
    assert!(status.success());
}
