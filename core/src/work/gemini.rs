//! Gemini CLI chats (`~/.gemini/tmp/<project>/chats/`; `<project>` is the project folder's
//! name, or a hash of its path in older builds), read whole into [`LogEvent`]s. Two layouts:
//!
//! - `session-*.json`: one document `{sessionId, projectHash, startTime, lastUpdated, kind?,
//!   messages: [{id, timestamp, type, content, model?, thoughts?, toolCalls?, tokens?}]}`,
//!   rewritten whole by Gemini CLI after each message.
//! - `*.jsonl` (newer builds; also a subagent's `chats/<parent>/<id>.jsonl`): one record per
//!   line: a metadata record (`sessionId`, `projectHash`, `startTime`, …), a message (a record
//!   with a string `id`; a repeated id replaces the earlier message, as Gemini CLI's loader
//!   does), `{"$set": {…}}` metadata updates, and `{"$rewindTo": id}`.
//!
//! Usage: each `gemini` message with `tokens` is one model request, keyed by its message id
//! ([`RequestKey`] without a request id). Since the whole file is read, only the last version
//! of a message is reported, so a report never depends on the aggregation's "largest wins"
//! (a later version of a message replaces it, even if smaller). The key still makes the same
//! message count once when a session is in two files (Gemini CLI migrates a resumed `.json`
//! chat into a new `.jsonl` and leaves the old file). Mapping: `input = input − cached + tool`
//! (`cached` is part of `input`; tool-use prompt tokens are billed as input, as ccusage
//! counts them), `cache_read = cached`, `output = output + thoughts`. A rewind hides messages
//! from the conversation, but their tokens were spent: they still count.
//!
//! The session is `sessionId` (the latest a `$set` gave), else the file name's stem; its
//! model is the last message's; its directory is the project's (Gemini CLI keeps it in
//! `tmp/<project>/.project_root`; the caller reads it, [`ChatContext`]). A sub-agent's chat
//! (`chats/<parent session>/<agent>.jsonl`, `kind: "subagent"`) counts under its parent
//! session: its usage as a side chain, its task list as a lane of its own.
//!
//! Tool calls that succeeded say the rest: `write_todos` (the whole list each time;
//! statuses pending, in progress, completed, cancelled, blocked) and the opt-in tracker's
//! calls (each carries the whole list in `resultDisplay.todos`) are the session's task list;
//! `write_file` and `replace` are files touched (`resultDisplay.filePath` is absolute;
//! `args.file_path` is what the model wrote, resolved against the project).

use std::collections::HashMap;

use serde::Deserialize;

use super::lenient::{Lenient, LenientCount, LenientList, LenientStr, opens_object, timestamp_ms};
use crate::log_events::{Billing, LogEvent, RequestKey, TaskItem, TaskStatus, TokenCounts};

/// What a chat file says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeminiChat {
    pub events: Vec<LogEvent>,
    /// Lines (or, for a `.json` document, the whole file) that were not a JSON object.
    pub skipped_lines: u64,
}

/// Where a chat file is, as far as its contents do not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatContext {
    /// For a sub-agent's chat: the session that started it (its folder's name).
    pub parent_session: Option<String>,
    /// The project's directory (`tmp/<project>/.project_root`).
    pub project_root: Option<String>,
}

/// Parses a whole Gemini CLI chat file (`session-*.json`, one JSON document; or `*.jsonl`,
/// one message per line where a repeated message id replaces the earlier one). Pure.
pub fn parse_chat(bytes: &[u8], file_name: &str) -> GeminiChat {
    parse_chat_in(bytes, file_name, &ChatContext::default())
}

/// [`parse_chat`], knowing where the file is. Pure.
pub fn parse_chat_in(bytes: &[u8], file_name: &str, context: &ChatContext) -> GeminiChat {
    let mut chat = Chat::default();
    let mut skipped_lines = 0;
    if file_name.ends_with(".jsonl") {
        let mut lines = bytes.split(|&byte| byte == b'\n').peekable();
        while let Some(line) = lines.next() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match read_record(line) {
                Some(record) => chat.line(record),
                // A last line without its newline is still being written.
                None if lines.peek().is_none() => {}
                None => skipped_lines += 1,
            }
        }
    } else {
        match read_record(bytes) {
            Some(document) => chat.document(document),
            None => skipped_lines = 1,
        }
    }
    GeminiChat {
        events: chat.events(file_name, context),
        skipped_lines,
    }
}

fn read_record(bytes: &[u8]) -> Option<Record<'_>> {
    let text = std::str::from_utf8(bytes).ok()?;
    if !opens_object(text.as_bytes()) {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// A JSON object of a chat: the document, a JSONL line, or a message.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Record<'a> {
    #[serde(borrow)]
    id: LenientStr<'a>,
    #[serde(borrow, rename = "sessionId")]
    session_id: LenientStr<'a>,
    #[serde(borrow, rename = "startTime")]
    start_time: LenientStr<'a>,
    /// The conversation's kind: `main` or `subagent`.
    #[serde(borrow)]
    kind: LenientStr<'a>,
    /// The message's type: `user`, `gemini`, `info`, `error`, `warning`.
    #[serde(borrow, rename = "type")]
    message_type: LenientStr<'a>,
    #[serde(borrow)]
    timestamp: LenientStr<'a>,
    #[serde(borrow)]
    model: LenientStr<'a>,
    tokens: Lenient<Tokens>,
    #[serde(borrow)]
    messages: LenientList<Record<'a>>,
    #[serde(borrow, rename = "$set")]
    set: Lenient<Box<Record<'a>>>,
    #[serde(borrow, rename = "toolCalls")]
    tool_calls: LenientList<ToolCall<'a>>,
}

/// A tool call of a `gemini` message, once it ran.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ToolCall<'a> {
    #[serde(borrow)]
    name: LenientStr<'a>,
    /// `success` or `error`.
    #[serde(borrow)]
    status: LenientStr<'a>,
    #[serde(borrow)]
    args: Lenient<ToolArgs<'a>>,
    #[serde(borrow, rename = "resultDisplay")]
    result_display: Lenient<ToolDisplay<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ToolArgs<'a> {
    #[serde(borrow)]
    todos: LenientList<Todo<'a>>,
    #[serde(borrow)]
    file_path: LenientStr<'a>,
}

/// What a tool call showed the person: the task list, or the file written.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ToolDisplay<'a> {
    #[serde(borrow)]
    todos: LenientList<Todo<'a>>,
    #[serde(borrow, rename = "filePath")]
    file_path: LenientStr<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Todo<'a> {
    #[serde(borrow)]
    description: LenientStr<'a>,
    #[serde(borrow)]
    status: LenientStr<'a>,
}

impl Todo<'_> {
    fn to_task(&self) -> Option<TaskItem> {
        let status = match self.status.0.as_deref()? {
            "pending" => TaskStatus::Pending,
            "in_progress" => TaskStatus::InProgress,
            "completed" => TaskStatus::Completed,
            "cancelled" => TaskStatus::Cancelled,
            "blocked" => TaskStatus::Blocked,
            _ => return None,
        };
        Some(TaskItem {
            id: None,
            title: self.description.non_empty()?.to_owned(),
            status,
            active_form: None,
        })
    }
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default)]
struct Tokens {
    input: LenientCount,
    output: LenientCount,
    cached: LenientCount,
    thoughts: LenientCount,
    tool: LenientCount,
}

impl Tokens {
    fn counts(&self) -> TokenCounts {
        let input = self.input.get();
        let cached = self.cached.get();
        TokenCounts {
            input: (input - cached.min(input)).saturating_add(self.tool.get()),
            output: self.output.get().saturating_add(self.thoughts.get()),
            cache_write_5m: 0,
            cache_write_1h: 0,
            cache_read: cached,
        }
    }
}

/// A message kept until the whole file is read.
struct Message {
    id: Option<String>,
    is_gemini: bool,
    model: Option<String>,
    tokens: Option<TokenCounts>,
    at_ms: Option<i64>,
    /// The task list its tool calls left (with where it came from), if any.
    tasks: Option<(&'static str, Vec<TaskItem>)>,
    /// Files its tool calls wrote (absolute, or as the model wrote them), by which tool.
    files: Vec<(&'static str, String)>,
}

/// What a message's successful tool calls say: the last task list, and the files written.
#[allow(clippy::type_complexity)]
fn tool_work(
    calls: Vec<ToolCall<'_>>,
) -> (
    Option<(&'static str, Vec<TaskItem>)>,
    Vec<(&'static str, String)>,
) {
    let mut tasks = None;
    let mut files = Vec::new();
    for call in calls {
        if !call.status.is("success") {
            continue;
        }
        let name = call.name.0.as_deref().unwrap_or_default();
        let display = call.result_display.0;
        let args = call.args.0;
        match name {
            "write_todos"
            | "tracker_create_task"
            | "tracker_update_task"
            | "tracker_add_dependency" => {
                let shown = display.as_ref().map(|display| &display.todos.0);
                let todos = match shown {
                    Some(todos) if !todos.is_empty() => todos,
                    _ => match &args {
                        Some(args) => &args.todos.0,
                        None => continue,
                    },
                };
                let source = if name == "write_todos" {
                    "write_todos"
                } else {
                    "tracker"
                };
                tasks = Some((source, todos.iter().filter_map(Todo::to_task).collect()));
            }
            "write_file" | "replace" => {
                let tool = if name == "replace" {
                    "replace"
                } else {
                    "write_file"
                };
                let path = display
                    .as_ref()
                    .and_then(|display| display.file_path.non_empty())
                    .or_else(|| args.as_ref().and_then(|args| args.file_path.non_empty()));
                files.extend(path.map(|path| (tool, path.to_owned())));
            }
            _ => {}
        }
    }
    (tasks, files)
}

#[derive(Default)]
struct Chat {
    session_id: Option<String>,
    start_ms: Option<i64>,
    subagent: bool,
    messages: Vec<Message>,
    /// Where each message id is in `messages`.
    by_id: HashMap<String, usize>,
}

impl Chat {
    fn document(&mut self, document: Record<'_>) {
        self.metadata(&document);
        if let Some(set) = document.set.0 {
            self.metadata(&set);
        }
        for message in document.messages.0 {
            self.message(message);
        }
    }

    fn line(&mut self, record: Record<'_>) {
        if record.id.non_empty().is_some() {
            self.message(record);
        } else if let Some(set) = record.set.0 {
            self.metadata(&set);
            for message in set.messages.0 {
                self.message(message);
            }
        } else {
            self.metadata(&record);
        }
    }

    fn metadata(&mut self, record: &Record<'_>) {
        if let Some(session_id) = record.session_id.non_empty() {
            self.session_id = Some(session_id.to_owned());
        }
        if let Some(start) = record.start_time.0.as_deref().and_then(timestamp_ms) {
            self.start_ms.get_or_insert(start);
        }
        if let Some(kind) = record.kind.non_empty() {
            self.subagent = kind == "subagent";
        }
    }

    fn message(&mut self, record: Record<'_>) {
        let (tasks, files) = tool_work(record.tool_calls.0);
        let message = Message {
            id: record.id.into_owned(),
            is_gemini: record.message_type.is("gemini"),
            model: record.model.into_owned(),
            tokens: record.tokens.0.map(|tokens| tokens.counts()),
            at_ms: record.timestamp.0.as_deref().and_then(timestamp_ms),
            tasks,
            files,
        };
        match message.id.as_ref().and_then(|id| self.by_id.get(id)) {
            Some(&index) => self.messages[index] = message,
            None => {
                if let Some(id) = &message.id {
                    self.by_id.insert(id.clone(), self.messages.len());
                }
                self.messages.push(message);
            }
        }
    }

    fn events(self, file_name: &str, context: &ChatContext) -> Vec<LogEvent> {
        let own_id = self.session_id.unwrap_or_else(|| {
            let name = file_name.rsplit(['/', '\\']).next().unwrap_or(file_name);
            let stem = name.strip_suffix(".jsonl").or(name.strip_suffix(".json"));
            stem.unwrap_or(name).to_owned()
        });
        // A sub-agent's chat counts under the session that started it.
        let subagent = self.subagent || context.parent_session.is_some();
        let (session_id, lane) = match &context.parent_session {
            Some(parent) => (parent.clone(), Some(own_id.clone())),
            None if subagent => (own_id.clone(), Some(own_id.clone())),
            None => (own_id.clone(), None),
        };
        let mut events = Vec::new();
        let model = self
            .messages
            .iter()
            .rev()
            .find_map(|message| message.model.clone());
        if !subagent && (model.is_some() || self.start_ms.is_some()) {
            events.push(LogEvent::Session {
                session_id: session_id.clone(),
                cwd: context.project_root.clone(),
                model: model.clone(),
                at_ms: self.start_ms,
            });
        }
        let mut last_model = None;
        let mut last_list: Option<(&'static str, Vec<TaskItem>, Option<i64>)> = None;
        for message in self.messages {
            if message.model.is_some() {
                last_model = message.model.clone();
            }
            if let Some((source, tasks)) = message.tasks {
                last_list = Some((source, tasks, message.at_ms));
            }
            for (tool, path) in message.files {
                events.push(LogEvent::FileTouched {
                    session_id: session_id.clone(),
                    path: super::paths::resolve(context.project_root.as_deref(), &path),
                    tool: tool.to_owned(),
                    at_ms: message.at_ms,
                });
            }
            let Some(tokens) = message.tokens.filter(|tokens| tokens.total() > 0) else {
                continue;
            };
            if !message.is_gemini {
                continue;
            }
            events.push(LogEvent::Usage {
                session_id: session_id.clone(),
                key: message.id.map(|message_id| RequestKey {
                    message_id,
                    request_id: None,
                }),
                sidechain: subagent,
                model: message
                    .model
                    .or_else(|| last_model.clone())
                    .unwrap_or_else(|| "unknown".to_owned()),
                tokens,
                billing: Billing::default(),
                at_ms: message.at_ms,
            });
        }
        // The file is read whole: its last list is the list.
        if let Some((source, tasks, at_ms)) = last_list {
            events.push(LogEvent::Tasks {
                session_id,
                lane,
                source: source.to_owned(),
                tasks,
                at_ms,
            });
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gemini");

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(Path::new(FIXTURES).join(name)).unwrap()
    }

    fn usage(chat: &GeminiChat) -> Vec<(Option<&str>, TokenCounts, &str, bool)> {
        chat.events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Usage {
                    key,
                    tokens,
                    model,
                    sidechain,
                    ..
                } => Some((
                    key.as_ref().map(|key| key.message_id.as_str()),
                    *tokens,
                    model.as_str(),
                    *sidechain,
                )),
                _ => None,
            })
            .collect()
    }

    /// What a fixture's `.expected.json` holds, computed from the chat.
    fn summary(chat: &GeminiChat) -> Value {
        let mut tokens = TokenCounts::default();
        let mut models: Vec<&str> = Vec::new();
        let mut keys = Vec::new();
        let mut sidechain = false;
        for (key, counts, model, side) in usage(chat) {
            tokens.add(&counts);
            sidechain |= side;
            keys.extend(key);
            if !models.contains(&model) {
                models.push(model);
            }
        }
        let mut ids: Vec<&str> = chat.events.iter().map(LogEvent::session_id).collect();
        ids.dedup();
        assert_eq!(ids.len(), 1, "{ids:?}");
        let sessions: Vec<Value> = chat
            .events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Session { cwd, model, .. } => Some(json!({"cwd": cwd, "model": model})),
                _ => None,
            })
            .collect();
        json!({
            "session_id": ids[0],
            "skipped_lines": chat.skipped_lines,
            "usage_events": keys.len(),
            "tokens": {
                "input": tokens.input,
                "output": tokens.output,
                "cache_write_5m": tokens.cache_write_5m,
                "cache_read": tokens.cache_read,
            },
            "models": models,
            "sessions": sessions,
            "files": [],
            "plans": [],
            "sidechain": sidechain,
            "keys": keys,
        })
    }

    #[test]
    fn project_fixtures_match_their_expected_summaries() {
        for name in ["session-fake.json", "session-fake-chat.jsonl"] {
            let chat = parse_chat(&fixture(name), name);
            let stem = name.rsplit_once('.').unwrap().0;
            let expected: Value =
                serde_json::from_slice(&fixture(&format!("{stem}.expected.json"))).unwrap();
            assert_eq!(summary(&chat), expected, "{name}");
        }
    }

    #[test]
    fn the_session_starts_at_start_time_with_the_last_model() {
        let chat = parse_chat(&fixture("session-fake.json"), "session-fake.json");
        let document: Value = serde_json::from_slice(&fixture("session-fake.json")).unwrap();
        let start = timestamp_ms(document["startTime"].as_str().unwrap());
        assert!(start.is_some());
        assert!(matches!(&chat.events[0], LogEvent::Session { at_ms, .. } if *at_ms == start));
        let reply_at = timestamp_ms(document["messages"][1]["timestamp"].as_str().unwrap());
        assert!(matches!(&chat.events[1], LogEvent::Usage { at_ms, .. } if *at_ms == reply_at));
    }

    fn message(id: &str, kind: &str, tokens: Value) -> Value {
        json!({"id": id, "timestamp": "2026-06-01T10:00:00Z", "type": kind, "content": [{"text": "hi"}],
               "model": "gemini-2.5-pro", "tokens": tokens})
    }

    fn tokens(input: u64, output: u64, cached: u64, thoughts: u64, tool: u64) -> Value {
        json!({"input": input, "output": output, "cached": cached, "thoughts": thoughts, "tool": tool,
               "total": input + output + thoughts + tool})
    }

    #[test]
    fn a_gemini_message_with_tokens_is_one_keyed_request() {
        let document = json!({
            "sessionId": "s1", "projectHash": "h", "startTime": "2026-06-01T10:00:00Z",
            "messages": [
                message("u1", "user", tokens(1, 1, 0, 0, 0)),
                message("g1", "gemini", tokens(1000, 20, 600, 30, 5)),
                message("g2", "gemini", Value::Null),
                message("g3", "gemini", tokens(0, 0, 0, 0, 0)),
                message("g4", "gemini", json!({"input": "many", "output": 7})),
                message("i1", "info", tokens(5, 5, 0, 0, 0)),
            ]
        });
        let chat = parse_chat(
            document.to_string().as_bytes(),
            "session-2026-06-01T10-00-s1.json",
        );
        let counts = |input, output, cache_read| TokenCounts {
            input,
            output,
            cache_read,
            ..TokenCounts::default()
        };
        assert_eq!(
            usage(&chat),
            [
                (Some("g1"), counts(405, 50, 600), "gemini-2.5-pro", false),
                (Some("g4"), counts(0, 7, 0), "gemini-2.5-pro", false),
            ]
        );
        assert_eq!(chat.skipped_lines, 0);
    }

    #[test]
    fn in_a_jsonl_chat_the_last_version_of_a_message_counts() {
        let lines = [
            json!({"sessionId": "s2", "projectHash": "h", "startTime": "2026-06-01T10:00:00Z", "kind": "main"}),
            message("g1", "gemini", tokens(100, 50, 0, 0, 0)),
            message("g2", "gemini", tokens(10, 1, 0, 0, 0)),
            // The same message rewritten, smaller: the later version wins all the same.
            message("g1", "gemini", tokens(100, 20, 0, 0, 0)),
            json!({"$rewindTo": "g2"}),
            json!({"$set": {"sessionId": "s2-resumed"}}),
        ];
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        let chat = parse_chat(text.as_bytes(), "session-2026-06-01T10-00-s2.jsonl");
        let outputs: Vec<(Option<&str>, u64)> =
            usage(&chat).iter().map(|u| (u.0, u.1.output)).collect();
        assert_eq!(outputs, [(Some("g1"), 20), (Some("g2"), 1)]);
        assert!(
            chat.events
                .iter()
                .all(|event| event.session_id() == "s2-resumed")
        );
    }

    #[test]
    fn a_subagents_chat_is_a_side_chain() {
        let lines = [
            json!({"sessionId": "sub-1", "projectHash": "h", "startTime": "2026-06-01T10:00:00Z", "kind": "subagent"}),
            message("g1", "gemini", tokens(100, 5, 0, 0, 0)),
        ];
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        let chat = parse_chat(text.as_bytes(), "sub-1.jsonl");
        assert!(usage(&chat).iter().all(|u| u.3));
        assert_eq!(usage(&chat).len(), 1);
    }

    #[test]
    fn tool_calls_that_ran_give_the_task_list_and_the_files_touched() {
        let todos = |statuses: [&str; 3]| {
            json!([
                {"description": "Write hello.txt", "status": statuses[0]},
                {"description": "Say hi", "status": statuses[1]},
                {"description": "Ship it", "status": statuses[2]},
            ])
        };
        let mut first = message("g1", "gemini", tokens(5000, 50, 4000, 30, 0));
        first["toolCalls"] = json!([{"id": "write_todos_1", "name": "write_todos",
            "args": {"todos": todos(["in_progress", "pending", "blocked"])}, "status": "success",
            "resultDisplay": {"todos": todos(["in_progress", "pending", "blocked"])}}]);
        let mut second = message("g2", "gemini", tokens(6000, 40, 5000, 0, 0));
        second["toolCalls"] = json!([
            {"id": "w1", "name": "write_file", "args": {"file_path": "hello.txt", "content": "hi"},
             "status": "success", "resultDisplay": {"filePath": "/home/dana/proj/hello.txt", "isNewFile": true}},
            {"id": "r1", "name": "replace", "args": {"file_path": "src/../notes.md", "instruction": "x",
             "old_string": "a", "new_string": "b"}, "status": "success", "resultDisplay": "Replaced"},
            {"id": "w2", "name": "write_file", "args": {"file_path": "/etc/denied"},
             "status": "error", "resultDisplay": "Tool execution blocked: no"},
            {"id": "t2", "name": "write_todos", "args": {"todos": todos(["completed", "completed", "cancelled"])},
             "status": "success", "resultDisplay": {"todos": todos(["completed", "completed", "cancelled"])}},
        ]);
        let lines = [
            json!({"sessionId": "s9", "projectHash": "h", "startTime": "2026-12-02T02:46:00Z", "kind": "main"}),
            message("g1", "gemini", tokens(5000, 50, 4000, 30, 0)),
            first,
            message("g2", "gemini", tokens(6000, 40, 5000, 0, 0)),
            second,
        ];
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        let context = ChatContext {
            parent_session: None,
            project_root: Some("/home/dana/proj".into()),
        };
        let chat = parse_chat_in(text.as_bytes(), "session-x.jsonl", &context);
        let files: Vec<(&str, &str)> = chat
            .events
            .iter()
            .filter_map(|event| match event {
                LogEvent::FileTouched { path, tool, .. } => Some((tool.as_str(), path.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(
            files,
            [
                ("write_file", "/home/dana/proj/hello.txt"),
                ("replace", "/home/dana/proj/notes.md")
            ]
        );
        let lists: Vec<(&Option<String>, &str, Vec<TaskStatus>)> = chat
            .events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Tasks {
                    lane,
                    source,
                    tasks,
                    ..
                } => Some((
                    lane,
                    source.as_str(),
                    tasks.iter().map(|t| t.status).collect(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            lists,
            [(
                &None,
                "write_todos",
                vec![
                    TaskStatus::Completed,
                    TaskStatus::Completed,
                    TaskStatus::Cancelled
                ]
            )]
        );
        assert!(chat.events.iter().any(|event| matches!(
            event,
            LogEvent::Session { cwd: Some(cwd), .. } if cwd == "/home/dana/proj"
        )));
        assert_eq!(usage(&chat).len(), 2);
    }

    #[test]
    fn a_subagents_chat_counts_under_the_session_that_started_it() {
        let mut called = message("c1", "gemini", tokens(200, 20, 0, 0, 0));
        called["toolCalls"] = json!([{"id": "t", "name": "write_todos", "status": "success",
            "args": {"todos": [{"description": "look around", "status": "in_progress"}]}}]);
        let lines = [
            json!({"sessionId": "4ac07bd6", "projectHash": "h", "startTime": "2026-12-02T02:46:38Z",
                   "kind": "subagent", "directories": ["/p"]}),
            called,
        ];
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        let context = ChatContext {
            parent_session: Some("parent-1".into()),
            project_root: None,
        };
        let chat = parse_chat_in(text.as_bytes(), "4ac07bd6.jsonl", &context);
        assert!(chat.events.iter().all(|e| e.session_id() == "parent-1"));
        assert!(usage(&chat).iter().all(|u| u.3), "a side chain");
        assert!(
            !chat
                .events
                .iter()
                .any(|event| matches!(event, LogEvent::Session { .. })),
            "the parent's session says where and how it ran"
        );
        assert!(chat.events.iter().any(|event| matches!(
            event,
            LogEvent::Tasks { lane: Some(lane), .. } if lane == "4ac07bd6"
        )));
    }

    #[test]
    fn without_a_session_id_the_file_name_names_the_session() {
        let text = format!("{}\n", message("g1", "gemini", tokens(10, 1, 0, 0, 0)));
        let chat = parse_chat(
            text.as_bytes(),
            "/x/chats/session-2026-06-01T10-00-abcd1234.jsonl",
        );
        assert!(
            chat.events
                .iter()
                .all(|e| e.session_id() == "session-2026-06-01T10-00-abcd1234")
        );
    }

    #[test]
    fn what_is_not_a_chat_is_skipped_and_never_panics() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let deep_message =
            format!("{{\"sessionId\":\"s\",\"messages\":[{{\"id\":\"g\",\"content\":{deep}}}]}}");
        let huge = format!(
            "{{\"sessionId\":\"s\",\"messages\":[{{\"id\":\"g\",\"type\":\"gemini\",\"content\":\"{}\",\"tokens\":{{\"input\":3}}}}]}}",
            "y".repeat(10_000_000)
        );
        let cases: Vec<(&str, Vec<u8>, &str, u64, usize)> = vec![
            ("garbage", b"not json".to_vec(), "session-a.json", 1, 0),
            (
                "a torn document",
                br#"{"sessionId":"s","messages":[{"id":"g"#.to_vec(),
                "session-a.json",
                1,
                0,
            ),
            (
                "invalid UTF-8",
                b"{\"sessionId\":\"\xff\"}".to_vec(),
                "session-a.json",
                1,
                0,
            ),
            ("an array", b"[]".to_vec(), "session-a.json", 1, 0),
            (
                "deep arrays",
                deep.clone().into_bytes(),
                "session-a.json",
                1,
                0,
            ),
            (
                "deep arrays in a message",
                deep_message.into_bytes(),
                "session-a.json",
                0,
                0,
            ),
            ("a 10 MB message", huge.into_bytes(), "session-a.json", 0, 1),
            ("empty", Vec::new(), "session-a.json", 1, 0),
            (
                "lines of garbage",
                b"x\n[1]\n\xff\n{\"id\":\"g\",\"type\":\"gemini\",\"tokens\":{\"input\":1}}\n"
                    .to_vec(),
                "a.jsonl",
                3,
                1,
            ),
            ("an empty chat", b"\n\n".to_vec(), "a.jsonl", 0, 0),
            (
                "messages of another type",
                br#"{"sessionId":"s","messages":{"a":1}}"#.to_vec(),
                "session-a.json",
                0,
                0,
            ),
        ];
        for (what, bytes, name, skipped, requests) in cases {
            let chat = parse_chat(&bytes, name);
            assert_eq!(
                (chat.skipped_lines, usage(&chat).len()),
                (skipped, requests),
                "{what}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_bytes_are_read_without_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..400), jsonl in any::<bool>()) {
            parse_chat(&bytes, if jsonl { "a.jsonl" } else { "a.json" });
        }

        #[test]
        fn a_cut_or_mutated_chat_never_panics(cut in 0usize..2000, flip in 0usize..2000, byte in any::<u8>(), jsonl in any::<bool>()) {
            let name = if jsonl { "session-fake-chat.jsonl" } else { "session-fake.json" };
            let mut bytes = fixture(name);
            let at = flip % bytes.len();
            bytes[at] = byte;
            bytes.truncate(cut.min(bytes.len()));
            parse_chat(&bytes, name);
        }
    }
}
