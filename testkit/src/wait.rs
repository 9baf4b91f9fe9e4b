//! Waiting for a condition rather than for a time. A test that sleeps and then looks is slow
//! when the machine is fast and flaky when it is slow; one that polls a condition with a
//! generous deadline is neither, and its failure says what never happened.

use std::time::{Duration, Instant};

/// How often a condition is looked at again.
const POLL: Duration = Duration::from_millis(20);

/// Polls `check` until it gives something, and returns that; panics naming `what` when
/// `patience` passes first.
pub async fn eventually<T>(
    what: &str,
    patience: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + patience;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never happened (waited {patience:?})"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `check` until it holds; panics naming `what` when `patience` passes first.
pub async fn until(what: &str, patience: Duration, mut check: impl AsyncFnMut() -> bool) {
    eventually(what, patience, async || check().await.then_some(())).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_what_the_check_found_once_it_finds_it() {
        let mut calls = 0;
        let found = eventually("the third look", Duration::from_secs(5), async || {
            calls += 1;
            (calls == 3).then_some(calls)
        })
        .await;
        assert_eq!(found, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "the impossible never happened")]
    async fn says_what_never_happened() {
        until("the impossible", Duration::from_millis(50), async || false).await;
    }
}
