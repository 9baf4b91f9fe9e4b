//! Hands memory the app has freed back to the system.
//!
//! The app's work comes in bursts — the first pass over agents' logs, a board of thousands of
//! tasks, a sync after a day away — on the threads of the core, the embedded hub and Tauri.
//! glibc's malloc keeps what a thread frees in that thread's arena for reuse, so after a burst
//! tens of MiB stay resident that nothing uses. Asking glibc to return free pages
//! (`malloc_trim`) every few seconds gives them back without slowing the bursts themselves,
//! as capping the number of arenas would (in a side-by-side run, a first pass over 1 GB of
//! logs took 45 % longer with two; `docs/benchmarks.md`).

use std::time::Duration;

/// How often free memory is handed back.
pub const EVERY: Duration = Duration::from_secs(5);

/// A thread that trims the heap every [`EVERY`]; dropping it stops the thread.
pub struct Trimmer {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    stop: Option<std::sync::mpsc::Sender<()>>,
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Trimmer {
    /// Starts trimming (on glibc; elsewhere the allocator returns memory itself, and this
    /// does nothing).
    pub fn start(every: Duration) -> Trimmer {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let (stop, stopped) = std::sync::mpsc::channel::<()>();
            let thread = std::thread::Builder::new()
                .name("memory-trim".into())
                .spawn(move || {
                    // Until the sender is dropped (or sends): each timeout is a turn.
                    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                        stopped.recv_timeout(every)
                    {
                        trim();
                    }
                });
            match thread {
                Ok(thread) => Trimmer {
                    stop: Some(stop),
                    thread: Some(thread),
                },
                Err(error) => {
                    tracing::warn!(%error, "memory is not trimmed: no thread for it");
                    Trimmer {
                        stop: None,
                        thread: None,
                    }
                }
            }
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        {
            let _ = every;
            Trimmer {}
        }
    }
}

/// Returns the free pages of every arena to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim() {
    // SAFETY: `malloc_trim` takes no pointers and is thread-safe: it locks each arena.
    #[allow(unsafe_code, reason = "glibc's allocator has no safe interface")]
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Drop for Trimmer {
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            drop(self.stop.take());
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_the_trimmer_stops_its_thread_at_once() {
        let trimmer = Trimmer::start(Duration::from_secs(3600));
        let started = std::time::Instant::now();
        drop(trimmer);
        // Not waiting out the hour: the drop woke it.
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn trimming_returns_freed_memory() {
        fn resident_kib() -> u64 {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
            line.split_whitespace().nth(1).unwrap().parse().unwrap()
        }
        // Many small blocks (below the mmap threshold, so they live in the arena), freed
        // except the last, which pins the arena's top: freeing alone returns nothing.
        let blocks: Vec<Vec<u8>> = (0..20_000).map(|_| vec![1u8; 4000]).collect();
        let pin = vec![1u8; 4000];
        drop(blocks);
        let before = resident_kib();
        trim();
        let after = resident_kib();
        drop(pin);
        assert!(
            after + 32 * 1024 < before,
            "resident {before} KiB before the trim, {after} KiB after"
        );
    }
}
