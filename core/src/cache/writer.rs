//! The cache's one writer: a thread that owns the writing connection and runs jobs in the
//! order they arrive. Async tasks hand it a closure and await the answer, so no runtime
//! worker ever waits on SQLite (a sync batch of thousands of events, an `fsync`), and every
//! write of the process is serialized in one place, as SQLite wants anyway.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;

use tokio::sync::oneshot;

use super::{Cache, CacheError};

type Job = Box<dyn FnOnce(&mut Cache) + Send>;

/// A handle on the writer thread; the thread ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub(crate) struct CacheWriter {
    jobs: mpsc::Sender<Job>,
}

impl CacheWriter {
    /// Moves `cache` onto a thread of its own.
    pub(crate) fn start(cache: Cache) -> std::io::Result<CacheWriter> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("roundtable-cache".into())
            .spawn(move || {
                let mut cache = cache;
                while let Ok(job) = queue.recv() {
                    job(&mut cache);
                }
            })?;
        Ok(CacheWriter { jobs })
    }

    fn submit<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Cache) -> Result<T, CacheError> + Send + 'static,
    ) -> oneshot::Receiver<Result<T, CacheError>> {
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move |cache| {
            // A job that panics fails alone; the writer goes on with the next one.
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| job(cache)))
                .unwrap_or_else(|panic| Err(CacheError::JobPanicked(panic_text(&panic))));
            let _ = answer.send(result);
        });
        // A send error means the thread is gone: the receiver reports it.
        let _ = self.jobs.send(job);
        answered
    }

    /// Runs `job` on the writer thread and waits for its result.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Cache) -> Result<T, CacheError> + Send + 'static,
    ) -> Result<T, CacheError> {
        self.submit(job)
            .await
            .unwrap_or(Err(CacheError::WriterGone))
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}
