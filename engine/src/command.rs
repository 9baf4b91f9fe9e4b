//! What goes into the engine and what comes out of it: the commands the writer hands it,
//! who issues them, and the replies, events and effects a command produces (or why it did
//! not happen).

use std::sync::Arc;

use roundtable_protocol::client::ClientFrame;
use roundtable_protocol::model::PrincipalKind;
use roundtable_protocol::server::OkReply;
use roundtable_protocol::{CloseCode, ErrorCode};

use crate::ids;
use crate::records::{EventRecord, Via};
use crate::store::WriteError;
use crate::{HoldForConsent, PreparedSend, RemoteCommand, prepare_send};

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
    pub(crate) fn audit_target(&self) -> Option<String> {
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

pub(crate) fn refuse<T>(code: ErrorCode, msg: impl Into<String>) -> Result<T, ExecError> {
    Err(ExecError::Refused(Refusal::new(code, msg)))
}

/// Why a command did not happen.
#[derive(Debug)]
pub enum ExecError {
    /// The command is refused; nothing was written.
    Refused(Refusal),
    /// Storage failed; the whole batch is rolled back.
    Store(WriteError),
}

impl From<WriteError> for ExecError {
    fn from(error: WriteError) -> ExecError {
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
    pub(crate) fn ok(reply: OkReply) -> Outcome {
        Outcome::with_events(reply, Vec::new())
    }

    pub(crate) fn with_events(reply: OkReply, events: Vec<NewEvent>) -> Outcome {
        Outcome {
            reply: Reply::Ok(reply),
            events,
            effects: Vec::new(),
            audit_target: None,
            audit_reason: None,
        }
    }
}
