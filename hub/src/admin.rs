//! What the hub's operator does on the hub's machine, without the network: create users on
//! a `closed` hub, and check the audit log's hash chain. Creating users needs the data
//! directory to itself (the running hub keeps its state in memory); checking the audit log
//! only reads, and works while the hub runs.

use std::fs::File;
use std::path::Path;

use roundtable_protocol::client::SignupRequest;

use crate::audit::{BrokenLink, ChainCheck};
use crate::config::{HubConfig, SignupMode};
use crate::engine::{Engine, EngineConfig, ExecError, SignupOutcome};
use crate::ids::IdSource;
use crate::store::{Store, StoreError};
use crate::{HubError, unix_ms};

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
        match file.try_lock() {
            Ok(()) => Ok(DataLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(HubError::Locked {
                dir: config.data_dir.display().to_string(),
            }),
            Err(std::fs::TryLockError::Error(error)) => Err(HubError::Io(error)),
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
}

/// Creates a user on the hub in `config.data_dir`, whatever its signup mode; returns it
/// with its token (shown once). The hub must not be running on that directory.
pub fn add_user(config: &HubConfig, handle: &str, name: &str) -> Result<SignupOutcome, AdminError> {
    let _lock = DataLock::acquire(config)?;
    let mut ids = IdSource::from_os();
    let now = unix_ms();
    let (mut store, _reader) = crate::store::sqlite::open(&config.database_path(), &mut ids, now)?;
    let snapshot = store.load(crate::unix_ms())?;
    let mut engine = Engine::with_config(snapshot, ids, EngineConfig::default());
    let mut tx = store.transaction()?;
    let request = SignupRequest {
        handle: handle.to_owned(),
        name: name.to_owned(),
        discoverable: None,
        invite: None,
    };
    let outcome = match engine.signup(&mut *tx, now, SignupMode::Open, request) {
        Ok(outcome) => outcome,
        Err(ExecError::Refused(refusal)) => return Err(AdminError::Refused(refusal.msg)),
        Err(ExecError::Store(error)) => return Err(error.into()),
    };
    tx.commit()?;
    Ok(outcome)
}

/// Revokes every token of the user `handle` on the hub in `config.data_dir` and returns a
/// new one (shown once). The hub must not be running on that directory.
pub fn reissue_user_token(config: &HubConfig, handle: &str) -> Result<String, AdminError> {
    let _lock = DataLock::acquire(config)?;
    let mut ids = IdSource::from_os();
    let now = unix_ms();
    let (mut store, _reader) = crate::store::sqlite::open(&config.database_path(), &mut ids, now)?;
    let snapshot = store.load(crate::unix_ms())?;
    let mut engine = Engine::with_config(snapshot, ids, EngineConfig::default());
    let mut tx = store.transaction()?;
    let token = match engine.reissue_user_token(&mut *tx, now, handle) {
        Ok(token) => token,
        Err(ExecError::Refused(refusal)) => return Err(AdminError::Refused(refusal.msg)),
        Err(ExecError::Store(error)) => return Err(error.into()),
    };
    tx.commit()?;
    Ok(token)
}

/// Walks the audit log of the hub in `data_dir`; returns the number of entries and the head
/// hash, or the first broken link.
pub fn verify_audit(data_dir: &Path) -> Result<(u64, String), AdminError> {
    let path = HubConfig::new(data_dir).database_path();
    if !path.exists() {
        return Err(AdminError::Refused(format!(
            "there is no hub database in {}; pass the hub's --data directory",
            data_dir.display()
        )));
    }
    let mut check = ChainCheck::new();
    crate::store::sqlite::read_audit_log(&path, |entry| check.feed(&entry))?;
    check.finish().map_err(AdminError::Broken)
}
