//! Who is on what, across two people's agents in one room: both agents edit the same
//! component, each is told of the other at its next tool boundary or turn end (once, as room
//! content: a JSON line per overlap inside its block), a claim is told to the other, and each
//! person's sessions board shows it.

use roundtable_core::Core;
use roundtable_core::client::PATIENCE;
use roundtable_e2e::{Home, Hub, json};
use serde_json::{Value, json as value};
use tokio::io::AsyncWriteExt as _;

/// Runs a Claude Code hook of `agent` (as `profile`) for `event`; its stdout as JSON (Null
/// when it printed nothing).
async fn hook(home: &Home, profile: &str, agent: &str, event: &str, session: &str) -> Value {
    let mut child = home
        .command(profile, &["hook", "claude", "--agent", agent])
        .env("CLAUDE_CODE_SESSION_ATTENDED", "0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input = value!({
        "session_id": session, "transcript_path": "/nonexistent/t.jsonl", "cwd": "/work/app",
        "hook_event_name": event, "stop_hook_active": false, "tool_name": "Edit",
        "tool_input": {"file_path": "src/parser/lexer.rs"}, "tool_response": {},
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    assert!(output.status.success(), "a hook always exits 0");
    let text = String::from_utf8(output.stdout).unwrap();
    if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}"))
    }
}

/// The overlaps a hook's text tells of: the JSON lines of its `roundtable-overlaps` block,
/// each of which must parse (the members' words in them stay quoted).
fn told_of(text: &str) -> Vec<Value> {
    let Some((_, rest)) = text.split_once("\n<roundtable-overlaps>\n") else {
        return Vec::new();
    };
    let (block, _) = rest
        .split_once("</roundtable-overlaps>")
        .unwrap_or_else(|| panic!("an unclosed block: {text}"));
    block
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("{line:?} in {text}")))
        .collect()
}

/// Whether `text` tells of `agent` `doing` (`editing`, `claimed`) `parser` in the room
/// `parser`, with `file` when given.
fn tells(text: &str, agent: &str, doing: &str, file: Option<&str>) -> bool {
    told_of(text).iter().any(|item| {
        item["agent"] == agent
            && item["room"] == "parser"
            && item["component"] == "parser"
            && item["doing"] == doing
            && file.is_none_or(|file| item["file"] == file)
    })
}

/// What an agent's edit publishes (as its owner's log watcher does): the component working,
/// with the file.
async fn edits(agent: &Core, room: &str, file: &str) {
    let sent = agent
        .send(
            room,
            "arch",
            value!({"component": "parser", "status": "working", "files": [file]}),
        )
        .await
        .unwrap();
    agent.wait(sent, PATIENCE).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_peoples_agents_on_one_component_are_told_of_each_other_once_and_of_a_claim() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    let addr = hub.addr();
    home.ok("dana", &["signup", "--hub", &addr, "--handle", "dana"])
        .await;
    home.ok("sam", &["signup", "--hub", &addr, "--handle", "sam"])
        .await;
    home.ok("dana", &["room", "create", "--title", "parser"])
        .await;
    let invite = json(
        &home
            .ok("dana", &["--json", "invite", "create", "--room", "parser"])
            .await,
    );
    home.ok(
        "sam",
        &["invite", "redeem", invite["link"].as_str().unwrap()],
    )
    .await;
    home.ok("dana", &["agents", "register", "writer"]).await;
    home.ok("sam", &["agents", "register", "reviewer"]).await;
    home.ok("dana", &["room", "invite", "parser", "dana/writer"])
        .await;
    home.ok("sam", &["room", "invite", "parser", "sam/reviewer"])
        .await;

    let writer = Core::open(home.profile("dana.writer")).await.unwrap();
    let writer_sync = writer.start();
    let reviewer = Core::open(home.profile("sam.reviewer")).await.unwrap();
    let reviewer_sync = reviewer.start();
    writer.synced(PATIENCE).await.unwrap();
    reviewer.synced(PATIENCE).await.unwrap();
    let room = writer.room_id("parser").await.unwrap();
    let define = writer
        .send(&room, "arch", value!({"define": [{"id": "parser", "name": "Parser", "paths": ["src/parser/**"], "depends_on": []}]}))
        .await
        .unwrap();
    writer.wait(define, PATIENCE).await.unwrap();

    // Alone on it: nothing to say.
    edits(&writer, &room, "src/parser/mod.rs").await;
    let session = "9a1b2c3d-0000-4000-8000-00000000000a";
    hook(&home, "dana", "dana/writer", "SessionStart", session).await;
    assert_eq!(
        hook(&home, "dana", "dana/writer", "PostToolUse", session).await,
        Value::Null
    );

    // Sam's reviewer edits it too: the writer hears of it at its next tool boundary, once.
    edits(&reviewer, &room, "src/parser/lexer.rs").await;
    writer.synced(PATIENCE).await.unwrap();
    let told = hook(&home, "dana", "dana/writer", "PostToolUse", session).await;
    let context = told["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(
        tells(
            context,
            "sam/reviewer",
            "editing",
            Some("src/parser/lexer.rs")
        ),
        "{told}"
    );
    assert!(context.contains("\"when\":\"just now\""), "{told}");
    assert_eq!(
        hook(&home, "dana", "dana/writer", "PostToolUse", session).await,
        Value::Null
    );

    // The reviewer hears of the writer when its turn ends: the stop carries it.
    reviewer.synced(PATIENCE).await.unwrap();
    let stopped = hook(
        &home,
        "sam",
        "sam/reviewer",
        "Stop",
        "9a1b2c3d-0000-4000-8000-00000000000b",
    )
    .await;
    assert_eq!(stopped["decision"], "block", "{stopped}");
    assert!(
        tells(
            stopped["reason"].as_str().unwrap(),
            "dana/writer",
            "editing",
            Some("src/parser/mod.rs")
        ),
        "{stopped}"
    );

    // Each person's sessions board shows it beside the session of their agent.
    let dana = Core::open(home.profile("dana")).await.unwrap();
    let dana_sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    let board = dana.session_board(&home.profiles()).await.unwrap();
    let session_view = board
        .iter()
        .find(|view| view.agent_handle.as_deref() == Some("dana/writer"))
        .unwrap_or_else(|| panic!("no session of the writer: {board:?}"));
    assert!(
        session_view
            .overlaps
            .iter()
            .any(|text| text.starts_with("sam/reviewer is also editing `parser`")),
        "{session_view:?}"
    );

    // The reviewer claims it: the writer is told, and the board says who holds it.
    reviewer
        .claim_component("parser", "parser", true, Some("rewriting the lexer"))
        .await
        .unwrap();
    writer.synced(PATIENCE).await.unwrap();
    let told = hook(&home, "dana", "dana/writer", "PostToolUse", session).await;
    let context = told["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(tells(context, "sam/reviewer", "claimed", None), "{told}");
    dana.synced(PATIENCE).await.unwrap();
    let boards = json(&home.ok("dana", &["--json", "arch"]).await);
    let agents = &boards[0]["components"][0]["agents"];
    assert!(
        agents
            .as_array()
            .unwrap()
            .iter()
            .any(|agent| agent["handle"] == "sam/reviewer" && agent["claimed"] == true),
        "{boards}"
    );
    // Released: no longer held.
    reviewer
        .claim_component("parser", "parser", false, None)
        .await
        .unwrap();
    dana.synced(PATIENCE).await.unwrap();
    let boards = json(&home.ok("dana", &["--json", "arch"]).await);
    assert!(
        boards[0]["components"][0]["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|agent| agent["claimed"] == false),
        "{boards}"
    );
    dana_sync.stop().await;
    writer_sync.stop().await;
    reviewer_sync.stop().await;
}
