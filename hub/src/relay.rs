//! A stream's relay, for hubs of several processes: what turns a fan-out that may drop,
//! repeat and reorder events (NATS core pub/sub: at most once, no order across publishers)
//! into the stream the protocol promises each connection: every event once, in `seq`
//! order, with no hole. The database holds the truth (every committed event, `seq` dense);
//! the fan-out is only a hint that makes delivery fast. An event ahead of the next one is
//! held; a hole that outlives `gap_wait_ms`, or too much held, is filled from the database;
//! a head read from the database (on reconnect, on a slow-consumer signal, every
//! `resync_ms`) catches what was never published at all (a node that died between its
//! commit and its publish).
//!
//! Sans I/O: the caller feeds events, fills and heads with the time, and does the reads the
//! relay asks for ([`Relay::fill_due`]). Design: `SCALEOUT.md` §5.2. A cluster's dispatcher
//! orders the batches of every process with one (their positions are its `seq`s).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// How long a hole waits for its event before the database fills it, and how many events
/// may wait behind a hole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelaySettings {
    pub gap_wait_ms: i64,
    pub max_held: usize,
}

impl Default for RelaySettings {
    fn default() -> RelaySettings {
        RelaySettings {
            gap_wait_ms: 50,
            max_held: 1024,
        }
    }
}

/// One stream's relay on one node.
#[derive(Debug, Clone)]
pub struct Relay<E> {
    /// The first `seq` not yet delivered.
    next: u64,
    /// Events ahead of `next`, waiting for the hole before them.
    held: BTreeMap<u64, E>,
    /// Since when the oldest hole has been open.
    hole_since_ms: Option<i64>,
    /// The highest `seq` known committed (from an event or a head read).
    known_head: u64,
    settings: RelaySettings,
}

impl<E> Relay<E> {
    /// A relay for a stream whose head in the database, read after the relay began to
    /// receive, is `head`: events up to it are each connection's replay, later ones its.
    pub fn after(head: u64, settings: RelaySettings) -> Relay<E> {
        Relay {
            next: head + 1,
            held: BTreeMap::new(),
            hole_since_ms: None,
            known_head: head,
            settings,
        }
    }

    /// The first `seq` not delivered yet.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// How many events wait behind a hole.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The event held at `seq`, to replace with a fuller copy of it.
    pub fn held_mut(&mut self, seq: u64) -> Option<&mut E> {
        self.held.get_mut(&seq)
    }

    /// An event from the fan-out (or this node's own commit). Returns what can now be
    /// delivered, in order: nothing for a repeat or an event behind a hole.
    pub fn on_event(&mut self, seq: u64, event: E, now_ms: i64) -> Vec<(u64, E)> {
        self.known_head = self.known_head.max(seq);
        if seq < self.next {
            return Vec::new();
        }
        self.held.entry(seq).or_insert(event);
        self.release(now_ms)
    }

    /// The events the database holds for a range [`Relay::fill_due`] asked for (any subset
    /// of a range, in any order, repeats included). Returns what can now be delivered.
    #[cfg(test)]
    pub fn on_fill(&mut self, events: Vec<(u64, E)>, now_ms: i64) -> Vec<(u64, E)> {
        for (seq, event) in events {
            self.known_head = self.known_head.max(seq);
            if seq >= self.next {
                self.held.entry(seq).or_insert(event);
            }
        }
        self.release(now_ms)
    }

    /// The stream's head as the database says now (a resync): events up to it that never
    /// came are a hole to fill at once.
    #[cfg(test)]
    pub fn on_head(&mut self, head: u64, now_ms: i64) {
        if head > self.known_head {
            self.known_head = head;
        }
        if self.known_head >= self.next && self.hole_since_ms.is_none() {
            // Nothing will come by the fan-out for these: no reason to wait.
            self.hole_since_ms = Some(now_ms - self.settings.gap_wait_ms);
        }
    }

    /// The `seq`s to read from the database now, if any: the hole before the first held
    /// event (or up to the known head) once it has waited `gap_wait_ms`, or at once when too
    /// much is held.
    pub fn fill_due(&self, now_ms: i64) -> Option<RangeInclusive<u64>> {
        let since = self.hole_since_ms?;
        if now_ms - since < self.settings.gap_wait_ms && self.held.len() < self.settings.max_held {
            return None;
        }
        let end = match self.held.keys().next() {
            Some(&first) => first - 1,
            None => self.known_head,
        };
        (end >= self.next).then_some(self.next..=end)
    }

    /// When [`Relay::fill_due`] may next say something (none while nothing is missing).
    #[cfg(test)]
    pub fn deadline(&self) -> Option<i64> {
        self.hole_since_ms
            .map(|since| since + self.settings.gap_wait_ms)
    }

    /// Delivers what follows `next` without a hole; keeps the hole's clock.
    fn release(&mut self, now_ms: i64) -> Vec<(u64, E)> {
        let mut out = Vec::new();
        while let Some(event) = self.held.remove(&self.next) {
            out.push((self.next, event));
            self.next += 1;
        }
        let missing = !self.held.is_empty() || self.known_head >= self.next;
        match (missing, out.is_empty()) {
            (false, _) => self.hole_since_ms = None,
            // A new hole (the old one closed): its wait starts now.
            (true, false) => self.hole_since_ms = Some(now_ms),
            (true, true) => {
                self.hole_since_ms.get_or_insert(now_ms);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SETTINGS: RelaySettings = RelaySettings {
        gap_wait_ms: 50,
        max_held: 8,
    };

    #[test]
    fn in_order_events_pass_at_once_and_repeats_are_dropped() {
        let mut relay = Relay::after(10, SETTINGS);
        assert_eq!(relay.on_event(11, "a", 0), [(11, "a")]);
        assert_eq!(relay.on_event(11, "a", 1), []);
        assert_eq!(relay.on_event(9, "old", 1), []);
        assert_eq!(relay.on_event(12, "b", 2), [(12, "b")]);
        assert_eq!(relay.fill_due(1_000), None);
        assert_eq!(relay.deadline(), None);
    }

    #[test]
    fn a_hole_waits_then_is_filled_from_the_database() {
        let mut relay = Relay::after(0, SETTINGS);
        assert_eq!(relay.on_event(3, "c", 100), []);
        assert_eq!(relay.fill_due(120), None, "the hole waits gap_wait_ms");
        assert_eq!(relay.deadline(), Some(150));
        assert_eq!(relay.fill_due(150), Some(1..=2));
        // The late event arrives meanwhile: it is used, the fill's copy dropped.
        assert_eq!(relay.on_event(1, "a", 151), [(1, "a")]);
        assert_eq!(
            relay.on_fill(vec![(2, "b"), (1, "a")], 152),
            [(2, "b"), (3, "c")]
        );
        assert_eq!(relay.held(), 0);
        assert_eq!(relay.fill_due(10_000), None);
    }

    #[test]
    fn too_much_held_is_filled_at_once() {
        let mut relay = Relay::after(0, SETTINGS);
        for seq in 2..=9 {
            assert_eq!(relay.on_event(seq, seq, 0), []);
        }
        assert_eq!(relay.fill_due(0), Some(1..=1));
    }

    #[test]
    fn a_head_ahead_of_everything_received_is_filled_without_waiting() {
        let mut relay: Relay<&str> = Relay::after(4, SETTINGS);
        relay.on_head(4, 0);
        assert_eq!(relay.fill_due(0), None, "nothing missing");
        // A node committed 5 and 6 and died before publishing them.
        relay.on_head(6, 10);
        assert_eq!(relay.fill_due(10), Some(5..=6));
        assert_eq!(
            relay.on_fill(vec![(5, "e"), (6, "f")], 11),
            [(5, "e"), (6, "f")]
        );
        assert_eq!(relay.fill_due(1_000), None);
    }

    /// What the fan-out does to one message: lose it, send it once, or twice.
    #[derive(Debug, Clone, Copy)]
    enum Fate {
        Lost,
        Once,
        Twice,
    }

    fn fates() -> impl Strategy<Value = Vec<(Fate, u8)>> {
        prop::collection::vec(
            (
                prop_oneof![1 => Just(Fate::Lost), 6 => Just(Fate::Once), 1 => Just(Fate::Twice)],
                0..12u8,
            ),
            1..200,
        )
    }

    proptest! {
        /// Whatever the fan-out loses, repeats and reorders, and however partial the fills,
        /// every event is delivered once, in order, with no hole; and once the head is read,
        /// all of them.
        #[test]
        fn every_event_is_delivered_once_in_order(
            fates in fates(),
            head in 0..5u64,
            partial in any::<bool>(),
        ) {
            let total = head + fates.len() as u64;
            // The fan-out's deliveries: (arrival time, seq); a delay reorders them.
            let mut arrivals: Vec<(i64, u64)> = Vec::new();
            for (index, (fate, delay)) in fates.iter().enumerate() {
                let seq = head + 1 + index as u64;
                let at = index as i64 * 5 + i64::from(*delay) * 7;
                match fate {
                    Fate::Lost => {}
                    Fate::Once => arrivals.push((at, seq)),
                    Fate::Twice => {
                        arrivals.push((at, seq));
                        arrivals.push((at + 3, seq));
                    }
                }
            }
            arrivals.sort();
            let mut relay = Relay::after(head, SETTINGS);
            let mut delivered: Vec<u64> = Vec::new();
            let take = |out: Vec<(u64, u64)>, delivered: &mut Vec<u64>| -> Result<(), TestCaseError> {
                for (seq, event) in out {
                    prop_assert_eq!(seq, event);
                    prop_assert_eq!(seq, head + 1 + delivered.len() as u64);
                    delivered.push(seq);
                }
                Ok(())
            };
            let fill = |relay: &mut Relay<u64>, now: i64, delivered: &mut Vec<u64>| -> Result<(), TestCaseError> {
                while let Some(range) = relay.fill_due(now) {
                    let (start, end) = (*range.start(), *range.end());
                    prop_assert!(end <= total && start == relay.next());
                    // A partial fill answers the first half only (a read cut short).
                    let end = if partial && end > start { start + (end - start) / 2 } else { end };
                    let out = relay.on_fill((start..=end).map(|seq| (seq, seq)).collect(), now);
                    for (seq, event) in out {
                        prop_assert_eq!(seq, event);
                        prop_assert_eq!(seq, head + 1 + delivered.len() as u64);
                        delivered.push(seq);
                    }
                }
                Ok(())
            };
            for (at, seq) in arrivals {
                let out = relay.on_event(seq, seq, at);
                take(out, &mut delivered)?;
                fill(&mut relay, at, &mut delivered)?;
            }
            // The resync: the database's head; then the holes left are filled.
            let end = fates.len() as i64 * 5 + 200;
            relay.on_head(total, end);
            for round in 0..400 {
                fill(&mut relay, end + round * SETTINGS.gap_wait_ms, &mut delivered)?;
                if relay.next() > total {
                    break;
                }
            }
            prop_assert_eq!(delivered, (head + 1..=total).collect::<Vec<u64>>());
            prop_assert_eq!(relay.held(), 0);
            prop_assert_eq!(relay.fill_due(i64::MAX / 2), None);
        }
    }
}
