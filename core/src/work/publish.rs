//! Which agent a session on this machine belongs to, and what is published of its work.
//!
//! A session belongs to the agent that claimed it (see [`crate::session_claims`]: the runner
//! that started it, else the first hook that saw it start), and to no one otherwise: a
//! session from before onboarding, or one of a CLI no agent is onboarded on, stays this
//! machine's own. Its task lists, its token deltas and the components its edits touch are
//! published as `tasks`, `usage` and `arch` events to the agent's home room and to the rooms
//! the person shares their work with. Each event's `client_key` is derived from the log file
//! and the offsets its data came from (or, for the first publication of a session claimed
//! after its lines were read, from the session), so publishing again after a crash stores
//! nothing twice. Pure: targets and changes in, publications out; the lookups of claims and
//! architectures are the caller's.

use std::path::Path;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::architecture::Architecture;
use super::pricing::Pricing;
use crate::cache::{LocalChanges, Publication, Publishing, ReadSpan};
use crate::log_events::{Billing, Framework, TaskStatus, TokenCounts};

/// An agent of this person whose sessions' work is published.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTarget {
    pub agent_id: String,
    pub handle: String,
    /// Where its work goes: its home room, and the rooms the person shares with.
    pub rooms: Vec<String>,
}

/// Who claimed a session (framework, session id): the agent's handle.
pub type OwnerOf = std::sync::Arc<dyn Fn(Framework, &str) -> Option<String> + Send + Sync>;

/// Every target, and who claimed which session.
#[derive(Clone, Default)]
pub struct Targets {
    pub agents: Vec<AgentTarget>,
    pub owner_of: Option<OwnerOf>,
}

impl std::fmt::Debug for Targets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Targets")
            .field("agents", &self.agents)
            .finish_non_exhaustive()
    }
}

impl Targets {
    /// The agent a session belongs to, when it is one of these.
    pub fn of(&self, framework: Framework, session_id: &str) -> Option<&AgentTarget> {
        let owner = (self.owner_of.as_ref()?)(framework, session_id)?;
        self.agents.iter().find(|agent| agent.handle == owner)
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

/// The events the work of this machine's claimed sessions becomes.
pub struct WorkPublisher<'a> {
    pub targets: &'a Targets,
    pub pricing: &'a Pricing,
    /// The architecture of the repository a file is in, if it has one.
    pub architecture_of: &'a mut dyn FnMut(&Path) -> Option<Architecture>,
}

impl Publishing for WorkPublisher<'_> {
    fn price(&self, model: &str, tokens: &TokenCounts, billing: &Billing) -> Option<f64> {
        self.pricing.cost(model, tokens, billing)
    }

    fn publishes(&self, framework: Framework, session_id: &str) -> bool {
        self.targets.of(framework, session_id).is_some()
    }

    fn publications(
        &mut self,
        read: Option<ReadSpan<'_>>,
        changes: &LocalChanges,
    ) -> Vec<Publication> {
        // What makes this publication's keys its own: the read, or the session's first
        // publication (once per session).
        let origin: Vec<String> = match read {
            Some(read) => vec![read.file.to_owned(), format!("{}-{}", read.from, read.to)],
            None => vec!["first".to_owned()],
        };
        let origin: Vec<&str> = origin.iter().map(String::as_str).collect();
        let keyed = |kind: &str, parts: &[&str]| {
            let all: Vec<&str> = origin.iter().chain(parts).copied().collect();
            key(kind, &all)
        };
        let mut out = Vec::new();
        for delta in &changes.usage {
            let Some(agent) = self.targets.of(delta.framework, &delta.session_id) else {
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
            if let Some(cost) = delta.cost_usd {
                body["cost_usd"] = json!(cost);
            }
            for room in &agent.rooms {
                out.push(Publication {
                    room: room.clone(),
                    client_key: keyed(
                        "u",
                        &[
                            delta.framework.as_str(),
                            &delta.session_id,
                            &delta.model,
                            room,
                        ],
                    ),
                    kind: "usage".into(),
                    body: body.clone(),
                });
            }
        }
        for list in &changes.tasks {
            let Some(agent) = self.targets.of(list.framework, &list.session_id) else {
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
                    let mut item =
                        json!({"title": task.title, "status": task.status.on_the_wire()});
                    if let Some(id) = &task.id {
                        item["id"] = json!(id);
                    }
                    // What the wire has no status for is said in words.
                    let active = match task.status {
                        TaskStatus::Blocked => Some("Blocked"),
                        _ => task.active_form.as_deref(),
                    };
                    if let Some(active) = active {
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
                    client_key: keyed("t", &[list.framework.as_str(), &session_id, room]),
                    kind: "tasks".into(),
                    body: body.clone(),
                });
            }
        }
        for touched in &changes.files {
            let Some(agent) = self.targets.of(touched.framework, &touched.session_id) else {
                continue;
            };
            let path = Path::new(&touched.path);
            let Some(architecture) = (self.architecture_of)(path) else {
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
                        body: match &architecture.source {
                            Some(source) => {
                                json!({ "define": architecture.components, "source": source })
                            }
                            None => json!({ "define": architecture.components }),
                        },
                    });
                    out.push(Publication {
                        room: room.clone(),
                        client_key: keyed(
                            "s",
                            &[
                                touched.framework.as_str(),
                                &touched.session_id,
                                &touched.path,
                                &component.id,
                                room,
                            ],
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
        // What the logs and the repository say is forwarded, not vouched for: characters
        // the hub refuses in a field are left out, so one of them never keeps the rest of
        // the work from being published.
        for publication in &mut out {
            if let Some(kind) = roundtable_protocol::bodies::EventKind::parse(&publication.kind) {
                publication.body = roundtable_protocol::bodies::clean_work_body(
                    &kind,
                    std::mem::take(&mut publication.body),
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::cache::{FileTouch, TaskListChange, UsageDelta};
    use crate::log_events::TaskItem;

    fn targets(claims: &[(&str, &str)]) -> Targets {
        let claims: HashMap<String, String> = claims
            .iter()
            .map(|(session, handle)| (session.to_string(), handle.to_string()))
            .collect();
        Targets {
            agents: vec![
                AgentTarget {
                    agent_id: "p_writer".into(),
                    handle: "dana/writer".into(),
                    rooms: vec!["r_home".into()],
                },
                AgentTarget {
                    agent_id: "p_parser".into(),
                    handle: "dana/parser".into(),
                    rooms: vec!["r_parser".into(), "r_team".into()],
                },
            ],
            owner_of: Some(std::sync::Arc::new(move |framework, session| {
                (framework == Framework::ClaudeCode)
                    .then(|| claims.get(session).cloned())
                    .flatten()
            })),
        }
    }

    #[test]
    fn a_session_belongs_to_the_agent_that_claimed_it_and_to_no_one_else() {
        let targets = targets(&[("s1", "dana/parser"), ("s2", "sam/gone")]);
        let of = |framework, session: &str| {
            targets
                .of(framework, session)
                .map(|agent| agent.handle.as_str())
        };
        assert_eq!(of(Framework::ClaudeCode, "s1"), Some("dana/parser"));
        // Unclaimed, or claimed by no agent of this person: nobody's.
        assert_eq!(of(Framework::ClaudeCode, "s0"), None);
        assert_eq!(of(Framework::ClaudeCode, "s2"), None);
        assert_eq!(of(Framework::Codex, "s1"), None);
        assert!(Targets::default().of(Framework::ClaudeCode, "s1").is_none());
    }

    #[test]
    fn changes_become_events_with_keys_that_repeat_only_for_the_same_read() {
        let targets = targets(&[("s1", "dana/writer")]);
        let pricing = Pricing::built_in();
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
                cost_usd: Some(0.0045),
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
        let mut architecture_of = |_: &Path| Some(architecture.clone());
        let mut publisher = WorkPublisher {
            targets: &targets,
            pricing: &pricing,
            architecture_of: &mut architecture_of,
        };
        let file = "/home/dana/.claude/projects/p/s1.jsonl";
        let read = |from: u64| {
            Some(ReadSpan {
                file,
                from,
                to: 900,
            })
        };
        assert!(publisher.publishes(Framework::ClaudeCode, "s1"));
        assert!(!publisher.publishes(Framework::ClaudeCode, "s9"));
        let published = publisher.publications(read(0), &changes);
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
        // The same read gives the same keys; another read, or the session's first
        // publication, other keys (but the components' definition, which depends on the
        // architecture only).
        let keys = |published: &[Publication]| {
            published
                .iter()
                .map(|p| p.client_key.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(&published),
            keys(&publisher.publications(read(0), &changes))
        );
        let later = publisher.publications(read(900), &changes);
        assert_ne!(published[0].client_key, later[0].client_key);
        assert_eq!(published[2].client_key, later[2].client_key);
        let first = publisher.publications(None, &changes);
        assert_ne!(published[0].client_key, first[0].client_key);
        assert_ne!(later[0].client_key, first[0].client_key);
    }

    #[test]
    fn characters_the_hub_refuses_are_left_out_and_the_rest_is_published() {
        let targets = targets(&[("s1\u{7}", "dana/writer")]);
        let pricing = Pricing::built_in();
        let dir = tempfile::tempdir().unwrap();
        let architecture = Architecture::parse(
            dir.path(),
            "[[components]]\nid = \"lexer\"\nname = \"Lexer\\u001b[2J\"\npaths = [\"src/lexer/**\"]\ndepends_on = []\n",
        )
        .unwrap();
        let long = dir
            .path()
            .join("src/lexer")
            .join(format!("{}.rs", "a".repeat(1100)));
        let changes = LocalChanges {
            usage: vec![UsageDelta {
                framework: Framework::ClaudeCode,
                session_id: "s1\u{7}".into(),
                model: "claude-sonnet-4-5\u{0}".into(),
                tokens: TokenCounts {
                    input: 10,
                    ..TokenCounts::default()
                },
                cost_usd: None,
                first_ms: Some(1_796_029_200_000),
                last_ms: Some(1_796_029_260_000),
            }],
            tasks: vec![TaskListChange {
                framework: Framework::ClaudeCode,
                session_id: "s1\u{7}".into(),
                lane: String::new(),
                source: "TodoWrite".into(),
                tasks: vec![TaskItem {
                    id: Some("t\u{0}1".into()),
                    title: "lex\u{1b}[31m the\ttokens\nfast".into(),
                    status: TaskStatus::InProgress,
                    active_form: None,
                }],
                at_ms: None,
            }],
            files: vec![FileTouch {
                framework: Framework::ClaudeCode,
                session_id: "s1\u{7}".into(),
                path: long.display().to_string(),
                at_ms: None,
            }],
            sessions: Vec::new(),
        };
        let mut architecture_of = |_: &Path| Some(architecture.clone());
        let mut publisher = WorkPublisher {
            targets: &targets,
            pricing: &pricing,
            architecture_of: &mut architecture_of,
        };
        let published = publisher.publications(None, &changes);
        assert_eq!(published.len(), 4, "{published:#?}");
        for publication in &published {
            roundtable_protocol::bodies::validate_client_body(
                &roundtable_protocol::bodies::EventKind::parse(&publication.kind).unwrap(),
                &publication.body,
                publication.body.to_string().len(),
            )
            .unwrap_or_else(|error| panic!("{}: {}", publication.body, error.msg));
        }
        assert_eq!(published[0].body["model"], "claude-sonnet-4-5");
        assert_eq!(published[0].body["session"]["session_id"], "s1");
        let task = &published[1].body["tasks"][0];
        assert_eq!(task["title"], "lex[31m the\ttokens\nfast");
        assert_eq!(task["id"], "t1");
        assert_eq!(published[2].body["define"][0]["name"], "Lexer[2J");
        // The component is still marked as worked on; only the path the hub would refuse is
        // left out.
        assert_eq!(published[3].body["component"], "lexer");
        assert_eq!(published[3].body["status"], "working");
        assert!(published[3].body.get("files").is_none());
    }
}
