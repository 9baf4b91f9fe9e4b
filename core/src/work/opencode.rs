//! OpenCode's sessions, from its database (`~/.local/share/opencode/opencode.db`, SQLite in
//! WAL mode, written by OpenCode 1.18 as it goes). The rows are read by
//! [`super::opencode_db`]; this module turns them into [`LogEvent`]s, purely.
//!
//! - `session` rows: the session, its directory, its model (`model` holds
//!   `{"id", "providerID"}` as JSON).
//! - `message` rows (`data` JSON): each assistant message is one model step with its
//!   `tokens {input, output, reasoning, cache {read, write}}` (`input` leaves the cache
//!   out) and `modelID`. One [`LogEvent::Usage`] per message, keyed by its id, so a message
//!   read again as it grows counts once, at its largest. Mapping: `output = output +
//!   reasoning`, `cache_read = cache.read`, `cache_write_5m = cache.write`. OpenCode's own
//!   `cost` is not used: costs are priced from `pricing.toml`, as for every CLI
//!   (docs/agents.md says why).
//! - `part` rows (`data` JSON): a completed `write`, `edit` or `multiedit` tool call names
//!   the file it changed (`state.input.filePath`; relative paths are resolved against the
//!   session's directory), and a `patch` part lists the files a step changed (shell
//!   commands' edits show only there).
//! - `todo` rows: the session's task list, in `position` order, replaced whole by each
//!   `todowrite`; statuses `pending`, `in_progress`, `completed`, `cancelled`.
//!
//! Anything else (other part types, running tools, user messages) says nothing here. A row
//! whose JSON cannot be read is counted as skipped, never an error.

use serde::Deserialize;

use super::lenient::{Lenient, LenientCount, LenientStr, opens_object};
use crate::log_events::{LogEvent, RequestKey, TaskItem, TaskStatus, TokenCounts};

/// A `session` row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub directory: String,
    /// The session that started it (a sub-agent's), if any.
    pub parent_id: Option<String>,
    /// `{"id": "claude-sonnet-4-5", "providerID": "anthropic", …}` as JSON.
    pub model: Option<String>,
    pub time_created: i64,
}

/// A `message` or `part` row: its session and its JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataRow {
    pub id: String,
    pub session_id: String,
    pub time_created: i64,
    pub data: String,
}

/// A `todo` row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TodoRow {
    pub session_id: String,
    pub content: String,
    pub status: String,
    pub position: i64,
}

/// What a set of rows says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpencodeRead {
    pub events: Vec<LogEvent>,
    /// Rows whose JSON could not be read.
    pub skipped_rows: u64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ModelRef<'a> {
    #[serde(borrow)]
    id: LenientStr<'a>,
}

/// The session event of a row.
pub fn session(row: &SessionRow) -> LogEvent {
    let model = row
        .model
        .as_deref()
        .filter(|text| opens_object(text.as_bytes()))
        .and_then(|text| serde_json::from_str::<ModelRef<'_>>(text).ok())
        .and_then(|model| model.id.into_owned());
    LogEvent::Session {
        session_id: row.parent_id.clone().unwrap_or_else(|| row.id.clone()),
        cwd: Some(row.directory.clone()).filter(|dir| !dir.is_empty()),
        model,
        at_ms: Some(row.time_created),
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Message<'a> {
    #[serde(borrow)]
    role: LenientStr<'a>,
    #[serde(borrow, rename = "modelID")]
    model_id: LenientStr<'a>,
    tokens: Lenient<Tokens>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Tokens {
    input: LenientCount,
    output: LenientCount,
    reasoning: LenientCount,
    cache: Lenient<Cache>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Cache {
    read: LenientCount,
    write: LenientCount,
}

fn read<'a, T: Deserialize<'a>>(data: &'a str) -> Option<T> {
    if !opens_object(data.as_bytes()) {
        return None;
    }
    serde_json::from_str(data).ok()
}

/// A row whose JSON could not be read (counted as skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

/// The usage of a `message` row, when it is an assistant's step with tokens; `session` is
/// the session it counts under (a sub-agent's parent).
pub fn message(row: &DataRow, session: &str) -> Result<Option<LogEvent>, Unreadable> {
    let message: Message<'_> = read(&row.data).ok_or(Unreadable)?;
    if !message.role.is("assistant") {
        return Ok(None);
    }
    let Some(tokens) = message.tokens.0 else {
        return Ok(None);
    };
    let cache = tokens.cache.0.unwrap_or_default();
    let counts = TokenCounts {
        input: tokens.input.get(),
        output: tokens.output.get() + tokens.reasoning.get(),
        cache_write_5m: cache.write.get(),
        cache_write_1h: 0,
        cache_read: cache.read.get(),
    };
    if counts.total() == 0 {
        return Ok(None);
    }
    Ok(Some(LogEvent::Usage {
        session_id: session.to_owned(),
        key: Some(RequestKey {
            message_id: row.id.clone(),
            request_id: None,
        }),
        sidechain: session != row.session_id,
        model: message.model_id.into_owned().unwrap_or_default(),
        tokens: counts,
        billing: Default::default(),
        at_ms: Some(row.time_created),
    }))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Part<'a> {
    #[serde(borrow, rename = "type")]
    kind: LenientStr<'a>,
    #[serde(borrow)]
    tool: LenientStr<'a>,
    #[serde(borrow)]
    state: Lenient<ToolState<'a>>,
    /// A `patch` part's files (absolute); what is not a string is left out.
    files: serde_json::Value,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ToolState<'a> {
    #[serde(borrow)]
    status: LenientStr<'a>,
    #[serde(borrow)]
    input: Lenient<ToolInput<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ToolInput<'a> {
    #[serde(borrow, rename = "filePath")]
    file_path: LenientStr<'a>,
}

/// The files a `part` row says were changed; `directory` is its session's (for relative
/// paths).
pub fn part(
    row: &DataRow,
    session: &str,
    directory: &str,
    events: &mut Vec<LogEvent>,
) -> Result<(), Unreadable> {
    let part: Part<'_> = read(&row.data).ok_or(Unreadable)?;
    let touched = |path: &str, tool: &str| LogEvent::FileTouched {
        session_id: session.to_owned(),
        path: absolute(path, directory),
        tool: tool.to_owned(),
        at_ms: Some(row.time_created),
    };
    match part.kind.as_str() {
        Some("tool") => {
            let tool = part.tool.as_str().unwrap_or_default();
            if !matches!(tool, "write" | "edit" | "multiedit") {
                return Ok(());
            }
            let Some(state) = part.state.0 else {
                return Ok(());
            };
            if !state.status.is("completed") {
                return Ok(());
            }
            if let Some(path) = state.input.0.and_then(|input| input.file_path.into_owned())
                && !path.is_empty()
            {
                events.push(touched(&path, tool));
            }
        }
        Some("patch") => {
            let files = part.files.as_array().into_iter().flatten();
            for path in files
                .filter_map(serde_json::Value::as_str)
                .filter(|p| !p.is_empty())
            {
                events.push(touched(path, "patch"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// `path` made absolute against `directory` (either slash; a Windows drive counts).
fn absolute(path: &str, directory: &str) -> String {
    let rooted =
        path.starts_with('/') || path.starts_with('\\') || path.as_bytes().get(1) == Some(&b':');
    if rooted || directory.is_empty() {
        return path.to_owned();
    }
    let separator = if directory.contains('\\') && !directory.contains('/') {
        '\\'
    } else {
        '/'
    };
    format!(
        "{}{separator}{}",
        directory.trim_end_matches(['/', '\\']),
        path.trim_start_matches("./")
    )
}

/// A session's task list from its `todo` rows (any order).
pub fn todos(session: &str, rows: &[TodoRow], at_ms: Option<i64>) -> LogEvent {
    let mut rows: Vec<&TodoRow> = rows.iter().collect();
    rows.sort_by_key(|row| row.position);
    LogEvent::Tasks {
        session_id: session.to_owned(),
        lane: None,
        source: "todowrite".into(),
        tasks: rows
            .into_iter()
            .filter(|row| !row.content.trim().is_empty())
            .map(|row| TaskItem {
                id: None,
                title: row.content.clone(),
                status: match row.status.as_str() {
                    "in_progress" => TaskStatus::InProgress,
                    "completed" => TaskStatus::Completed,
                    "cancelled" => TaskStatus::Cancelled,
                    _ => TaskStatus::Pending,
                },
                active_form: None,
            })
            .collect(),
        at_ms,
    }
}

/// Everything the rows say: `sessions` are every session (for the directories and parents
/// of the other rows), `changed` the ids of those to report. Messages and parts of a session
/// not among `sessions` count under their own session id, in no directory.
pub fn read_rows(
    sessions: &[SessionRow],
    changed: &[String],
    messages: &[DataRow],
    parts: &[DataRow],
    todo_rows: &[TodoRow],
) -> OpencodeRead {
    use std::collections::{BTreeMap, HashMap};
    let known: HashMap<&str, &SessionRow> =
        sessions.iter().map(|row| (row.id.as_str(), row)).collect();
    // A sub-agent's session counts under the session that started it.
    let owner = |id: &str| -> String {
        known
            .get(id)
            .and_then(|row| row.parent_id.clone())
            .unwrap_or_else(|| id.to_owned())
    };
    let directory = |id: &str| known.get(id).map_or("", |row| row.directory.as_str());
    let mut read = OpencodeRead::default();
    for id in changed {
        if let Some(row) = known.get(id.as_str()) {
            read.events.push(session(row));
        }
    }
    for row in messages {
        match message(row, &owner(&row.session_id)) {
            Ok(Some(event)) => read.events.push(event),
            Ok(None) => {}
            Err(Unreadable) => read.skipped_rows += 1,
        }
    }
    for row in parts {
        let owner = owner(&row.session_id);
        if part(row, &owner, directory(&row.session_id), &mut read.events).is_err() {
            read.skipped_rows += 1;
        }
    }
    let mut lists: BTreeMap<&str, Vec<TodoRow>> = BTreeMap::new();
    for row in todo_rows {
        lists
            .entry(row.session_id.as_str())
            .or_default()
            .push(row.clone());
    }
    for (session_id, rows) in lists {
        // A sub-agent's list is a lane of its parent's session.
        let event = todos(&owner(session_id), &rows, None);
        read.events.push(match event {
            LogEvent::Tasks {
                session_id: owner_id,
                source,
                tasks,
                at_ms,
                ..
            } => LogEvent::Tasks {
                lane: (owner_id != session_id).then(|| session_id.to_owned()),
                session_id: owner_id,
                source,
                tasks,
                at_ms,
            },
            other => other,
        });
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Rows of any text (damaged real-format JSON among it) make events, or are
        /// counted as skipped: never a panic, and a message is read or skipped, never both.
        #[test]
        fn rows_of_any_text_read_without_a_panic(
            sample in proptest::sample::select(vec![
                ASSISTANT.to_owned(),
                r#"{"type":"tool","tool":"edit","state":{"status":"completed","input":{"filePath":"a.rs"}}}"#.to_owned(),
                r#"{"type":"patch","files":["/x",1,null]}"#.to_owned(),
            ]),
            cut in 0usize..400,
            noise in "[{}\\[\\]\",:0-9a-z .\\\\/-]{0,30}",
            status in "[a-z_]{0,12}",
        ) {
            let cut = sample.len().min(cut);
            let damaged = format!("{}{noise}", &sample[..cut]);
            let sessions = [session_row("ses_a", None), session_row("ses_b", Some("ses_a"))];
            let rows = [data("m1", "ses_b", 1, &damaged), data("m2", "ses_a", 2, &noise)];
            let todo = TodoRow {
                session_id: "ses_b".into(),
                content: noise.clone(),
                status,
                position: cut as i64,
            };
            let read = read_rows(&sessions, &["ses_b".into()], &rows, &rows, &[todo]);
            let usage = read
                .events
                .iter()
                .filter(|event| matches!(event, LogEvent::Usage { .. }))
                .count() as u64;
            proptest::prop_assert!(usage + read.skipped_rows <= 4);
        }
    }

    fn data(id: &str, session: &str, at: i64, data: &str) -> DataRow {
        DataRow {
            id: id.into(),
            session_id: session.into(),
            time_created: at,
            data: data.into(),
        }
    }

    fn session_row(id: &str, parent: Option<&str>) -> SessionRow {
        SessionRow {
            id: id.into(),
            directory: "/home/dana/src/app".into(),
            parent_id: parent.map(str::to_owned),
            model: Some(
                r#"{"id":"claude-sonnet-4-5","providerID":"anthropic","variant":"default"}"#.into(),
            ),
            time_created: 1_000,
        }
    }

    const ASSISTANT: &str = r#"{"parentID":"msg_1","role":"assistant","mode":"build","cost":0.0039045,"tokens":{"total":1301,"input":1009,"output":42,"reasoning":7,"cache":{"write":50,"read":200}},"modelID":"claude-sonnet-4-5","providerID":"anthropic","time":{"created":1,"completed":2},"finish":"tool-calls"}"#;

    #[test]
    fn an_assistant_step_is_one_request_keyed_by_its_message_with_reasoning_as_output() {
        let event = message(&data("msg_2", "ses_a", 5, ASSISTANT), "ses_a")
            .unwrap()
            .unwrap();
        assert_eq!(
            event,
            LogEvent::Usage {
                session_id: "ses_a".into(),
                key: Some(RequestKey {
                    message_id: "msg_2".into(),
                    request_id: None
                }),
                sidechain: false,
                model: "claude-sonnet-4-5".into(),
                tokens: TokenCounts {
                    input: 1009,
                    output: 49,
                    cache_write_5m: 50,
                    cache_write_1h: 0,
                    cache_read: 200,
                },
                billing: Default::default(),
                at_ms: Some(5),
            }
        );
        // A person's message, a step with no tokens yet: nothing; broken JSON: skipped.
        let user = r#"{"role":"user","time":{"created":1},"agent":"build"}"#;
        assert_eq!(message(&data("m", "s", 1, user), "s"), Ok(None));
        let streaming =
            r#"{"role":"assistant","tokens":{"input":0,"output":0,"cache":{"read":0,"write":0}}}"#;
        assert_eq!(message(&data("m", "s", 1, streaming), "s"), Ok(None));
        assert_eq!(
            message(&data("m", "s", 1, "{\"role\": \"assis"), "s"),
            Err(Unreadable)
        );
        assert_eq!(message(&data("m", "s", 1, "[1]"), "s"), Err(Unreadable));
    }

    #[test]
    fn completed_writes_and_edits_and_patches_name_their_files() {
        let rows = [
            r#"{"type":"tool","tool":"write","callID":"t1","state":{"status":"completed","input":{"filePath":"/home/dana/src/app/hello.txt","content":"hi"}}}"#,
            r#"{"type":"tool","tool":"edit","callID":"t2","state":{"status":"completed","input":{"filePath":"src/lib.rs","oldString":"a","newString":"b"}}}"#,
            // Running, failed, or another tool: nothing.
            r#"{"type":"tool","tool":"edit","callID":"t3","state":{"status":"running","input":{"filePath":"/x"}}}"#,
            r#"{"type":"tool","tool":"write","callID":"t4","state":{"status":"error","input":{"filePath":"/y"}}}"#,
            r#"{"type":"tool","tool":"bash","callID":"t5","state":{"status":"completed","input":{"command":"touch z"}}}"#,
            r#"{"type":"patch","hash":"4b82","files":["/home/dana/src/app/z"]}"#,
            r#"{"type":"text","text":"{\"filePath\": \"/not/a/tool\"}"}"#,
        ];
        let mut events = Vec::new();
        for (index, row) in rows.iter().enumerate() {
            let row = data(&format!("prt_{index}"), "ses_a", index as i64, row);
            part(&row, "ses_a", "/home/dana/src/app", &mut events).unwrap();
        }
        let touched: Vec<(&str, &str)> = events
            .iter()
            .map(|event| match event {
                LogEvent::FileTouched { path, tool, .. } => (path.as_str(), tool.as_str()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            touched,
            [
                ("/home/dana/src/app/hello.txt", "write"),
                ("/home/dana/src/app/src/lib.rs", "edit"),
                ("/home/dana/src/app/z", "patch"),
            ]
        );
        assert_eq!(
            absolute("src\\main.rs", "C:\\src\\app"),
            "C:\\src\\app\\src\\main.rs"
        );
        assert_eq!(absolute("D:\\x.rs", "C:\\src\\app"), "D:\\x.rs");
    }

    #[test]
    fn the_todo_rows_are_the_list_in_position_order_and_a_sub_agent_is_a_lane_of_its_parent() {
        let todo = |session: &str, content: &str, status: &str, position| TodoRow {
            session_id: session.into(),
            content: content.into(),
            status: status.into(),
            position,
        };
        let sessions = [
            session_row("ses_a", None),
            session_row("ses_sub", Some("ses_a")),
        ];
        let rows = [
            todo("ses_a", "Second", "in_progress", 1),
            todo("ses_a", "First", "completed", 0),
            todo("ses_a", "Third", "cancelled", 2),
            todo("ses_sub", "Look around", "pending", 0),
        ];
        let messages = [
            data("msg_9", "ses_sub", 9, ASSISTANT),
            data("bad", "ses_a", 9, "nope"),
        ];
        let read = read_rows(&sessions, &["ses_sub".into()], &messages, &[], &rows);
        assert_eq!(read.skipped_rows, 1);
        type Lane = (String, Option<String>, Vec<(String, TaskStatus)>);
        let lists: Vec<Lane> = read
            .events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Tasks {
                    session_id,
                    lane,
                    tasks,
                    ..
                } => Some((
                    session_id.clone(),
                    lane.clone(),
                    tasks.iter().map(|t| (t.title.clone(), t.status)).collect(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            lists,
            [
                (
                    "ses_a".to_owned(),
                    None,
                    vec![
                        ("First".to_owned(), TaskStatus::Completed),
                        ("Second".to_owned(), TaskStatus::InProgress),
                        ("Third".to_owned(), TaskStatus::Cancelled),
                    ]
                ),
                (
                    "ses_a".to_owned(),
                    Some("ses_sub".to_owned()),
                    vec![("Look around".to_owned(), TaskStatus::Pending)]
                ),
            ]
        );
        // The sub-agent's step counts under its parent, as a side chain; only the changed
        // session is reported, under its parent, with its model.
        assert!(read.events.iter().any(|event| matches!(event,
            LogEvent::Usage { session_id, sidechain: true, .. } if session_id == "ses_a")));
        assert!(read.events.contains(&LogEvent::Session {
            session_id: "ses_a".into(),
            cwd: Some("/home/dana/src/app".into()),
            model: Some("claude-sonnet-4-5".into()),
            at_ms: Some(1_000),
        }));
        assert_eq!(
            read.events
                .iter()
                .filter(|event| matches!(event, LogEvent::Session { .. }))
                .count(),
            1
        );
    }
}
