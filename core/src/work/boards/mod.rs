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

use super::figures::{Figure, Grouping, Teams};
use super::pricing::Pricing;
use crate::cache::SessionOwner;
use crate::cache::{
    AgentStatusView, ArchEventRow, CacheError, CacheView, ComponentView, ControlView, LocalSession,
    MessageCount, PingState, PingView, SessionRow, TaskFilter, TaskSession, TaskStateChange,
    TaskView, UsageQuery, UsageSession,
};
use crate::log_events::Framework;
use crate::screens::AgentState;
use crate::session_claims::SessionClaims;
use crate::{Core, CoreError, now_ms};

mod architecture;
mod costs;
#[cfg(test)]
mod demo;
mod sessions;
mod tasks;
#[cfg(test)]
mod tests;

pub use architecture::*;
pub use costs::*;
pub use sessions::*;
pub use tasks::*;

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

/// This machine's sessions, each with the agent that claimed it.
fn claimed_local_sessions(
    view: &CacheView,
    claims: &SessionClaims,
) -> Result<Vec<LocalSession>, CacheError> {
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
