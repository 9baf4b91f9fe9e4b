//! `roundtable hub`: flags, environment, first line, clean shutdown.

use std::process::Stdio;
use std::time::Duration;

use roundtable_testkit::{Client, http, signup};

use roundtable_testkit::HubProcess;

const BIN: &str = env!("CARGO_BIN_EXE_roundtable");

#[tokio::test]
async fn prints_its_address_and_serves_on_port_zero() {
    let dir = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(std::path::Path::new(BIN), dir.path(), &["--signup", "open"]).await;
    assert_ne!(hub.addr.port(), 0);
    let health = http(hub.addr, "GET", "/v1/health", None).await.unwrap();
    assert_eq!(health.status, 200);
    let created = signup(hub.addr, "dana").await.unwrap();
    let mut client = Client::connect(&hub.ws_url()).await.unwrap();
    client.auth(&created.token, "d").await.unwrap();
    let status = hub.terminate().await;
    assert!(status.success(), "{status:?}");
    assert_eq!(client.closed().await.unwrap(), Some(1012));
    assert!(dir.path().join("hub.sqlite3").exists());
}

#[tokio::test]
async fn settings_come_from_the_environment_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_roundtable"))
        .arg("hub")
        .env("ROUNDTABLE_HUB_LISTEN", "127.0.0.1:0")
        .env("ROUNDTABLE_HUB_DATA", dir.path())
        .env("ROUNDTABLE_HUB_SIGNUP", "closed")
        .env("ROUNDTABLE_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next_line().await.unwrap().unwrap();
    let addr = first
        .strip_prefix("listening on ws://")
        .unwrap()
        .parse()
        .unwrap();
    let known = http(addr, "GET", "/.well-known/roundtable.json", None)
        .await
        .unwrap();
    assert_eq!(known.json()["signup"], "closed");
    child.kill().await.unwrap();
}

#[tokio::test]
async fn its_log_in_a_file_is_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hub.log");
    let mut child = tokio::process::Command::new(BIN)
        .args(["hub", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.path().join("data"))
        .env("ROUNDTABLE_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next_line().await.unwrap().unwrap();
    assert!(first.starts_with("listening on"), "{first}");
    roundtable_testkit::until(
        "the hub logs that it serves",
        Duration::from_secs(10),
        async || {
            std::fs::read_to_string(&log)
                .unwrap()
                .contains("hub serving")
        },
    )
    .await;
    child.kill().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains('\x1b'),
        "colour codes in a log file: {text:?}"
    );
}

#[tokio::test]
async fn bad_settings_fail_with_a_clear_message() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_roundtable"))
        .args(["hub", "--listen", "127.0.0.1:0", "--signup", "sometimes"])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("open, invite or closed"), "{stderr}");

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_roundtable"))
        .args([
            "hub",
            "--listen",
            &taken.local_addr().unwrap().to_string(),
            "--data",
        ])
        .arg(dir.path())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot listen on"), "{stderr}");
}

#[tokio::test]
async fn plain_ws_on_a_network_address_needs_consent() {
    let dir = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_roundtable"))
        .args(["hub", "--listen", "0.0.0.0:0", "--data"])
        .arg(dir.path())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--tls-cert"), "{stderr}");
}
