//! Claude Code's entries: the MCP server in `.claude.json`, the hooks and the task tools'
//! switch in `settings.json`, and the rules that let a session read the agent's profile.

use super::*;

/// Claude Code's `settings.json`: our hooks, and its task tools for the current models
/// (`env.CLAUDE_CODE_ENABLE_TODO_TOOLS`, unless the person set it either way).
pub(super) fn claude_settings(
    path: &Path,
    before: Option<String>,
    wiring: &Wiring,
) -> Result<PlannedFile, EditError> {
    let text = before.clone().unwrap_or_default();
    let command = wiring.hook_command(AgentCli::Claude);
    let (mut text, mut undo, _) = json_hooks(path, &text, &CLAUDE_HOOKS, &command, |event| {
        wiring.hook_timeout(event)
    })?;
    let mut variables = vec![(SESSION_ENV, wiring.handle.as_str())];
    if wiring.task_tools {
        variables.push((CLAUDE_TASK_TOOLS, "1"));
    }
    for (name, value) in variables {
        let set =
            json_text::value_at(&text, &["env", name]).map_err(|error| unparsable(path, error))?;
        if set.is_none() {
            let (after, inserted) = json_text::insert_member(&text, &["env"], name, &json!(value))
                .map_err(|error| unparsable(path, error))?;
            text = after;
            undo.push(Undo::Json { inserted });
        }
    }
    let denied = json_text::value_at(&text, &["permissions", "deny"])
        .map_err(|error| unparsable(path, error))?;
    for rule in claude_profile_rules(&wiring.profiles) {
        let present = denied
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(|rules| rules.iter().any(|existing| *existing == json!(rule)));
        if !present {
            let (after, inserted) =
                json_text::append_element(&text, &["permissions", "deny"], &json!(rule))
                    .map_err(|error| unparsable(path, error))?;
            text = after;
            undo.push(Undo::Json { inserted });
        }
    }
    Ok(PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text,
        undo,
    })
}

/// Claude Code's rules that deny its file tools Roundtable's profiles (`//` starts an
/// absolute path in its rules).
pub(super) fn claude_profile_rules(profiles: &Path) -> [String; 2] {
    let dir = profiles.display().to_string();
    let dir = dir.trim_end_matches('/');
    let pattern = format!("/{dir}/**");
    [format!("Read({pattern})"), format!("Edit({pattern})")]
}
