//! The Python SDK (`sdk/python`, installed with pip by `scripts/test.sh`) against a real hub:
//! its types against the hub's own serialisations, the README's 30-line agent answering
//! mentions once each across a SIGKILL of the hub, and the state-graph example.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use roundtable_protocol::client::ClientFrame;
use roundtable_testkit::{Client, HubProcess, message, roundtable_bin, signup};
use tokio::io::{AsyncBufReadExt, BufReader};

use roundtable_e2e::test_python;

fn sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python")
}

/// Starts a Python program of the SDK and waits for its `ready …` line (its words after
/// `ready`).
async fn start_python(
    script: &Path,
    dir: &Path,
    env: &[(&str, &str)],
) -> (tokio::process::Child, Vec<String>) {
    let mut child = tokio::process::Command::new(test_python())
        .arg(script)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the test Python runs");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the agent gets ready")
        .unwrap()
        .expect("a ready line");
    let words: Vec<String> = ready
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("unexpected first line {ready:?}"))
        .split(' ')
        .map(str::to_owned)
        .collect();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, words)
}

/// The messages of a room, as (seq, sender, text).
async fn log(client: &mut Client, room: &str) -> Vec<(u64, String, String)> {
    client
        .room_log(room)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| event.kind == "message")
        .map(|event| {
            let text = event.body["text"].as_str().unwrap_or_default().to_owned();
            (event.seq, event.from, text)
        })
        .collect()
}

#[tokio::test]
async fn the_sdk_types_match_the_hubs_own_serialisations() {
    let output = tokio::process::Command::new(test_python())
        .arg(sdk().join("tests/check_contract.py"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol/tests/it/snapshots"))
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_agent_answers_each_mention_once_across_a_hub_sigkill() {
    // The README shows the example itself, line for line.
    let readme = std::fs::read_to_string(sdk().join("README.md")).unwrap();
    let quickstart = std::fs::read_to_string(sdk().join("examples/quickstart.py")).unwrap();
    let shown = readme
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a python block in the README");
    assert_eq!(
        shown, quickstart,
        "the README's agent is examples/quickstart.py"
    );
    assert!(quickstart.lines().count() <= 30);

    let data = tempfile::tempdir().unwrap();
    let listen = roundtable_e2e::free_loopback_address().to_string();
    let mut hub = HubProcess::start_on(&roundtable_bin(), data.path(), &listen, &[]).await;
    let dana = signup(hub.addr, "dana").await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let url = hub.ws_url();
    let (mut agent, words) = start_python(
        &sdk().join("examples/quickstart.py"),
        work.path(),
        &[
            ("ROUNDTABLE_HUB", &url),
            ("ROUNDTABLE_OWNER_TOKEN", &dana.token),
        ],
    )
    .await;
    let (room, handle) = (words[0].clone(), words[1].clone());

    let ask = async |client: &mut Client, n: usize| {
        let id = client.id();
        client
            .ok(message(
                id,
                &room,
                &format!("question-{n:04}"),
                &format!("@{handle} q{n}"),
            ))
            .await;
    };
    let answered = async |client: &mut Client, count: usize| {
        roundtable_testkit::until("the agent's answers", Duration::from_secs(20), async || {
            let messages = log(client, &room).await;
            let replies = messages
                .iter()
                .filter(|(_, _, text)| text.starts_with("you asked:"))
                .count();
            assert!(replies <= count, "{replies} answers to {count} questions");
            replies == count
        })
        .await;
    };
    let mut person = Client::connect(&url).await.unwrap();
    person.auth(&dana.token, "laptop").await.unwrap();
    for n in 0..3 {
        ask(&mut person, n).await;
    }
    answered(&mut person, 3).await;
    // One more, then the hub dies at once and comes back on the same address.
    ask(&mut person, 3).await;
    hub.kill().await;
    hub = HubProcess::start_on(&roundtable_bin(), data.path(), &listen, &[]).await;
    let mut person = Client::connect(&url).await.unwrap();
    person.auth(&dana.token, "laptop").await.unwrap();
    for n in 4..6 {
        ask(&mut person, n).await;
    }
    answered(&mut person, 6).await;
    // One more: the agent answers in order, so a second answer to any question before it
    // would come before this one's.
    ask(&mut person, 6).await;
    roundtable_testkit::until("the last answer", Duration::from_secs(20), async || {
        log(&mut person, &room)
            .await
            .iter()
            .any(|(_, _, text)| text == "you asked: q6")
    })
    .await;
    let replies: Vec<String> = log(&mut person, &room)
        .await
        .into_iter()
        .map(|(_, _, text)| text)
        .filter(|text| text.starts_with("you asked:"))
        .collect();
    let expected: Vec<String> = (0..7).map(|n| format!("you asked: q{n}")).collect();
    assert_eq!(replies, expected, "each question answered once, in order");
    agent.kill().await.unwrap();
    hub.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_graph_example_answers_from_its_graph() {
    let data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&roundtable_bin(), data.path(), &[]).await;
    let dana = signup(hub.addr, "dana").await.unwrap();
    let mut person = Client::connect(&hub.ws_url()).await.unwrap();
    person.auth(&dana.token, "laptop").await.unwrap();
    let id = person.id();
    let adder: roundtable_protocol::server::RegisterAgentOk = person
        .ok(ClientFrame::RegisterAgent(
            roundtable_protocol::client::RegisterAgent {
                id,
                name: "adder".into(),
                description: None,
                card: None,
                discoverable: None,
            },
        ))
        .await
        .decode()
        .unwrap();
    let room = adder.room.clone().expect("a home room").id;
    let work = tempfile::tempdir().unwrap();
    let url = hub.ws_url();
    let (mut agent, words) = start_python(
        &sdk().join("examples/graph_agent.py"),
        work.path(),
        &[
            ("ROUNDTABLE_HUB", &url),
            ("ROUNDTABLE_AGENT_TOKEN", &adder.token),
        ],
    )
    .await;
    assert_eq!(words, ["dana/adder"]);
    let id = person.id();
    person
        .ok(message(
            id,
            &room,
            "graph-question-1",
            "@dana/adder what is 2 + 3?",
        ))
        .await;
    roundtable_testkit::until("the graph's answer", Duration::from_secs(20), async || {
        log(&mut person, &room)
            .await
            .iter()
            .any(|(_, _, text)| text == "2 + 3 = 5")
    })
    .await;
    agent.kill().await.unwrap();
    hub.terminate().await;
}

/// A hub with a certificate of its own (the app's hub opened to a network): the SDK reaches
/// it through its pinned address and refuses, before sending any token, a hub whose
/// certificate is another.
#[tokio::test]
async fn the_sdk_trusts_exactly_a_pinned_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ours = roundtable_testkit::pki::self_signed(dir.path(), "hub");
    let pin = roundtable_core::hub_address::pin_of(&ours.der);
    let other = roundtable_core::hub_address::pin_of(b"another certificate");
    let data = dir.path().join("data");
    let added = tokio::process::Command::new(roundtable_bin())
        .args(["hub", "user", "add", "--handle", "dana", "--data"])
        .arg(&data)
        .output()
        .await
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let token = String::from_utf8(added.stdout).unwrap().trim().to_owned();
    let cert = ours.cert.display().to_string();
    let key = ours.key.display().to_string();
    let hub = HubProcess::start(
        &roundtable_bin(),
        &data,
        &["--tls-cert", &cert, "--tls-key", &key],
    )
    .await;
    let port = hub.addr.port();
    let output = tokio::process::Command::new(test_python())
        .arg(sdk().join("tests/check_pinned.py"))
        .arg(format!("wss://localhost:{port}/v1/ws#{pin}"))
        .arg(format!("wss://localhost:{port}/v1/ws#{other}"))
        .arg(&token)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("authenticated as dana"), "{stdout}");
    assert!(stdout.contains("refused another certificate"), "{stdout}");
    hub.terminate().await;
}
