//! A Gemini CLI chat file of any bytes, as one JSON document and as JSON lines: read
//! without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_core::work::gemini::parse_chat;

fuzz_target!(|data: &[u8]| {
    let _ = parse_chat(data, "session-2026-11-30T09-00-0a1b2c3d.json");
    let _ = parse_chat(data, "session-2026-11-30T09-00-0a1b2c3d.jsonl");
});
