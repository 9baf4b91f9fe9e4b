//! A Codex rollout of any bytes: every line is read without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_core::work::codex::CodexParser;

fuzz_target!(|data: &[u8]| {
    let mut parser = CodexParser::new("rollout-2026-11-30T09-00-00-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl");
    let mut events = Vec::new();
    for line in data.split(|&byte| byte == b'\n') {
        let _ = parser.line(line, &mut events);
    }
});
