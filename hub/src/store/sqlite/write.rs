//! The writer's transaction: every change of the hub's state is a row written here, in
//! the one transaction the writer commits per batch.

use super::*;
use rusqlite::OptionalExtension;

/// Fields drop in order: the held statement goes back to the cache before an uncommitted
/// transaction rolls back.
pub(super) struct SqliteTx<'conn> {
    /// The event insert, looked up once per transaction rather than once per event: nearly
    /// every command runs it, and the cache hashes the whole SQL text on each lookup.
    pub(super) append: Option<rusqlite::CachedStatement<'conn>>,
    pub(super) tx: rusqlite::Transaction<'conn>,
    pub(super) conn: &'conn Connection,
}

pub(super) const APPEND_EVENT: &str =
    "INSERT INTO events (stream, seq, id, ts_ms, sender, kind, body, client_key, mentions, pair)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

impl WriteTx for SqliteTx<'_> {
    fn insert_principal(&mut self, p: &PrincipalRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO principals
                     (id, kind, handle, name, owner, discoverable, description, card, created_ms,
                      remote_card_url)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![
                p.id,
                p.kind.as_str(),
                p.handle,
                p.name,
                p.owner,
                p.discoverable.as_str(),
                p.description,
                p.card,
                p.created_ms,
                p.remote
            ])?;
        Ok(())
    }

    fn update_principal(&mut self, p: &PrincipalRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "UPDATE principals SET name = ?2, discoverable = ?3, description = ?4, card = ?5
                 WHERE id = ?1",
            )?
            .execute(params![
                p.id,
                p.name,
                p.discoverable.as_str(),
                p.description,
                p.card
            ])?;
        Ok(())
    }

    fn insert_token(&mut self, token: &TokenRecord, now_ms: i64) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO tokens (hash, principal, created_ms, revoked_ms) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                &token.hash.0[..],
                token.principal,
                now_ms,
                token.revoked.then_some(now_ms)
            ])?;
        Ok(())
    }

    fn revoke_tokens(&mut self, principal: &str, now_ms: i64) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "UPDATE tokens SET revoked_ms = ?2 WHERE principal = ?1 AND revoked_ms IS NULL",
            )?
            .execute(params![principal, now_ms])?;
        Ok(())
    }

    fn insert_room(&mut self, room: &RoomRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO rooms (id, title, topic, creator, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                room.id,
                room.title,
                room.topic,
                room.creator,
                room.created_ms
            ])?;
        Ok(())
    }

    fn update_room(&mut self, room: &RoomRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached("UPDATE rooms SET title = ?2, topic = ?3 WHERE id = ?1")?
            .execute(params![room.id, room.title, room.topic])?;
        Ok(())
    }

    fn upsert_member(&mut self, member: &MemberRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO members (room, principal, routing, joined_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (room, principal) DO UPDATE SET routing = excluded.routing",
            )?
            .execute(params![
                member.room,
                member.principal,
                member.routing.as_str(),
                member.joined_ms
            ])?;
        Ok(())
    }

    fn delete_member(&mut self, room: &str, principal: &str) -> Result<(), WriteError> {
        self.tx
            .prepare_cached("DELETE FROM members WHERE room = ?1 AND principal = ?2")?
            .execute(params![room, principal])?;
        Ok(())
    }

    fn append_event(&mut self, event: &EventRecord) -> Result<(), WriteError> {
        let mentions = (!event.mentions.is_empty()).then(|| event.mentions.join(" "));
        let append = match &mut self.append {
            Some(append) => append,
            None => self.append.insert(self.conn.prepare_cached(APPEND_EVENT)?),
        };
        append.execute(params![
            event.stream.storage_key(),
            event.seq as i64,
            event.id,
            event.ts_ms,
            event.from,
            event.kind,
            event.body,
            event.client_key,
            mentions,
            i64::from(event.pair)
        ])?;
        Ok(())
    }

    fn event_at(
        &mut self,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<Option<EventRecord>, WriteError> {
        let mut statement = self.tx.prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE stream = ?1 AND seq = ?2"
        ))?;
        let mut rows = statement.query(params![stream.storage_key(), signed(seq)])?;
        rows.next()?
            .map(event_from)
            .transpose()
            .map_err(WriteError::from)
    }

    fn request(&mut self, id: &str) -> Result<Option<RequestRecord>, WriteError> {
        let mut statement = self.tx.prepare_cached(&format!(
            "SELECT {REQUEST_COLUMNS} FROM contact_requests WHERE id = ?1"
        ))?;
        let mut rows = statement.query([id])?;
        rows.next()?
            .map(request_from)
            .transpose()
            .map_err(WriteError::from)
    }

    fn invite_by_code(
        &mut self,
        code_hash: &TokenHash,
    ) -> Result<Option<InviteRecord>, WriteError> {
        let mut statement = self.tx.prepare_cached(&format!(
            "SELECT {INVITE_COLUMNS} FROM invites WHERE code_hash = ?1"
        ))?;
        let mut rows = statement.query([&code_hash.0[..]])?;
        rows.next()?
            .map(invite_from)
            .transpose()
            .map_err(WriteError::from)
    }

    fn invite(&mut self, id: &str) -> Result<Option<InviteRecord>, WriteError> {
        let mut statement = self.tx.prepare_cached(&format!(
            "SELECT {INVITE_COLUMNS} FROM invites WHERE id = ?1"
        ))?;
        let mut rows = statement.query([id])?;
        rows.next()?
            .map(invite_from)
            .transpose()
            .map_err(WriteError::from)
    }

    fn ping(&mut self, room: &str, ping: &str) -> Result<Option<PingRecord>, WriteError> {
        let mut statement = self.tx.prepare_cached(&format!(
            "SELECT {PING_COLUMNS} FROM pings WHERE room = ?1 AND ping = ?2"
        ))?;
        let mut rows = statement.query([room, ping])?;
        rows.next()?
            .map(ping_from)
            .transpose()
            .map_err(WriteError::from)
    }

    fn upsert_ping(&mut self, ping: &PingRecord) -> Result<(), WriteError> {
        let recipients = serde_json::to_string(&ping.to).expect("strings serialize");
        self.tx
            .prepare_cached(
                "INSERT INTO pings (room, ping, seq, recipients, expires_ms, answered_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (room, ping) DO UPDATE SET answered_by = excluded.answered_by",
            )?
            .execute(params![
                ping.room,
                ping.ping,
                ping.seq as i64,
                recipients,
                ping.expires_ms,
                ping.answered_by
            ])?;
        Ok(())
    }

    fn set_ack(
        &mut self,
        principal: &str,
        device: &str,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO acks (principal, device, stream, seq) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (principal, device, stream) DO UPDATE SET seq = max(seq, excluded.seq)",
            )?
            .execute(params![principal, device, stream.storage_key(), seq as i64])?;
        Ok(())
    }

    fn insert_contact(&mut self, contact: &ContactRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO contacts (a, b, since_ms, request) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (a, b) DO NOTHING",
            )?
            .execute(params![
                contact.a,
                contact.b,
                contact.since_ms,
                contact.request
            ])?;
        Ok(())
    }

    fn remote(&mut self, write: &RemoteWrite<'_>) -> Result<u64, WriteError> {
        let changed = match write {
            RemoteWrite::Credential {
                principal,
                credential,
            } => self
                .tx
                .prepare_cached(
                    "INSERT INTO remote_credentials (principal, scheme, header, value)
                     VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (principal) DO UPDATE SET scheme = excluded.scheme,
                         header = excluded.header, value = excluded.value",
                )?
                .execute(params![
                    principal,
                    credential_scheme(credential.scheme),
                    credential.header,
                    credential.value
                ])?,
            RemoteWrite::Call(call) => self
                .tx
                .prepare_cached(
                    "INSERT INTO remote_calls (room, seq, remote, created_ms, attempts, next_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
                )?
                .execute(params![
                    call.room,
                    call.seq as i64,
                    call.remote,
                    call.created_ms,
                    call.attempts,
                    call.next_ms
                ])?,
            RemoteWrite::Claim {
                room,
                seq,
                remote,
                now_ms,
                until_ms,
            } => {
                let attempt: Option<i64> = self
                    .tx
                    .prepare_cached(
                        "UPDATE remote_calls SET next_ms = ?5, attempts = attempts + 1
                         WHERE room = ?1 AND seq = ?2 AND remote = ?3 AND next_ms <= ?4
                           AND NOT EXISTS (SELECT 1 FROM remote_calls AS earlier
                               WHERE earlier.room = ?1 AND earlier.remote = ?3
                                 AND earlier.seq < ?2 AND earlier.next_ms IS NOT NULL)
                         RETURNING attempts",
                    )?
                    .query_row(
                        params![room, *seq as i64, remote, now_ms, until_ms],
                        |row| row.get(0),
                    )
                    .optional()?;
                return Ok(attempt.map_or(0, |attempt| attempt.max(0) as u64));
            }
            RemoteWrite::Settle {
                room,
                seq,
                remote,
                attempt,
                next_ms,
            } => self
                .tx
                .prepare_cached(
                    "UPDATE remote_calls SET next_ms = ?5
                     WHERE room = ?1 AND seq = ?2 AND remote = ?3 AND attempts = ?4
                         AND next_ms IS NOT NULL",
                )?
                .execute(params![room, *seq as i64, remote, attempt, next_ms])?,
            RemoteWrite::Defer {
                room,
                seq,
                remote,
                now_ms,
                next_ms,
            } => self
                .tx
                .prepare_cached(
                    "UPDATE remote_calls SET next_ms = ?5
                     WHERE room = ?1 AND seq = ?2 AND remote = ?3 AND next_ms <= ?4",
                )?
                .execute(params![room, *seq as i64, remote, now_ms, next_ms])?,
            RemoteWrite::Thread(thread) => self
                .tx
                .prepare_cached(
                    "INSERT INTO remote_threads
                         (room, remote, context_id, task_id, ping, asker, mention)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (room, remote) DO UPDATE SET context_id = excluded.context_id,
                         task_id = excluded.task_id, ping = excluded.ping,
                         asker = excluded.asker, mention = excluded.mention",
                )?
                .execute(params![
                    thread.room,
                    thread.remote,
                    thread.context_id,
                    thread.task_id,
                    thread.ping,
                    thread.asker,
                    thread.mention
                ])?,
            RemoteWrite::Wake {
                remote,
                room,
                now_ms,
            } => self
                .tx
                .prepare_cached(
                    "UPDATE remote_calls SET next_ms = ?3
                     WHERE remote = ?1 AND (?2 IS NULL OR room = ?2) AND next_ms > ?3
                       AND attempts = 0",
                )?
                .execute(params![remote, room, now_ms])?,
            RemoteWrite::Prune { before_ms } => self
                .tx
                .prepare_cached(
                    "DELETE FROM remote_calls WHERE next_ms IS NULL AND created_ms < ?1",
                )?
                .execute(params![before_ms])?,
        };
        Ok(changed as u64)
    }

    fn upsert_request(&mut self, request: &RequestRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO contact_requests
                 (id, sender, target, state, message, created_ms, decided_ms, held_key, held_body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state,
                 decided_ms = excluded.decided_ms, held_key = excluded.held_key,
                 held_body = excluded.held_body",
            )?
            .execute(params![
                request.id,
                request.from,
                request.to,
                request.state.as_str(),
                request.message,
                request.created_ms,
                request.decided_ms,
                request.held.as_ref().map(|held| held.client_key.as_str()),
                request.held.as_ref().and_then(|held| held.body.as_deref())
            ])?;
        Ok(())
    }

    fn upsert_invite(&mut self, invite: &InviteRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO invites
                     (id, code_hash, creator, room, max_uses, uses, expires_ms, created_ms, revoked_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (id) DO UPDATE SET uses = excluded.uses, revoked_ms = excluded.revoked_ms",
            )?
            .execute(params![
                invite.id,
                &invite.code_hash.0[..],
                invite.creator,
                invite.room,
                invite.max_uses,
                invite.uses,
                invite.expires_ms,
                invite.created_ms,
                invite.revoked_ms
            ])?;
        Ok(())
    }

    fn set_control(&mut self, control: &ControlRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO controls (agent, room, action, by, ts_ms, reason)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (agent, room) DO UPDATE SET action = excluded.action, by = excluded.by,
                     ts_ms = excluded.ts_ms, reason = excluded.reason",
            )?
            .execute(params![
                control.agent,
                control.room.as_deref().unwrap_or(""),
                control.action.as_str(),
                control.by,
                control.ts_ms,
                control.reason
            ])?;
        Ok(())
    }

    fn delete_control(&mut self, agent: &str, room: Option<&str>) -> Result<(), WriteError> {
        self.tx
            .prepare_cached("DELETE FROM controls WHERE agent = ?1 AND room = ?2")?
            .execute(params![agent, room.unwrap_or("")])?;
        Ok(())
    }

    fn append_audit(&mut self, entry: &AuditRecord) -> Result<(), WriteError> {
        self.tx
            .prepare_cached(
                "INSERT INTO audit
                 (n, ts_ms, principal, action, target, result, code, hash, count, reason, via)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                entry.n as i64,
                entry.ts_ms,
                entry.principal,
                entry.action,
                entry.target,
                audit_result_str(entry.result),
                entry.code,
                entry.hash,
                entry.count.map(|count| count as i64),
                entry.reason,
                entry.via.recorded()
            ])?;
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<(), WriteError> {
        let SqliteTx { append, tx, .. } = *self;
        drop(append);
        tx.commit()?;
        Ok(())
    }
}
