//! Typed changes: what a view must refresh after the cache moved. Each change names one
//! projection and, where it has one, its room, so a conversation view ignores a task update
//! and a tray icon learns of a new ping without diffing anything.
//!
//! [`of_event`] is pure: an event and the projection writes it makes give its changes. The
//! cache reports them for every event it receives, stored before or not (another process on
//! the profile may have stored it first; this process's views have not seen it).

use roundtable_protocol::server::Event;
use serde::Serialize;

use crate::projection::Write;

/// One thing views may need to refresh. Delivered by [`crate::Core::changes`]; a receiver
/// that lags behind gets `Lagged` from the channel and should refresh everything.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// A room's messages (a new one, or one of ours leaving the outbox).
    Messages {
        room: String,
    },
    /// A message in `room` at `seq` mentions us: worth a notification.
    Mentioned {
        room: String,
        seq: u64,
    },
    Members {
        room: String,
    },
    /// A room's title, topic, creator, or whether we are in it.
    Room {
        room: String,
    },
    /// We joined or left a room: the list of rooms changed.
    Rooms,
    Tasks {
        room: String,
    },
    Components {
        room: String,
    },
    Usage {
        room: String,
    },
    /// A ping was asked or answered in `room`.
    Ping {
        room: String,
        ping: String,
    },
    /// An agent reported its status in `room`.
    Status {
        room: String,
    },
    /// Our read marker of a stream (a room id, or `inbox`) moved.
    ReadMarker {
        stream: String,
    },
    /// Contacts and contact requests.
    Contacts,
    /// A pause, stop or resume on us.
    Controls,
    /// A budget was set or removed, or keeping one warned or paused.
    Budgets,
    /// The outbox: something queued, sent, failed.
    Outbox,
    /// What this machine's agent logs say changed (sessions, tasks, files, usage).
    LocalWork,
    /// The cache was emptied (a new hub epoch) and is being rebuilt: refresh everything.
    Reset,
}

impl Change {
    /// The room the change is about, if any.
    pub fn room(&self) -> Option<&str> {
        match self {
            Change::Messages { room }
            | Change::Mentioned { room, .. }
            | Change::Members { room }
            | Change::Room { room }
            | Change::Tasks { room }
            | Change::Components { room }
            | Change::Usage { room }
            | Change::Ping { room, .. }
            | Change::Status { room } => Some(room),
            Change::ReadMarker { stream } if stream != "inbox" => Some(stream),
            _ => None,
        }
    }
}

/// The change one projection write makes.
pub fn of_write(write: &Write) -> Change {
    match write {
        Write::RoomFields { room, .. } => Change::Room { room: room.clone() },
        Write::RoomJoined { .. } => Change::Rooms,
        Write::Member { room, .. } => Change::Members { room: room.clone() },
        Write::Mentions { room, .. } => Change::Messages { room: room.clone() },
        Write::Tasks { room, .. } => Change::Tasks { room: room.clone() },
        Write::ComponentsDefined { room, .. }
        | Write::ComponentDef { room, .. }
        | Write::ComponentStatus { room, .. } => Change::Components { room: room.clone() },
        Write::Usage { room, .. } => Change::Usage { room: room.clone() },
        Write::Ping { room, ping, .. }
        | Write::Answer { room, ping, .. }
        | Write::PingWithdrawn { room, ping, .. } => Change::Ping {
            room: room.clone(),
            ping: ping.clone(),
        },
        Write::AgentStatus { room, .. } => Change::Status { room: room.clone() },
        Write::Request { .. } | Write::Contact { .. } => Change::Contacts,
        Write::Control { .. } => Change::Controls,
    }
}

/// Every change `event` makes, seen by principal `me`, given the writes it projects to.
pub fn of_event(me: &str, event: &Event, writes: &[Write]) -> Vec<Change> {
    let mut changes: Vec<Change> = writes.iter().map(of_write).collect();
    if let Some(room) = &event.room
        && event.kind == "message"
    {
        changes.push(Change::Messages { room: room.clone() });
        let mentions_me = writes.iter().any(|write| {
            matches!(write, Write::Mentions { principals, .. } if principals.iter().any(|p| p == me))
        });
        if mentions_me && event.from != me {
            changes.push(Change::Mentioned {
                room: room.clone(),
                seq: event.seq,
            });
        }
    }
    for write in writes {
        match write {
            // A room we joined (or left) also changes that room's own view; a member
            // event may be the first we hear of a room.
            Write::RoomJoined { room, .. } | Write::Member { room, .. } => {
                changes.push(Change::Room { room: room.clone() });
            }
            _ => {}
        }
    }
    changes
}
