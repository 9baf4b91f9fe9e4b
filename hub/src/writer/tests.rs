//! A failed commit: every command of the batch is answered `internal`, nothing of it
//! is visible afterwards, and the state goes on from what the store holds.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use roundtable_protocol::client::{ClientFrame, RoomCreate, SendCmd};
use roundtable_protocol::model::PrincipalKind;
use tokio::sync::Semaphore;

use super::*;
use crate::reads::StoreReads;
use crate::store::sqlite::{self, SqliteStore};
use crate::store::{Snapshot, StoreError, WriteError, WriteTx};
use roundtable_engine::ConnId;
use roundtable_engine::ids::IdSource;
use roundtable_engine::records::{
    AuditRecord, ContactRecord, ControlRecord, EventRecord, InviteRecord, MemberRecord, PingRecord,
    PrincipalRecord, RequestRecord, RoomRecord, StreamKey, TokenRecord,
};

/// SQLite whose next commit fails when told to, and which refuses, as PostgreSQL refuses
/// a NUL in `text`, an event with the client key `refused_key`: at commit, with a
/// value too big (a value refused, not a failure of the store's own).
struct FlakyStore {
    inner: SqliteStore,
    fail_next_commit: Arc<AtomicBool>,
    refused_key: Option<&'static str>,
}

struct FlakyTx<'a> {
    inner: Box<dyn WriteTx + 'a>,
    fail: bool,
    refused_key: Option<&'static str>,
    holds_refused: bool,
}

impl Store for FlakyStore {
    fn load(&mut self, now_ms: i64) -> Result<Snapshot, StoreError> {
        self.inner.load(now_ms)
    }

    fn flusher(&mut self) -> Result<Box<dyn crate::store::Flush>, StoreError> {
        self.inner.flusher()
    }

    fn transaction(&mut self) -> Result<Box<dyn WriteTx + '_>, StoreError> {
        let fail = self.fail_next_commit.swap(false, Ordering::SeqCst);
        Ok(Box::new(FlakyTx {
            inner: self.inner.transaction()?,
            fail,
            refused_key: self.refused_key,
            holds_refused: false,
        }))
    }
}

impl WriteTx for FlakyTx<'_> {
    fn remote(
        &mut self,
        w: &roundtable_engine::records::RemoteWrite<'_>,
    ) -> Result<u64, WriteError> {
        self.inner.remote(w)
    }
    fn insert_principal(&mut self, p: &PrincipalRecord) -> Result<(), WriteError> {
        self.inner.insert_principal(p)
    }
    fn update_principal(&mut self, p: &PrincipalRecord) -> Result<(), WriteError> {
        self.inner.update_principal(p)
    }
    fn insert_token(&mut self, t: &TokenRecord, now_ms: i64) -> Result<(), WriteError> {
        self.inner.insert_token(t, now_ms)
    }
    fn revoke_tokens(&mut self, p: &str, now_ms: i64) -> Result<(), WriteError> {
        self.inner.revoke_tokens(p, now_ms)
    }
    fn insert_room(&mut self, r: &RoomRecord) -> Result<(), WriteError> {
        self.inner.insert_room(r)
    }
    fn update_room(&mut self, r: &RoomRecord) -> Result<(), WriteError> {
        self.inner.update_room(r)
    }
    fn upsert_member(&mut self, m: &MemberRecord) -> Result<(), WriteError> {
        self.inner.upsert_member(m)
    }
    fn delete_member(&mut self, r: &str, p: &str) -> Result<(), WriteError> {
        self.inner.delete_member(r, p)
    }
    fn append_event(&mut self, e: &EventRecord) -> Result<(), WriteError> {
        if self.refused_key.is_some() && e.client_key.as_deref() == self.refused_key {
            self.holds_refused = true;
        }
        self.inner.append_event(e)
    }
    fn event_at(&mut self, s: &StreamKey, q: u64) -> Result<Option<EventRecord>, WriteError> {
        self.inner.event_at(s, q)
    }
    fn request(&mut self, id: &str) -> Result<Option<RequestRecord>, WriteError> {
        self.inner.request(id)
    }
    fn invite_by_code(
        &mut self,
        hash: &roundtable_engine::ids::TokenHash,
    ) -> Result<Option<InviteRecord>, WriteError> {
        self.inner.invite_by_code(hash)
    }
    fn invite(&mut self, id: &str) -> Result<Option<InviteRecord>, WriteError> {
        self.inner.invite(id)
    }
    fn ping(&mut self, room: &str, ping: &str) -> Result<Option<PingRecord>, WriteError> {
        self.inner.ping(room, ping)
    }
    fn upsert_ping(&mut self, p: &PingRecord) -> Result<(), WriteError> {
        self.inner.upsert_ping(p)
    }
    fn set_ack(&mut self, p: &str, d: &str, s: &StreamKey, q: u64) -> Result<(), WriteError> {
        self.inner.set_ack(p, d, s, q)
    }
    fn insert_contact(&mut self, c: &ContactRecord) -> Result<(), WriteError> {
        self.inner.insert_contact(c)
    }
    fn upsert_request(&mut self, r: &RequestRecord) -> Result<(), WriteError> {
        self.inner.upsert_request(r)
    }
    fn upsert_invite(&mut self, i: &InviteRecord) -> Result<(), WriteError> {
        self.inner.upsert_invite(i)
    }
    fn set_control(&mut self, c: &ControlRecord) -> Result<(), WriteError> {
        self.inner.set_control(c)
    }
    fn delete_control(&mut self, a: &str, r: Option<&str>) -> Result<(), WriteError> {
        self.inner.delete_control(a, r)
    }
    fn append_audit(&mut self, e: &AuditRecord) -> Result<(), WriteError> {
        self.inner.append_audit(e)
    }
    fn commit(self: Box<Self>) -> Result<(), WriteError> {
        if self.holds_refused {
            return Err(StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_TOOBIG),
                Some("injected: a value the store refuses".into()),
            ))
            .into());
        }
        if self.fail {
            // Dropping the inner transaction rolls it back, as a failed fsync would.
            return Err(StoreError::Corrupt {
                table: "events",
                detail: "injected commit failure".into(),
            }
            .into());
        }
        self.inner.commit()
    }
}

/// The next batch with something in it, flushed at once (as the flush stage would).
fn next_batch(
    receiver: &crossbeam_channel::Receiver<Flushing>,
    watermark: &Watermark,
) -> Vec<Delivery> {
    loop {
        match receiver
            .recv_timeout(Duration::from_secs(10))
            .expect("a batch")
        {
            Flushing::Batch {
                commit, deliveries, ..
            } => {
                watermark.advance(commit);
                if !deliveries.is_empty() {
                    return deliveries;
                }
            }
            Flushing::Shutdown => continue,
        }
    }
}

fn reply_text(deliveries: &[Delivery]) -> String {
    match deliveries.first() {
        Some(Delivery::Reply {
            item: Outbound::Frame(text),
            ..
        }) => text.clone(),
        Some(Delivery::Reply {
            item: Outbound::Sent { event, dup, .. },
            ..
        }) => format!("sent seq {} dup {dup}", event.seq),
        Some(Delivery::Reply {
            item: Outbound::Err { refusal, .. },
            ..
        }) => format!("err {}", refusal.code),
        other => panic!("expected a reply, got {other:?}"),
    }
}

#[tokio::test]
async fn a_failed_commit_answers_internal_and_loses_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let mut ids = IdSource::seeded(5);
    let (inner, reader) = sqlite::open(&dir.path().join("hub.sqlite3"), &mut ids, 1).unwrap();
    let fail = Arc::new(AtomicBool::new(false));
    let harness = Harness::start(Box::new(FlakyStore {
        inner,
        fail_next_commit: fail.clone(),
        refused_key: None,
    }));
    let next = || reply_text(&next_batch(&harness.dispatched, &harness.watermark));

    assert!(harness.writer.submit(harness.send(1, "first-message")));
    assert_eq!(next(), "sent seq 3 dup false");

    fail.store(true, Ordering::SeqCst);
    assert!(harness.writer.submit(harness.send(2, "lost-message")));
    assert_eq!(next(), "err internal");

    // The failed event was never stored, its seq is reused, and its key is free again.
    assert!(harness.writer.submit(harness.send(3, "third-message")));
    assert_eq!(next(), "sent seq 4 dup false");
    assert!(harness.writer.submit(harness.send(4, "lost-message")));
    assert_eq!(next(), "sent seq 5 dup false");
    let history = reader
        .history(
            &harness.caller.id,
            false,
            &harness.room,
            crate::reads::HistoryRange {
                before: None,
                after: Some(2),
                limit: 10,
                max_bytes: 1 << 20,
            },
        )
        .unwrap();
    let keys: Vec<_> = history
        .events
        .iter()
        .map(|e| e.client_key.clone().unwrap())
        .collect();
    assert_eq!(keys, vec!["first-message", "third-message", "lost-message"]);

    assert!(harness.writer.submit(Request::Shutdown));
    harness.thread.join().unwrap();
}

/// A writer over `store` with a user and a room of theirs, its batches flushed only when
/// the test says.
struct Harness {
    writer: WriterHandle,
    thread: std::thread::JoinHandle<()>,
    dispatched: crossbeam_channel::Receiver<Flushing>,
    watermark: Arc<Watermark>,
    metrics: Arc<Metrics>,
    permits: Arc<Semaphore>,
    caller: Caller,
    room: String,
}

impl Harness {
    fn start(mut store: Box<dyn Store>) -> Harness {
        let ids = IdSource::seeded(7);
        // Rate limits that a command charged twice would run out of: a burst of four.
        let limits = roundtable_engine::RateLimits {
            user: roundtable_engine::RateLimit {
                burst: 4.0,
                per_second: 0.0001,
            },
            ..roundtable_engine::RateLimits::default()
        };
        let config = roundtable_engine::EngineConfig {
            rate_limits: Some(limits),
            ..roundtable_engine::EngineConfig::default()
        };
        let mut engine = Engine::with_config(store.load(1).unwrap(), ids, config);
        let mut tx = store.transaction().unwrap();
        let user = engine
            .signup(
                &mut *tx,
                1,
                SignupMode::Open,
                roundtable_protocol::client::SignupRequest {
                    handle: "dana".into(),
                    name: "Dana".into(),
                    discoverable: None,
                    invite: None,
                },
            )
            .unwrap();
        let caller = Caller {
            id: user.principal.id.clone(),
            kind: PrincipalKind::User,
            device: "d".into(),
            conn: ConnId(1),
            via: roundtable_engine::Via::Ws,
        };
        let created = engine
            .execute(
                &mut *tx,
                1,
                &caller,
                &Command::Frame(ClientFrame::RoomCreate(RoomCreate {
                    id: 1,
                    title: None,
                    topic: None,
                    members: vec![],
                })),
            )
            .unwrap();
        tx.commit().unwrap();
        let Reply::Ok(ok) = created.reply else {
            panic!()
        };
        let room = ok
            .decode::<roundtable_protocol::server::RoomOk>()
            .unwrap()
            .room
            .id;
        let (flushing, dispatched) = FlushHandle::detached();
        let watermark = Arc::new(Watermark::default());
        let metrics = Arc::new(Metrics::default());
        let (writer, thread) = start(
            store,
            engine,
            flushing,
            watermark.clone(),
            metrics.clone(),
            WriterConfig {
                signup: SignupMode::Open,
                max_batch: 64,
                announcer: None,
                clock: Default::default(),
            },
        );
        Harness {
            writer,
            thread,
            dispatched,
            watermark,
            metrics,
            permits: Arc::new(Semaphore::new(16)),
            caller,
            room,
        }
    }

    /// A send as a connection hands it over, past the decoder (which would refuse a
    /// NUL in a key before the store ever saw it).
    fn send(&self, id: u64, key: &str) -> Request {
        Request::Command {
            caller: Arc::new(self.caller.clone()),
            command: Command::from_frame(ClientFrame::Send(SendCmd {
                id,
                room: self.room.clone(),
                client_key: key.into(),
                kind: "message".into(),
                body: serde_json::json!({"text": format!("message {id}")}),
            }))
            .unwrap(),
            submitted: Instant::now(),
            permit: self.permits.clone().try_acquire_owned().unwrap(),
        }
    }

    /// The next batch with something in it handed to the flush stage, not yet durable
    /// (one with nothing to deliver, which a writer on PostgreSQL may commit before the
    /// first command, is flushed at once, as the flush stage would).
    fn next_unflushed(&self) -> (u64, Vec<Delivery>) {
        loop {
            match self
                .dispatched
                .recv_timeout(Duration::from_secs(10))
                .expect("a batch")
            {
                Flushing::Batch {
                    commit, deliveries, ..
                } if deliveries.is_empty() => self.watermark.advance(commit),
                Flushing::Batch {
                    commit, deliveries, ..
                } => return (commit, deliveries),
                Flushing::Shutdown => continue,
            }
        }
    }
}

/// One command of a batch holds a value the store refuses: it alone is refused, with
/// `bad_frame` (retrying it as it is would fail again), and the batch's other commands
/// are stored as if it had not been there, each charged to its rate limit once.
async fn a_value_the_store_refuses_fails_its_command_alone(
    store: Box<dyn Store>,
    refused_key: &str,
) {
    let harness = Harness::start(store);
    assert!(harness.writer.submit(harness.send(1, "first-message")));
    // The first batch stays unflushed, so the next requests wait in one transaction.
    let (first, deliveries) = harness.next_unflushed();
    assert_eq!(reply_text(&deliveries), "sent seq 3 dup false");
    for request in [
        harness.send(2, "second-message"),
        harness.send(3, refused_key),
        harness.send(4, "fourth-message"),
    ] {
        assert!(harness.writer.submit(request));
    }
    roundtable_testkit::until(
        "the writer executing the three sends in one batch",
        Duration::from_secs(10),
        async || harness.metrics.commands.load(Ordering::SeqCst) == 4,
    )
    .await;
    harness.watermark.advance(first);
    let mut replies = Vec::new();
    while replies.len() < 3 {
        let deliveries = next_batch(&harness.dispatched, &harness.watermark);
        replies.push(reply_text(&deliveries));
        if let Some(Delivery::Reply {
            item: Outbound::Err { refusal, .. },
            ..
        }) = deliveries.first()
        {
            assert!(
                refusal.msg.contains("cannot keep a value"),
                "{}",
                refusal.msg
            );
        }
    }
    assert_eq!(
        replies,
        [
            "sent seq 4 dup false",
            "err bad_frame",
            "sent seq 5 dup false"
        ]
    );
    // Each command that happened drew one rate token, the runs again included, and the
    // refused one none: four sends are the whole burst.
    assert!(harness.writer.submit(harness.send(5, "fifth-message")));
    assert_eq!(
        reply_text(&next_batch(&harness.dispatched, &harness.watermark)),
        "sent seq 6 dup false"
    );
    assert!(harness.writer.submit(harness.send(6, "sixth-message")));
    assert_eq!(
        reply_text(&next_batch(&harness.dispatched, &harness.watermark)),
        "err rate_limited"
    );
    assert!(harness.writer.submit(Request::Shutdown));
    harness.thread.join().unwrap();
}

#[tokio::test]
async fn a_value_sqlite_refuses_fails_its_command_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut ids = IdSource::seeded(5);
    let (inner, _reader) = sqlite::open(&dir.path().join("hub.sqlite3"), &mut ids, 1).unwrap();
    let store = FlakyStore {
        inner,
        fail_next_commit: Arc::new(AtomicBool::new(false)),
        refused_key: Some("refused-message"),
    };
    a_value_the_store_refuses_fails_its_command_alone(Box::new(store), "refused-message").await;
}

#[tokio::test]
async fn a_nul_postgresql_refuses_fails_its_command_alone() {
    let database = roundtable_testkit::postgres::TestDatabase::create();
    let (store, _reader) =
        crate::store::postgres::open(&database.url, &mut IdSource::seeded(5), 1).unwrap();
    a_value_the_store_refuses_fails_its_command_alone(Box::new(store), "refused\u{0}").await;
}
