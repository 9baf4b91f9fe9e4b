//! The sync task: keeps the cache in step with the hub and drains the outbox.
//!
//! One task per core owns the connection. It connects, authenticates, then checks the hub's
//! epoch (a different one empties the cache: never before the hub showed it knows this
//! profile) and syncs from the cache's cursors; while
//! replaying it buffers events and applies each stream's in one transaction with its cursor,
//! so a crash at any point leaves the cache consistent. It then asks for the `rooms`
//! snapshot, so a room whose early history is still a gap is known by title and members at
//! once, and reports `Idle`. Live, it applies events as they come (in small batches),
//! fetches ranges the hub skipped (`gap`, or a jump in seqs) with `history`, tells the hub
//! of our read markers (`ack`), and sends the outbox one entry at a time, in order,
//! honouring `rate_limited` delays. When the connection drops it waits a full-jitter
//! backoff (0.5 s growing to 30 s, cut short by a hand-off) and starts again.
//!
//! Every read and write of the cache runs on the cache's writer thread (one job per batch
//! of frames), so this task never blocks a runtime worker on SQLite.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use rand::Rng;
use roundtable_protocol::ClientFrame;
use roundtable_protocol::client::{Ack, History, Rooms, SyncCmd};
use roundtable_protocol::server::{Event, HistoryOk, RoomsOk, SendOk, ServerFrame, SyncOk};
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::cache::{CacheError, OutboxEntry, OutboxKind};
use crate::link::{Link, LinkError};
use crate::{Change, FailureCode, Outcome, Shared, SyncState, now_ms};

mod outgoing;

/// Backoff bounds.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How often read markers are sent, and orphaned outbox entries looked for.
const ACK_PERIOD: Duration = Duration::from_secs(1);
/// History pages fetched at once.
const HISTORY_IN_FLIGHT: usize = 4;
const HISTORY_PAGE: u32 = 500;
/// Frames read without waiting before a batch is applied.
const BATCH: usize = 512;
/// How long a finished outbox entry's reply waits for a caller to collect it.
pub(crate) const DONE_KEPT_MS: i64 = 60_000;
/// How often the hub's silence is checked (dead after two heartbeats).
const LIVENESS_CHECK: Duration = Duration::from_millis(250);
/// The wait before history that failed (not for lack of access) is asked again.
const GAP_RETRY: Duration = Duration::from_secs(2);

/// The delay before reconnect attempt `attempt` (1, 2, …): uniform between 0.5 s and
/// `min(30 s, 0.5 s × 2^attempt)` ("full jitter", so a crowd of clients spreads out).
pub fn backoff(attempt: u32, rng: &mut impl Rng) -> Duration {
    let ceiling = BACKOFF_MIN
        .saturating_mul(2u32.saturating_pow(attempt.min(16)))
        .min(BACKOFF_MAX);
    if ceiling <= BACKOFF_MIN {
        return BACKOFF_MIN;
    }
    let span = (ceiling - BACKOFF_MIN).as_millis() as u64;
    BACKOFF_MIN + Duration::from_millis(rng.random_range(0..=span))
}

/// Why a sync session ended.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The local cache failed (a full disk, a broken file): not the hub's doing.
    #[error("the local cache failed: {0}")]
    Cache(#[from] CacheError),
}

impl SyncError {
    /// Errors retrying soon cannot fix: the user must act.
    fn needs_the_user(&self) -> bool {
        match self {
            SyncError::Link(error) => error.is_fatal(),
            SyncError::Cache(_) => true,
        }
    }
}

/// Runs until `stop` turns true.
pub(crate) async fn run(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut attempt = 0u32;
    loop {
        if *stop.borrow() {
            shared.set_state(SyncState::Offline {
                reason: "stopped".into(),
            });
            return;
        }
        shared.set_state(SyncState::Syncing);
        let mut session = Session::new(shared.clone());
        let result = session.run(&mut stop).await;
        let synced = session.synced;
        drop(session);
        release_inflight(&shared).await;
        let error = match result {
            Ok(()) => {
                shared.set_state(SyncState::Offline {
                    reason: "stopped".into(),
                });
                return;
            }
            Err(error) => error,
        };
        // A stopped agent (4011) keeps its token and retries with the usual backoff.
        shared.stopped.store(
            matches!(&error, SyncError::Link(LinkError::Stopped(_))),
            std::sync::atomic::Ordering::Relaxed,
        );
        if synced {
            attempt = 0;
        }
        attempt += 1;
        let delay = if error.needs_the_user() {
            shared.set_state(SyncState::Error {
                reason: error.to_string(),
            });
            BACKOFF_MAX
        } else {
            shared.set_state(SyncState::Offline {
                reason: error.to_string(),
            });
            backoff(attempt, &mut rand::rng())
        };
        debug!(%error, ?delay, "sync stopped; retrying");
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            // Someone handed us a write: try now rather than after the backoff.
            _ = shared.reconnect_now.notified() => {}
            _ = stop.changed() => return,
        }
    }
}

/// The connection ended: what this process had in flight cannot be answered any more.
/// Sends go back to the queue (their key makes a resend safe); commands are failed, and
/// whoever waits on them is told.
async fn release_inflight(shared: &Arc<Shared>) {
    let owner = shared.lock.id.clone();
    match shared
        .write(move |cache| cache.release_inflight(&owner))
        .await
    {
        Ok((requeued, failed)) => {
            if requeued == 0 && failed.is_empty() {
                return;
            }
            for n in failed {
                shared.finish(
                    n,
                    Outcome::Failed {
                        code: FailureCode::Interrupted,
                        msg: "the connection ended before the hub answered; it may or may not have been applied".into(),
                    },
                );
            }
            shared.changed(Change::Outbox);
        }
        Err(error) => warn!(%error, "cannot release the outbox entries in flight"),
    }
}

/// What a command id is waiting for.
enum Pending {
    Sync,
    History {
        room: String,
        gap_from: u64,
        gap_to: u64,
    },
    Outbox {
        n: u64,
        kind: OutboxKind,
        /// The reply carries a token: it goes to the waiter, not into the cache.
        secret: bool,
    },
    /// Read markers sent, as they were when sent.
    Ack(Vec<(String, u64)>),
    Rooms,
}

struct Session {
    shared: Arc<Shared>,
    me: String,
    /// Users see every event of their rooms: a jump in a room's seqs means events to fetch.
    /// Agents' views skip messages that do not concern them.
    me_is_user: bool,
    pending: HashMap<u64, Pending>,
    /// Replayed events, applied when `sync` completes.
    replay: BTreeMap<String, Vec<Event>>,
    synced: bool,
    /// An `ack` is in flight.
    acking: bool,
    /// An outbox entry is in flight (they go one at a time, in order).
    outbox_busy: bool,
    /// When a rate-limited entry may go again.
    outbox_not_before: Option<tokio::time::Instant>,
    /// Gap ranges being fetched.
    filling: HashSet<(String, u64)>,
    /// Gaps were found while applying live events: fetch them after this batch.
    gaps_waiting: bool,
    /// We joined a room live: ask for the rooms' snapshot after this batch.
    rooms_waiting: bool,
    /// History failed for a reason that may pass: ask again then.
    gaps_retry_at: Option<tokio::time::Instant>,
}

impl Session {
    fn new(shared: Arc<Shared>) -> Session {
        let me = shared.profile.principal.clone();
        Session {
            shared,
            me,
            me_is_user: true,
            pending: HashMap::new(),
            replay: BTreeMap::new(),
            synced: false,
            acking: false,
            outbox_busy: false,
            outbox_not_before: None,
            filling: HashSet::new(),
            gaps_waiting: false,
            rooms_waiting: false,
            gaps_retry_at: None,
        }
    }

    async fn run(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), SyncError> {
        let shared = self.shared.clone();
        let profile = &shared.profile;
        let mut link = tokio::select! {
            link = Link::connect(&profile.hub, self.shared.tls.clone()) => link?,
            _ = stop.changed() => return Ok(()),
        };
        let principal = link
            .auth(profile.token.expose(), &shared.lock.device)
            .await?;
        if principal.id != self.me {
            return Err(LinkError::Unauthorized(format!(
                "the token belongs to {}, not to this profile's {}",
                principal.handle, profile.handle
            ))
            .into());
        }
        // Only a hub that knew this profile's token and principal may have the cache
        // emptied for its new history: whatever answers at the address before that cannot.
        self.check_epoch(&link).await?;
        self.me_is_user = principal.kind == roundtable_protocol::model::PrincipalKind::User;
        self.recover_orphans().await?;
        self.remember(&principal).await?;
        let cursors = self.shared.write(|cache| cache.cursors()).await?;
        let id = link.id();
        link.send(&ClientFrame::Sync(SyncCmd {
            id,
            cursors: cursors.into_iter().collect(),
        }))
        .await?;
        self.pending.insert(id, Pending::Sync);
        let mut ack_timer = tokio::time::interval(ACK_PERIOD);
        let mut liveness = tokio::time::interval(LIVENESS_CHECK);
        loop {
            let outbox_ready = self.synced && !self.outbox_busy;
            let retry_at = self.outbox_not_before;
            let gaps_at = self.gaps_retry_at;
            tokio::select! {
                frame = link.next() => {
                    let mut frames = vec![frame?];
                    while frames.len() < BATCH {
                        match link.next().now_or_never() {
                            Some(frame) => frames.push(frame?),
                            None => break,
                        }
                    }
                    self.handle(&mut link, frames).await?;
                    if std::mem::take(&mut self.gaps_waiting) {
                        self.fill_gaps(&mut link).await?;
                    }
                    if std::mem::take(&mut self.rooms_waiting) {
                        self.request_rooms(&mut link).await?;
                    }
                }
                _ = self.shared.outbox_ready.notified(), if outbox_ready => {
                    self.flush_outbox(&mut link).await?;
                }
                _ = async {
                    match retry_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                }, if outbox_ready => {
                    self.outbox_not_before = None;
                    self.flush_outbox(&mut link).await?;
                }
                _ = async {
                    match gaps_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {
                    self.gaps_retry_at = None;
                    self.fill_gaps(&mut link).await?;
                }
                _ = ack_timer.tick() => {
                    self.send_acks(&mut link).await?;
                    self.shared
                        .write(|cache| cache.forget_done_before(now_ms() - DONE_KEPT_MS))
                        .await?;
                    // Entries of processes that ended (killed before they could hand them
                    // over) are sent now, not at the next reconnect.
                    if self.recover_orphans().await? {
                        self.flush_outbox(&mut link).await?;
                    }
                }
                now = liveness.tick() => {
                    if link.silent(now) {
                        return Err(LinkError::Closed {
                            code: None,
                            reason: "the hub went silent (no heartbeat)".into(),
                        }
                        .into());
                    }
                }
                _ = stop.changed() => {
                    // Best effort: the connection may already be gone.
                    let _ = self.send_acks(&mut link).await;
                    link.close().await;
                    return Ok(());
                }
            }
        }
    }

    /// Releases outbox entries of processes that are gone; true when there were some.
    async fn recover_orphans(&self) -> Result<bool, SyncError> {
        let shared = self.shared.clone();
        let recovered = self
            .shared
            .write(move |cache| {
                if !cache.others_own_entries(&shared.lock.id)? {
                    return Ok(false);
                }
                cache.recover_outbox(|owner| shared.lock.is_alive(owner))?;
                Ok(true)
            })
            .await?;
        Ok(recovered)
    }

    /// A hub with another history (a new database) empties the cache.
    async fn check_epoch(&self, link: &Link) -> Result<(), SyncError> {
        let epoch = link.hello.epoch.clone();
        let hub = link.hello.hub.clone();
        let reset = self
            .shared
            .write(move |cache| {
                let stored = cache.meta("epoch")?;
                if stored.as_deref() == Some(epoch.as_str()) {
                    return Ok(None);
                }
                cache.reset(&epoch)?;
                cache.set_meta("hub", &hub)?;
                Ok(Some(stored))
            })
            .await?;
        if let Some(stored) = reset {
            if stored.is_some() {
                warn!(old = ?stored, new = %link.hello.epoch, "the hub's epoch changed; rebuilding the cache");
            }
            self.shared.changed(Change::Reset);
        }
        Ok(())
    }

    async fn remember(
        &self,
        principal: &roundtable_protocol::model::Principal,
    ) -> Result<(), SyncError> {
        let row = crate::cache::PrincipalRow {
            id: principal.id.clone(),
            kind: principal.kind.as_str().to_owned(),
            handle: principal.handle.clone(),
            name: principal.name.clone(),
            owner: principal.owner.clone(),
        };
        let kind = row.kind.clone();
        self.shared
            .write(move |cache| {
                cache.remember_principals([row])?;
                cache.set_meta("kind", &kind)
            })
            .await?;
        Ok(())
    }

    /// Handles a batch of frames, in order; consecutive live events are applied together.
    async fn handle(&mut self, link: &mut Link, frames: Vec<ServerFrame>) -> Result<(), SyncError> {
        let mut live: Vec<Event> = Vec::new();
        for frame in frames {
            match frame {
                ServerFrame::Evt(event) => {
                    if self.synced {
                        live.push(event);
                    } else {
                        self.replay
                            .entry(event.stream_name().to_owned())
                            .or_default()
                            .push(event);
                    }
                }
                other => {
                    self.apply_live(std::mem::take(&mut live)).await?;
                    self.handle_frame(link, other).await?;
                }
            }
        }
        self.apply_live(live).await
    }

    /// Applies live events, every stream of the batch in one job of the writer.
    async fn apply_live(&mut self, events: Vec<Event>) -> Result<(), SyncError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut by_stream: BTreeMap<String, Vec<Event>> = BTreeMap::new();
        for event in events {
            // A room we joined, or someone who joined one of ours: the snapshot names them
            // (a `member` event carries only an id).
            if (event.stream_name() == "inbox" && event.kind == "room_added")
                || (event.kind == "member"
                    && event.body["action"] == "join"
                    && event.body["principal"] != self.me.as_str())
            {
                self.rooms_waiting = true;
            }
            by_stream
                .entry(event.stream_name().to_owned())
                .or_default()
                .push(event);
        }
        let me = self.me.clone();
        let me_is_user = self.me_is_user;
        let (changes, new_gaps) = self
            .shared
            .write(move |cache| {
                let mut changes = BTreeSet::new();
                let mut new_gaps = false;
                for (stream, events) in by_stream {
                    // Events before the first one live are missing when the room is new to
                    // us (a room joined after sync is delivered from its join on) or, for a
                    // user, when seqs jump: fetch them with history.
                    if stream != "inbox" {
                        let cursor = cache.cursor(&stream)?;
                        let first = events[0].seq;
                        if first > cursor + 1 && (cursor == 0 || me_is_user) {
                            cache.add_gap(&stream, cursor + 1, first - 1)?;
                            new_gaps = true;
                        }
                    }
                    changes.extend(cache.apply(&me, &stream, &events, None)?.changes);
                }
                Ok((changes, new_gaps))
            })
            .await?;
        self.shared.changed_all(changes);
        if new_gaps {
            self.gaps_waiting = true;
        }
        Ok(())
    }

    async fn handle_frame(&mut self, link: &mut Link, frame: ServerFrame) -> Result<(), SyncError> {
        match frame {
            ServerFrame::Gap(gap) => {
                if gap.from == 0 || gap.from > gap.to || gap.to == u64::MAX {
                    return Err(LinkError::Protocol(format!(
                        "a gap {}..{} in {} that cannot be",
                        gap.from, gap.to, gap.room
                    ))
                    .into());
                }
                self.shared
                    .write(move |cache| cache.add_gap(&gap.room, gap.from, gap.to))
                    .await?;
            }
            ServerFrame::Ok(ok) => match self.pending.remove(&ok.re) {
                Some(Pending::Sync) => {
                    let heads: SyncOk = ok
                        .decode()
                        .map_err(|error| LinkError::Protocol(error.to_string()))?;
                    let mut replay = std::mem::take(&mut self.replay);
                    let me = self.me.clone();
                    let (changes, markers) = self
                        .shared
                        .write(move |cache| {
                            let mut changes = BTreeSet::new();
                            for (stream, head) in heads.heads {
                                let events = replay.remove(&stream).unwrap_or_default();
                                changes.extend(
                                    cache.apply(&me, &stream, &events, Some(head))?.changes,
                                );
                            }
                            for (stream, events) in replay {
                                changes.extend(cache.apply(&me, &stream, &events, None)?.changes);
                            }
                            let markers = cache.merge_read_markers(&heads.read)?;
                            Ok((changes, markers))
                        })
                        .await?;
                    self.shared.changed_all(changes);
                    self.shared.changed_all(
                        markers
                            .into_iter()
                            .map(|stream| Change::ReadMarker { stream }),
                    );
                    self.synced = true;
                    // Idle once the rooms' snapshot is in: a room is usable by its title
                    // even while history fills its gaps.
                    self.request_rooms(link).await?;
                    self.fill_gaps(link).await?;
                    self.flush_outbox(link).await?;
                }
                Some(Pending::Rooms) => {
                    let reply: RoomsOk = ok
                        .decode()
                        .map_err(|error| LinkError::Protocol(error.to_string()))?;
                    let changes = self
                        .shared
                        .write(move |cache| cache.apply_rooms(&reply.rooms))
                        .await?;
                    self.shared.changed_all(changes);
                    self.shared.set_state(SyncState::Idle);
                }
                Some(Pending::History {
                    room,
                    gap_from,
                    gap_to,
                }) => {
                    let page: HistoryOk = ok
                        .decode()
                        .map_err(|error| LinkError::Protocol(error.to_string()))?;
                    // A page short of the limit ends the gap, unless the hub cut it short
                    // by its size (`more`).
                    let filled_to = if !page.more && page.events.len() < HISTORY_PAGE as usize {
                        gap_to
                    } else {
                        page.events.last().map_or(gap_to, |event| event.seq)
                    };
                    let me = self.me.clone();
                    let filled_room = room.clone();
                    let applied = self
                        .shared
                        .write(move |cache| {
                            cache.fill_gap(&me, &filled_room, gap_from, filled_to, &page.events)
                        })
                        .await?;
                    self.filling.remove(&(room, gap_from));
                    self.shared.changed_all(applied.changes);
                    self.fill_gaps(link).await?;
                }
                Some(Pending::Outbox { n, kind, secret }) => {
                    self.outbox_busy = false;
                    let own_event = if kind == OutboxKind::Send {
                        ok.decode::<SendOk>().ok().map(|sent| sent.event)
                    } else {
                        None
                    };
                    let reply = ServerFrame::Ok(ok).to_json();
                    let kept = if secret {
                        crate::cache::without_secrets(&reply)
                    } else {
                        reply.clone()
                    };
                    let me = self.me.clone();
                    let changes = self
                        .shared
                        .write(move |cache| {
                            // Our own event comes back in the ok, not live.
                            let changes = match own_event {
                                Some(event) => {
                                    let stream = event.stream_name().to_owned();
                                    cache.apply(&me, &stream, &[event], None)?.changes
                                }
                                None => BTreeSet::new(),
                            };
                            cache.mark_done(n, &kept, now_ms())?;
                            Ok(changes)
                        })
                        .await?;
                    self.shared.changed_all(changes);
                    self.shared.finish(n, Outcome::Done(reply));
                    self.shared.changed(Change::Outbox);
                    self.flush_outbox(link).await?;
                }
                Some(Pending::Ack(markers)) => {
                    self.acking = false;
                    self.shared
                        .write(move |cache| cache.read_markers_sent(&markers))
                        .await?;
                }
                None => {}
            },
            ServerFrame::Err(err) => match err.re.and_then(|re| self.pending.remove(&re)) {
                Some(Pending::Sync) => {
                    return Err(LinkError::Protocol(format!("sync refused: {}", err.msg)).into());
                }
                Some(Pending::History {
                    room,
                    gap_from,
                    gap_to,
                }) => {
                    self.filling.remove(&(room.clone(), gap_from));
                    if matches!(
                        err.code,
                        roundtable_protocol::ErrorCode::NotMember
                            | roundtable_protocol::ErrorCode::NotFound
                    ) {
                        // A room we may no longer read: the gap cannot be filled.
                        let me = self.me.clone();
                        self.shared
                            .write(move |cache| cache.fill_gap(&me, &room, gap_from, gap_to, &[]))
                            .await?;
                        self.fill_gaps(link).await?;
                    } else {
                        warn!(%room, code = %err.code, msg = %err.msg, "history failed; asking again shortly");
                        self.gaps_retry_at = Some(tokio::time::Instant::now() + GAP_RETRY);
                    }
                }
                Some(Pending::Outbox { n, .. }) => {
                    self.outbox_busy = false;
                    if let Some(wait) = err.retry_after_ms {
                        // Rate limited: the same entry goes again after the delay.
                        let at = now_ms() + wait as i64;
                        self.shared
                            .write(move |cache| cache.requeue(n, Some(at)))
                            .await?;
                        self.outbox_not_before =
                            Some(tokio::time::Instant::now() + Duration::from_millis(wait));
                    } else {
                        let code = err.code;
                        let msg = err.msg.clone();
                        self.shared
                            .write(move |cache| cache.mark_failed(n, code.as_str(), &msg))
                            .await?;
                        self.shared.finish(
                            n,
                            Outcome::Failed {
                                code: FailureCode::Hub(code),
                                msg: err.msg,
                            },
                        );
                        self.shared.changed(Change::Outbox);
                        self.flush_outbox(link).await?;
                    }
                }
                Some(Pending::Rooms) => {
                    return Err(LinkError::Protocol(format!("rooms refused: {}", err.msg)).into());
                }
                Some(Pending::Ack(_)) => {
                    self.acking = false;
                }
                None => debug!(code = %err.code, msg = %err.msg, "an error for no command"),
            },
            ServerFrame::Hello(_) | ServerFrame::Evt(_) => {}
        }
        Ok(())
    }
}

/// What the outbox has for the connection.
enum Next {
    Nothing,
    /// Rate limited until then (Unix ms).
    NotBefore(i64),
    /// Another process claimed it first.
    Taken,
    Send(u64, OutboxKind, ClientFrame),
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn backoff_grows_with_jitter_between_half_a_second_and_thirty() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for attempt in 0..40 {
            for _ in 0..50 {
                let delay = backoff(attempt, &mut rng);
                assert!(
                    delay >= BACKOFF_MIN && delay <= BACKOFF_MAX,
                    "{attempt}: {delay:?}"
                );
                let ceiling = BACKOFF_MIN.saturating_mul(2u32.saturating_pow(attempt.min(16)));
                assert!(delay <= ceiling.max(BACKOFF_MIN), "{attempt}: {delay:?}");
            }
        }
        // Spread: late attempts do not all wait the same.
        let late: HashSet<Duration> = (0..20).map(|_| backoff(10, &mut rng)).collect();
        assert!(late.len() > 10);
    }
}
