//! One process of a cluster follows the others. Its writer catches up on their batches
//! before each batch of its own, but connections should not wait for that: between its
//! own batches the follower reads what the other processes committed and hands it to the
//! dispatcher, which fans each batch out once, in the cluster's order.
//!
//! The follower polls the store (one indexed read of rows that are usually not there yet),
//! and reads at once when the bus says another hub committed (see [`crate::bus`]). It never runs ahead of this process's own batches (their answers go out
//! with them), unless one has been missing for [`OWN_GAP_WAIT`]: its writer failed after
//! the commit, and the events it stored still reach everyone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::warn;

use crate::dispatch::{DispatchHandle, deliveries_of};
use crate::store::ReadStore;

/// Batches read at most per poll.
const FOLLOW_LIMIT: usize = 256;

/// How often a process says it lives, when it has nothing new to say.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// How long a revocation's `ok` waits for the other processes to close its connections.
pub const REVOCATION_WAIT: Duration = Duration::from_secs(1);

/// How long later batches wait for one of this process's own that went missing.
pub const OWN_GAP_WAIT: Duration = Duration::from_secs(2);

/// What the follower does with what it read.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Nothing to hand over yet.
    Wait,
    /// Hand over the first this many batches read.
    Deliver(usize),
    /// The batches from `next` on are gone (pruned while this process was away): start
    /// again after this position, every connection resuming from its cursor.
    Resync(u64),
}

/// Decides from the batches read after `next - 1` (ascending): the others' batches in a
/// row, stopping before this process's own unless it has been missing too long; a first
/// batch past `next` means the ones before it were pruned.
fn next_step(
    next: u64,
    committed: &[roundtable_engine::records::Committed],
    node: &str,
    own_may_go: bool,
) -> Step {
    match committed.first() {
        None => Step::Wait,
        Some(first) if first.n > next => Step::Resync(first.n - 1),
        Some(_) => match committed
            .iter()
            .take_while(|batch| batch.node != node || own_may_go)
            .count()
        {
            0 => Step::Wait,
            count => Step::Deliver(count),
        },
    }
}

/// The follower's task; dropping it stops the task.
#[derive(Debug)]
pub struct Follower {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts following the other processes of the cluster, as the process `node`, every
/// `poll` and whenever `wake` is notified (the bus).
pub fn follow(
    node: String,
    reader: Arc<dyn ReadStore>,
    dispatch: DispatchHandle,
    poll: Duration,
    wake: Arc<tokio::sync::Notify>,
) -> Follower {
    let task = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(poll);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reported: Option<(u64, Instant)> = None;
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                () = wake.notified() => {}
            }
            let Some((next, own_may_go)) = dispatch.expecting() else {
                return;
            };
            let reading = reader.clone();
            let read = tokio::task::spawn_blocking(move || {
                reading.committed_after(next - 1, FOLLOW_LIMIT)
            })
            .await;
            let committed = match read {
                Ok(Ok(committed)) => committed,
                Ok(Err(error)) => {
                    warn!(%error, "cannot read the other hub processes' batches; trying again");
                    continue;
                }
                Err(_) => return,
            };
            match next_step(next, &committed, &node, own_may_go) {
                Step::Wait => {}
                Step::Deliver(count) => {
                    let now = Instant::now();
                    let deliveries = committed[..count]
                        .iter()
                        .flat_map(|batch| deliveries_of(batch, now))
                        .collect();
                    dispatch.batch(deliveries);
                }
                Step::Resync(after) => {
                    warn!(
                        next,
                        after,
                        "this hub process fell behind the batches the others keep; its clients \
                         reconnect and resume from their cursors"
                    );
                    dispatch.resync(after);
                }
            }
            // How far this process is, for a revocation waiting on it; and that it lives.
            let Some((next, _)) = dispatch.expecting() else {
                return;
            };
            let due = reported
                .is_none_or(|(position, at)| position != next - 1 || at.elapsed() >= HEARTBEAT);
            if due {
                let reader = reader.clone();
                let node = node.clone();
                let recorded = tokio::task::spawn_blocking(move || {
                    reader.record_progress(&node, next - 1, crate::unix_ms())
                })
                .await;
                match recorded {
                    Ok(Ok(())) => reported = Some((next - 1, Instant::now())),
                    Ok(Err(error)) => warn!(%error, "cannot say how far this hub process is"),
                    Err(_) => return,
                }
            }
        }
    });
    Follower { task }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_engine::records::{Committed, SharedBatch};

    fn batches(from: u64, nodes: &[&str]) -> Vec<Committed> {
        nodes
            .iter()
            .enumerate()
            .map(|(index, node)| Committed {
                n: from + index as u64,
                node: (*node).to_owned(),
                batch: SharedBatch::default(),
            })
            .collect()
    }

    #[test]
    fn the_others_batches_go_up_to_this_process_own() {
        assert_eq!(next_step(5, &[], "a", false), Step::Wait);
        assert_eq!(
            next_step(5, &batches(5, &["b", "c", "a", "b"]), "a", false),
            Step::Deliver(2)
        );
        assert_eq!(
            next_step(5, &batches(5, &["a", "b"]), "a", false),
            Step::Wait
        );
        // Its own missing too long: filled from the store like the others'.
        assert_eq!(
            next_step(5, &batches(5, &["a", "b"]), "a", true),
            Step::Deliver(2)
        );
    }

    #[test]
    fn batches_pruned_before_this_process_read_them_mean_a_resync() {
        assert_eq!(
            next_step(5, &batches(9, &["b"]), "a", false),
            Step::Resync(8)
        );
    }
}
