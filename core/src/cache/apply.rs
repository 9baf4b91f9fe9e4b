//! Applying one event to the cache: its projections' writes, each kept only when it is newer
//! than what the row holds (by the seq or time that set it), the read markers it moves and the
//! unread counters it bumps. Kept apart from [`super::Cache`]'s transactions so that the rules
//! for one write read on one page.

use super::*;
use roundtable_protocol::model::RequestState;

/// Stores one event and its projections; false when it was already there.
pub(super) fn apply_event(
    tx: &rusqlite::Transaction<'_>,
    me: &str,
    stream: &str,
    event: &Event,
    changes: &mut BTreeSet<Change>,
) -> Result<bool, CacheError> {
    let ts_ms = roundtable_protocol::ts::parse_millis(&event.ts).unwrap_or(0);
    let body = serde_json::to_string(&event.body).expect("JSON values serialize");
    let inserted = tx
        .prepare_cached(
            "INSERT INTO events (stream, seq, id, ts_ms, sender, kind, body, client_key)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
        )?
        .execute(params![
            stream,
            event.seq as i64,
            event.id,
            ts_ms,
            event.from,
            event.kind,
            body,
            event.client_key
        ])?;
    let writes = projection::project(me, event);
    changes.extend(crate::changes::of_event(me, event, &writes));
    if inserted == 0 {
        return Ok(false);
    }
    if event.kind == "message" && stream != "inbox" {
        count_message(tx, me, stream, event)?;
    }
    for write in writes {
        if let Some(agent) = write.reported_agent()
            && !may_report(tx, agent, &event.from)?
        {
            continue;
        }
        if let Some(moved) = apply_write(tx, write)? {
            changes.insert(moved);
        }
    }
    Ok(true)
}

/// Whether `reporter` may report the work (usage, tasks, a component's status) of `agent`:
/// the agent itself or its owner. A hub refuses anyone else's report; this keeps one that
/// a hub stored before it did (or a hub that does not check) off the boards. An agent this
/// cache does not know yet is taken on the hub's word.
fn may_report(
    tx: &rusqlite::Transaction<'_>,
    agent: &str,
    reporter: &str,
) -> Result<bool, CacheError> {
    if agent == reporter {
        return Ok(true);
    }
    let known: Option<(Option<String>, String, Option<String>)> = tx
        .prepare_cached(
            "SELECT p.owner, p.handle, (SELECT handle FROM principals WHERE id = ?2)
             FROM principals p WHERE p.id = ?1",
        )?
        .query_row(params![agent, reporter], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let Some((owner, handle, reporter_handle)) = known else {
        return Ok(true);
    };
    Ok(match (owner, handle.split_once('/')) {
        (Some(owner), _) => owner == reporter,
        // An agent's handle starts with its owner's.
        (None, Some((owner_handle, _))) => {
            reporter_handle.is_none_or(|reporter_handle| reporter_handle == owner_handle)
        }
        // A person's work is their own to report.
        (None, None) => false,
    })
}

/// Moves the read marker of `stream` up to `seq` (never back), counting the messages it
/// passes as read; true when it moved. `sent`: the hub already has it.
pub(super) fn move_marker(
    tx: &rusqlite::Transaction<'_>,
    me: &str,
    stream: &str,
    seq: u64,
    sent: bool,
) -> Result<bool, CacheError> {
    let old: i64 = tx
        .query_row(
            "SELECT seq FROM read_markers WHERE stream = ?1",
            [stream],
            |row| row.get(0),
        )
        .optional()?
        .unwrap_or(0);
    let seq = seq as i64;
    if seq <= old {
        return Ok(false);
    }
    tx.execute(
        "INSERT INTO read_markers (stream, seq, sent) VALUES (?1, ?2, ?3)
         ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, sent = excluded.sent",
        params![stream, seq, sent],
    )?;
    let passed: i64 = tx
        .prepare_cached(
            "SELECT count(*) FROM events
             WHERE stream = ?1 AND kind = 'message' AND seq > ?2 AND seq <= ?3 AND sender != ?4",
        )?
        .query_row(params![stream, old, seq, me], |row| row.get(0))?;
    let mentions: i64 = tx
        .prepare_cached(
            "SELECT count(*) FROM mentions m JOIN events e ON e.stream = m.room AND e.seq = m.seq
             WHERE m.principal = ?4 AND m.room = ?1 AND m.seq > ?2 AND m.seq <= ?3
               AND e.sender != ?4",
        )?
        .query_row(params![stream, old, seq, me], |row| row.get(0))?;
    tx.prepare_cached(
        "INSERT INTO room_counts (room, others_read, mentions_read) VALUES (?1, ?2, ?3)
         ON CONFLICT (room) DO UPDATE SET others_read = others_read + excluded.others_read,
             mentions_read = mentions_read + excluded.mentions_read",
    )?
    .execute(params![stream, passed, mentions])?;
    Ok(true)
}

/// Counts a newly stored message in its room's unread counters.
fn count_message(
    tx: &rusqlite::Transaction<'_>,
    me: &str,
    room: &str,
    event: &Event,
) -> Result<(), CacheError> {
    if event.from == me {
        return Ok(());
    }
    let mentions_me = event.body["mentions"]
        .as_array()
        .is_some_and(|mentions| mentions.iter().any(|m| m.as_str() == Some(me)));
    tx.prepare_cached(
        "INSERT INTO room_counts (room, others, others_read, mentions, mentions_read)
         SELECT ?1, 1, read, ?3, ?3 * read FROM (
             SELECT ?2 <= coalesce((SELECT seq FROM read_markers WHERE stream = ?1), 0) AS read)
         WHERE true
         ON CONFLICT (room) DO UPDATE SET others = others + 1,
             others_read = others_read + excluded.others_read,
             mentions = mentions + excluded.mentions,
             mentions_read = mentions_read + excluded.mentions_read",
    )?
    .execute(params![room, event.seq as i64, mentions_me as i64])?;
    Ok(())
}

/// The room a session's task list, or an agent's status, was shown in before `room` took
/// it over: that room's view changes too.
fn moved_from(
    tx: &rusqlite::Transaction<'_>,
    sql: &str,
    key: impl rusqlite::Params,
    room: &str,
) -> Result<Option<String>, CacheError> {
    let previous: Option<String> = tx
        .prepare_cached(sql)?
        .query_row(key, |row| row.get(0))
        .optional()?;
    Ok(previous.filter(|previous| previous != room))
}

/// Applies one write; returns a change beyond the write's own, when it moved something out
/// of another room's view.
fn apply_write(tx: &rusqlite::Transaction<'_>, write: Write) -> Result<Option<Change>, CacheError> {
    let mut moved = None;
    match write {
        Write::RoomFields {
            room,
            title,
            topic,
            creator,
            seq,
        } => {
            apply_room_fields(tx, room, title, topic, creator, seq)?;
        }
        Write::RoomJoined { room, joined, seq } => {
            tx.prepare_cached(
                "INSERT INTO rooms (id, joined, joined_seq) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET joined = excluded.joined, joined_seq = excluded.joined_seq
                 WHERE excluded.joined_seq > rooms.joined_seq",
            )?
            .execute(params![room, joined, seq as i64])?;
        }
        Write::Member {
            room,
            principal,
            present,
            seq,
        } => {
            tx.prepare_cached("INSERT INTO rooms (id) VALUES (?1) ON CONFLICT DO NOTHING")?
                .execute([&room])?;
            tx.prepare_cached(
                "INSERT INTO members (room, principal, present, seq) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (room, principal) DO UPDATE SET present = excluded.present, seq = excluded.seq
                 WHERE excluded.seq > members.seq",
            )?
            .execute(params![room, principal, present, seq as i64])?;
        }
        Write::Mentions {
            room,
            seq,
            principals,
        } => {
            let mut statement = tx.prepare_cached(
                "INSERT INTO mentions (room, seq, principal) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
            )?;
            for principal in principals {
                statement.execute(params![room, seq as i64, principal])?;
            }
        }
        Write::Tasks {
            agent,
            framework,
            session_id,
            room,
            seq,
            ts_ms,
            source,
            tasks,
            states,
        } => {
            moved = apply_tasks(
                tx, agent, framework, session_id, room, seq, ts_ms, source, tasks, states,
            )?;
        }
        Write::ComponentsDefined {
            room,
            ids,
            source,
            seq,
        } => {
            apply_components_defined(tx, room, ids, source, seq)?;
        }
        Write::ComponentDef {
            room,
            id,
            name,
            description,
            paths,
            depends_on,
            source,
            seq,
        } => {
            apply_component_def(
                tx,
                room,
                id,
                name,
                description,
                paths,
                depends_on,
                source,
                seq,
            )?;
        }
        Write::ComponentStatus {
            room,
            id,
            status,
            note,
            files,
            by,
            seq,
            ts_ms,
            claim,
        } => {
            apply_component_status(tx, room, id, status, note, files, by, seq, ts_ms, claim)?;
        }
        Write::Usage {
            room,
            seq,
            agent,
            framework,
            session_id,
            model,
            input,
            output,
            cache_write,
            cache_read,
            cost_usd,
            from_ms,
            to_ms,
        } => {
            apply_usage(
                tx,
                room,
                seq,
                agent,
                framework,
                session_id,
                model,
                input,
                output,
                cache_write,
                cache_read,
                cost_usd,
                from_ms,
                to_ms,
            )?;
        }
        Write::Ping {
            room,
            ping,
            seq,
            asker,
            question,
            options,
            to,
            expires_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO pings (room, ping, seq, asker, question, options, recipients, expires_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (room, ping) DO UPDATE SET seq = excluded.seq, asker = excluded.asker,
                     question = excluded.question, options = excluded.options,
                     recipients = excluded.recipients, expires_ms = excluded.expires_ms",
            )?
            .execute(params![room, ping, seq as i64, asker, question, options, to, expires_ms])?;
            // Its withdrawal may have come first.
            withdraw(tx, &room, &ping)?;
        }
        Write::Answer {
            room,
            ping,
            seq,
            by,
            choice,
            text,
        } => {
            // The first answer wins: an answer only replaces a later one. The ping's row may
            // not be here yet (gap filling), so it is created with placeholders.
            tx.prepare_cached(
                "INSERT INTO pings (room, ping, seq, asker, question, answer_seq, answered_by, choice, answer_text)
                 VALUES (?1, ?2, 0, '', '', ?3, ?4, ?5, ?6)
                 ON CONFLICT (room, ping) DO UPDATE SET answer_seq = excluded.answer_seq,
                     answered_by = excluded.answered_by, choice = excluded.choice,
                     answer_text = excluded.answer_text
                 WHERE pings.answer_seq IS NULL OR excluded.answer_seq < pings.answer_seq",
            )?
            .execute(params![room, ping, seq as i64, by, choice, text])?;
        }
        Write::PingWithdrawn {
            room,
            ping,
            asker,
            at_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO ping_withdrawals (room, ping, asker, at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT DO NOTHING",
            )?
            .execute(params![room, ping, asker, at_ms])?;
            withdraw(tx, &room, &ping)?;
        }
        Write::AgentStatus {
            agent,
            room,
            seq,
            ts_ms,
            state,
            detail,
        } => {
            moved = apply_agent_status(tx, agent, room, seq, ts_ms, state, detail)?;
        }
        Write::Request {
            id,
            from,
            to,
            state,
            message,
            seq,
            ts_ms,
        } => {
            apply_request(tx, id, from, to, state, message, seq, ts_ms)?;
        }
        Write::Contact {
            principal,
            since_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO contacts (principal, since_ms) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            )?
            .execute(params![principal, since_ms])?;
        }
        Write::Control {
            room,
            action,
            by,
            seq,
            reason,
        } => match action {
            ControlAction::Pause | ControlAction::Stop => {
                tx.prepare_cached(
                    "INSERT INTO controls (room, action, by, seq, reason) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (room) DO UPDATE SET action = excluded.action, by = excluded.by,
                         seq = excluded.seq, reason = excluded.reason
                     WHERE excluded.seq > controls.seq",
                )?
                .execute(params![
                    room.unwrap_or_default(),
                    action.as_str(),
                    by,
                    seq as i64,
                    reason
                ])?;
            }
            ControlAction::Resume => match room {
                Some(room) => {
                    tx.prepare_cached("DELETE FROM controls WHERE room = ?1 AND seq < ?2")?
                        .execute(params![room, seq as i64])?;
                }
                None => {
                    tx.prepare_cached("DELETE FROM controls WHERE seq < ?1")?
                        .execute(params![seq as i64])?;
                }
            },
        },
    }
    Ok(moved)
}

/// One `Write`'s fields, as `apply_write` took them apart.
fn apply_room_fields(
    tx: &rusqlite::Transaction<'_>,
    room: String,
    title: Option<String>,
    topic: Option<String>,
    creator: Option<String>,
    seq: u64,
) -> Result<(), CacheError> {
    tx.prepare_cached("INSERT INTO rooms (id) VALUES (?1) ON CONFLICT DO NOTHING")?
        .execute([&room])?;
    if let Some(title) = title {
        tx.prepare_cached(
            "UPDATE rooms SET title = ?2, title_seq = ?3 WHERE id = ?1 AND title_seq < ?3",
        )?
        .execute(params![room, title, seq as i64])?;
    }
    if let Some(topic) = topic {
        tx.prepare_cached(
            "UPDATE rooms SET topic = ?2, topic_seq = ?3 WHERE id = ?1 AND topic_seq < ?3",
        )?
        .execute(params![room, topic, seq as i64])?;
    }
    if let Some(creator) = creator {
        tx.prepare_cached("UPDATE rooms SET creator = ?2 WHERE id = ?1")?
            .execute(params![room, creator])?;
    }
    Ok(())
}

/// One `Write`'s fields, as `apply_write` took them apart.
#[allow(clippy::too_many_arguments)]
fn apply_tasks(
    tx: &rusqlite::Transaction<'_>,
    agent: String,
    framework: String,
    session_id: String,
    room: String,
    seq: u64,
    ts_ms: i64,
    source: String,
    tasks: String,
    states: Vec<(String, String)>,
) -> Result<Option<Change>, CacheError> {
    let mut moved = None;
    let previous = moved_from(
        tx,
        "SELECT room FROM tasks WHERE agent = ?1 AND framework = ?2 AND session_id = ?3",
        params![agent, framework, session_id],
        &room,
    )?;
    let replaced = tx
        .prepare_cached(
            "INSERT INTO tasks (agent, framework, session_id, room, seq, ts_ms, source, tasks)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (agent, framework, session_id) DO UPDATE SET
             room = excluded.room, seq = excluded.seq, ts_ms = excluded.ts_ms,
             source = excluded.source, tasks = excluded.tasks
         WHERE (excluded.ts_ms, excluded.seq) > (tasks.ts_ms, tasks.seq)",
        )?
        .execute(params![
            agent, framework, session_id, room, seq as i64, ts_ms, source, tasks
        ])?;
    if replaced > 0 {
        moved = previous.map(|room| Change::Tasks { room });
    }
    let mut statement = tx.prepare_cached(
        "INSERT INTO task_states (agent, framework, session_id, task, ts_ms, room, seq, status)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
    )?;
    for (task, status) in states {
        statement.execute(params![
            agent, framework, session_id, task, ts_ms, room, seq as i64, status
        ])?;
    }
    Ok(moved)
}

/// One `Write`'s fields, as `apply_write` took them apart.
fn apply_components_defined(
    tx: &rusqlite::Transaction<'_>,
    room: String,
    ids: Vec<String>,
    source: Option<String>,
    seq: u64,
) -> Result<(), CacheError> {
    // What this definition replaces: every inferred component it does not name when
    // it is written; an older inferred definition's when it is inferred (and no
    // written one holds the room).
    if source.is_some() && written_here(tx, &room)? {
        return Ok(());
    }
    let keep = serde_json::to_string(&ids).expect("ids serialize");
    let older = if source.is_some() {
        seq as i64
    } else {
        i64::MAX
    };
    let replaced = "SELECT id FROM components WHERE room = ?1 AND source IS NOT NULL
         AND def_seq < ?3 AND id NOT IN (SELECT value FROM json_each(?2))";
    tx.prepare_cached(&format!(
        "DELETE FROM component_agents WHERE room = ?1 AND component IN ({replaced})"
    ))?
    .execute(params![room, keep, older])?;
    tx.prepare_cached(&format!(
        "DELETE FROM components WHERE room = ?1 AND id IN ({replaced})"
    ))?
    .execute(params![room, keep, older])?;
    Ok(())
}

/// One `Write`'s fields, as `apply_write` took them apart.
#[allow(clippy::too_many_arguments)]
fn apply_component_def(
    tx: &rusqlite::Transaction<'_>,
    room: String,
    id: String,
    name: String,
    description: Option<String>,
    paths: String,
    depends_on: String,
    source: Option<String>,
    seq: u64,
) -> Result<(), CacheError> {
    // Written components override inferred ones, whatever order the definitions
    // arrive in: an inferred one is kept out of a room with written ones, and a
    // written one clears the inferred ones out.
    // An inferred component of an older definition than the room's (it came late)
    // is not the repository's any more.
    if source.is_some() && (written_here(tx, &room)? || newer_inferred(tx, &room, seq)?) {
        return Ok(());
    }
    tx.prepare_cached(
        "INSERT INTO components (room, id, name, description, paths, depends_on, def_seq, source)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (room, id) DO UPDATE SET name = excluded.name,
             description = excluded.description, paths = excluded.paths,
             depends_on = excluded.depends_on, def_seq = excluded.def_seq,
             source = excluded.source
         WHERE excluded.def_seq > components.def_seq
             OR (excluded.source IS NULL AND components.source IS NOT NULL)",
    )?
    .execute(params![
        room,
        id,
        name,
        description,
        paths,
        depends_on,
        seq as i64,
        source
    ])?;
    Ok(())
}

/// One `Write`'s fields, as `apply_write` took them apart.
#[allow(clippy::too_many_arguments)]
fn apply_component_status(
    tx: &rusqlite::Transaction<'_>,
    room: String,
    id: String,
    status: String,
    note: Option<String>,
    files: Option<String>,
    by: String,
    seq: u64,
    ts_ms: i64,
    claim: Option<bool>,
) -> Result<(), CacheError> {
    tx.prepare_cached(
        "INSERT INTO components (room, id, status, note, files, status_by, status_seq, status_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (room, id) DO UPDATE SET status = excluded.status, note = excluded.note,
             files = excluded.files, status_by = excluded.status_by,
             status_seq = excluded.status_seq, status_ms = excluded.status_ms
         WHERE excluded.status_seq > components.status_seq",
    )?
    .execute(params![
        room, id, status, note, files, by, seq as i64, ts_ms
    ])?;
    tx.prepare_cached(
        "INSERT INTO component_agents (room, component, agent, status, note, files, seq, ts_ms,
             claimed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, coalesce(?9, 0))
         ON CONFLICT (room, component, agent) DO UPDATE SET status = excluded.status,
             note = excluded.note, files = excluded.files, seq = excluded.seq,
             ts_ms = excluded.ts_ms,
             claimed = coalesce(?9, component_agents.claimed)
         WHERE excluded.seq > component_agents.seq",
    )?
    .execute(params![
        room, id, by, status, note, files, seq as i64, ts_ms, claim
    ])?;
    Ok(())
}

/// One `Write`'s fields, as `apply_write` took them apart.
#[allow(clippy::too_many_arguments)]
fn apply_usage(
    tx: &rusqlite::Transaction<'_>,
    room: String,
    seq: u64,
    agent: String,
    framework: String,
    session_id: String,
    model: String,
    input: u64,
    output: u64,
    cache_write: u64,
    cache_read: u64,
    cost_usd: Option<f64>,
    from_ms: i64,
    to_ms: i64,
) -> Result<(), CacheError> {
    tx.prepare_cached(
        "INSERT INTO usage (room, seq, agent, framework, session_id, model, input, output,
             cache_write, cache_read, cost_usd, from_ms, to_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT DO NOTHING",
    )?
    .execute(params![
        room,
        seq as i64,
        agent,
        framework,
        session_id,
        model,
        input as i64,
        output as i64,
        cache_write as i64,
        cache_read as i64,
        cost_usd,
        from_ms,
        to_ms
    ])?;
    Ok(())
}

/// One `Write`'s fields, as `apply_write` took them apart.
fn apply_agent_status(
    tx: &rusqlite::Transaction<'_>,
    agent: String,
    room: String,
    seq: u64,
    ts_ms: i64,
    state: String,
    detail: Option<String>,
) -> Result<Option<Change>, CacheError> {
    let mut moved = None;
    let previous = moved_from(
        tx,
        "SELECT room FROM agent_status WHERE agent = ?1",
        params![agent],
        &room,
    )?;
    let replaced = tx
        .prepare_cached(
            "INSERT INTO agent_status (agent, room, seq, ts_ms, state, detail)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (agent) DO UPDATE SET room = excluded.room, seq = excluded.seq,
             ts_ms = excluded.ts_ms, state = excluded.state, detail = excluded.detail
         WHERE (excluded.ts_ms, excluded.seq) > (agent_status.ts_ms, agent_status.seq)",
        )?
        .execute(params![agent, room, seq as i64, ts_ms, state, detail])?;
    if replaced > 0 {
        moved = previous.map(|room| Change::Status { room });
    }
    Ok(moved)
}

/// One `Write`'s fields, as `apply_write` took them apart.
#[allow(clippy::too_many_arguments)]
fn apply_request(
    tx: &rusqlite::Transaction<'_>,
    id: String,
    from: String,
    to: String,
    state: RequestState,
    message: Option<String>,
    seq: u64,
    ts_ms: i64,
) -> Result<(), CacheError> {
    tx.prepare_cached(
        "INSERT INTO requests (id, sender, target, state, message, seq, ts_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (id) DO UPDATE SET state = excluded.state, seq = excluded.seq
         WHERE excluded.seq > requests.seq",
    )?
    .execute(params![
        id,
        from,
        to,
        state.as_str(),
        message,
        seq as i64,
        ts_ms
    ])?;
    Ok(())
}

/// Whether a room's components were written (by a person, or an agent's definition) rather
/// than inferred: written ones are never replaced by inferred ones.
fn written_here(tx: &rusqlite::Transaction<'_>, room: &str) -> Result<bool, CacheError> {
    Ok(tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM components
             WHERE room = ?1 AND def_seq > 0 AND source IS NULL)",
        )?
        .query_row([room], |row| row.get(0))?)
}

/// Whether a room holds inferred components of a definition newer than `seq`.
fn newer_inferred(
    tx: &rusqlite::Transaction<'_>,
    room: &str,
    seq: u64,
) -> Result<bool, CacheError> {
    Ok(tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM components
             WHERE room = ?1 AND source IS NOT NULL AND def_seq > ?2)",
        )?
        .query_row(params![room, seq as i64], |row| row.get(0))?)
}

/// A ping its asker withdrew waits no more, as if it expired then; only its asker's
/// withdrawal counts, and an answer stands.
fn withdraw(tx: &rusqlite::Transaction<'_>, room: &str, ping: &str) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE pings SET expires_ms = w.at_ms
         FROM ping_withdrawals w
         WHERE pings.room = ?1 AND pings.ping = ?2 AND w.room = pings.room
             AND w.ping = pings.ping AND w.asker = pings.asker AND pings.answer_seq IS NULL
             AND (pings.expires_ms IS NULL OR pings.expires_ms > w.at_ms)",
    )?
    .execute(params![room, ping])?;
    Ok(())
}
