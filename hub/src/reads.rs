//! What a principal reads back: `sync`'s plan and replay, and `history`. Written once for
//! every store, over the few primitives a store's [`ReadTx`] offers (the rooms a principal
//! is in, a stream's head, a stream's events in a range), so the policy (how far a replay
//! goes before a `gap`, how many bytes a page holds, what an agent's routing lets it see)
//! cannot differ between SQLite and PostgreSQL.

use roundtable_protocol::model::Routing;

use crate::store::{EventOrder, ReadError, ReadStore, ReadTx, SeqRange, StoreError, store_only};
use roundtable_engine::records::{EventRecord, StreamKey};
use roundtable_engine::visibility;

/// Rows one replay page reads at most: bounds its time for an agent that sees few of a
/// room's events, as `max_bytes` bounds its memory.
pub const REPLAY_PAGE_ROWS: usize = 4096;

/// What `sync` replays, stream by stream, decided from one consistent snapshot; the
/// events themselves are read afterwards page by page ([`replay_page`]), so a replay is
/// never held in memory whole.
#[derive(Debug, Default)]
pub struct SyncPlan {
    /// Every readable stream: the rooms the principal is a member of, then its inbox.
    pub streams: Vec<StreamPlan>,
    /// The principal's read markers on those streams: the highest seq any of its devices
    /// acknowledged.
    pub read_markers: Vec<(StreamKey, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPlan {
    pub stream: StreamKey,
    /// The principal's routing in the room, as of the plan (the inbox: `all`).
    pub routing: Routing,
    pub head: u64,
    /// `(from, to)`, both inclusive.
    pub gap: Option<(u64, u64)>,
    /// The replay covers the events after this seq, up to `head`.
    pub after: u64,
}

impl StreamPlan {
    /// The plan of one stream: from the principal's `cursor` (past the head: the head) to
    /// `head`, and for a room more than `replay_max` events behind, a gap over all but the
    /// last `replay_max` (an inbox is always replayed whole: it holds what was sent to the
    /// principal alone).
    pub fn new(
        stream: StreamKey,
        routing: Routing,
        head: u64,
        cursor: u64,
        replay_max: u64,
    ) -> StreamPlan {
        let mut after = cursor.min(head);
        let mut gap = None;
        if matches!(stream, StreamKey::Room(_)) && head - after > replay_max {
            let start = head - replay_max;
            gap = Some((after + 1, start));
            after = start;
        }
        StreamPlan {
            stream,
            routing,
            head,
            gap,
            after,
        }
    }
}

/// Where a replay goes on: a stream of the plan (its index) and the last seq read in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayPosition {
    pub stream: usize,
    pub after: u64,
}

impl ReplayPosition {
    /// The start of a plan's replay.
    pub fn start(plan: &[StreamPlan]) -> Option<ReplayPosition> {
        plan.first().map(|first| ReplayPosition {
            stream: 0,
            after: first.after,
        })
    }
}

/// One page of a replay.
#[derive(Debug, Default)]
pub struct ReplayPage {
    /// Events with the index of their stream in the plan: streams in plan order, each
    /// ascending, already filtered by visibility.
    pub events: Vec<(usize, EventRecord)>,
    /// Where the next page starts; `None` once the replay is complete.
    pub next: Option<ReplayPosition>,
}

/// What `history` asks for.
#[derive(Debug, Clone, Copy)]
pub struct HistoryRange {
    pub before: Option<u64>,
    pub after: Option<u64>,
    pub limit: u32,
    /// The page stops before its events' bodies pass this many bytes (it always holds at
    /// least one event when there is one).
    pub max_bytes: usize,
}

/// A page of `history`.
#[derive(Debug, Default)]
pub struct HistoryPage {
    /// Ascending `seq`.
    pub events: Vec<EventRecord>,
    /// The page was cut short of `limit` by `max_bytes`: more events are in the range.
    pub more: bool,
}

/// Who reads: an agent sees a room's events through its routing, a user sees them all.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    pub principal: &'a str,
    pub is_agent: bool,
}

impl Reader<'_> {
    fn sees(&self, event: &EventRecord, routing: Routing) -> bool {
        !self.is_agent || visibility::agent_sees(event, self.principal, routing)
    }
}

/// Runs `read` in one snapshot of `store` (held back until what it may see is durable,
/// when the store says so), and gives back what it returned.
fn in_snapshot<T>(
    store: &(impl ReadStore + ?Sized),
    settled: bool,
    read: impl FnOnce(&mut dyn ReadTx) -> Result<T, ReadError>,
) -> Result<T, ReadError> {
    let mut read = Some(read);
    let mut answer = None;
    let mut work = |tx: &mut dyn ReadTx| {
        let read = read.take().expect("a snapshot runs its read once");
        answer = Some(read(tx)?);
        Ok(())
    };
    if settled {
        store.read_settled(&mut work)?;
    } else {
        store.read(&mut work)?;
    }
    Ok(answer.expect("a snapshot that succeeds ran its read"))
}

/// Plans what `principal` may replay: each room it is a member of and its inbox, from
/// `cursors` (missing streams start at 0), with rooms gapped past `replay_max`.
pub fn sync_plan(
    store: &(impl ReadStore + ?Sized),
    principal: &str,
    cursors: &dyn Fn(&StreamKey) -> u64,
    replay_max: u64,
) -> Result<SyncPlan, StoreError> {
    let plan = in_snapshot(store, false, |tx| {
        let mut streams: Vec<StreamPlan> = tx
            .memberships(principal)?
            .into_iter()
            .map(|membership| {
                let stream = StreamKey::Room(membership.room);
                let cursor = cursors(&stream);
                StreamPlan::new(
                    stream,
                    membership.routing,
                    membership.head,
                    cursor,
                    replay_max,
                )
            })
            .collect();
        let inbox = StreamKey::Inbox(principal.to_owned());
        let head = tx.head(&inbox)?;
        let cursor = cursors(&inbox);
        streams.push(StreamPlan::new(
            inbox,
            Routing::All,
            head,
            cursor,
            replay_max,
        ));
        let read_markers = tx
            .read_markers(principal)?
            .into_iter()
            .filter(|(stream, _)| streams.iter().any(|planned| planned.stream == *stream))
            .collect();
        Ok(SyncPlan {
            streams,
            read_markers,
        })
    });
    store_only(plan, "members")
}

/// The next page of a planned replay, from `from`: events until their bodies pass
/// `max_bytes` (or [`REPLAY_PAGE_ROWS`] rows were read, for an agent that sees few of
/// them). Events up to a plan's heads never change, so pages need no common snapshot, and
/// they are not held back: the plan was, until those events were durable.
pub fn replay_page(
    store: &(impl ReadStore + ?Sized),
    reader: Reader<'_>,
    plan: &[StreamPlan],
    from: ReplayPosition,
    max_bytes: usize,
) -> Result<ReplayPage, StoreError> {
    let page = in_snapshot(store, true, |tx| {
        let mut page = ReplayPage::default();
        let mut bytes = 0;
        let mut rows_read = 0;
        let mut position = from;
        while let Some(planned) = plan.get(position.stream) {
            if position.after >= planned.head {
                position.stream += 1;
                if let Some(next) = plan.get(position.stream) {
                    position.after = next.after;
                }
                continue;
            }
            if bytes >= max_bytes || rows_read >= REPLAY_PAGE_ROWS {
                page.next = Some(position);
                return Ok(page);
            }
            let stream_index = position.stream;
            let asked = REPLAY_PAGE_ROWS - rows_read;
            let mut read_now = 0;
            let mut full = false;
            tx.events(
                &planned.stream,
                SeqRange::after_through(position.after, planned.head),
                EventOrder::Ascending,
                asked,
                &mut |event| {
                    read_now += 1;
                    position.after = event.seq;
                    if reader.sees(&event, planned.routing) {
                        bytes += event.body.len();
                        page.events.push((stream_index, event));
                    }
                    full = bytes >= max_bytes || rows_read + read_now >= REPLAY_PAGE_ROWS;
                    !full
                },
            )?;
            rows_read += read_now;
            if !full && read_now < asked {
                // Fewer rows than asked: nothing more up to the head.
                position.after = planned.head;
            }
        }
        Ok(page)
    });
    store_only(page, "events")
}

/// A page of a room's log as `reader` may see it: `NotFound` for a room that does not
/// exist, `NotMember` for one it is not in.
pub fn history(
    store: &(impl ReadStore + ?Sized),
    reader: Reader<'_>,
    room: &str,
    range: HistoryRange,
) -> Result<HistoryPage, ReadError> {
    in_snapshot(store, false, |tx| {
        if !tx.room_exists(room)? {
            return Err(ReadError::NotFound);
        }
        let Some(routing) = tx.routing(room, reader.principal)? else {
            return Err(ReadError::NotMember);
        };
        let limit = range.limit as usize;
        let before = range.before.unwrap_or(u64::MAX);
        let (seqs, order) = match range.after {
            Some(after) => (SeqRange::between(after, before), EventOrder::Ascending),
            None => (SeqRange::between(0, before), EventOrder::Descending),
        };
        let mut page = HistoryPage::default();
        let mut bytes = 0;
        if limit > 0 {
            let stream = StreamKey::Room(room.to_owned());
            // No limit on the rows: an agent may see few of them. The visit stops the read.
            tx.events(&stream, seqs, order, usize::MAX, &mut |event| {
                if reader.sees(&event, routing) {
                    if !page.events.is_empty() && bytes + event.body.len() > range.max_bytes {
                        page.more = true;
                        return false;
                    }
                    bytes += event.body.len();
                    page.events.push(event);
                }
                page.events.len() < limit
            })?;
        }
        if order == EventOrder::Descending {
            page.events.reverse();
        }
        Ok(page)
    })
}

/// The reads as a store's methods, for tests that read one store many times.
#[cfg(test)]
pub(crate) trait StoreReads {
    fn sync_plan(
        &self,
        principal: &str,
        cursors: &dyn Fn(&StreamKey) -> u64,
        replay_max: u64,
    ) -> Result<SyncPlan, StoreError>;
    fn replay_page(
        &self,
        principal: &str,
        is_agent: bool,
        plan: &[StreamPlan],
        from: ReplayPosition,
        max_bytes: usize,
    ) -> Result<ReplayPage, StoreError>;
    fn history(
        &self,
        principal: &str,
        is_agent: bool,
        room: &str,
        range: HistoryRange,
    ) -> Result<HistoryPage, ReadError>;
}

#[cfg(test)]
impl<T: ReadStore + ?Sized> StoreReads for T {
    fn sync_plan(
        &self,
        principal: &str,
        cursors: &dyn Fn(&StreamKey) -> u64,
        replay_max: u64,
    ) -> Result<SyncPlan, StoreError> {
        sync_plan(self, principal, cursors, replay_max)
    }
    fn replay_page(
        &self,
        principal: &str,
        is_agent: bool,
        plan: &[StreamPlan],
        from: ReplayPosition,
        max_bytes: usize,
    ) -> Result<ReplayPage, StoreError> {
        let reader = Reader {
            principal,
            is_agent,
        };
        replay_page(self, reader, plan, from, max_bytes)
    }
    fn history(
        &self,
        principal: &str,
        is_agent: bool,
        room: &str,
        range: HistoryRange,
    ) -> Result<HistoryPage, ReadError> {
        let reader = Reader {
            principal,
            is_agent,
        };
        history(self, reader, room, range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_room_further_behind_than_the_replay_bound_gets_a_gap_then_its_last_events() {
        let room = StreamKey::Room("r".into());
        let plan = StreamPlan::new(room.clone(), Routing::All, 100, 10, 30);
        assert_eq!(plan.gap, Some((11, 70)));
        assert_eq!(plan.after, 70);
        // Exactly at the bound: no gap.
        let plan = StreamPlan::new(room.clone(), Routing::All, 100, 70, 30);
        assert_eq!((plan.gap, plan.after), (None, 70));
        // A cursor past the head (a store restored from an older backup) starts at the head.
        let plan = StreamPlan::new(room, Routing::All, 5, 9, 30);
        assert_eq!((plan.gap, plan.after), (None, 5));
    }

    #[test]
    fn an_inbox_is_replayed_whole_however_far_behind() {
        let inbox = StreamKey::Inbox("u".into());
        let plan = StreamPlan::new(inbox, Routing::All, 1_000, 0, 30);
        assert_eq!((plan.gap, plan.after), (None, 0));
    }
}
