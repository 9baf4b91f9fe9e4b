//! Codex's entries: the MCP server and the hooks in `config.toml`, edited in place with
//! `toml_edit` so the person's own text stays as it was, and the hashes Codex keeps of the
//! hooks it trusts.

use super::*;

/// One of our hooks in Codex's `hooks.json`, as Codex's trust names it.
pub(super) struct CodexHook {
    /// The event as trust keys spell it (`stop`).
    pub(super) event: String,
    /// Our group's index among the event's groups.
    pub(super) index: usize,
    /// What Codex will compute for it ([`codex_hook_hash`]).
    pub(super) hash: String,
}

/// The hash Codex trusts a hook by: SHA-256 of the hook's identity as canonical JSON (keys
/// sorted, no spaces) — its event (as in the trust key), its matcher if any, and its one
/// command handler with Codex's defaults filled in. Checked against the hashes Codex 0.169
/// reports for the same hooks (`hooks/list`).
pub fn codex_hook_hash(event: &str, matcher: Option<&str>, command: &str, timeout: u64) -> String {
    use sha2::Digest as _;
    let quote = |text: &str| serde_json::to_string(text).expect("strings serialize");
    // Written out in key order, so it cannot depend on how serde_json orders maps.
    let mut identity = format!(
        r#"{{"event_name":{},"hooks":[{{"async":false,"command":{},"timeout":{timeout},"type":"command"}}]"#,
        quote(event),
        quote(command),
    );
    if let Some(matcher) = matcher {
        identity.push_str(&format!(r#","matcher":{}"#, quote(matcher)));
    }
    identity.push('}');
    let digest = sha2::Sha256::digest(identity.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Codex's `hooks.json`: our hooks. Returns the file and our hooks in it.
pub(super) fn codex_hooks(
    path: &Path,
    before: Option<String>,
    wiring: &Wiring,
) -> Result<(PlannedFile, Vec<CodexHook>), EditError> {
    let text = before.clone().unwrap_or_default();
    let command = wiring.hook_command(AgentCli::Codex);
    let events: Vec<(&str, Option<&str>)> = CODEX_HOOKS
        .iter()
        .map(|(event, _)| (*event, None))
        .collect();
    let (text, undo, indexes) = json_hooks(path, &text, &events, &command, |event| {
        wiring.hook_timeout(event)
    })?;
    let groups = indexes
        .into_iter()
        .filter_map(|(event, index)| {
            let (_, key_name) = CODEX_HOOKS.iter().find(|(name, _)| *name == event)?;
            let hash = codex_hook_hash(key_name, None, &command, wiring.hook_timeout(&event));
            Some(CodexHook {
                event: (*key_name).to_owned(),
                index,
                hash,
            })
        })
        .collect();
    let file = PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text,
        undo,
    };
    Ok((file, groups))
}

/// Codex's `config.toml`: `[mcp_servers.roundtable]`; `[tools.update_plan] enabled = true`
/// (unless the person set `tools.update_plan` either way); and `[hooks.state."KEY"]
/// trusted_hash` for each of our hooks in `hooks_file` (Codex runs no hook it does not
/// trust).
pub(super) fn codex_config(
    path: &Path,
    before: Option<String>,
    wiring: &Wiring,
    hooks_file: &Path,
    hooks: &[CodexHook],
) -> Result<PlannedFile, EditError> {
    let mut text = before.clone().unwrap_or_default();
    let mut undo = Vec::new();
    let existing = toml_text::table_at(&text, &["mcp_servers", SERVER_NAME])
        .map_err(|error| unparsable(path, error))?
        .map(|table| json_of_toml_table(&table));
    match existing {
        Some(existing) => {
            let theirs = existing["args"]
                .as_array()
                .and_then(|args| args.last())
                .and_then(Value::as_str)
                .unwrap_or("another agent")
                .to_owned();
            if theirs != wiring.handle {
                return Err(EditError::Taken {
                    path: path.display().to_string(),
                    other: theirs,
                });
            }
        }
        None => {
            let entry = json!({
                "command": wiring.bin(),
                "args": wiring.mcp_args(),
                "env": wiring.env(),
                "startup_timeout_sec": 20,
                // Waiting for messages or an answer takes up to ten minutes.
                "tool_timeout_sec": crate::agent_work::LONGEST_WAIT.as_secs() + 60,
            });
            let (after, appended) = toml_text::append_table(
                &text,
                &["mcp_servers", SERVER_NAME],
                &inline_table(&entry),
            )
            .map_err(|error| unparsable(path, error))?;
            text = after;
            undo.push(Undo::TomlTable { appended });
        }
    }
    if wiring.task_tools && !toml_has(&text, &["tools", "update_plan"]) {
        let (after, appended) = toml_text::append_table(
            &text,
            &["tools", "update_plan"],
            &inline_table(&json!({"enabled": true})),
        )
        .map_err(|error| unparsable(path, error))?;
        text = after;
        undo.push(Undo::TomlTable { appended });
    }
    for CodexHook { event, index, hash } in hooks {
        let key = format!("{}:{event}:{index}:0", hooks_file.display());
        let trusted = toml_text::table_at(&text, &["hooks", "state", &key])
            .map_err(|error| unparsable(path, error))?
            .map(|table| json_of_toml_table(&table));
        match trusted {
            Some(table) if table["trusted_hash"] == json!(hash.as_str()) => {}
            // Another hash for the same place: the person's, or ours from an older
            // command; left as it is, and the hook is not trusted until they look.
            Some(_) => {}
            None => {
                let (after, appended) = toml_text::append_table(
                    &text,
                    &["hooks", "state", &key],
                    &inline_table(&json!({ "trusted_hash": hash })),
                )
                .map_err(|error| unparsable(path, error))?;
                text = after;
                undo.push(Undo::TomlTable { appended });
            }
        }
    }
    Ok(PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text,
        undo,
    })
}

/// Whether `path` names anything in a TOML text (a table, an inline table, a value).
pub(super) fn toml_has(text: &str, path: &[&str]) -> bool {
    let Ok(document) = text.parse::<toml_edit::DocumentMut>() else {
        return false;
    };
    let mut item = document.as_item();
    for key in path {
        match item.get(key) {
            Some(next) => item = next,
            None => return false,
        }
    }
    true
}
