//! Keeping agents in check: pause, resume and stop; token rotation and revocation; rate
//! limits; the audit log.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::*;
use roundtable_protocol::model::AuditResult;
use roundtable_protocol::server::{AgentTokenOk, AuditOk, SendOk};
use roundtable_testkit::{Incoming, TestHub, message};
use serde_json::json;

use crate::support::{agent, login, room, sync};

fn control(id: u64, agent: &str, action: ControlAction, room: Option<&str>) -> ClientFrame {
    ClientFrame::Control(Control {
        id,
        agent: agent.into(),
        action,
        room: room.map(str::to_owned),
        reason: None,
    })
}

#[tokio::test]
async fn a_paused_agent_is_refused_and_told_why() {
    let mut hub = TestHub::start().await;
    let (mut dana, dana_created) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let home = writer.room.clone().unwrap().id;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    sync(&mut writer_client, &[(&home, 100), ("inbox", 100)]).await;

    let id = dana.id();
    dana.ok(control(id, &writer.agent.id, ControlAction::Pause, None))
        .await;
    let told = writer_client.next_event().await.unwrap();
    assert_eq!(
        (told.stream.as_deref(), told.kind.as_str()),
        (Some("inbox"), "control")
    );
    assert_eq!(told.body["action"], "pause");
    assert_eq!(told.body["by"], dana_created.principal.id.as_str());

    let id = writer_client.id();
    let refused = writer_client
        .err(message(id, &home, "paused-msg-1", "flood"))
        .await;
    assert_eq!(refused.code, ErrorCode::Paused);
    // Status still goes through: the owner sees what the agent is doing.
    let id = writer_client.id();
    writer_client
        .ok(ClientFrame::Send(SendCmd {
            id,
            room: home.clone(),
            client_key: "status-while-paused".into(),
            kind: "status".into(),
            body: json!({"state": "idle", "detail": "paused"}),
        }))
        .await;

    // Durable across a restart.
    hub.restart().await;
    let mut dana = login(&hub, &dana_created.token, "d2").await;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    let id = writer_client.id();
    assert_eq!(
        writer_client
            .err(message(id, &home, "paused-msg-2", "x"))
            .await
            .code,
        ErrorCode::Paused
    );

    let id = dana.id();
    dana.ok(control(id, &writer.agent.id, ControlAction::Resume, None))
        .await;
    let id = writer_client.id();
    writer_client
        .ok(message(id, &home, "resumed-msg-1", "back"))
        .await;
}

#[tokio::test]
async fn a_room_creator_pauses_a_member_agent_in_that_room_only() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let shared = room(&mut dana, &["dana/writer"]).await;
    let home = writer.room.clone().unwrap().id;
    let mut writer_client = login(&hub, &writer.token, "w").await;

    let id = dana.id();
    dana.ok(control(
        id,
        &writer.agent.id,
        ControlAction::Stop,
        Some(&shared),
    ))
    .await;
    // Stopped in that room: every kind is refused there; elsewhere it goes on.
    let id = writer_client.id();
    let refused = writer_client
        .err(ClientFrame::Send(SendCmd {
            id,
            room: shared.clone(),
            client_key: "status-stopped".into(),
            kind: "status".into(),
            body: json!({"state": "working"}),
        }))
        .await;
    assert_eq!(refused.code, ErrorCode::Paused);
    let id = writer_client.id();
    writer_client
        .ok(message(id, &home, "elsewhere-001", "still here"))
        .await;
    let id = dana.id();
    dana.ok(control(
        id,
        &writer.agent.id,
        ControlAction::Resume,
        Some(&shared),
    ))
    .await;
    let id = writer_client.id();
    writer_client
        .ok(message(id, &shared, "resumed-here-1", "ok"))
        .await;
}

#[tokio::test]
async fn stopping_an_agent_closes_its_connections_until_resumed() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let mut writer_client = login(&hub, &writer.token, "w").await;

    let id = dana.id();
    dana.ok(control(id, &writer.agent.id, ControlAction::Stop, None))
        .await;
    // Stopped, not revoked (amendment 1): 4011, and the token stays valid.
    assert_eq!(writer_client.closed().await.unwrap(), Some(4011));
    // It cannot come back until resumed.
    let mut again = hub.connect().await;
    let id = again.id();
    again
        .send_frame(&ClientFrame::Auth(Auth {
            id,
            token: writer.token.clone(),
            device: "w".into(),
            client: ClientInfo::default(),
        }))
        .await
        .unwrap();
    match again.recv().await.unwrap() {
        Incoming::Frame(roundtable_protocol::ServerFrame::Err(err)) => {
            assert_eq!(err.code, ErrorCode::Paused)
        }
        other => panic!("expected err paused, got {other:?}"),
    }
    assert_eq!(again.closed().await.unwrap(), Some(4011));
    let id = dana.id();
    dana.ok(control(id, &writer.agent.id, ControlAction::Resume, None))
        .await;
    login(&hub, &writer.token, "w").await;
}

#[tokio::test]
async fn a_revoked_token_stops_working_at_once_and_a_rotated_one_is_replaced() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let mut live = login(&hub, &writer.token, "w").await;

    let id = dana.id();
    let rotated: AgentTokenOk = dana
        .ok(ClientFrame::AgentToken(AgentToken {
            id,
            agent: writer.agent.id.clone(),
            action: TokenAction::Rotate,
        }))
        .await
        .decode()
        .unwrap();
    assert_eq!(live.closed().await.unwrap(), Some(4010));
    let new_token = rotated.token.expect("rotate returns the new token");
    assert_ne!(new_token, writer.token);
    let mut old = hub.connect().await;
    assert!(old.auth(&writer.token, "w").await.is_err());
    let mut fresh = login(&hub, &new_token, "w").await;

    let id = dana.id();
    let revoked: AgentTokenOk = dana
        .ok(ClientFrame::AgentToken(AgentToken {
            id,
            agent: writer.agent.id.clone(),
            action: TokenAction::Revoke,
        }))
        .await
        .decode()
        .unwrap();
    assert_eq!(revoked.token, None);
    assert_eq!(fresh.closed().await.unwrap(), Some(4010));
    let mut after = hub.connect().await;
    assert!(after.auth(&new_token, "w").await.is_err());
}

#[tokio::test]
async fn sends_past_the_rate_limit_are_refused_with_a_delay_never_dropped() {
    let hub = TestHub::start_with(|config| {
        config.rate_limits = Some(roundtable_engine::RateLimits {
            agent: "5/1".parse().unwrap(),
            user: "200/50".parse().unwrap(),
        })
    })
    .await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let home = writer.room.clone().unwrap().id;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    let mut accepted = Vec::new();
    for n in 0..3 {
        let id = writer_client.id();
        let sent: SendOk = writer_client
            .ok(message(id, &home, &format!("burst-key-{n:03}"), "burst"))
            .await
            .decode()
            .unwrap();
        accepted.push(sent.event);
    }
    // Retries of accepted keys, while tokens are left, take none of them.
    for _ in 0..4 {
        let id = writer_client.id();
        let dup: SendOk = writer_client
            .ok(message(id, &home, "burst-key-000", "burst"))
            .await
            .decode()
            .unwrap();
        assert!(dup.dup);
    }
    for n in 3..5 {
        let id = writer_client.id();
        let sent: SendOk = writer_client
            .ok(message(id, &home, &format!("burst-key-{n:03}"), "burst"))
            .await
            .decode()
            .unwrap();
        accepted.push(sent.event);
    }
    let id = writer_client.id();
    let limited = writer_client
        .err(message(id, &home, "burst-key-005", "one too many"))
        .await;
    assert_eq!(limited.code, ErrorCode::RateLimited);
    let wait = limited.retry_after_ms.expect("a delay to wait");
    assert!((1..=1000).contains(&wait), "{wait}");
    // A retry of an accepted key is answered even now: it uses no token.
    let id = writer_client.id();
    let dup: SendOk = writer_client
        .ok(message(id, &home, "burst-key-002", "burst"))
        .await
        .decode()
        .unwrap();
    assert!(dup.dup);
    assert_eq!(dup.event, accepted[2]);
    // After the delay, the refused send goes through.
    hub.config
        .clock
        .advance(std::time::Duration::from_millis(wait + 20));
    let id = writer_client.id();
    writer_client
        .ok(message(id, &home, "burst-key-005", "one too many"))
        .await;
}

#[tokio::test]
async fn the_audit_log_records_changes_and_refusals_for_the_owner() {
    let hub = TestHub::start().await;
    let (mut dana, dana_created) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    let id = writer_client.id();
    writer_client
        .err(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: "sub".into(),
            description: None,
            card: None,
            discoverable: None,
        }))
        .await;
    let id = dana.id();
    dana.ok(control(id, &writer.agent.id, ControlAction::Pause, None))
        .await;

    let id = dana.id();
    let audit: AuditOk = dana
        .ok(ClientFrame::Audit(Audit {
            id,
            principal: None,
            since: None,
            limit: None,
        }))
        .await
        .decode()
        .unwrap();
    let actions: Vec<(String, String, AuditResult, Option<String>)> = audit
        .entries
        .iter()
        .map(|e| {
            (
                e.principal.clone(),
                e.action.clone(),
                e.result,
                e.code.clone(),
            )
        })
        .collect();
    let dana_id = dana_created.principal.id.clone();
    let writer_id = writer.agent.id.clone();
    assert_eq!(
        actions,
        vec![
            (dana_id.clone(), "signup".into(), AuditResult::Ok, None),
            (
                dana_id.clone(),
                "register_agent".into(),
                AuditResult::Ok,
                None
            ),
            (
                writer_id.clone(),
                "register_agent".into(),
                AuditResult::Err,
                Some("forbidden".into())
            ),
            (dana_id.clone(), "control".into(), AuditResult::Ok, None),
        ]
    );
    assert!(audit.entries.windows(2).all(|w| w[0].n < w[1].n));
    assert!(audit.entries.iter().all(|e| e.hash.len() == 64));

    // Only the agent's entries; an agent may not read the log; nor may a stranger's.
    let id = dana.id();
    let only: AuditOk = dana
        .ok(ClientFrame::Audit(Audit {
            id,
            principal: Some(writer_id.clone()),
            since: None,
            limit: None,
        }))
        .await
        .decode()
        .unwrap();
    assert_eq!(only.entries.len(), 1);
    let id = writer_client.id();
    assert_eq!(
        writer_client
            .err(ClientFrame::Audit(Audit {
                id,
                principal: None,
                since: None,
                limit: None
            }))
            .await
            .code,
        ErrorCode::Forbidden
    );
    let (mut eve, _) = hub.user("eve").await;
    let id = eve.id();
    assert_eq!(
        eve.err(ClientFrame::Audit(Audit {
            id,
            principal: Some(dana_id),
            since: None,
            limit: None
        }))
        .await
        .code,
        ErrorCode::Forbidden
    );
    // Refused authentications are on record too, even before a token is checked.
    let mut stranger = hub.connect().await;
    stranger.send_text(r#"{"t":"rooms","id":1}"#).await.unwrap();
    assert_eq!(stranger.closed().await.unwrap(), Some(4001));
    let refused_auths: i64 = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            let count = hub.select_i64(
                "SELECT count(*) FROM audit WHERE action = 'auth' AND code = 'unauthorized'",
            );
            if count > 0 {
                return count;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the refused auth is recorded");
    assert_eq!(refused_auths, 1);
    // The chain verifies from the hub's files.
    let (count, head) = roundtable_hub::admin::verify_audit(&hub.config, None).unwrap();
    assert!(count >= 5, "{count}");
    assert_eq!(head.len(), 64);
}

#[tokio::test]
async fn a_control_says_why_to_the_agent_and_in_the_audit_log() {
    let mut hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    sync(&mut writer_client, &[("inbox", 100)]).await;
    let because = |id: u64, reason: &str| {
        ClientFrame::Control(Control {
            id,
            agent: writer.agent.id.clone(),
            action: ControlAction::Pause,
            room: None,
            reason: Some(reason.into()),
        })
    };

    // A reason over the limit, or with a control character, is refused and changes nothing.
    let id = dana.id();
    let long = "x".repeat(roundtable_protocol::limits::CONTROL_REASON + 1);
    assert_eq!(dana.err(because(id, &long)).await.code, ErrorCode::TooLarge);
    let id = dana.id();
    assert_eq!(
        dana.err(because(id, "over\u{7}budget")).await.code,
        ErrorCode::BadFrame
    );
    let id = writer_client.id();
    let home = writer.room.clone().unwrap().id;
    writer_client
        .ok(message(id, &home, "still-free-1", "not paused"))
        .await;

    let reason = "budget: $5.00 a day for dana/writer reached ($5.02 spent)";
    let id = dana.id();
    dana.ok(because(id, reason)).await;
    let told = loop {
        let event = writer_client.next_event().await.unwrap();
        if event.kind == "control" {
            break event;
        }
    };
    assert_eq!(told.body["action"], "pause");
    assert_eq!(told.body["reason"], reason);
    // A refused write says it too, also after a restart of the hub (the control keeps it).
    let id = writer_client.id();
    let refused = writer_client
        .err(message(id, &home, "paused-why-1", "more"))
        .await;
    assert_eq!(refused.code, ErrorCode::Paused);
    assert!(
        refused.msg.ends_with(&format!(
            "Reason, as dana wrote it (JSON-quoted): {}",
            serde_json::to_string(reason).unwrap()
        )),
        "{}",
        refused.msg
    );

    let id = dana.id();
    let audit: AuditOk = dana
        .ok(ClientFrame::Audit(Audit {
            id,
            principal: None,
            since: None,
            limit: None,
        }))
        .await
        .decode()
        .unwrap();
    let control = audit
        .entries
        .iter()
        .rfind(|entry| entry.action == "control" && entry.result == AuditResult::Ok)
        .unwrap();
    assert_eq!(control.reason.as_deref(), Some(reason));
    // The reason is part of what the chain covers, and the chain still verifies.
    roundtable_hub::admin::verify_audit(&hub.config, None).unwrap();
    drop((dana, writer_client));
    hub.restart().await;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    let id = writer_client.id();
    let refused = writer_client
        .err(message(id, &home, "paused-why-2", "again"))
        .await;
    assert!(
        refused.msg.ends_with(&format!(
            "Reason, as dana wrote it (JSON-quoted): {}",
            serde_json::to_string(reason).unwrap()
        )),
        "{}",
        refused.msg
    );
}
