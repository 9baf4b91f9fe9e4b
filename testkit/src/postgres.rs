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
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep_databases_of_ended_processes(server));
        let server = server.to_owned();
        let name = format!(
            "rt_test_{}_{}_{}_{}",
            machine_tag(),
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

/// This machine (its boot and host name), as 8 hex digits: a server shared by test
/// processes of several machines or containers has each sweep only its own databases.
fn machine_tag() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let seen = format!(
        "{}|{}",
        read("/proc/sys/kernel/random/boot_id").trim(),
        read("/proc/sys/kernel/hostname").trim()
    );
    // FNV-1a: the same tag from every test binary, whatever its toolchain.
    let hash = seen.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    format!("{hash:08x}")
}

/// Drops the databases left by test processes that have ended. A test whose hub is still
/// running when it ends cannot drop its database under the hub (see `TestHub`'s drop), and
/// at about 8 MiB each, a run's leftovers once filled CI's disk. Test processes name their
/// databases after their machine and pid (`rt_test_<machine>_<pid>_…`); a pid of this
/// machine with no `/proc` entry has ended.
/// Where there is no `/proc`, nothing is swept.
fn sweep_databases_of_ended_processes(server: &str) {
    if !std::path::Path::new("/proc/self").exists() {
        return;
    }
    let Ok(listed) = run_psql(
        server,
        &[],
        r"SELECT datname FROM pg_database WHERE datname LIKE 'rt\_test\_%'",
    ) else {
        return;
    };
    let ended: Vec<String> = String::from_utf8_lossy(&listed)
        .lines()
        .filter(|name| {
            pid_of(name).is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        })
        .map(|name| format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .collect();
    if ended.is_empty() {
        return;
    }
    // Each `-c` is its own transaction (DROP DATABASE cannot share one); another process
    // sweeping the same database at once makes a drop fail, which is fine.
    let program = program("psql");
    let _ = Command::new(&program)
        .arg(server)
        .arg("-qAt")
        .args(ended.iter().flat_map(|sql| ["-c", sql.as_str()]))
        .output();
}

/// The pid in the name of a test database of this machine, `rt_test_<machine>_<pid>_…`.
fn pid_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("rt_test_")?;
    let (machine, rest) = rest.split_once('_')?;
    if machine != machine_tag() {
        return None;
    }
    rest.split('_').next()?.parse().ok()
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

/// A PostgreSQL server of a test's own (its own cluster in a temporary directory, on a
/// Unix socket there), for tests that stop and restart the server under load. As root it
/// runs as the `postgres` user (PostgreSQL refuses root).
#[derive(Debug)]
pub struct PrivateServer {
    dir: tempfile::TempDir,
    port: u16,
    /// The URL of its `postgres` database.
    pub url: String,
}

fn as_server_user(program: std::path::PathBuf) -> Command {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn run(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {what}: {error}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

impl PrivateServer {
    /// initdb and start; needs `ROUNDTABLE_TEST_POSTGRES_BIN` (scripts/test.sh sets it).
    pub fn start() -> PrivateServer {
        let dir = tempfile::Builder::new()
            .prefix("roundtable-pg-own")
            .tempdir_in("/tmp")
            .expect("a temporary directory");
        let _ = Command::new("chown")
            .args(["postgres:", dir.path().to_str().unwrap()])
            .status();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        run(
            as_server_user(program("initdb"))
                .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
                .arg(dir.path().join("data")),
            "initdb",
        );
        let server = PrivateServer {
            url: format!(
                // No TCP host: the server listens on none (see scripts/common.sh).
                "postgresql://postgres@/postgres?host={}&port={port}",
                dir.path().display()
            ),
            dir,
            port,
        };
        server.pg_ctl(&["start", "-w"]);
        server
    }

    fn pg_ctl(&self, args: &[&str]) {
        let options = format!(
            "-p {} -k {} -c listen_addresses='' -c fsync=on -c synchronous_commit=on",
            self.port,
            self.dir.path().display()
        );
        run(
            as_server_user(program("pg_ctl"))
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .arg("-l")
                .arg(self.dir.path().join("log"))
                .args(["-s", "-o", &options])
                .args(args),
            "pg_ctl",
        );
    }

    /// Stops the server (`immediate`: as a crash, no checkpoint; `fast`: clean) and starts
    /// it again.
    pub fn restart(&self, mode: &str) {
        self.pg_ctl(&["stop", "-m", mode]);
        self.pg_ctl(&["start", "-w"]);
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = as_server_user(program("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-s", "-m", "immediate", "stop"])
            .output();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_databases_name_carries_its_processs_pid() {
        let here = machine_tag();
        assert_eq!(here.len(), 8);
        assert_eq!(
            pid_of(&format!("rt_test_{here}_5207_0_458715446")),
            Some(5207)
        );
        assert_eq!(
            pid_of("rt_test_0badf00d_5207_0_1"),
            None,
            "another machine's"
        );
        assert_eq!(pid_of("rt_test_5207_0_458715446"), None, "an older name");
        assert_eq!(pid_of(&format!("rt_test_{here}_x_0_1")), None);
        assert_eq!(pid_of("postgres"), None);
    }

    /// Needs the server `scripts/test.sh` starts; without one there is nothing to sweep.
    #[test]
    fn the_sweep_drops_databases_of_ended_processes_and_keeps_live_ones() {
        let Ok(server) = std::env::var("ROUNDTABLE_TEST_POSTGRES") else {
            return;
        };
        // A pid above Linux's largest (4194304) has never run.
        let ended = format!("rt_test_{}_4194400_0_1", machine_tag());
        let elsewhere = "rt_test_0badf00d_4194400_0_1";
        psql(&server, &format!("CREATE DATABASE {elsewhere}")).unwrap();
        psql(&server, &format!("CREATE DATABASE {ended}")).unwrap();
        let live = TestDatabase::create_on(&server);
        sweep_databases_of_ended_processes(&server);
        let names: Vec<String> = select(&server, "SELECT datname FROM pg_database")
            .into_iter()
            .map(|row| row[0].clone())
            .collect();
        assert!(!names.contains(&ended), "{names:?}");
        assert!(names.contains(&live.name), "{names:?}");
        assert!(
            names.contains(&elsewhere.to_owned()),
            "another machine's stays: {names:?}"
        );
        psql(&server, &format!("DROP DATABASE {elsewhere}")).unwrap();
    }
}
