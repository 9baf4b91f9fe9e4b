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
    include_bytes!("../../../tests/fixtures/claude/tasks-created-updated-deleted.jsonl");
/// A `TodoWrite` list, an `Edit`, then a `TodoWrite` that clears the list.
const CLEARED_FIXTURE: &[u8] =
    include_bytes!("../../../tests/fixtures/claude/todowrite-cleared.jsonl");
/// Failed, successful, relative and unfinished edits; a progress line and an Agent
/// result that embed a subagent's usage.
const EDITS_FIXTURE: &[u8] = include_bytes!("../../../tests/fixtures/claude/session-edits.jsonl");
/// The subagent of `session-edits`: its own todo lane, a repeated request, and a replay
/// of a parent request.
const SUBAGENT_FIXTURE: &[u8] =
    include_bytes!("../../../tests/fixtures/claude/session-edits/subagents/agent-a1b2c3d.jsonl");
/// A file of the Task tools' store, as the fake claude writes it.
const TASK_STORE_FIXTURE: &[u8] =
    include_bytes!("../../../tests/fixtures/claude/task-store-deleted.json");

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
        events
            .iter()
            .any(|event| matches!(event, LogEvent::FileTouched { path, .. } if path == "/w/a.rs")),
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

fn task(id: Option<&str>, title: &str, status: TaskStatus, active_form: Option<&str>) -> TaskItem {
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
                    .map(|(id, title, status, active_form)| task(*id, title, *status, *active_form))
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
    assert!(matches!(&events[1], LogEvent::Tasks { lane: Some(lane), .. } if lane == "sidechain"));
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
