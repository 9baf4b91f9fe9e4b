//! The audit log's hash chain. Each entry carries
//! `hash = SHA-256(previous hash ‖ canonical JSON of the entry without hash)`, so changing,
//! removing or reordering any entry breaks every hash after it, and `verify` finds the first
//! broken link. Pure functions: the store keeps the entries, the engine appends them in the
//! transaction of the change they record.
//!
//! Canonical JSON: the object `{"action","code"?,"n","principal","result","target"?,"ts"}`
//! with keys in that (alphabetical) order, no whitespace, absent optional keys omitted, `ts`
//! in the wire timestamp format. "previous hash" is the previous entry's 32 hash bytes (32
//! zero bytes before the first entry).

use roundtable_protocol::model::{AuditEntry, AuditResult};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::store::AuditRecord;

/// The "previous hash" of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Serialize)]
struct Canonical<'a> {
    action: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'a str>,
    n: u64,
    principal: &'a str,
    result: AuditResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
    ts: String,
}

/// The canonical JSON of an entry, without its hash.
pub fn canonical_json(entry: &AuditRecord) -> String {
    serde_json::to_string(&Canonical {
        action: &entry.action,
        code: entry.code.as_deref(),
        n: entry.n,
        principal: &entry.principal,
        result: entry.result,
        target: entry.target.as_deref(),
        ts: roundtable_protocol::ts::format_millis(entry.ts_ms),
    })
    .expect("audit entries serialize")
}

fn decode_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (index, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(bytes)
}

/// The hash an entry must carry after `previous` (hex).
pub fn chain_hash(previous: &str, entry: &AuditRecord) -> String {
    let mut hasher = Sha256::new();
    hasher.update(decode_hex(previous).unwrap_or([0; 32]));
    hasher.update(canonical_json(entry).as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Builds the next entry of the chain whose head is `(n, hash)`.
pub fn next_entry(
    head: &(u64, String),
    ts_ms: i64,
    principal: &str,
    action: &str,
    target: Option<String>,
    refusal: Option<&str>,
) -> AuditRecord {
    let mut entry = AuditRecord {
        n: head.0 + 1,
        ts_ms,
        principal: principal.to_owned(),
        action: action.to_owned(),
        target,
        result: if refusal.is_some() {
            AuditResult::Err
        } else {
            AuditResult::Ok
        },
        code: refusal.map(str::to_owned),
        hash: String::new(),
    };
    entry.hash = chain_hash(&head.1, &entry);
    entry
}

/// An entry as the `audit` command shows it.
pub fn wire_entry(entry: &AuditRecord) -> AuditEntry {
    AuditEntry {
        n: entry.n,
        ts: roundtable_protocol::ts::format_millis(entry.ts_ms),
        principal: entry.principal.clone(),
        action: entry.action.clone(),
        target: entry.target.clone(),
        result: entry.result,
        code: entry.code.clone(),
        hash: entry.hash.clone(),
    }
}

/// The first entry that breaks the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenLink {
    pub n: u64,
    pub reason: String,
}

/// Walks the chain in order; returns the number of entries and the head hash, or the first
/// broken link.
#[derive(Debug, Default)]
pub struct ChainCheck {
    count: u64,
    head: (u64, String),
    broken: Option<BrokenLink>,
}

impl ChainCheck {
    pub fn new() -> ChainCheck {
        ChainCheck {
            count: 0,
            head: (0, GENESIS.to_owned()),
            broken: None,
        }
    }

    /// Checks the next entry; false once the chain is broken (stop feeding it).
    pub fn feed(&mut self, entry: &AuditRecord) -> bool {
        if self.broken.is_some() {
            return false;
        }
        let reason = if entry.n != self.head.0 + 1 {
            Some(format!(
                "expected entry {}, found {} (an entry was removed or inserted)",
                self.head.0 + 1,
                entry.n
            ))
        } else if chain_hash(&self.head.1, entry) != entry.hash {
            Some("its hash does not match its content and the previous hash".to_owned())
        } else {
            None
        };
        if let Some(reason) = reason {
            self.broken = Some(BrokenLink { n: entry.n, reason });
            return false;
        }
        self.count += 1;
        self.head = (entry.n, entry.hash.clone());
        true
    }

    pub fn finish(self) -> Result<(u64, String), BrokenLink> {
        match self.broken {
            Some(broken) => Err(broken),
            None => Ok((self.count, self.head.1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(length: u64) -> Vec<AuditRecord> {
        let mut head = (0, GENESIS.to_owned());
        let mut entries = Vec::new();
        for n in 0..length {
            let refusal = (n % 3 == 2).then_some("forbidden");
            let entry = next_entry(
                &head,
                1_800_000_000_000 + n as i64,
                "p_dana",
                "room_create",
                Some(format!("r_{n}")),
                refusal,
            );
            head = (entry.n, entry.hash.clone());
            entries.push(entry);
        }
        entries
    }

    fn check(entries: &[AuditRecord]) -> Result<(u64, String), BrokenLink> {
        let mut check = ChainCheck::new();
        for entry in entries {
            if !check.feed(entry) {
                break;
            }
        }
        check.finish()
    }

    #[test]
    fn canonical_json_is_sorted_and_compact() {
        let entry = &chain(3)[2];
        assert_eq!(
            canonical_json(entry),
            r#"{"action":"room_create","code":"forbidden","n":3,"principal":"p_dana","result":"err","target":"r_2","ts":"2027-01-15T08:00:00.002Z"}"#
        );
    }

    #[test]
    fn an_intact_chain_verifies() {
        let entries = chain(10);
        assert_eq!(check(&entries), Ok((10, entries[9].hash.clone())));
        assert_eq!(check(&[]), Ok((0, GENESIS.to_owned())));
    }

    #[test]
    fn tampering_is_found_at_the_first_broken_link() {
        let mut edited = chain(10);
        edited[4].principal = "p_mallory".into();
        assert_eq!(check(&edited).unwrap_err().n, 5);

        let mut removed = chain(10);
        removed.remove(6);
        let broken = check(&removed).unwrap_err();
        assert_eq!(broken.n, 8);
        assert!(broken.reason.contains("removed"));

        // Recomputing one entry's hash does not help: the next link breaks.
        let mut rehashed = chain(10);
        rehashed[2].action = "room_leave".into();
        let previous = rehashed[1].hash.clone();
        rehashed[2].hash = chain_hash(&previous, &rehashed[2]);
        assert_eq!(check(&rehashed).unwrap_err().n, 4);
    }
}
