//! What travels from the writer to a connection, and how events become frames.
//!
//! Each connection has one bounded [`OutboundQueue`], drained by its sink task in order.
//! The dispatcher puts a commit's replies and live events into it in one push per
//! connection, without ever blocking: when the queue passes `max_queue` the connection is
//! a slow consumer and is closed with 4008, so one stuck client can never stall the hub.
//! The sink takes everything queued at once, writes it and flushes once. When nothing is
//! queued and the connection's writer is free, the push writes to the socket instead
//! ([`DirectWrite`]). An event's frame is encoded once and shared by every connection that
//! receives it.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use roundtable_protocol::CloseCode;
use roundtable_protocol::server::ErrReply;
use tokio::sync::{Notify, watch};
use tokio_tungstenite::tungstenite::Utf8Bytes;

use roundtable_engine::records::{EventRecord, StreamKey};
use roundtable_engine::{ConnId, Refusal};

/// A committed event on its way to connections.
#[derive(Debug)]
pub struct LiveEvent {
    pub record: Arc<EventRecord>,
    /// When the commit returned, for the delivery latency metric.
    pub committed: Instant,
    plain: OnceLock<Utf8Bytes>,
    keyed: OnceLock<Utf8Bytes>,
}

impl LiveEvent {
    pub fn new(record: Arc<EventRecord>, committed: Instant) -> LiveEvent {
        LiveEvent {
            record,
            committed,
            plain: OnceLock::new(),
            keyed: OnceLock::new(),
        }
    }

    /// The `evt` frame, with the `client_key` (for its sender's other connections) or
    /// without it (for everyone else).
    /// Cloning the returned bytes shares them: one encoding for every recipient.
    pub fn frame(&self, with_key: bool) -> Utf8Bytes {
        if with_key && self.record.client_key.is_some() {
            self.keyed
                .get_or_init(|| event_frame(&self.record, true).into())
                .clone()
        } else {
            self.plain
                .get_or_init(|| event_frame(&self.record, false).into())
                .clone()
        }
    }
}

/// One item of a connection's outbound queue.
#[derive(Debug)]
pub enum Outbound {
    /// An encoded reply.
    Frame(String),
    /// An `err` reply (the sink counts the `bad_frame`s).
    Err { re: Option<u64>, refusal: Refusal },
    /// The `ok` of a `send`.
    Sent {
        re: u64,
        event: Arc<EventRecord>,
        dup: bool,
    },
    /// A live event.
    Event {
        event: Arc<LiveEvent>,
        with_key: bool,
    },
    /// A `sync` to serve in order with the live events around it.
    Sync {
        re: u64,
        cursors: BTreeMap<String, u64>,
    },
}

/// Why a connection is ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// The hub closes it with this code.
    Code(CloseCode),
    /// The peer went away (closed, errored or fell silent): nothing left to tell it.
    PeerGone,
}

/// Ends a connection from anywhere (the writer, the reader, the sink): the first reason
/// wins.
#[derive(Debug)]
pub struct ConnControl {
    closing: watch::Sender<Option<Closing>>,
}

impl Default for ConnControl {
    fn default() -> ConnControl {
        ConnControl {
            closing: watch::Sender::new(None),
        }
    }
}

impl ConnControl {
    pub fn close(&self, code: CloseCode) {
        self.end(Closing::Code(code));
    }

    pub fn end(&self, closing: Closing) {
        self.closing.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(closing);
                true
            } else {
                false
            }
        });
    }

    /// Whether the connection is to end (for any reason).
    pub fn is_closing(&self) -> bool {
        self.closing.borrow().is_some()
    }

    pub fn close_code(&self) -> Option<CloseCode> {
        match *self.closing.borrow() {
            Some(Closing::Code(code)) => Some(code),
            _ => None,
        }
    }

    /// Resolves once the connection is to end, with the reason.
    pub async fn closed(&self) -> Closing {
        wait_closing(&mut self.watch()).await
    }

    /// A receiver to wait on repeatedly with [`wait_closing`] (cheaper than `closed` in a
    /// loop).
    pub fn watch(&self) -> watch::Receiver<Option<Closing>> {
        self.closing.subscribe()
    }
}

/// Resolves once the connection is to end, with the reason.
pub async fn wait_closing(receiver: &mut watch::Receiver<Option<Closing>>) -> Closing {
    match receiver.wait_for(Option::is_some).await {
        Ok(closing) => closing.expect("waited for Some"),
        // The control is gone: so is the connection.
        Err(_) => Closing::PeerGone,
    }
}

impl Outbound {
    /// About how many bytes the item holds (its frame, once written): what the queue's
    /// byte bound counts. An event's frame is shared by its recipients but counted whole
    /// for each, as each queue may be the last to hold it.
    pub fn size(&self) -> usize {
        /// Field names, ids and timestamps around a body.
        const ENVELOPE: usize = 200;
        match self {
            Outbound::Frame(frame) => frame.len(),
            Outbound::Err { refusal, .. } => ENVELOPE + refusal.msg.len(),
            Outbound::Sent { event, .. } => ENVELOPE + event.body.len(),
            Outbound::Event { event, .. } => ENVELOPE + event.record.body.len(),
            Outbound::Sync { cursors, .. } => {
                ENVELOPE + cursors.keys().map(|key| key.len() + 24).sum::<usize>()
            }
        }
    }
}

/// What a queue holds: its items and their bytes.
#[derive(Debug, Default)]
struct Queued {
    items: VecDeque<Outbound>,
    bytes: usize,
}

/// A connection's outbound items, bounded by `max_queue` items and `max_queue_bytes`.
#[derive(Debug)]
pub struct OutboundQueue {
    queued: Mutex<Queued>,
    ready: Notify,
    capacity: usize,
    max_bytes: usize,
    /// A write made outside the sink task left bytes for it to flush.
    flush_wanted: AtomicBool,
}

impl OutboundQueue {
    pub fn new(capacity: usize, max_bytes: usize) -> OutboundQueue {
        OutboundQueue {
            queued: Mutex::new(Queued::default()),
            ready: Notify::new(),
            capacity: capacity.max(1),
            max_bytes: max_bytes.max(1),
            flush_wanted: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.queued.lock().expect("queue lock")
    }

    pub fn is_empty(&self) -> bool {
        self.lock().items.is_empty()
    }

    /// Asks the sink task to flush what a write made outside it left unsent.
    pub fn request_flush(&self) {
        self.flush_wanted.store(true, Ordering::Release);
        self.ready.notify_one();
    }

    /// Waits until something is queued or a flush is asked for. Take the items with
    /// [`OutboundQueue::drain_into`] once the connection's writer is held, so that nothing
    /// written directly can overtake them.
    pub async fn wait(&self) {
        loop {
            if self.flush_wanted.load(Ordering::Acquire) || !self.is_empty() {
                return;
            }
            // A push or a flush request between the check and here left a permit: this
            // returns at once.
            self.ready.notified().await;
        }
    }

    /// Moves everything queued into `into`, and clears the flush request.
    pub fn drain_into(&self, into: &mut Vec<Outbound>) {
        self.flush_wanted.store(false, Ordering::Release);
        let mut queued = self.lock();
        queued.bytes = 0;
        into.extend(queued.items.drain(..));
    }

    /// Queues items without waiting; false (and nothing queued) when they would pass the
    /// capacity in items or in bytes.
    pub fn push_many(&self, new: Vec<Outbound>) -> bool {
        if new.is_empty() {
            return true;
        }
        let bytes: usize = new.iter().map(Outbound::size).sum();
        {
            let mut queued = self.lock();
            if queued.items.len() + new.len() > self.capacity
                || queued.bytes + bytes > self.max_bytes
            {
                return false;
            }
            queued.bytes += bytes;
            queued.items.extend(new);
        }
        self.ready.notify_one();
        true
    }
}

/// Writes a connection's items to its socket at once, from the thread that releases them,
/// when the connection's writer is free and nothing is queued before them.
///
/// Why: waking the connection's sink task for each durable batch put a scheduling delay
/// (on an idle CPU, a fraction of a millisecond) between the flush and every reply and
/// event. Written where they are released, they leave as soon as they are durable.
pub trait DirectWrite: Send + Sync + std::fmt::Debug {
    /// Writes what it can of `items`, in order, without waiting; returns the rest (from the
    /// first item it could not write), to be queued behind.
    fn write_now(&self, items: Vec<Outbound>, queue: &OutboundQueue) -> Vec<Outbound>;
}

/// The handle others hold on one connection.
#[derive(Debug, Clone)]
pub struct ConnHandle {
    pub id: ConnId,
    pub outbound: Arc<OutboundQueue>,
    pub control: Arc<ConnControl>,
    /// The connection's writer, when items may be written without its sink task.
    pub direct: Option<Arc<dyn DirectWrite>>,
}

impl ConnHandle {
    /// Queues an item without waiting; see [`ConnHandle::push_many`].
    pub fn push(&self, item: Outbound) -> bool {
        self.push_many(vec![item])
    }

    /// Writes items to the socket at once when nothing is ahead of them (see
    /// [`DirectWrite`]) and queues the rest, never waiting; a full queue closes the
    /// connection as a slow consumer. Returns whether every item was written or queued.
    pub fn push_many(&self, items: Vec<Outbound>) -> bool {
        let items = match &self.direct {
            Some(direct) if !self.control.is_closing() => direct.write_now(items, &self.outbound),
            _ => items,
        };
        if self.outbound.push_many(items) {
            true
        } else {
            self.control.close(CloseCode::SlowConsumer);
            false
        }
    }
}

fn json_string(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(&mut *out, text).expect("writing to a Vec cannot fail");
}

/// Writes an event as a JSON object (the body of `evt`, and the items of `history`).
pub fn write_event_object(out: &mut Vec<u8>, event: &EventRecord, with_key: bool) {
    match &event.stream {
        StreamKey::Room(room) => {
            out.extend_from_slice(b"\"room\":");
            json_string(out, room);
        }
        StreamKey::Inbox(_) => out.extend_from_slice(b"\"stream\":\"inbox\""),
    }
    write!(out, ",\"seq\":{},\"id\":", event.seq).expect("Vec write");
    json_string(out, &event.id);
    out.extend_from_slice(b",\"ts\":\"");
    roundtable_protocol::ts::write_millis(out, event.ts_ms);
    out.extend_from_slice(b"\",\"from\":");
    json_string(out, &event.from);
    out.extend_from_slice(b",\"kind\":");
    json_string(out, &event.kind);
    out.extend_from_slice(b",\"body\":");
    out.extend_from_slice(event.body.as_bytes());
    if with_key && let Some(key) = &event.client_key {
        out.extend_from_slice(b",\"client_key\":");
        json_string(out, key);
    }
}

fn finish(out: Vec<u8>) -> String {
    String::from_utf8(out).expect("frames are built from UTF-8 strings")
}

/// `{"t":"evt",...}`.
pub fn event_frame(event: &EventRecord, with_key: bool) -> String {
    let mut out = Vec::with_capacity(160 + event.body.len());
    out.extend_from_slice(b"{\"t\":\"evt\",");
    write_event_object(&mut out, event, with_key);
    out.push(b'}');
    finish(out)
}

/// The `ok` of `send`: `{"t":"ok","re":N,"event":{...},"dup":false}`.
pub fn sent_frame(re: u64, event: &EventRecord, dup: bool) -> String {
    let mut out = Vec::with_capacity(180 + event.body.len());
    write!(out, "{{\"t\":\"ok\",\"re\":{re},\"event\":{{").expect("Vec write");
    write_event_object(&mut out, event, true);
    write!(out, "}},\"dup\":{dup}}}").expect("Vec write");
    finish(out)
}

/// The `ok` of `history`; `caller` sees the `client_key` of its own events; `more` when
/// the page was cut short by its size.
pub fn history_frame(re: u64, events: &[EventRecord], more: bool, caller: &str) -> String {
    let mut out = Vec::with_capacity(64 + events.iter().map(|e| 160 + e.body.len()).sum::<usize>());
    write!(out, "{{\"t\":\"ok\",\"re\":{re},\"events\":[").expect("Vec write");
    for (index, event) in events.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.push(b'{');
        write_event_object(&mut out, event, event.from == caller);
        out.push(b'}');
    }
    out.push(b']');
    if more {
        out.extend_from_slice(b",\"more\":true");
    }
    out.push(b'}');
    finish(out)
}

/// An `err` frame.
pub fn err_frame(re: Option<u64>, refusal: &Refusal) -> String {
    serde_json::to_string(&roundtable_protocol::ServerFrame::Err(ErrReply {
        re,
        code: refusal.code,
        msg: refusal.msg.clone(),
        retry_after_ms: refusal.retry_after_ms,
    }))
    .expect("err frames serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_protocol::ServerFrame;
    use roundtable_protocol::server::{Event, HistoryOk, SendOk};
    use serde_json::json;

    fn record(stream: StreamKey) -> EventRecord {
        EventRecord {
            stream,
            seq: 42,
            id: "e_1".into(),
            ts_ms: 1_796_115_600_123,
            from: "p_\"quoted\"".into(),
            kind: "message".into(),
            body: r#"{"text":"hi \u00e9 \"x\""}"#.into(),
            client_key: Some("key-\\-0001".into()),
            mentions: vec![],
            pair: false,
        }
    }

    fn expected(record: &EventRecord, with_key: bool) -> Event {
        Event {
            room: match &record.stream {
                StreamKey::Room(room) => Some(room.clone()),
                StreamKey::Inbox(_) => None,
            },
            stream: match &record.stream {
                StreamKey::Room(_) => None,
                StreamKey::Inbox(_) => Some("inbox".into()),
            },
            seq: record.seq,
            id: record.id.clone(),
            ts: "2026-12-01T09:00:00.123Z".into(),
            from: record.from.clone(),
            kind: record.kind.clone(),
            body: serde_json::from_str(&record.body).unwrap(),
            client_key: if with_key {
                record.client_key.clone()
            } else {
                None
            },
        }
    }

    #[test]
    fn hand_encoded_frames_match_the_protocol_types() {
        for stream in [
            StreamKey::Room("r_1".into()),
            StreamKey::Inbox("p_1".into()),
        ] {
            let event = record(stream);
            for with_key in [false, true] {
                let frame = ServerFrame::from_json(&event_frame(&event, with_key)).unwrap();
                assert_eq!(frame, ServerFrame::Evt(expected(&event, with_key)));
            }
            let ServerFrame::Ok(ok) = ServerFrame::from_json(&sent_frame(9, &event, true)).unwrap()
            else {
                panic!("not ok")
            };
            assert_eq!(ok.re, 9);
            assert_eq!(
                ok.decode::<SendOk>().unwrap(),
                SendOk {
                    event: expected(&event, true),
                    dup: true
                }
            );
        }
    }

    #[test]
    fn history_shows_keys_of_the_callers_own_events_only() {
        let mine = record(StreamKey::Room("r".into()));
        let mut theirs = record(StreamKey::Room("r".into()));
        theirs.from = "p_other".into();
        let frame = history_frame(3, &[mine.clone(), theirs.clone()], false, &mine.from);
        let ServerFrame::Ok(ok) = ServerFrame::from_json(&frame).unwrap() else {
            panic!("not ok")
        };
        let history: HistoryOk = ok.decode().unwrap();
        assert_eq!(
            history.events,
            vec![expected(&mine, true), expected(&theirs, false)]
        );
        assert!(!history.more);
        let empty = history_frame(4, &[], false, "p");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&empty).unwrap(),
            json!({"t": "ok", "re": 4, "events": []})
        );
        let cut = history_frame(5, std::slice::from_ref(&mine), true, "p");
        let ServerFrame::Ok(ok) = ServerFrame::from_json(&cut).unwrap() else {
            panic!("not ok")
        };
        assert!(ok.decode::<HistoryOk>().unwrap().more);
    }

    #[tokio::test]
    async fn the_queue_refuses_what_passes_its_capacity_and_keeps_order() {
        let queue = OutboundQueue::new(3, 1 << 20);
        assert!(queue.push_many(vec![
            Outbound::Frame("a".into()),
            Outbound::Frame("b".into())
        ]));
        assert!(!queue.push_many(vec![
            Outbound::Frame("c".into()),
            Outbound::Frame("d".into())
        ]));
        assert!(queue.push_many(vec![Outbound::Frame("c".into())]));
        let mut taken = Vec::new();
        queue.wait().await;
        queue.drain_into(&mut taken);
        let texts: Vec<_> = taken
            .iter()
            .map(|item| match item {
                Outbound::Frame(text) => text.as_str(),
                _ => "?",
            })
            .collect();
        assert_eq!(texts, vec!["a", "b", "c"]);
        // A push wakes a waiting taker.
        let queue = Arc::new(queue);
        let waiter = tokio::spawn({
            let queue = queue.clone();
            async move {
                let mut taken = Vec::new();
                queue.wait().await;
                queue.drain_into(&mut taken);
                taken.len()
            }
        });
        tokio::task::yield_now().await;
        assert!(queue.push_many(vec![Outbound::Frame("e".into())]));
        assert_eq!(waiter.await.unwrap(), 1);
    }

    #[test]
    fn the_queue_refuses_what_passes_its_bytes_and_counts_them_again_once_drained() {
        let queue = OutboundQueue::new(100, 1000);
        let frame = |size: usize| Outbound::Frame("x".repeat(size));
        assert!(queue.push_many(vec![frame(400), frame(400)]));
        assert!(!queue.push_many(vec![frame(201)]), "1001 bytes");
        assert!(queue.push_many(vec![frame(200)]), "1000 bytes");
        let mut taken = Vec::new();
        queue.drain_into(&mut taken);
        assert_eq!(taken.len(), 3);
        assert!(queue.push_many(vec![frame(1000)]), "drained: room again");
        assert!(!queue.push_many(vec![frame(1)]));
    }

    #[tokio::test]
    async fn the_first_close_code_wins() {
        let control = ConnControl::default();
        control.close(CloseCode::SlowConsumer);
        control.close(CloseCode::Replaced);
        control.end(Closing::PeerGone);
        assert_eq!(
            control.closed().await,
            Closing::Code(CloseCode::SlowConsumer)
        );
        assert_eq!(control.close_code(), Some(CloseCode::SlowConsumer));
    }
}
