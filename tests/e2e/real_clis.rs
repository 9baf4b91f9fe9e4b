//! The real agent CLIs of today — Claude Code, Codex and Gemini CLI from npm at pinned
//! versions (the test command installs them into `target/agent-clis`) — driven by a scripted
//! model server of ours on loopback, in throwaway HOMEs, with Roundtable's onboarding, hooks,
//! MCP server, runner and log readers: what a person who onboards them sees.
//!
//! The model is the only stand-in. Each test's script plays it: it reads what the CLI sent
//! (the prompt, what hooks added, tool results) and answers with text or tool calls, with
//! token counts that `roundtable scan` must then find in the CLI's own logs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use roundtable_e2e::{Home, Hub, json, room_messages, room_texts};
use roundtable_testkit::agent_clis::{self, CliCommand, CliOutput, CliSetup, real_clis_present};
use roundtable_testkit::eventually;
use roundtable_testkit::model_server::{Exchange, ModelServer, Reply, Request, Usage, script};
use serde_json::Value;

mod acp;

/// The longest one CLI run may take before the test fails (they take seconds).
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// A person's machine: Roundtable's home, a HOME for the agent CLIs, a project, and a
/// model server the CLIs talk to.
struct Desk {
    home: Home,
    work: PathBuf,
}

impl Desk {
    fn new() -> Desk {
        let home = Home::default();
        let work = home.dir.path().join("project");
        std::fs::create_dir_all(&work).unwrap();
        Desk { home, work }
    }

    fn user_home(&self) -> PathBuf {
        self.home.user_home()
    }

    fn setup(&self, prompt: &str) -> CliSetup {
        CliSetup::new(self.user_home(), &self.work, prompt)
    }

    /// A `roundtable` command as the person runs it on this machine.
    async fn ok(&self, args: &[&str]) -> String {
        self.home.ok("dana", args).await
    }

    /// Onboards `cli` as `dana/NAME`, makes a room `room` with it, and mentions it there:
    /// the start of a journey with a real CLI.
    async fn onboard_and_mention(&self, cli: &str, name: &str, room: &str, text: &str) {
        self.ok(&["agents", "onboard", cli, "--name", name]).await;
        let member = format!("dana/{name}");
        self.ok(&["room", "create", "--title", room, "--member", &member])
            .await;
        self.ok(&["send", room, text]).await;
    }

    /// A file of the CLIs' HOME.
    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.user_home().join(relative)).unwrap()
    }
}

/// Runs a CLI to its end; it must succeed.
async fn run(command: &CliCommand) -> CliOutput {
    let output = command.run(RUN_LIMIT).await.unwrap();
    assert!(
        !output.timed_out && output.code == Some(0),
        "{} failed ({:?}, {:.1?}): {}\n{}",
        command.program.display(),
        output.code,
        output.elapsed,
        output.stdout,
        output.stderr
    );
    output
}

/// Every file under `dir` whose name ends with `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for path in entries.flatten().map(|entry| entry.path()) {
        if path.is_dir() {
            found.extend(files_ending(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// Usage with every kind of token, distinct per request.
fn usage(n: u64) -> Usage {
    Usage {
        input: 1000 * n + 7,
        output: 100 * n + 3,
        cache_read: 5000 * n,
        cache_write_5m: 300 * n,
        cache_write_1h: 0,
        extra: Value::Null,
    }
}

/// The tokens the server sent in `exchanges`, as `scanned` reports them: (input, output,
/// cache write, cache read).
fn sent_tokens(exchanges: &[&Exchange]) -> [u64; 4] {
    exchanges.iter().fold([0; 4], |sum, exchange| {
        let usage = exchange.usage().unwrap();
        [
            sum[0] + usage.input,
            sum[1] + usage.output,
            sum[2] + usage.cache_write_5m + usage.cache_write_1h,
            sum[3] + usage.cache_read,
        ]
    })
}

/// Sums of one session in `roundtable scan --json`: (input, output, cache write, cache read,
/// cost).
fn scanned(scan: &Value, framework: &str) -> Vec<(String, [u64; 4], Option<f64>)> {
    scan["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|session| session["framework"] == framework)
        .map(|session| {
            let tokens = &session["tokens"];
            let count = |key: &str| tokens[key].as_u64().unwrap();
            (
                session["session_id"].as_str().unwrap().to_owned(),
                [
                    count("input"),
                    count("output"),
                    count("cache_write"),
                    count("cache_read"),
                ],
                session["cost_usd"].as_f64(),
            )
        })
        .collect()
}

/// The one session of `framework` in `roundtable scan --json`.
fn scanned_session<'a>(scan: &'a Value, framework: &str) -> &'a Value {
    scan["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|session| session["framework"] == framework)
        .unwrap_or_else(|| panic!("no {framework} session: {scan}"))
}

/// The titles of a scanned session's task list.
fn task_titles(session: &Value) -> Vec<&str> {
    session["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| task["title"].as_str().unwrap())
        .collect()
}

/// Whether a scanned session touched `file`.
fn touched(session: &Value, file: &Path) -> bool {
    session["files"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!(file.display().to_string()))
}

/// Whether `agent` said `text` in `room`.
async fn said(
    hub: &Hub,
    agent: &roundtable_core::profile::Profile,
    room: &str,
    text: &str,
) -> bool {
    room_messages(&hub.ws_url(), agent.token.expose(), room)
        .await
        .contains(&(agent.principal.clone(), text.to_owned()))
}

/// Answers, from the person's CLI, the open ping whose question holds `about`.
async fn answer_ping_about(desk: &Desk, about: &str, answer: &str) {
    let ping = eventually("the permission ping", Duration::from_secs(60), async || {
        let pings = json(&desk.ok(&["--json", "pings"]).await);
        pings.as_array()?.iter().find_map(|ping| {
            let question = ping["question"].as_str()?;
            (ping["state"] == "open" && question.contains(about))
                .then(|| ping["ping"].as_str().unwrap().to_owned())
        })
    })
    .await;
    desk.ok(&["answer", &ping, answer]).await;
}

/// With no terminal: `roundtable run` answers `mention` in `room` with a turn of the CLI
/// at `executable` (run with `env`), its reply, `expected`, posted in the room as the agent.
async fn runner_answers(
    (desk, hub): (&Desk, &Hub),
    agent: &roundtable_core::profile::Profile,
    (executable, env): (&Path, Vec<(String, String)>),
    (room, mention, expected): (&str, &str, &str),
) {
    let handle = agent.handle.clone();
    let mut runner = desk
        .home
        .command(
            "dana",
            &[
                "run",
                "--agent",
                &handle,
                "--executable",
                &executable.display().to_string(),
            ],
        )
        .current_dir(&desk.work)
        .envs(env)
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    desk.ok(&["send", room, mention]).await;
    eventually(
        "the runner's reply in the room",
        Duration::from_secs(120),
        async || said(hub, agent, room, expected).await.then_some(()),
    )
    .await;
    let _ = runner.start_kill();
    let _ = runner.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_reads_exactly_what_each_cli_was_sent_and_prices_it_as_claude_code_does() {
    if !real_clis_present() {
        return;
    }
    let desk = Desk::new();
    // Two model requests per run: a tool call, then the answer. Claude's carry what it bills
    // beyond tokens: fast mode, the US region, web searches, an advisor on another model.
    let server = ModelServer::start(script(|request: &Request| {
        let n = request.messages.len() as u64;
        let extra = |usage: Usage| match request.api {
            roundtable_testkit::model_server::Api::Anthropic => Usage {
                extra: serde_json::json!({
                    "speed": "fast", "inference_geo": "us",
                    "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 0},
                    "iterations": [
                        {"type": "message", "input_tokens": usage.input, "output_tokens": usage.output},
                        {"type": "advisor_message", "model": "claude-sonnet-5-5",
                         "input_tokens": 400, "output_tokens": 40, "cache_read_input_tokens": 0}
                    ]
                }),
                ..usage
            },
            _ => usage,
        };
        if request.ends_with_tool_result() {
            Reply::text("done").with_usage(extra(usage(n + 1)))
        } else {
            let file = "note.txt";
            let call = match request.api {
                roundtable_testkit::model_server::Api::Anthropic => Reply::call(
                    "Bash",
                    serde_json::json!({"command": format!("echo hi > {file}"), "description": "note"}),
                ),
                roundtable_testkit::model_server::Api::OpenAiResponses => {
                    Reply::call("exec_command", serde_json::json!({"cmd": format!("echo hi > {file}")}))
                }
                roundtable_testkit::model_server::Api::Gemini => Reply::call(
                    "write_file",
                    serde_json::json!({"file_path": file, "content": "hi\n"}),
                ),
            };
            call.with_usage(extra(usage(n)))
        }
    }))
    .await;
    let base = server.base_url();
    run(&agent_clis::claude(&base, &desk.setup("note it")).unwrap()).await;
    run(&agent_clis::codex(&base, &desk.setup("note it")).unwrap()).await;
    run(&agent_clis::gemini(&base, &desk.setup("note it")).unwrap()).await;
    let sent = server.model_calls();
    assert_eq!(sent.len(), 6, "two model requests per CLI");

    let scan = json(&desk.ok(&["--json", "scan"]).await);
    for (framework, api) in [
        (
            "claude-code",
            roundtable_testkit::model_server::Api::Anthropic,
        ),
        (
            "codex",
            roundtable_testkit::model_server::Api::OpenAiResponses,
        ),
        ("gemini", roundtable_testkit::model_server::Api::Gemini),
    ] {
        let of_api: Vec<&Exchange> = sent
            .iter()
            .filter(|e| e.request.as_ref().unwrap().api == api)
            .collect();
        let mut expected = sent_tokens(&of_api);
        if api == roundtable_testkit::model_server::Api::Anthropic {
            // Each request's advisor, on its own model.
            expected[0] += 400 * of_api.len() as u64;
            expected[1] += 40 * of_api.len() as u64;
        }
        let sessions = scanned(&scan, framework);
        assert_eq!(sessions.len(), 1, "{framework}: {scan}");
        assert_eq!(sessions[0].1, expected, "{framework}: what the server sent");
        assert!(sessions[0].2.is_some(), "{framework}: priced");
    }

    // Claude Code writes what it bills into the transcript (`cost-state`): the same figure.
    let transcript = &files_ending(&desk.user_home().join(".claude/projects"), ".jsonl")[0];
    let billed = std::fs::read_to_string(transcript)
        .unwrap()
        .lines()
        .rev()
        .map(json)
        .find(|record| record["type"] == "cost-state")
        .expect("Claude Code records its cost")["totalCostUSD"]
        .as_f64()
        .unwrap();
    let ours = scanned(&scan, "claude-code")[0].2.unwrap();
    assert!(
        (ours - billed).abs() < 1e-9,
        "Roundtable prices the session at {ours}, Claude Code bills {billed}"
    );
}

/// How long the writer's session listens for messages after a turn in these tests.
const LISTEN_S: &str = "15";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_on_claude_code_and_a_reviewer_on_codex_prompt_each_other_with_no_one_between() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    // The writer is Claude Code; the reviewer is Codex with no terminal (`roundtable run`).
    let server = ModelServer::start(script(|request: &Request| {
        let last = request.last_input().unwrap_or_default().to_owned();
        if request.model.starts_with("claude") {
            // The writer: a room with the reviewer, a request for a review, then it waits;
            // woken by the review, it finishes.
            if last.contains("looks good") {
                Reply::text("Thanks, merging the lexer.")
            } else if !request.called("mcp__roundtable__create_room") {
                Reply::call(
                    "mcp__roundtable__create_room",
                    serde_json::json!({"title": "lexer", "members": ["dana/reviewer"]}),
                )
            } else if !request.called("mcp__roundtable__send_message") {
                Reply::call(
                    "mcp__roundtable__send_message",
                    serde_json::json!({"room": "lexer", "text": "@dana/reviewer please review the lexer"}),
                )
            } else {
                Reply::text("I asked dana/reviewer for a review.")
            }
        } else if last.contains("please review the lexer") {
            // The reviewer answers in the room (the runner posts its reply).
            Reply::text("@dana/writer looks good, ship it")
        } else {
            Reply::text("Nothing for me.")
        }
    }))
    .await;
    let base = server.base_url();
    let writer = desk.setup("Implement the lexer, then ask @dana/reviewer for a review.");
    let reviewer = desk.setup("");
    agent_clis::prepare_claude(&writer).unwrap();
    agent_clis::prepare_codex(&base, &reviewer).unwrap();
    desk.ok(&[
        "agents",
        "onboard",
        "claude",
        "--name",
        "writer",
        "--listen-seconds",
        LISTEN_S,
    ])
    .await;
    desk.ok(&["agents", "onboard", "codex", "--name", "reviewer"])
        .await;
    let mut runner = desk
        .home
        .command(
            "dana",
            &[
                "run",
                "--agent",
                "dana/reviewer",
                "--executable",
                &agent_clis::cli_bin_dir()
                    .join("codex")
                    .display()
                    .to_string(),
                "--arg=--dangerously-bypass-approvals-and-sandbox",
            ],
        )
        .current_dir(&desk.work)
        .envs(agent_clis::codex_env(&reviewer))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();

    // The person gives the writer its task, in a run that listens after its turn.
    let mut command = agent_clis::claude_command(&base, &writer);
    command
        .env
        .push(("ROUNDTABLE_LISTEN".to_owned(), "1".to_owned()));
    let started = Instant::now();
    let output = run(&command).await;
    eprintln!("the writer's run took {:.1?}", started.elapsed());
    assert!(
        output.stdout.contains("Thanks, merging the lexer."),
        "{}\nClaude Code's MCP logs:\n{}",
        output.stdout,
        agent_clis::claude_mcp_logs(&writer.home)
    );

    // The room holds the conversation, each message once.
    let writer_token = desk.home.profile("dana.writer").token.expose().to_owned();
    let texts = room_texts(&hub.ws_url(), &writer_token, "lexer").await;
    assert_eq!(
        texts,
        [
            "@dana/reviewer please review the lexer",
            "@dana/writer looks good, ship it"
        ]
    );
    let _ = runner.start_kill();
    let _ = runner.wait().await;

    // Each session is its agent's, once: on the sessions board and in `usage`.
    let by_agent = json(&desk.ok(&["--json", "usage", "--by", "agent"]).await);
    let agents: Vec<&str> = by_agent
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["group"]["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["dana/reviewer", "dana/writer"], "{by_agent}");
    let scan_total: f64 = json(&desk.ok(&["--json", "scan"]).await)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["cost_usd"].as_f64().unwrap())
        .sum();
    let usage_total: f64 = by_agent
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["cost_usd"].as_f64().unwrap())
        .sum();
    assert!(
        (scan_total - usage_total).abs() < 1e-9,
        "usage {usage_total} = scan {scan_total}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_permission_requests_are_answered_by_the_person_from_roundtable() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let server = ModelServer::start(script(|request: &Request| {
        if request.ends_with_tool_result() {
            let output = request.last_tool_output().unwrap_or_default();
            Reply::text(format!("The command said: {output}"))
        } else {
            let file = if request.last_input().unwrap_or_default().contains("deny") {
                "denied.txt"
            } else {
                "allowed.txt"
            };
            Reply::call(
                "Bash",
                serde_json::json!({"command": format!("touch {file} && echo made {file}"), "description": "make a file"}),
            )
        }
    }))
    .await;
    let mut setup = desk.setup("make the file");
    // No `--dangerously-skip-permissions`: Claude Code asks before running a command.
    setup.skip_permissions = false;
    agent_clis::prepare_claude(&setup).unwrap();
    desk.ok(&["agents", "onboard", "claude", "--name", "writer"])
        .await;
    for (prompt, answer, file) in [
        ("make the file", "Allow", "allowed.txt"),
        ("make the file, I will deny it", "Deny", "denied.txt"),
    ] {
        setup.prompt = prompt.to_owned();
        let command = agent_clis::claude_command(&server.base_url(), &setup);
        let claude = tokio::spawn(async move { command.run(RUN_LIMIT).await.unwrap() });
        // The question reaches the person as a ping; they answer it from their CLI.
        answer_ping_about(&desk, &format!("touch {file}"), answer).await;
        let output = claude.await.unwrap();
        assert_eq!(output.code, Some(0), "{}\n{}", output.stdout, output.stderr);
        let made = desk.work.join(file).exists();
        assert_eq!(made, answer == "Allow", "{file}: {}", output.stdout);
        if answer == "Deny" {
            assert!(
                output.stdout.contains("denied by dana on Roundtable"),
                "the model is told who denied it: {}",
                output.stdout
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onboarded_clis_keep_task_lists_on_todays_models_and_each_session_shows_once() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    // Whatever task tool the CLI offers, the model keeps its list with it, and writes a file.
    let server = ModelServer::start(script(|request: &Request| {
        let done = |tool: &str| request.called(tool);
        if request.offers("TaskCreate") && !done("TaskCreate") {
            return Reply::call(
                "TaskCreate",
                serde_json::json!({"subject": "Write the lexer", "description": "tokens", "activeForm": "Writing the lexer"}),
            );
        }
        if done("TaskCreate") && !done("TaskUpdate") {
            return Reply::call(
                "TaskUpdate",
                serde_json::json!({"taskId": "1", "status": "in_progress"}),
            );
        }
        if request.offers("update_plan") && !done("update_plan") {
            return Reply::call(
                "update_plan",
                serde_json::json!({"plan": [
                    {"step": "Read the lexer", "status": "completed"},
                    {"step": "Review the parser", "status": "in_progress"}]}),
            );
        }
        if request.offers("write_todos") && !done("write_todos") {
            return Reply::call(
                "write_todos",
                serde_json::json!({"todos": [
                    {"description": "Draft the docs", "status": "in_progress"},
                    {"description": "Ask for a review", "status": "blocked"}]}),
            );
        }
        Reply::text("on it")
    }))
    .await;
    let base = server.base_url();
    let setup = desk.setup("start");
    agent_clis::prepare_claude(&setup).unwrap();
    agent_clis::prepare_codex(&base, &setup).unwrap();
    agent_clis::prepare_gemini(&setup).unwrap();
    // A session from before onboarding stays the person's own.
    run(&agent_clis::claude_command(&base, &setup)).await;
    for (cli, name) in [
        ("claude", "writer"),
        ("codex", "reviewer"),
        ("gemini", "helper"),
    ] {
        desk.ok(&["agents", "onboard", cli, "--name", name]).await;
    }
    run(&agent_clis::claude_command(&base, &setup)).await;
    run(&agent_clis::codex_command(&setup)).await;
    run(&agent_clis::gemini_command(&base, &setup)).await;
    // Onboarding gave today's default Claude model its task tools.
    let offered_tasks: Vec<bool> = server
        .model_calls()
        .iter()
        .filter_map(|exchange| exchange.request.as_ref())
        .filter(|request| request.model.starts_with("claude"))
        .map(|request| request.offers("TaskCreate"))
        .collect();
    assert!(
        offered_tasks.first() == Some(&false) && offered_tasks.last() == Some(&true),
        "no task tool before onboarding, one after: {offered_tasks:?}"
    );

    let board = json(&desk.ok(&["--json", "tasks"]).await);
    let lanes: Vec<(String, Vec<String>)> = board["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|lane| !lane["tasks"].as_array().unwrap().is_empty())
        .map(|lane| {
            (
                lane["agent_handle"]
                    .as_str()
                    .unwrap_or("(local)")
                    .to_owned(),
                lane["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|task| {
                        format!(
                            "{}:{}",
                            task["title"].as_str().unwrap(),
                            task["status"].as_str().unwrap()
                        )
                    })
                    .collect(),
            )
        })
        .collect();
    let mut lanes = lanes;
    lanes.sort();
    assert_eq!(
        lanes,
        [
            (
                "dana/helper".to_owned(),
                vec![
                    "Draft the docs:in_progress".to_owned(),
                    "Ask for a review:blocked".to_owned()
                ]
            ),
            (
                "dana/reviewer".to_owned(),
                vec![
                    "Read the lexer:completed".to_owned(),
                    "Review the parser:in_progress".to_owned()
                ]
            ),
            (
                "dana/writer".to_owned(),
                vec!["Write the lexer:in_progress".to_owned()]
            ),
        ],
        "{board}"
    );
    // The session from before onboarding keeps no list, and says why.
    let before = board["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|lane| lane["agent"].is_null() && lane["framework"] == "claude-code")
        .expect("the earlier session is this machine's own");
    assert!(
        before["no_list"]
            .as_str()
            .unwrap()
            .contains("CLAUDE_CODE_ENABLE_TODO_TOOLS"),
        "{before}"
    );

    // Usage: the earlier session stays the person's, the others their agents', and the
    // total is what `scan` reads from the logs.
    let scan = json(&desk.ok(&["--json", "scan"]).await);
    let scan_total: f64 = scan["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["cost_usd"].as_f64().unwrap())
        .sum();
    let by_agent = json(&desk.ok(&["--json", "usage", "--by", "agent"]).await);
    let mut agents: Vec<&str> = by_agent
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["group"]["agent"].as_str().unwrap())
        .collect();
    agents.sort();
    assert_eq!(
        agents,
        [
            "(local claude-code)",
            "dana/helper",
            "dana/reviewer",
            "dana/writer"
        ]
    );
    let usage_total: f64 = by_agent
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["cost_usd"].as_f64().unwrap())
        .sum();
    assert!(
        (scan_total - usage_total).abs() < 1e-9,
        "{usage_total} vs {scan_total}"
    );
    assert_eq!(scan["sessions"].as_array().unwrap().len(), 4);
}

/// A person's own Claude Code state file, in their own formatting.
const CLAUDE_STATE: &str = "{\n\t\"numStartups\": 3,\n\t\"theme\": \"dark\",\n\t\"mcpServers\": {\n\t\t\"github\": {\"type\": \"stdio\", \"command\": \"gh-mcp\", \"args\": []}\n\t}\n}\n";
const CLAUDE_SETTINGS: &str = "{\n\t\"permissions\": {\"allow\": [\"Bash(ls:*)\"]},\n\t\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"true\"}]}]}\n}\n";
const GEMINI_SETTINGS: &str = "// Dana's Gemini settings\n{\n  \"ui\": {\"theme\": \"GitHub\"},\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}\n}\n";

/// `text` (JSON) as Claude Code writes its state file: `JSON.stringify(value, null, 2)`,
/// members in their order, without `mcpServers.roundtable`.
fn as_claude_writes_without_ours(text: &str) -> String {
    let python = std::env::var("ROUNDTABLE_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let program = "import json, sys\n\
        state = json.loads(sys.stdin.read(), object_pairs_hook=dict)\n\
        state.get('mcpServers', {}).pop('roundtable', None)\n\
        sys.stdout.write(json.dumps(state, indent=2, ensure_ascii=False))\n";
    let mut child = std::process::Command::new(python)
        .args(["-c", program])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    drop(child.stdin.take());
    String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offboarding_gives_back_every_byte_of_the_persons_configuration_after_real_runs() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let server = ModelServer::start(script(|_: &Request| Reply::text("hello"))).await;
    let base = server.base_url();
    let setup = desk.setup("say hello");
    // Each CLI set up as the person had it, in their own words and formatting.
    agent_clis::prepare_codex(&base, &setup).unwrap();
    let codex_config = format!(
        "# Dana's Codex settings\n{}notify = [\"true\"]   # hers\n",
        desk.read(".codex/config.toml")
    );
    let home = desk.user_home();
    std::fs::write(home.join(".codex/config.toml"), &codex_config).unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    let mut state: Value = serde_json::from_str(CLAUDE_STATE.replace('\t', " ").as_str()).unwrap();
    state["hasCompletedOnboarding"] = true.into();
    state["projects"] =
        serde_json::json!({ desk.work.display().to_string(): {"hasTrustDialogAccepted": true} });
    let claude_state = serde_json::to_string_pretty(&state)
        .unwrap()
        .replace("  ", "\t")
        + "\n";
    std::fs::write(home.join(".claude.json"), &claude_state).unwrap();
    std::fs::write(home.join(".claude/settings.json"), CLAUDE_SETTINGS).unwrap();
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(home.join(".gemini/settings.json"), GEMINI_SETTINGS).unwrap();
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        serde_json::json!({ desk.work.display().to_string(): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();

    for (cli, name) in [
        ("claude", "writer"),
        ("codex", "reviewer"),
        ("gemini", "helper"),
    ] {
        desk.ok(&["agents", "onboard", cli, "--name", name]).await;
    }
    // The CLIs run with Roundtable wired in (Claude Code rewrites its state file itself).
    run(&agent_clis::claude_command(&base, &setup)).await;
    run(&agent_clis::codex_command(&setup)).await;
    run(&agent_clis::gemini_command(&base, &setup)).await;
    let rewritten = desk.read(".claude.json");
    assert!(
        rewritten.contains("\"roundtable\""),
        "still wired: {rewritten}"
    );
    // Their hooks ran: each session is its agent's.
    let claims = desk.home.dir.path().join("sessions");
    for framework in ["claude-code", "codex", "gemini"] {
        let owners: Vec<String> = std::fs::read_dir(claims.join(framework))
            .unwrap_or_else(|error| panic!("{framework}: no claim ({error})"))
            .flatten()
            .map(|entry| {
                std::fs::read_to_string(entry.path())
                    .unwrap()
                    .trim()
                    .to_owned()
            })
            .collect();
        assert_eq!(owners.len(), 1, "{framework}: {owners:?}");
    }

    for (cli, name) in [
        ("claude", "writer"),
        ("codex", "reviewer"),
        ("gemini", "helper"),
    ] {
        desk.ok(&["agents", "offboard", cli, "--name", name]).await;
    }
    assert_eq!(desk.read(".claude/settings.json"), CLAUDE_SETTINGS);
    assert_eq!(desk.read(".codex/config.toml"), codex_config);
    assert!(!home.join(".codex/hooks.json").exists());
    assert_eq!(desk.read(".gemini/settings.json"), GEMINI_SETTINGS);
    // Claude Code's own rewrite of its state file, exactly, less our entry.
    assert_eq!(
        desk.read(".claude.json"),
        as_claude_writes_without_ours(&rewritten)
    );
}

/// Sends a message as dana from inside a model script (synchronously: the script is a plain
/// function the server calls).
fn send_now(desk_home: &Path, user_home: &Path, room: &str, text: &str) {
    let status = std::process::Command::new(roundtable_testkit::roundtable_bin())
        .args(["--profile", "dana", "send", room, text])
        .env("ROUNDTABLE_HOME", desk_home)
        .env("HOME", user_home)
        .env("ROUNDTABLE_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "sending {text:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_reaches_a_working_codex_at_its_next_tool_and_a_resting_one_through_its_queue() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let (desk_home, user_home) = (desk.home.dir.path().to_path_buf(), desk.user_home());
    let server = ModelServer::start(script(move |request: &Request| {
        let seen = request.raw.to_string();
        let send = |text: &str| send_now(&desk_home, &user_home, "review", text);
        if seen.contains("one more thing") {
            Reply::text("Handled the one more thing.")
        } else if seen.contains("and the docs") {
            Reply::text("Docs too.")
        } else if seen.contains("check the tests") {
            // Between two tools the mention came in; the turn ends with another unread.
            send("@dana/reviewer and the docs");
            Reply::text("Checking the tests as dana asked.")
        } else {
            // Working: a mention arrives while the tool runs.
            send("@dana/reviewer please also check the tests");
            Reply::call("exec_command", serde_json::json!({"cmd": "echo working"}))
        }
    }))
    .await;
    let mut setup = desk.setup("review the lexer");
    agent_clis::prepare_codex(&server.base_url(), &setup).unwrap();
    desk.ok(&["agents", "onboard", "codex", "--name", "reviewer"])
        .await;
    desk.ok(&[
        "room",
        "create",
        "--title",
        "review",
        "--member",
        "dana/reviewer",
    ])
    .await;
    // A run that asks to be reachable after it (as a person at Codex's terminal is).
    setup
        .extra_env
        .push(("ROUNDTABLE_LISTEN".to_owned(), "1".to_owned()));
    let output = run(&agent_clis::codex_command(&setup)).await;
    let texts: Vec<String> = server
        .model_calls()
        .iter()
        .map(|exchange| exchange.request.as_ref().unwrap().raw.to_string())
        .collect();
    // The mention that came while the tool ran was in the very next request…
    assert!(
        texts[1].contains("please also check the tests"),
        "after the tool: {}",
        texts[1]
    );
    // …and the one that came at the turn's end continued the same turn.
    assert!(output.stdout.contains("Docs too."), "{}", output.stdout);
    let thread = output
        .stdout
        .lines()
        .map(json)
        .find(|event| event["type"] == "thread.started")
        .unwrap()["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The session rests. A mention now is handed to it through Codex's queue (a Codex at a
    // terminal runs it at once; a `codex exec` thread takes it with its next turn).
    send_now(
        desk.home.dir.path(),
        &desk.user_home(),
        "review",
        "@dana/reviewer one more thing",
    );
    let reviewer = roundtable_core::Core::open(desk.home.profile("dana.reviewer"))
        .await
        .unwrap();
    let me = reviewer.me().to_owned();
    eventually(
        "the waker handed the mention over",
        Duration::from_secs(60),
        async || {
            let me = me.clone();
            let unread = reviewer
                .read(move |cache| cache.unread_messages_for(&me, true, 10))
                .await
                .unwrap();
            // The waker marks them read once `codex queue` took them.
            unread.is_empty().then_some(())
        },
    )
    .await;
    drop(reviewer);
    let mut resume = agent_clis::codex_command(&setup);
    let at = resume.args.iter().position(|arg| arg == "exec").unwrap();
    resume
        .args
        .splice(at + 1..at + 1, ["resume".to_owned(), thread]);
    *resume.args.last_mut().unwrap() = "go on".to_owned();
    let output = run(&resume).await;
    assert!(
        output.stdout.contains("Handled the one more thing."),
        "{}",
        output.stdout
    );
}

/// Claude Code with no Roundtable bridge running (`--strict-mcp-config`: the MCP servers
/// of its configuration are not started), as a person may run it: its hooks still hand it
/// its messages. A mention sent while the turn runs blocks the turn's end (a run no one sits
/// at, which does not listen), and the session goes on to answer it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_with_no_bridge_running_gets_a_mention_sent_during_its_turn_at_its_end() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let (desk_home, user_home) = (desk.home.dir.path().to_path_buf(), desk.user_home());
    let sent = std::sync::atomic::AtomicBool::new(false);
    let server = ModelServer::start(script(move |request: &Request| {
        let seen = request.raw.to_string();
        if seen.contains("please also update the changelog") {
            Reply::text("Updated the changelog as dana asked.")
        } else {
            // The person writes to the agent while its turn runs.
            if !sent.swap(true, std::sync::atomic::Ordering::SeqCst) {
                send_now(
                    &desk_home,
                    &user_home,
                    "docs",
                    "@dana/helper please also update the changelog",
                );
            }
            Reply::text("Wrote the readme.")
        }
    }))
    .await;
    let mut setup = desk.setup("write the readme");
    setup.extra_args.push("--strict-mcp-config".to_owned());
    agent_clis::prepare_claude(&setup).unwrap();
    desk.ok(&["agents", "onboard", "claude", "--name", "helper"])
        .await;
    desk.ok(&[
        "room",
        "create",
        "--title",
        "docs",
        "--member",
        "dana/helper",
    ])
    .await;
    let output = run(&agent_clis::claude_command(&server.base_url(), &setup)).await;
    assert!(
        output
            .stdout
            .contains("Updated the changelog as dana asked."),
        "the turn's end handed the mention over and the session answered it: {}\n{}",
        output.stdout,
        output.stderr
    );
    // No bridge ran: the hooks did it all.
    assert!(
        !output.stdout.contains("mcp__roundtable__"),
        "no Roundtable tools were offered: {}",
        output.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_gets_its_messages_when_a_turn_begins_and_when_it_ends() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let (desk_home, user_home) = (desk.home.dir.path().to_path_buf(), desk.user_home());
    let server = ModelServer::start(script(move |request: &Request| {
        let seen = request.raw.to_string();
        if seen.contains("also the changelog") {
            Reply::text("Changelog updated too.")
        } else {
            send_now(
                &desk_home,
                &user_home,
                "docs",
                "@dana/helper also the changelog",
            );
            if seen.contains("write the readme") {
                Reply::text("Writing the readme as dana asked.")
            } else {
                Reply::text("Nothing to do.")
            }
        }
    }))
    .await;
    let setup = desk.setup("what now?");
    agent_clis::prepare_gemini(&setup).unwrap();
    desk.onboard_and_mention(
        "gemini",
        "helper",
        "docs",
        "@dana/helper please write the readme",
    )
    .await;
    let output = run(&agent_clis::gemini_command(&server.base_url(), &setup)).await;
    // The mention waiting when the turn began was in its first request, and the one that came
    // during the turn continued it.
    let first = server.model_calls()[0]
        .request
        .as_ref()
        .unwrap()
        .raw
        .to_string();
    assert!(first.contains("please write the readme"), "{first}");
    assert!(
        output.stdout.contains("Changelog updated too."),
        "{}",
        output.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codexs_notify_reaches_the_hub_every_time_though_codex_ends_its_mcp_server_at_once() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    desk.ok(&["agents", "register", "reviewer"]).await;
    let server = ModelServer::start(script(|_: &Request| Reply::text("done"))).await;
    let mut setup = desk.setup("look at the lexer");
    // Wired as onboarding did before Codex had hooks: the MCP server, and `notify`, which
    // Codex runs as it exits, fire and forget, while it ends the MCP server at once.
    let roundtable = roundtable_testkit::roundtable_bin().display().to_string();
    let home = desk.home.dir.path().display().to_string();
    setup.extra_config = format!(
        "[mcp_servers.roundtable]\ncommand = {roundtable:?}\nargs = [\"mcp\", \"--agent\", \"dana/reviewer\"]\nenv = {{ ROUNDTABLE_HOME = {home:?} }}\n"
    );
    agent_clis::prepare_codex(&server.base_url(), &setup).unwrap();
    let config = desk.user_home().join(".codex/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!(
            "notify = [\"env\", \"ROUNDTABLE_HOME={home}\", {roundtable:?}, \"hook\", \"codex\", \"--agent\", \"dana/reviewer\"]\n{text}"
        ),
    )
    .unwrap();
    let runs = 5;
    for _ in 0..runs {
        run(&agent_clis::codex_command(&setup)).await;
    }
    // Every run's "turn complete" reaches the reviewer's home room.
    let token = desk.home.profile("dana.reviewer").token.expose().to_owned();
    let home_room = desk
        .home
        .profile("dana.reviewer")
        .home_room
        .expect("the agent has a home room");
    eventually("every turn's status", Duration::from_secs(60), async || {
        let mut client = roundtable_testkit::Client::connect(&hub.ws_url())
            .await
            .ok()?;
        client.auth(&token, "check").await.ok()?;
        let id = client.id();
        let page: roundtable_protocol::server::HistoryOk = client
            .ok(roundtable_protocol::ClientFrame::History(
                roundtable_protocol::client::History {
                    id,
                    room: home_room.clone(),
                    before: None,
                    after: None,
                    limit: Some(500),
                },
            ))
            .await
            .decode()
            .ok()?;
        let done = page
            .events
            .iter()
            .filter(|event| event.kind == "status" && event.body["detail"] == "turn complete")
            .count();
        (done == runs).then_some(())
    })
    .await;
}

/// Claude Code configured as a person configures a remote MCP server, with `claude mcp add
/// --transport http … --header "Authorization: Bearer …"`, and nothing of Roundtable on the
/// machine but the agent's token: it lists its rooms, sends to one, waits for its person's
/// message, and asks its person a question, through the hub's `/mcp`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_with_only_a_token_and_a_header_works_through_the_hubs_mcp_endpoint() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let agent = json(&desk.ok(&["--json", "agents", "register", "writer"]).await);
    let token = agent["token"].as_str().unwrap().to_owned();
    desk.ok(&[
        "room",
        "create",
        "--title",
        "lexer",
        "--member",
        "dana/writer",
    ])
    .await;
    let server = ModelServer::start(script(|request: &Request| {
        if !request.called("mcp__roundtable__list_rooms") {
            Reply::call("mcp__roundtable__list_rooms", serde_json::json!({}))
        } else if !request.called("mcp__roundtable__send_message") {
            assert!(
                request
                    .last_tool_output()
                    .is_some_and(|rooms| rooms.contains("\"lexer\"")),
                "the agent's rooms: {:?}",
                request.last_tool_output()
            );
            Reply::call(
                "mcp__roundtable__send_message",
                serde_json::json!({"room": "lexer", "text": "starting on the lexer (over HTTP)"}),
            )
        } else if !request.called("mcp__roundtable__wait_for_messages") {
            Reply::call(
                "mcp__roundtable__wait_for_messages",
                serde_json::json!({"timeout_s": 60}),
            )
        } else if !request.called("mcp__roundtable__ask_human") {
            Reply::call(
                "mcp__roundtable__ask_human",
                serde_json::json!({"question": "Ship the lexer today?", "options": ["yes", "no"], "timeout_s": 60}),
            )
        } else {
            Reply::text(format!(
                "Done. The person said: {}",
                request.last_tool_output().unwrap_or_default()
            ))
        }
    }))
    .await;
    let setup = desk.setup("Start on the lexer and keep your person in the loop.");
    agent_clis::prepare_claude(&setup).unwrap();
    let mut add = agent_clis::claude_command(&server.base_url(), &setup);
    add.args = [
        "mcp",
        "add",
        "--scope",
        "user",
        "--transport",
        "http",
        "roundtable",
        &format!("http://{}/mcp", hub.listen),
        "--header",
        &format!("Authorization: Bearer {token}"),
    ]
    .map(String::from)
    .to_vec();
    run(&add).await;

    // The person: once the agent's first message is in, asks it something; once its
    // question is among their pings, answers it.
    let person = async {
        eventually(
            "the agent's message",
            Duration::from_secs(120),
            async || {
                let texts = room_texts(&hub.ws_url(), &token, "lexer").await;
                texts.iter().any(|t| t.contains("over HTTP")).then_some(())
            },
        )
        .await;
        desk.ok(&["send", "lexer", "@dana/writer keep the tokens small"])
            .await;
        let ping = eventually(
            "the agent's question",
            Duration::from_secs(120),
            async || {
                let pings = json(&desk.ok(&["--json", "pings"]).await);
                pings.as_array()?.iter().find_map(|p| {
                    (p["question"] == "Ship the lexer today?")
                        .then(|| p["ping"].as_str().unwrap().to_owned())
                })
            },
        )
        .await;
        desk.ok(&["answer", &ping, "yes"]).await;
    };
    let command = agent_clis::claude_command(&server.base_url(), &setup);
    let (output, ()) = tokio::join!(run(&command), person);
    assert!(
        output.stdout.contains("Done. The person said:")
            && output.stdout.contains(r#"\"answer\": \"yes\""#)
            && output.stdout.contains(r#"\"via\": \"ping\""#),
        "{}\nClaude Code's MCP logs:\n{}",
        output.stdout,
        agent_clis::claude_mcp_logs(&setup.home)
    );
    let texts = room_texts(&hub.ws_url(), &token, "lexer").await;
    assert_eq!(
        texts,
        [
            "starting on the lexer (over HTTP)",
            "@dana/writer keep the tokens small"
        ]
    );
}

/// A free port on loopback, for a server a CLI starts (OpenCode's `serve`).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `POST http://127.0.0.1:PORT/PATH` with a JSON body: the reply's status and body, or
/// `None` after `patience`. HTTP/1.1 by hand (OpenCode's server API, a few calls): its
/// replies carry a `Content-Length`, and it keeps the connection open whatever the request
/// asks.
async fn post_json(
    port: u16,
    path: &str,
    body: &Value,
    patience: Duration,
) -> Option<(u16, String)> {
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
    let body = body.to_string();
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut stream = tokio::io::BufReader::new(stream);
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .get_mut()
        .write_all(request.as_bytes())
        .await
        .unwrap();
    let reply = async {
        let mut status_line = String::new();
        stream.read_line(&mut status_line).await.unwrap();
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let mut length = 0;
        loop {
            let mut header = String::new();
            stream.read_line(&mut header).await.unwrap();
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        stream.read_exact(&mut body).await.unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(patience, reply).await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_onboarded_gets_its_messages_speaks_in_rooms_is_read_exactly_and_leaves_no_byte() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let (desk_home, user_home) = (desk.home.dir.path().to_path_buf(), desk.user_home());
    // OpenCode names an MCP tool `<server>_<tool>`; it asks a title of each new session in
    // a request without tools (not counted in its usage, nor here).
    let server = ModelServer::start(script(move |request: &Request| {
        if request.tools.is_empty() {
            return Reply::text("Parser work");
        }
        let n = request.messages.len() as u64;
        let seen = request.raw.to_string();
        let reply = if seen.contains("please review the parser") {
            Reply::text("The parser looks right.")
        } else if seen.contains("one more thing") {
            Reply::text("The benchmark is next.")
        } else if seen.contains("how is it going") {
            // A turn with no tool: a mention sent now reaches it only at its end.
            send_now(
                &desk_home,
                &user_home,
                "build",
                "@dana/coder one more thing: a benchmark",
            );
            Reply::text("Going well.")
        } else if !request.called("todowrite") {
            Reply::call(
                "todowrite",
                serde_json::json!({"todos": [
                    {"content": "Write the parser", "status": "in_progress", "priority": "high"},
                    {"content": "Tell the room", "status": "pending", "priority": "medium"},
                ]}),
            )
        } else if !request.called("write") {
            // Sent during the turn: it reaches the agent at its next tool's end.
            send_now(
                &desk_home,
                &user_home,
                "build",
                "@dana/coder also add tests",
            );
            Reply::call(
                "write",
                serde_json::json!({"filePath": "parser.rs", "content": "fn parse() {}\n"}),
            )
        } else if !request.called("roundtable_send_message") {
            Reply::call(
                "roundtable_send_message",
                serde_json::json!({"room": "build", "text": "parser added; tests next"}),
            )
        } else {
            Reply::text("Done.")
        };
        reply.with_usage(usage(n))
    }))
    .await;
    let setup = desk.setup("go on");
    agent_clis::prepare_opencode(&server.base_url(), &setup).unwrap();
    let config = ".config/opencode/opencode.json";
    let persons = desk.read(config);
    desk.onboard_and_mention(
        "opencode",
        "coder",
        "build",
        "@dana/coder please add the parser",
    )
    .await;

    let output = run(&agent_clis::opencode_command(&setup)).await;
    let calls = server.model_calls();
    let main: Vec<Request> = calls
        .iter()
        .filter_map(|exchange| exchange.request.clone())
        .filter(|request| !request.tools.is_empty())
        .collect();
    // Roundtable's tools were offered; the mention waiting when the prompt began was in
    // it, and the one sent during the turn came with the next tool's output.
    assert!(
        main[0].offers("roundtable_send_message"),
        "{:?}",
        main[0].tools
    );
    assert!(
        main[0].raw.to_string().contains("please add the parser"),
        "{}\n{}",
        main[0].raw,
        output.stderr
    );
    let after_write = main
        .iter()
        .find(|request| request.called("write"))
        .expect("the write was answered");
    assert!(
        after_write
            .last_input()
            .unwrap_or_default()
            .contains("also add tests"),
        "{:?}",
        after_write.last_input()
    );
    // What the agent said reached the room, as it.
    let coder = desk.home.profile("dana.coder");
    assert!(said(&hub, &coder, "build", "parser added; tests next").await);

    // `scan` reads OpenCode's database: the task list, the file, and exactly the tokens
    // the server sent for the session's steps, priced.
    let scan = json(&desk.ok(&["--json", "scan"]).await);
    let sessions = scanned(&scan, "opencode");
    assert_eq!(sessions.len(), 1, "{scan}");
    let steps: Vec<&Exchange> = calls
        .iter()
        .filter(|e| e.request.as_ref().is_some_and(|r| !r.tools.is_empty()))
        .collect();
    assert_eq!(sessions[0].1, sent_tokens(&steps), "{scan}");
    assert!(sessions[0].2.is_some(), "priced: {scan}");
    let session = scanned_session(&scan, "opencode");
    assert_eq!(
        task_titles(session),
        ["Write the parser", "Tell the room"],
        "{session}"
    );
    assert!(touched(session, &desk.work.join("parser.rs")), "{session}");

    // A session a person keeps open (`opencode serve`, as the terminal's): a mention that
    // comes during a turn with no tool starts the next turn when this one ends.
    let port = free_port();
    let mut serve = agent_clis::opencode_command(&setup);
    serve.args = vec![
        "serve".into(),
        "--port".into(),
        port.to_string(),
        "--hostname".into(),
        "127.0.0.1".into(),
    ];
    let mut serving = serve.command().spawn().unwrap();
    let serving_group = roundtable_platform::process_group::ProcessGroup::of(&serving).unwrap();
    // A request the server took while starting may never be answered: each try is short.
    let created = eventually("OpenCode's server", Duration::from_secs(90), async || {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let (status, body) = post_json(
            port,
            "/session",
            &serde_json::json!({}),
            Duration::from_secs(3),
        )
        .await?;
        (status == 200).then(|| json(&body))
    })
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    // Prompted as the terminal does, without waiting for the turn.
    let (status, body) = post_json(
        port,
        &format!("/session/{id}/prompt_async"),
        &serde_json::json!({"parts": [{"type": "text", "text": "how is it going"}]}),
        Duration::from_secs(60),
    )
    .await
    .expect("OpenCode takes the prompt");
    assert!((200..300).contains(&status), "{status}: {body}");
    let asked = |text: &str| {
        server
            .model_calls()
            .iter()
            .filter_map(|exchange| exchange.request.as_ref())
            .any(|request| {
                !request.tools.is_empty() && request.last_input().unwrap_or_default().contains(text)
            })
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    while !asked("one more thing") {
        assert!(
            Instant::now() < deadline,
            "the mention never started the next turn; the model was asked: {:?}",
            server
                .model_calls()
                .iter()
                .filter_map(|exchange| exchange.request.as_ref()?.last_input().map(str::to_owned))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    serving_group.end();
    let _ = serving.wait().await;

    // With no terminal: the runner answers a mention with an OpenCode turn, the reply
    // posted in the room as the agent.
    runner_answers(
        (&desk, &hub),
        &coder,
        (
            &agent_clis::cli_bin_dir().join("opencode"),
            agent_clis::opencode_command(&setup).env,
        ),
        (
            "build",
            "@dana/coder please review the parser",
            "The parser looks right.",
        ),
    )
    .await;

    // Offboarded: the person's configuration byte for byte, and the plugin gone.
    desk.ok(&["agents", "offboard", "opencode", "--name", "coder"])
        .await;
    assert_eq!(desk.read(config), persons);
    assert!(
        !desk
            .user_home()
            .join(".config/opencode/plugins/roundtable.js")
            .exists()
    );
}

/// GitHub Copilot CLI from npm, with no GitHub login: it runs on its own provider settings
/// against the scripted model server (`COPILOT_OFFLINE`, `COPILOT_PROVIDER_*`), so
/// everything a person does with it is run here — onboarding, messages at a prompt's start,
/// a tool's end and a turn's end, its permission requests answered from Roundtable, the
/// runner, `scan` and offboarding. What cannot run here is a GitHub account's own models
/// and their premium-request billing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_onboarded_gets_its_messages_asks_its_person_is_read_exactly_and_leaves_no_byte() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let (desk_home, user_home) = (desk.home.dir.path().to_path_buf(), desk.user_home());
    let parser = desk.work.join("parser.rs").display().to_string();
    // Copilot names an MCP tool `<server>-<tool>`, and keeps its task list in a table of
    // its session's own database, written with its `sql` tool.
    let server = ModelServer::start(script(move |request: &Request| {
        let n = request.messages.len() as u64;
        let seen = request.raw.to_string();
        let reply = if seen.contains("please review the parser") {
            Reply::text("The parser looks right.")
        } else if seen.contains("one more thing") {
            Reply::text("The benchmark is next.")
        } else if seen.contains("how is it going") {
            // A turn with no tool: a mention sent now reaches it only at its end.
            send_now(
                &desk_home,
                &user_home,
                "build",
                "@dana/pilot one more thing: a benchmark",
            );
            Reply::text("Going well.")
        } else if seen.contains("make the file") {
            if request.ends_with_tool_result() {
                Reply::text(format!(
                    "The command said: {}",
                    request.last_tool_output().unwrap_or_default()
                ))
            } else {
                let file = if seen.contains("I will deny it") {
                    "denied.txt"
                } else {
                    "allowed.txt"
                };
                Reply::call(
                    "bash",
                    serde_json::json!({"command": format!("touch {file} && echo made {file}"), "description": "make a file"}),
                )
            }
        } else if !request.called("sql") {
            Reply::call(
                "sql",
                serde_json::json!({"description": "Plan the work", "query":
                    "INSERT INTO todos (id, title, status) VALUES \
                     ('parser', 'Write the parser', 'in_progress'), ('room', 'Tell the room', 'pending')"}),
            )
        } else if !request.called("create") {
            // Sent during the turn: it reaches the agent at its next tool's end.
            send_now(
                &desk_home,
                &user_home,
                "build",
                "@dana/pilot also add tests",
            );
            Reply::call(
                "create",
                serde_json::json!({"path": parser, "file_text": "fn parse() {}\n"}),
            )
        } else if !request.called("roundtable-send_message") {
            Reply::call(
                "roundtable-send_message",
                serde_json::json!({"room": "build", "text": "parser added; tests next"}),
            )
        } else {
            Reply::text("Done.")
        };
        reply.with_usage(usage(n))
    }))
    .await;
    // The person's own configuration: a server of theirs.
    let mut setup = desk.setup("go on");
    setup.mcp_servers.push(agent_clis::McpServer {
        name: "notes".into(),
        command: "python3".into(),
        args: vec!["-c".into(), "pass".into()],
        env: Vec::new(),
    });
    agent_clis::prepare_copilot(&setup).unwrap();
    setup.mcp_servers.clear();
    let config = ".copilot/mcp-config.json";
    let persons = desk.read(config);
    desk.onboard_and_mention(
        "copilot",
        "pilot",
        "build",
        "@dana/pilot please add the parser",
    )
    .await;

    let output = run(&agent_clis::copilot_command(&server.base_url(), &setup)).await;
    let calls = server.model_calls();
    let requests: Vec<Request> = calls
        .iter()
        .filter_map(|exchange| exchange.request.clone())
        .collect();
    // Roundtable's tools were offered; the mention waiting when the prompt began was in
    // it, and the one sent during the turn came with the next tool's output.
    assert!(
        requests[0].offers("roundtable-send_message"),
        "{:?}",
        requests[0].tools
    );
    assert!(
        requests[0]
            .raw
            .to_string()
            .contains("please add the parser"),
        "{}\n{}",
        requests[0].raw,
        output.stderr
    );
    let after_create = requests
        .iter()
        .find(|request| request.called("create") && request.ends_with_tool_result())
        .expect("the file was made");
    assert!(
        after_create
            .last_tool_output()
            .unwrap_or_default()
            .contains("also add tests"),
        "{:?}",
        after_create.last_tool_output()
    );
    let pilot = desk.home.profile("dana.pilot");
    assert!(said(&hub, &pilot, "build", "parser added; tests next").await);

    // `scan` reads the session's log and its database: the task list, the file, and
    // exactly the tokens the server sent (Copilot counts the cache in its input; Roundtable
    // takes it out again), priced.
    let scan = json(&desk.ok(&["--json", "scan"]).await);
    let sessions = scanned(&scan, "copilot");
    assert_eq!(sessions.len(), 1, "{scan}");
    let steps: Vec<&Exchange> = calls.iter().collect();
    assert_eq!(sessions[0].1, sent_tokens(&steps), "{scan}");
    assert!(sessions[0].2.is_some(), "priced: {scan}");
    let session = scanned_session(&scan, "copilot");
    assert_eq!(
        task_titles(session),
        ["Write the parser", "Tell the room"],
        "{session}"
    );
    assert!(touched(session, &desk.work.join("parser.rs")), "{session}");

    // A mention that comes during a turn with no tool starts another turn when it ends.
    setup.prompt = "how is it going".into();
    run(&agent_clis::copilot_command(&server.base_url(), &setup)).await;
    let continued = server.model_calls().iter().any(|exchange| {
        exchange.request.as_ref().is_some_and(|request| {
            request
                .last_input()
                .unwrap_or_default()
                .contains("one more thing")
        })
    });
    assert!(continued, "the mention never started the next turn");

    // With no `--allow-all-tools`, Copilot asks before running a command: the question
    // reaches the person as a ping, answered from their CLI.
    setup.skip_permissions = false;
    for (prompt, answer, file) in [
        ("make the file", "Allow", "allowed.txt"),
        ("make the file, I will deny it", "Deny", "denied.txt"),
    ] {
        setup.prompt = prompt.to_owned();
        let command = agent_clis::copilot_command(&server.base_url(), &setup);
        let copilot = tokio::spawn(async move { command.run(RUN_LIMIT).await.unwrap() });
        answer_ping_about(&desk, &format!("touch {file}"), answer).await;
        let output = copilot.await.unwrap();
        assert_eq!(output.code, Some(0), "{}\n{}", output.stdout, output.stderr);
        assert_eq!(
            desk.work.join(file).exists(),
            answer == "Allow",
            "{file}: {}",
            output.stdout
        );
        if answer == "Deny" {
            assert!(
                output.stdout.contains("denied by dana on Roundtable"),
                "the model is told who denied it: {}",
                output.stdout
            );
        }
    }

    // With no terminal: the runner answers a mention with a Copilot turn, the reply
    // posted in the room as the agent.
    runner_answers(
        (&desk, &hub),
        &pilot,
        (
            &agent_clis::cli_bin_dir().join("copilot"),
            agent_clis::copilot_env(&server.base_url(), &setup),
        ),
        (
            "build",
            "@dana/pilot please review the parser",
            "The parser looks right.",
        ),
    )
    .await;

    // Offboarded: the person's configuration byte for byte, and our hooks gone.
    desk.ok(&["agents", "offboard", "copilot", "--name", "pilot"])
        .await;
    assert_eq!(desk.read(config), persons);
    assert!(
        !desk
            .user_home()
            .join(".copilot/hooks/roundtable.json")
            .exists()
    );
}
