//! What the engine needs of durable storage: the memory it starts from ([`Snapshot`]) and
//! the transaction it writes a batch in ([`WriteTx`]). The hub's stores (SQLite,
//! PostgreSQL) implement them; their failures reach the engine as a [`WriteError`], which it
//! only passes back to the hub.

use crate::ids::TokenHash;
use crate::records::{
    AuditRecord, ContactRecord, ControlRecord, EventRecord, InviteRecord, MemberRecord, PingRecord,
    PrincipalRecord, RemoteWrite, RequestRecord, RoomRecord, StreamKey, TokenRecord,
};

/// A storage failure under a write, whatever the backend. The engine never looks inside
/// it: a failed write fails the batch, and the hub, which knows its stores, takes the
/// error back out ([`WriteError::downcast`]) to tell a value the store refused from a
/// store that failed.
///
/// Any error converts into one with `?`, so a store's own errors pass through unchanged.
/// It is not itself a `std::error::Error`, which that conversion rules out (as `anyhow`'s
/// error is not).
pub struct WriteError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl WriteError {
    /// The error as the store raised it, when it is an `E`; otherwise the error back.
    pub fn downcast<E: std::error::Error + 'static>(self) -> Result<E, WriteError> {
        self.0
            .downcast::<E>()
            .map(|error| *error)
            .map_err(WriteError)
    }

    /// The error as the store raised it.
    pub fn into_inner(self) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self.0
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for WriteError {
    fn from(error: E) -> WriteError {
        WriteError(Box::new(error))
    }
}

impl std::fmt::Debug for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

/// Everything the writer keeps in memory, as loaded at start.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub hub_id: String,
    pub epoch: String,
    pub principals: Vec<PrincipalRecord>,
    /// Live tokens only: the memory forgets a revoked token (unknown and revoked answer
    /// alike).
    pub tokens: Vec<TokenRecord>,
    pub rooms: Vec<RoomRecord>,
    pub members: Vec<MemberRecord>,
    /// The head `seq` of every stream that has events.
    pub heads: Vec<(StreamKey, u64)>,
    /// Pings that can still be answered (neither answered nor expired at `load`'s
    /// `now_ms`); the others are read with [`WriteTx::ping`] when named.
    pub pings: Vec<PingRecord>,
    pub contacts: Vec<ContactRecord>,
    /// Pending requests; final ones are read with [`WriteTx::request`].
    pub requests: Vec<RequestRecord>,
    /// Invites that can still be redeemed (neither withdrawn, used up nor expired at
    /// `now_ms`); the others are read with [`WriteTx::invite_by_code`] and
    /// [`WriteTx::invite`].
    pub invites: Vec<InviteRecord>,
    pub controls: Vec<ControlRecord>,
    /// The last audit entry's `n` and hash (0 and 64 zeros for an empty log).
    pub audit_head: (u64, String),
    /// The `client_key`s of room events younger than the retention
    /// ([`crate::sent_keys::RETENTION_MS`] before `now_ms` given to `load`).
    pub sent_keys: Vec<crate::sent_keys::SentKeyRecord>,
    /// For a store several hub processes share: the last shared batch this snapshot
    /// includes (see [`crate::replication`]); 0 otherwise.
    pub shared_position: u64,
}

/// One write transaction (a batch of commands).
pub trait WriteTx {
    fn insert_principal(&mut self, principal: &PrincipalRecord) -> Result<(), WriteError>;
    fn update_principal(&mut self, principal: &PrincipalRecord) -> Result<(), WriteError>;
    fn insert_token(&mut self, token: &TokenRecord, now_ms: i64) -> Result<(), WriteError>;
    /// Marks every live token of `principal` revoked.
    fn revoke_tokens(&mut self, principal: &str, now_ms: i64) -> Result<(), WriteError>;
    fn insert_room(&mut self, room: &RoomRecord) -> Result<(), WriteError>;
    fn update_room(&mut self, room: &RoomRecord) -> Result<(), WriteError>;
    fn upsert_member(&mut self, member: &MemberRecord) -> Result<(), WriteError>;
    fn delete_member(&mut self, room: &str, principal: &str) -> Result<(), WriteError>;
    fn append_event(&mut self, event: &EventRecord) -> Result<(), WriteError>;
    /// The event at `seq` of `stream`, if stored (also within this transaction).
    fn event_at(&mut self, stream: &StreamKey, seq: u64)
    -> Result<Option<EventRecord>, WriteError>;
    /// A contact request, whatever its state (only pending ones are kept in memory).
    fn request(&mut self, id: &str) -> Result<Option<RequestRecord>, WriteError>;
    /// The invite whose code hashes to `code_hash`, whatever its state (only redeemable ones
    /// are kept in memory).
    fn invite_by_code(&mut self, code_hash: &TokenHash)
    -> Result<Option<InviteRecord>, WriteError>;
    /// An invite by id, whatever its state.
    fn invite(&mut self, id: &str) -> Result<Option<InviteRecord>, WriteError>;
    /// A ping, answered or expired too (only open ones are kept in memory).
    fn ping(&mut self, room: &str, ping: &str) -> Result<Option<PingRecord>, WriteError>;
    fn upsert_ping(&mut self, ping: &PingRecord) -> Result<(), WriteError>;
    fn set_ack(
        &mut self,
        principal: &str,
        device: &str,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<(), WriteError>;
    fn insert_contact(&mut self, contact: &ContactRecord) -> Result<(), WriteError>;
    fn upsert_request(&mut self, request: &RequestRecord) -> Result<(), WriteError>;
    fn upsert_invite(&mut self, invite: &InviteRecord) -> Result<(), WriteError>;
    fn set_control(&mut self, control: &ControlRecord) -> Result<(), WriteError>;
    /// Deletes the control of `agent` in `room` (`None`: the all-rooms one).
    fn delete_control(&mut self, agent: &str, room: Option<&str>) -> Result<(), WriteError>;
    fn append_audit(&mut self, entry: &AuditRecord) -> Result<(), WriteError>;
    /// Writes what the hub keeps for remote agents. Returns how many rows changed, and for
    /// a claim the number of the attempt it took (0: it did not take).
    fn remote(&mut self, write: &RemoteWrite<'_>) -> Result<u64, WriteError>;
    /// What other hub processes sharing the store committed since this process last
    /// looked, in their commit order; this transaction comes after all of them. Empty for
    /// a store only this process writes.
    fn others(&mut self) -> Vec<crate::records::Committed> {
        Vec::new()
    }
    /// This transaction's place in the order of the batches of every process sharing the
    /// store (`None`: only this process writes it).
    fn position(&self) -> Option<u64> {
        None
    }
    /// What this batch tells the other processes, written with it at `commit`.
    fn share(&mut self, _batch: crate::records::SharedBatch) -> Result<(), WriteError> {
        Ok(())
    }
    /// Makes the transaction durable; returns only once it is.
    fn commit(self: Box<Self>) -> Result<(), WriteError>;
}
