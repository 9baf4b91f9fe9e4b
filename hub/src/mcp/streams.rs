//! What `/mcp` keeps of its clients so that a hub restart, or a dropped connection, costs
//! them nothing: each MCP session (2025-11-25) with its opener and its `initialize`
//! parameters (rmcp's `SessionStore`: a known session is restored, not refused), and the
//! SSE events of its streams (rmcp's `EventStore`: `Last-Event-ID` replays what followed).
//!
//! Why a file of its own (`mcp.sqlite` in the hub's data directory) and not the hub's
//! store: this is transport state of one hub process, as its connections are, written at
//! the pace of SSE events; the rooms' state stays the writer's alone. An MCP client's
//! cursors (what it has read) are in the hub's store, through `ack`, so nothing it has not
//! read is lost even when this file is.
//!
//! Event ids are `<n>-<secret>`, and an event is bound to the principal the gate passed its
//! id to: a replay starts only from an event of the caller's own, and gives what followed on
//! that event's stream (a stream is one request's or one session's, so one principal's).

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::common::server_side_http::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::store::{
    EventId, EventStore, EventStoreError, EventStream, SessionState, SessionStore,
    SessionStoreError,
};
use rusqlite::{Connection, OptionalExtension, params};

/// The migrations of `mcp.sqlite`.
const MIGRATIONS: &[roundtable_sqlite::Migration] =
    &[(1, "mcp", include_str!("migrations/0001_mcp.sql"))];

/// How long an SSE event can be replayed.
const EVENTS_KEPT: Duration = Duration::from_secs(15 * 60);

/// The most events one replay gives back.
const REPLAY_MAX: i64 = 1000;

/// Events stored between two prunings of old ones.
const PRUNE_EVERY: u64 = 256;

/// The largest event kept for replay; a larger one is sent but not kept (its id replays
/// what follows it).
const EVENT_KEPT_MAX: usize = 256 * 1024;

/// How long an unused session is kept.
pub const SESSION_IDLE: Duration = Duration::from_secs(24 * 3600);

/// Sessions one principal may have open (used within [`SESSION_IDLE`]).
pub const SESSIONS_PER_PRINCIPAL: u64 = 100;

tokio::task_local! {
    /// The principal of the request being served (set by the gate).
    pub(crate) static CALLER: Arc<str>;
}

fn caller() -> Option<Arc<str>> {
    CALLER.try_with(Arc::clone).ok()
}

#[derive(Debug, thiserror::Error)]
pub enum StreamsError {
    #[error("the MCP session file: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the MCP session file: {0}")]
    Migration(#[from] roundtable_sqlite::MigrationError),
    #[error("the MCP session file: {0}")]
    Io(#[from] std::io::Error),
    #[error("an MCP event could not be kept: {0}")]
    Json(#[from] serde_json::Error),
}

/// The sessions and events of `/mcp`, in `mcp.sqlite`.
#[derive(Clone)]
pub struct McpStreams {
    db: Arc<Mutex<Connection>>,
    stored: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for McpStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpStreams").finish_non_exhaustive()
    }
}

impl McpStreams {
    /// Opens (or creates, readable by the hub's user only) `mcp.sqlite` in `data_dir`.
    pub fn open(data_dir: &Path, now_ms: i64) -> Result<McpStreams, StreamsError> {
        std::fs::create_dir_all(data_dir)?;
        let path = data_dir.join("mcp.sqlite");
        let mut conn = Connection::open(&path)?;
        roundtable_platform::private::restrict(&path)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")?;
        roundtable_sqlite::migrate(&mut conn, MIGRATIONS, now_ms)?;
        Ok(McpStreams {
            db: Arc::new(Mutex::new(conn)),
            stored: Default::default(),
        })
    }

    /// Runs `work` on the connection, off the async threads.
    async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, StreamsError> + Send + 'static,
    ) -> Result<T, StreamsError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = db.lock().unwrap_or_else(PoisonError::into_inner);
            work(&mut conn)
        })
        .await
        .map_err(|error| StreamsError::Io(std::io::Error::other(error)))?
    }

    /// The principal that opened `session`, if the hub knows the session; the session is
    /// used now.
    pub async fn owner(&self, session: &str, now_ms: i64) -> Result<Option<String>, StreamsError> {
        let session = session.to_owned();
        self.with(move |conn| {
            Ok(conn
                .prepare_cached(
                    "UPDATE sessions SET last_used_ms = ?2 WHERE id = ?1 RETURNING principal",
                )?
                .query_row(params![session, now_ms], |row| row.get(0))
                .optional()?)
        })
        .await
    }

    /// How many sessions `principal` has used lately (see [`SESSION_IDLE`]).
    pub async fn open_sessions(&self, principal: &str, now_ms: i64) -> Result<u64, StreamsError> {
        let principal = principal.to_owned();
        self.with(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT count(*) FROM sessions WHERE principal = ?1 AND last_used_ms > ?2",
                )?
                .query_row(
                    params![principal, now_ms - SESSION_IDLE.as_millis() as i64],
                    |row| row.get::<_, i64>(0),
                )? as u64)
        })
        .await
    }

    /// Binds the events whose ids the gate passed to `principal`.
    pub async fn bind_events(&self, ids: Vec<String>, principal: &str) -> Result<(), StreamsError> {
        let principal = principal.to_owned();
        self.with(move |conn| {
            let tx = conn.transaction()?;
            for id in &ids {
                if let Some((n, secret)) = parse_event_id(id) {
                    tx.prepare_cached(
                        "UPDATE events SET principal = ?1
                         WHERE n = ?2 AND secret = ?3 AND principal = ''",
                    )?
                    .execute(params![principal, n, secret])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// The key that seals questions' states, made once and kept.
    pub fn state_key(&self) -> Result<Vec<u8>, StreamsError> {
        let conn = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        conn.prepare_cached(
            "INSERT INTO keys (name, value) VALUES ('request_state', ?1)
                             ON CONFLICT (name) DO NOTHING",
        )?
        .execute([rand::random::<[u8; 64]>().to_vec()])?;
        Ok(conn
            .prepare_cached("SELECT value FROM keys WHERE name = 'request_state'")?
            .query_row([], |row| row.get(0))?)
    }

    /// Records that `principal` opened `session`, and forgets sessions unused for
    /// [`SESSION_IDLE`].
    pub async fn opened(
        &self,
        session: &str,
        principal: &str,
        now_ms: i64,
    ) -> Result<(), StreamsError> {
        let (session, principal) = (session.to_owned(), principal.to_owned());
        self.with(move |conn| {
            conn.prepare_cached("DELETE FROM sessions WHERE last_used_ms < ?1")?
                .execute([now_ms - SESSION_IDLE.as_millis() as i64])?;
            conn.prepare_cached(
                "INSERT INTO sessions (id, principal, created_ms, last_used_ms)
                 VALUES (?1, ?2, ?3, ?3)
                 ON CONFLICT (id) DO UPDATE SET principal = excluded.principal
                 WHERE sessions.principal = ''",
            )?
            .execute(params![session, principal, now_ms])?;
            Ok(())
        })
        .await
    }

    /// Forgets `session`.
    pub async fn ended(&self, session: &str) -> Result<(), StreamsError> {
        let session = session.to_owned();
        self.with(move |conn| {
            conn.prepare_cached("DELETE FROM sessions WHERE id = ?1")?
                .execute([session])?;
            Ok(())
        })
        .await
    }
}

/// `(n, secret)` of an event id `<n>-<secret>`.
fn parse_event_id(id: &str) -> Option<(i64, &str)> {
    let (n, secret) = id.split_once('-')?;
    Some((n.parse().ok()?, secret))
}

fn now_ms() -> i64 {
    crate::unix_ms()
}

#[async_trait::async_trait]
impl SessionStore for McpStreams {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let session = session_id.to_owned();
        let state: Option<Option<String>> = self
            .with(move |conn| {
                Ok(conn
                    .prepare_cached("SELECT state FROM sessions WHERE id = ?1")?
                    .query_row([session], |row| row.get(0))
                    .optional()?)
            })
            .await?;
        Ok(match state.flatten() {
            Some(state) => Some(serde_json::from_str(&state)?),
            None => None,
        })
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let (session, state) = (session_id.to_owned(), serde_json::to_string(state)?);
        // The gate records the opener when the session's id reaches it; the state may come
        // first.
        let principal = caller()
            .map(|caller| caller.to_string())
            .unwrap_or_default();
        self.with(move |conn| {
            conn.prepare_cached(
                "INSERT INTO sessions (id, principal, state, created_ms, last_used_ms)
                 VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state,
                     principal = CASE WHEN sessions.principal = '' THEN excluded.principal
                                      ELSE sessions.principal END",
            )?
            .execute(params![session, principal, state, now_ms()])?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        Ok(self.ended(session_id).await?)
    }
}

#[async_trait::async_trait]
impl EventStore for McpStreams {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        let payload = match &event.message {
            Some(message) => serde_json::to_string(message.as_ref())?,
            None => "null".to_owned(),
        };
        let payload = if payload.len() > EVENT_KEPT_MAX {
            "null".to_owned()
        } else {
            payload
        };
        let stream = stream_id.to_owned();
        // Bound later, by the gate, to the principal it passes the id to.
        let principal = String::new();
        let secret = format!("{:016x}", rand::random::<u64>());
        let prune = self
            .stored
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .is_multiple_of(PRUNE_EVERY);
        let id = self
            .with(move |conn| {
                let now = now_ms();
                if prune {
                    conn.prepare_cached("DELETE FROM events WHERE created_ms < ?1")?
                        .execute([now - EVENTS_KEPT.as_millis() as i64])?;
                }
                let n: i64 = conn
                    .prepare_cached(
                        "INSERT INTO events (stream, principal, secret, payload, created_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5) RETURNING n",
                    )?
                    .query_row(params![stream, principal, secret, payload, now], |row| {
                        row.get(0)
                    })?;
                Ok(format!("{n}-{secret}"))
            })
            .await?;
        Ok(id)
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        // An id that is not one of the caller's own events replays nothing (rather than an
        // error, which rmcp would answer with a 500).
        let Some((n, secret)) = parse_event_id(last_event_id) else {
            return Ok(Box::pin(futures_util::stream::empty()));
        };
        let secret = secret.to_owned();
        let Some(caller) = caller() else {
            return Ok(Box::pin(futures_util::stream::empty()));
        };
        let events = self
            .with(move |conn| {
                let found: Option<String> = conn
                    .prepare_cached(
                        "SELECT stream FROM events WHERE n = ?1 AND secret = ?2 AND principal = ?3",
                    )?
                    .query_row(params![n, secret, caller.as_ref()], |row| row.get(0))
                    .optional()?;
                let Some(stream) = found else {
                    return Ok(Vec::new());
                };
                let mut statement = conn.prepare_cached(
                    "SELECT n, secret, payload FROM events WHERE stream = ?1 AND n > ?2
                     ORDER BY n LIMIT ?3",
                )?;
                let rows = statement.query_map(params![stream, n, REPLAY_MAX], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })?;
                let mut events = Vec::new();
                for row in rows {
                    let (n, secret, payload) = row?;
                    if payload == "null" {
                        continue;
                    }
                    let message: ServerJsonRpcMessage = serde_json::from_str(&payload)?;
                    events.push(ServerSseMessage::new(format!("{n}-{secret}"), message));
                }
                Ok(events)
            })
            .await?;
        Ok(Box::pin(futures_util::stream::iter(events)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt as _;

    fn message(n: u64) -> ServerSseMessage {
        let json = serde_json::json!({"jsonrpc": "2.0", "id": n, "result": {"n": n}});
        ServerSseMessage::from_message(serde_json::from_value(json).unwrap())
    }

    async fn replayed(streams: &McpStreams, caller: &str, after: &str) -> Vec<serde_json::Value> {
        CALLER
            .scope(Arc::from(caller), streams.replay_events_after(after))
            .await
            .unwrap()
            .map(|event| {
                serde_json::to_value(event.message.as_deref().unwrap()).unwrap()["id"].clone()
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn events_replay_to_the_principal_they_were_passed_to_on_their_own_stream_only() {
        let dir = tempfile::tempdir().unwrap();
        let streams = McpStreams::open(dir.path(), 0).unwrap();
        let first = streams.store_event("a", &message(1)).await.unwrap();
        for n in 2..=3 {
            streams.store_event("a", &message(n)).await.unwrap();
            streams.store_event("b", &message(10 + n)).await.unwrap();
        }
        // Not passed to anyone yet: nobody replays from it.
        assert!(replayed(&streams, "p_dana", &first).await.is_empty());
        streams
            .bind_events(vec![first.clone()], "p_dana")
            .await
            .unwrap();
        // Bound once: another principal cannot take it over.
        streams
            .bind_events(vec![first.clone()], "p_erin")
            .await
            .unwrap();
        drop(streams);
        let streams = McpStreams::open(dir.path(), 0).unwrap();
        assert_eq!(
            replayed(&streams, "p_dana", &first).await,
            [2, 3],
            "stream a after the first, not stream b, across reopening"
        );
        // Another principal, a forged secret, garbage, no caller: nothing.
        assert!(replayed(&streams, "p_erin", &first).await.is_empty());
        let (n, _) = first.split_once('-').unwrap();
        let forged = format!("{n}-0000000000000000");
        assert!(replayed(&streams, "p_dana", &forged).await.is_empty());
        assert!(replayed(&streams, "p_dana", "garbage").await.is_empty());
        let anonymous: Vec<ServerSseMessage> = streams
            .replay_events_after(&first)
            .await
            .unwrap()
            .collect()
            .await;
        assert!(anonymous.is_empty());
    }

    #[tokio::test]
    async fn an_event_too_large_to_keep_is_sent_but_not_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let streams = McpStreams::open(dir.path(), 0).unwrap();
        let first = streams.store_event("a", &message(1)).await.unwrap();
        let huge = serde_json::json!({"jsonrpc": "2.0", "id": 2,
                                      "result": {"text": "x".repeat(EVENT_KEPT_MAX)}});
        streams
            .store_event(
                "a",
                &ServerSseMessage::from_message(serde_json::from_value(huge).unwrap()),
            )
            .await
            .unwrap();
        streams.store_event("a", &message(3)).await.unwrap();
        streams
            .bind_events(vec![first.clone()], "p_dana")
            .await
            .unwrap();
        assert_eq!(replayed(&streams, "p_dana", &first).await, [3]);
    }

    #[tokio::test]
    async fn a_session_keeps_its_opener_and_state_across_reopening_until_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let streams = McpStreams::open(dir.path(), 0).unwrap();
        let params: rmcp::model::InitializeRequestParams =
            serde_json::from_value(serde_json::json!({
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}))
            .unwrap();
        streams
            .store("s1", &SessionState::new(params))
            .await
            .unwrap();
        streams.opened("s1", "p_dana", 5).await.unwrap();
        drop(streams);
        let streams = McpStreams::open(dir.path(), 0).unwrap();
        assert_eq!(
            streams.owner("s1", 6).await.unwrap().as_deref(),
            Some("p_dana")
        );
        assert!(streams.load("s1").await.unwrap().is_some());
        assert_eq!(streams.open_sessions("p_dana", 7).await.unwrap(), 1);
        assert_eq!(streams.open_sessions("p_erin", 7).await.unwrap(), 0);
        streams.delete("s1").await.unwrap();
        assert_eq!(streams.owner("s1", 8).await.unwrap(), None);
        assert!(streams.load("s1").await.unwrap().is_none());
        // Sessions unused for a day are forgotten when another opens.
        streams.opened("old", "p_dana", 10).await.unwrap();
        let later = 10 + SESSION_IDLE.as_millis() as i64 + 1;
        streams.opened("new", "p_dana", later).await.unwrap();
        assert_eq!(streams.owner("old", later).await.unwrap(), None);
        assert_eq!(streams.open_sessions("p_dana", later).await.unwrap(), 1);
        // The key that seals states is made once.
        let key = streams.state_key().unwrap();
        assert_eq!(key.len(), 64);
        drop(streams);
        let streams = McpStreams::open(dir.path(), 0).unwrap();
        assert_eq!(streams.state_key().unwrap(), key);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join("mcp.sqlite"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
