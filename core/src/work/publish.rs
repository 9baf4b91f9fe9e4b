//! Which agent a session on this machine belongs to, and what is published of its work.
//!
//! A session belongs to an onboarded agent when the agent's hooks or runner bound it, else
//! when it ran in the project an agent was onboarded for, else to the agent onboarded on
//! its CLI for the whole user. Its task lists, its token deltas and the components its edits
//! touch are published as `tasks`, `usage` and `arch` events to the agent's home room and
//! to the rooms the person shares their work with. Each event's `client_key` is derived
//! from the log file and the offsets its data came from, so publishing again after a crash
//! stores nothing twice. Pure: targets and changes in, publications out.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::json;
use sha2::{Digest, Sha256};

use super::architecture::Architecture;
use super::events::Framework;
use super::pricing::Pricing;
use crate::cache::{LocalChanges, Publication};

/// An onboarded agent whose sessions' work is published.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTarget {
    pub agent_id: String,
    pub handle: String,
    pub framework: Framework,
    /// Onboarded for this project only (its sessions run under it).
    pub project: Option<PathBuf>,
    /// Sessions its hooks or its runner bound to it.
    pub sessions: HashSet<String>,
    /// Where its work goes: its home room, and the rooms the person shares with.
    pub rooms: Vec<String>,
}

/// Every target, and how to find a session's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Targets {
    pub agents: Vec<AgentTarget>,
}

impl Targets {
    /// The agent a session belongs to.
    pub fn of(
        &self,
        framework: Framework,
        session_id: &str,
        cwd: Option<&str>,
    ) -> Option<&AgentTarget> {
        let same = || {
            self.agents
                .iter()
                .filter(move |agent| agent.framework == framework)
        };
        same()
            .find(|agent| agent.sessions.contains(session_id))
            .or_else(|| {
                let cwd = Path::new(cwd?);
                same()
                    .filter(|agent| agent.project.as_deref().is_some_and(|p| cwd.starts_with(p)))
                    .max_by_key(|agent| agent.project.as_ref().map(|p| p.as_os_str().len()))
            })
            .or_else(|| same().find(|agent| agent.project.is_none()))
    }
}

/// A stable `client_key` (8 to 64 characters) from the parts that identify a publication.
pub fn key(kind: &str, parts: &[&str]) -> String {
    let mut digest = Sha256::new();
    for part in parts {
        digest.update(part.as_bytes());
        digest.update([0]);
    }
    let hex: String = digest.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("w{kind}-{hex}")
}

/// What a read of `file` (its data between `from` and `to`) publishes.
pub struct Publisher<'a> {
    pub targets: &'a Targets,
    pub pricing: &'a Pricing,
    /// Where each session ran, for those the changes do not say.
    pub cwds: &'a BTreeMap<(Framework, String), String>,
    /// Architectures of the repositories the edited files are in.
    pub architectures: &'a [Architecture],
    /// The read: its file and offsets (so keys differ between reads).
    pub file: &'a str,
    pub from: u64,
    pub to: u64,
}

impl Publisher<'_> {
    fn target(
        &self,
        changes: &LocalChanges,
        framework: Framework,
        session: &str,
    ) -> Option<&AgentTarget> {
        let cwd = changes
            .sessions
            .iter()
            .rev()
            .find(|(f, s, cwd)| *f == framework && s == session && cwd.is_some())
            .and_then(|(_, _, cwd)| cwd.as_deref())
            .or_else(|| {
                self.cwds
                    .get(&(framework, session.to_owned()))
                    .map(String::as_str)
            });
        self.targets.of(framework, session, cwd)
    }

    /// The events to publish for `changes`.
    pub fn publications(&self, changes: &LocalChanges) -> Vec<Publication> {
        let span = format!("{}-{}", self.from, self.to);
        let mut out = Vec::new();
        for delta in &changes.usage {
            let Some(agent) = self.target(changes, delta.framework, &delta.session_id) else {
                continue;
            };
            let now = crate::now_ms();
            let from = roundtable_protocol::ts::format_millis(delta.first_ms.unwrap_or(now));
            let to = roundtable_protocol::ts::format_millis(delta.last_ms.unwrap_or(now));
            let mut body = json!({
                "session": {"agent": agent.agent_id, "framework": delta.framework.as_str(), "session_id": delta.session_id},
                "model": delta.model,
                "input": delta.tokens.input,
                "output": delta.tokens.output,
                "cache_write": delta.tokens.cache_write(),
                "cache_read": delta.tokens.cache_read,
                "from": from,
                "to": to,
            });
            if let Some(cost) = self.pricing.cost(&delta.model, &delta.tokens) {
                body["cost_usd"] = json!(cost);
            }
            for room in &agent.rooms {
                out.push(Publication {
                    room: room.clone(),
                    client_key: key(
                        "u",
                        &[self.file, &span, &delta.session_id, &delta.model, room],
                    ),
                    kind: "usage".into(),
                    body: body.clone(),
                });
            }
        }
        for list in &changes.tasks {
            let Some(agent) = self.target(changes, list.framework, &list.session_id) else {
                continue;
            };
            // A subagent's list is its own lane inside the session.
            let session_id = if list.lane.is_empty() {
                list.session_id.clone()
            } else {
                format!("{}/{}", list.session_id, list.lane)
            };
            let tasks: Vec<serde_json::Value> = list
                .tasks
                .iter()
                .map(|task| {
                    let mut item = json!({"title": task.title, "status": task.status});
                    if let Some(id) = &task.id {
                        item["id"] = json!(id);
                    }
                    if let Some(active) = &task.active_form {
                        item["active_form"] = json!(active);
                    }
                    item
                })
                .collect();
            let body = json!({
                "session": {"agent": agent.agent_id, "framework": list.framework.as_str(), "session_id": session_id},
                "source": list.source,
                "tasks": tasks,
            });
            for room in &agent.rooms {
                out.push(Publication {
                    room: room.clone(),
                    client_key: key("t", &[self.file, &span, &session_id, room]),
                    kind: "tasks".into(),
                    body: body.clone(),
                });
            }
        }
        for touched in &changes.files {
            let Some(agent) = self.target(changes, touched.framework, &touched.session_id) else {
                continue;
            };
            let path = Path::new(&touched.path);
            let Some(architecture) = self
                .architectures
                .iter()
                .find(|architecture| path.starts_with(&architecture.root))
            else {
                continue;
            };
            let text_key = key("a", &[&architecture.text]);
            for component in architecture.components_of(path) {
                for room in &agent.rooms {
                    // The repository's components, defined once per version of its file.
                    out.push(Publication {
                        room: room.clone(),
                        client_key: key("d", &[&text_key, room]),
                        kind: "arch".into(),
                        body: json!({ "define": architecture.components }),
                    });
                    out.push(Publication {
                        room: room.clone(),
                        client_key: key(
                            "s",
                            &[self.file, &span, &touched.path, &component.id, room],
                        ),
                        kind: "arch".into(),
                        body: json!({
                            "component": component.id, "status": "working",
                            "files": [touched.path], "agent": agent.agent_id,
                        }),
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{FileTouch, TaskListChange, UsageDelta};
    use crate::work::events::{TaskItem, TaskStatus, TokenCounts};

    fn targets() -> Targets {
        Targets {
            agents: vec![
                AgentTarget {
                    agent_id: "p_writer".into(),
                    handle: "dana/writer".into(),
                    framework: Framework::ClaudeCode,
                    project: None,
                    sessions: HashSet::new(),
                    rooms: vec!["r_home".into()],
                },
                AgentTarget {
                    agent_id: "p_parser".into(),
                    handle: "dana/parser".into(),
                    framework: Framework::ClaudeCode,
                    project: Some("/src/parser".into()),
                    sessions: HashSet::new(),
                    rooms: vec!["r_parser".into(), "r_team".into()],
                },
                AgentTarget {
                    agent_id: "p_bound".into(),
                    handle: "dana/bound".into(),
                    framework: Framework::ClaudeCode,
                    project: None,
                    sessions: ["s-bound".to_owned()].into_iter().collect(),
                    rooms: vec!["r_bound".into()],
                },
            ],
        }
    }

    #[test]
    fn a_session_goes_to_its_binding_then_its_project_then_the_users_agent() {
        let targets = targets();
        let of = |session: &str, cwd: Option<&str>| {
            targets
                .of(Framework::ClaudeCode, session, cwd)
                .map(|agent| agent.handle.as_str())
        };
        assert_eq!(of("s-bound", Some("/src/parser/x")), Some("dana/bound"));
        assert_eq!(of("s1", Some("/src/parser/lib")), Some("dana/parser"));
        assert_eq!(of("s1", Some("/home/dana")), Some("dana/writer"));
        assert_eq!(of("s1", None), Some("dana/writer"));
        assert!(targets.of(Framework::Codex, "s1", None).is_none());
    }

    #[test]
    fn changes_become_events_with_keys_that_repeat_only_for_the_same_read() {
        let targets = targets();
        let pricing = Pricing::built_in();
        let cwds = BTreeMap::new();
        let dir = tempfile::tempdir().unwrap();
        let architecture = Architecture::parse(
            dir.path(),
            "[[components]]\nid = \"lexer\"\nname = \"Lexer\"\npaths = [\"src/lexer/**\"]\ndepends_on = []\n",
        )
        .unwrap();
        let changes = LocalChanges {
            usage: vec![UsageDelta {
                framework: Framework::ClaudeCode,
                session_id: "s1".into(),
                model: "claude-sonnet-4-5".into(),
                tokens: TokenCounts {
                    input: 1000,
                    output: 100,
                    ..TokenCounts::default()
                },
                first_ms: Some(1_796_029_200_000),
                last_ms: Some(1_796_029_260_000),
            }],
            tasks: vec![TaskListChange {
                framework: Framework::ClaudeCode,
                session_id: "s1".into(),
                lane: "a9".into(),
                source: "TodoWrite".into(),
                tasks: vec![TaskItem {
                    id: None,
                    title: "lex".into(),
                    status: TaskStatus::InProgress,
                    active_form: Some("Lexing".into()),
                }],
                at_ms: None,
            }],
            files: vec![FileTouch {
                framework: Framework::ClaudeCode,
                session_id: "s1".into(),
                path: dir.path().join("src/lexer/mod.rs").display().to_string(),
                at_ms: None,
            }],
            sessions: vec![(
                Framework::ClaudeCode,
                "s1".into(),
                Some("/home/dana".into()),
            )],
        };
        let architectures = [architecture];
        let publisher = |from: u64| Publisher {
            targets: &targets,
            pricing: &pricing,
            cwds: &cwds,
            architectures: &architectures,
            file: "/home/dana/.claude/projects/p/s1.jsonl",
            from,
            to: 900,
        };
        let published = publisher(0).publications(&changes);
        let kinds: Vec<(&str, &str)> = published
            .iter()
            .map(|p| (p.kind.as_str(), p.room.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("usage", "r_home"),
                ("tasks", "r_home"),
                ("arch", "r_home"),
                ("arch", "r_home")
            ]
        );
        let usage = &published[0].body;
        assert_eq!(usage["session"]["agent"], "p_writer");
        assert!((usage["cost_usd"].as_f64().unwrap() - 0.0045).abs() < 1e-12);
        assert_eq!(usage["from"], "2026-11-30T09:00:00.000Z");
        assert_eq!(published[1].body["session"]["session_id"], "s1/a9");
        assert_eq!(published[1].body["tasks"][0]["active_form"], "Lexing");
        assert_eq!(published[3].body["agent"], "p_writer");
        assert_eq!(published[3].body["status"], "working");
        for publication in &published {
            roundtable_protocol::bodies::validate_client_body(
                &roundtable_protocol::bodies::EventKind::parse(&publication.kind).unwrap(),
                &publication.body,
                publication.body.to_string().len(),
            )
            .unwrap();
            assert!((8..=64).contains(&publication.client_key.len()));
        }
        // The same read gives the same keys; another read, other keys (but the components'
        // definition, which depends on the architecture only).
        let again = publisher(0).publications(&changes);
        assert_eq!(
            published.iter().map(|p| &p.client_key).collect::<Vec<_>>(),
            again.iter().map(|p| &p.client_key).collect::<Vec<_>>()
        );
        let later = publisher(900).publications(&changes);
        assert_ne!(published[0].client_key, later[0].client_key);
        assert_eq!(published[2].client_key, later[2].client_key);
    }
}
