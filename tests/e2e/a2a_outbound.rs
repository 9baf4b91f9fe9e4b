//! A Roundtable room calls an agent that another framework serves over A2A: the official
//! Python server (`a2a-sdk[http-server]` 1.3.0 under uvicorn, `python/a2a_echo_server.py`)
//! plays the remote agent, a real `roundtable hub` process calls it. A person mentions it
//! and gets its answer; its question becomes the person's ping and the answer goes on with
//! the same remote task; the remote agent sees only the mentioning messages and its own
//! credential, never a Roundtable token; a call owed when the hub is SIGKILLed is made
//! after it restarts, once; and the SSRF guard's operator flags open only what they name.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roundtable_protocol::client::{
    ClientFrame, RegisterRemoteAgent, RemoteCredential, RemoteCredentialScheme, RoomCreate, SendCmd,
};
use roundtable_protocol::server::{Event, RegisterRemoteAgentOk, RoomOk, SendOk};
use roundtable_testkit::{Client, HubProcess, roundtable_bin, signup};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use roundtable_e2e::{
    Home, Hub, free_loopback_address, json as parse_json, room_texts, test_python,
};

/// The official A2A server playing a remote agent, and what it saw.
struct EchoServer {
    child: tokio::process::Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl EchoServer {
    async fn start(port: Option<u16>) -> EchoServer {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("seen.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/python/a2a_echo_server.py");
        let mut command = tokio::process::Command::new(test_python());
        command.arg(script).arg(&log);
        if let Some(port) = port {
            command.arg(port.to_string());
        }
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the echo server starts");
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the echo server prints its port")
            .unwrap()
            .expect("a port");
        EchoServer {
            child,
            port: first.trim().parse().unwrap(),
            log,
            _dir: dir,
        }
    }

    fn card_url(&self) -> String {
        format!("http://127.0.0.1:{}/.well-known/agent-card.json", self.port)
    }

    fn seen(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn messages(&self) -> Vec<Value> {
        self.seen()
            .into_iter()
            .filter(|entry| entry.get("message").is_some())
            .collect()
    }
}

fn register_frame(id: u64, name: &str, card_url: &str, secret: &str) -> ClientFrame {
    ClientFrame::RegisterRemoteAgent(RegisterRemoteAgent {
        id,
        name: name.into(),
        card_url: card_url.into(),
        credential: Some(RemoteCredential {
            scheme: RemoteCredentialScheme::Bearer,
            value: secret.into(),
            header: None,
        }),
        description: Some("echoes, on another framework".into()),
        discoverable: None,
    })
}

/// dana, signed in, with a room she shares with her remote agent `dana/echo` (at
/// `card_url`). Returns her client (live), her token and the agent's id and the room.
async fn dana_and_echo(hub: &HubProcess, card_url: &str) -> (Client, String, String, String) {
    let dana = signup(hub.addr, "dana").await.unwrap();
    let mut client = Client::connect(&hub.ws_url()).await.unwrap();
    client.auth(&dana.token, "laptop").await.unwrap();
    let id = client.id();
    let echo: RegisterRemoteAgentOk = client
        .ok(register_frame(id, "echo", card_url, "echo-key-1"))
        .await
        .decode()
        .unwrap();
    let id = client.id();
    let room = client
        .ok(ClientFrame::RoomCreate(RoomCreate {
            id,
            title: Some("weather".into()),
            topic: None,
            members: vec!["dana/echo".into()],
        }))
        .await
        .decode::<RoomOk>()
        .unwrap()
        .room
        .id;
    (client, dana.token, echo.agent.id, room)
}

async fn say(client: &mut Client, room: &str, key: &str, kind: &str, body: Value) -> Event {
    let id = client.id();
    let sent: SendOk = client
        .ok(ClientFrame::Send(SendCmd {
            id,
            room: room.into(),
            client_key: key.into(),
            kind: kind.into(),
            body,
        }))
        .await
        .decode()
        .unwrap();
    sent.event
}

/// Says `text` in a room.
async fn mention(client: &mut Client, room: &str, key: &str, text: &str) -> Event {
    say(client, room, key, "message", json!({ "text": text })).await
}

/// The calls the hub's outbound worker has made to remote agents (tried, answered or not).
async fn calls_made(hub: &HubProcess) -> u64 {
    let metrics = roundtable_testkit::http(hub.addr, "GET", "/metrics", None)
        .await
        .unwrap()
        .body;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("roundtable_a2a_outbound_calls_total "))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no calls counted in {metrics}"))
}

/// The room's events from `from` of `kind`, read until there are `count` (within 30 s).
async fn answers(
    client: &mut Client,
    room: &str,
    from: &str,
    kind: &str,
    count: usize,
) -> Vec<Event> {
    wait_for(client, room, from, kind, count, Duration::from_secs(30)).await
}

/// The room's events from `from` of `kind`, read until there are `count` (within `wait`).
async fn wait_for(
    client: &mut Client,
    room: &str,
    from: &str,
    kind: &str,
    count: usize,
    wait: Duration,
) -> Vec<Event> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let found: Vec<Event> = client
            .room_log(room)
            .await
            .unwrap()
            .into_iter()
            // A remote agent's notice on joining is not an answer.
            .filter(|event| {
                event.from == from
                    && event.kind == kind
                    && !event.body["x_a2a"]["remote"].is_string()
            })
            .collect();
        if found.len() >= count || tokio::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_calls_an_agent_on_the_official_a2a_server_and_gets_its_answers() {
    let echo_server = EchoServer::start(None).await;
    let data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(
        &roundtable_bin(),
        data.path(),
        // The guard on, with one exception: the loopback address the remote agent is at.
        &["--a2a-outbound-allow", "127.0.0.1"],
    )
    .await;
    let (mut dana, token, echo, room) = dana_and_echo(&hub, &echo_server.card_url()).await;
    mention(&mut dana, &room, "chatter-0001", "only for us").await;

    let hello = mention(&mut dana, &room, "mention-0001", "@dana/echo hello").await;
    let replies = answers(&mut dana, &room, &echo, "message", 1).await;
    assert_eq!(replies.len(), 1, "no answer");
    assert_eq!(replies[0].body["text"], "echo: @dana/echo hello");
    assert_eq!(replies[0].body["reply_to"], json!(hello.id));

    // Its question becomes dana's ping; her answer goes on with the same remote task.
    let asked = mention(&mut dana, &room, "mention-0002", "@dana/echo which branch?").await;
    let pings = answers(&mut dana, &room, &echo, "ping", 1).await;
    assert_eq!(pings.len(), 1, "no ping");
    assert_eq!(pings[0].body["question"], "which one?");
    say(
        &mut dana,
        &room,
        "answer-00001",
        "answer",
        json!({"ping": pings[0].body["ping"], "text": "main"}),
    )
    .await;
    let replies = answers(&mut dana, &room, &echo, "message", 2).await;
    assert_eq!(replies.len(), 2, "no answer after the ping");
    assert_eq!(replies[1].body["text"], "echo: main");
    assert_eq!(replies[1].body["reply_to"], json!(asked.id));

    // What left the hub: the two mentions and the answer, nothing else of the room; the
    // answer on the task that asked.
    let messages = echo_server.messages();
    let texts: Vec<&str> = messages
        .iter()
        .map(|entry| entry["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["@dana/echo hello", "@dana/echo which branch?", "main"]
    );
    assert_eq!(messages[2]["continuing"], true);
    assert_eq!(messages[2]["message_task_id"], messages[1]["task_id"]);
    // Its own credential on every request, and never a token of ours.
    let requests: Vec<Value> = echo_server
        .seen()
        .into_iter()
        .filter(|entry| entry.get("headers").is_some())
        .collect();
    assert!(requests.len() >= 4, "{requests:?}");
    for request in &requests {
        let headers = request["headers"].as_object().unwrap();
        if request["path"] == "/" {
            assert_eq!(headers["authorization"], "Bearer echo-key-1", "{request}");
        }
        for value in headers.values() {
            let value = value.as_str().unwrap();
            assert!(
                !value.contains("rt_") && !value.contains(&token),
                "{request}"
            );
        }
    }
    hub.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_owed_when_the_hub_is_killed_is_made_once_after_it_restarts() {
    // The remote agent is down when the mention is made; the hub dies; both come back.
    let port = free_loopback_address().port();
    let card_url = format!("http://127.0.0.1:{port}/.well-known/agent-card.json");
    let data = tempfile::tempdir().unwrap();
    let listen = free_loopback_address().to_string();
    let flags = ["--a2a-outbound-allow-private"];
    let hub = HubProcess::start_on(&roundtable_bin(), data.path(), &listen, &flags).await;
    let (mut dana, token, echo, room) = dana_and_echo(&hub, &card_url).await;
    let mention = mention(&mut dana, &room, "mention-0003", "@dana/echo still there").await;
    // The hub dies once it has tried the call, which failed (no one is listening).
    roundtable_testkit::until(
        "a call to the remote agent while it is down",
        Duration::from_secs(30),
        async || calls_made(&hub).await >= 1,
    )
    .await;
    hub.kill().await;

    let echo_server = EchoServer::start(Some(port)).await;
    let hub = HubProcess::start_on(&roundtable_bin(), data.path(), &listen, &flags).await;
    let mut dana = Client::connect(&hub.ws_url()).await.unwrap();
    dana.auth(&token, "laptop").await.unwrap();
    // A claim the killed process held lapses after its lease (a minute at most).
    let replies = wait_for(
        &mut dana,
        &room,
        &echo,
        "message",
        1,
        Duration::from_secs(100),
    )
    .await;
    assert_eq!(replies.len(), 1, "the owed call was not made");
    assert_eq!(replies[0].body["text"], "echo: @dana/echo still there");
    assert_eq!(replies[0].body["reply_to"], json!(mention.id));
    // A mention after it is called once the calls before it of the same room and agent are
    // settled: a second answer to the first would come before its answer.
    let after = self::mention(&mut dana, &room, "mention-0004", "@dana/echo and now").await;
    let replies = answers(&mut dana, &room, &echo, "message", 2).await;
    let answered: Vec<&Value> = replies
        .iter()
        .map(|reply| &reply.body["reply_to"])
        .collect();
    assert_eq!(
        answered,
        [&json!(mention.id), &json!(after.id)],
        "answered twice"
    );
    assert_eq!(echo_server.messages().len(), 2);
    hub.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_flags_open_only_the_hosts_they_name() {
    let echo_server = EchoServer::start(None).await;
    let data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&roundtable_bin(), data.path(), &[]).await;
    let dana = signup(hub.addr, "dana").await.unwrap();
    let mut client = Client::connect(&hub.ws_url()).await.unwrap();
    client.auth(&dana.token, "laptop").await.unwrap();
    for (url, why) in [
        (echo_server.card_url(), "plain http"),
        (
            format!(
                "https://127.0.0.1:{}/.well-known/agent-card.json",
                echo_server.port
            ),
            "loopback",
        ),
        (
            format!("https://localhost:{}/", echo_server.port),
            "loopback",
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "plain http",
        ),
        ("https://169.254.169.254/".to_owned(), "link-local"),
        ("https://10.1.2.3/".to_owned(), "private"),
    ] {
        let id = client.id();
        let refused = client.err(register_frame(id, "probe", &url, "k-1")).await;
        assert!(refused.msg.contains(why), "{url}: {refused:?}");
    }
    hub.terminate().await;
    assert!(
        echo_server.seen().is_empty(),
        "the hub reached the remote agent"
    );

    // Named, that one host is let in (over http too), and no other.
    let hub = HubProcess::start(
        &roundtable_bin(),
        data.path(),
        &["--a2a-outbound-allow", "127.0.0.1"],
    )
    .await;
    let mut client = Client::connect(&hub.ws_url()).await.unwrap();
    client.auth(&dana.token, "laptop").await.unwrap();
    let id = client.id();
    client
        .ok(register_frame(id, "echo", &echo_server.card_url(), "k-1"))
        .await;
    let id = client.id();
    let refused = client
        .err(register_frame(id, "probe", "http://10.1.2.3/", "k-1"))
        .await;
    assert!(refused.msg.contains("plain http"), "{refused:?}");
    hub.terminate().await;
    drop(echo_server.child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_registers_a_remote_agent_with_the_cli_and_talks_to_it_in_a_room() {
    let echo_server = EchoServer::start(None).await;
    let hub = Hub::start(&["--a2a-outbound-allow-private"]).await;
    let addr = hub.addr();
    let home = Home::default();
    home.ok("dana", &["signup", "--hub", &addr, "--handle", "dana"])
        .await;
    // The credential comes from the environment, never the command line; it is not shown.
    let mut register = home.command(
        "dana",
        &[
            "--json",
            "agents",
            "register-remote",
            "echo",
            "--card",
            &echo_server.card_url(),
            "--credential-env",
            "ECHO_KEY",
        ],
    );
    let output = register
        .env("ECHO_KEY", "echo-key-2\n")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!stdout.contains("echo-key-2"), "{stdout}");
    let registered = parse_json(&stdout);
    assert_eq!(registered["agent"]["handle"], "dana/echo");
    assert_eq!(registered["card_url"], echo_server.card_url().as_str());
    // Refused addresses say why, with the hub's code (exit 4).
    let refused = home
        .fails(
            "dana",
            &[
                "agents",
                "register-remote",
                "meta",
                "--card",
                "https://169.254.169.254/",
            ],
            4,
        )
        .await;
    assert!(refused.contains("metadata"), "{refused}");

    home.ok(
        "dana",
        &[
            "room",
            "create",
            "--title",
            "weather",
            "--member",
            "dana/echo",
        ],
    )
    .await;
    home.ok("dana", &["send", "weather", "@dana/echo sunny?"])
        .await;
    let token = home.profile("dana").token.expose().to_owned();
    // A question mark: the remote agent asks back, as a ping to dana.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let pings = loop {
        let pings = roundtable_e2e::room_bodies(&hub.ws_url(), &token, "weather", "ping").await;
        if !pings.is_empty() || tokio::time::Instant::now() > deadline {
            break pings;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(pings.len(), 1, "no ping");
    assert_eq!(pings[0]["question"], "which one?");
    // The room was told on the agent's joining where its mentions go (the notice is
    // posted by the outbound worker, so it may come after a message sent at once).
    let texts = room_texts(&hub.ws_url(), &token, "weather").await;
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|text| text.contains("agent served at 127.0.0.1, outside this hub")),
        "{texts:?}"
    );
    assert!(texts.contains(&"@dana/echo sunny?".to_owned()), "{texts:?}");
    let requests: Vec<Value> = echo_server
        .seen()
        .into_iter()
        .filter(|entry| entry["path"] == "/")
        .collect();
    assert!(!requests.is_empty());
    for request in requests {
        assert_eq!(request["headers"]["authorization"], "Bearer echo-key-2");
    }
}
