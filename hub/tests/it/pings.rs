//! Questions for a human, and the first answer winning.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::{ClientFrame, SendCmd};
use roundtable_testkit::TestHub;
use serde_json::{Value, json};

use crate::support::{agent, login, sync};

fn send(id: u64, room: &str, key: &str, kind: &str, body: Value) -> ClientFrame {
    ClientFrame::Send(SendCmd {
        id,
        room: room.into(),
        client_key: key.into(),
        kind: kind.into(),
        body,
    })
}

#[tokio::test]
async fn the_first_answer_wins_and_everyone_sees_who_answered() {
    let hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let reviewer = agent(&mut dana, "reviewer").await;
    let room_id = reviewer.room.clone().unwrap().id;
    let mut agent_client = login(&hub, &reviewer.token, "agent").await;
    let mut phone = login(&hub, &created.token, "phone").await;
    sync(&mut agent_client, &[(&room_id, 100), ("inbox", 100)]).await;

    let question =
        json!({"ping": "q1", "question": "Keep the old config format?", "options": ["yes", "no"]});
    let id = agent_client.id();
    agent_client
        .ok(send(id, &room_id, "ping-q1-0001", "ping", question.clone()))
        .await;
    let id = agent_client.id();
    let again = agent_client
        .err(send(id, &room_id, "ping-q1-0002", "ping", question))
        .await;
    assert_eq!(again.code, ErrorCode::Conflict);

    // Agents do not answer pings.
    let id = agent_client.id();
    let by_agent = agent_client
        .err(send(
            id,
            &room_id,
            "answer-agent",
            "answer",
            json!({"ping": "q1", "choice": "yes"}),
        ))
        .await;
    assert_eq!(by_agent.code, ErrorCode::Forbidden);

    let id = dana.id();
    let unknown = dana
        .err(send(
            id,
            &room_id,
            "answer-none-1",
            "answer",
            json!({"ping": "q9", "choice": "yes"}),
        ))
        .await;
    assert_eq!(unknown.code, ErrorCode::NotFound);

    let id = dana.id();
    dana.ok(send(
        id,
        &room_id,
        "answer-laptop",
        "answer",
        json!({"ping": "q1", "choice": "yes"}),
    ))
    .await;
    let id = phone.id();
    let late = phone
        .err(send(
            id,
            &room_id,
            "answer-phone1",
            "answer",
            json!({"ping": "q1", "choice": "no"}),
        ))
        .await;
    assert_eq!(late.code, ErrorCode::Conflict);
    assert!(late.msg.contains("dana"), "{}", late.msg);

    // The agent sees the answer (non-message kinds reach every member).
    let answer = loop {
        let event = agent_client.next_event().await.unwrap();
        if event.kind == "answer" {
            break event;
        }
    };
    assert_eq!(answer.body["choice"], "yes");
    assert_eq!(answer.from, created.principal.id);
}

#[tokio::test]
async fn pings_addressed_to_others_or_expired_cannot_be_answered() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let room_id = writer.room.clone().unwrap().id;
    let mut agent_client = login(&hub, &writer.token, "agent").await;

    let id = agent_client.id();
    agent_client
        .ok(send(
            id,
            &room_id,
            "ping-addr-01",
            "ping",
            json!({"ping": "addressed", "question": "?", "to": ["p_someone_else"]}),
        ))
        .await;
    let id = dana.id();
    let refused = dana
        .err(send(
            id,
            &room_id,
            "answer-addr-1",
            "answer",
            json!({"ping": "addressed", "text": "me?"}),
        ))
        .await;
    assert_eq!(refused.code, ErrorCode::Forbidden);

    let id = agent_client.id();
    agent_client
        .ok(send(
            id,
            &room_id,
            "ping-expired",
            "ping",
            json!({"ping": "old", "question": "?", "expires_at": "2020-01-01T00:00:00Z"}),
        ))
        .await;
    let id = dana.id();
    let expired = dana
        .err(send(
            id,
            &room_id,
            "answer-old-01",
            "answer",
            json!({"ping": "old", "choice": "yes"}),
        ))
        .await;
    assert_eq!(expired.code, ErrorCode::Conflict);
    assert!(expired.msg.contains("expired"));

    let id = dana.id();
    let empty = dana
        .err(send(
            id,
            &room_id,
            "answer-empty1",
            "answer",
            json!({"ping": "old"}),
        ))
        .await;
    assert_eq!(empty.code, ErrorCode::BadFrame);
}

#[tokio::test]
async fn answers_survive_a_restart() {
    let mut hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let room_id = writer.room.clone().unwrap().id;
    let mut agent_client = login(&hub, &writer.token, "agent").await;
    let id = agent_client.id();
    agent_client
        .ok(send(
            id,
            &room_id,
            "ping-keep-01",
            "ping",
            json!({"ping": "keep", "question": "?"}),
        ))
        .await;
    let id = dana.id();
    dana.ok(send(
        id,
        &room_id,
        "answer-keep-1",
        "answer",
        json!({"ping": "keep", "choice": "ok"}),
    ))
    .await;
    hub.restart().await;
    let mut dana = login(&hub, &created.token, "laptop").await;
    let id = dana.id();
    let again = dana
        .err(send(
            id,
            &room_id,
            "answer-keep-2",
            "answer",
            json!({"ping": "keep", "choice": "ok"}),
        ))
        .await;
    assert_eq!(again.code, ErrorCode::Conflict);
    let mut agent_client = login(&hub, &writer.token, "agent").await;
    let id = agent_client.id();
    let dup = agent_client
        .err(send(
            id,
            &room_id,
            "ping-keep-02",
            "ping",
            json!({"ping": "keep", "question": "?"}),
        ))
        .await;
    assert_eq!(dup.code, ErrorCode::Conflict);
}
