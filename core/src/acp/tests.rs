use serde_json::{Value, json};

use super::updates::*;
use crate::log_events::{TaskStatus, TokenCounts};

fn update(value: Value) -> Update {
    let params = json!({"sessionId": "ses_1", "update": value});
    let (session, update) = read_update(&params, "/w/app").unwrap();
    assert_eq!(session, "ses_1");
    update
}

#[test]
fn messages_answers_and_the_agents_requests_are_told_apart() {
    assert_eq!(
        read_line(br#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#).unwrap(),
        Incoming::Response {
            id: 3,
            result: Ok(json!({"stopReason": "end_turn"}))
        }
    );
    assert_eq!(
        read_line(
            br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"no such session"}}"#
        )
        .unwrap(),
        Incoming::Response {
            id: 4,
            result: Err(RpcError {
                code: -32602,
                message: "no such session".into()
            })
        }
    );
    assert!(matches!(
        read_line(br#"{"jsonrpc":"2.0","id":"p-1","method":"session/request_permission","params":{}}"#)
            .unwrap(),
        Incoming::Request { method, id, .. } if method == "session/request_permission" && id == "p-1"
    ));
    assert!(matches!(
        read_line(br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}"#)
            .unwrap(),
        Incoming::Notification { method, .. } if method == "session/update"
    ));
    assert!(matches!(read_line(b"not json"), Err(LineError::NotJson(_))));
    assert_eq!(
        read_line(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#),
        Err(LineError::NotAMessage),
        "an answer to an id Roundtable never uses"
    );
}

#[test]
fn a_sessions_updates_become_reply_text_a_task_list_and_files() {
    assert_eq!(
        update(
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Pars"}})
        ),
        Update::Message("Pars".into())
    );
    assert_eq!(
        update(
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "data": "…"}})
        ),
        Update::Message(String::new())
    );
    let Update::Plan(tasks) = update(json!({"sessionUpdate": "plan", "entries": [
        {"content": "Write the parser", "priority": "high", "status": "in_progress"},
        {"content": "Tell the room", "priority": "medium", "status": "pending"},
        {"content": "Read the spec", "priority": "low", "status": "completed"},
        {"content": "  ", "status": "pending"},
        {"priority": "low"},
        {"content": "Odd", "status": "later"},
    ]})) else {
        panic!()
    };
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
            ("Odd", TaskStatus::Pending),
        ]
    );
    // An edit names its file in its locations and its diff, once, relative ones resolved.
    assert_eq!(
        update(
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit parser.rs",
            "kind": "edit", "status": "pending",
            "locations": [{"path": "src/parser.rs", "line": 3}],
            "content": [{"type": "diff", "path": "/w/app/src/parser.rs", "oldText": "a", "newText": "b"},
                        {"type": "content", "content": {"type": "text", "text": "…"}}]})
        ),
        Update::ToolCall {
            id: "t1".into(),
            files: vec!["/w/app/src/parser.rs".into()],
            edits: true,
            completed: false,
        }
    );
    assert_eq!(
        update(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t2", "status": "completed",
            "kind": "execute", "locations": "not a list"})
        ),
        Update::ToolCall {
            id: "t2".into(),
            files: vec![],
            edits: false,
            completed: true,
        }
    );
    assert_eq!(
        update(json!({"sessionUpdate": "usage_update", "used": 9809, "size": 128000})),
        Update::Context {
            used: 9809,
            size: 128000
        }
    );
    assert_eq!(
        update(json!({"sessionUpdate": "available_commands_update", "availableCommands": []})),
        Update::Other("available_commands_update".into())
    );
    assert_eq!(
        read_update(&json!({"update": {}}), "/w"),
        None,
        "no session named"
    );
}

#[test]
fn a_turns_end_gives_its_tokens_without_the_cache_in_their_input() {
    // GitHub Copilot CLI 1.0.102's `session/prompt` answer.
    let end = read_turn_end(&json!({"stopReason": "end_turn", "usage": {
        "inputTokens": 2565, "outputTokens": 84, "totalTokens": 2649,
        "cachedReadTokens": 400, "cachedWriteTokens": 100}}));
    assert_eq!(end.stop_reason, "end_turn");
    assert_eq!(
        end.tokens,
        Some(TokenCounts {
            input: 2065,
            output: 84,
            cache_write_5m: 100,
            cache_write_1h: 0,
            cache_read: 400
        })
    );
    let bare = read_turn_end(&json!({"stopReason": "cancelled"}));
    assert_eq!(
        (bare.stop_reason.as_str(), bare.tokens),
        ("cancelled", None)
    );
    // With no total, nothing says whether the input holds the cache's tokens: not read.
    let odd = read_turn_end(&json!({"usage": {"inputTokens": "many", "cachedReadTokens": 5}}));
    assert_eq!(odd.tokens, None);
    let unsummed = read_turn_end(&json!({"usage": {
        "inputTokens": 10, "outputTokens": 5, "totalTokens": 99, "cachedReadTokens": 3}}));
    assert_eq!(unsummed.tokens, None);
}

#[test]
fn an_input_without_the_cache_is_told_by_the_total_and_thoughts_count_once() {
    // codex-acp 2.6.0: `inputTokens` without the cache's, thoughts inside the output.
    let codex = read_turn_end(&json!({"stopReason": "end_turn", "usage": {
        "totalTokens": 1342, "inputTokens": 1100, "cachedReadTokens": 200,
        "cachedWriteTokens": 0, "outputTokens": 42, "thoughtTokens": 7}}));
    assert_eq!(
        codex.tokens,
        Some(TokenCounts {
            input: 1100,
            output: 42,
            cache_write_5m: 0,
            cache_write_1h: 0,
            cache_read: 200
        })
    );
    // Thoughts beside the output, counted in the total: they are output.
    let beside = read_turn_end(&json!({"usage": {
        "totalTokens": 160, "inputTokens": 100, "cachedReadTokens": 30,
        "outputTokens": 20, "thoughtTokens": 10}}));
    assert_eq!(
        beside
            .tokens
            .map(|tokens| (tokens.input, tokens.output, tokens.cache_read)),
        Some((100, 30, 30))
    );
    // An input said to hold more cache than it has is not read.
    let short = read_turn_end(&json!({"usage": {
        "totalTokens": 15, "inputTokens": 10, "outputTokens": 5, "cachedReadTokens": 30}}));
    assert_eq!(short.tokens, None);
}

#[test]
fn a_permission_asked_names_the_call_and_the_agents_own_options() {
    let asked = read_permission(&json!({
        "sessionId": "ses_1",
        "toolCall": {"toolCallId": "t1", "title": "touch allowed.txt", "kind": "execute"},
        "options": [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "reject", "kind": "reject_once"},
            {"name": "no id"},
        ],
    }))
    .unwrap();
    assert_eq!(asked.session, "ses_1");
    assert_eq!(asked.what, "touch allowed.txt");
    assert_eq!(
        asked.options,
        [
            ("allow_once".to_owned(), "Allow once".to_owned()),
            ("reject".to_owned(), "reject".to_owned())
        ]
    );
    assert_eq!(
        read_permission(&json!({"sessionId": "s", "toolCall": {}, "options": []})),
        None,
        "nothing to choose from"
    );
}

proptest::proptest! {
    /// Any line, and any update, is read without a panic.
    #[test]
    fn any_line_reads_without_a_panic(
        sample in proptest::sample::select(vec![
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[{"content":"a","status":"pending"}]}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","locations":[{"path":"a.rs"}],"content":[{"type":"diff","path":"b.rs"}]}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn","usage":{"inputTokens":5}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":"q","method":"session/request_permission","params":{"sessionId":"s","options":[{"optionId":"a"}]}}"#.to_owned(),
        ]),
        cut in 0usize..400,
        noise in "[{}\\[\\]\",:0-9a-z .\\\\/-]{0,30}",
    ) {
        let cut = sample.len().min(cut);
        let line = format!("{}{noise}", &sample[..cut]);
        match read_line(line.as_bytes()) {
            Ok(Incoming::Notification { params, .. }) => {
                let _ = read_update(&params, "/w");
            }
            Ok(Incoming::Request { params, .. }) => {
                let _ = read_permission(&params);
            }
            Ok(Incoming::Response { result: Ok(result), .. }) => {
                let _ = read_turn_end(&result);
            }
            _ => {}
        }
    }
}
