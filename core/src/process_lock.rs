//! Which processes are using a profile right now.
//!
//! People run several `roundtable` processes on one profile at once (a `tail --follow` in
//! one terminal, `send`s in another, the desktop app beside them), all over one cache file.
//! Each process holds an exclusive lock on a file of its own, `run/<id>.lock` in the
//! profile directory, for as long as it lives; the operating system releases it when the
//! process ends, however it ends. So "is the process that took this outbox entry still
//! alive?" has an exact answer: its lock file is missing or can be locked by us.
//!
//! The hub keeps one connection per (principal, device) and replaces an older one (4009),
//! so only one process at a time may use the profile's device id: the one that holds
//! `run/device.lock`. Any other process connects as `<device>.<its id>`.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

/// This process's hold on a profile; released on drop.
#[derive(Debug)]
pub struct ProcessLock {
    /// Names entries this process owns in the outbox.
    pub id: String,
    /// The device to authenticate as.
    pub device: String,
    dir: PathBuf,
    _own: File,
    _device: Option<File>,
}

impl ProcessLock {
    /// Takes a lock for this process in `profile_dir/run`.
    pub fn acquire(profile_dir: &Path, device: &str) -> std::io::Result<ProcessLock> {
        let dir = profile_dir.join("run");
        crate::profile::create_private_dir(&dir)?;
        let id = crate::random_key("o");
        let own = private_file(&dir.join(format!("{id}.lock")))?;
        own.try_lock().map_err(|error| match error {
            TryLockError::Error(error) => error,
            TryLockError::WouldBlock => std::io::Error::other("a fresh lock file is locked"),
        })?;
        let device_file = private_file(&dir.join("device.lock"))?;
        let (device, device_lock) = match device_file.try_lock() {
            Ok(()) => (device.to_owned(), Some(device_file)),
            Err(TryLockError::WouldBlock) => (format!("{device}.{id}"), None),
            Err(TryLockError::Error(error)) => return Err(error),
        };
        let lock = ProcessLock {
            id,
            device,
            dir,
            _own: own,
            _device: device_lock,
        };
        lock.sweep();
        Ok(lock)
    }

    /// Removes lock files (and hand-off sockets) that processes which ended (crashed) left
    /// behind.
    fn sweep(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(id) = name.strip_suffix(".lock")
                && id != "device"
            {
                self.is_alive(id);
            } else if let Some(id) = name.strip_suffix(".sock")
                && !self.is_alive(id)
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// The directory of lock files (and hand-off sockets).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Ids of the other processes that hold a lock here now.
    pub fn others_alive(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                let id = name.to_str()?.strip_suffix(".lock")?.to_owned();
                (id != "device" && id != self.id && self.is_alive(&id)).then_some(id)
            })
            .collect()
    }

    /// Whether the process that took lock `id` still runs. Ours is alive; a lock file
    /// left by a process that ended is removed.
    pub fn is_alive(&self, id: &str) -> bool {
        if id == self.id {
            return true;
        }
        if !valid_id(id) {
            return false;
        }
        let path = self.dir.join(format!("{id}.lock"));
        let Ok(file) = File::options().write(true).open(&path) else {
            return false;
        };
        match file.try_lock() {
            Ok(()) => {
                let _ = std::fs::remove_file(&path);
                false
            }
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Error(_)) => false,
        }
    }
}

impl Drop for ProcessLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join(format!("{}.lock", self.id)));
    }
}

/// Opens (or creates) a lock file only its owner may read.
fn private_file(path: &Path) -> std::io::Result<File> {
    roundtable_platform::private::open(
        File::options().create(true).truncate(false).write(true),
        path,
    )
}

/// Ids come from [`crate::random_key`]; anything else in the outbox is not a path to follow.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_process_gets_its_own_device_and_sees_the_first_alive() {
        let dir = tempfile::tempdir().unwrap();
        let first = ProcessLock::acquire(dir.path(), "d1").unwrap();
        let second = ProcessLock::acquire(dir.path(), "d1").unwrap();
        assert_eq!(first.device, "d1");
        assert_eq!(second.device, format!("d1.{}", second.id));
        assert!(second.is_alive(&first.id));
        assert!(first.is_alive(&first.id));
        let gone = first.id.clone();
        drop(first);
        assert!(!second.is_alive(&gone));
        // The device is free again for the next process.
        let third = ProcessLock::acquire(dir.path(), "d1").unwrap();
        assert_eq!(third.device, "d1");
        assert!(!third.is_alive("../../etc/passwd"));
        // A crashed process's files (here: a lock nobody holds, and its socket) are swept by
        // the next start.
        std::fs::write(dir.path().join("run/o_crashed.lock"), "").unwrap();
        std::fs::write(dir.path().join("run/o_crashed.sock"), "").unwrap();
        let _fourth = ProcessLock::acquire(dir.path(), "d1").unwrap();
        assert!(!dir.path().join("run/o_crashed.lock").exists());
        assert!(!dir.path().join("run/o_crashed.sock").exists());
        assert!(dir.path().join(format!("run/{}.lock", third.id)).exists());
        assert!(!third.is_alive("o_never_was"));
    }
}
