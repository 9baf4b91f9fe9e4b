//! The time the hub decides by: rate limits refilling, invites and pings expiring, the audit
//! log's folding of refusals into one entry a second. It is the system's, which a test can
//! move forward ([`Clock::advance`]) rather than wait for it: the engine takes the time it
//! is handed, and the writer hands it this clock's.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The system's time, plus however far it has been moved forward. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    ahead_ms: Arc<AtomicI64>,
}

impl Clock {
    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as i64);
        system + self.ahead_ms.load(Ordering::Relaxed)
    }

    /// Moves this clock, and every clone of it, `by` forward.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.ahead_ms.fetch_add(by, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_advanced_clock_and_its_clones_are_ahead_of_the_system() {
        let clock = Clock::default();
        let clone = clock.clone();
        let before = Clock::default().now_ms();
        clock.advance(Duration::from_secs(3600));
        assert!(clone.now_ms() >= before + 3_600_000);
        assert!(Clock::default().now_ms() < before + 3_600_000);
    }
}
