//! The work view from agents' own logs: `roundtable scan` agrees with ccusage on real logs,
//! the watcher follows a transcript line by line (a torn line waits, a truncated file is
//! read again, a restart reads nothing twice) and publishes an onboarded agent's work once,
//! hostile logs are counted and skipped, and the digest says what happened while the
//! person was away.

use roundtable_core::log_events::TaskStatus;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use roundtable_core::Core;
use roundtable_core::cache::TaskFilter;
use roundtable_core::client::PATIENCE;
use roundtable_core::local_agents::Environment;
use roundtable_core::work::pricing::Pricing;
use roundtable_core::work::watch::{WatchOptions, WatchState};
use roundtable_e2e::{Home, Hub, json};
use roundtable_testkit::{roundtable_bin, until};
use serde_json::json as value;

/// The public agent logs the project tests against (CI has them beside the checkout).
/// Missing, a test over them fails with what to do, unless `ROUNDTABLE_SKIP_SHARED_LOGS=1`
/// says to skip it (then `None`).
fn real_logs() -> Option<PathBuf> {
    let path = std::env::var_os("ROUNDTABLE_AGENT_LOGS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/agent-logs")
        });
    if path.is_dir() {
        return Some(path);
    }
    if std::env::var_os("ROUNDTABLE_SKIP_SHARED_LOGS").is_some_and(|value| value == "1") {
        eprintln!(
            "skipping: the shared agent logs are not at {}",
            path.display()
        );
        return None;
    }
    panic!(
        "the shared agent logs are not at {}: put them there (or name them with \
         ROUNDTABLE_AGENT_LOGS), or set ROUNDTABLE_SKIP_SHARED_LOGS=1 to skip the tests over them",
        path.display()
    );
}

/// The ccusage the tests compare with (installed by `scripts/test.sh`).
fn ccusage() -> PathBuf {
    let path = std::env::var_os("ROUNDTABLE_TEST_CCUSAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/node/node_modules/.bin/ccusage")
        });
    assert!(
        path.exists(),
        "{} is missing: run ./scripts/test.sh once (it installs ccusage 20.0.24 from npm), or set ROUNDTABLE_TEST_CCUSAGE",
        path.display()
    );
    path
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn run(program: &Path, args: &[&str], home: &Path) -> serde_json::Value {
    let output = std::process::Command::new(program)
        .args(args)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{} {args:?}: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    json(&String::from_utf8_lossy(&output.stdout))
}

fn within(ours: f64, theirs: f64, what: &str) {
    let tolerance = theirs.abs() * 0.005;
    assert!(
        (ours - theirs).abs() <= tolerance,
        "{what}: ours {ours}, ccusage {theirs}"
    );
}

#[test]
fn scan_agrees_with_ccusage_on_the_real_logs() {
    let Some(real) = real_logs() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    copy_tree(
        &real.join("claude-code"),
        &home.path().join(".claude/projects"),
    );
    copy_tree(
        &real.join("codex/localpush"),
        &home.path().join(".codex/sessions/2026/02/23"),
    );
    let ours = run(&roundtable_bin(), &["scan", "--json"], home.path());
    let sum = |framework: &str, field: &str| -> f64 {
        ours["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["framework"] == framework)
            .map(|s| {
                if field == "cost_usd" {
                    s["cost_usd"].as_f64().unwrap()
                } else {
                    s["tokens"][field].as_f64().unwrap()
                }
            })
            .sum()
    };
    let claude = run(
        &ccusage(),
        &["claude", "session", "--offline", "--json"],
        home.path(),
    );
    let totals = &claude["totals"];
    within(
        sum("claude-code", "input"),
        totals["inputTokens"].as_f64().unwrap(),
        "claude input",
    );
    within(
        sum("claude-code", "output"),
        totals["outputTokens"].as_f64().unwrap(),
        "claude output",
    );
    within(
        sum("claude-code", "cache_write"),
        totals["cacheCreationTokens"].as_f64().unwrap(),
        "claude cache writes",
    );
    within(
        sum("claude-code", "cache_read"),
        totals["cacheReadTokens"].as_f64().unwrap(),
        "claude cache reads",
    );
    within(
        sum("claude-code", "cost_usd"),
        totals["totalCost"].as_f64().unwrap(),
        "claude cost",
    );

    let codex = run(
        &ccusage(),
        &["codex", "session", "--offline", "--json"],
        home.path(),
    );
    for session in codex["sessions"].as_array().unwrap() {
        let file = session["sessionFile"].as_str().unwrap();
        let ours = ours["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| {
                s["framework"] == "codex" && file.ends_with(s["session_id"].as_str().unwrap())
            })
            .unwrap_or_else(|| panic!("no session of ours for {file}"));
        let tokens = &ours["tokens"];
        let total = ["input", "output", "cache_write", "cache_read"]
            .iter()
            .map(|field| tokens[field].as_u64().unwrap())
            .sum::<u64>();
        assert_eq!(total, session["totalTokens"].as_u64().unwrap(), "{file}");
        assert_eq!(tokens["input"], session["inputTokens"], "{file}");
        within(
            ours["cost_usd"].as_f64().unwrap(),
            session["costUSD"].as_f64().unwrap(),
            file,
        );
    }
    // The session whose re-emitted token counts inflate a naive sum.
    let busy = ours["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == "019c8a4d-8f45-7010-8b5d-7fad920aa6f9")
        .unwrap();
    let tokens = &busy["tokens"];
    assert_eq!(
        tokens["input"].as_u64().unwrap()
            + tokens["output"].as_u64().unwrap()
            + tokens["cache_read"].as_u64().unwrap(),
        1_766_028
    );
}

// Symbolic links: Windows makes them for administrators and developer mode only.
#[cfg(unix)]
#[test]
fn hostile_logs_are_counted_and_skipped_never_a_crash() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join(".claude/projects/-tmp-x");
    std::fs::create_dir_all(&project).unwrap();
    let mut transcript = std::fs::File::create(project.join("s1.jsonl")).unwrap();
    let good = value!({"type": "assistant", "sessionId": "s1", "cwd": "/tmp/x",
        "timestamp": "2026-11-30T09:00:00.000Z", "requestId": "r1",
        "message": {"id": "m1", "model": "claude-sonnet-4-5", "role": "assistant", "content": [],
                    "usage": {"input_tokens": 10, "output_tokens": 5}}});
    writeln!(transcript, "{good}").unwrap();
    writeln!(transcript, "this is not json").unwrap();
    transcript
        .write_all(b"{\"type\": \"user\", \"bad\": \"\xff\xfe\"}\n")
        .unwrap();
    writeln!(transcript, "[1, 2, 3]").unwrap();
    writeln!(transcript, "{}{}", "[".repeat(100_000), "]".repeat(100_000)).unwrap();
    writeln!(
        transcript,
        "{{\"type\": \"user\", \"pad\": \"{}\"}}",
        "x".repeat(10 * 1024 * 1024)
    )
    .unwrap();
    writeln!(transcript, "{{\"type\": \"assistant\", \"message\": 5}}").unwrap();
    // The last line is still being written.
    write!(transcript, "{{\"type\": \"assis").unwrap();
    drop(transcript);
    // A link out of the logs' directory.
    std::fs::write(home.path().join("elsewhere.jsonl"), format!("{good}\n")).unwrap();
    std::os::unix::fs::symlink(
        home.path().join("elsewhere.jsonl"),
        project.join("link.jsonl"),
    )
    .unwrap();
    let output = std::process::Command::new(roundtable_bin())
        .args(["scan", "--json"])
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report = json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(report["skipped_lines"], 4, "{report}");
    assert_eq!(report["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(report["sessions"][0]["tokens"]["input"], 10);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("skipped 1 links"), "{stderr}");
}

/// The session of [`Transcript`].
const SESSION: &str = "7f1c5e2a-0000-4000-8000-00000000000a";

/// A Claude Code transcript, written line by line as the CLI does.
struct Transcript {
    path: PathBuf,
    lines: usize,
}

impl Transcript {
    fn new(home: &Path) -> Transcript {
        let dir = home.join(".claude/projects/-work-parser");
        std::fs::create_dir_all(&dir).unwrap();
        Transcript {
            path: dir.join(format!("{SESSION}.jsonl")),
            lines: 0,
        }
    }

    fn record(&mut self, record: serde_json::Value) -> String {
        self.lines += 1;
        let mut record = record;
        record["sessionId"] = value!(SESSION);
        record["cwd"] = value!("/work/parser");
        record["uuid"] = value!(format!("u{}", self.lines));
        record["timestamp"] = value!(format!("2026-11-30T09:{:02}:00.000Z", self.lines % 60));
        format!("{record}\n")
    }

    fn append(&mut self, text: &str) {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    fn todo_write(&mut self, todos: serde_json::Value) -> String {
        let call = format!("toolu_{}", self.lines);
        let mut text = self.record(value!({
            "type": "assistant", "requestId": format!("req_{}", self.lines),
            "message": {"id": format!("msg_{}", self.lines), "model": "claude-sonnet-4-5-20250929",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "TodoWrite", "input": {"todos": todos}}],
                "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 1000}}
        }));
        text.push_str(&self.record(value!({
            "type": "user",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                "content": "Todos have been modified successfully."}]},
            "toolUseResult": {"oldTodos": [], "newTodos": todos}
        })));
        text
    }
}

fn todos(parse: &str, test: &str) -> serde_json::Value {
    value!([
        {"content": "write the parser", "status": parse, "activeForm": "Writing the parser"},
        {"content": "test the parser", "status": test, "activeForm": "Testing the parser"},
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_follows_a_transcript_and_publishes_an_agents_work_once() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    let user_home = tempfile::tempdir().unwrap();
    home.signup(&hub, "dana").await;
    let onboarded = home
        .command("dana", &["agents", "onboard", "claude", "--name", "writer"])
        .env("HOME", user_home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .await
        .unwrap();
    assert!(onboarded.status.success(), "{onboarded:?}");
    let mut transcript = Transcript::new(user_home.path());
    // The session starts: the writer's hook claims it, as Claude Code runs it.
    let mut hook = home
        .command(
            "dana",
            &["hook", "claude", "--agent", "dana/writer", "SessionStart"],
        )
        .env("HOME", user_home.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = value!({"session_id": SESSION, "transcript_path": transcript.path,
        "cwd": "/work/parser", "hook_event_name": "SessionStart", "source": "startup"});
    tokio::io::AsyncWriteExt::write_all(hook.stdin.as_mut().unwrap(), start.to_string().as_bytes())
        .await
        .unwrap();
    drop(hook.stdin.take());
    assert!(hook.wait_with_output().await.unwrap().status.success());
    let first = transcript.todo_write(todos("in_progress", "pending"));
    transcript.append(&first);

    let dana = Core::open(home.profile("dana")).await.unwrap();
    let sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    let options = WatchOptions {
        env: Environment {
            home: user_home.path().to_path_buf(),
            ..Environment::default()
        },
        profiles: home.profiles(),
        pricing: Pricing::built_in(),
        share_rooms: Vec::new(),
    };
    let watcher = dana.watch_logs(options.clone());
    let mut state = watcher.state.clone();
    tokio::time::timeout(
        PATIENCE,
        state.wait_for(|state| matches!(state, WatchState::Watching { .. })),
    )
    .await
    .unwrap()
    .unwrap();
    let local_tasks = async |dana: &Core| {
        dana.read(|view| view.local_sessions())
            .await
            .unwrap()
            .first()
            .map(|session| {
                session
                    .tasks
                    .iter()
                    .map(|task| format!("{}:{:?}", task.title, task.status))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    // What was there before it started, published to the agent's home room.
    let shared_lists = async |dana: &Core| {
        dana.read(|view| view.task_sessions(&TaskFilter::default()))
            .await
            .unwrap()
    };
    until(
        "the first list reached the room",
        Duration::from_secs(20),
        async || {
            shared_lists(&dana).await.first().is_some_and(|session| {
                session.agent_handle.as_deref() == Some("dana/writer")
                    && session.tasks[0].status == TaskStatus::InProgress
            })
        },
    )
    .await;

    // A line appended is read within moments; its list is published.
    let completed = transcript.todo_write(todos("completed", "in_progress"));
    let appended = Instant::now();
    transcript.append(&completed);
    until(
        "the appended list was read",
        Duration::from_secs(20),
        async || {
            local_tasks(&dana).await.first().map(String::as_str)
                == Some("write the parser:Completed")
        },
    )
    .await;
    eprintln!("appended line → cache: {:?}", appended.elapsed());
    until(
        "the appended list reached the room",
        Duration::from_secs(20),
        async || shared_lists(&dana).await[0].tasks[0].status == TaskStatus::Completed,
    )
    .await;

    // A torn line waits for its end.
    let torn = transcript.todo_write(todos("completed", "completed"));
    let (head, tail) = torn.split_at(torn.len() / 3);
    transcript.append(head);
    // The watcher looked at it (it keeps how far it looked, past the lines it read).
    let looked_to = std::fs::metadata(&transcript.path).unwrap().len();
    let path = transcript.path.display().to_string();
    until(
        "the watcher looked at the torn line",
        Duration::from_secs(20),
        async || {
            let path = path.clone();
            dana.read(move |view| view.log_file(&path))
                .await
                .unwrap()
                .is_some_and(|file| file.size == looked_to)
        },
    )
    .await;
    assert_eq!(
        local_tasks(&dana).await.get(1).map(String::as_str),
        Some("test the parser:InProgress"),
        "half a line is not read"
    );
    transcript.append(tail);
    until(
        "the completed line was read",
        Duration::from_secs(20),
        async || {
            local_tasks(&dana).await.get(1).map(String::as_str) == Some("test the parser:Completed")
        },
    )
    .await;

    // A restart reads nothing twice: no new publication (once what was published is in).
    until(
        "the last list reached the room",
        Duration::from_secs(20),
        async || {
            shared_lists(&dana).await[0]
                .tasks
                .get(1)
                .is_some_and(|task| task.status == TaskStatus::Completed)
                && dana
                    .read(|view| view.outbox_pending())
                    .await
                    .unwrap()
                    .is_empty()
        },
    )
    .await;
    watcher.stop().await;
    let outbox_before = dana.read(|view| view.outbox_pending()).await.unwrap().len();
    let events_before = dana.read(|view| view.event_count()).await.unwrap();
    let watcher = dana.watch_logs(options.clone());
    let mut state = watcher.state.clone();
    tokio::time::timeout(
        PATIENCE,
        state.wait_for(|state| matches!(state, WatchState::Watching { .. })),
    )
    .await
    .unwrap()
    .unwrap();
    // Watching: its first pass over every file is done, and what it would publish is queued
    // in the same transaction as each read.
    assert_eq!(
        dana.read(|view| view.outbox_pending()).await.unwrap().len(),
        outbox_before
    );
    assert_eq!(
        dana.read(|view| view.event_count()).await.unwrap(),
        events_before,
        "nothing was published again"
    );

    // A file cut short (rewritten) is read again from its start.
    std::fs::write(&transcript.path, "").unwrap();
    let rewritten = transcript.todo_write(value!([
        {"content": "start over", "status": "pending", "activeForm": "Starting over"}
    ]));
    transcript.append(&rewritten);
    until(
        "the rewritten file was read again",
        Duration::from_secs(20),
        async || local_tasks(&dana).await.first().map(String::as_str) == Some("start over:Pending"),
    )
    .await;
    watcher.stop().await;
    sync.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_digest_says_exactly_what_happened_while_the_person_was_away() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    home.ok("dana", &["agents", "register", "writer"]).await;
    home.ok(
        "dana",
        &[
            "room",
            "create",
            "--title",
            "parser",
            "--member",
            "dana/writer",
        ],
    )
    .await;
    home.ok("dana", &["room", "create", "--title", "quiet"])
        .await;
    // Dana was here: she read the parser room up to her own message.
    home.ok("dana", &["send", "parser", "back after lunch"])
        .await;
    let dana = Core::open(home.profile("dana")).await.unwrap();
    let sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    let parser = dana.room_id("parser").await.unwrap();
    let head = dana
        .rooms()
        .await
        .unwrap()
        .iter()
        .find(|r| r.id == parser)
        .unwrap()
        .head;
    dana.mark_read(&parser, head).await.unwrap();
    assert!(dana.digest().await.unwrap().is_empty(), "nothing new yet");

    // Away: the writer works.
    let writer = Core::open(home.profile("dana.writer")).await.unwrap();
    let writer_sync = writer.start();
    writer.synced(PATIENCE).await.unwrap();
    for text in ["lexer done", "@dana the parser needs a decision"] {
        let n = writer.send_message(&parser, text).await.unwrap();
        writer.wait(n, PATIENCE).await.unwrap();
    }
    let session = value!({"agent": writer.me(), "framework": "claude-code", "session_id": "s1"});
    let sends = [
        (
            "tasks",
            value!({"session": session, "source": "TodoWrite", "tasks": [
            {"title": "write the lexer", "status": "completed"},
            {"title": "write the parser", "status": "in_progress"},
            {"title": "write the docs", "status": "pending"}]}),
        ),
        (
            "arch",
            value!({"define": [{"id": "lexer", "name": "Lexer", "paths": ["src/lexer/**"], "depends_on": []}]}),
        ),
        ("arch", value!({"component": "lexer", "status": "done"})),
        (
            "usage",
            value!({"session": session, "model": "claude-sonnet-4-5", "input": 1000,
            "output": 100, "cache_write": 0, "cache_read": 0, "cost_usd": 0.0045,
            "from": roundtable_protocol::ts::format_millis(roundtable_core::now_ms()),
            "to": roundtable_protocol::ts::format_millis(roundtable_core::now_ms())}),
        ),
        (
            "ping",
            value!({"ping": "q1", "question": "keep the old syntax?", "options": ["yes", "no"], "to": [dana.me()]}),
        ),
    ];
    for (kind, body) in sends {
        let n = writer.send(&parser, kind, body).await.unwrap();
        writer.wait(n, PATIENCE).await.unwrap();
    }
    writer_sync.stop().await;
    sync.stop().await;
    drop(dana);

    // Back: the digest lists exactly that, and only for the room where it happened.
    let digest = json(&home.ok("dana", &["--json", "digest"]).await);
    let rooms = digest.as_array().unwrap();
    assert_eq!(rooms.len(), 1, "{digest}");
    let room = &rooms[0];
    assert_eq!(room["title"], "parser");
    assert_eq!(
        (room["messages"].as_u64(), room["mentions"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(
        room["tasks_completed"],
        value!([{"agent": "dana/writer", "title": "write the lexer"}])
    );
    assert_eq!(
        room["tasks_in_progress"],
        value!([{"agent": "dana/writer", "title": "write the parser"}])
    );
    assert_eq!(room["components"][0]["id"], "lexer");
    assert_eq!(room["components"][0]["status"], "done");
    assert_eq!(room["components"][0]["by"], value!(["dana/writer"]));
    assert_eq!(room["pings_waiting"][0]["question"], "keep the old syntax?");
    assert!((room["cost_usd"].as_f64().unwrap() - 0.0045).abs() < 1e-9);
    // The same cache gives the same digest.
    assert_eq!(json(&home.ok("dana", &["--json", "digest"]).await), digest);
    // The other views show the same work.
    let tasks = json(&home.ok("dana", &["--json", "tasks"]).await);
    assert_eq!(tasks["lanes"][0]["tasks"][0]["title"], "write the lexer");
    let boards = json(&home.ok("dana", &["--json", "arch"]).await);
    assert_eq!(boards[0]["components"][0]["status"], "done");
    let by_agent = json(&home.ok("dana", &["--json", "usage", "--by", "agent"]).await);
    assert_eq!(by_agent[0]["group"]["agent"], "dana/writer");
    assert!((by_agent[0]["cost_usd"].as_f64().unwrap() - 0.0045).abs() < 1e-9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earlier_sessions_stay_the_persons_own_after_onboarding_with_their_lists_and_costs() {
    let Some(real) = real_logs() else {
        return;
    };
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    copy_tree(
        &real.join("claude-code"),
        &home.user_home().join(".claude/projects"),
    );
    let scan = json(&home.ok("dana", &["--json", "scan"]).await);
    let sessions = scan["sessions"].as_array().unwrap();
    let scanned: f64 = sessions
        .iter()
        .map(|session| session["cost_usd"].as_f64().unwrap())
        .sum();
    let mut lists: Vec<usize> = sessions
        .iter()
        .map(|session| session["tasks"].as_array().unwrap().len())
        .filter(|tasks| *tasks > 0)
        .collect();
    lists.sort();
    assert!(scanned > 0.0 && !lists.is_empty(), "{scan}");

    // Onboarding Claude Code for the whole user claims none of them: they stay the person's.
    home.ok("dana", &["agents", "onboard", "claude", "--name", "writer"])
        .await;
    let by_agent = json(&home.ok("dana", &["--json", "usage", "--by", "agent"]).await);
    let rows = by_agent.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{by_agent}");
    assert_eq!(rows[0]["group"]["agent"], "(local claude-code)");
    let used = rows[0]["cost_usd"].as_f64().unwrap();
    assert!(
        (used - scanned).abs() < 1e-9,
        "usage {used}, scan {scanned}"
    );
    let board = json(&home.ok("dana", &["--json", "tasks"]).await);
    let mut listed: Vec<usize> = board["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lane| lane["tasks"].as_array().unwrap().len())
        .filter(|tasks| *tasks > 0)
        .collect();
    listed.sort();
    assert_eq!(listed, lists, "the same lists as scan: {board}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_claimed_after_its_lines_were_read_is_charged_whole_to_its_agent_and_once() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    home.ok("dana", &["agents", "onboard", "claude", "--name", "writer"])
        .await;
    home.ok("dana", &["agents", "register", "other"]).await;
    let mut transcript = Transcript::new(&home.user_home());
    let first = transcript.todo_write(todos("in_progress", "pending"));
    transcript.append(&first);
    // Read before anyone claimed it: the person's own.
    let before = json(&home.ok("dana", &["--json", "usage", "--by", "agent"]).await);
    assert_eq!(
        before[0]["group"]["agent"], "(local claude-code)",
        "{before}"
    );
    let cost = before[0]["cost_usd"].as_f64().unwrap();

    // The writer's hook claims it late (a session that started before its hook could say).
    let claim = |agent: &'static str| {
        let home = &home;
        async move {
            let mut hook = home
                .command("dana", &["hook", "claude", "--agent", agent, "Stop"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let input = value!({"session_id": SESSION, "hook_event_name": "SessionStart",
                "cwd": "/work/parser", "source": "resume"});
            tokio::io::AsyncWriteExt::write_all(
                hook.stdin.as_mut().unwrap(),
                input.to_string().as_bytes(),
            )
            .await
            .unwrap();
            drop(hook.stdin.take());
            assert!(hook.wait().await.unwrap().success());
        }
    };
    claim("dana/writer").await;
    // Another agent's hook later on changes nothing: the first claim stands.
    claim("dana/other").await;
    let second = transcript.todo_write(todos("completed", "in_progress"));
    transcript.append(&second);

    let dana = Core::open(home.profile("dana")).await.unwrap();
    let sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    let watcher = dana.watch_logs(WatchOptions {
        env: Environment {
            home: home.user_home(),
            ..Environment::default()
        },
        profiles: home.profiles(),
        pricing: Pricing::built_in(),
        share_rooms: Vec::new(),
    });
    let mut state = watcher.state.clone();
    tokio::time::timeout(
        PATIENCE,
        state.wait_for(|state| matches!(state, WatchState::Watching { .. })),
    )
    .await
    .unwrap()
    .unwrap();
    let scanned: f64 = json(&home.ok("dana", &["--json", "scan"]).await)["sessions"][0]["cost_usd"]
        .as_f64()
        .unwrap();
    assert!(scanned > cost);
    // Its whole usage reaches the writer's room, once, and the writer alone is charged.
    until(
        "the writer's room holds the session's cost",
        Duration::from_secs(20),
        async || {
            let usage = dana
                .read(|view| {
                    view.usage(&roundtable_core::cache::UsageQuery {
                        group_by: vec![roundtable_core::cache::UsageKey::Agent],
                        ..Default::default()
                    })
                })
                .await
                .unwrap();
            usage.len() == 1 && (usage[0].cost_usd - scanned).abs() < 1e-9
        },
    )
    .await;
    let by_agent = json(&home.ok("dana", &["--json", "usage", "--by", "agent"]).await);
    let rows = by_agent.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{by_agent}");
    assert_eq!(rows[0]["group"]["agent"], "dana/writer");
    assert!((rows[0]["cost_usd"].as_f64().unwrap() - scanned).abs() < 1e-9);
    watcher.stop().await;
    sync.stop().await;
}
