//! The connection's sending half: the writer that holds the socket and the per-stream
//! high-water marks, the direct write the flush thread makes through it when nothing is
//! ahead, and the sink task that drains the queue in order (replies, live events, `sync`
//! replays), sends heartbeats and the closing frame.

use super::reader::count_bad_frame;
use super::*;

/// Why the sink stopped writing.
pub(super) enum Stop {
    Closing(Closing),
    SocketGone,
}

/// A connection's write half and the state its writes depend on. The sink task holds it
/// while it writes; the flush thread writes through it directly when it is free.
pub(super) struct SinkState<S = Sink> {
    pub(super) sink: S,
    /// Per stream (room id or `inbox`), the highest `seq` delivered on this connection.
    pub(super) delivered: FxHashMap<String, u64>,
    /// Whether the writer delivers live events here (after the first `sync`).
    pub(super) live: bool,
}

impl<S> SinkState<S> {
    /// The message for an item that needs nothing but this state: `Ok(None)` when there
    /// is nothing to write (an event already delivered), `Err` with the item when it needs
    /// the sink task (an error answer or a `sync`).
    fn message(&mut self, item: Outbound, metrics: &Metrics) -> Result<Option<Message>, Outbound> {
        match item {
            Outbound::Frame(frame) => Ok(Some(text(frame))),
            Outbound::Sent { re, event, dup } => {
                // Its own event counts as delivered on this connection, so a later `sync`
                // does not send it again. Live, every earlier event of the room this
                // connection may see was queued before this reply.
                if self.live
                    && let StreamKey::Room(room) = &event.stream
                {
                    match self.delivered.get_mut(room.as_str()) {
                        Some(high) => *high = (*high).max(event.seq),
                        None => {
                            self.delivered.insert(room.clone(), event.seq);
                        }
                    }
                }
                Ok(Some(text(sent_frame(re, &event, dup))))
            }
            Outbound::Event { event, with_key } => {
                let stream = match &event.record.stream {
                    StreamKey::Room(room) => room.as_str(),
                    StreamKey::Inbox(_) => "inbox",
                };
                let seq = event.record.seq;
                match self.delivered.get_mut(stream) {
                    Some(high) if *high >= seq => return Ok(None),
                    Some(high) => *high = seq,
                    None => {
                        self.delivered.insert(stream.to_owned(), seq);
                    }
                }
                metrics.events_delivered.fetch_add(1, Ordering::Relaxed);
                metrics.delivery_latency.observe(event.committed.elapsed());
                Ok(Some(Message::Text(event.frame(with_key))))
            }
            item @ (Outbound::Err { .. } | Outbound::Sync { .. }) => Err(item),
        }
    }
}

/// The connection's writer, shared by its sink task and whoever releases items to it.
pub(super) struct ConnWriter<S = Sink> {
    pub(super) state: tokio::sync::Mutex<SinkState<S>>,
    pub(super) metrics: Arc<Metrics>,
}

impl<S> std::fmt::Debug for ConnWriter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnWriter").finish_non_exhaustive()
    }
}

impl<S> DirectWrite for ConnWriter<S>
where
    S: futures_util::Sink<Message> + Unpin + Send + 'static,
{
    fn write_now(&self, items: Vec<Outbound>, queue: &OutboundQueue) -> Vec<Outbound> {
        // The sink task holds the writer from before it drains the queue until it has
        // written what it drained: free writer and empty queue mean nothing is ahead.
        let Ok(mut state) = self.state.try_lock() else {
            return items;
        };
        if !queue.is_empty() {
            return items;
        }
        let state = &mut *state;
        // Nothing here waits: whatever cannot be written at once is left to the sink task,
        // which polls again with its own waker.
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let mut items = items.into_iter();
        let mut rest = Vec::new();
        let mut wrote = false;
        for item in items.by_ref() {
            let ready = futures_util::Sink::poll_ready(Pin::new(&mut state.sink), &mut context);
            if !matches!(ready, Poll::Ready(Ok(()))) {
                rest.push(item);
                break;
            }
            match state.message(item, &self.metrics) {
                Ok(Some(message)) => {
                    wrote = true;
                    if futures_util::Sink::start_send(Pin::new(&mut state.sink), message).is_err() {
                        // The socket is gone: the sink task finds out when it flushes.
                        break;
                    }
                }
                Ok(None) => {}
                Err(item) => {
                    rest.push(item);
                    break;
                }
            }
        }
        rest.extend(items);
        if wrote {
            let flushed = futures_util::Sink::poll_flush(Pin::new(&mut state.sink), &mut context);
            if !matches!(flushed, Poll::Ready(Ok(()))) {
                queue.request_flush();
            }
        }
        rest
    }
}

/// The connection's sink task: writes what is queued for it (answers of reads, `sync`
/// replays, whatever could not be written directly), heartbeats, and the closing frame.
pub(super) struct SinkTask {
    pub(super) writer: Arc<ConnWriter>,
    pub(super) queue: Arc<OutboundQueue>,
    /// Watches `control`: the sink stops writing as soon as the connection is to end.
    pub(super) closing: tokio::sync::watch::Receiver<Option<Closing>>,
    pub(super) control: Arc<ConnControl>,
    pub(super) context: Arc<HubContext>,
    pub(super) caller: Arc<Caller>,
    /// When the recent `bad_frame` answers were written (for the 1008 rule).
    pub(super) bad_frames: VecDeque<Instant>,
}

/// How many replayed events the sink writes before it flushes the socket.
pub(super) const WRITE_BATCH: usize = 64;

impl SinkTask {
    pub(super) async fn run(mut self) {
        let mut heartbeat = tokio::time::interval(self.context.config.heartbeat);
        heartbeat.tick().await;
        let queue = self.queue.clone();
        let writer = self.writer.clone();
        let mut items = Vec::new();
        // What was drained from the queue but not written when the connection began to
        // close: the close below writes it first (for a 4010 or 4011).
        let mut unwritten = Vec::new();
        let stop = 'serve: loop {
            tokio::select! {
                biased;
                closing = wait_closing(&mut self.closing) => break Stop::Closing(closing),
                () = queue.wait() => {}
                _ = heartbeat.tick() => {
                    let mut state = writer.state.lock().await;
                    match self.write(&mut state, Message::Ping(Default::default())).await {
                        Ok(()) => match self.flush(&mut state).await {
                            Ok(()) => continue,
                            Err(stop) => break stop,
                        },
                        Err(stop) => break stop,
                    }
                }
            };
            // The writer is held from before the queue is drained until it is written, so
            // nothing written directly overtakes what was queued. Then one flush.
            let mut state = writer.state.lock().await;
            queue.drain_into(&mut items);
            let mut drained = items.drain(..);
            while let Some(item) = drained.next() {
                if let Err(stop) = self.handle(&mut state, item).await {
                    unwritten.extend(drained);
                    break 'serve stop;
                }
            }
            if let Err(stop) = self.flush(&mut state).await {
                break stop;
            }
        };
        if let Stop::Closing(Closing::Code(code)) = stop {
            // Give a slow peer time to read what is queued and the close frame itself.
            let grace = close_grace(&self.context.config);
            let metrics = self.context.metrics.clone();
            let _ = tokio::time::timeout(grace, async {
                let mut state = writer.state.lock().await;
                // A revoked or rotated token, or a stopped agent: what was queued before the
                // close still goes out first, above all the `ok` of the `user_token` that
                // closed it, which carries the new token. (A slow consumer's queue is what
                // it could not read: that is dropped.)
                if matches!(code, CloseCode::TokenRevoked | CloseCode::Stopped) {
                    queue.drain_into(&mut items);
                    for item in unwritten.drain(..).chain(items.drain(..)) {
                        let message = match item {
                            Outbound::Err { re, refusal } => Some(text(err_frame(re, &refusal))),
                            item => state.message(item, &metrics).ok().flatten(),
                        };
                        if let Some(message) = message {
                            state.sink.feed(message).await?;
                        }
                    }
                }
                state.sink.send(close_message(code)).await?;
                state.sink.close().await
            })
            .await;
        }
        self.control.end(Closing::PeerGone);
    }

    async fn write(&mut self, state: &mut SinkState, message: Message) -> Result<(), Stop> {
        tokio::select! {
            biased;
            result = state.sink.feed(message) => result.map_err(|_| Stop::SocketGone),
            closing = wait_closing(&mut self.closing) => Err(Stop::Closing(closing)),
        }
    }

    async fn flush(&mut self, state: &mut SinkState) -> Result<(), Stop> {
        tokio::select! {
            biased;
            result = state.sink.flush() => result.map_err(|_| Stop::SocketGone),
            closing = wait_closing(&mut self.closing) => Err(Stop::Closing(closing)),
        }
    }

    async fn handle(&mut self, state: &mut SinkState, item: Outbound) -> Result<(), Stop> {
        match state.message(item, &self.context.metrics) {
            Ok(Some(message)) => self.write(state, message).await,
            Ok(None) => Ok(()),
            Err(Outbound::Err { re, refusal }) => {
                self.write(state, text(err_frame(re, &refusal))).await?;
                if refusal.code == ErrorCode::BadFrame {
                    count_bad_frame(&mut self.bad_frames, &self.control);
                }
                Ok(())
            }
            Err(Outbound::Sync { re, cursors }) => self.serve_sync(state, re, cursors).await,
            Err(_) => unreachable!("SinkState::message hands back only errors and syncs"),
        }
    }

    /// Replays every readable stream from the client's cursors (or from what this
    /// connection already delivered, whichever is later), then answers with the heads.
    /// The replay is planned at once and read page by page, each page written (and, when
    /// the socket is slow, waited for) before the next is read: however much is missing,
    /// the hub holds one page of it.
    async fn serve_sync(
        &mut self,
        state: &mut SinkState,
        re: u64,
        cursors: BTreeMap<String, u64>,
    ) -> Result<(), Stop> {
        if !state.live {
            if !self.context.dispatch.subscribe(self.caller.conn) {
                return Err(Stop::Closing(Closing::Code(CloseCode::HubRestarting)));
            }
            state.live = true;
        }
        let principal = self.caller.id.clone();
        let mut starts: HashMap<StreamKey, u64> = HashMap::new();
        for (name, cursor) in &cursors {
            let key = if name == "inbox" {
                StreamKey::Inbox(principal.clone())
            } else {
                StreamKey::Room(name.clone())
            };
            starts.insert(key, *cursor);
        }
        for (name, high) in &state.delivered {
            let key = if name == "inbox" {
                StreamKey::Inbox(principal.clone())
            } else {
                StreamKey::Room(name.clone())
            };
            let start = starts.entry(key).or_insert(0);
            *start = (*start).max(*high);
        }
        let reader = self.context.reader.clone();
        let replay_max = self.context.config.replay_max;
        let planned = tokio::task::spawn_blocking(move || {
            crate::reads::sync_plan(
                &*reader,
                &principal,
                &|stream| starts.get(stream).copied().unwrap_or(0),
                replay_max,
            )
        })
        .await;
        let Ok(Ok(plan)) = planned else {
            if let Ok(Err(error)) = planned {
                warn!(%error, "sync read failed");
            }
            return self.refuse_sync(state, re).await;
        };
        let streams: Arc<[StreamPlan]> = Arc::from(plan.streams);
        // Streams whose `gap` (if any) has been written: each before its first event.
        let mut announced = 0;
        let mut written = 0;
        let mut position = ReplayPosition::start(&streams);
        while let Some(from) = position {
            let reader = self.context.reader.clone();
            let principal = self.caller.id.clone();
            let is_agent = self.caller.kind == PrincipalKind::Agent;
            let page_bytes = self.context.config.page_bytes;
            let plan = streams.clone();
            let read = tokio::task::spawn_blocking(move || {
                let reading = crate::reads::Reader {
                    principal: &principal,
                    is_agent,
                };
                crate::reads::replay_page(&*reader, reading, &plan, from, page_bytes)
            })
            .await;
            let Ok(Ok(page)) = read else {
                if let Ok(Err(error)) = read {
                    warn!(%error, "sync read failed");
                }
                return self.refuse_sync(state, re).await;
            };
            for (index, event) in page.events {
                while announced <= index {
                    self.announce_gap(state, &streams[announced]).await?;
                    announced += 1;
                }
                let with_key = event.from == self.caller.id;
                self.write(state, text(event_frame(&event, with_key)))
                    .await?;
                written += 1;
                if written % WRITE_BATCH == 0 {
                    self.flush(state).await?;
                }
            }
            position = page.next;
        }
        while announced < streams.len() {
            self.announce_gap(state, &streams[announced]).await?;
            announced += 1;
        }
        let mut heads = BTreeMap::new();
        for planned in streams.iter() {
            let name = match &planned.stream {
                StreamKey::Room(room) => room.clone(),
                StreamKey::Inbox(_) => "inbox".to_owned(),
            };
            let high = state.delivered.entry(name.clone()).or_insert(0);
            *high = (*high).max(planned.head);
            heads.insert(name, planned.head);
        }
        let read_markers = plan
            .read_markers
            .into_iter()
            .map(|(stream, seq)| match stream {
                StreamKey::Room(room) => (room, seq),
                StreamKey::Inbox(_) => ("inbox".to_owned(), seq),
            })
            .collect();
        let ok = OkReply::with(
            re,
            &SyncOk {
                heads,
                read: read_markers,
            },
        );
        self.write(state, text(ServerFrame::Ok(ok).to_json())).await
    }

    /// Writes a stream's `gap`, if its plan has one.
    async fn announce_gap(
        &mut self,
        state: &mut SinkState,
        planned: &StreamPlan,
    ) -> Result<(), Stop> {
        if let (Some((from, to)), StreamKey::Room(room)) = (planned.gap, &planned.stream) {
            let gap = ServerFrame::Gap(Gap {
                room: room.clone(),
                from,
                to,
            });
            self.write(state, text(gap.to_json())).await?;
        }
        Ok(())
    }

    async fn refuse_sync(&mut self, state: &mut SinkState, re: u64) -> Result<(), Stop> {
        let refusal = Refusal::new(ErrorCode::Internal, "the hub could not read; sync again");
        self.write(state, text(err_frame(Some(re), &refusal))).await
    }
}

#[cfg(test)]
mod tests {
    //! The direct write's rules: only when nothing is ahead, in order, never waiting.

    use std::time::Duration;

    use super::*;
    use crate::delivery::LiveEvent;
    use roundtable_engine::records::EventRecord;

    /// A sink that takes `capacity` messages, then is not ready; its flush completes only
    /// when told to.
    struct TestSink {
        written: Vec<String>,
        capacity: usize,
        flushes: bool,
    }

    impl futures_util::Sink<Message> for TestSink {
        type Error = WsError;

        fn poll_ready(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> Poll<Result<(), WsError>> {
            if self.written.len() < self.capacity {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        }

        fn start_send(self: Pin<&mut Self>, message: Message) -> Result<(), WsError> {
            match message {
                Message::Text(text) => self.get_mut().written.push(text.to_string()),
                other => panic!("unexpected {other:?}"),
            }
            Ok(())
        }

        fn poll_flush(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> Poll<Result<(), WsError>> {
            if self.flushes {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        }

        fn poll_close(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> Poll<Result<(), WsError>> {
            Poll::Ready(Ok(()))
        }
    }

    fn writer(capacity: usize, flushes: bool) -> ConnWriter<TestSink> {
        ConnWriter {
            state: tokio::sync::Mutex::new(SinkState {
                sink: TestSink {
                    written: Vec::new(),
                    capacity,
                    flushes,
                },
                delivered: FxHashMap::default(),
                live: true,
            }),
            metrics: Arc::new(Metrics::default()),
        }
    }

    fn event(seq: u64) -> Outbound {
        let record = EventRecord {
            stream: StreamKey::Room("r_1".into()),
            seq,
            id: format!("e_{seq}"),
            ts_ms: 0,
            from: "u_1".into(),
            kind: "message".into(),
            body: format!(r#"{{"text":"m{seq}"}}"#),
            client_key: None,
            mentions: Vec::new(),
            pair: false,
        };
        Outbound::Event {
            event: Arc::new(LiveEvent::new(Arc::new(record), Instant::now())),
            with_key: false,
        }
    }

    fn frame(text: &str) -> Outbound {
        Outbound::Frame(text.into())
    }

    /// The seqs (events) and texts (frames) of what was written or handed back.
    fn labels(texts: &[String]) -> Vec<String> {
        texts
            .iter()
            .map(
                |text| match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(value) => format!("evt {}", value["seq"]),
                    Err(_) => text.clone(),
                },
            )
            .collect()
    }

    fn item_labels(items: &[Outbound]) -> Vec<String> {
        items
            .iter()
            .map(|item| match item {
                Outbound::Frame(text) => text.clone(),
                Outbound::Event { event, .. } => format!("evt {}", event.record.seq),
                Outbound::Err { .. } => "err".into(),
                Outbound::Sync { .. } => "sync".into(),
                Outbound::Sent { .. } => "sent".into(),
            })
            .collect()
    }

    async fn written(writer: &ConnWriter<TestSink>) -> Vec<String> {
        labels(&writer.state.lock().await.sink.written)
    }

    async fn flush_requested(queue: &OutboundQueue) -> bool {
        tokio::time::timeout(Duration::from_millis(50), queue.wait())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_free_writer_writes_at_once_in_order_and_skips_what_was_delivered() {
        let writer = writer(usize::MAX, true);
        let queue = OutboundQueue::new(16, 1 << 20);
        let rest = writer.write_now(vec![event(1), frame("a"), event(2)], &queue);
        assert!(rest.is_empty());
        // Seq 2 was delivered already (by a replay): only 3 goes out.
        let rest = writer.write_now(vec![event(2), event(3)], &queue);
        assert!(rest.is_empty());
        assert_eq!(written(&writer).await, ["evt 1", "a", "evt 2", "evt 3"]);
        assert!(
            !flush_requested(&queue).await,
            "a completed flush asks for none"
        );
    }

    #[tokio::test]
    async fn nothing_is_written_past_a_held_writer_or_a_queued_item() {
        let writer = writer(usize::MAX, true);
        let queue = OutboundQueue::new(16, 1 << 20);
        {
            // The sink task holds the writer (a replay, say).
            let _held = writer.state.lock().await;
            let rest = writer.write_now(vec![event(1), event(2)], &queue);
            assert_eq!(item_labels(&rest), ["evt 1", "evt 2"]);
            assert!(queue.push_many(rest));
        }
        // Free again, but items wait in the queue: newer ones queue behind them.
        let rest = writer.write_now(vec![event(3)], &queue);
        assert_eq!(item_labels(&rest), ["evt 3"]);
        assert!(written(&writer).await.is_empty());
    }

    #[tokio::test]
    async fn what_cannot_be_written_at_once_comes_back_in_order() {
        // Room for two messages, and a flush that does not complete.
        let writer = writer(2, false);
        let queue = OutboundQueue::new(16, 1 << 20);
        let rest = writer.write_now(vec![event(1), event(2), event(3), frame("b")], &queue);
        assert_eq!(item_labels(&rest), ["evt 3", "b"]);
        assert_eq!(written(&writer).await, ["evt 1", "evt 2"]);
        assert!(
            flush_requested(&queue).await,
            "the sink task finishes the flush"
        );
    }

    #[tokio::test]
    async fn errors_and_syncs_are_left_to_the_sink_task_with_all_behind_them() {
        let writer = writer(usize::MAX, true);
        let queue = OutboundQueue::new(16, 1 << 20);
        let refusal = Refusal::new(ErrorCode::BadFrame, "no");
        let rest = writer.write_now(
            vec![
                event(1),
                Outbound::Err {
                    re: Some(7),
                    refusal,
                },
                event(2),
            ],
            &queue,
        );
        assert_eq!(item_labels(&rest), ["err", "evt 2"]);
        let rest = writer.write_now(
            vec![
                Outbound::Sync {
                    re: 8,
                    cursors: BTreeMap::new(),
                },
                frame("c"),
            ],
            &queue,
        );
        assert_eq!(item_labels(&rest), ["sync", "c"]);
        assert_eq!(written(&writer).await, ["evt 1"]);
    }
}
