//! The readers: replay and history for connections, the directory and the audit log,
//! each on a pooled read-only connection that never waits for the writer.

use super::*;

/// Reads the whole audit log of the database at `path`, ascending, calling `visit` for each
/// entry (read-only: safe while the hub runs).
pub fn read_audit_log(
    path: &Path,
    mut visit: impl FnMut(AuditRecord) -> bool,
) -> Result<(), StoreError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut statement = conn.prepare(&format!("SELECT {AUDIT_COLUMNS} FROM audit ORDER BY n"))?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        if !visit(audit_from(row)?) {
            break;
        }
    }
    Ok(())
}

/// Read-only connections for replay and history; a connection per concurrent reader,
/// reused.
pub struct SqliteReader {
    pub(super) path: std::path::PathBuf,
    pub(super) pool: Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for SqliteReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteReader")
    }
}

impl SqliteReader {
    fn with_connection<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, ReadError>,
    ) -> Result<T, ReadError> {
        let pooled = self.pool.lock().expect("reader pool lock").pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => {
                let conn = Connection::open_with_flags(
                    &self.path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(StoreError::from)?;
                conn.execute_batch("PRAGMA busy_timeout = 10000; PRAGMA query_only = ON;")
                    .map_err(StoreError::from)?;
                conn
            }
        };
        let result = work(&mut conn);
        let mut pool = self.pool.lock().expect("reader pool lock");
        if pool.len() < 8 {
            pool.push(conn);
        }
        result
    }
}

impl ReadStore for SqliteReader {
    fn audit_head(&self) -> Result<Option<(u64, String)>, StoreError> {
        let head = self.with_connection(|conn| {
            let head = conn
                .prepare_cached("SELECT n, hash FROM audit ORDER BY n DESC LIMIT 1")
                .map_err(StoreError::from)?
                .query_row([], |row| {
                    Ok((row.get::<_, i64>(0)? as u64, row.get::<_, String>(1)?))
                })
                .optional()
                .map_err(StoreError::from)?;
            Ok(head.unwrap_or_else(|| (0, roundtable_engine::audit::GENESIS.to_owned())))
        });
        store_only(head, "audit").map(Some)
    }

    fn directory(
        &self,
        query: &DirectoryQuery,
    ) -> Result<Vec<roundtable_protocol::model::DirectoryEntry>, StoreError> {
        let result = self.with_connection(|conn| {
            let tx = conn.transaction().map_err(StoreError::from)?;
            let viewer_owner: Option<String> = tx
                .prepare_cached("SELECT coalesce(owner, id) FROM principals WHERE id = ?1")
                .and_then(|mut statement| {
                    statement
                        .query_row([&query.viewer], |row| row.get(0))
                        .optional()
                })
                .map_err(StoreError::from)?;
            let viewer_owner = match viewer_owner {
                Some(owner) => owner,
                // Anonymous: owns nothing and is no one's contact, so public ones only.
                None if query.viewer.is_empty() => String::new(),
                None => return Ok(Vec::new()),
            };
            let mut pending_out = std::collections::HashSet::new();
            let mut pending_in = std::collections::HashSet::new();
            {
                let mut statement = tx
                    .prepare_cached(
                        "SELECT sender, target FROM contact_requests WHERE state = 'pending' \
                         AND created_ms > ?2 AND (sender = ?1 OR target = ?1)",
                    )
                    .map_err(StoreError::from)?;
                let lifetime = roundtable_engine::records::REQUEST_LIFETIME_MS;
                let mut rows = statement
                    .query(params![query.viewer, query.now_ms - lifetime])
                    .map_err(StoreError::from)?;
                while let Some(row) = rows.next().map_err(StoreError::from)? {
                    let sender: String = row.get(0).map_err(StoreError::from)?;
                    let target: String = row.get(1).map_err(StoreError::from)?;
                    if sender == query.viewer {
                        pending_out.insert(target);
                    } else {
                        pending_in.insert(sender);
                    }
                }
            }
            let contact = "EXISTS (SELECT 1 FROM contacts WHERE (a = ?1 AND b = {x}) \
                           OR (a = {x} AND b = ?1))";
            let sql = format!(
                "SELECT id, kind, handle, name, owner, description, card, \
                 coalesce(owner, id) = ?2, {is_contact} \
                 FROM principals WHERE (id != ?1 OR ?3 IS NOT NULL) \
                 AND (?3 IS NULL OR handle = ?3) AND (NOT ?4 OR kind = 'agent') \
                 AND (coalesce(owner, id) = ?2 \
                 OR discoverable = 'public' OR (discoverable = 'contacts' AND ({is_contact} \
                 OR {owner_is_contact}))) ORDER BY handle",
                is_contact = contact.replace("{x}", "id"),
                owner_is_contact = contact.replace("{x}", "coalesce(owner, id)"),
            );
            let mut statement = tx.prepare_cached(&sql).map_err(StoreError::from)?;
            let mut rows = statement
                .query(params![
                    query.viewer,
                    viewer_owner,
                    query.handle,
                    query.agents_only
                ])
                .map_err(StoreError::from)?;
            let mut entries = Vec::new();
            while entries.len() < query.limit {
                let Some(row) = rows.next().map_err(StoreError::from)? else {
                    break;
                };
                let found = directory_found_from(row)?;
                entries.extend(found.entry(query, &pending_out, &pending_in));
            }
            Ok(entries)
        });
        store_only(result, "principals")
    }

    fn request_holding(
        &self,
        sender: &str,
        client_key: &str,
    ) -> Result<Option<RequestRecord>, StoreError> {
        let result = self.with_connection(|conn| {
            let sql = format!(
                "SELECT {REQUEST_COLUMNS} FROM contact_requests \
                 WHERE sender = ?1 AND held_key = ?2"
            );
            let mut statement = conn.prepare_cached(&sql).map_err(StoreError::from)?;
            let mut rows = statement
                .query(params![sender, client_key])
                .map_err(StoreError::from)?;
            match rows.next().map_err(StoreError::from)? {
                Some(row) => Ok(Some(request_from(row)?)),
                None => Ok(None),
            }
        });
        store_only(result, "contact_requests")
    }

    fn remote_calls_due(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<RemoteCallRecord>, StoreError> {
        let result = self.with_connection(|conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT room, seq, remote, created_ms, attempts, next_ms FROM remote_calls AS call
                     WHERE next_ms IS NOT NULL AND next_ms <= ?1
                       AND NOT EXISTS (SELECT 1 FROM remote_calls AS earlier
                           WHERE earlier.room = call.room AND earlier.remote = call.remote
                             AND earlier.seq < call.seq AND earlier.next_ms IS NOT NULL)
                     ORDER BY next_ms, created_ms, seq LIMIT ?2",
                )
                .map_err(StoreError::from)?;
            let rows = statement
                .query_map(params![now_ms, limit as i64], |row| {
                    Ok(RemoteCallRecord {
                        room: row.get(0)?,
                        seq: row.get::<_, i64>(1)? as u64,
                        remote: row.get(2)?,
                        created_ms: row.get(3)?,
                        attempts: row.get::<_, i64>(4)?.clamp(0, i64::from(u32::MAX)) as u32,
                        next_ms: row.get(5)?,
                    })
                })
                .map_err(StoreError::from)?;
            Ok(rows
                .collect::<Result<Vec<_>, _>>()
                .map_err(StoreError::from)?)
        });
        store_only(result, "remote_calls")
    }

    fn remote_credential(
        &self,
        principal: &str,
    ) -> Result<Option<roundtable_protocol::client::RemoteCredential>, StoreError> {
        let result = self.with_connection(|conn| {
            let row = conn
                .prepare_cached(
                    "SELECT scheme, header, value FROM remote_credentials WHERE principal = ?1",
                )
                .map_err(StoreError::from)?
                .query_row(params![principal], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, Option<String>>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })
                .optional()
                .map_err(StoreError::from)?;
            Ok(match row {
                None => None,
                Some((scheme, header, value)) => {
                    Some(roundtable_protocol::client::RemoteCredential {
                        scheme: credential_scheme_from(&scheme)?,
                        header,
                        value,
                    })
                }
            })
        });
        store_only(result, "remote_credentials")
    }

    fn device_read_markers(
        &self,
        principal: &str,
        device: &str,
    ) -> Result<Vec<(StreamKey, u64)>, StoreError> {
        let result = self.with_connection(|conn| {
            let mut statement = conn
                .prepare_cached("SELECT stream, seq FROM acks WHERE principal = ?1 AND device = ?2")
                .map_err(StoreError::from)?;
            let rows = statement
                .query_map(params![principal, device], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                })
                .map_err(StoreError::from)?;
            let mut markers = Vec::new();
            for row in rows {
                let (key, seq) = row.map_err(StoreError::from)?;
                markers.push((StreamKey::from_storage_key(&key), seq.max(0) as u64));
            }
            Ok(markers)
        });
        store_only(result, "acks")
    }

    fn remote_thread(
        &self,
        room: &str,
        remote: &str,
    ) -> Result<Option<RemoteThreadRecord>, StoreError> {
        let result = self.with_connection(|conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT context_id, task_id, ping, asker, mention FROM remote_threads
                     WHERE room = ?1 AND remote = ?2",
                )
                .map_err(StoreError::from)?
                .query_row(params![room, remote], |row| {
                    Ok(RemoteThreadRecord {
                        room: room.to_owned(),
                        remote: remote.to_owned(),
                        context_id: row.get(0)?,
                        task_id: row.get(1)?,
                        ping: row.get(2)?,
                        asker: row.get(3)?,
                        mention: row.get(4)?,
                    })
                })
                .optional()
                .map_err(StoreError::from)?)
        });
        store_only(result, "remote_threads")
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
        let result = self.with_connection(|conn| {
            let sql = format!(
                "SELECT {EVENT_COLUMNS} FROM events INDEXED BY events_a2a_keys \
                 WHERE sender = ?1 AND substr(client_key, 1, 4) = 'a2a:' \
                 AND client_key >= ?2 AND client_key < ?3 \
                 AND (?6 OR ts_ms < ?4 OR (ts_ms = ?4 AND id < ?5)) \
                 ORDER BY ts_ms DESC, id DESC LIMIT ?7"
            );
            let mut statement = conn.prepare_cached(&sql).map_err(StoreError::from)?;
            let rows = statement
                .query(params![
                    sender,
                    prefix,
                    crate::store::key_prefix_bound(prefix),
                    before_ms,
                    before_id,
                    unbounded,
                    signed(limit as u64)
                ])
                .map_err(StoreError::from)?;
            Ok(decode_all(rows, event_from)?)
        });
        store_only(result, "events")
    }

    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, ReadError> {
        self.with_connection(|conn| {
            let tx = conn.transaction().map_err(StoreError::from)?;
            let visible: Vec<String> = tx
                .prepare_cached("SELECT id FROM principals WHERE id = ?1 OR owner = ?1")
                .and_then(|mut statement| {
                    statement
                        .query_map([&query.viewer], |row| row.get(0))?
                        .collect()
                })
                .map_err(StoreError::from)?;
            let principals: Vec<String> = match &query.principal {
                Some(principal) if visible.contains(principal) => vec![principal.clone()],
                Some(_) => return Err(ReadError::NotFound),
                None => visible,
            };
            let placeholders = vec!["?"; principals.len()].join(", ");
            let sql = format!(
                "SELECT {AUDIT_COLUMNS} FROM audit WHERE principal IN ({placeholders}) AND ts_ms >= ? ORDER BY n LIMIT ?"
            );
            let mut statement = tx.prepare(&sql).map_err(StoreError::from)?;
            let mut values: Vec<rusqlite::types::Value> = principals
                .into_iter()
                .map(rusqlite::types::Value::Text)
                .collect();
            values.push(rusqlite::types::Value::Integer(query.since_ms.unwrap_or(i64::MIN)));
            values.push(rusqlite::types::Value::Integer(i64::from(query.limit)));
            let rows = statement
                .query(rusqlite::params_from_iter(values))
                .map_err(StoreError::from)?;
            Ok(decode_all(rows, audit_from)?)
        })
    }

    fn read(&self, read: &mut SnapshotRead<'_>) -> Result<(), ReadError> {
        self.with_connection(|conn| {
            let tx = conn.transaction().map_err(StoreError::from)?;
            read(&mut SqliteReadTx(&tx))
        })
    }
}

/// A snapshot: one read transaction on a reader's connection.
struct SqliteReadTx<'a, 'c>(&'a rusqlite::Transaction<'c>);

impl ReadTx for SqliteReadTx<'_, '_> {
    fn memberships(&mut self, principal: &str) -> Result<Vec<Membership>, StoreError> {
        let mut statement = self.0.prepare_cached(
            "SELECT m.room, m.routing, \
             (SELECT coalesce(max(e.seq), 0) FROM events e WHERE e.stream = m.room) \
             FROM members m WHERE m.principal = ?1",
        )?;
        let rows = statement.query_map([principal], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })?;
        let mut memberships = Vec::new();
        for row in rows {
            let (room, routing, head) = row?;
            memberships.push(Membership {
                room,
                routing: Routing::parse(&routing).unwrap_or_default(),
                head: head.max(0) as u64,
            });
        }
        Ok(memberships)
    }

    fn head(&mut self, stream: &StreamKey) -> Result<u64, StoreError> {
        let seq: Option<i64> = self
            .0
            .prepare_cached("SELECT max(seq) FROM events WHERE stream = ?1")?
            .query_row([stream.storage_key()], |row| row.get(0))?;
        Ok(seq.unwrap_or(0).max(0) as u64)
    }

    fn read_markers(&mut self, principal: &str) -> Result<Vec<(StreamKey, u64)>, StoreError> {
        let mut statement = self.0.prepare_cached(
            "SELECT stream, max(seq) FROM acks WHERE principal = ?1 GROUP BY stream",
        )?;
        let rows = statement.query_map([principal], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })?;
        let mut markers = Vec::new();
        for row in rows {
            let (key, seq) = row?;
            markers.push((StreamKey::from_storage_key(&key), seq.max(0) as u64));
        }
        Ok(markers)
    }

    fn room_exists(&mut self, room: &str) -> Result<bool, StoreError> {
        Ok(self
            .0
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM rooms WHERE id = ?1)")?
            .query_row([room], |row| row.get(0))?)
    }

    fn routing(&mut self, room: &str, principal: &str) -> Result<Option<Routing>, StoreError> {
        let routing: Option<String> = self
            .0
            .prepare_cached("SELECT routing FROM members WHERE room = ?1 AND principal = ?2")?
            .query_row([room, principal], |row| row.get(0))
            .optional()?;
        Ok(routing.map(|routing| Routing::parse(&routing).unwrap_or_default()))
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
                "SELECT {EVENT_COLUMNS} FROM events WHERE stream = ?1 AND seq > ?2 AND seq < ?3 \
                 ORDER BY seq ASC LIMIT ?4"
            ),
            EventOrder::Descending => format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE stream = ?1 AND seq > ?2 AND seq < ?3 \
                 ORDER BY seq DESC LIMIT ?4"
            ),
        };
        let mut statement = self.0.prepare_cached(&sql)?;
        let mut rows = statement.query(params![
            stream.storage_key(),
            signed(seqs.after),
            signed(seqs.before),
            signed(limit as u64)
        ])?;
        while let Some(row) = rows.next()? {
            if !visit(event_from(row)?) {
                break;
            }
        }
        Ok(())
    }
}
