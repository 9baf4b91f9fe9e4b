//! The tasks board: a swim lane per agent session, from what sessions published and what
//! this machine's logs show, with why a session keeps no list when it keeps none.

use super::*;

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
pub(super) const NO_LIST_SHOWN_MS: i64 = 24 * 3_600_000;

/// Whether Claude Code offers `model` its task tools without being asked
/// (`CLAUDE_CODE_ENABLE_TODO_TOOLS`): since 2.1.233 only the models before Opus 4.8 and
/// Sonnet 5 get them by default.
pub(super) fn claude_offers_task_tools(model: &str) -> bool {
    let model = crate::work::pricing::canonical_model(model);
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
pub(super) fn local_tasks(session: &LocalSession, at: i64) -> Vec<TaskView> {
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
}
