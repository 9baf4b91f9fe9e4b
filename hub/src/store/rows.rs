//! Rows to records, once for every backend. Each backend says how to read a column of its
//! rows ([`Columns`]); what the columns mean, and what a corrupt one is, is written here
//! alone, with the column lists the decoders expect.

use roundtable_protocol::client::ControlAction;
use roundtable_protocol::model::{AuditResult, Discoverable, PrincipalKind, RequestState, Routing};

use super::{DirectoryFound, StoreError};
use roundtable_engine::ids::TokenHash;
use roundtable_engine::records::{
    AuditRecord, ContactRecord, ControlRecord, EventRecord, HeldMessage, InviteRecord,
    MemberRecord, PingRecord, PrincipalRecord, RequestRecord, RoomRecord, StreamKey,
};

/// A backend's row, read column by column (from 0) as the values the records hold.
pub(crate) trait Columns {
    fn text(&self, at: usize) -> Result<String, StoreError>;
    fn optional_text(&self, at: usize) -> Result<Option<String>, StoreError>;
    fn integer(&self, at: usize) -> Result<i64, StoreError>;
    fn optional_integer(&self, at: usize) -> Result<Option<i64>, StoreError>;
    fn bytes(&self, at: usize) -> Result<Vec<u8>, StoreError>;
    fn flag(&self, at: usize) -> Result<bool, StoreError>;
    /// The principals an event mentions.
    fn mentions(&self, at: usize) -> Result<Vec<String>, StoreError>;
    /// The recipients of a ping.
    fn recipients(&self, at: usize) -> Result<Vec<String>, StoreError>;
}

/// A stored seq or count: never negative (the schemas check), so the cast is exact.
pub(crate) fn unsigned(value: i64) -> u64 {
    value.max(0) as u64
}

/// A seq or count as a backend's 64-bit integer; one past `i64::MAX` cannot exist, so it
/// saturates.
pub(crate) fn signed(value: u64) -> i64 {
    value.min(i64::MAX as u64) as i64
}

fn corrupt(table: &'static str, detail: String) -> StoreError {
    StoreError::Corrupt { table, detail }
}

pub(crate) fn kind_from(text: &str) -> Result<PrincipalKind, StoreError> {
    match text {
        "user" => Ok(PrincipalKind::User),
        "agent" => Ok(PrincipalKind::Agent),
        other => Err(corrupt("principals", format!("kind {other:?}"))),
    }
}

pub(crate) fn routing_from(text: &str) -> Result<Routing, StoreError> {
    Routing::parse(text).ok_or_else(|| corrupt("members", format!("routing {text:?}")))
}

pub(crate) fn hash_from(bytes: Vec<u8>, table: &'static str) -> Result<TokenHash, StoreError> {
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| corrupt(table, "a hash is not 32 bytes".into()))?;
    Ok(TokenHash(bytes))
}

pub(crate) fn audit_result_str(result: AuditResult) -> &'static str {
    match result {
        AuditResult::Ok => "ok",
        AuditResult::Err => "err",
    }
}

pub(crate) const PRINCIPAL_COLUMNS: &str =
    "id, kind, handle, name, owner, discoverable, description, card, created_ms, remote_card_url";

pub(crate) fn principal_from(row: &impl Columns) -> Result<PrincipalRecord, StoreError> {
    let discoverable = row.text(5)?;
    Ok(PrincipalRecord {
        id: row.text(0)?,
        kind: kind_from(&row.text(1)?)?,
        handle: row.text(2)?,
        name: row.text(3)?,
        owner: row.optional_text(4)?,
        discoverable: Discoverable::parse(&discoverable)
            .ok_or_else(|| corrupt("principals", format!("discoverable {discoverable:?}")))?,
        description: row.optional_text(6)?,
        card: row.optional_text(7)?,
        created_ms: row.integer(8)?,
        remote: row.optional_text(9)?,
    })
}

pub(crate) const ROOM_COLUMNS: &str = "id, title, topic, creator, created_ms";

pub(crate) fn room_from(row: &impl Columns) -> Result<RoomRecord, StoreError> {
    Ok(RoomRecord {
        id: row.text(0)?,
        title: row.optional_text(1)?,
        topic: row.optional_text(2)?,
        creator: row.text(3)?,
        created_ms: row.integer(4)?,
    })
}

pub(crate) const MEMBER_COLUMNS: &str = "room, principal, routing, joined_ms";

pub(crate) fn member_from(row: &impl Columns) -> Result<MemberRecord, StoreError> {
    Ok(MemberRecord {
        room: row.text(0)?,
        principal: row.text(1)?,
        routing: routing_from(&row.text(2)?)?,
        joined_ms: row.integer(3)?,
    })
}

pub(crate) const CONTACT_COLUMNS: &str = "a, b, since_ms, request";

pub(crate) fn contact_from(row: &impl Columns) -> Result<ContactRecord, StoreError> {
    Ok(ContactRecord {
        a: row.text(0)?,
        b: row.text(1)?,
        since_ms: row.integer(2)?,
        request: row.optional_text(3)?,
    })
}

/// The columns of a control: agent, room ('' for all rooms), action, by, ts_ms, reason
/// (the column of `by` is named by each backend).
pub(crate) fn control_from(row: &impl Columns) -> Result<ControlRecord, StoreError> {
    let room = row.text(1)?;
    let action = row.text(2)?;
    Ok(ControlRecord {
        agent: row.text(0)?,
        room: (!room.is_empty()).then_some(room),
        action: match action.as_str() {
            "pause" => ControlAction::Pause,
            "stop" => ControlAction::Stop,
            other => return Err(corrupt("controls", format!("action {other:?}"))),
        },
        by: row.text(3)?,
        ts_ms: row.integer(4)?,
        reason: row.optional_text(5)?,
    })
}

pub(crate) const EVENT_COLUMNS: &str =
    "stream, seq, id, ts_ms, sender, kind, body, client_key, mentions, pair";

pub(crate) fn event_from(row: &impl Columns) -> Result<EventRecord, StoreError> {
    Ok(EventRecord {
        stream: StreamKey::from_storage_key(&row.text(0)?),
        seq: unsigned(row.integer(1)?),
        id: row.text(2)?,
        ts_ms: row.integer(3)?,
        from: row.text(4)?,
        kind: row.text(5)?,
        body: row.text(6)?,
        client_key: row.optional_text(7)?,
        mentions: row.mentions(8)?,
        pair: row.flag(9)?,
    })
}

pub(crate) const PING_COLUMNS: &str = "room, ping, seq, recipients, expires_ms, answered_by";

pub(crate) fn ping_from(row: &impl Columns) -> Result<PingRecord, StoreError> {
    Ok(PingRecord {
        room: row.text(0)?,
        ping: row.text(1)?,
        seq: unsigned(row.integer(2)?),
        to: row.recipients(3)?,
        expires_ms: row.optional_integer(4)?,
        answered_by: row.optional_text(5)?,
    })
}

pub(crate) const REQUEST_COLUMNS: &str =
    "id, sender, target, state, message, created_ms, decided_ms, held_key, held_body";

pub(crate) fn request_from(row: &impl Columns) -> Result<RequestRecord, StoreError> {
    let state = row.text(3)?;
    Ok(RequestRecord {
        id: row.text(0)?,
        from: row.text(1)?,
        to: row.text(2)?,
        state: RequestState::parse(&state)
            .ok_or_else(|| corrupt("contact_requests", format!("state {state:?}")))?,
        message: row.optional_text(4)?,
        created_ms: row.integer(5)?,
        decided_ms: row.optional_integer(6)?,
        held: match row.optional_text(7)? {
            Some(client_key) => Some(HeldMessage {
                client_key,
                body: row.optional_text(8)?,
            }),
            None => None,
        },
    })
}

pub(crate) const INVITE_COLUMNS: &str =
    "id, code_hash, creator, room, max_uses, uses, expires_ms, created_ms, revoked_ms";

pub(crate) fn invite_from(row: &impl Columns) -> Result<InviteRecord, StoreError> {
    let count = |at: usize| -> Result<u32, StoreError> {
        let value = row.integer(at)?;
        u32::try_from(value).map_err(|_| corrupt("invites", format!("a count of {value}")))
    };
    Ok(InviteRecord {
        id: row.text(0)?,
        code_hash: hash_from(row.bytes(1)?, "invites")?,
        creator: row.text(2)?,
        room: row.optional_text(3)?,
        max_uses: count(4)?,
        uses: count(5)?,
        expires_ms: row.integer(6)?,
        created_ms: row.integer(7)?,
        revoked_ms: row.optional_integer(8)?,
    })
}

pub(crate) const AUDIT_COLUMNS: &str =
    "n, ts_ms, principal, action, target, result, code, hash, count, reason, via";

pub(crate) fn audit_from(row: &impl Columns) -> Result<AuditRecord, StoreError> {
    Ok(AuditRecord {
        n: unsigned(row.integer(0)?),
        ts_ms: row.integer(1)?,
        principal: row.text(2)?,
        action: row.text(3)?,
        target: row.optional_text(4)?,
        result: if row.text(5)? == "ok" {
            AuditResult::Ok
        } else {
            AuditResult::Err
        },
        code: row.optional_text(6)?,
        hash: row.text(7)?,
        count: row.optional_integer(8)?.map(unsigned),
        reason: row.optional_text(9)?,
        via: roundtable_engine::records::Via::parse(row.optional_text(10)?.as_deref()),
    })
}

/// The columns of a directory's principal: id, kind, handle, name, owner, description,
/// card, then whether it is the viewer's kin and whether it is the viewer's contact.
pub(crate) fn directory_found_from(row: &impl Columns) -> Result<DirectoryFound, StoreError> {
    Ok(DirectoryFound {
        id: row.text(0)?,
        kind: kind_from(&row.text(1)?)?,
        handle: row.text(2)?,
        name: row.text(3)?,
        owner: row.optional_text(4)?,
        description: row.optional_text(5)?,
        card: row.optional_text(6)?,
        kin: row.flag(7)?,
        is_contact: row.flag(8)?,
    })
}
