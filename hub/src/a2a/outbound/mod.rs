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

pub mod answer;
mod client;
mod conversation;
mod posting;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
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

use answer::{Answer, Fold};
use client::{plain, remote_error, tls_config, without_queries};
use roundtable_engine::outbound_guard::{
    OutboundPolicy, Transport, check_card_url, credential_header, same_origin,
};

use crate::context::HubContext;
use crate::gateway::Gateway;
use roundtable_engine::records::{
    EventRecord, PrincipalRecord, RemoteCallRecord, RemoteThreadRecord,
};
use roundtable_engine::{CallParties, Caller, RemoteClaim, RemoteCommand, Via};

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
pub fn start(context: Arc<HubContext>) -> OutboundWorker {
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
    async fn run(self, context: Arc<HubContext>) {
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
            context
                .metrics
                .a2a_outbound_looks
                .fetch_add(1, Ordering::Relaxed);
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
        let before_ms = self.now_ms() - KEEP_SETTLED.as_millis() as i64;
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
        let now_ms = self.now_ms();
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

    /// The hub's time, which the calls' due times and leases are written in.
    fn now_ms(&self) -> i64 {
        self.gateway.context().now_ms()
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
        let now_ms = self.now_ms();
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
            self.settle(&held, Some(self.now_ms() + OWNER_BUSY_RETRY_MS))
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
                self.settle(&held, Some(self.now_ms() + OWNER_BUSY_RETRY_MS))
                    .await;
                return;
            }
        }
        // The lease is renewed while the call runs, answer or failure posted, so it is not
        // taken up by another process meanwhile; if it is lost, this attempt stops.
        self.gateway
            .context()
            .metrics
            .a2a_outbound_calls
            .fetch_add(1, Ordering::Relaxed);
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
        let remaining = expires_ms - self.now_ms();
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
            Err(CallError::Transient(error)) if self.now_ms() < expires_ms => {
                let backoff = 1_000i64 << held.call.attempts.min(8);
                tracing::info!(remote = %parties.remote_handle, attempt = held.attempt, %error, "a remote agent call will be retried");
                self.settle(held, Some(self.now_ms() + backoff.min(300_000)))
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
            let until = self.now_ms() + self.lease_ms;
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
                Err(refusal) if self.now_ms() < lease_ends => {
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
