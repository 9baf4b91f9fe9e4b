//! The command logic: given the in-memory state, a write transaction, the time and a
//! command, decide the reply and write the change. No sockets, no threads, no clock:
//! the writer thread drives it, tests call it directly.
//!
//! Every command checks everything before it writes anything, so a refusal never leaves
//! a partial change behind; a storage error fails the whole batch, and the writer then
//! rebuilds the state from the store.

use std::sync::Arc;

mod principals;
mod rooms;
mod send;
#[cfg(test)]
mod tests;

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::ClientFrame;
use roundtable_protocol::model::{PrincipalKind, Routing};
use roundtable_protocol::server::OkReply;

use crate::ids::IdSource;
use crate::state::HubState;
use crate::store::{EventRecord, Snapshot, StoreError, StreamKey, WriteTx};

pub use principals::SignupOutcome;
pub use send::{PreparedSend, prepare_send};

/// A command for the writer: a `send` already prepared by the connection, or any other
/// command frame.
#[derive(Debug)]
pub enum Command {
    Send(PreparedSend),
    Frame(ClientFrame),
}

impl Command {
    /// The command's `id`, which its reply carries as `re`.
    pub fn id(&self) -> u64 {
        match self {
            Command::Send(send) => send.id,
            Command::Frame(frame) => frame.id(),
        }
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

/// What a successful command produced.
#[derive(Debug)]
pub struct Outcome {
    pub reply: Reply,
    pub events: Vec<NewEvent>,
}

impl Outcome {
    fn ok(reply: OkReply) -> Outcome {
        Outcome {
            reply: Reply::Ok(reply),
            events: Vec::new(),
        }
    }
}

/// The command logic and the state it decides on.
#[derive(Debug)]
pub struct Engine {
    pub state: HubState,
    ids: IdSource,
}

impl Engine {
    pub fn new(snapshot: Snapshot, ids: IdSource) -> Engine {
        Engine {
            state: HubState::from_snapshot(snapshot),
            ids,
        }
    }

    /// Replaces the state after a failed commit.
    pub fn reload(&mut self, snapshot: Snapshot) {
        self.state = HubState::from_snapshot(snapshot);
    }

    /// Executes one command of an authenticated caller. `sync` and `history` are reads and
    /// never come here; neither does `auth`.
    pub fn execute(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        command: Command,
    ) -> Result<Outcome, ExecError> {
        let frame = match command {
            Command::Send(send) => return self.send(tx, now_ms, caller, send),
            Command::Frame(frame) => frame,
        };
        match frame {
            ClientFrame::Send(send) => {
                let prepared = prepare_send(send).map_err(ExecError::Refused)?;
                self.send(tx, now_ms, caller, prepared)
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
            ClientFrame::Auth(_) => refuse(
                ErrorCode::BadFrame,
                "this connection is already authenticated; auth is only the first frame",
            ),
            ClientFrame::Sync(_) | ClientFrame::History(_) => {
                unreachable!("reads are served by the connection, not the engine")
            }
            other @ (ClientFrame::Directory(_)
            | ClientFrame::AgentToken(_)
            | ClientFrame::ContactRequest(_)
            | ClientFrame::ContactRespond(_)
            | ClientFrame::Contacts(_)
            | ClientFrame::InviteCreate(_)
            | ClientFrame::InviteRedeem(_)
            | ClientFrame::Control(_)
            | ClientFrame::Audit(_)) => refuse(
                ErrorCode::Unsupported,
                format!(
                    "this hub does not support {} yet; upgrade the hub",
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

    /// Appends a client's event unless its `client_key` is already used (then `None`, and
    /// the stream's head is as before).
    #[allow(clippy::too_many_arguments)]
    fn append_sent(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        stream: StreamKey,
        from: &str,
        kind: &str,
        body: String,
        client_key: String,
        mentions: Vec<String>,
    ) -> Result<Option<EventRecord>, StoreError> {
        let record = self.next_event(now_ms, stream, from, kind, body, Some(client_key), mentions);
        if tx.append_unless_sent(&record)? {
            Ok(Some(record))
        } else {
            self.state.undo_seq(&record.stream);
            Ok(None)
        }
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

    fn caller_record(&self, caller: &Caller) -> Result<&crate::store::PrincipalRecord, ExecError> {
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
    //! A real SQLite store in a temporary directory, and an engine over it.

    use super::*;
    use crate::store::Store;
    use crate::store::sqlite::{self, SqliteStore};

    pub struct Fixture {
        pub _dir: tempfile::TempDir,
        pub store: SqliteStore,
        pub engine: Engine,
        pub now_ms: i64,
        next_conn: u64,
    }

    impl Fixture {
        pub fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let mut ids = IdSource::seeded(1);
            let (mut store, _reader) =
                sqlite::open(&dir.path().join("hub.sqlite3"), &mut ids, 1_000).unwrap();
            let snapshot = store.load().unwrap();
            Fixture {
                _dir: dir,
                store,
                engine: Engine::new(snapshot, ids),
                now_ms: 1_800_000_000_000,
                next_conn: 0,
            }
        }

        /// Runs one command in its own committed transaction.
        pub fn run(&mut self, caller: &Caller, frame: ClientFrame) -> Result<Outcome, Refusal> {
            let mut tx = self.store.transaction().unwrap();
            match self
                .engine
                .execute(&mut *tx, self.now_ms, caller, Command::Frame(frame))
            {
                Ok(outcome) => {
                    tx.commit().unwrap();
                    Ok(outcome)
                }
                Err(ExecError::Refused(refusal)) => {
                    tx.commit().unwrap();
                    Err(refusal)
                }
                Err(ExecError::Store(error)) => panic!("store error: {error}"),
            }
        }

        pub fn signup(&mut self, handle: &str) -> Caller {
            let mut tx = self.store.transaction().unwrap();
            let outcome = self
                .engine
                .signup(
                    &mut *tx,
                    self.now_ms,
                    crate::config::SignupMode::Open,
                    roundtable_protocol::client::SignupRequest {
                        handle: handle.into(),
                        name: handle.to_uppercase(),
                        discoverable: None,
                        invite: None,
                    },
                )
                .unwrap_or_else(|error| panic!("signup {handle}: {error:?}"));
            tx.commit().unwrap();
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
            }
        }
    }
}
