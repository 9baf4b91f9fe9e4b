//! `/mcp` over real HTTP, as a remote MCP client (2025-11-25, with sessions) meets it: the
//! tools over the hub with nothing but a token, sessions that belong to their opener, open
//! streams that end when the caller is revoked or stopped, and the refusals a hostile or
//! careless client gets (exact status, no 5xx, nothing written, refusals audited
//! `via: mcp`). The official Python client drives both MCP generations end to end in
//! `tests/e2e/mcp.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use roundtable_protocol::client::{AgentToken, ClientFrame, Control, ControlAction, TokenAction};
use roundtable_protocol::server::RegisterAgentOk;
use roundtable_testkit::{Client, RawResponse, TestHub, http_raw};
use serde_json::{Value, json};

use crate::support::{agent, fingerprint, login, metric, room, say, sync};

const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The JSON-RPC messages of a response: its JSON body, or its SSE events' data.
fn messages(response: &RawResponse) -> Vec<Value> {
    if response
        .header("content-type")
        .is_some_and(|kind| kind.starts_with("text/event-stream"))
    {
        response
            .body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    } else {
        serde_json::from_str(&response.body).into_iter().collect()
    }
}

/// The answer to request `id` among a response's messages.
fn answer(response: &RawResponse, id: u64) -> Value {
    messages(response)
        .into_iter()
        .find(|message| message["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id}: {} {}", response.status, response.body))
}

/// An MCP session over HTTP of one token (2025-11-25).
struct Session {
    addr: SocketAddr,
    token: String,
    id: String,
    next: u64,
    extra: Vec<(String, String)>,
}

impl Session {
    async fn open(addr: SocketAddr, token: &str) -> Session {
        Session::open_with(addr, token, &[]).await
    }

    async fn open_with(addr: SocketAddr, token: &str, extra: &[(&str, &str)]) -> Session {
        let authorization = bearer(token);
        let mut headers = vec![ACCEPT, JSON, ("Authorization", authorization.as_str())];
        headers.extend_from_slice(extra);
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "hub-tests", "version": "1"}}});
        let opened = http_raw(
            addr,
            "POST",
            "/mcp",
            &headers,
            Some(body.to_string().as_bytes()),
        )
        .await
        .unwrap();
        assert_eq!(opened.status, 200, "{}", opened.body);
        let id = opened
            .header("mcp-session-id")
            .expect("a session")
            .to_owned();
        let session = Session {
            addr,
            token: token.to_owned(),
            id,
            next: 1,
            extra: extra
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
        };
        let initialized = session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(initialized.status, 202, "{}", initialized.body);
        session
    }

    async fn post(&self, body: &Value) -> RawResponse {
        self.post_as(&self.token, body).await
    }

    /// Posts on this session with another token.
    async fn post_as(&self, token: &str, body: &Value) -> RawResponse {
        let authorization = bearer(token);
        let mut headers = vec![
            ACCEPT,
            JSON,
            ("Authorization", authorization.as_str()),
            ("Mcp-Session-Id", self.id.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        for (name, value) in &self.extra {
            headers.push((name, value));
        }
        http_raw(
            self.addr,
            "POST",
            "/mcp",
            &headers,
            Some(body.to_string().as_bytes()),
        )
        .await
        .unwrap()
    }

    fn request(&mut self, method: &str, params: Value) -> (u64, Value) {
        self.next += 1;
        let id = self.next;
        (
            id,
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
    }

    /// A tool's result (`isError` and its text's JSON, or its text when not JSON).
    async fn call(&mut self, tool: &str, arguments: Value) -> (bool, Value) {
        let (id, body) = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let response = self.post(&body).await;
        assert_eq!(response.status, 200, "{}", response.body);
        let result = answer(&response, id)["result"].clone();
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (
            result["isError"] == true,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}

/// dana, her agent `dana/writer` in a room with her, and erin, a stranger.
struct World {
    hub: TestHub,
    dana: Client,
    dana_token: String,
    writer: RegisterAgentOk,
    room: String,
    erin_token: String,
}

async fn world() -> World {
    let hub = TestHub::start().await;
    let (mut dana, signup) = hub.user("dana").await;
    let (_, erin) = hub.user("erin").await;
    let writer = agent(&mut dana, "writer").await;
    let room = room(&mut dana, &["dana/writer"]).await;
    sync(&mut dana, &[]).await;
    World {
        hub,
        dana,
        dana_token: signup.token,
        writer,
        room,
        erin_token: erin.token,
    }
}

#[tokio::test]
async fn an_agent_with_only_its_token_reads_sends_and_waits_through_its_tools() {
    let mut world = world().await;
    let addr = world.hub.addr;
    let mut mcp = Session::open(addr, &world.writer.token).await;
    let (error, me) = mcp.call("whoami", json!({})).await;
    assert!(!error, "{me}");
    assert_eq!(me["handle"], "dana/writer");
    assert_eq!(
        me["home_room"],
        world.writer.room.as_ref().unwrap().id.as_str()
    );

    // What the agent sends, its person sees live.
    let (error, sent) = mcp
        .call(
            "send_message",
            json!({"room": world.room, "text": "hello @dana"}),
        )
        .await;
    assert!(!error && sent["sent"] == true, "{sent}");
    let seen = world.dana.next_event().await.unwrap();
    assert_eq!(
        (seen.kind.as_str(), seen.body["text"].as_str()),
        ("message", Some("hello @dana"))
    );

    // A mention reaches it through read_messages, once; the room by its title works too.
    say(
        &mut world.dana,
        &world.room,
        "mention-1",
        "@dana/writer review this",
    )
    .await;
    let (_, unread) = mcp.call("read_messages", json!({})).await;
    let texts: Vec<&str> = unread
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["@dana/writer review this"], "{unread}");
    assert_eq!(unread[0]["from_handle"], "dana");
    assert!(
        unread[0]["seq"].as_u64().unwrap() > 0,
        "the cursor is there"
    );
    let (_, again) = mcp
        .call("read_messages", json!({"room": "test room"}))
        .await;
    assert_eq!(again, json!([]), "read once");
    let (_, latest) = mcp
        .call(
            "read_messages",
            json!({"room": world.room, "unread_only": false, "limit": 1}),
        )
        .await;
    assert_eq!(latest[0]["text"], "@dana/writer review this", "{latest}");
    let seq = unread[0]["seq"].as_u64().unwrap();
    let (_, since) = mcp
        .call(
            "read_messages",
            json!({"room": world.room, "since": seq - 1}),
        )
        .await;
    assert_eq!(
        since[0]["text"], "@dana/writer review this",
        "read again: {since}"
    );
    let (_, after) = mcp
        .call("read_messages", json!({"room": world.room, "since": seq}))
        .await;
    assert_eq!(after, json!([]), "nothing after it yet");
    let (error, roomless) = mcp.call("read_messages", json!({"since": 1})).await;
    assert!(error, "{roomless}");

    // wait_for_messages returns at the first message for it.
    let waiting = {
        let mut waiter = Session::open(addr, &world.writer.token).await;
        tokio::spawn(async move {
            waiter
                .call("wait_for_messages", json!({"timeout_s": 60}))
                .await
        })
    };
    // Once it has found nothing and waits (its gauge), the message comes.
    roundtable_testkit::until("the call waits", Duration::from_secs(30), async || {
        metric(addr, "roundtable_mcp_waits").await == 1
    })
    .await;
    say(
        &mut world.dana,
        &world.room,
        "mention-2",
        "@dana/writer and this",
    )
    .await;
    let (error, waited) = tokio::time::timeout(roundtable_testkit::PATIENCE, waiting)
        .await
        .expect("the wait ends with the message")
        .unwrap();
    assert!(!error, "{waited}");
    assert_eq!(waited["messages"][0]["text"], "@dana/writer and this");

    // Another client of the agent, on a device of its own, keeps its own read markers.
    let other = ("X-Roundtable-Device", "ci-runner");
    let mut second = Session::open_with(addr, &world.writer.token, &[other]).await;
    let (_, its_own) = second.call("read_messages", json!({})).await;
    let texts: Vec<&str> = its_own
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["@dana/writer review this", "@dana/writer and this"],
        "{its_own}"
    );
    let (_, nothing) = mcp.call("read_messages", json!({})).await;
    assert_eq!(nothing, json!([]), "the first device read both");

    // `since` takes a limit.
    let (_, first_only) = mcp
        .call(
            "read_messages",
            json!({"room": world.room, "since": seq - 1, "limit": 1}),
        )
        .await;
    let texts: Vec<&str> = first_only
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["@dana/writer review this"]);

    // Errors are results the model reads, with their code.
    let (error, refused) = mcp
        .call("send_message", json!({"room": "nowhere", "text": "x"}))
        .await;
    assert!(error, "{refused}");
    assert!(
        refused.as_str().unwrap().ends_with("(not_found)"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_session_is_its_opener_s_and_another_token_gets_the_404_of_an_unknown_one() {
    let world = world().await;
    let addr = world.hub.addr;
    let mut mcp = Session::open(addr, &world.writer.token).await;
    let before = fingerprint(&world.hub);
    let (_, list) = mcp.request("tools/list", json!({}));
    // Another principal naming the session, and a session nobody opened.
    let hijack = mcp.post_as(&world.erin_token, &list).await;
    assert_eq!(hijack.status, 404, "{}", hijack.body);
    assert_eq!(hijack.json()["code"], "not_found");
    let owner_too = mcp.post_as(&world.dana_token, &list).await;
    assert_eq!(
        owner_too.status, 404,
        "even its owner's person: {}",
        owner_too.body
    );
    let authorization = bearer(&world.writer.token);
    let unknown = http_raw(
        addr,
        "POST",
        "/mcp",
        &[
            ACCEPT,
            JSON,
            ("Authorization", &authorization),
            ("Mcp-Session-Id", "not-a-session"),
        ],
        Some(list.to_string().as_bytes()),
    )
    .await
    .unwrap();
    assert_eq!((unknown.status, &unknown.body), (404, &hijack.body));
    // Ending it with another token does nothing.
    let erin = bearer(&world.erin_token);
    let ended = http_raw(
        addr,
        "DELETE",
        "/mcp",
        &[("Authorization", &erin), ("Mcp-Session-Id", &mcp.id)],
        None,
    )
    .await
    .unwrap();
    assert_eq!(ended.status, 404);
    assert_eq!(fingerprint(&world.hub), before, "nothing written");
    // Its opener goes on, then ends it.
    let (error, _) = mcp.call("whoami", json!({})).await;
    assert!(!error);
    let ended = http_raw(
        addr,
        "DELETE",
        "/mcp",
        &[
            ("Authorization", &authorization),
            ("Mcp-Session-Id", &mcp.id),
        ],
        None,
    )
    .await
    .unwrap();
    assert!(ended.status < 300, "{} {}", ended.status, ended.body);
    let gone = mcp.post(&list).await;
    assert_eq!(gone.status, 404);
    let audited = world.hub.select_i64(
        "SELECT count(*) FROM audit WHERE via = 'mcp' AND action = 'mcp_session' AND code = 'not_found'",
    );
    assert!(audited >= 2, "the hijacks are audited via mcp");
}

/// A tool call that waits (up to a minute), returned once its stream has begun (its first
/// event is in): the task reading it to its end, and all it read.
async fn waiting_call(addr: SocketAddr, token: &str) -> tokio::task::JoinHandle<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut mcp = Session::open(addr, token).await;
    let (_, body) = mcp.request(
        "tools/call",
        json!({"name": "wait_for_messages", "arguments": {"timeout_s": 60}}),
    );
    let body = body.to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Mcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        mcp.id,
        body.len()
    );
    let (begun, started) = tokio::sync::oneshot::channel();
    let reading = tokio::spawn(async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut seen = Vec::new();
        let mut begun = Some(begun);
        let mut buffer = [0u8; 4096];
        loop {
            let read = stream.read(&mut buffer).await.unwrap_or(0);
            if read == 0 {
                return String::from_utf8_lossy(&seen).into_owned();
            }
            seen.extend_from_slice(&buffer[..read]);
            if String::from_utf8_lossy(&seen).contains("\nid:")
                && let Some(begun) = begun.take()
            {
                let _ = begun.send(());
            }
        }
    });
    tokio::time::timeout(roundtable_testkit::PATIENCE, started)
        .await
        .expect("the stream begins")
        .expect("the stream begins");
    reading
}

async fn ended(stream: tokio::task::JoinHandle<String>) -> String {
    tokio::time::timeout(roundtable_testkit::PATIENCE, stream)
        .await
        .expect("the stream ends at once")
        .unwrap()
}

#[tokio::test]
async fn stopping_or_revoking_the_caller_ends_its_open_streams_and_stop_is_403_until_resume() {
    let mut world = world().await;
    let addr = world.hub.addr;
    let token = world.writer.token.clone();
    let control = |action| {
        ClientFrame::Control(Control {
            id: 9,
            agent: world.writer.agent.id.clone(),
            action,
            room: None,
            reason: None,
        })
    };

    let stream = waiting_call(addr, &token).await;
    world.dana.ok(control(ControlAction::Stop)).await;
    let cut = ended(stream).await;
    assert!(cut.starts_with("HTTP/1.1 200"), "{cut}");
    assert!(!cut.contains("\"result\""), "cut before any answer: {cut}");
    let authorization = bearer(&token);
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "hub-tests", "version": "1"}}})
    .to_string();
    let headers = [ACCEPT, JSON, ("Authorization", authorization.as_str())];
    let stopped = http_raw(addr, "POST", "/mcp", &headers, Some(initialize.as_bytes()))
        .await
        .unwrap();
    assert_eq!(stopped.status, 403, "{}", stopped.body);
    assert_eq!(stopped.json()["code"], "paused");
    world.dana.ok(control(ControlAction::Resume)).await;
    let resumed = http_raw(addr, "POST", "/mcp", &headers, Some(initialize.as_bytes()))
        .await
        .unwrap();
    assert_eq!(resumed.status, 200, "{}", resumed.body);

    // Paused (not stopped): it may read, but what it sends is refused, as a result.
    world.dana.ok(control(ControlAction::Pause)).await;
    let mut mcp = Session::open(addr, &token).await;
    let (error, refused) = mcp
        .call("send_message", json!({"room": world.room, "text": "x"}))
        .await;
    assert!(error, "{refused}");
    assert!(refused.as_str().unwrap().ends_with("(paused)"), "{refused}");
    world.dana.ok(control(ControlAction::Resume)).await;

    // Revoked: the stream ends, and the token is refused from then on.
    let stream = waiting_call(addr, &token).await;
    let id = world.dana.id();
    world
        .dana
        .ok(ClientFrame::AgentToken(AgentToken {
            id,
            agent: world.writer.agent.id.clone(),
            action: TokenAction::Revoke,
        }))
        .await;
    let cut = ended(stream).await;
    assert!(!cut.contains("\"result\""), "cut before any answer: {cut}");
    let revoked = http_raw(addr, "POST", "/mcp", &headers, Some(initialize.as_bytes()))
        .await
        .unwrap();
    assert_eq!(revoked.status, 401);
    assert_eq!(
        revoked.header("www-authenticate"),
        Some("Bearer realm=\"roundtable\"")
    );
}

/// (what, method, headers, body, expected status)
type Case<'a> = (
    &'static str,
    &'static str,
    Vec<(&'a str, &'a str)>,
    Option<Vec<u8>>,
    u16,
);

#[tokio::test]
async fn hostile_requests_get_exact_statuses_no_5xx_nothing_written_and_are_audited() {
    let world = world().await;
    let addr = world.hub.addr;
    let mcp = Session::open(addr, &world.writer.token).await;
    let _dana = login(&world.hub, &world.dana_token, "laptop").await;
    let writer = bearer(&world.writer.token);
    let erin = bearer(&world.erin_token);
    let forged = bearer("rt_forged_token_forged_token_forged_0000");
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "1"}}})
    .to_string()
    .into_bytes();
    let call = |tool: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}})
        .to_string()
        .into_bytes()
    };
    let send = call("send_message", json!({"room": world.room, "text": "x"}));
    let huge = {
        let text = "x".repeat(1024 * 1024 + 1);
        call("send_message", json!({"room": world.room, "text": text}))
    };
    let batch = format!("[{}]", String::from_utf8_lossy(&send)).into_bytes();
    let session = mcp.id.as_str();
    let query_token = format!("/mcp?access_token={}", world.writer.token);
    let before = fingerprint(&world.hub);
    let cases: Vec<Case<'_>> = vec![
        (
            "no token",
            "POST",
            vec![ACCEPT, JSON],
            Some(initialize.clone()),
            401,
        ),
        (
            "a forged token",
            "POST",
            vec![ACCEPT, JSON, ("Authorization", &forged)],
            Some(initialize.clone()),
            401,
        ),
        (
            "a token without its scheme",
            "POST",
            vec![ACCEPT, JSON, ("Authorization", &world.writer.token)],
            Some(initialize.clone()),
            401,
        ),
        (
            "Basic instead of Bearer",
            "POST",
            vec![ACCEPT, JSON, ("Authorization", "Basic ZGFuYTpwdw==")],
            Some(initialize.clone()),
            401,
        ),
        (
            "an empty bearer",
            "POST",
            vec![ACCEPT, JSON, ("Authorization", "Bearer ")],
            Some(initialize.clone()),
            401,
        ),
        (
            "no token on a GET stream",
            "GET",
            vec![("Accept", "text/event-stream")],
            None,
            401,
        ),
        (
            "no token on a DELETE",
            "DELETE",
            vec![("Mcp-Session-Id", session)],
            None,
            401,
        ),
        (
            "a forged token on the session",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &forged),
                ("Mcp-Session-Id", session),
            ],
            Some(send.clone()),
            401,
        ),
        (
            "another principal on the session",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &erin),
                ("Mcp-Session-Id", session),
            ],
            Some(send.clone()),
            404,
        ),
        (
            "an unknown session",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &writer),
                ("Mcp-Session-Id", "f00"),
            ],
            Some(send.clone()),
            404,
        ),
        (
            "a page's request (foreign Origin)",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &writer),
                ("Origin", "http://evil.example.com"),
            ],
            Some(initialize.clone()),
            403,
        ),
        (
            "a page's request with a null Origin",
            "POST",
            vec![ACCEPT, JSON, ("Authorization", &writer), ("Origin", "null")],
            Some(initialize.clone()),
            403,
        ),
        (
            "a foreign Host (DNS rebinding)",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &writer),
                ("Host", "evil.example.com"),
            ],
            Some(initialize.clone()),
            421,
        ),
        (
            "a body over 1 MiB",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &writer),
                ("Mcp-Session-Id", session),
            ],
            Some(huge.clone()),
            413,
        ),
        (
            "a bad device name",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &writer),
                ("X-Roundtable-Device", "a b/c"),
            ],
            Some(initialize.clone()),
            400,
        ),
        (
            "a device name too long",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &writer),
                (
                    "X-Roundtable-Device",
                    "abcdefghijklmnopqrstuvwxyz0123456789",
                ),
            ],
            Some(initialize.clone()),
            400,
        ),
        (
            "not JSON",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &writer),
                ("Mcp-Session-Id", session),
            ],
            Some(b"{not json".to_vec()),
            400,
        ),
        (
            "not JSON-RPC",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &writer),
                ("Mcp-Session-Id", session),
            ],
            Some(b"[1, 2, 3]".to_vec()),
            400,
        ),
        (
            "plain text",
            "POST",
            vec![
                ACCEPT,
                ("Content-Type", "text/plain"),
                ("Authorization", &writer),
                ("Mcp-Session-Id", session),
            ],
            Some(send.clone()),
            415,
        ),
        (
            "accepting neither JSON nor SSE",
            "POST",
            vec![
                ("Accept", "text/html"),
                JSON,
                ("Authorization", &writer),
                ("Mcp-Session-Id", session),
            ],
            Some(send.clone()),
            406,
        ),
        (
            "a method MCP has not",
            "PUT",
            vec![ACCEPT, JSON, ("Authorization", &writer)],
            Some(initialize.clone()),
            405,
        ),
        (
            "a JSON-RPC batch",
            "POST",
            vec![
                ACCEPT,
                JSON,
                ("Authorization", &writer),
                ("Mcp-Session-Id", session),
            ],
            Some(batch.clone()),
            400,
        ),
        (
            "another principal's stream",
            "GET",
            vec![
                ("Accept", "text/event-stream"),
                ("Authorization", &erin),
                ("Mcp-Session-Id", session),
            ],
            None,
            404,
        ),
        (
            "ending an unknown session",
            "DELETE",
            vec![("Authorization", &writer), ("Mcp-Session-Id", "f00")],
            None,
            404,
        ),
    ];
    assert!(cases.len() >= 20);
    for (what, method, headers, body, expected) in &cases {
        let response = http_raw(addr, method, "/mcp", headers, body.as_deref())
            .await
            .unwrap();
        assert_eq!(
            response.status, *expected,
            "{what}: {} {}",
            response.status, response.body
        );
        if *expected == 401 {
            assert_eq!(
                response.header("www-authenticate"),
                Some("Bearer realm=\"roundtable\""),
                "{what}"
            );
        }
    }
    // A token in the query string is not read: 401, as with none.
    let in_query = http_raw(
        addr,
        "POST",
        &query_token,
        &[ACCEPT, JSON],
        Some(&initialize),
    )
    .await
    .unwrap();
    assert_eq!(in_query.status, 401);

    assert_eq!(
        fingerprint(&world.hub),
        before,
        "nothing written by the refusals"
    );

    // Inside a session: JSON-RPC errors, not HTTP ones, for what MCP refuses.
    let rpc = |body: Vec<u8>| {
        let session = session.to_owned();
        let writer = writer.clone();
        async move {
            http_raw(
                addr,
                "POST",
                "/mcp",
                &[
                    ACCEPT,
                    JSON,
                    ("Authorization", &writer),
                    ("Mcp-Session-Id", &session),
                    ("X-Roundtable-Principal", "p_someone_else"),
                ],
                Some(&body),
            )
            .await
            .unwrap()
        }
    };
    let unknown_tool = rpc(call("drop_tables", json!({}))).await;
    assert_eq!(unknown_tool.status, 200);
    assert_eq!(
        answer(&unknown_tool, 7)["error"]["code"],
        -32602,
        "{}",
        unknown_tool.body
    );
    // Arguments of the wrong shape: a result the model reads and corrects (MCP 2025-11-25).
    let bad_arguments = rpc(call("send_message", json!({"room": 3}))).await;
    let result = &answer(&bad_arguments, 7)["result"];
    assert_eq!(result["isError"], true, "{}", bad_arguments.body);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("expected a string"),
        "{}",
        bad_arguments.body
    );
    // A room it is not in: a result the model reads, nothing written.
    let erin_room = {
        let mut erin = login(&world.hub, &world.erin_token, "laptop").await;
        room(&mut erin, &[]).await
    };
    let before_outsider = fingerprint(&world.hub);
    let outsider = rpc(call(
        "send_message",
        json!({"room": erin_room, "text": "in?"}),
    ))
    .await;
    let result = &answer(&outsider, 7)["result"];
    assert_eq!(result["isError"], true, "{}", outsider.body);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .ends_with("(not_found)")
    );
    assert_eq!(fingerprint(&world.hub), before_outsider);
    // An injected principal header is dropped: the caller is the token's.
    let who = rpc(call("whoami", json!({}))).await;
    let text = answer(&who, 7)["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("dana/writer"), "{text}");

    // Failed authentications past the address's budget: 429 with Retry-After.
    let mut limited = None;
    for _ in 0..40 {
        let response = http_raw(
            addr,
            "POST",
            "/mcp",
            &[ACCEPT, JSON, ("Authorization", &forged)],
            Some(&initialize),
        )
        .await
        .unwrap();
        assert!(
            response.status == 401 || response.status == 429,
            "{}",
            response.status
        );
        if response.status == 429 {
            limited = Some(response);
            break;
        }
    }
    let limited = limited.expect("the failed-auth budget runs out");
    assert!(limited.header("retry-after").is_some());
    roundtable_testkit::until(
        "forged tokens' refusals are audited via mcp",
        roundtable_testkit::PATIENCE,
        async || {
            world.hub.select_i64(
                "SELECT count(*) FROM audit WHERE via = 'mcp' AND result = 'err' AND action = 'auth'",
            ) >= 1
                && world.hub.select_i64(
                    "SELECT count(*) FROM audit WHERE via = 'mcp' AND action = 'mcp_session'",
                ) >= 1
        },
    )
    .await;
}

#[tokio::test]
async fn the_tools_listed_at_mcp_are_the_crate_s_word_for_word() {
    let world = world().await;
    let mut mcp = Session::open(world.hub.addr, &world.writer.token).await;
    let (id, list) = mcp.request("tools/list", json!({}));
    let listed = answer(&mcp.post(&list).await, id)["result"]["tools"].clone();
    let defined = serde_json::to_value(
        roundtable_mcp_tools::Tools::<roundtable_hub::mcp::FromRequest>::tool_router().list_all(),
    )
    .unwrap();
    assert_eq!(listed, defined);
    assert_eq!(listed.as_array().unwrap().len(), 16);
}

#[tokio::test]
async fn an_agent_s_read_marker_moves_past_what_is_not_for_it() {
    let mut world = world().await;
    let addr = world.hub.addr;
    // A room of three: an agent sees only what mentions it there.
    agent(&mut world.dana, "reviewer").await;
    let three = room(&mut world.dana, &["dana/writer", "dana/reviewer"]).await;
    for n in 0..3 {
        say(
            &mut world.dana,
            &three,
            &format!("chatter-{n}"),
            "not for the agents",
        )
        .await;
    }
    let mut mcp = Session::open(addr, &world.writer.token).await;
    let (_, unread) = mcp.call("read_messages", json!({"room": three})).await;
    assert_eq!(unread, json!([]));
    let (_, rooms) = mcp.call("list_rooms", json!({})).await;
    let listed = rooms
        .as_array()
        .unwrap()
        .iter()
        .find(|room| room["id"] == three.as_str())
        .unwrap()
        .clone();
    assert_eq!(listed["read_through"], listed["head"], "{listed}");
}

#[tokio::test]
async fn a_principal_past_its_open_sessions_gets_429_and_ending_one_makes_room() {
    let world = world().await;
    let addr = world.hub.addr;
    let authorization = bearer(&world.writer.token);
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "many", "version": "1"}}})
    .to_string();
    let headers = [ACCEPT, JSON, ("Authorization", authorization.as_str())];
    let mut sessions = Vec::new();
    for _ in 0..100 {
        let opened = http_raw(addr, "POST", "/mcp", &headers, Some(initialize.as_bytes()))
            .await
            .unwrap();
        assert_eq!(opened.status, 200, "{}", opened.body);
        sessions.push(opened.header("mcp-session-id").unwrap().to_owned());
    }
    let refused = http_raw(addr, "POST", "/mcp", &headers, Some(initialize.as_bytes()))
        .await
        .unwrap();
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.header("retry-after").is_some());
    // Another principal is not held back, nor are this one's other requests.
    let mut erin = Session::open(addr, &world.erin_token).await;
    assert!(!erin.call("whoami", json!({})).await.0);
    let ended = http_raw(
        addr,
        "DELETE",
        "/mcp",
        &[
            ("Authorization", &authorization),
            ("Mcp-Session-Id", &sessions[0]),
        ],
        None,
    )
    .await
    .unwrap();
    assert!(ended.status < 300);
    let again = http_raw(addr, "POST", "/mcp", &headers, Some(initialize.as_bytes()))
        .await
        .unwrap();
    assert_eq!(again.status, 200, "{}", again.body);
}
