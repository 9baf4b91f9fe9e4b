//! Reading connections. Views read through connections of their own: in WAL mode a reader
//! sees the last committed state and never waits for the writer, however large the batch
//! it is writing. One closure reads inside one transaction, so what it asks agrees. A few connections are kept open for reuse; more are opened when many
//! readers come at once.

use std::path::PathBuf;
use std::sync::Mutex;

use super::{CacheError, CacheView};

/// Idle connections kept for reuse.
const KEPT: usize = 4;

#[derive(Debug)]
pub(crate) struct CacheReaders {
    path: PathBuf,
    idle: Mutex<Vec<CacheView>>,
}

impl CacheReaders {
    pub(crate) fn new(path: PathBuf) -> CacheReaders {
        CacheReaders {
            path,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `read` on an idle connection (or a new one). Blocks while it reads: call it off
    /// the async runtime (see [`crate::Core::read`]).
    pub(crate) fn with<T>(
        &self,
        read: impl FnOnce(&CacheView) -> Result<T, CacheError>,
    ) -> Result<T, CacheError> {
        let reused = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        let view = match reused {
            Some(view) => view,
            None => CacheView::open_reader(&self.path)?,
        };
        // One read transaction: everything `read` asks sees one committed state.
        view.conn.execute_batch("BEGIN DEFERRED")?;
        let result = read(&view);
        if view.conn.execute_batch("COMMIT").is_err() {
            // A connection left in a transaction must not be reused.
            return result;
        }
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < KEPT {
            idle.push(view);
        }
        result
    }
}
