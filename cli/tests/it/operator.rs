//! The operator's commands: `roundtable hub user add` on a closed hub, and
//! `roundtable hub audit verify` finding a tampered entry.

use std::process::Output;

use roundtable_testkit::{Client, http};

use roundtable_testkit::HubProcess;

const BIN: &str = env!("CARGO_BIN_EXE_roundtable");

async fn roundtable(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_roundtable"))
        .args(args)
        .env("ROUNDTABLE_LOG", "warn")
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_closed_hub_gets_users_from_its_operator_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let created = roundtable(&[
        "hub", "user", "add", "--data", data, "--handle", "dana", "--name", "Dana",
    ])
    .await;
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let token = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    assert!(token.starts_with("rt_"), "{token}");
    let duplicate = roundtable(&["hub", "user", "add", "--data", data, "--handle", "dana"]).await;
    assert!(!duplicate.status.success());
    assert!(String::from_utf8_lossy(&duplicate.stderr).contains("taken"));

    let hub = HubProcess::start(
        std::path::Path::new(BIN),
        dir.path(),
        &["--signup", "closed"],
    )
    .await;
    let refused = http(
        hub.addr,
        "POST",
        "/v1/signup",
        Some(r#"{"handle":"sam","name":"Sam"}"#),
    )
    .await
    .unwrap();
    assert_eq!(refused.status, 403);
    let mut client = Client::connect(&hub.ws_url()).await.unwrap();
    client.auth(&token, "laptop").await.unwrap();
    // While the hub runs, the operator is told to stop it first.
    let busy = roundtable(&["hub", "user", "add", "--data", data, "--handle", "sam"]).await;
    assert!(!busy.status.success());
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("stop it first"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    hub.terminate().await;

    // A lost token: the operator revokes it and issues another.
    let reissued = roundtable(&["hub", "user", "token", "--data", data, "--handle", "dana"]).await;
    assert!(
        reissued.status.success(),
        "{}",
        String::from_utf8_lossy(&reissued.stderr)
    );
    let new_token = String::from_utf8(reissued.stdout)
        .unwrap()
        .trim()
        .to_owned();
    assert_ne!(new_token, token);
    let hub = HubProcess::start(
        std::path::Path::new(BIN),
        dir.path(),
        &["--signup", "closed"],
    )
    .await;
    let mut old = Client::connect(&hub.ws_url()).await.unwrap();
    assert!(old.auth(&token, "laptop").await.is_err());
    let mut fresh = Client::connect(&hub.ws_url()).await.unwrap();
    fresh.auth(&new_token, "laptop").await.unwrap();
    hub.terminate().await;
}

#[tokio::test]
async fn audit_verify_finds_the_first_tampered_entry() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    for handle in ["dana", "sam", "eve"] {
        assert!(
            roundtable(&["hub", "user", "add", "--data", data, "--handle", handle])
                .await
                .status
                .success()
        );
    }
    let intact = roundtable(&["hub", "audit", "verify", "--data", data]).await;
    assert!(
        intact.status.success(),
        "{}",
        String::from_utf8_lossy(&intact.stderr)
    );
    let report = String::from_utf8(intact.stdout).unwrap();
    assert!(
        report.starts_with("audit log intact: 3 entries, head "),
        "{report}"
    );

    // Someone edits entry 2 behind the hub's back.
    let db = rusqlite::Connection::open(dir.path().join("hub.sqlite3")).unwrap();
    db.execute("UPDATE audit SET principal = 'p_mallory' WHERE n = 2", [])
        .unwrap();
    drop(db);
    let broken = roundtable(&["hub", "audit", "verify", "--data", data]).await;
    assert!(!broken.status.success());
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(stderr.contains("broken at entry 2"), "{stderr}");

    let missing = roundtable(&[
        "hub",
        "audit",
        "verify",
        "--data",
        dir.path().join("nowhere").to_str().unwrap(),
    ])
    .await;
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no hub database"));
}

/// On a PostgreSQL store: users added by the operator, one hub per database (a second one,
/// or `user add` while it runs, is told why), and `audit verify --store` finding an edit.
#[tokio::test]
async fn the_operator_commands_work_on_a_postgres_store() {
    let database = roundtable_testkit::postgres::TestDatabase::create();
    let url = database.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("first");
    let data = data.to_str().unwrap();
    let created = roundtable(&[
        "hub", "user", "add", "--data", data, "--store", url, "--handle", "dana",
    ])
    .await;
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let token = String::from_utf8(created.stdout).unwrap().trim().to_owned();

    let hub = HubProcess::start(
        std::path::Path::new(BIN),
        std::path::Path::new(data),
        &["--store", url, "--signup", "closed"],
    )
    .await;
    let mut client = Client::connect(&hub.ws_url()).await.unwrap();
    client.auth(&token, "laptop").await.unwrap();
    let other = dir.path().join("second");
    let second = roundtable(&[
        "hub",
        "--listen",
        "127.0.0.1:0",
        "--data",
        other.to_str().unwrap(),
        "--store",
        url,
    ])
    .await;
    assert!(!second.status.success());
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(said.contains("another hub"), "{said}");
    assert!(
        !said.contains(url),
        "the store's URL is never printed: {said}"
    );
    let busy = roundtable(&[
        "hub",
        "user",
        "add",
        "--data",
        other.to_str().unwrap(),
        "--store",
        url,
        "--handle",
        "sam",
    ])
    .await;
    assert!(!busy.status.success());
    assert!(String::from_utf8_lossy(&busy.stderr).contains("another hub"));
    let running = roundtable(&["hub", "audit", "verify", "--store", url]).await;
    assert!(
        String::from_utf8_lossy(&running.stdout).starts_with("audit log intact: "),
        "{}",
        String::from_utf8_lossy(&running.stderr)
    );
    hub.terminate().await;

    roundtable_testkit::postgres::select(
        url,
        "UPDATE audit SET principal = 'p_mallory' WHERE n = 1",
    );
    let broken = roundtable(&["hub", "audit", "verify", "--store", url]).await;
    assert!(!broken.status.success());
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(stderr.contains("broken at entry 1"), "{stderr}");
    let unknown = roundtable(&["hub", "audit", "verify", "--store", "mysql://x"]).await;
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("postgres://"));
}
