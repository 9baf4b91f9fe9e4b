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

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::Arc;

/// How long a key is remembered: the protocol's 7 days and one more for clock slack.
pub const RETENTION_MS: i64 = 8 * 24 * 60 * 60 * 1000;

/// How often entries past the retention are dropped.
const PRUNE_EVERY_MS: i64 = 60 * 60 * 1000;

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

#[derive(Debug)]
pub struct SentKeys {
    /// Keyed by a random-keyed hash: a sender cannot aim collisions at others' keys.
    hasher: RandomState,
    by_hash: HashMap<u64, SentAt, BuildHasherDefault<PassThrough>>,
    /// Keys whose hash another key already holds.
    exact: HashMap<(Box<str>, Box<str>), SentAt>,
    /// Room ids, shared by every entry of a room.
    rooms: HashMap<Box<str>, Arc<str>>,
    pruned_ms: i64,
}

impl Default for SentKeys {
    fn default() -> SentKeys {
        SentKeys {
            hasher: RandomState::new(),
            by_hash: HashMap::default(),
            exact: HashMap::new(),
            rooms: HashMap::new(),
            pruned_ms: i64::MIN,
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
        if let Some(at) = self.by_hash.get(&self.hash(sender, client_key)) {
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
        match self.by_hash.entry(hash) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(at);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.exact
                    .insert((Box::from(sender), Box::from(client_key)), at);
            }
        }
    }

    /// Forgets keys older than the retention; does the work at most once an hour.
    pub fn prune(&mut self, now_ms: i64) {
        if now_ms.saturating_sub(self.pruned_ms) < PRUNE_EVERY_MS {
            return;
        }
        self.pruned_ms = now_ms;
        let cutoff = now_ms.saturating_sub(RETENTION_MS);
        self.by_hash.retain(|_, at| at.ts_ms >= cutoff);
        self.exact.retain(|_, at| at.ts_ms >= cutoff);
        self.rooms.retain(|_, room| Arc::strong_count(room) > 1);
    }

    pub fn len(&self) -> usize {
        self.by_hash.len() + self.exact.len()
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
        keys.prune(7 * day);
        assert_eq!(keys.len(), 2, "7 days are always kept");
        keys.prune(9 * day);
        assert_eq!(keys.len(), 1);
        assert!(keys.find("u", "old-key-1").is_empty());
        assert_eq!(keys.find("u", "new-key-2").len(), 1);
        // Pruning is hourly: ten minutes later, the second key is past the retention but
        // stays until the next hour.
        keys.prune(9 * day + 10 * 60 * 1000);
        assert_eq!(keys.len(), 1);
        keys.prune(9 * day + PRUNE_EVERY_MS);
        assert!(keys.is_empty());
        assert!(keys.rooms.is_empty(), "room ids go with their last key");
    }
}
