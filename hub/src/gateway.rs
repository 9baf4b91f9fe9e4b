//! The command path of the HTTP gateways (A2A at `/a2a/…`, MCP at `/mcp`).
//!
//! Why it exists: a principal must meet the same rules whichever way it comes. A gateway
//! never writes the store: it checks a bearer token the way `auth` does, then hands the
//! writer the very frame a WebSocket client would send, encoded and decoded again, so the
//! same decoder, size limit, membership and invite rules, pause, rate limit, `client_key`
//! deduplication and audit apply. Only the audit entry differs: it says which way the
//! command came (`via`). The answer arrives once the command is durable and its events
//! have been fanned out to live connections.

use std::sync::Arc;

use roundtable_protocol::client::ClientFrame;
use roundtable_protocol::decode::decode_client_frame;
use roundtable_protocol::{ErrorCode, handles};
use tokio::sync::oneshot;

use crate::context::HubContext;
use crate::reads::{HistoryRange, Reader};
use crate::store::{DirectoryQuery, ReadError};
use crate::writer::Request;
use roundtable_engine::records::{EventRecord, PrincipalRecord};
use roundtable_engine::{Caller, Command, ConnId, HoldForConsent, Refusal, Reply, Via};
use roundtable_protocol::model::DirectoryEntry;

/// A gateway's way into the hub: every command of one way (`via`) goes through it.
#[derive(Debug, Clone)]
pub struct Gateway {
    context: Arc<HubContext>,
    via: Via,
    known: Arc<KnownTokens>,
}

/// Tokens the writer has accepted lately, so each HTTP request does not take a writer batch
/// to check its token again (a hub alone on its store; in a cluster every check is the
/// writer's). Exact on revocation: every revocation, rotation or stop closes its principal's
/// connections through the dispatcher, which tells the gateways before any reply of the
/// batch leaves; a token check drains those closes before it trusts an entry. An entry also
/// lasts a minute at most.
#[derive(Debug)]
struct KnownTokens {
    entries: std::sync::Mutex<KnownEntries>,
}

#[derive(Debug)]
struct KnownEntries {
    by_hash: rustc_hash::FxHashMap<
        roundtable_engine::ids::TokenHash,
        (PrincipalRecord, std::time::Instant),
    >,
    closes: tokio::sync::broadcast::Receiver<crate::dispatch::PrincipalClosed>,
    /// How many closes were seen, and the last few: a token checked by the writer is not
    /// remembered if its principal was closed since the check began.
    closes_seen: u64,
    recent_closes: std::collections::VecDeque<(u64, std::sync::Arc<str>)>,
}

/// Closes remembered to decide on a token checked meanwhile.
const RECENT_CLOSES: usize = 1024;

/// How long an accepted token is trusted without the writer.
const KNOWN_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// Tokens remembered at most (then forgotten all at once).
const KNOWN_MAX: usize = 10_000;

impl KnownTokens {
    fn lock(&self) -> std::sync::MutexGuard<'_, KnownEntries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The principal of a token accepted lately and not closed since.
    fn get(&self, hash: &roundtable_engine::ids::TokenHash) -> Option<PrincipalRecord> {
        let mut entries = self.lock();
        entries.forget_closed();
        match entries.by_hash.get(hash) {
            Some((principal, at)) if at.elapsed() < KNOWN_FOR => Some(principal.clone()),
            _ => None,
        }
    }

    /// Where the closes are now: give it back to [`KnownTokens::put`].
    fn mark(&self) -> u64 {
        let mut entries = self.lock();
        entries.forget_closed();
        entries.closes_seen
    }

    /// Remembers a token the writer accepted after `mark`, unless its principal was closed
    /// since (or too many closes came to tell).
    fn put(&self, hash: roundtable_engine::ids::TokenHash, principal: PrincipalRecord, mark: u64) {
        let mut entries = self.lock();
        entries.forget_closed();
        // Every close since `mark` is still in the ring (none, or the ring reaches back).
        let told = entries.closes_seen == mark
            || entries
                .recent_closes
                .front()
                .is_some_and(|(first, _)| *first <= mark + 1);
        let closed_since = entries
            .recent_closes
            .iter()
            .any(|(seen, closed)| *seen > mark && **closed == *principal.id);
        if !told || closed_since {
            return;
        }
        if entries.by_hash.len() >= KNOWN_MAX {
            entries.by_hash.clear();
        }
        entries
            .by_hash
            .insert(hash, (principal, std::time::Instant::now()));
    }
}

impl KnownEntries {
    /// Forgets the tokens of every principal whose connections were closed since the last
    /// look (all of them, if too many closes came to tell).
    fn forget_closed(&mut self) {
        use tokio::sync::broadcast::error::TryRecvError;
        loop {
            match self.closes.try_recv() {
                Ok(closed) => {
                    self.by_hash
                        .retain(|_, (principal, _)| *principal.id != *closed.principal);
                    self.closes_seen += 1;
                    self.recent_closes
                        .push_back((self.closes_seen, closed.principal));
                    if self.recent_closes.len() > RECENT_CLOSES {
                        self.recent_closes.pop_front();
                    }
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
                Err(TryRecvError::Lagged(missed)) => {
                    // Closes missed: nothing remembered can be trusted, nor any check
                    // under way.
                    self.by_hash.clear();
                    self.closes_seen += missed + RECENT_CLOSES as u64;
                    self.recent_closes.clear();
                }
            }
        }
    }
}

/// The connection id of gateway callers: no connection has it (sessions count from 1), so
/// no live connection is mistaken for the command's origin.
const NO_CONNECTION: ConnId = ConnId(0);

fn stopping() -> Refusal {
    Refusal::new(
        ErrorCode::Internal,
        "the hub is stopping; nothing more is taken, retry once it is back",
    )
}

impl Gateway {
    pub fn new(context: Arc<HubContext>, via: Via) -> Gateway {
        let known = Arc::new(KnownTokens {
            entries: std::sync::Mutex::new(KnownEntries {
                by_hash: Default::default(),
                closes: context.dispatch.watch_closes(),
                closes_seen: 0,
                recent_closes: Default::default(),
            }),
        });
        Gateway {
            context,
            via,
            known,
        }
    }

    pub fn context(&self) -> &Arc<HubContext> {
        &self.context
    }

    /// The principal a bearer token stands for, checked as `auth` checks it: unknown,
    /// revoked and malformed tokens are `unauthorized` alike, a stopped agent is `paused`,
    /// and each refusal is audited with this gateway's way.
    pub async fn authenticate(
        &self,
        token: &str,
    ) -> Result<(Arc<Caller>, PrincipalRecord), Refusal> {
        let hash = roundtable_engine::ids::TokenHash::of(token);
        // One of several hub processes checks every token with its writer, which applies the
        // others' batches first: another process's revocation may reach this one's
        // dispatcher later than its `ok` reaches the revoker.
        let remembers = self.context.config.node.is_none();
        if remembers && let Some(principal) = self.known.get(&hash) {
            return Ok((Arc::new(self.caller(&principal)), principal));
        }
        let mark = self.known.mark();
        let (reply, answer) = oneshot::channel();
        if !self.context.writer.submit(Request::Authenticate {
            token: token.to_owned(),
            via: self.via,
            reply,
        }) {
            return Err(stopping());
        }
        let principal = answer.await.map_err(|_| stopping())??;
        if remembers {
            self.known.put(hash, principal.clone(), mark);
        }
        Ok((Arc::new(self.caller(&principal)), principal))
    }

    /// The caller a principal is on this way: its device is the way's name, so its read
    /// markers are apart from those of its WebSocket clients.
    pub fn caller(&self, principal: &PrincipalRecord) -> Caller {
        Caller {
            id: principal.id.clone(),
            kind: principal.kind,
            device: self.via.as_str().to_owned(),
            conn: NO_CONNECTION,
            via: self.via,
        }
    }

    /// Runs a command as `caller`, through the decoder and the writer as a WebSocket
    /// client's frame goes; answered once durable.
    pub async fn execute(
        &self,
        caller: &Arc<Caller>,
        frame: &ClientFrame,
    ) -> Result<Reply, Refusal> {
        let text = frame.to_json();
        if text.len() > self.context.config.max_frame {
            return Err(Refusal::new(
                ErrorCode::TooLarge,
                format!(
                    "the command is {} bytes, more than the {} this hub takes; send less",
                    text.len(),
                    self.context.config.max_frame
                ),
            ));
        }
        let frame =
            decode_client_frame(&text).map_err(|error| Refusal::new(error.code, error.msg))?;
        let command = Command::from_frame(frame)?;
        let (reply, answer) = oneshot::channel();
        if !self.context.writer.submit(Request::Call {
            caller: caller.clone(),
            command,
            submitted: std::time::Instant::now(),
            reply,
        }) {
            return Err(stopping());
        }
        answer.await.map_err(|_| stopping())?
    }

    /// Holds a message for consent (see [`HoldForConsent`]): the one command a gateway has
    /// that no WebSocket frame is, through the same writer, checks and audit.
    pub async fn hold(&self, caller: &Arc<Caller>, hold: HoldForConsent) -> Result<Reply, Refusal> {
        self.call(caller, Command::Hold(hold)).await
    }

    /// The outbound A2A worker's bookkeeping of a call to a remote agent, through the writer.
    pub async fn remote(
        &self,
        caller: &Arc<Caller>,
        command: roundtable_engine::RemoteCommand,
    ) -> Result<roundtable_engine::ClaimReply, Refusal> {
        match self.call(caller, Command::Remote(command)).await? {
            Reply::Ok(ok) => roundtable_engine::ClaimReply::of(&ok).ok_or_else(|| {
                Refusal::new(
                    ErrorCode::Internal,
                    "a remote call's bookkeeping answered oddly",
                )
            }),
            Reply::Sent { .. } => Err(Refusal::new(
                ErrorCode::Internal,
                "a remote call's bookkeeping answered as a send",
            )),
        }
    }

    async fn call(&self, caller: &Arc<Caller>, command: Command) -> Result<Reply, Refusal> {
        let (reply, answer) = oneshot::channel();
        if !self.context.writer.submit(Request::Call {
            caller: caller.clone(),
            command,
            submitted: std::time::Instant::now(),
            reply,
        }) {
            return Err(stopping());
        }
        answer.await.map_err(|_| stopping())?
    }

    /// The contact request of `sender` holding the message with `client_key`.
    pub async fn request_holding(
        &self,
        sender: &str,
        client_key: &str,
    ) -> Result<Option<roundtable_engine::records::RequestRecord>, Refusal> {
        let reader = self.context.reader.clone();
        let (sender, client_key) = (sender.to_owned(), client_key.to_owned());
        match tokio::task::spawn_blocking(move || reader.request_holding(&sender, &client_key))
            .await
        {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(error)) => {
                tracing::warn!(%error, "held message read failed");
                Err(read_failed())
            }
            Err(_) => Err(read_failed()),
        }
    }

    /// Records a refusal the gateway made itself (a read it would not serve) in the audit
    /// log, with its way.
    pub fn record_refusal(&self, principal: &str, action: &'static str, refusal: &Refusal) {
        self.context
            .writer
            .submit(Request::Refused(crate::writer::RefusalToRecord {
                principal: principal.to_owned(),
                action,
                target: None,
                refusal: refusal.clone(),
                via: self.via,
            }));
    }

    /// The events of `room` after `after`, ascending, at most `max_events` (read in pages),
    /// if `caller` is a member: `NotFound` and `NotMember` as `history` refuses them. Unlike
    /// `history`, an agent's routing does not filter them: the caller is a task's requester
    /// looking for the replies to its own messages, which it must see even when they do not
    /// mention it (the task keeps nothing else).
    pub async fn room_events_for_task(
        &self,
        caller: &Caller,
        room: &str,
        after: u64,
        max_events: usize,
    ) -> Result<Vec<EventRecord>, ReadError> {
        let mut events = Vec::new();
        let mut after = after;
        loop {
            let reader = self.context.reader.clone();
            let principal = caller.id.clone();
            let is_agent = false;
            let room_id = room.to_owned();
            let limit = HISTORY_PAGE.min(max_events.saturating_sub(events.len()).max(1)) as u32;
            let range = HistoryRange {
                before: None,
                after: Some(after),
                limit,
                max_bytes: self.context.config.page_bytes,
            };
            let page = tokio::task::spawn_blocking(move || {
                let reading = Reader {
                    principal: &principal,
                    is_agent,
                };
                crate::reads::history(&*reader, reading, &room_id, range)
            })
            .await
            .map_err(|_| {
                ReadError::Store(crate::store::StoreError::Corrupt {
                    table: "events",
                    detail: "the read was cancelled".into(),
                })
            })??;
            let full = page.events.len() as u32 == limit || page.more;
            let Some(last) = page.events.last().map(|event| event.seq) else {
                return Ok(events);
            };
            events.extend(page.events);
            if !full || events.len() >= max_events {
                return Ok(events);
            }
            after = last;
        }
    }

    /// What `sender` stored with keys starting with `prefix`, newest first (see
    /// [`crate::store::ReadStore::sent_with_key_prefix`]).
    pub async fn keyed_sends(
        &self,
        sender: &str,
        prefix: &str,
        before: Option<(i64, String)>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, Refusal> {
        let reader = self.context.reader.clone();
        let (sender, prefix) = (sender.to_owned(), prefix.to_owned());
        match tokio::task::spawn_blocking(move || {
            reader.sent_with_key_prefix(&sender, &prefix, before, limit)
        })
        .await
        {
            Ok(Ok(events)) => Ok(events),
            Ok(Err(error)) => {
                tracing::warn!(%error, "keyed events read failed");
                Err(read_failed())
            }
            Err(_) => Err(read_failed()),
        }
    }

    /// The agents `viewer` may see (`None`: public ones), matching `query` as the directory
    /// matches it, by handle, at most `limit`.
    pub async fn visible_agents(
        &self,
        viewer: Option<&Caller>,
        query: Option<String>,
        limit: usize,
    ) -> Result<Vec<DirectoryEntry>, Refusal> {
        let query = DirectoryQuery {
            viewer: viewer.map(|caller| caller.id.clone()).unwrap_or_default(),
            handle: None,
            agents_only: true,
            query,
            limit,
            now_ms: self.context.now_ms(),
        };
        self.read_directory(query).await
    }

    /// The principal a handle names, if `viewer` may see it (`None`: an anonymous viewer,
    /// who sees public principals only). An invisible principal and a missing one are
    /// both `None`: the caller cannot tell them apart.
    pub async fn visible_principal(
        &self,
        viewer: Option<&Caller>,
        handle: &str,
    ) -> Result<Option<DirectoryEntry>, Refusal> {
        if handles::validate_handle(handle).is_err() {
            return Ok(None);
        }
        let query = DirectoryQuery {
            viewer: viewer.map(|caller| caller.id.clone()).unwrap_or_default(),
            handle: Some(handle.to_owned()),
            agents_only: false,
            query: None,
            limit: 1,
            now_ms: self.context.now_ms(),
        };
        Ok(self.read_directory(query).await?.pop())
    }
}

impl Gateway {
    /// A page of a room's log as `caller` may read it (an agent's routing applies when
    /// `is_agent`), as `history` reads it.
    pub async fn history(
        &self,
        caller: &Caller,
        is_agent: bool,
        room: &str,
        range: HistoryRange,
    ) -> Result<crate::reads::HistoryPage, ReadError> {
        let reader = self.context.reader.clone();
        let (principal, room) = (caller.id.clone(), room.to_owned());
        tokio::task::spawn_blocking(move || {
            let reading = Reader {
                principal: &principal,
                is_agent,
            };
            crate::reads::history(&*reader, reading, &room, range)
        })
        .await
        .map_err(|_| cancelled_read())?
    }

    /// The rooms `principal` is in, with their heads and its read markers, as `sync` plans
    /// them.
    pub async fn sync_plan(&self, principal: &str) -> Result<crate::reads::SyncPlan, ReadError> {
        let reader = self.context.reader.clone();
        let principal = principal.to_owned();
        tokio::task::spawn_blocking(move || {
            crate::reads::sync_plan(&*reader, &principal, &|_| 0, u64::MAX)
        })
        .await
        .map_err(|_| cancelled_read())?
        .map_err(ReadError::Store)
    }

    /// The read markers of `caller`'s device, per stream.
    pub async fn device_read_markers(
        &self,
        caller: &Caller,
    ) -> Result<Vec<(roundtable_engine::records::StreamKey, u64)>, ReadError> {
        let reader = self.context.reader.clone();
        let (principal, device) = (caller.id.clone(), caller.device.clone());
        tokio::task::spawn_blocking(move || reader.device_read_markers(&principal, &device))
            .await
            .map_err(|_| cancelled_read())?
            .map_err(ReadError::Store)
    }

    /// The agents and people `caller` may see, matching `query` as `directory` matches it,
    /// by handle, at most `limit`.
    pub async fn directory(
        &self,
        caller: &Caller,
        query: Option<String>,
        limit: usize,
    ) -> Result<Vec<DirectoryEntry>, Refusal> {
        let query = DirectoryQuery {
            viewer: caller.id.clone(),
            handle: None,
            agents_only: false,
            query: query.filter(|query| !query.is_empty()),
            limit,
            now_ms: self.context.now_ms(),
        };
        self.read_directory(query).await
    }
}

impl Gateway {
    /// The directory's answer to `query`, off the async threads.
    async fn read_directory(&self, query: DirectoryQuery) -> Result<Vec<DirectoryEntry>, Refusal> {
        let reader = self.context.reader.clone();
        match tokio::task::spawn_blocking(move || reader.directory(&query)).await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(error)) => {
                tracing::warn!(%error, "directory read failed");
                Err(read_failed())
            }
            Err(_) => Err(read_failed()),
        }
    }
}

fn cancelled_read() -> ReadError {
    ReadError::Store(crate::store::StoreError::Corrupt {
        table: "events",
        detail: "the read was cancelled".into(),
    })
}

/// Events read per page by [`Gateway::room_events_for_task`].
const HISTORY_PAGE: usize = 500;

fn read_failed() -> Refusal {
    Refusal::new(ErrorCode::Internal, "the hub could not read; retry")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::PrincipalClosed;
    use roundtable_protocol::CloseCode;

    fn principal(id: &str) -> PrincipalRecord {
        PrincipalRecord {
            id: id.into(),
            kind: roundtable_protocol::model::PrincipalKind::User,
            handle: id.into(),
            name: id.into(),
            owner: None,
            discoverable: Default::default(),
            description: None,
            card: None,
            created_ms: 0,
            remote: None,
        }
    }

    fn known() -> (KnownTokens, tokio::sync::broadcast::Sender<PrincipalClosed>) {
        let (closes, receiver) = tokio::sync::broadcast::channel(4);
        let known = KnownTokens {
            entries: std::sync::Mutex::new(KnownEntries {
                by_hash: Default::default(),
                closes: receiver,
                closes_seen: 0,
                recent_closes: Default::default(),
            }),
        };
        (known, closes)
    }

    fn close(closes: &tokio::sync::broadcast::Sender<PrincipalClosed>, id: &str) {
        closes
            .send(PrincipalClosed {
                principal: Arc::from(id),
                code: CloseCode::TokenRevoked,
            })
            .unwrap();
    }

    #[test]
    fn a_close_forgets_its_principal_s_tokens_at_the_next_look() {
        let (known, closes) = known();
        let (dana, erin) = (
            roundtable_engine::ids::TokenHash::of("rt_dana"),
            roundtable_engine::ids::TokenHash::of("rt_erin"),
        );
        let mark = known.mark();
        known.put(dana, principal("p_dana"), mark);
        known.put(erin, principal("p_erin"), mark);
        assert!(known.get(&dana).is_some());
        close(&closes, "p_dana");
        assert!(
            known.get(&dana).is_none(),
            "revoked: the writer decides again"
        );
        assert!(known.get(&erin).is_some());
    }

    #[test]
    fn a_token_checked_while_its_principal_was_closed_is_not_remembered() {
        let (known, closes) = known();
        let hash = roundtable_engine::ids::TokenHash::of("rt_dana");
        let mark = known.mark();
        // The writer accepted it; the revocation lands before the answer is remembered,
        // and someone else's look drains it first.
        close(&closes, "p_dana");
        assert!(
            known
                .get(&roundtable_engine::ids::TokenHash::of("rt_other"))
                .is_none()
        );
        known.put(hash, principal("p_dana"), mark);
        assert!(known.get(&hash).is_none());
        // Closes missed altogether (the channel lagged): nothing is trusted either.
        let mark = known.mark();
        for _ in 0..6 {
            close(&closes, "p_someone");
        }
        assert!(known.get(&hash).is_none());
        known.put(hash, principal("p_dana"), mark);
        assert!(known.get(&hash).is_none());
        // With nothing closed meanwhile, it is remembered.
        let mark = known.mark();
        known.put(hash, principal("p_dana"), mark);
        assert!(known.get(&hash).is_some());
    }
}
