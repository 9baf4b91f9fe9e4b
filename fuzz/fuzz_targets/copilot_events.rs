//! A GitHub Copilot CLI session's `events.jsonl` of any bytes: every line is read without a
//! panic, and a parser saved and restored after any line reads on to the same events.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_core::work::copilot::CopilotParser;

fuzz_target!(|data: &[u8]| {
    let mut parser = CopilotParser::new("7d1e0c3a-5b2f-4c1e-9a0d-2f6b8e4c1a77");
    let mut events = Vec::new();
    for line in data.split(|&byte| byte == b'\n') {
        let _ = parser.line(line, &mut events);
        let saved = serde_json::to_string(&parser).expect("the parser's state serializes");
        parser = serde_json::from_str(&saved).expect("and reads back");
    }
});
