//! Pipelined durability: the writer commits a batch without waiting for its `fsync` and
//! goes on with the next one, while the flush stage makes the commits durable in groups
//! and only then lets anything they produced leave the hub.
//!
//! Why: an `fsync` costs far longer than executing a batch, and during it the writer used
//! to sit idle. Now the writer executes batch N+1 while batch N is being flushed, and one
//! flush covers every batch committed before it started.
//!
//! The rule that keeps `ok` meaning durable: nothing a commit produced (replies, live
//! events, signups, authentications) reaches the dispatcher before a flush that started
//! after that commit returned has succeeded. Reads from the store obey the same rule: a
//! read's result is held back until every commit its snapshot could include is durable
//! ([`DurableReads`]), so no client ever sees an event that a power cut could take back.
//!
//! A failed flush leaves the page cache in an unknown state relative to the disk (the
//! kernel may have dropped the dirty pages): the process stops at once (an embedded hub's
//! program too: closing the database gracefully would checkpoint that cache into it), and a
//! restart recovers from what the disk holds. No `ok` for the lost commits was ever sent. A
//! panic of the flush stage (a bug) stops the hub alone ([`crate::threads::stop_on_panic`]): no read
//! waiting for what it would have flushed is answered, the watermark is abandoned
//! ([`Watermark::abandon`]) and they fail.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use tracing::error;

use crate::dispatch::{Delivery, DispatchHandle};
use crate::metrics::Metrics;
use crate::store::{
    AuditQuery, DirectoryQuery, Flush, ReadError, ReadStore, SnapshotRead, StoreError,
};
use roundtable_engine::records::AuditRecord;

/// Commits counted twice: when they begin (by the writer, before the commit can become
/// visible) and when they are durable (by the flush stage).
#[derive(Debug)]
pub struct Watermark {
    begun: Mutex<u64>,
    durable: Mutex<Durable>,
    advanced: Condvar,
    /// Signals each advance to the writer, which waits on it beside its request queue.
    signal: (
        crossbeam_channel::Sender<()>,
        crossbeam_channel::Receiver<()>,
    ),
}

/// The latest durable commit, and whether any more will ever be.
#[derive(Debug, Default)]
struct Durable {
    commit: u64,
    /// The hub failed: nothing more becomes durable.
    abandoned: bool,
}

impl Default for Watermark {
    fn default() -> Watermark {
        Watermark {
            begun: Mutex::new(0),
            durable: Mutex::new(Durable::default()),
            advanced: Condvar::new(),
            signal: crossbeam_channel::bounded(1),
        }
    }
}

impl Watermark {
    /// Numbers the commit about to start; call it before the commit can become visible.
    pub fn begin(&self) -> u64 {
        let mut begun = lock(&self.begun);
        *begun += 1;
        *begun
    }

    /// The number of the latest commit begun.
    pub fn begun(&self) -> u64 {
        *lock(&self.begun)
    }

    /// The number of the latest durable commit.
    pub fn durable(&self) -> u64 {
        lock(&self.durable).commit
    }

    /// Receives a message after advances (one pending at most: check [`durable`] after).
    ///
    /// [`durable`]: Watermark::durable
    pub fn advanced(&self) -> &crossbeam_channel::Receiver<()> {
        &self.signal.1
    }

    /// Every commit up to `commit` is durable.
    pub fn advance(&self, commit: u64) {
        let mut durable = lock(&self.durable);
        if commit > durable.commit {
            durable.commit = commit;
            self.advanced.notify_all();
            let _ = self.signal.0.try_send(());
        }
    }

    /// Blocks until every commit up to `commit` is durable: true then, false when the
    /// watermark was abandoned first (the hub failed; it never will be).
    pub fn wait_durable(&self, commit: u64) -> bool {
        let mut durable = lock(&self.durable);
        while durable.commit < commit {
            if durable.abandoned {
                return false;
            }
            durable = self
                .advanced
                .wait(durable)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        true
    }

    /// The hub failed: nothing more will become durable, and whoever waits for it stops
    /// waiting.
    pub fn abandon(&self) {
        lock(&self.durable).abandoned = true;
        self.advanced.notify_all();
        let _ = self.signal.0.try_send(());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the writer hands to the flush stage.
#[derive(Debug)]
pub enum Flushing {
    /// What one batch produced, numbered by [`Watermark::begin`].
    Batch {
        commit: u64,
        /// When its commit returned: the flush stage measures how long it waited.
        committed: Instant,
        deliveries: Vec<Delivery>,
    },
    /// The writer stopped: flush, pass the shutdown on, and stop.
    Shutdown,
}

/// The writer's end of the flush stage.
#[derive(Debug, Clone)]
pub struct FlushHandle {
    queue: crossbeam_channel::Sender<Flushing>,
}

impl FlushHandle {
    pub fn send(&self, item: Flushing) -> bool {
        self.queue.send(item).is_ok()
    }

    /// A handle whose items the caller reads itself (tests of the writer).
    #[cfg(test)]
    pub(crate) fn detached() -> (FlushHandle, crossbeam_channel::Receiver<Flushing>) {
        let (queue, receiver) = crossbeam_channel::unbounded();
        (FlushHandle { queue }, receiver)
    }
}

/// Where the flush stage releases what durable commits produced.
pub trait Release: Send + 'static {
    /// Everything the batches of one flush produced, in commit order.
    fn release(&mut self, deliveries: Vec<Delivery>);
    /// The hub is stopping: nothing more will be released.
    fn stop(&mut self);
    /// The writer went away without stopping (it failed): nothing more will be released.
    fn writer_failed(&mut self) {
        self.stop();
    }
}

/// The hub's release: the dispatcher fans the batch out on the flush thread itself, and
/// writes it to the sockets there when it can, so nothing waits for another thread to be
/// scheduled between the flush and the sockets.
impl Release for DispatchHandle {
    fn release(&mut self, deliveries: Vec<Delivery>) {
        self.batch(deliveries);
    }

    fn stop(&mut self) {
        self.shutdown();
    }

    fn writer_failed(&mut self) {
        self.shutdown_with(roundtable_protocol::CloseCode::HubFailed);
    }
}

/// Starts the flush stage: it stops after a `Shutdown`, or once every handle is dropped.
pub fn start(
    flush: Box<dyn Flush>,
    watermark: Arc<Watermark>,
    release: impl Release,
    metrics: Arc<Metrics>,
) -> (FlushHandle, JoinHandle<()>) {
    let (queue, receiver) = crossbeam_channel::unbounded();
    let stage = FlushStage {
        flush,
        watermark,
        release: Box::new(release),
        metrics,
        queue: receiver,
    };
    let thread = std::thread::Builder::new()
        .name("roundtable-flush".into())
        .spawn(move || crate::threads::stop_on_panic("flush", move || stage.run()))
        .expect("spawning the flush thread");
    (FlushHandle { queue }, thread)
}

struct FlushStage {
    flush: Box<dyn Flush>,
    watermark: Arc<Watermark>,
    release: Box<dyn Release>,
    metrics: Arc<Metrics>,
    queue: crossbeam_channel::Receiver<Flushing>,
}

impl FlushStage {
    fn run(mut self) {
        let mut stopping = false;
        while !stopping {
            let Ok(first) = self.queue.recv() else {
                // Every handle is gone with no `Shutdown`: the writer failed.
                self.release.writer_failed();
                return;
            };
            let mut items = vec![first];
            items.extend(self.queue.try_iter());
            let started = Instant::now();
            for item in &items {
                if let Flushing::Batch { committed, .. } = item {
                    self.metrics
                        .flush_wait_latency
                        .observe(started.saturating_duration_since(*committed));
                }
            }
            if let Err(error) = self.flush.flush() {
                // Not a panic the hub contains: after a failed fsync the page cache and the
                // disk disagree, and a hub that stopped gracefully would close its SQLite
                // connections, whose last close checkpoints that cache into the database.
                // Only ending the process at once keeps the disk as it was.
                error!(%error, "flushing committed batches to disk failed; stopping the process");
                std::process::abort();
            }
            self.metrics.flush_latency.observe(started.elapsed());
            let mut highest = 0;
            let mut deliveries = Vec::new();
            for item in items {
                match item {
                    Flushing::Batch {
                        commit,
                        deliveries: batch,
                        ..
                    } => {
                        highest = highest.max(commit);
                        if deliveries.is_empty() {
                            deliveries = batch;
                        } else {
                            deliveries.extend(batch);
                        }
                    }
                    Flushing::Shutdown => stopping = true,
                }
            }
            self.watermark.advance(highest);
            if !deliveries.is_empty() {
                self.release.release(deliveries);
            }
        }
        self.release.stop();
    }
}

/// The store's reads, each held back until every commit its snapshot may include is durable.
pub struct DurableReads {
    inner: Arc<dyn ReadStore>,
    watermark: Arc<Watermark>,
}

impl DurableReads {
    pub fn new(inner: Arc<dyn ReadStore>, watermark: Arc<Watermark>) -> DurableReads {
        DurableReads { inner, watermark }
    }

    /// Runs `read`, then waits for durability. The commit count is taken after the read:
    /// a snapshot holds only commits that returned before it began, and each of those was
    /// numbered before it returned. A hub that failed meanwhile answers nothing it read.
    fn durable<T, E: From<StoreError>>(
        &self,
        read: impl FnOnce(&dyn ReadStore) -> Result<T, E>,
    ) -> Result<T, E> {
        let result = read(&*self.inner);
        if self.watermark.wait_durable(self.watermark.begun()) {
            result
        } else {
            Err(StoreError::Stopped.into())
        }
    }
}

impl ReadStore for DurableReads {
    fn record_progress(&self, node: &str, dispatched: u64, now_ms: i64) -> Result<(), StoreError> {
        self.inner.record_progress(node, dispatched, now_ms)
    }

    /// Not held back: other processes' batches are durable before they are readable.
    fn committed_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<roundtable_engine::records::Committed>, StoreError> {
        self.inner.committed_after(after, limit)
    }

    fn audit_head(&self) -> Result<Option<(u64, String)>, StoreError> {
        self.durable(|reads| reads.audit_head())
    }

    fn directory(
        &self,
        query: &DirectoryQuery,
    ) -> Result<Vec<roundtable_protocol::model::DirectoryEntry>, StoreError> {
        self.durable(|reads| reads.directory(query))
    }

    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, ReadError> {
        self.durable(|reads| reads.audit(query))
    }

    fn request_holding(
        &self,
        sender: &str,
        client_key: &str,
    ) -> Result<Option<roundtable_engine::records::RequestRecord>, StoreError> {
        self.durable(|reads| reads.request_holding(sender, client_key))
    }

    fn remote_calls_due(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<roundtable_engine::records::RemoteCallRecord>, StoreError> {
        self.durable(|reads| reads.remote_calls_due(now_ms, limit))
    }

    fn remote_credential(
        &self,
        principal: &str,
    ) -> Result<Option<roundtable_protocol::client::RemoteCredential>, StoreError> {
        self.durable(|reads| reads.remote_credential(principal))
    }

    fn remote_thread(
        &self,
        room: &str,
        remote: &str,
    ) -> Result<Option<roundtable_engine::records::RemoteThreadRecord>, StoreError> {
        self.durable(|reads| reads.remote_thread(room, remote))
    }

    fn device_read_markers(
        &self,
        principal: &str,
        device: &str,
    ) -> Result<Vec<(roundtable_engine::records::StreamKey, u64)>, StoreError> {
        self.durable(|reads| reads.device_read_markers(principal, device))
    }

    fn sent_with_key_prefix(
        &self,
        sender: &str,
        prefix: &str,
        before: Option<(i64, String)>,
        limit: usize,
    ) -> Result<Vec<roundtable_engine::records::EventRecord>, StoreError> {
        self.durable(|reads| reads.sent_with_key_prefix(sender, prefix, before.clone(), limit))
    }

    fn read(&self, read: &mut SnapshotRead<'_>) -> Result<(), ReadError> {
        self.durable(|reads| reads.read(read))
    }

    /// Not held back: it reads only what is already durable (a replay's events up to the
    /// heads of a plan, which was held back until they were).
    fn read_settled(&self, read: &mut SnapshotRead<'_>) -> Result<(), ReadError> {
        self.inner.read(read)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use roundtable_protocol::ErrorCode;
    use tokio::sync::oneshot;

    use super::*;
    use roundtable_engine::Refusal;
    use roundtable_engine::records::StreamKey;

    /// A flush that says when it starts, waits for the test to let it finish, and counts
    /// the flushes.
    struct GatedFlush {
        entered: crossbeam_channel::Sender<()>,
        gate: crossbeam_channel::Receiver<()>,
        flushed: Arc<Mutex<u64>>,
    }

    impl Flush for GatedFlush {
        fn flush(&mut self) -> std::io::Result<()> {
            let _ = self.entered.send(());
            self.gate
                .recv()
                .map_err(|_| std::io::Error::other("gate closed"))?;
            *lock(&self.flushed) += 1;
            Ok(())
        }
    }

    /// A signup answer, as the writer hands one over: it is observable when it is sent.
    fn signup_answer() -> (
        Delivery,
        oneshot::Receiver<Result<roundtable_engine::SignupOutcome, Refusal>>,
    ) {
        let (reply, answered) = oneshot::channel();
        let delivery = Delivery::Signup {
            reply,
            result: Err(Refusal::new(ErrorCode::Forbidden, "a marker")),
        };
        (delivery, answered)
    }

    /// What the flush stage released: `Some` batch, or `None` for the stop.
    struct Released(crossbeam_channel::Sender<Option<Vec<Delivery>>>);

    impl Release for Released {
        fn release(&mut self, deliveries: Vec<Delivery>) {
            let _ = self.0.send(Some(deliveries));
        }
        fn stop(&mut self) {
            let _ = self.0.send(None);
        }
    }

    /// A store whose reads see everything: each answers at once.
    struct AtOnce;

    impl ReadStore for AtOnce {
        fn directory(
            &self,
            _: &DirectoryQuery,
        ) -> Result<Vec<roundtable_protocol::model::DirectoryEntry>, StoreError> {
            Ok(Vec::new())
        }
        fn request_holding(
            &self,
            _: &str,
            _: &str,
        ) -> Result<Option<roundtable_engine::records::RequestRecord>, StoreError> {
            Ok(None)
        }
        fn sent_with_key_prefix(
            &self,
            _: &str,
            _: &str,
            _: Option<(i64, String)>,
            _: usize,
        ) -> Result<Vec<roundtable_engine::records::EventRecord>, StoreError> {
            Ok(Vec::new())
        }
        fn remote_calls_due(
            &self,
            _: i64,
            _: usize,
        ) -> Result<Vec<roundtable_engine::records::RemoteCallRecord>, StoreError> {
            Ok(Vec::new())
        }
        fn remote_credential(
            &self,
            _: &str,
        ) -> Result<Option<roundtable_protocol::client::RemoteCredential>, StoreError> {
            Ok(None)
        }
        fn remote_thread(
            &self,
            _: &str,
            _: &str,
        ) -> Result<Option<roundtable_engine::records::RemoteThreadRecord>, StoreError> {
            Ok(None)
        }
        fn device_read_markers(
            &self,
            _: &str,
            _: &str,
        ) -> Result<Vec<(roundtable_engine::records::StreamKey, u64)>, StoreError> {
            Ok(Vec::new())
        }
        fn audit(&self, _: &AuditQuery) -> Result<Vec<AuditRecord>, ReadError> {
            Ok(Vec::new())
        }
        fn read(&self, read: &mut SnapshotRead<'_>) -> Result<(), ReadError> {
            read(&mut Empty)
        }
    }

    /// A snapshot of a store that holds one empty room, with everyone in it.
    struct Empty;

    impl crate::store::ReadTx for Empty {
        fn memberships(&mut self, _: &str) -> Result<Vec<crate::store::Membership>, StoreError> {
            Ok(Vec::new())
        }
        fn head(&mut self, _: &StreamKey) -> Result<u64, StoreError> {
            Ok(0)
        }
        fn read_markers(&mut self, _: &str) -> Result<Vec<(StreamKey, u64)>, StoreError> {
            Ok(Vec::new())
        }
        fn room_exists(&mut self, _: &str) -> Result<bool, StoreError> {
            Ok(true)
        }
        fn routing(
            &mut self,
            _: &str,
            _: &str,
        ) -> Result<Option<roundtable_protocol::model::Routing>, StoreError> {
            Ok(Some(roundtable_protocol::model::Routing::All))
        }
        fn events(
            &mut self,
            _: &StreamKey,
            _: crate::store::SeqRange,
            _: crate::store::EventOrder,
            _: usize,
            _: &mut dyn FnMut(roundtable_engine::records::EventRecord) -> bool,
        ) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[test]
    fn a_read_is_answered_once_what_it_may_have_seen_is_durable() {
        let watermark = Arc::new(Watermark::default());
        let reads = Arc::new(DurableReads::new(Arc::new(AtOnce), watermark.clone()));
        // Nothing committed: answered at once.
        assert!(
            crate::reads::history(&*reads, user(), "r", range())
                .unwrap()
                .events
                .is_empty()
        );
        // A commit begun but not flushed holds every kind of read back.
        watermark.begin();
        let answered = Arc::new(Mutex::new(0u64));
        let readers: Vec<_> = (0..3)
            .map(|kind| {
                let reads = reads.clone();
                let answered = answered.clone();
                std::thread::spawn(move || {
                    match kind {
                        0 => drop(crate::reads::history(&*reads, user(), "r", range()).unwrap()),
                        1 => drop(crate::reads::sync_plan(&*reads, "u", &|_| 0, 10).unwrap()),
                        _ => drop(reads.audit(&audit_query()).unwrap()),
                    }
                    *lock(&answered) += 1;
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            *lock(&answered),
            0,
            "answered before the commit was durable"
        );
        watermark.advance(1);
        for reader in readers {
            reader.join().unwrap();
        }
        assert_eq!(*lock(&answered), 3);
    }

    fn user() -> crate::reads::Reader<'static> {
        crate::reads::Reader {
            principal: "u",
            is_agent: false,
        }
    }

    fn range() -> crate::reads::HistoryRange {
        crate::reads::HistoryRange {
            before: None,
            after: None,
            limit: 10,
            max_bytes: 1 << 20,
        }
    }

    fn audit_query() -> AuditQuery {
        AuditQuery {
            viewer: "u".into(),
            principal: None,
            since_ms: None,
            limit: 10,
        }
    }

    #[test]
    fn nothing_a_commit_produced_leaves_before_its_flush() {
        let (open_gate, gate) = crossbeam_channel::unbounded();
        let (entered, flush_started) = crossbeam_channel::unbounded();
        let flushed = Arc::new(Mutex::new(0));
        let watermark = Arc::new(Watermark::default());
        let (released, dispatched) = crossbeam_channel::unbounded();
        let (flushing, thread) = start(
            Box::new(GatedFlush {
                entered,
                gate,
                flushed: flushed.clone(),
            }),
            watermark.clone(),
            Released(released),
            Arc::new(Metrics::default()),
        );

        let commit = watermark.begin();
        let (delivery, mut answered) = signup_answer();
        assert!(flushing.send(Flushing::Batch {
            commit,
            committed: Instant::now(),
            deliveries: vec![delivery],
        }));
        // A read that may include the commit waits for it too.
        let read_done = Arc::new(AtomicBool::new(false));
        let seen = watermark.begun();
        let reader = {
            let watermark = watermark.clone();
            let read_done = read_done.clone();
            std::thread::spawn(move || {
                watermark.wait_durable(seen);
                read_done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            dispatched.try_recv().is_err(),
            "dispatched before the flush"
        );
        assert!(answered.try_recv().is_err(), "answered before the flush");
        assert!(
            !read_done.load(Ordering::SeqCst),
            "read released before the flush"
        );

        // Batches queued during one flush share the next: two commits queued while the
        // first flush is held.
        flush_started.recv().unwrap();
        for _ in 0..2 {
            let commit = watermark.begin();
            assert!(flushing.send(Flushing::Batch {
                commit,
                committed: Instant::now(),
                deliveries: Vec::new(),
            }));
        }
        open_gate.send(()).unwrap();
        match dispatched.recv_timeout(Duration::from_secs(10)).unwrap() {
            Some(deliveries) => assert_eq!(deliveries.len(), 1),
            None => panic!("expected the batch, got the stop"),
        }
        reader.join().unwrap();
        assert!(read_done.load(Ordering::SeqCst));
        assert_eq!(*lock(&flushed), 1);

        flush_started.recv().unwrap();
        open_gate.send(()).unwrap();
        watermark.wait_durable(3);
        assert_eq!(*lock(&flushed), 2, "one flush covered both commits");

        // Shutdown flushes once more, then passes on.
        assert!(flushing.send(Flushing::Shutdown));
        open_gate.send(()).unwrap();
        assert!(
            dispatched
                .recv_timeout(Duration::from_secs(10))
                .unwrap()
                .is_none()
        );
        thread.join().unwrap();
    }

    #[test]
    fn a_wait_returns_once_its_commit_is_durable() {
        let watermark = Arc::new(Watermark::default());
        let first = watermark.begin();
        let second = watermark.begin();
        assert_eq!((first, second, watermark.begun()), (1, 2, 2));
        watermark.advance(first);
        watermark.wait_durable(first);
        let done = Arc::new(AtomicBool::new(false));
        let waiter = {
            let watermark = watermark.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                watermark.wait_durable(second);
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "commit 2 is not durable yet");
        watermark.advance(second);
        waiter.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        // Going backwards is ignored.
        watermark.advance(first);
        watermark.wait_durable(second);
    }
}
