//! GitHub Copilot CLI's session logs (`$COPILOT_HOME/session-state/<session>/`), read into
//! [`LogEvent`]s: `events.jsonl` line by line, and the session's own task list from its
//! `session.db`. Checked against what `@github/copilot` 1.0.102 writes; lines are read as
//! JSON, in any key order, a value of an unexpected type reading as absent.
//!
//! What a session says, and how it is read:
//!
//! - **The session.** Its id is its folder's name (the `sessionId` of `session.start`,
//!   which a file with no folder name falls back to). `session.start` and `session.resume`
//!   give the working directory (`context.cwd`) and the model (`selectedModel`);
//!   `session.model_change` a new model (`newModel`).
//! - **Tokens.** One `session.usage_record` per model request (`data.usage`), written in
//!   every mode (`-p`, the terminal, ACP; the session store's copy is missing for ACP
//!   sessions). Copilot's `inputTokens` include the cache's: `input = inputTokens −
//!   cacheReadTokens − cacheWriteTokens`, `cache_read = cacheReadTokens`, `cache_write_5m
//!   = cacheWriteTokens`, `output = outputTokens`. The request is keyed by its
//!   accounting id (`accounting.usageId`, else `apiCallId`), so a line read twice counts
//!   once. `session.usage_checkpoint` and `session.shutdown` repeat totals: not read.
//! - **Files.** A `tool.execution_complete` that succeeded lists what its tool committed
//!   (`fileEdits[].path`); the tool's name comes from its `tool.execution_start`.
//! - **Tasks.** Copilot keeps its task list in a table, `todos`, of the session's own
//!   database (`session.db`, written by its `sql` tool; `session.todos_changed` only says
//!   that it changed). [`todos`] turns its rows into the list; [`super::copilot_db`] reads
//!   them.
//!
//! The parser is pure and its state serializes, so a watcher can stop after any line and
//! resume later with the same results.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::lenient::{
    Lenient, LenientBool, LenientCount, LenientList, LenientStr, opens_object, timestamp_ms,
};
use super::paths;
use crate::log_events::{LineOutcome, LogEvent, RequestKey, TaskItem, TaskStatus, TokenCounts};

/// The log file of a session, in its folder.
pub const EVENTS_FILE: &str = "events.jsonl";

/// The session's own database, holding its task list.
pub const SESSION_DB: &str = "session.db";

/// Tool calls waiting for their end, at most: a call that never ends (the session was cut
/// short) must not hold memory forever.
const MAX_PENDING_TOOLS: usize = 256;

/// Reads one session's `events.jsonl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CopilotParser {
    session_id: String,
    cwd: Option<String>,
    model: Option<String>,
    /// Tool calls started and not yet ended: their id and tool.
    pending: VecDeque<(String, String)>,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: LenientStr<'a>,
    #[serde(default, borrow)]
    timestamp: LenientStr<'a>,
    #[serde(default, borrow)]
    data: Lenient<Data<'a>>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data<'a> {
    #[serde(default, borrow)]
    session_id: LenientStr<'a>,
    #[serde(default, borrow)]
    selected_model: LenientStr<'a>,
    #[serde(default, borrow)]
    new_model: LenientStr<'a>,
    #[serde(default, borrow)]
    context: Lenient<Context<'a>>,
    #[serde(default, borrow)]
    usage: Lenient<Usage<'a>>,
    #[serde(default, borrow)]
    tool_call_id: LenientStr<'a>,
    #[serde(default, borrow)]
    tool_name: LenientStr<'a>,
    #[serde(default)]
    success: LenientBool,
    #[serde(default, borrow)]
    file_edits: LenientList<FileEdit<'a>>,
}

#[derive(Default, Deserialize)]
struct Context<'a> {
    #[serde(default, borrow)]
    cwd: LenientStr<'a>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage<'a> {
    #[serde(default, borrow)]
    model: LenientStr<'a>,
    #[serde(default)]
    input_tokens: LenientCount,
    #[serde(default)]
    output_tokens: LenientCount,
    #[serde(default)]
    cache_read_tokens: LenientCount,
    #[serde(default)]
    cache_write_tokens: LenientCount,
    #[serde(default, borrow)]
    api_call_id: LenientStr<'a>,
    #[serde(default, borrow)]
    accounting: Lenient<Accounting<'a>>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Accounting<'a> {
    #[serde(default, borrow)]
    usage_id: LenientStr<'a>,
}

#[derive(Default, Deserialize)]
struct FileEdit<'a> {
    #[serde(default, borrow)]
    path: LenientStr<'a>,
}

impl CopilotParser {
    /// A parser for the log of `session_id` (its folder's name; empty when unknown).
    pub fn new(session_id: &str) -> CopilotParser {
        CopilotParser {
            session_id: session_id.to_owned(),
            ..CopilotParser::default()
        }
    }

    fn session(&self, at_ms: Option<i64>) -> LogEvent {
        LogEvent::Session {
            session_id: self.session_id.clone(),
            cwd: self.cwd.clone(),
            model: self.model.clone(),
            at_ms,
        }
    }

    /// Reads one line, adding what it says to `events`.
    pub fn line(&mut self, line: &[u8], events: &mut Vec<LogEvent>) -> LineOutcome {
        if !opens_object(line) {
            return LineOutcome::Skipped;
        }
        let Ok(parsed) = serde_json::from_slice::<Line<'_>>(line) else {
            return LineOutcome::Skipped;
        };
        let at_ms = parsed.timestamp.as_str().and_then(timestamp_ms);
        let Some(data) = parsed.data.0 else {
            return LineOutcome::Read;
        };
        match parsed.kind.as_str().unwrap_or_default() {
            kind @ ("session.start" | "session.resume" | "session.model_change") => {
                if self.session_id.is_empty()
                    && let Some(id) = data.session_id.non_empty()
                {
                    self.session_id = id.to_owned();
                }
                if self.session_id.is_empty() {
                    return LineOutcome::Read;
                }
                // Only a directory files can be resolved against.
                if let Some(cwd) = data
                    .context
                    .0
                    .and_then(|context| context.cwd.into_owned())
                    .filter(|cwd| paths::is_absolute(cwd))
                {
                    self.cwd = Some(cwd);
                }
                let model = if kind == "session.model_change" {
                    data.new_model.into_owned()
                } else {
                    data.selected_model.into_owned()
                };
                if let Some(model) = model {
                    self.model = Some(model);
                }
                events.push(self.session(at_ms));
            }
            "session.usage_record" => {
                let Some(usage) = data.usage.0 else {
                    return LineOutcome::Read;
                };
                if self.session_id.is_empty() {
                    return LineOutcome::Read;
                }
                let (cache_read, cache_write) = (
                    usage.cache_read_tokens.get(),
                    usage.cache_write_tokens.get(),
                );
                let tokens = TokenCounts {
                    input: usage
                        .input_tokens
                        .get()
                        .saturating_sub(cache_read)
                        .saturating_sub(cache_write),
                    output: usage.output_tokens.get(),
                    cache_write_5m: cache_write,
                    cache_write_1h: 0,
                    cache_read,
                };
                let Some(model) = usage.model.into_owned().or_else(|| self.model.clone()) else {
                    return LineOutcome::Read;
                };
                let key = usage
                    .accounting
                    .0
                    .and_then(|accounting| accounting.usage_id.into_owned())
                    .or_else(|| usage.api_call_id.into_owned())
                    .map(|id| RequestKey {
                        message_id: id,
                        request_id: None,
                    });
                events.push(LogEvent::Usage {
                    session_id: self.session_id.clone(),
                    key,
                    sidechain: false,
                    model,
                    tokens,
                    billing: Default::default(),
                    at_ms,
                });
            }
            "tool.execution_start" => {
                if let (Some(id), Some(tool)) =
                    (data.tool_call_id.into_owned(), data.tool_name.into_owned())
                {
                    if self.pending.len() >= MAX_PENDING_TOOLS {
                        self.pending.pop_front();
                    }
                    self.pending.push_back((id, tool));
                }
            }
            "tool.execution_complete" => {
                let id = data.tool_call_id.as_str().unwrap_or_default();
                let tool = self
                    .pending
                    .iter()
                    .position(|(pending, _)| pending == id)
                    .and_then(|index| self.pending.remove(index))
                    .map(|(_, tool)| tool);
                if data.success.0 != Some(true) || self.session_id.is_empty() {
                    return LineOutcome::Read;
                }
                let tool = tool.unwrap_or_else(|| "edit".to_owned());
                for edit in data.file_edits.0 {
                    let Some(path) = edit.path.non_empty() else {
                        continue;
                    };
                    events.push(LogEvent::FileTouched {
                        session_id: self.session_id.clone(),
                        path: paths::resolve(self.cwd.as_deref(), path),
                        tool: tool.clone(),
                        at_ms,
                    });
                }
            }
            _ => {}
        }
        LineOutcome::Read
    }
}

/// One row of a session's `todos` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TodoRow {
    pub id: String,
    pub title: String,
    pub status: String,
}

/// A session's task list from its `todos` rows, in the order they were made. Copilot's
/// statuses: `pending`, `in_progress`, `done`, `blocked` (its table allows no other; a
/// status it does not know is read as pending).
pub fn todos(session_id: &str, rows: &[TodoRow], at_ms: Option<i64>) -> LogEvent {
    LogEvent::Tasks {
        session_id: session_id.to_owned(),
        lane: None,
        source: "todos".to_owned(),
        tasks: rows
            .iter()
            .filter(|row| !row.title.trim().is_empty())
            .map(|row| TaskItem {
                id: Some(row.id.clone()).filter(|id| !id.is_empty()),
                title: row.title.clone(),
                status: match row.status.as_str() {
                    "in_progress" => TaskStatus::InProgress,
                    "done" => TaskStatus::Completed,
                    "blocked" => TaskStatus::Blocked,
                    _ => TaskStatus::Pending,
                },
                active_form: None,
            })
            .collect(),
        at_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session as Copilot 1.0.102 wrote it (abridged: fields Roundtable does not read
    /// left out, their order and kinds kept).
    const SESSION: &str = concat!(
        r#"{"type":"session.start","data":{"sessionId":"b3ddda4c-c75e","version":1,"producer":"copilot-agent","copilotVersion":"1.0.102","startTime":"2026-12-06T17:38:12.668Z","selectedModel":"claude-sonnet-4-5","reasoningEffort":"medium","contextTier":null,"context":{"cwd":"/tmp/proj"},"alreadyInUse":false},"id":"bde5f01b","timestamp":"2026-12-06T17:38:12.696Z","parentId":null}"#,
        "\n",
        r#"{"type":"user.message","data":{"content":"DOTOOLS please","turnId":"0"},"id":"u1","timestamp":"2026-12-06T17:38:12.700Z","parentId":"bde5f01b"}"#,
        "\n",
        r#"{"type":"session.usage_record","data":{"usage":{"model":"claude-sonnet-4-5","inputTokens":1258,"outputTokens":42,"cacheReadTokens":200,"cacheWriteTokens":50,"cost":0.0,"isByok":true,"apiCallId":"msg_8","apiEndpoint":"/v1/messages","accounting":{"sourceSessionId":"b3ddda4c-c75e","sequence":1,"usageId":"msg_8"}}},"id":"r1","timestamp":"2026-12-06T17:38:13.058Z","parentId":"u1"}"#,
        "\n",
        r#"{"type":"tool.execution_start","data":{"toolCallId":"toolu_0009_0","toolName":"create","arguments":{"path":"/tmp/proj/hello.txt","file_text":"hello world\n"},"turnId":"1"},"id":"t1","timestamp":"2026-12-06T17:38:13.100Z","parentId":"r1"}"#,
        "\n",
        r#"{"type":"tool.execution_complete","data":{"toolCallId":"toolu_0009_0","model":"claude-sonnet-4-5","turnId":"1","fileEdits":[{"path":"/tmp/proj/hello.txt","kind":"create"}],"success":true,"result":{"content":"Created file"}},"id":"t2","timestamp":"2026-12-06T17:38:13.174Z","parentId":"t1"}"#,
        "\n",
        r#"{"type":"tool.execution_start","data":{"toolCallId":"toolu_0010_0","toolName":"edit","arguments":{"path":"src/lib.rs"}},"id":"t3","timestamp":"2026-12-06T17:38:13.200Z","parentId":"t2"}"#,
        "\n",
        r#"{"type":"tool.execution_complete","data":{"toolCallId":"toolu_0010_0","fileEdits":[{"path":"src/lib.rs","kind":"edit"}],"success":false,"error":{"message":"No match found"}},"id":"t4","timestamp":"2026-12-06T17:38:13.250Z","parentId":"t3"}"#,
        "\n",
        r#"{"type":"session.model_change","data":{"previousModel":"claude-sonnet-4-5","newModel":"gpt-5.5"},"id":"m1","timestamp":"2026-12-06T17:38:14.000Z","parentId":"t4"}"#,
        "\n",
        r#"{"type":"session.usage_record","data":{"usage":{"model":"gpt-5.5","inputTokens":1004,"outputTokens":42,"cacheReadTokens":200,"cacheWriteTokens":0,"apiCallId":"chatcmpl-2"}},"id":"r2","timestamp":"2026-12-06T17:38:14.500Z","parentId":"m1"}"#,
        "\n",
        r#"{"type":"session.shutdown","data":{"modelMetrics":{"claude-sonnet-4-5":{"usage":{"inputTokens":1258,"outputTokens":42}}}},"id":"s9","timestamp":"2026-12-06T17:38:15.000Z","parentId":"r2"}"#,
        "\n",
    );

    fn read(parser: &mut CopilotParser, text: &str) -> (Vec<LogEvent>, usize) {
        let mut events = Vec::new();
        let mut skipped = 0;
        for line in text.lines() {
            if parser.line(line.as_bytes(), &mut events) == LineOutcome::Skipped {
                skipped += 1;
            }
        }
        (events, skipped)
    }

    #[test]
    fn a_session_gives_its_place_its_requests_without_the_cache_in_their_input_and_its_files() {
        let mut parser = CopilotParser::new("b3ddda4c-c75e");
        let (events, skipped) = read(&mut parser, SESSION);
        assert_eq!(skipped, 0);
        assert_eq!(
            events[0],
            LogEvent::Session {
                session_id: "b3ddda4c-c75e".into(),
                cwd: Some("/tmp/proj".into()),
                model: Some("claude-sonnet-4-5".into()),
                at_ms: timestamp_ms("2026-12-06T17:38:12.696Z"),
            }
        );
        let usage: Vec<(String, TokenCounts, Option<String>)> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Usage {
                    model, tokens, key, ..
                } => Some((
                    model.clone(),
                    *tokens,
                    key.as_ref().map(|key| key.message_id.clone()),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            usage,
            [
                (
                    "claude-sonnet-4-5".to_owned(),
                    TokenCounts {
                        input: 1008,
                        output: 42,
                        cache_write_5m: 50,
                        cache_write_1h: 0,
                        cache_read: 200
                    },
                    Some("msg_8".to_owned())
                ),
                (
                    "gpt-5.5".to_owned(),
                    TokenCounts {
                        input: 804,
                        output: 42,
                        cache_write_5m: 0,
                        cache_write_1h: 0,
                        cache_read: 200
                    },
                    Some("chatcmpl-2".to_owned())
                ),
            ]
        );
        // The edit that failed is not a file touched.
        let files: Vec<(&str, &str)> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::FileTouched { path, tool, .. } => Some((path.as_str(), tool.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(files, [("/tmp/proj/hello.txt", "create")]);
        assert!(events.iter().any(|event| matches!(
            event,
            LogEvent::Session { model: Some(model), .. } if model == "gpt-5.5"
        )));
        assert!(parser.pending.is_empty());
    }

    #[test]
    fn a_parser_stopped_after_any_line_goes_on_as_if_it_had_not() {
        let (whole, _) = read(&mut CopilotParser::new("s"), SESSION);
        let lines: Vec<&str> = SESSION.lines().collect();
        for cut in 0..lines.len() {
            let mut first = CopilotParser::new("s");
            let (mut events, _) = read(&mut first, &lines[..cut].join("\n"));
            let saved = serde_json::to_string(&first).unwrap();
            let mut resumed: CopilotParser = serde_json::from_str(&saved).unwrap();
            events.extend(read(&mut resumed, &lines[cut..].join("\n")).0);
            assert_eq!(events, whole, "cut at line {cut}");
        }
    }

    #[test]
    fn odd_lines_are_skipped_or_say_nothing_and_never_fail_the_rest() {
        let mut parser = CopilotParser::new("");
        let odd = concat!(
            "not json\n",
            "[1,2]\n",
            r#"{"type":"session.usage_record","data":{"usage":{"inputTokens":5}}}"#,
            "\n",
            r#"{"type":"session.start","data":"a string"}"#,
            "\n",
            r#"{"type":7,"data":{"usage":[]}}"#,
            "\n",
            r#"{"type":"session.start","data":{"sessionId":"late","context":{"cwd":3},"selectedModel":{}}}"#,
            "\n",
            r#"{"type":"session.usage_record","data":{"usage":{"inputTokens":-4,"outputTokens":"many","cacheReadTokens":9}}}"#,
            "\n",
            r#"{"type":"tool.execution_complete","data":{"toolCallId":"x","success":true,"fileEdits":[{"path":"a.rs"},7,{"path":""}]}}"#,
            "\n",
        );
        let (events, skipped) = read(&mut parser, odd);
        assert_eq!(skipped, 2);
        // No session known for the first usage, no model for the last: nothing priced
        // wrongly; the session and the file are read.
        assert_eq!(
            events,
            [
                LogEvent::Session {
                    session_id: "late".into(),
                    cwd: None,
                    model: None,
                    at_ms: None,
                },
                LogEvent::FileTouched {
                    session_id: "late".into(),
                    path: "a.rs".into(),
                    tool: "edit".into(),
                    at_ms: None,
                },
            ]
        );
    }

    proptest::proptest! {
        /// Real lines cut anywhere and followed by noise are read or skipped, never a
        /// panic; no usage is said without a model, nor with more input than was written.
        #[test]
        fn damaged_lines_read_without_a_panic(
            line in proptest::sample::select(SESSION.lines().map(str::to_owned).collect::<Vec<_>>()),
            cut in 0usize..700,
            noise in "[{}\\[\\]\",:0-9a-z .\\\\/-]{0,30}",
        ) {
            let cut = line.len().min(cut);
            let mut damaged = line.as_bytes()[..cut].to_vec();
            damaged.extend_from_slice(noise.as_bytes());
            let mut parser = CopilotParser::new("s");
            let mut events = Vec::new();
            parser.line(&damaged, &mut events);
            for event in &events {
                if let LogEvent::Usage { model, tokens, .. } = event {
                    proptest::prop_assert!(!model.is_empty());
                    proptest::prop_assert!(tokens.input <= 1258);
                }
            }
        }
    }

    #[test]
    fn tool_calls_that_never_end_are_forgotten_past_a_bound() {
        let mut parser = CopilotParser::new("s");
        let mut events = Vec::new();
        for n in 0..MAX_PENDING_TOOLS + 10 {
            let line = format!(
                r#"{{"type":"tool.execution_start","data":{{"toolCallId":"c{n}","toolName":"bash"}}}}"#
            );
            parser.line(line.as_bytes(), &mut events);
        }
        assert_eq!(parser.pending.len(), MAX_PENDING_TOOLS);
        assert_eq!(parser.pending.front().unwrap().0, "c10");
    }

    #[test]
    fn the_todos_table_becomes_the_sessions_list() {
        let row = |id: &str, title: &str, status: &str| TodoRow {
            id: id.into(),
            title: title.into(),
            status: status.into(),
        };
        let LogEvent::Tasks { tasks, source, .. } = todos(
            "s",
            &[
                row("alpha", "Write the parser", "in_progress"),
                row("beta", "Tell the room", "pending"),
                row("gamma", "Read the spec", "done"),
                row("delta", "Ship", "blocked"),
                row("eps", "  ", "pending"),
                row("zeta", "Odd", "later"),
            ],
            None,
        ) else {
            panic!()
        };
        assert_eq!(source, "todos");
        let read: Vec<(&str, TaskStatus)> = tasks
            .iter()
            .map(|task| (task.title.as_str(), task.status))
            .collect();
        assert_eq!(
            read,
            [
                ("Write the parser", TaskStatus::InProgress),
                ("Tell the room", TaskStatus::Pending),
                ("Read the spec", TaskStatus::Completed),
                ("Ship", TaskStatus::Blocked),
                ("Odd", TaskStatus::Pending),
            ]
        );
    }
}
