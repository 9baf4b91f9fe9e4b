use super::*;

#[test]
fn claude_hooks_parse_from_their_real_payloads() {
    let start = br#"{"session_id":"c45af7b1-cb7c","transcript_path":"/root/.claude/projects/-w/c45.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup"}"#;
    assert_eq!(
        parse(AgentCli::Claude, start, None).unwrap(),
        HookEvent::SessionStarted {
            session_id: "c45af7b1-cb7c".into(),
            transcript: Some("/root/.claude/projects/-w/c45.jsonl".into()),
            cwd: Some("/w".into()),
            source: Some("startup".into()),
        }
    );
    // The event may come from the command line instead.
    let stop =
        br#"{"session_id":"s","cwd":"/w","stop_hook_active":true,"transcript_path":"/t.jsonl"}"#;
    assert_eq!(
        parse(AgentCli::Claude, stop, Some("Stop")).unwrap(),
        HookEvent::TurnEnded {
            session_id: "s".into(),
            transcript: Some("/t.jsonl".into()),
            active: true
        }
    );
    let permission = br#"{"hook_event_name":"PermissionRequest","session_id":"s","tool_name":"Bash","tool_input":{"command":"rm -rf target"}}"#;
    let HookEvent::PermissionRequest { tool, input, .. } =
        parse(AgentCli::Claude, permission, None).unwrap()
    else {
        panic!()
    };
    assert_eq!(describe_call(&tool, &input), "Bash: rm -rf target");
    let post = br#"{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Bash","tool_input":{},"tool_response":{"stdout":"hi"}}"#;
    assert_eq!(
        parse(AgentCli::Claude, post, None).unwrap(),
        HookEvent::ToolDone {
            session_id: "s".into()
        }
    );
    assert_eq!(
        parse(
            AgentCli::Claude,
            br#"{"hook_event_name":"PreCompact"}"#,
            None
        )
        .unwrap(),
        HookEvent::Other("PreCompact".into())
    );
    assert!(matches!(
        parse(AgentCli::Claude, b"not json", None),
        Err(HookError::NotJson(_))
    ));
}

#[test]
fn codex_and_gemini_name_the_same_moments_their_own_way() {
    let codex_stop = br#"{"session_id":"t1","transcript_path":"/c/rollout.jsonl","cwd":"/w","hook_event_name":"Stop","model":"gpt-5.5","permission_mode":"default","turn_id":"u1","stop_hook_active":false,"last_assistant_message":"done"}"#;
    assert!(matches!(
        parse(AgentCli::Codex, codex_stop, None).unwrap(),
        HookEvent::TurnEnded { session_id, .. } if session_id == "t1"
    ));
    let after_agent = br#"{"session_id":"g1","transcript_path":"/g/chat.jsonl","cwd":"/w","hook_event_name":"AfterAgent","timestamp":"2026-12-02T03:00:00Z","prompt":"hi","prompt_response":"ok","stop_hook_active":false}"#;
    assert!(matches!(
        parse(AgentCli::Gemini, after_agent, None).unwrap(),
        HookEvent::TurnEnded { session_id, .. } if session_id == "g1"
    ));
    let before_agent = br#"{"session_id":"g1","hook_event_name":"BeforeAgent","prompt":"hi"}"#;
    assert!(matches!(
        parse(AgentCli::Gemini, before_agent, None).unwrap(),
        HookEvent::PromptSubmitted { .. }
    ));
    let after_tool = br#"{"session_id":"g1","hook_event_name":"AfterTool","tool_name":"write_file","tool_input":{},"tool_response":{"llmContent":"ok"}}"#;
    assert!(matches!(
        parse(AgentCli::Gemini, after_tool, None).unwrap(),
        HookEvent::ToolDone { .. }
    ));
    // A name of one CLI means nothing in another's input.
    assert!(matches!(
        parse(AgentCli::Gemini, br#"{"hook_event_name":"Stop"}"#, None).unwrap(),
        HookEvent::Other(_)
    ));
}

#[test]
fn copilot_hooks_parse_from_their_real_payloads_with_the_event_from_the_command_line() {
    // GitHub Copilot CLI 1.0.102's camelCase payloads, which name no event.
    let start = br#"{"sessionId":"b07144cc-1074","timestamp":1796578729802,"cwd":"/p","source":"new","initialPrompt":"go"}"#;
    assert_eq!(
        parse(AgentCli::Copilot, start, Some("sessionStart")).unwrap(),
        HookEvent::SessionStarted {
            session_id: "b07144cc-1074".into(),
            transcript: None,
            cwd: Some("/p".into()),
            source: Some("new".into()),
        }
    );
    let prompt = br#"{"sessionId":"s","timestamp":1796578730092,"cwd":"/p","prompt":"go"}"#;
    assert_eq!(
        parse(AgentCli::Copilot, prompt, Some("userPromptSubmitted")).unwrap(),
        HookEvent::PromptSubmitted {
            session_id: "s".into()
        }
    );
    let post = br#"{"sessionId":"s","timestamp":1,"cwd":"/p","toolName":"bash","toolArgs":{"command":"echo hi"},"toolResult":{"resultType":"success","textResultForLlm":"hi"}}"#;
    assert_eq!(
        parse(AgentCli::Copilot, post, Some("postToolUse")).unwrap(),
        HookEvent::ToolDone {
            session_id: "s".into()
        }
    );
    let permission = br#"{"hookName":"permissionRequest","sessionId":"s","timestamp":1,"cwd":"/p","toolName":"edit","toolInput":{"path":"/p/a.rs","old_str":"a","new_str":"b"},"permissionSuggestions":[]}"#;
    let HookEvent::PermissionRequest { tool, input, .. } =
        parse(AgentCli::Copilot, permission, Some("permissionRequest")).unwrap()
    else {
        panic!()
    };
    assert_eq!(describe_call(&tool, &input), "edit: /p/a.rs");
    // Some versions send the arguments as JSON in a string.
    let stringly = br#"{"sessionId":"s","toolName":"bash","toolInput":"{\"command\":\"ls\"}"}"#;
    let HookEvent::PermissionRequest { tool, input, .. } =
        parse(AgentCli::Copilot, stringly, Some("permissionRequest")).unwrap()
    else {
        panic!()
    };
    assert_eq!(describe_call(&tool, &input), "bash: ls");
    let stop = br#"{"sessionId":"s","timestamp":1,"cwd":"/p","transcriptPath":"/h/.copilot/session-state/s/events.jsonl","stopReason":"end_turn","stop_hook_active":true}"#;
    assert_eq!(
        parse(AgentCli::Copilot, stop, Some("agentStop")).unwrap(),
        HookEvent::TurnEnded {
            session_id: "s".into(),
            transcript: Some("/h/.copilot/session-state/s/events.jsonl".into()),
            active: true,
        }
    );
    // Its PascalCase hooks name their event, as Claude Code's do.
    let pascal = br#"{"hook_event_name":"Stop","session_id":"s","stop_hook_active":false}"#;
    assert!(matches!(
        parse(AgentCli::Copilot, pascal, None).unwrap(),
        HookEvent::TurnEnded { .. }
    ));
    assert!(matches!(
        parse(
            AgentCli::Copilot,
            br#"{"sessionId":"s"}"#,
            Some("sessionEnd")
        )
        .unwrap(),
        HookEvent::Other(_)
    ));
    // Its answers are flat.
    let context: Value = serde_json::from_str(
        &HookReply::Context("hi".into())
            .stdout_for(AgentCli::Copilot, "postToolUse")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(context, json!({"additionalContext": "hi"}));
    let deny: Value = serde_json::from_str(
        &HookReply::Deny("no".into())
            .stdout_for(AgentCli::Copilot, "permissionRequest")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(deny, json!({"behavior": "deny", "message": "no"}));
    // Roundtable's own tools are its agent's to use.
    assert!(is_roundtable_tool(
        AgentCli::Copilot,
        "roundtable/send_message"
    ));
    assert!(!is_roundtable_tool(AgentCli::Copilot, "roundtablex/send"));
    assert!(!is_roundtable_tool(AgentCli::Copilot, "bash"));
    assert!(is_roundtable_tool(
        AgentCli::Claude,
        "mcp__roundtable__wait_for_messages"
    ));
    assert!(!is_roundtable_tool(AgentCli::Claude, "mcp__roundtables__x"));
}

#[test]
fn claudes_environment_says_whether_a_person_sits_at_the_session() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    };
    let attended = |pairs| HookContext::claude(&env(pairs)).attended;
    assert_eq!(
        attended(&[("CLAUDE_CODE_SESSION_ATTENDED", "1")]),
        Some(true)
    );
    assert_eq!(
        attended(&[
            ("CLAUDE_CODE_SESSION_ATTENDED", "0"),
            ("CLAUDE_CODE_ENTRYPOINT", "cli")
        ]),
        Some(false)
    );
    assert_eq!(
        attended(&[("CLAUDE_CODE_ENTRYPOINT", "sdk-cli")]),
        Some(false)
    );
    assert_eq!(attended(&[("CLAUDE_CODE_ENTRYPOINT", "cli")]), Some(true));
    assert_eq!(attended(&[]), None);
    assert!(HookContext::claude(&env(&[("ROUNDTABLE_LISTEN", "1")])).listen_asked);
    // A session the runner started for one room is handed that room's messages only;
    // the room alone (no runner) means nothing.
    let room = |pairs| HookContext::from_env(AgentCli::Codex, None, &env(pairs)).room;
    assert_eq!(
        room(&[("ROUNDTABLE_RUN", "1"), ("ROUNDTABLE_ROOM", "r_design")]).as_deref(),
        Some("r_design")
    );
    assert_eq!(room(&[("ROUNDTABLE_ROOM", "r_design")]), None);
    assert_eq!(room(&[("ROUNDTABLE_RUN", "1")]), None);
    // A runner that drives Claude Code over ACP asks its permissions itself; the variable
    // alone (no runner) means nothing. Codex over ACP asks its hook.
    let over_acp =
        |cli, pairs| HookContext::from_env(cli, None, &env(pairs)).permissions_asked_over_acp();
    let acp_run = &[("ROUNDTABLE_RUN", "1"), ("ROUNDTABLE_ACP", "1")];
    assert!(over_acp(AgentCli::Claude, acp_run));
    assert!(HookContext::claude(&env(acp_run)).permissions_asked_over_acp());
    assert!(!over_acp(AgentCli::Codex, acp_run));
    assert!(!over_acp(AgentCli::Claude, &[("ROUNDTABLE_RUN", "1")]));
    assert!(!over_acp(AgentCli::Claude, &[("ROUNDTABLE_ACP", "1")]));
    assert!(!over_acp(
        AgentCli::Claude,
        &[("ROUNDTABLE_RUN", "1"), ("ROUNDTABLE_ACP", "0")]
    ));
}

#[test]
fn antigravity_hooks_read_its_documented_payloads_and_always_answer_json() {
    // From Antigravity CLI's documentation (not run here): camelCase, no event name.
    let before = br#"{"conversationId":"c-1","workspacePaths":["/w/app"],"transcriptPath":"/h/.gemini/antigravity-cli/brain/c-1/.system_generated/logs/transcript.jsonl","artifactDirectoryPath":"/h/a","modelName":"gemini-3-pro","invocationNum":2,"initialNumSteps":5}"#;
    assert_eq!(
        parse(AgentCli::Antigravity, before, Some("PreInvocation")).unwrap(),
        HookEvent::PromptSubmitted {
            session_id: "c-1".into()
        }
    );
    let stop = br#"{"conversationId":"c-1","workspacePaths":["/w/app"],"transcriptPath":"/t.jsonl","executionNum":1,"terminationReason":"model_done","fullyIdle":true}"#;
    assert!(matches!(
        parse(AgentCli::Antigravity, stop, Some("Stop")).unwrap(),
        HookEvent::TurnEnded { session_id, transcript: Some(_), .. } if session_id == "c-1"
    ));
    let answer = |reply: HookReply, event: &str| -> Value {
        serde_json::from_str(&reply.stdout_for(AgentCli::Antigravity, event).unwrap()).unwrap()
    };
    assert_eq!(
        answer(HookReply::Context("hi".into()), "PreInvocation"),
        json!({"injectSteps": [{"ephemeralMessage": "hi"}]})
    );
    assert_eq!(
        answer(HookReply::Block("go on".into()), "Stop"),
        json!({"decision": "continue", "reason": "go on"})
    );
    assert_eq!(
        answer(HookReply::Nothing, "Stop"),
        json!({"decision": "stop"})
    );
    assert_eq!(answer(HookReply::Nothing, "PreInvocation"), json!({}));
}

#[test]
fn copilots_command_line_says_whether_anyone_is_asked_before_a_tool_runs() {
    let words = |line: &str| -> Vec<String> { line.split(' ').map(str::to_owned).collect() };
    let none = |_: &str| None;
    let context = |line: Option<&str>, env: &dyn Fn(&str) -> Option<String>| {
        let argv = line.map(words);
        let context = HookContext::copilot(argv.as_deref(), env);
        (context.attended, context.tools_allowed)
    };
    assert_eq!(
        context(Some("-p go --output-format json"), &none),
        (Some(false), false)
    );
    assert_eq!(
        context(Some("--prompt=go --yolo"), &none),
        (Some(false), true)
    );
    assert_eq!(
        context(Some("-p go --allow-all-tools"), &none),
        (Some(false), true)
    );
    assert_eq!(context(Some("--resume"), &none), (Some(true), false));
    // `--allow-tool X` allows some tools only: Copilot's rules decide, not this.
    assert_eq!(
        context(Some("--allow-tool=shell(git)"), &none),
        (Some(true), false)
    );
    assert_eq!(context(None, &none), (None, false));
    let allow_all = |name: &str| (name == "COPILOT_ALLOW_ALL").then(|| "true".to_owned());
    assert_eq!(context(None, &allow_all), (None, true));
    let off = |name: &str| (name == "COPILOT_ALLOW_ALL").then(|| "false".to_owned());
    assert_eq!(context(None, &off), (None, false));
    let runner = |name: &str| (name == "ROUNDTABLE_RUN").then(|| "1".to_owned());
    assert_eq!(context(None, &runner), (Some(false), false));
}

#[test]
fn the_person_typing_shows_as_an_enqueued_prompt_in_whole_lines() {
    let enqueue = br#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-12-02T02:46:14.167Z","sessionId":"d807","content":"third prompt"}"#;
    let mut lines = b"{\"type\":\"system\",\"subtype\":\"stop_hook_summary\"}\n".to_vec();
    assert!(!person_typed(&lines));
    lines.extend_from_slice(enqueue);
    assert!(!person_typed(&lines), "a torn line does not count yet");
    lines.push(b'\n');
    assert!(person_typed(&lines));
    let dequeue = b"{\"type\":\"queue-operation\",\"operation\":\"dequeue\"}\n";
    assert!(!person_typed(dequeue));
    assert!(!person_typed(b"not json\n"));
}

#[test]
fn a_codex_rollout_shows_its_next_turn_beginning() {
    let begun = b"{\"timestamp\":\"t\",\"type\":\"event_msg\",\"payload\":{\"type\":\"task_started\",\"turn_id\":\"u2\"}}\n";
    assert!(codex_turn_began(begun));
    assert!(
        !codex_turn_began(&begun[..begun.len() - 1]),
        "a torn line waits"
    );
    let other = b"{\"type\":\"event_msg\",\"payload\":{\"type\":\"token_count\"}}\n";
    assert!(!codex_turn_began(other));
    assert_eq!(thread_file("019c8a4d-8f45/../x"), "019c8a4d-8f45____x");
}

#[test]
fn replies_print_in_the_clis_format() {
    assert_eq!(HookReply::Nothing.stdout("Stop"), None);
    let block: Value =
        serde_json::from_str(&HookReply::Block("go on".into()).stdout("Stop").unwrap()).unwrap();
    assert_eq!(block, json!({"decision": "block", "reason": "go on"}));
    let allow: Value =
        serde_json::from_str(&HookReply::Allow.stdout("PermissionRequest").unwrap()).unwrap();
    assert_eq!(allow["hookSpecificOutput"]["decision"]["behavior"], "allow");
    let context: Value = serde_json::from_str(
        &HookReply::Context("hi".into())
            .stdout("PostToolUse")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        context["hookSpecificOutput"],
        json!({"hookEventName": "PostToolUse", "additionalContext": "hi"})
    );
}

#[test]
fn codex_notify_parses_its_kebab_case_payload() {
    let notify = parse_codex_notify(
        r#"{"type":"agent-turn-complete","thread-id":"b5f6","turn-id":"1","cwd":"/p","input-messages":["x"],"last-assistant-message":"done"}"#,
    )
    .unwrap();
    assert_eq!(notify.thread.as_deref(), Some("b5f6"));
    assert_eq!(notify.last_message.as_deref(), Some("done"));
    assert!(!notify.is_hidden_thread());
    let title = parse_codex_notify(
        r#"{"type":"agent-turn-complete","thread-id":"c1","input-messages":["Generate a concise, single-line task title for this: …"]}"#,
    )
    .unwrap();
    assert!(title.is_hidden_thread());
    assert!(parse_codex_notify("{").is_err());
}

#[test]
fn long_tool_inputs_are_cut_on_a_character_boundary() {
    let input = json!({"text": "é".repeat(400)});
    let described = describe_call("Write", &input);
    assert!(described.ends_with('…'));
    assert!(described.len() < 320);
}

#[test]
fn a_command_s_escape_sequences_are_left_out_of_the_question_and_status() {
    let input = json!({"command": "printf '\u{1b}[31mred\u{1b}[0m'\nls"});
    let question = forwarded(&describe_call("Bash", &input));
    assert_eq!(question, "Bash: printf '[31mred[0m'\nls");
    roundtable_protocol::text::check(
        || "question".into(),
        &question,
        roundtable_protocol::text::Shape::Prose,
    )
    .unwrap();
}
