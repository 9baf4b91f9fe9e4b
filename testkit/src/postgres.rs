//! A database of its own for each test, on the PostgreSQL server `scripts/test.sh` starts
//! (`ROUNDTABLE_TEST_POSTGRES` names it, as a `postgresql://` URL to its `postgres`
//! database), dropped when the test ends.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh, empty database; dropping it drops the database (closing its connections).
#[derive(Debug)]
pub struct TestDatabase {
    /// The database's URL, for `roundtable hub --store` and the store's `open`.
    pub url: String,
    pub(crate) server: String,
    pub(crate) name: String,
}

/// The server's URL, or a panic that says how to get one.
pub fn server_url() -> String {
    std::env::var("ROUNDTABLE_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!(
            "ROUNDTABLE_TEST_POSTGRES is not set: run scripts/test.sh (it starts a private \
             PostgreSQL), or set it to a postgresql:// URL of a server's `postgres` database \
             where this user may create databases"
        )
    })
}

/// A PostgreSQL client program, from the server's directory when the script named it.
fn program(name: &str) -> std::path::PathBuf {
    std::env::var_os("ROUNDTABLE_TEST_POSTGRES_BIN")
        .map(|bin| std::path::PathBuf::from(bin).join(name))
        .unwrap_or_else(|| name.into())
}

/// Runs `psql` on `url`; its output.
fn run_psql(url: &str, args: &[&str], sql: &str) -> Result<Vec<u8>, String> {
    let program = program("psql");
    let output = Command::new(&program)
        .arg(url)
        .args(["-v", "ON_ERROR_STOP=1", "-qAt"])
        .args(args)
        .args(["-c", sql])
        .output()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    if !output.status.success() {
        return Err(format!(
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(output.stdout)
}

fn psql(server: &str, sql: &str) -> Result<(), String> {
    run_psql(server, &[], sql).map(drop)
}

/// Rows `sql` selects from the database at `url`, columns as text (NULL as "").
pub fn select(url: &str, sql: &str) -> Vec<Vec<String>> {
    let output = run_psql(url, &["-F", "\u{1f}"], sql).unwrap_or_else(|error| panic!("{error}"));
    String::from_utf8(output)
        .expect("psql prints UTF-8")
        .lines()
        .map(|line| line.split('\u{1f}').map(str::to_owned).collect())
        .collect()
}

/// The database at `url`, dumped as SQL.
pub fn dump(url: &str) -> Vec<u8> {
    let program = program("pg_dump");
    let output = Command::new(&program)
        .args(["--data-only", url])
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()));
    assert!(
        output.status.success(),
        "pg_dump failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

impl TestDatabase {
    /// A database on the server of `ROUNDTABLE_TEST_POSTGRES`.
    pub fn create() -> TestDatabase {
        TestDatabase::create_on(&server_url())
    }

    /// A database on the server whose `postgres` database `server` names.
    pub fn create_on(server: &str) -> TestDatabase {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let server = server.to_owned();
        let name = format!(
            "rt_test_{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.subsec_nanos())
        );
        if let Err(error) = psql(&server, &format!("CREATE DATABASE {name}")) {
            panic!("{error}");
        }
        let url = match server.split_once('?') {
            Some((base, query)) => format!("{}/{name}?{query}", database_base(base)),
            None => format!("{}/{name}", database_base(&server)),
        };
        TestDatabase { url, server, name }
    }
}

/// `postgresql://user@host:port/postgres` without its database.
fn database_base(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    match url[after_scheme..].find('/') {
        Some(slash) => &url[..after_scheme + slash],
        None => url,
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if self.name.is_empty() {
            return;
        }
        // Never a panic while a failing test unwinds: the server's directory is temporary.
        let _ = psql(
            &self.server,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}
