//! A client written from the protocol document alone (Python, standard library only, in
//! `hub/tests/independent/client.py`) signs up, authenticates, creates rooms, sends, syncs
//! and resumes against `roundtable hub`, and finds no surprise.

use std::path::PathBuf;

use roundtable_testkit::HubProcess;

const BIN: &str = env!("CARGO_BIN_EXE_roundtable");

#[tokio::test]
async fn an_independent_client_finds_no_deviation() {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hub/tests/independent/client.py");
    let dir = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(std::path::Path::new(BIN), dir.path(), &[]).await;
    let output = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(hub.addr.to_string())
        .output()
        .await
        .expect("python3 runs (the test command installs it)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the independent client found a deviation:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("PASS"), "{stdout}");
    hub.terminate().await;
}

/// The same client, against a hub that keeps its data in PostgreSQL: it cannot tell.
#[tokio::test]
async fn an_independent_client_finds_no_deviation_on_postgres() {
    let database = roundtable_testkit::postgres::TestDatabase::create();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hub/tests/independent/client.py");
    let dir = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(
        std::path::Path::new(BIN),
        dir.path(),
        &["--store", &database.url],
    )
    .await;
    let output = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(hub.addr.to_string())
        .output()
        .await
        .expect("python3 runs (the test command installs it)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the independent client found a deviation:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("PASS"), "{stdout}");
    hub.terminate().await;
}
