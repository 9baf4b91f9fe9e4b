//! An agent's MCP tools, driven by the official Python MCP client over both protocol
//! generations, the two ways an agent reaches them: `roundtable mcp` over stdio as an agent
//! CLI runs it, and the hub's own `/mcp` over HTTP with nothing but the agent's token (as
//! Claude Code is configured with a header). Tools listed with schemas, messages sent and
//! waited for, questions answered by the person over the hub or through the client's own
//! prompt (the ping withdrawn then), and the boards kept, as the person's own cache then
//! shows.

use roundtable_core::log_events::TaskStatus;
use roundtable_protocol::bodies::ComponentStatus;
use std::time::Duration;

use roundtable_core::Core;
use roundtable_core::cache::TaskFilter;
use roundtable_core::client::PATIENCE;
use roundtable_e2e::{Home, Hub, fixtures, json, settle, test_python};
use roundtable_testkit::roundtable_bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_bridge_serves_an_agent_over_both_protocol_generations() {
    agent_journey(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hubs_mcp_endpoint_serves_an_agent_with_only_its_token_over_both_generations() {
    agent_journey(true).await;
}

/// dana signed up on `hub`, her agent `dana/writer` (its token), and a room `work` of the
/// two.
async fn dana_and_her_writer(hub: &Hub) -> (Home, String) {
    let home = Home::default();
    home.signup(hub, "dana").await;
    let agent = json(
        &home
            .ok("dana", &["--json", "agents", "register", "writer"])
            .await,
    );
    let token = agent["token"].as_str().unwrap().to_owned();
    home.ok(
        "dana",
        &[
            "room",
            "create",
            "--title",
            "work",
            "--member",
            "dana/writer",
        ],
    )
    .await;
    (home, token)
}

async fn agent_journey(over_http: bool) {
    let hub = Hub::start(&[]).await;
    let (home, token) = dana_and_her_writer(&hub).await;

    let script = fixtures().join("mcp_client.py");
    let mut client = tokio::process::Command::new(test_python());
    client
        .arg(&script)
        .arg(roundtable_bin())
        .args(["dana/writer", "dana", "work"])
        .env("ROUNDTABLE_HOME", home.dir.path())
        .env("ROUNDTABLE_LOG", "warn")
        .kill_on_drop(true);
    if over_http {
        client
            .env("MCP_URL", format!("http://{}/mcp", hub.listen))
            .env("MCP_TOKEN", &token);
    }
    let output = tokio::time::timeout(Duration::from_secs(240), client.output())
        .await
        .expect("the MCP client finished in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the MCP client failed:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["legacy: ok", "modern: ok"]
    );

    // What the agent did shows in its person's cache.
    let dana = Core::open(home.profile("dana")).await.unwrap();
    let sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    settle(&dana).await;
    let work = dana.room_id("work").await.unwrap();
    let components = dana
        .read({
            let work = work.clone();
            move |cache| cache.components(&work)
        })
        .await
        .unwrap();
    let parser = components.iter().find(|c| c.id == "parser").unwrap();
    assert_eq!(parser.status, Some(ComponentStatus::Working));
    assert_eq!(parser.working.len(), 1);
    assert_eq!(
        components
            .iter()
            .find(|c| c.id == "cli")
            .unwrap()
            .depends_on,
        ["parser"]
    );
    let tasks = dana
        .read(|cache| cache.task_sessions(&TaskFilter::default()))
        .await
        .unwrap();
    assert_eq!(tasks[0].agent_handle.as_deref(), Some("dana/writer"));
    assert_eq!(tasks[0].tasks[1].status, TaskStatus::InProgress);
    let statuses = dana.read(|cache| cache.agent_statuses()).await.unwrap();
    assert_eq!(statuses[0].detail.as_deref(), Some("parsing (modern)"));
    // Four questions answered by the person (two of them declined at the client), three
    // answered at the client and withdrawn.
    let pings = dana.pings().await.unwrap();
    let answered: Vec<_> = pings.iter().filter(|p| p.answered_by.is_some()).collect();
    assert_eq!(answered.len(), 4, "{pings:?}");
    assert_eq!(pings.len(), 7, "{pings:?}");
    assert!(dana.open_pings().await.unwrap().is_empty(), "{pings:?}");
    sync.stop().await;
}

/// One JSON-RPC request to `/mcp` as the agent; the messages of the answer (its JSON body,
/// or its SSE events' data), and the session it opened, if any.
async fn mcp_post(
    hub: &Hub,
    token: &str,
    session: Option<&str>,
    body: serde_json::Value,
) -> (u16, Vec<String>, Option<String>) {
    let authorization = format!("Bearer {token}");
    let mut headers = vec![
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("Authorization", authorization.as_str()),
    ];
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session));
        headers.push(("MCP-Protocol-Version", "2025-11-25"));
    }
    let response = roundtable_testkit::http_raw(
        hub.listen.parse().unwrap(),
        "POST",
        "/mcp",
        &headers,
        Some(body.to_string().as_bytes()),
    )
    .await
    .unwrap();
    let messages = if response
        .header("content-type")
        .is_some_and(|kind| kind.starts_with("text/event-stream"))
    {
        response
            .body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| data.trim().to_owned())
            .filter(|data| !data.is_empty())
            .collect()
    } else {
        vec![response.body.clone()]
    };
    let opened = response.header("mcp-session-id").map(str::to_owned);
    (response.status, messages, opened)
}

/// Opens a 2025-11-25 session at `/mcp`.
async fn mcp_session(hub: &Hub, token: &str) -> String {
    let (status, _, session) = mcp_post(
        hub,
        token,
        None,
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "1"}}}),
    )
    .await;
    assert_eq!(status, 200);
    let session = session.expect("a session");
    mcp_post(
        hub,
        token,
        Some(&session),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    session
}

/// The texts of the messages `read_messages` returns on a session (`Err`: the HTTP status).
async fn read_over_mcp(hub: &Hub, token: &str, session: &str) -> Result<Vec<String>, u16> {
    let (status, messages, _) = mcp_post(
        hub,
        token,
        Some(session),
        serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                           "params": {"name": "read_messages", "arguments": {}}}),
    )
    .await;
    if status != 200 {
        return Err(status);
    }
    let answer: serde_json::Value = serde_json::from_str(messages.last().unwrap()).unwrap();
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    let read: serde_json::Value = serde_json::from_str(text).unwrap();
    Ok(read
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["text"].as_str().unwrap().to_owned())
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_sigkill_loses_no_unread_message_of_an_mcp_client_and_repeats_none() {
    let mut hub = Hub::start(&[]).await;
    let (home, token) = dana_and_her_writer(&hub).await;
    let session = mcp_session(&hub, &token).await;
    home.ok("dana", &["send", "work", "@dana/writer one"]).await;
    assert_eq!(
        read_over_mcp(&hub, &token, &session).await,
        Ok(vec!["@dana/writer one".to_owned()])
    );
    home.ok("dana", &["send", "work", "@dana/writer two"]).await;

    // The hub dies with the second message unread: the session comes back with it, and
    // the message is read once.
    hub.process.take().unwrap().kill().await;
    hub.start_again().await;
    assert_eq!(
        read_over_mcp(&hub, &token, &session).await,
        Ok(vec!["@dana/writer two".to_owned()]),
        "the session is restored, with the unread message and only it"
    );
    assert_eq!(read_over_mcp(&hub, &token, &session).await, Ok(vec![]));

    // A session ended (or lost): 404, as MCP says; a new one reads what was not read.
    home.ok("dana", &["send", "work", "@dana/writer three"])
        .await;
    let authorization = format!("Bearer {token}");
    let ended = roundtable_testkit::http_raw(
        hub.listen.parse().unwrap(),
        "DELETE",
        "/mcp",
        &[
            ("Authorization", &authorization),
            ("Mcp-Session-Id", &session),
        ],
        None,
    )
    .await
    .unwrap();
    assert!(ended.status < 300, "{}", ended.status);
    assert_eq!(read_over_mcp(&hub, &token, &session).await, Err(404));
    let session = mcp_session(&hub, &token).await;
    assert_eq!(
        read_over_mcp(&hub, &token, &session).await,
        Ok(vec!["@dana/writer three".to_owned()])
    );
}

/// Starts a tool call whose answer comes later and drops the connection once the stream's
/// first event id is in: that id.
async fn call_and_drop(
    hub: &Hub,
    token: &str,
    session: &str,
    tool: &str,
    arguments: serde_json::Value,
) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                  "params": {"name": tool, "arguments": arguments}})
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(&hub.listen).await.unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Content-Length: {}\r\n\r\n{body}",
        hub.listen,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        loop {
            let mut buffer = [0u8; 4096];
            let read = stream.read(&mut buffer).await.unwrap();
            assert!(
                read > 0,
                "the stream ended early: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buffer[..read]);
            let text = String::from_utf8_lossy(&seen);
            if let Some(id) = text
                .lines()
                .find_map(|line| line.strip_prefix("id:").map(|id| id.trim().to_owned()))
            {
                return id;
            }
        }
    })
    .await
    .expect("the stream's first event")
}

/// `GET /mcp` with `Last-Event-ID`: the JSON-RPC messages replayed.
async fn replay(hub: &Hub, token: &str, session: &str, last: &str) -> Vec<serde_json::Value> {
    let authorization = format!("Bearer {token}");
    let response = tokio::time::timeout(
        PATIENCE,
        roundtable_testkit::http_raw(
            hub.listen.parse().unwrap(),
            "GET",
            "/mcp",
            &[
                ("Accept", "text/event-stream"),
                ("Authorization", &authorization),
                ("Mcp-Session-Id", session),
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Last-Event-ID", last),
            ],
            None,
        ),
    )
    .await
    .expect("the replay ends")
    .unwrap();
    assert_eq!(response.status, 200, "{}", response.body);
    response
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_is_replayed_from_its_last_event_id_even_after_a_hub_sigkill() {
    let mut hub = Hub::start(&[]).await;
    let (home, token) = dana_and_her_writer(&hub).await;
    let session = mcp_session(&hub, &token).await;

    // The agent waits; its connection drops; the message comes meanwhile.
    let last = call_and_drop(
        &hub,
        &token,
        &session,
        "wait_for_messages",
        serde_json::json!({"timeout_s": 60}),
    )
    .await;
    home.ok(
        "dana",
        &["send", "work", "@dana/writer while you were away"],
    )
    .await;
    let answered = |messages: &[serde_json::Value]| {
        messages.iter().any(|message| {
            message["id"] == 9
                && message["result"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|text| text.contains("while you were away"))
        })
    };
    roundtable_testkit::until("the wait's answer is kept", PATIENCE, async || {
        answered(&replay(&hub, &token, &session, &last).await)
    })
    .await;

    // Again, and the hub is killed before the client comes back.
    let last = call_and_drop(
        &hub,
        &token,
        &session,
        "wait_for_messages",
        serde_json::json!({"timeout_s": 60}),
    )
    .await;
    home.ok(
        "dana",
        &["send", "work", "@dana/writer while the hub was down"],
    )
    .await;
    roundtable_testkit::until("the second wait's answer is kept", PATIENCE, async || {
        replay(&hub, &token, &session, &last)
            .await
            .iter()
            .any(|message| message["id"] == 9)
    })
    .await;
    hub.process.take().unwrap().kill().await;
    hub.start_again().await;
    let replayed = replay(&hub, &token, &session, &last).await;
    assert!(
        replayed
            .iter()
            .any(|message| message["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|text| text.contains("while the hub was down"))),
        "{replayed:?}"
    );
    // Another principal, on a session of its own, replays nothing of it.
    home.signup(&hub, "erin").await;
    let intruder = home.profile("erin").token.expose().to_owned();
    let theirs = mcp_session(&hub, &intruder).await;
    let stolen = replay(&hub, &intruder, &theirs, &last).await;
    assert!(stolen.is_empty(), "{stolen:?}");
}

/// `tools/list` as the stdio bridge answers it and as `/mcp` answers it: the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stdio_bridge_and_the_hubs_mcp_list_the_same_tools_byte_for_byte() {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    let agent = json(
        &home
            .ok("dana", &["--json", "agents", "register", "writer"])
            .await,
    );
    let token = agent["token"].as_str().unwrap().to_owned();
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});

    let session = mcp_session(&hub, &token).await;
    let (status, over_http, _) = mcp_post(&hub, &token, Some(&session), list.clone()).await;
    assert_eq!(status, 200);

    let mut bridge = tokio::process::Command::new(roundtable_bin())
        .args(["mcp", "--agent", "dana/writer"])
        .env("ROUNDTABLE_HOME", home.dir.path())
        .env("ROUNDTABLE_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(bridge.stdout.take().unwrap()).lines();
    for message in [
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "1"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        list,
    ] {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let over_stdio = tokio::time::timeout(PATIENCE, async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the bridge answers");
            if line.contains("\"id\":1") {
                return line;
            }
        }
    })
    .await
    .expect("tools/list answered");
    assert_eq!(over_http.last().unwrap(), &over_stdio);
    assert!(over_stdio.contains("\"ask_human\""));
}

/// Runs an npm tool's script with Node 22; its exit status, stdout, and all it printed.
async fn node(script: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(roundtable_e2e::test_node22())
            .arg(script)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the tool finished in time")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let text = format!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    (output.status.success(), stdout, text)
}

/// The MCP conformance suite (0.1.16) and the MCP inspector's CLI (2.12.0), independent
/// clients of `/mcp`. The suite cannot send a header, so a loopback proxy adds the agent's
/// token; the hub names the proxy as its public address, as behind any reverse proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_conformance_suite_and_inspector_pass_against_the_hubs_mcp() {
    use tokio::io::AsyncBufReadExt as _;
    let listen = roundtable_e2e::free_loopback_address().to_string();
    let proxy_port = roundtable_e2e::free_loopback_address().port();
    let public = format!("127.0.0.1:{proxy_port}");
    let dir = tempfile::tempdir().unwrap();
    let process = roundtable_testkit::HubProcess::start_on(
        &roundtable_bin(),
        dir.path(),
        &listen,
        &["--public-address", &public],
    )
    .await;
    let hub = Hub {
        process: Some(process),
        dir,
        listen: listen.clone(),
        extra: Vec::new(),
    };
    let (home, token) = dana_and_her_writer(&hub).await;

    let mut proxy = tokio::process::Command::new(roundtable_e2e::test_node22())
        .arg(fixtures().join("../e2e/js/bearer_proxy.mjs"))
        .args([&proxy_port.to_string(), &listen, &token])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut ready = tokio::io::BufReader::new(proxy.stdout.take().unwrap()).lines();
    assert_eq!(
        ready.next_line().await.unwrap().as_deref(),
        Some("listening")
    );

    let conformance =
        roundtable_e2e::test_npm_package("@modelcontextprotocol/conformance").join("dist/index.js");
    let url = format!("http://{public}/mcp");
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ] {
        let (passed, _, output) = node(
            &conformance,
            &["server", "--url", &url, "--scenario", scenario],
        )
        .await;
        assert!(passed, "{scenario}:\n{output}");
        assert!(output.contains(" 0 failed"), "{scenario}:\n{output}");
    }

    // The inspector, with the header as a person gives it: the tools (schemas checked for
    // portability), then a send and the person's reply read back.
    let inspector = roundtable_e2e::test_npm_package("@modelcontextprotocol/inspector")
        .join("clients/launcher/build/index.js");
    let direct = format!("http://{listen}/mcp");
    let header = format!("Authorization: Bearer {token}");
    let inspect = |method: &'static str, extra: Vec<String>| {
        let (inspector, direct, header) = (inspector.clone(), direct.clone(), header.clone());
        async move {
            let mut args = vec![
                "--cli".to_owned(),
                direct,
                "--transport".into(),
                "http".into(),
                "--header".into(),
                header,
                "--method".into(),
                method.into(),
                "--format".into(),
                "json".into(),
            ];
            args.extend(extra);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (ok, stdout, output) = node(&inspector, &args).await;
            assert!(ok, "inspector {method}:\n{output}");
            serde_json::from_str::<serde_json::Value>(stdout.trim())
                .unwrap_or_else(|_| panic!("inspector {method} printed no JSON:\n{output}"))
        }
    };
    let listed = inspect("tools/list", vec!["--strict".into()]).await;
    assert_eq!(
        listed["result"]["tools"].as_array().unwrap().len(),
        16,
        "{listed}"
    );
    let tool = |name: &str, arguments: serde_json::Value| {
        vec![
            "--tool-name".to_owned(),
            name.to_owned(),
            "--tool-args-json".to_owned(),
            arguments.to_string(),
        ]
    };
    let sent = inspect(
        "tools/call",
        tool(
            "send_message",
            serde_json::json!({"room": "work", "text": "hi from the inspector"}),
        ),
    )
    .await;
    assert_eq!(sent["result"]["isError"], false, "{sent}");
    home.ok("dana", &["send", "work", "@dana/writer got it"])
        .await;
    let read = inspect("tools/call", tool("read_messages", serde_json::json!({}))).await;
    let text = read["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("@dana/writer got it"), "{read}");
    let texts = roundtable_e2e::room_texts(&hub.ws_url(), &token, "work").await;
    assert_eq!(texts, ["hi from the inspector", "@dana/writer got it"]);
    let _ = proxy.start_kill();
}
