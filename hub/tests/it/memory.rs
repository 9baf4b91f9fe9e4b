//! The writer's memory holds only what can still change: a revoked token, a decided
//! contact request, a used or withdrawn invite and an answered ping leave it (the store
//! keeps them), seen through the `roundtable_memory_*` gauges of `GET /metrics`. What time
//! ends (expired invites, pings, requests) leaves at the writer's housekeeping: see the
//! engine's tests.

use roundtable_protocol::client::*;
use roundtable_protocol::server::InviteCreateOk;
use roundtable_testkit::{Client, TestHub, http};
use serde_json::json;

use crate::support::{agent, login, make_public, request_contact, respond};

/// The memory gauges: tokens, contact requests, invites, pings.
async fn memory(hub: &TestHub) -> [u64; 4] {
    let text = http(hub.addr, "GET", "/metrics", None).await.unwrap().body;
    let gauge = |name: &str| -> u64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
    };
    [
        gauge("roundtable_memory_tokens"),
        gauge("roundtable_memory_contact_requests"),
        gauge("roundtable_memory_invites"),
        gauge("roundtable_memory_pings"),
    ]
}

async fn create_invite(client: &mut Client) -> InviteCreateOk {
    let id = client.id();
    client
        .ok(ClientFrame::InviteCreate(InviteCreate {
            id,
            room: None,
            max_uses: None,
            expires_in_s: None,
        }))
        .await
        .decode()
        .unwrap()
}

#[tokio::test]
async fn what_is_decided_leaves_the_writers_memory_and_stays_out_after_a_restart() {
    let mut hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    let (mut lee, _) = hub.user("lee").await;
    let writer = agent(&mut dana, "writer").await;
    let home = writer.room.clone().unwrap().id;
    let start = memory(&hub).await;
    assert_eq!(
        start,
        [4, 0, 0, 0],
        "three users and an agent, nothing pending"
    );

    // Tokens: rotations replace, a revocation removes.
    for _ in 0..5 {
        let id = dana.id();
        dana.ok(ClientFrame::AgentToken(AgentToken {
            id,
            agent: writer.agent.id.clone(),
            action: TokenAction::Rotate,
        }))
        .await;
    }
    assert_eq!(memory(&hub).await, start);
    let id = dana.id();
    dana.ok(ClientFrame::AgentToken(AgentToken {
        id,
        agent: writer.agent.id.clone(),
        action: TokenAction::Revoke,
    }))
    .await;
    assert_eq!(memory(&hub).await[0], start[0] - 1);

    // Contact requests: pending while undecided, gone once accepted or cancelled.
    make_public(&mut dana).await;
    let accepted = request_contact(&mut sam, "dana").await;
    let cancelled = request_contact(&mut lee, "dana").await;
    assert_eq!(memory(&hub).await[1], 2);
    respond(&mut dana, &accepted.id, true).await;
    respond(&mut lee, &cancelled.id, false).await;
    assert_eq!(memory(&hub).await[1], 0);

    // Invites: in memory while redeemable; used up or withdrawn, out.
    let used = create_invite(&mut dana).await;
    let withdrawn = create_invite(&mut dana).await;
    create_invite(&mut dana).await;
    assert_eq!(memory(&hub).await[2], 3);
    let id = lee.id();
    lee.ok(ClientFrame::InviteRedeem(InviteRedeem {
        id,
        code: used.code.clone(),
    }))
    .await;
    let id = dana.id();
    dana.ok(ClientFrame::InviteRevoke(InviteRevoke {
        id,
        invite: withdrawn.invite.clone().unwrap(),
    }))
    .await;
    assert_eq!(memory(&hub).await[2], 1);
    // Out of memory, still known: a used code is `conflict`, not `not_found`.
    let id = sam.id();
    let again = sam
        .err(ClientFrame::InviteRedeem(InviteRedeem {
            id,
            code: used.code,
        }))
        .await;
    assert_eq!(again.code, roundtable_protocol::ErrorCode::Conflict);
    assert!(again.msg.contains("used up"), "{}", again.msg);

    // Pings: open until answered.
    let rotated = {
        let id = dana.id();
        dana.ok(ClientFrame::AgentToken(AgentToken {
            id,
            agent: writer.agent.id.clone(),
            action: TokenAction::Rotate,
        }))
        .await
        .decode::<roundtable_protocol::server::AgentTokenOk>()
        .unwrap()
        .token
        .unwrap()
    };
    let mut writer_client = login(&hub, &rotated, "w").await;
    let id = writer_client.id();
    writer_client
        .ok(ClientFrame::Send(SendCmd {
            id,
            room: home.clone(),
            client_key: "ping-memory-1".into(),
            kind: "ping".into(),
            body: json!({"ping": "merge", "question": "merge now?"}),
        }))
        .await;
    assert_eq!(memory(&hub).await[3], 1);
    let id = dana.id();
    dana.ok(ClientFrame::Send(SendCmd {
        id,
        room: home.clone(),
        client_key: "answer-memory".into(),
        kind: "answer".into(),
        body: json!({"ping": "merge", "choice": "yes"}),
    }))
    .await;
    assert_eq!(memory(&hub).await[3], 0);
    let id = dana.id();
    let twice = dana
        .err(ClientFrame::Send(SendCmd {
            id,
            room: home.clone(),
            client_key: "answer-memory2".into(),
            kind: "answer".into(),
            body: json!({"ping": "merge", "choice": "no"}),
        }))
        .await;
    assert_eq!(twice.code, roundtable_protocol::ErrorCode::Conflict);

    // A restart loads only what can still change.
    let before = memory(&hub).await;
    assert_eq!(before, [4, 0, 1, 0]);
    hub.restart().await;
    assert_eq!(memory(&hub).await, before);
}
