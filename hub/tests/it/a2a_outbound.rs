//! Outbound A2A over real sockets: a room mentions a remote agent served by an A2A server
//! on loopback (`a2a-server-lf`'s own request handler over an echoing executor, recording
//! every request's headers and messages), and its answers come back into the room as that
//! agent. The SSRF guard refuses inner addresses at registration; a paused or stopped remote
//! agent is not called; an unreachable one ends in a message saying so. The official Python
//! server (`a2a-sdk`) plays the remote in `tests/e2e/a2a_clients.rs`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a::{
    A2AError, Artifact, Message, Part, Role, StreamResponse, Task, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use a2a_server::{AgentExecutor, DefaultRequestHandler, ExecutorContext, InMemoryTaskStore};
use futures_util::stream::{self, BoxStream};
use roundtable_protocol::ServerFrame;
use roundtable_protocol::client::{
    ClientFrame, Control, ControlAction, RegisterRemoteAgent, RemoteCredential,
    RemoteCredentialScheme, SendCmd,
};
use roundtable_protocol::model::Discoverable;
use roundtable_protocol::server::{Event, RegisterRemoteAgentOk};
use roundtable_testkit::{Client, Incoming, TestHub, until};
use serde_json::{Value, json};

use crate::support::{invite, metric, room, say};

/// What the remote server saw.
#[derive(Default)]
struct Seen {
    /// Every header value of every request.
    headers: Vec<(String, String)>,
    /// The messages the executor was given, with the task each went to.
    messages: Vec<(Message, String)>,
}

/// Echoes a message's text; a text with `?` asks "which one?" first, and the answer to that
/// completes the task with it.
struct Echo {
    seen: Arc<Mutex<Seen>>,
}

fn status(ctx: &ExecutorContext, state: TaskState, text: Option<&str>) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: ctx.task_id.clone(),
        context_id: ctx.context_id.clone(),
        status: TaskStatus {
            state,
            message: text.map(|text| Message::new(Role::Agent, vec![Part::text(text)])),
            timestamp: None,
        },
        metadata: None,
    })
}

impl AgentExecutor for Echo {
    fn execute(
        &self,
        ctx: ExecutorContext,
    ) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        let message = ctx.message.clone().expect("a message");
        let text = message.text().unwrap_or_default().to_owned();
        self.seen
            .lock()
            .unwrap()
            .messages
            .push((message.clone(), ctx.task_id.clone()));
        if text.contains("refuse") {
            return Box::pin(stream::iter([Err(A2AError::invalid_params(
                "no such city",
            ))]));
        }
        let mut events = Vec::new();
        if ctx.stored_task.is_none() {
            events.push(StreamResponse::Task(Task {
                id: ctx.task_id.clone(),
                context_id: ctx.context_id.clone(),
                status: TaskStatus {
                    state: TaskState::Submitted,
                    message: None,
                    timestamp: None,
                },
                artifacts: None,
                history: Some(vec![message]),
                metadata: None,
            }));
        }
        if ctx.stored_task.is_none() && text.contains('?') {
            events.push(status(&ctx, TaskState::InputRequired, Some("which one?")));
        } else {
            events.push(status(&ctx, TaskState::Working, Some("echoing")));
            events.push(StreamResponse::ArtifactUpdate(
                a2a::TaskArtifactUpdateEvent {
                    task_id: ctx.task_id.clone(),
                    context_id: ctx.context_id.clone(),
                    artifact: Artifact {
                        artifact_id: "echo".into(),
                        name: None,
                        description: None,
                        parts: vec![Part::text(format!("echo: {text}"))],
                        metadata: None,
                        extensions: None,
                    },
                    append: None,
                    last_chunk: Some(true),
                    metadata: None,
                },
            ));
            events.push(status(&ctx, TaskState::Completed, None));
        }
        Box::pin(stream::iter(events.into_iter().map(Ok)))
    }

    fn cancel(&self, ctx: ExecutorContext) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        Box::pin(stream::iter([Ok(status(&ctx, TaskState::Canceled, None))]))
    }
}

/// An A2A server on loopback whose card says it streams (or not).
struct Remote {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Remote {
    async fn start(streaming: bool) -> Remote {
        Remote::start_at(streaming, "127.0.0.1").await
    }

    /// A remote whose card names its endpoint at `endpoint_host` (the card is at 127.0.0.1).
    async fn start_at(streaming: bool, endpoint_host: &str) -> Remote {
        Remote::start_naming(streaming, |addr| {
            format!("http://{endpoint_host}:{}/", addr.port())
        })
        .await
    }

    /// A remote whose card (at 127.0.0.1) names the endpoint `endpoint(its own address)`.
    async fn start_naming(streaming: bool, endpoint: impl FnOnce(SocketAddr) -> String) -> Remote {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler = Arc::new(DefaultRequestHandler::new(
            Echo { seen: seen.clone() },
            InMemoryTaskStore::new(),
        ));
        let card = json!({
            "name": "echo",
            "description": "echoes",
            "version": "1",
            "supportedInterfaces": [{
                "url": endpoint(addr),
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }],
            "capabilities": {"streaming": streaming},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        });
        let recorded = seen.clone();
        let router = a2a_server::jsonrpc::jsonrpc_router(handler)
            .route(
                "/.well-known/agent-card.json",
                axum::routing::get(move || {
                    let card = card.clone();
                    async move { axum::Json(card) }
                }),
            )
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let recorded = recorded.clone();
                    async move {
                        let headers = request
                            .headers()
                            .iter()
                            .map(|(name, value)| {
                                (
                                    name.as_str().to_owned(),
                                    value.to_str().unwrap_or("").to_owned(),
                                )
                            })
                            .collect::<Vec<_>>();
                        recorded.lock().unwrap().headers.extend(headers);
                        next.run(request).await
                    }
                },
            ));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Remote {
            addr,
            seen,
            _task: task,
        }
    }

    fn card_url(&self) -> String {
        format!("http://{}/.well-known/agent-card.json", self.addr)
    }

    fn messages(&self) -> Vec<(Message, String)> {
        self.seen.lock().unwrap().messages.clone()
    }
}

fn register_frame(id: u64, name: &str, card_url: &str, credential: Option<&str>) -> ClientFrame {
    ClientFrame::RegisterRemoteAgent(RegisterRemoteAgent {
        id,
        name: name.into(),
        card_url: card_url.into(),
        credential: credential.map(|value| RemoteCredential {
            scheme: RemoteCredentialScheme::Bearer,
            value: value.into(),
            header: None,
        }),
        description: Some("a remote echo".into()),
        discoverable: Some(Discoverable::Contacts),
    })
}

async fn register_remote(owner: &mut Client, name: &str, remote: &Remote) -> RegisterRemoteAgentOk {
    let id = owner.id();
    owner
        .ok(register_frame(
            id,
            name,
            &remote.card_url(),
            Some("remote-secret-1"),
        ))
        .await
        .decode()
        .unwrap()
}

/// A hub that lets remote agents be on loopback, a remote A2A server, and dana with her
/// remote agent `dana/echo` and a room of the two, read live.
struct EchoRoom {
    hub: TestHub,
    remote: Remote,
    dana: Client,
    signup: roundtable_protocol::server::SignupOk,
    echo: RegisterRemoteAgentOk,
    room: String,
}

async fn echo_room(streaming: bool) -> EchoRoom {
    let hub = TestHub::start_with(allow_private).await;
    let remote = Remote::start(streaming).await;
    let (mut dana, signup) = hub.user("dana").await;
    let echo = register_remote(&mut dana, "echo", &remote).await;
    let room = room(&mut dana, &["dana/echo"]).await;
    live(&mut dana).await;
    EchoRoom {
        hub,
        remote,
        dana,
        signup,
        echo,
        room,
    }
}

/// dana answers a ping in a room.
async fn answer(dana: &mut Client, room: &str, key: &str, ping: &Value, text: &str) {
    let id = dana.id();
    dana.ok(ClientFrame::Send(SendCmd {
        id,
        room: room.into(),
        client_key: key.into(),
        kind: "answer".into(),
        body: json!({"ping": ping, "text": text}),
    }))
    .await;
}

/// The calls the hub's processes have made to remote agents, once each has looked at the
/// calls due twice more: the second of those looks began after this was called, so a call
/// due by then would have been made. What a negative check waits on, rather than a
/// time in which nothing happened.
async fn calls_made_once_looked(hub: &TestHub) -> u64 {
    const LOOKS: &str = "roundtable_a2a_outbound_looks_total";
    const CALLS: &str = "roundtable_a2a_outbound_calls_total";
    let mut started = 0;
    for process in hub.processes() {
        let looked = metric(process, LOOKS).await;
        until(
            "the outbound worker looks at the calls due twice more",
            Duration::from_secs(20),
            async || metric(process, LOOKS).await >= looked + 2,
        )
        .await;
        started += metric(process, CALLS).await;
    }
    started
}

/// The attempts made at the call the mention at `seq` of `room` owes a remote agent;
/// `None` when it owes none (written with the event, so known once it is stored).
fn owed_call_attempts(hub: &TestHub, room: &str, seq: u64) -> Option<i64> {
    let rows = hub.select(&format!(
        "SELECT attempts FROM remote_calls WHERE room = '{room}' AND seq = {seq}"
    ));
    rows.first().map(|row| row[0].parse().unwrap())
}

/// Replays what there is, so that what follows arrives live.
async fn live(client: &mut Client) {
    crate::support::sync(client, &[]).await;
}

fn allow_private(config: &mut roundtable_hub::HubConfig) {
    config.outbound.allow_private = true;
}

/// Reads the room until an event of `kind` from `from` arrives (sent by others: a client
/// is not told of its own writes again), within 60 s: a paused call waits out its deferral,
/// and in a cluster, or under Wine, under load that takes its time.
async fn next_from(client: &mut Client, from: &str, kind: &str) -> Event {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let next = match client.backlog.pop_front() {
            Some(frame) => Some(Incoming::Frame(frame)),
            None => client
                .recv_within(deadline.saturating_duration_since(tokio::time::Instant::now()))
                .await
                .expect("the connection"),
        };
        let event = match next {
            Some(Incoming::Frame(ServerFrame::Evt(event))) => event,
            Some(Incoming::Closed(code)) => panic!("closed ({code:?}) waiting for {kind}"),
            Some(_) => continue,
            None => panic!("no {kind} from {from} within 60 s"),
        };
        // A remote agent's notice on joining is not an answer.
        let notice = event.body["x_a2a"]["remote"].is_string();
        if event.from == from && event.kind == kind && !notice {
            return event;
        }
    }
}

async fn a_mention_is_answered_by_the_remote_agent(streaming: bool) {
    let hub = TestHub::start_with(allow_private).await;
    let remote = Remote::start(streaming).await;
    let (mut dana, _) = hub.user("dana").await;
    let echo = register_remote(&mut dana, "echo", &remote).await;
    assert_eq!(echo.agent.handle, "dana/echo");
    assert_eq!(echo.card_url, remote.card_url());
    let room = room(&mut dana, &["dana/echo"]).await;
    live(&mut dana).await;
    say(
        &mut dana,
        &room,
        "chatter-0001",
        "private chatter, for the room only",
    )
    .await;
    let mention = say(&mut dana, &room, "mention-0001", "@dana/echo hello there").await;
    let reply = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(reply.body["text"], "echo: @dana/echo hello there");
    assert_eq!(reply.body["reply_to"], json!(mention.id));
    // On joining, it told the room where what mentions it goes (once, calling no one).
    let notices: Vec<_> = dana
        .room_log(&room)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| event.from == echo.agent.id && event.body["x_a2a"]["remote"].is_string())
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].body["x_a2a"]["remote"], "127.0.0.1");
    assert!(
        notices[0].body["text"]
            .as_str()
            .unwrap()
            .contains("Messages in this room that mention dana/echo are sent there"),
        "{}",
        notices[0].body
    );
    // Only the mentioning message left the hub, with the stored credential and no token of
    // ours.
    let messages = remote.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].0.text(), Some("@dana/echo hello there"));
    let headers = remote.seen.lock().unwrap().headers.clone();
    assert!(
        headers
            .iter()
            .any(|(name, value)| name == "authorization" && value == "Bearer remote-secret-1"),
        "{headers:?}"
    );
    assert!(
        headers.iter().all(|(_, value)| !value.contains("rt_")),
        "a Roundtable token left the hub: {headers:?}"
    );
    // The same event is never called twice: nothing more arrives.
    dana.expect_silence(Duration::from_millis(1500))
        .await
        .unwrap();
    assert_eq!(remote.messages().len(), 1);
}

#[tokio::test]
async fn a_streaming_remote_agent_answers_a_mention_in_the_room() {
    a_mention_is_answered_by_the_remote_agent(true).await;
}

#[tokio::test]
async fn a_remote_agent_that_does_not_stream_is_polled_for_its_answer() {
    a_mention_is_answered_by_the_remote_agent(false).await;
}

#[tokio::test]
async fn input_required_becomes_a_ping_and_its_answer_goes_on_with_the_task() {
    let EchoRoom {
        hub: _hub,
        remote,
        mut dana,
        signup,
        echo,
        room,
    } = echo_room(true).await;
    let mention = say(&mut dana, &room, "mention-0002", "@dana/echo which city?").await;
    let ping = next_from(&mut dana, &echo.agent.id, "ping").await;
    assert_eq!(ping.body["question"], "which one?");
    assert_eq!(ping.body["to"], json!([signup.principal.id]));
    answer(
        &mut dana,
        &room,
        "answer-00001",
        &ping.body["ping"],
        "Paris",
    )
    .await;
    let reply = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(reply.body["text"], "echo: Paris");
    assert_eq!(reply.body["reply_to"], json!(mention.id));
    let messages = remote.messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    // The answer went to the task that asked, in its context.
    assert_eq!(
        messages[1].0.task_id.as_deref(),
        Some(messages[0].1.as_str())
    );
    assert_eq!(messages[1].1, messages[0].1);
    assert!(messages[1].0.context_id.is_some());
}

#[tokio::test]
async fn an_agent_asked_for_input_answers_by_mentioning_the_remote_agent() {
    let hub = TestHub::start_with(allow_private).await;
    let remote = Remote::start(true).await;
    let (mut dana, _) = hub.user("dana").await;
    let echo = register_remote(&mut dana, "echo", &remote).await;
    let helper = crate::support::agent(&mut dana, "helper").await;
    let room = room(&mut dana, &["dana/echo", "dana/helper"]).await;
    live(&mut dana).await;
    let mut helper_client = crate::support::login(&hub, &helper.token, "d1").await;
    live(&mut helper_client).await;
    let asked = say(
        &mut helper_client,
        &room,
        "mention-0003",
        "@dana/echo which file?",
    )
    .await;
    // An agent hears what mentions it: the question does.
    let question = next_from(&mut helper_client, &echo.agent.id, "message").await;
    assert_eq!(question.body["text"], "which one?");
    assert_eq!(question.body["reply_to"], json!(asked.id));
    assert_eq!(question.body["mentions"], json!([helper.agent.id]));
    say(
        &mut helper_client,
        &room,
        "mention-0004",
        "@dana/echo main.rs",
    )
    .await;
    let reply = next_from(&mut helper_client, &echo.agent.id, "message").await;
    assert_eq!(reply.body["text"], "echo: @dana/echo main.rs");
    let messages = remote.messages();
    assert_eq!(
        messages[1].0.task_id.as_deref(),
        Some(messages[0].1.as_str())
    );
}

#[tokio::test]
async fn a_stopped_or_paused_remote_agent_is_not_called() {
    let EchoRoom {
        hub,
        remote,
        mut dana,
        signup: _,
        echo,
        room,
    } = echo_room(true).await;
    let mut mentions = Vec::new();
    for (action, key, text) in [
        (
            ControlAction::Stop,
            "stopped-0001",
            "@dana/echo while stopped",
        ),
        (
            ControlAction::Pause,
            "paused-00001",
            "@dana/echo while paused",
        ),
    ] {
        let id = dana.id();
        dana.ok(ClientFrame::Control(Control {
            id,
            agent: echo.agent.id.clone(),
            action,
            room: Some(room.clone()),
            reason: None,
        }))
        .await;
        let mention = say(&mut dana, &room, key, text).await.seq;
        mentions.push(mention);
        assert_eq!(calls_made_once_looked(&hub).await, 0, "{action:?}: called");
        // Stopped, nothing is owed; paused, the call is owed and waits, untried.
        let owed = owed_call_attempts(&hub, &room, mention);
        match action {
            ControlAction::Stop => assert_eq!(owed, None, "owed while stopped"),
            _ => assert_eq!(owed, Some(0), "{action:?}: not owed, or tried"),
        }
        assert!(remote.messages().is_empty(), "{action:?}: called");
        let id = dana.id();
        dana.ok(ClientFrame::Control(Control {
            id,
            agent: echo.agent.id.clone(),
            action: ControlAction::Resume,
            room: Some(room.clone()),
            reason: None,
        }))
        .await;
    }
    // Resumed: the mention made while paused is made (its turn comes first), then the new
    // one; the one made while stopped was dropped for good.
    say(&mut dana, &room, "resumed-0001", "@dana/echo now").await;
    let first = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(first.body["text"], "echo: @dana/echo while paused");
    let second = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(second.body["text"], "echo: @dana/echo now");
    let texts: Vec<_> = remote
        .messages()
        .iter()
        .map(|(message, _)| message.text().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(texts, ["@dana/echo while paused", "@dana/echo now"]);
    let next_ms = |seq: u64| {
        hub.select(&format!(
            "SELECT coalesce(next_ms, -1) FROM remote_calls WHERE room = '{room}' AND seq = {seq}"
        ))
    };
    assert!(
        next_ms(mentions[0]).is_empty(),
        "nothing is owed for what was said while it was stopped"
    );
}

#[tokio::test]
async fn an_unreachable_remote_agent_ends_in_a_message_saying_so() {
    let hub = TestHub::start_with(|config| {
        allow_private(config);
        config.outbound_ttl = Duration::from_secs(2);
    })
    .await;
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/.well-known/agent-card.json",
        closed.local_addr().unwrap()
    );
    drop(closed);
    let (mut dana, _) = hub.user("dana").await;
    let id = dana.id();
    let echo: RegisterRemoteAgentOk = dana
        .ok(register_frame(id, "gone", &url, None))
        .await
        .decode()
        .unwrap();
    let room = room(&mut dana, &["dana/gone"]).await;
    live(&mut dana).await;
    let mention = say(&mut dana, &room, "mention-0005", "@dana/gone hello").await;
    let failed = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(failed.body["x_a2a"]["state"], "failed");
    assert_eq!(failed.body["reply_to"], json!(mention.id));
    assert!(
        failed.body["text"]
            .as_str()
            .unwrap()
            .starts_with("dana/gone could not be reached"),
        "{}",
        failed.body
    );
}

#[tokio::test]
async fn the_guard_refuses_inner_addresses_and_tokens_at_registration() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let mut refusals = Vec::new();
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "https://169.254.169.254/",
        "http://10.1.2.3/",
        "https://10.1.2.3/.well-known/agent-card.json",
        "https://[::1]/",
        "https://localhost/",
        "http://agents.example.com/",
        "ftp://agents.example.com/",
        "https://user:password@agents.example.com/",
    ] {
        let id = dana.id();
        let refused = dana.err(register_frame(id, "probe", url, None)).await;
        assert_eq!(refused.code.as_str(), "bad_frame", "{url}: {refused:?}");
        refusals.push(refused.msg);
    }
    assert!(refusals[0].contains("plain http"), "{refusals:?}");
    assert!(refusals[1].contains("link-local"), "{refusals:?}");
    assert!(refusals[3].contains("private"), "{refusals:?}");
    assert!(refusals[5].contains("loopback"), "{refusals:?}");
    // A name that resolves to an inner address is refused for what it resolves to.
    let host = hostname();
    if let Some(host) = host {
        let inner = tokio::net::lookup_host((host.as_str(), 443))
            .await
            .map(|addresses| {
                let addresses: Vec<_> = addresses.collect();
                !addresses.is_empty()
                    && addresses.iter().all(|address| {
                        roundtable_engine::outbound_guard::forbidden(address.ip()).is_some()
                    })
            })
            .unwrap_or(false);
        if inner {
            let id = dana.id();
            let refused = dana
                .err(register_frame(
                    id,
                    "probe",
                    &format!("https://{host}/"),
                    None,
                ))
                .await;
            assert!(refused.msg.contains("resolves to"), "{refused:?}");
        }
    }
    // A Roundtable token is never a remote agent's credential.
    let id = dana.id();
    let token = hub.user("erin").await.1.token;
    let refused = dana
        .err(register_frame(
            id,
            "probe",
            "https://93.184.215.14/",
            Some(&token),
        ))
        .await;
    assert!(refused.msg.contains("Roundtable token"), "{refused:?}");
    // Nothing was made: the name is still free.
    let listed = hub.select_i64("SELECT count(*) FROM principals WHERE handle = 'dana/probe'");
    assert_eq!(listed, 0);
    // An agent cannot register one.
    let helper = crate::support::agent(&mut dana, "helper").await;
    let mut helper_client = crate::support::login(&hub, &helper.token, "d1").await;
    let id = helper_client.id();
    let refused = helper_client
        .err(register_frame(id, "probe", "https://93.184.215.14/", None))
        .await;
    assert_eq!(refused.code.as_str(), "forbidden");
}

#[tokio::test]
async fn a_remote_agent_has_no_token_and_its_credential_is_never_shown() {
    let hub = TestHub::start_with(allow_private).await;
    let remote = Remote::start(true).await;
    let (mut dana, _) = hub.user("dana").await;
    let id = dana.id();
    let ok = dana
        .ok(register_frame(
            id,
            "echo",
            &remote.card_url(),
            Some("remote-secret-2"),
        ))
        .await;
    let text = serde_json::to_string(&ok).unwrap();
    assert!(!text.contains("remote-secret-2"), "{text}");
    assert!(!text.contains("rt_"), "{text}");
    let echo: RegisterRemoteAgentOk = ok.decode().unwrap();
    let id = dana.id();
    let refused = dana
        .err(ClientFrame::AgentToken(
            roundtable_protocol::client::AgentToken {
                id,
                agent: echo.agent.id.clone(),
                action: roundtable_protocol::client::TokenAction::Rotate,
            },
        ))
        .await;
    assert_eq!(refused.code.as_str(), "conflict");
    // Kept for the calls, nowhere else: not in the audit log, not in any event.
    let audit: Vec<Vec<String>> =
        hub.select("SELECT action || ' ' || coalesce(target, '') FROM audit");
    assert!(
        audit
            .iter()
            .flatten()
            .all(|entry| !entry.contains("remote-secret-2")),
        "{audit:?}"
    );
    let events = hub.select_i64("SELECT count(*) FROM events WHERE body LIKE '%remote-secret-2%'");
    assert_eq!(events, 0);
    // It can be invited like any agent of dana's, and its home room holds dana and it.
    let home = echo.room.expect("a home room");
    assert_eq!(home.members.len(), 2);
    let other = room(&mut dana, &[]).await;
    invite(&mut dana, &other, "dana/echo").await;
}

fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

#[tokio::test]
async fn remote_agents_quoting_each_other_do_not_call_each_other() {
    let hub = TestHub::start_with(allow_private).await;
    let remote = Remote::start(true).await;
    let (mut dana, _) = hub.user("dana").await;
    let echo = register_remote(&mut dana, "echo", &remote).await;
    let other = register_remote(&mut dana, "other", &remote).await;
    let room = room(&mut dana, &["dana/echo", "dana/other"]).await;
    live(&mut dana).await;
    say(
        &mut dana,
        &room,
        "mention-0006",
        "@dana/echo @dana/other hi both",
    )
    .await;
    // Each answers once; each answer mentions the other (an echo quotes), and calls no one.
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(20), dana.next_event())
            .await
            .expect("both answer")
            .unwrap();
        let notice = event.body["x_a2a"]["remote"].is_string();
        if event.kind == "message"
            && !notice
            && [&echo.agent.id, &other.agent.id].contains(&&event.from)
        {
            assert_eq!(event.body["text"], "echo: @dana/echo @dana/other hi both");
            answered.insert(event.from);
        }
    }
    assert_eq!(calls_made_once_looked(&hub).await, 2);
    assert_eq!(remote.messages().len(), 2, "{:?}", remote.messages());
}

#[tokio::test]
async fn a_question_waiting_for_its_answer_survives_other_mentions() {
    let EchoRoom {
        hub: _hub,
        remote: _remote,
        mut dana,
        signup: _,
        echo,
        room,
    } = echo_room(true).await;
    let asked = say(&mut dana, &room, "mention-0007", "@dana/echo which city?").await;
    let ping = next_from(&mut dana, &echo.agent.id, "ping").await;
    // Meanwhile another mention is answered; the question still waits for dana.
    say(&mut dana, &room, "mention-0008", "@dana/echo hello").await;
    let reply = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(reply.body["text"], "echo: @dana/echo hello");
    answer(&mut dana, &room, "answer-00002", &ping.body["ping"], "Lyon").await;
    let reply = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(reply.body["text"], "echo: Lyon");
    assert_eq!(reply.body["reply_to"], json!(asked.id));
}

#[tokio::test]
async fn an_answered_call_taken_up_again_does_not_call_the_remote_agent_twice() {
    let EchoRoom {
        hub,
        remote,
        mut dana,
        signup: _,
        echo,
        room,
    } = echo_room(true).await;
    let mention = say(&mut dana, &room, "mention-0009", "@dana/echo once").await;
    next_from(&mut dana, &echo.agent.id, "message").await;
    // As if the attempt that posted the answer died before it settled the call.
    let settled = |hub: &TestHub| {
        hub.select(&format!(
            "SELECT coalesce(next_ms, -1) FROM remote_calls WHERE room = '{room}' AND seq = {}",
            mention.seq
        ))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while settled(&hub) != [["-1"]] && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    hub.execute(&format!(
        "UPDATE remote_calls SET next_ms = 0 WHERE room = '{room}' AND seq = {}",
        mention.seq
    ));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while settled(&hub) != [["-1"]] && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(settled(&hub), [["-1"]], "taken up and settled again");
    assert_eq!(remote.messages().len(), 1, "called once");
    dana.expect_silence(Duration::from_millis(500))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_credential_goes_only_to_the_card_s_host() {
    let hub = TestHub::start_with(allow_private).await;
    // The card is at 127.0.0.1 but sends calls to `localhost`.
    let remote = Remote::start_at(true, "localhost").await;
    let (mut dana, _) = hub.user("dana").await;
    let echo = register_remote(&mut dana, "echo", &remote).await;
    let room = room(&mut dana, &["dana/echo"]).await;
    live(&mut dana).await;
    say(&mut dana, &room, "mention-0010", "@dana/echo hello").await;
    let failed = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(failed.body["x_a2a"]["state"], "failed");
    assert!(
        failed.body["text"]
            .as_str()
            .unwrap()
            .contains("another host"),
        "{}",
        failed.body
    );
    assert!(remote.messages().is_empty());
    let headers = remote.seen.lock().unwrap().headers.clone();
    assert!(
        headers.iter().all(|(name, _)| name != "authorization"),
        "the credential left: {headers:?}"
    );
}

#[tokio::test]
async fn an_error_the_remote_agent_answers_with_ends_the_call_at_once() {
    let EchoRoom {
        hub: _hub,
        remote: _remote,
        mut dana,
        signup: _,
        echo,
        room,
    } = echo_room(false).await;
    let mention = say(&mut dana, &room, "mention-0011", "@dana/echo refuse this").await;
    // Not retried for the call's hour: said at once.
    let failed = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(failed.body["x_a2a"]["state"], "failed", "{}", failed.body);
    assert_eq!(failed.body["reply_to"], json!(mention.id));
    let text = failed.body["text"].as_str().unwrap();
    assert!(
        text.contains("no such city") || text.contains("failed"),
        "{text}"
    );
}

#[tokio::test]
async fn a_credential_goes_only_to_the_card_s_scheme_host_and_port() {
    let hub = TestHub::start_with(allow_private).await;
    // Another server on the card's host, on another port: the card sends calls there.
    let elsewhere = Remote::start(true).await;
    let elsewhere_port = elsewhere.addr.port();
    let remote =
        Remote::start_naming(true, |_| format!("http://127.0.0.1:{elsewhere_port}/")).await;
    let (mut dana, _) = hub.user("dana").await;
    let echo = register_remote(&mut dana, "echo", &remote).await;
    let room = room(&mut dana, &["dana/echo"]).await;
    live(&mut dana).await;
    say(&mut dana, &room, "mention-0012", "@dana/echo hello").await;
    let failed = next_from(&mut dana, &echo.agent.id, "message").await;
    assert_eq!(failed.body["x_a2a"]["state"], "failed", "{}", failed.body);
    assert!(
        failed.body["text"]
            .as_str()
            .unwrap()
            .contains("another host, scheme or port"),
        "{}",
        failed.body
    );
    assert!(elsewhere.messages().is_empty());
    let headers = elsewhere.seen.lock().unwrap().headers.clone();
    assert!(
        headers.iter().all(|(name, _)| name != "authorization"),
        "the credential went to another port: {headers:?}"
    );
}

#[tokio::test]
async fn plain_http_goes_to_private_addresses_only_when_those_are_allowed() {
    let hub = TestHub::start_with(allow_private).await;
    let (mut dana, _) = hub.user("dana").await;
    for url in [
        "http://93.184.215.14/.well-known/agent-card.json",
        "http://[2606:4700::1111]:8080/",
    ] {
        let id = dana.id();
        let refused = dana.err(register_frame(id, "probe", url, None)).await;
        assert_eq!(refused.code.as_str(), "bad_frame", "{url}: {refused:?}");
        assert!(refused.msg.contains("plain http"), "{url}: {refused:?}");
    }
    // A metadata address stays out in every form, the carrier-grade NAT one too.
    for url in [
        "http://100.100.100.200/latest/meta-data/",
        "https://[64:ff9b:1::a9fe:a9fe]/",
        "https://[::ffff:0:a9fe:a9fe]/",
    ] {
        let id = dana.id();
        let refused = dana.err(register_frame(id, "probe", url, None)).await;
        assert!(refused.msg.contains("metadata"), "{url}: {refused:?}");
    }
    // The same public host over https, and a private one over http, are taken.
    for (name, url) in [
        (
            "public",
            "https://93.184.215.14/.well-known/agent-card.json",
        ),
        ("lan", "http://10.1.2.3:8080/.well-known/agent-card.json"),
    ] {
        let id = dana.id();
        dana.ok(register_frame(id, name, url, None)).await;
    }
}
