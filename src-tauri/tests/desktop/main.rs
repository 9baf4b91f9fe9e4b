//! The desktop app end to end, in a real WebKit webview driven through WebDriver: the
//! journeys a person makes with it on the first day.
//!
//! Linux only: WebDriver reaches the webview through WebKitGTK's `WebKitWebDriver`, under
//! Xvfb, with a D-Bus notification service of the tests' own (`../shared/TAURI-LINUX.md`);
//! the Windows and macOS webviews have no driver this machine can run.
#![cfg(target_os = "linux")]

mod boards;
mod contract;
mod harness;
mod launch;
mod messages;
mod package;
#[path = "../support/mod.rs"]
#[allow(
    dead_code,
    reason = "shared with the desktop benchmark, which uses more of it"
)]
mod support;

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::{Desk, PATIENCE, finished, roundtable_bin, workspace};
use serde_json::{Value, json};

/// The person's own Claude Code configuration before onboarding.
const CLAUDE_JSON: &str = "{\n  \"theme\": \"dark\",\n  \"projects\": {\n    \"/work/app\": {\"allowedTools\": [\"Bash\"]}\n  }\n}\n";
const CLAUDE_SETTINGS: &str =
    "{\n\t\"model\": \"opus\",\n\t\"permissions\": {\"allow\": [\"Read\"]}\n}\n";

fn with_claude_config(home: &std::path::Path) {
    std::fs::write(home.join(".claude.json"), CLAUDE_JSON).unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(home.join(".claude/settings.json"), CLAUDE_SETTINGS).unwrap();
}

/// Onboards the fake `claude` from the Onboarding view, in one click.
async fn onboard_claude(desk: &Desk) {
    eprintln!("onboarding claude");
    desk.go("onboarding").await;
    let row = desk.wait("cli-claude").await;
    let row_text = row.text().await.unwrap();
    assert!(row_text.contains("version"), "{row_text}");
    // What Roundtable will do with it, said before it is onboarded.
    let support = desk.text("support-claude").await;
    assert!(
        support.contains("Permissions") && support.contains("asked of you in Roundtable"),
        "{support}"
    );
    // And how to drive it over ACP, with what to install for that.
    assert!(
        support.contains("Over ACP") && support.contains("claude-agent-acp"),
        "{support}"
    );
    desk.click("onboard-claude").await;
    desk.wait("onboard-report").await;
    desk.wait("offboard-claude").await;
}

fn json_file(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_first_run_claude_code_is_onboarded_in_one_click() {
    let desk = Desk::start("first-run", with_claude_config).await;
    // Local mode: the app's own hub, the person created on it, reached on its socket.
    let address = desk.hub_address();
    assert!(address.starts_with("unix:"), "{address}");
    desk.go("settings").await;
    desk.wait_for_text("the settings name the person", |text| text.contains("dana"))
        .await;
    desk.screenshot("settings").await;

    onboard_claude(&desk).await;
    let report = desk.text("onboard-report").await;
    assert!(report.contains(".claude.json"), "{report}");
    assert!(report.contains("settings.json"), "{report}");
    desk.screenshot("onboarding").await;

    // The configuration gained exactly the MCP server and the hooks; the rest is as it was.
    let home = desk.home();
    let config = json_file(&home.join(".claude.json"));
    let mut without = config.clone();
    let servers = without
        .as_object_mut()
        .unwrap()
        .remove("mcpServers")
        .unwrap();
    assert_eq!(without, serde_json::from_str::<Value>(CLAUDE_JSON).unwrap());
    let servers = servers.as_object().unwrap();
    assert_eq!(servers.keys().collect::<Vec<_>>(), ["roundtable"]);
    let server = &servers["roundtable"];
    assert!(
        server["command"].as_str().unwrap().ends_with("roundtable"),
        "{server}"
    );
    assert_eq!(
        server["args"],
        json!(["mcp", "--agent", "dana/claude"]),
        "{server}"
    );
    let text = std::fs::read_to_string(home.join(".claude.json")).unwrap();
    assert!(text.starts_with("{\n  \"theme\": \"dark\",\n  \"projects\": {\n    \"/work/app\": {\"allowedTools\": [\"Bash\"]}\n  }"), "{text}");

    let settings = json_file(&home.join(".claude/settings.json"));
    let mut without = settings.clone();
    let hooks = without.as_object_mut().unwrap().remove("hooks").unwrap();
    // Today's Claude models get their task tools only with this switch.
    // And a `roundtable` run in a session knows it is in one.
    let env = without.as_object_mut().unwrap().remove("env").unwrap();
    assert_eq!(
        env,
        json!({"ROUNDTABLE_AGENT_SESSION": "dana/claude", "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1"})
    );
    // Its file tools are kept out of Roundtable's profiles; the person's own rules stay.
    let deny = without["permissions"]
        .as_object_mut()
        .unwrap()
        .remove("deny")
        .unwrap();
    let profiles = desk.machine.roundtable_home().join("profiles");
    assert_eq!(
        deny,
        json!([
            format!("Read(/{}/**)", profiles.display()),
            format!("Edit(/{}/**)", profiles.display())
        ])
    );
    assert_eq!(
        without,
        serde_json::from_str::<Value>(CLAUDE_SETTINGS).unwrap()
    );
    let events: Vec<&String> = hooks.as_object().unwrap().keys().collect();
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "Notification",
        "PermissionRequest",
        "Stop",
    ] {
        assert!(
            events.iter().any(|e| *e == event),
            "{event} missing: {events:?}"
        );
    }
    assert!(hooks.to_string().contains("roundtable"), "{hooks}");

    // The agent is among the person's agents; every view is shown.
    desk.go("agents").await;
    desk.wait("agent-dana_claude").await;
    desk.screenshot("agents").await;
    for view in ["rooms", "pings", "contacts"] {
        desk.go(view).await;
        desk.screenshot(view).await;
    }
    desk.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_question_is_notified_and_answered_in_the_app() {
    let desk = Desk::start("ping", with_claude_config).await;
    onboard_claude(&desk).await;

    // The agent asks through `roundtable mcp`, as Claude Code would.
    let python = std::env::var_os("ROUNDTABLE_TEST_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/python/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh (it installs the MCP client), or set ROUNDTABLE_TEST_PYTHON",
        python.display()
    );
    let question = "Ship the parser behind a feature flag?";
    let agent = Command::new(&python)
        .arg(workspace().join("tests/fixtures/ask_human.py"))
        .arg(roundtable_bin())
        .args(["dana/claude", question, "yes", "no"])
        .envs(desk.env())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // A notification names the agent, the room and the question, with the options.
    let notified = desk.notification();
    assert_eq!(notified.app_name, "Roundtable");
    assert!(notified.summary.contains("dana/claude"), "{notified:?}");
    assert_eq!(notified.body, question);
    assert!(notified.actions.contains(&"yes".to_owned()), "{notified:?}");

    // The question waits in the app, apart; the person answers it there.
    let count = desk.text("nav-pings-count").await;
    assert!(count.contains('1'), "{count}");
    desk.go("pings").await;
    let open = desk.wait("pings-open").await;
    let waiting = open.text().await.unwrap();
    assert!(waiting.contains(question), "{waiting}");
    desk.screenshot("pings-waiting").await;
    let yes = desk
        .wait_css("[data-testid='pings-open'] [data-testid='ping-option']")
        .await;
    assert_eq!(yes.text().await.unwrap(), "yes");
    yes.click().await.unwrap();

    // The agent's tool call returns the person's answer.
    let answered: Value = serde_json::from_str(finished(agent).trim()).unwrap();
    assert_eq!(answered["answer"], "yes", "{answered}");
    desk.wait("pings-answered").await;
    desk.wait_for_text("the answer shows who answered", |text| {
        text.contains(question) && text.contains("dana")
    })
    .await;
    desk.screenshot("pings-answered").await;

    // A question that hides its end past the lines a notification shows: its newlines
    // shown escaped, the cut marked, and no answer offered outside the app.
    let hidden = format!("May I run `ls{}; curl x|sh`?", "\n".repeat(400));
    let mut second = Command::new(&python)
        .arg(workspace().join("tests/fixtures/ask_human.py"))
        .arg(roundtable_bin())
        .args(["dana/claude", &hidden, "Allow", "Deny"])
        .envs(desk.env())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let notified = desk.notification();
    assert!(
        notified.body.starts_with("May I run `ls\\n\\n"),
        "{notified:?}"
    );
    assert!(notified.body.contains("[cut: "), "{notified:?}");
    assert!(!notified.body.contains("curl"), "{notified:?}");
    assert!(
        !notified.actions.contains(&"Allow".to_owned()),
        "{notified:?}"
    );
    assert!(
        notified.actions.contains(&"Open".to_owned()),
        "{notified:?}"
    );
    let _ = second.kill();
    let _ = second.wait();
    desk.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_redeems_an_invite_link_from_the_app_and_they_talk_both_ways() {
    let desk = Desk::start("invite", |_| {}).await;
    // A room, from the app.
    desk.go("rooms").await;
    desk.click("room-create").await;
    desk.type_into("room-create-title", "Design").await;
    desk.click("room-create-submit").await;
    desk.wait_for_text("the room is listed", |text| text.contains("Design"))
        .await;

    // An invite into it, from the app: a link to paste to a teammate, who is on another
    // machine; so the person lets teammates on the network in first.
    let network = desk.let_teammates_in().await;
    assert!(network.contains("#sha256="), "{network}");
    desk.go("contacts").await;
    let room = desk.cli(&["--json", "rooms"]);
    let rooms: Value = serde_json::from_str(&room).unwrap();
    let room_id = rooms
        .as_array()
        .unwrap()
        .iter()
        .find(|room| room["title"] == "Design")
        .expect("the room reached the person's cache")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let selected = desk
        .script(
            "const select = document.querySelector(\"[data-testid='invite-room']\");\
             select.value = arguments[0];\
             select.dispatchEvent(new Event('change', {bubbles: true}));\
             return select.value;",
            vec![json!(room_id)],
        )
        .await;
    assert_eq!(selected, json!(room_id));
    desk.click("invite-create").await;
    let link_field = desk.wait("invite-link").await;
    let started = Instant::now();
    let link = loop {
        let value = link_field.prop("value").await.unwrap().unwrap_or_default();
        if value.starts_with("roundtable://invite/") {
            break value;
        }
        assert!(started.elapsed() < PATIENCE, "no invite link: {value:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(link.ends_with(&format!("?hub={network}")), "{link}");
    desk.screenshot("contacts-invite").await;

    // Sam, on their own profile, redeems the link when signing up at the hub it names
    // (over TLS, the hub's certificate pinned), and is in the room.
    let hub = link.split_once("?hub=").unwrap().1.to_owned();
    desk.cli(&[
        "--profile",
        "sam",
        "signup",
        "--hub",
        &hub,
        "--handle",
        "sam",
        "--name",
        "Sam",
        "--invite",
        &link,
    ]);
    desk.go("rooms").await;
    desk.click(&format!("room-{room_id}")).await;
    let members = desk.wait("members").await;
    let started = Instant::now();
    loop {
        let shown = members.text().await.unwrap();
        if shown.contains("sam") {
            break;
        }
        if started.elapsed() > PATIENCE {
            desk.screenshot("failure").await;
            let sam_rooms = desk.cli(&["--profile", "sam", "--json", "rooms"]);
            panic!("sam is not among the members: {shown}\nsam's rooms: {sam_rooms}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Sam writes; the app shows it. The person answers from the app; Sam reads it.
    desk.cli(&["--profile", "sam", "send", &room_id, "hello from sam"]);
    desk.wait_for_text("sam's message arrives", |text| {
        text.contains("hello from sam")
    })
    .await;
    desk.type_into("composer", "welcome, @sam").await;
    desk.click("composer-send").await;
    let started = Instant::now();
    loop {
        let history = desk.cli(&["--profile", "sam", "--json", "history", &room_id]);
        if history.contains("welcome, @sam") {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "sam never got the answer: {history}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    desk.screenshot("rooms-conversation").await;
    desk.finish().await;
}

/// A raw HTTP request on the Unix socket at `path`; the status code and the whole answer.
fn request(path: &str, head: &str, body: &str) -> (u16, String) {
    let mut stream = std::os::unix::net::UnixStream::connect(path).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    sent_or_refused(std::io::Write::write_all(&mut stream, request.as_bytes()));
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    (status_of(&answer), answer)
}

/// A raw plain-HTTP request to a TCP `address`; the status code (0 for no HTTP answer)
/// and the whole answer.
fn request_tcp(address: &str, head: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!("{head}\r\nConnection: close\r\n\r\n");
    sent_or_refused(std::io::Write::write_all(&mut stream, request.as_bytes()));
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    (status_of(&answer), answer)
}

/// A request the server may refuse and close on before it has read all of it (a refusal
/// can follow the headers): its answer is read all the same.
fn sent_or_refused(written: std::io::Result<()>) {
    if let Err(error) = written {
        assert!(
            matches!(
                error.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ),
            "the request could not be written: {error}"
        );
    }
}

fn status_of(answer: &str) -> u16 {
    if !answer.starts_with("HTTP/") {
        return 0;
    }
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_page_cannot_sign_up_on_the_apps_hub_or_open_its_socket() {
    let desk = Desk::start("browsers", |_| {}).await;
    // The app's hub listens on no port until the person lets teammates in: a page has
    // nowhere to send anything.
    assert_eq!(desk.app_ports(), Vec::<u16>::new());
    let hub = desk.hub_address();
    let socket = hub.strip_prefix("unix:").unwrap().to_owned();
    let signup = r#"{"handle":"mallory","name":"Mallory"}"#;
    // Were a page's requests to reach it (through a proxy of the person's, say), they would
    // still be refused: what a page on another site would send with fetch().
    let (status, answer) = request(
        &socket,
        "POST /v1/signup HTTP/1.1\r\nHost: localhost\r\nOrigin: https://evil.example\r\nContent-Type: application/json",
        signup,
    );
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = request(
        &socket,
        "GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nOrigin: https://evil.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "",
    );
    assert_eq!(status, 403, "{answer}");
    // A form post (no preflight) without an Origin is refused for its type.
    let (status, answer) = request(
        &socket,
        "POST /v1/signup HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain",
        signup,
    );
    assert_eq!(status, 415, "{answer}");
    // A rebinding name.
    let (status, answer) = request(&socket, "GET /v1/health HTTP/1.1\r\nHost: evil.example", "");
    assert_eq!(status, 421, "{answer}");
    // The app itself reaches it, as a client.
    let (status, answer) = request(&socket, "GET /v1/health HTTP/1.1\r\nHost: localhost", "");
    assert_eq!(status, 200, "{answer}");

    // Teammates let in: one port, TLS only, and the app's own page cannot reach it either
    // (its content policy allows only the app).
    let network = desk.let_teammates_in().await;
    let ports = desk.app_ports();
    assert_eq!(ports.len(), 1, "{ports:?}");
    assert!(
        network.contains(&format!(":{}#sha256=", ports[0])),
        "{network}"
    );
    let port = ports[0];
    let (status, answer) = request_tcp(
        &format!("127.0.0.1:{port}"),
        &format!("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}"),
    );
    assert_eq!(status, 0, "plain HTTP answered on the TLS port: {answer}");
    for url in [
        format!("https://127.0.0.1:{port}/v1/health"),
        format!("http://127.0.0.1:{port}/v1/health"),
    ] {
        let fetched = desk
            .script(
                "return fetch(arguments[0]).then(() => 'reached', () => 'blocked');",
                vec![json!(url)],
            )
            .await;
        assert_eq!(fetched, json!("blocked"), "{url}");
    }
    // And out again: no port.
    desk.click("share-network").await;
    desk.wait_for_element_text(
        "[data-testid='network-summary']",
        "the hub is on its socket alone again",
        |text| text.contains("you alone"),
    )
    .await;
    assert_eq!(desk.app_ports(), Vec::<u16>::new());
    desk.finish().await;
}
