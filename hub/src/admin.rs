//! What the hub's operator does on the hub's machine, without the network: create users on
//! a `closed` hub, revoke or rotate a user's token, and check the audit log's hash chain.
//! Creating users needs the data directory to itself (the running hub keeps its state in
//! memory); a token is revoked by the running hub itself when there is one, through its
//! operator socket; checking the audit log only reads, and works while the hub runs.

use std::fs::File;

use roundtable_protocol::client::{SignupRequest, TokenAction};

use crate::config::{HubConfig, SignupMode};
use crate::store::StoreError;
use crate::{HubError, unix_ms};
use roundtable_engine::audit::{BrokenLink, ChainCheck};
use roundtable_engine::ids::IdSource;
use roundtable_engine::{Engine, EngineConfig, ExecError, SignupOutcome};

/// How often, and how long apart, a held data directory is tried again before it counts
/// as another hub's.
const LOCK_TRIES: u32 = 10;
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

/// The data directory, held exclusively while the value lives.
#[derive(Debug)]
pub struct DataLock {
    _file: File,
}

impl DataLock {
    pub fn acquire(config: &HubConfig) -> Result<DataLock, HubError> {
        std::fs::create_dir_all(&config.data_dir).map_err(|source| {
            HubError::Store(StoreError::DataDir {
                path: config.data_dir.display().to_string(),
                source,
            })
        })?;
        let path = config.lock_path();
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        // A lock just let go of can still be held for a moment: a process that forks
        // while it holds the lock leaves the child a share of it until the child execs
        // (the app probing agent CLIs as it creates the person, then starts its hub).
        let mut tries = 0;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(DataLock { _file: file }),
                Err(std::fs::TryLockError::WouldBlock) if tries < LOCK_TRIES => {
                    tries += 1;
                    std::thread::sleep(LOCK_RETRY);
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(HubError::Locked {
                        dir: config.data_dir.display().to_string(),
                    });
                }
                Err(std::fs::TryLockError::Error(error)) => return Err(HubError::Io(error)),
            }
        }
    }
}

/// Why an operator command failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Hub(#[from] HubError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Refused(String),
    #[error("the audit log is broken at entry {}: {}", .0.n, .0.reason)]
    Broken(BrokenLink),
    #[error(transparent)]
    Operator(#[from] crate::operator::OperatorError),
}

/// Creates a user on the hub in `config.data_dir`, whatever its signup mode; returns it
/// with its token (shown once). The hub must not be running on that directory.
pub fn add_user(config: &HubConfig, handle: &str, name: &str) -> Result<SignupOutcome, AdminError> {
    let _lock = DataLock::acquire(config)?;
    let request = SignupRequest {
        handle: handle.to_owned(),
        name: name.to_owned(),
        discoverable: None,
        invite: None,
    };
    with_engine(config, |engine, tx, now| {
        engine.signup(tx, now, SignupMode::Open, request)
    })
}

/// Runs `change` on an engine over the stopped hub's database in one transaction, committed
/// when it succeeds. The caller holds the data directory's lock.
fn with_engine<T>(
    config: &HubConfig,
    change: impl FnOnce(&mut Engine, &mut dyn crate::store::WriteTx, i64) -> Result<T, ExecError>,
) -> Result<T, AdminError> {
    let mut ids = IdSource::from_os();
    let now = unix_ms();
    // Alone on the store, as a lone hub: its changes reach no other process's memory, so
    // it must not run beside a cluster's (the exclusive lock refuses it while one runs).
    let alone = HubConfig {
        node: None,
        ..config.clone()
    };
    let (mut store, _reader) = crate::store::open(&alone, &mut ids, now)?;
    let snapshot = store.load(crate::unix_ms())?;
    let mut engine = Engine::with_config(snapshot, ids, EngineConfig::default());
    let mut tx = store.transaction()?;
    let done = match change(&mut engine, &mut *tx, now) {
        Ok(done) => done,
        Err(ExecError::Refused(refusal)) => return Err(AdminError::Refused(refusal.msg)),
        Err(ExecError::Store(error)) => return Err(StoreError::from(error).into()),
    };
    tx.commit().map_err(StoreError::from)?;
    Ok(done)
}

/// Revokes every token of the user `handle` on the hub in `config.data_dir` and, for a
/// rotation, returns a new one (shown once). On a stopped hub it writes the database
/// itself; on a running one it asks that hub through its operator socket
/// ([`crate::operator`]), which closes the user's connections with 4010 at once.
pub fn user_token(
    config: &HubConfig,
    handle: &str,
    action: TokenAction,
) -> Result<Option<String>, AdminError> {
    let _lock = match DataLock::acquire(config) {
        Ok(lock) => lock,
        Err(HubError::Locked { .. }) => return user_token_online(config, handle, action),
        Err(error) => return Err(error.into()),
    };
    with_engine(config, |engine, tx, now| {
        engine
            .operator_user_token(tx, now, handle, action)
            .map(|(token, _close)| token)
    })
}

fn user_token_online(
    config: &HubConfig,
    handle: &str,
    action: TokenAction,
) -> Result<Option<String>, AdminError> {
    let request = crate::operator::OperatorRequest::UserToken {
        handle: handle.to_owned(),
        action,
    };
    let token = crate::operator_socket::call(&config.data_dir, &request)?;
    Ok((!token.is_empty()).then_some(token))
}

/// Walks the audit log of the hub whose store `config` names; returns the number of entries
/// and the head hash, or the first broken link. With `expected_head` (`n` and hash, as
/// `GET /v1/health` showed them earlier), the log must still hold that entry and extend it.
pub fn verify_audit(
    config: &HubConfig,
    expected_head: Option<(u64, &str)>,
) -> Result<(u64, String), AdminError> {
    if config.store == crate::config::StoreLocation::DataDir && !config.database_path().exists() {
        return Err(AdminError::Refused(format!(
            "there is no hub database in {}; pass the hub's --data directory (or its --store)",
            config.data_dir.display()
        )));
    }
    let mut check = match expected_head {
        Some((n, hash)) => ChainCheck::expecting(n, hash),
        None => ChainCheck::new(),
    };
    crate::store::read_audit_log(config, |entry| check.feed(&entry))?;
    check.finish().map_err(AdminError::Broken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_let_go_of_a_moment_later_is_taken_and_one_kept_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = HubConfig::new(dir.path().join("hub"));
        let held = DataLock::acquire(&config).unwrap();
        // Kept: refused, once the retries are over.
        assert!(matches!(
            DataLock::acquire(&config),
            Err(HubError::Locked { .. })
        ));
        // Let go of while the next one waits (as a forked child's share is, at its exec).
        let releasing = std::thread::spawn(move || {
            std::thread::sleep(LOCK_RETRY * 3);
            drop(held);
        });
        assert!(DataLock::acquire(&config).is_ok());
        releasing.join().unwrap();
    }
}
