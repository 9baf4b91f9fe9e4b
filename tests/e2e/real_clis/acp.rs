//! `roundtable run --acp` with real ACP agents: OpenCode in its own ACP mode (`opencode acp`),
//! and Claude Code and Codex through their ACP adapters (`claude-agent-acp`, `codex-acp` from
//! npm, run over the pinned CLIs). One journey for each: a mention answered in the room with
//! Roundtable's tools attached by the runner (no configuration file edited for them), the
//! agent's plan on the person's tasks board, a command the agent asks permission for answered
//! by the person from their CLI, the room's session loaded again after the runner is killed
//! (the agent remembers), and a paused agent not prompted until resumed.

use super::*;

/// The tool calls of an agent's model in the journey.
#[derive(Clone, Copy)]
struct AcpTools {
    /// The call that runs `touch ran.txt` (the agent asks permission first).
    shell: fn() -> Reply,
    /// The call that makes the plan "Review the parser", by the tools the request offers.
    plan: fn(&Request) -> Reply,
    /// The call that writes `notes.md` in the project (given).
    edit: fn(&Path) -> Reply,
}

/// The newest of the journey's mentions the model has seen (each carries a marker `rt-…`:
/// the agents' system prompts hold common words).
fn newest_marker(request: &Request) -> &'static str {
    const MARKERS: [&str; 6] = [
        "rt-review",
        "rt-plan",
        "rt-edit",
        "rt-checks",
        "rt-first",
        "rt-pause",
    ];
    let texts = request.messages.iter().rev().flat_map(|message| {
        message.parts.iter().rev().filter_map(|part| match part {
            roundtable_testkit::model_server::Part::Text(text) => Some(text.as_str()),
            _ => None,
        })
    });
    for text in texts {
        if let Some(marker) = MARKERS.iter().find(|marker| text.contains(*marker)) {
            return marker;
        }
    }
    ""
}

/// The model's side of the journey.
fn journey_script(tools: AcpTools, work: PathBuf) -> roundtable_testkit::model_server::Script {
    let AcpTools { shell, plan, edit } = tools;
    script(move |request: &Request| {
        if request.tools.is_empty() {
            return Reply::text("Review");
        }
        let done = request.ends_with_tool_result();
        match newest_marker(request) {
            "rt-plan" if done => Reply::text("Planned."),
            "rt-plan" => plan(request),
            "rt-edit" if done => Reply::text("Noted."),
            "rt-edit" => edit(&work.join("notes.md")),
            "rt-checks" if done => Reply::text("Tests ran."),
            "rt-checks" => shell(),
            "rt-first" if request.raw.to_string().contains("rt-review") => {
                Reply::text("You asked me to review the parser.")
            }
            "rt-first" => Reply::text("I do not know."),
            "rt-pause" => Reply::text("Back at it."),
            _ => Reply::text("The parser looks right."),
        }
    })
}

/// The open permission ping the agent raised, and its options, if there is one.
async fn open_permission(desk: &Desk) -> Option<(String, Vec<String>)> {
    let pings = json(&desk.ok(&["--json", "pings"]).await);
    pings.as_array()?.iter().find_map(|ping| {
        let question = ping["question"].as_str()?;
        (ping["state"] == "open" && question.contains("asks permission")).then(|| {
            let options = ping["options"].as_array().into_iter().flatten();
            (
                ping["ping"].as_str().unwrap().to_owned(),
                options
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            )
        })
    })
}

/// The option that allows once (else always), by the agent's own names for them.
fn allowing(options: &[String]) -> &str {
    let allows = |name: &str| {
        let name = name.to_lowercase();
        name.contains("allow") || name == "once" || name.starts_with("yes")
    };
    options
        .iter()
        .find(|name| allows(name) && !name.to_lowercase().contains("always"))
        .or_else(|| options.iter().find(|name| allows(name)))
        .unwrap_or_else(|| panic!("no option allows: {options:?}"))
}

/// The journey with the agent onboarded on `case.cli` (its CLI prepared by `prepare` against
/// the model server's URL, which gives its environment and where it logs).
async fn acp_journey(
    cli: &'static str,
    tools: AcpTools,
    prepare: impl FnOnce(&Desk, &str) -> (Vec<(String, String)>, PathBuf),
) {
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let server = ModelServer::start(journey_script(tools, desk.work.clone())).await;
    let (mut env, agent_logs) = prepare(&desk, &server.base_url());
    // The CLIs and the adapters are found on PATH, as on a person's machine.
    let path = std::env::join_paths(
        [agent_clis::cli_bin_dir(), agent_clis::acp_bin_dir()]
            .into_iter()
            .chain(std::env::split_paths(
                &std::env::var_os("PATH").unwrap_or_default(),
            )),
    )
    .unwrap();
    env.push(("PATH".into(), path.to_string_lossy().into_owned()));
    env.push(("ROUNDTABLE_LOG".into(), "roundtable_core=debug,info".into()));
    desk.ok(&["agents", "onboard", cli, "--name", "coder"])
        .await;
    desk.ok(&[
        "room",
        "create",
        "--title",
        "build",
        "--member",
        "dana/coder",
    ])
    .await;
    let coder = desk.home.profile("dana.coder");
    // The runners' log and the agent's are what a failure shows.
    let runner_log = desk.work.with_file_name("runner.log");
    let runner = || {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&runner_log)
            .unwrap();
        desk.home
            .command("dana", &["run", "--agent", "dana/coder", "--acp"])
            .current_dir(&desk.work)
            .envs(env.clone())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let explain = async || {
        format!(
            "The room holds {:#?}\nThe runner's log:\n{}\nThe agent's logs:\n{}",
            room_messages(&hub.ws_url(), coder.token.expose(), "build").await,
            std::fs::read_to_string(&runner_log).unwrap_or_default(),
            agent_clis::files_text(&agent_logs, |_| true),
        )
    };
    let replied = async |text: &str| {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !said(&hub, &coder, "build", text).await {
            if Instant::now() > deadline {
                panic!(
                    "the agent never said {text:?} in 120 s. {}",
                    explain().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let mut running = runner();
    desk.ok(&[
        "send",
        "build",
        "@dana/coder please review the parser (rt-review)",
    ])
    .await;
    replied("The parser looks right.").await;
    // Roundtable's tools were in the session though no file was edited for them.
    let first = server
        .model_calls()
        .iter()
        .filter_map(|exchange| exchange.request.clone())
        .find(|request| !request.tools.is_empty())
        .unwrap();
    assert!(
        ["mcp__roundtable__send_message", "roundtable_send_message"]
            .iter()
            .any(|tool| first.offers(tool)),
        "{:?}",
        first.tools
    );

    // The agent's plan reaches the person's tasks board.
    desk.ok(&["send", "build", "@dana/coder plan the review (rt-plan)"])
        .await;
    replied("Planned.").await;
    eventually(
        "the plan on the tasks board",
        Duration::from_secs(60),
        async || {
            let board = json(&desk.ok(&["--json", "tasks"]).await);
            board["lanes"]
                .as_array()?
                .iter()
                .filter(|lane| lane["agent_handle"] == "dana/coder")
                .flat_map(|lane| lane["tasks"].as_array().into_iter().flatten())
                .any(|task| task["title"] == "Review the parser")
                .then_some(())
        },
    )
    .await;

    // An edit reaches the files of its session (the agent may ask first: the person allows).
    desk.ok(&["send", "build", "@dana/coder write the notes (rt-edit)"])
        .await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !said(&hub, &coder, "build", "Noted.").await {
        if let Some((ping, options)) = open_permission(&desk).await {
            desk.ok(&["answer", &ping, allowing(&options)]).await;
        }
        if Instant::now() > deadline {
            panic!(
                "the agent never said \"Noted.\" in 120 s. {}",
                explain().await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let notes = desk.work.join("notes.md");
    assert!(notes.exists(), "{}", explain().await);
    let framework = roundtable_core::local_agents::AgentCli::parse(cli)
        .unwrap()
        .framework();
    eventually(
        "the edit among its session's files",
        Duration::from_secs(30),
        async || {
            let scan = json(&desk.ok(&["--json", "scan"]).await);
            touched(scanned_session(&scan, framework), &notes).then_some(())
        },
    )
    .await;

    // The agent asks before running a command; the person allows it from their CLI.
    desk.ok(&["send", "build", "@dana/coder run the tests (rt-checks)"])
        .await;
    let (ping, options) = eventually("the permission ping", Duration::from_secs(60), async || {
        open_permission(&desk).await
    })
    .await;
    desk.ok(&["answer", &ping, allowing(&options)]).await;
    replied("Tests ran.").await;
    assert!(desk.work.join("ran.txt").exists());

    // The runner is killed and started again: the room's session is loaded again, and the
    // agent remembers.
    let _ = running.start_kill();
    let _ = running.wait().await;
    running = runner();
    desk.ok(&[
        "send",
        "build",
        "@dana/coder what did I ask first (rt-first)",
    ])
    .await;
    replied("You asked me to review the parser.").await;

    // Paused, it is not prompted; resumed, it answers what waited.
    desk.ok(&["agents", "pause", "dana/coder"]).await;
    desk.ok(&[
        "send",
        "build",
        "@dana/coder after the pause, one more (rt-pause)",
    ])
    .await;
    let token = desk.home.profile("dana").token.expose().to_owned();
    eventually(
        "the agent says it is paused",
        Duration::from_secs(60),
        async || {
            roundtable_e2e::room_bodies(&hub.ws_url(), &token, "build", "status")
                .await
                .iter()
                .any(|body| {
                    body["detail"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("paused by")
                })
                .then_some(())
        },
    )
    .await;
    // No model call carries the mention that waits (an agent's own calls after its last
    // turn, a title say, may still come: they are not prompts).
    let prompted = server.model_calls().iter().any(|exchange| {
        exchange
            .request
            .as_ref()
            .is_some_and(|request| request.raw.to_string().contains("rt-pause"))
    });
    assert!(!prompted, "prompted while paused");
    desk.ok(&["agents", "resume", "dana/coder"]).await;
    replied("Back at it.").await;
    // Each permission was asked of the person once, over ACP: no hook asked it again, so no
    // question is left open after its tool ran.
    let pings = json(&desk.ok(&["--json", "pings", "--all"]).await);
    let open: Vec<&Value> = pings
        .as_array()
        .unwrap()
        .iter()
        .filter(|ping| ping["state"] == "open")
        .collect();
    assert!(open.is_empty(), "left open: {open:#?}");
    let _ = running.start_kill();
    let _ = running.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_over_acp_answers_in_the_room_plans_asks_its_person_and_resumes_its_session() {
    if !real_clis_present() {
        return;
    }
    let tools = AcpTools {
        shell: || {
            Reply::call(
                "bash",
                serde_json::json!({"command": "touch ran.txt && echo ran", "description": "Run the tests"}),
            )
        },
        edit: |file| {
            Reply::call(
                "write",
                serde_json::json!({"filePath": file, "content": "Parser notes\n"}),
            )
        },
        plan: |_| {
            Reply::call(
                "todowrite",
                serde_json::json!({"todos": [
                    {"content": "Review the parser", "status": "in_progress", "priority": "high"}]}),
            )
        },
    };
    acp_journey("opencode", tools, |desk, base| {
        let mut setup = desk.setup("");
        // OpenCode asks before it runs a command: the question comes to the runner over ACP.
        setup.extra_config = r#"{"permission": {"bash": "ask"}}"#.into();
        agent_clis::prepare_opencode(base, &setup).unwrap();
        (
            agent_clis::opencode_command(&setup).env,
            desk.user_home().join(".local/share/opencode/log"),
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_over_its_acp_adapter_answers_in_the_room_plans_asks_its_person_and_resumes_its_session()
 {
    if !real_clis_present() {
        return;
    }
    let tools = AcpTools {
        shell: || {
            Reply::call(
                "Bash",
                serde_json::json!({"command": "touch ran.txt && echo ran", "description": "Run the tests"}),
            )
        },
        edit: |file| {
            Reply::call(
                "Write",
                serde_json::json!({"file_path": file, "content": "Parser notes\n"}),
            )
        },
        plan: |request| {
            if request.offers("TaskCreate") {
                Reply::call(
                    "TaskCreate",
                    serde_json::json!({"subject": "Review the parser", "description": "Read it through",
                        "activeForm": "Reviewing the parser"}),
                )
            } else {
                Reply::call(
                    "TodoWrite",
                    serde_json::json!({"todos": [{"content": "Review the parser",
                        "status": "in_progress", "activeForm": "Reviewing the parser"}]}),
                )
            }
        },
    };
    acp_journey("claude", tools, |desk, base| {
        let mut setup = desk.setup("");
        // The person's permission mode is Claude Code's default one, which asks.
        setup.extra_config = r#"{"permissions": {"defaultMode": "default"}}"#.into();
        agent_clis::prepare_claude(&setup).unwrap();
        (
            agent_clis::claude_command(base, &setup).env,
            desk.user_home().join(".claude/projects"),
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_over_its_acp_adapter_answers_in_the_room_plans_asks_its_person_and_resumes_its_session()
 {
    if !real_clis_present() {
        return;
    }
    let tools = AcpTools {
        shell: || {
            Reply::call(
                "exec_command",
                serde_json::json!({"cmd": "touch ran.txt && echo ran",
                    "sandbox_permissions": "require_escalated", "justification": "Run the tests"}),
            )
        },
        edit: |file| {
            Reply::call(
                "apply_patch",
                Value::String(format!(
                    "*** Begin Patch\n*** Add File: {}\n+Parser notes\n*** End Patch\n",
                    file.display()
                )),
            )
        },
        plan: |_| {
            Reply::call(
                "update_plan",
                serde_json::json!({"plan": [{"step": "Review the parser", "status": "in_progress"}]}),
            )
        },
    };
    acp_journey("codex", tools, |desk, base| {
        let mut setup = desk.setup("");
        setup.extra_config = format!(
            "[projects.{}]\ntrust_level = \"trusted\"",
            serde_json::to_string(&desk.work.display().to_string()).unwrap()
        );
        agent_clis::prepare_codex(base, &setup).unwrap();
        // The person trusts the project and lets Codex ask before it leaves its sandbox.
        let config = desk.user_home().join(".codex/config.toml");
        let written = std::fs::read_to_string(&config).unwrap();
        std::fs::write(
            &config,
            format!(
                "approval_policy = \"on-request\"\nsandbox_mode = \"workspace-write\"\n{written}"
            ),
        )
        .unwrap();
        (
            agent_clis::codex_env(&setup),
            desk.user_home().join(".codex/log"),
        )
    })
    .await;
}

/// An ACP agent that is none of the CLIs Roundtable knows: an agent registered with no CLI,
/// run with its ACP program given (here OpenCode's ACP mode, started as an unknown program:
/// Roundtable reads none of its files for it). It answers in the room with Roundtable's tools,
/// the file its tool call edits marks its component on the architecture board (from ACP
/// alone), and its session, bound to the room, is loaded again after the runner is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acp_agent_roundtable_knows_nothing_of_answers_in_the_room_and_keeps_its_session() {
    if !real_clis_present() {
        return;
    }
    let hub = Hub::start(&[]).await;
    let desk = Desk::new();
    desk.home.signup(&hub, "dana").await;
    let tools = AcpTools {
        shell: || Reply::text("no shell here"),
        plan: |_| Reply::text("no plan here"),
        edit: |file| {
            Reply::call(
                "write",
                serde_json::json!({"filePath": file, "content": "Parser notes\n"}),
            )
        },
    };
    // The project is a repository whose architecture has the notes as a component.
    std::fs::create_dir_all(desk.work.join(".git")).unwrap();
    std::fs::create_dir_all(desk.work.join(".roundtable")).unwrap();
    std::fs::write(
        desk.work.join(".roundtable/architecture.toml"),
        "[[components]]\nid = \"notes\"\nname = \"Notes\"\npaths = [\"notes.md\"]\ndepends_on = []\n",
    )
    .unwrap();
    let server = ModelServer::start(journey_script(tools, desk.work.clone())).await;
    let setup = desk.setup("");
    agent_clis::prepare_opencode(&server.base_url(), &setup).unwrap();
    desk.ok(&["agents", "register", "helper"]).await;
    desk.ok(&[
        "room",
        "create",
        "--title",
        "build",
        "--member",
        "dana/helper",
    ])
    .await;
    let helper = desk.home.profile("dana.helper");
    let program = agent_clis::cli_bin_dir().join("opencode");
    let runner = || {
        desk.home
            .command(
                "dana",
                &[
                    "run",
                    "--agent",
                    "dana/helper",
                    "--acp",
                    "--acp-agent",
                    &program.display().to_string(),
                    "--arg",
                    "acp",
                ],
            )
            .current_dir(&desk.work)
            .envs(agent_clis::opencode_command(&setup).env)
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let replied = async |text: &str| {
        eventually("the agent's reply", Duration::from_secs(120), async || {
            said(&hub, &helper, "build", text).await.then_some(())
        })
        .await
    };
    let mut running = runner();
    desk.ok(&[
        "send",
        "build",
        "@dana/helper please review the parser (rt-review)",
    ])
    .await;
    replied("The parser looks right.").await;
    let first = server
        .model_calls()
        .iter()
        .filter_map(|exchange| exchange.request.clone())
        .find(|request| !request.tools.is_empty())
        .unwrap();
    assert!(first.offers("roundtable_send_message"), "{:?}", first.tools);
    desk.ok(&["send", "build", "@dana/helper write the notes (rt-edit)"])
        .await;
    replied("Noted.").await;
    eventually(
        "the edit on the architecture board",
        Duration::from_secs(60),
        async || {
            let boards = json(&desk.ok(&["--json", "arch"]).await);
            boards
                .as_array()?
                .iter()
                .flat_map(|board| board["components"].as_array().into_iter().flatten())
                .filter(|component| component["id"] == "notes")
                .flat_map(|component| component["agents"].as_array().into_iter().flatten())
                .any(|agent| agent["handle"] == "dana/helper")
                .then_some(())
        },
    )
    .await;
    // Its turns' tokens, from ACP's `usage`, count as its usage, priced by the model its
    // sessions named. (OpenCode's ACP counts each turn's last model call only: the figure is
    // at most what the server sent, never more.)
    let usage = eventually("the agent's usage", Duration::from_secs(60), async || {
        let rows = json(&desk.ok(&["--json", "usage", "--by", "agent"]).await);
        rows.as_array()?
            .iter()
            .find(|row| row["group"]["agent"] == "dana/helper")
            .cloned()
    })
    .await;
    let sent = server
        .model_calls()
        .iter()
        .filter(|exchange| {
            exchange
                .request
                .as_ref()
                .is_some_and(|r| !r.tools.is_empty())
        })
        .filter_map(Exchange::usage)
        .fold(Usage::default(), |total, usage| total.plus(&usage));
    let (input, output) = (
        usage["input"].as_u64().unwrap(),
        usage["output"].as_u64().unwrap(),
    );
    assert!(
        input > 0 && output > 0 && input <= sent.input && output <= sent.output,
        "{usage} against {sent:?}"
    );
    assert!(
        usage["cost_usd"].as_f64().unwrap() > 0.0 && usage["unpriced_entries"] == 0,
        "{usage}"
    );
    let _ = running.start_kill();
    let _ = running.wait().await;
    running = runner();
    desk.ok(&[
        "send",
        "build",
        "@dana/helper what did I ask first (rt-first)",
    ])
    .await;
    replied("You asked me to review the parser.").await;
    let _ = running.start_kill();
    let _ = running.wait().await;
}
