//! The boards end to end: the fake agent CLIs and logs in their real formats in the app's
//! `HOME`, the app following them live; costs against `roundtable usage`; "while you were
//! away" across a restart of the app, with a team hub that kept running meanwhile.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use roundtable_core::Core;
use roundtable_core::profile::Profile;
use roundtable_testkit::HubProcess;
use serde_json::{Value, json};

use super::harness::{Desk, PATIENCE, machine_cli, roundtable_bin, workspace};
use super::support::Machine;
use super::{onboard_claude, with_claude_config};

/// The agent's session, as Claude Code names them.
const SESSION: &str = "5b0c2d9e-4f7a-4c21-9d3e-2a6b8c0f1e7d";

/// A repository with an architecture: the lexer, and the parser that uses it.
fn with_repository(home: &Path) -> PathBuf {
    let repo = home.join("work/app");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join(".roundtable")).unwrap();
    std::fs::write(
        repo.join(".roundtable/architecture.toml"),
        "[[components]]\nid = \"lexer\"\nname = \"Lexer\"\npaths = [\"src/lexer/**\"]\ndepends_on = []\n\n\
         [[components]]\nid = \"parser\"\nname = \"Parser\"\npaths = [\"src/parser/**\"]\ndepends_on = [\"lexer\"]\n",
    )
    .unwrap();
    for file in ["src/lexer/mod.rs", "src/parser/mod.rs"] {
        std::fs::create_dir_all(repo.join(file).parent().unwrap()).unwrap();
        std::fs::write(repo.join(file), "// the code\n").unwrap();
    }
    repo
}

/// A repository nobody described: a Cargo workspace of a lexer and a parser that uses it.
fn with_cargo_workspace(home: &Path) -> PathBuf {
    let repo = home.join("work/compiler");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let files = [
        ("Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n"),
        ("crates/lexer/Cargo.toml", "[package]\nname = \"lexer\"\n"),
        (
            "crates/parser/Cargo.toml",
            "[package]\nname = \"parser\"\n[dependencies]\nlexer = { path = \"../lexer\" }\n",
        ),
        ("crates/lexer/src/lib.rs", "// the lexer\n"),
        ("crates/parser/src/lib.rs", "// the parser\n"),
    ];
    for (file, text) in files {
        std::fs::create_dir_all(repo.join(file).parent().unwrap()).unwrap();
        std::fs::write(repo.join(file), text).unwrap();
    }
    repo
}

/// The app with Claude Code onboarded in one click, and a repository `make` lays out in
/// its home; a finished turn rests at once rather than listening ten minutes for messages.
async fn claude_at_a_repository(name: &str, make: fn(&Path) -> PathBuf) -> (Desk, PathBuf) {
    let mut repo = PathBuf::new();
    let desk = Desk::start(name, |home| {
        with_claude_config(home);
        std::fs::create_dir_all(home.join(".claude/projects")).unwrap();
        repo = make(home);
    })
    .await;
    onboard_claude(&desk).await;
    std::fs::write(
        desk.machine
            .roundtable_home()
            .join("profiles/dana.claude/hooks.toml"),
        "listen_s = 1\npermission_wait_s = 1\n",
    )
    .unwrap();
    (desk, repo)
}

fn python() -> PathBuf {
    let python = std::env::var_os("ROUNDTABLE_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/python/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh (it installs the MCP client), or set ROUNDTABLE_TEST_PYTHON",
        python.display()
    );
    python
}

/// One MCP tool call as `agent`, through `roundtable mcp`, as its agent CLI would.
fn mcp_call(desk: &Desk, agent: &str, tool: &str, arguments: Value) -> Value {
    let output = Command::new(python())
        .arg(workspace().join("tests/fixtures/mcp_call.py"))
        .arg(roundtable_bin())
        .args([agent, tool, &arguments.to_string()])
        .envs(desk.env())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{tool} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn now_text() -> String {
    roundtable_protocol::ts::format_millis(roundtable_core::now_ms())
}

/// A `TodoWrite` call and its result, as Claude Code writes them, for appending to a
/// transcript.
fn todo_write_lines(n: usize, cwd: &Path, todos: &Value) -> String {
    let record = |mut record: Value, suffix: &str| {
        record["sessionId"] = json!(SESSION);
        record["cwd"] = json!(cwd.display().to_string());
        record["uuid"] = json!(format!("appended-{n}-{suffix}"));
        record["parentUuid"] = Value::Null;
        record["isSidechain"] = json!(false);
        record["userType"] = json!("external");
        record["version"] = json!("2.1.240");
        record["timestamp"] = json!(now_text());
        format!("{record}\n")
    };
    let call = format!("toolu_appended_{n}");
    let mut text = record(
        json!({
            "type": "assistant", "requestId": format!("req_appended_{n}"),
            "message": {"id": format!("msg_appended_{n}"), "model": "claude-sonnet-4-5-20250929",
                "role": "assistant", "type": "message",
                "content": [{"type": "tool_use", "id": call, "name": "TodoWrite", "input": {"todos": todos}}],
                "usage": {"input_tokens": 12, "output_tokens": 40, "cache_read_input_tokens": 2000,
                    "cache_creation_input_tokens": 0}}
        }),
        "a",
    );
    text.push_str(&record(
        json!({
            "type": "user",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                "content": "Todos have been modified successfully."}]},
            "toolUseResult": {"oldTodos": [], "newTodos": todos}
        }),
        "b",
    ));
    text
}

fn todos(items: &[(&str, &str)]) -> Value {
    Value::Array(
        items
            .iter()
            .map(|(content, status)| {
                json!({"content": content, "status": status, "activeForm": format!("Working on {content}")})
            })
            .collect(),
    )
}

/// Waits until an element matching `css` is in the window; how long it took, polled tightly.
async fn appeared(desk: &Desk, css: &str) -> Duration {
    let started = Instant::now();
    loop {
        let found = desk
            .script(
                "return document.querySelector(arguments[0]) !== null;",
                vec![json!(css)],
            )
            .await;
        if found == json!(true) {
            return started.elapsed();
        }
        if started.elapsed() > PATIENCE {
            desk.screenshot("failure").await;
            panic!(
                "no {css} in the window; it shows:\n{}",
                desk.window_text().await
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn card(agent: &str, title: &str, status: &str) -> String {
    format!(
        "[data-testid='task-card'][data-agent='{agent}'][data-title='{title}'][data-status='{status}']"
    )
}

/// The room of the person and their agent (its home room).
fn home_room(desk: &Desk, agent: &str) -> String {
    let rooms: Value = serde_json::from_str(&desk.cli(&["--json", "rooms"])).unwrap();
    rooms
        .as_array()
        .unwrap()
        .iter()
        .find(|room| {
            let members = room["members"].as_array().unwrap();
            members.len() == 2 && members.iter().any(|member| member["handle"] == agent)
        })
        .unwrap_or_else(|| panic!("no home room of {agent}: {rooms}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_architecture_board_fills_itself_from_the_repositorys_manifests() {
    let (desk, repo) = claude_at_a_repository("boards-inferred", with_cargo_workspace).await;
    // The agent edits the parser crate; nobody wrote an architecture.
    let ran = Command::new(workspace().join("tests/fixtures/agent-clis/claude"))
        .args(["-p", "fix the parser", "--session-id", SESSION])
        .current_dir(&repo)
        .envs(desk.env())
        .env("FAKE_AGENT_EDIT", "crates/parser/src/lib.rs")
        .output()
        .unwrap();
    assert!(ran.status.success(), "the fake claude failed: {ran:?}");

    desk.go("architecture").await;
    let parser = desk
        .wait_css("[data-testid='component-parser'][data-status='working']")
        .await;
    let shown = parser.text().await.unwrap();
    assert!(shown.contains("working: dana/claude"), "{shown}");
    desk.wait_css("[data-testid='component-lexer'][data-status='idle']")
        .await;
    desk.wait("arch-graph").await;
    let source = desk.text("architecture-source").await;
    assert!(
        source.contains("Inferred from the repository's Cargo workspace"),
        "{source}"
    );
    // The parser depends on the lexer, as its manifest says.
    let edges = desk
        .script(
            "return [...document.querySelectorAll(\"[data-testid='arch-graph'] path.edge title\")].map((t) => t.textContent);",
            vec![],
        )
        .await;
    desk.screenshot("architecture-inferred").await;
    assert_eq!(edges, json!(["parser uses lexer"]));
    desk.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_and_architecture_boards_follow_a_fake_agent_live() {
    let (desk, repo) = claude_at_a_repository("boards-live", with_repository).await;

    // The agent works: Claude Code (the fake) keeps a task list and edits the parser.
    let ran = Command::new(workspace().join("tests/fixtures/agent-clis/claude"))
        .args(["-p", "start on the parser", "--session-id", SESSION])
        .current_dir(&repo)
        .envs(desk.env())
        .env(
            "FAKE_AGENT_TODOS",
            todos(&[
                ("write the parser", "in_progress"),
                ("test the parser", "pending"),
            ])
            .to_string(),
        )
        .env("FAKE_AGENT_EDIT", "src/parser/mod.rs")
        .output()
        .unwrap();
    assert!(ran.status.success(), "the fake claude failed: {ran:?}");
    let transcript = std::fs::read_dir(desk.home().join(".claude/projects"))
        .unwrap()
        .flatten()
        .map(|dir| dir.path().join(format!("{SESSION}.jsonl")))
        .find(|path| path.exists())
        .expect("the fake claude's transcript");

    // Its list is on the tasks board, in its own lane.
    desk.go("tasks").await;
    appeared(
        &desk,
        &card("dana/claude", "write the parser", "in_progress"),
    )
    .await;
    let lane = desk
        .wait_css("[data-testid='task-lane'][data-agent='dana/claude']")
        .await;
    let key = lane.attr("data-lane").await.unwrap().unwrap_or_default();
    assert!(key.ends_with(&format!(":claude-code:{SESSION}")), "{key}");
    desk.wait_for_element_text(
        "[data-testid='task-lane'][data-agent='dana/claude']",
        "the lane says which CLI, which machine and whose",
        |facts| {
            facts.contains("claude-code")
                && facts.contains("this machine")
                && facts.contains("dana")
        },
    )
    .await;
    desk.screenshot("tasks").await;

    // Each list the agent writes appears within moments; a task marked completed moves.
    let steps = [
        (
            todos(&[
                ("write the parser", "completed"),
                ("test the parser", "in_progress"),
            ]),
            card("dana/claude", "write the parser", "completed"),
        ),
        (
            todos(&[
                ("write the parser", "completed"),
                ("test the parser", "completed"),
            ]),
            card("dana/claude", "test the parser", "completed"),
        ),
        (
            todos(&[
                ("write the parser", "completed"),
                ("test the parser", "completed"),
                ("document the parser", "in_progress"),
            ]),
            card("dana/claude", "document the parser", "in_progress"),
        ),
    ];
    let mut latencies = Vec::new();
    for (n, (list, expected)) in steps.iter().enumerate() {
        let lines = todo_write_lines(n, &repo, list);
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&transcript)
            .unwrap()
            .write_all(lines.as_bytes())
            .unwrap();
        latencies.push(appeared(&desk, expected).await);
    }
    eprintln!("appended TodoWrite → on the tasks board: {latencies:?}");
    latencies.sort();
    assert!(
        latencies[1] <= Duration::from_secs(1),
        "a TodoWrite line took more than 1 s to reach the board: {latencies:?}"
    );
    assert!(
        desk.script(
            "return document.querySelector(arguments[0]) === null;",
            vec![json!(card(
                "dana/claude",
                "write the parser",
                "in_progress"
            ))]
        )
        .await
            == json!(true),
        "the completed task left its column"
    );

    // A task's history says when it moved.
    desk.click_css(&card("dana/claude", "write the parser", "completed"))
        .await;
    let history = desk.text("task-history").await;
    assert!(
        history.contains("in progress") && history.contains("done"),
        "{history}"
    );
    desk.screenshot("tasks-history").await;

    // The edit under the parser's paths: working, by the agent, with the file.
    desk.go("architecture").await;
    let parser = desk
        .wait_css("[data-testid='component-parser'][data-status='working']")
        .await;
    let shown = parser.text().await.unwrap();
    assert!(shown.contains("working: dana/claude"), "{shown}");
    assert!(shown.contains("mod.rs"), "{shown}");
    desk.wait_css("[data-testid='component-lexer'][data-status='idle']")
        .await;
    desk.wait("arch-graph").await;
    desk.click("component-parser").await;
    desk.wait_for_text("the history names the agent's work", |text| {
        text.contains("working — dana/claude")
    })
    .await;
    desk.screenshot("architecture").await;

    // The agent says it is done, through its MCP tool: the board shows it.
    let room = home_room(&desk, "dana/claude");
    let answer = mcp_call(
        &desk,
        "dana/claude",
        "update_component",
        json!({"room": room, "component": "parser", "status": "done", "note": "merged"}),
    );
    assert_eq!(answer["sent"], true, "{answer}");
    desk.wait_css("[data-testid='component-parser'][data-status='done']")
        .await;
    desk.wait_for_text("the history has the agent's report", |text| {
        text.contains("done — dana/claude: merged")
    })
    .await;
    desk.screenshot("architecture-done").await;

    // Its session, with where it runs and what it reports to.
    desk.go("sessions").await;
    let session = desk
        .wait_css("[data-testid='session'][data-agent='dana/claude']")
        .await;
    let shown = session.text().await.unwrap();
    assert!(
        shown.contains("claude-code") && shown.contains("this machine"),
        "{shown}"
    );
    desk.wait("session-pause").await;
    desk.screenshot("sessions").await;
    desk.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_paused_in_its_own_room_and_the_agents_others_go_on() {
    let desk = Desk::start("sessions-per-room", |home| {
        with_claude_config(home);
        std::fs::create_dir_all(home.join(".claude/projects")).unwrap();
    })
    .await;
    onboard_claude(&desk).await;
    desk.cli(&[
        "room",
        "create",
        "--title",
        "review",
        "--member",
        "dana/claude",
    ]);
    let home = home_room(&desk, "dana/claude");
    // A headless runner answers the agent's mentions, in a session per room.
    let workdir = desk.home().join("work/app");
    std::fs::create_dir_all(&workdir).unwrap();
    let _runner = Stopped(
        Command::new(roundtable_bin())
            .args(["run", "--agent", "dana/claude"])
            .current_dir(&workdir)
            .envs(desk.env())
            .env("FAKE_AGENT_REPLY", "on it")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    desk.cli(&["send", &home, "@dana/claude the lexer, please"]);
    desk.cli(&["send", "review", "@dana/claude review the parser"]);

    desk.go("sessions").await;
    let sessions = "[data-testid='session'][data-agent='dana/claude']";
    let started = Instant::now();
    // Both sessions, each saying the room it answers (what its pause is for): under load the
    // row may show before the room it is bound to is known.
    let keys = loop {
        let keys = desk
            .script(
                "return [...document.querySelectorAll(arguments[0])]
                     .filter((s) => s.textContent.includes('answers '))
                     .map((s) => s.dataset.key);",
                vec![json!(sessions)],
            )
            .await;
        if keys.as_array().is_some_and(|keys| keys.len() == 2) {
            break keys;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the runner's two sessions never showed: {keys}"
        );
        desk.go("rooms").await;
        desk.go("sessions").await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (first, second) = (keys[0].as_str().unwrap(), keys[1].as_str().unwrap());
    let session = |key: &str| format!("[data-testid='session'][data-key='{key}']");
    desk.click_css(&format!("{} [data-testid='session-pause']", session(first)))
        .await;
    // The paused session says so and offers to resume; the other goes on.
    desk.wait_css(&format!(
        "{} [data-testid='session-resume']",
        session(first)
    ))
    .await;
    let paused = desk.wait_css(&session(first)).await.text().await.unwrap();
    assert!(paused.contains("pause in force"), "{paused}");
    let other = desk.wait_css(&session(second)).await.text().await.unwrap();
    assert!(!other.contains("in force"), "{other}");
    desk.wait_css(&format!(
        "{} [data-testid='session-pause']",
        session(second)
    ))
    .await;
    desk.screenshot("sessions-paused-in-one-room").await;
    desk.finish().await;
}

/// A child process stopped when dropped, should the test fail before its end.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Claude Code transcript of `requests` (model, input, output, cache read), written as the
/// CLI writes them: one session of no onboarded agent.
fn with_usage_logs(home: &Path, requests: &[(&str, u64, u64, u64)]) {
    let dir = home.join(".claude/projects/-work-costs");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::new();
    for (n, (model, input, output, cache_read)) in requests.iter().enumerate() {
        let record = json!({
            "type": "assistant", "requestId": format!("req_{n}"), "sessionId": "c0575e55-0000-4000-8000-000000000001",
            "cwd": "/work/costs", "uuid": format!("u{n}"), "parentUuid": null, "isSidechain": false,
            "userType": "external", "version": "2.1.240", "timestamp": now_text(),
            "message": {"id": format!("msg_{n}"), "model": model, "role": "assistant", "type": "message",
                "content": [{"type": "text", "text": "done"}],
                "usage": {"input_tokens": input, "output_tokens": output,
                    "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": 0}}
        });
        text.push_str(&format!("{record}\n"));
    }
    std::fs::write(dir.join("c0575e55-0000-4000-8000-000000000001.jsonl"), text).unwrap();
}

/// The costs table's rows, as the window holds them.
async fn cost_rows(desk: &Desk) -> Vec<Value> {
    let rows = desk
        .script(
            "return [...document.querySelectorAll(\"[data-testid='costs-row']\")].map((row) => ({
                key: row.dataset.key, cost: Number(row.dataset.cost), unpriced: Number(row.dataset.unpriced),
                tokens: Number(row.dataset.tokens), mine: Number(row.dataset.mineCost),
                shared: Number(row.dataset.sharedCost)}));",
            Vec::new(),
        )
        .await;
    rows.as_array().unwrap().clone()
}

/// `files` Claude Code transcripts of `lines` requests each, under `HOME`.
fn with_many_logs(home: &Path, files: usize, lines: usize) -> u64 {
    let mut bytes = 0;
    let padding = "x".repeat(300);
    for file in 0..files {
        let dir = home.join(format!(".claude/projects/-work-big-{}", file % 40));
        std::fs::create_dir_all(&dir).unwrap();
        let session = format!("b16b0000-0000-4000-8000-{file:012}");
        let mut text = String::with_capacity(lines * 700);
        for line in 0..lines {
            let record = json!({
                "type": "assistant", "requestId": format!("req_{file}_{line}"), "sessionId": session,
                "cwd": "/work/big", "uuid": format!("u{file}-{line}"), "parentUuid": null,
                "isSidechain": false, "userType": "external", "version": "2.1.240",
                "timestamp": "2026-11-30T09:00:00.000Z",
                "message": {"id": format!("msg_{file}_{line}"), "model": "claude-sonnet-4-5-20250929",
                    "role": "assistant", "type": "message",
                    "content": [{"type": "text", "text": padding}],
                    "usage": {"input_tokens": 10, "output_tokens": 5,
                        "cache_read_input_tokens": 100, "cache_creation_input_tokens": 0}}
            });
            text.push_str(&format!("{record}\n"));
        }
        bytes += text.len() as u64;
        std::fs::write(dir.join(format!("{session}.jsonl")), text).unwrap();
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_scan_of_a_large_log_directory_shows_progress_and_leaves_the_app_responsive() {
    let mut bytes = 0;
    let desk = Desk::start("boards-scan", |home| {
        bytes = with_many_logs(home, 900, 300);
    })
    .await;
    eprintln!("{:.0} MB of logs", bytes as f64 / 1e6);
    desk.go("tasks").await;
    desk.wait_css("[data-testid='work-scan'] progress").await;
    let text = desk.text("work-scan").await;
    assert!(
        text.contains("Reading your agents' logs") && text.contains("of 900 files"),
        "{text}"
    );
    // How far the first pass is (0 to 1), while the banner shows.
    let progress = async || {
        desk.script(
            "const bar = document.querySelector(\"[data-testid='work-scan'] progress\"); return bar === null ? null : bar.value;",
            Vec::new(),
        )
        .await
        .as_f64()
    };
    let first = progress().await.unwrap_or(1.0);
    desk.screenshot("scanning").await;

    // Meanwhile the window answers: every view comes at once.
    let mut slowest = Duration::ZERO;
    for view in ["rooms", "costs", "sessions", "away", "tasks"] {
        let started = Instant::now();
        desk.go(view).await;
        slowest = slowest.max(started.elapsed());
    }
    eprintln!("slowest view change while scanning: {slowest:?}");
    assert!(
        slowest < Duration::from_secs(3),
        "the window was slow while the logs were read: {slowest:?}"
    );

    // The banner goes once every log is read; the figures are all there.
    let started = Instant::now();
    loop {
        match progress().await {
            None => break,
            Some(value) => assert!(
                value + 1e-9 >= first,
                "progress went back: {first} then {value}"
            ),
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the first scan did not end"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "first scan ended {:?} after the banner was seen",
        started.elapsed()
    );
    desk.go("costs").await;
    desk.click("costs-by-agent").await;
    // (The board shown before may still be refetching: its figures catch up.)
    appeared(
        &desk,
        &format!(
            "[data-testid='costs-row'][data-key='(local claude-code)'][data-tokens='{}']",
            900 * 300 * 115
        ),
    )
    .await;
    desk.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_on_the_board_are_what_roundtable_usage_says_with_a_teammates_beside() {
    let desk = Desk::start("boards-costs", |home| {
        with_usage_logs(
            home,
            &[
                ("claude-sonnet-4-5-20250929", 1200, 300, 40_000),
                ("claude-sonnet-4-5-20250929", 800, 150, 52_000),
                ("claude-opus-4-6", 400, 90, 10_000),
                ("homegrown-9", 5000, 700, 0),
            ],
        );
    })
    .await;

    // Sam, a teammate in a room with the person, shares what his agent spent.
    desk.cli(&["room", "create", "--title", "team"]);
    let invite: Value =
        serde_json::from_str(&desk.cli(&["--json", "invite", "create", "--room", "team"])).unwrap();
    let link = invite["link"].as_str().unwrap().to_owned();
    let hub = desk.hub_address();
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
    desk.cli(&["--profile", "sam", "agents", "register", "bot"]);
    desk.cli(&["--profile", "sam", "room", "invite", "team", "sam/bot"]);
    let profiles = desk.machine.roundtable_home().join("profiles");
    let bot = Core::open(Profile::load(&profiles, "sam.bot").unwrap())
        .await
        .unwrap();
    let sync = bot.start();
    bot.synced(PATIENCE).await.unwrap();
    let team = bot.room_id("team").await.unwrap();
    let session = json!({"agent": bot.me(), "framework": "claude-code", "session_id": "sam-s1"});
    let n = bot
        .send(
            &team,
            "usage",
            json!({"session": session, "model": "claude-opus-4-6", "input": 2000, "output": 500,
                "cache_write": 0, "cache_read": 30_000, "cost_usd": 0.225, "from": now_text(), "to": now_text()}),
        )
        .await
        .unwrap();
    bot.wait(n, PATIENCE).await.unwrap();
    sync.stop().await;

    desk.go("costs").await;
    desk.click("costs-by-agent").await;
    desk.wait_css("[data-testid='costs-row'][data-key='sam/bot']")
        .await;
    desk.wait_css("[data-testid='costs-row'][data-key='(local claude-code)']")
        .await;

    for by in ["agent", "model"] {
        desk.click(&format!("costs-by-{by}")).await;
        let expected: Value =
            serde_json::from_str(&desk.cli(&["--json", "usage", "--by", by])).unwrap();
        let expected = expected.as_array().unwrap();
        // The board may still be catching up with the last change: wait for the same keys.
        let started = Instant::now();
        let shown = loop {
            let shown = cost_rows(&desk).await;
            if shown.len() == expected.len() || started.elapsed() > PATIENCE {
                break shown;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            shown.len(),
            expected.len(),
            "by {by}: {shown:?} vs {expected:?}"
        );
        for figure in expected {
            let key = figure["group"][by].as_str().unwrap();
            let row = shown
                .iter()
                .find(|row| row["key"] == key)
                .unwrap_or_else(|| panic!("by {by}: no row {key} in {shown:?}"));
            let cost = figure["cost_usd"].as_f64().unwrap();
            assert!(
                (row["cost"].as_f64().unwrap() - cost).abs() < 1e-9,
                "by {by}, {key}: {row} vs {figure}"
            );
            assert_eq!(
                row["unpriced"].as_u64(),
                figure["unpriced_entries"].as_u64(),
                "by {by}, {key}"
            );
            let tokens: u64 = ["input", "output", "cache_write", "cache_read"]
                .iter()
                .map(|field| figure[field].as_u64().unwrap())
                .sum();
            assert_eq!(row["tokens"].as_u64(), Some(tokens), "by {by}, {key}");
        }
        desk.screenshot(&format!("costs-by-{by}")).await;
    }

    // Sam's figure is shared, beside the person's own, as Sam's machine reported it (in
    // fast mode, which this machine cannot see in the tokens, but within what they can
    // cost); the unpriced model says so.
    desk.click("costs-by-agent").await;
    let rows = cost_rows(&desk).await;
    let sam = rows.iter().find(|row| row["key"] == "sam/bot").unwrap();
    assert_eq!(
        (sam["mine"].as_f64(), sam["shared"].as_f64()),
        (Some(0.0), Some(0.225))
    );
    let local = rows
        .iter()
        .find(|row| row["key"] == "(local claude-code)")
        .unwrap();
    assert_eq!(local["shared"].as_f64(), Some(0.0));
    assert!(local["mine"].as_f64().unwrap() > 0.0, "{local}");
    let table = desk.text("costs-table").await;
    assert!(table.contains("unpriced (homegrown-9)"), "{table}");
    assert!(!table.contains("$0.00 "), "{table}");
    desk.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_you_were_away_lists_exactly_what_happened_while_the_app_was_closed() {
    // The team's hub runs on while the person's app is closed.
    let hub_data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&roundtable_bin(), hub_data.path(), &[]).await;
    let address = hub.addr.to_string();
    let machine = Machine::new();
    machine_cli(
        &machine,
        &[
            "--profile",
            "remote",
            "signup",
            "--hub",
            &address,
            "--handle",
            "dana",
            "--name",
            "Dana",
        ],
    );
    std::fs::create_dir_all(machine.roundtable_home()).unwrap();
    std::fs::write(
        machine.roundtable_home().join("desktop.toml"),
        "hub = \"remote\"\n",
    )
    .unwrap();
    for agent in ["writer", "reviewer"] {
        machine_cli(
            &machine,
            &["--profile", "remote", "agents", "register", agent],
        );
    }
    machine_cli(
        &machine,
        &[
            "--profile",
            "remote",
            "room",
            "create",
            "--title",
            "parser",
            "--member",
            "dana/writer",
            "--member",
            "dana/reviewer",
        ],
    );
    let profiles = machine.roundtable_home().join("profiles");
    let writer = Core::open(Profile::load(&profiles, "dana.writer").unwrap())
        .await
        .unwrap();
    let writer_sync = writer.start();
    writer.synced(PATIENCE).await.unwrap();
    let parser = writer.room_id("parser").await.unwrap();
    let reviewer = Core::open(Profile::load(&profiles, "dana.reviewer").unwrap())
        .await
        .unwrap();
    let reviewer_sync = reviewer.start();
    reviewer.synced(PATIENCE).await.unwrap();
    let send = async |kind: &str, body: Value| {
        let n = writer.send(&parser, kind, body).await.unwrap();
        writer.wait(n, PATIENCE).await.unwrap();
    };
    let session = json!({"agent": writer.me(), "framework": "claude-code", "session_id": "w1"});
    let tasks = |lexer: &str, parser: &str, docs: &str| {
        json!({"session": session, "source": "TodoWrite", "tasks": [
            {"title": "write the lexer", "status": lexer},
            {"title": "write the parser", "status": parser},
            {"title": "write the docs", "status": docs}]})
    };

    // Before: the writer works while the person watches.
    let n = writer
        .send_message(&parser, "starting on the lexer")
        .await
        .unwrap();
    writer.wait(n, PATIENCE).await.unwrap();
    send("tasks", tasks("completed", "in_progress", "pending")).await;

    let mut desk = Desk::start_on("boards-away", machine).await;
    desk.go("away").await;
    desk.screenshot("away-before").await;
    desk.click("away-mark-seen").await;
    desk.wait("away-empty").await;

    // Away: messages, task changes, a component and a question, while the app is closed.
    desk.reopen(async || {
        for text in ["lexer done", "@dana the parser needs a decision"] {
            let n = writer.send_message(&parser, text).await.unwrap();
            writer.wait(n, PATIENCE).await.unwrap();
        }
        let n = reviewer
            .send_message(&parser, "reviewing the lexer")
            .await
            .unwrap();
        reviewer.wait(n, PATIENCE).await.unwrap();
        send("tasks", tasks("completed", "completed", "in_progress")).await;
        // A second session finishes more than the digest lists by name.
        let steps: Vec<Value> = (1..=12)
            .map(|n| json!({"title": format!("zz step {n:02}"), "status": "completed"}))
            .collect();
        send(
            "tasks",
            json!({"session": {"agent": writer.me(), "framework": "claude-code", "session_id": "w2"},
                   "source": "TodoWrite", "tasks": steps}),
        )
        .await;
        send(
            "arch",
            json!({"define": [{"id": "lexer", "name": "Lexer", "paths": ["src/lexer/**"], "depends_on": []}]}),
        )
        .await;
        send("arch", json!({"component": "lexer", "status": "done"})).await;
        send(
            "ping",
            json!({"ping": "q1", "question": "keep the old syntax?", "options": ["yes", "no"]}),
        )
        .await;
    })
    .await;

    // Back: the app opens on it, and it lists exactly that.
    desk.wait("view-away").await;
    let room = desk
        .wait_css(&format!("[data-testid='away-room'][data-room='{parser}']"))
        .await;
    assert_eq!(
        room.attr("data-messages").await.unwrap().as_deref(),
        Some("3")
    );
    assert_eq!(
        room.attr("data-mentions").await.unwrap().as_deref(),
        Some("1")
    );
    let listed = |testid: &'static str| {
        let desk = &desk;
        async move {
            desk.script(
                "return [...document.querySelectorAll(`[data-testid='${arguments[0]}']`)].map((item) => item.textContent.trim().replace(/\\s+/g, ' '));",
                vec![json!(testid)],
            )
            .await
        }
    };
    // Thirteen done: the first eight by agent and title, the rest counted.
    let mut done = vec!["✔ write the parser — dana/writer".to_owned()];
    done.extend((1..=7).map(|n| format!("✔ zz step {n:02} — dana/writer")));
    assert_eq!(listed("away-task-done").await, json!(done));
    assert_eq!(
        listed("away-more").await,
        json!(["and 5 more done — on the tasks board"])
    );
    assert_eq!(
        listed("away-task-doing").await,
        json!(["◐ write the docs — dana/writer"])
    );
    assert_eq!(
        listed("away-component").await,
        json!(["Lexer: done — dana/writer"])
    );
    let pings = listed("away-ping").await;
    assert_eq!(pings.as_array().unwrap().len(), 1, "{pings}");
    assert!(
        pings[0].as_str().unwrap().contains("keep the old syntax?"),
        "{pings}"
    );
    assert_eq!(
        listed("away-room").await.as_array().unwrap().len(),
        1,
        "only the room where it happened"
    );
    // Who wrote them, the most first; each fact once on the card.
    assert_eq!(
        listed("away-messages").await,
        json!(["From dana/writer (2), dana/reviewer (1)"])
    );
    let text = desk.window_text().await;
    assert!(!text.contains("write the lexer"), "done before: {text}");
    assert_eq!(text.matches("3 messages (1 for you)").count(), 1, "{text}");
    desk.screenshot("away").await;

    // The CLI's digest of the same cache says the same.
    let digest: Value =
        serde_json::from_str(&desk.cli(&["--profile", "remote", "--json", "digest"])).unwrap();
    assert_eq!(digest[0]["messages"], 3, "{digest}");
    assert_eq!(
        digest[0]["writers"],
        json!([{"author": "dana/writer", "messages": 2}, {"author": "dana/reviewer", "messages": 1}]),
        "{digest}"
    );
    let completed = digest[0]["tasks_completed"].as_array().unwrap();
    assert_eq!(completed.len(), 13, "{digest}");
    assert_eq!(
        completed[0],
        json!({"agent": "dana/writer", "title": "write the parser"})
    );

    // The rest are a click away: the tasks board, narrowed to the room.
    desk.click("away-more").await;
    desk.wait("view-tasks").await;
    desk.wait("task-card").await;
    assert_eq!(
        desk.script(
            "return document.querySelector(\"[data-testid='tasks-filter-room']\").value;",
            vec![]
        )
        .await,
        json!(parser)
    );
    writer_sync.stop().await;
    reviewer_sync.stop().await;
    desk.finish().await;
    drop(hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_set_in_settings_pauses_the_agent_that_crosses_it_and_says_so() {
    let desk = Desk::start("budgets", |_| {}).await;
    desk.cli(&["agents", "register", "writer"]);

    // Settings: a wrong amount says what to write; a right one is listed at once.
    desk.go("settings").await;
    desk.wait("budget-form").await;
    desk.type_into("budget-name", "writer").await;
    desk.type_into("budget-usd", "nothing").await;
    desk.click("budget-set").await;
    desk.wait_for_text("the amount refused", |text| text.contains("in dollars"))
        .await;
    desk.type_into("budget-usd", "0.02").await;
    desk.click("budget-set").await;
    let budget = "[data-testid='budget'][data-key='agent:dana/writer:day']";
    let listed = desk.wait_css(budget).await.text().await.unwrap();
    assert!(
        listed.contains("dana/writer: $0.00 of $0.02 a day (0 %)"),
        "{listed}"
    );
    desk.screenshot("budgets-in-settings").await;

    // The writer works: 60 %, then over.
    let profiles = desk.machine.roundtable_home().join("profiles");
    let writer = Core::open(Profile::load(&profiles, "dana.writer").unwrap())
        .await
        .unwrap();
    let sync = writer.start();
    writer.synced(PATIENCE).await.unwrap();
    let home = writer.home_room().await.unwrap();
    let spend = async |n: u32, cost: f64| {
        let session = json!({"agent": writer.me(), "framework": "claude-code", "session_id": format!("w{n}")});
        let sent = writer
            .send(
                &home,
                "usage",
                json!({"session": session, "model": "claude-sonnet-4-5", "input": 1000, "output": 100,
                    "cache_write": 0, "cache_read": 0, "cost_usd": cost, "from": now_text(), "to": now_text()}),
            )
            .await
            .unwrap();
        writer.wait(sent, PATIENCE).await.unwrap();
    };
    spend(1, 0.012).await;
    desk.go("costs").await;
    desk.wait_css(&format!("{budget}[data-level='under'][data-spent='0.012']"))
        .await;
    spend(2, 0.006).await;
    // 90 %: the person is told, from a notification that opens the costs board.
    let warned = desk.notification();
    assert_eq!(warned.summary, "90% of a budget spent");
    assert!(
        warned.body.contains("of dana/writer's $0.02 a day spent"),
        "{}",
        warned.body
    );
    assert!(
        warned.actions.contains(&"default".to_owned()),
        "{:?}",
        warned.actions
    );
    spend(3, 0.004).await;
    let paused = desk.notification();
    assert_eq!(paused.summary, "dana/writer paused: budget reached");
    assert!(
        paused
            .body
            .starts_with("budget reached: dana/writer's $0.02 a day"),
        "{}",
        paused.body
    );

    // The costs board shows the budget reached and what was done; the agent is paused.
    let reached = desk
        .wait_css(&format!("{budget}[data-level='reached']"))
        .await
        .text()
        .await
        .unwrap();
    assert!(reached.contains("(110 %)"), "{reached}");
    // The pause is recorded once the hub took it, a moment after the spend that crossed
    // the budget: the list shows it when it is.
    desk.wait_for_element_text(
        "[data-testid='budget-alerts']",
        "the costs board lists the pause",
        |alerts| alerts.contains("paused by dana"),
    )
    .await;
    desk.screenshot("budgets-reached-on-costs").await;
    let refused = writer.send_message(&home, "more?").await.unwrap();
    let outcome = writer.wait(refused, PATIENCE).await.unwrap();
    assert!(
        format!("{outcome:?}")
            .contains("Reason, as dana wrote it (JSON-quoted): \\\"budget reached"),
        "{outcome:?}"
    );
    sync.stop().await;
    desk.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_on_one_component_are_marked_on_the_boards_and_a_claim_is_shown() {
    let desk = Desk::start("overlaps", |_| {}).await;
    desk.cli(&["agents", "register", "writer"]);
    desk.cli(&["agents", "register", "reviewer"]);
    desk.cli(&[
        "room",
        "create",
        "--title",
        "parser",
        "--member",
        "dana/writer",
        "--member",
        "dana/reviewer",
    ]);
    let profiles = desk.machine.roundtable_home().join("profiles");
    let open = async |name: &str| {
        let core = Core::open(Profile::load(&profiles, name).unwrap())
            .await
            .unwrap();
        let sync = core.start();
        core.synced(PATIENCE).await.unwrap();
        (core, sync)
    };
    let (writer, writer_sync) = open("dana.writer").await;
    let (reviewer, reviewer_sync) = open("dana.reviewer").await;
    let room = writer.room_id("parser").await.unwrap();
    let post = async |core: &Core, body: Value| {
        let sent = core.send(&room, "arch", body).await.unwrap();
        core.wait(sent, PATIENCE).await.unwrap();
    };
    post(&writer, json!({"define": [{"id": "parser", "name": "Parser", "paths": ["src/parser/**"], "depends_on": []}]})).await;
    // The writer's session, bound by its hook as Claude Code starts it.
    let mut hook = Command::new(roundtable_bin())
        .args(["hook", "claude", "--agent", "dana/writer"])
        .envs(desk.env())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut hook.stdin.take().unwrap(),
        json!({"hook_event_name": "SessionStart", "session_id": SESSION, "cwd": "/work/app",
            "transcript_path": "/nonexistent.jsonl", "source": "startup"})
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    assert!(hook.wait().unwrap().success());
    post(
        &writer,
        json!({"component": "parser", "status": "working", "files": ["src/parser/mod.rs"]}),
    )
    .await;
    post(
        &reviewer,
        json!({"component": "parser", "status": "working", "files": ["src/parser/lexer.rs"]}),
    )
    .await;

    desk.go("architecture").await;
    let marked = desk.wait("component-collision").await.text().await.unwrap();
    assert!(marked.contains("2 agents editing at once"), "{marked}");
    assert!(
        marked.contains("dana/writer") && marked.contains("dana/reviewer"),
        "{marked}"
    );
    desk.screenshot("architecture-two-agents-at-once").await;

    desk.go("sessions").await;
    let overlap = desk.wait("session-overlap").await.text().await.unwrap();
    assert!(
        overlap.contains("dana/reviewer is also editing `parser` (src/parser/lexer.rs"),
        "{overlap}"
    );
    desk.screenshot("sessions-overlap").await;

    reviewer
        .claim_component("parser", "parser", true, Some("rewriting the lexer"))
        .await
        .unwrap();
    desk.go("architecture").await;
    let claim = desk.wait("component-claim").await.text().await.unwrap();
    assert_eq!(claim, "claimed by dana/reviewer");
    desk.screenshot("architecture-claimed").await;
    writer_sync.stop().await;
    reviewer_sync.stop().await;
    desk.finish().await;
}
