//! A user's TOML config (Codex's config.toml) of any text: adding our MCP server table and
//! the `notify` command either is refused with an error or, undone, gives back every byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_core::local_agents::toml_text::{
    append_table, remove_appended, revert_top_level, set_top_level,
};

fuzz_target!(|text: &str| {
    let mut entries = toml_edit::InlineTable::new();
    entries.insert("command", "roundtable".into());
    if let Ok((edited, appended)) = append_table(text, &["mcp_servers", "roundtable"], &entries) {
        let restored = remove_appended(&edited, &appended).expect("our own edit can be undone");
        assert_eq!(restored, text, "undo lost bytes of the user's file");
    }
    if let Ok((edited, edit)) = set_top_level(text, "notify", r#"["roundtable", "hook", "codex-notify"]"#) {
        let restored = revert_top_level(&edited, &edit).expect("our own edit can be undone");
        assert_eq!(restored, text, "undo lost bytes of the user's file");
    }
});
