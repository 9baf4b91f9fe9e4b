//! The sessions board: every agent session known here, live or resting, with its agent,
//! what it waits for and the controls the person has over it.

use roundtable_protocol::client::ControlAction;

use super::*;

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
    pub controls: Vec<ControlAction>,
    /// A question waits for the person, or the agent waits for a person or is in error.
    pub needs_you: bool,
    /// Other agents on the components this session's agent edits or claims ("sam/bot is
    /// also editing `parser` (src/parser/lexer.rs, 2 min ago)").
    pub overlaps: Vec<String>,
}

/// An agent the sessions board may name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KnownAgent {
    pub id: String,
    pub handle: Option<String>,
    pub owner: Option<String>,
    /// Controls in force on it, each everywhere (`room` None) or in one room: what its own
    /// cache on this machine saw, and what we put on it.
    pub controls: Vec<ControlView>,
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
    /// Agents' latest reports on components, for who is on what.
    pub touches: Vec<crate::work::overlaps::Touch>,
}

/// A local session whose logs moved this recently is working.
pub(super) const LIVE_MS: i64 = 2 * 60_000;

#[derive(Default)]
pub(super) struct Gathered {
    agent: Option<String>,
    framework: String,
    session_id: String,
    rooms: BTreeSet<String>,
    bound_room: Option<String>,
    here: bool,
    last_ms: i64,
}

pub(super) fn gathered_entry<'a>(
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
                controls: known.map_or_else(Vec::new, |agent| {
                    controls_on_session(&agent.controls, session.bound_room.as_deref())
                }),
                needs_you,
                overlaps: session.agent.as_deref().map_or_else(Vec::new, |agent| {
                    crate::work::overlaps::overlaps_for(agent, &rows.touches, rows.now_ms)
                        .into_iter()
                        .map(|overlap| overlap.text)
                        .collect()
                }),
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

/// The actions in force on a session bound to `room` (a pause or stop there, or everywhere),
/// each once; a session bound to no room answers to the controls that hold everywhere.
fn controls_on_session(controls: &[ControlView], room: Option<&str>) -> Vec<ControlAction> {
    let mut actions: Vec<ControlAction> = controls
        .iter()
        .filter(|control| control.action != ControlAction::Resume)
        .filter(|control| control.room.is_none() || control.room.as_deref() == room)
        .map(|control| control.action)
        .collect();
    actions.sort();
    actions.dedup();
    actions
}

/// The sessions and controls of this person's agents onboarded on this machine (same hub),
/// read from each agent's own cache.
pub(super) fn agents_here(profiles: &Path, me_handle: &str, hub: &str) -> AgentsHere {
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
        controls.insert(
            profile.principal.clone(),
            view.controls().unwrap_or_default(),
        );
    }
    (bound, controls)
}

/// What the agents onboarded on this machine say of themselves: their bound sessions and
/// the controls their own caches saw ([`agents_here`]).
pub type AgentsHere = (Vec<BoundSession>, HashMap<String, Vec<ControlView>>);

/// The sessions board as `view` holds it, for principal `me` (`is_user`: a person, not an
/// agent) at `now`: `local` the sessions of this machine's logs, `here` what the agents on
/// this machine say of themselves.
pub fn session_board_in(
    view: &CacheView,
    (me, me_handle, is_user): (&str, &str, bool),
    local: Vec<LocalSession>,
    (bound, controls): AgentsHere,
    now: i64,
) -> Result<Vec<SessionView>, CacheError> {
    let mut rows = SessionRows {
        tasks: view.task_sessions(&TaskFilter::default())?,
        usage: view.usage_sessions()?,
        local,
        bound,
        statuses: view.agent_statuses()?,
        pings: view.pings(now)?,
        waiting: view.open_pings_for(me, is_user, now)?,
        messages: view.message_counts_since(now - 3_600_000)?,
        touches: view.component_touches(now - crate::work::overlaps::WINDOW_MS)?,
        now_ms: now,
        me: me.to_owned(),
        me_handle: me_handle.to_owned(),
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
    let issued = view.issued_controls(me)?;
    for id in ids {
        let principal = view.principal(&id)?;
        // What the agent's own cache on this machine saw (the hub's word, whoever lifted
        // what), else what we put on it.
        let in_force = controls
            .get(&id)
            .or_else(|| issued.get(&id))
            .cloned()
            .unwrap_or_default();
        rows.agents.push(KnownAgent {
            controls: in_force,
            handle: principal.as_ref().map(|p| p.handle.clone()),
            owner: principal.and_then(|p| p.owner),
            id,
        });
    }
    Ok(session_board_from(&rows))
}

impl Core {
    /// The sessions board; `profiles` holds the agents onboarded on this machine.
    pub async fn session_board(&self, profiles: &Path) -> Result<Vec<SessionView>, CoreError> {
        let profile = self.profile();
        let (me, me_handle) = (profile.principal.clone(), profile.handle.clone());
        let hub = profile.hub.authority.clone();
        let is_user = !self.is_agent();
        let claims = SessionClaims::beside(profiles);
        let profiles = profiles.to_path_buf();
        self.read(move |view| {
            let here = agents_here(&profiles, &me_handle, &hub);
            let local = claimed_local_sessions(view, &claims)?;
            session_board_in(view, (&me, &me_handle, is_user), local, here, now_ms())
        })
        .await
    }
}
