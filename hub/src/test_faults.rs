//! Faults the hub's own tests cause in a hub they run (compiled for those tests only): a
//! store whose next transaction panics, so the writer thread fails as a bug there would,
//! with everything around it real.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::store::{Flush, Snapshot, Store, StoreError, WriteTx};

/// Data directories whose hub's store is to panic at its next transaction.
static PANIC_NEXT_TRANSACTION: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Makes the store of the hub serving `data_dir` panic when its writer next opens a
/// transaction (once: the next hub over the directory is left alone).
pub(crate) fn panic_next_transaction(data_dir: &Path) {
    armed().push(data_dir.to_owned());
}

fn armed() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PANIC_NEXT_TRANSACTION
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The store a hub over `data_dir` writes with: `store`, able to take the faults above.
pub(crate) fn store(data_dir: &Path, store: Box<dyn Store>) -> Box<dyn Store> {
    Box::new(FaultyStore {
        inner: store,
        data_dir: data_dir.to_owned(),
    })
}

struct FaultyStore {
    inner: Box<dyn Store>,
    data_dir: PathBuf,
}

impl Store for FaultyStore {
    fn load(&mut self, now_ms: i64) -> Result<Snapshot, StoreError> {
        self.inner.load(now_ms)
    }

    fn transaction(&mut self) -> Result<Box<dyn WriteTx + '_>, StoreError> {
        let mut armed = armed();
        if let Some(at) = armed.iter().position(|dir| *dir == self.data_dir) {
            armed.remove(at);
            drop(armed);
            panic!("the test's store failed on purpose");
        }
        drop(armed);
        self.inner.transaction()
    }

    fn flusher(&mut self) -> Result<Box<dyn Flush>, StoreError> {
        self.inner.flusher()
    }

    fn wait_for_peers(&mut self, position: u64, within: std::time::Duration) {
        self.inner.wait_for_peers(position, within);
    }
}
