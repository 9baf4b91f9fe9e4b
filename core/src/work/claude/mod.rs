//! Claude Code's transcripts (`~/.claude/projects/<project>/<session>.jsonl`, and
//! `<session>/subagents/agent-<id>.jsonl`), turned into [`LogEvent`]s, and the files of its
//! Task tools' store (`~/.claude/tasks/<list>/<id>.json`).
//!
//! Why it is shaped this way:
//! - **Fast.** Transcripts add up to gigabytes. A line that can say nothing new (tool
//!   outputs, prompts, progress: about half a transcript's bytes) is told by a look at its
//!   bytes (it names the session and directory already known, and no usage, model, tool
//!   call or awaited result) and not read; any line the look is unsure of is. The others
//!   are read once by serde_json into small borrowed structs that name only the fields used
//!   here; everything else (message text, tool outputs) is skipped by serde's `IgnoredAny`,
//!   which builds nothing and does not recurse. No `serde_json::Value`. See
//!   `roundtable-bench-scan` in `docs/benchmarks.md`.
//! - **Lenient.** A field of an unexpected JSON type reads as absent instead of failing the
//!   line, so one odd field never hides the rest of a record. A line that is not a JSON
//!   object is [`LineOutcome::Skipped`].
//! - **Pure and resumable.** No I/O. The state (the session seen so far, the last list of
//!   each lane, tool calls waiting for their results) serializes, so a watcher can stop
//!   after any line and go on later.
//!
//! What a transcript says, and how it is read (AGENT-FORMATS §1):
//! - `Session` when the session id, cwd or model changes. Subagent records carry the
//!   parent's `sessionId`, so a subagent counts under its parent session.
//! - `Usage` for each `assistant` record with a top-level `message.usage` (never a
//!   `progress` record's embedded usage, never an Agent result's `toolUseResult.usage`),
//!   keyed by `message.id` + `requestId`; the same request is reported by several lines
//!   and files, and de-duplication is left to the summary.
//! - `Tasks` for each `TodoWrite` call, and after each successful `TaskCreate`/`TaskUpdate`
//!   (whose task ids appear only in their results). A subagent's list is its own lane.
//! - `FileTouched` for `Edit`, `Write`, `MultiEdit` and `NotebookEdit`, once their result
//!   arrives and is not an error.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess};
use serde::{Deserialize, Serialize};

use super::lenient::{
    Lenient, LenientBool, LenientCount, LenientStr, LenientValue, deserialize_leniently,
    timestamp_ms,
};
use crate::log_events::{
    Billing, LineOutcome, LogEvent, RequestKey, TaskItem, TaskStatus, TokenCounts,
};

mod record;
#[cfg(test)]
mod tests;

use record::*;

/// The model Claude Code names on the messages it makes up itself (API errors, interruptions).
const SYNTHETIC_MODEL: &str = "<synthetic>";
/// The lane of a side-chain record that names no agent (v1.0.x wrote subagents inline).
const UNNAMED_SIDECHAIN_LANE: &str = "sidechain";
const TODO_WRITE_SOURCE: &str = "TodoWrite";
const TASK_TOOLS_SOURCE: &str = "tasks";

/// Parses one Claude Code transcript file (a main session file, or a subagent file under
/// `<session>/subagents/`). Stateful across the file's lines (tool calls are paired with
/// their results), but pure: no I/O. Its state serializes (serde) so a watcher can stop
/// after any line and resume later.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ClaudeParser {
    /// The session of the records read so far (a subagent's records name their parent's).
    session_id: Option<String>,
    /// The working directory of the latest record that had one: relative paths resolve
    /// against it, and a change is reported.
    cwd: Option<String>,
    /// The model of the latest real (not `<synthetic>`) assistant message.
    model: Option<String>,
    /// Whether a `Session` event has told the current session id, cwd and model.
    announced: bool,
    /// The last `TodoWrite` list of each lane, so that a cleared list can show the items it
    /// cleared (as completed).
    todo_lists: Vec<LaneTasks>,
    /// The tasks of the Task tools, per lane, in creation order.
    task_lists: Vec<LaneTasks>,
    /// Tool calls whose effect is known only from their result, by `tool_use` id.
    pending: HashMap<String, PendingCall>,
}

/// One lane's task list (`lane`: a subagent's id; `None` for the main thread).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct LaneTasks {
    #[serde(default)]
    lane: Option<String>,
    tasks: Vec<TaskItem>,
}

/// A tool call waiting for its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
enum PendingCall {
    /// The task gets its id from the result.
    TaskCreate {
        #[serde(default)]
        lane: Option<String>,
        subject: String,
        #[serde(default)]
        active_form: Option<String>,
    },
    TaskUpdate {
        #[serde(default)]
        lane: Option<String>,
        task_id: String,
        #[serde(default)]
        status: Option<TaskStatus>,
        #[serde(default)]
        subject: Option<String>,
        #[serde(default)]
        active_form: Option<String>,
    },
    /// `path` is already absolute (resolved against the cwd of the call).
    FileEdit { tool: String, path: String },
}

impl ClaudeParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// One line without its newline. Appends what it says to `events`.
    pub fn line(&mut self, line: &[u8], events: &mut Vec<LogEvent>) -> LineOutcome {
        self.read_line(line, events, true)
    }

    /// [`ClaudeParser::line`], with or without the look that spares reading a line.
    fn read_line(&mut self, line: &[u8], events: &mut Vec<LogEvent>, look: bool) -> LineOutcome {
        let Ok(text) = simdutf8::basic::from_utf8(line) else {
            return LineOutcome::Skipped;
        };
        // Any JSON value but an object starts with something else; checking first keeps a
        // top-level array from being read as a struct's fields in order.
        let first = text
            .bytes()
            .find(|byte| !matches!(byte, b' ' | b'\t' | b'\r' | b'\n'));
        if first != Some(b'{') {
            return LineOutcome::Skipped;
        }
        if look && self.says_nothing_new(line) {
            return LineOutcome::Read;
        }
        match serde_json::from_str::<Record<'_>>(text) {
            Ok(record) => {
                self.record(record, events);
                LineOutcome::Read
            }
            // A JSON object the structs could not take (a duplicate key, a declared field
            // nested past serde_json's depth limit): read, but it says nothing.
            Err(_) if serde_json::from_str::<IgnoredAny>(text).is_ok() => LineOutcome::Read,
            Err(_) => LineOutcome::Skipped,
        }
    }

    /// Whether `line` can tell this parser nothing new, by a look at its bytes: it names
    /// the session and working directory already announced, as Claude Code writes them, and
    /// holds no usage, model or tool call, and no result of a call waiting for one. Most of
    /// a transcript's bytes are such lines (tool outputs, prompts, progress), and a look is
    /// many times cheaper than reading them. Unsure means no: the line is read in full.
    fn says_nothing_new(&self, line: &[u8]) -> bool {
        use memchr::memmem::Finder;
        use std::sync::LazyLock;
        static TELLING: LazyLock<[Finder<'static>; 3]> = LazyLock::new(|| {
            [
                Finder::new(b"\"usage\""),
                Finder::new(b"\"model\""),
                Finder::new(b"\"tool_use\""),
            ]
        });
        static SESSION: LazyLock<Finder<'static>> =
            LazyLock::new(|| Finder::new(b"\"sessionId\":"));
        static CWD: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"cwd\":"));
        static RESULT: LazyLock<Finder<'static>> =
            LazyLock::new(|| Finder::new(b"\"tool_result\""));
        static RESULT_FOR: LazyLock<Finder<'static>> =
            LazyLock::new(|| Finder::new(b"\"tool_use_id\""));
        let (Some(session), true) = (&self.session_id, self.announced) else {
            return false;
        };
        if line.last() != Some(&b'}') || TELLING.iter().any(|f| f.find(line).is_some()) {
            return false;
        }
        // The session named plainly, once: the line is written as Claude Code writes (a
        // writer that spaces or escapes its keys hides them from a look; it is read).
        if SESSION.find(line).is_none()
            || !names_once(line, &SESSION, Some(session))
            || !names_once(line, &CWD, self.cwd.as_deref())
        {
            return false;
        }
        if RESULT.find(line).is_none() {
            return true;
        }
        // Results: each `"tool_use_id":"ID"`, none of them a call waiting for its result.
        RESULT_FOR.find_iter(line).all(|at| {
            let rest = &line[at + b"\"tool_use_id\"".len()..];
            let Some(rest) = rest.strip_prefix(b":\"") else {
                return false;
            };
            let Some(end) = memchr::memchr2(b'"', b'\\', rest) else {
                return false;
            };
            rest[end] == b'"'
                && std::str::from_utf8(&rest[..end]).is_ok_and(|id| !self.pending.contains_key(id))
        })
    }

    fn record(&mut self, mut record: Record<'_>, events: &mut Vec<LogEvent>) {
        let is_assistant = record.kind.as_str() == Some("assistant");
        let message = record.message.0.take().unwrap_or_default();
        let real_model = message
            .model
            .as_str()
            .filter(|model| is_assistant && *model != SYNTHETIC_MODEL);
        self.observe_session(&record, real_model, events);
        // The record's own id, or the one seen before (borrowed where it can be).
        let session_id: Cow<'_, str> = match record.session_id.as_str() {
            Some(id) if !id.is_empty() => Cow::Borrowed(id),
            _ => match &self.session_id {
                Some(id) => Cow::Owned(id.clone()),
                // Nothing can be attributed without a session (summary, file-history-snapshot).
                None => return,
            },
        };
        let at_ms = record.timestamp.as_str().and_then(timestamp_ms);
        let sidechain = record.is_sidechain.0 == Some(true);
        let lane = sidechain.then(|| record.agent_id.as_str().unwrap_or(UNNAMED_SIDECHAIN_LANE));

        if is_assistant && let Some(usage) = &message.usage.0 {
            let tokens = usage.tokens();
            let model = message.model.as_str().unwrap_or("unknown");
            if !(model == SYNTHETIC_MODEL && tokens.total() == 0) {
                events.push(LogEvent::Usage {
                    session_id: session_id.clone().into_owned(),
                    key: message.id.as_str().map(|message_id| RequestKey {
                        message_id: message_id.to_owned(),
                        request_id: record.request_id.as_str().map(str::to_owned),
                    }),
                    sidechain,
                    model: model.to_owned(),
                    tokens,
                    billing: usage.billing(),
                    at_ms,
                });
                // An advisor's steps, each at its own model's price (the request's tokens
                // leave them out), in the request's region.
                let advisors = usage.iterations.0.iter().filter(|iteration| {
                    iteration.kind.as_str() == Some("advisor_message")
                        && iteration.model.as_str().is_some()
                });
                for (index, advisor) in advisors.enumerate() {
                    events.push(LogEvent::Usage {
                        session_id: session_id.clone().into_owned(),
                        key: message.id.as_str().map(|message_id| RequestKey {
                            message_id: format!("{message_id}#advisor-{index}"),
                            request_id: record.request_id.as_str().map(str::to_owned),
                        }),
                        sidechain,
                        model: advisor.model.as_str().unwrap_or_default().to_owned(),
                        tokens: advisor.tokens(),
                        billing: Billing {
                            geo: usage.billing().geo,
                            ..Billing::default()
                        },
                        at_ms,
                    });
                }
            }
        }

        let results = message
            .content
            .0
            .iter()
            .filter(|block| block.kind == BlockKind::ToolResult)
            .count();
        for block in &message.content.0 {
            match block.kind {
                BlockKind::ToolUse if is_assistant => {
                    self.tool_call(block, lane, &session_id, at_ms, events);
                }
                BlockKind::ToolResult => {
                    // `toolUseResult` belongs to the record, so it tells of a result only
                    // when the record carries one.
                    let outcome = (results == 1).then_some(&record.tool_use_result);
                    self.tool_result(block, outcome, &session_id, at_ms, events);
                }
                _ => {}
            }
        }
    }

    /// Takes in the record's session id, cwd and model; reports a change.
    fn observe_session(
        &mut self,
        record: &Record<'_>,
        model: Option<&str>,
        events: &mut Vec<LogEvent>,
    ) {
        let fields = [
            (&mut self.session_id, record.session_id.as_str()),
            (&mut self.cwd, record.cwd.as_str()),
            (&mut self.model, model),
        ];
        for (known, seen) in fields {
            if let Some(seen) = seen.filter(|seen| !seen.is_empty())
                && known.as_deref() != Some(seen)
            {
                *known = Some(seen.to_owned());
                self.announced = false;
            }
        }
        if !self.announced
            && let Some(session_id) = &self.session_id
        {
            events.push(LogEvent::Session {
                session_id: session_id.clone(),
                cwd: self.cwd.clone(),
                model: self.model.clone(),
                at_ms: record.timestamp.as_str().and_then(timestamp_ms),
            });
            self.announced = true;
        }
    }

    fn tool_call(
        &mut self,
        block: &Block<'_>,
        lane: Option<&str>,
        session_id: &str,
        at_ms: Option<i64>,
        events: &mut Vec<LogEvent>,
    ) {
        let Some(input) = &block.input.0 else {
            return;
        };
        let name = block.name.as_str().unwrap_or_default();
        let call = match name {
            "TodoWrite" => {
                if let Some(todos) = &input.todos.0 {
                    self.todo_write(todos, lane, session_id, at_ms, events);
                }
                return;
            }
            "TaskCreate" => PendingCall::TaskCreate {
                lane: lane.map(str::to_owned),
                subject: input.subject.as_str().unwrap_or_default().to_owned(),
                active_form: input.active_form().map(str::to_owned),
            },
            "TaskUpdate" => {
                let Some(task_id) = input.task_id() else {
                    return;
                };
                PendingCall::TaskUpdate {
                    lane: lane.map(str::to_owned),
                    task_id: task_id.to_owned(),
                    status: input.status.as_str().and_then(task_status),
                    subject: input.subject.as_str().map(str::to_owned),
                    active_form: input.active_form().map(str::to_owned),
                }
            }
            "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => {
                let path = if name == "NotebookEdit" {
                    &input.notebook_path
                } else {
                    &input.file_path
                };
                let Some(path) = path.as_str().filter(|path| !path.is_empty()) else {
                    return;
                };
                PendingCall::FileEdit {
                    tool: name.to_owned(),
                    // The record's cwd, taken in by `observe_session`.
                    path: super::paths::resolve(self.cwd.as_deref(), path),
                }
            }
            _ => return,
        };
        if let Some(id) = block.id.as_str() {
            self.pending.insert(id.to_owned(), call);
        }
    }

    fn todo_write(
        &mut self,
        todos: &[Todo<'_>],
        lane: Option<&str>,
        session_id: &str,
        at_ms: Option<i64>,
        events: &mut Vec<LogEvent>,
    ) {
        let list = lane_list(&mut self.todo_lists, lane);
        let tasks: Vec<TaskItem> = if todos.is_empty() {
            // Claude clears a finished list; keep showing what it held, as done.
            list.tasks
                .iter()
                .map(|task| TaskItem {
                    status: TaskStatus::Completed,
                    ..task.clone()
                })
                .collect()
        } else {
            todos.iter().map(Todo::to_task).collect()
        };
        list.tasks.clone_from(&tasks);
        events.push(LogEvent::Tasks {
            session_id: session_id.to_owned(),
            lane: lane.map(str::to_owned),
            source: TODO_WRITE_SOURCE.to_owned(),
            tasks,
            at_ms,
        });
    }

    fn tool_result(
        &mut self,
        block: &Block<'_>,
        outcome: Option<&ToolUseResult<'_>>,
        session_id: &str,
        at_ms: Option<i64>,
        events: &mut Vec<LogEvent>,
    ) {
        let Some(call) = block
            .tool_use_id
            .as_str()
            .and_then(|id| self.pending.remove(id))
        else {
            return;
        };
        let failed = block.is_error.0 == Some(true)
            || outcome.is_some_and(|outcome| outcome.error_text || outcome.success == Some(false));
        if failed {
            return;
        }
        match call {
            PendingCall::FileEdit { tool, path } => events.push(LogEvent::FileTouched {
                session_id: session_id.to_owned(),
                path,
                tool,
                at_ms,
            }),
            PendingCall::TaskCreate {
                lane,
                subject,
                active_form,
            } => {
                let id = outcome
                    .and_then(|outcome| outcome.task_id.as_str())
                    .or(block.content.0.as_deref());
                let list = lane_list(&mut self.task_lists, lane.as_deref());
                match id.and_then(|id| find_task(&mut list.tasks, id)) {
                    // The same creation seen again (a history copied on resume).
                    Some(task) => {
                        task.title = subject;
                        task.active_form = active_form;
                    }
                    None => list.tasks.push(TaskItem {
                        id: id.map(str::to_owned),
                        title: subject,
                        status: TaskStatus::Pending,
                        active_form,
                    }),
                }
                self.emit_task_list(lane, session_id, at_ms, events);
            }
            PendingCall::TaskUpdate {
                lane,
                task_id,
                status,
                subject,
                active_form,
            } => {
                let list = lane_list(&mut self.task_lists, lane.as_deref());
                let known = list
                    .tasks
                    .iter()
                    .position(|task| task.id.as_deref() == Some(task_id.as_str()));
                let index = known.unwrap_or_else(|| {
                    // Created where this file cannot see (another lane, an earlier file).
                    list.tasks.push(TaskItem {
                        title: format!("Task #{task_id}"),
                        id: Some(task_id),
                        status: TaskStatus::Pending,
                        active_form: None,
                    });
                    list.tasks.len() - 1
                });
                let task = &mut list.tasks[index];
                if let Some(status) = status {
                    task.status = status;
                }
                if let Some(subject) = subject {
                    task.title = subject;
                }
                if active_form.is_some() {
                    task.active_form = active_form;
                }
                self.emit_task_list(lane, session_id, at_ms, events);
            }
        }
    }

    fn emit_task_list(
        &mut self,
        lane: Option<String>,
        session_id: &str,
        at_ms: Option<i64>,
        events: &mut Vec<LogEvent>,
    ) {
        let tasks = lane_list(&mut self.task_lists, lane.as_deref())
            .tasks
            .clone();
        events.push(LogEvent::Tasks {
            session_id: session_id.to_owned(),
            lane,
            source: TASK_TOOLS_SOURCE.to_owned(),
            tasks,
            at_ms,
        });
    }
}

fn lane_list<'l>(lists: &'l mut Vec<LaneTasks>, lane: Option<&str>) -> &'l mut LaneTasks {
    match lists.iter().position(|list| list.lane.as_deref() == lane) {
        Some(index) => &mut lists[index],
        None => {
            lists.push(LaneTasks {
                lane: lane.map(str::to_owned),
                tasks: Vec::new(),
            });
            lists.last_mut().expect("just pushed")
        }
    }
}

fn find_task<'t>(tasks: &'t mut [TaskItem], id: &str) -> Option<&'t mut TaskItem> {
    tasks.iter_mut().find(|task| task.id.as_deref() == Some(id))
}

/// Parses one file of `~/.claude/tasks/<list id>/<task id>.json` (the Task tools' store):
/// the task, or `None` when it is not a task file.
pub fn parse_task_file(bytes: &[u8]) -> Option<TaskItem> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).ok()?;
    let file = serde_json::from_str::<Lenient<TaskFile<'_>>>(text)
        .ok()?
        .0?;
    let id = file.id.as_str()?;
    let title = file.subject.as_str()?;
    Some(TaskItem {
        id: Some(id.to_owned()),
        title: title.to_owned(),
        status: file
            .status
            .as_str()
            .and_then(task_status)
            .unwrap_or(TaskStatus::Pending),
        active_form: file.active_form.as_str().map(str::to_owned),
    })
}

fn task_status(status: &str) -> Option<TaskStatus> {
    match status {
        "pending" => Some(TaskStatus::Pending),
        "in_progress" => Some(TaskStatus::InProgress),
        "completed" => Some(TaskStatus::Completed),
        "deleted" => Some(TaskStatus::Deleted),
        _ => None,
    }
}

/// Whether a string `toolUseResult` reports a failure: Claude Code writes the error there
/// ("Error: File has not been read yet…", "InputValidationError: …"), while a successful
/// tool writes an object or its plain output.
fn is_error_text(text: &str) -> bool {
    let text = text.trim_start();
    let head = text.split_once(':').map(|(head, _)| head);
    text.starts_with("Error")
        || text.starts_with("<tool_use_error>")
        || text.starts_with("User rejected")
        || head.is_some_and(|head| head.ends_with("Error") && !head.contains(char::is_whitespace))
}
