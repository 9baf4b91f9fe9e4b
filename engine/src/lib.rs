//! The hub's command logic, without I/O: given the in-memory state, a write transaction,
//! the time and a command, decide the reply and write the change. No sockets, no threads,
//! no clock, no database: the hub's writer thread drives it over its stores, tests call it
//! directly. It is a crate of its own so that the compiler keeps it so: it depends on no
//! async runtime, HTTP client or database driver (`Cargo.toml`, checked by the hub's
//! layering test), and the hub's I/O reaches it only through [`store::WriteTx`].
//!
//! Every command checks everything before it writes anything, so a refusal never leaves
//! a partial change behind; a storage error fails the whole batch, and the writer then
//! rebuilds the state from the store (and, when the store refused a value, runs the batch's
//! commands again one by one, so only the one that wrote it fails: commands are borrowed,
//! never consumed).
//!
//! Below the command logic, and with it in this crate: the records the store keeps
//! ([`records`]), ids and token hashes ([`ids`]), the memory it decides on ([`state`]), the
//! audit chain ([`audit`]), who sees which event ([`visibility`]), the retry keys of sends
//! ([`sent_keys`]), the SSRF guard's pure checks ([`outbound_guard`]), what a batch tells
//! the other processes of a cluster ([`replication`]) and the settings the hub's
//! configuration gives it ([`settings`]).

use std::sync::Arc;

pub mod audit;
mod command;
mod contacts;
mod existence;
mod governance;
pub mod ids;
mod invites;
pub mod outbound_guard;
mod principals;
pub mod records;
mod remote;
pub mod replication;
mod rooms;
mod send;
pub mod sent_keys;
pub mod settings;
pub mod state;
pub mod store;
pub mod visibility;

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::ClientFrame;
use roundtable_protocol::model::Routing;

use crate::audit::Folding;
use crate::ids::IdSource;
pub use crate::records::Via;
use crate::records::{EventRecord, StreamKey};
use crate::state::HubState;
use crate::store::{Snapshot, WriteError, WriteTx};

use command::refuse;
pub use command::{Caller, Command, ConnId, Effect, ExecError, NewEvent, Outcome, Refusal, Reply};
pub use contacts::{DAILY_REQUESTS_AGENT, HoldForConsent, REQUEST_LIFETIME_MS};
pub use governance::{RateLimit, RateLimits};

pub use principals::SignupOutcome;
pub use remote::{CallParties, ClaimReply, RemoteClaim, RemoteCommand};
pub use send::{PreparedSend, prepare_send};

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
    ) -> Result<(), WriteError> {
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
    ) -> Result<(), WriteError> {
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
    ) -> Result<(), WriteError> {
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
    ) -> Result<(), WriteError> {
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
    ) -> Result<(), WriteError> {
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
    ) -> Result<EventRecord, WriteError> {
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
    ) -> Result<EventRecord, WriteError> {
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
    ) -> Result<Option<EventRecord>, WriteError> {
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
    ) -> Result<NewEvent, WriteError> {
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
