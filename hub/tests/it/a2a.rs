//! The A2A gateway over real HTTP: agent cards and who may see them, a task's round trip
//! with a WebSocket agent answering, and the refusals a hostile or careless client gets
//! (exact status and code, nothing written, refusals audited `via: a2a`). The official
//! clients (`a2a-sdk`) drive it end to end in `tests/e2e/a2a_python.rs`.

use std::net::SocketAddr;

use roundtable_protocol::client::{ClientFrame, RegisterAgent};
use roundtable_protocol::model::Discoverable;
use roundtable_protocol::server::{Event, RegisterAgentOk};
use roundtable_testkit::{Client, RawResponse, TestHub, http_raw};
use serde_json::{Value, json};

use crate::support::{fingerprint, login, metric, request_contact, respond, sync};

async fn register(
    owner: &mut Client,
    name: &str,
    discoverable: Discoverable,
    card: Option<Value>,
) -> RegisterAgentOk {
    let id = owner.id();
    owner
        .ok(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: name.into(),
            description: Some(format!("{name}, for A2A tests")),
            card,
            discoverable: Some(discoverable),
        }))
        .await
        .decode()
        .unwrap()
}

/// dana's agents `dana/reviewer` (public) and `dana/secret` (contacts only); erin is a
/// contact of the reviewer (dana accepted her request), frank is no one's contact.
struct World {
    hub: TestHub,
    reviewer: RegisterAgentOk,
    dana: String,
    erin: String,
    frank: String,
}

async fn world() -> World {
    world_with(|_| {}).await
}

async fn world_with(adjust: impl FnOnce(&mut roundtable_hub::HubConfig)) -> World {
    let hub = TestHub::start_with(adjust).await;
    let (mut dana, dana_signup) = hub.user("dana").await;
    let (mut erin_client, erin) = hub.user("erin").await;
    let (_, frank) = hub.user("frank").await;
    let reviewer = register(
        &mut dana,
        "reviewer",
        Discoverable::Public,
        Some(json!({"framework": "codex", "model": "gpt-5"})),
    )
    .await;
    register(&mut dana, "secret", Discoverable::Contacts, None).await;
    let request = request_contact(&mut erin_client, "dana/reviewer").await;
    respond(&mut dana, &request.id, true).await;
    World {
        hub,
        reviewer,
        dana: dana_signup.token,
        erin: erin.token,
        frank: frank.token,
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn rpc(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> RawResponse {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let authorization = token.map(bearer);
    let mut headers = vec![("Content-Type", "application/json"), ("A2A-Version", "1.0")];
    if let Some(authorization) = authorization.as_deref() {
        headers.push(("Authorization", authorization));
    }
    http_raw(addr, "POST", path, &headers, Some(body.as_bytes()))
        .await
        .unwrap()
}

fn text_message(id: &str, text: &str) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// Answers every message that mentions the agent with `reviewed: <text>`, replying to it.
fn answer_mentions(mut agent: Client, me: String) -> tokio::task::JoinHandle<Vec<Event>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Ok(event) = agent.next_event().await {
            if event.kind != "message" || event.from == me {
                continue;
            }
            let text = event.body["text"].as_str().unwrap_or_default().to_owned();
            let id = agent.id();
            let room = event.stream_name().to_owned();
            let reply = ClientFrame::Send(roundtable_protocol::client::SendCmd {
                id,
                room,
                client_key: format!("reply-{}", event.id),
                kind: "message".into(),
                body: json!({"text": format!("reviewed: {text}"), "reply_to": event.id}),
            });
            agent.ok(reply).await;
            seen.push(event);
        }
        seen
    })
}

#[tokio::test]
async fn a_public_agent_s_card_is_anyone_s_and_a_contacts_only_one_is_404_like_a_missing_one() {
    let world = world().await;
    let addr = world.hub.addr;
    let card_path = "/a2a/dana/reviewer/.well-known/agent-card.json";
    let anonymous = http_raw(addr, "GET", card_path, &[], None).await.unwrap();
    assert_eq!(anonymous.status, 200, "{}", anonymous.body);
    let card = anonymous.json();
    assert_eq!(card["name"], "reviewer");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("http://{addr}/a2a/dana/reviewer")
    );
    assert_eq!(
        card["capabilities"]["extensions"][0]["params"]["framework"],
        "codex"
    );
    assert_eq!(
        anonymous.header("cache-control"),
        Some("public, max-age=300")
    );
    assert_eq!(anonymous.header("vary"), Some("Authorization"));
    // The official A2A CLI fetches the card and validates it against the A2A JSON schema.
    let card_url = format!("http://{addr}{card_path}");
    a2acli::run_args(["a2acli", "-a", &card_url, "card", "get", "--validate"])
        .await
        .unwrap_or_else(|error| panic!("a2acli refused the card: {error:?}"));
    let etag = anonymous.header("etag").unwrap().to_owned();
    let again = http_raw(addr, "GET", card_path, &[("If-None-Match", &etag)], None)
        .await
        .unwrap();
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());

    // The contacts-only agent: anonymous and strangers get exactly a missing agent's 404.
    let missing = http_raw(
        addr,
        "GET",
        "/a2a/dana/nobody/.well-known/agent-card.json",
        &[],
        None,
    )
    .await
    .unwrap();
    assert_eq!(missing.status, 404);
    let secret_path = "/a2a/dana/secret/.well-known/agent-card.json";
    let hidden = http_raw(addr, "GET", secret_path, &[], None).await.unwrap();
    assert_eq!((hidden.status, &hidden.body), (404, &missing.body));
    let frank = bearer(&world.frank);
    let stranger = http_raw(addr, "GET", secret_path, &[("Authorization", &frank)], None)
        .await
        .unwrap();
    assert_eq!((stranger.status, &stranger.body), (404, &missing.body));
    // Its owner sees it, privately cached.
    let dana = bearer(&world.dana);
    let owner = http_raw(addr, "GET", secret_path, &[("Authorization", &dana)], None)
        .await
        .unwrap();
    assert_eq!(owner.status, 200, "{}", owner.body);
    // A card without skills or a framework is valid too.
    let violations = a2acli::card_schema::validate_agent_card(&owner.json()).unwrap();
    assert!(violations.is_empty(), "{violations:?}");
    // (The validator does refuse a card that breaks the schema.)
    let mut broken = owner.json();
    broken["capabilities"]["streaming"] = json!("yes");
    assert!(
        !a2acli::card_schema::validate_agent_card(&broken)
            .unwrap()
            .is_empty()
    );
    assert_eq!(owner.header("cache-control"), Some("private, max-age=60"));
    // Users have no endpoint; a bad token is refused before anything is looked up.
    let user = http_raw(addr, "POST", "/a2a/dana", &[], None)
        .await
        .unwrap();
    assert_eq!(user.status, 404);
    let user_card = http_raw(
        addr,
        "GET",
        "/a2a/dana/.well-known/agent-card.json",
        &[("Authorization", &frank)],
        None,
    )
    .await
    .unwrap();
    assert_eq!((user_card.status, &user_card.body), (404, &missing.body));
    let forged = http_raw(
        addr,
        "GET",
        card_path,
        &[(
            "Authorization",
            "Bearer rt_forged_token_forged_token_forged_0000",
        )],
        None,
    )
    .await
    .unwrap();
    assert_eq!(forged.status, 401);
    assert_eq!(
        forged.header("www-authenticate"),
        Some("Bearer realm=\"roundtable\"")
    );
}

#[tokio::test]
async fn a_contact_s_message_becomes_a_task_the_agent_s_reply_completes() {
    let world = world().await;
    let addr = world.hub.addr;
    let mut agent = login(&world.hub, &world.reviewer.token, "reviewer").await;
    sync(&mut agent, &[]).await;
    let answering = answer_mentions(agent, world.reviewer.agent.id.clone());
    let endpoint = "/a2a/dana/reviewer";

    let sent = rpc(
        addr,
        endpoint,
        Some(&world.erin),
        "SendMessage",
        text_message("m-1", "PR 42"),
    )
    .await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    let task = sent.json()["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "reviewed: PR 42");
    let task_id = task["id"].as_str().unwrap().to_owned();
    let room = task["contextId"].as_str().unwrap().to_owned();
    assert_eq!(task["history"][0]["role"], "ROLE_USER");

    // The same messageId again is the same task: one event in the room.
    let again = rpc(
        addr,
        endpoint,
        Some(&world.erin),
        "SendMessage",
        text_message("m-1", "PR 42"),
    )
    .await;
    assert_eq!(again.json()["result"]["task"]["id"], task_id.as_str());
    let stored = world.hub.select_i64(&format!(
        "SELECT count(*) FROM events WHERE stream = '{room}' AND kind = 'message'"
    ));
    assert_eq!(stored, 2, "the message and its reply, once each");

    // A second message reuses the pair's room.
    let second = rpc(
        addr,
        endpoint,
        Some(&world.erin),
        "SendMessage",
        text_message("m-2", "PR 43"),
    )
    .await;
    assert_eq!(second.json()["result"]["task"]["contextId"], room.as_str());

    let got = rpc(
        addr,
        endpoint,
        Some(&world.erin),
        "GetTask",
        json!({"id": task_id}),
    )
    .await;
    assert_eq!(
        got.json()["result"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let listed = rpc(
        addr,
        endpoint,
        Some(&world.erin),
        "ListTasks",
        json!({"pageSize": 1}),
    )
    .await;
    let listed = listed.json();
    assert_eq!(
        listed["result"]["tasks"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
    let token = listed["result"]["nextPageToken"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!token.is_empty());
    let rest = rpc(
        addr,
        endpoint,
        Some(&world.erin),
        "ListTasks",
        json!({"pageSize": 5, "pageToken": token}),
    )
    .await
    .json();
    assert_eq!(rest["result"]["tasks"][0]["id"], task_id.as_str(), "{rest}");
    assert_eq!(rest["result"]["nextPageToken"], "");

    // Another principal's task is unknown to frank, exactly like one that never existed.
    let theirs = rpc(
        addr,
        endpoint,
        Some(&world.frank),
        "GetTask",
        json!({"id": task_id}),
    )
    .await;
    let never = rpc(
        addr,
        endpoint,
        Some(&world.frank),
        "GetTask",
        json!({"id": "r_nothing.1"}),
    )
    .await;
    assert_eq!(theirs.json()["error"]["code"], -32001);
    assert_eq!(never.json()["error"]["code"], -32001);
    let cancel = rpc(
        addr,
        endpoint,
        Some(&world.frank),
        "CancelTask",
        json!({"id": task_id}),
    )
    .await;
    assert_eq!(cancel.json()["error"]["code"], -32001);
    // A completed task cannot be canceled by its requester either.
    let done = rpc(
        addr,
        endpoint,
        Some(&world.erin),
        "CancelTask",
        json!({"id": task_id}),
    )
    .await;
    assert_eq!(done.json()["error"]["code"], -32002);
    answering.abort();
}

#[tokio::test]
async fn capabilities_the_hub_lacks_are_refused_and_write_nothing() {
    let world = world().await;
    let addr = world.hub.addr;
    let endpoint = "/a2a/dana/reviewer";
    let before = fingerprint(&world.hub);
    let erin = Some(world.erin.as_str());
    let push = rpc(
        addr,
        endpoint,
        erin,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": "r_x.1", "url": "https://example.com/hook"}),
    )
    .await;
    assert_eq!(push.json()["error"]["code"], -32003);
    let extended = rpc(addr, endpoint, erin, "GetExtendedAgentCard", json!({})).await;
    assert_eq!(extended.json()["error"]["code"], -32004);
    let file = rpc(
        addr,
        endpoint,
        erin,
        "SendMessage",
        json!({"message": {"messageId": "file-1", "role": "ROLE_USER",
               "parts": [{"url": "https://example.com/a.png", "mediaType": "image/png"}]}}),
    )
    .await;
    assert_eq!(file.json()["error"]["code"], -32005, "{}", file.body);
    let long = "x".repeat(16 * 1024 + 1);
    let too_long = rpc(
        addr,
        endpoint,
        erin,
        "SendMessage",
        text_message("long-1", &long),
    )
    .await;
    assert_eq!(too_long.json()["error"]["code"], -32602);
    // No A2A-Version header: a 0.3 client, refused.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "r_x.1"}})
        .to_string();
    let erin_auth = bearer(&world.erin);
    let old = http_raw(
        addr,
        "POST",
        endpoint,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &erin_auth),
        ],
        Some(body.as_bytes()),
    )
    .await
    .unwrap();
    assert_eq!(old.json()["error"]["code"], -32009, "{}", old.body);
    assert_eq!(
        fingerprint(&world.hub),
        before,
        "nothing written by any of them"
    );
}

#[tokio::test]
async fn hostile_requests_get_exact_refusals_no_5xx_and_are_audited() {
    let world = world().await;
    let addr = world.hub.addr;
    let endpoint = "/a2a/dana/reviewer";
    let before = fingerprint(&world.hub);
    // No token, a token in the query, a forged token: 401 with the Bearer challenge.
    let none = rpc(addr, endpoint, None, "GetTask", json!({"id": "r_x.1"})).await;
    assert_eq!(none.status, 401);
    assert_eq!(
        none.header("www-authenticate"),
        Some("Bearer realm=\"roundtable\"")
    );
    let query = rpc(
        addr,
        &format!("{endpoint}?access_token={}", world.erin),
        None,
        "GetTask",
        json!({"id": "r_x.1"}),
    )
    .await;
    assert_eq!(query.status, 401);
    let forged = rpc(
        addr,
        endpoint,
        Some("rt_forged_token_forged_token_forged_0000"),
        "GetTask",
        json!({"id": "r_x.1"}),
    )
    .await;
    assert_eq!(forged.status, 401);
    // Unauthenticated, a missing agent and a hidden one look the same (401 first).
    let hidden = rpc(addr, "/a2a/dana/secret", None, "GetTask", json!({})).await;
    let missing = rpc(addr, "/a2a/dana/nobody", None, "GetTask", json!({})).await;
    assert_eq!((hidden.status, missing.status), (401, 401));
    assert_eq!(hidden.body, missing.body);
    // Authenticated: a hidden agent is a missing one.
    let hidden = rpc(
        addr,
        "/a2a/dana/secret",
        Some(&world.frank),
        "GetTask",
        json!({}),
    )
    .await;
    let missing = rpc(
        addr,
        "/a2a/dana/nobody",
        Some(&world.frank),
        "GetTask",
        json!({}),
    )
    .await;
    assert_eq!((hidden.status, missing.status), (404, 404));
    assert_eq!(hidden.body, missing.body);

    // Malformed bodies: JSON-RPC errors, never a 5xx.
    let erin_auth = bearer(&world.erin);
    let headers = [
        ("Content-Type", "application/json"),
        ("A2A-Version", "1.0"),
        ("Authorization", erin_auth.as_str()),
    ];
    for (body, code) in [
        ("{", -32700),
        ("[]", -32600),
        ("{\"jsonrpc\":\"2.0\",\"id\":1}", -32600),
        (
            "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"GetTask\"}",
            -32600,
        ),
        ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Nope\"}", -32601),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":7}",
            -32602,
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":{\"messageId\":\"\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"x\"}]}}}",
            -32602,
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":{\"messageId\":\"p\",\"role\":\"ROLE_USER\",\"parts\":[]}}}",
            -32602,
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"../../etc\"}}",
            -32001,
        ),
    ] {
        let response = http_raw(addr, "POST", endpoint, &headers, Some(body.as_bytes()))
            .await
            .unwrap();
        assert!(response.status < 500, "{body}: {}", response.status);
        assert_eq!(
            response.json()["error"]["code"],
            code,
            "{body}: {}",
            response.body
        );
    }
    // A body over 1 MiB: 413 before anything is parsed.
    let huge = vec![b' '; 2 * 1024 * 1024];
    let oversized = http_raw(addr, "POST", endpoint, &headers, Some(&huge))
        .await
        .unwrap();
    assert_eq!(oversized.status, 413);
    assert_eq!(
        fingerprint(&world.hub),
        before,
        "the refusals wrote nothing"
    );
    // A client's own X-Roundtable-Principal is dropped: frank cannot pass for erin (who
    // has consent); his message is held for consent, as his.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": text_message("spoof-1", "hi")})
    .to_string();
    let frank_auth = bearer(&world.frank);
    let id_of = |handle: &str| {
        world.hub.select(&format!(
            "SELECT id FROM principals WHERE handle = '{handle}'"
        ))[0][0]
            .clone()
    };
    let spoofed = http_raw(
        addr,
        "POST",
        endpoint,
        &[
            ("Content-Type", "application/json"),
            ("A2A-Version", "1.0"),
            ("Authorization", &frank_auth),
            ("X-Roundtable-Principal", &id_of("erin")),
            ("X-Roundtable-Principal-Kind", "user"),
        ],
        Some(body.as_bytes()),
    )
    .await
    .unwrap();
    assert_eq!(
        spoofed.json()["result"]["task"]["status"]["state"],
        "TASK_STATE_AUTH_REQUIRED",
        "{}",
        spoofed.body
    );
    assert_eq!(
        world
            .hub
            .select("SELECT sender FROM contact_requests WHERE held_key IS NOT NULL"),
        [[id_of("frank")]]
    );
    // The refusals are in the audit log, marked as A2A's.
    let audited = world.hub.select_i64(
        "SELECT count(*) FROM audit WHERE via = 'a2a' AND result = 'err' AND action = 'auth'",
    );
    assert!(audited >= 1, "a forged token's refusal is audited via a2a");
    let no_consent = world
        .hub
        .select_i64("SELECT count(*) FROM audit WHERE via = 'a2a' AND code = 'no_consent'");
    assert!(no_consent >= 1, "frank's refused room is audited via a2a");
    let asked = world.hub.select_i64(
        "SELECT count(*) FROM audit WHERE via = 'a2a' AND action = 'contact_request' AND result = 'ok'",
    );
    assert_eq!(asked, 1, "the request made for him is audited via a2a");
}

#[tokio::test]
async fn a_rate_limited_writer_gets_429_with_retry_after_and_its_message_id_still_works() {
    let hub = TestHub::start_with(|config| {
        let slow = roundtable_engine::RateLimit {
            burst: 4.0,
            per_second: 1.0,
        };
        config.rate_limits = Some(roundtable_engine::RateLimits {
            agent: slow,
            user: slow,
        });
    })
    .await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut erin_client, erin) = hub.user("erin").await;
    register(&mut dana, "reviewer", Discoverable::Public, None).await;
    let request = request_contact(&mut erin_client, "dana/reviewer").await;
    respond(&mut dana, &request.id, true).await;
    let send = |message_id: String| {
        let token = erin.token.clone();
        async move {
            rpc(
                hub.addr,
                "/a2a/dana/reviewer",
                Some(&token),
                "SendMessage",
                json!({"message": {"messageId": message_id, "role": "ROLE_USER",
                       "parts": [{"text": "hi"}]}, "configuration": {"returnImmediately": true}}),
            )
            .await
        }
    };
    let mut limited = None;
    for n in 0..10 {
        let response = send(format!("burst-{n}")).await;
        if response.status == 429 {
            limited = Some((n, response));
            break;
        }
        assert_eq!(response.status, 200, "{}", response.body);
    }
    let (n, limited) = limited.expect("the burst ran out");
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=10).contains(&retry), "{retry}");
    let stored = |hub: &TestHub| {
        hub.select_i64(
            "SELECT count(*) FROM events WHERE kind = 'message' AND client_key LIKE 'a2a:%'",
        )
    };
    assert_eq!(stored(&hub), n as i64, "the limited message was not stored");
    // After Retry-After, the same messageId goes through, once.
    hub.config
        .clock
        .advance(std::time::Duration::from_secs(retry));
    let retried = send(format!("burst-{n}")).await;
    assert_eq!(retried.status, 200, "{}", retried.body);
    assert_eq!(
        retried.json()["result"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    assert_eq!(stored(&hub), n as i64 + 1);
}

/// The contact notes of requests, the bodies they hold, and every room event: what a
/// message without consent may have left behind.
fn traces(hub: &TestHub) -> (Vec<Vec<String>>, i64) {
    let requests = hub.select(
        "SELECT state, coalesce(message, ''), coalesce(held_body, '') FROM contact_requests \
         WHERE held_key IS NOT NULL ORDER BY created_ms, id",
    );
    let room_events = hub.select_i64("SELECT count(*) FROM events WHERE stream NOT LIKE 'inbox:%'");
    (requests, room_events)
}

#[tokio::test]
async fn without_consent_only_a_500_byte_note_reaches_the_owner_until_it_is_accepted() {
    let world = world().await;
    let addr = world.hub.addr;
    let endpoint = "/a2a/dana/reviewer";
    let (_, rooms_before) = traces(&world.hub);
    let long = "é".repeat(1_500); // 3,000 bytes
    let send = |id: &'static str, text: String| {
        let token = world.frank.clone();
        async move {
            rpc(
                addr,
                endpoint,
                Some(&token),
                "SendMessage",
                text_message(id, &text),
            )
            .await
        }
    };
    let held = send("n-1", long.clone()).await.json();
    let task = held["result"]["task"].clone();
    assert_eq!(
        task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{held}"
    );
    let task_id = task["id"].as_str().unwrap().to_owned();
    let request = task["contextId"].as_str().unwrap().to_owned();
    assert!(request.starts_with("c_"), "{request}");
    assert!(
        task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&request)
    );
    // Only the note reached dana: at most 500 bytes, cut on a character, with its "…".
    let (requests, rooms) = traces(&world.hub);
    assert_eq!(rooms, rooms_before, "nothing in any room");
    assert_eq!(requests.len(), 1);
    let note = &requests[0][1];
    assert!(
        note.len() <= 500 && note.ends_with('…'),
        "{} bytes",
        note.len()
    );
    assert!(long.starts_with(note.trim_end_matches('…')));
    assert!(
        requests[0][2].contains(&long),
        "the whole message is held with the request"
    );
    // The same messageId is the same task; another message waits its turn, unheld.
    let again = send("n-1", long.clone()).await.json();
    assert_eq!(again["result"]["task"]["id"], task_id.as_str());
    let second = send("n-2", "one more".into()).await.json();
    assert_eq!(second["error"]["code"], -32004, "{second}");
    assert_eq!(traces(&world.hub).0.len(), 1, "no second body held");
    let pending = rpc(
        addr,
        endpoint,
        Some(&world.frank),
        "GetTask",
        json!({"id": task_id}),
    )
    .await;
    assert_eq!(
        pending.json()["result"]["status"]["state"],
        "TASK_STATE_AUTH_REQUIRED"
    );

    // dana accepts: the message is sent, as frank's, in a room of the two; same task.
    let mut dana = login(&world.hub, &world.dana, "laptop").await;
    respond(&mut dana, &request, true).await;
    let delivered = rpc(
        addr,
        endpoint,
        Some(&world.frank),
        "GetTask",
        json!({"id": task_id}),
    )
    .await
    .json();
    let delivered = &delivered["result"];
    assert_eq!(
        delivered["status"]["state"], "TASK_STATE_SUBMITTED",
        "{delivered}"
    );
    let room = delivered["contextId"].as_str().unwrap();
    assert!(room.starts_with("r_"));
    assert_eq!(delivered["history"][0]["parts"][0]["text"], long.as_str());
    let members = world.hub.select(&format!(
        "SELECT p.handle FROM members m JOIN principals p ON p.id = m.principal \
         WHERE m.room = '{room}' ORDER BY p.handle"
    ));
    assert_eq!(members, [["dana/reviewer"], ["frank"]]);
    let (requests, _) = traces(&world.hub);
    assert_eq!(
        (requests[0][0].as_str(), requests[0][2].as_str()),
        ("accepted", "")
    );
}

#[tokio::test]
async fn a_held_message_is_deleted_when_its_request_is_rejected_or_cancelled() {
    let world = world().await;
    let addr = world.hub.addr;
    let endpoint = "/a2a/dana/reviewer";
    let (_, rooms_before) = traces(&world.hub);
    let held = |token: String, id: &'static str| async move {
        let task = rpc(
            addr,
            endpoint,
            Some(&token),
            "SendMessage",
            text_message(id, "let me in"),
        )
        .await
        .json();
        let task = &task["result"]["task"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
            "{task}"
        );
        (
            task["id"].as_str().unwrap().to_owned(),
            task["contextId"].as_str().unwrap().to_owned(),
        )
    };
    let state = |token: String, id: String| async move {
        rpc(addr, endpoint, Some(&token), "GetTask", json!({"id": id}))
            .await
            .json()["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    // Rejected by dana.
    let (rejected, request) = held(world.frank.clone(), "r-1").await;
    let mut dana = login(&world.hub, &world.dana, "laptop").await;
    respond(&mut dana, &request, false).await;
    assert_eq!(
        state(world.frank.clone(), rejected).await,
        "TASK_STATE_REJECTED"
    );
    // Cancelled by its sender, through CancelTask.
    let (_, gina) = world.hub.user("gina").await;
    let (cancelled, _) = held(gina.token.clone(), "c-1").await;
    let answer = rpc(
        addr,
        endpoint,
        Some(&gina.token),
        "CancelTask",
        json!({"id": cancelled}),
    )
    .await
    .json();
    assert_eq!(
        answer["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{answer}"
    );
    let (requests, rooms) = traces(&world.hub);
    assert_eq!(rooms, rooms_before, "nothing ever reached a room");
    assert_eq!(
        requests,
        [
            ["rejected".to_owned(), "let me in".to_owned(), String::new()],
            [
                "cancelled".to_owned(),
                "let me in".to_owned(),
                String::new()
            ]
        ],
        "both bodies deleted, the notes kept"
    );
}

/// Opens `SubscribeToTask` and reads the stream to its end, in the background.
fn subscribe(
    addr: SocketAddr,
    token: String,
    task: String,
) -> tokio::task::JoinHandle<RawResponse> {
    tokio::spawn(async move {
        rpc(
            addr,
            "/a2a/dana/reviewer",
            Some(&token),
            "SubscribeToTask",
            json!({"id": task}),
        )
        .await
    })
}

async fn ended(stream: tokio::task::JoinHandle<RawResponse>) -> RawResponse {
    tokio::time::timeout(std::time::Duration::from_secs(5), stream)
        .await
        .expect("the stream ends at once")
        .unwrap()
}

#[tokio::test]
async fn stopping_or_revoking_a_caller_closes_its_open_streams_at_once() {
    let world = world().await;
    let addr = world.hub.addr;
    let mut dana = login(&world.hub, &world.dana, "laptop").await;
    // dana's scout, kin of the reviewer, asks it something nobody answers.
    let scout = register(&mut dana, "scout", Discoverable::Private, None).await;
    let asked = rpc(
        addr,
        "/a2a/dana/reviewer",
        Some(&scout.token),
        "SendMessage",
        json!({"message": {"messageId": "s-1", "role": "ROLE_USER", "parts": [{"text": "?"}]},
               "configuration": {"returnImmediately": true}}),
    )
    .await
    .json();
    let task = asked["result"]["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        asked["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "kin need no consent: {asked}"
    );

    // Stopped by its owner: the open stream ends, and requests get 403 until a resume.
    let stream = subscribe(addr, scout.token.clone(), task.clone());
    stream_opened(&world.hub).await;
    let control = |action| {
        ClientFrame::Control(roundtable_protocol::client::Control {
            id: 9,
            agent: scout.agent.id.clone(),
            action,
            room: None,
            reason: None,
        })
    };
    dana.ok(control(roundtable_protocol::client::ControlAction::Stop))
        .await;
    let first = ended(stream).await;
    assert!(
        first.body.contains("TASK_STATE_SUBMITTED"),
        "the snapshot came first: {}",
        first.body
    );
    let stopped = rpc(
        addr,
        "/a2a/dana/reviewer",
        Some(&scout.token),
        "GetTask",
        json!({"id": task}),
    )
    .await;
    assert_eq!(stopped.status, 403, "{}", stopped.body);
    dana.ok(control(roundtable_protocol::client::ControlAction::Resume))
        .await;
    let resumed = rpc(
        addr,
        "/a2a/dana/reviewer",
        Some(&scout.token),
        "GetTask",
        json!({"id": task}),
    )
    .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);

    // Its token revoked: the stream ends, and the token is refused from then on.
    let stream = subscribe(addr, scout.token.clone(), task.clone());
    stream_opened(&world.hub).await;
    let id = dana.id();
    dana.ok(ClientFrame::AgentToken(
        roundtable_protocol::client::AgentToken {
            id,
            agent: scout.agent.id.clone(),
            action: roundtable_protocol::client::TokenAction::Revoke,
        },
    ))
    .await;
    ended(stream).await;
    let turned_away = metric(world.hub.addr, "roundtable_a2a_turned_away_total").await;
    let revoked = rpc(
        addr,
        "/a2a/dana/reviewer",
        Some(&scout.token),
        "GetTask",
        json!({"id": task}),
    )
    .await;
    assert_eq!(revoked.status, 401);
    assert_eq!(metric(world.hub.addr, "roundtable_a2a_streams").await, 0);
    assert_eq!(
        metric(world.hub.addr, "roundtable_a2a_turned_away_total").await,
        turned_away + 1
    );
    assert!(metric(world.hub.addr, "roundtable_a2a_requests_total").await >= 4);
}

/// Waits until the one stream the test opened is open on the hub: counted in its gauge,
/// which the hub does as it subscribes the stream to what ends it.
async fn stream_opened(hub: &TestHub) {
    roundtable_testkit::until(
        "the stream is open",
        std::time::Duration::from_secs(30),
        async || metric(hub.addr, "roundtable_a2a_streams").await == 1,
    )
    .await;
}

#[tokio::test]
async fn a_blocking_send_answers_the_task_as_it_is_once_its_wait_is_up() {
    let world = world_with(|config| {
        config.a2a_block_max = std::time::Duration::from_millis(300);
        config.operator_name = Some("Acme Labs".into());
    })
    .await;
    // Nobody answers: past the hub's cap, the task comes back still submitted.
    let started = std::time::Instant::now();
    let sent = rpc(
        world.hub.addr,
        "/a2a/dana/reviewer",
        Some(&world.erin),
        "SendMessage",
        text_message("wait-1", "anyone?"),
    )
    .await
    .json();
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{sent}"
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    let card = http_raw(
        world.hub.addr,
        "GET",
        "/a2a/dana/reviewer/.well-known/agent-card.json",
        &[],
        None,
    )
    .await
    .unwrap()
    .json();
    assert_eq!(card["provider"]["organization"], "Acme Labs");
}

/// Control characters in every string an A2A client gives (ids, the text, the context):
/// refused or not found, never a server error, on every store; nothing of it is written.
#[tokio::test]
async fn control_characters_in_a2a_strings_never_fail_the_hub() {
    let world = world().await;
    let addr = world.hub.addr;
    let endpoint = "/a2a/dana/reviewer";
    let message = |message_id: &str, text: &str, task: Option<&str>, context: Option<&str>| {
        let mut message = json!({"messageId": message_id, "role": "ROLE_USER",
                                 "parts": [{"text": text}]});
        if let Some(task) = task {
            message["taskId"] = json!(task);
        }
        if let Some(context) = context {
            message["contextId"] = json!(context);
        }
        json!({ "message": message, "configuration": {"returnImmediately": true} })
    };
    for hostile in ["ok\u{0}ok", "ok\u{7}ok", "ok\u{1b}[2Jok", "ok\u{202e}ok"] {
        let before = fingerprint(&world.hub);
        for (method, params) in [
            ("GetTask", json!({"id": hostile})),
            ("GetTask", json!({"id": format!("r_x.{hostile}")})),
            ("CancelTask", json!({"id": hostile})),
            ("SubscribeToTask", json!({"id": hostile})),
            ("ListTasks", json!({"contextId": hostile})),
            ("ListTasks", json!({"pageToken": hostile})),
            ("SendMessage", message(hostile, "hello", None, None)),
            (
                "SendMessage",
                message("m-ctx", "hello", None, Some(hostile)),
            ),
            (
                "SendMessage",
                message("m-task", "hello", Some(hostile), None),
            ),
        ] {
            let answer = rpc(addr, endpoint, Some(&world.erin), method, params.clone()).await;
            assert!(
                answer.status < 500,
                "{method} {params}: {} {}",
                answer.status,
                answer.body
            );
            assert!(
                answer.json()["error"]["code"] != json!(-32603),
                "{method} {params}: an internal error: {}",
                answer.body
            );
        }
        assert_eq!(
            fingerprint(&world.hub),
            before,
            "{hostile:?} wrote something"
        );
    }
}

/// A chunked HTTP/1.1 body, decoded.
fn dechunked(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..end]).unwrap().trim(), 16).unwrap();
        rest = &rest[end + 2..];
        if size == 0 {
            break;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
    body
}

#[tokio::test]
async fn a_blocking_send_keeps_its_connection_alive_while_the_agent_works() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let world = world().await;
    let addr = world.hub.addr;
    let mut agent = login(&world.hub, &world.reviewer.token, "reviewer").await;
    sync(&mut agent, &[]).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": text_message("slow-1", "take your time")})
    .to_string();
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /a2a/dana/reviewer HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        world.erin,
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    // Before the agent has answered (it has not even been read from), the client already
    // has the headers and whitespace: a client's read timeout never sees a silent socket.
    let mut raw = Vec::new();
    let split = roundtable_testkit::eventually(
        "the headers and a first byte of the body",
        std::time::Duration::from_secs(20),
        async || {
            let mut chunk = [0; 1024];
            if let Ok(Ok(read)) = tokio::time::timeout(
                std::time::Duration::from_millis(100),
                socket.read(&mut chunk),
            )
            .await
            {
                raw.extend_from_slice(&chunk[..read]);
            }
            let split = raw.windows(4).position(|window| window == b"\r\n\r\n")? + 4;
            (raw.len() > split).then_some(split)
        },
    )
    .await;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("application/json"), "{head}");
    // Now the agent answers, and the rest of the body is the task, done.
    let message = loop {
        let event = agent.next_event().await.unwrap();
        if event.kind == "message" {
            break event;
        }
    };
    assert_eq!(message.body["text"], "take your time");
    let id = agent.id();
    agent
        .ok(ClientFrame::Send(roundtable_protocol::client::SendCmd {
            id,
            room: message.stream_name().to_owned(),
            client_key: "slow-reply-1".into(),
            kind: "message".into(),
            body: json!({"text": "done, slowly", "reply_to": message.id}),
        }))
        .await;
    socket.read_to_end(&mut raw).await.unwrap();
    let body = String::from_utf8(dechunked(&raw[split..])).unwrap();
    assert!(body.starts_with(' '), "{body:?}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer}"
    );
}

#[tokio::test]
async fn a_body_sent_a_byte_at_a_time_is_cut_off_with_408_as_at_mcp() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let world = world().await;
    let addr = world.hub.addr;
    // A request the endpoint would answer at once, were its body whole.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                      "params": {"id": "t_0123456789012345678901234567890123456789abc"}})
    .to_string();
    let (mut reader, mut writer) = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap()
        .into_split();
    let head = format!(
        "POST /a2a/dana/reviewer HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        world.erin,
        body.len()
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    let mut answer = tokio::spawn(async move {
        let mut raw = Vec::new();
        let _ = reader.read_to_end(&mut raw).await;
        String::from_utf8_lossy(&raw).into_owned()
    });
    // A byte every quarter of a second (the whole body would take some 25 s), until
    // the hub answers.
    let mut drip = body.bytes();
    let mut pace = tokio::time::interval(std::time::Duration::from_millis(250));
    let answer = loop {
        tokio::select! {
            answer = &mut answer => break answer.unwrap(),
            _ = pace.tick() => {
                if let Some(byte) = drip.next() {
                    let _ = writer.write_all(&[byte]).await;
                }
            }
        }
    };
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("bad_frame"), "{answer}");
    assert!(answer.contains("send it at once"), "{answer}");
    // The hub goes on serving others.
    let found = rpc(
        addr,
        "/a2a/dana/reviewer",
        Some(&world.erin),
        "GetTask",
        json!({"id": "t_0123456789012345678901234567890123456789abc"}),
    )
    .await;
    assert_eq!(found.status, 200, "{}", found.body);
}

/// A hostile request: what it is, method, path, headers, body, and the status it gets.
type Case<'a> = (
    &'a str,
    &'a str,
    String,
    Vec<(&'a str, &'a str)>,
    Option<String>,
    u16,
);

#[tokio::test]
async fn hostile_requests_on_both_bindings_and_from_browsers_get_exact_statuses() {
    let world = world().await;
    let addr = world.hub.addr;
    let erin = bearer(&world.erin);
    let frank = bearer(&world.frank);
    let before = fingerprint(&world.hub);
    let json = ("Content-Type", "application/json");
    let version = ("A2A-Version", "1.0");
    let send = json!({"message": {"messageId": "h-1", "role": "ROLE_USER",
                      "parts": [{"text": "hi"}]}})
    .to_string();
    let cases: Vec<Case<'_>> = vec![
        (
            "a page's request (foreign Origin)",
            "POST",
            "/a2a/dana/reviewer".into(),
            vec![json, version, ("Authorization", &erin), ("Origin", "http://evil.example.com")],
            Some(send.clone()),
            403,
        ),
        (
            "a foreign Host (DNS rebinding)",
            "POST",
            "/a2a/dana/reviewer".into(),
            vec![json, version, ("Authorization", &erin), ("Host", "evil.example.com")],
            Some(send.clone()),
            421,
        ),
        (
            "a card from a page",
            "GET",
            "/a2a/dana/reviewer/.well-known/agent-card.json".into(),
            vec![("Origin", "http://evil.example.com")],
            None,
            403,
        ),
        (
            "a card written to",
            "POST",
            "/a2a/dana/reviewer/.well-known/agent-card.json".into(),
            vec![json],
            Some("{}".into()),
            405,
        ),
        (
            "Basic instead of Bearer",
            "POST",
            "/a2a/dana/reviewer".into(),
            vec![json, version, ("Authorization", "Basic ZXJpbjpwYXNz")],
            Some(send.clone()),
            401,
        ),
        (
            "an empty Bearer",
            "POST",
            "/a2a/dana/reviewer".into(),
            vec![json, version, ("Authorization", "Bearer ")],
            Some(send.clone()),
            401,
        ),
        (
            "REST without a token",
            "POST",
            "/a2a/dana/reviewer/message:send".into(),
            vec![json, version],
            Some(send.clone()),
            401,
        ),
        (
            "REST: another's task",
            "GET",
            "/a2a/dana/reviewer/tasks/t_0123456789012345678901234567890123456789abc".into(),
            vec![version, ("Authorization", &frank)],
            None,
            404,
        ),
        (
            "REST: a task id of another shape",
            "GET",
            "/a2a/dana/reviewer/tasks/..%2F..%2Fetc".into(),
            vec![version, ("Authorization", &erin)],
            None,
            404,
        ),
        (
            "REST: malformed JSON",
            "POST",
            "/a2a/dana/reviewer/message:send".into(),
            vec![json, version, ("Authorization", &erin)],
            Some("{\"message\":".into()),
            400,
        ),
        (
            "REST: push config",
            "POST",
            "/a2a/dana/reviewer/tasks/t_0123456789012345678901234567890123456789abc/pushNotificationConfigs".into(),
            vec![json, version, ("Authorization", &erin)],
            Some("{\"url\":\"https://example.com/hook\"}".into()),
            400,
        ),
        (
            "REST: the extended card",
            "GET",
            "/a2a/dana/reviewer/extendedAgentCard".into(),
            vec![version, ("Authorization", &erin)],
            None,
            400,
        ),
        (
            "a path past the agent's routes",
            "GET",
            "/a2a/dana/reviewer/nothing/here".into(),
            vec![("Authorization", &erin)],
            None,
            404,
        ),
        (
            "a handle of look-alike bytes",
            "POST",
            "/a2a/dana/r%C3%A9viewer".into(),
            vec![json, version, ("Authorization", &erin)],
            Some(send.clone()),
            404,
        ),
    ];
    for (what, method, path, headers, body, status) in cases {
        let response = http_raw(
            addr,
            method,
            &path,
            &headers,
            body.as_deref().map(str::as_bytes),
        )
        .await
        .unwrap();
        assert_eq!(response.status, status, "{what}: {}", response.body);
    }
    // JSON-RPC envelopes: a version the hub does not speak, and a method of an older A2A.
    for (what, version, method, code) in [
        ("an A2A 0.3 client", "0.3", "GetTask", -32009),
        ("an A2A 2.0 client", "2.0", "GetTask", -32009),
        ("a 0.3 method name", "1.0", "message/send", -32601),
        ("no method", "1.0", "", -32600),
    ] {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": "x"}}).to_string();
        let response = http_raw(
            addr,
            "POST",
            "/a2a/dana/reviewer",
            &[json, ("A2A-Version", version), ("Authorization", &erin)],
            Some(body.as_bytes()),
        )
        .await
        .unwrap();
        assert_eq!(response.status, 200, "{what}");
        assert_eq!(
            response.json()["error"]["code"],
            code,
            "{what}: {}",
            response.body
        );
    }
    assert_eq!(
        fingerprint(&world.hub),
        before,
        "none of them wrote anything"
    );
}

#[tokio::test]
async fn one_message_id_to_two_agents_is_two_tasks_and_a_left_room_s_task_is_audited_unknown() {
    let world = world().await;
    let addr = world.hub.addr;
    // dana, kin of both her agents, sends the same messageId to each.
    let to = |agent: &'static str| {
        let token = world.dana.clone();
        async move {
            rpc(
                addr,
                &format!("/a2a/dana/{agent}"),
                Some(&token),
                "SendMessage",
                json!({"message": {"messageId": "same-id", "role": "ROLE_USER",
                       "parts": [{"text": format!("to {agent}")}]},
                       "configuration": {"returnImmediately": true}}),
            )
            .await
            .json()
        }
    };
    let (reviewer, secret) = (to("reviewer").await, to("secret").await);
    let (first, second) = (
        reviewer["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_owned(),
        secret["result"]["task"]["id"].as_str().unwrap().to_owned(),
    );
    assert_ne!(first, second, "{reviewer} {secret}");
    assert_eq!(
        world
            .hub
            .select_i64("SELECT count(*) FROM events WHERE client_key LIKE 'a2a:%'"),
        2
    );

    // dana leaves the reviewer's pair room: its task is no longer hers to read.
    let room = reviewer["result"]["task"]["contextId"].as_str().unwrap();
    let mut dana = login(&world.hub, &world.dana, "laptop").await;
    dana.ok(ClientFrame::RoomLeave(
        roundtable_protocol::client::RoomLeave {
            id: 3,
            room: room.to_owned(),
        },
    ))
    .await;
    let gone = rpc(
        addr,
        "/a2a/dana/reviewer",
        Some(&world.dana),
        "GetTask",
        json!({"id": first}),
    )
    .await;
    assert_eq!(gone.json()["error"]["code"], -32001);
    roundtable_testkit::until("the refused read is audited", std::time::Duration::from_secs(5), async || {
        world.hub.select_i64(
            "SELECT count(*) FROM audit WHERE via = 'a2a' AND action = 'history' AND code = 'not_member'",
        ) == 1
    })
    .await;
}

#[tokio::test]
async fn an_agent_asking_in_a_room_of_three_sees_its_task_answered_without_being_mentioned() {
    let world = world().await;
    let addr = world.hub.addr;
    let mut dana = login(&world.hub, &world.dana, "laptop").await;
    let scout = register(&mut dana, "scout", Discoverable::Private, None).await;
    // dana's room with both her agents: scout (which routes on mentions) asks the reviewer.
    let room = crate::support::room(&mut dana, &["dana/scout", "dana/reviewer"]).await;
    let asked = rpc(
        addr,
        "/a2a/dana/reviewer",
        Some(&scout.token),
        "SendMessage",
        json!({"message": {"messageId": "three-1", "role": "ROLE_USER", "contextId": room,
               "parts": [{"text": "which crate?"}]},
               "configuration": {"returnImmediately": true}}),
    )
    .await
    .json();
    let task = asked["result"]["task"].clone();
    assert_eq!(task["contextId"], room.as_str(), "{asked}");
    let first = world.hub.select(&format!(
        "SELECT id FROM events WHERE stream = '{room}' AND kind = 'message'"
    ));
    // The reviewer answers with reply_to alone, mentioning no one.
    let mut reviewer = login(&world.hub, &world.reviewer.token, "reviewer").await;
    let id = reviewer.id();
    reviewer
        .ok(ClientFrame::Send(roundtable_protocol::client::SendCmd {
            id,
            room: room.clone(),
            client_key: "reply-three-1".into(),
            kind: "message".into(),
            body: json!({"text": "the hub's", "reply_to": first[0][0]}),
        }))
        .await;
    let got = rpc(
        addr,
        "/a2a/dana/reviewer",
        Some(&scout.token),
        "GetTask",
        json!({"id": task["id"]}),
    )
    .await
    .json();
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"],
        "the hub's"
    );
}

#[tokio::test]
async fn the_registry_lists_the_cards_of_the_agents_the_caller_may_see() {
    let world = world().await;
    let addr = world.hub.addr;
    let list = |token: Option<String>, query: &'static str| async move {
        let authorization = token.map(|token| bearer(&token));
        let headers: Vec<(&str, &str)> = authorization
            .iter()
            .map(|value| ("Authorization", value.as_str()))
            .collect();
        let response = http_raw(addr, "GET", &format!("/a2a/agents{query}"), &headers, None)
            .await
            .unwrap();
        assert_eq!(response.status, 200, "{}", response.body);
        let cards = response.json()["agents"].as_array().unwrap().clone();
        for card in &cards {
            let violations = a2acli::card_schema::validate_agent_card(card).unwrap();
            assert!(violations.is_empty(), "{violations:?}");
        }
        cards
            .iter()
            .map(|card| {
                card["capabilities"]["extensions"][0]["params"]["handle"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list(None, "").await,
        ["dana/reviewer"],
        "anonymous: public agents"
    );
    assert_eq!(list(Some(world.frank.clone()), "").await, ["dana/reviewer"]);
    assert_eq!(
        list(Some(world.dana.clone()), "").await,
        ["dana/reviewer", "dana/secret"],
        "their owner sees both, and no users"
    );
    assert_eq!(
        list(Some(world.dana.clone()), "?query=secret").await,
        ["dana/secret"]
    );
    assert_eq!(
        list(Some(world.dana.clone()), "?limit=1").await,
        ["dana/reviewer"]
    );
    let forged = http_raw(
        addr,
        "GET",
        "/a2a/agents",
        &[(
            "Authorization",
            "Bearer rt_forged_token_forged_token_forged_0000",
        )],
        None,
    )
    .await
    .unwrap();
    assert_eq!(forged.status, 401);
}
