//! What a caller may learn exists (protocol amendment 11). A command that names a principal
//! the caller may not see gets exactly the answer, code and text, it would get for a handle
//! or id that names no one, so probing the hub with commands reveals no more than the
//! directory does; and no error text names a principal the caller may not see.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::model::PrincipalKind;

use super::{Caller, Engine, ExecError, refuse};
use crate::records::PrincipalRecord;

/// The answer for an agent id that names no agent the caller may see.
pub(super) const NO_SUCH_AGENT: &str = "no agent you can see has this id";

/// A caller's own input (an id, a handle) as an error text quotes it: in full when short,
/// else its first 64 bytes, so a 60 KB id sent a thousand times is not echoed back a
/// thousand times.
pub(super) fn shown(input: &str) -> String {
    const SHOWN_MAX: usize = 64;
    if input.len() <= SHOWN_MAX {
        return format!("{input:?}");
    }
    let mut end = SHOWN_MAX;
    while !input.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &input[..end], input.len())
}

impl Engine {
    /// Whether `viewer` may know that `target` exists: the directory shows it to the viewer
    /// (kin, contacts, or as discoverable as that), or they share a room (whose member list
    /// names it anyway).
    pub(super) fn knows(&self, viewer: &str, target: &PrincipalRecord) -> bool {
        if viewer == target.id {
            return true;
        }
        let Some(viewer_record) = self.state.principal(viewer) else {
            return false;
        };
        self.state.may_see(viewer_record, target)
            || self
                .state
                .rooms_of
                .get(viewer)
                .into_iter()
                .flatten()
                .any(|room| self.state.is_member(room, &target.id))
    }

    /// The agent `agent` names, if the caller may know it exists; otherwise the refusal
    /// an unknown id gets (a user's id, too, is no agent).
    pub(super) fn known_agent(
        &self,
        caller: &Caller,
        agent: &str,
    ) -> Result<PrincipalRecord, ExecError> {
        match self.state.principal(agent) {
            Some(principal)
                if principal.kind == PrincipalKind::Agent && self.knows(&caller.id, principal) =>
            {
                Ok(principal.clone())
            }
            _ => refuse(ErrorCode::NotFound, NO_SUCH_AGENT),
        }
    }

    /// The principal `handle` names, if the caller may know it exists; otherwise the
    /// refusal an unknown handle gets.
    pub(super) fn known_handle(
        &self,
        caller: &Caller,
        handle: &str,
    ) -> Result<PrincipalRecord, ExecError> {
        match self.state.by_handle(handle) {
            Some(principal) if self.knows(&caller.id, principal) => Ok(principal.clone()),
            _ => refuse(
                ErrorCode::NotFound,
                format!("no principal you can see has the handle {}", shown(handle)),
            ),
        }
    }
}
