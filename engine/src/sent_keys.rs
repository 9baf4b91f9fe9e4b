//! The `client_key`s senders used recently, so a retried `send` returns its original event.
//!
//! Why in memory and not a unique index on disk: such an index is ordered by sender, so
//! every commit rewrote one index page per active sender: with 40 senders, up to 40 of the
//! 86 WAL pages a commit of about 100 sends wrote, and a quarter more throughput without it
//! (docs/benchmarks.md). The keys are rebuilt at start from the events themselves
//! (each stores its `client_key`), from the newest event of each room back to the
//! retention, so nothing extra is written.
//!
//! The protocol keeps keys at least 7 days; they are kept [`RETENTION_MS`] and then
//! forgotten, so memory is bounded by the sends of that period (24-byte entries: 25 to 55
//! bytes each with the tables' spare room).
//!
//! To keep entries small, a key is stored as a 64-bit keyed hash of (sender, key): a hit
//! is only a candidate, which the caller confirms against the stored event. Two different
//! keys with one hash (about one chance in 10^12 over a million keys) are both kept: the
//! later one in a small exact map.
//!
//! The entries are spread over [`SHARDS`] tables by their hash. A table that grows moves
//! all its entries at once; one table of a million keys took the writer, and with it every
//! commit, well over 100 ms to grow (docs/benchmarks.md). A shard grows with a 256th of
//! that pause, and pruning walks a few shards per call instead of every key at once.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

/// How long a key is remembered: the protocol's 7 days and one more for clock slack.
pub const RETENTION_MS: i64 = 8 * 24 * 60 * 60 * 1000;

/// How often each shard drops its entries past the retention.
const PRUNE_EVERY_MS: i64 = 60 * 60 * 1000;

/// Tables the entries are spread over (by bits 32 to 39 of their hash, which the tables
/// themselves do not use to place entries).
pub const SHARDS: usize = 256;

/// Shards one call to [`SentKeys::prune`] may walk. The writer calls it every minute, so
/// every shard is walked well within each hour.
const SHARDS_PER_PRUNE: usize = 16;

/// Where a key's event may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentAt<'a> {
    pub room: &'a str,
    pub seq: u64,
}

/// One remembered key: its event's position, and when it was sent (in seconds, which
/// is fine enough for a retention of days).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    seq: u64,
    /// Index into the room ids.
    room: u32,
    ts_s: u32,
}

impl Entry {
    fn ts_ms(self) -> i64 {
        i64::from(self.ts_s) * 1000
    }
}

fn seconds(ts_ms: i64) -> u32 {
    u32::try_from(ts_ms.div_euclid(1000)).unwrap_or(if ts_ms < 0 { 0 } else { u32::MAX })
}

/// One remembered key, as loaded from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentKeyRecord {
    pub sender: String,
    pub client_key: String,
    pub room: String,
    pub seq: u64,
    pub ts_ms: i64,
}

/// The hash is already uniform: the map uses it as is.
#[derive(Debug, Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

type ByHash = HashMap<u64, Entry, BuildHasherDefault<PassThrough>>;

#[derive(Debug, Default)]
struct Shard {
    by_hash: ByHash,
    pruned_ms: i64,
}

#[derive(Debug)]
pub struct SentKeys {
    /// Keyed by a random-keyed hash: a sender cannot aim collisions at others' keys.
    hasher: RandomState,
    shards: Box<[Shard]>,
    /// Keys whose hash another key already holds.
    exact: HashMap<(Box<str>, Box<str>), Entry>,
    /// Room ids by index (entries hold the index), how many entries name each, the
    /// indexes of the ids in use and the free ones.
    room_ids: Vec<Box<str>>,
    room_entries: Vec<u64>,
    room_index: HashMap<Box<str>, u32>,
    free_rooms: Vec<u32>,
    /// The shard the next prune starts at.
    prune_cursor: usize,
}

impl Default for SentKeys {
    fn default() -> SentKeys {
        SentKeys {
            hasher: RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| Shard {
                    by_hash: ByHash::default(),
                    pruned_ms: i64::MIN,
                })
                .collect(),
            exact: HashMap::new(),
            room_ids: Vec::new(),
            room_entries: Vec::new(),
            room_index: HashMap::new(),
            free_rooms: Vec::new(),
            prune_cursor: 0,
        }
    }
}

impl SentKeys {
    pub fn from_records(records: Vec<SentKeyRecord>) -> SentKeys {
        let mut keys = SentKeys::default();
        for record in records {
            keys.insert(
                &record.sender,
                &record.client_key,
                &record.room,
                record.seq,
                record.ts_ms,
            );
        }
        keys
    }

    fn hash(&self, sender: &str, client_key: &str) -> u64 {
        self.hasher.hash_one((sender, client_key))
    }

    fn shard_index(hash: u64) -> usize {
        usize::from((hash >> 32) as u8)
    }

    fn shard(&self, hash: u64) -> &ByHash {
        &self.shards[Self::shard_index(hash)].by_hash
    }

    /// Where `sender`'s `client_key` may have been stored: the exact entry if there is one,
    /// else the candidate with the same hash, which the caller must confirm.
    pub fn find(&self, sender: &str, client_key: &str) -> Vec<SentAt<'_>> {
        let mut found = Vec::new();
        // Almost always empty: skip building its key.
        if !self.exact.is_empty()
            && let Some(entry) = self.exact.get(&(Box::from(sender), Box::from(client_key)))
        {
            found.push(self.sent_at(*entry));
        }
        let hash = self.hash(sender, client_key);
        if let Some(entry) = self.shard(hash).get(&hash) {
            found.push(self.sent_at(*entry));
        }
        found
    }

    fn sent_at(&self, entry: Entry) -> SentAt<'_> {
        SentAt {
            room: &self.room_ids[entry.room as usize],
            seq: entry.seq,
        }
    }

    /// Remembers a key just stored (the caller has checked it was not used).
    pub fn insert(&mut self, sender: &str, client_key: &str, room: &str, seq: u64, ts_ms: i64) {
        let entry = self.entry(room, seq, ts_ms);
        let hash = self.hash(sender, client_key);
        self.file(hash, sender, client_key, entry);
    }

    /// An entry for a key of `room`, counted as naming the room.
    fn entry(&mut self, room: &str, seq: u64, ts_ms: i64) -> Entry {
        let index = match self.room_index.get(room) {
            Some(index) => *index,
            None => {
                let index = match self.free_rooms.pop() {
                    Some(index) => {
                        self.room_ids[index as usize] = Box::from(room);
                        index
                    }
                    None => {
                        self.room_ids.push(Box::from(room));
                        self.room_entries.push(0);
                        u32::try_from(self.room_ids.len() - 1).expect("fewer than 2^32 rooms")
                    }
                };
                self.room_index.insert(Box::from(room), index);
                index
            }
        };
        self.room_entries[index as usize] += 1;
        Entry {
            seq,
            room: index,
            ts_s: seconds(ts_ms),
        }
    }

    /// Files a key under its hash, or in the exact map when another key holds the hash.
    fn file(&mut self, hash: u64, sender: &str, client_key: &str, entry: Entry) {
        match self.shards[Self::shard_index(hash)].by_hash.entry(hash) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(entry);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.exact
                    .insert((Box::from(sender), Box::from(client_key)), entry);
            }
        }
    }

    /// Forgets keys older than the retention, walking at most `SHARDS_PER_PRUNE` shards
    /// not walked in the last hour. A key is kept at least [`RETENTION_MS`], and forgotten
    /// within an hour after if this is called every few minutes.
    pub fn prune(&mut self, now_ms: i64) {
        let cutoff = now_ms.saturating_sub(RETENTION_MS);
        let mut walked = 0;
        for _ in 0..SHARDS {
            if walked == SHARDS_PER_PRUNE {
                break;
            }
            let index = self.prune_cursor;
            self.prune_cursor = (index + 1) % SHARDS;
            let Self {
                shards,
                exact,
                room_entries,
                ..
            } = self;
            let mut forget = |entry: &Entry| {
                let keep = entry.ts_ms() >= cutoff;
                if !keep {
                    room_entries[entry.room as usize] -= 1;
                }
                keep
            };
            let shard = &mut shards[index];
            if now_ms.saturating_sub(shard.pruned_ms) < PRUNE_EVERY_MS {
                continue;
            }
            shard.pruned_ms = now_ms;
            shard.by_hash.retain(|_, entry| forget(entry));
            walked += 1;
            if index == SHARDS - 1 {
                // A sweep ends: the exact map (almost always empty) and the room ids too.
                exact.retain(|_, entry| forget(entry));
                self.free_unused_rooms();
            }
        }
    }

    /// Frees the ids of rooms no entry names any more.
    fn free_unused_rooms(&mut self) {
        let Self {
            room_entries,
            free_rooms,
            room_index,
            room_ids,
            ..
        } = self;
        room_index.retain(|_, index| {
            let used = room_entries[*index as usize] > 0;
            if !used {
                free_rooms.push(*index);
                room_ids[*index as usize] = Box::from("");
            }
            used
        });
    }

    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.by_hash.len())
            .sum::<usize>()
            + self.exact.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_found_for_its_sender_only() {
        let mut keys = SentKeys::default();
        keys.insert("u1", "key-0001", "r1", 4, 1_000);
        let found = keys.find("u1", "key-0001");
        assert_eq!(found, vec![SentAt { room: "r1", seq: 4 }]);
        assert!(keys.find("u2", "key-0001").is_empty());
        assert!(keys.find("u1", "key-0002").is_empty());
        // (sender, key) is hashed as a pair: moving characters across does not match.
        assert!(keys.find("u1k", "ey-0001").is_empty());
    }

    #[test]
    fn colliding_keys_are_both_kept() {
        let mut keys = SentKeys::default();
        let hash = keys.hash("u1", "first-key");
        let first = keys.entry("r", 1, 1);
        keys.file(hash, "u1", "first-key", first);
        // Another key forced onto the same hash goes to the exact map.
        let other = keys.entry("r", 2, 1);
        keys.file(hash, "u1", "other-key", other);
        assert_eq!(keys.len(), 2);
        let seqs: Vec<u64> = keys.find("u1", "first-key").iter().map(|a| a.seq).collect();
        assert_eq!(seqs, vec![1]);
        // The other key finds its exact entry.
        let seqs: Vec<u64> = keys.find("u1", "other-key").iter().map(|a| a.seq).collect();
        assert_eq!(seqs, vec![2]);
    }

    #[test]
    fn keys_past_the_retention_are_forgotten() {
        let day = 24 * 60 * 60 * 1000;
        let mut keys = SentKeys::from_records(vec![
            SentKeyRecord {
                sender: "u".into(),
                client_key: "old-key-1".into(),
                room: "r".into(),
                seq: 1,
                ts_ms: 0,
            },
            SentKeyRecord {
                sender: "u".into(),
                client_key: "new-key-2".into(),
                room: "r".into(),
                seq: 2,
                ts_ms: day + 1,
            },
        ]);
        let sweep = |keys: &mut SentKeys, now_ms| {
            for _ in 0..SHARDS / SHARDS_PER_PRUNE {
                keys.prune(now_ms);
            }
        };
        sweep(&mut keys, 7 * day);
        assert_eq!(keys.len(), 2, "7 days are always kept");
        sweep(&mut keys, 9 * day);
        assert_eq!(keys.len(), 1);
        assert!(keys.find("u", "old-key-1").is_empty());
        assert_eq!(keys.find("u", "new-key-2").len(), 1);
        // Each shard is walked once an hour: ten minutes later, the second key is past
        // the retention but stays until its shard's next hour.
        sweep(&mut keys, 9 * day + 10 * 60 * 1000);
        assert_eq!(keys.len(), 1);
        sweep(&mut keys, 9 * day + PRUNE_EVERY_MS);
        assert!(keys.is_empty());
        assert!(
            keys.room_index.is_empty(),
            "room ids go with their last key"
        );
        // A freed room id is used again.
        keys.insert("u", "later-key", "r2", 1, 10 * day);
        assert_eq!(keys.room_ids.len(), 1);
        assert_eq!(
            keys.find("u", "later-key"),
            vec![SentAt { room: "r2", seq: 1 }]
        );
    }

    #[test]
    fn one_prune_walks_a_few_shards_and_each_shard_once_an_hour() {
        let day = 24 * 60 * 60 * 1000;
        let mut keys = SentKeys::default();
        for n in 0..20 * SHARDS {
            keys.insert("u", &format!("key-{n:06}"), "r", n as u64 + 1, 0);
        }
        let spread = keys
            .shards
            .iter()
            .filter(|shard| !shard.by_hash.is_empty())
            .count();
        assert!(spread > SHARDS * 9 / 10, "keys spread over {spread} shards");
        let total = keys.len();
        let now = 9 * day;
        keys.prune(now);
        let walked = keys
            .shards
            .iter()
            .filter(|shard| shard.pruned_ms == now)
            .count();
        assert_eq!(walked, SHARDS_PER_PRUNE);
        assert!(keys.len() < total && !keys.is_empty());
        // A full sweep forgets the rest; a further call within the hour walks nothing.
        for _ in 1..SHARDS / SHARDS_PER_PRUNE {
            keys.prune(now);
        }
        assert!(keys.is_empty());
        keys.insert("u", "late-key", "r", 1, 0);
        keys.prune(now + 1);
        assert_eq!(
            keys.len(),
            1,
            "every shard was walked less than an hour ago"
        );
    }
}
