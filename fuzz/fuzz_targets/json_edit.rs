//! A user's JSON (or JSONC) config of any text: adding our MCP server entry and a hook
//! either is refused with an error or, undone, gives back every byte of the user's file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_core::local_agents::json_text::{append_element, insert_member, remove_inserted};
use serde_json::json;

fuzz_target!(|text: &str| {
    let server = json!({"command": "roundtable", "args": ["mcp", "--agent", "dana/writer"]});
    if let Ok((edited, inserted)) = insert_member(text, &["mcpServers"], "roundtable", &server) {
        let restored = remove_inserted(&edited, &inserted).expect("our own edit can be undone");
        assert_eq!(restored, text, "undo lost bytes of the user's file");
    }
    let hook = json!({"hooks": [{"type": "command", "command": "roundtable hook claude"}]});
    if let Ok((edited, inserted)) = append_element(text, &["hooks", "Stop"], &hook) {
        let restored = remove_inserted(&edited, &inserted).expect("our own edit can be undone");
        assert_eq!(restored, text, "undo lost bytes of the user's file");
    }
});
