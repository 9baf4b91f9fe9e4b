//! The hub's own threads, watched: whether the writer and the flush stage run (for
//! `GET /v1/health`), the first that panics (which stops the hub), and their join when it
//! stops. A leaf: the threads are spawned by their own modules, which wrap their bodies in
//! [`stop_on_panic`].

use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

/// Why a hub stopped by itself: one of its own threads (the writer, or the flush stage,
/// which also hands what is durable to the connections) panicked. By the time
/// [`crate::Hub::serve`] returns it, the hub has closed its connections (1011), let go of its
/// listeners and its data directory: another hub may open them at once. What it means for
/// the process is for whoever started the hub to say: `roundtable hub` exits (status 70), the
/// desktop app stays up, says so in its window and offers to start the hub again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubFailure {
    /// The thread that failed: `writer` or `flush`.
    pub thread: &'static str,
    /// What its panic said.
    pub panic: String,
}

impl std::fmt::Display for HubFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the hub's {} thread failed ({}), so the hub stopped; start it again: it recovers \
             everything it acknowledged",
            self.thread, self.panic
        )
    }
}

/// What a panic said, when it said it in words.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// The writer and flush threads, watched: `GET /v1/health` asks whether both run, the hub
/// hears of the first that panics ([`Threads::failed`]), and both are joined when it stops.
///
/// Each thread has a watcher of its own that joins it and says how it ended: the threads
/// are spawned by their own modules and know nothing of who runs the hub, and a thread's
/// end is the one thing about it that needs no help from it to be known.
#[derive(Debug)]
pub struct Threads {
    /// One per thread, ending right after it.
    watchers: Mutex<Vec<JoinHandle<()>>>,
    ended: tokio::sync::watch::Sender<Ended>,
}

/// How many of the threads have ended, and the first panic among them.
#[derive(Debug, Clone, Default)]
struct Ended {
    threads: usize,
    failure: Option<HubFailure>,
}

impl Default for Threads {
    /// No threads (a hub not started): not running.
    fn default() -> Threads {
        Threads {
            watchers: Mutex::new(Vec::new()),
            ended: tokio::sync::watch::Sender::new(Ended::default()),
        }
    }
}

impl Threads {
    /// Watches `threads` (each with the name a failure gives it).
    pub(crate) fn watch(threads: Vec<(&'static str, JoinHandle<()>)>) -> std::io::Result<Threads> {
        let watched = Threads::default();
        let mut watchers = Vec::with_capacity(threads.len());
        for (name, thread) in threads {
            let ended = watched.ended.clone();
            let watcher = std::thread::Builder::new()
                .name(format!("roundtable-{name}-watch"))
                .stack_size(64 * 1024)
                .spawn(move || {
                    let failure = thread.join().err().map(|panic| HubFailure {
                        thread: name,
                        panic: panic_text(&*panic),
                    });
                    ended.send_modify(|ended| {
                        ended.threads += 1;
                        if ended.failure.is_none() {
                            ended.failure = failure;
                        }
                    });
                })?;
            watchers.push(watcher);
        }
        *watched
            .watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = watchers;
        Ok(watched)
    }

    /// Whether every thread runs: without either, nothing is written or released.
    pub fn running(&self) -> bool {
        let started = !self
            .watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty();
        started && self.ended.borrow().threads == 0
    }

    /// Resolves once a thread has panicked, with what it said; never while they run well.
    pub async fn failed(&self) -> HubFailure {
        let mut ended = self.ended.subscribe();
        let failure = ended
            .wait_for(|ended| ended.failure.is_some())
            .await
            .ok()
            .and_then(|ended| ended.failure.clone());
        match failure {
            Some(failure) => failure,
            None => std::future::pending().await,
        }
    }

    /// The first panic of a thread, if one panicked.
    pub fn failure(&self) -> Option<HubFailure> {
        self.ended.borrow().failure.clone()
    }

    /// Waits for every thread to end.
    pub(crate) fn join(&self) {
        let watchers =
            std::mem::take(&mut *self.watchers.lock().unwrap_or_else(PoisonError::into_inner));
        for watcher in watchers {
            let _ = watcher.join();
        }
    }
}

/// Runs the body of one of the hub's own threads (the writer, the flush stage). If it
/// panics, the hub stops: without that thread nothing more would be written or released,
/// and a hub that accepts commands it can never answer is worse than one that is down. The
/// panic is logged and ends the thread; its watcher tells the hub ([`Threads::failed`]),
/// which closes every connection with 1011, lets go of its listeners and data directory,
/// and ends [`crate::Hub::serve`] with [`crate::HubError::Failed`]. Whether the process goes too is for
/// whoever started the hub. A restart recovers from what the disk holds.
pub(crate) fn stop_on_panic(thread: &'static str, body: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        tracing::error!(thread, panic = %panic_text(&*panic), "a hub thread panicked; the hub stops");
        std::panic::resume_unwind(panic);
    }
}
