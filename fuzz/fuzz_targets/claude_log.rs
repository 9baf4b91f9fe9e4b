//! A Claude Code transcript of any bytes: every line is read without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_core::work::claude::ClaudeParser;

fuzz_target!(|data: &[u8]| {
    let mut parser = ClaudeParser::new();
    let mut events = Vec::new();
    for line in data.split(|&byte| byte == b'\n') {
        let _ = parser.line(line, &mut events);
    }
});
