//! Local agent CLIs end to end, with the project's fake `claude` and `codex` on `PATH` and a
//! temporary `HOME`: detection, onboarding that keeps every byte of the person's own
//! configuration and offboarding that restores it, hooks that deliver messages to a session
//! at its stop, and headless agents that talk to each other with no person in the path —
//! across a SIGKILL of their runner.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use roundtable_e2e::{Home, Hub, fixtures, json, room_messages, room_texts};
use roundtable_testkit::roundtable_bin;
use tokio::io::AsyncWriteExt;

/// A person's machine: a `HOME` with agent CLIs' configurations, the fakes on `PATH`.
struct Machine {
    home: Home,
    user_home: tempfile::TempDir,
    log: PathBuf,
}

impl Machine {
    fn new() -> Machine {
        let user_home = tempfile::tempdir().unwrap();
        let log = user_home.path().join("fake-agents.jsonl");
        Machine {
            home: Home::default(),
            user_home,
            log,
        }
    }

    fn path(&self) -> std::ffi::OsString {
        let mut dirs = vec![fixtures().join("agent-clis")];
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(dirs).unwrap()
    }

    fn command(&self, profile: &str, args: &[&str]) -> tokio::process::Command {
        let mut command = self.home.command(profile, args);
        command
            .env("HOME", self.user_home.path())
            .env("PATH", self.path())
            .env("FAKE_AGENT_LOG", &self.log)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME");
        command
    }

    async fn ok(&self, profile: &str, args: &[&str]) -> String {
        let output = self.command(profile, args).output().await.unwrap();
        assert!(
            output.status.success(),
            "roundtable {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    fn file(&self, relative: &str) -> PathBuf {
        self.user_home.path().join(relative)
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.file(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.file(relative)).unwrap()
    }

    /// The fakes' invocations so far.
    fn invocations(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(json)
            .collect()
    }
}

const CLAUDE_JSON: &str = r#"{
  "numStartups": 12,
  "mcpServers": {
    "github": {"type": "stdio", "command": "gh-mcp", "args": []}
  },
  "projects": {"/home/dana/src": {"allowedTools": []}}
}
"#;

const CLAUDE_SETTINGS: &str = "{\n\t\"permissions\": {\"allow\": [\"Bash(ls:*)\"]},\n\t\"hooks\": {\n\t\t\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send done\"}]}]\n\t}\n}\n";

const CODEX_CONFIG: &str = r#"# Dana's Codex settings
model = "gpt-5.3-codex"
notify = ["python3", "/home/dana/bin/notify.py"]   # desktop notice

[mcp_servers.github]
command = "gh-mcp"
args = []

[profiles.fast]
model_reasoning_effort = "low"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onboarding_wires_the_clis_and_offboarding_restores_every_byte() {
    let hub = Hub::start(&[]).await;
    let machine = Machine::new();
    machine.home.signup(&hub, "dana").await;
    machine.write(".claude.json", CLAUDE_JSON);
    machine.write(".claude/settings.json", CLAUDE_SETTINGS);
    machine.write(".codex/config.toml", CODEX_CONFIG);

    let detected = json(&machine.ok("dana", &["--json", "agents", "detect"]).await);
    let listed: Vec<(&str, &str)> = detected
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["cli"].as_str().unwrap(),
                d["version"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        listed.contains(&("claude", "2.1.328 (Claude Code)")),
        "{listed:?}"
    );
    assert!(
        listed.contains(&("codex", "codex-cli 0.169.0")),
        "{listed:?}"
    );
    assert!(
        detected
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["onboarded"] == false)
    );
    // Each CLI comes with what Roundtable does with it.
    let text = machine.ok("dana", &["agents", "detect"]).await;
    assert!(
        text.contains("permissions: asked of you in Roundtable")
            && text.contains("task list:   update_plan"),
        "{text}"
    );

    // One step each; the report says which lines went into which file.
    let claude = json(
        &machine
            .ok(
                "dana",
                &["--json", "agents", "onboard", "claude", "--name", "writer"],
            )
            .await,
    );
    assert_eq!(claude["handle"], "dana/writer");
    let files: Vec<&str> = claude["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(files.len(), 2, "{claude}");
    let codex = json(
        &machine
            .ok(
                "dana",
                &["--json", "agents", "onboard", "codex", "--name", "reviewer"],
            )
            .await,
    );
    // config.toml (the server, the plan tool, the hooks' trust) and hooks.json.
    assert_eq!(codex["changes"].as_array().unwrap().len(), 2, "{codex}");

    // What was added, and only that.
    let claude_json: serde_json::Value =
        serde_json::from_str(&machine.read(".claude.json")).unwrap();
    let server = &claude_json["mcpServers"]["roundtable"];
    assert_eq!(server["command"], roundtable_bin().display().to_string());
    assert_eq!(
        server["args"],
        serde_json::json!(["mcp", "--agent", "dana/writer"])
    );
    assert_eq!(claude_json["mcpServers"]["github"]["command"], "gh-mcp");
    let settings: serde_json::Value =
        serde_json::from_str(&machine.read(".claude/settings.json")).unwrap();
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "Notification",
        "PermissionRequest",
        "Stop",
    ] {
        let command =
            settings["hooks"][event].as_array().unwrap().last().unwrap()["hooks"][0]["command"]
                .as_str()
                .unwrap()
                .to_owned();
        assert!(
            command.contains("hook claude --agent dana/writer"),
            "{event}: {command}"
        );
    }
    assert_eq!(
        settings["hooks"]["Stop"][0]["hooks"][0]["command"], "notify-send done",
        "the person's own Stop hook stays first"
    );
    let config = machine.read(".codex/config.toml");
    assert!(config.starts_with("# Dana's Codex settings\nmodel = \"gpt-5.3-codex\"\n"));
    let parsed: toml::Table = toml::from_str(&config).unwrap();
    // The person's notify stays theirs: Codex's hooks do Roundtable's work.
    assert_eq!(parsed["notify"].as_array().unwrap().len(), 2, "{config}");
    assert_eq!(settings["env"]["CLAUDE_CODE_ENABLE_TODO_TOOLS"], "1");
    assert_eq!(
        parsed["tools"]["update_plan"]["enabled"].as_bool(),
        Some(true)
    );
    let hooks: serde_json::Value =
        serde_json::from_str(&machine.read(".codex/hooks.json")).unwrap();
    let trusted = parsed["hooks"]["state"].as_table().unwrap();
    for (event, key) in [
        ("SessionStart", "session_start"),
        ("UserPromptSubmit", "user_prompt_submit"),
        ("PostToolUse", "post_tool_use"),
        ("PermissionRequest", "permission_request"),
        ("Stop", "stop"),
    ] {
        let command = hooks["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        assert!(
            command.contains("hook codex --agent dana/reviewer"),
            "{command}"
        );
        let trust_key = format!("{}:{key}:0:0", machine.file(".codex/hooks.json").display());
        assert!(trusted.contains_key(&trust_key), "{trust_key}: {trusted:?}");
    }
    assert_eq!(
        parsed["mcp_servers"]["roundtable"]["args"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // The agents' tokens live in their own profiles, not in any agent CLI's configuration.
    let token = machine
        .home
        .profile("dana.writer")
        .token
        .expose()
        .to_owned();
    for file in [
        ".claude.json",
        ".claude/settings.json",
        ".codex/config.toml",
        ".codex/hooks.json",
    ] {
        assert!(!machine.read(file).contains(&token), "{file} holds a token");
    }

    // Detection says who is onboarded where; onboarding again changes nothing.
    let detected = json(&machine.ok("dana", &["--json", "agents", "detect"]).await);
    let claude_entry = detected
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["cli"] == "claude")
        .unwrap();
    assert_eq!(
        (&claude_entry["onboarded"], &claude_entry["handle"]),
        (&serde_json::json!(true), &serde_json::json!("dana/writer"))
    );
    let before_again = machine.read(".claude/settings.json");
    let again = json(
        &machine
            .ok(
                "dana",
                &["--json", "agents", "onboard", "claude", "--name", "writer"],
            )
            .await,
    );
    assert_eq!(again["unchanged"], true, "{again}");
    assert_eq!(machine.read(".claude/settings.json"), before_again);
    // Another agent on the same CLI is refused with what to do.
    let output = machine
        .command("dana", &["agents", "onboard", "claude", "--name", "other"])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("offboard it first"));

    // Offboarding gives back the very bytes, comments and tabs included.
    machine
        .ok(
            "dana",
            &["agents", "offboard", "claude", "--name", "writer"],
        )
        .await;
    machine
        .ok(
            "dana",
            &["agents", "offboard", "codex", "--name", "reviewer"],
        )
        .await;
    assert_eq!(machine.read(".claude.json"), CLAUDE_JSON);
    assert_eq!(machine.read(".claude/settings.json"), CLAUDE_SETTINGS);
    assert_eq!(machine.read(".codex/config.toml"), CODEX_CONFIG);
    assert!(
        !machine.file(".codex/hooks.json").exists(),
        "the hooks file onboarding made is gone"
    );

    // A configuration that cannot be parsed is left untouched, with a clear error, and no
    // agent is registered for it.
    machine.write(".gemini/settings.json", "{ \"theme\": \"dark\", oops }");
    let output = machine
        .command("dana", &["agents", "onboard", "gemini", "--name", "helper"])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot be parsed") && stderr.contains("untouched"),
        "{stderr}"
    );
    assert_eq!(
        machine.read(".gemini/settings.json"),
        "{ \"theme\": \"dark\", oops }"
    );
    assert!(!machine.home.profiles().join("dana.helper").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_hands_unread_messages_to_the_session_and_lets_a_quiet_one_rest() {
    let mut hub = Hub::start(&[]).await;
    let machine = Machine::new();
    machine.home.signup(&hub, "dana").await;
    machine
        .ok(
            "dana",
            &[
                "agents",
                "onboard",
                "claude",
                "--name",
                "writer",
                "--listen-seconds",
                "1",
            ],
        )
        .await;
    machine
        .ok(
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
    // The session's transcript: where Claude Code writes what the person types.
    let transcript = machine.file("transcript.jsonl");
    std::fs::write(&transcript, "").unwrap();
    let transcript_path = transcript.display().to_string();
    // As a session a person sits at runs it (`claude` in a terminal), `claude -p`, or a
    // runner over ACP: as its environment says.
    let hook_with = |event: &'static str, env: &'static [(&'static str, &'static str)]| {
        let (machine, transcript_path) = (&machine, transcript_path.clone());
        async move {
            let started = Instant::now();
            let mut child = machine
                .command("dana", &["hook", "claude", "--agent", "dana/writer"])
                .envs(env.iter().copied())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let input = serde_json::json!({
                "session_id": "7d3c1c2e-0000-4000-8000-000000000001",
                "transcript_path": transcript_path, "cwd": "/tmp", "hook_event_name": event,
                "stop_hook_active": false, "permission_mode": "default",
                "tool_name": "Bash", "tool_input": {"command": "cargo publish"},
                "message": "Claude needs your permission to use Bash",
                "notification_type": "permission_prompt",
            });
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.to_string().as_bytes()).await.unwrap();
            drop(stdin);
            let output = child.wait_with_output().await.unwrap();
            assert!(output.status.success(), "a hook always exits 0");
            (String::from_utf8(output.stdout).unwrap(), started.elapsed())
        }
    };
    let hook = |event: &'static str| hook_with(event, &[("CLAUDE_CODE_SESSION_ATTENDED", "1")]);

    // Nothing unread, and the agent's MCP bridge in step with the hub (here a core that
    // serves hand-offs, as `roundtable mcp` runs one): the prompt hook reads the cache the
    // bridge keeps and has nothing to do, quickly.
    let bridge = roundtable_core::Core::open(machine.home.profile("dana.writer"))
        .await
        .unwrap();
    let bridging = bridge.start_with(roundtable_core::SyncOptions {
        serve_hand_offs: true,
    });
    bridge.synced(Duration::from_secs(30)).await.unwrap();
    let (out, took) = hook("UserPromptSubmit").await;
    assert_eq!(out, "");
    eprintln!("a hook with nothing to do took {took:?}");
    assert!(took < Duration::from_millis(100), "{took:?}");
    bridging.stop().await;
    drop(bridge);
    // With no bridge, each hook catches up with the hub itself. The stop hook listens for
    // its window, then lets the session rest.
    let (out, took) = hook("Stop").await;
    assert_eq!(out, "");
    assert!(took >= Duration::from_secs(1), "it listened: {took:?}");
    // With no one at the session (`claude -p`), a turn's end does not listen: the run ends.
    std::fs::write(
        machine.home.profiles().join("dana.writer/hooks.toml"),
        "listen_s = 600\npermission_wait_s = 120\n",
    )
    .unwrap();
    let (out, took) = hook_with("Stop", &[("CLAUDE_CODE_SESSION_ATTENDED", "0")]).await;
    assert_eq!(out, "");
    assert!(took < Duration::from_secs(30), "{took:?}");
    // A person at the session types while it listens: the listening ends then, and their
    // prompt goes through (Claude Code writes it to the transcript at once).
    let listened = listening_statuses(&hub, &machine).await;
    let listening = hook("Stop");
    let person = async {
        until("the hook listens", async || {
            listening_statuses(&hub, &machine).await > listened
        })
        .await;
        std::fs::write(
            &transcript,
            concat!(
                r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-12-02T02:46:14.167Z","sessionId":"7d3c1c2e-0000-4000-8000-000000000001","content":"what about tests?"}"#,
                "\n"
            ),
        )
        .unwrap();
    };
    let ((out, took), ()) = tokio::join!(listening, person);
    assert_eq!(out, "");
    assert!(
        took < Duration::from_secs(30),
        "it stopped listening: {took:?}"
    );
    std::fs::write(
        machine.home.profiles().join("dana.writer/hooks.toml"),
        "listen_s = 1\npermission_wait_s = 120\n",
    )
    .unwrap();

    // A mention waits: the stop is blocked with it as the reason, and it counts as read.
    machine
        .ok(
            "dana",
            &["send", "work", "@dana/writer review the lexer please"],
        )
        .await;
    let (out, _) = hook("Stop").await;
    let reply = json(&out);
    assert_eq!(reply["decision"], "block");
    // Handed over as room content: one JSON line per message, inside its markers.
    let reason = reply["reason"].as_str().unwrap();
    let item = reason
        .lines()
        .skip_while(|line| *line != "<roundtable-messages>")
        .nth(1)
        .unwrap();
    let item: serde_json::Value = serde_json::from_str(item).unwrap();
    assert_eq!(item["from"], "dana", "{reply}");
    assert_eq!(item["room"], "work", "{reply}");
    assert_eq!(
        item["text"], "@dana/writer review the lexer please",
        "{reply}"
    );
    assert!(item["seq"].as_u64().is_some(), "{reply}");
    assert!(
        item["id"].as_str().is_some_and(|id| id.starts_with("e_")),
        "the id a reply answers with: {reply}"
    );
    // One that arrives while the hook listens blocks the stop as well.
    let listened = listening_statuses(&hub, &machine).await;
    let listening = hook("Stop");
    let writer = async {
        until("the hook listens", async || {
            listening_statuses(&hub, &machine).await > listened
        })
        .await;
        machine
            .ok("dana", &["send", "work", "@dana/writer and the parser"])
            .await;
    };
    let ((out, _), ()) = tokio::join!(listening, writer);
    assert!(
        json(&out)["reason"]
            .as_str()
            .unwrap()
            .contains("and the parser")
    );
    let (out, _) = hook("UserPromptSubmit").await;
    assert_eq!(out, "", "nothing left unread");

    // SessionStart binds the session to the agent.
    let (out, _) = hook("SessionStart").await;
    assert!(
        json(&out)["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("dana/writer")
    );
    let agent = roundtable_core::Core::open(machine.home.profile("dana.writer"))
        .await
        .unwrap();
    let sessions = agent.read(|cache| cache.sessions()).await.unwrap();
    assert_eq!(
        (
            sessions[0].framework.as_str(),
            sessions[0].transcript.as_deref()
        ),
        ("claude-code", Some(transcript_path.as_str()))
    );
    drop(agent);

    // A permission request is answered by the person from anywhere: here, their CLI.
    let asking = hook("PermissionRequest");
    let person = async {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let pings = json(&machine.ok("dana", &["--json", "pings"]).await);
            if let Some(ping) = pings.as_array().unwrap().first() {
                assert_eq!(ping["options"], serde_json::json!(["Allow", "Deny"]));
                machine
                    .ok("dana", &["answer", ping["ping"].as_str().unwrap(), "Allow"])
                    .await;
                return;
            }
            assert!(Instant::now() < deadline, "the permission ping never came");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let ((out, _), ()) = tokio::join!(asking, person);
    assert_eq!(
        json(&out)["hookSpecificOutput"]["decision"]["behavior"],
        "allow"
    );
    // Unanswered within its wait, it lets the terminal ask, as it would have.
    std::fs::write(
        machine.home.profiles().join("dana.writer/hooks.toml"),
        "listen_s = 1\npermission_wait_s = 1\n",
    )
    .unwrap();
    let (out, took) = hook("PermissionRequest").await;
    assert_eq!(out, "");
    assert!(took < Duration::from_secs(10), "{took:?}");
    for ping in json(&machine.ok("dana", &["--json", "pings"]).await)
        .as_array()
        .unwrap()
    {
        machine
            .ok("dana", &["answer", ping["ping"].as_str().unwrap(), "Deny"])
            .await;
    }
    // Under a runner that drives it over ACP, Claude Code asks its permissions over ACP and
    // the runner asks the person: its hooks ask nothing of their own (no ping, open or not).
    let all_pings = async || json(&machine.ok("dana", &["--json", "pings", "--all"]).await);
    let before = all_pings().await;
    let over_acp = &[
        ("CLAUDE_CODE_SESSION_ATTENDED", "0"),
        ("ROUNDTABLE_RUN", "1"),
        ("ROUNDTABLE_ACP", "1"),
    ];
    for event in ["PermissionRequest", "Notification"] {
        let (out, _) = hook_with(event, over_acp).await;
        assert_eq!(out, "", "{event}");
    }
    let after = all_pings().await;
    assert_eq!(
        after.as_array().map(Vec::len),
        before.as_array().map(Vec::len),
        "the hooks asked over ACP: {after}"
    );
    // A notification raises a ping for the person and says the agent waits for them.
    hook("Notification").await;
    let pings = json(&machine.ok("dana", &["--json", "pings"]).await);
    assert_eq!(pings.as_array().unwrap().len(), 1, "{pings}");

    // With the hub down, a hook exits 0 at once.
    hub.stop().await;
    let (out, took) = hook("Stop").await;
    assert_eq!(out, "");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// A session whose MCP bridge is not running (`claude --strict-mcp-config`, a bridge that
/// could not start): nothing keeps the agent's cache in step with the hub, so each hook that
/// hands messages over catches up with the hub itself first. A mention sent since the
/// session last synced reaches it at a prompt's start, at a tool's end, and at a turn's end
/// of a run no one sits at (which does not listen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_with_no_bridge_running_catch_up_with_the_hub_before_they_answer() {
    let hub = Hub::start(&[]).await;
    let machine = Machine::new();
    machine.home.signup(&hub, "dana").await;
    machine
        .ok("dana", &["agents", "onboard", "claude", "--name", "writer"])
        .await;
    machine
        .ok(
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
    let hook = |event: &'static str| {
        let machine = &machine;
        async move {
            let mut child = machine
                .command("dana", &["hook", "claude", "--agent", "dana/writer"])
                // `claude -p`: no one sits at the session, so a turn's end does not listen.
                .env("CLAUDE_CODE_SESSION_ATTENDED", "0")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let input = serde_json::json!({
                "session_id": "7d3c1c2e-0000-4000-8000-000000000002",
                "transcript_path": "/nonexistent/transcript.jsonl", "cwd": "/tmp",
                "hook_event_name": event, "stop_hook_active": false,
                "permission_mode": "default", "source": "startup",
                "tool_name": "Bash", "tool_input": {"command": "cargo test"},
                "tool_response": {"stdout": "ok"},
            });
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.to_string().as_bytes()).await.unwrap();
            drop(stdin);
            let output = child.wait_with_output().await.unwrap();
            assert!(output.status.success(), "a hook always exits 0");
            String::from_utf8(output.stdout).unwrap()
        }
    };
    // The session starts: its status reaches the hub, and the agent's cache is in step.
    hook("SessionStart").await;
    // Then, for each moment, a mention the hub has and the cache does not.
    let mut missed = Vec::new();
    for (event, text) in [
        ("UserPromptSubmit", "@dana/writer the lexer first"),
        ("PostToolUse", "@dana/writer and keep the tokens small"),
        ("Stop", "@dana/writer then the parser"),
    ] {
        machine.ok("dana", &["send", "work", text]).await;
        let out = hook(event).await;
        let handed = if out.is_empty() {
            None
        } else {
            let reply = json(&out);
            match event {
                "Stop" => (reply["decision"] == "block")
                    .then(|| reply["reason"].as_str().unwrap_or_default().to_owned()),
                _ => reply["hookSpecificOutput"]["additionalContext"]
                    .as_str()
                    .map(str::to_owned),
            }
        };
        if !handed.is_some_and(|said| said.contains(text)) {
            missed.push(format!("{event}: {out:?}"));
        }
    }
    assert!(
        missed.is_empty(),
        "each hook hands over the mention the hub had: {missed:#?}"
    );
    // Handed over, each counts as read: nothing is handed over twice.
    assert_eq!(hook("UserPromptSubmit").await, "");
}

fn sessions_of(invocations: &[serde_json::Value], cli: &str) -> Vec<(bool, String)> {
    invocations
        .iter()
        .filter(|call| call["cli"] == cli)
        .map(|call| {
            (
                call["resumed"].as_bool().unwrap_or(false),
                call["session"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn wait_for_text(hub: &Hub, token: &str, text: &str, patience: Duration) -> Vec<String> {
    wait_for_text_in(hub, token, "design", text, patience).await
}

async fn wait_for_text_in(
    hub: &Hub,
    token: &str,
    room: &str,
    text: &str,
    patience: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + patience;
    loop {
        let texts = room_texts(&hub.ws_url(), token, room).await;
        if texts.iter().any(|t| t == text) {
            return texts;
        }
        assert!(Instant::now() < deadline, "{text:?} never came: {texts:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn runner(machine: &Machine, agent: &str, peer: &str, delay_ms: u32) -> tokio::process::Child {
    let workdir = machine.file("project");
    std::fs::create_dir_all(&workdir).unwrap();
    let mut command = machine.command("dana", &["run", "--agent", agent]);
    command
        .current_dir(&workdir)
        .env("FAKE_AGENT_PEER", peer)
        .env("FAKE_AGENT_ROUNDS", "3")
        .env("FAKE_AGENT_DELAY_MS", delay_ms.to_string())
        .stdout(std::process::Stdio::null());
    command.spawn().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_headless_agents_hold_a_conversation_across_a_runner_crash() {
    let hub = Hub::start(&[]).await;
    let machine = Machine::new();
    machine.home.signup(&hub, "dana").await;
    machine
        .ok("dana", &["agents", "onboard", "claude", "--name", "writer"])
        .await;
    machine
        .ok(
            "dana",
            &["agents", "onboard", "codex", "--name", "reviewer"],
        )
        .await;
    machine
        .ok(
            "dana",
            &[
                "room",
                "create",
                "--title",
                "design",
                "--member",
                "dana/writer",
                "--member",
                "dana/reviewer",
            ],
        )
        .await;
    let token = machine.home.profile("dana").token.expose().to_owned();
    let mut writer = runner(&machine, "dana/writer", "dana/reviewer", 2_000);
    let mut reviewer = runner(&machine, "dana/reviewer", "dana/writer", 0);

    // The person starts it; the agents go on by mentioning each other.
    machine
        .ok("dana", &["send", "design", "@dana/writer start the parser"])
        .await;
    wait_for_text(
        &hub,
        &token,
        "@dana/writer round 2",
        Duration::from_secs(60),
    )
    .await;
    // Once the writer's CLI has begun its turn for round 2 (the prompt is in its transcript;
    // the turn then takes 2 s), kill its runner.
    let deadline = Instant::now() + Duration::from_secs(60);
    while prompts_in(&machine.file(".claude/projects"), "@dana/writer round 2") == 0 {
        assert!(Instant::now() < deadline, "the writer never began round 2");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    writer.start_kill().unwrap();
    writer.wait().await.unwrap();
    let mut writer = runner(&machine, "dana/writer", "dana/reviewer", 0);
    let texts = wait_for_text(&hub, &token, "done after round 3", Duration::from_secs(60)).await;
    assert_eq!(
        texts,
        [
            "@dana/writer start the parser",
            "@dana/reviewer round 1",
            "@dana/writer round 2",
            "@dana/reviewer round 3",
            "done after round 3"
        ],
        "one message per round, the crash's included"
    );

    // Every later turn resumed the session its agent's first turn started.
    let invocations = machine.invocations();
    for cli in ["claude", "codex"] {
        let sessions = sessions_of(&invocations, cli);
        assert!(sessions.len() >= 2, "{cli}: {sessions:?}");
        assert!(!sessions[0].0, "{cli}'s first turn starts a session");
        for (resumed, session) in &sessions[1..] {
            assert!(resumed, "{cli}: {sessions:?}");
            assert_eq!(session, &sessions[0].1, "{cli}: {sessions:?}");
        }
    }
    // The killed turn had begun (its prompt is in the session's transcript) and the
    // restarted runner ran it again in the same session: the prompt is there twice.
    let session = &sessions_of(&invocations, "claude")[0].1;
    let transcript = find_file(
        &machine.file(".claude/projects"),
        &format!("{session}.jsonl"),
    )
    .expect("the writer's transcript");
    let prompts = std::fs::read_to_string(transcript)
        .unwrap()
        .lines()
        .map(json)
        .filter(|record| {
            record["type"] == "user"
                && record["message"]["content"]
                    .to_string()
                    .contains("@dana/writer round 2")
        })
        .count();
    assert_eq!(
        prompts, 2,
        "round 2 began before the crash and ran again after it"
    );
    writer.start_kill().unwrap();
    reviewer.start_kill().unwrap();
    let _ = writer.wait().await;
    let _ = reviewer.wait().await;
}

/// The first file called `name` under `dir`.
/// How many user prompts containing `text` the Claude Code transcripts under `dir` hold.
fn prompts_in(dir: &std::path::Path, text: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut count = 0;
    for path in entries.flatten().map(|entry| entry.path()) {
        if path.is_dir() {
            count += prompts_in(&path, text);
        } else if path.extension().is_some_and(|ext| ext == "jsonl") {
            let Ok(lines) = std::fs::read_to_string(&path) else {
                continue;
            };
            count += lines
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .filter(|record| {
                    record["type"] == "user"
                        && record["message"]["content"].to_string().contains(text)
                })
                .count();
        }
    }
    count
}

fn find_file(dir: &std::path::Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|file| file == name) {
            return Some(path);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_from_a_template_takes_a_request_with_no_one_in_between() {
    let hub = Hub::start(&[]).await;
    let machine = Machine::new();
    machine.home.signup(&hub, "dana").await;
    let team = json(
        &machine
            .ok(
                "dana",
                &[
                    "--json",
                    "team",
                    "create",
                    "--template",
                    "trio",
                    "--room",
                    "build",
                    "--cli",
                    "claude",
                    "--role-cli",
                    "developer=codex",
                ],
            )
            .await,
    );
    let members: Vec<(&str, &str)> = team["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["handle"].as_str().unwrap(), m["cli"].as_str().unwrap()))
        .collect();
    assert_eq!(
        members,
        [
            ("dana/build-manager", "claude"),
            ("dana/build-developer", "codex"),
            ("dana/build-architect", "claude")
        ]
    );
    let instructions = std::fs::read_to_string(
        machine
            .home
            .profiles()
            .join("dana.build-manager/instructions.md"),
    )
    .unwrap();
    assert!(
        instructions.contains("@dana/build-developer (the developer)"),
        "{instructions}"
    );

    // All three run headless; the person's request reaches the manager (who sees every
    // message of the room), who hands it to the developer, who answers.
    let workdir = machine.file("project");
    std::fs::create_dir_all(&workdir).unwrap();
    let mut run = machine.command(
        "dana",
        &[
            "run",
            "--agent",
            "dana/build-manager",
            "--agent",
            "dana/build-developer",
            "--agent",
            "dana/build-architect",
        ],
    );
    let mut run = run
        .current_dir(&workdir)
        .env("FAKE_AGENT_PEER", "dana/build-developer")
        .env("FAKE_AGENT_ROUNDS", "1")
        .spawn()
        .unwrap();
    machine
        .ok(
            "dana",
            &["send", "build", "build a parser for the config format"],
        )
        .await;
    let token = machine.home.profile("dana").token.expose().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let said = loop {
        let said = room_messages(&hub.ws_url(), &token, "build").await;
        if said.iter().any(|(_, text)| text == "done after round 1") {
            break said;
        }
        assert!(Instant::now() < deadline, "{said:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let texts: Vec<&str> = said.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(
        texts[..3],
        [
            "build a parser for the config format",
            "@dana/build-developer round 1",
            "done after round 1"
        ],
        "{said:?}"
    );
    // The manager, who sees every message, may answer the developer in turn (with one
    // round allowed, "done after round 1" too): the developer itself answered once.
    let developer = &said[2].0;
    assert_ne!(developer, &said[1].0, "{said:?}");
    assert_eq!(
        said.iter().filter(|(from, _)| from == developer).count(),
        1,
        "{said:?}"
    );
    let invocations = machine.invocations();
    let manager = invocations
        .iter()
        .find(|call| call["cli"] == "claude")
        .unwrap();
    assert!(
        manager["prompt"]
            .as_str()
            .unwrap()
            .contains("You are the manager"),
        "the first message of the manager's session carries its role: {manager}"
    );
    let developer = invocations
        .iter()
        .find(|call| call["cli"] == "codex")
        .unwrap();
    assert!(
        developer["argv"].to_string().contains(
            r#"mcp_servers.roundtable.args=[\"mcp\",\"--agent\",\"dana/build-developer\"]"#
        ),
        "the developer's runs have Roundtable's tools as itself: {developer}"
    );
    run.start_kill().unwrap();
    let _ = run.wait().await;
}

// The person's notify program is a `sh` script (Windows has no `sh`).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_notify_reaches_roundtable_and_still_runs_the_persons_own_program() {
    let hub = Hub::start(&[]).await;
    let machine = Machine::new();
    machine.home.signup(&hub, "dana").await;
    // The person's own notify program records what it was given.
    let seen = machine.file("notified.txt");
    let program = machine.file("bin/notify.sh");
    machine.write(
        "bin/notify.sh",
        &format!("#!/bin/sh\nprintf '%s' \"$1\" > '{}'\n", seen.display()),
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    machine.write(
        ".codex/config.toml",
        &format!("notify = [\"{}\"]\n", program.display()),
    );
    let report = json(
        &machine
            .ok(
                "dana",
                &["--json", "agents", "onboard", "codex", "--name", "reviewer"],
            )
            .await,
    );
    assert!(report["changes"][0]["backup"].is_string(), "{report}");

    // A turn of Codex: it runs `notify` with the turn's JSON as the last argument.
    let workdir = machine.file("project");
    std::fs::create_dir_all(&workdir).unwrap();
    let output = tokio::process::Command::new(fixtures().join("agent-clis/codex"))
        .args(["exec", "--json", "--skip-git-repo-check", "hello"])
        .current_dir(&workdir)
        .env("HOME", machine.user_home.path())
        .env("PATH", machine.path())
        .env("ROUNDTABLE_HOME", machine.home.dir.path())
        .env("FAKE_CODEX_WAIT_NOTIFY", "1")
        .env_remove("CODEX_HOME")
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let thread = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(json)
        .find(|event| event["type"] == "thread.started")
        .unwrap()["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The person's program got the turn, as before onboarding…
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.exists() {
        assert!(
            Instant::now() < deadline,
            "the person's notify program never ran"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let payload = json(&std::fs::read_to_string(&seen).unwrap());
    assert_eq!(payload["type"], "agent-turn-complete");
    assert_eq!(payload["thread-id"], thread.as_str());
    // …and the agent's profile knows the thread.
    let agent = roundtable_core::Core::open(machine.home.profile("dana.reviewer"))
        .await
        .unwrap();
    let sessions = agent.read(|cache| cache.sessions()).await.unwrap();
    assert_eq!(
        (
            sessions[0].framework.as_str(),
            sessions[0].session_id.as_str()
        ),
        ("codex", thread.as_str())
    );
    drop(agent);
    // Offboarding puts the person's notify back, byte for byte.
    machine
        .ok(
            "dana",
            &["agents", "offboard", "codex", "--name", "reviewer"],
        )
        .await;
    assert_eq!(
        machine.read(".codex/config.toml"),
        format!("notify = [\"{}\"]\n", program.display())
    );
}

/// A machine with dana, her writer on Claude Code (onboarded) and a room with it.
async fn writer_in_a_room(hub: &Hub) -> Machine {
    let machine = Machine::new();
    machine.home.signup(hub, "dana").await;
    machine
        .ok("dana", &["agents", "onboard", "claude", "--name", "writer"])
        .await;
    machine
        .ok(
            "dana",
            &[
                "room",
                "create",
                "--title",
                "design",
                "--member",
                "dana/writer",
            ],
        )
        .await;
    machine
}

/// `roundtable run` for the writer, answering `reply` after `delay_ms`.
fn writer_runner(
    machine: &Machine,
    reply: &str,
    delay_ms: u32,
    extra: &[&str],
) -> tokio::process::Child {
    let workdir = machine.file("project");
    std::fs::create_dir_all(&workdir).unwrap();
    let mut args = vec!["run", "--agent", "dana/writer"];
    args.extend(extra);
    machine
        .command("dana", &args)
        .current_dir(&workdir)
        .env("FAKE_AGENT_REPLY", reply)
        .env("FAKE_AGENT_DELAY_MS", delay_ms.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The writer's statuses in the room, as the hub holds them: (state, detail).
/// How many messages wait unread for the writer, in its own cache (up to `limit`).
async fn writer_unread(writer: &roundtable_core::Core, limit: u32) -> usize {
    let me = writer.me().to_owned();
    writer
        .read(move |cache| cache.unread_messages_for(&me, true, limit))
        .await
        .unwrap()
        .len()
}

/// How often the writer has said it listens for messages, in its home room.
async fn listening_statuses(hub: &Hub, machine: &Machine) -> usize {
    let token = machine.home.profile("dana").token.expose().to_owned();
    roundtable_e2e::room_bodies(&hub.ws_url(), &token, "dana/writer", "status")
        .await
        .iter()
        .filter(|body| body["detail"] == roundtable_core::hooks::LISTENING)
        .count()
}

async fn writer_statuses(hub: &Hub, machine: &Machine) -> Vec<(String, String)> {
    let token = machine.home.profile("dana").token.expose().to_owned();
    roundtable_e2e::room_bodies(&hub.ws_url(), &token, "design", "status")
        .await
        .into_iter()
        .map(|body| {
            (
                body["state"].as_str().unwrap_or_default().to_owned(),
                body["detail"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Waits until `check` holds.
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check().await {
        assert!(Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_headless_agent_runs_no_turn_until_resumed_then_one_for_all_that_waited() {
    let hub = Hub::start(&[]).await;
    let machine = writer_in_a_room(&hub).await;
    machine
        .ok("dana", &["agents", "pause", "dana/writer"])
        .await;
    let mut runner = writer_runner(&machine, "all read", 0, &[]);
    // Ten long mentions: more than one argument may hold, together (16 KiB each at most).
    let long = "x".repeat(15_000);
    for part in 0..10 {
        machine
            .ok(
                "dana",
                &[
                    "send",
                    "design",
                    &format!("@dana/writer part {part}: {long}"),
                ],
            )
            .await;
    }
    // It says once that it is held, and runs nothing (each turn is a paid model call).
    until("the writer says it is paused", async || {
        writer_statuses(&hub, &machine)
            .await
            .iter()
            .any(|(state, detail)| state == "stopped" && detail.contains("paused by"))
    })
    .await;
    let writer = roundtable_core::Core::open(machine.home.profile("dana.writer"))
        .await
        .unwrap();
    until("the writer's cache holds the ten", async || {
        writer_unread(&writer, 50).await == 10
    })
    .await;
    drop(writer);
    assert!(machine.invocations().is_empty(), "no turn while paused");

    machine
        .ok("dana", &["agents", "resume", "dana/writer"])
        .await;
    let token = machine.home.profile("dana").token.expose().to_owned();
    wait_for_text(&hub, &token, "all read", Duration::from_secs(60)).await;
    let invocations = machine.invocations();
    assert_eq!(
        invocations.len(),
        1,
        "one turn for all ten: {}",
        invocations.len()
    );
    let prompt = invocations[0]["prompt"].as_str().unwrap();
    assert!(
        (0..10).all(|part| prompt.contains(&format!("part {part}:"))),
        "every message in the one turn"
    );
    // Longer than one argument may be (Linux: 128 KiB): it went on stdin.
    assert!(prompt.len() > 128 * 1024, "{}", prompt.len());
    let paused: Vec<(String, String)> = writer_statuses(&hub, &machine)
        .await
        .into_iter()
        .filter(|(_, detail)| detail.contains("paused"))
        .collect();
    assert_eq!(paused.len(), 1, "said once: {paused:?}");
    runner.start_kill().unwrap();
    let _ = runner.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_refused_at_the_end_of_a_turn_is_reported_once_and_never_run_again() {
    let hub = Hub::start(&[]).await;
    let machine = writer_in_a_room(&hub).await;
    let mut runner = writer_runner(&machine, "my late answer", 3_000, &[]);
    machine
        .ok("dana", &["send", "design", "@dana/writer first question"])
        .await;
    // The turn has begun (the prompt is in the session's transcript); the writer is paused
    // before it answers: its reply is refused.
    until("the turn began", async || {
        prompts_in(&machine.file(".claude/projects"), "first question") > 0
    })
    .await;
    machine
        .ok("dana", &["agents", "pause", "dana/writer"])
        .await;
    until("the refusal is reported", async || {
        writer_statuses(&hub, &machine)
            .await
            .iter()
            .any(|(state, detail)| state == "error" && detail.contains("refused (paused)"))
    })
    .await;
    // Resumed, a new question gets a turn of its own: the first is not run again.
    machine
        .ok("dana", &["agents", "resume", "dana/writer"])
        .await;
    machine
        .ok("dana", &["send", "design", "@dana/writer second question"])
        .await;
    let token = machine.home.profile("dana").token.expose().to_owned();
    wait_for_text(&hub, &token, "my late answer", Duration::from_secs(60)).await;
    let prompts: Vec<String> = machine
        .invocations()
        .iter()
        .map(|call| call["prompt"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert!(prompts[1].contains("second question") && !prompts[1].contains("first question"));
    let refused = writer_statuses(&hub, &machine)
        .await
        .into_iter()
        .filter(|(_, detail)| detail.contains("refused"))
        .count();
    assert_eq!(refused, 1, "reported once");
    runner.start_kill().unwrap();
    let _ = runner.wait().await;
}

// The busy CLI is a `sh` script (Windows has no `sh`).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_model_service_gets_three_more_turns_then_the_failure_is_reported_once() {
    let hub = Hub::start(&[]).await;
    let machine = writer_in_a_room(&hub).await;
    // A Claude Code whose model service is always overloaded, as `claude -p` says it; it
    // counts its runs.
    let runs = machine.file("busy-runs");
    let result = machine.file("busy/result.json");
    let busy = machine.file("busy/claude");
    std::fs::create_dir_all(busy.parent().unwrap()).unwrap();
    let overloaded = serde_json::json!({
        "type": "result",
        "subtype": "success",
        "is_error": true,
        "result": "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
        "session_id": "5a1e0c2d-0000-4000-8000-000000000001",
    });
    std::fs::write(&result, format!("{overloaded}\n")).unwrap();
    std::fs::write(
        &busy,
        format!(
            "#!/bin/sh\ncat > /dev/null\necho run >> '{}'\ncat '{}'\nexit 1\n",
            runs.display(),
            result.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&busy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let busy = busy.display().to_string();
    let mut runner = writer_runner(
        &machine,
        "unused",
        0,
        &["--executable", &busy, "--retry-seconds", "0.05"],
    );
    machine
        .ok("dana", &["send", "design", "@dana/writer are you there?"])
        .await;
    until("the failure is reported", async || {
        writer_statuses(&hub, &machine)
            .await
            .iter()
            .any(|(state, detail)| state == "error" && detail.contains("gave up after 4 tries"))
    })
    .await;
    // Counted as handled: nothing waits to be run again.
    let writer = roundtable_core::Core::open(machine.home.profile("dana.writer"))
        .await
        .unwrap();
    until("the question counts as handled", async || {
        writer_unread(&writer, 10).await == 0
    })
    .await;
    runner.start_kill().unwrap();
    let _ = runner.wait().await;
    let count = std::fs::read_to_string(&runs).unwrap().lines().count();
    assert_eq!(count, 4, "one turn and three more");
    let failures: Vec<String> = writer_statuses(&hub, &machine)
        .await
        .into_iter()
        .filter(|(state, _)| state == "error")
        .map(|(_, detail)| detail)
        .collect();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("overloaded_error"), "{failures:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cli_that_cannot_start_is_reported_once_per_batch_and_not_retried() {
    let hub = Hub::start(&[]).await;
    let machine = writer_in_a_room(&hub).await;
    let missing = machine.file("no-such/claude").display().to_string();
    let mut runner = writer_runner(&machine, "unused", 0, &["--executable", &missing]);
    for (n, question) in ["@dana/writer one", "@dana/writer two"].iter().enumerate() {
        machine.ok("dana", &["send", "design", question]).await;
        until("the failure is reported", async || {
            writer_statuses(&hub, &machine)
                .await
                .iter()
                .filter(|(state, detail)| {
                    state == "error" && detail.contains("cannot start claude")
                })
                .count()
                == n + 1
        })
        .await;
    }
    // Each batch counts as handled: nothing waits to be run again.
    let writer = roundtable_core::Core::open(machine.home.profile("dana.writer"))
        .await
        .unwrap();
    until("both count as handled", async || {
        writer_unread(&writer, 10).await == 0
    })
    .await;
    runner.start_kill().unwrap();
    let _ = runner.wait().await;
    let failures = writer_statuses(&hub, &machine)
        .await
        .into_iter()
        .filter(|(state, _)| state == "error")
        .count();
    assert_eq!(failures, 2);
}

/// Over ACP, an agent on Claude Code needs Claude Code's ACP adapter: without it the runner
/// says what to install, and starts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_over_acp_without_the_clis_adapter_says_what_to_install() {
    let hub = Hub::start(&[]).await;
    let machine = writer_in_a_room(&hub).await;
    let output = machine
        .command("dana", &["run", "--agent", "dana/writer", "--acp"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("`claude-agent-acp` is not installed here")
            && stderr.contains("npm install -g @agentclientprotocol/claude-agent-acp"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_onboarding_for_the_whole_user_a_teams_session_is_its_runners_agents_alone() {
    let hub = Hub::start(&[]).await;
    let machine = Machine::new();
    machine.home.signup(&hub, "dana").await;
    // Claude Code onboarded for the whole user: its hooks run in every session, the team's too.
    machine
        .ok("dana", &["agents", "onboard", "claude", "--name", "claude"])
        .await;
    machine
        .ok(
            "dana",
            &[
                "team",
                "create",
                "--template",
                "trio",
                "--room",
                "build",
                "--cli",
                "claude",
            ],
        )
        .await;
    let workdir = machine.file("project");
    std::fs::create_dir_all(&workdir).unwrap();
    let mut run = machine
        .command("dana", &["run", "--agent", "dana/build-manager"])
        .current_dir(&workdir)
        .env("FAKE_AGENT_REPLY", "noted")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    machine
        .ok(
            "dana",
            &["send", "build", "build a parser for the config format"],
        )
        .await;
    let token = machine.home.profile("dana").token.expose().to_owned();
    wait_for_text_in(&hub, &token, "build", "noted", Duration::from_secs(60)).await;
    run.start_kill().unwrap();
    let _ = run.wait().await;

    // The session is the manager's: claimed for it, charged to it alone.
    let claims = machine.home.dir.path().join("sessions/claude-code");
    let owners: Vec<String> = std::fs::read_dir(&claims)
        .unwrap()
        .flatten()
        .map(|entry| {
            std::fs::read_to_string(entry.path())
                .unwrap()
                .trim()
                .to_owned()
        })
        .collect();
    assert_eq!(owners, ["dana/build-manager"]);
    let by_agent = json(
        &machine
            .ok("dana", &["--json", "usage", "--by", "agent"])
            .await,
    );
    let agents: Vec<&str> = by_agent
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["group"]["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["dana/build-manager"], "{by_agent}");
    let by_session = json(
        &machine
            .ok("dana", &["--json", "usage", "--by", "session"])
            .await,
    );
    assert_eq!(by_session.as_array().unwrap().len(), 1, "{by_session}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_clients_task_is_completed_by_a_headless_agent_under_the_runner() {
    use roundtable_protocol::client::{ClientFrame, ContactRequestCmd, ContactRespond, ProfileSet};
    // A missing answer shows as a task still submitted after 20 s, not a test that hangs.
    let hub = Hub::start(&["--a2a-block-max", "20"]).await;
    let machine = Machine::new();
    machine.home.signup(&hub, "dana").await;
    machine
        .ok(
            "dana",
            &["agents", "onboard", "codex", "--name", "reviewer"],
        )
        .await;
    // dana makes her reviewer public; erin, from another framework, asks to be its contact.
    let dana_token = machine.home.profile("dana").token.expose().to_owned();
    let mut dana = roundtable_testkit::Client::connect(&hub.ws_url())
        .await
        .unwrap();
    dana.auth(&dana_token, "laptop").await.unwrap();
    let reviewer = machine.home.profile("dana.reviewer").principal.clone();
    let id = dana.id();
    dana.ok(ClientFrame::ProfileSet(ProfileSet {
        id,
        principal: Some(reviewer),
        name: None,
        discoverable: Some(roundtable_protocol::model::Discoverable::Public),
    }))
    .await;
    let erin = roundtable_testkit::signup(hub.addr().parse().unwrap(), "erin")
        .await
        .unwrap();
    let mut erin_ws = roundtable_testkit::Client::connect(&hub.ws_url())
        .await
        .unwrap();
    erin_ws.auth(&erin.token, "laptop").await.unwrap();
    let id = erin_ws.id();
    let request: roundtable_protocol::server::ContactRequestOk = erin_ws
        .ok(ClientFrame::ContactRequest(ContactRequestCmd {
            id,
            to: "dana/reviewer".into(),
            message: None,
        }))
        .await
        .decode()
        .unwrap();
    let id = dana.id();
    dana.ok(ClientFrame::ContactRespond(ContactRespond {
        id,
        request: request.request.id,
        accept: true,
    }))
    .await;

    // The reviewer runs headless under `roundtable run`; its CLI answers every message.
    let workdir = machine.file("project");
    std::fs::create_dir_all(&workdir).unwrap();
    let mut runner = machine
        .command("dana", &["run", "--agent", "dana/reviewer"])
        .current_dir(&workdir)
        .env("FAKE_AGENT_REPLY", "reviewed: ship it")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();

    // erin's A2A client asks and waits: the runner's reply completes the task.
    let url = format!("http://{}", hub.addr());
    let task = crate::a2a_clients::a2a(
        &url,
        "dana/reviewer",
        &erin.token,
        &["block", "pr-42", "please review PR 42"],
    )
    .await;
    assert_eq!(task["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"], serde_json::json!(["reviewed: ship it"]));
    let _ = runner.start_kill();
    let _ = runner.wait().await;
}

/// Antigravity CLI cannot be installed here: its onboarding and hooks are checked on files
/// and payloads written from its documentation (antigravity.google/docs: hooks, MCP), with
/// Roundtable's side real — the hub, the onboarding, the hook command as Antigravity would
/// run it, and offboarding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn antigravity_from_its_documents_is_onboarded_hears_its_messages_and_is_offboarded_byte_for_byte()
 {
    let hub = Hub::start(&[]).await;
    let machine = Machine::new();
    machine.home.signup(&hub, "dana").await;
    // The person's own files, as its documentation shows them.
    let mcp = "{\n  \"mcpServers\": {\n    \"docs\": {\"serverUrl\": \"https://example.com/mcp\"}\n  }\n}\n";
    let hooks = "{\n  \"my-linter-hook\": {\n    \"PostToolUse\": [\n      {\"matcher\": \"run_command\", \"hooks\": [{\"type\": \"command\", \"command\": \"./scripts/lint.sh\", \"timeout\": 10}]}\n    ]\n  }\n}\n";
    machine.write(".gemini/config/mcp_config.json", mcp);
    machine.write(".gemini/config/hooks.json", hooks);
    machine
        .ok("dana", &["agents", "onboard", "agy", "--name", "scout"])
        .await;
    let written: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(machine.file(".gemini/config/hooks.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        written["my-linter-hook"]["PostToolUse"][0]["matcher"],
        "run_command"
    );
    let command = written["roundtable"]["PreInvocation"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        command.ends_with("hook agy --agent dana/scout PreInvocation"),
        "{command}"
    );
    machine
        .ok(
            "dana",
            &[
                "room",
                "create",
                "--title",
                "scouting",
                "--member",
                "dana/scout",
            ],
        )
        .await;
    machine
        .ok("dana", &["send", "scouting", "@dana/scout map the parser"])
        .await;
    // What Antigravity runs before a model call and at a stop, with its documented payload.
    let hook = |event: &'static str| {
        let machine = &machine;
        async move {
            let mut child = machine
                .command("dana", &["hook", "agy", "--agent", "dana/scout", event])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let input = serde_json::json!({
                "conversationId": "9b2f6c1e-0000-4000-8000-000000000001",
                "workspacePaths": ["/work/app"], "transcriptPath": "/tmp/transcript.jsonl",
                "artifactDirectoryPath": "/tmp/artifacts", "modelName": "gemini-3-pro",
                "invocationNum": 1, "initialNumSteps": 1, "executionNum": 1,
                "terminationReason": "model_done", "fullyIdle": true,
            });
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.to_string().as_bytes()).await.unwrap();
            drop(stdin);
            let output = child.wait_with_output().await.unwrap();
            assert!(output.status.success(), "a hook always exits 0");
            let answer: serde_json::Value = serde_json::from_slice(&output.stdout)
                .unwrap_or_else(|_| panic!("not JSON: {:?}", output.stdout));
            answer
        }
    };
    let before = hook("PreInvocation").await;
    let injected = before["injectSteps"][0]["ephemeralMessage"]
        .as_str()
        .unwrap_or_default();
    assert!(injected.contains("map the parser"), "{before}");
    // Read once: the next model call gets nothing more; a stop with nothing new stops.
    assert_eq!(hook("PreInvocation").await, serde_json::json!({}));
    assert_eq!(hook("Stop").await, serde_json::json!({"decision": "stop"}));
    // A mention that came meanwhile keeps the agent going.
    machine
        .ok("dana", &["send", "scouting", "@dana/scout and the lexer"])
        .await;
    let stop = hook("Stop").await;
    assert_eq!(stop["decision"], "continue", "{stop}");
    assert!(
        stop["reason"].as_str().unwrap().contains("and the lexer"),
        "{stop}"
    );
    // With no terminal it is not driven (its headless mode could not be tested): said so.
    let refused = machine
        .command("dana", &["run", "--agent", "dana/scout"])
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("cannot drive Antigravity CLI yet"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    machine
        .ok("dana", &["agents", "offboard", "agy", "--name", "scout"])
        .await;
    assert_eq!(
        std::fs::read_to_string(machine.file(".gemini/config/mcp_config.json")).unwrap(),
        mcp
    );
    assert_eq!(
        std::fs::read_to_string(machine.file(".gemini/config/hooks.json")).unwrap(),
        hooks
    );
}
