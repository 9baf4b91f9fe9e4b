//! Hand-off between processes on one profile.
//!
//! A hook or a one-off `roundtable send` lives for a moment; connecting, authenticating and
//! syncing would cost it more than its whole job. When a long-running process (the desktop
//! app, an MCP bridge, `tail --follow`) already holds the profile, the short-lived one
//! queues its write in the outbox (durable: it may exit from then on) and hands the entry
//! to the running process over a Unix socket in the profile's `run/` directory, named after
//! that process's lock (`run/<id>.sock`). The running process takes the entry over (it
//! becomes its owner in the outbox), sends it at once — cutting a reconnect's backoff short
//! if it was offline — and reports the outcome back on the socket for as long as the
//! short-lived process cares to listen.
//!
//! Nothing is lost on any crash: an entry is in the outbox before it is offered, and an
//! entry whose owner died is taken over by the next process that looks (a running process
//! looks every second). Duplicates cannot happen either: sends carry their `client_key`.
//!
//! The wire is one JSON object per line: the offer `{"from": LOCK_ID, "entries": [N…]}`,
//! the answer `{"adopted": [N…], "state": SYNC_STATE}`, then `{"n": N, "outcome": …}` per
//! adopted entry as it ends. An offer of nothing asks only for the state: whether the
//! running process keeps the profile's cache in step with the hub ([`serving_state`]). Only
//! processes of the profile's owner can reach the socket (`roundtable_platform::local_socket`:
//! a Unix socket in the 0700 directory, a named pipe kept to its user on Windows).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use roundtable_platform::local_socket::{self, LocalListener, LocalStream};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::process_lock::ProcessLock;
use crate::{Outcome, Shared, SyncState, watch_entry};

/// How long an offer may take before the offering process sends the entry itself.
const OFFER_PATIENCE: Duration = Duration::from_secs(2);
/// How long a running process may take to say how it syncs before it is taken for busy.
const STATE_PATIENCE: Duration = Duration::from_millis(500);
/// The longest line either side accepts.
const MAX_LINE: usize = 64 * 1024;

#[derive(Debug, Serialize, Deserialize)]
struct Offer {
    /// The offering process's lock id (the entries' owner).
    from: String,
    entries: Vec<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Answer {
    adopted: Vec<u64>,
    state: SyncState,
}

#[derive(Debug, Serialize, Deserialize)]
struct Ended {
    n: u64,
    outcome: Outcome,
}

fn socket_path(lock: &ProcessLock, id: &str) -> PathBuf {
    lock.dir().join(format!("{id}.sock"))
}

/// Accepts hand-offs until `stop` turns true.
pub(crate) async fn serve(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let path = socket_path(&shared.lock, &shared.lock.id);
    let listener = match LocalListener::bind(&path) {
        Ok(listener) => listener,
        Err(error) => {
            warn!(%error, path = %path.display(), "cannot accept hand-offs; short-lived processes will send their writes themselves");
            return;
        }
    };
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_one(shared.clone(), stream, stop.clone()));
                }
                Err(error) => {
                    warn!(%error, "accepting a hand-off failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    let _ = std::fs::remove_file(&path);
}

async fn serve_one(shared: Arc<Shared>, stream: LocalStream, mut stop: watch::Receiver<bool>) {
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read.take(MAX_LINE as u64));
    let mut line = String::new();
    let offer = match tokio::time::timeout(OFFER_PATIENCE, lines.read_line(&mut line)).await {
        Ok(Ok(_)) => match serde_json::from_str::<Offer>(&line) {
            Ok(offer) => offer,
            Err(error) => {
                debug!(%error, "an unreadable hand-off");
                return;
            }
        },
        _ => return,
    };
    let owner = shared.lock.id.clone();
    let waiters = shared.waiters.clone();
    // An offer of nothing asks how this process syncs: answered at once.
    let adopted = if offer.entries.is_empty() {
        Ok(Vec::new())
    } else {
        shared
            .write(move |cache| {
                let adopted = cache.adopt(&offer.entries, &offer.from, &owner)?;
                // Watched before the sync task can send them, so no outcome is missed.
                let receivers: Vec<_> = adopted
                    .iter()
                    .map(|n| (*n, watch_entry(&waiters, *n)))
                    .collect();
                Ok(receivers)
            })
            .await
    };
    let adopted = match adopted {
        Ok(adopted) => adopted,
        Err(error) => {
            warn!(%error, "cannot take over handed-off entries");
            Vec::new()
        }
    };
    if !adopted.is_empty() {
        shared.outbox_ready.notify_one();
        shared.reconnect_now.notify_one();
    }
    let answer = Answer {
        adopted: adopted.iter().map(|(n, _)| *n).collect(),
        state: shared.state.borrow().clone(),
    };
    if write_line(&mut write, &answer).await.is_err() {
        return;
    }
    for (n, outcome) in adopted {
        let outcome = tokio::select! {
            outcome = outcome => match outcome {
                Ok(outcome) => outcome,
                Err(_) => return,
            },
            _ = stop.changed() => return,
        };
        if write_line(&mut write, &Ended { n, outcome }).await.is_err() {
            // The short-lived process has gone: it did not need to know.
            return;
        }
    }
}

async fn write_line(
    write: &mut (impl tokio::io::AsyncWrite + Unpin),
    value: &impl Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await
}

/// Entries a running process took over, and how to hear of their outcome.
#[derive(Debug)]
pub struct Receipt {
    /// The lock id of the process that took them.
    pub process: String,
    pub adopted: Vec<u64>,
    /// That process's sync state when it took them.
    pub state: SyncState,
    lines: tokio::io::Lines<BufReader<tokio::io::Take<tokio::io::ReadHalf<LocalStream>>>>,
}

/// What came of an entry handed to another process.
#[derive(Debug)]
pub enum Handed {
    /// It ended (sent, or refused by the hub).
    Ended(Outcome),
    /// It had not ended when the wait was over; it is safe in the outbox all the same.
    Pending,
    /// The process that took it went away before it ended: the entry waits in the outbox of
    /// a process that is gone, for another to take over.
    Abandoned,
}

impl Receipt {
    /// Waits for the outcome of entry `n`, at most `timeout`.
    pub async fn outcome(&mut self, n: u64, timeout: Duration) -> Handed {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.lines.next_line()).await {
                Err(_) => return Handed::Pending,
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None) | Err(_)) => return Handed::Abandoned,
            };
            match serde_json::from_str::<Ended>(&line) {
                Ok(ended) if ended.n == n => return Handed::Ended(ended.outcome),
                Ok(_) => continue,
                Err(_) => return Handed::Pending,
            }
        }
    }
}

/// How the running processes on the profile that serve hand-offs (and so sync its cache:
/// the desktop app, an MCP bridge, `tail --follow`) sync now: `Idle` when one is in step
/// with the hub, else the state of one that answered; `None` when none runs (or none
/// answered within [`STATE_PATIENCE`]).
pub(crate) async fn serving_state(lock: &ProcessLock) -> Option<SyncState> {
    let mut found = None;
    for process in lock.others_alive() {
        let path = socket_path(lock, &process);
        if !local_socket::may_listen_at(&path) {
            continue;
        }
        let asked = async {
            let stream = LocalStream::connect(&path).await.ok()?;
            let (read, mut write) = tokio::io::split(stream);
            let nothing = Offer {
                from: lock.id.clone(),
                entries: Vec::new(),
            };
            write_line(&mut write, &nothing).await.ok()?;
            let mut lines = BufReader::new(read.take(MAX_LINE as u64)).lines();
            let answer: Answer = serde_json::from_str(&lines.next_line().await.ok()??).ok()?;
            Some(answer.state)
        };
        match tokio::time::timeout(STATE_PATIENCE, asked).await {
            Ok(Some(SyncState::Idle)) => return Some(SyncState::Idle),
            Ok(Some(state)) => found = Some(state),
            _ => {}
        }
    }
    found
}

/// Offers `entries` (queued by this process) to a running process on the profile; `None`
/// when none took them, and the caller sends them itself.
pub(crate) async fn offer(lock: &ProcessLock, entries: &[u64]) -> Option<Receipt> {
    let wanted: HashSet<u64> = entries.iter().copied().collect();
    for process in lock.others_alive() {
        let path = socket_path(lock, &process);
        if !local_socket::may_listen_at(&path) {
            continue;
        }
        let attempt = async {
            let stream = LocalStream::connect(&path).await.ok()?;
            let (read, mut write) = tokio::io::split(stream);
            write_line(
                &mut write,
                &Offer {
                    from: lock.id.clone(),
                    entries: entries.to_vec(),
                },
            )
            .await
            .ok()?;
            let mut lines = BufReader::new(read.take(MAX_LINE as u64 * 64)).lines();
            let answer: Answer = serde_json::from_str(&lines.next_line().await.ok()??).ok()?;
            Some((answer, lines))
        };
        match tokio::time::timeout(OFFER_PATIENCE, attempt).await {
            Ok(Some((answer, lines))) if !answer.adopted.is_empty() => {
                debug_assert!(answer.adopted.iter().all(|n| wanted.contains(n)));
                return Some(Receipt {
                    process,
                    adopted: answer.adopted,
                    state: answer.state,
                    lines,
                });
            }
            _ => continue,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// A receipt over one end of a connected stream, and the other end (the taker's).
    async fn handed_over() -> (Receipt, LocalStream, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o-taker.sock");
        let listener = LocalListener::bind(&path).unwrap();
        let (ours, theirs) = tokio::join!(LocalStream::connect(&path), listener.accept());
        let (read, _) = tokio::io::split(ours.unwrap());
        let receipt = Receipt {
            process: "o-taker".into(),
            adopted: vec![7],
            state: SyncState::Idle,
            lines: BufReader::new(read.take(MAX_LINE as u64)).lines(),
        };
        (receipt, theirs.unwrap().0, dir)
    }

    /// Serves one offer on `process`'s hand-off socket: checks it offers nothing, and
    /// answers `state`.
    fn answering(process: &ProcessLock, state: SyncState) -> tokio::task::JoinHandle<()> {
        let listener = LocalListener::bind(&socket_path(process, &process.id)).unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = tokio::io::split(stream);
            let mut lines = BufReader::new(read).lines();
            let offer: Offer =
                serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
            assert!(offer.entries.is_empty(), "only asked how it syncs");
            let answer = Answer {
                adopted: Vec::new(),
                state,
            };
            write_line(&mut write, &answer).await.unwrap();
        })
    }

    #[tokio::test]
    async fn a_running_process_offered_nothing_says_how_it_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let hook = ProcessLock::acquire(dir.path(), "d1").unwrap();
        assert_eq!(serving_state(&hook).await, None, "no one else runs");
        let send = ProcessLock::acquire(dir.path(), "d1").unwrap();
        assert_eq!(
            serving_state(&hook).await,
            None,
            "one runs that serves no hand-offs (a `roundtable send`)"
        );
        drop(send);
        let catching_up = ProcessLock::acquire(dir.path(), "d1").unwrap();
        let answered = answering(&catching_up, SyncState::Syncing);
        assert_eq!(serving_state(&hook).await, Some(SyncState::Syncing));
        answered.await.unwrap();
        // One in step with the hub is the answer, whichever answers first.
        let in_step = ProcessLock::acquire(dir.path(), "d1").unwrap();
        let answers = [
            answering(&catching_up, SyncState::Syncing),
            answering(&in_step, SyncState::Idle),
        ];
        assert_eq!(serving_state(&hook).await, Some(SyncState::Idle));
        drop(in_step);
        for answer in answers {
            answer.abort();
        }
    }

    #[tokio::test]
    async fn a_taker_that_goes_away_before_the_end_has_abandoned_the_entry() {
        // Gone without a word (Codex ends its MCP server the moment it exits).
        let (mut receipt, taker, _dir) = handed_over().await;
        drop(taker);
        assert!(matches!(
            receipt.outcome(7, Duration::from_secs(5)).await,
            Handed::Abandoned
        ));
        // Gone after the end of another entry only.
        let (mut receipt, mut taker, _dir) = handed_over().await;
        let other = serde_json::to_string(&Ended {
            n: 6,
            outcome: Outcome::Done("{}".into()),
        })
        .unwrap();
        taker
            .write_all(format!("{other}\n").as_bytes())
            .await
            .unwrap();
        drop(taker);
        assert!(matches!(
            receipt.outcome(7, Duration::from_secs(5)).await,
            Handed::Abandoned
        ));
        // Still there, silent: the wait is over, the entry is its.
        let (mut receipt, _taker, _dir) = handed_over().await;
        assert!(matches!(
            receipt.outcome(7, Duration::from_millis(50)).await,
            Handed::Pending
        ));
    }
}
