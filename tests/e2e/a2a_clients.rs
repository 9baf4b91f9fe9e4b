//! An agent of another framework reaches a Roundtable agent with only a token, through the
//! official A2A clients: Python's `a2a-sdk` 1.3.0 (PyPI, driven by `python/a2a_client.py`)
//! for the card, streaming and blocking tasks, a question and its answer over several
//! turns, cancelling, other principals' tasks, the capabilities the hub lacks, and a hub
//! SIGKILL that loses no acknowledged message or task; JavaScript's `@a2a-js/sdk` 1.3.0
//! (npm, on Node 22, `js/a2a_client.mjs`) for the same flows over both bindings, JSON-RPC
//! and HTTP+JSON. The Roundtable side is a real `roundtable hub` process and WebSocket
//! clients.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roundtable_protocol::ServerFrame;
use roundtable_protocol::client::{ClientFrame, RegisterAgent, SendCmd};
use roundtable_protocol::model::Discoverable;
use roundtable_protocol::server::{Event, RegisterAgentOk};
use roundtable_testkit::{Client, HubProcess, Incoming, roundtable_bin, signup};
use serde_json::{Value, json};

use roundtable_e2e::{free_loopback_address, test_node22, test_npm_package, test_python};

fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/python/a2a_client.py")
}

/// Runs one step of the driver against `owner/name` and returns what it printed.
pub(crate) async fn a2a(hub: &str, handle: &str, token: &str, step: &[&str]) -> Value {
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(test_python())
            .arg(driver())
            .args([hub, handle, token])
            .args(step)
            .output(),
    )
    .await
    .expect("the A2A client finishes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|_| {
        panic!(
            "{step:?} printed {stdout:?}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The A2A client subscribed to `task`: its summary when the stream ends, and a signal once
/// the stream is open (its first update came).
fn a2a_subscribe(
    hub: &str,
    handle: &str,
    token: &str,
    task: &str,
) -> (
    tokio::task::JoinHandle<Value>,
    tokio::sync::oneshot::Receiver<()>,
) {
    use tokio::io::AsyncBufReadExt as _;
    let (attached, attaching) = tokio::sync::oneshot::channel();
    let mut command = tokio::process::Command::new(test_python());
    command
        .arg(driver())
        .args([hub, handle, token, "subscribe", task])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let followed = tokio::spawn(async move {
        let mut child = command.spawn().unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut attached = Some(attached);
        let mut last = String::new();
        let read = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("\"attached\"") {
                    if let Some(attached) = attached.take() {
                        let _ = attached.send(());
                    }
                } else if !line.trim().is_empty() {
                    last = line;
                }
            }
        })
        .await;
        read.expect("the A2A client finishes");
        let output = child.wait_with_output().await.unwrap();
        serde_json::from_str(&last).unwrap_or_else(|_| {
            panic!(
                "subscribe printed {last:?}; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    });
    (followed, attaching)
}

/// dana and her agent `dana/reviewer` (public), erin (a contact of the reviewer) and frank
/// (no one's contact).
struct People {
    url: String,
    dana: String,
    erin: String,
    erin_id: String,
    frank: String,
    reviewer: RegisterAgentOk,
}

async fn people(hub: &HubProcess) -> People {
    let dana = signup(hub.addr, "dana").await.unwrap();
    let erin = signup(hub.addr, "erin").await.unwrap();
    let frank = signup(hub.addr, "frank").await.unwrap();
    let mut dana_client = Client::connect(&hub.ws_url()).await.unwrap();
    dana_client.auth(&dana.token, "laptop").await.unwrap();
    let id = dana_client.id();
    let reviewer: RegisterAgentOk = dana_client
        .ok(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: "reviewer".into(),
            description: Some("reviews pull requests".into()),
            card: Some(json!({"framework": "codex", "model": "gpt-5"})),
            discoverable: Some(Discoverable::Public),
        }))
        .await
        .decode()
        .unwrap();
    let mut erin_client = Client::connect(&hub.ws_url()).await.unwrap();
    erin_client.auth(&erin.token, "laptop").await.unwrap();
    let id = erin_client.id();
    let request: roundtable_protocol::server::ContactRequestOk = erin_client
        .ok(ClientFrame::ContactRequest(
            roundtable_protocol::client::ContactRequestCmd {
                id,
                to: "dana/reviewer".into(),
                message: Some("may I send you PRs?".into()),
            },
        ))
        .await
        .decode()
        .unwrap();
    let id = dana_client.id();
    dana_client
        .ok(ClientFrame::ContactRespond(
            roundtable_protocol::client::ContactRespond {
                id,
                request: request.request.id,
                accept: true,
            },
        ))
        .await;
    People {
        url: format!("http://{}", hub.addr),
        dana: dana.token,
        erin_id: erin.principal.id,
        erin: erin.token,
        frank: frank.token,
        reviewer,
    }
}

/// The reviewer, on a WebSocket, answering `asker`'s messages: a question mark gets a ping
/// (options main and dev) to the sender, "main" in reply gets "merged into main", "slow"
/// gets nothing, anything else gets "reviewed: <text>"; every reply points back with
/// `reply_to`. Returns the events it saw, when stopped.
fn reviewer(url: String, token: String, asker: String) -> tokio::task::JoinHandle<Vec<Event>> {
    reviewer_answering(url, token, move |from| from == asker)
}

/// The agent on a WebSocket of its own, synced, so that what reaches its rooms from now on
/// reaches it live.
async fn live_agent(url: &str, token: &str) -> Client {
    let mut agent = Client::connect(url).await.unwrap();
    agent.auth(token, "reviewer").await.unwrap();
    let id = agent.id();
    agent
        .ok(ClientFrame::Sync(roundtable_protocol::client::SyncCmd {
            id,
            cursors: Default::default(),
        }))
        .await;
    agent
}

/// The reviewer, answering the messages of every sender `answers` picks.
fn reviewer_answering(
    url: String,
    token: String,
    answers: impl Fn(&str) -> bool + Send + 'static,
) -> tokio::task::JoinHandle<Vec<Event>> {
    tokio::spawn(async move {
        let mut agent = live_agent(&url, &token).await;
        let mut seen = Vec::new();
        let mut answered = std::collections::HashSet::new();
        loop {
            let event = match agent.backlog.pop_front() {
                Some(frame) => Incoming::Frame(frame),
                None => match agent.recv_within(Duration::from_secs(2)).await {
                    // Quiet: a WebSocket ping keeps the connection from looking silent.
                    Ok(None) => {
                        let ping = tokio_tungstenite::tungstenite::Message::Ping(Vec::new().into());
                        if agent.send_message(ping).await.is_err() {
                            return seen;
                        }
                        continue;
                    }
                    Ok(Some(incoming)) => incoming,
                    Err(_) => return seen,
                },
            };
            let event = match event {
                Incoming::Frame(ServerFrame::Evt(event)) => event,
                Incoming::Frame(_) => continue,
                Incoming::Closed(_) => return seen,
            };
            seen.push(event.clone());
            if event.kind != "message"
                || !answers(&event.from)
                || !answered.insert(event.id.clone())
            {
                continue;
            }
            let asker = event.from.clone();
            let text = event.body["text"].as_str().unwrap_or_default().to_owned();
            let room = event.stream_name().to_owned();
            let (kind, body) = if text.contains('?') {
                (
                    "ping",
                    json!({"ping": format!("q-{}", event.seq), "question": "which branch?",
                           "options": ["main", "dev"], "to": [asker], "reply_to": event.id}),
                )
            } else if text == "main" {
                (
                    "message",
                    json!({"text": "merged into main", "reply_to": event.id}),
                )
            } else if text == "slow" || text.starts_with("(task canceled") {
                continue;
            } else {
                (
                    "message",
                    json!({"text": format!("reviewed: {text}"), "reply_to": event.id}),
                )
            };
            let id = agent.id();
            agent
                .ok(ClientFrame::Send(SendCmd {
                    id,
                    room,
                    client_key: format!("answer-{}", event.id),
                    kind: kind.into(),
                    body,
                }))
                .await;
        }
    })
}

fn states(updates: &Value) -> Vec<String> {
    updates["updates"]
        .as_array()
        .unwrap_or_else(|| panic!("no updates in {updates}"))
        .iter()
        .filter(|update| update["state"].is_string())
        .map(|update| update["state"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_gets_the_card_streams_and_blocks_on_tasks_and_lists_them() {
    let data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(
        &roundtable_bin(),
        data.path(),
        &["--operator-name", "Acme Labs"],
    )
    .await;
    let people = people(&hub).await;
    let agent = reviewer(
        hub.ws_url(),
        people.reviewer.token.clone(),
        people.erin_id.clone(),
    );
    let (url, erin) = (people.url.as_str(), people.erin.as_str());
    let handle = "dana/reviewer";

    let card = a2a(url, handle, erin, &["card"]).await;
    assert_eq!(card["name"], "reviewer", "{card}");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["provider"]["organization"], "Acme Labs");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{url}/a2a/dana/reviewer")
    );

    let streamed = a2a(url, handle, erin, &["stream", "s-1", "PR 42"]).await;
    let updates = streamed["updates"].as_array().unwrap();
    // The task first, as it is when stored (the agent may have answered already), then
    // what changes: the artifact comes in the task or as an update of its own.
    assert_eq!(updates[0]["kind"], "task", "{streamed}");
    let artifacts: Vec<&Value> = updates
        .iter()
        .flat_map(|update| match update["kind"].as_str() {
            Some("task") => update["artifacts"].as_array().unwrap().iter().collect(),
            Some("artifact") => vec![&update["text"]],
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(artifacts, [&json!("reviewed: PR 42")], "{streamed}");
    assert_eq!(
        states(&streamed).last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );
    let room = updates[0]["context"].as_str().unwrap().to_owned();

    let blocked = a2a(url, handle, erin, &["block", "b-1", "PR 43"]).await;
    assert_eq!(blocked["state"], "TASK_STATE_COMPLETED", "{blocked}");
    assert_eq!(blocked["artifacts"], json!(["reviewed: PR 43"]));
    assert_eq!(blocked["context"], room.as_str(), "the pair's one room");
    assert_eq!(blocked["history"], json!(["ROLE_USER", "ROLE_AGENT"]));

    let third = a2a(url, handle, erin, &["block", "b-2", "PR 44"]).await;
    let listed = a2a(url, handle, erin, &["list"]).await;
    assert_eq!(
        listed["ids"],
        json!([third["id"], blocked["id"], updates[0]["id"]]),
        "newest first, over pages of two"
    );

    let errors = a2a(url, handle, erin, &["errors"]).await;
    assert_eq!(
        errors,
        json!({
            "push": "PushNotificationNotSupportedError",
            "unknown_task": "TaskNotFoundError",
            "file": "ContentTypeNotSupportedError",
        })
    );

    // A Roundtable user in the room sees the same conversation.
    let mut erin_ws = Client::connect(&hub.ws_url()).await.unwrap();
    erin_ws.auth(erin, "laptop").await.unwrap();
    let texts: Vec<String> = erin_ws
        .room_log(&room)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| event.kind == "message")
        .map(|event| event.body["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        texts,
        [
            "PR 42",
            "reviewed: PR 42",
            "PR 43",
            "reviewed: PR 43",
            "PR 44",
            "reviewed: PR 44"
        ]
    );
    agent.abort();
    hub.terminate().await;
}

/// Busy processes, one per core and one more, so that the hub, the agent and the clients
/// are all kept waiting for a CPU (as on a loaded laptop or CI runner); stopped on drop.
struct BusyCpus {
    _spinning: Vec<tokio::process::Child>,
}

impl BusyCpus {
    fn start() -> BusyCpus {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        BusyCpus {
            _spinning: (0..=cores)
                .map(|_| {
                    tokio::process::Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .kill_on_drop(true)
                        .spawn()
                        .expect("sh starts")
                })
                .collect(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_contact_s_first_blocking_send_is_answered_under_load() {
    const CONTACTS: usize = 16;
    let data = tempfile::tempdir().unwrap();
    // A lost answer shows as the task coming back unfinished when the hub's wait is up
    // (well within the client's own 60 s).
    let hub = HubProcess::start(
        &roundtable_bin(),
        data.path(),
        &["--a2a-block-max", "40", "--signups-per-hour", "100"],
    )
    .await;
    let people = people(&hub).await;
    let reviewer_id = people.reviewer.agent.id.clone();
    // Contacts of the reviewer who have never called it: each first call makes their room.
    let mut dana = Client::connect(&hub.ws_url()).await.unwrap();
    dana.auth(&people.dana, "laptop").await.unwrap();
    let mut contacts = Vec::new();
    for n in 0..CONTACTS {
        let contact = signup(hub.addr, &format!("contact{n}")).await.unwrap();
        let mut client = Client::connect(&hub.ws_url()).await.unwrap();
        client.auth(&contact.token, "laptop").await.unwrap();
        let id = client.id();
        let request: roundtable_protocol::server::ContactRequestOk = client
            .ok(ClientFrame::ContactRequest(
                roundtable_protocol::client::ContactRequestCmd {
                    id,
                    to: "dana/reviewer".into(),
                    message: None,
                },
            ))
            .await
            .decode()
            .unwrap();
        let id = dana.id();
        dana.ok(ClientFrame::ContactRespond(
            roundtable_protocol::client::ContactRespond {
                id,
                request: request.request.id,
                accept: true,
            },
        ))
        .await;
        contacts.push(contact.token);
    }
    let agent = reviewer_answering(hub.ws_url(), people.reviewer.token.clone(), move |from| {
        from != reviewer_id
    });
    let load = BusyCpus::start();
    for (n, token) in contacts.iter().enumerate() {
        let text = format!("PR {n}");
        let blocked = a2a(
            &people.url,
            "dana/reviewer",
            token,
            &["block", &format!("first-{n}"), &text],
        )
        .await;
        assert_eq!(
            blocked["state"], "TASK_STATE_COMPLETED",
            "contact {n}'s first blocking send: {blocked}"
        );
        assert_eq!(blocked["artifacts"], json!([format!("reviewed: {text}")]));
        assert_eq!(blocked["history"], json!(["ROLE_USER", "ROLE_AGENT"]));
    }
    drop(load);
    agent.abort();
    hub.terminate().await;
}

/// An agent that takes its time: each message (but its own) is answered after `delay`.
fn slow_reviewer(url: String, token: String, delay: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut agent = live_agent(&url, &token).await;
        while let Ok(event) = agent.next_event().await {
            if event.kind != "message" || event.body["text"] == "reviewed, slowly" {
                continue;
            }
            // The agent working: the time a real one takes (a session to start, a model
            // to answer) is what the client must outlast.
            tokio::time::sleep(delay).await;
            let id = agent.id();
            agent
                .ok(ClientFrame::Send(SendCmd {
                    id,
                    room: event.stream_name().to_owned(),
                    client_key: format!("slow-{}", event.id),
                    kind: "message".into(),
                    body: json!({"text": "reviewed, slowly", "reply_to": event.id}),
                }))
                .await;
        }
    })
}

/// What the issue's independent client met: a blocking send whose agent answers after the
/// client's read timeout. The hub keeps the connection alive with whitespace while the
/// agent works, so the official client, giving up after 5 s without a byte, still gets the
/// finished task after 12.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_send_outlasts_the_client_s_read_timeout_while_its_agent_works() {
    let data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&roundtable_bin(), data.path(), &[]).await;
    let people = people(&hub).await;
    let agent = slow_reviewer(
        hub.ws_url(),
        people.reviewer.token.clone(),
        Duration::from_secs(12),
    );
    let blocked = a2a(
        &people.url,
        "dana/reviewer",
        &people.erin,
        &["block-within", "5", "slow-1", "PR 7"],
    )
    .await;
    assert_eq!(blocked["state"], "TASK_STATE_COMPLETED", "{blocked}");
    assert_eq!(blocked["artifacts"], json!(["reviewed, slowly"]));
    agent.abort();
    hub.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_input_required_and_the_answer_completes_the_task_over_two_turns() {
    let data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&roundtable_bin(), data.path(), &[]).await;
    let people = people(&hub).await;
    let agent = reviewer(
        hub.ws_url(),
        people.reviewer.token.clone(),
        people.erin_id.clone(),
    );
    let (url, erin) = (people.url.as_str(), people.erin.as_str());
    let handle = "dana/reviewer";

    let asked = a2a(url, handle, erin, &["stream", "q-1", "merge it?"]).await;
    let updates = asked["updates"].as_array().unwrap();
    assert_eq!(
        states(&asked).last().map(String::as_str),
        Some("TASK_STATE_INPUT_REQUIRED"),
        "{asked}"
    );
    assert!(
        updates.last().unwrap()["text"]
            .as_str()
            .unwrap()
            .contains("which branch?")
    );
    let task = updates[0]["id"].as_str().unwrap().to_owned();
    let room = updates[0]["context"].as_str().unwrap().to_owned();

    let answered = a2a(url, handle, erin, &["reply", &task, "q-2", "main"]).await;
    assert_eq!(
        states(&answered).last().map(String::as_str),
        Some("TASK_STATE_COMPLETED"),
        "{answered}"
    );
    let done = a2a(url, handle, erin, &["get", &task]).await;
    assert_eq!(done["artifacts"], json!(["merged into main"]));
    assert_eq!(
        done["history"],
        json!(["ROLE_USER", "ROLE_AGENT", "ROLE_USER", "ROLE_AGENT"])
    );

    // The room holds the question as a ping, erin's answer to it (her choice), and her
    // follow-up for the agent.
    let mut erin_ws = Client::connect(&hub.ws_url()).await.unwrap();
    erin_ws.auth(erin, "laptop").await.unwrap();
    let kinds: Vec<(String, Value)> = erin_ws
        .room_log(&room)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| event.kind != "member" && event.kind != "room")
        .map(|event| (event.kind, event.body))
        .collect();
    let shape: Vec<&str> = kinds.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(shape, ["message", "ping", "answer", "message", "message"]);
    assert_eq!(kinds[2].1["choice"], "main");
    // A terminal task takes no more turns.
    let late = a2a(url, handle, erin, &["reply", &task, "q-3", "dev"]).await;
    assert_eq!(late["error"], "UnsupportedOperationError", "{late}");
    agent.abort();
    hub.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_survives_a_hub_sigkill_and_the_same_message_id_is_the_same_task() {
    let data = tempfile::tempdir().unwrap();
    let listen = free_loopback_address().to_string();
    let hub = HubProcess::start_on(&roundtable_bin(), data.path(), &listen, &[]).await;
    let people = people(&hub).await;
    let (url, erin) = (people.url.as_str(), people.erin.as_str());
    let handle = "dana/reviewer";

    // Acknowledged, then the hub dies at once.
    let submitted = a2a(url, handle, erin, &["submit", "k-1", "PR 7"]).await;
    assert_eq!(submitted["state"], "TASK_STATE_SUBMITTED", "{submitted}");
    let task = submitted["id"].as_str().unwrap().to_owned();
    hub.kill().await;
    let hub = HubProcess::start_on(&roundtable_bin(), data.path(), &listen, &[]).await;

    // The client retries with the same messageId: the same task, stored once.
    let again = a2a(url, handle, erin, &["submit", "k-1", "PR 7"]).await;
    assert_eq!(again["id"], task.as_str(), "{again}");
    let found = a2a(url, handle, erin, &["get", &task]).await;
    assert_eq!(found["state"], "TASK_STATE_SUBMITTED");

    // A client reattaches; once it is attached (a task that ended cannot be subscribed to),
    // the agent, back too, answers; the subscription sees it end.
    let (subscription, attached) = a2a_subscribe(url, handle, erin, &task);
    if attached.await.is_err() {
        panic!(
            "the subscription never attached: {}",
            subscription.await.unwrap()
        );
    }
    let agent = reviewer(
        hub.ws_url(),
        people.reviewer.token.clone(),
        people.erin_id.clone(),
    );
    let followed = subscription.await.unwrap();
    assert!(followed["updates"].is_array(), "{followed}");
    let updates = followed["updates"].as_array().unwrap();
    assert_eq!(updates[0]["kind"], "task", "the snapshot first: {followed}");
    assert_eq!(
        states(&followed).last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );
    let mut dana_ws = Client::connect(&hub.ws_url()).await.unwrap();
    dana_ws.auth(&people.dana, "laptop").await.unwrap();
    let mut erin_ws = Client::connect(&hub.ws_url()).await.unwrap();
    erin_ws.auth(erin, "laptop").await.unwrap();
    let room = found["context"].as_str().unwrap();
    let asked = erin_ws
        .room_log(room)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| event.body["text"] == "PR 7")
        .count();
    assert_eq!(asked, 1, "one message for one messageId across the crash");
    agent.abort();
    hub.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_canceled_by_its_requester_only_and_the_agent_is_told() {
    let data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&roundtable_bin(), data.path(), &[]).await;
    let people = people(&hub).await;
    let agent = reviewer(
        hub.ws_url(),
        people.reviewer.token.clone(),
        people.erin_id.clone(),
    );
    let (url, erin, frank) = (
        people.url.as_str(),
        people.erin.as_str(),
        people.frank.as_str(),
    );
    let handle = "dana/reviewer";
    let submitted = a2a(url, handle, erin, &["submit", "c-1", "slow"]).await;
    let task = submitted["id"].as_str().unwrap().to_owned();
    // frank cannot see it, let alone cancel it: the same answer as for no task at all.
    for step in [["get", task.as_str()], ["cancel", task.as_str()]] {
        let refused = a2a(url, handle, frank, &step).await;
        assert_eq!(refused["error"], "TaskNotFoundError", "{step:?}: {refused}");
    }
    let canceled = a2a(url, handle, erin, &["cancel", &task]).await;
    assert_eq!(canceled["state"], "TASK_STATE_CANCELED", "{canceled}");
    let again = a2a(url, handle, erin, &["cancel", &task]).await;
    assert_eq!(
        again["state"], "TASK_STATE_CANCELED",
        "cancelling twice is the same task"
    );
    // Completed tasks are not cancelable.
    let done = a2a(url, handle, erin, &["block", "c-2", "PR 9"]).await;
    let refused = a2a(url, handle, erin, &["cancel", done["id"].as_str().unwrap()]).await;
    assert_eq!(refused["error"], "TaskNotCancelableError", "{refused}");
    agent.abort();
    let seen = agent.await.unwrap_err();
    assert!(seen.is_cancelled());
    // The agent's room shows the cancellation, once.
    let mut erin_ws = Client::connect(&hub.ws_url()).await.unwrap();
    erin_ws.auth(erin, "laptop").await.unwrap();
    let notices = erin_ws
        .room_log(submitted["context"].as_str().unwrap())
        .await
        .unwrap()
        .into_iter()
        .filter(|event| event.body["x_a2a"]["state"] == "canceled")
        .count();
    assert_eq!(notices, 1);
    let _ = people.dana;
    hub.terminate().await;
}

/// Runs the JavaScript client's flow over one binding.
async fn a2a_js(hub: &str, token: &str, transport: &str, prefix: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/js/a2a_client.mjs");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(test_node22())
            .arg(script)
            .args([hub, "dana/reviewer", token, transport, prefix])
            .env("A2A_JS_SDK", test_npm_package("@a2a-js/sdk"))
            .output(),
    )
    .await
    .expect("the JavaScript client finishes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|_| {
        panic!(
            "{transport} printed {stdout:?}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_client_gets_the_same_tasks_over_json_rpc_and_http_json() {
    let data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&roundtable_bin(), data.path(), &[]).await;
    let people = people(&hub).await;
    let agent = reviewer(
        hub.ws_url(),
        people.reviewer.token.clone(),
        people.erin_id.clone(),
    );
    let mut seen = Vec::new();
    for (transport, prefix) in [("JSONRPC", "rpc"), ("HTTP+JSON", "rest")] {
        let flow = a2a_js(&people.url, &people.erin, transport, prefix).await;
        assert!(flow.get("error").is_none(), "{flow}");
        assert_eq!(flow["blocking"]["state"], "TASK_STATE_COMPLETED", "{flow}");
        assert_eq!(
            flow["blocking"]["artifacts"],
            json!([format!("reviewed: {prefix} blocking")])
        );
        assert_eq!(flow["got"], flow["blocking"], "GetTask is the same task");
        let last = |name: &str| {
            flow[name]
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .find_map(|update| update["state"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(last("streamed"), "TASK_STATE_COMPLETED", "{flow}");
        assert_eq!(last("asked"), "TASK_STATE_INPUT_REQUIRED", "{flow}");
        assert_eq!(last("answered"), "TASK_STATE_COMPLETED", "{flow}");
        assert_eq!(flow["canceled"]["state"], "TASK_STATE_CANCELED");
        seen.push(flow);
    }
    // Both bindings see every task of erin's, the other binding's too, newest first.
    assert_eq!(seen[0]["listed"].as_array().unwrap().len(), 4);
    assert_eq!(seen[1]["listed"].as_array().unwrap().len(), 8);
    assert_eq!(
        seen[1]["listed"].as_array().unwrap()[4..],
        seen[0]["listed"].as_array().unwrap()[..]
    );
    // And one pair room holds the conversation of both.
    assert_eq!(
        seen[0]["blocking"]["context"],
        seen[1]["blocking"]["context"]
    );
    agent.abort();
    hub.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_without_consent_waits_through_a_hub_sigkill_and_goes_on_once_accepted() {
    let data = tempfile::tempdir().unwrap();
    let listen = free_loopback_address().to_string();
    let hub = HubProcess::start_on(&roundtable_bin(), data.path(), &listen, &[]).await;
    let people = people(&hub).await;
    let (url, frank) = (people.url.as_str(), people.frank.as_str());
    let handle = "dana/reviewer";

    // frank is no contact of the reviewer: his message is held, the task waits for consent.
    let held = a2a(url, handle, frank, &["submit", "f-1", "hello reviewer"]).await;
    assert_eq!(held["state"], "TASK_STATE_AUTH_REQUIRED", "{held}");
    let task = held["id"].as_str().unwrap().to_owned();
    let request = held["context"].as_str().unwrap().to_owned();
    assert!(held["status_text"].as_str().unwrap().contains(&request));

    // The hub dies at once and comes back: the held message and its task are still there.
    hub.kill().await;
    let hub = HubProcess::start_on(&roundtable_bin(), data.path(), &listen, &[]).await;
    let waiting = a2a(url, handle, frank, &["get", &task]).await;
    assert_eq!(waiting["state"], "TASK_STATE_AUTH_REQUIRED", "{waiting}");

    // dana sees only the note, accepts; the reviewer gets the message and answers.
    let mut dana = Client::connect(&hub.ws_url()).await.unwrap();
    dana.auth(&people.dana, "laptop").await.unwrap();
    let id = dana.id();
    let contacts: roundtable_protocol::server::ContactsOk = dana
        .ok(ClientFrame::Contacts(
            roundtable_protocol::client::Contacts { id },
        ))
        .await
        .decode()
        .unwrap();
    let pending = contacts
        .requests
        .iter()
        .find(|pending| pending.id == request)
        .expect("the request is pending for dana");
    assert_eq!(pending.message.as_deref(), Some("hello reviewer"));
    let frank_id = pending.from.clone();
    let agent = reviewer(hub.ws_url(), people.reviewer.token.clone(), frank_id);
    let id = dana.id();
    dana.ok(ClientFrame::ContactRespond(
        roundtable_protocol::client::ContactRespond {
            id,
            request: request.clone(),
            accept: true,
        },
    ))
    .await;
    roundtable_testkit::until("the task completes", Duration::from_secs(30), async || {
        a2a(url, handle, frank, &["get", &task]).await["state"] == "TASK_STATE_COMPLETED"
    })
    .await;
    let done = a2a(url, handle, frank, &["get", &task]).await;
    assert_eq!(done["artifacts"], json!(["reviewed: hello reviewer"]));
    assert!(done["context"].as_str().unwrap().starts_with("r_"));
    agent.abort();
    hub.terminate().await;
}

/// Runs a Python program given as text, with arguments; returns (success, stdout+stderr).
async fn python(program: &str, args: &[&str]) -> (bool, String) {
    let output = tokio::process::Command::new(test_python())
        .arg("-c")
        .arg(program)
        .args(args)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_s_own_audit_script_verifies_entries_of_every_way_and_catches_an_edited_one() {
    let data = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&roundtable_bin(), data.path(), &[]).await;
    let people = people(&hub).await;
    // Entries of every shape: a refusal through A2A, a control with its reason.
    let refused = a2a(
        &people.url,
        "dana/reviewer",
        "rt_forged_token_forged_token_forged_0000",
        &["get", "t_0123456789012345678901234567890123456789abc"],
    )
    .await;
    assert!(refused.get("error").is_some(), "{refused}");
    let mut dana = Client::connect(&hub.ws_url()).await.unwrap();
    dana.auth(&people.dana, "laptop").await.unwrap();
    let id = dana.id();
    dana.ok(ClientFrame::Control(roundtable_protocol::client::Control {
        id,
        agent: people.reviewer.agent.id.clone(),
        action: roundtable_protocol::client::ControlAction::Pause,
        room: None,
        reason: Some("budget reached".into()),
    }))
    .await;
    hub.terminate().await;

    // The script in docs/protocol.md, as a reader would copy it.
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/protocol.md"))
            .unwrap();
    let script = doc
        .split("```python\n")
        .find(|block| block.starts_with("import datetime, hashlib, json, sqlite3, sys"))
        .and_then(|block| block.split("```").next())
        .expect("the verification script in docs/protocol.md");
    let dir = data.path().to_str().unwrap();
    let (ok, report) = python(script, &[dir]).await;
    assert!(ok, "{report}");
    let verified = tokio::process::Command::new(roundtable_bin())
        .args(["hub", "--data", dir, "audit", "verify"])
        .env("ROUNDTABLE_LOG", "warn")
        .output()
        .await
        .unwrap();
    let official = String::from_utf8_lossy(&verified.stdout).into_owned();
    // "intact: N entries, head H" and "audit log intact: N entries, head H": the same.
    assert_eq!(
        format!("audit log {}", report.trim()),
        official.trim(),
        "the script and the hub agree"
    );
    let (_, ways) = python(
        "import sqlite3, sys; db = sqlite3.connect(sys.argv[1] + '/hub.sqlite3'); \
         print(sorted({str(v) for (v,) in db.execute('SELECT via FROM audit')}), \
         db.execute('SELECT count(*) FROM audit WHERE reason IS NOT NULL').fetchone()[0])",
        &[dir],
    )
    .await;
    assert_eq!(
        ways.trim(),
        "['None', 'a2a'] 1",
        "entries of both ways, one with a reason"
    );

    // Someone rewrites which way a command came: the script finds it.
    let (ok, _) = python(
        "import sqlite3, sys; db = sqlite3.connect(sys.argv[1] + '/hub.sqlite3'); \
         db.execute(\"UPDATE audit SET via = 'mcp' WHERE via = 'a2a'\"); db.commit()",
        &[dir],
    )
    .await;
    assert!(ok);
    let (ok, report) = python(script, &[dir]).await;
    assert!(!ok);
    assert!(report.contains("broken at entry"), "{report}");
}
