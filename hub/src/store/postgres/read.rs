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
    AuditQuery, DirectoryFound, DirectoryQuery, HistoryPage, HistoryRange, ReadError, ReadStore,
    ReplayPage, ReplayPosition, StreamPlan, SyncPlan,
};
use crate::visibility;

/// Rows one replay page reads at most: bounds its time for an agent that sees few of a
/// room's events, as `max_bytes` bounds its memory.
const REPLAY_PAGE_ROWS: usize = 4096;

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
                if !visit(audit_from_row(row)?) {
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

/// A read that may be refused for a reason other than the store.
fn store_only<T>(result: Result<T, ReadError>, table: &'static str) -> Result<T, StoreError> {
    result.map_err(|error| match error {
        ReadError::Store(error) => error,
        other => StoreError::Corrupt {
            table,
            detail: other.to_string(),
        },
    })
}

impl PostgresReader {
    /// Runs `work` in a read-only transaction that sees one snapshot of the database.
    fn read<T>(
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

async fn head_of(tx: &Transaction<'_>, stream: &StreamKey) -> Result<u64, StoreError> {
    let statement = tx
        .prepare_cached("SELECT head FROM stream_heads WHERE stream = $1")
        .await?;
    let head = tx
        .query_opt(&statement, &[&stream.storage_key().as_ref()])
        .await?;
    Ok(match head {
        Some(row) => seq_from(row.try_get(0)?),
        None => 0,
    })
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
            tx.execute(&statement, &[&node, &seq_to(dispatched), &now_ms])
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn committed_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<crate::records::Committed>, StoreError> {
        self.io.wait(async {
            let client = self.pool.get().await?;
            let statement = client
                .prepare_cached(
                    "SELECT n, node, batch FROM shared_batches WHERE n > $1 ORDER BY n LIMIT $2",
                )
                .await?;
            let rows = client
                .query(&statement, &[&seq_to(after), &(limit as i64)])
                .await?;
            super::write::committed_from_rows(&rows)
        })
    }

    fn audit_head(&self) -> Result<Option<(u64, String)>, StoreError> {
        let head = self.read(async |tx| {
            let row = tx
                .query_opt("SELECT n, hash FROM audit ORDER BY n DESC LIMIT 1", &[])
                .await
                .map_err(StoreError::from)?;
            Ok(match row {
                Some(row) => (
                    seq_from(row.try_get(0).map_err(StoreError::from)?),
                    row.try_get(1).map_err(StoreError::from)?,
                ),
                None => (0, crate::audit::GENESIS.to_owned()),
            })
        });
        store_only(head, "audit").map(Some)
    }

    fn directory(&self, query: &DirectoryQuery) -> Result<Vec<DirectoryEntry>, StoreError> {
        let entries = self.read(async |tx| {
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
            let lifetime = crate::records::REQUEST_LIFETIME_MS;
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
                    let found = DirectoryFound {
                        id: row.try_get(0)?,
                        kind: kind_from(row.try_get(1)?)?,
                        handle: row.try_get(2)?,
                        name: row.try_get(3)?,
                        owner: row.try_get(4)?,
                        description: row.try_get(5)?,
                        card: row.try_get(6)?,
                        kin: row.try_get(7)?,
                        is_contact: row.try_get(8)?,
                    };
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
        let found = self.read(async |tx| {
            let sql = format!(
                "SELECT {REQUEST_COLUMNS} FROM contact_requests \
                 WHERE sender = $1 AND held_key = $2"
            );
            let row = tx
                .query_opt(&sql, &[&sender, &client_key])
                .await
                .map_err(StoreError::from)?;
            Ok(match row {
                Some(row) => Some(request_from_row(&row)?),
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
        let found = self.read(async |tx| {
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
                    seq: seq_from(row.try_get(1)?),
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
        let found = self.read(async |tx| {
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
        let found = self.read(async |tx| {
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
                markers.push((StreamKey::from_storage_key(key), seq_from(seq)));
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
        let found = self.read(async |tx| {
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
        let events = self.read(async |tx| {
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
                    events.push(event_from_row(row)?);
                    Ok(true)
                },
            )
            .await?;
            Ok(events)
        });
        store_only(events, "events")
    }

    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, ReadError> {
        self.read(async |tx| {
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
            Ok(rows.iter().map(audit_from_row).collect::<Result<_, _>>()?)
        })
    }

    fn sync_plan(
        &self,
        principal: &str,
        cursors: &dyn Fn(&StreamKey) -> u64,
        replay_max: u64,
    ) -> Result<SyncPlan, StoreError> {
        let plan = self.read(async |tx| {
            let rooms = tx
                .query(
                    "SELECT m.room, m.routing, coalesce(h.head, 0) FROM members m
                     LEFT JOIN stream_heads h ON h.stream = m.room WHERE m.principal = $1",
                    &[&principal],
                )
                .await
                .map_err(StoreError::from)?;
            let mut plan = SyncPlan::default();
            let mut streams = Vec::with_capacity(rooms.len() + 1);
            for row in &rooms {
                let room: String = row.try_get(0).map_err(StoreError::from)?;
                let routing: &str = row.try_get(1).map_err(StoreError::from)?;
                let head: i64 = row.try_get(2).map_err(StoreError::from)?;
                streams.push((
                    StreamKey::Room(room),
                    Routing::parse(routing).unwrap_or_default(),
                    seq_from(head),
                ));
            }
            let inbox = StreamKey::Inbox(principal.to_owned());
            let inbox_head = head_of(tx, &inbox).await?;
            streams.push((inbox, Routing::All, inbox_head));
            for (stream, routing, head) in streams {
                let mut after = cursors(&stream).min(head);
                let mut gap = None;
                if matches!(stream, StreamKey::Room(_)) && head - after > replay_max {
                    let start = head - replay_max;
                    gap = Some((after + 1, start));
                    after = start;
                }
                plan.streams.push(StreamPlan {
                    stream,
                    routing,
                    head,
                    gap,
                    after,
                });
            }
            for row in tx
                .query(
                    "SELECT stream, max(seq) FROM acks WHERE principal = $1 GROUP BY stream",
                    &[&principal],
                )
                .await
                .map_err(StoreError::from)?
            {
                let key: &str = row.try_get(0).map_err(StoreError::from)?;
                let seq: i64 = row.try_get(1).map_err(StoreError::from)?;
                let stream = StreamKey::from_storage_key(key);
                if plan.streams.iter().any(|planned| planned.stream == stream) {
                    plan.read_markers.push((stream, seq_from(seq)));
                }
            }
            Ok(plan)
        });
        store_only(plan, "members")
    }

    fn replay_page(
        &self,
        principal: &str,
        is_agent: bool,
        plan: &[StreamPlan],
        from: ReplayPosition,
        max_bytes: usize,
    ) -> Result<ReplayPage, StoreError> {
        let page = self.read(async |tx| {
            let mut page = ReplayPage::default();
            let mut bytes = 0;
            let mut rows_read = 0;
            let mut position = from;
            while let Some(planned) = plan.get(position.stream) {
                if position.after >= planned.head {
                    position.stream += 1;
                    if let Some(next) = plan.get(position.stream) {
                        position.after = next.after;
                    }
                    continue;
                }
                if bytes >= max_bytes || rows_read >= REPLAY_PAGE_ROWS {
                    page.next = Some(position);
                    return Ok(page);
                }
                let mut exhausted = true;
                let stream_index = position.stream;
                let mut last = position.after;
                each_row(
                    tx,
                    &format!(
                        "SELECT {EVENT_COLUMNS} FROM events WHERE stream = $1 AND seq > $2 \
                         AND seq <= $3 ORDER BY seq LIMIT $4"
                    ),
                    &[
                        &planned.stream.storage_key().as_ref(),
                        &seq_to(position.after),
                        &seq_to(planned.head),
                        &((REPLAY_PAGE_ROWS - rows_read) as i64),
                    ],
                    |row| {
                        let event = event_from_row(row)?;
                        rows_read += 1;
                        last = event.seq;
                        if !is_agent || visibility::agent_sees(&event, principal, planned.routing) {
                            bytes += event.body.len();
                            page.events.push((stream_index, event));
                        }
                        if bytes >= max_bytes || rows_read >= REPLAY_PAGE_ROWS {
                            exhausted = false;
                            return Ok(false);
                        }
                        Ok(true)
                    },
                )
                .await?;
                // Fewer rows than asked: nothing more up to the head.
                position.after = if exhausted { planned.head } else { last };
            }
            Ok(page)
        });
        store_only(page, "events")
    }

    fn history(
        &self,
        principal: &str,
        is_agent: bool,
        room: &str,
        range: HistoryRange,
    ) -> Result<HistoryPage, ReadError> {
        self.read(async |tx| {
            let exists = tx
                .query_opt("SELECT 1 FROM rooms WHERE id = $1", &[&room])
                .await
                .map_err(StoreError::from)?
                .is_some();
            if !exists {
                return Err(ReadError::NotFound);
            }
            let routing = tx
                .query_opt(
                    "SELECT routing FROM members WHERE room = $1 AND principal = $2",
                    &[&room, &principal],
                )
                .await
                .map_err(StoreError::from)?;
            let Some(routing) = routing else {
                return Err(ReadError::NotMember);
            };
            let routing: &str = routing.try_get(0).map_err(StoreError::from)?;
            let routing = Routing::parse(routing).unwrap_or_default();
            let limit = range.limit as usize;
            let before = seq_to(range.before.unwrap_or(u64::MAX));
            let (sql, after, ascending) = match range.after {
                Some(after) => (
                    format!(
                        "SELECT {EVENT_COLUMNS} FROM events WHERE stream = $1 AND seq > $2 \
                         AND seq < $3 ORDER BY seq ASC"
                    ),
                    seq_to(after),
                    true,
                ),
                None => (
                    format!(
                        "SELECT {EVENT_COLUMNS} FROM events WHERE stream = $1 AND seq > $2 \
                         AND seq < $3 ORDER BY seq DESC"
                    ),
                    0,
                    false,
                ),
            };
            let mut page = HistoryPage::default();
            let mut bytes = 0;
            each_row(tx, &sql, &[&room, &after, &before], |row| {
                if page.events.len() >= limit {
                    return Ok(false);
                }
                let event = event_from_row(row)?;
                if !is_agent || visibility::agent_sees(&event, principal, routing) {
                    if !page.events.is_empty() && bytes + event.body.len() > range.max_bytes {
                        page.more = true;
                        return Ok(false);
                    }
                    bytes += event.body.len();
                    page.events.push(event);
                }
                Ok(true)
            })
            .await?;
            if !ascending {
                page.events.reverse();
            }
            Ok(page)
        })
    }
}
