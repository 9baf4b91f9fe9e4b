//! The desktop's boards, each one call: the tasks board (a lane per agent session), the
//! architecture boards and a component's history, the costs board (figures at their finest,
//! for a view to group as the person asks), and the sessions board.
//!
//! Each is a pure projection over cache rows (the `*_from` functions, tested here with rows
//! made by hand), and a [`Core`] method that reads the rows in one snapshot of the cache. A
//! session of this machine that no onboarded agent publishes still shows (from its logs), so
//! a person sees every agent at work, Roundtable's or not; one that is published shows once,
//! from its room.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use roundtable_protocol::bodies::ArchBody;
use serde::Serialize;

use super::events::Framework;
use super::figures::{Figure, Grouping, Teams};
use super::pricing::Pricing;
use crate::cache::SessionOwner;
use crate::cache::{
    AgentStatusView, ArchEventRow, CacheView, ComponentView, LocalSession, MessageCount, PingState,
    PingView, SessionRow, TaskFilter, TaskSession, TaskStateChange, TaskView, UsageQuery,
    UsageSession,
};
use crate::screens::AgentState;
use crate::session_claims::SessionClaims;
use crate::{Core, CoreError, now_ms};

/// Where a session ran, as far as this machine knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum Machine {
    /// Its logs are on this machine.
    ThisMachine,
    /// Only its reports in rooms are known.
    Elsewhere,
}

/// The person a handle belongs to: `dana` of `dana/writer`, or the handle itself.
pub fn person_of(handle: &str) -> &str {
    handle.split_once('/').map_or(handle, |(person, _)| person)
}

/// The session a published lane belongs to: `s1` of `s1/subagent` (a subagent's list is a
/// lane of its own inside the session).
fn base_session(session_id: &str) -> &str {
    session_id
        .split_once('/')
        .map_or(session_id, |(base, _)| base)
}

// ---- tasks ---------------------------------------------------------------------------------

/// One agent session's task list: a swim lane of the tasks board.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct TaskLane {
    /// Stable across refreshes: `agent:framework:session`, or `local:framework:session`.
    pub key: String,
    /// The agent's principal; `None` for a session of this machine no agent claimed.
    pub agent: Option<String>,
    pub agent_handle: Option<String>,
    /// The agent's person (by handle).
    pub person: String,
    pub framework: String,
    pub session_id: String,
    pub machine: Machine,
    /// The room the latest list came from (`None`: this machine's logs only).
    pub room: Option<String>,
    /// When the latest list was written.
    pub ts_ms: i64,
    /// The tool the list came from (`TodoWrite`, `update_plan`, …).
    pub source: String,
    pub tasks: Vec<TaskView>,
    /// For a session that keeps no list: why, and what would give it one.
    pub no_list: Option<String>,
}

/// The tasks board: a lane per session, the latest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct TaskBoard {
    pub lanes: Vec<TaskLane>,
}

/// A session of this machine with no list is shown when it was active this recently.
const NO_LIST_SHOWN_MS: i64 = 24 * 3_600_000;

/// Whether Claude Code offers `model` its task tools without being asked
/// (`CLAUDE_CODE_ENABLE_TODO_TOOLS`): since 2.1.233 only the models before Opus 4.8 and
/// Sonnet 5 get them by default.
fn claude_offers_task_tools(model: &str) -> bool {
    let model = super::pricing::canonical_model(model);
    let legacy = model.starts_with("claude-3")
        || ["claude-opus-4", "claude-sonnet-4", "claude-haiku-4"]
            .iter()
            .any(|family| model.starts_with(family));
    legacy && !model.starts_with("claude-opus-4-8")
}

/// Why a session of `framework` on `model` has no task list, and what gives it one. Pure.
pub fn why_no_list(framework: &str, model: Option<&str>) -> String {
    let model = model.unwrap_or("its model");
    match framework {
        "claude-code" if !claude_offers_task_tools(model) => format!(
            "Claude Code gives {model} no task tool unless CLAUDE_CODE_ENABLE_TODO_TOOLS=1 \
             (onboarding sets it in ~/.claude/settings.json); its agent can call report_tasks"
        ),
        "claude-code" => "it has not made a list with TaskCreate or TodoWrite yet".to_owned(),
        "codex" => "Codex offers update_plan only with [tools.update_plan] enabled = true in \
             config.toml (onboarding sets it); with it on, the agent has not made a plan yet"
            .to_owned(),
        "gemini" if model.starts_with("gemini-2") && !model.contains("preview") => {
            "it has not called write_todos yet (Gemini CLI offers it in yolo and auto_edit \
             modes)"
                .to_owned()
        }
        "gemini" => format!(
            "Gemini CLI offers write_todos only to gemini-2.x models, not {model}; its agent \
             can call report_tasks"
        ),
        _ => "it has not made a task list yet".to_owned(),
    }
}

/// A local session's list as a lane's tasks.
fn local_tasks(session: &LocalSession, at: i64) -> Vec<TaskView> {
    session
        .tasks
        .iter()
        .map(|task| {
            // As this machine's log says (a blocked task shows blocked).
            let status = task.status;
            TaskView {
                id: task.id.clone(),
                title: task.title.clone(),
                history: vec![TaskStateChange { status, ts_ms: at }],
                status,
                active_form: task.active_form.clone(),
                since_ms: at,
            }
        })
        .collect()
}

/// The tasks board from the published lists and this machine's sessions, at `now_ms`.
/// Each session shows once: a list published to several rooms once, the latest; a session
/// of this machine from its room when it is published there, else from its logs, under the
/// agent that claimed it. A recent session with no list says why. Pure.
pub fn task_board_from(
    published: Vec<TaskSession>,
    local: &[LocalSession],
    me_handle: &str,
    now_ms: i64,
) -> TaskBoard {
    let here: HashSet<(&str, &str)> = local
        .iter()
        .map(|session| (session.framework.as_str(), session.session_id.as_str()))
        .collect();
    let mut latest: BTreeMap<(String, String, String), TaskSession> = BTreeMap::new();
    for lane in published {
        let key = (
            lane.agent.clone(),
            lane.framework.clone(),
            lane.session_id.clone(),
        );
        match latest.get(&key) {
            Some(kept) if kept.ts_ms >= lane.ts_ms => {}
            _ => {
                latest.insert(key, lane);
            }
        }
    }
    let published_sessions: HashSet<(String, String)> = latest
        .values()
        .map(|lane| {
            (
                lane.framework.clone(),
                base_session(&lane.session_id).to_owned(),
            )
        })
        .collect();
    let mut lanes: Vec<TaskLane> = latest
        .into_values()
        .map(|session| {
            let machine = if here.contains(&(
                session.framework.as_str(),
                base_session(&session.session_id),
            )) {
                Machine::ThisMachine
            } else {
                Machine::Elsewhere
            };
            let person =
                person_of(session.agent_handle.as_deref().unwrap_or(&session.agent)).to_owned();
            TaskLane {
                key: format!(
                    "{}:{}:{}",
                    session.agent, session.framework, session.session_id
                ),
                agent: Some(session.agent),
                agent_handle: session.agent_handle,
                person,
                framework: session.framework,
                session_id: session.session_id,
                machine,
                room: Some(session.room),
                ts_ms: session.ts_ms,
                source: session.source,
                tasks: session.tasks,
                no_list: None,
            }
        })
        .collect();
    for session in local {
        if published_sessions.contains(&(session.framework.clone(), session.session_id.clone())) {
            continue;
        }
        let at = session.last_ms.unwrap_or(0);
        if session.tasks.is_empty() && now_ms - at > NO_LIST_SHOWN_MS {
            continue;
        }
        let (agent, agent_handle, person) = match &session.claimed_by {
            Some(owner) => (
                owner.id.clone(),
                Some(owner.handle.clone()),
                person_of(&owner.handle).to_owned(),
            ),
            None => (None, None, me_handle.to_owned()),
        };
        lanes.push(TaskLane {
            key: format!(
                "{}:{}:{}",
                agent.as_deref().unwrap_or("local"),
                session.framework,
                session.session_id
            ),
            agent,
            agent_handle,
            person,
            framework: session.framework.clone(),
            session_id: session.session_id.clone(),
            machine: Machine::ThisMachine,
            room: None,
            ts_ms: at,
            source: session
                .task_source
                .clone()
                .unwrap_or_else(|| "log".to_owned()),
            tasks: local_tasks(session, at),
            no_list: session
                .tasks
                .is_empty()
                .then(|| why_no_list(&session.framework, session.model.as_deref())),
        });
    }
    lanes.sort_by(|a, b| b.ts_ms.cmp(&a.ts_ms).then_with(|| a.key.cmp(&b.key)));
    TaskBoard { lanes }
}

// ---- architecture --------------------------------------------------------------------------

/// A room's components.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ArchitectureBoard {
    pub room: String,
    pub title: Option<String>,
    pub components: Vec<ComponentView>,
}

/// What happened to a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum ComponentChangeKind {
    /// It was defined, or defined again.
    Defined,
    /// Someone reported its status.
    Status,
}

/// One event of a component's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ComponentChange {
    pub seq: u64,
    pub ts_ms: i64,
    pub kind: ComponentChangeKind,
    /// Who sent it.
    pub by: String,
    pub by_handle: Option<String>,
    /// Whose work it reports (an owner reports their agents' edits): the agent's handle,
    /// else the sender's.
    pub agent_handle: Option<String>,
    pub status: Option<roundtable_protocol::bodies::ComponentStatus>,
    pub note: Option<String>,
    pub files: Vec<String>,
    /// For a definition: what it depends on.
    pub depends_on: Vec<String>,
}

/// The history of `component` in a room's `arch` events, oldest first. `handle` names a
/// principal. Events that do not parse are left out. Pure.
pub fn component_history_from(
    rows: &[ArchEventRow],
    component: &str,
    handle: impl Fn(&str) -> Option<String>,
) -> Vec<ComponentChange> {
    let mut history = Vec::new();
    for row in rows {
        let Ok(body) = serde_json::from_str::<ArchBody>(&row.body) else {
            continue;
        };
        let change = |kind, agent: Option<&str>| ComponentChange {
            seq: row.seq,
            ts_ms: row.ts_ms,
            kind,
            by: row.sender.clone(),
            by_handle: row.sender_handle.clone(),
            agent_handle: match agent {
                Some(agent) => handle(agent).or_else(|| Some(agent.to_owned())),
                None => row.sender_handle.clone(),
            },
            status: None,
            note: None,
            files: Vec::new(),
            depends_on: Vec::new(),
        };
        match body {
            ArchBody::Define { define } => {
                if let Some(def) = define.into_iter().find(|def| def.id == component) {
                    history.push(ComponentChange {
                        note: def.description,
                        depends_on: def.depends_on,
                        files: def.paths,
                        ..change(ComponentChangeKind::Defined, None)
                    });
                }
            }
            ArchBody::Status {
                component: id,
                status,
                note,
                files,
                agent,
            } if id == component => {
                history.push(ComponentChange {
                    status: Some(status),
                    note,
                    files: files.unwrap_or_default(),
                    ..change(ComponentChangeKind::Status, agent.as_deref())
                });
            }
            ArchBody::Status { .. } => {}
        }
    }
    history
}

// ---- costs ---------------------------------------------------------------------------------

/// Figures at their finest: one row per room, day, agent, person and model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct CostRow {
    /// A room id; none for sessions of this machine no onboarded agent publishes.
    pub room: Option<String>,
    /// The UTC day (`2026-11-30`).
    pub day: String,
    /// The agent's handle, or `(local claude-code)` for a session of no onboarded agent.
    pub agent: String,
    pub person: String,
    /// The person's teams (from `teams.toml`); empty when in none.
    pub teams: Vec<String>,
    pub model: String,
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    /// Priced entries only.
    pub cost_usd: f64,
    /// Entries of models without a price: their tokens count, their cost is unknown.
    pub unpriced_entries: u64,
    pub unpriced_models: Vec<String>,
    /// Entries read from this machine's logs (not from a room).
    pub local_entries: u64,
    /// When the newest entry of the row was reported.
    pub latest_ms: i64,
}

/// The costs board.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct CostBoard {
    /// The person (by handle): rows of others are what teammates shared.
    pub me: String,
    /// Usage that ended at or after this, if the board is for a period.
    pub since_ms: Option<i64>,
    pub rows: Vec<CostRow>,
}

/// The groupings of [`CostRow`].
pub const COST_GROUPING: [Grouping; 5] = [
    Grouping::Room,
    Grouping::Day,
    Grouping::Agent,
    Grouping::Person,
    Grouping::Model,
];

/// Rows of figures grouped by [`COST_GROUPING`]. Pure.
pub fn cost_rows_from(figures: Vec<Figure>, teams: &Teams) -> Vec<CostRow> {
    figures
        .into_iter()
        .map(|figure| {
            let value = |key: Grouping| figure.group.get(&key).cloned().unwrap_or_default();
            let person = value(Grouping::Person);
            CostRow {
                room: Some(value(Grouping::Room))
                    .filter(|room| room != super::figures::THIS_MACHINE),
                day: value(Grouping::Day),
                agent: value(Grouping::Agent),
                teams: teams.of(&person),
                person,
                model: value(Grouping::Model),
                input: figure.input,
                output: figure.output,
                cache_write: figure.cache_write,
                cache_read: figure.cache_read,
                cost_usd: figure.cost_usd,
                unpriced_entries: figure.unpriced_entries,
                unpriced_models: figure.unpriced_models,
                local_entries: figure.local_entries,
                latest_ms: figure.latest_ms,
            }
        })
        .collect()
}

// ---- sessions ------------------------------------------------------------------------------

/// One agent session, with what a person acts on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct SessionView {
    /// Stable across refreshes: `agent:framework:session`, or `local:framework:session`.
    pub key: String,
    pub agent: Option<String>,
    pub agent_handle: Option<String>,
    pub person: String,
    /// One of the person's own agents: pause, resume and stop are theirs to use.
    pub mine: bool,
    pub framework: String,
    pub session_id: String,
    pub machine: Machine,
    /// The room a runner binds it to (it answers that room's messages).
    pub bound_room: Option<String>,
    /// Rooms its work was reported to.
    pub rooms: Vec<String>,
    pub state: AgentState,
    pub detail: Option<String>,
    /// What the agent said when it last reported an error, while it is in error.
    pub last_error: Option<String>,
    pub last_active_ms: i64,
    /// Messages the agent wrote in the last hour (in this session's rooms, when known).
    pub messages_last_hour: u64,
    /// Questions (permissions, decisions) the agent asked, ever.
    pub questions_asked: u64,
    /// Of those, the ones waiting for the person.
    pub questions_waiting: u64,
    /// Controls in force on the agent (`pause`, `stop`), as far as this machine knows.
    pub controls: Vec<String>,
    /// A question waits for the person, or the agent waits for a person or is in error.
    pub needs_you: bool,
}

/// An agent the sessions board may name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KnownAgent {
    pub id: String,
    pub handle: Option<String>,
    pub owner: Option<String>,
    /// Controls in force on it (from its own cache on this machine).
    pub controls: Vec<String>,
}

/// A session an agent of this machine bound (its hooks, its runner).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundSession {
    pub agent: String,
    pub session: SessionRow,
}

/// Everything the sessions board is made of.
#[derive(Debug, Clone, Default)]
pub struct SessionRows {
    pub me: String,
    pub me_handle: String,
    pub now_ms: i64,
    pub tasks: Vec<TaskSession>,
    pub usage: Vec<UsageSession>,
    pub local: Vec<LocalSession>,
    pub bound: Vec<BoundSession>,
    pub agents: Vec<KnownAgent>,
    pub statuses: Vec<AgentStatusView>,
    pub pings: Vec<PingView>,
    /// Open pings the person may answer.
    pub waiting: Vec<PingView>,
    /// Messages of the last hour.
    pub messages: Vec<MessageCount>,
}

/// A local session whose logs moved this recently is working.
const LIVE_MS: i64 = 2 * 60_000;

#[derive(Default)]
struct Gathered {
    agent: Option<String>,
    framework: String,
    session_id: String,
    rooms: BTreeSet<String>,
    bound_room: Option<String>,
    here: bool,
    last_ms: i64,
}

fn gathered_entry<'a>(
    sessions: &'a mut BTreeMap<(String, String, String), Gathered>,
    agent: &str,
    framework: &str,
    session_id: &str,
) -> &'a mut Gathered {
    let session_id = base_session(session_id).to_owned();
    sessions
        .entry((agent.to_owned(), framework.to_owned(), session_id.clone()))
        .or_insert_with(|| Gathered {
            agent: Some(agent.to_owned()),
            framework: framework.to_owned(),
            session_id,
            ..Gathered::default()
        })
}

/// The sessions board: "needs you" first, then the latest active. An agent's status, and
/// the questions it asked, are its current session's: the one bound to the room of its
/// latest status, else its latest. Pure.
pub fn session_board_from(rows: &SessionRows) -> Vec<SessionView> {
    // Every session of an agent, by (agent, framework, session).
    let mut sessions: BTreeMap<(String, String, String), Gathered> = BTreeMap::new();
    for lane in &rows.tasks {
        let entry = gathered_entry(
            &mut sessions,
            &lane.agent,
            &lane.framework,
            &lane.session_id,
        );
        entry.rooms.insert(lane.room.clone());
        entry.last_ms = entry.last_ms.max(lane.ts_ms);
    }
    for usage in &rows.usage {
        let entry = gathered_entry(
            &mut sessions,
            &usage.agent,
            &usage.framework,
            &usage.session_id,
        );
        entry.rooms.insert(usage.room.clone());
        entry.last_ms = entry.last_ms.max(usage.last_ms);
    }
    for bound in &rows.bound {
        let entry = gathered_entry(
            &mut sessions,
            &bound.agent,
            &bound.session.framework,
            &bound.session.session_id,
        );
        entry.here = true;
        if bound.session.room.is_some() {
            entry.bound_room = bound.session.room.clone();
        }
        entry.last_ms = entry.last_ms.max(bound.session.updated_ms);
    }
    let mut gathered: Vec<Gathered> = sessions.into_values().collect();
    for local in &rows.local {
        let last = local.last_ms.unwrap_or(0);
        let mut matched = false;
        let owner = local
            .claimed_by
            .as_ref()
            .and_then(|owner| owner.id.as_deref());
        for session in gathered.iter_mut().filter(|session| {
            session.framework == local.framework
                && session.session_id == local.session_id
                && (owner.is_none() || session.agent.as_deref() == owner)
        }) {
            session.here = true;
            session.last_ms = session.last_ms.max(last);
            matched = true;
        }
        if !matched {
            gathered.push(Gathered {
                agent: local.claimed_by.as_ref().and_then(|owner| owner.id.clone()),
                framework: local.framework.clone(),
                session_id: local.session_id.clone(),
                here: true,
                last_ms: last,
                ..Gathered::default()
            });
        }
    }
    let agents: HashMap<&str, &KnownAgent> = rows
        .agents
        .iter()
        .map(|agent| (agent.id.as_str(), agent))
        .collect();
    let statuses = crate::screens::latest_statuses(&rows.statuses);
    // The session an agent's latest status is about: one bound to the status's room, else
    // its latest.
    let mut status_session: HashMap<&str, usize> = HashMap::new();
    for (index, session) in gathered.iter().enumerate() {
        let Some(agent) = session.agent.as_deref() else {
            continue;
        };
        let status_room = statuses.get(agent).map(|status| status.room.as_str());
        let bound_there = status_room.is_some() && session.bound_room.as_deref() == status_room;
        match status_session.get(agent) {
            Some(&other) => {
                let other_bound =
                    status_room.is_some() && gathered[other].bound_room.as_deref() == status_room;
                if (bound_there && !other_bound)
                    || (bound_there == other_bound && session.last_ms > gathered[other].last_ms)
                {
                    status_session.insert(agent, index);
                }
            }
            None => {
                status_session.insert(agent, index);
            }
        }
    }
    let mut board: Vec<SessionView> = gathered
        .iter()
        .enumerate()
        .map(|(index, session)| {
            let known = session.agent.as_deref().and_then(|id| agents.get(id));
            let agent_handle = known.and_then(|agent| agent.handle.clone());
            let (state, detail) = match session.agent.as_deref() {
                None if rows.now_ms - session.last_ms < LIVE_MS => (AgentState::Working, None),
                None => (AgentState::Idle, None),
                Some(agent) => match statuses.get(agent) {
                    Some(status) if status_session.get(agent) == Some(&index) => {
                        (AgentState::from(status.state), status.detail.clone())
                    }
                    Some(_) => (AgentState::Idle, None),
                    None => (AgentState::Unknown, None),
                },
            };
            let last_error = (state == AgentState::Error)
                .then(|| detail.clone())
                .flatten();
            let current = session
                .agent
                .as_deref()
                .filter(|agent| status_session.get(agent) == Some(&index));
            let questions_asked = current.map_or(0, |agent| {
                rows.pings.iter().filter(|p| p.asker == agent).count() as u64
            });
            let questions_waiting = current.map_or(0, |agent| {
                rows.waiting
                    .iter()
                    .filter(|p| p.asker == agent && p.state == PingState::Open)
                    .count() as u64
            });
            let rooms: Vec<String> = session
                .rooms
                .iter()
                .cloned()
                .chain(session.bound_room.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let messages_last_hour = session.agent.as_deref().map_or(0, |agent| {
                rows.messages
                    .iter()
                    .filter(|count| count.sender == agent)
                    .filter(|count| rooms.is_empty() || rooms.contains(&count.room))
                    .map(|count| count.count)
                    .sum()
            });
            let person = match (
                &agent_handle,
                known.and_then(|agent| agent.owner.as_deref()),
            ) {
                (Some(handle), _) => person_of(handle).to_owned(),
                (None, Some(owner)) if owner == rows.me => rows.me_handle.clone(),
                (None, Some(owner)) => owner.to_owned(),
                (None, None) if session.agent.is_none() => rows.me_handle.clone(),
                (None, None) => session.agent.clone().unwrap_or_default(),
            };
            let mine = session.agent.is_some()
                && (known.and_then(|agent| agent.owner.as_deref()) == Some(rows.me.as_str())
                    || person == rows.me_handle);
            let needs_you = questions_waiting > 0
                || matches!(state, AgentState::WaitingHuman | AgentState::Error);
            SessionView {
                key: format!(
                    "{}:{}:{}",
                    session.agent.as_deref().unwrap_or("local"),
                    session.framework,
                    session.session_id
                ),
                agent: session.agent.clone(),
                agent_handle,
                person,
                mine,
                framework: session.framework.clone(),
                session_id: session.session_id.clone(),
                machine: if session.here {
                    Machine::ThisMachine
                } else {
                    Machine::Elsewhere
                },
                bound_room: session.bound_room.clone(),
                rooms,
                state,
                detail,
                last_error,
                last_active_ms: session.last_ms,
                messages_last_hour,
                questions_asked,
                questions_waiting,
                controls: known
                    .map(|agent| agent.controls.clone())
                    .unwrap_or_default(),
                needs_you,
            }
        })
        .collect();
    board.sort_by(|a, b| {
        b.needs_you
            .cmp(&a.needs_you)
            .then_with(|| b.last_active_ms.cmp(&a.last_active_ms))
            .then_with(|| a.key.cmp(&b.key))
    });
    board
}

/// The sessions and controls of this person's agents onboarded on this machine (same hub),
/// read from each agent's own cache.
fn agents_here(
    profiles: &Path,
    me_handle: &str,
    hub: &str,
) -> (Vec<BoundSession>, HashMap<String, Vec<String>>) {
    let mut bound = Vec::new();
    let mut controls = HashMap::new();
    let Ok(entries) = std::fs::read_dir(profiles) else {
        return (bound, controls);
    };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Ok(profile) = crate::profile::Profile::load(profiles, &name) else {
            continue;
        };
        if profile.hub.authority != hub || person_of(&profile.handle) != me_handle {
            continue;
        }
        if !profile.handle.contains('/') || !profile.cache_path().exists() {
            continue;
        }
        let Ok(view) = CacheView::open_reader(&profile.cache_path()) else {
            continue;
        };
        for session in view.sessions().unwrap_or_default() {
            bound.push(BoundSession {
                agent: profile.principal.clone(),
                session,
            });
        }
        let mut actions: Vec<String> = view
            .controls()
            .unwrap_or_default()
            .into_iter()
            .map(|control| control.action)
            .collect();
        actions.sort();
        actions.dedup();
        controls.insert(profile.principal.clone(), actions);
    }
    (bound, controls)
}

// ---- the core's calls ----------------------------------------------------------------------

/// This machine's sessions, each with the agent that claimed it.
fn claimed_local_sessions(
    view: &CacheView,
    claims: &SessionClaims,
) -> Result<Vec<LocalSession>, crate::cache::CacheError> {
    let mut sessions = view.local_sessions()?;
    for session in &mut sessions {
        let Some(framework) = Framework::parse(&session.framework) else {
            continue;
        };
        if let Some(handle) = claims.owner(framework, &session.session_id) {
            let id = view.principal_by_handle(&handle)?.map(|p| p.id);
            session.claimed_by = Some(SessionOwner { id, handle });
        }
    }
    Ok(sessions)
}

impl Core {
    /// The tasks board.
    pub async fn task_board(&self) -> Result<TaskBoard, CoreError> {
        let me = self.profile().handle.clone();
        let claims = SessionClaims::beside(self.profile().base());
        self.read(move |view| {
            let published = view.task_sessions(&TaskFilter::default())?;
            let local = claimed_local_sessions(view, &claims)?;
            Ok(task_board_from(published, &local, &me, now_ms()))
        })
        .await
    }

    /// The architecture board of every room that has components, by room title.
    pub async fn architecture_boards(&self) -> Result<Vec<ArchitectureBoard>, CoreError> {
        self.read(|view| {
            let mut boards = Vec::new();
            for room in view.rooms()? {
                let components = view.components(&room.id)?;
                if !components.is_empty() {
                    boards.push(ArchitectureBoard {
                        room: room.id,
                        title: room.title,
                        components,
                    });
                }
            }
            Ok(boards)
        })
        .await
    }

    /// Everything that happened to a component of a room, oldest first.
    pub async fn component_history(
        &self,
        room: &str,
        component: &str,
    ) -> Result<Vec<ComponentChange>, CoreError> {
        let (room, component) = (room.to_owned(), component.to_owned());
        self.read(move |view| {
            let rows = view.arch_events(&room)?;
            let mut handles: HashMap<String, Option<String>> = HashMap::new();
            let mut lookups: Vec<String> = Vec::new();
            for row in &rows {
                if let Ok(ArchBody::Status {
                    agent: Some(agent), ..
                }) = serde_json::from_str::<ArchBody>(&row.body)
                {
                    lookups.push(agent);
                }
            }
            for agent in lookups {
                let handle = view.handle_of(&agent)?;
                handles.insert(agent, handle);
            }
            Ok(component_history_from(&rows, &component, |id| {
                handles.get(id).cloned().flatten()
            }))
        })
        .await
    }

    /// The costs board: figures at their finest since `since_ms`, at `pricing`.
    pub async fn cost_board(
        &self,
        since_ms: Option<i64>,
        pricing: Pricing,
    ) -> Result<CostBoard, CoreError> {
        let teams = Teams::load(&self.profile().dir)?;
        let query = UsageQuery {
            since_ms,
            ..UsageQuery::default()
        };
        let figures = self
            .usage_figures(COST_GROUPING.to_vec(), query, pricing)
            .await?;
        Ok(CostBoard {
            me: self.profile().handle.clone(),
            since_ms,
            rows: cost_rows_from(figures, &teams),
        })
    }

    /// The sessions board; `profiles` holds the agents onboarded on this machine.
    pub async fn session_board(&self, profiles: &Path) -> Result<Vec<SessionView>, CoreError> {
        let profile = self.profile();
        let (me, me_handle) = (profile.principal.clone(), profile.handle.clone());
        let hub = profile.hub.authority.clone();
        let is_user = !self.is_agent();
        let claims = SessionClaims::beside(profiles);
        let profiles = profiles.to_path_buf();
        self.read(move |view| {
            let now = now_ms();
            let (bound, controls) = agents_here(&profiles, &me_handle, &hub);
            let mut rows = SessionRows {
                tasks: view.task_sessions(&TaskFilter::default())?,
                usage: view.usage_sessions()?,
                local: claimed_local_sessions(view, &claims)?,
                bound,
                statuses: view.agent_statuses()?,
                pings: view.pings(now)?,
                waiting: view.open_pings_for(&me, is_user, now)?,
                messages: view.message_counts_since(now - 3_600_000)?,
                now_ms: now,
                me,
                me_handle,
                agents: Vec::new(),
            };
            let ids: BTreeSet<String> = rows
                .tasks
                .iter()
                .map(|lane| lane.agent.clone())
                .chain(rows.usage.iter().map(|usage| usage.agent.clone()))
                .chain(rows.bound.iter().map(|bound| bound.agent.clone()))
                .chain(
                    rows.local
                        .iter()
                        .filter_map(|local| local.claimed_by.as_ref()?.id.clone()),
                )
                .collect();
            for id in ids {
                let principal = view.principal(&id)?;
                rows.agents.push(KnownAgent {
                    controls: controls.get(&id).cloned().unwrap_or_default(),
                    handle: principal.as_ref().map(|p| p.handle.clone()),
                    owner: principal.and_then(|p| p.owner),
                    id,
                });
            }
            Ok(session_board_from(&rows))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::events::{TaskItem, TaskStatus, TokenCounts};
    use roundtable_protocol::bodies::ComponentStatus;

    fn task(title: &str, status: &str, since: i64) -> TaskView {
        TaskView {
            id: None,
            title: title.into(),
            status: crate::wire(status),
            active_form: None,
            since_ms: since,
            history: vec![TaskStateChange {
                status: crate::wire(status),
                ts_ms: since,
            }],
        }
    }

    fn published(agent: &str, handle: &str, session: &str, ts: i64) -> TaskSession {
        TaskSession {
            agent: agent.into(),
            agent_handle: Some(handle.into()),
            framework: "claude-code".into(),
            session_id: session.into(),
            room: "r_home".into(),
            ts_ms: ts,
            source: "TodoWrite".into(),
            tasks: vec![task("parse", "in_progress", ts)],
        }
    }

    fn local(session: &str, last: i64, tasks: Vec<TaskItem>) -> LocalSession {
        LocalSession {
            framework: "claude-code".into(),
            session_id: session.into(),
            cwd: Some("/work/app".into()),
            model: None,
            first_ms: Some(0),
            last_ms: Some(last),
            tasks,
            task_source: None,
            files: Vec::new(),
            tokens: TokenCounts::default(),
            claimed_by: None,
        }
    }

    fn item(title: &str, status: TaskStatus) -> TaskItem {
        TaskItem {
            id: None,
            title: title.into(),
            status,
            active_form: None,
        }
    }

    #[test]
    fn a_lane_per_session_published_ones_once_and_this_machines_own_beside_them() {
        let day = 24 * 3_600_000;
        let now = 10 * day;
        let in_shared_room = TaskSession {
            room: "r_team".into(),
            ts_ms: now - 900,
            ..published("p_writer", "dana/writer", "s1", 0)
        };
        let mut claimed = local("s4", now - 50, vec![item("review", TaskStatus::InProgress)]);
        claimed.claimed_by = Some(SessionOwner {
            id: Some("p_reviewer".into()),
            handle: "dana/reviewer".into(),
        });
        let mut opus = local("s5", now - 40, Vec::new());
        opus.model = Some("claude-opus-5-5".into());
        let board = task_board_from(
            vec![
                published("p_writer", "dana/writer", "s1", now - 1000),
                // The same list in a room the person shares with: once, the latest.
                in_shared_room,
                published("p_writer", "dana/writer", "s1/sub", now - 1100),
                published("p_sec", "sam/security", "s9", now - 100),
            ],
            &[
                // Published (its subagent lane too): shown once, from the room.
                local("s1", now - 800, vec![item("parse", TaskStatus::Pending)]),
                // Nobody claimed it: from the logs, the person's own.
                local("s2", now - 200, vec![item("lint", TaskStatus::Completed)]),
                // Claimed, not yet published: from the logs, under its agent.
                claimed,
                // No list, lately: a lane that says why.
                opus,
                // No list, long ago: no lane.
                local("s3", now - 2 * day, Vec::new()),
            ],
            "dana",
            now,
        );
        let lanes: Vec<(&str, &str, Machine, Option<&str>)> = board
            .lanes
            .iter()
            .map(|lane| {
                (
                    lane.key.as_str(),
                    lane.person.as_str(),
                    lane.machine,
                    lane.agent_handle.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            lanes,
            [
                ("local:claude-code:s5", "dana", Machine::ThisMachine, None),
                (
                    "p_reviewer:claude-code:s4",
                    "dana",
                    Machine::ThisMachine,
                    Some("dana/reviewer")
                ),
                (
                    "p_sec:claude-code:s9",
                    "sam",
                    Machine::Elsewhere,
                    Some("sam/security")
                ),
                ("local:claude-code:s2", "dana", Machine::ThisMachine, None),
                (
                    "p_writer:claude-code:s1",
                    "dana",
                    Machine::ThisMachine,
                    Some("dana/writer")
                ),
                (
                    "p_writer:claude-code:s1/sub",
                    "dana",
                    Machine::ThisMachine,
                    Some("dana/writer")
                ),
            ]
        );
        let mine = &board.lanes[3];
        assert_eq!(mine.tasks[0].status.as_str(), "completed");
        assert_eq!(mine.tasks[0].since_ms, now - 200);
        assert_eq!(mine.room, None);
        assert_eq!(board.lanes[4].room.as_deref(), Some("r_team"));
        let why = board.lanes[0].no_list.as_deref().unwrap();
        assert!(why.contains("CLAUDE_CODE_ENABLE_TODO_TOOLS"), "{why}");
        assert!(board.lanes[1..].iter().all(|lane| lane.no_list.is_none()));
    }

    #[test]
    fn a_session_without_a_list_says_why_for_its_cli_and_model() {
        let why = |framework, model| why_no_list(framework, model);
        for model in ["claude-opus-5-5", "claude-opus-4-8", "claude-sonnet-5"] {
            assert!(why("claude-code", Some(model)).contains("CLAUDE_CODE_ENABLE_TODO_TOOLS"));
        }
        for model in [
            "claude-sonnet-4-6",
            "claude-haiku-4-5-20251001",
            "claude-opus-4-6",
        ] {
            assert!(why("claude-code", Some(model)).contains("TaskCreate or TodoWrite"));
        }
        assert!(why("codex", Some("gpt-5.5")).contains("[tools.update_plan]"));
        assert!(why("gemini", Some("gemini-3.1-pro-preview")).contains("only to gemini-2.x"));
        assert!(why("gemini", Some("gemini-2.5-pro")).contains("write_todos yet"));
    }

    fn arch(seq: u64, sender: &str, body: serde_json::Value) -> ArchEventRow {
        ArchEventRow {
            seq,
            ts_ms: seq as i64 * 1000,
            sender: sender.into(),
            sender_handle: Some(sender.trim_start_matches("p_").replace('_', "/")),
            body: body.to_string(),
        }
    }

    #[test]
    fn a_components_history_names_who_did_what_to_it_and_nothing_else() {
        let rows = [
            arch(
                1,
                "p_dana",
                serde_json::json!({"define": [
                    {"id": "parser", "name": "Parser", "paths": ["src/parser/**"], "depends_on": ["lexer"]},
                    {"id": "lexer", "name": "Lexer", "paths": ["src/lexer/**"], "depends_on": []}]}),
            ),
            arch(
                2,
                "p_dana",
                serde_json::json!({"component": "parser", "status": "working",
                    "files": ["/w/src/parser/mod.rs"], "agent": "p_writer"}),
            ),
            arch(
                3,
                "p_dana_writer",
                serde_json::json!({"component": "lexer", "status": "done"}),
            ),
            arch(4, "p_dana", serde_json::json!({"nonsense": true})),
            arch(
                5,
                "p_dana_writer",
                serde_json::json!({"component": "parser", "status": "done", "note": "merged"}),
            ),
        ];
        let history = component_history_from(&rows, "parser", |id| {
            (id == "p_writer").then(|| "dana/writer".to_owned())
        });
        let summary: Vec<(u64, ComponentChangeKind, Option<&str>, Option<&str>)> = history
            .iter()
            .map(|change| {
                (
                    change.seq,
                    change.kind,
                    change.status.map(ComponentStatus::as_str),
                    change.agent_handle.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (1, ComponentChangeKind::Defined, None, Some("dana")),
                (
                    2,
                    ComponentChangeKind::Status,
                    Some("working"),
                    Some("dana/writer")
                ),
                (
                    5,
                    ComponentChangeKind::Status,
                    Some("done"),
                    Some("dana/writer")
                ),
            ]
        );
        assert_eq!(history[0].depends_on, ["lexer"]);
        assert_eq!(history[1].files, ["/w/src/parser/mod.rs"]);
        assert_eq!(history[2].note.as_deref(), Some("merged"));
    }

    #[test]
    fn cost_rows_keep_every_grouping_value_and_name_the_persons_teams() {
        let teams: Teams =
            toml::from_str("[teams]\ncore = [\"dana\", \"sam\"]\nsec = [\"sam\"]\n").unwrap();
        let figure = |person: &str, unpriced: u64| Figure {
            group: [
                (Grouping::Room, "r".to_owned()),
                (Grouping::Day, "2026-11-30".to_owned()),
                (Grouping::Agent, format!("{person}/bot")),
                (Grouping::Person, person.to_owned()),
                (Grouping::Model, "m".to_owned()),
            ]
            .into_iter()
            .collect(),
            input: 1,
            output: 2,
            cache_write: 3,
            cache_read: 4,
            cost_usd: 0.5,
            unpriced_entries: unpriced,
            unpriced_models: if unpriced > 0 {
                vec!["m".into()]
            } else {
                Vec::new()
            },
            local_entries: 0,
            latest_ms: 7,
        };
        let rows = cost_rows_from(vec![figure("sam", 0), figure("lee", 2)], &teams);
        assert_eq!(rows[0].teams, ["core", "sec"]);
        assert_eq!(rows[1].teams, Vec::<String>::new());
        assert_eq!(
            (
                rows[0].agent.as_str(),
                rows[0].day.as_str(),
                rows[0].room.as_deref()
            ),
            ("sam/bot", "2026-11-30", Some("r"))
        );
        assert_eq!(
            (rows[1].unpriced_entries, rows[1].unpriced_models.clone()),
            (2, vec!["m".to_owned()])
        );
    }

    fn status(
        agent: &str,
        room: &str,
        state: &str,
        detail: Option<&str>,
        ts: i64,
    ) -> AgentStatusView {
        AgentStatusView {
            agent: agent.into(),
            handle: None,
            room: room.into(),
            state: crate::wire(state),
            detail: detail.map(str::to_owned),
            ts_ms: ts,
        }
    }

    fn ping(asker: &str, id: &str, state: PingState) -> PingView {
        PingView {
            room: "r_home".into(),
            ping: id.into(),
            seq: 1,
            asker: asker.into(),
            asker_handle: None,
            question: "may I?".into(),
            options: vec!["yes".into(), "no".into()],
            recipients: vec!["p_dana".into()],
            asked_ms: Some(1),
            expires_ms: None,
            state,
            answered_by: None,
            answered_by_handle: None,
            answered_ms: None,
            choice: None,
            text: None,
        }
    }

    fn rows() -> SessionRows {
        let bound = |agent: &str, session: &str, room: Option<&str>, at: i64| BoundSession {
            agent: agent.into(),
            session: SessionRow {
                framework: "claude-code".into(),
                session_id: session.into(),
                transcript: None,
                cwd: None,
                room: room.map(str::to_owned),
                started_ms: at,
                updated_ms: at,
            },
        };
        let agent = |id: &str, handle: &str, owner: &str, controls: &[&str]| KnownAgent {
            id: id.into(),
            handle: Some(handle.into()),
            owner: Some(owner.into()),
            controls: controls.iter().map(|c| (*c).to_owned()).collect(),
        };
        SessionRows {
            me: "p_dana".into(),
            me_handle: "dana".into(),
            now_ms: 1_000_000,
            tasks: vec![published("p_writer", "dana/writer", "s1", 500)],
            usage: vec![UsageSession {
                agent: "p_sec".into(),
                framework: "codex".into(),
                session_id: "t9".into(),
                room: "r_shared".into(),
                last_ms: 900,
            }],
            local: vec![
                local("s1", 600, Vec::new()),
                local("loose", 999_000, Vec::new()),
            ],
            bound: vec![
                bound("p_writer", "s0", Some("r_parser"), 400),
                bound("p_writer", "s1", None, 550),
            ],
            agents: vec![
                agent("p_writer", "dana/writer", "p_dana", &["pause"]),
                agent("p_sec", "sam/security", "p_sam", &[]),
            ],
            statuses: vec![
                status("p_writer", "r_parser", "waiting_human", Some("may I?"), 700),
                status("p_sec", "r_shared", "error", Some("rate limited"), 800),
            ],
            pings: vec![
                ping("p_writer", "q1", PingState::Open),
                ping("p_writer", "q0", PingState::Answered),
            ],
            waiting: vec![ping("p_writer", "q1", PingState::Open)],
            messages: vec![
                MessageCount {
                    room: "r_parser".into(),
                    sender: "p_writer".into(),
                    count: 4,
                    last_ms: 990_000,
                },
                MessageCount {
                    room: "r_other".into(),
                    sender: "p_writer".into(),
                    count: 9,
                    last_ms: 990_000,
                },
            ],
        }
    }

    #[test]
    fn sessions_that_need_the_person_come_first_with_what_they_need() {
        let board = session_board_from(&rows());
        let keys: Vec<&str> = board.iter().map(|session| session.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                // Needs you: the writer's bound session waits (its status is in its room),
                // then sam's agent in error.
                "p_sec:codex:t9",
                "p_writer:claude-code:s0",
                // Then by activity.
                "local:claude-code:loose",
                "p_writer:claude-code:s1",
            ]
        );
        let sec = &board[0];
        assert_eq!(sec.state, AgentState::Error);
        assert_eq!(sec.last_error.as_deref(), Some("rate limited"));
        assert_eq!((sec.person.as_str(), sec.mine), ("sam", false));
        assert_eq!(sec.machine, Machine::Elsewhere);
        let waiting = &board[1];
        assert_eq!(waiting.state, AgentState::WaitingHuman);
        assert_eq!(waiting.bound_room.as_deref(), Some("r_parser"));
        assert_eq!((waiting.questions_asked, waiting.questions_waiting), (2, 1));
        assert_eq!(waiting.messages_last_hour, 4, "in its room only");
        assert_eq!(waiting.controls, ["pause"]);
        assert!(waiting.mine && waiting.needs_you);
        let loose = &board[2];
        assert_eq!(
            (loose.state, loose.agent.as_deref()),
            (AgentState::Working, None)
        );
        assert_eq!(loose.person, "dana");
        let other = &board[3];
        assert_eq!(
            other.state,
            AgentState::Idle,
            "the status is another session's"
        );
        assert_eq!(other.machine, Machine::ThisMachine);
        assert_eq!(other.rooms, ["r_home"]);
        assert_eq!(other.last_active_ms, 600);
        // The agent's questions are its current session's.
        assert_eq!((other.questions_waiting, other.needs_you), (0, false));
    }

    #[test]
    fn person_is_the_handles_first_part() {
        assert_eq!(person_of("dana/writer"), "dana");
        assert_eq!(person_of("sam"), "sam");
    }
}
