//! Gemini CLI chats (`~/.gemini/tmp/<project hash>/chats/`), read whole into [`LogEvent`]s.
//! Two layouts:
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
//! model is the last message's; a subagent's chat (`kind: "subagent"`) reports its usage as a
//! side chain.

use std::collections::HashMap;

use serde::Deserialize;

use super::events::{Billing, LogEvent, RequestKey, TokenCounts};
use super::lenient::{Lenient, LenientCount, LenientList, LenientStr, opens_object, timestamp_ms};

/// What a chat file says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeminiChat {
    pub events: Vec<LogEvent>,
    /// Lines (or, for a `.json` document, the whole file) that were not a JSON object.
    pub skipped_lines: u64,
}

/// Parses a whole Gemini CLI chat file (`session-*.json`, one JSON document; or `*.jsonl`,
/// one message per line where a repeated message id replaces the earlier one). Pure.
pub fn parse_chat(bytes: &[u8], file_name: &str) -> GeminiChat {
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
        events: chat.events(file_name),
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
        let message = Message {
            id: record.id.into_owned(),
            is_gemini: record.message_type.is("gemini"),
            model: record.model.into_owned(),
            tokens: record.tokens.0.map(|tokens| tokens.counts()),
            at_ms: record.timestamp.0.as_deref().and_then(timestamp_ms),
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

    fn events(self, file_name: &str) -> Vec<LogEvent> {
        let session_id = self.session_id.unwrap_or_else(|| {
            let name = file_name.rsplit(['/', '\\']).next().unwrap_or(file_name);
            let stem = name.strip_suffix(".jsonl").or(name.strip_suffix(".json"));
            stem.unwrap_or(name).to_owned()
        });
        let mut events = Vec::new();
        let model = self
            .messages
            .iter()
            .rev()
            .find_map(|message| message.model.clone());
        if model.is_some() || self.start_ms.is_some() {
            events.push(LogEvent::Session {
                session_id: session_id.clone(),
                cwd: None,
                model: model.clone(),
                at_ms: self.start_ms,
            });
        }
        let mut last_model = None;
        for message in self.messages {
            if message.model.is_some() {
                last_model = message.model.clone();
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
                sidechain: self.subagent,
                model: message
                    .model
                    .or_else(|| last_model.clone())
                    .unwrap_or_else(|| "unknown".to_owned()),
                tokens,
                billing: Billing::default(),
                at_ms: message.at_ms,
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
