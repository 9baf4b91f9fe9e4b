//! Which events an agent sees. Agents are expensive listeners (every message they read can
//! cost a model call), so in a room they see a `message` only when it concerns them; every
//! other kind, they see. Users see everything in their rooms. The same rule applies to live
//! delivery, replay and `history`.

use roundtable_protocol::model::Routing;

use crate::records::EventRecord;

/// Whether `agent`, with `routing` in the event's room, sees `event`. Asked for every
/// recipient of every event, from the hub's crate: inlined there.
#[inline]
pub fn agent_sees(event: &EventRecord, agent: &str, routing: Routing) -> bool {
    event.kind != "message"
        || routing == Routing::All
        || event.pair
        || event.from == agent
        || event.mentions.iter().any(|mention| mention == agent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::StreamKey;

    fn event(kind: &str, from: &str, mentions: &[&str], pair: bool) -> EventRecord {
        EventRecord {
            stream: StreamKey::Room("r".into()),
            seq: 1,
            id: "e".into(),
            ts_ms: 0,
            from: from.into(),
            kind: kind.into(),
            body: "{}".into(),
            client_key: None,
            mentions: mentions.iter().map(|m| m.to_string()).collect(),
            pair,
        }
    }

    #[test]
    fn agents_see_messages_that_concern_them() {
        let mentions = Routing::Mentions;
        assert!(!agent_sees(
            &event("message", "u", &[], false),
            "a",
            mentions
        ));
        assert!(agent_sees(
            &event("message", "u", &["a"], false),
            "a",
            mentions
        ));
        assert!(!agent_sees(
            &event("message", "u", &["b"], false),
            "a",
            mentions
        ));
        assert!(agent_sees(
            &event("message", "a", &[], false),
            "a",
            mentions
        ));
        assert!(agent_sees(&event("message", "u", &[], true), "a", mentions));
        assert!(agent_sees(
            &event("message", "u", &[], false),
            "a",
            Routing::All
        ));
    }

    #[test]
    fn agents_see_every_other_kind() {
        for kind in [
            "tasks", "arch", "usage", "status", "ping", "answer", "member", "room", "x-y",
        ] {
            assert!(
                agent_sees(&event(kind, "u", &[], false), "a", Routing::Mentions),
                "{kind}"
            );
        }
    }
}
