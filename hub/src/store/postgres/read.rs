//! The readers: replay and history for connections, the directory and the audit log, on
//! pooled connections. Long reads go through a portal a few hundred rows at a time, so a
//! page cut short by its byte budget never fetched the rows after it.

use std::sync::Arc;

use deadpool_postgres::{Pool, Transaction};
use roundtable_protocol::model::DirectoryEntry;
use tokio_postgres::IsolationLevel;
use tokio_postgres::types::ToSql;

use super::*;
use crate::store::{
    AuditQuery, DirectoryQuery, EventOrder, Membership, ReadError, ReadStore, ReadTx, SeqRange,
    SnapshotRead, store_only,
};

/// Rows fetched from a portal at a time.
const FETCH_ROWS: i32 = 256;

/// Reads the whole audit log of the database at `url`, ascending, calling `visit` for each
/// entry until it returns false (read-only: safe while hubs run).
pub fn read_audit_log(
    url: &str,
    mut visit: impl FnMut(AuditRecord) -> bool,
) -> Result<(), StoreError> {
    let config: tokio_postgres::Config = url.parse().map_err(|error: tokio_postgres::Error| {
        StoreError::Postgres(PostgresError::Address(error.to_string()))
    })?;
    let io = Io::new().map_err(StoreError::Postgres)?;
    let pool = pool(&config, 1)?;
    io.wait(async {
        let mut client = pool.get().await?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let statement = tx
            .prepare(&format!("SELECT {AUDIT_COLUMNS} FROM audit ORDER BY n"))
            .await?;
        let portal = tx.bind(&statement, &[]).await?;
        loop {
            let rows = tx.query_portal(&portal, FETCH_ROWS).await?;
            if rows.is_empty() {
                return Ok(());
            }
            for row in &rows {
                if !visit(audit_from(row)?) {
                    return Ok(());
                }
            }
        }
    })
}

/// Pooled connections for replay and history.
pub struct PostgresReader {
    pub(super) io: Arc<Io>,
    pub(super) pool: Pool,
}

impl std::fmt::Debug for PostgresReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PostgresReader")
    }
}

impl PostgresReader {
    /// Runs `work` in a read-only transaction that sees one snapshot of the database.
    fn in_transaction<T>(
        &self,
        work: impl AsyncFnOnce(&Transaction<'_>) -> Result<T, ReadError>,
    ) -> Result<T, ReadError> {
        self.io.wait(async {
            let mut client = self.pool.get().await.map_err(StoreError::from)?;
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(StoreError::from)?;
            let result = work(&tx).await;
            // Read only: nothing to keep, and a failed transaction cannot commit anyway.
            drop(tx);
            result
        })
    }
}

/// Calls `visit` on the rows of `sql` in order, a few hundred at a time, until it returns
/// false or the rows run out.
async fn each_row(
    tx: &Transaction<'_>,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    mut visit: impl FnMut(&Row) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let statement = tx.prepare_cached(sql).await?;
    let portal = tx.bind(&statement, params).await?;
    loop {
        let rows = tx.query_portal(&portal, FETCH_ROWS).await?;
        if rows.is_empty() {
            return Ok(());
        }
        for row in &rows {
            if !visit(row)? {
                return Ok(());
            }
        }
        if rows.len() < FETCH_ROWS as usize {
            return Ok(());
        }
    }
}

impl ReadStore for PostgresReader {
    fn record_progress(&self, node: &str, dispatched: u64, now_ms: i64) -> Result<(), StoreError> {
        self.io.wait(async {
            let mut client = self.pool.get().await?;
            let tx = client.transaction().await?;
            // News, not data: not worth a flush to disk.
            tx.batch_execute("SET LOCAL synchronous_commit = off")
                .await?;
            let statement = tx
                .prepare_cached(
                    "INSERT INTO nodes (node, dispatched, seen_ms) VALUES ($1, $2, $3)
                     ON CONFLICT (node) DO UPDATE SET dispatched = excluded.dispatched,
                         seen_ms = excluded.seen_ms",
                )
                .await?;
            tx.execute(&statement, &[&node, &signed(dispatched), &now_ms])
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn committed_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<roundtable_engine::records::Committed>, StoreError> {
        self.io.wait(async {
            let client = self.pool.get().await?;
            let statement = client
                .prepare_cached(
                    "SELECT n, node, batch FROM shared_batches WHERE n > $1 ORDER BY n LIMIT $2",
                )
                .await?;
            let rows = client
                .query(&statement, &[&signed(after), &(limit as i64)])
                .await?;
            super::write::committed_from_rows(&rows)
        })
    }

    fn audit_head(&self) -> Result<Option<(u64, String)>, StoreError> {
        let head = self.in_transaction(async |tx| {
            let row = tx
                .query_opt("SELECT n, hash FROM audit ORDER BY n DESC LIMIT 1", &[])
                .await
                .map_err(StoreError::from)?;
            Ok(match row {
                Some(row) => (
                    unsigned(row.try_get(0).map_err(StoreError::from)?),
                    row.try_get(1).map_err(StoreError::from)?,
                ),
                None => (0, roundtable_engine::audit::GENESIS.to_owned()),
            })
        });
        store_only(head, "audit").map(Some)
    }

    fn directory(&self, query: &DirectoryQuery) -> Result<Vec<DirectoryEntry>, StoreError> {
        let entries = self.in_transaction(async |tx| {
            let viewer_owner = tx
                .query_opt(
                    "SELECT coalesce(owner, id) FROM principals WHERE id = $1",
                    &[&query.viewer],
                )
                .await
                .map_err(StoreError::from)?;
            let viewer_owner: String = match viewer_owner {
                Some(row) => row.try_get(0).map_err(StoreError::from)?,
                // Anonymous: owns nothing and is no one's contact, so public ones only.
                None if query.viewer.is_empty() => String::new(),
                None => return Ok(Vec::new()),
            };
            let mut pending_out = std::collections::HashSet::new();
            let mut pending_in = std::collections::HashSet::new();
            let lifetime = roundtable_engine::records::REQUEST_LIFETIME_MS;
            for row in tx
                .query(
                    "SELECT sender, target FROM contact_requests WHERE state = 'pending'
                     AND created_ms > $2 AND (sender = $1 OR target = $1)",
                    &[&query.viewer, &(query.now_ms - lifetime)],
                )
                .await
                .map_err(StoreError::from)?
            {
                let sender: String = row.try_get(0).map_err(StoreError::from)?;
                let target: String = row.try_get(1).map_err(StoreError::from)?;
                if sender == query.viewer {
                    pending_out.insert(target);
                } else {
                    pending_in.insert(sender);
                }
            }
            let contact = "EXISTS (SELECT 1 FROM contacts WHERE (a = $1 AND b = {x}) \
                           OR (a = {x} AND b = $1))";
            let sql = format!(
                "SELECT id, kind, handle, name, owner, description, card, \
                 coalesce(owner, id) = $2, {is_contact} \
                 FROM principals WHERE (id != $1 OR $3::text IS NOT NULL) \
                 AND ($3::text IS NULL OR handle = $3) AND (NOT $4 OR kind = 'agent') \
                 AND (coalesce(owner, id) = $2 \
                 OR discoverable = 'public' OR (discoverable = 'contacts' AND ({is_contact} \
                 OR {owner_is_contact}))) ORDER BY handle",
                is_contact = contact.replace("{x}", "id"),
                owner_is_contact = contact.replace("{x}", "coalesce(owner, id)"),
            );
            let mut entries = Vec::new();
            each_row(
                tx,
                &sql,
                &[
                    &query.viewer,
                    &viewer_owner,
                    &query.handle,
                    &query.agents_only,
                ],
                |row| {
                    if entries.len() >= query.limit {
                        return Ok(false);
                    }
                    let found = directory_found_from(row)?;
                    entries.extend(found.entry(query, &pending_out, &pending_in));
                    Ok(true)
                },
            )
            .await?;
            Ok(entries)
        });
        store_only(entries, "principals")
    }

    fn request_holding(
        &self,
        sender: &str,
        client_key: &str,
    ) -> Result<Option<RequestRecord>, StoreError> {
        let found = self.in_transaction(async |tx| {
            let sql = format!(
                "SELECT {REQUEST_COLUMNS} FROM contact_requests \
                 WHERE sender = $1 AND held_key = $2"
            );
            let row = tx
                .query_opt(&sql, &[&sender, &client_key])
                .await
                .map_err(StoreError::from)?;
            Ok(match row {
                Some(row) => Some(request_from(&row)?),
                None => None,
            })
        });
        store_only(found, "contact_requests")
    }

    fn remote_calls_due(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<RemoteCallRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let found = self.in_transaction(async |tx| {
            let rows = tx
                .query(
                    "SELECT room, seq, remote, created_ms, attempts, next_ms FROM remote_calls AS call
                     WHERE next_ms IS NOT NULL AND next_ms <= $1
                       AND NOT EXISTS (SELECT 1 FROM remote_calls AS earlier
                           WHERE earlier.room = call.room AND earlier.remote = call.remote
                             AND earlier.seq < call.seq AND earlier.next_ms IS NOT NULL)
                     ORDER BY next_ms, created_ms, seq LIMIT $2",
                    &[&now_ms, &limit],
                )
                .await
                .map_err(StoreError::from)?;
            let call = |row: &tokio_postgres::Row| -> Result<RemoteCallRecord, StoreError> {
                Ok(RemoteCallRecord {
                    room: row.try_get(0)?,
                    seq: unsigned(row.try_get(1)?),
                    remote: row.try_get(2)?,
                    created_ms: row.try_get(3)?,
                    attempts: u32::try_from(row.try_get::<_, i64>(4)?).unwrap_or(u32::MAX),
                    next_ms: row.try_get(5)?,
                })
            };
            Ok(rows
                .iter()
                .map(call)
                .collect::<Result<Vec<_>, StoreError>>()?)
        });
        store_only(found, "remote_calls")
    }

    fn remote_credential(
        &self,
        principal: &str,
    ) -> Result<Option<roundtable_protocol::client::RemoteCredential>, StoreError> {
        let found = self.in_transaction(async |tx| {
            let row = tx
                .query_opt(
                    "SELECT scheme, header, value FROM remote_credentials WHERE principal = $1",
                    &[&principal],
                )
                .await
                .map_err(StoreError::from)?;
            let credential = |row: tokio_postgres::Row| -> Result<_, StoreError> {
                Ok(roundtable_protocol::client::RemoteCredential {
                    scheme: credential_scheme_from(row.try_get(0)?)?,
                    header: row.try_get(1)?,
                    value: row.try_get(2)?,
                })
            };
            Ok(row.map(credential).transpose()?)
        });
        store_only(found, "remote_credentials")
    }

    fn device_read_markers(
        &self,
        principal: &str,
        device: &str,
    ) -> Result<Vec<(StreamKey, u64)>, StoreError> {
        let found = self.in_transaction(async |tx| {
            let rows = tx
                .query(
                    "SELECT stream, seq FROM acks WHERE principal = $1 AND device = $2",
                    &[&principal, &device],
                )
                .await
                .map_err(StoreError::from)?;
            let mut markers = Vec::new();
            for row in rows {
                let key: &str = row.try_get(0).map_err(StoreError::from)?;
                let seq: i64 = row.try_get(1).map_err(StoreError::from)?;
                markers.push((StreamKey::from_storage_key(key), unsigned(seq)));
            }
            Ok(markers)
        });
        store_only(found, "acks")
    }

    fn remote_thread(
        &self,
        room: &str,
        remote: &str,
    ) -> Result<Option<RemoteThreadRecord>, StoreError> {
        let found = self.in_transaction(async |tx| {
            let row = tx
                .query_opt(
                    "SELECT context_id, task_id, ping, asker, mention FROM remote_threads
                     WHERE room = $1 AND remote = $2",
                    &[&room, &remote],
                )
                .await
                .map_err(StoreError::from)?;
            let thread = |row: tokio_postgres::Row| -> Result<_, StoreError> {
                Ok(RemoteThreadRecord {
                    room: room.to_owned(),
                    remote: remote.to_owned(),
                    context_id: row.try_get(0)?,
                    task_id: row.try_get(1)?,
                    ping: row.try_get(2)?,
                    asker: row.try_get(3)?,
                    mention: row.try_get(4)?,
                })
            };
            Ok(row.map(thread).transpose()?)
        });
        store_only(found, "remote_threads")
    }

    fn sent_with_key_prefix(
        &self,
        sender: &str,
        prefix: &str,
        before: Option<(i64, String)>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let (before_ms, before_id) = before.unwrap_or((i64::MAX, String::new()));
        let unbounded = before_id.is_empty();
        let limit = limit.min(i64::MAX as usize) as i64;
        let bound = crate::store::key_prefix_bound(prefix);
        let events = self.in_transaction(async |tx| {
            let sql = format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE sender = $1 \
                 AND starts_with(client_key, 'a2a:') AND client_key COLLATE \"C\" >= $2 \
                 AND client_key COLLATE \"C\" < $7 \
                 AND ($5 OR ts_ms < $3 OR (ts_ms = $3 AND id COLLATE \"C\" < $4)) \
                 ORDER BY ts_ms DESC, id COLLATE \"C\" DESC LIMIT $6"
            );
            let mut events = Vec::new();
            each_row(
                tx,
                &sql,
                &[
                    &sender, &prefix, &before_ms, &before_id, &unbounded, &limit, &bound,
                ],
                |row| {
                    events.push(event_from(row)?);
                    Ok(true)
                },
            )
            .await?;
            Ok(events)
        });
        store_only(events, "events")
    }

    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, ReadError> {
        self.in_transaction(async |tx| {
            let visible: Vec<String> = tx
                .query(
                    "SELECT id FROM principals WHERE id = $1 OR owner = $1",
                    &[&query.viewer],
                )
                .await
                .map_err(StoreError::from)?
                .iter()
                .map(|row| row.try_get(0))
                .collect::<Result<_, _>>()
                .map_err(StoreError::from)?;
            let principals: Vec<String> = match &query.principal {
                Some(principal) if visible.contains(principal) => vec![principal.clone()],
                Some(_) => return Err(ReadError::NotFound),
                None => visible,
            };
            let rows = tx
                .query(
                    &format!(
                        "SELECT {AUDIT_COLUMNS} FROM audit WHERE principal = ANY($1) \
                         AND ts_ms >= $2 ORDER BY n LIMIT $3"
                    ),
                    &[
                        &principals,
                        &query.since_ms.unwrap_or(i64::MIN),
                        &i64::from(query.limit),
                    ],
                )
                .await
                .map_err(StoreError::from)?;
            Ok(rows.iter().map(audit_from).collect::<Result<_, _>>()?)
        })
    }

    fn read(&self, read: &mut SnapshotRead<'_>) -> Result<(), ReadError> {
        let mut client = self.io.wait(self.pool.get()).map_err(StoreError::from)?;
        let tx = self
            .io
            .wait(
                client
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start(),
            )
            .map_err(StoreError::from)?;
        // Read only: dropped, not committed, whatever `read` did.
        read(&mut PostgresReadTx { io: &self.io, tx })
    }
}

/// A snapshot: one read-only, repeatable-read transaction on a pooled connection.
struct PostgresReadTx<'a> {
    io: &'a Io,
    tx: Transaction<'a>,
}

impl ReadTx for PostgresReadTx<'_> {
    fn memberships(&mut self, principal: &str) -> Result<Vec<Membership>, StoreError> {
        let rows = self.io.wait(self.tx.query(
            "SELECT m.room, m.routing, coalesce(h.head, 0) FROM members m
             LEFT JOIN stream_heads h ON h.stream = m.room WHERE m.principal = $1",
            &[&principal],
        ))?;
        let mut memberships = Vec::with_capacity(rows.len());
        for row in &rows {
            let routing: &str = row.try_get(1)?;
            memberships.push(Membership {
                room: row.try_get(0)?,
                routing: Routing::parse(routing).unwrap_or_default(),
                head: unsigned(row.try_get(2)?),
            });
        }
        Ok(memberships)
    }

    fn head(&mut self, stream: &StreamKey) -> Result<u64, StoreError> {
        let head = self.io.wait(self.tx.query_opt(
            "SELECT head FROM stream_heads WHERE stream = $1",
            &[&stream.storage_key().as_ref()],
        ))?;
        Ok(match head {
            Some(row) => unsigned(row.try_get(0)?),
            None => 0,
        })
    }

    fn read_markers(&mut self, principal: &str) -> Result<Vec<(StreamKey, u64)>, StoreError> {
        let rows = self.io.wait(self.tx.query(
            "SELECT stream, max(seq) FROM acks WHERE principal = $1 GROUP BY stream",
            &[&principal],
        ))?;
        let mut markers = Vec::with_capacity(rows.len());
        for row in &rows {
            let key: &str = row.try_get(0)?;
            markers.push((StreamKey::from_storage_key(key), unsigned(row.try_get(1)?)));
        }
        Ok(markers)
    }

    fn room_exists(&mut self, room: &str) -> Result<bool, StoreError> {
        let row = self.io.wait(
            self.tx
                .query_opt("SELECT 1 FROM rooms WHERE id = $1", &[&room]),
        )?;
        Ok(row.is_some())
    }

    fn routing(&mut self, room: &str, principal: &str) -> Result<Option<Routing>, StoreError> {
        let row = self.io.wait(self.tx.query_opt(
            "SELECT routing FROM members WHERE room = $1 AND principal = $2",
            &[&room, &principal],
        ))?;
        Ok(match row {
            Some(row) => Some(Routing::parse(row.try_get(0)?).unwrap_or_default()),
            None => None,
        })
    }

    fn events(
        &mut self,
        stream: &StreamKey,
        seqs: SeqRange,
        order: EventOrder,
        limit: usize,
        visit: &mut dyn FnMut(EventRecord) -> bool,
    ) -> Result<(), StoreError> {
        let sql = match order {
            EventOrder::Ascending => format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE stream = $1 AND seq > $2 AND seq < $3 \
                 ORDER BY seq ASC LIMIT $4"
            ),
            EventOrder::Descending => format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE stream = $1 AND seq > $2 AND seq < $3 \
                 ORDER BY seq DESC LIMIT $4"
            ),
        };
        self.io.wait(each_row(
            &self.tx,
            &sql,
            &[
                &stream.storage_key().as_ref(),
                &signed(seqs.after),
                &signed(seqs.before),
                &signed(limit as u64),
            ],
            |row| Ok(visit(event_from(row)?)),
        ))
    }
}
