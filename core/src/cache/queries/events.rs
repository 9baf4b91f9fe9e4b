//! The raw event log, by stream: counts, events and their times.

use super::*;

impl CacheView {
    /// How many events the cache holds, every stream included.
    pub fn event_count(&self) -> Result<usize, CacheError> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM events", [], |row| {
                row.get::<_, i64>(0)
            })? as usize)
    }

    /// Every event of a stream, ascending (for checks and exports): seq, id, kind.
    pub fn stream_events(&self, stream: &str) -> Result<Vec<(u64, String, String)>, CacheError> {
        let mut statement = self
            .conn
            .prepare("SELECT seq, id, kind FROM events WHERE stream = ?1 ORDER BY seq")?;
        let events = statement
            .query_map([stream], |row| {
                Ok((row.get::<_, i64>(0)? as u64, row.get(1)?, row.get(2)?))
            })?
            .collect::<Result<_, _>>()?;
        Ok(events)
    }

    /// When the event `seq` of `stream` was stored, if the cache has it.
    pub fn event_time(&self, stream: &str, seq: u64) -> Result<Option<i64>, CacheError> {
        Ok(self
            .conn
            .prepare_cached("SELECT ts_ms FROM events WHERE stream = ?1 AND seq = ?2")?
            .query_row(params![stream, seq as i64], |row| row.get(0))
            .optional()?)
    }

    /// Inbox events of `kind` after `after`, ascending: seq and body.
    pub fn inbox_events(
        &self,
        kind: &str,
        after: u64,
    ) -> Result<Vec<(u64, serde_json::Value)>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT seq, body FROM events WHERE stream = 'inbox' AND kind = ?1 AND seq > ?2
             ORDER BY seq",
        )?;
        let events = statement
            .query_map(params![kind, after as i64], |row| {
                let body: String = row.get(1)?;
                Ok((
                    row.get::<_, i64>(0)? as u64,
                    serde_json::from_str(&body).unwrap_or_default(),
                ))
            })?
            .collect::<Result<_, _>>()?;
        Ok(events)
    }
}
