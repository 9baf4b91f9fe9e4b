//! The audit log's hash chain. Each entry carries
//! `hash = SHA-256(previous hash ‖ canonical JSON of the entry without hash)`, so changing,
//! removing or reordering any entry breaks every hash after it, and `verify` finds the first
//! broken link. Pure functions: the store keeps the entries, the engine appends them in the
//! transaction of the change they record.
//!
//! Canonical JSON: the object
//! `{"action","code"?,"count"?,"n","principal","reason"?,"result","target"?,"ts","via"?}` with
//! keys in that (alphabetical) order, no whitespace, absent optional keys omitted (`via` is
//! absent for the WebSocket, so entries older than the gateways hash as they did), `ts` in
//! the wire timestamp format. "previous hash" is the previous entry's 32 hash bytes (32 zero bytes
//! before the first entry).
//!
//! The log must not fill the disk, nor be cut without anyone noticing (protocol amendment
//! 9). So a `target` is cut to [`TARGET_MAX`] bytes, and a flood of refusals is folded
//! ([`RefusalFolds`]): at most one entry per second for each (principal, action, code). And
//! the chain's head is published (`GET /v1/health`): whoever records it can later check
//! that the log still holds that entry and extends it ([`ChainCheck::expecting`]), which
//! removing or rewriting the tail cannot fake.

use std::collections::VecDeque;

use roundtable_protocol::model::{AuditEntry, AuditResult};
use rustc_hash::FxHashMap;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::records::AuditRecord;
pub use crate::records::Via;

/// The most bytes of an entry's `target` kept (cut at a character boundary).
pub const TARGET_MAX: usize = 128;

/// How long refusals of the same (principal, action, code) are folded into one entry.
pub const FOLD_WINDOW_MS: i64 = 1000;

/// The "previous hash" of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Serialize)]
struct Canonical<'a> {
    action: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    n: u64,
    principal: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    result: AuditResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
    ts: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    via: Option<&'a str>,
}

/// The canonical JSON of an entry, without its hash.
pub fn canonical_json(entry: &AuditRecord) -> String {
    serde_json::to_string(&Canonical {
        action: &entry.action,
        code: entry.code.as_deref(),
        count: entry.count,
        n: entry.n,
        principal: &entry.principal,
        reason: entry.reason.as_deref(),
        result: entry.result,
        target: entry.target.as_deref(),
        ts: roundtable_protocol::ts::format_millis(entry.ts_ms),
        via: entry.via.recorded(),
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

/// `target` cut to at most [`TARGET_MAX`] bytes, at a character boundary.
pub fn cut_target(mut target: String) -> String {
    if target.len() > TARGET_MAX {
        let mut end = TARGET_MAX;
        while !target.is_char_boundary(end) {
            end -= 1;
        }
        target.truncate(end);
    }
    target
}

/// Builds the next entry of the chain whose head is `(n, hash)`; `count` is how many
/// refusals it stands for, when more than one. The target is cut to [`TARGET_MAX`] bytes.
pub fn next_entry(
    head: &(u64, String),
    ts_ms: i64,
    principal: &str,
    action: &str,
    target: Option<String>,
    refusal: Option<&str>,
    count: Option<u64>,
) -> AuditRecord {
    let mut entry = AuditRecord {
        n: head.0 + 1,
        ts_ms,
        principal: principal.to_owned(),
        action: action.to_owned(),
        target: target.map(cut_target),
        reason: None,
        via: Via::Ws,
        result: if refusal.is_some() {
            AuditResult::Err
        } else {
            AuditResult::Ok
        },
        code: refusal.map(str::to_owned),
        count: count.filter(|count| *count > 1),
        hash: String::new(),
    };
    entry.hash = chain_hash(&head.1, &entry);
    entry
}

/// `entry`, built after `previous` (hex), with the reason its command gave and the way the
/// command came: the hash is computed again when either is recorded, as both are part of
/// what it chains.
pub fn annotated(
    mut entry: AuditRecord,
    previous: &str,
    reason: Option<String>,
    via: Via,
) -> AuditRecord {
    if reason.is_some() || via != Via::Ws {
        entry.reason = reason;
        entry.via = via;
        entry.hash = chain_hash(previous, &entry);
    }
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
        reason: entry.reason.clone(),
        result: entry.result,
        code: entry.code.clone(),
        count: entry.count,
        via: entry.via.recorded().map(str::to_owned),
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
    /// A head recorded earlier (`n`, hash) the chain must still hold.
    expected: Option<(u64, String)>,
}

impl ChainCheck {
    pub fn new() -> ChainCheck {
        ChainCheck {
            count: 0,
            head: (0, GENESIS.to_owned()),
            broken: None,
            expected: None,
        }
    }

    /// A check that also requires the chain to hold the entry `n` with `hash` (a head
    /// recorded earlier, from `GET /v1/health`) and to extend it: a log cut back before it,
    /// or rewritten from it on, fails even if it is consistent in itself.
    pub fn expecting(n: u64, hash: &str) -> ChainCheck {
        ChainCheck {
            expected: Some((n, hash.to_ascii_lowercase())),
            ..ChainCheck::new()
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
            match &self.expected {
                Some((n, hash)) if *n == entry.n && *hash != entry.hash => Some(format!(
                    "its hash is {}, not the {hash} recorded for it: the log was rewritten \
                     from this entry on",
                    entry.hash
                )),
                _ => None,
            }
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
        if let Some(broken) = self.broken {
            return Err(broken);
        }
        match self.expected {
            Some((n, _)) if n > self.head.0 => Err(BrokenLink {
                n,
                reason: format!(
                    "the log ends at entry {}, before the recorded head: entries were removed",
                    self.head.0
                ),
            }),
            Some((0, hash)) if hash != GENESIS => Err(BrokenLink {
                n: 0,
                reason: "entry 0 is the empty log, whose hash is 64 zeros".to_owned(),
            }),
            _ => Ok((self.count, self.head.1)),
        }
    }
}

/// One key of the folds: who was refused what, and why.
type FoldKey = (String, &'static str, &'static str, Via);

/// Refusals waiting to be written as one entry.
#[derive(Debug)]
struct Fold {
    /// When the window opened: it closes [`FOLD_WINDOW_MS`] later.
    opened_ms: i64,
    /// Refusals counted since, not yet written.
    folded: u64,
    /// The first folded refusal's target.
    target: Option<String>,
}

/// An entry to write for refusals folded in a window that has closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedRefusals {
    pub principal: String,
    pub action: &'static str,
    pub code: &'static str,
    pub via: Via,
    pub target: Option<String>,
    pub count: u64,
}

/// What to do with a refusal.
#[derive(Debug, PartialEq, Eq)]
pub enum Folding {
    /// Write it as an entry of its own now, after `closed` (a window this refusal ended).
    Write { closed: Option<FoldedRefusals> },
    /// Counted in an open window, which becomes an entry when it closes; `closed` is a
    /// window this refusal ended, to write now.
    Counted { closed: Option<FoldedRefusals> },
}

/// Folds refusals with the same (principal, action, code): the first is written at once
/// and opens a one-second window; the same refusals within it are only counted, and when
/// it closes they become one entry with `count`, which opens the next window. So a steady
/// flood writes one entry a second for each (principal, action, code), and a lone refusal
/// is written at once. Pure: the engine passes the time and writes what it is told to.
/// Windows live in memory only: a crash forgets what an open window had counted (at most
/// a second of a flood, whose first refusal is on record).
#[derive(Debug, Default)]
pub struct RefusalFolds {
    open: FxHashMap<FoldKey, Fold>,
    /// Keys by the time their window opened, oldest first, to close them in order without
    /// a scan (a key reopened later appears again; a stale position is skipped).
    order: VecDeque<(i64, FoldKey)>,
}

impl RefusalFolds {
    /// Decides about one refusal at `now_ms`.
    pub fn refuse(
        &mut self,
        now_ms: i64,
        principal: &str,
        action: &'static str,
        code: &'static str,
        via: Via,
        target: Option<String>,
    ) -> Folding {
        let key: FoldKey = (principal.to_owned(), action, code, via);
        match self.open.get_mut(&key) {
            Some(fold) if now_ms < fold.opened_ms + FOLD_WINDOW_MS => {
                fold.folded += 1;
                if fold.folded == 1 {
                    fold.target = target;
                }
                Folding::Counted { closed: None }
            }
            Some(fold) => {
                // Its window is over: what it counted is written, and this refusal is the
                // first of the next window, counted if the last one had any.
                let closed = (fold.folded > 0).then(|| FoldedRefusals {
                    principal: key.0.clone(),
                    action,
                    code,
                    via,
                    target: fold.target.take(),
                    count: fold.folded,
                });
                let continued = closed.is_some();
                *fold = Fold {
                    opened_ms: now_ms,
                    folded: u64::from(continued),
                    target: if continued { target } else { None },
                };
                self.order.push_back((now_ms, key));
                if continued {
                    Folding::Counted { closed }
                } else {
                    Folding::Write { closed: None }
                }
            }
            None => {
                self.open.insert(
                    key.clone(),
                    Fold {
                        opened_ms: now_ms,
                        folded: 0,
                        target: None,
                    },
                );
                self.order.push_back((now_ms, key));
                Folding::Write { closed: None }
            }
        }
    }

    /// The windows that have closed by `now_ms` (all of them when `everything`), oldest
    /// first: their counts to write. A window that counted something is followed by a new
    /// one, so a flood that goes on is still folded; one that counted nothing is forgotten.
    pub fn close(&mut self, now_ms: i64, everything: bool) -> Vec<FoldedRefusals> {
        let mut closed = Vec::new();
        while let Some((opened_ms, _)) = self.order.front() {
            if !everything && now_ms < opened_ms + FOLD_WINDOW_MS {
                break;
            }
            let (opened_ms, key) = self.order.pop_front().expect("a front entry");
            let Some(fold) = self.open.get_mut(&key) else {
                continue;
            };
            if fold.opened_ms != opened_ms {
                continue; // Reopened since: a later position stands for it.
            }
            if fold.folded == 0 || everything {
                let fold = self.open.remove(&key).expect("looked up above");
                if fold.folded > 0 {
                    closed.push(folded(key, fold));
                }
                continue;
            }
            let (principal, action, code, via) = key.clone();
            closed.push(FoldedRefusals {
                principal,
                action,
                code,
                via,
                target: fold.target.take(),
                count: fold.folded,
            });
            *fold = Fold {
                opened_ms: now_ms,
                folded: 0,
                target: None,
            };
            self.order.push_back((now_ms, key));
        }
        closed
    }

    /// When the oldest window holding a count closes (the writer wakes then to write it).
    pub fn next_close_ms(&self) -> Option<i64> {
        self.order
            .iter()
            .find(|(opened_ms, key)| {
                self.open
                    .get(key)
                    .is_some_and(|fold| fold.opened_ms == *opened_ms && fold.folded > 0)
            })
            .map(|(opened_ms, _)| opened_ms + FOLD_WINDOW_MS)
    }

    /// How many windows are open (for tests and metrics).
    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

fn folded((principal, action, code, via): FoldKey, fold: Fold) -> FoldedRefusals {
    FoldedRefusals {
        principal,
        action,
        code,
        via,
        target: fold.target,
        count: fold.folded,
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
                None,
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
    fn a_reason_is_chained_in_its_sorted_place_and_an_entry_without_one_is_unchanged() {
        let entries = chain(2);
        let head = (entries[0].n, entries[0].hash.clone());
        let plain = next_entry(&head, 5, "p_dana", "control", None, None, None);
        assert_eq!(annotated(plain.clone(), &head.1, None, Via::Ws), plain);
        let reasoned = annotated(
            plain.clone(),
            &head.1,
            Some("budget reached".into()),
            Via::Ws,
        );
        assert_eq!(
            canonical_json(&reasoned),
            r#"{"action":"control","n":2,"principal":"p_dana","reason":"budget reached","result":"ok","ts":"1970-01-01T00:00:00.005Z"}"#
        );
        assert_ne!(reasoned.hash, plain.hash);
        assert_eq!(
            check(&[entries[0].clone(), reasoned.clone()]).unwrap().1,
            reasoned.hash
        );
        let mut edited = reasoned;
        edited.reason = Some("no reason".into());
        assert!(check(&[entries[0].clone(), edited]).is_err());
    }

    #[test]
    fn the_way_a_command_came_is_chained_last_and_the_websocket_is_not_written() {
        let entries = chain(2);
        let head = (entries[0].n, entries[0].hash.clone());
        let plain = next_entry(&head, 5, "p_dana", "send", None, Some("not_member"), None);
        assert_eq!(annotated(plain.clone(), &head.1, None, Via::Ws), plain);
        let through_a2a = annotated(plain.clone(), &head.1, None, Via::A2a);
        assert_eq!(
            canonical_json(&through_a2a),
            r#"{"action":"send","code":"not_member","n":2,"principal":"p_dana","result":"err","ts":"1970-01-01T00:00:00.005Z","via":"a2a"}"#
        );
        assert_ne!(through_a2a.hash, plain.hash);
        assert_eq!(wire_entry(&through_a2a).via.as_deref(), Some("a2a"));
        assert_eq!(wire_entry(&plain).via, None);
        assert!(check(&[entries[0].clone(), through_a2a.clone()]).is_ok());
        // Claiming another way breaks the chain, as editing any field does.
        let mut edited = through_a2a;
        edited.via = Via::Mcp;
        assert!(check(&[entries[0].clone(), edited]).is_err());
        for via in [Via::Ws, Via::A2a, Via::Mcp] {
            assert_eq!(Via::parse(via.recorded()), via);
        }
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

    #[test]
    fn a_recorded_head_must_still_be_held_and_extended() {
        let entries = chain(10);
        let recorded = |n: usize| (entries[n - 1].n, entries[n - 1].hash.clone());
        let check_against = |entries: &[AuditRecord], (n, hash): (u64, String)| {
            let mut check = ChainCheck::expecting(n, &hash);
            for entry in entries {
                if !check.feed(entry) {
                    break;
                }
            }
            check.finish()
        };
        // Held and extended (or held as the very head).
        assert!(check_against(&entries, recorded(6)).is_ok());
        assert!(check_against(&entries, recorded(10)).is_ok());
        assert!(check_against(&entries, (0, GENESIS.to_owned())).is_ok());
        // Cut back before it: consistent in itself, but the head is gone.
        let cut = check_against(&entries[..5], recorded(6)).unwrap_err();
        assert_eq!(cut.n, 6);
        assert!(cut.reason.contains("removed"), "{}", cut.reason);
        // Rewritten from it on (every hash recomputed, so the chain alone looks intact).
        let mut rewritten = entries[..5].to_vec();
        let mut head = (5, entries[4].hash.clone());
        for n in 5..10 {
            let entry = next_entry(&head, 1, "p_mallory", "room_leave", None, None, None);
            head = (entry.n, entry.hash.clone());
            rewritten.push(entry);
            assert_eq!(rewritten.len(), n + 1);
        }
        assert!(check(&rewritten).is_ok());
        let broken = check_against(&rewritten, recorded(6)).unwrap_err();
        assert_eq!(broken.n, 6);
        assert!(broken.reason.contains("rewritten"), "{}", broken.reason);
    }

    #[test]
    fn targets_are_cut_to_128_bytes_at_a_character_boundary() {
        assert_eq!(cut_target("r_1".into()), "r_1");
        assert_eq!(cut_target("x".repeat(60_000)).len(), TARGET_MAX);
        // 'é' is two bytes: 127 ASCII bytes and then one cannot be cut in half.
        let text = format!("{}é", "a".repeat(127));
        assert_eq!(cut_target(text), "a".repeat(127));
        let entry = next_entry(
            &(0, GENESIS.to_owned()),
            1,
            "",
            "send",
            Some("r".repeat(1000)),
            Some("not_found"),
            Some(1),
        );
        assert_eq!(entry.target.as_deref().map(str::len), Some(TARGET_MAX));
        assert_eq!(entry.count, None, "a count of one is no count");
    }

    #[test]
    fn the_count_is_part_of_the_hash_and_absent_when_one() {
        let head = (0, GENESIS.to_owned());
        let one = next_entry(&head, 1, "p_eve", "send", None, Some("not_member"), None);
        let many = next_entry(&head, 1, "p_eve", "send", None, Some("not_member"), Some(7));
        assert!(!canonical_json(&one).contains("count"));
        assert!(canonical_json(&many).contains(r#""code":"not_member","count":7,"n":1"#));
        assert_ne!(one.hash, many.hash);
    }

    #[test]
    fn a_flood_of_the_same_refusal_is_one_entry_a_second() {
        let mut folds = RefusalFolds::default();
        let refuse = |folds: &mut RefusalFolds, at: i64, target: &str| {
            folds.refuse(
                at,
                "p_eve",
                "send",
                "not_found",
                Via::Ws,
                Some(target.to_owned()),
            )
        };
        assert_eq!(refuse(&mut folds, 0, "a"), Folding::Write { closed: None });
        for at in 1..1000 {
            assert_eq!(
                refuse(&mut folds, at, "b"),
                Folding::Counted { closed: None }
            );
        }
        assert_eq!(folds.next_close_ms(), Some(1000));
        assert!(folds.close(999, false).is_empty());
        // The window closes: its 999 refusals are one entry, and a next window opens.
        let closed = folds.close(1000, false);
        assert_eq!(
            closed,
            vec![FoldedRefusals {
                principal: "p_eve".into(),
                action: "send",
                code: "not_found",
                via: Via::Ws,
                target: Some("b".into()),
                count: 999,
            }]
        );
        // The flood goes on: still counted, never written one by one.
        assert_eq!(
            refuse(&mut folds, 1500, "c"),
            Folding::Counted { closed: None }
        );
        // A refusal after the window ends, before anyone closed it, closes it itself.
        let Folding::Counted {
            closed: Some(closed),
        } = refuse(&mut folds, 2100, "d")
        else {
            panic!("the window of 1500 was not closed by the refusal at 2100");
        };
        assert_eq!((closed.count, closed.target.as_deref()), (1, Some("c")));
        // Quiet for a while: the last count is written, then the key is forgotten.
        assert_eq!(folds.close(3100, false).len(), 1);
        assert!(folds.close(4200, false).is_empty());
        assert!(folds.is_empty());
        assert_eq!(
            refuse(&mut folds, 5000, "e"),
            Folding::Write { closed: None }
        );
    }

    #[test]
    fn different_principals_actions_codes_and_ways_fold_apart() {
        let mut folds = RefusalFolds::default();
        for (principal, action, code, via) in [
            ("p_a", "send", "not_found", Via::Ws),
            ("p_b", "send", "not_found", Via::Ws),
            ("p_a", "room_invite", "not_found", Via::Ws),
            ("p_a", "send", "not_member", Via::Ws),
            ("p_a", "send", "not_found", Via::A2a),
            ("p_a", "send", "not_found", Via::Mcp),
        ] {
            assert_eq!(
                folds.refuse(0, principal, action, code, via, None),
                Folding::Write { closed: None }
            );
            assert_eq!(
                folds.refuse(10, principal, action, code, via, None),
                Folding::Counted { closed: None }
            );
        }
        assert_eq!(folds.len(), 6);
        // At shutdown every count is written, whatever the time, with its way.
        let closed = folds.close(20, true);
        assert_eq!(closed.len(), 6);
        assert!(closed.iter().all(|fold| fold.count == 1));
        assert_eq!(closed.iter().filter(|fold| fold.via == Via::A2a).count(), 1);
        assert!(folds.is_empty());
    }
}
