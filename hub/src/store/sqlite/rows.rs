//! Rows to records: the column lists and decoders the writer and the readers share.

use super::*;

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

pub(super) fn event_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<EventRecord> {
    let stream: String = row.get(0)?;
    let mentions: Option<String> = row.get(8)?;
    Ok(EventRecord {
        stream: StreamKey::from_storage_key(&stream),
        seq: row.get::<_, i64>(1)? as u64,
        id: row.get(2)?,
        ts_ms: row.get(3)?,
        from: row.get(4)?,
        kind: row.get(5)?,
        body: row.get(6)?,
        client_key: row.get(7)?,
        mentions: mentions
            .map(|text| text.split(' ').map(str::to_owned).collect())
            .unwrap_or_default(),
        pair: row.get::<_, i64>(9)? != 0,
    })
}

pub(super) const EVENT_COLUMNS: &str =
    "stream, seq, id, ts_ms, sender, kind, body, client_key, mentions, pair";

pub(super) const PING_COLUMNS: &str = "room, ping, seq, recipients, expires_ms, answered_by";

pub(super) fn ping_from_row(row: &rusqlite::Row<'_>) -> Result<PingRecord, StoreError> {
    let recipients: String = row.get(3)?;
    Ok(PingRecord {
        room: row.get(0)?,
        ping: row.get(1)?,
        seq: row.get::<_, i64>(2)? as u64,
        to: serde_json::from_str(&recipients).map_err(|error| StoreError::Corrupt {
            table: "pings",
            detail: error.to_string(),
        })?,
        expires_ms: row.get(4)?,
        answered_by: row.get(5)?,
    })
}

pub(super) const REQUEST_COLUMNS: &str =
    "id, sender, target, state, message, created_ms, decided_ms, held_key, held_body";

pub(super) fn request_from_row(row: &rusqlite::Row<'_>) -> Result<RequestRecord, StoreError> {
    let state: String = row.get(3)?;
    Ok(RequestRecord {
        id: row.get(0)?,
        from: row.get(1)?,
        to: row.get(2)?,
        state: RequestState::parse(&state).ok_or_else(|| StoreError::Corrupt {
            table: "contact_requests",
            detail: format!("state {state:?}"),
        })?,
        message: row.get(4)?,
        created_ms: row.get(5)?,
        decided_ms: row.get(6)?,
        held: row
            .get::<_, Option<String>>(7)?
            .map(|client_key| -> rusqlite::Result<_> {
                Ok(crate::records::HeldMessage {
                    client_key,
                    body: row.get(8)?,
                })
            })
            .transpose()?,
    })
}

pub(super) const INVITE_COLUMNS: &str =
    "id, code_hash, creator, room, max_uses, uses, expires_ms, created_ms, revoked_ms";

pub(super) fn invite_from_row(row: &rusqlite::Row<'_>) -> Result<InviteRecord, StoreError> {
    let hash: Vec<u8> = row.get(1)?;
    Ok(InviteRecord {
        id: row.get(0)?,
        code_hash: TokenHash(hash.try_into().map_err(|_| StoreError::Corrupt {
            table: "invites",
            detail: "a code hash is not 32 bytes".into(),
        })?),
        creator: row.get(2)?,
        room: row.get(3)?,
        max_uses: row.get::<_, i64>(4)? as u32,
        uses: row.get::<_, i64>(5)? as u32,
        expires_ms: row.get(6)?,
        created_ms: row.get(7)?,
        revoked_ms: row.get(8)?,
    })
}

pub(super) fn audit_result_str(result: AuditResult) -> &'static str {
    match result {
        AuditResult::Ok => "ok",
        AuditResult::Err => "err",
    }
}

pub(super) fn audit_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AuditRecord> {
    let result: String = row.get(5)?;
    Ok(AuditRecord {
        n: row.get::<_, i64>(0)? as u64,
        ts_ms: row.get(1)?,
        principal: row.get(2)?,
        action: row.get(3)?,
        target: row.get(4)?,
        result: if result == "ok" {
            AuditResult::Ok
        } else {
            AuditResult::Err
        },
        code: row.get(6)?,
        hash: row.get(7)?,
        count: row.get::<_, Option<i64>>(8)?.map(|count| count as u64),
        reason: row.get(9)?,
        via: crate::records::Via::parse(row.get::<_, Option<String>>(10)?.as_deref()),
    })
}

pub(super) const AUDIT_COLUMNS: &str =
    "n, ts_ms, principal, action, target, result, code, hash, count, reason, via";
