//! Who is on what. Two agents editing the same component at once (on any machines, of any
//! owners sharing a room) is how work gets done twice or undone: each is told of the other at
//! its next tool boundary or turn end, the architecture board marks the component, and the
//! person sees it on the sessions board. An agent may claim a component; others touching it
//! are told who holds it. All of it advisory: nothing is ever refused.
//!
//! The inputs are each agent's latest report per component (the `arch` status events its
//! edits publish, and claims); [`overlaps_for`] is pure, with the time passed in.

use std::collections::HashMap;

use roundtable_protocol::bodies::ComponentStatus;
use serde::Serialize;

/// Edits this close together are "at once".
pub const WINDOW_MS: i64 = 15 * 60 * 1000;

/// An agent's latest report on a component of a room.
#[derive(Debug, Clone, PartialEq)]
pub struct Touch {
    pub room: String,
    pub component: String,
    /// The agent's id.
    pub agent: String,
    pub handle: Option<String>,
    pub status: ComponentStatus,
    pub files: Vec<String>,
    pub ts_ms: i64,
    pub claimed: bool,
}

impl Touch {
    fn editing(&self, now_ms: i64) -> bool {
        self.status == ComponentStatus::Working && now_ms - self.ts_ms <= WINDOW_MS
    }

    fn name(&self) -> &str {
        self.handle.as_deref().unwrap_or(&self.agent)
    }
}

/// Another agent on a component `me` is editing (or has claimed).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct Overlap {
    pub room: String,
    pub component: String,
    /// The other agent's id and handle.
    pub other: String,
    pub other_handle: String,
    /// The file it edited last, if it said.
    pub file: Option<String>,
    /// When it reported it.
    pub ts_ms: i64,
    /// It claims the component.
    pub claimed: bool,
    /// In words, for the agent and the person.
    pub text: String,
}

/// "2 min ago", "just now".
fn ago(ms: i64) -> String {
    match ms.max(0) / 60_000 {
        0 => "just now".into(),
        1 => "1 min ago".into(),
        minutes if minutes < 120 => format!("{minutes} min ago"),
        minutes => format!("{} h ago", minutes / 60),
    }
}

/// The other agents on the components `me` edits within [`WINDOW_MS`] of `now_ms` or
/// claims: each editing it within the window, or claiming it. Newest first. Pure.
pub fn overlaps_for(me: &str, touches: &[Touch], now_ms: i64) -> Vec<Overlap> {
    let mine: Vec<&Touch> = touches
        .iter()
        .filter(|touch| touch.agent == me && (touch.editing(now_ms) || touch.claimed))
        .collect();
    let mut found: Vec<Overlap> = Vec::new();
    for own in mine {
        for other in touches.iter().filter(|other| {
            other.agent != me
                && other.room == own.room
                && other.component == own.component
                && (other.editing(now_ms) || other.claimed)
        }) {
            let file = other.files.last().cloned();
            let doing = if other.claimed {
                format!("has claimed `{}`", other.component)
            } else {
                format!("is also editing `{}`", other.component)
            };
            let detail = match &file {
                Some(file) => format!(" ({file}, {})", ago(now_ms - other.ts_ms)),
                None => format!(" ({})", ago(now_ms - other.ts_ms)),
            };
            found.push(Overlap {
                room: other.room.clone(),
                component: other.component.clone(),
                other: other.agent.clone(),
                other_handle: other.name().to_owned(),
                file,
                ts_ms: other.ts_ms,
                claimed: other.claimed,
                text: format!("{} {doing}{detail}", other.name()),
            });
        }
    }
    found.sort_by(|a, b| b.ts_ms.cmp(&a.ts_ms).then_with(|| a.text.cmp(&b.text)));
    found.dedup_by(|a, b| a.room == b.room && a.component == b.component && a.other == b.other);
    found
}

/// The overlaps not told within the window: each (room, component, other) once a window,
/// or again when the other claims what it only edited before. Pure.
pub fn untold(
    overlaps: Vec<Overlap>,
    told: &HashMap<(String, String, String), i64>,
    now_ms: i64,
) -> Vec<Overlap> {
    overlaps
        .into_iter()
        .filter(|overlap| {
            let key = (
                overlap.room.clone(),
                overlap.component.clone(),
                overlap.other.clone(),
            );
            told.get(&key)
                .is_none_or(|&at| now_ms - at > WINDOW_MS || overlap.ts_ms > at)
        })
        .collect()
}

/// What an agent is told of its overlaps, in a few lines.
pub fn notice(overlaps: &[Overlap]) -> String {
    let mut text = String::from(
        "Roundtable: other agents are on the components you are editing (advisory; talk to them \
         in the room, or claim the component with claim_component):",
    );
    for overlap in overlaps {
        text.push_str("\n- ");
        text.push_str(&overlap.text);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_212_800_000;

    fn touch(agent: &str, component: &str, minutes_ago: i64, claimed: bool) -> Touch {
        Touch {
            room: "r_1".into(),
            component: component.into(),
            agent: format!("p_{agent}"),
            handle: Some(format!("dana/{agent}")),
            status: ComponentStatus::Working,
            files: vec![format!("src/{component}/lexer.rs")],
            ts_ms: NOW - minutes_ago * 60_000,
            claimed,
        }
    }

    #[test]
    fn two_agents_editing_one_component_within_the_window_are_told_of_each_other() {
        let touches = [
            touch("writer", "parser", 1, false),
            touch("reviewer", "parser", 2, false),
            touch("tester", "lexer", 0, false),
        ];
        let writer = overlaps_for("p_writer", &touches, NOW);
        assert_eq!(writer.len(), 1);
        assert_eq!(
            writer[0].text,
            "dana/reviewer is also editing `parser` (src/parser/lexer.rs, 2 min ago)"
        );
        let reviewer = overlaps_for("p_reviewer", &touches, NOW);
        assert_eq!(reviewer[0].other_handle, "dana/writer");
        assert!(overlaps_for("p_tester", &touches, NOW).is_empty());
    }

    #[test]
    fn old_edits_done_work_and_other_rooms_are_no_overlap_but_a_claim_is() {
        let mut other_room = touch("reviewer", "parser", 1, false);
        other_room.room = "r_2".into();
        let mut done = touch("tester", "parser", 1, false);
        done.status = ComponentStatus::Done;
        let touches = [
            touch("writer", "parser", 1, false),
            touch("reviewer", "parser", 16, false),
            other_room,
            done,
        ];
        assert!(overlaps_for("p_writer", &touches, NOW).is_empty());
        // My old edit is no overlap either; a claim, however old, is.
        let touches = [
            touch("writer", "parser", 20, false),
            touch("reviewer", "parser", 1, false),
        ];
        assert!(overlaps_for("p_writer", &touches, NOW).is_empty());
        let touches = [
            touch("writer", "parser", 1, false),
            touch("reviewer", "parser", 90, true),
        ];
        let told = overlaps_for("p_writer", &touches, NOW);
        assert_eq!(
            told[0].text,
            "dana/reviewer has claimed `parser` (src/parser/lexer.rs, 90 min ago)"
        );
    }

    #[test]
    fn each_overlap_is_told_once_a_window_and_again_when_it_changes() {
        let touches = [
            touch("writer", "parser", 1, false),
            touch("reviewer", "parser", 2, false),
        ];
        let found = overlaps_for("p_writer", &touches, NOW);
        let key = (
            "r_1".to_owned(),
            "parser".to_owned(),
            "p_reviewer".to_owned(),
        );
        assert_eq!(untold(found.clone(), &HashMap::new(), NOW).len(), 1);
        let told = HashMap::from([(key.clone(), NOW)]);
        assert!(untold(found.clone(), &told, NOW + 60_000).is_empty());
        assert_eq!(untold(found.clone(), &told, NOW + WINDOW_MS + 1).len(), 1);
        // A newer report from the other (a claim, say) is told again.
        let mut claimed = found;
        claimed[0].ts_ms = NOW + 1;
        assert_eq!(untold(claimed, &told, NOW + 60_000).len(), 1);
        assert!(notice(&overlaps_for("p_writer", &touches, NOW)).contains("\n- dana/reviewer"));
    }
}
