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
//! forgotten, so memory is bounded by the sends of that period (40 to 80 bytes each).
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
use std::sync::Arc;

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

/// Where a key's event is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentAt {
    pub room: Arc<str>,
    pub seq: u64,
    pub ts_ms: i64,
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

type ByHash = HashMap<u64, SentAt, BuildHasherDefault<PassThrough>>;

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
    exact: HashMap<(Box<str>, Box<str>), SentAt>,
    /// Room ids, shared by every entry of a room.
    rooms: HashMap<Box<str>, Arc<str>>,
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
            rooms: HashMap::new(),
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
    pub fn find(&self, sender: &str, client_key: &str) -> Vec<&SentAt> {
        let mut found = Vec::new();
        // Almost always empty: skip building its key.
        if !self.exact.is_empty()
            && let Some(at) = self.exact.get(&(Box::from(sender), Box::from(client_key)))
        {
            found.push(at);
        }
        let hash = self.hash(sender, client_key);
        if let Some(at) = self.shard(hash).get(&hash) {
            found.push(at);
        }
        found
    }

    /// Remembers a key just stored (the caller has checked it was not used).
    pub fn insert(&mut self, sender: &str, client_key: &str, room: &str, seq: u64, ts_ms: i64) {
        let room = match self.rooms.get(room) {
            Some(room) => room.clone(),
            None => {
                let shared: Arc<str> = Arc::from(room);
                self.rooms.insert(Box::from(room), shared.clone());
                shared
            }
        };
        let at = SentAt { room, seq, ts_ms };
        let hash = self.hash(sender, client_key);
        self.file(hash, sender, client_key, at);
    }

    /// Files a key under its hash, or in the exact map when another key holds the hash.
    fn file(&mut self, hash: u64, sender: &str, client_key: &str, at: SentAt) {
        match self.shards[Self::shard_index(hash)].by_hash.entry(hash) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(at);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.exact
                    .insert((Box::from(sender), Box::from(client_key)), at);
            }
        }
    }

    /// Forgets keys older than the retention, walking at most [`SHARDS_PER_PRUNE`] shards
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
            let shard = &mut self.shards[index];
            if now_ms.saturating_sub(shard.pruned_ms) < PRUNE_EVERY_MS {
                continue;
            }
            shard.pruned_ms = now_ms;
            shard.by_hash.retain(|_, at| at.ts_ms >= cutoff);
            walked += 1;
            if index == SHARDS - 1 {
                // A sweep ends: the exact map (almost always empty) and the room ids too.
                self.exact.retain(|_, at| at.ts_ms >= cutoff);
                self.rooms.retain(|_, room| Arc::strong_count(room) > 1);
            }
        }
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
        assert_eq!(found.len(), 1);
        assert_eq!((&*found[0].room, found[0].seq), ("r1", 4));
        assert!(keys.find("u2", "key-0001").is_empty());
        assert!(keys.find("u1", "key-0002").is_empty());
        // (sender, key) is hashed as a pair: moving characters across does not match.
        assert!(keys.find("u1k", "ey-0001").is_empty());
    }

    #[test]
    fn colliding_keys_are_both_kept() {
        let mut keys = SentKeys::default();
        let at = |seq| SentAt {
            room: Arc::from("r"),
            seq,
            ts_ms: 1,
        };
        let hash = keys.hash("u1", "first-key");
        keys.file(hash, "u1", "first-key", at(1));
        // Another key forced onto the same hash goes to the exact map.
        keys.file(hash, "u1", "other-key", at(2));
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
        assert!(keys.rooms.is_empty(), "room ids go with their last key");
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
