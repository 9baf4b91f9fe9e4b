use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/codex");

/// Reads a whole rollout the way the scanner does (complete lines, `\r\n` allowed).
fn read(file_name: &str, bytes: &[u8]) -> (Vec<LogEvent>, u64) {
    read_with(CodexParser::new(file_name), bytes)
}

fn read_with(mut parser: CodexParser, bytes: &[u8]) -> (Vec<LogEvent>, u64) {
    let mut events = Vec::new();
    let mut skipped = 0;
    for line in bytes
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
    {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if parser.line(line, &mut events) == LineOutcome::Skipped {
            skipped += 1;
        }
    }
    (events, skipped)
}

fn lines(text: &str) -> (Vec<LogEvent>, u64) {
    read(
        "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
        text.as_bytes(),
    )
}

fn total_tokens(events: &[LogEvent]) -> TokenCounts {
    let mut total = TokenCounts::default();
    for event in events {
        if let LogEvent::Usage { tokens, .. } = event {
            total.add(tokens);
        }
    }
    total
}

fn files(events: &[LogEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|event| match event {
            LogEvent::FileTouched { path, .. } => Some(path.as_str()),
            _ => None,
        })
        .collect()
}

fn plans(events: &[LogEvent]) -> Vec<&Vec<TaskItem>> {
    events
        .iter()
        .filter_map(|event| match event {
            LogEvent::Tasks { tasks, .. } => Some(tasks),
            _ => None,
        })
        .collect()
}

/// What a fixture's `.expected.json` holds, computed from the events.
fn summary(events: &[LogEvent], skipped: u64) -> Value {
    let tokens = total_tokens(events);
    let mut models: Vec<&str> = Vec::new();
    let mut sidechain = false;
    let mut ids: Vec<&str> = Vec::new();
    for event in events {
        if !ids.contains(&event.session_id()) {
            ids.push(event.session_id());
        }
        if let LogEvent::Usage {
            model,
            sidechain: side,
            ..
        } = event
        {
            sidechain |= *side;
            if !models.contains(&model.as_str()) {
                models.push(model);
            }
        }
    }
    assert_eq!(ids.len(), 1, "one session per file: {ids:?}");
    let sessions: Vec<Value> = events
        .iter()
        .filter_map(|event| match event {
            LogEvent::Session { cwd, model, .. } => Some(json!({"cwd": cwd, "model": model})),
            _ => None,
        })
        .collect();
    json!({
        "session_id": ids[0],
        "skipped_lines": skipped,
        "usage_events": events.iter().filter(|e| matches!(e, LogEvent::Usage { .. })).count(),
        "tokens": {
            "input": tokens.input,
            "output": tokens.output,
            "cache_write_5m": tokens.cache_write_5m,
            "cache_read": tokens.cache_read,
        },
        "sessions": sessions,
        "files": files(events),
        "plans": plans(events),
        "sidechain": sidechain,
        "models": models,
    })
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(FIXTURES).join(name)).unwrap()
}

/// The real rollouts of `shared/fixtures/agent-logs/codex/localpush` (not copied into
/// the repository): see `crate::shared_agent_logs`.
fn real_rollouts() -> Option<PathBuf> {
    crate::shared_agent_logs("codex/localpush")
}

#[test]
fn the_lines_a_look_spares_say_nothing_when_read() {
    let mut files: Vec<(String, Vec<u8>)> = [
        "patch-forms.jsonl",
        "plan-and-patch.jsonl",
        "subagent-replay.jsonl",
        "totals-drop.jsonl",
    ]
    .iter()
    .map(|name| ((*name).to_owned(), fixture(name)))
    .collect();
    if let Some(dir) = real_rollouts() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            files.push((
                entry.path().display().to_string(),
                std::fs::read(entry.path()).unwrap(),
            ));
        }
    }
    let mut spared = 0;
    for (name, bytes) in &files {
        let read = |look: bool| {
            let mut parser = CodexParser::new(
                "rollout-2026-02-23T12-00-00-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
            );
            bytes
                .split(|&byte| byte == b'\n')
                .filter(|line| !line.is_empty())
                .map(|line| {
                    let mut events = Vec::new();
                    let spared = look && parser.says_nothing(line);
                    (parser.read_line(line, &mut events, look), events, spared)
                })
                .collect::<Vec<_>>()
        };
        let (looking, reading) = (read(true), read(false));
        spared += looking.iter().filter(|(_, _, spared)| *spared).count();
        let strip = |lines: Vec<(LineOutcome, Vec<LogEvent>, bool)>| {
            lines
                .into_iter()
                .map(|(outcome, events, _)| (outcome, events))
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(looking), strip(reading), "{name}");
    }
    assert!(spared > 0, "no line was spared: the look does nothing");
    // Only Codex's own front is trusted; an output waits while a patch does.
    assert_eq!(
        front_types(br#"{"timestamp":"2026-02-23T11:41:32.240Z","type":"response_item","payload":{"type":"reasoning","summary":[]}}"#),
        Some((b"response_item".as_slice(), b"reasoning".as_slice()))
    );
    assert_eq!(
        front_types(br#"{"type":"response_item","payload":{"type":"reasoning"}}"#),
        None
    );
    assert_eq!(
        front_types(br#"{"timestamp":"a\"b","type":"event_msg","payload":{"type":"x"}}"#),
        None
    );
}

// ------------------------------------------------------------ golden files

#[test]
fn real_rollouts_add_up_to_ccusage_totals_without_its_reemits() {
    let Some(dir) = real_rollouts() else { return };
    // ccusage 20 (`ccusage codex session --offline --json`): input is non-cached input.
    let cases = [
        (
            "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
            99_460,
            1_651_968,
            14_600,
            28,
        ),
        (
            "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
            31_013,
            3_456,
            431,
            1,
        ),
        (
            "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
            59_525,
            238_848,
            1_123,
            6,
        ),
    ];
    for (name, input, cache_read, output, requests) in cases {
        let (events, skipped) = read(name, &std::fs::read(dir.join(name)).unwrap());
        let tokens = total_tokens(&events);
        assert_eq!(
            (tokens.input, tokens.cache_read, tokens.output),
            (input, cache_read, output),
            "{name}"
        );
        assert_eq!(tokens.cache_write(), 0, "{name}");
        assert_eq!(skipped, 0, "{name}");
        let usage: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, LogEvent::Usage { .. }))
            .collect();
        assert_eq!(
            usage.len(),
            requests,
            "{name}: one event per advance of the totals"
        );
        // The localpush rollouts' call arguments are redacted: no plan, no file.
        assert!(
            files(&events).is_empty() && plans(&events).is_empty(),
            "{name}"
        );
        let thread = &name[name.len() - 42..name.len() - 6];
        for event in &events {
            assert_eq!(event.session_id(), thread, "{name}");
            if let LogEvent::Usage {
                model,
                key,
                sidechain,
                ..
            } = event
            {
                assert_eq!((model.as_str(), sidechain), ("gpt-5.3-codex", &false));
                let key = key.as_ref().expect("a total names each advance");
                assert!(key.message_id.starts_with("totals:"), "{name}");
            }
        }
        assert!(matches!(events.last(), Some(LogEvent::Usage { .. })));
    }
    // 12-41-04 in full: 1,766,028 tokens, against ccusage's 3,416,998 before its fix.
    let name = cases[0].0;
    let (events, _) = read(name, &std::fs::read(dir.join(name)).unwrap());
    assert_eq!(total_tokens(&events).total(), 1_766_028);
}

#[test]
fn project_fixtures_match_their_expected_summaries() {
    for name in [
        "plan-and-patch",
        "patch-forms",
        "totals-drop",
        "subagent-replay",
    ] {
        let bytes = fixture(&format!("{name}.jsonl"));
        let (events, skipped) = read(&format!("{name}.jsonl"), &bytes);
        let expected: Value =
            serde_json::from_slice(&fixture(&format!("{name}.expected.json"))).unwrap();
        assert_eq!(summary(&events, skipped), expected, "{name}");
    }
}

#[test]
fn a_parser_stopped_after_any_line_and_resumed_says_the_same() {
    let mut files: Vec<(String, Vec<u8>)> = [
        "plan-and-patch",
        "patch-forms",
        "totals-drop",
        "subagent-replay",
    ]
    .iter()
    .map(|name| (format!("{name}.jsonl"), fixture(&format!("{name}.jsonl"))))
    .collect();
    if let Some(dir) = real_rollouts() {
        let name = "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl";
        files.push((name.to_owned(), std::fs::read(dir.join(name)).unwrap()));
    }
    for (name, bytes) in files {
        let (whole, _) = read(&name, &bytes);
        let all: Vec<&[u8]> = bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        for stop in 0..=all.len() {
            let mut parser = CodexParser::new(&name);
            let mut events = Vec::new();
            for line in &all[..stop] {
                parser.line(line, &mut events);
            }
            let saved = serde_json::to_string(&parser).unwrap();
            let mut resumed: CodexParser = serde_json::from_str(&saved).unwrap();
            assert_eq!(resumed, parser);
            for line in &all[stop..] {
                resumed.line(line, &mut events);
            }
            assert_eq!(events, whole, "{name}, stopped after {stop} lines");
        }
    }
}

// ------------------------------------------------------------ reading lines

#[test]
fn lines_are_read_as_json_in_any_order_spacing_and_escaping() {
    let lines_read = [
        r#"{"timestamp":"2026-02-23T12:00:00Z","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5.3-codex"}}"#,
        // payload first, spaces, an escaped key and escaped values.
        r#"  { "payload" : { "info" : { "total_token_usage" : { "output_tokens" : 5 , "input_tokens" : 100 , "cached_input_tokens" : 40 } } , "type" : "token\u005fcount" } , "type" : "event_msg" , "timestamp" : "2026-02-23T12:00:01Z" }  "#,
        "{\"type\":\"event_msg\",\"payload\":{\"type\":\"token_count\",\"info\":{\"total_token_usage\":{\"input_tokens\":150,\"cached_input_tokens\":40,\"output_tokens\":9}}}}\t",
    ];
    let (events, skipped) = lines(&lines_read.join("\n"));
    assert_eq!(skipped, 0);
    assert_eq!(
        total_tokens(&events),
        TokenCounts {
            input: 110,
            output: 9,
            cache_read: 40,
            ..TokenCounts::default()
        }
    );
    assert!(matches!(
        &events[1],
        LogEvent::Usage {
            at_ms: Some(1_771_848_001_000),
            ..
        }
    ));
}

#[test]
fn what_is_not_a_json_object_is_skipped_and_never_panics() {
    let deep_array = "[".repeat(100_000) + &"]".repeat(100_000);
    let deep_object = "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000);
    let deep_in_payload = format!(
        "{{\"type\":\"turn_context\",\"payload\":{{\"cwd\":{}1{}}}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep_in_ignored = format!(
        "{{\"type\":\"x\",\"extra\":{}1{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let huge_string = format!(
        "{{\"type\":\"response_item\",\"payload\":{{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"{}\"}}}}",
        "x\\n".repeat(4_000_000)
    );
    let huge_garbage = "{\"type\":".to_owned() + &"x".repeat(10_000_000);
    let cases: Vec<(&str, Vec<u8>, LineOutcome)> = vec![
        ("garbage", b"not json at all".to_vec(), LineOutcome::Skipped),
        (
            "truncated",
            br#"{"type":"event_msg","payload":{"ty"#.to_vec(),
            LineOutcome::Skipped,
        ),
        (
            "invalid UTF-8",
            b"{\"type\":\"event_msg\",\"x\":\"\xff\xfe\"}".to_vec(),
            LineOutcome::Skipped,
        ),
        ("an array", b"[1,2,3]".to_vec(), LineOutcome::Skipped),
        (
            "a struct as an array",
            br#"["2026-02-23T12:00:00Z","event_msg",{}]"#.to_vec(),
            LineOutcome::Skipped,
        ),
        ("a number", b"42".to_vec(), LineOutcome::Skipped),
        (
            "a string",
            b"\"token_count\"".to_vec(),
            LineOutcome::Skipped,
        ),
        ("null", b"null".to_vec(), LineOutcome::Skipped),
        ("two objects", b"{} {}".to_vec(), LineOutcome::Skipped),
        (
            "100,000-deep arrays",
            deep_array.into_bytes(),
            LineOutcome::Skipped,
        ),
        // A JSON object however deep: read (its depth costs no recursion), saying nothing.
        (
            "100,000-deep objects",
            deep_object.into_bytes(),
            LineOutcome::Read,
        ),
        (
            "10 MB of garbage",
            huge_garbage.into_bytes(),
            LineOutcome::Skipped,
        ),
        ("an empty object", b"{}".to_vec(), LineOutcome::Read),
        (
            "an unknown record",
            br#"{"type":"compacted","payload":{"message":"..."}}"#.to_vec(),
            LineOutcome::Read,
        ),
        (
            "a payload of another type",
            br#"{"type":"event_msg","payload":"token_count"}"#.to_vec(),
            LineOutcome::Read,
        ),
        (
            "fields of other types",
            br#"{"type":7,"timestamp":[],"payload":{"type":{"a":1},"info":"x"}}"#.to_vec(),
            LineOutcome::Read,
        ),
        (
            "a key twice",
            br#"{"type":"event_msg","type":"turn_context"}"#.to_vec(),
            LineOutcome::Read,
        ),
        (
            "deep arrays in an ignored field",
            deep_in_ignored.into_bytes(),
            LineOutcome::Read,
        ),
        (
            "deep arrays where a string was expected",
            deep_in_payload.into_bytes(),
            LineOutcome::Read,
        ),
        ("a 12 MB line", huge_string.into_bytes(), LineOutcome::Read),
    ];
    for (what, line, expected) in cases {
        let mut parser = CodexParser::new("rollout-x.jsonl");
        let mut events = Vec::new();
        assert_eq!(parser.line(&line, &mut events), expected, "{what}");
        assert!(events.is_empty(), "{what}");
    }
}

// ------------------------------------------------------------ the session

#[test]
fn the_session_id_comes_from_session_meta_else_the_file_name() {
    let meta = r#"{"type":"session_meta","payload":{"id":"019c8a70-dda7-7f33-98ea-f30553347322","cwd":"/w"}}"#;
    let count = r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"output_tokens":1}}}}"#;
    let cases = [
        (
            "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
            format!("{meta}\n{count}"),
            "019c8a70-dda7-7f33-98ea-f30553347322",
        ),
        (
            "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
            count.to_owned(),
            "019c8a4d-8f45-7010-8b5d-7fad920aa6f9",
        ),
        (
            "/home/dev/.codex/sessions/2026/02/23/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
            count.to_owned(),
            "019c8a4d-8f45-7010-8b5d-7fad920aa6f9",
        ),
        ("odd-name.jsonl", count.to_owned(), "odd-name"),
        // An event said before a late session_meta fixed the id: it stays.
        (
            "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
            format!("{count}\n{meta}"),
            "019c8a4d-8f45-7010-8b5d-7fad920aa6f9",
        ),
    ];
    for (file_name, text, expected) in cases {
        let (events, _) = read(file_name, text.as_bytes());
        assert!(!events.is_empty());
        for event in &events {
            assert_eq!(event.session_id(), expected, "{file_name}: {text}");
        }
    }
}

#[test]
fn the_session_is_announced_when_its_cwd_or_model_is_first_known_or_changes() {
    let text = [
        r#"{"timestamp":"2026-02-23T12:00:00Z","type":"session_meta","payload":{"id":"s","cwd":"/a"}}"#,
        r#"{"type":"turn_context","payload":{"cwd":"/a","collaboration_mode":{"mode":"default","settings":{"model":"gpt-5.2-codex"}}}}"#,
        r#"{"type":"turn_context","payload":{"cwd":"/a","model":"gpt-5.2-codex"}}"#,
        r#"{"type":"turn_context","payload":{"cwd":"/b","model":"gpt-5.2-codex"}}"#,
        r#"{"type":"event_msg","payload":{"type":"token_count","info":{"model":"gpt-5.4","total_token_usage":{"input_tokens":1}}}}"#,
        r#"{"type":"turn_context","payload":{"cwd":"/b"}}"#,
    ]
    .join("\n");
    let (events, _) = lines(&text);
    let announced: Vec<(Option<&str>, Option<&str>)> = events
        .iter()
        .filter_map(|event| match event {
            LogEvent::Session { cwd, model, .. } => Some((cwd.as_deref(), model.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(
        announced,
        [
            (Some("/a"), None),
            (Some("/a"), Some("gpt-5.2-codex")),
            (Some("/b"), Some("gpt-5.2-codex")),
            (Some("/b"), Some("gpt-5.4")),
        ]
    );
    assert!(matches!(
        &events[0],
        LogEvent::Session {
            at_ms: Some(1_771_848_000_000),
            ..
        }
    ));
    assert!(matches!(&events[4], LogEvent::Usage { model, .. } if model == "gpt-5.4"));
}

// ------------------------------------------------------------ tokens

fn count(total: [u64; 3], last: Option<[u64; 3]>) -> String {
    let usage = |[input, cached, output]: [u64; 3]| {
        json!({"input_tokens": input, "cached_input_tokens": cached, "output_tokens": output,
               "reasoning_output_tokens": 0, "total_tokens": input + output})
    };
    let mut info = json!({"total_token_usage": usage(total), "model_context_window": 258_400});
    if let Some(last) = last {
        info["last_token_usage"] = usage(last);
    }
    json!({"timestamp": "2026-02-23T12:00:00Z", "type": "event_msg",
           "payload": {"type": "token_count", "info": info, "rate_limits": {"primary": null}}})
    .to_string()
}

fn spent(events: &[LogEvent]) -> Vec<[u64; 3]> {
    events
        .iter()
        .filter_map(|event| match event {
            LogEvent::Usage { tokens, .. } => {
                Some([tokens.input, tokens.cache_read, tokens.output])
            }
            _ => None,
        })
        .collect()
}

#[test]
fn token_totals_count_once_per_advance() {
    let null_info =
        r#"{"type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{}}}"#;
    type Case = (&'static str, Vec<String>, Vec<[u64; 3]>);
    let cases: Vec<Case> = vec![
        (
            "the first count is a delta from zero",
            vec![count([100, 30, 5], Some([60, 10, 2]))],
            vec![[70, 30, 5]],
        ),
        (
            "info: null says nothing",
            vec![
                null_info.to_owned(),
                count([100, 30, 5], None),
                null_info.to_owned(),
            ],
            vec![[70, 30, 5]],
        ),
        (
            "re-emitted totals are skipped",
            vec![
                count([100, 30, 5], None),
                count([100, 30, 5], None),
                count([250, 130, 9], None),
                count([250, 130, 9], None),
            ],
            vec![[70, 30, 5], [50, 100, 4]],
        ),
        (
            "totals that drop count last_token_usage",
            vec![
                count([1000, 800, 50], None),
                count([120, 20, 7], Some([120, 20, 7])),
                count([300, 150, 10], None),
            ],
            vec![[200, 800, 50], [100, 20, 7], [50, 130, 3]],
        ),
        (
            "a drop without last_token_usage counts the totals",
            vec![count([1000, 800, 50], None), count([120, 20, 7], None)],
            vec![[200, 800, 50], [100, 20, 7]],
        ),
        (
            "a drop in one field alone is a reset",
            vec![
                count([1000, 800, 50], None),
                count([1100, 700, 60], Some([100, 0, 10])),
            ],
            vec![[200, 800, 50], [100, 0, 10]],
        ),
        (
            "cached above input never makes input negative",
            vec![count([10, 40, 1], None)],
            vec![[0, 10, 1]],
        ),
    ];
    for (what, counts, expected) in cases {
        let (events, skipped) = lines(&counts.join("\n"));
        assert_eq!(skipped, 0, "{what}");
        assert_eq!(spent(&events), expected, "{what}");
        for event in &events {
            if let LogEvent::Usage { key, model, .. } = event {
                assert_eq!(model, "gpt-5", "{what}: ccusage's model");
                assert!(
                    key.as_ref()
                        .is_some_and(|key| key.message_id.starts_with("totals:")),
                    "{what}: named by the totals"
                );
            }
        }
    }
}

#[test]
fn the_service_tier_in_force_bills_each_request_and_a_copy_counts_once() {
    let settings = |tier: Option<&str>| {
        let mut settings = serde_json::json!({"model": "gpt-5.5", "model_provider_id": "openai"});
        if let Some(tier) = tier {
            settings["service_tier"] = serde_json::json!(tier);
        }
        serde_json::json!({"timestamp": "2026-12-02T02:56:39.211Z", "type": "event_msg",
            "payload": {"type": "thread_settings_applied", "thread_id": "t", "thread_settings": settings}})
        .to_string()
    };
    let count = |input: u64| {
        format!(
            r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"output_tokens":1}}}}}}}}"#
        )
    };
    let rollout = [
        settings(Some("priority")),
        count(100),
        settings(None),
        count(300),
        settings(Some("default")),
        count(600),
    ]
    .join("\n");
    let (events, skipped) = lines(&rollout);
    assert_eq!(skipped, 0);
    let tiers: Vec<Option<String>> = events
        .iter()
        .filter_map(|event| match event {
            LogEvent::Usage { billing, .. } => Some(billing.service_tier.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(tiers, [Some("priority".to_owned()), None, None]);
    assert!(events.iter().any(|event| matches!(
        event,
        LogEvent::Session { model: Some(model), .. } if model == "gpt-5.5"
    )));
    // The same rollout twice (archived beside its original): its requests count once.
    let mut summary = crate::work::summary::Summary::default();
    for _ in 0..2 {
        for event in lines(&rollout).0 {
            summary.add(crate::log_events::Framework::Codex, event);
        }
    }
    let total: u64 = summary
        .sessions
        .values()
        .map(|session| {
            session
                .tokens_by_model()
                .values()
                .map(TokenCounts::total)
                .sum::<u64>()
        })
        .sum();
    assert_eq!(total, 601, "100 + 1, then 200, then 300: once");
}

#[test]
fn cache_writes_are_input_written_to_the_cache() {
    let line = r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"cached_input_tokens":600,"cache_write_input_tokens":300,"output_tokens":50,"reasoning_output_tokens":20}}}}"#;
    let (events, _) = lines(line);
    assert_eq!(
        total_tokens(&events),
        TokenCounts {
            input: 100,
            output: 50,
            cache_write_5m: 300,
            cache_write_1h: 0,
            cache_read: 600
        }
    );
}

// ------------------------------------------------------------ forks and subagents

/// A child thread: its own id, then a replayed parent turn, then `own_turn`.
fn child(meta_payload: Value, own_turn: &str) -> String {
    let meta = json!({"timestamp": "2026-05-05T21:51:57.991Z", "type": "session_meta", "payload": meta_payload});
    [
        meta.to_string(),
        r#"{"type":"session_meta","payload":{"id":"019c8a4d-0000-7000-8000-000000000001","cwd":"/parent","source":"vscode"}}"#.to_owned(),
        r#"{"type":"event_msg","payload":{"type":"task_started","turn_id":"019c8a4d-0001-7000-8000-000000000002"}}"#.to_owned(),
        r#"{"type":"turn_context","payload":{"turn_id":"019c8a4d-0001-7000-8000-000000000002","cwd":"/parent","model":"gpt-5.5"}}"#.to_owned(),
        count([116_000, 114_000, 1000], Some([73_000, 72_000, 500])),
        r#"{"type":"response_item","payload":{"type":"function_call","name":"update_plan","call_id":"p","arguments":"{\"plan\":[{\"step\":\"Parent's\",\"status\":\"pending\"}]}"}}"#.to_owned(),
        r#"{"type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","call_id":"a","input":"*** Begin Patch\n*** Add File: parent.txt\n+x\n*** End Patch"}}"#.to_owned(),
        r#"{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"a","output":"Exit code: 0\nOutput:\nSuccess."}}"#.to_owned(),
        own_turn.to_owned(),
        count([116_000, 114_000, 1000], Some([73_000, 72_000, 500])),
        count([117_500, 115_000, 1200], Some([1500, 1000, 200])),
    ]
    .join("\n")
}

#[test]
fn a_child_thread_counts_nothing_of_its_parents_replay() {
    let spawned = json!({"id": "019c8a4d-8f45-7010-8b5d-7fad920aa6f9", "cwd": "/child",
        "source": {"subagent": {"thread_spawn": {"parent_thread_id": "019c8a4d-0000-7000-8000-000000000001", "depth": 1}}}});
    let forked = json!({"id": "019c8a4d-8f45-7010-8b5d-7fad920aa6f9", "cwd": "/child",
        "forked_from_id": "019c8a4d-0000-7000-8000-000000000001", "source": "vscode"});
    let own_context = r#"{"type":"turn_context","payload":{"turn_id":"019c8a4d-8f46-7000-8000-000000000003","cwd":"/child","model":"gpt-5.5-mini"}}"#;
    let own_start = r#"{"type":"event_msg","payload":{"type":"task_started","turn_id":"019c8a4d-8f45-7000-8000-000000000003"}}"#;
    let cases = [
        (
            "spawned, own turn_context",
            spawned.clone(),
            own_context,
            true,
        ),
        (
            "spawned, own task_started (same millisecond)",
            spawned.clone(),
            own_start,
            true,
        ),
        ("user fork", forked, own_context, false),
    ];
    for (what, meta, own, is_subagent) in cases {
        let (events, _) = lines(&child(meta, own));
        assert_eq!(spent(&events), [[500, 1000, 200]], "{what}");
        assert!(
            plans(&events).is_empty() && files(&events).is_empty(),
            "{what}"
        );
        for event in &events {
            assert_eq!(
                event.session_id(),
                "019c8a4d-8f45-7010-8b5d-7fad920aa6f9",
                "{what}"
            );
            match event {
                LogEvent::Session { cwd, .. } => {
                    assert_eq!(cwd.as_deref(), Some("/child"), "{what}")
                }
                LogEvent::Usage { sidechain, .. } => {
                    assert_eq!(*sidechain, is_subagent, "{what}")
                }
                _ => {}
            }
        }
    }
}

#[test]
fn without_uuid_v7_ids_the_first_turn_ends_a_replay() {
    let meta = json!({"id": "child-thread", "forked_from_id": "parent-thread"});
    let text = [
        json!({"type": "session_meta", "payload": meta}).to_string(),
        count([1000, 0, 100], None),
        r#"{"type":"turn_context","payload":{"model":"gpt-5.5","cwd":"/c"}}"#.to_owned(),
        count([1000, 0, 100], None),
        count([1010, 0, 102], None),
    ]
    .join("\n");
    let (events, _) = lines(&text);
    assert_eq!(spent(&events), [[10, 0, 2]]);
}

// ------------------------------------------------------------ plans

#[test]
fn each_update_plan_replaces_the_task_list_when_codex_would_accept_it() {
    let call = |kind: &str, field: &str, arguments: &str| {
        json!({"type": "response_item", "payload": {"type": kind, "name": "update_plan", "call_id": "c", field: arguments}})
            .to_string()
    };
    let valid = r#"{"explanation":"why","plan":[{"step":"Parse","status":"completed"},{"step":"Render","status":"in_progress"},{"step":"Ship","status":"pending"}]}"#;
    let expected = vec![
        TaskItem {
            id: None,
            title: "Parse".into(),
            status: TaskStatus::Completed,
            active_form: None,
        },
        TaskItem {
            id: None,
            title: "Render".into(),
            status: TaskStatus::InProgress,
            active_form: None,
        },
        TaskItem {
            id: None,
            title: "Ship".into(),
            status: TaskStatus::Pending,
            active_form: None,
        },
    ];
    let cases: Vec<(&str, String, Option<Vec<TaskItem>>)> = vec![
        ("function_call arguments", call("function_call", "arguments", valid), Some(expected.clone())),
        ("custom_tool_call input", call("custom_tool_call", "input", valid), Some(expected)),
        ("an empty plan", call("function_call", "arguments", r#"{"plan":[]}"#), Some(vec![])),
        ("arguments that are not JSON", call("function_call", "arguments", "{\"plan\":[{"), None),
        ("no plan", call("function_call", "arguments", r#"{"explanation":"x"}"#), None),
        ("a status Codex rejects", call("function_call", "arguments", r#"{"plan":[{"step":"A","status":"blocked"}]}"#), None),
        ("a step without its status", call("function_call", "arguments", r#"{"plan":[{"step":"A"}]}"#), None),
        ("arguments as an object", json!({"type": "response_item", "payload": {"type": "function_call", "name": "update_plan", "arguments": {"plan": []}}}).to_string(), None),
    ];
    for (what, line, expected) in cases {
        let (events, skipped) = lines(&line);
        assert_eq!(skipped, 0, "{what}");
        let found: Vec<Vec<TaskItem>> = plans(&events).into_iter().cloned().collect();
        assert_eq!(found, expected.into_iter().collect::<Vec<_>>(), "{what}");
        for event in &events {
            if let LogEvent::Tasks { lane, source, .. } = event {
                assert_eq!((lane, source.as_str()), (&None, "update_plan"), "{what}");
            }
        }
    }
}

// ------------------------------------------------------------ files

/// A call and its output (when given), after a turn in `/home/dev/app`.
fn patch_exchange(call: Value, output: Option<Value>) -> Vec<String> {
    let context =
        r#"{"type":"turn_context","payload":{"cwd":"/home/dev/app","model":"gpt-5.3-codex"}}"#;
    let mut text = vec![
        context.to_owned(),
        json!({"type": "response_item", "payload": call}).to_string(),
    ];
    if let Some(output) = output {
        text.push(json!({"type": "response_item", "payload": output}).to_string());
    }
    let (events, skipped) = lines(&text.join("\n"));
    assert_eq!(skipped, 0);
    files(&events).into_iter().map(str::to_owned).collect()
}

#[test]
fn patched_files_are_reported_when_the_patch_succeeded() {
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: src/b.rs\n*** Move to: src/c.rs\n@@\n-y\n+z\n*** Delete File: ./old/../d.txt\n*** End Patch";
    let all = [
        "/home/dev/app/a.txt",
        "/home/dev/app/src/b.rs",
        "/home/dev/app/src/c.rs",
        "/home/dev/app/d.txt",
    ];
    let custom =
        json!({"type": "custom_tool_call", "name": "apply_patch", "call_id": "c1", "input": patch});
    let function = json!({"type": "function_call", "name": "apply_patch", "call_id": "c1",
                          "arguments": json!({"input": patch}).to_string()});
    let output =
        |kind: &str, output: Value| json!({"type": kind, "call_id": "c1", "output": output});
    let custom_output = |text: &str| Some(output("custom_tool_call_output", json!(text)));
    let cases: Vec<(&str, Value, Option<Value>, bool)> = vec![
        ("freeform, exit code 0", custom.clone(), custom_output("Exit code: 0\nWall time: 0.1 seconds\nOutput:\nSuccess. Updated the following files:\nA a.txt\n"), true),
        ("freeform, exit code 1", custom.clone(), custom_output("Exit code: 1\nWall time: 0.1 seconds\nOutput:\nerror: no such file\n"), false),
        ("verification failed", custom.clone(), custom_output("apply_patch verification failed: Failed to find expected lines in /home/dev/app/src/b.rs"), false),
        ("rejected", custom.clone(), custom_output("patch rejected: writing outside of the project; rejected by user approval settings"), false),
        ("aborted", custom.clone(), custom_output("aborted"), false),
        ("a bare success", custom.clone(), custom_output("Success. Updated the following files:\nA a.txt"), true),
        ("no output yet", custom.clone(), None, false),
        ("an output for another call", custom.clone(), Some(json!({"type": "custom_tool_call_output", "call_id": "other", "output": "Success."})), false),
        ("function, JSON output, exit 0", function.clone(), Some(output("function_call_output", json!(json!({"output": "Success.", "metadata": {"exit_code": 0, "duration_seconds": 0.1}}).to_string()))), true),
        ("function, JSON output, exit 1", function.clone(), Some(output("function_call_output", json!(json!({"output": "Success.", "metadata": {"exit_code": 1}}).to_string()))), false),
        ("function, success: false", function.clone(), Some(output("function_call_output", json!({"content": "Success.", "success": false}))), false),
        ("function, content items", function.clone(), Some(output("function_call_output", json!([{"type": "input_text", "text": "Exit code: 0\nOutput:\nSuccess."}]))), true),
        ("function, content items that failed", function.clone(), Some(output("function_call_output", json!([{"type": "input_text", "text": "Exit code: 2\nOutput:\n"}]))), false),
        ("unified exec, exited 0", function.clone(), Some(output("function_call_output", json!("Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nSuccess."))), true),
        ("unified exec, still running", function.clone(), Some(output("function_call_output", json!("Process running with session ID 7\nOutput:\n"))), false),
        ("function, arguments {patch}", json!({"type": "function_call", "name": "apply_patch", "call_id": "c1", "arguments": json!({"patch": patch}).to_string()}), custom_output("Exit code: 0\nOutput:\n"), true),
    ];
    for (what, call, output, reported) in cases {
        let expected: Vec<&str> = if reported { all.to_vec() } else { vec![] };
        assert_eq!(patch_exchange(call, output), expected, "{what}");
    }
}

#[test]
fn patches_run_through_a_shell_are_read_with_their_working_directory() {
    let patch = "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\n";
    let heredoc = format!("apply_patch <<'EOF'\n{patch}EOF\n");
    let call = |name: &str, arguments: Value| json!({"type": "function_call", "name": name, "call_id": "s1", "arguments": arguments.to_string()});
    let ok = Some(json!({"type": "function_call_output", "call_id": "s1",
                         "output": json!({"output": "Success.", "metadata": {"exit_code": 0}}).to_string()}));
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "shell argv",
            call("shell", json!({"command": ["apply_patch", patch]})),
            vec!["/home/dev/app/x.txt"],
        ),
        (
            "shell argv with workdir",
            call(
                "shell",
                json!({"command": ["apply_patch", patch], "workdir": "sub"}),
            ),
            vec!["/home/dev/app/sub/x.txt"],
        ),
        (
            "bash -lc heredoc",
            call(
                "shell",
                json!({"command": ["bash", "-lc", heredoc], "workdir": "/srv"}),
            ),
            vec!["/srv/x.txt"],
        ),
        (
            "shell_command with cd",
            call(
                "shell_command",
                json!({"command": format!("cd 'web' && {heredoc}")}),
            ),
            vec!["/home/dev/app/web/x.txt"],
        ),
        (
            "exec_command cmd",
            call(
                "exec_command",
                json!({"cmd": heredoc, "workdir": "/home/dev/app/../lib"}),
            ),
            vec!["/home/dev/lib/x.txt"],
        ),
        (
            "a command that only mentions a patch",
            call(
                "exec_command",
                json!({"cmd": format!("cat <<'EOF'\n{patch}EOF")}),
            ),
            vec![],
        ),
        (
            "a plain command",
            call("exec_command", json!({"cmd": "ls"})),
            vec![],
        ),
        (
            "a tool of another name",
            call("read_file", json!({"cmd": heredoc})),
            vec![],
        ),
    ];
    for (what, call, expected) in cases {
        assert_eq!(patch_exchange(call, ok.clone()), expected, "{what}");
    }
}

#[test]
fn patch_headers_name_the_files_once_each() {
    let patch = "*** Begin Patch\n*** Update File: a.rs\n@@\n *** Add File: context.rs\n-*** Delete File: removed-line.rs\n+x\n*** Update File: a.rs\n*** Move to: b.rs\r\n*** Add File:   \n*** End Patch";
    assert_eq!(patch_paths(patch, Some("/w")), ["/w/a.rs", "/w/b.rs"]);
}

#[test]
fn calls_waiting_for_their_output_are_bounded() {
    let mut parser = CodexParser::new("rollout-x.jsonl");
    let mut events = Vec::new();
    for n in 0..1000 {
        let call = json!({"type": "response_item", "payload": {"type": "custom_tool_call", "name": "apply_patch",
            "call_id": format!("c{n}"), "input": "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch"}});
        parser.line(call.to_string().as_bytes(), &mut events);
    }
    assert_eq!(parser.pending_patches.len(), MAX_PENDING_PATCHES);
    assert_eq!(
        parser.pending_patches[0].call_id,
        format!("c{}", 1000 - MAX_PENDING_PATCHES)
    );
}

// ------------------------------------------------------------ properties

/// Lines of a real-shaped rollout (the project fixtures), to cut and mutate.
fn fixture_lines() -> Vec<Vec<u8>> {
    [
        "plan-and-patch",
        "patch-forms",
        "totals-drop",
        "subagent-replay",
    ]
    .iter()
    .flat_map(|name| {
        fixture(&format!("{name}.jsonl"))
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect::<Vec<_>>()
    })
    .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_bytes_are_read_or_skipped_without_a_panic(lines in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..20)) {
        let mut parser = CodexParser::new("rollout-x.jsonl");
        let mut events = Vec::new();
        for line in &lines {
            parser.line(line, &mut events);
        }
    }

    #[test]
    fn cut_or_mutated_real_lines_never_panic(index in 0usize..1000, cut in 0usize..4000, flip in 0usize..4000, byte in any::<u8>()) {
        let all = fixture_lines();
        let mut line = all[index % all.len()].clone();
        if !line.is_empty() {
            let at = flip % line.len();
            line[at] = byte;
            line.truncate(cut.max(1).min(line.len()));
        }
        let mut parser = CodexParser::new("rollout-x.jsonl");
        let mut events = Vec::new();
        for earlier in all.iter().take(index % all.len()) {
            parser.line(earlier, &mut events);
        }
        parser.line(&line, &mut events);
    }
}
