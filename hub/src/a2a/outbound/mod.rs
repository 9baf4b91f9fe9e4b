//! Outbound A2A: Roundtable rooms calling agents that other A2A servers run.
//!
//! Why it is built this way: a remote agent is a principal like any other (a member of
//! rooms under the invite rule, paused and stopped by its owner), so the only new thing is
//! the wire. The engine writes a call into `remote_calls` in the very transaction that
//! stores a message mentioning the remote agent (or an answer to its question); this worker
//! claims due calls (a lease, so several hub processes share the work and a crashed one's
//! calls are taken up after it), sends that one message and nothing else of the room, and
//! posts what comes back as the remote agent, through the same gateway path and checks as
//! any client. A retried call sends the same `messageId` and posts with the same
//! `client_key`s, so a crash between the two repeats nothing in the room.
//!
//! The remote agent gets only its own stored credential, never a Roundtable token, and
//! every address it is reached at passes the SSRF guard ([`address`]).

pub mod address;
pub mod answer;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use a2a::{
    GetTaskRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest,
    TRANSPORT_PROTOCOL_HTTP_JSON, TRANSPORT_PROTOCOL_JSONRPC,
};
use base64::Engine as _;
use futures_util::StreamExt;
use roundtable_protocol::bodies::{AnswerBody, MessageBody, PingBody};
use roundtable_protocol::client::{ClientFrame, RemoteCredential, SendCmd};
use roundtable_protocol::limits;
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use address::{
    OutboundPolicy, admit_card_url, admit_registration, check_card_url, check_credential,
    credential_header,
};
use answer::{Answer, Fold};

use crate::engine::{CallParties, Caller, RemoteClaim, RemoteCommand, Via};
use crate::gateway::Gateway;
use crate::session::SessionContext;
use crate::store::{EventRecord, PrincipalRecord, RemoteCallRecord, RemoteThreadRecord};

/// Calls made at once by one process.
const CALLS_AT_ONCE: usize = 16;

/// Calls read per look at the table.
const DUE_PAGE: usize = 64;

/// How often the table is looked at without a room event to wake the worker.
const IDLE_LOOK: Duration = Duration::from_secs(1);

/// How long a card is used before it is asked for again (with its `ETag`).
const CARD_FRESH: Duration = Duration::from_secs(300);

/// The largest card read.
const CARD_MAX_BYTES: usize = 256 * 1024;

/// Polling a task that is not streamed: from 1 s, doubling, to 30 s between looks.
const POLL_FIRST: Duration = Duration::from_secs(1);
const POLL_MAX: Duration = Duration::from_secs(30);

/// The worker; dropping it stops it (calls under way are retried after their lease).
#[derive(Debug)]
pub struct OutboundWorker {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OutboundWorker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the worker of this hub process.
pub fn start(context: Arc<SessionContext>) -> OutboundWorker {
    let worker = Worker {
        gateway: Gateway::new(context.clone(), Via::A2a),
        policy: Arc::new(context.config.outbound.clone()),
        ttl_ms: context.config.outbound_ttl.as_millis() as i64,
        lease_ms: context.config.outbound_lease.as_millis() as i64,
        hub_id: context.hub_id.clone(),
        cards: Arc::new(Mutex::new(HashMap::new())),
        in_flight: Arc::new(Mutex::new(HashSet::new())),
        permits: Arc::new(tokio::sync::Semaphore::new(CALLS_AT_ONCE)),
        tls: Arc::new(tls_config()),
    };
    OutboundWorker {
        task: tokio::spawn(worker.run(context)),
    }
}

type CallKey = (String, u64, String);

type RemoteClient = a2a_client::A2AClient<Box<dyn a2a_client::Transport>>;

#[derive(Clone)]
struct Worker {
    gateway: Gateway,
    policy: Arc<OutboundPolicy>,
    ttl_ms: i64,
    lease_ms: i64,
    hub_id: String,
    cards: Arc<Mutex<HashMap<String, CachedCard>>>,
    in_flight: Arc<Mutex<HashSet<CallKey>>>,
    permits: Arc<tokio::sync::Semaphore>,
    tls: Arc<rustls::ClientConfig>,
}

#[derive(Clone)]
struct CachedCard {
    card: a2a::AgentCard,
    etag: Option<String>,
    fetched: Instant,
}

/// Why a call did not get an answer.
#[derive(Debug)]
enum CallError {
    /// Worth trying again later (the network, the remote's 5xx).
    Transient(String),
    /// Never worth trying again (the guard refused the address, the card is unusable).
    Permanent(String),
}

impl Worker {
    async fn run(self, context: Arc<SessionContext>) {
        let mut rooms = context.dispatch.watch_rooms();
        let mut stopping = context.stopping.subscribe();
        loop {
            self.look().await;
            tokio::select! {
                _ = rooms.recv() => {
                    // Many writes make one look: take what else is waiting, then look.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    while rooms.try_recv().is_ok() {}
                }
                _ = tokio::time::sleep(IDLE_LOOK) => {}
                _ = stopping.changed() => return,
            }
        }
    }

    /// Starts every due call not already under way here.
    async fn look(&self) {
        let reader = self.gateway.context().reader.clone();
        let now_ms = crate::unix_ms();
        let due =
            tokio::task::spawn_blocking(move || reader.remote_calls_due(now_ms, DUE_PAGE)).await;
        let due = match due {
            Ok(Ok(due)) => due,
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot read the calls due to remote agents");
                return;
            }
            Err(_) => return,
        };
        for call in due {
            let key = (call.room.clone(), call.seq, call.remote.clone());
            if !self.lock_in_flight().insert(key.clone()) {
                continue;
            }
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                return;
            };
            let worker = self.clone();
            tokio::spawn(async move {
                worker.call(call).await;
                worker.lock_in_flight().remove(&key);
                drop(permit);
            });
        }
    }

    fn lock_in_flight(&self) -> std::sync::MutexGuard<'_, HashSet<CallKey>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The remote agent as a caller of the gateway (it writes its answers as itself).
    fn caller_of(&self, remote: &str) -> Arc<Caller> {
        let record = PrincipalRecord {
            id: remote.to_owned(),
            kind: roundtable_protocol::model::PrincipalKind::Agent,
            handle: String::new(),
            name: String::new(),
            owner: None,
            discoverable: roundtable_protocol::model::Discoverable::Private,
            description: None,
            card: None,
            created_ms: 0,
            remote: None,
        };
        Arc::new(self.gateway.caller(&record))
    }

    async fn call(&self, call: RemoteCallRecord) {
        let caller = self.caller_of(&call.remote);
        // The event first (a read), then the claim, which needs to know who wrote it.
        let event = match self
            .gateway
            .room_events_for_task(&caller, &call.room, call.seq.saturating_sub(1), 1)
            .await
        {
            Ok(events) => events.into_iter().find(|event| event.seq == call.seq),
            // Not a member any more (kicked, or the room is gone): nothing to call.
            Err(_) => None,
        };
        let Some(event) = event else {
            self.settle(&caller, &call, None).await;
            return;
        };
        let now_ms = crate::unix_ms();
        let claimed = self
            .gateway
            .remote(
                &caller,
                RemoteCommand::Claim {
                    room: call.room.clone(),
                    seq: call.seq,
                    remote: call.remote.clone(),
                    asker: event.from.clone(),
                    until_ms: now_ms + self.lease_ms,
                },
            )
            .await;
        let parties = match claimed {
            Ok(reply) if reply.claim == RemoteClaim::Claimed => match reply.parties {
                Some(parties) => parties,
                None => return,
            },
            Ok(_) => return,
            Err(refusal) => {
                tracing::warn!(code = refusal.code.as_str(), "cannot claim a remote call");
                return;
            }
        };
        let outcome = if now_ms - call.created_ms > self.ttl_ms {
            Err(CallError::Permanent(format!(
                "no answer within {} min",
                self.ttl_ms / 60_000
            )))
        } else {
            // The lease is renewed while the call runs, so a long task is not taken up
            // by another process meanwhile.
            let renewing = self.renew_lease(&caller, &call, &event.from);
            tokio::select! {
                outcome = self.exchange(&caller, &call, &event, &parties) => outcome,
                () = renewing => Err(CallError::Transient("the lease could not be renewed".into())),
            }
        };
        match outcome {
            Ok(()) => self.settle(&caller, &call, None).await,
            Err(CallError::Transient(error)) if now_ms - call.created_ms <= self.ttl_ms => {
                let backoff = 1_000i64 << call.attempts.min(8);
                tracing::info!(remote = %parties.remote_handle, attempts = call.attempts + 1, %error, "a remote agent call will be retried");
                self.settle(
                    &caller,
                    &call,
                    Some(crate::unix_ms() + backoff.min(300_000)),
                )
                .await;
            }
            Err(CallError::Transient(error) | CallError::Permanent(error)) => {
                tracing::info!(remote = %parties.remote_handle, %error, "a remote agent call failed");
                let text = format!("{} could not be reached: {error}", parties.remote_handle);
                let posted = self
                    .post_message(
                        &caller,
                        &call,
                        &event,
                        &parties,
                        "failed",
                        text,
                        Some("failed"),
                    )
                    .await;
                // Not posted (the hub is stopping, say): the call stays due and is tried again.
                if posted {
                    self.settle(&caller, &call, None).await;
                }
            }
        }
    }

    /// Renews the claim every third of the lease; ends only if a renewal fails.
    async fn renew_lease(&self, caller: &Arc<Caller>, call: &RemoteCallRecord, asker: &str) {
        let every = Duration::from_millis((self.lease_ms / 3).max(100) as u64);
        loop {
            tokio::time::sleep(every).await;
            // A claim of a call this worker holds: push `next_ms` on. The store's claim
            // takes only due calls, so renew by settling to a later time.
            let renewed = self
                .gateway
                .remote(
                    caller,
                    RemoteCommand::Settle {
                        room: call.room.clone(),
                        seq: call.seq,
                        remote: call.remote.clone(),
                        next_ms: Some(crate::unix_ms() + self.lease_ms),
                    },
                )
                .await;
            if renewed.is_err() {
                tracing::warn!(asker, "a remote call's lease could not be renewed");
                return;
            }
        }
    }

    async fn settle(&self, caller: &Arc<Caller>, call: &RemoteCallRecord, next_ms: Option<i64>) {
        let settled = self
            .gateway
            .remote(
                caller,
                RemoteCommand::Settle {
                    room: call.room.clone(),
                    seq: call.seq,
                    remote: call.remote.clone(),
                    next_ms,
                },
            )
            .await;
        if let Err(refusal) = settled {
            tracing::warn!(code = refusal.code.as_str(), "cannot settle a remote call");
        }
    }

    /// Sends the event to the remote agent and posts its answer in the room.
    async fn exchange(
        &self,
        caller: &Arc<Caller>,
        call: &RemoteCallRecord,
        event: &EventRecord,
        parties: &CallParties,
    ) -> Result<(), CallError> {
        let thread = self.thread(&call.room, &call.remote).await?;
        let Some(request) = self.request_for(call, event, parties, thread.as_ref()) else {
            // An answer to a question the remote agent no longer waits on.
            return Ok(());
        };
        let credential = self.credential(&call.remote).await?;
        let card = self.card(&parties.card_url).await?;
        let (client, streaming, endpoint) = self.client(&card, credential.as_ref())?;
        // The endpoint's name is checked now too (and again at connect): the client's errors
        // would not say that the guard refused it.
        admit_card_url(&self.policy, &endpoint)
            .await
            .map_err(CallError::Permanent)?;
        let mut fold = Fold::default();
        let mut said_working = 0u32;
        if streaming {
            let mut stream = client
                .send_streaming_message(&request)
                .await
                .map_err(|error| CallError::Transient(error.to_string()))?;
            while let Some(item) = stream.next().await {
                let item = item.map_err(|error| CallError::Transient(error.to_string()))?;
                fold.event(item);
                self.say_working(caller, call, &mut fold, &mut said_working)
                    .await;
                if fold.answer().is_some() {
                    break;
                }
            }
        } else {
            let mut request = request;
            request.configuration = Some(SendMessageConfiguration {
                accepted_output_modes: Some(vec!["text/plain".into()]),
                task_push_notification_config: None,
                history_length: None,
                return_immediately: Some(true),
            });
            let response = client
                .send_message(&request)
                .await
                .map_err(|error| CallError::Transient(error.to_string()))?;
            fold.response(response);
            let mut wait = POLL_FIRST;
            while fold.answer().is_none() {
                let Some(task_id) = fold.task_id.clone() else {
                    return Err(CallError::Permanent(
                        "it answered with neither a task nor a message".into(),
                    ));
                };
                self.say_working(caller, call, &mut fold, &mut said_working)
                    .await;
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(POLL_MAX);
                let task = client
                    .get_task(&GetTaskRequest {
                        id: task_id,
                        history_length: Some(0),
                        tenant: None,
                    })
                    .await
                    .map_err(|error| CallError::Transient(error.to_string()))?;
                fold.task(task);
            }
        }
        let Some(answer) = fold.answer() else {
            return Err(CallError::Transient(
                "its stream ended before the task did".into(),
            ));
        };
        self.post_answer(caller, call, event, parties, thread, &fold, answer)
            .await
    }

    /// Posts a working status with text as the remote agent's `status` (a few per call).
    async fn say_working(
        &self,
        caller: &Arc<Caller>,
        call: &RemoteCallRecord,
        fold: &mut Fold,
        said: &mut u32,
    ) {
        let Some(detail) = fold.working.take() else {
            return;
        };
        if *said >= 8 {
            return;
        }
        *said += 1;
        let body = serde_json::json!({
            "state": "working",
            "detail": answer::cut(&detail, 1024),
        });
        let key = self.key(call, &format!("w{said}"));
        let _ = self.send(caller, &call.room, "status", body, key).await;
    }

    /// The A2A request for a call: the mentioning message's text, or the answer to the
    /// remote agent's question with its task.
    fn request_for(
        &self,
        call: &RemoteCallRecord,
        event: &EventRecord,
        parties: &CallParties,
        thread: Option<&RemoteThreadRecord>,
    ) -> Option<SendMessageRequest> {
        let body: Value = serde_json::from_str(&event.body).ok()?;
        let (text, task_id) = match event.kind.as_str() {
            "answer" => {
                let answer: AnswerBody = serde_json::from_value(body).ok()?;
                let thread = thread?;
                if thread.ping.as_deref() != Some(answer.ping.as_str()) {
                    return None;
                }
                let text = match (answer.choice, answer.text) {
                    (Some(choice), Some(text)) => format!("{choice}\n\n{text}"),
                    (Some(choice), None) => choice,
                    (None, Some(text)) => text,
                    (None, None) => return None,
                };
                (text, thread.task_id.clone())
            }
            _ => {
                let message: MessageBody = serde_json::from_value(body).ok()?;
                // An agent that was asked a question answers by mentioning the remote
                // agent again: that goes on with the task that asked.
                let task_id = thread.and_then(|thread| {
                    (thread.ping.is_none() && thread.asker.as_deref() == Some(event.from.as_str()))
                        .then(|| thread.task_id.clone())
                        .flatten()
                });
                (message.text, task_id)
            }
        };
        let _ = parties;
        let mut message = Message::new(Role::User, vec![Part::text(text)]);
        message.message_id = self.message_id(call);
        message.context_id = thread.and_then(|thread| thread.context_id.clone());
        message.task_id = task_id;
        Some(SendMessageRequest {
            message,
            configuration: None,
            metadata: None,
            tenant: None,
        })
    }

    /// The same for every attempt of a call, so the remote agent can drop a repeat.
    fn message_id(&self, call: &RemoteCallRecord) -> String {
        let mut hash = Sha256::new();
        for part in [
            self.hub_id.as_bytes(),
            call.room.as_bytes(),
            &call.seq.to_be_bytes(),
            call.remote.as_bytes(),
        ] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part);
        }
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.finalize())
    }

    /// A `client_key` of what the remote agent posts for a call.
    fn key(&self, call: &RemoteCallRecord, what: &str) -> String {
        format!("a2o:{}:{what}", &self.message_id(call)[..22])
    }

    #[allow(clippy::too_many_arguments)]
    async fn post_answer(
        &self,
        caller: &Arc<Caller>,
        call: &RemoteCallRecord,
        event: &EventRecord,
        parties: &CallParties,
        thread: Option<RemoteThreadRecord>,
        fold: &Fold,
        answer: Answer,
    ) -> Result<(), CallError> {
        // The message the conversation began with: the mention, or for an answer the
        // mention that led to the question.
        let mention = match event.kind.as_str() {
            "answer" => thread
                .as_ref()
                .and_then(|thread| thread.mention.clone())
                .unwrap_or_else(|| event.id.clone()),
            _ => event.id.clone(),
        };
        let asker = match event.kind.as_str() {
            "answer" => thread
                .as_ref()
                .and_then(|thread| thread.asker.clone())
                .unwrap_or_else(|| event.from.clone()),
            _ => event.from.clone(),
        };
        let asker_is_user = event.kind == "answer" || parties.asker_is_user;
        let mut next = RemoteThreadRecord {
            room: call.room.clone(),
            remote: call.remote.clone(),
            context_id: fold
                .context_id
                .clone()
                .or_else(|| thread.as_ref().and_then(|thread| thread.context_id.clone())),
            ..RemoteThreadRecord::default()
        };
        let posted = match answer {
            Answer::Done { text } => {
                let text = if text.is_empty() {
                    "(it answered with no text)".to_owned()
                } else {
                    text
                };
                self.post(
                    caller,
                    call,
                    &mention,
                    &asker,
                    asker_is_user,
                    "r",
                    text,
                    None,
                )
                .await
            }
            Answer::Ended { state, text } => {
                let text = match text.is_empty() {
                    true => format!("{} {state} the task", parties.remote_handle),
                    false => format!("{} {state} the task: {text}", parties.remote_handle),
                };
                self.post(
                    caller,
                    call,
                    &mention,
                    &asker,
                    asker_is_user,
                    "r",
                    text,
                    Some(state),
                )
                .await
            }
            Answer::Needs {
                task_id,
                question,
                auth,
            } => {
                next.task_id = Some(task_id);
                next.asker = Some(asker.clone());
                next.mention = Some(mention.clone());
                if auth || asker_is_user {
                    // A person answers: a ping to the asker, or for authorization to the
                    // remote agent's owner. The answer comes back as a call of its own.
                    let ping = format!("a2a-{}", &self.message_id(call)[..16]);
                    let to = if auth { &parties.owner } else { &asker };
                    let question = if auth {
                        format!(
                            "{} asks for authorization: {}",
                            parties.remote_handle, question
                        )
                    } else {
                        question
                    };
                    next.ping = Some(ping.clone());
                    let body = serde_json::to_value(PingBody {
                        ping,
                        question: answer::cut(&question, 4096),
                        options: None,
                        to: Some(vec![to.clone()]),
                        expires_at: None,
                    })
                    .unwrap_or(Value::Null);
                    self.send(caller, &call.room, "ping", body, self.key(call, "p"))
                        .await
                } else {
                    // An agent answers by mentioning the remote agent again.
                    self.post(caller, call, &mention, &asker, false, "q", question, None)
                        .await
                }
            }
        };
        if !posted {
            return Err(CallError::Transient(
                "its answer could not be posted in the room".into(),
            ));
        }
        self.put_thread(caller, next).await;
        Ok(())
    }

    /// Posts a message as the remote agent, in reply to `mention`, mentioning an agent
    /// asker (an agent hears only what mentions it).
    #[allow(clippy::too_many_arguments)]
    async fn post(
        &self,
        caller: &Arc<Caller>,
        call: &RemoteCallRecord,
        mention: &str,
        asker: &str,
        asker_is_user: bool,
        what: &str,
        text: String,
        state: Option<&str>,
    ) -> bool {
        let mut body = serde_json::json!({
            "text": answer::cut(&text, limits::MESSAGE_TEXT),
            "reply_to": mention,
        });
        if !asker_is_user {
            body["mentions"] = serde_json::json!([asker]);
        }
        if let Some(state) = state {
            body["x_a2a"] = serde_json::json!({ "state": state });
        }
        self.send(caller, &call.room, "message", body, self.key(call, what))
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn post_message(
        &self,
        caller: &Arc<Caller>,
        call: &RemoteCallRecord,
        event: &EventRecord,
        parties: &CallParties,
        what: &str,
        text: String,
        state: Option<&str>,
    ) -> bool {
        self.post(
            caller,
            call,
            &event.id,
            &event.from,
            parties.asker_is_user || event.kind == "answer",
            what,
            text,
            state,
        )
        .await
    }

    /// Sends an event as the remote agent; true once it is stored (or was already).
    async fn send(
        &self,
        caller: &Arc<Caller>,
        room: &str,
        kind: &str,
        body: Value,
        client_key: String,
    ) -> bool {
        let frame = ClientFrame::Send(SendCmd {
            id: 1,
            room: room.to_owned(),
            client_key,
            kind: kind.to_owned(),
            body,
        });
        match self.gateway.execute(caller, &frame).await {
            Ok(_) => true,
            Err(refusal) => {
                tracing::info!(code = refusal.code.as_str(), message = %refusal.msg, "a remote agent's answer was refused");
                // Refused for good (paused, stopped, not a member, too large): nothing
                // will change by retrying; the call ends here.
                refusal.code != roundtable_protocol::ErrorCode::RateLimited
                    && refusal.code != roundtable_protocol::ErrorCode::Internal
            }
        }
    }

    async fn put_thread(&self, caller: &Arc<Caller>, thread: RemoteThreadRecord) {
        if let Err(refusal) = self
            .gateway
            .remote(caller, RemoteCommand::Thread(thread))
            .await
        {
            tracing::warn!(
                code = refusal.code.as_str(),
                "cannot keep a remote conversation"
            );
        }
    }

    async fn thread(
        &self,
        room: &str,
        remote: &str,
    ) -> Result<Option<RemoteThreadRecord>, CallError> {
        let reader = self.gateway.context().reader.clone();
        let (room, remote) = (room.to_owned(), remote.to_owned());
        tokio::task::spawn_blocking(move || reader.remote_thread(&room, &remote))
            .await
            .map_err(|_| CallError::Transient("the read was cancelled".into()))?
            .map_err(|error| CallError::Transient(error.to_string()))
    }

    async fn credential(&self, remote: &str) -> Result<Option<RemoteCredential>, CallError> {
        let reader = self.gateway.context().reader.clone();
        let remote = remote.to_owned();
        tokio::task::spawn_blocking(move || reader.remote_credential(&remote))
            .await
            .map_err(|_| CallError::Transient("the read was cancelled".into()))?
            .map_err(|error| CallError::Transient(error.to_string()))
    }

    /// An HTTP client for the guard: names resolved and checked at each connection, no
    /// redirects, no proxy from the environment, TLS with the web's roots.
    fn http(&self, credential: Option<&RemoteCredential>) -> Result<reqwest::Client, CallError> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(credential) = credential {
            let (name, value) = credential_header(credential);
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|error| CallError::Permanent(format!("its credential header: {error}")))?;
            let mut value = reqwest::header::HeaderValue::from_str(&value)
                .map_err(|error| CallError::Permanent(format!("its credential: {error}")))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        reqwest::Client::builder()
            .use_preconfigured_tls((*self.tls).clone())
            .dns_resolver(Arc::new(address::GuardedResolver {
                policy: self.policy.clone(),
            }))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(120))
            .default_headers(headers)
            .user_agent(concat!("roundtable-hub/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| CallError::Permanent(format!("cannot build its client: {error}")))
    }

    /// The remote agent's card: fetched at most every 5 minutes, again with its `ETag`.
    async fn card(&self, card_url: &str) -> Result<a2a::AgentCard, CallError> {
        let cached = self
            .cards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(card_url)
            .cloned();
        if let Some(cached) = &cached
            && cached.fetched.elapsed() < CARD_FRESH
        {
            return Ok(cached.card.clone());
        }
        let url = check_card_url(&self.policy, card_url).map_err(CallError::Permanent)?;
        let client = self.http(None)?;
        let mut request = client.get(url).header("accept", "application/json");
        if let Some(etag) = cached.as_ref().and_then(|cached| cached.etag.clone()) {
            request = request.header("if-none-match", etag);
        }
        let response = request.send().await.map_err(|error| classify(&error))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_MODIFIED
            && let Some(mut cached) = cached
        {
            cached.fetched = Instant::now();
            let card = cached.card.clone();
            self.cards
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(card_url.to_owned(), cached);
            return Ok(card);
        }
        if !status.is_success() {
            let error = format!("its card answered HTTP {status}");
            return Err(if status.is_server_error() {
                CallError::Transient(error)
            } else {
                CallError::Permanent(error)
            });
        }
        let etag = response
            .headers()
            .get("etag")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|error| CallError::Transient(error.to_string()))?;
            if body.len() + chunk.len() > CARD_MAX_BYTES {
                return Err(CallError::Permanent(format!(
                    "its card is larger than {} KiB",
                    CARD_MAX_BYTES / 1024
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let card: a2a::AgentCard = serde_json::from_slice(&body).map_err(|error| {
            CallError::Permanent(format!("its card is not an A2A card: {error}"))
        })?;
        self.cards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                card_url.to_owned(),
                CachedCard {
                    card: card.clone(),
                    etag,
                    fetched: Instant::now(),
                },
            );
        Ok(card)
    }

    /// A client on the first interface of the card the hub speaks (JSON-RPC or HTTP+JSON),
    /// with its tenant, and whether to stream.
    fn client(
        &self,
        card: &a2a::AgentCard,
        credential: Option<&RemoteCredential>,
    ) -> Result<(RemoteClient, bool, String), CallError> {
        let interface = card
            .supported_interfaces
            .iter()
            .find(|interface| {
                interface.protocol_binding == TRANSPORT_PROTOCOL_JSONRPC
                    || interface.protocol_binding == TRANSPORT_PROTOCOL_HTTP_JSON
            })
            .ok_or_else(|| {
                CallError::Permanent(
                    "its card offers neither JSON-RPC nor HTTP+JSON, which the hub speaks".into(),
                )
            })?;
        let endpoint =
            check_card_url(&self.policy, &interface.url).map_err(CallError::Permanent)?;
        let http = self.http(credential)?;
        let transport: Box<dyn a2a_client::Transport> =
            if interface.protocol_binding == TRANSPORT_PROTOCOL_JSONRPC {
                Box::new(a2a_client::jsonrpc::JsonRpcTransport::new(
                    http,
                    endpoint.to_string(),
                ))
            } else {
                Box::new(a2a_client::rest::RestTransport::new(
                    http,
                    endpoint.to_string(),
                ))
            };
        let mut client = a2a_client::A2AClient::new(transport);
        if let Some(tenant) = &interface.tenant {
            client = client.with_tenant(tenant.clone());
        }
        let streaming = card.capabilities.streaming == Some(true);
        Ok((client, streaming, endpoint.to_string()))
    }
}

/// A failed request: refused by the guard (for good), or the network (worth retrying).
fn classify(error: &reqwest::Error) -> CallError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = source {
        let text = error.to_string();
        if text.contains("which remote agents may not have") {
            return CallError::Permanent(text);
        }
        source = error.source();
    }
    CallError::Transient(error.to_string())
}

/// TLS for calls out: the web's roots (the Mozilla set), ring, TLS 1.2 and 1.3.
fn tls_config() -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default protocol versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}
