//! The architecture boards: a room's components as their last `arch` events left them, and
//! a component's history.

use super::*;

/// A room's components.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ArchitectureBoard {
    pub room: String,
    pub title: Option<String>,
    /// What the components were inferred from (`Cargo workspace, npm packages`); `None` when
    /// they were written (`.roundtable/architecture.toml`, or an agent's `define_components`).
    pub source: Option<String>,
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
            ArchBody::Define { define, .. } => {
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
                ..
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

/// The architecture board of every room that has components, by room title, as `view`
/// holds them.
pub fn architecture_boards_in(view: &CacheView) -> Result<Vec<ArchitectureBoard>, CacheError> {
    let mut boards = Vec::new();
    for room in view.rooms()? {
        let components = view.components(&room.id)?;
        if !components.is_empty() {
            boards.push(ArchitectureBoard {
                room: room.id,
                title: room.title,
                source: components.iter().find_map(|c| c.source.clone()),
                components,
            });
        }
    }
    Ok(boards)
}

/// Everything that happened to `component` of `room` in `view`, oldest first.
pub fn component_history_in(
    view: &CacheView,
    room: &str,
    component: &str,
) -> Result<Vec<ComponentChange>, CacheError> {
    let rows = view.arch_events(room)?;
    let mut handles: HashMap<String, Option<String>> = HashMap::new();
    for row in &rows {
        if let Ok(ArchBody::Status {
            agent: Some(agent), ..
        }) = serde_json::from_str::<ArchBody>(&row.body)
            && !handles.contains_key(&agent)
        {
            let handle = view.handle_of(&agent)?;
            handles.insert(agent, handle);
        }
    }
    Ok(component_history_from(&rows, component, |id| {
        handles.get(id).cloned().flatten()
    }))
}

/// `boards` at `now_ms`: a claim not renewed within
/// [`CLAIM_LIFETIME_MS`](crate::work::overlaps::CLAIM_LIFETIME_MS) no longer counts, here as
/// in what agents are told. Pure.
pub fn without_lapsed_claims(
    mut boards: Vec<ArchitectureBoard>,
    now_ms: i64,
) -> Vec<ArchitectureBoard> {
    let agents = boards
        .iter_mut()
        .flat_map(|board| board.components.iter_mut())
        .flat_map(|component| component.agents.iter_mut());
    for agent in agents {
        if !crate::work::overlaps::claim_counts(agent.ts_ms, now_ms) {
            agent.claimed = false;
        }
    }
    boards
}

impl Core {
    /// The architecture board of every room that has components, by room title.
    pub async fn architecture_boards(&self) -> Result<Vec<ArchitectureBoard>, CoreError> {
        let boards = self.read(architecture_boards_in).await?;
        Ok(without_lapsed_claims(boards, now_ms()))
    }

    /// Everything that happened to a component of a room, oldest first.
    pub async fn component_history(
        &self,
        room: &str,
        component: &str,
    ) -> Result<Vec<ComponentChange>, CoreError> {
        let (room, component) = (room.to_owned(), component.to_owned());
        self.read(move |view| component_history_in(view, &room, &component))
            .await
    }
}
