//! Pings and their answers, one's agents and their statuses, contacts, requests and
//! controls.

use super::*;

impl CacheView {
    /// Pings, open ones first, each with its state at `now_ms`.
    pub fn pings(&self, now_ms: i64) -> Result<Vec<PingView>, CacheError> {
        self.pings_where(None, false, now_ms)
    }

    /// Open pings that `me` may answer at `now_ms`: addressed to it, or to nobody in
    /// particular when `me_is_user` (any user member may answer those).
    pub fn open_pings_for(
        &self,
        me: &str,
        me_is_user: bool,
        now_ms: i64,
    ) -> Result<Vec<PingView>, CacheError> {
        let mut pings = self.pings_where(None, true, now_ms)?;
        pings.retain(|ping| {
            ping.state == PingState::Open
                && if ping.recipients.is_empty() {
                    me_is_user && ping.asker != me
                } else {
                    ping.recipients.iter().any(|recipient| recipient == me)
                }
        });
        Ok(pings)
    }

    /// One ping.
    pub fn ping(
        &self,
        room: &str,
        ping: &str,
        now_ms: i64,
    ) -> Result<Option<PingView>, CacheError> {
        Ok(self.pings_where(Some((room, ping)), false, now_ms)?.pop())
    }

    /// Pings (only `one` when given; only unanswered ones when `unanswered`).
    fn pings_where(
        &self,
        one: Option<(&str, &str)>,
        unanswered: bool,
        now_ms: i64,
    ) -> Result<Vec<PingView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT g.room, g.ping, g.seq, g.asker, pa.handle, g.question, g.options, g.recipients,
                    asked.ts_ms, g.expires_ms, g.answered_by, pb.handle, answered.ts_ms, g.choice,
                    g.answer_text
             FROM pings g
             LEFT JOIN principals pa ON pa.id = g.asker
             LEFT JOIN principals pb ON pb.id = g.answered_by
             LEFT JOIN events asked ON asked.stream = g.room AND asked.seq = g.seq
             LEFT JOIN events answered ON answered.stream = g.room AND answered.seq = g.answer_seq
             WHERE g.seq > 0 AND (?1 IS NULL OR (g.room = ?1 AND g.ping = ?2))
               AND (NOT ?3 OR g.answer_seq IS NULL)
             ORDER BY g.answered_by IS NOT NULL, g.seq",
        )?;
        let map = |row: &rusqlite::Row<'_>| {
            let expires_ms: Option<i64> = row.get(9)?;
            let answered_by: Option<String> = row.get(10)?;
            let state = if answered_by.is_some() {
                PingState::Answered
            } else if expires_ms.is_some_and(|expires| expires <= now_ms) {
                PingState::Expired
            } else {
                PingState::Open
            };
            Ok(PingView {
                room: row.get(0)?,
                ping: row.get(1)?,
                seq: row.get::<_, i64>(2)? as u64,
                asker: row.get(3)?,
                asker_handle: row.get(4)?,
                question: row.get(5)?,
                options: strings(row.get(6)?),
                recipients: strings(row.get(7)?),
                asked_ms: row.get(8)?,
                expires_ms,
                state,
                answered_by,
                answered_by_handle: row.get(11)?,
                answered_ms: row.get(12)?,
                choice: row.get(13)?,
                text: row.get(14)?,
            })
        };
        let (room, ping) = one.unzip();
        let pings = statement
            .query_map(params![room, ping, unanswered], map)?
            .collect::<Result<_, _>>()?;
        Ok(pings)
    }

    /// The latest message seq of each sender in a room.
    pub fn last_message_seqs(&self, room: &str) -> Result<Vec<(String, u64)>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT sender, max(seq) FROM events WHERE stream = ?1 AND kind = 'message'
             GROUP BY sender",
        )?;
        let seqs = statement
            .query_map([room], |row| {
                Ok((row.get(0)?, row.get::<_, i64>(1)? as u64))
            })?
            .collect::<Result<_, _>>()?;
        Ok(seqs)
    }

    /// The agents of `owner` the cache met.
    pub fn agents_of(&self, owner: &str) -> Result<Vec<PrincipalRow>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT id, kind, handle, name, owner FROM principals
             WHERE owner = ?1 AND kind = 'agent' ORDER BY handle",
        )?;
        let agents = statement
            .query_map([owner], PrincipalRow::from_row)?
            .collect::<Result<_, _>>()?;
        Ok(agents)
    }

    /// The latest status of each agent.
    pub fn agent_statuses(&self) -> Result<Vec<AgentStatusView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT s.agent, p.handle, s.room, s.state, s.detail, s.ts_ms FROM agent_status s
             LEFT JOIN principals p ON p.id = s.agent ORDER BY coalesce(p.handle, s.agent)",
        )?;
        let statuses = statement
            .query_map([], |row| {
                Ok(AgentStatusView {
                    agent: row.get(0)?,
                    handle: row.get(1)?,
                    room: row.get(2)?,
                    state: closed(row, 3)?,
                    detail: row.get(4)?,
                    ts_ms: row.get(5)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(statuses)
    }

    /// The controls we put on agents (see [`crate::cache::Cache::record_issued_control`]), by
    /// agent; `by` is us, `seq` 0 (they are not events of any stream).
    pub fn issued_controls(
        &self,
        me: &str,
    ) -> Result<std::collections::HashMap<String, Vec<ControlView>>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT agent, room, action, reason FROM issued_controls ORDER BY agent, room",
        )?;
        let mut issued: std::collections::HashMap<String, Vec<ControlView>> = Default::default();
        let rows = statement.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                closed(row, 2)?,
                row.get::<_, Option<String>>(3)?,
            ))
        })?;
        for row in rows {
            let (agent, room, action, reason) = row?;
            issued.entry(agent).or_default().push(ControlView {
                room: (!room.is_empty()).then_some(room),
                action,
                by: me.to_owned(),
                seq: 0,
                reason,
            });
        }
        Ok(issued)
    }

    /// Our contacts.
    pub fn contacts(&self) -> Result<Vec<ContactView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT c.principal, p.handle, p.name, p.kind, c.since_ms FROM contacts c
             LEFT JOIN principals p ON p.id = c.principal ORDER BY coalesce(p.handle, c.principal)",
        )?;
        let contacts = statement
            .query_map([], |row| {
                Ok(ContactView {
                    principal: row.get(0)?,
                    handle: row.get(1)?,
                    name: row.get(2)?,
                    kind: closed_opt(row, 3)?,
                    since_ms: row.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(contacts)
    }

    /// Contact requests, pending first, newest first.
    pub fn requests(&self) -> Result<Vec<RequestView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT r.id, r.sender, pf.handle, r.target, pt.handle, r.state, r.message, r.ts_ms
             FROM requests r
             LEFT JOIN principals pf ON pf.id = r.sender
             LEFT JOIN principals pt ON pt.id = r.target
             ORDER BY r.state != 'pending', r.ts_ms DESC",
        )?;
        let requests = statement
            .query_map([], |row| {
                Ok(RequestView {
                    id: row.get(0)?,
                    from: row.get(1)?,
                    from_handle: row.get(2)?,
                    to: row.get(3)?,
                    to_handle: row.get(4)?,
                    state: closed(row, 5)?,
                    message: row.get(6)?,
                    ts_ms: row.get(7)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(requests)
    }

    /// The controls in force on us.
    pub fn controls(&self) -> Result<Vec<ControlView>, CacheError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT room, action, by, seq, reason FROM controls ORDER BY room")?;
        let controls = statement
            .query_map([], |row| {
                let room: String = row.get(0)?;
                Ok(ControlView {
                    room: (!room.is_empty()).then_some(room),
                    action: closed(row, 1)?,
                    by: row.get(2)?,
                    seq: row.get::<_, i64>(3)? as u64,
                    reason: row.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(controls)
    }
}
