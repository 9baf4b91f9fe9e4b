//! What agents publish about their work: task lists, components, usage.

use super::*;

impl CacheView {
    /// Task lists: the latest of every agent session that `filter` matches, newest first,
    /// each task with when it changed state.
    pub fn task_sessions(&self, filter: &TaskFilter) -> Result<Vec<TaskSession>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT t.agent, p.handle, t.framework, t.session_id, t.room, t.ts_ms, t.source, t.tasks
             FROM tasks t LEFT JOIN principals p ON p.id = t.agent
             WHERE (?1 IS NULL OR t.room = ?1) AND (?2 IS NULL OR t.agent = ?2)
               AND (?3 IS NULL OR t.session_id = ?3)
             ORDER BY t.ts_ms DESC, t.agent",
        )?;
        let rows: Vec<(TaskSession, String)> = statement
            .query_map(
                params![filter.room, filter.agent, filter.session_id],
                |row| {
                    Ok((
                        TaskSession {
                            agent: row.get(0)?,
                            agent_handle: row.get(1)?,
                            framework: row.get(2)?,
                            session_id: row.get(3)?,
                            room: row.get(4)?,
                            ts_ms: row.get(5)?,
                            source: row.get(6)?,
                            tasks: Vec::new(),
                        },
                        row.get(7)?,
                    ))
                },
            )?
            .collect::<Result<_, _>>()?;
        let mut history = self.conn.prepare_cached(
            "SELECT task, status, ts_ms FROM task_states
             WHERE agent = ?1 AND framework = ?2 AND session_id = ?3
             ORDER BY task, ts_ms, room, seq",
        )?;
        let mut sessions = Vec::with_capacity(rows.len());
        for (mut session, tasks) in rows {
            let mut changes: BTreeMap<String, Vec<TaskStateChange>> = BTreeMap::new();
            let states = history.query_map(
                params![session.agent, session.framework, session.session_id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        closed::<TaskStatus>(row, 1)?,
                        row.get(2)?,
                    ))
                },
            )?;
            for state in states {
                let (task, status, ts_ms) = state?;
                let list = changes.entry(task).or_default();
                if list.last().is_none_or(|last| last.status != status) {
                    list.push(TaskStateChange { status, ts_ms });
                }
            }
            let listed: Vec<roundtable_protocol::bodies::Task> =
                serde_json::from_str(&tasks).unwrap_or_default();
            session.tasks = listed
                .into_iter()
                .map(|task| {
                    let key = task.id.clone().unwrap_or_else(|| task.title.clone());
                    let status = TaskStatus::from(task.status);
                    let history = changes.remove(&key).unwrap_or_default();
                    let since_ms = history
                        .iter()
                        .rev()
                        .find(|change| change.status == status)
                        .map_or(session.ts_ms, |change| change.ts_ms);
                    TaskView {
                        id: task.id,
                        title: task.title,
                        status,
                        active_form: task.active_form,
                        since_ms,
                        history,
                    }
                })
                .collect();
            sessions.push(session);
        }
        Ok(sessions)
    }

    /// The architecture board of a room.
    pub fn components(&self, room: &str) -> Result<Vec<ComponentView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT id, name, description, paths, depends_on, status, note, files, status_by, status_ms,
                 source
             FROM components WHERE room = ?1 AND def_seq > 0 ORDER BY id",
        )?;
        let mut components: Vec<ComponentView> = statement
            .query_map([room], |row| {
                Ok(ComponentView {
                    room: room.to_owned(),
                    id: row.get(0)?,
                    name: row.get(1)?,
                    description: row.get(2)?,
                    paths: strings(row.get(3)?),
                    depends_on: strings(row.get(4)?),
                    status: closed_opt(row, 5)?,
                    note: row.get(6)?,
                    files: strings(row.get(7)?),
                    by: row.get(8)?,
                    status_ms: row.get(9)?,
                    source: row.get(10)?,
                    agents: Vec::new(),
                    working: Vec::new(),
                })
            })?
            .collect::<Result<_, _>>()?;
        let mut agents = self.conn.prepare_cached(
            "SELECT c.agent, p.handle, c.status, c.note, c.files, c.ts_ms, c.claimed FROM component_agents c
             LEFT JOIN principals p ON p.id = c.agent
             WHERE c.room = ?1 AND c.component = ?2 ORDER BY c.seq DESC",
        )?;
        for component in &mut components {
            component.agents = agents
                .query_map(params![room, component.id], |row| {
                    Ok(ComponentAgent {
                        agent: row.get(0)?,
                        handle: row.get(1)?,
                        status: closed(row, 2)?,
                        note: row.get(3)?,
                        files: strings(row.get(4)?),
                        ts_ms: row.get(5)?,
                        claimed: row.get(6)?,
                    })
                })?
                .collect::<Result<_, _>>()?;
            component.working = component
                .agents
                .iter()
                .filter(|agent| agent.status == ComponentStatus::Working)
                .map(|agent| agent.agent.clone())
                .collect();
        }
        Ok(components)
    }

    /// Every agent's latest report on a component since `since_ms`, or its claim however
    /// old, in every room: what [`crate::work::overlaps`] looks at.
    pub fn component_touches(&self, since_ms: i64) -> Result<Vec<Touch>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT c.room, c.component, c.agent, p.handle, c.status, c.files, c.ts_ms, c.claimed
             FROM component_agents c LEFT JOIN principals p ON p.id = c.agent
             WHERE c.ts_ms >= ?1 OR c.claimed = 1",
        )?;
        let touches = statement
            .query_map([since_ms], |row| {
                Ok(Touch {
                    room: row.get(0)?,
                    component: row.get(1)?,
                    agent: row.get(2)?,
                    handle: row.get(3)?,
                    status: closed(row, 4)?,
                    files: strings(row.get(5)?),
                    ts_ms: row.get(6)?,
                    claimed: row.get(7)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(touches)
    }

    /// When `other`'s editing of `component` in `room` was last told, per (room, component,
    /// other).
    pub fn overlaps_told(
        &self,
    ) -> Result<std::collections::HashMap<(String, String, String), i64>, CacheError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT room, component, other, told_ms FROM overlaps_told")?;
        let told = statement
            .query_map([], |row| {
                Ok(((row.get(0)?, row.get(1)?, row.get(2)?), row.get(3)?))
            })?
            .collect::<Result<_, _>>()?;
        Ok(told)
    }

    /// Tokens and dollars, grouped as `query` asks (no grouping: one total).
    pub fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, CacheError> {
        let mut keys = query.group_by.clone();
        keys.dedup();
        let columns: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| format!("{} AS g{i}", key.column()))
            .collect();
        let select_groups = if columns.is_empty() {
            String::new()
        } else {
            format!("{}, ", columns.join(", "))
        };
        let group_by = if keys.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = (0..keys.len()).map(|i| format!("g{i}")).collect();
            format!("GROUP BY {0} ORDER BY {0}", names.join(", "))
        };
        // An agent's work is published to its home room and to the rooms its person shares
        // with: unless rooms are asked for, a report in several rooms counts once.
        let source = if keys.contains(&UsageKey::Room) || query.room.is_some() {
            "usage"
        } else {
            "(SELECT DISTINCT '' AS room, agent, framework, session_id, model, input, output,
                     cache_write, cache_read, cost_usd, from_ms, to_ms FROM usage)"
        };
        let sql = format!(
            "SELECT {select_groups} sum(u.input), sum(u.output), sum(u.cache_write),
                    sum(u.cache_read), coalesce(sum(u.cost_usd), 0), sum(u.cost_usd IS NULL),
                    count(*), min(u.from_ms), max(u.to_ms)
             FROM {source} u LEFT JOIN principals p ON p.id = u.agent
             WHERE (?1 IS NULL OR u.to_ms >= ?1) AND (?2 IS NULL OR u.to_ms < ?2)
               AND (?3 IS NULL OR u.room = ?3)
             {group_by}"
        );
        let mut statement = self.conn.prepare(&sql)?;
        let width = keys.len();
        let rows = statement
            .query_map(params![query.since_ms, query.until_ms, query.room], |row| {
                let mut group = BTreeMap::new();
                for (i, key) in keys.iter().enumerate() {
                    let value: Option<String> = row.get(i)?;
                    group.insert(*key, value.unwrap_or_default());
                }
                let count = |i: usize| -> rusqlite::Result<u64> {
                    Ok(row.get::<_, Option<i64>>(width + i)?.unwrap_or(0) as u64)
                };
                Ok(UsageRow {
                    group,
                    input: count(0)?,
                    output: count(1)?,
                    cache_write: count(2)?,
                    cache_read: count(3)?,
                    cost_usd: row.get(width + 4)?,
                    unpriced: count(5)?,
                    entries: count(6)?,
                    from_ms: row.get::<_, Option<i64>>(width + 7)?.unwrap_or(0),
                    to_ms: row.get::<_, Option<i64>>(width + 8)?.unwrap_or(0),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        // Without grouping, an empty table still sums to one row of zeros; drop it.
        Ok(rows.into_iter().filter(|row| row.entries > 0).collect())
    }
}

/// An agent's latest report on a component of a room, as the overlaps read it
/// ([`crate::work::overlaps`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Touch {
    pub room: String,
    pub component: String,
    /// The agent's id.
    pub agent: String,
    pub handle: Option<String>,
    pub status: roundtable_protocol::bodies::ComponentStatus,
    pub files: Vec<String>,
    pub ts_ms: i64,
    pub claimed: bool,
}
