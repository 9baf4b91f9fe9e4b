//! What the writer keeps in memory to decide commands without reading the database:
//! principals, live tokens, rooms with their members and heads, pings. It is a cache of the
//! store, rebuilt from a [`Snapshot`] at start and after any failed commit, so the database
//! stays the one source of truth.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use roundtable_protocol::client::ControlAction;
use roundtable_protocol::model::{self, PrincipalKind, RequestState, Routing};
use rustc_hash::FxHashMap as HashMap;

use crate::ids::TokenHash;
use crate::records::{
    ContactRecord, ControlRecord, InviteRecord, PingRecord, PrincipalRecord, RequestRecord,
    RoomRecord, StreamKey, TokenRecord,
};
use crate::sent_keys::SentKeys;
use crate::store::Snapshot;

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
    /// Principal id -> the hashes of its tokens (so revoking them scans no other's).
    pub tokens_of: HashMap<String, Vec<TokenHash>>,
    /// User id -> how many agents it has registered.
    pub agents_of: HashMap<String, usize>,
    pub rooms: HashMap<String, RoomState>,
    /// Principal id -> the rooms it is a member of.
    pub rooms_of: HashMap<String, BTreeSet<String>>,
    /// Principal id -> the head of its inbox.
    pub inbox_heads: HashMap<String, u64>,
    /// (room, ping id) -> the ping.
    pub pings: HashMap<(String, String), PingRecord>,
    /// Handle skeleton -> the handle that has it (see `handles::skeleton`).
    pub skeletons: HashMap<String, String>,
    /// Ordered pair (a < b) -> the contact.
    pub contacts: HashMap<(String, String), ContactRecord>,
    /// Principal -> its contacts.
    pub contacts_of: HashMap<String, BTreeSet<String>>,
    /// Request id -> the request, whatever its state.
    pub requests: HashMap<String, RequestRecord>,
    /// (from, to) -> the id of the pending request between them.
    pub pending: HashMap<(String, String), String>,
    /// Principal -> the pending requests it sees in `contacts`: those where it, or (for a
    /// user) one of its agents, is a party.
    pub pending_of: HashMap<String, BTreeSet<String>>,
    /// Code hash -> the invite.
    pub invites: HashMap<TokenHash, InviteRecord>,
    /// Agent -> the pauses and stops in force on it.
    pub controls: HashMap<String, Vec<ControlRecord>>,
    /// The audit log's last `n` and hash.
    pub audit_head: (u64, String),
    /// The `client_key`s used within the retention.
    pub sent_keys: SentKeys,
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
            if let Some(owner) = &principal.owner {
                *state.agents_of.entry(owner.clone()).or_default() += 1;
            }
            state.principals.insert(principal.id.clone(), principal);
        }
        for token in snapshot.tokens {
            if !token.revoked {
                state.add_token(token);
            }
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
        let handles: Vec<String> = state.handles.keys().cloned().collect();
        for handle in handles {
            state
                .skeletons
                .insert(roundtable_protocol::handles::skeleton(&handle), handle);
        }
        for contact in snapshot.contacts {
            state.add_contact(contact);
        }
        for request in snapshot.requests {
            state.put_request(request);
        }
        for invite in snapshot.invites {
            state.invites.insert(invite.code_hash, invite);
        }
        for control in snapshot.controls {
            state
                .controls
                .entry(control.agent.clone())
                .or_default()
                .push(control);
        }
        state.audit_head = snapshot.audit_head;
        state.sent_keys = SentKeys::from_records(snapshot.sent_keys);
        state
    }

    /// Applies a change another hub process committed (see [`crate::replication`]), as
    /// its engine applied it to its own memory; `now_ms` dates what time ends (invites,
    /// pings), as [`HubState::from_snapshot`] of a load at that time would.
    pub fn apply(&mut self, op: &crate::records::WriteOp, now_ms: i64) {
        use crate::records::WriteOp;
        match op {
            WriteOp::InsertPrincipal { principal } => {
                self.handles
                    .insert(principal.handle.clone(), principal.id.clone());
                self.skeletons.insert(
                    roundtable_protocol::handles::skeleton(&principal.handle),
                    principal.handle.clone(),
                );
                if let Some(owner) = &principal.owner {
                    *self.agents_of.entry(owner.clone()).or_default() += 1;
                }
                self.principals
                    .insert(principal.id.clone(), principal.clone());
            }
            WriteOp::UpdatePrincipal { principal } => {
                self.principals
                    .insert(principal.id.clone(), principal.clone());
            }
            WriteOp::InsertToken { token } => {
                if !token.revoked {
                    self.add_token(token.clone());
                }
            }
            WriteOp::RevokeTokens { principal } => self.revoke_tokens_of(principal),
            WriteOp::InsertRoom { room } => {
                self.rooms
                    .entry(room.id.clone())
                    .or_insert_with(|| RoomState::new(room.clone()));
            }
            WriteOp::UpdateRoom { room } => {
                if let Some(state) = self.rooms.get_mut(&room.id) {
                    state.record = room.clone();
                }
            }
            WriteOp::UpsertMember { member } => {
                self.add_member(&member.room, &member.principal, member.routing);
            }
            WriteOp::DeleteMember { room, principal } => self.remove_member(room, principal),
            WriteOp::AppendEvent { event } => match &event.stream {
                StreamKey::Room(room) => {
                    if let Some(state) = self.rooms.get_mut(room) {
                        state.head = state.head.max(event.seq);
                    }
                    if let Some(key) = &event.client_key {
                        self.sent_keys
                            .insert(&event.from, key, room, event.seq, event.ts_ms);
                    }
                }
                StreamKey::Inbox(principal) => {
                    let head = self.inbox_heads.entry(principal.clone()).or_insert(0);
                    *head = (*head).max(event.seq);
                }
            },
            WriteOp::UpsertPing { ping } => self.put_ping(ping.clone(), now_ms),
            WriteOp::InsertContact { contact } => self.add_contact(contact.clone()),
            WriteOp::UpsertRequest { request } => self.put_request(request.clone()),
            WriteOp::UpsertInvite { invite } => self.put_invite(invite.clone(), now_ms),
            WriteOp::SetControl { control } => {
                let controls = self.controls.entry(control.agent.clone()).or_default();
                controls.retain(|existing| existing.room != control.room);
                controls.push(control.clone());
            }
            WriteOp::DeleteControl { agent, room } => {
                if let Some(controls) = self.controls.get_mut(agent) {
                    controls.retain(|existing| existing.room != *room);
                    if controls.is_empty() {
                        self.controls.remove(agent);
                    }
                }
            }
            WriteOp::AppendAudit { entry } => {
                if entry.n > self.audit_head.0 {
                    self.audit_head = (entry.n, entry.hash.clone());
                }
            }
        }
    }

    /// Remembers a token (new, or loaded).
    pub fn add_token(&mut self, token: TokenRecord) {
        self.tokens_of
            .entry(token.principal.clone())
            .or_default()
            .push(token.hash);
        self.tokens.insert(token.hash, token);
    }

    /// Marks every token of `principal` revoked, and forgets them but for the record
    /// (a revoked token never comes back).
    pub fn revoke_tokens_of(&mut self, principal: &str) {
        // Forgotten, not kept marked: an unknown token and a revoked one are refused
        // alike, and the memory does not grow with every rotation.
        for hash in self.tokens_of.remove(principal).into_iter().flatten() {
            self.tokens.remove(&hash);
        }
    }

    /// The key of a contact between two principals.
    pub fn contact_key(a: &str, b: &str) -> (String, String) {
        if a < b {
            (a.to_owned(), b.to_owned())
        } else {
            (b.to_owned(), a.to_owned())
        }
    }

    pub fn is_contact(&self, a: &str, b: &str) -> bool {
        self.contacts_of.get(a).is_some_and(|set| set.contains(b))
    }

    pub fn add_contact(&mut self, contact: ContactRecord) {
        self.contacts_of
            .entry(contact.a.clone())
            .or_default()
            .insert(contact.b.clone());
        self.contacts_of
            .entry(contact.b.clone())
            .or_default()
            .insert(contact.a.clone());
        self.contacts
            .insert((contact.a.clone(), contact.b.clone()), contact);
    }

    /// Records a request's current state (and whether it is pending between its parties).
    pub fn put_request(&mut self, request: RequestRecord) {
        let pair = (request.from.clone(), request.to.clone());
        let pending = request.state == RequestState::Pending;
        if pending {
            self.pending.insert(pair, request.id.clone());
        } else if self.pending.get(&pair) == Some(&request.id) {
            self.pending.remove(&pair);
        }
        let mut audience: Vec<String> = Vec::with_capacity(4);
        for party in [&request.from, &request.to] {
            audience.push(party.clone());
            if let Some(owner) = self.principals.get(party).and_then(|p| p.owner.clone()) {
                audience.push(owner);
            }
        }
        for principal in audience {
            if pending {
                self.pending_of
                    .entry(principal)
                    .or_default()
                    .insert(request.id.clone());
            } else if let Some(ids) = self.pending_of.get_mut(&principal) {
                ids.remove(&request.id);
                if ids.is_empty() {
                    self.pending_of.remove(&principal);
                }
            }
        }
        // Only pending requests stay in memory; a final one is read from the store when a
        // command names it again.
        if pending {
            self.requests.insert(request.id.clone(), request);
        } else {
            self.requests.remove(&request.id);
        }
    }

    /// Keeps an invite in memory while it can be redeemed (neither withdrawn, used up nor
    /// expired), and forgets it after: the store keeps it, and is read when a code or id
    /// names it again.
    pub fn put_invite(&mut self, invite: InviteRecord, now_ms: i64) {
        if invite.revoked_ms.is_none()
            && invite.uses < invite.max_uses
            && now_ms < invite.expires_ms
        {
            self.invites.insert(invite.code_hash, invite);
        } else {
            self.invites.remove(&invite.code_hash);
        }
    }

    /// Keeps a ping in memory while it can be answered, and forgets it once answered or
    /// expired (the store keeps it).
    pub fn put_ping(&mut self, ping: PingRecord, now_ms: i64) {
        let key = (ping.room.clone(), ping.ping.clone());
        if ping.answered_by.is_none() && ping.expires_ms.is_none_or(|expires| now_ms < expires) {
            self.pings.insert(key, ping);
        } else {
            self.pings.remove(&key);
        }
    }

    /// Forgets the invites and pings whose time is up (the writer's housekeeping).
    pub fn forget_expired(&mut self, now_ms: i64) {
        self.invites.retain(|_, invite| now_ms < invite.expires_ms);
        self.pings
            .retain(|_, ping| ping.expires_ms.is_none_or(|expires| now_ms < expires));
    }

    /// The control in force on `agent` for a send in `room`: a stop wins over a pause, and
    /// an all-rooms control applies everywhere.
    pub fn control_in(&self, agent: &str, room: &str) -> Option<&ControlRecord> {
        let controls = self.controls.get(agent)?;
        let applying = controls
            .iter()
            .filter(|c| c.room.as_deref().is_none_or(|r| r == room));
        let mut strongest = None;
        for control in applying {
            match control.action {
                ControlAction::Stop => return Some(control),
                _ => strongest = Some(control),
            }
        }
        strongest
    }

    /// Whether `agent` is stopped everywhere (it may not even connect).
    pub fn stopped(&self, agent: &str) -> bool {
        self.controls.get(agent).is_some_and(|controls| {
            controls
                .iter()
                .any(|c| c.room.is_none() && c.action == ControlAction::Stop)
        })
    }

    /// Whether `viewer` may see `target` in the directory (and so reach it with a contact
    /// request): kin always; then by the target's `discoverable`.
    pub fn may_see(&self, viewer: &PrincipalRecord, target: &PrincipalRecord) -> bool {
        if self.are_kin(viewer, target) {
            return true;
        }
        match target.discoverable {
            model::Discoverable::Public => true,
            model::Discoverable::Private => false,
            model::Discoverable::Contacts => {
                self.is_contact(&viewer.id, &target.id)
                    || self.is_contact(&viewer.id, self.owner_of(target))
            }
        }
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
