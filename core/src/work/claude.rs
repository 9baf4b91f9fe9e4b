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
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::events::{
    Billing, LineOutcome, LogEvent, RequestKey, TaskItem, TaskStatus, TokenCounts,
};
use super::lenient::timestamp_ms;

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
    let file = serde_json::from_str::<Object<TaskFile<'_>>>(text).ok()?.0?;
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

// ---------------------------------------------------------------------------------------
// The records, as far as they are read. Every field is optional and lenient (see
// `Lenient`); fields not named here are skipped without being decoded.

#[derive(Default, Deserialize)]
#[serde(default)]
struct Record<'a> {
    #[serde(rename = "type", borrow)]
    kind: Text<'a>,
    #[serde(rename = "sessionId", borrow)]
    session_id: Text<'a>,
    #[serde(borrow)]
    cwd: Text<'a>,
    #[serde(borrow)]
    timestamp: Text<'a>,
    #[serde(rename = "isSidechain")]
    is_sidechain: Flag,
    #[serde(rename = "agentId", borrow)]
    agent_id: Text<'a>,
    #[serde(rename = "requestId", borrow)]
    request_id: Text<'a>,
    #[serde(borrow)]
    message: Object<Message<'a>>,
    #[serde(rename = "toolUseResult", borrow)]
    tool_use_result: ToolUseResult<'a>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Message<'a> {
    #[serde(borrow)]
    id: Text<'a>,
    #[serde(borrow)]
    model: Text<'a>,
    #[serde(borrow)]
    content: Blocks<'a>,
    #[serde(borrow)]
    usage: Object<Usage<'a>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Usage<'a> {
    input_tokens: Count,
    output_tokens: Count,
    cache_creation_input_tokens: Count,
    cache_read_input_tokens: Count,
    cache_creation: Object<CacheCreation>,
    /// `"fast"` in fast mode.
    #[serde(borrow)]
    speed: Text<'a>,
    #[serde(borrow)]
    inference_geo: Text<'a>,
    server_tool_use: Object<ServerToolUse>,
    /// The steps of the request; an advisor's (`advisor_message`) ran on its own model and
    /// is billed at its price, apart from the request's own tokens.
    #[serde(borrow)]
    iterations: Iterations<'a>,
}

#[derive(Default)]
struct Iterations<'a>(Vec<Iteration<'a>>);

#[derive(Default, Deserialize)]
#[serde(default)]
struct Iteration<'a> {
    #[serde(rename = "type", borrow)]
    kind: Text<'a>,
    #[serde(borrow)]
    model: Text<'a>,
    input_tokens: Count,
    output_tokens: Count,
    cache_creation_input_tokens: Count,
    cache_read_input_tokens: Count,
    cache_creation: Object<CacheCreation>,
}

impl Iteration<'_> {
    fn tokens(&self) -> TokenCounts {
        split_cache_writes(
            self.input_tokens.0,
            self.output_tokens.0,
            self.cache_creation_input_tokens.0,
            self.cache_read_input_tokens.0,
            self.cache_creation.0.as_ref(),
        )
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct ServerToolUse {
    web_search_requests: Count,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct CacheCreation {
    ephemeral_5m_input_tokens: Option<Count>,
    ephemeral_1h_input_tokens: Option<Count>,
}

impl Usage<'_> {
    /// What the request is billed for besides its tokens.
    fn billing(&self) -> Billing {
        Billing {
            fast: self.speed.as_str() == Some("fast"),
            service_tier: None,
            geo: self
                .inference_geo
                .as_str()
                .filter(|geo| !geo.is_empty())
                .map(str::to_owned),
            web_searches: self
                .server_tool_use
                .0
                .as_ref()
                .map_or(0, |tools| tools.web_search_requests.0),
        }
    }

    fn tokens(&self) -> TokenCounts {
        split_cache_writes(
            self.input_tokens.0,
            self.output_tokens.0,
            self.cache_creation_input_tokens.0,
            self.cache_read_input_tokens.0,
            self.cache_creation.0.as_ref(),
        )
    }
}

/// Tokens of a usage block, cache writes split by how long they are kept (all five-minute
/// without a breakdown).
fn split_cache_writes(
    input: u64,
    output: u64,
    cache_write: u64,
    cache_read: u64,
    breakdown: Option<&CacheCreation>,
) -> TokenCounts {
    let breakdown = breakdown.filter(|cache| {
        cache.ephemeral_5m_input_tokens.is_some() || cache.ephemeral_1h_input_tokens.is_some()
    });
    let (cache_write_5m, cache_write_1h) = match breakdown {
        Some(cache) => (
            cache.ephemeral_5m_input_tokens.unwrap_or_default().0,
            cache.ephemeral_1h_input_tokens.unwrap_or_default().0,
        ),
        None => (cache_write, 0),
    };
    TokenCounts {
        input,
        output,
        cache_write_5m,
        cache_write_1h,
        cache_read,
    }
}

/// The content blocks this parser acts on: `tool_use` and `tool_result` (text and
/// thinking blocks are read past).
#[derive(Default)]
struct Blocks<'a>(Vec<Block<'a>>);

#[derive(Default, Deserialize)]
#[serde(default)]
struct Block<'a> {
    #[serde(rename = "type")]
    kind: BlockKind,
    #[serde(borrow)]
    id: Text<'a>,
    #[serde(borrow)]
    name: Text<'a>,
    #[serde(borrow)]
    input: Object<ToolInput<'a>>,
    #[serde(borrow)]
    tool_use_id: Text<'a>,
    is_error: Flag,
    /// A tool result's text, read only for the id a `TaskCreate` got.
    content: CreatedTask,
}

/// The id in a `TaskCreate` result's text (`Task #3 created successfully: …`): where a
/// transcript's `toolUseResult` does not carry it, the text still does.
#[derive(Default)]
struct CreatedTask(Option<String>);

/// `Task #N created successfully…` → `N`.
fn created_task_id(text: &str) -> Option<String> {
    let rest = text.trim_start().strip_prefix("Task #")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && rest[digits..].starts_with(" created")).then(|| rest[..digits].to_owned())
}

/// Whether `key` (`"name":`) is in `line` at most once and, where it is, says `value`
/// (written as JSON writes a string that needs no escapes); with no value known, it must
/// be absent.
fn names_once(line: &[u8], key: &memchr::memmem::Finder<'_>, value: Option<&str>) -> bool {
    let mut found = key.find_iter(line);
    let Some(at) = found.next() else {
        return true;
    };
    let Some(value) = value else {
        return false;
    };
    if found.next().is_some()
        || value
            .bytes()
            .any(|byte| byte == b'"' || byte == b'\\' || byte < 0x20)
    {
        return false;
    }
    let rest = &line[at + key.needle().len()..];
    rest.first() == Some(&b'"')
        && rest[1..].starts_with(value.as_bytes())
        && rest.get(1 + value.len()) == Some(&b'"')
}

/// A text block of a tool result's content.
#[derive(Default, Deserialize)]
#[serde(default)]
struct ResultText {
    text: CreatedTaskText,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    ToolUse,
    ToolResult,
    #[default]
    Other,
}

/// The input keys of every tool read here, in one struct (the tool's name may come after
/// its input in the JSON).
#[derive(Default, Deserialize)]
#[serde(default)]
struct ToolInput<'a> {
    #[serde(borrow)]
    todos: Todos<'a>,
    #[serde(borrow)]
    file_path: Text<'a>,
    #[serde(borrow)]
    notebook_path: Text<'a>,
    #[serde(borrow)]
    subject: Text<'a>,
    #[serde(borrow)]
    status: Text<'a>,
    // Claude Code repairs `id`/`task_id` to `taskId` and `active_form` to `activeForm`
    // before running the tool, but the transcript keeps what the model wrote.
    #[serde(rename = "taskId", borrow)]
    task_id_camel: Text<'a>,
    #[serde(rename = "task_id", borrow)]
    task_id_snake: Text<'a>,
    #[serde(borrow)]
    id: Text<'a>,
    #[serde(rename = "activeForm", borrow)]
    active_form_camel: Text<'a>,
    #[serde(rename = "active_form", borrow)]
    active_form_snake: Text<'a>,
}

impl ToolInput<'_> {
    fn task_id(&self) -> Option<&str> {
        self.task_id_camel
            .as_str()
            .or(self.id.as_str())
            .or(self.task_id_snake.as_str())
    }

    fn active_form(&self) -> Option<&str> {
        self.active_form_camel
            .as_str()
            .or(self.active_form_snake.as_str())
    }
}

/// `TodoWrite`'s `todos`: `Some` only when it is an array.
#[derive(Default)]
struct Todos<'a>(Option<Vec<Todo<'a>>>);

/// A `TodoWrite` item: `{content, status, activeForm}`, or before mid-2025
/// `{id, content, status, priority}`.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Todo<'a> {
    #[serde(borrow)]
    id: Text<'a>,
    #[serde(borrow)]
    content: Text<'a>,
    #[serde(borrow)]
    status: Text<'a>,
    #[serde(rename = "activeForm", borrow)]
    active_form: Text<'a>,
}

impl Todo<'_> {
    fn to_task(&self) -> TaskItem {
        TaskItem {
            id: self.id.as_str().map(str::to_owned),
            title: self.content.as_str().unwrap_or_default().to_owned(),
            status: self
                .status
                .as_str()
                .and_then(task_status)
                .unwrap_or(TaskStatus::Pending),
            active_form: self.active_form.as_str().map(str::to_owned),
        }
    }
}

/// What a record's `toolUseResult` tells of its tool's outcome: an error string, a
/// `success: false`, or the id a `TaskCreate` got.
#[derive(Default)]
struct ToolUseResult<'a> {
    error_text: bool,
    success: Option<bool>,
    task_id: Text<'a>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct ToolUseResultObject<'a> {
    success: Flag,
    #[serde(borrow)]
    task: Object<TaskRef<'a>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct TaskRef<'a> {
    #[serde(borrow)]
    id: Text<'a>,
}

/// A file of the Task tools' store: `{id, subject, description, activeForm, status, …}`.
#[derive(Default, Deserialize)]
#[serde(default)]
struct TaskFile<'a> {
    #[serde(borrow)]
    id: Text<'a>,
    #[serde(borrow)]
    subject: Text<'a>,
    #[serde(borrow)]
    status: Text<'a>,
    #[serde(rename = "activeForm", borrow)]
    active_form: Text<'a>,
}

// ---------------------------------------------------------------------------------------
// Lenient values: each reads any JSON value, keeps it when it has the expected kind and
// reads anything else as absent. Unwanted arrays and objects are skipped with
// `IgnoredAny`, which does not recurse.

/// A string (borrowed from the line when it has no escapes); a number is kept as its text
/// (ids are sometimes numbers).
#[derive(Default)]
struct Text<'a>(Option<Cow<'a, str>>);

impl Text<'_> {
    fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// A boolean.
#[derive(Default)]
struct Flag(Option<bool>);

/// A token count: a non-negative integer (a negative or fractional one is clamped).
#[derive(Default, Clone, Copy)]
struct Count(u64);

/// An object read as `T`, or `None` when the value is not an object.
struct Object<T>(Option<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Object(None)
    }
}

/// A value kind read leniently: each method turns one JSON kind into the value, the
/// default ones read it as absent.
trait Lenient<'de>: Default {
    fn from_bool(_value: bool) -> Self {
        Self::default()
    }

    fn from_u64(_value: u64) -> Self {
        Self::default()
    }

    fn from_i64(value: i64) -> Self {
        u64::try_from(value).map_or_else(|_| Self::default(), Self::from_u64)
    }

    fn from_f64(_value: f64) -> Self {
        Self::default()
    }

    /// A string that lives only for the call (it had escapes).
    fn from_str(_value: &str) -> Self {
        Self::default()
    }

    /// A string borrowed from the line.
    fn from_borrowed_str(value: &'de str) -> Self {
        Self::from_str(value)
    }

    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }

    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }
}

struct LenientVisitor<T>(PhantomData<T>);

impl<'de, T: Lenient<'de>> Visitor<'de> for LenientVisitor<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<T, E> {
        Ok(T::from_bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<T, E> {
        Ok(T::from_i64(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<T, E> {
        Ok(T::from_u64(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<T, E> {
        Ok(T::from_f64(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<T, E> {
        Ok(T::from_str(value))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<T, E> {
        Ok(T::from_borrowed_str(value))
    }

    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_none<E>(self) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::from_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::from_map(map)
    }
}

/// Implements `Deserialize` for a lenient type through its `Lenient` methods.
macro_rules! deserialize_leniently {
    ($type:ident<$lifetime:lifetime>) => {
        impl<'de: $lifetime, $lifetime> Deserialize<'de> for $type<$lifetime> {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any(LenientVisitor(PhantomData))
            }
        }
    };
    ($type:ty) => {
        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any(LenientVisitor(PhantomData))
            }
        }
    };
}

impl<'de: 'a, 'a> Lenient<'de> for Text<'a> {
    fn from_u64(value: u64) -> Self {
        Text(Some(Cow::Owned(value.to_string())))
    }

    fn from_i64(value: i64) -> Self {
        Text(Some(Cow::Owned(value.to_string())))
    }

    fn from_str(value: &str) -> Self {
        Text(Some(Cow::Owned(value.to_owned())))
    }

    fn from_borrowed_str(value: &'de str) -> Self {
        Text(Some(Cow::Borrowed(value)))
    }
}
deserialize_leniently!(Text<'a>);

impl Lenient<'_> for Flag {
    fn from_bool(value: bool) -> Self {
        Flag(Some(value))
    }
}
deserialize_leniently!(Flag);

impl Lenient<'_> for Count {
    fn from_u64(value: u64) -> Self {
        Count(value)
    }

    fn from_f64(value: f64) -> Self {
        // `as` saturates, and reads NaN as 0.
        Count(value as u64)
    }
}
deserialize_leniently!(Count);

impl Lenient<'_> for BlockKind {
    fn from_str(value: &str) -> Self {
        match value {
            "tool_use" => BlockKind::ToolUse,
            "tool_result" => BlockKind::ToolResult,
            _ => BlockKind::Other,
        }
    }
}
deserialize_leniently!(BlockKind);

impl<'de, T: Deserialize<'de>> Lenient<'de> for Object<T> {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|value| Object(Some(value)))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor(PhantomData))
    }
}

impl<'de: 'a, 'a> Lenient<'de> for Blocks<'a> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut blocks = Vec::new();
        while let Some(block) = seq.next_element::<Object<Block<'a>>>()? {
            if let Some(block) = block.0.filter(|block| block.kind != BlockKind::Other) {
                blocks.push(block);
            }
        }
        Ok(Blocks(blocks))
    }
}
deserialize_leniently!(Blocks<'a>);

impl<'de: 'a, 'a> Lenient<'de> for Iterations<'a> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut iterations = Vec::new();
        while let Some(iteration) = seq.next_element::<Object<Iteration<'a>>>()? {
            iterations.extend(iteration.0);
        }
        Ok(Iterations(iterations))
    }
}
deserialize_leniently!(Iterations<'a>);

impl<'de> Deserialize<'de> for CreatedTask {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A result's content is mostly long text (a file, a command's output): it is
        // skipped as raw JSON, never unescaped, unless it may say `Task #N created`.
        let raw = <&'de serde_json::value::RawValue>::deserialize(deserializer)?;
        if memchr::memmem::find(raw.get().as_bytes(), b"Task #").is_none() {
            return Ok(CreatedTask(None));
        }
        Ok(serde_json::from_str::<CreatedTaskText>(raw.get())
            .map(|text| text.0)
            .unwrap_or_default())
    }
}

/// A result's content that may hold a created task's id, read leniently.
#[derive(Default)]
struct CreatedTaskText(CreatedTask);

impl<'de> Lenient<'de> for CreatedTaskText {
    fn from_str(value: &str) -> Self {
        CreatedTaskText(CreatedTask(created_task_id(value)))
    }

    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut found = None;
        while let Some(block) = seq.next_element::<Object<ResultText>>()? {
            if found.is_none() {
                found = block.0.and_then(|block| block.text.0.0);
            }
        }
        Ok(CreatedTaskText(CreatedTask(found)))
    }
}
deserialize_leniently!(CreatedTaskText);

impl<'de: 'a, 'a> Lenient<'de> for Todos<'a> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut todos = Vec::new();
        while let Some(todo) = seq.next_element::<Object<Todo<'a>>>()? {
            todos.extend(todo.0);
        }
        Ok(Todos(Some(todos)))
    }
}
deserialize_leniently!(Todos<'a>);

impl<'de: 'a, 'a> Lenient<'de> for ToolUseResult<'a> {
    fn from_str(value: &str) -> Self {
        ToolUseResult {
            error_text: is_error_text(value),
            ..ToolUseResult::default()
        }
    }

    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let object = ToolUseResultObject::deserialize(MapAccessDeserializer::new(map))?;
        Ok(ToolUseResult {
            error_text: false,
            success: object.success.0,
            task_id: object.task.0.map(|task| task.id).unwrap_or_default(),
        })
    }
}
deserialize_leniently!(ToolUseResult<'a>);

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap, HashSet};
    use std::path::{Path, PathBuf};

    use proptest::prelude::*;

    use super::*;

    // Real transcripts from public repositories (shared/fixtures/agent-logs, see its
    // SOURCES.txt), not part of the repository: see `crate::shared_agent_logs`.

    // Project-owned fixtures (tests/fixtures/claude/). The first two were written by the
    // fake `claude` (tests/fixtures/agent-clis/claude, Claude Code 2.1.240's format), the
    // others by hand in the real format.
    /// Three `TaskCreate`s, then `TaskUpdate`s: completed, in progress, deleted.
    const TASKS_FIXTURE: &[u8] =
        include_bytes!("../../tests/fixtures/claude/tasks-created-updated-deleted.jsonl");
    /// A `TodoWrite` list, an `Edit`, then a `TodoWrite` that clears the list.
    const CLEARED_FIXTURE: &[u8] =
        include_bytes!("../../tests/fixtures/claude/todowrite-cleared.jsonl");
    /// Failed, successful, relative and unfinished edits; a progress line and an Agent
    /// result that embed a subagent's usage.
    const EDITS_FIXTURE: &[u8] = include_bytes!("../../tests/fixtures/claude/session-edits.jsonl");
    /// The subagent of `session-edits`: its own todo lane, a repeated request, and a replay
    /// of a parent request.
    const SUBAGENT_FIXTURE: &[u8] =
        include_bytes!("../../tests/fixtures/claude/session-edits/subagents/agent-a1b2c3d.jsonl");
    /// A file of the Task tools' store, as the fake claude writes it.
    const TASK_STORE_FIXTURE: &[u8] =
        include_bytes!("../../tests/fixtures/claude/task-store-deleted.json");

    // ---------------------------------------------------------------- helpers

    fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
        bytes
            .split(|&byte| byte == b'\n')
            .filter(|line| !line.is_empty())
    }

    /// Every event of a file, read in one pass; and how many lines were skipped.
    fn parse(bytes: &[u8]) -> (Vec<LogEvent>, usize) {
        let mut parser = ClaudeParser::new();
        let mut events = Vec::new();
        let mut skipped = 0;
        for line in lines(bytes) {
            if parser.line(line, &mut events) == LineOutcome::Skipped {
                skipped += 1;
            }
        }
        (events, skipped)
    }

    /// Every event and outcome of a file, with the look that spares lines or without.
    fn parse_looking(bytes: &[u8], look: bool) -> Vec<(LineOutcome, Vec<LogEvent>)> {
        let mut parser = ClaudeParser::new();
        lines(bytes)
            .map(|line| {
                let mut events = Vec::new();
                let outcome = parser.read_line(line, &mut events, look);
                (outcome, events)
            })
            .collect()
    }

    #[test]
    fn the_lines_a_look_spares_say_nothing_when_read() {
        let mut files: Vec<(String, Vec<u8>)> = [
            ("tasks", TASKS_FIXTURE),
            ("cleared", CLEARED_FIXTURE),
            ("edits", EDITS_FIXTURE),
            ("subagent", SUBAGENT_FIXTURE),
        ]
        .iter()
        .map(|(name, bytes)| ((*name).to_owned(), bytes.to_vec()))
        .collect();
        files.extend(shared_transcripts());
        let mut spared = 0;
        for (name, bytes) in &files {
            let looking = parse_looking(bytes, true);
            assert_eq!(looking, parse_looking(bytes, false), "{name}");
            // Lines the look spared: read, saying nothing (a read line may say nothing
            // too; the count is only for the message).
            spared += looking
                .iter()
                .filter(|(outcome, events)| *outcome == LineOutcome::Read && events.is_empty())
                .count();
        }
        assert!(spared > 0, "no line was spared: the look does nothing");
        // A result awaited is read even when the line looks like any other.
        let call = br#"{"type":"assistant","sessionId":"s","cwd":"/w","timestamp":"2026-12-02T00:00:00Z","message":{"id":"m","model":"claude-opus-5-5","content":[{"type":"tool_use","id":"toolu_1","name":"Write","input":{"file_path":"a.rs"}}],"usage":{"input_tokens":1,"output_tokens":1}}}"#;
        let result = br#"{"type":"user","sessionId":"s","cwd":"/w","timestamp":"2026-12-02T00:00:01Z","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"written"}]}}"#;
        let other = br#"{"type":"user","sessionId":"s","cwd":"/w","timestamp":"2026-12-02T00:00:02Z","message":{"role":"user","content":[{"tool_use_id":"toolu_9","type":"tool_result","content":"unrelated"}]}}"#;
        let mut parser = ClaudeParser::new();
        let mut events = Vec::new();
        parser.line(call, &mut events);
        assert!(!parser.says_nothing_new(result));
        assert!(parser.says_nothing_new(other));
        events.clear();
        parser.line(result, &mut events);
        assert!(
            events.iter().any(
                |event| matches!(event, LogEvent::FileTouched { path, .. } if path == "/w/a.rs")
            ),
            "{events:?}"
        );
        // Another directory, or no session known yet: read.
        let moved = br#"{"type":"user","sessionId":"s","cwd":"/elsewhere","message":{"role":"user","content":"hi"}}"#;
        assert!(!parser.says_nothing_new(moved));
        assert!(!ClaudeParser::new().says_nothing_new(other));
    }

    fn events_of(bytes: &[u8]) -> Vec<LogEvent> {
        parse(bytes).0
    }

    /// The token totals of a session's events after ccusage's de-duplication
    /// (AGENT-FORMATS §1.3): a side-chain report of a main-chain message is dropped, then
    /// the largest report of each request counts.
    fn deduplicated_tokens(events: &[LogEvent]) -> TokenCounts {
        let main_chain: HashSet<&str> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Usage {
                    key: Some(key),
                    sidechain: false,
                    ..
                } => Some(key.message_id.as_str()),
                _ => None,
            })
            .collect();
        let mut largest: HashMap<&RequestKey, TokenCounts> = HashMap::new();
        let mut total = TokenCounts::default();
        for event in events {
            let LogEvent::Usage {
                key,
                sidechain,
                tokens,
                ..
            } = event
            else {
                continue;
            };
            match key {
                None => total.add(tokens),
                Some(key) if *sidechain && main_chain.contains(key.message_id.as_str()) => {}
                Some(key) => {
                    let best = largest.entry(key).or_default();
                    if tokens.total() > best.total() {
                        *best = *tokens;
                    }
                }
            }
        }
        for tokens in largest.values() {
            total.add(tokens);
        }
        total
    }

    /// The last list of each lane: (source, tasks).
    fn last_lists(events: &[LogEvent]) -> BTreeMap<Option<String>, (String, Vec<TaskItem>)> {
        let mut lists = BTreeMap::new();
        for event in events {
            if let LogEvent::Tasks {
                lane,
                source,
                tasks,
                ..
            } = event
            {
                lists.insert(lane.clone(), (source.clone(), tasks.clone()));
            }
        }
        lists
    }

    fn touched(events: &[LogEvent]) -> Vec<(String, String)> {
        events
            .iter()
            .filter_map(|event| match event {
                LogEvent::FileTouched { tool, path, .. } => Some((tool.clone(), path.clone())),
                _ => None,
            })
            .collect()
    }

    fn task(
        id: Option<&str>,
        title: &str,
        status: TaskStatus,
        active_form: Option<&str>,
    ) -> TaskItem {
        TaskItem {
            id: id.map(str::to_owned),
            title: title.to_owned(),
            status,
            active_form: active_form.map(str::to_owned),
        }
    }

    fn tokens(
        input: u64,
        output: u64,
        cache_write_5m: u64,
        cache_write_1h: u64,
        cache_read: u64,
    ) -> TokenCounts {
        TokenCounts {
            input,
            output,
            cache_write_5m,
            cache_write_1h,
            cache_read,
        }
    }

    fn one_line(line: &str) -> (LineOutcome, Vec<LogEvent>) {
        let mut events = Vec::new();
        let outcome = ClaudeParser::new().line(line.as_bytes(), &mut events);
        (outcome, events)
    }

    fn shared_fixtures() -> Option<PathBuf> {
        crate::shared_agent_logs("claude-code")
    }

    /// Every shared real transcript (none when they are absent), by name.
    fn shared_transcripts() -> Vec<(String, Vec<u8>)> {
        let Some(root) = shared_fixtures() else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|ext| ext == "jsonl") {
                    found.push((path.display().to_string(), read(&path)));
                }
            }
        }
        found
    }

    fn read(path: &Path) -> Vec<u8> {
        std::fs::read(path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
    }

    use TaskStatus::{Completed, Deleted, InProgress, Pending};

    // ---------------------------------------------------------------- golden: real logs

    type Lane = (Option<&'static str>, &'static str, &'static [Task]);
    type Task = (
        Option<&'static str>,
        &'static str,
        TaskStatus,
        Option<&'static str>,
    );

    struct Golden {
        file: &'static str,
        /// After de-duplication.
        tokens: TokenCounts,
        /// The last list of each lane.
        lanes: &'static [Lane],
        /// (tool, path), in order.
        files: &'static [(&'static str, &'static str)],
    }

    // Computed independently of this parser by two short Python scripts run once over the
    // fixtures (json.loads per line):
    // - tokens: type=="assistant" lines with a dict message.usage; input_tokens,
    //   output_tokens, cache_read_input_tokens, and cache_creation_input_tokens split by
    //   usage.cache_creation.ephemeral_{5m,1h}_input_tokens when present (else all 5m);
    //   keep the largest total per (message.id, requestId); drop a sidechain line whose
    //   message.id is also a non-sidechain line's. Their sum over the five sessions is
    //   ccusage's (`ccusage claude session --offline --json` over copies of these files):
    //   input 2907, output 8547, cache creation 121494, cache read 1272017.
    // - tasks and files: TodoWrite inputs (an empty list after a non-empty one repeats it
    //   as completed), TaskCreate/TaskUpdate applied on a non-error result, and
    //   Edit/Write/MultiEdit/NotebookEdit paths whose tool_result arrived without is_error
    //   and without an error string as toolUseResult.
    const GOLDEN: &[Golden] = &[
        Golden {
            file: "claude-code-viewer/sample-project/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
            tokens: TokenCounts {
                input: 93,
                output: 953,
                cache_write_5m: 12698,
                cache_write_1h: 0,
                cache_read: 103219,
            },
            lanes: &[(
                None,
                "TodoWrite",
                &[(
                    None,
                    "Create CLAUDE.md with essential information",
                    Completed,
                    Some("Creating CLAUDE.md with essential information"),
                )],
            )],
            // The Write was refused (permission not granted).
            files: &[],
        },
        Golden {
            file: "claude-code-viewer/sample-project/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
            tokens: TokenCounts {
                input: 129,
                output: 3629,
                cache_write_5m: 47747,
                cache_write_1h: 0,
                cache_read: 324259,
            },
            lanes: &[(
                None,
                "TodoWrite",
                &[
                    (
                        None,
                        "Discover available commands in the project",
                        Completed,
                        Some("Discovering available commands in the project"),
                    ),
                    (
                        None,
                        "Analyze current project structure",
                        Completed,
                        Some("Analyzing current project structure"),
                    ),
                    (
                        None,
                        "Check package.json for dependencies and scripts",
                        Completed,
                        Some("Checking package.json for dependencies and scripts"),
                    ),
                    (
                        None,
                        "Update CLAUDE.md with latest project information",
                        Completed,
                        Some("Updating CLAUDE.md with latest project information"),
                    ),
                ],
            )],
            // The Edit failed ("File has not been read yet"); the MultiEdit succeeded.
            files: &[("MultiEdit", "/path/to/Demo/CLAUDE.md")],
        },
        Golden {
            file: "fasthooks/sample_main_transcript.jsonl",
            tokens: TokenCounts {
                input: 132,
                output: 1480,
                cache_write_5m: 8467,
                cache_write_1h: 0,
                cache_read: 223265,
            },
            lanes: &[],
            files: &[
                ("Write", "/workspace/hello_world.py"),
                ("Write", "/workspace/number_generator.py"),
                ("Write", "/workspace/data.txt"),
            ],
        },
        Golden {
            // Hook payloads, not a transcript: objects that say nothing to this parser.
            file: "fasthooks/sample_hook_logs.jsonl",
            tokens: TokenCounts {
                input: 0,
                output: 0,
                cache_write_5m: 0,
                cache_write_1h: 0,
                cache_read: 0,
            },
            lanes: &[],
            files: &[],
        },
        Golden {
            file: "sniffly/-Users-chip-dev-ai-music/ba79134d-b6e9-4867-af0c-6941038c9e4b.jsonl",
            tokens: TokenCounts {
                input: 91,
                output: 2266,
                cache_write_5m: 16072,
                cache_write_1h: 0,
                cache_read: 503769,
            },
            lanes: &[(
                None,
                "TodoWrite",
                &[
                    (
                        Some("1"),
                        "Set up project dependencies (requirements.txt)",
                        Completed,
                        None,
                    ),
                    (Some("2"), "Create main program structure", Completed, None),
                    (Some("3"), "Implement text tokenization", Completed, None),
                    (
                        Some("4"),
                        "Implement embedding generation for tokens",
                        Completed,
                        None,
                    ),
                    (
                        Some("5"),
                        "Create visualization of embedding values",
                        Completed,
                        None,
                    ),
                    (
                        Some("6"),
                        "Convert embedding graphs to sound waves",
                        Completed,
                        None,
                    ),
                    (
                        Some("7"),
                        "Implement audio playback for individual tokens",
                        Completed,
                        None,
                    ),
                    (
                        Some("8"),
                        "Combine all token sounds and play final result",
                        Completed,
                        None,
                    ),
                ],
            )],
            files: &[
                ("Write", "/Users/chip/dev/ai-music/CLAUDE.md"),
                ("Write", "/Users/chip/dev/ai-music/requirements.txt"),
                ("Write", "/Users/chip/dev/ai-music/ai_music.py"),
                ("Edit", "/Users/chip/dev/ai-music/CLAUDE.md"),
                ("Edit", "/Users/chip/dev/ai-music/CLAUDE.md"),
            ],
        },
        Golden {
            file: "spotter/tool_heavy.jsonl",
            tokens: TokenCounts {
                input: 54,
                output: 212,
                cache_write_5m: 0,
                cache_write_1h: 17696,
                cache_read: 88231,
            },
            lanes: &[],
            files: &[],
        },
        Golden {
            file: "spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl",
            tokens: TokenCounts {
                input: 2408,
                output: 7,
                cache_write_5m: 18814,
                cache_write_1h: 0,
                cache_read: 29274,
            },
            lanes: &[],
            files: &[],
        },
    ];

    #[test]
    fn real_transcripts_give_the_expected_tasks_files_and_tokens() {
        let Some(root) = shared_fixtures() else {
            return;
        };
        for golden in GOLDEN {
            let (events, skipped) = parse(&read(&root.join(golden.file)));
            assert_eq!(skipped, 0, "{}", golden.file);
            assert_eq!(
                deduplicated_tokens(&events),
                golden.tokens,
                "{}",
                golden.file
            );
            let expected_lists: BTreeMap<Option<String>, (String, Vec<TaskItem>)> = golden
                .lanes
                .iter()
                .map(|(lane, source, tasks)| {
                    let tasks = tasks
                        .iter()
                        .map(|(id, title, status, active_form)| {
                            task(*id, title, *status, *active_form)
                        })
                        .collect();
                    (lane.map(str::to_owned), ((*source).to_owned(), tasks))
                })
                .collect();
            assert_eq!(last_lists(&events), expected_lists, "{}", golden.file);
            let expected_files: Vec<(String, String)> = golden
                .files
                .iter()
                .map(|(tool, path)| ((*tool).to_owned(), (*path).to_owned()))
                .collect();
            assert_eq!(touched(&events), expected_files, "{}", golden.file);
        }
    }

    #[test]
    fn real_transcripts_add_up_to_ccusage_totals() {
        let Some(root) = shared_fixtures() else {
            return;
        };
        let mut by_session: BTreeMap<String, Vec<LogEvent>> = BTreeMap::new();
        for golden in GOLDEN {
            for event in events_of(&read(&root.join(golden.file))) {
                by_session
                    .entry(event.session_id().to_owned())
                    .or_default()
                    .push(event);
            }
        }
        let mut total = TokenCounts::default();
        for events in by_session.values() {
            total.add(&deduplicated_tokens(events));
        }
        assert_eq!(
            (
                total.input,
                total.output,
                total.cache_write(),
                total.cache_read
            ),
            (2907, 8547, 121_494, 1_272_017)
        );
    }

    #[test]
    fn real_subagent_file_counts_under_its_parent_session() {
        let Some(root) = shared_fixtures() else {
            return;
        };
        let events = events_of(&read(&root.join(GOLDEN[6].file)));
        assert!(!events.is_empty());
        assert!(
            events
                .iter()
                .all(|event| event.session_id() == "ae4a77f8-aedd-4bc1-888f-c94edc91af04")
        );
        assert!(events.iter().all(|event| match event {
            LogEvent::Usage { sidechain, .. } => *sidechain,
            _ => true,
        }));
    }

    #[test]
    fn real_transcripts_read_alike_whatever_the_spacing_key_order_and_escapes() {
        let Some(root) = shared_fixtures() else {
            return;
        };
        for golden in GOLDEN {
            let bytes = read(&root.join(golden.file));
            let mut rewritten = String::new();
            for line in lines(&bytes) {
                let value: serde_json::Value = serde_json::from_slice(line).expect("fixture line");
                write_odd_json(&value, &mut rewritten);
                rewritten.push('\n');
            }
            assert_eq!(
                events_of(rewritten.as_bytes()),
                events_of(&bytes),
                "{}",
                golden.file
            );
        }
    }

    /// JSON with keys in reverse order, odd spacing, and every string character escaped.
    fn write_odd_json(value: &serde_json::Value, out: &mut String) {
        use serde_json::Value;
        use std::fmt::Write as _;
        let escaped = |text: &str, out: &mut String| {
            out.push('"');
            for unit in text.encode_utf16() {
                let _ = write!(out, "\\u{unit:04X}");
            }
            out.push('"');
        };
        match value {
            Value::Object(map) => {
                out.push_str("{ \t");
                for (index, (key, value)) in map.iter().rev().enumerate() {
                    if index > 0 {
                        out.push_str(" ,\r ");
                    }
                    escaped(key, out);
                    out.push_str("  :\t");
                    write_odd_json(value, out);
                }
                out.push_str(" }");
            }
            Value::Array(items) => {
                out.push_str("[ ");
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push_str(" , ");
                    }
                    write_odd_json(item, out);
                }
                out.push_str(" ]");
            }
            Value::String(text) => escaped(text, out),
            other => out.push_str(&other.to_string()),
        }
    }

    #[test]
    fn real_transcripts_resume_from_a_saved_state_after_any_line() {
        let Some(root) = shared_fixtures() else {
            return;
        };
        for golden in GOLDEN {
            let bytes = read(&root.join(golden.file));
            assert_resumes_alike(&bytes, golden.file);
        }
    }

    /// Stopping after each line, saving the state as JSON and going on from a copy gives
    /// the events of one pass.
    fn assert_resumes_alike(bytes: &[u8], name: &str) {
        /// As the watcher keeps it (scan.rs's `LineParser`): inside an internally tagged enum.
        #[derive(Serialize, Deserialize)]
        #[serde(tag = "parser", rename_all = "snake_case")]
        enum Saved {
            Claude(ClaudeParser),
        }
        let one_pass = events_of(bytes);
        let all: Vec<&[u8]> = lines(bytes).collect();
        for split in 0..=all.len() {
            let mut parser = ClaudeParser::new();
            let mut events = Vec::new();
            for line in &all[..split] {
                parser.line(line, &mut events);
            }
            let saved = serde_json::to_string(&Saved::Claude(parser)).expect("state serializes");
            let Saved::Claude(mut parser) = serde_json::from_str(&saved).expect("state reads back");
            for line in &all[split..] {
                parser.line(line, &mut events);
            }
            assert_eq!(events, one_pass, "{name}, resumed after line {split}");
        }
    }

    // ---------------------------------------------------------------- project fixtures

    #[test]
    fn task_tools_take_ids_from_results_and_keep_deleted_tasks() {
        let events = events_of(TASKS_FIXTURE);
        let lists: Vec<&Vec<TaskItem>> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Tasks {
                    source,
                    lane,
                    tasks,
                    ..
                } => {
                    assert_eq!((source.as_str(), lane), ("tasks", &None));
                    Some(tasks)
                }
                _ => None,
            })
            .collect();
        // 3 creations and 4 updates, each followed by the whole list.
        assert_eq!(lists.len(), 7);
        assert_eq!(
            lists[0],
            &vec![task(
                Some("1"),
                "Write the parser",
                Pending,
                Some("Writing the parser")
            )]
        );
        assert_eq!(
            *lists.last().unwrap(),
            &vec![
                task(
                    Some("1"),
                    "Write the parser",
                    Completed,
                    Some("Writing the parser")
                ),
                task(
                    Some("2"),
                    "Test the parser",
                    InProgress,
                    Some("Testing the parser")
                ),
                task(
                    Some("3"),
                    "Drop the old code",
                    Deleted,
                    Some("Dropping the old code")
                ),
            ]
        );
        assert_eq!(
            deduplicated_tokens(&events),
            tokens(9, 696, 0, 1877, 132_120)
        );
        assert_resumes_alike(TASKS_FIXTURE, "tasks fixture");
    }

    #[test]
    fn a_failed_task_result_changes_nothing() {
        let call = r#"{"type":"assistant","sessionId":"s","message":{"id":"m","content":[{"type":"tool_use","id":"t1","name":"TaskCreate","input":{"subject":"A"}}]}}"#;
        let failed = r#"{"type":"user","sessionId":"s","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"boom"}]}}"#;
        let update = r#"{"type":"assistant","sessionId":"s","message":{"id":"m2","content":[{"type":"tool_use","id":"t2","name":"TaskUpdate","input":{"taskId":"1","status":"completed"}}]}}"#;
        let refused = r#"{"type":"user","sessionId":"s","toolUseResult":{"success":false,"taskId":"1"},"message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":"Task not found"}]}}"#;
        let input = [call, failed, update, refused].join("\n");
        assert_eq!(last_lists(&events_of(input.as_bytes())), BTreeMap::new());
    }

    #[test]
    fn task_updates_read_the_id_under_any_of_its_names() {
        let mut lines = vec![
            r#"{"type":"assistant","sessionId":"s","message":{"content":[{"type":"tool_use","id":"c","name":"TaskCreate","input":{"subject":"A","active_form":"Doing A"}}]}}"#.to_owned(),
            r#"{"type":"user","sessionId":"s","toolUseResult":{"task":{"id":7,"subject":"A"}},"message":{"content":[{"type":"tool_result","tool_use_id":"c","content":"Task #7 created successfully: A"}]}}"#.to_owned(),
        ];
        for (index, (key, status)) in [("id", "in_progress"), ("task_id", "completed")]
            .iter()
            .enumerate()
        {
            lines.push(format!(
                r#"{{"type":"assistant","sessionId":"s","message":{{"content":[{{"type":"tool_use","id":"u{index}","name":"TaskUpdate","input":{{"{key}":"7","status":"{status}"}}}}]}}}}"#
            ));
            lines.push(format!(
                r#"{{"type":"user","sessionId":"s","toolUseResult":{{"success":true}},"message":{{"content":[{{"type":"tool_result","tool_use_id":"u{index}","content":"Updated task #7 status"}}]}}}}"#
            ));
        }
        let events = events_of(lines.join("\n").as_bytes());
        let lists = last_lists(&events);
        assert_eq!(
            lists[&None].1,
            vec![task(Some("7"), "A", Completed, Some("Doing A"))]
        );
    }

    #[test]
    fn an_update_of_a_task_created_out_of_sight_adds_it() {
        let input = [
            r#"{"type":"assistant","sessionId":"s","message":{"content":[{"type":"tool_use","id":"u","name":"TaskUpdate","input":{"taskId":"5","status":"completed"}}]}}"#,
            r#"{"type":"user","sessionId":"s","toolUseResult":{"success":true,"taskId":"5"},"message":{"content":[{"type":"tool_result","tool_use_id":"u","content":"Updated task #5 status"}]}}"#,
        ]
        .join("\n");
        let lists = last_lists(&events_of(input.as_bytes()));
        assert_eq!(
            lists[&None].1,
            vec![task(Some("5"), "Task #5", Completed, None)]
        );
    }

    #[test]
    fn a_cleared_todo_list_shows_its_items_completed() {
        let events = events_of(CLEARED_FIXTURE);
        let snapshots: Vec<&Vec<TaskItem>> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Tasks { tasks, source, .. } => {
                    assert_eq!(source, "TodoWrite");
                    Some(tasks)
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            snapshots,
            vec![
                &vec![
                    task(None, "Read the logs", Completed, Some("Reading the logs")),
                    task(None, "Summarize", InProgress, Some("Summarizing")),
                ],
                &vec![
                    task(None, "Read the logs", Completed, Some("Reading the logs")),
                    task(None, "Summarize", Completed, Some("Summarizing")),
                ],
            ]
        );
        assert_eq!(
            touched(&events),
            vec![(
                "Edit".to_owned(),
                "/tmp/rt-fixture-gen/proj/notes/log.txt".to_owned()
            )]
        );
        assert_resumes_alike(CLEARED_FIXTURE, "cleared fixture");
    }

    #[test]
    fn an_empty_todo_list_with_nothing_before_stays_empty() {
        let (_, events) = one_line(
            r#"{"type":"assistant","sessionId":"s","message":{"content":[{"type":"tool_use","id":"t","name":"TodoWrite","input":{"todos":[]}}]}}"#,
        );
        assert!(matches!(&events[1], LogEvent::Tasks { tasks, .. } if tasks.is_empty()));
    }

    #[test]
    fn only_edits_that_succeed_are_reported_with_absolute_paths() {
        let events = events_of(EDITS_FIXTURE);
        assert_eq!(
            touched(&events),
            vec![
                (
                    "MultiEdit".to_owned(),
                    "/home/dev/proj/src/lib.rs".to_owned()
                ),
                (
                    "NotebookEdit".to_owned(),
                    "/home/dev/proj/analysis/report.ipynb".to_owned()
                ),
                ("Edit".to_owned(), "/home/dev/proj/README.md".to_owned()),
            ]
        );
        let at = events.iter().find_map(|event| match event {
            LogEvent::FileTouched { at_ms, .. } => *at_ms,
            _ => None,
        });
        // The time of the result (2026-03-04T10:00:06.000Z).
        assert_eq!(at, Some(1_772_618_406_000));
        assert_resumes_alike(EDITS_FIXTURE, "edits fixture");
    }

    #[test]
    fn usage_embedded_in_progress_lines_and_agent_results_is_not_counted() {
        // Six requests of (3, 20, 100 5m, 5000); the progress line (999s) and the Agent
        // result (1111s) are not counted.
        assert_eq!(
            deduplicated_tokens(&events_of(EDITS_FIXTURE)),
            tokens(18, 120, 600, 0, 30_000)
        );
    }

    #[test]
    fn a_subagent_counts_under_its_parent_session_with_its_own_todo_lane() {
        let main = events_of(EDITS_FIXTURE);
        let subagent = events_of(SUBAGENT_FIXTURE);
        assert!(
            subagent
                .iter()
                .all(|event| event.session_id() == "33333333-3333-4333-8333-333333333333")
        );
        assert_eq!(
            last_lists(&subagent),
            BTreeMap::from([(
                Some("a1b2c3d".to_owned()),
                (
                    "TodoWrite".to_owned(),
                    vec![
                        task(None, "Scan the tree", Completed, Some("Scanning the tree")),
                        task(None, "Report", InProgress, Some("Reporting")),
                    ]
                )
            )])
        );
        // The subagent alone: its request (largest report: 8, 55, 400, 2000) and its replay
        // of the parent's msg_01C (3, 20, 100, 5000).
        assert_eq!(deduplicated_tokens(&subagent), tokens(11, 75, 500, 0, 7000));
        // With the parent: the replay is dropped in favour of the parent's line.
        let session: Vec<LogEvent> = main.into_iter().chain(subagent).collect();
        assert_eq!(
            deduplicated_tokens(&session),
            tokens(26, 175, 1000, 0, 32_000)
        );
        assert_resumes_alike(SUBAGENT_FIXTURE, "subagent fixture");
    }

    #[test]
    fn a_side_chain_without_an_agent_id_gets_a_lane_of_its_own() {
        let (_, events) = one_line(
            r#"{"type":"assistant","isSidechain":true,"sessionId":"s","message":{"content":[{"type":"tool_use","id":"t","name":"TodoWrite","input":{"todos":[{"content":"A","status":"pending"}]}}]}}"#,
        );
        assert!(
            matches!(&events[1], LogEvent::Tasks { lane: Some(lane), .. } if lane == "sidechain")
        );
    }

    #[test]
    fn the_task_store_file_reads_as_its_task() {
        assert_eq!(
            parse_task_file(TASK_STORE_FIXTURE),
            Some(task(
                Some("3"),
                "Drop the old code",
                Deleted,
                Some("Dropping the old code")
            ))
        );
        assert_eq!(
            parse_task_file(br#"{"id":12,"subject":"X","status":"in_progress","blocks":[]}"#),
            Some(task(Some("12"), "X", InProgress, None))
        );
        assert_eq!(
            parse_task_file(b"\xEF\xBB\xBF{\"id\":\"1\",\"subject\":\"Y\"}"),
            Some(task(Some("1"), "Y", Pending, None))
        );
        for not_a_task in [
            &b""[..],
            b"5",
            b"[]",
            b"{}",
            b"{\"id\":\"1\"}",
            b"{\"subject\":\"no id\"}",
            b"{\"id\":\"1\",\"subject\":\"x\"",
            b"\xff\xfe",
        ] {
            assert_eq!(
                parse_task_file(not_a_task),
                None,
                "{:?}",
                String::from_utf8_lossy(not_a_task)
            );
        }
    }

    // ---------------------------------------------------------------- records, one by one

    #[test]
    fn session_events_come_when_the_session_cwd_or_model_changes() {
        let events = events_of(TASKS_FIXTURE);
        let sessions: Vec<(Option<&str>, Option<&str>)> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Session {
                    session_id,
                    cwd,
                    model,
                    ..
                } => {
                    assert_eq!(session_id, "11111111-1111-4111-8111-111111111111");
                    Some((cwd.as_deref(), model.as_deref()))
                }
                _ => None,
            })
            .collect();
        // queue-operation (no cwd), then the first user record, then the first reply.
        assert_eq!(
            sessions,
            vec![
                (None, None),
                (Some("/tmp/rt-fixture-gen/proj"), None),
                (
                    Some("/tmp/rt-fixture-gen/proj"),
                    Some("claude-sonnet-4-5-20250929")
                ),
            ]
        );
        let moved = [
            r#"{"type":"user","sessionId":"s","cwd":"/a","message":{"content":"hi"}}"#,
            r#"{"type":"user","sessionId":"s","cwd":"/a","message":{"content":"again"}}"#,
            r#"{"type":"user","sessionId":"s","cwd":"/b","message":{"content":"moved"}}"#,
            r#"{"type":"assistant","sessionId":"s","cwd":"/b","message":{"model":"<synthetic>","content":[]}}"#,
        ];
        let events = events_of(moved.join("\n").as_bytes());
        assert_eq!(events.len(), 2);
        assert!(
            matches!(&events[1], LogEvent::Session { cwd: Some(cwd), model: None, .. } if cwd == "/b")
        );
    }

    #[test]
    fn usage_is_keyed_and_split_by_cache_duration() {
        let (outcome, events) = one_line(
            r#"{"type":"assistant","sessionId":"s","isSidechain":false,"requestId":"req_1","timestamp":"2026-02-10T22:58:30.1Z","message":{"id":"msg_1","model":"claude-opus-4-6","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":47,"cache_creation_input_tokens":1115,"cache_read_input_tokens":26504,"output_tokens":173,"cache_creation":{"ephemeral_1h_input_tokens":1000,"ephemeral_5m_input_tokens":115}}}}"#,
        );
        assert_eq!(outcome, LineOutcome::Read);
        assert_eq!(
            events[1],
            LogEvent::Usage {
                session_id: "s".to_owned(),
                key: Some(RequestKey {
                    message_id: "msg_1".to_owned(),
                    request_id: Some("req_1".to_owned())
                }),
                sidechain: false,
                model: "claude-opus-4-6".to_owned(),
                tokens: tokens(47, 173, 115, 1000, 26504),
                billing: Billing::default(),
                at_ms: Some(1_770_764_310_100),
            }
        );
    }

    #[test]
    fn an_advisors_steps_are_requests_of_their_own_model() {
        let (_, events) = one_line(
            r#"{"type":"assistant","sessionId":"s","requestId":"req_1","message":{"id":"msg_1","model":"claude-sonnet-5-5","usage":{"input_tokens":60,"output_tokens":30,"inference_geo":"us","iterations":[{"type":"message","input_tokens":60,"output_tokens":30},{"type":"advisor_message","model":"claude-opus-5-5","input_tokens":40,"output_tokens":12,"cache_read_input_tokens":5}]}}}"#,
        );
        let usage: Vec<(&str, Option<&str>, TokenCounts, Option<&str>)> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Usage {
                    model,
                    key,
                    tokens,
                    billing,
                    ..
                } => Some((
                    model.as_str(),
                    key.as_ref().map(|key| key.message_id.as_str()),
                    *tokens,
                    billing.geo.as_deref(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            usage,
            [
                (
                    "claude-sonnet-5-5",
                    Some("msg_1"),
                    tokens(60, 30, 0, 0, 0),
                    Some("us")
                ),
                (
                    "claude-opus-5-5",
                    Some("msg_1#advisor-0"),
                    tokens(40, 12, 0, 0, 5),
                    Some("us")
                ),
            ]
        );
    }

    #[test]
    fn a_created_tasks_id_comes_from_its_result_text_when_the_record_lacks_it() {
        assert_eq!(
            created_task_id("Task #12 created successfully: Write the lexer"),
            Some("12".to_owned())
        );
        assert_eq!(created_task_id("Task #x created successfully"), None);
        assert_eq!(created_task_id("Updated task #1 status"), None);
        let lines = [
            r#"{"type":"assistant","sessionId":"s","message":{"id":"m1","model":"claude-sonnet-4-6","content":[{"type":"tool_use","id":"toolu_1","name":"TaskCreate","input":{"subject":"Write the lexer","activeForm":"Writing the lexer"}}]}}"#,
            r#"{"type":"user","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Task #7 created successfully: Write the lexer"}]}}"#,
            r#"{"type":"assistant","sessionId":"s","message":{"id":"m2","model":"claude-sonnet-4-6","content":[{"type":"tool_use","id":"toolu_2","name":"TaskUpdate","input":{"taskId":"7","status":"in_progress"}}]}}"#,
            r#"{"type":"user","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"Updated task #7 status"}]}]}}"#,
        ]
        .join("\n");
        let (events, _) = parse(lines.as_bytes());
        let lists = last_lists(&events);
        let (_, tasks) = &lists[&None];
        assert_eq!(
            tasks.len(),
            1,
            "{tasks:?}: the update found the created task"
        );
        assert_eq!(tasks[0].id.as_deref(), Some("7"));
        assert_eq!(tasks[0].title, "Write the lexer");
        assert_eq!(tasks[0].status, TaskStatus::InProgress);
    }

    #[test]
    fn usage_says_what_the_request_is_billed_for_besides_its_tokens() {
        let (_, events) = one_line(
            r#"{"type":"assistant","sessionId":"s","requestId":"req_1","message":{"id":"msg_1","model":"claude-opus-4-6","usage":{"input_tokens":47,"output_tokens":173,"speed":"fast","service_tier":"standard","inference_geo":"us","server_tool_use":{"web_search_requests":2,"web_fetch_requests":1}}}}"#,
        );
        let LogEvent::Usage { billing, .. } = &events[1] else {
            panic!("{events:?}")
        };
        assert_eq!(
            *billing,
            Billing {
                fast: true,
                service_tier: None,
                geo: Some("us".into()),
                web_searches: 2,
            }
        );
        let (_, events) = one_line(
            r#"{"type":"assistant","sessionId":"s","message":{"id":"m","model":"m","usage":{"input_tokens":1,"speed":"standard","inference_geo":"","server_tool_use":{"web_search_requests":0}}}}"#,
        );
        assert!(matches!(&events[1], LogEvent::Usage { billing, .. } if billing.is_standard()));
    }

    #[test]
    fn usage_without_a_breakdown_is_all_five_minute_cache_and_without_an_id_has_no_key() {
        let (_, events) = one_line(
            r#"{"type":"assistant","sessionId":"s","message":{"model":"m","usage":{"input_tokens":1,"output_tokens":2,"cache_creation_input_tokens":30,"cache_read_input_tokens":4,"cache_creation":{}}}}"#,
        );
        assert!(matches!(
            &events[1],
            LogEvent::Usage { key: None, tokens: counted, .. } if *counted == tokens(1, 2, 30, 0, 4)
        ));
    }

    #[test]
    fn only_assistant_records_with_top_level_usage_count() {
        for line in [
            // A progress record embeds a subagent's message.
            r#"{"type":"progress","sessionId":"s","data":{"message":{"type":"assistant","message":{"id":"m","usage":{"input_tokens":5}}}}}"#,
            // A user record with a usage-like field.
            r#"{"type":"user","sessionId":"s","message":{"id":"m","usage":{"input_tokens":5}}}"#,
            // An Agent result's usage.
            r#"{"type":"user","sessionId":"s","toolUseResult":{"usage":{"input_tokens":5},"totalTokens":5},"message":{"content":[]}}"#,
            // A synthetic message with nothing spent.
            r#"{"type":"assistant","sessionId":"s","message":{"id":"m","model":"<synthetic>","usage":{"input_tokens":0,"output_tokens":0}}}"#,
        ] {
            let (outcome, events) = one_line(line);
            assert_eq!(outcome, LineOutcome::Read);
            assert!(
                !events
                    .iter()
                    .any(|event| matches!(event, LogEvent::Usage { .. })),
                "{line}"
            );
        }
    }

    #[test]
    fn odd_field_types_read_as_absent_without_losing_the_record() {
        let (outcome, events) = one_line(
            r#"{"type":"assistant","sessionId":"s","isSidechain":"no","cwd":7,"timestamp":null,"requestId":["x"],"message":{"id":"m","model":{"name":"x"},"content":"text","usage":{"input_tokens":-3,"output_tokens":2.9,"cache_read_input_tokens":"9","cache_creation_input_tokens":null,"cache_creation":[1]}},"toolUseResult":12}"#,
        );
        assert_eq!(outcome, LineOutcome::Read);
        assert_eq!(
            events[1],
            LogEvent::Usage {
                session_id: "s".to_owned(),
                key: Some(RequestKey {
                    message_id: "m".to_owned(),
                    request_id: None
                }),
                sidechain: false,
                model: "unknown".to_owned(),
                tokens: tokens(0, 2, 0, 0, 0),
                billing: Billing::default(),
                at_ms: None,
            }
        );
    }

    #[test]
    fn an_edit_whose_result_is_an_error_string_is_not_reported() {
        for result in [
            r#""Error: File has not been read yet. Read it first before writing to it.""#,
            r#""InputValidationError: [{\"code\":\"invalid_type\"}]""#,
            r#""User rejected tool use""#,
        ] {
            let input = [
                r#"{"type":"assistant","sessionId":"s","cwd":"/p","message":{"content":[{"type":"tool_use","id":"t","name":"Write","input":{"file_path":"a.txt","content":"x"}}]}}"#.to_owned(),
                format!(
                    r#"{{"type":"user","sessionId":"s","toolUseResult":{result},"message":{{"content":[{{"type":"tool_result","tool_use_id":"t","content":"no"}}]}}}}"#
                ),
            ]
            .join("\n");
            assert_eq!(touched(&events_of(input.as_bytes())), vec![], "{result}");
        }
        // A plain string output is not an error.
        let input = [
            r#"{"type":"assistant","sessionId":"s","cwd":"/p","message":{"content":[{"type":"tool_use","id":"t","name":"Write","input":{"file_path":"a.txt","content":"x"}}]}}"#,
            r#"{"type":"user","sessionId":"s","toolUseResult":"File created successfully at: /p/a.txt","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#,
        ]
        .join("\n");
        assert_eq!(
            touched(&events_of(input.as_bytes())),
            vec![("Write".to_owned(), "/p/a.txt".to_owned())]
        );
    }

    #[test]
    fn a_result_seen_twice_reports_its_edit_once() {
        let call = r#"{"type":"assistant","sessionId":"s","cwd":"/p","message":{"content":[{"type":"tool_use","id":"t","name":"Edit","input":{"file_path":"/p/a"}}]}}"#;
        let result = r#"{"type":"user","sessionId":"s","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#;
        let input = [call, result, result].join("\n");
        assert_eq!(touched(&events_of(input.as_bytes())).len(), 1);
    }

    #[test]
    fn timestamps_read_as_milliseconds_since_the_epoch() {
        for (text, expected) in [
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2026-02-10T22:58:30.1Z", Some(1_770_764_310_100)),
            ("2026-02-10T22:58:30.123456Z", Some(1_770_764_310_123)),
            ("2026-02-11T00:58:30.100+02:00", Some(1_770_764_310_100)),
            ("2026-02-10T21:58:30.100-0100", Some(1_770_764_310_100)),
            ("2026-02-10T22:58:30", Some(1_770_764_310_000)),
            ("2000-02-29T12:00:00.000Z", Some(951_825_600_000)),
            ("1969-12-31T23:59:59.000Z", Some(-1000)),
            ("2026-13-10T22:58:30Z", None),
            ("2026-02-10", None),
            ("2026-02-10T22:58:30.Z", None),
            ("2026-02-10T22:58:30Zjunk", None),
            ("yesterday", None),
            ("", None),
        ] {
            assert_eq!(timestamp_ms(text), expected, "{text}");
        }
    }

    // ---------------------------------------------------------------- hostile input

    #[test]
    fn lines_that_are_not_json_objects_are_skipped() {
        for line in [
            &b""[..],
            b"   ",
            b"not json",
            b"{",
            b"{\"type\":\"assistant\"",
            b"{\"a\":}",
            b"}",
            b"null",
            b"42",
            b"-1.5e3",
            b"\"a string\"",
            b"true",
            b"[]",
            b"[{\"type\":\"assistant\"}]",
            b"{} {}",
            b"{\"type\":\"user\"} trailing",
            b"{\"type\":\"\xff\"}",
            b"\xff\xfe\x00{",
            b"{\"a\":\"\x00\"}",
            b"\xEF\xBB\xBF{}",
        ] {
            let mut events = Vec::new();
            let outcome = ClaudeParser::new().line(line, &mut events);
            assert_eq!(
                outcome,
                LineOutcome::Skipped,
                "{:?}",
                String::from_utf8_lossy(line)
            );
            assert!(events.is_empty());
        }
    }

    #[test]
    fn json_objects_of_no_interest_are_read_without_events() {
        for line in [
            "{}",
            "  {\"x\":1}\r",
            r#"{"type":"summary","summary":"s","leafUuid":"u"}"#,
            r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{"trackedFileBackups":{}},"isSnapshotUpdate":false}"#,
            // A duplicate key: a valid object the structs refuse.
            r#"{"type":"user","type":"assistant"}"#,
            // A declared field nested deeper than serde_json's limit.
            &format!(
                r#"{{"message":{{"usage":{{"cache_creation":{}1{}}}}}}}"#,
                "[".repeat(200),
                "]".repeat(200)
            ),
        ] {
            let (outcome, events) = one_line(line);
            assert_eq!(outcome, LineOutcome::Read, "{line}");
            assert!(events.is_empty(), "{line}");
        }
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        const DEPTH: usize = 100_000;
        let arrays = format!("{}{}", "[".repeat(DEPTH), "]".repeat(DEPTH));
        let objects = format!("{}1{}", r#"{"a":"#.repeat(DEPTH), "}".repeat(DEPTH));
        let unclosed = "[{\"a\":".repeat(DEPTH);
        let cases = [
            arrays.clone(),
            objects.clone(),
            unclosed.clone(),
            format!(r#"{{"type":"progress","data":{arrays}}}"#),
            format!(r#"{{"type":"progress","data":{objects}}}"#),
            format!(r#"{{"type":"assistant","sessionId":"s","message":{{"content":{arrays}}}}}"#),
            format!(
                r#"{{"type":"assistant","sessionId":"s","message":{{"content":[{{"type":"tool_use","input":{objects}}}]}}}}"#
            ),
            format!(
                r#"{{"type":"assistant","sessionId":"s","message":{{"content":[{{"type":"tool_use","name":"TodoWrite","input":{{"todos":[{{"content":{arrays}}}]}}}}]}}}}"#
            ),
            format!(r#"{{"toolUseResult":{objects}}}"#),
            format!(r#"{{"message":{unclosed}"#),
        ];
        for line in &cases {
            let mut events = Vec::new();
            // Either way, no panic and no overflow.
            let _ = ClaudeParser::new().line(line.as_bytes(), &mut events);
        }
        assert_eq!(one_line(&arrays).0, LineOutcome::Skipped);
        assert_eq!(one_line(&cases[3]).0, LineOutcome::Read);
    }

    #[test]
    fn a_ten_megabyte_line_is_just_parsed() {
        let text = "ab\\\"c\\n ".repeat(10 * 1024 * 1024 / 8);
        let line = format!(
            r#"{{"type":"assistant","sessionId":"s","message":{{"id":"m","model":"x","content":[{{"type":"text","text":"{text}"}}],"usage":{{"input_tokens":1}}}}}}"#
        );
        assert!(line.len() > 10 * 1024 * 1024);
        let (outcome, events) = one_line(&line);
        assert_eq!(outcome, LineOutcome::Read);
        assert!(matches!(&events[1], LogEvent::Usage { tokens, .. } if tokens.input == 1));
        let garbage = "x".repeat(10 * 1024 * 1024);
        assert_eq!(one_line(&garbage).0, LineOutcome::Skipped);
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let full = lines(EDITS_FIXTURE).nth(3).unwrap();
        for cut in 1..full.len() - 1 {
            let (outcome, _) = one_line(std::str::from_utf8(&full[..cut]).unwrap());
            assert_eq!(outcome, LineOutcome::Skipped, "cut at {cut}");
        }
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut events = Vec::new();
            let _ = ClaudeParser::new().line(&bytes, &mut events);
        }

        #[test]
        fn damaged_real_format_lines_never_panic(
            line in 0usize..15,
            position in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut parser = ClaudeParser::new();
            let mut events = Vec::new();
            let all: Vec<&[u8]> = lines(EDITS_FIXTURE).collect();
            let mut damaged = all[line].to_vec();
            let at = position.index(damaged.len());
            damaged[at] = byte;
            for earlier in &all[..line] {
                parser.line(earlier, &mut events);
            }
            let _ = parser.line(&damaged, &mut events);
        }

        #[test]
        fn json_objects_are_read_and_other_values_skipped(value in json_value()) {
            let text = value.to_string();
            let (outcome, _) = one_line(&text);
            let expected = if value.is_object() { LineOutcome::Read } else { LineOutcome::Skipped };
            prop_assert_eq!(outcome, expected);
        }
    }

    /// Arbitrary JSON values whose keys are often the ones this parser reads.
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let key = prop_oneof![
            Just("type".to_owned()),
            Just("message".to_owned()),
            Just("content".to_owned()),
            Just("usage".to_owned()),
            Just("input".to_owned()),
            Just("todos".to_owned()),
            Just("sessionId".to_owned()),
            Just("toolUseResult".to_owned()),
            Just("input_tokens".to_owned()),
            "[a-z]{1,3}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            prop_oneof![
                Just("assistant".to_owned()),
                Just("tool_use".to_owned()),
                ".{0,8}"
            ]
            .prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((key.clone(), inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }
}
