//! The audit log under hostile load (protocol amendment 9): refusals folded into one entry
//! a second, targets cut, `ack` left out, and a head published in `GET /v1/health` that
//! verification later holds the log to.

use std::time::{Duration, Instant};

use roundtable_engine::audit::{GENESIS, TARGET_MAX, chain_hash};
use roundtable_engine::records::AuditRecord;
use roundtable_hub::store::read_audit_log;
use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::*;
use roundtable_protocol::model::{AuditEntry, AuditResult};
use roundtable_protocol::server::{AuditOk, Health};
use roundtable_testkit::{Client, TestHub, http, until};

use crate::support::room;

/// Every entry of `client`'s own audit trail.
async fn audit_of(client: &mut Client) -> Vec<AuditEntry> {
    let id = client.id();
    let audit: AuditOk = client
        .ok(ClientFrame::Audit(Audit {
            id,
            principal: None,
            since: None,
            limit: Some(500),
        }))
        .await
        .decode()
        .unwrap();
    audit.entries
}

/// Refused sends of `client`'s trail: (entries, refusals they stand for).
fn refused_sends(entries: &[AuditEntry], code: &str) -> (usize, u64) {
    let refused: Vec<&AuditEntry> = entries
        .iter()
        .filter(|entry| entry.action == "send" && entry.code.as_deref() == Some(code))
        .collect();
    let total = refused.iter().map(|entry| entry.count.unwrap_or(1)).sum();
    (refused.len(), total)
}

/// Sends `count` refused sends to `room` as fast as the connection takes them (pipelined in
/// chunks); every one must be refused with `expected`.
async fn flood_refused(client: &mut Client, room: &str, count: usize, expected: ErrorCode) {
    let mut sent = 0;
    while sent < count {
        let chunk = (count - sent).min(100);
        let mut ids = Vec::with_capacity(chunk);
        for n in 0..chunk {
            let id = client.id();
            let frame =
                roundtable_testkit::message(id, room, &format!("flood-{:08}", sent + n), "x");
            client.send_frame(&frame).await.unwrap();
            ids.push(id);
        }
        for id in ids {
            let err = client
                .reply_to(id)
                .await
                .unwrap()
                .expect_err("a flood send succeeded");
            assert_eq!(err.code, expected, "{}", err.msg);
        }
        sent += chunk;
    }
}

/// The audit log's entry count in the database.
fn audit_rows(hub: &TestHub) -> i64 {
    hub.select_i64("SELECT count(*) FROM audit")
}

/// Waits until the audit log, as `client` reads it, counts `total` refused sends with
/// `code`: a window's count is written when the window closes.
async fn refusals_on_record(client: &mut Client, code: &str, total: u64) {
    until(
        &format!("{total} refused sends ({code}) on record"),
        Duration::from_secs(10),
        async || refused_sends(&audit_of(client).await, code).1 == total,
    )
    .await;
}

#[tokio::test]
async fn a_flood_of_refusals_is_one_entry_a_second_with_a_count() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut eve, _) = hub.user("eve").await;
    let shared = room(&mut dana, &[]).await;

    let started = Instant::now();
    flood_refused(&mut eve, &shared, 300, ErrorCode::NotMember).await;
    let took = started.elapsed();
    refusals_on_record(&mut eve, "not_member", 300).await;
    let entries = audit_of(&mut eve).await;
    let (written, refusals) = refused_sends(&entries, "not_member");
    assert_eq!(refusals, 300, "every refusal is counted: {entries:?}");
    // The first at once, then one entry per second of flood at most.
    let most = 2 + took.as_secs() as usize;
    assert!(
        (1..=most).contains(&written),
        "{written} entries for 300 refusals in {took:?}"
    );
    assert!(
        entries
            .iter()
            .any(|entry| entry.count.is_some_and(|c| c > 1))
    );
    assert!(
        entries
            .iter()
            .all(|entry| entry.result == AuditResult::Err || entry.code.is_none())
    );

    // A lone refusal later is written at once, on its own.
    hub.config.clock.advance(Duration::from_millis(1100));
    let id = eve.id();
    eve.err(roundtable_testkit::message(
        id,
        &shared,
        "lone-refusal-1",
        "x",
    ))
    .await;
    let entries = audit_of(&mut eve).await;
    let (_, refusals) = refused_sends(&entries, "not_member");
    assert_eq!(refusals, 301);
    assert_eq!(entries.last().unwrap().count, None);
}

#[tokio::test]
async fn acks_are_not_audited_and_targets_are_cut() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let shared = room(&mut dana, &[]).await;
    let before = audit_rows(&hub);
    for seq in 0..20 {
        let id = dana.id();
        dana.ok(ClientFrame::Ack(Ack {
            id,
            cursors: [(shared.clone(), seq), ("not-a-room".to_owned(), seq)].into(),
        }))
        .await;
    }
    assert_eq!(
        audit_rows(&hub),
        before,
        "acks left entries in the audit log"
    );

    let long_room = "r".repeat(60 * 1024);
    let id = dana.id();
    let err = dana
        .err(roundtable_testkit::message(
            id,
            &long_room,
            "long-target-1",
            "x",
        ))
        .await;
    assert_eq!(err.code, ErrorCode::NotFound);
    let entries = audit_of(&mut dana).await;
    let last = entries.last().unwrap();
    assert_eq!(
        (last.action.as_str(), last.code.as_deref()),
        ("send", Some("not_found"))
    );
    assert_eq!(last.target.as_deref(), Some(&long_room[..TARGET_MAX]));
}

/// The issue's bound: 10,000 refused sends naming 60 KB room ids (600 MB of frames) grow
/// the data directory by less than 2 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_refused_sends_with_60_kb_targets_grow_the_data_by_under_2_mb() {
    let hub = TestHub::start().await;
    let (mut eve, _) = hub.user("eve").await;
    let (mut dana, _) = hub.user("dana").await;
    room(&mut dana, &[]).await;
    let before = hub.stored_size();
    let long_room = "r".repeat(60 * 1024);

    let started = Instant::now();
    flood_refused(&mut eve, &long_room, 10_000, ErrorCode::NotFound).await;
    let took = started.elapsed();
    refusals_on_record(&mut eve, "not_found", 10_000).await;
    let after = hub.stored_size();
    let grown = after.saturating_sub(before);
    eprintln!(
        "10,000 refused sends with 60 KB targets in {took:?}: data directory {before} -> \
         {after} bytes (+{grown})"
    );
    assert!(
        grown < 2 * 1024 * 1024,
        "the data directory grew by {grown} bytes"
    );

    // All on record nonetheless.
    let entries = audit_of(&mut eve).await;
    let (written, refusals) = refused_sends(&entries, "not_found");
    assert_eq!(refusals, 10_000);
    assert!(written <= 2 + took.as_secs() as usize, "{written} entries");
    assert!(entries.iter().all(|entry| {
        entry
            .target
            .as_deref()
            .is_none_or(|t| t.len() <= TARGET_MAX)
    }));
}

async fn health_head(hub: &TestHub) -> (u64, String) {
    let response = http(hub.addr, "GET", "/v1/health", None).await.unwrap();
    assert_eq!(response.status, 200);
    let health: Health = serde_json::from_str(&response.body).unwrap();
    let head = health.audit_head.expect("health carries the audit head");
    (head.n, head.hash)
}

fn verify_expecting(hub: &TestHub, head: &(u64, String)) -> Result<(u64, String), String> {
    roundtable_hub::admin::verify_audit(&hub.config, Some((head.0, &head.1)))
        .map_err(|error| error.to_string())
}

/// Recomputes every hash from entry `from` on, as someone rewriting the log would, so the
/// chain alone still verifies.
fn rehash_from(hub: &TestHub, from: u64) {
    let mut entries: Vec<AuditRecord> = Vec::new();
    read_audit_log(&hub.config, |entry| {
        entries.push(entry);
        true
    })
    .unwrap();
    let mut previous = GENESIS.to_owned();
    for entry in &mut entries {
        if entry.n >= from {
            entry.hash = chain_hash(&previous, entry);
            hub.execute(&format!(
                "UPDATE audit SET hash = '{}' WHERE n = {}",
                entry.hash, entry.n
            ));
        }
        previous = entry.hash.clone();
    }
}

#[tokio::test]
async fn a_head_from_health_catches_a_log_cut_back_or_rewritten() {
    let mut hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    room(&mut dana, &[]).await;
    let recorded = health_head(&hub).await;
    assert!(recorded.0 >= 2, "{recorded:?}");
    assert_eq!(recorded.1.len(), 64);
    // The head is durable and the log holds it.
    assert_eq!(
        roundtable_hub::admin::verify_audit(&hub.config, None)
            .unwrap()
            .1,
        recorded.1
    );
    for _ in 0..3 {
        room(&mut dana, &[]).await;
    }
    let later = health_head(&hub).await;
    assert!(later.0 > recorded.0);
    hub.stop().await;
    assert!(verify_expecting(&hub, &recorded).is_ok());
    assert!(verify_expecting(&hub, &later).is_ok());

    // Rewritten from the recorded entry on, every hash recomputed: the chain alone looks
    // intact, the recorded head does not.
    hub.execute(&format!(
        "UPDATE audit SET target = 'r_forged' WHERE n = {}",
        recorded.0
    ));
    rehash_from(&hub, recorded.0);
    assert!(roundtable_hub::admin::verify_audit(&hub.config, None).is_ok());
    let rewritten = verify_expecting(&hub, &recorded).unwrap_err();
    assert!(rewritten.contains("rewritten"), "{rewritten}");

    // Cut back to before the recorded head (the entries before it were never touched):
    // again intact in itself, and caught.
    hub.execute(&format!("DELETE FROM audit WHERE n >= {}", recorded.0));
    assert!(roundtable_hub::admin::verify_audit(&hub.config, None).is_ok());
    let cut = verify_expecting(&hub, &recorded).unwrap_err();
    assert!(cut.contains("removed"), "{cut}");
}
