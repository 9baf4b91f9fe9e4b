//! From events to what the apps show. [`project`] is a pure function of one event: it says
//! what the event changes ([`Write`]s), and the cache applies those writes so that an older
//! event never overwrites a newer one (each value remembers the seq, or time, that set it).
//! Events can therefore be applied in any order, which gap filling needs: it brings old
//! events in after new ones.
//!
//! An event whose body is not what its kind promises (a newer hub, a buggy client) changes
//! nothing here; it stays in the cache's event log.

use roundtable_protocol::bodies::{
    AnswerBody, ArchBody, ContactBody, ControlBody, MemberAction, MemberBody, MessageBody,
    PingBody, RoomBody, RoomChangeBody, StatusBody, TasksBody, UsageBody,
};
use roundtable_protocol::client::ControlAction;
use roundtable_protocol::model::RequestState;
use roundtable_protocol::server::Event;
use roundtable_protocol::ts;
use serde::de::DeserializeOwned;

/// One change an event makes to the projections.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A room's title and/or topic (fields `None` are untouched).
    RoomFields {
        room: String,
        title: Option<String>,
        topic: Option<String>,
        creator: Option<String>,
        seq: u64,
    },
    /// We joined (or left) a room, per our inbox.
    RoomJoined {
        room: String,
        joined: bool,
        seq: u64,
    },
    Member {
        room: String,
        principal: String,
        present: bool,
        seq: u64,
    },
    Mentions {
        room: String,
        seq: u64,
        principals: Vec<String>,
    },
    /// A session's task list; the newest (by time, then seq) wins.
    Tasks {
        agent: String,
        framework: String,
        session_id: String,
        room: String,
        seq: u64,
        ts_ms: i64,
        source: String,
        tasks: String,
        /// Each task's key (its id, or its title when it has none) and status, for the
        /// history of when tasks changed state.
        states: Vec<(String, String)>,
    },
    /// A definition of a room's components, before its components: it clears what it
    /// replaces (inferred components a written definition overrides, or an older inferred
    /// definition's components).
    ComponentsDefined {
        room: String,
        ids: Vec<String>,
        source: Option<String>,
        seq: u64,
    },
    ComponentDef {
        room: String,
        id: String,
        name: String,
        description: Option<String>,
        paths: String,
        depends_on: String,
        /// Set when inferred from the repository (see `ArchBody::Define`).
        source: Option<String>,
        seq: u64,
    },
    ComponentStatus {
        room: String,
        id: String,
        status: String,
        note: Option<String>,
        files: Option<String>,
        by: String,
        seq: u64,
        ts_ms: i64,
        /// A claim (`true`) or its release (`false`); none leaves a claim as it was.
        claim: Option<bool>,
    },
    Usage {
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
    },
    Ping {
        room: String,
        ping: String,
        seq: u64,
        asker: String,
        question: String,
        options: Option<String>,
        to: Option<String>,
        expires_ms: Option<i64>,
    },
    /// An answer; the first (lowest seq) wins.
    Answer {
        room: String,
        ping: String,
        seq: u64,
        by: String,
        choice: Option<String>,
        text: Option<String>,
    },
    /// The asker's own client had the answer (an MCP client's prompt): the ping waits no
    /// more, as if it expired then (`x-ping-withdrawn`).
    PingWithdrawn {
        room: String,
        ping: String,
        asker: String,
        at_ms: i64,
    },
    AgentStatus {
        agent: String,
        room: String,
        seq: u64,
        ts_ms: i64,
        state: String,
        detail: Option<String>,
    },
    Request {
        id: String,
        from: String,
        to: String,
        state: RequestState,
        message: Option<String>,
        seq: u64,
        ts_ms: i64,
    },
    Contact {
        principal: String,
        since_ms: i64,
    },
    /// A pause or stop on us, or a resume (which lifts `room`'s control, or every control
    /// when `room` is `None`).
    Control {
        room: Option<String>,
        action: ControlAction,
        by: String,
        seq: u64,
        reason: Option<String>,
    },
}

fn body<T: DeserializeOwned>(event: &Event) -> Option<T> {
    serde_json::from_value(event.body.clone()).ok()
}

impl Write {
    /// The agent whose work this write reports, when the event's body named it (and it
    /// may be someone other than the sender): see the cache's `may_report`.
    pub fn reported_agent(&self) -> Option<&str> {
        match self {
            Write::Tasks { agent, .. } | Write::Usage { agent, .. } => Some(agent),
            Write::ComponentStatus { by, .. } => Some(by),
            _ => None,
        }
    }
}

fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("JSON values serialize")
}

/// What `event` changes, as seen by the principal `me`.
pub fn project(me: &str, event: &Event) -> Vec<Write> {
    let ts_ms = ts::parse_millis(&event.ts).unwrap_or(0);
    let seq = event.seq;
    match &event.room {
        Some(room) => project_room(room, seq, ts_ms, event),
        None => project_inbox(me, seq, ts_ms, event),
    }
    .unwrap_or_default()
}

fn project_room(room: &str, seq: u64, ts_ms: i64, event: &Event) -> Option<Vec<Write>> {
    let room = room.to_owned();
    Some(match event.kind.as_str() {
        "message" => {
            let message: MessageBody = body(event)?;
            match message.mentions {
                Some(principals) if !principals.is_empty() => vec![Write::Mentions {
                    room,
                    seq,
                    principals,
                }],
                _ => Vec::new(),
            }
        }
        "room" => {
            let fields: RoomBody = body(event)?;
            vec![Write::RoomFields {
                room,
                title: fields.title,
                topic: fields.topic,
                creator: (seq == 1).then(|| event.from.clone()),
                seq,
            }]
        }
        "member" => {
            let member: MemberBody = body(event)?;
            vec![Write::Member {
                room,
                principal: member.principal,
                present: member.action == MemberAction::Join,
                seq,
            }]
        }
        "tasks" => {
            let tasks: TasksBody = body(event)?;
            let states = tasks
                .tasks
                .iter()
                .map(|task| {
                    (
                        task.id.clone().unwrap_or_else(|| task.title.clone()),
                        json(&task.status).trim_matches('"').to_owned(),
                    )
                })
                .collect();
            vec![Write::Tasks {
                agent: tasks.session.agent,
                framework: tasks.session.framework,
                session_id: tasks.session.session_id,
                room,
                seq,
                ts_ms,
                source: tasks.source,
                tasks: json(&tasks.tasks),
                states,
            }]
        }
        "arch" => match body::<ArchBody>(event)? {
            ArchBody::Define { define, source } => std::iter::once(Write::ComponentsDefined {
                room: room.clone(),
                ids: define
                    .iter()
                    .map(|component| component.id.clone())
                    .collect(),
                source: source.clone(),
                seq,
            })
            .chain(define.into_iter().map(|component| Write::ComponentDef {
                room: room.clone(),
                id: component.id,
                name: component.name,
                description: component.description,
                paths: json(&component.paths),
                depends_on: json(&component.depends_on),
                source: source.clone(),
                seq,
            }))
            .collect(),
            ArchBody::Status {
                component,
                status,
                note,
                files,
                agent,
                claim,
            } => vec![Write::ComponentStatus {
                room,
                id: component,
                status: json(&status).trim_matches('"').to_owned(),
                note,
                files: files.map(|files| json(&files)),
                // An owner reports for its agent (the agent's edits seen in its logs).
                by: agent.unwrap_or_else(|| event.from.clone()),
                seq,
                ts_ms,
                claim,
            }],
        },
        "usage" => {
            let usage: UsageBody = body(event)?;
            vec![Write::Usage {
                room,
                seq,
                agent: usage.session.agent,
                framework: usage.session.framework,
                session_id: usage.session.session_id,
                model: usage.model,
                input: usage.input,
                output: usage.output,
                cache_write: usage.cache_write,
                cache_read: usage.cache_read,
                cost_usd: usage.cost_usd,
                from_ms: ts::parse_millis(&usage.from).unwrap_or(ts_ms),
                to_ms: ts::parse_millis(&usage.to).unwrap_or(ts_ms),
            }]
        }
        "status" => {
            let status: StatusBody = body(event)?;
            vec![Write::AgentStatus {
                agent: event.from.clone(),
                room,
                seq,
                ts_ms,
                state: json(&status.state).trim_matches('"').to_owned(),
                detail: status.detail,
            }]
        }
        "ping" => {
            let ping: PingBody = body(event)?;
            vec![Write::Ping {
                room,
                ping: ping.ping,
                seq,
                asker: event.from.clone(),
                question: ping.question,
                options: ping.options.map(|options| json(&options)),
                to: ping.to.map(|to| json(&to)),
                expires_ms: ping.expires_at.as_deref().and_then(ts::parse_millis),
            }]
        }
        "answer" => {
            let answer: AnswerBody = body(event)?;
            vec![Write::Answer {
                room,
                ping: answer.ping,
                seq,
                by: event.from.clone(),
                choice: answer.choice,
                text: answer.text,
            }]
        }
        "x-ping-withdrawn" => {
            let withdrawn: PingWithdrawnBody = body(event)?;
            vec![Write::PingWithdrawn {
                room,
                ping: withdrawn.ping,
                asker: event.from.clone(),
                at_ms: ts_ms,
            }]
        }
        _ => Vec::new(),
    })
}

/// `x-ping-withdrawn`'s body (an extension kind; its reason is for people).
#[derive(Debug, serde::Deserialize)]
struct PingWithdrawnBody {
    ping: String,
}

fn project_inbox(me: &str, seq: u64, ts_ms: i64, event: &Event) -> Option<Vec<Write>> {
    Some(match event.kind.as_str() {
        "room_added" | "room_removed" => {
            let change: RoomChangeBody = body(event)?;
            vec![Write::RoomJoined {
                room: change.room,
                joined: event.kind == "room_added",
                seq,
            }]
        }
        "contact" => {
            let contact: ContactBody = body(event)?;
            let mut writes = Vec::new();
            if contact.state == RequestState::Accepted && (contact.from == me || contact.to == me) {
                let other = if contact.from == me {
                    &contact.to
                } else {
                    &contact.from
                };
                writes.push(Write::Contact {
                    principal: other.clone(),
                    since_ms: ts_ms,
                });
            }
            writes.push(Write::Request {
                id: contact.request,
                from: contact.from,
                to: contact.to,
                state: contact.state,
                message: contact.message,
                seq,
                ts_ms,
            });
            writes
        }
        "control" => {
            let control: ControlBody = body(event)?;
            vec![Write::Control {
                room: control.room,
                action: control.action,
                by: control.by,
                seq,
                reason: control.reason,
            }]
        }
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(
        room: Option<&str>,
        seq: u64,
        from: &str,
        kind: &str,
        body: serde_json::Value,
    ) -> Event {
        Event {
            room: room.map(str::to_owned),
            stream: room.is_none().then(|| "inbox".to_owned()),
            seq,
            id: format!("e{seq}"),
            ts: "2026-11-30T09:00:00.000Z".into(),
            from: from.into(),
            kind: kind.into(),
            body,
            client_key: None,
        }
    }

    const TS: i64 = 1_796_029_200_000;

    fn session() -> serde_json::Value {
        json!({"agent": "p_a", "framework": "codex", "session_id": "s1"})
    }

    #[test]
    fn every_room_kind_projects() {
        let r = Some("r");
        assert_eq!(
            project("me", &event(r, 1, "p_u", "room", json!({"title": "T"}))),
            vec![Write::RoomFields {
                room: "r".into(),
                title: Some("T".into()),
                topic: None,
                creator: Some("p_u".into()),
                seq: 1
            }]
        );
        assert_eq!(
            project(
                "me",
                &event(
                    r,
                    2,
                    "p_u",
                    "member",
                    json!({"principal": "p_a", "action": "kick", "by": "p_u"})
                )
            ),
            vec![Write::Member {
                room: "r".into(),
                principal: "p_a".into(),
                present: false,
                seq: 2
            }]
        );
        assert_eq!(
            project(
                "me",
                &event(
                    r,
                    3,
                    "p_u",
                    "message",
                    json!({"text": "@a hi", "mentions": ["p_a"]})
                )
            ),
            vec![Write::Mentions {
                room: "r".into(),
                seq: 3,
                principals: vec!["p_a".into()]
            }]
        );
        assert!(
            project(
                "me",
                &event(r, 4, "p_u", "message", json!({"text": "plain"}))
            )
            .is_empty()
        );
        assert_eq!(
            project(
                "me",
                &event(
                    r,
                    5,
                    "p_a",
                    "tasks",
                    json!({"session": session(), "source": "update_plan", "tasks": [{"title": "x", "status": "pending"}]})
                )
            ),
            vec![Write::Tasks {
                agent: "p_a".into(),
                framework: "codex".into(),
                session_id: "s1".into(),
                room: "r".into(),
                seq: 5,
                ts_ms: TS,
                source: "update_plan".into(),
                tasks: r#"[{"title":"x","status":"pending"}]"#.into(),
                states: vec![("x".into(), "pending".into())]
            }]
        );
        assert_eq!(
            project(
                "me",
                &event(
                    r,
                    6,
                    "p_a",
                    "arch",
                    json!({"define": [{"id": "p", "name": "Parser", "paths": ["src/**"], "depends_on": []}]})
                )
            ),
            vec![
                Write::ComponentsDefined {
                    room: "r".into(),
                    ids: vec!["p".into()],
                    source: None,
                    seq: 6
                },
                Write::ComponentDef {
                    room: "r".into(),
                    id: "p".into(),
                    name: "Parser".into(),
                    description: None,
                    paths: r#"["src/**"]"#.into(),
                    depends_on: "[]".into(),
                    source: None,
                    seq: 6
                }
            ]
            .into_iter()
            .collect::<Vec<_>>()
        );
        assert_eq!(
            project(
                "me",
                &event(
                    r,
                    7,
                    "p_a",
                    "arch",
                    json!({"component": "p", "status": "working", "files": ["a.rs"]})
                )
            ),
            vec![Write::ComponentStatus {
                room: "r".into(),
                id: "p".into(),
                status: "working".into(),
                note: None,
                files: Some(r#"["a.rs"]"#.into()),
                by: "p_a".into(),
                seq: 7,
                ts_ms: TS,
                claim: None,
            }]
        );
        assert_eq!(
            project(
                "me",
                &event(
                    r,
                    8,
                    "p_a",
                    "usage",
                    json!({"session": session(), "model": "m", "input": 10, "output": 2, "cache_write": 0, "cache_read": 5, "cost_usd": 0.5, "from": "2026-11-30T08:00:00Z", "to": "2026-11-30T09:00:00Z"})
                )
            ),
            vec![Write::Usage {
                room: "r".into(),
                seq: 8,
                agent: "p_a".into(),
                framework: "codex".into(),
                session_id: "s1".into(),
                model: "m".into(),
                input: 10,
                output: 2,
                cache_write: 0,
                cache_read: 5,
                cost_usd: Some(0.5),
                from_ms: TS - 3_600_000,
                to_ms: TS
            }]
        );
        assert_eq!(
            project(
                "me",
                &event(
                    r,
                    9,
                    "p_a",
                    "status",
                    json!({"state": "waiting_human", "detail": "q"})
                )
            ),
            vec![Write::AgentStatus {
                agent: "p_a".into(),
                room: "r".into(),
                seq: 9,
                ts_ms: TS,
                state: "waiting_human".into(),
                detail: Some("q".into())
            }]
        );
        assert_eq!(
            project(
                "me",
                &event(
                    r,
                    10,
                    "p_a",
                    "ping",
                    json!({"ping": "q1", "question": "ok?", "options": ["y", "n"]})
                )
            ),
            vec![Write::Ping {
                room: "r".into(),
                ping: "q1".into(),
                seq: 10,
                asker: "p_a".into(),
                question: "ok?".into(),
                options: Some(r#"["y","n"]"#.into()),
                to: None,
                expires_ms: None
            }]
        );
        assert_eq!(
            project(
                "me",
                &event(r, 11, "p_u", "answer", json!({"ping": "q1", "choice": "y"}))
            ),
            vec![Write::Answer {
                room: "r".into(),
                ping: "q1".into(),
                seq: 11,
                by: "p_u".into(),
                choice: Some("y".into()),
                text: None
            }]
        );
        assert!(project("me", &event(r, 12, "p_u", "x-cursor", json!({"line": 3}))).is_empty());
        assert_eq!(
            project(
                "me",
                &event(
                    r,
                    13,
                    "p_a",
                    "x-ping-withdrawn",
                    json!({"ping": "q1", "reason": "answered_at_client"})
                )
            ),
            vec![Write::PingWithdrawn {
                room: "r".into(),
                ping: "q1".into(),
                asker: "p_a".into(),
                at_ms: ts::parse_millis("2026-11-30T09:00:00.000Z").unwrap(),
            }]
        );
    }

    #[test]
    fn every_inbox_kind_projects() {
        assert_eq!(
            project(
                "me",
                &event(
                    None,
                    1,
                    "p_u",
                    "room_added",
                    json!({"room": "r", "by": "p_u"})
                )
            ),
            vec![Write::RoomJoined {
                room: "r".into(),
                joined: true,
                seq: 1
            }]
        );
        assert_eq!(
            project(
                "me",
                &event(
                    None,
                    2,
                    "p_u",
                    "room_removed",
                    json!({"room": "r", "by": "p_u"})
                )
            ),
            vec![Write::RoomJoined {
                room: "r".into(),
                joined: false,
                seq: 2
            }]
        );
        let accepted = project(
            "me",
            &event(
                None,
                3,
                "p_o",
                "contact",
                json!({"request": "c1", "from": "me", "to": "p_o", "state": "accepted"}),
            ),
        );
        assert_eq!(
            accepted[0],
            Write::Contact {
                principal: "p_o".into(),
                since_ms: TS
            }
        );
        assert!(matches!(
            &accepted[1],
            Write::Request {
                state: RequestState::Accepted,
                ..
            }
        ));
        // My agent's contact is not mine.
        let agents = project(
            "me",
            &event(
                None,
                4,
                "p_o",
                "contact",
                json!({"request": "c2", "from": "me/agent", "to": "p_o", "state": "accepted"}),
            ),
        );
        assert_eq!(agents.len(), 1);
        assert_eq!(
            project(
                "me",
                &event(
                    None,
                    5,
                    "p_u",
                    "control",
                    json!({"action": "pause", "by": "p_u"})
                )
            ),
            vec![Write::Control {
                room: None,
                action: ControlAction::Pause,
                by: "p_u".into(),
                seq: 5,
                reason: None,
            }]
        );
    }

    #[test]
    fn malformed_bodies_change_nothing() {
        for (kind, body) in [
            ("tasks", json!({"tasks": "not a list"})),
            ("member", json!({"principal": 5})),
            ("answer", json!([])),
            ("usage", json!({})),
        ] {
            assert!(
                project("me", &event(Some("r"), 1, "p", kind, body)).is_empty(),
                "{kind}"
            );
        }
        assert!(
            project(
                "me",
                &event(None, 1, "p", "contact", json!({"state": "weird"}))
            )
            .is_empty()
        );
    }
}
