//! The command logic: given the in-memory state, a write transaction, the time and a
//! command, decide the reply and write the change. No sockets, no threads, no clock:
//! the writer thread drives it, tests call it directly.
//!
//! Every command checks everything before it writes anything, so a refusal never leaves
//! a partial change behind; a storage error fails the whole batch, and the writer then
//! rebuilds the state from the store (and, when the store refused a value, runs the batch's
//! commands again one by one, so only the one that wrote it fails: commands are borrowed,
//! never consumed).

use std::sync::Arc;

mod contacts;
mod existence;
mod governance;
mod invites;
mod principals;
mod remote;
mod rooms;
mod send;
#[cfg(test)]
mod tests;

use roundtable_protocol::client::ClientFrame;
use roundtable_protocol::model::{PrincipalKind, Routing};
use roundtable_protocol::server::OkReply;
use roundtable_protocol::{CloseCode, ErrorCode};

use crate::audit::Folding;
use crate::ids::{self, IdSource};
pub use crate::records::Via;
use crate::records::{EventRecord, StreamKey};
use crate::state::HubState;
use crate::store::{Snapshot, StoreError, WriteTx};

pub use contacts::{HoldForConsent, REQUEST_LIFETIME_MS};
pub use governance::{RateLimit, RateLimits};

pub use principals::SignupOutcome;
pub use remote::{CallParties, ClaimReply, RemoteClaim, RemoteCommand};
pub use send::{PreparedSend, prepare_send};

/// A command for the writer: a `send` already prepared by the connection, or any other
/// command frame.
#[derive(Debug, Clone)]
pub enum Command {
    Send(PreparedSend),
    Frame(ClientFrame),
    /// A gateway's message to an agent its sender has no consent for (not a protocol
    /// frame: see [`HoldForConsent`]).
    Hold(HoldForConsent),
    /// The outbound A2A worker's bookkeeping of its calls (not a protocol frame).
    Remote(RemoteCommand),
}

impl Command {
    /// The command's `id`, which its reply carries as `re`.
    pub fn id(&self) -> u64 {
        match self {
            Command::Send(send) => send.id,
            Command::Frame(frame) => frame.id(),
            Command::Hold(_) | Command::Remote(_) => 0,
        }
    }

    /// The command's `t`, which names its audit entries.
    pub fn action(&self) -> &'static str {
        match self {
            Command::Send(_) => "send",
            Command::Frame(frame) => frame.type_name(),
            Command::Hold(_) => "contact_request",
            Command::Remote(_) => "remote_call",
        }
    }

    /// What the command acts on, for the audit log (never a secret).
    fn audit_target(&self) -> Option<String> {
        Some(match self {
            Command::Send(send) => send.room.clone(),
            Command::Hold(hold) => hold.target.clone(),
            Command::Remote(command) => command.audit_target(),
            Command::Frame(frame) => match frame {
                ClientFrame::Send(c) => c.room.clone(),
                ClientFrame::RoomInvite(c) => format!("{} {}", c.room, c.handle),
                ClientFrame::RoomKick(c) => format!("{} {}", c.room, c.handle),
                ClientFrame::RoomUpdate(c) => c.room.clone(),
                ClientFrame::RoomLeave(c) => c.room.clone(),
                ClientFrame::MemberSet(c) => c.room.clone(),
                ClientFrame::RegisterAgent(c) => c.name.clone(),
                ClientFrame::RegisterRemoteAgent(c) => c.name.clone(),
                ClientFrame::AgentToken(c) => c.agent.clone(),
                ClientFrame::ContactRequest(c) => c.to.clone(),
                ClientFrame::ContactRespond(c) => c.request.clone(),
                ClientFrame::InviteCreate(c) => c.room.clone()?,
                // Only what has the shape of an invite id: a code pasted by mistake is a
                // secret and must never reach the log.
                ClientFrame::InviteRevoke(c) if ids::is_id(&c.invite, "i") => c.invite.clone(),
                ClientFrame::Control(c) => match &c.room {
                    Some(room) => format!("{} {room}", c.agent),
                    None => c.agent.clone(),
                },
                _ => return None,
            },
        })
    }

    /// Prepares a frame for the writer; a `send` is checked here, off the writer thread.
    pub fn from_frame(frame: ClientFrame) -> Result<Command, Refusal> {
        match frame {
            ClientFrame::Send(send) => prepare_send(send).map(Command::Send),
            other => Ok(Command::Frame(other)),
        }
    }
}

/// Identifies one WebSocket connection for the life of the hub process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// Who is issuing a command.
#[derive(Debug, Clone)]
pub struct Caller {
    pub id: String,
    pub kind: PrincipalKind,
    pub device: String,
    pub conn: ConnId,
    /// How its commands come: the WebSocket or a gateway (recorded in the audit log).
    pub via: Via,
}

/// A refused command: the `err` the caller gets.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub msg: String,
    pub retry_after_ms: Option<u64>,
}

impl Refusal {
    pub fn new(code: ErrorCode, msg: impl Into<String>) -> Refusal {
        Refusal {
            code,
            msg: msg.into(),
            retry_after_ms: None,
        }
    }
}

/// What an audit entry says, before the chain numbers and hashes it.
struct AuditFields<'a> {
    principal: &'a str,
    action: &'a str,
    target: Option<String>,
    code: Option<&'a str>,
    count: Option<u64>,
    reason: Option<String>,
}

impl<'a> AuditFields<'a> {
    fn ok(
        principal: &'a str,
        action: &'a str,
        target: Option<String>,
        reason: Option<String>,
    ) -> AuditFields<'a> {
        AuditFields {
            principal,
            action,
            target,
            code: None,
            count: None,
            reason,
        }
    }
}

pub(crate) fn refuse<T>(code: ErrorCode, msg: impl Into<String>) -> Result<T, ExecError> {
    Err(ExecError::Refused(Refusal::new(code, msg)))
}

/// Why a command did not happen.
#[derive(Debug)]
pub enum ExecError {
    /// The command is refused; nothing was written.
    Refused(Refusal),
    /// Storage failed; the whole batch is rolled back.
    Store(StoreError),
}

impl From<StoreError> for ExecError {
    fn from(error: StoreError) -> ExecError {
        ExecError::Store(error)
    }
}

/// A command's reply.
#[derive(Debug)]
pub enum Reply {
    /// An `ok` with these fields.
    Ok(OkReply),
    /// The `ok` of `send`: the stored event (new, or the original of a retried key).
    Sent { event: Arc<EventRecord>, dup: bool },
}

/// An event written by a command, to deliver once committed.
#[derive(Debug)]
pub struct NewEvent {
    pub record: Arc<EventRecord>,
    /// The connection that wrote it with `send`: it gets the event in its `ok`, not live.
    pub origin: Option<ConnId>,
    /// Who may receive it, fixed when it was stored.
    pub recipients: crate::state::Recipients,
}

/// Something beyond replies and events that must happen once the batch is committed.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Close every connection of a principal (a revoked token, a stopped agent).
    Close { principal: String, code: CloseCode },
}

/// What a successful command produced.
#[derive(Debug)]
pub struct Outcome {
    pub reply: Reply,
    pub events: Vec<NewEvent>,
    pub effects: Vec<Effect>,
    /// The audit entry's target when the command created it (a room, an agent…).
    pub audit_target: Option<String>,
    /// Why, when the command said (a `control`'s reason).
    pub audit_reason: Option<String>,
}

impl Outcome {
    fn ok(reply: OkReply) -> Outcome {
        Outcome::with_events(reply, Vec::new())
    }

    fn with_events(reply: OkReply, events: Vec<NewEvent>) -> Outcome {
        Outcome {
            reply: Reply::Ok(reply),
            events,
            effects: Vec::new(),
            audit_target: None,
            audit_reason: None,
        }
    }
}

/// Commands that change nothing, and so leave no audit entry when they succeed; `send`
/// is recorded by the room's log itself, and `ack` (below) not at all.
const UNAUDITED_SUCCESSES: [&str; 7] = [
    "send",
    "rooms",
    "contacts",
    "directory",
    "invites",
    "ack",
    "remote_call",
];

/// Commands never audited, succeeded or refused: `ack` only moves the caller's own read
/// markers, many times a minute per device (amendment 9); `remote_call` is the hub's own
/// bookkeeping of its calls to remote agents (what they answer is in the rooms).
const UNAUDITED_ACTIONS: [&str; 2] = ["ack", "remote_call"];

/// Refusals the audit log records (the protocol's list); malformed frames are not.
const AUDITED_REFUSALS: [ErrorCode; 8] = [
    ErrorCode::Forbidden,
    ErrorCode::NotMember,
    ErrorCode::NoConsent,
    ErrorCode::Paused,
    ErrorCode::RateLimited,
    ErrorCode::Conflict,
    ErrorCode::NotFound,
    ErrorCode::Unauthorized,
];

/// Whether a command is a write that draws from the rate limit before anything else is
/// checked (`send` draws in its own order of checks). Reads are bounded by the
/// connection instead, and `ack` only moves the caller's own read markers.
fn is_rate_limited_write(frame: &ClientFrame) -> bool {
    matches!(
        frame,
        ClientFrame::RoomCreate(_)
            | ClientFrame::RoomInvite(_)
            | ClientFrame::RoomKick(_)
            | ClientFrame::RoomUpdate(_)
            | ClientFrame::RoomLeave(_)
            | ClientFrame::MemberSet(_)
            | ClientFrame::ProfileSet(_)
            | ClientFrame::RegisterAgent(_)
            | ClientFrame::RegisterRemoteAgent(_)
            | ClientFrame::AgentToken(_)
            | ClientFrame::UserToken(_)
            | ClientFrame::ContactRequest(_)
            | ClientFrame::ContactRespond(_)
            | ClientFrame::InviteCreate(_)
            | ClientFrame::InviteRedeem(_)
            | ClientFrame::InviteRevoke(_)
            | ClientFrame::Control(_)
    )
}

/// Settings of the command logic that come from the hub's configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// `host:port` clients reach the hub at, for invite links.
    pub public_address: String,
    /// Token buckets for every write; `None` turns rate limiting off.
    pub rate_limits: Option<RateLimits>,
    /// Agents one user may register.
    pub max_agents_per_user: usize,
    /// Whether other hub processes share this one's store (a cluster): then the rate
    /// buckets a batch changes are noted, to share them.
    pub shares_buckets: bool,
    /// Which addresses remote agents may have (the SSRF guard's operator settings).
    pub outbound: crate::outbound_guard::OutboundPolicy,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            public_address: "127.0.0.1:7300".into(),
            rate_limits: Some(RateLimits::default()),
            max_agents_per_user: 100,
            shares_buckets: false,
            outbound: crate::outbound_guard::OutboundPolicy::default(),
        }
    }
}

/// The command logic and the state it decides on.
#[derive(Debug)]
pub struct Engine {
    pub state: HubState,
    ids: IdSource,
    config: EngineConfig,
    /// Per principal: tokens left and when they were counted (not durable: a restart
    /// refills every bucket).
    buckets: rustc_hash::FxHashMap<String, (f64, i64)>,
    /// In a cluster: the buckets changed since [`Engine::take_touched_buckets`] last ran
    /// (shared with the other processes, so a limit holds across them).
    touched_buckets: rustc_hash::FxHashSet<String>,
    /// Refusals being folded into one audit entry a second (memory only).
    refusal_folds: crate::audit::RefusalFolds,
    /// How the command being executed came (the WebSocket between commands): what its
    /// audit entries record.
    via: Via,
    /// When each principal made its contact requests of the last day (memory only, per
    /// process: a restart forgets them, as it refills the rate buckets).
    requests_made: rustc_hash::FxHashMap<String, std::collections::VecDeque<i64>>,
    /// What the batch being executed changed of the memory above, which a reload does not
    /// rebuild: put back when the batch's commands run again one by one, so that none is
    /// counted twice ([`Engine::rewind_batch`]).
    undo: Vec<Undo>,
}

/// A change a batch made to the engine's own memory, with what it replaced.
#[derive(Debug)]
enum Undo {
    /// A rate bucket, as it was (`None`: there was none).
    Bucket(String, Option<(f64, i64)>),
    /// A contact request counted in its maker's allowance of the day.
    RequestMade(String),
}

impl Engine {
    pub fn new(snapshot: Snapshot, ids: IdSource) -> Engine {
        Engine::with_config(snapshot, ids, EngineConfig::default())
    }

    pub fn with_config(snapshot: Snapshot, ids: IdSource, config: EngineConfig) -> Engine {
        Engine {
            state: HubState::from_snapshot(snapshot),
            ids,
            config,
            buckets: Default::default(),
            touched_buckets: Default::default(),
            refusal_folds: Default::default(),
            via: Via::Ws,
            requests_made: Default::default(),
            undo: Vec::new(),
        }
    }

    /// A batch begins: what it changes of the engine's own memory is noted from here on.
    pub fn begin_batch(&mut self) {
        self.undo.clear();
    }

    /// Puts back what the batch begun last changed of the engine's own memory (the rate
    /// buckets its commands drew from, the contact requests they counted), before its
    /// commands run again one by one after a failed commit (with [`Engine::reload`] for the
    /// rest of the state).
    pub fn rewind_batch(&mut self) {
        while let Some(undo) = self.undo.pop() {
            match undo {
                Undo::Bucket(principal, Some(was)) => {
                    self.buckets.insert(principal, was);
                }
                Undo::Bucket(principal, None) => {
                    self.buckets.remove(&principal);
                }
                Undo::RequestMade(principal) => {
                    if let Some(made) = self.requests_made.get_mut(&principal) {
                        made.pop_back();
                    }
                }
            }
        }
    }

    /// Notes a rate bucket as it is, before the batch changes it.
    fn note_bucket(&mut self, principal: &str) {
        let was = self.buckets.get(principal).copied();
        self.undo.push(Undo::Bucket(principal.to_owned(), was));
    }

    /// Applies a batch another process of the cluster committed: its changes to the
    /// state, its rate buckets to this process's.
    pub fn apply_shared(&mut self, batch: &crate::records::SharedBatch, now_ms: i64) {
        for op in &batch.ops {
            self.state.apply(op, now_ms);
        }
        for bucket in &batch.buckets {
            self.buckets
                .insert(bucket.principal.clone(), (bucket.tokens, bucket.at_ms));
        }
    }

    /// The rate buckets this process changed since the last call, as they are now.
    pub fn take_touched_buckets(&mut self) -> Vec<crate::records::SharedBucket> {
        self.touched_buckets
            .drain()
            .filter_map(|principal| {
                let (tokens, at_ms) = *self.buckets.get(&principal)?;
                Some(crate::records::SharedBucket {
                    principal,
                    tokens,
                    at_ms,
                })
            })
            .collect()
    }

    /// Replaces the state after a failed commit.
    pub fn reload(&mut self, snapshot: Snapshot) {
        self.state = HubState::from_snapshot(snapshot);
        // Their first entries may be among what was rolled back.
        self.refusal_folds = Default::default();
    }

    /// Executes one command of an authenticated caller and records it in the audit log
    /// (in the same transaction). `sync`, `history`, `audit` and `directory` are reads
    /// served by the connection (a directory search would scan every principal). The
    /// command is borrowed: the writer keeps it until its batch commits, to run it again
    /// should the batch fail for another command's sake.
    pub fn execute(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        command: &Command,
    ) -> Result<Outcome, ExecError> {
        self.via = caller.via;
        let result = self.execute_audited(tx, now_ms, caller, command);
        self.via = Via::Ws;
        result
    }

    fn execute_audited(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        command: &Command,
    ) -> Result<Outcome, ExecError> {
        let action = command.action();
        let target = command.audit_target();
        let result = self.run(tx, now_ms, caller, command);
        let via = self.via;
        match &result {
            Ok(outcome) if !UNAUDITED_SUCCESSES.contains(&action) => {
                let target = outcome.audit_target.clone().or(target);
                let reason = outcome.audit_reason.clone();
                let entry = AuditFields::ok(&caller.id, action, target, reason);
                self.append_audit(tx, now_ms, entry, via)?;
            }
            Err(ExecError::Refused(refusal)) => {
                self.audit_refusal(tx, now_ms, &caller.id, action, target, refusal, via)?;
            }
            _ => {}
        }
        result
    }

    /// Appends an audit entry to the chain.
    pub fn audit(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        principal: &str,
        action: &str,
        target: Option<String>,
        refusal: Option<ErrorCode>,
    ) -> Result<(), StoreError> {
        let entry = AuditFields {
            principal,
            action,
            target,
            code: refusal.map(ErrorCode::as_str),
            count: None,
            reason: None,
        };
        self.append_audit(tx, now_ms, entry, self.via)
    }

    fn append_audit(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        fields: AuditFields<'_>,
        via: Via,
    ) -> Result<(), StoreError> {
        let head = &self.state.audit_head;
        let entry = crate::audit::next_entry(
            head,
            now_ms,
            fields.principal,
            fields.action,
            fields.target,
            fields.code,
            fields.count,
        );
        let entry = crate::audit::annotated(entry, &head.1, fields.reason, via);
        tx.append_audit(&entry)?;
        self.state.audit_head = (entry.n, entry.hash);
        Ok(())
    }

    /// Records a refusal of a command that came `via`, if it is of a kind the audit log
    /// keeps: at once when it is the first of its (principal, action, code, way) in a
    /// second, otherwise folded into the entry that window becomes (see
    /// [`crate::audit::RefusalFolds`]).
    #[allow(clippy::too_many_arguments)]
    pub fn audit_refusal(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        principal: &str,
        action: &'static str,
        target: Option<String>,
        refusal: &Refusal,
        via: Via,
    ) -> Result<(), StoreError> {
        if !AUDITED_REFUSALS.contains(&refusal.code) || UNAUDITED_ACTIONS.contains(&action) {
            return Ok(());
        }
        let code = refusal.code.as_str();
        let target = target.map(crate::audit::cut_target);
        match self
            .refusal_folds
            .refuse(now_ms, principal, action, code, via, target.clone())
        {
            Folding::Write { closed } => {
                if let Some(closed) = closed {
                    self.write_folded(tx, now_ms, closed)?;
                }
                let entry = AuditFields {
                    principal,
                    action,
                    target,
                    code: Some(code),
                    count: None,
                    reason: None,
                };
                self.append_audit(tx, now_ms, entry, via)
            }
            Folding::Counted { closed } => match closed {
                Some(closed) => self.write_folded(tx, now_ms, closed),
                None => Ok(()),
            },
        }
    }

    fn write_folded(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        folded: crate::audit::FoldedRefusals,
    ) -> Result<(), StoreError> {
        let entry = AuditFields {
            principal: &folded.principal,
            action: folded.action,
            target: folded.target,
            code: Some(folded.code),
            count: Some(folded.count),
            reason: None,
        };
        self.append_audit(tx, now_ms, entry, folded.via)
    }

    /// Writes the audit entries of refusal windows that have closed by `now_ms` (all of
    /// them when the hub stops). The writer calls it with every batch.
    pub fn close_refusal_folds(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        everything: bool,
    ) -> Result<(), StoreError> {
        for folded in self.refusal_folds.close(now_ms, everything) {
            self.write_folded(tx, now_ms, folded)?;
        }
        Ok(())
    }

    /// When the next refusal window with something counted closes (Unix ms): the writer
    /// wakes then to write it.
    pub fn next_refusal_fold_ms(&self) -> Option<i64> {
        self.refusal_folds.next_close_ms()
    }

    fn run(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        command: &Command,
    ) -> Result<Outcome, ExecError> {
        // Sends (the hot path) are executed from the borrowed command; the rest, rare and
        // small, from a copy.
        let frame = match command {
            Command::Send(send) => return self.send(tx, now_ms, caller, send),
            Command::Hold(hold) => {
                self.take_write_token(now_ms, caller)
                    .map_err(ExecError::Refused)?;
                return self.hold_for_consent(tx, now_ms, caller, hold.clone());
            }
            Command::Remote(command) => {
                return self.remote_command(tx, now_ms, caller, command.clone());
            }
            Command::Frame(frame) => frame.clone(),
        };
        if is_rate_limited_write(&frame) {
            self.take_write_token(now_ms, caller)
                .map_err(ExecError::Refused)?;
        }
        match frame {
            ClientFrame::Send(send) => {
                let prepared = prepare_send(send).map_err(ExecError::Refused)?;
                self.send(tx, now_ms, caller, &prepared)
            }
            ClientFrame::Ack(ack) => self.ack(tx, caller, ack),
            ClientFrame::RoomCreate(create) => self.room_create(tx, now_ms, caller, create),
            ClientFrame::RoomInvite(invite) => self.room_invite(tx, now_ms, caller, invite),
            ClientFrame::RoomKick(kick) => self.room_kick(tx, now_ms, caller, kick),
            ClientFrame::RoomUpdate(update) => self.room_update(tx, now_ms, caller, update),
            ClientFrame::RoomLeave(leave) => self.room_leave(tx, now_ms, caller, leave),
            ClientFrame::Rooms(rooms) => Ok(self.rooms(caller, rooms.id)),
            ClientFrame::MemberSet(set) => self.member_set(tx, now_ms, caller, set),
            ClientFrame::ProfileSet(set) => self.profile_set(tx, caller, set),
            ClientFrame::RegisterAgent(register) => {
                self.register_agent(tx, now_ms, caller, register)
            }
            ClientFrame::RegisterRemoteAgent(register) => {
                self.register_remote_agent(tx, now_ms, caller, register)
            }
            ClientFrame::Auth(_) => refuse(
                ErrorCode::BadFrame,
                "this connection is already authenticated; auth is only the first frame",
            ),
            ClientFrame::AgentToken(command) => self.agent_token(tx, now_ms, caller, command),
            ClientFrame::UserToken(command) => self.user_token(tx, now_ms, caller, command),
            ClientFrame::ContactRequest(request) => {
                self.contact_request(tx, now_ms, caller, request)
            }
            ClientFrame::ContactRespond(respond) => {
                self.contact_respond(tx, now_ms, caller, respond)
            }
            ClientFrame::Contacts(contacts) => Ok(self.contacts(now_ms, caller, contacts.id)),
            ClientFrame::InviteCreate(create) => self.invite_create(tx, now_ms, caller, create),
            ClientFrame::InviteRedeem(redeem) => self.invite_redeem(tx, now_ms, caller, redeem),
            ClientFrame::InviteRevoke(revoke) => self.invite_revoke(tx, now_ms, caller, revoke),
            ClientFrame::Invites(invites) => self.invites(now_ms, caller, invites.id),
            ClientFrame::Control(control) => self.control(tx, now_ms, caller, control),
            other @ (ClientFrame::Sync(_)
            | ClientFrame::History(_)
            | ClientFrame::Audit(_)
            | ClientFrame::Directory(_)) => refuse(
                ErrorCode::Internal,
                format!(
                    "{} is served by the connection, not the writer",
                    other.type_name()
                ),
            ),
        }
    }

    /// Builds the next event of a stream: assigns its `seq` (and id).
    #[allow(clippy::too_many_arguments)]
    fn next_event(
        &mut self,
        now_ms: i64,
        stream: StreamKey,
        from: &str,
        kind: &str,
        body: String,
        client_key: Option<String>,
        mentions: Vec<String>,
    ) -> EventRecord {
        let pair = match &stream {
            StreamKey::Room(room) => self
                .state
                .rooms
                .get(room)
                .is_some_and(|room| room.members.len() == 2),
            StreamKey::Inbox(_) => false,
        };
        let seq = self.state.next_seq(&stream);
        EventRecord {
            stream,
            seq,
            id: self.ids.id("e"),
            ts_ms: now_ms,
            from: from.to_owned(),
            kind: kind.to_owned(),
            body,
            client_key,
            mentions,
            pair,
        }
    }

    /// Appends a hub-written event.
    #[allow(clippy::too_many_arguments)]
    fn append(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        stream: StreamKey,
        from: &str,
        kind: &str,
        body: String,
        client_key: Option<String>,
        mentions: Vec<String>,
    ) -> Result<EventRecord, StoreError> {
        let record = self.next_event(now_ms, stream, from, kind, body, client_key, mentions);
        tx.append_event(&record)?;
        Ok(record)
    }

    /// Forgets the `client_key`s past their retention, a few shards per call.
    pub fn forget_old_keys(&mut self, now_ms: i64) {
        self.state.sent_keys.prune(now_ms);
    }

    /// Forgets the invites and pings whose time is up: the store keeps them, and is read
    /// when a command names one again. With the requests, tokens and pings that leave
    /// when they become final, this keeps the writer's memory to what can still change.
    pub fn forget_expired(&mut self, now_ms: i64) {
        self.state.forget_expired(now_ms);
    }

    /// Appends a client's event and remembers its `client_key` (the caller has checked the
    /// key is unused).
    #[allow(clippy::too_many_arguments)]
    fn append_sent(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        room: String,
        from: &str,
        kind: &str,
        body: String,
        client_key: String,
        mentions: Vec<String>,
    ) -> Result<EventRecord, StoreError> {
        let record = self.append(
            tx,
            now_ms,
            StreamKey::Room(room),
            from,
            kind,
            body,
            Some(client_key),
            mentions,
        )?;
        // Both are there: the record was built from them just above.
        if let (StreamKey::Room(room), Some(client_key)) = (&record.stream, &record.client_key) {
            self.state
                .sent_keys
                .insert(from, client_key, room, record.seq, record.ts_ms);
        }
        Ok(record)
    }

    /// The event `sender` stored with `client_key`, if it is within the retention: each
    /// candidate the key memory gives is checked against the stored event.
    fn find_sent(
        &self,
        tx: &mut dyn WriteTx,
        sender: &str,
        client_key: &str,
    ) -> Result<Option<EventRecord>, StoreError> {
        for at in self.state.sent_keys.find(sender, client_key) {
            let stream = StreamKey::Room(at.room.to_string());
            if let Some(event) = tx.event_at(&stream, at.seq)?
                && event.from == sender
                && event.client_key.as_deref() == Some(client_key)
            {
                return Ok(Some(event));
            }
        }
        Ok(None)
    }

    /// Appends a hub-written event with a body built from `value`.
    fn append_hub(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        stream: StreamKey,
        from: &str,
        kind: &str,
        value: &impl serde::Serialize,
    ) -> Result<NewEvent, StoreError> {
        let body = serde_json::to_string(value).expect("hub bodies serialize");
        let record = self.append(tx, now_ms, stream, from, kind, body, None, Vec::new())?;
        Ok(NewEvent {
            recipients: self.state.recipients(&record.stream),
            record: Arc::new(record),
            origin: None,
        })
    }

    fn caller_record(
        &self,
        caller: &Caller,
    ) -> Result<&crate::records::PrincipalRecord, ExecError> {
        self.state.principal(&caller.id).ok_or_else(|| {
            ExecError::Refused(Refusal::new(
                ErrorCode::Unauthorized,
                "this principal no longer exists; sign in again",
            ))
        })
    }
}

impl Engine {
    /// The routing of a new member: users see everything, agents what concerns them.
    pub(crate) fn default_routing(&self, principal: &str) -> Routing {
        if self.state.is_agent(principal) {
            Routing::Mentions
        } else {
            Routing::All
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! A real store and an engine over it: SQLite in a temporary directory, or a new
    //! PostgreSQL database when `ROUNDTABLE_TEST_HUB_STORE` is `postgres` (as
    //! `scripts/test.sh` runs these tests a second time), so the engine's decisions are
    //! checked on both stores.

    use super::*;
    use crate::store::{ReadStore, Store, postgres, sqlite};

    /// Where a fixture's store keeps its data: it lives as long as the fixture.
    enum StoreHome {
        Dir(tempfile::TempDir),
        Postgres(roundtable_testkit::postgres::TestDatabase),
    }

    pub struct Fixture {
        home: StoreHome,
        pub store: Box<dyn Store>,
        pub reader: Box<dyn ReadStore>,
        pub engine: Engine,
        pub now_ms: i64,
        next_conn: u64,
        /// Another hub process's memory of the same store, kept only from the changes
        /// each transaction shares (see [`crate::replication`]): it must always equal the
        /// engine's, which every test checks as it ends.
        pub replica: HubState,
        /// Every `(sender, client_key)` a transaction stored.
        keys: Vec<(String, String)>,
    }

    impl Fixture {
        pub fn new() -> Fixture {
            let mut ids = IdSource::seeded(1);
            let on_postgres =
                std::env::var("ROUNDTABLE_TEST_HUB_STORE").as_deref() == Ok("postgres");
            let (home, mut store, reader): (_, Box<dyn Store>, Box<dyn ReadStore>) = if on_postgres
            {
                let database = roundtable_testkit::postgres::TestDatabase::create();
                let (store, reader) = postgres::open(&database.url, &mut ids, 1_000).unwrap();
                (
                    StoreHome::Postgres(database),
                    Box::new(store),
                    Box::new(reader),
                )
            } else {
                let dir = tempfile::tempdir().unwrap();
                let (store, reader) =
                    sqlite::open(&dir.path().join("hub.sqlite3"), &mut ids, 1_000).unwrap();
                (StoreHome::Dir(dir), Box::new(store), Box::new(reader))
            };
            let snapshot = store.load(1).unwrap();
            let replica = HubState::from_snapshot(store.load(1).unwrap());
            Fixture {
                home,
                store,
                reader,
                engine: Engine::new(snapshot, ids),
                now_ms: 1_800_000_000_000,
                next_conn: 0,
                replica,
                keys: Vec::new(),
            }
        }

        /// Runs `work` in one committed transaction, and applies what it shared to the
        /// replica.
        pub fn transaction<T>(
            &mut self,
            work: impl FnOnce(&mut Engine, &mut dyn WriteTx, i64) -> T,
        ) -> T {
            let mut tx =
                crate::replication::RecordingTx::new(self.store.transaction().unwrap(), true);
            let result = work(&mut self.engine, &mut tx, self.now_ms);
            let ops = std::mem::take(&mut tx.ops);
            Box::new(tx).commit().unwrap();
            for op in &ops {
                if let crate::records::WriteOp::AppendEvent { event } = op
                    && let Some(key) = &event.client_key
                {
                    self.keys.push((event.from.clone(), key.clone()));
                }
                self.replica.apply(op, self.now_ms);
            }
            result
        }

        /// The audit log as committed, ascending.
        pub fn audit_log(&self) -> Vec<crate::records::AuditRecord> {
            let mut entries = Vec::new();
            let visit = |entry| {
                entries.push(entry);
                true
            };
            match &self.home {
                StoreHome::Dir(dir) => {
                    sqlite::read_audit_log(&dir.path().join("hub.sqlite3"), visit).unwrap()
                }
                StoreHome::Postgres(database) => {
                    postgres::read_audit_log(&database.url, visit).unwrap()
                }
            }
            entries
        }

        /// Runs one command in its own committed transaction.
        pub fn run(&mut self, caller: &Caller, frame: ClientFrame) -> Result<Outcome, Refusal> {
            match self.transaction(|engine, tx, now_ms| {
                engine.execute(tx, now_ms, caller, &Command::Frame(frame))
            }) {
                Ok(outcome) => Ok(outcome),
                Err(ExecError::Refused(refusal)) => Err(refusal),
                Err(ExecError::Store(error)) => panic!("store error: {error}"),
            }
        }

        pub fn signup(&mut self, handle: &str) -> Caller {
            let outcome = self
                .transaction(|engine, tx, now_ms| {
                    engine.signup(
                        tx,
                        now_ms,
                        crate::config::SignupMode::Open,
                        roundtable_protocol::client::SignupRequest {
                            handle: handle.into(),
                            name: handle.to_uppercase(),
                            discoverable: None,
                            invite: None,
                        },
                    )
                })
                .unwrap_or_else(|error| panic!("signup {handle}: {error:?}"));
            self.caller(&outcome.principal.id)
        }

        pub fn caller(&mut self, id: &str) -> Caller {
            self.next_conn += 1;
            let principal = self.engine.state.principal(id).unwrap();
            Caller {
                id: id.to_owned(),
                kind: principal.kind,
                device: "test".into(),
                conn: ConnId(self.next_conn),
                via: Via::Ws,
            }
        }

        /// The writer's housekeeping, which every process runs on its own memory.
        pub fn housekeeping(&mut self) {
            self.engine.forget_old_keys(self.now_ms);
            self.engine.forget_expired(self.now_ms);
            self.replica.sent_keys.prune(self.now_ms);
            self.replica.forget_expired(self.now_ms);
        }

        /// A restart: the engine, and the replica, from what the store holds.
        pub fn restart(&mut self) {
            let snapshot = self.store.load(self.now_ms).unwrap();
            self.engine = Engine::new(snapshot, IdSource::seeded(2));
            self.replica = HubState::from_snapshot(self.store.load(self.now_ms).unwrap());
        }

        /// The replica and the engine remember the same things.
        pub fn assert_replica_matches(&self) {
            assert_eq!(digest(&self.replica), digest(&self.engine.state));
            for (sender, key) in &self.keys {
                let positions = |state: &HubState| -> Vec<(String, u64)> {
                    let mut found: Vec<(String, u64)> = state
                        .sent_keys
                        .find(sender, key)
                        .into_iter()
                        .map(|at| (at.room.to_owned(), at.seq))
                        .collect();
                    found.sort();
                    found
                };
                assert_eq!(positions(&self.replica), positions(&self.engine.state));
            }
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                self.assert_replica_matches();
            }
        }
    }

    /// Everything a state remembers, as sorted lines (its maps have no order).
    fn digest(state: &HubState) -> Vec<String> {
        fn lines<K: std::fmt::Debug, V: std::fmt::Debug>(
            name: &str,
            map: impl IntoIterator<Item = (K, V)>,
        ) -> Vec<String> {
            let mut lines: Vec<String> = map
                .into_iter()
                .map(|(key, value)| format!("{name} {key:?} {value:?}"))
                .collect();
            lines.sort();
            lines
        }
        let sorted_tokens_of = state.tokens_of.iter().map(|(principal, hashes)| {
            let mut hashes: Vec<String> = hashes.iter().map(|h| format!("{h:?}")).collect();
            hashes.sort();
            (principal.clone(), hashes)
        });
        let sorted_controls = state.controls.iter().map(|(agent, controls)| {
            let mut controls: Vec<String> = controls.iter().map(|c| format!("{c:?}")).collect();
            controls.sort();
            (agent.clone(), controls)
        });
        let mut all = vec![format!("ids {} {}", state.hub_id, state.epoch)];
        all.extend(lines("principal", &state.principals));
        all.extend(lines("handle", &state.handles));
        all.extend(lines("token", &state.tokens));
        all.extend(lines("tokens_of", sorted_tokens_of));
        all.extend(lines("agents_of", &state.agents_of));
        all.extend(lines("room", &state.rooms));
        all.extend(lines("rooms_of", &state.rooms_of));
        all.extend(lines("inbox", &state.inbox_heads));
        all.extend(lines("ping", &state.pings));
        all.extend(lines("skeleton", &state.skeletons));
        all.extend(lines("contact", &state.contacts));
        all.extend(lines("contacts_of", &state.contacts_of));
        all.extend(lines("request", &state.requests));
        all.extend(lines("pending", &state.pending));
        all.extend(lines("pending_of", &state.pending_of));
        all.extend(lines("invite", &state.invites));
        all.extend(lines("control", sorted_controls));
        all.push(format!("audit {:?}", state.audit_head));
        all
    }
}
