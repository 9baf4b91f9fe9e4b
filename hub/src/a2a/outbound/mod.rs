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

/// Calls made at once by one process for the remote agents of one user: the others' calls
/// keep their slots however slow that user's agents are.
const CALLS_AT_ONCE_PER_OWNER: usize = 4;

/// How soon a call put back for its owner's slots is looked at again.
const OWNER_BUSY_RETRY_MS: i64 = 2_000;

/// Calls read per look at the table.
const DUE_PAGE: usize = 64;

/// How long room events are gathered into one look at the table.
const LOOK_GATHER: Duration = Duration::from_millis(50);

/// How often the table is looked at without a room event to wake the worker.
const IDLE_LOOK: Duration = Duration::from_secs(1);

/// How long a card is used before it is asked for again (with its `ETag`).
const CARD_FRESH: Duration = Duration::from_secs(300);

/// The largest card read.
const CARD_MAX_BYTES: usize = 256 * 1024;

/// How long a settled call is kept, and how often older ones are forgotten.
const KEEP_SETTLED: Duration = Duration::from_secs(7 * 24 * 3600);
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

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
        owners: Arc::new(Mutex::new(HashMap::new())),
        permits: Arc::new(tokio::sync::Semaphore::new(CALLS_AT_ONCE)),
        tls: Arc::new(tls_config()),
    };
    OutboundWorker {
        task: tokio::spawn(worker.run(context)),
    }
}

/// A call under way is one per room and remote agent: its conversation there goes one
/// message at a time, in order.
type PairKey = (String, String);

type RemoteClient = a2a_client::A2AClient<Box<dyn a2a_client::Transport>>;

#[derive(Clone)]
struct Worker {
    gateway: Gateway,
    policy: Arc<OutboundPolicy>,
    ttl_ms: i64,
    lease_ms: i64,
    hub_id: String,
    cards: Arc<Mutex<HashMap<String, CachedCard>>>,
    in_flight: Arc<Mutex<HashSet<PairKey>>>,
    /// Calls under way per owner of the remote agents called.
    owners: Arc<Mutex<HashMap<String, usize>>>,
    permits: Arc<tokio::sync::Semaphore>,
    tls: Arc<rustls::ClientConfig>,
}

/// A call's place among those under way, given back however the call ends.
struct Slot {
    in_flight: Arc<Mutex<HashSet<PairKey>>>,
    pair: PairKey,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.pair);
    }
}

/// One of an owner's slots, given back however the call ends.
struct OwnerSlot {
    owners: Arc<Mutex<HashMap<String, usize>>>,
    owner: String,
}

impl OwnerSlot {
    fn take(owners: &Arc<Mutex<HashMap<String, usize>>>, owner: &str) -> Option<OwnerSlot> {
        let mut counts = owners.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(owner.to_owned()).or_default();
        if *count >= CALLS_AT_ONCE_PER_OWNER {
            return None;
        }
        *count += 1;
        Some(OwnerSlot {
            owners: owners.clone(),
            owner: owner.to_owned(),
        })
    }
}

impl Drop for OwnerSlot {
    fn drop(&mut self) {
        let mut counts = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.owner);
            }
        }
    }
}

/// A call this worker holds: the claim's attempt number fences what it writes.
struct Held<'a> {
    call: &'a RemoteCallRecord,
    attempt: u32,
    caller: Arc<Caller>,
    /// When the claim's lease ends, unless renewed.
    until_ms: i64,
}

impl Held<'_> {
    /// Settles the call (`None`), or sets when it is next due, as this claim.
    fn settling(&self, next_ms: Option<i64>) -> RemoteCommand {
        RemoteCommand::Settle {
            room: self.call.room.clone(),
            seq: self.call.seq,
            remote: self.call.remote.clone(),
            attempt: self.attempt,
            next_ms,
        }
    }
}

#[derive(Clone)]
struct CachedCard {
    card: a2a::AgentCard,
    etag: Option<String>,
    fetched: Instant,
}

/// What became of a write as the remote agent.
enum Sent {
    Stored,
    /// Refused for good (paused, stopped, not a member…): nothing to retry.
    Refused,
    /// Rate limited: again after this long.
    Later(Duration),
    /// The hub could not take it now (stopping, a failed batch).
    Failed,
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
        // The calls under way: dropped with the worker, which aborts them (their claims
        // lapse and another look takes them up).
        let mut calls = tokio::task::JoinSet::new();
        let mut pruned: Option<Instant> = None;
        loop {
            while calls.try_join_next().is_some() {}
            if pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
                pruned = Some(Instant::now());
                self.prune().await;
            }
            self.look(&mut calls).await;
            tokio::select! {
                _ = rooms.recv() => {
                    // Many writes make one look (a busy hub with no remote agents reads the
                    // table a few times a second, not per write): take what else is
                    // waiting, then look.
                    tokio::time::sleep(LOOK_GATHER).await;
                    while rooms.try_recv().is_ok() {}
                }
                Some(_) = calls.join_next() => {}
                _ = tokio::time::sleep(IDLE_LOOK) => {}
                _ = stopping.changed() => return,
            }
        }
    }

    /// Forgets the calls settled more than [`KEEP_SETTLED`] ago (their answers are in the
    /// rooms; the rows only served to make them).
    async fn prune(&self) {
        let before_ms = crate::unix_ms() - KEEP_SETTLED.as_millis() as i64;
        let hub = self.caller_of("");
        if let Err(refusal) = self
            .gateway
            .remote(&hub, RemoteCommand::Prune { before_ms })
            .await
        {
            tracing::warn!(
                code = refusal.code.as_str(),
                "cannot forget settled remote calls"
            );
        }
    }

    /// Starts the due calls that have a free slot: one at a time per room and remote agent,
    /// [`CALLS_AT_ONCE`] in all; the others wait for a later look.
    async fn look(&self, calls: &mut tokio::task::JoinSet<()>) {
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
            let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                return;
            };
            let pair = (call.room.clone(), call.remote.clone());
            if !self.lock_in_flight().insert(pair.clone()) {
                continue;
            }
            let worker = self.clone();
            calls.spawn(async move {
                let _slot = Slot {
                    in_flight: worker.in_flight.clone(),
                    pair,
                    _permit: permit,
                };
                worker.call(call).await;
            });
        }
    }

    fn lock_in_flight(&self) -> std::sync::MutexGuard<'_, HashSet<PairKey>> {
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
            // Not a member any more (kicked, or the room is gone): the claim settles it.
            Err(crate::store::ReadError::NotFound | crate::store::ReadError::NotMember) => None,
            // The store failed: the call stays due for a later look.
            Err(crate::store::ReadError::Store(error)) => {
                tracing::warn!(%error, "cannot read the event a remote call is for");
                return;
            }
        };
        let now_ms = crate::unix_ms();
        // A notice (the agent joined) calls no one: it never expires, and waits for a resume.
        let notice = event.as_ref().is_some_and(|event| event.kind == "member");
        let expires_ms = match notice {
            true => i64::MAX,
            false => call.created_ms + self.ttl_ms,
        };
        let claimed = self
            .gateway
            .remote(
                &caller,
                RemoteCommand::Claim {
                    room: call.room.clone(),
                    seq: call.seq,
                    remote: call.remote.clone(),
                    asker: event
                        .as_ref()
                        .map(|event| event.from.clone())
                        .unwrap_or_default(),
                    until_ms: now_ms + self.lease_ms,
                    expires_ms,
                    waits: notice,
                },
            )
            .await;
        let (attempt, parties) = match claimed {
            Ok(reply) if reply.claim == RemoteClaim::Claimed => match reply.parties {
                Some(parties) => (reply.attempt, parties),
                None => return,
            },
            Ok(_) => return,
            Err(refusal) => {
                tracing::warn!(code = refusal.code.as_str(), "cannot claim a remote call");
                return;
            }
        };
        let Some(event) = event else { return };
        let held = Held {
            call: &call,
            attempt,
            caller,
            until_ms: now_ms + self.lease_ms,
        };
        let Some(_owner_slot) = OwnerSlot::take(&self.owners, &parties.owner) else {
            // Its owner's agents hold their share of slots: put back for a little while.
            self.settle(&held, Some(crate::unix_ms() + OWNER_BUSY_RETRY_MS))
                .await;
            return;
        };
        if event.kind == "member" {
            // It joined the room: say where what mentions it goes, and call no one.
            if self.notice(&held, &parties).await {
                self.settle(&held, None).await;
            }
            return;
        }
        // Answered already, by an attempt that died before it could settle: done. Not known
        // (the store failed): later.
        match self.answered(&held).await {
            Some(true) => {
                self.settle(&held, None).await;
                return;
            }
            Some(false) => {}
            None => {
                self.settle(&held, Some(crate::unix_ms() + OWNER_BUSY_RETRY_MS))
                    .await;
                return;
            }
        }
        // The lease is renewed while the call runs, answer or failure posted, so it is not
        // taken up by another process meanwhile; if it is lost, this attempt stops.
        tokio::select! {
            () = self.make(&held, &event, &parties, expires_ms) => {}
            () = self.renew_lease(&held) => {}
        }
    }

    /// Makes a claimed call, posts what came of it, and settles it (or sets its retry).
    async fn make(
        &self,
        held: &Held<'_>,
        event: &EventRecord,
        parties: &CallParties,
        expires_ms: i64,
    ) {
        let remaining = expires_ms - crate::unix_ms();
        let gave_up =
            || CallError::Permanent(format!("no answer within {} min", self.ttl_ms / 60_000));
        let outcome = if remaining <= 0 {
            Err(gave_up())
        } else {
            // The call's life bounds the exchange.
            tokio::time::timeout(
                Duration::from_millis(remaining as u64),
                self.exchange(held, event, parties),
            )
            .await
            .unwrap_or_else(|_| Err(gave_up()))
        };
        match outcome {
            Ok(()) => self.settle(held, None).await,
            Err(CallError::Transient(error)) if crate::unix_ms() < expires_ms => {
                let backoff = 1_000i64 << held.call.attempts.min(8);
                tracing::info!(remote = %parties.remote_handle, attempt = held.attempt, %error, "a remote agent call will be retried");
                self.settle(held, Some(crate::unix_ms() + backoff.min(300_000)))
                    .await;
            }
            Err(CallError::Transient(error) | CallError::Permanent(error)) => {
                tracing::info!(remote = %parties.remote_handle, %error, "a remote agent call failed");
                let text = format!(
                    "{} could not be reached: {}",
                    parties.remote_handle,
                    without_queries(&error)
                );
                let asker_is_user = self.asker_is_user(event, parties, None);
                let posted = self
                    .post(
                        held,
                        &event.id,
                        &event.from,
                        asker_is_user,
                        "failed",
                        text,
                        Some("failed"),
                    )
                    .await;
                // Not posted (the hub is stopping, say): the call stays due and is tried again.
                if posted {
                    self.settle(held, None).await;
                }
            }
        }
    }

    /// Whether the one who asked (who gets the answer) is a person: the writer of a
    /// mention, as the claim said; for an answer to the remote agent's question, who asked
    /// it first (the answerer, unless that was the owner answering for an agent).
    fn asker_is_user(
        &self,
        event: &EventRecord,
        parties: &CallParties,
        thread: Option<&RemoteThreadRecord>,
    ) -> bool {
        match event.kind.as_str() {
            "answer" => thread
                .and_then(|thread| thread.asker.as_deref())
                .is_none_or(|asker| asker == event.from),
            _ => parties.asker_is_user,
        }
    }

    /// The notice a remote agent posts in a room it joins: who runs it, and that what
    /// mentions it leaves the hub for that host.
    async fn notice(&self, held: &Held<'_>, parties: &CallParties) -> bool {
        let host = url::Url::parse(&parties.card_url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .unwrap_or_else(|| parties.card_url.clone());
        let text = format!(
            "{handle} is an agent served at {host}, outside this hub. Messages in this room \
             that mention {handle} are sent there (only those, never the room's history); its \
             answers come back here.",
            handle = parties.remote_handle,
        );
        let body = serde_json::json!({
            "text": text,
            "x_a2a": {"remote": host},
        });
        self.send(held, "message", body, self.key(held.call, "n"))
            .await
    }

    /// Whether an earlier attempt of this call posted its outcome (an answer, a question,
    /// a ping, a failure): the keys of what the remote agent posts name the call.
    /// `None` when that cannot be read now.
    async fn answered(&self, held: &Held<'_>) -> Option<bool> {
        let prefix = self.key(held.call, "");
        let events = self
            .gateway
            .keyed_sends(&held.call.remote, &prefix, None, 16)
            .await
            .ok()?;
        Some(events.iter().any(|event| {
            event
                .client_key
                .as_deref()
                .and_then(|key| key.strip_prefix(&prefix))
                .is_some_and(|what| ["r", "q", "p", "failed", "n"].contains(&what))
        }))
    }

    /// Renews the claim every third of the lease; returns only once the lease is lost
    /// (another claim took the call, or renewals failed until the lease ran out).
    async fn renew_lease(&self, held: &Held<'_>) {
        let every = Duration::from_millis((self.lease_ms / 3).max(100) as u64);
        let mut lease_ends = held.until_ms;
        loop {
            tokio::time::sleep(every).await;
            let until = crate::unix_ms() + self.lease_ms;
            let renewed = self
                .gateway
                .remote(&held.caller, held.settling(Some(until)))
                .await;
            match renewed {
                Ok(reply) if reply.claim == RemoteClaim::Claimed => lease_ends = until,
                Ok(_) => {
                    tracing::info!("a remote call's claim lapsed; another takes it up");
                    return;
                }
                Err(refusal) if crate::unix_ms() < lease_ends => {
                    tracing::warn!(
                        code = refusal.code.as_str(),
                        "a remote call's lease was not renewed; trying again"
                    );
                }
                Err(_) => return,
            }
        }
    }

    async fn settle(&self, held: &Held<'_>, next_ms: Option<i64>) {
        let settled = self
            .gateway
            .remote(&held.caller, held.settling(next_ms))
            .await;
        if let Err(refusal) = settled {
            tracing::warn!(code = refusal.code.as_str(), "cannot settle a remote call");
        }
    }

    /// Sends the event to the remote agent and posts its answer in the room.
    async fn exchange(
        &self,
        held: &Held<'_>,
        event: &EventRecord,
        parties: &CallParties,
    ) -> Result<(), CallError> {
        let call = held.call;
        let thread = self.thread(&call.room, &call.remote).await?;
        let Some((request, continues)) = self.request_for(call, event, thread.as_ref()) else {
            // An answer to a question the remote agent no longer waits on.
            return Ok(());
        };
        let conversed = self
            .converse(held, event, parties, thread.clone(), request, continues)
            .await;
        if let (Err(CallError::Permanent(_)), true, Some(thread)) = (&conversed, continues, thread)
        {
            // The task it went on with is gone (unknown to the remote agent, failed): later
            // mentions start afresh rather than fail on it again.
            self.put_thread(
                &held.caller,
                RemoteThreadRecord {
                    room: call.room.clone(),
                    remote: call.remote.clone(),
                    context_id: thread.context_id,
                    ..RemoteThreadRecord::default()
                },
            )
            .await?;
        }
        conversed
    }

    /// Sends the request and posts what comes back.
    async fn converse(
        &self,
        held: &Held<'_>,
        event: &EventRecord,
        parties: &CallParties,
        thread: Option<RemoteThreadRecord>,
        request: SendMessageRequest,
        continues: bool,
    ) -> Result<(), CallError> {
        let call = held.call;
        let credential = self.credential(&call.remote).await?;
        let card = self.card(&parties.card_url).await?;
        let (client, streaming, endpoint) =
            self.client(&card, &parties.card_url, credential.as_ref())?;
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
                .map_err(remote_error)?;
            while let Some(item) = stream.next().await {
                let item = item.map_err(remote_error)?;
                fold.event(item);
                self.say_working(held, &mut fold, &mut said_working).await;
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
            let response = client.send_message(&request).await.map_err(remote_error)?;
            fold.response(response);
            let mut wait = POLL_FIRST;
            while fold.answer().is_none() {
                let Some(task_id) = fold.task_id.clone() else {
                    return Err(CallError::Permanent(
                        "it answered with neither a task nor a message".into(),
                    ));
                };
                self.say_working(held, &mut fold, &mut said_working).await;
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(POLL_MAX);
                let task = client
                    .get_task(&GetTaskRequest {
                        id: task_id,
                        history_length: Some(0),
                        tenant: None,
                    })
                    .await
                    .map_err(remote_error)?;
                fold.task(task);
            }
        }
        let Some(answer) = fold.answer() else {
            return Err(CallError::Transient(
                "its stream ended before the task did".into(),
            ));
        };
        self.post_answer(held, event, parties, thread, continues, &fold, answer)
            .await
    }

    /// Posts a working status with text as the remote agent's `status` (a few per call).
    async fn say_working(&self, held: &Held<'_>, fold: &mut Fold, said: &mut u32) {
        let Some(detail) = fold.working.take() else {
            return;
        };
        if *said >= 4 {
            return;
        }
        *said += 1;
        let body = serde_json::json!({
            "state": "working",
            "detail": answer::cut(&detail, 1024),
        });
        let key = self.key(held.call, &format!("w{said}"));
        // A status is worth no retry: it is refused or not.
        let _ = self.send_once(held, "status", body, key).await;
    }

    /// The A2A request for a call: the mentioning message's text, or the answer to the
    /// remote agent's question with its task; and whether it goes on with the thread's
    /// waiting task.
    fn request_for(
        &self,
        call: &RemoteCallRecord,
        event: &EventRecord,
        thread: Option<&RemoteThreadRecord>,
    ) -> Option<(SendMessageRequest, bool)> {
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
        let continues = task_id.is_some();
        let mut message = Message::new(Role::User, vec![Part::text(text)]);
        message.message_id = self.message_id(call);
        message.context_id = thread.and_then(|thread| thread.context_id.clone());
        message.task_id = task_id;
        Some((
            SendMessageRequest {
                message,
                configuration: None,
                metadata: None,
                tenant: None,
            },
            continues,
        ))
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

    /// A `client_key` of what the remote agent posts for a call (`what` names which), under
    /// the prefix the store indexes, so that an attempt finds what an earlier one posted.
    fn key(&self, call: &RemoteCallRecord, what: &str) -> String {
        format!("a2a:out:{}:{what}", &self.message_id(call)[..22])
    }

    #[allow(clippy::too_many_arguments)]
    async fn post_answer(
        &self,
        held: &Held<'_>,
        event: &EventRecord,
        parties: &CallParties,
        thread: Option<RemoteThreadRecord>,
        continues: bool,
        fold: &Fold,
        answer: Answer,
    ) -> Result<(), CallError> {
        // The message the conversation began with: the mention, or for an answer the
        // mention that led to the question.
        let answering = event.kind == "answer";
        let mention = match answering {
            true => thread
                .as_ref()
                .and_then(|thread| thread.mention.clone())
                .unwrap_or_else(|| event.id.clone()),
            false => event.id.clone(),
        };
        let asker = match answering {
            true => thread
                .as_ref()
                .and_then(|thread| thread.asker.clone())
                .unwrap_or_else(|| event.from.clone()),
            false => event.from.clone(),
        };
        let asker_is_user = self.asker_is_user(event, parties, thread.as_ref());
        // What the thread waits on stays unless this call went on with it or asks anew.
        let mut next = match (&thread, continues) {
            (Some(thread), false) => thread.clone(),
            _ => RemoteThreadRecord {
                room: held.call.room.clone(),
                remote: held.call.remote.clone(),
                ..RemoteThreadRecord::default()
            },
        };
        if fold.context_id.is_some() {
            next.context_id = fold.context_id.clone();
        }
        enum Post {
            Message(&'static str, String, Option<&'static str>),
            Ping(Value),
        }
        let post = match answer {
            Answer::Done { text } if text.is_empty() => {
                Post::Message("r", "(it answered with no text)".to_owned(), None)
            }
            Answer::Done { text } => Post::Message("r", text, None),
            Answer::Ended { state, text } => {
                let text = match text.is_empty() {
                    true => format!("{} {state} the task", parties.remote_handle),
                    false => format!("{} {state} the task: {text}", parties.remote_handle),
                };
                Post::Message("r", text, Some(state))
            }
            Answer::Needs {
                task_id,
                question,
                auth,
            } => {
                next.task_id = Some(task_id);
                next.asker = Some(asker.clone());
                next.mention = Some(mention.clone());
                next.ping = None;
                if auth || asker_is_user {
                    // A person answers: a ping to the asker, or for authorization to the
                    // remote agent's owner. The answer comes back as a call of its own.
                    let ping = format!("a2a-{}", &self.message_id(held.call)[..16]);
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
                    Post::Ping(
                        serde_json::to_value(PingBody {
                            ping,
                            question: answer::cut(&plain(&question), 4096),
                            options: None,
                            to: Some(vec![to.clone()]),
                            expires_at: None,
                        })
                        .unwrap_or(Value::Null),
                    )
                } else {
                    // An agent answers by mentioning the remote agent again.
                    Post::Message("q", question, None)
                }
            }
        };
        // The thread first: once the answer is out, a person's answer to its question must
        // find the task it goes to. (The post is keyed: posting again repeats nothing.)
        self.put_thread(&held.caller, next).await?;
        let posted = match post {
            Post::Message(what, text, state) => {
                self.post(held, &mention, &asker, asker_is_user, what, text, state)
                    .await
            }
            Post::Ping(body) => {
                self.send(held, "ping", body, self.key(held.call, "p"))
                    .await
            }
        };
        if !posted {
            return Err(CallError::Transient(
                "its answer could not be posted in the room".into(),
            ));
        }
        Ok(())
    }

    /// Posts a message as the remote agent, in reply to `mention`, mentioning an agent
    /// asker (an agent hears only what mentions it).
    #[allow(clippy::too_many_arguments)]
    async fn post(
        &self,
        held: &Held<'_>,
        mention: &str,
        asker: &str,
        asker_is_user: bool,
        what: &str,
        text: String,
        state: Option<&str>,
    ) -> bool {
        let mut body = serde_json::json!({
            "text": answer::cut(&plain(&text), limits::MESSAGE_TEXT),
            "reply_to": mention,
        });
        if !asker_is_user {
            body["mentions"] = serde_json::json!([asker]);
        }
        if let Some(state) = state {
            body["x_a2a"] = serde_json::json!({ "state": state });
        }
        self.send(held, "message", body, self.key(held.call, what))
            .await
    }

    /// Sends an event as the remote agent, waiting out its rate limit a few times (the
    /// answer is in hand: calling the remote agent again would cost it the work again);
    /// true once it is stored (or was already), or refused for good.
    async fn send(&self, held: &Held<'_>, kind: &str, body: Value, client_key: String) -> bool {
        for _ in 0..5 {
            match self
                .send_once(held, kind, body.clone(), client_key.clone())
                .await
            {
                Sent::Stored | Sent::Refused => return true,
                Sent::Later(after) => tokio::time::sleep(after).await,
                Sent::Failed => return false,
            }
        }
        false
    }

    async fn send_once(
        &self,
        held: &Held<'_>,
        kind: &str,
        body: Value,
        client_key: String,
    ) -> Sent {
        let frame = ClientFrame::Send(SendCmd {
            id: 1,
            room: held.call.room.clone(),
            client_key,
            kind: kind.to_owned(),
            body,
        });
        match self.gateway.execute(&held.caller, &frame).await {
            Ok(_) => Sent::Stored,
            Err(refusal) => {
                tracing::info!(code = refusal.code.as_str(), message = %refusal.msg, "a remote agent's answer was refused");
                match refusal.code {
                    roundtable_protocol::ErrorCode::RateLimited => {
                        Sent::Later(Duration::from_millis(
                            refusal.retry_after_ms.unwrap_or(1_000).clamp(100, 30_000),
                        ))
                    }
                    // Paused meanwhile: the call waits for the resume (calling again then).
                    roundtable_protocol::ErrorCode::Internal
                    | roundtable_protocol::ErrorCode::Busy
                    | roundtable_protocol::ErrorCode::Paused => Sent::Failed,
                    // Paused, stopped, not a member, too large: retrying changes nothing.
                    _ => Sent::Refused,
                }
            }
        }
    }

    async fn put_thread(
        &self,
        caller: &Arc<Caller>,
        thread: RemoteThreadRecord,
    ) -> Result<(), CallError> {
        self.gateway
            .remote(caller, RemoteCommand::Thread(thread))
            .await
            .map(|_| ())
            .map_err(|refusal| {
                CallError::Transient(format!(
                    "its conversation could not be kept: {}",
                    refusal.msg
                ))
            })
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

    /// An HTTP client for the guard, for addresses called over `transport`: names resolved
    /// and checked at each connection, no redirects, no proxy from the environment, TLS
    /// with the web's roots.
    fn http(
        &self,
        credential: Option<&RemoteCredential>,
        transport: address::Transport,
    ) -> Result<reqwest::Client, CallError> {
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
                transport,
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
        let client = self.http(None, address::Transport::of(&url))?;
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
            return Err(
                if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                    CallError::Transient(error)
                } else {
                    CallError::Permanent(error)
                },
            );
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
        card_url: &str,
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
        // The credential was given for the card's scheme, host and port: a card (changed,
        // or not the owner's) that sends calls elsewhere, or to its own host in clear or on
        // another port, does not take it there.
        let bound = url::Url::parse(card_url)
            .is_ok_and(|card_url| address::same_origin(&card_url, &endpoint));
        if credential.is_some() && !bound {
            return Err(CallError::Permanent(format!(
                "its card sends calls to another host, scheme or port ({}) than the card's, and \
                 its credential goes only to the card's; register it with the endpoint's card",
                endpoint.origin().ascii_serialization()
            )));
        }
        let http = self.http(credential, address::Transport::of(&endpoint))?;
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

/// A remote agent's text as the room is shown it: control characters (but line breaks
/// and tabs) dropped, so that its JSON stays within an event's size.
fn plain(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

/// An error's text with the queries of the addresses it names cut off: a card's address
/// may carry a key, and failures are posted in the room.
fn without_queries(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        let end = after
            .find(|c: char| c.is_whitespace() || c == ')' || c == '"' || c == '\'')
            .unwrap_or(after.len());
        let address = &after[..end];
        out.push_str(address.split(['?', '#']).next().unwrap_or(address));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// What an A2A call's error comes to: the client's own failures (the network, an answer
/// it could not read) are worth retrying; an error the remote agent answered with (an
/// unknown task, invalid parameters…) is not.
fn remote_error(error: a2a::A2AError) -> CallError {
    if error.code == a2a::error_code::INTERNAL_ERROR {
        CallError::Transient(error.to_string())
    } else {
        CallError::Permanent(format!(
            "it answered with an error ({}): {}",
            error.code,
            answer::cut(&error.message, 512)
        ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_holds_a_few_slots_and_gets_them_back() {
        let owners = Arc::new(Mutex::new(HashMap::new()));
        let held: Vec<OwnerSlot> = (0..CALLS_AT_ONCE_PER_OWNER)
            .map(|_| OwnerSlot::take(&owners, "p_dana").expect("a slot"))
            .collect();
        assert!(
            OwnerSlot::take(&owners, "p_dana").is_none(),
            "dana's share is taken"
        );
        let erin = OwnerSlot::take(&owners, "p_erin");
        assert!(erin.is_some(), "others keep theirs");
        drop(held);
        drop(erin);
        assert!(owners.lock().unwrap().is_empty(), "every slot given back");
        assert!(OwnerSlot::take(&owners, "p_dana").is_some());
    }

    #[test]
    fn a_remote_agent_s_own_errors_end_a_call_and_the_client_s_are_retried() {
        assert!(matches!(
            remote_error(a2a::A2AError::internal(
                "HTTP request failed: connection refused"
            )),
            CallError::Transient(_)
        ));
        let CallError::Permanent(text) =
            remote_error(a2a::A2AError::invalid_params("x".repeat(2000)))
        else {
            panic!("an answered error is final");
        };
        assert!(text.len() < 700, "cut: {}", text.len());
    }
}
