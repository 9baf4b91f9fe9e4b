//! What the writer keeps in memory to decide commands without reading the database:
//! principals, live tokens, rooms with their members and heads, pings. It is a cache of the
//! store, rebuilt from a [`Snapshot`] at start and after any failed commit, so the database
//! stays the one source of truth.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use roundtable_protocol::model::{self, PrincipalKind, Routing};
use rustc_hash::FxHashMap as HashMap;

use crate::ids::TokenHash;
use crate::store::{PingRecord, PrincipalRecord, RoomRecord, Snapshot, StreamKey, TokenRecord};

#[derive(Debug, Clone)]
pub struct RoomState {
    pub record: RoomRecord,
    /// Member id -> routing setting.
    pub members: BTreeMap<String, Routing>,
    /// The latest `seq` of the room's log.
    pub head: u64,
    /// The members as delivery needs them, shared with every event fanned out until the
    /// membership changes.
    pub recipients: Arc<[Recipient]>,
}

impl RoomState {
    pub fn new(record: RoomRecord) -> RoomState {
        RoomState {
            record,
            members: BTreeMap::new(),
            head: 0,
            recipients: Arc::from(Vec::new()),
        }
    }
}

/// Who may receive an event, as of the moment it was stored.
#[derive(Debug, Clone)]
pub enum Recipients {
    /// A room's members, and possibly one who just left or was kicked (it still sees its
    /// own departure).
    Room {
        members: Arc<[Recipient]>,
        also_to: Option<Recipient>,
    },
    /// An inbox's owner.
    One(Arc<str>),
}

/// A room member, for delivery.
#[derive(Debug, Clone)]
pub struct Recipient {
    pub id: Arc<str>,
    pub routing: Routing,
    /// Agents see only the messages that concern them.
    pub agent: bool,
}

#[derive(Debug, Default)]
pub struct HubState {
    pub hub_id: String,
    pub epoch: String,
    pub principals: HashMap<String, PrincipalRecord>,
    /// Handle -> principal id.
    pub handles: HashMap<String, String>,
    pub tokens: HashMap<TokenHash, TokenRecord>,
    pub rooms: HashMap<String, RoomState>,
    /// Principal id -> the rooms it is a member of.
    pub rooms_of: HashMap<String, BTreeSet<String>>,
    /// Principal id -> the head of its inbox.
    pub inbox_heads: HashMap<String, u64>,
    /// (room, ping id) -> the ping.
    pub pings: HashMap<(String, String), PingRecord>,
}

impl HubState {
    pub fn from_snapshot(snapshot: Snapshot) -> HubState {
        let mut state = HubState {
            hub_id: snapshot.hub_id,
            epoch: snapshot.epoch,
            ..HubState::default()
        };
        for principal in snapshot.principals {
            state
                .handles
                .insert(principal.handle.clone(), principal.id.clone());
            state.principals.insert(principal.id.clone(), principal);
        }
        for token in snapshot.tokens {
            state.tokens.insert(token.hash, token);
        }
        for room in snapshot.rooms {
            state.rooms.insert(room.id.clone(), RoomState::new(room));
        }
        for member in snapshot.members {
            if let Some(room) = state.rooms.get_mut(&member.room) {
                room.members
                    .insert(member.principal.clone(), member.routing);
                state
                    .rooms_of
                    .entry(member.principal)
                    .or_default()
                    .insert(member.room);
            }
        }
        let room_ids: Vec<String> = state.rooms.keys().cloned().collect();
        for room in room_ids {
            state.refresh_recipients(&room);
        }
        for (stream, head) in snapshot.heads {
            match stream {
                StreamKey::Room(room) => {
                    if let Some(room) = state.rooms.get_mut(&room) {
                        room.head = head;
                    }
                }
                StreamKey::Inbox(principal) => {
                    state.inbox_heads.insert(principal, head);
                }
            }
        }
        for ping in snapshot.pings {
            state
                .pings
                .insert((ping.room.clone(), ping.ping.clone()), ping);
        }
        state
    }

    pub fn principal(&self, id: &str) -> Option<&PrincipalRecord> {
        self.principals.get(id)
    }

    pub fn by_handle(&self, handle: &str) -> Option<&PrincipalRecord> {
        self.handles
            .get(handle)
            .and_then(|id| self.principals.get(id))
    }

    /// The user a principal belongs to: itself for a user, its owner for an agent.
    pub fn owner_of<'a>(&'a self, principal: &'a PrincipalRecord) -> &'a str {
        principal.owner.as_deref().unwrap_or(&principal.id)
    }

    /// Principals with the same owner (a user and its agents; sibling agents).
    pub fn are_kin(&self, a: &PrincipalRecord, b: &PrincipalRecord) -> bool {
        self.owner_of(a) == self.owner_of(b)
    }

    pub fn is_member(&self, room: &str, principal: &str) -> bool {
        self.rooms
            .get(room)
            .is_some_and(|room| room.members.contains_key(principal))
    }

    /// The head of a stream.
    pub fn head(&self, stream: &StreamKey) -> u64 {
        match stream {
            StreamKey::Room(room) => self.rooms.get(room).map_or(0, |room| room.head),
            StreamKey::Inbox(principal) => self.inbox_heads.get(principal).copied().unwrap_or(0),
        }
    }

    /// Assigns the next `seq` of a stream.
    pub fn next_seq(&mut self, stream: &StreamKey) -> u64 {
        match stream {
            StreamKey::Room(room) => {
                let room = self
                    .rooms
                    .get_mut(room)
                    .expect("events are appended to existing rooms only");
                room.head += 1;
                room.head
            }
            StreamKey::Inbox(principal) => {
                let head = self.inbox_heads.entry(principal.clone()).or_insert(0);
                *head += 1;
                *head
            }
        }
    }

    /// Who receives an event of `stream` stored now.
    pub fn recipients(&self, stream: &StreamKey) -> Recipients {
        match stream {
            StreamKey::Room(room) => Recipients::Room {
                members: self
                    .rooms
                    .get(room)
                    .map_or_else(|| Arc::from(Vec::new()), |room| room.recipients.clone()),
                also_to: None,
            },
            StreamKey::Inbox(principal) => Recipients::One(Arc::from(principal.as_str())),
        }
    }

    /// Takes back the last `seq` assigned to a stream (its event was not stored).
    pub fn undo_seq(&mut self, stream: &StreamKey) {
        match stream {
            StreamKey::Room(room) => {
                if let Some(room) = self.rooms.get_mut(room) {
                    room.head -= 1;
                }
            }
            StreamKey::Inbox(principal) => {
                if let Some(head) = self.inbox_heads.get_mut(principal) {
                    *head -= 1;
                }
            }
        }
    }

    pub fn add_member(&mut self, room: &str, principal: &str, routing: Routing) {
        if let Some(state) = self.rooms.get_mut(room) {
            state.members.insert(principal.to_owned(), routing);
            self.rooms_of
                .entry(principal.to_owned())
                .or_default()
                .insert(room.to_owned());
            self.refresh_recipients(room);
        }
    }

    pub fn remove_member(&mut self, room: &str, principal: &str) {
        if let Some(state) = self.rooms.get_mut(room) {
            state.members.remove(principal);
            self.refresh_recipients(room);
        }
        if let Some(rooms) = self.rooms_of.get_mut(principal) {
            rooms.remove(room);
        }
    }

    /// Rebuilds a room's delivery list after its membership or a routing changed.
    fn refresh_recipients(&mut self, room: &str) {
        let Some(state) = self.rooms.get(room) else {
            return;
        };
        let recipients: Vec<Recipient> = state
            .members
            .iter()
            .map(|(id, routing)| Recipient {
                id: Arc::from(id.as_str()),
                routing: *routing,
                agent: self
                    .principals
                    .get(id)
                    .is_some_and(|p| p.kind == PrincipalKind::Agent),
            })
            .collect();
        if let Some(state) = self.rooms.get_mut(room) {
            state.recipients = Arc::from(recipients);
        }
    }

    /// A principal as replies show it.
    pub fn wire_principal(&self, principal: &PrincipalRecord) -> model::Principal {
        model::Principal {
            id: principal.id.clone(),
            kind: principal.kind,
            handle: principal.handle.clone(),
            name: principal.name.clone(),
            owner: principal.owner.clone(),
        }
    }

    /// A room as replies show it.
    pub fn wire_room(&self, room: &RoomState) -> model::Room {
        model::Room {
            id: room.record.id.clone(),
            title: room.record.title.clone(),
            topic: room.record.topic.clone(),
            head: room.head,
            creator: room.record.creator.clone(),
            members: room
                .members
                .iter()
                .filter_map(|(id, routing)| {
                    let principal = self.principals.get(id)?;
                    Some(model::Member {
                        id: id.clone(),
                        kind: principal.kind,
                        handle: principal.handle.clone(),
                        name: principal.name.clone(),
                        routing: *routing,
                    })
                })
                .collect(),
        }
    }

    pub fn is_agent(&self, principal: &str) -> bool {
        self.principals
            .get(principal)
            .is_some_and(|p| p.kind == PrincipalKind::Agent)
    }
}
