//! A row read back as the hub's record, and the columns each read selects: shared by the
//! writer's load and the readers.

use super::*;

/// A stored seq or count: never negative (the schema checks), so the cast is exact.
pub(super) fn seq_from(value: i64) -> u64 {
    value.max(0) as u64
}

/// A seq as PostgreSQL's `bigint`; a seq past `i64::MAX` cannot exist, so it saturates.
pub(super) fn seq_to(value: u64) -> i64 {
    value.min(i64::MAX as u64) as i64
}

pub(super) fn hash_from(
    row: &Row,
    index: usize,
    table: &'static str,
) -> Result<TokenHash, StoreError> {
    let bytes: &[u8] = row.try_get(index)?;
    Ok(TokenHash(bytes.try_into().map_err(|_| {
        StoreError::Corrupt {
            table,
            detail: "a hash is not 32 bytes".into(),
        }
    })?))
}

pub(super) fn routing_from(text: &str) -> Result<Routing, StoreError> {
    Routing::parse(text).ok_or_else(|| StoreError::Corrupt {
        table: "members",
        detail: format!("routing {text:?}"),
    })
}

pub(super) fn kind_from(text: &str) -> Result<PrincipalKind, StoreError> {
    match text {
        "user" => Ok(PrincipalKind::User),
        "agent" => Ok(PrincipalKind::Agent),
        other => Err(StoreError::Corrupt {
            table: "principals",
            detail: format!("kind {other:?}"),
        }),
    }
}

pub(super) fn principal_from_row(row: &Row) -> Result<PrincipalRecord, StoreError> {
    let discoverable: &str = row.try_get(5)?;
    Ok(PrincipalRecord {
        id: row.try_get(0)?,
        kind: kind_from(row.try_get(1)?)?,
        handle: row.try_get(2)?,
        name: row.try_get(3)?,
        owner: row.try_get(4)?,
        discoverable: Discoverable::parse(discoverable).ok_or_else(|| StoreError::Corrupt {
            table: "principals",
            detail: format!("discoverable {discoverable:?}"),
        })?,
        description: row.try_get(6)?,
        card: row.try_get(7)?,
        created_ms: row.try_get(8)?,
        remote: row.try_get(9)?,
    })
}

pub(super) const EVENT_COLUMNS: &str =
    "stream, seq, id, ts_ms, sender, kind, body, client_key, mentions, pair";

pub(super) fn event_from_row(row: &Row) -> Result<EventRecord, StoreError> {
    let stream: &str = row.try_get(0)?;
    Ok(EventRecord {
        stream: StreamKey::from_storage_key(stream),
        seq: seq_from(row.try_get(1)?),
        id: row.try_get(2)?,
        ts_ms: row.try_get(3)?,
        from: row.try_get(4)?,
        kind: row.try_get(5)?,
        body: row.try_get(6)?,
        client_key: row.try_get(7)?,
        mentions: row.try_get(8)?,
        pair: row.try_get(9)?,
    })
}

pub(super) const PING_COLUMNS: &str = "room, ping, seq, recipients, expires_ms, answered_by";

pub(super) fn ping_from_row(row: &Row) -> Result<PingRecord, StoreError> {
    Ok(PingRecord {
        room: row.try_get(0)?,
        ping: row.try_get(1)?,
        seq: seq_from(row.try_get(2)?),
        to: row.try_get(3)?,
        expires_ms: row.try_get(4)?,
        answered_by: row.try_get(5)?,
    })
}

pub(super) const REQUEST_COLUMNS: &str =
    "id, sender, target, state, message, created_ms, decided_ms, held_key, held_body";

pub(super) fn request_from_row(row: &Row) -> Result<RequestRecord, StoreError> {
    let state: &str = row.try_get(3)?;
    Ok(RequestRecord {
        id: row.try_get(0)?,
        from: row.try_get(1)?,
        to: row.try_get(2)?,
        state: RequestState::parse(state).ok_or_else(|| StoreError::Corrupt {
            table: "contact_requests",
            detail: format!("state {state:?}"),
        })?,
        message: row.try_get(4)?,
        created_ms: row.try_get(5)?,
        decided_ms: row.try_get(6)?,
        held: match row.try_get::<_, Option<String>>(7)? {
            Some(client_key) => Some(crate::records::HeldMessage {
                client_key,
                body: row.try_get(8)?,
            }),
            None => None,
        },
    })
}

pub(super) const INVITE_COLUMNS: &str =
    "id, code_hash, creator, room, max_uses, uses, expires_ms, created_ms, revoked_ms";

pub(super) fn invite_from_row(row: &Row) -> Result<InviteRecord, StoreError> {
    let count = |index: usize| -> Result<u32, StoreError> {
        let value: i64 = row.try_get(index)?;
        u32::try_from(value).map_err(|_| StoreError::Corrupt {
            table: "invites",
            detail: format!("a count of {value}"),
        })
    };
    Ok(InviteRecord {
        id: row.try_get(0)?,
        code_hash: hash_from(row, 1, "invites")?,
        creator: row.try_get(2)?,
        room: row.try_get(3)?,
        max_uses: count(4)?,
        uses: count(5)?,
        expires_ms: row.try_get(6)?,
        created_ms: row.try_get(7)?,
        revoked_ms: row.try_get(8)?,
    })
}

pub(super) fn audit_result_str(result: AuditResult) -> &'static str {
    match result {
        AuditResult::Ok => "ok",
        AuditResult::Err => "err",
    }
}

pub(super) const AUDIT_COLUMNS: &str =
    "n, ts_ms, principal, action, target, result, code, hash, count, reason, via";

pub(super) fn audit_from_row(row: &Row) -> Result<AuditRecord, StoreError> {
    let result: &str = row.try_get(5)?;
    Ok(AuditRecord {
        n: seq_from(row.try_get(0)?),
        ts_ms: row.try_get(1)?,
        principal: row.try_get(2)?,
        action: row.try_get(3)?,
        target: row.try_get(4)?,
        result: if result == "ok" {
            AuditResult::Ok
        } else {
            AuditResult::Err
        },
        code: row.try_get(6)?,
        hash: row.try_get(7)?,
        count: row.try_get::<_, Option<i64>>(8)?.map(seq_from),
        reason: row.try_get(9)?,
        via: crate::records::Via::parse(row.try_get::<_, Option<&str>>(10)?),
    })
}
