//! The writer's transaction. Events are the bulk of every batch, so they are held and
//! written together, in one statement per batch with the stream heads they move, just before
//! anything reads them back and at commit; every other change is a statement of its own.

use std::sync::Arc;

use super::*;

pub(super) struct PostgresTx<'conn> {
    io: Arc<Io>,
    tx: deadpool_postgres::Transaction<'conn>,
    /// Appended events not yet sent to the server.
    held: Vec<EventRecord>,
    /// This batch's place among a cluster's, when several processes share the database.
    cluster: Option<ClusterBatch>,
}

/// A batch of one process of a cluster: it holds the batch lock, knows what the others
/// committed before it, and leaves its shared batch at commit.
struct ClusterBatch {
    node: String,
    seen: Arc<std::sync::atomic::AtomicU64>,
    others: Vec<roundtable_engine::records::Committed>,
    position: u64,
    shared: roundtable_engine::records::SharedBatch,
}

impl<'conn> PostgresTx<'conn> {
    pub(super) fn new(io: Arc<Io>, tx: deadpool_postgres::Transaction<'conn>) -> Self {
        PostgresTx {
            io,
            tx,
            held: Vec::new(),
            cluster: None,
        }
    }

    /// Takes the batch lock (every process's batches, one at a time) and reads what the
    /// others committed after `seen`.
    pub(super) fn join_cluster(
        &mut self,
        node: String,
        seen: Arc<std::sync::atomic::AtomicU64>,
    ) -> Result<(), StoreError> {
        let after = seen.load(std::sync::atomic::Ordering::Relaxed);
        let tx = &self.tx;
        let rows = self.io.wait(async {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&BATCH_LOCK])
                .await?;
            let statement = tx
                .prepare_cached("SELECT n, node, batch FROM shared_batches WHERE n > $1 ORDER BY n")
                .await?;
            Ok::<_, StoreError>(tx.query(&statement, &[&signed(after)]).await?)
        })?;
        let others = committed_from_rows(&rows)?;
        let mut position = after;
        for committed in &others {
            if committed.n != position + 1 {
                // Pruned before this process read it: only a reload catches up.
                return Err(StoreError::Postgres(PostgresError::Behind));
            }
            position = committed.n;
        }
        self.cluster = Some(ClusterBatch {
            node,
            seen,
            others,
            position: position + 1,
            shared: Default::default(),
        });
        Ok(())
    }

    fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let tx = &self.tx;
        self.io.wait(async {
            let statement = tx.prepare_cached(sql).await?;
            Ok(tx.execute(&statement, params).await?)
        })
    }

    fn query_opt(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        self.write_held()?;
        let tx = &self.tx;
        self.io.wait(async {
            let statement = tx.prepare_cached(sql).await?;
            Ok(tx.query_opt(&statement, params).await?)
        })
    }

    /// Sends the held events, and the heads they move, in two statements.
    fn write_held(&mut self) -> Result<(), StoreError> {
        if self.held.is_empty() {
            return Ok(());
        }
        let held = std::mem::take(&mut self.held);
        let streams: Vec<String> = held
            .iter()
            .map(|event| event.stream.storage_key().into_owned())
            .collect();
        let seqs: Vec<i64> = held.iter().map(|event| signed(event.seq)).collect();
        let ids: Vec<&str> = held.iter().map(|event| event.id.as_str()).collect();
        let times: Vec<i64> = held.iter().map(|event| event.ts_ms).collect();
        let senders: Vec<&str> = held.iter().map(|event| event.from.as_str()).collect();
        let kinds: Vec<&str> = held.iter().map(|event| event.kind.as_str()).collect();
        let bodies: Vec<&str> = held.iter().map(|event| event.body.as_str()).collect();
        let keys: Vec<Option<&str>> = held
            .iter()
            .map(|event| event.client_key.as_deref())
            .collect();
        // Principal ids hold no spaces (they are hub-minted), so a mention list travels as
        // one space-separated text per event: `unnest` cannot take ragged arrays.
        let mentions: Vec<String> = held.iter().map(|event| event.mentions.join(" ")).collect();
        let pairs: Vec<bool> = held.iter().map(|event| event.pair).collect();
        let tx = &self.tx;
        self.io.wait(async {
            let append = tx
                .prepare_cached(
                    "INSERT INTO events (stream, seq, id, ts_ms, sender, kind, body, client_key, mentions, pair)
                     SELECT stream, seq, id, ts_ms, sender, kind, body, client_key,
                            coalesce(string_to_array(nullif(mentions, ''), ' '), '{}'), pair
                     FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[],
                                 $6::text[], $7::text[], $8::text[], $9::text[], $10::boolean[])
                          AS held (stream, seq, id, ts_ms, sender, kind, body, client_key, mentions, pair)",
                )
                .await?;
            let heads = tx
                .prepare_cached(
                    "INSERT INTO stream_heads (stream, head)
                     SELECT stream, max(seq) FROM unnest($1::text[], $2::bigint[]) AS held (stream, seq)
                     GROUP BY stream
                     ON CONFLICT (stream) DO UPDATE SET head = greatest(stream_heads.head, excluded.head)",
                )
                .await?;
            // Pipelined: both go out before either answer is awaited.
            let (appended, moved) = futures_util::future::join(
                tx.execute(
                    &append,
                    &[
                        &streams, &seqs, &ids, &times, &senders, &kinds, &bodies, &keys,
                        &mentions, &pairs,
                    ],
                ),
                tx.execute(&heads, &[&streams, &seqs]),
            )
            .await;
            appended?;
            moved?;
            Ok(())
        })
    }
}

/// Rows of `shared_batches` (`n, node, batch`) as committed batches.
pub(super) fn committed_from_rows(
    rows: &[Row],
) -> Result<Vec<roundtable_engine::records::Committed>, StoreError> {
    rows.iter()
        .map(|row| {
            let batch: &str = row.try_get(2)?;
            Ok(roundtable_engine::records::Committed {
                n: unsigned(row.try_get(0)?),
                node: row.try_get(1)?,
                batch: serde_json::from_str(batch).map_err(|error| {
                    StoreError::Postgres(PostgresError::SharedBatch(error.to_string()))
                })?,
            })
        })
        .collect()
}

impl WriteTx for PostgresTx<'_> {
    fn insert_principal(&mut self, p: &PrincipalRecord) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO principals
                 (id, kind, handle, name, owner, discoverable, description, card, created_ms,
                  remote_card_url)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &p.id,
                &p.kind.as_str(),
                &p.handle,
                &p.name,
                &p.owner,
                &p.discoverable.as_str(),
                &p.description,
                &p.card,
                &p.created_ms,
                &p.remote,
            ],
        )?;
        Ok(())
    }

    fn update_principal(&mut self, p: &PrincipalRecord) -> Result<(), WriteError> {
        self.execute(
            "UPDATE principals SET name = $2, discoverable = $3, description = $4, card = $5
             WHERE id = $1",
            &[
                &p.id,
                &p.name,
                &p.discoverable.as_str(),
                &p.description,
                &p.card,
            ],
        )?;
        Ok(())
    }

    fn insert_token(&mut self, token: &TokenRecord, now_ms: i64) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO tokens (hash, principal, created_ms, revoked_ms) VALUES ($1, $2, $3, $4)",
            &[
                &&token.hash.0[..],
                &token.principal,
                &now_ms,
                &token.revoked.then_some(now_ms),
            ],
        )?;
        Ok(())
    }

    fn revoke_tokens(&mut self, principal: &str, now_ms: i64) -> Result<(), WriteError> {
        self.execute(
            "UPDATE tokens SET revoked_ms = $2 WHERE principal = $1 AND revoked_ms IS NULL",
            &[&principal, &now_ms],
        )?;
        Ok(())
    }

    fn insert_room(&mut self, room: &RoomRecord) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO rooms (id, title, topic, creator, created_ms) VALUES ($1, $2, $3, $4, $5)",
            &[
                &room.id,
                &room.title,
                &room.topic,
                &room.creator,
                &room.created_ms,
            ],
        )?;
        Ok(())
    }

    fn update_room(&mut self, room: &RoomRecord) -> Result<(), WriteError> {
        self.execute(
            "UPDATE rooms SET title = $2, topic = $3 WHERE id = $1",
            &[&room.id, &room.title, &room.topic],
        )?;
        Ok(())
    }

    fn upsert_member(&mut self, member: &MemberRecord) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO members (room, principal, routing, joined_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (room, principal) DO UPDATE SET routing = excluded.routing",
            &[
                &member.room,
                &member.principal,
                &member.routing.as_str(),
                &member.joined_ms,
            ],
        )?;
        Ok(())
    }

    fn delete_member(&mut self, room: &str, principal: &str) -> Result<(), WriteError> {
        self.execute(
            "DELETE FROM members WHERE room = $1 AND principal = $2",
            &[&room, &principal],
        )?;
        Ok(())
    }

    fn append_event(&mut self, event: &EventRecord) -> Result<(), WriteError> {
        self.held.push(event.clone());
        Ok(())
    }

    fn event_at(
        &mut self,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<Option<EventRecord>, WriteError> {
        self.query_opt(
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE stream = $1 AND seq = $2"),
            &[&stream.storage_key().as_ref(), &signed(seq)],
        )?
        .map(|row| event_from(&row))
        .transpose()
        .map_err(WriteError::from)
    }

    fn request(&mut self, id: &str) -> Result<Option<RequestRecord>, WriteError> {
        self.query_opt(
            &format!("SELECT {REQUEST_COLUMNS} FROM contact_requests WHERE id = $1"),
            &[&id],
        )?
        .map(|row| request_from(&row))
        .transpose()
        .map_err(WriteError::from)
    }

    fn invite_by_code(
        &mut self,
        code_hash: &TokenHash,
    ) -> Result<Option<InviteRecord>, WriteError> {
        self.query_opt(
            &format!("SELECT {INVITE_COLUMNS} FROM invites WHERE code_hash = $1"),
            &[&&code_hash.0[..]],
        )?
        .map(|row| invite_from(&row))
        .transpose()
        .map_err(WriteError::from)
    }

    fn invite(&mut self, id: &str) -> Result<Option<InviteRecord>, WriteError> {
        self.query_opt(
            &format!("SELECT {INVITE_COLUMNS} FROM invites WHERE id = $1"),
            &[&id],
        )?
        .map(|row| invite_from(&row))
        .transpose()
        .map_err(WriteError::from)
    }

    fn ping(&mut self, room: &str, ping: &str) -> Result<Option<PingRecord>, WriteError> {
        self.query_opt(
            &format!("SELECT {PING_COLUMNS} FROM pings WHERE room = $1 AND ping = $2"),
            &[&room, &ping],
        )?
        .map(|row| ping_from(&row))
        .transpose()
        .map_err(WriteError::from)
    }

    fn upsert_ping(&mut self, ping: &PingRecord) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO pings (room, ping, seq, recipients, expires_ms, answered_by)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (room, ping) DO UPDATE SET answered_by = excluded.answered_by",
            &[
                &ping.room,
                &ping.ping,
                &signed(ping.seq),
                &ping.to,
                &ping.expires_ms,
                &ping.answered_by,
            ],
        )?;
        Ok(())
    }

    fn set_ack(
        &mut self,
        principal: &str,
        device: &str,
        stream: &StreamKey,
        seq: u64,
    ) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO acks (principal, device, stream, seq) VALUES ($1, $2, $3, $4)
             ON CONFLICT (principal, device, stream) DO UPDATE SET seq = greatest(acks.seq, excluded.seq)",
            &[
                &principal,
                &device,
                &stream.storage_key().as_ref(),
                &signed(seq),
            ],
        )?;
        Ok(())
    }

    fn insert_contact(&mut self, contact: &ContactRecord) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO contacts (a, b, since_ms, request) VALUES ($1, $2, $3, $4)
             ON CONFLICT (a, b) DO NOTHING",
            &[&contact.a, &contact.b, &contact.since_ms, &contact.request],
        )?;
        Ok(())
    }

    fn remote(&mut self, write: &RemoteWrite<'_>) -> Result<u64, WriteError> {
        let changed = match write {
            RemoteWrite::Credential {
                principal,
                credential,
            } => self.execute(
                "INSERT INTO remote_credentials (principal, scheme, header, value)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (principal) DO UPDATE SET scheme = excluded.scheme,
                     header = excluded.header, value = excluded.value",
                &[
                    principal,
                    &credential_scheme(credential.scheme),
                    &credential.header,
                    &credential.value,
                ],
            )?,
            RemoteWrite::Call(call) => self.execute(
                "INSERT INTO remote_calls (room, seq, remote, created_ms, attempts, next_ms)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                &[
                    &call.room,
                    &signed(call.seq),
                    &call.remote,
                    &call.created_ms,
                    &i64::from(call.attempts),
                    &call.next_ms,
                ],
            )?,
            RemoteWrite::Claim {
                room,
                seq,
                remote,
                now_ms,
                until_ms,
            } => {
                let row = self.query_opt(
                    "UPDATE remote_calls SET next_ms = $5, attempts = attempts + 1
                     WHERE room = $1 AND seq = $2 AND remote = $3 AND next_ms <= $4
                       AND NOT EXISTS (SELECT 1 FROM remote_calls AS earlier
                           WHERE earlier.room = $1 AND earlier.remote = $3
                             AND earlier.seq < $2 AND earlier.next_ms IS NOT NULL)
                     RETURNING attempts",
                    &[room, &signed(*seq), remote, now_ms, until_ms],
                )?;
                return Ok(match row {
                    Some(row) => row.try_get::<_, i64>(0)?.max(0) as u64,
                    None => 0,
                });
            }
            RemoteWrite::Settle {
                room,
                seq,
                remote,
                attempt,
                next_ms,
            } => self.execute(
                "UPDATE remote_calls SET next_ms = $5
                 WHERE room = $1 AND seq = $2 AND remote = $3 AND attempts = $4
                     AND next_ms IS NOT NULL",
                &[room, &signed(*seq), remote, &i64::from(*attempt), next_ms],
            )?,
            RemoteWrite::Defer {
                room,
                seq,
                remote,
                now_ms,
                next_ms,
            } => self.execute(
                "UPDATE remote_calls SET next_ms = $5
                 WHERE room = $1 AND seq = $2 AND remote = $3 AND next_ms <= $4",
                &[room, &signed(*seq), remote, now_ms, next_ms],
            )?,
            RemoteWrite::Thread(thread) => self.execute(
                "INSERT INTO remote_threads (room, remote, context_id, task_id, ping, asker, mention)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (room, remote) DO UPDATE SET context_id = excluded.context_id,
                     task_id = excluded.task_id, ping = excluded.ping,
                     asker = excluded.asker, mention = excluded.mention",
                &[
                    &thread.room,
                    &thread.remote,
                    &thread.context_id,
                    &thread.task_id,
                    &thread.ping,
                    &thread.asker,
                    &thread.mention,
                ],
            )?,
            RemoteWrite::Wake {
                remote,
                room,
                now_ms,
            } => self.execute(
                "UPDATE remote_calls SET next_ms = $3
                 WHERE remote = $1 AND ($2::text IS NULL OR room = $2) AND next_ms > $3
                   AND attempts = 0",
                &[remote, room, now_ms],
            )?,
            RemoteWrite::Prune { before_ms } => self.execute(
                "DELETE FROM remote_calls WHERE next_ms IS NULL AND created_ms < $1",
                &[before_ms],
            )?,
        };
        Ok(changed)
    }

    fn upsert_request(&mut self, request: &RequestRecord) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO contact_requests
             (id, sender, target, state, message, created_ms, decided_ms, held_key, held_body)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (id) DO UPDATE SET state = excluded.state,
             decided_ms = excluded.decided_ms, held_key = excluded.held_key,
             held_body = excluded.held_body",
            &[
                &request.id,
                &request.from,
                &request.to,
                &request.state.as_str(),
                &request.message,
                &request.created_ms,
                &request.decided_ms,
                &request.held.as_ref().map(|held| held.client_key.as_str()),
                &request.held.as_ref().and_then(|held| held.body.as_deref()),
            ],
        )?;
        Ok(())
    }

    fn upsert_invite(&mut self, invite: &InviteRecord) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO invites
                 (id, code_hash, creator, room, max_uses, uses, expires_ms, created_ms, revoked_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (id) DO UPDATE SET uses = excluded.uses, revoked_ms = excluded.revoked_ms",
            &[
                &invite.id,
                &&invite.code_hash.0[..],
                &invite.creator,
                &invite.room,
                &i64::from(invite.max_uses),
                &i64::from(invite.uses),
                &invite.expires_ms,
                &invite.created_ms,
                &invite.revoked_ms,
            ],
        )?;
        Ok(())
    }

    fn set_control(&mut self, control: &ControlRecord) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO controls (agent, room, action, by_id, ts_ms, reason)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (agent, room) DO UPDATE SET action = excluded.action, by_id = excluded.by_id,
                 ts_ms = excluded.ts_ms, reason = excluded.reason",
            &[
                &control.agent,
                &control.room.as_deref().unwrap_or(""),
                &control.action.as_str(),
                &control.by,
                &control.ts_ms,
                &control.reason,
            ],
        )?;
        Ok(())
    }

    fn delete_control(&mut self, agent: &str, room: Option<&str>) -> Result<(), WriteError> {
        self.execute(
            "DELETE FROM controls WHERE agent = $1 AND room = $2",
            &[&agent, &room.unwrap_or("")],
        )?;
        Ok(())
    }

    fn append_audit(&mut self, entry: &AuditRecord) -> Result<(), WriteError> {
        self.execute(
            "INSERT INTO audit (n, ts_ms, principal, action, target, result, code, hash, count, reason, via)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                &signed(entry.n),
                &entry.ts_ms,
                &entry.principal,
                &entry.action,
                &entry.target,
                &audit_result_str(entry.result),
                &entry.code,
                &entry.hash,
                &entry.count.map(signed),
                &entry.reason,
                &entry.via.recorded(),
            ],
        )?;
        Ok(())
    }

    fn others(&mut self) -> Vec<roundtable_engine::records::Committed> {
        self.cluster
            .as_mut()
            .map(|cluster| std::mem::take(&mut cluster.others))
            .unwrap_or_default()
    }

    fn position(&self) -> Option<u64> {
        self.cluster.as_ref().map(|cluster| cluster.position)
    }

    fn share(&mut self, batch: roundtable_engine::records::SharedBatch) -> Result<(), WriteError> {
        if let Some(cluster) = &mut self.cluster {
            cluster.shared = batch;
        }
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), WriteError> {
        self.write_held()?;
        let PostgresTx {
            io, tx, cluster, ..
        } = *self;
        let Some(cluster) = cluster else {
            io.wait(tx.commit())?;
            return Ok(());
        };
        let batch = serde_json::to_string(&cluster.shared)
            .map_err(|error| StoreError::Postgres(PostgresError::SharedBatch(error.to_string())))?;
        let now_ms = crate::unix_ms();
        let position = signed(cluster.position);
        io.wait(async {
            tx.execute(
                "INSERT INTO shared_batches (n, node, committed_ms, batch) VALUES ($1, $2, $3, $4)",
                &[&position, &cluster.node, &now_ms, &batch],
            )
            .await?;
            // Now and then, under the lock, the oldest go.
            if position % 512 == 0 {
                tx.execute(
                    "DELETE FROM shared_batches WHERE committed_ms < $1 AND n < $2",
                    &[&(now_ms - SHARED_RETENTION_MS), &position],
                )
                .await?;
            }
            tx.commit().await
        })?;
        cluster
            .seen
            .store(cluster.position, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}
