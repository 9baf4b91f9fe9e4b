use std::collections::HashMap;

use super::*;

fn wiring(handle: &str) -> Wiring {
    Wiring {
        handle: handle.into(),
        roundtable: PathBuf::from("/opt/round table/bin/roundtable"),
        roundtable_home: Some(PathBuf::from("/home/dana/.rt")),
        settings: HookSettings::default(),
        task_tools: true,
        profiles: PathBuf::from("/home/dana/.rt/profiles"),
        os: Os::Linux,
    }
}

fn env() -> Environment {
    Environment {
        home: PathBuf::from("/home/dana"),
        ..Environment::default()
    }
}

/// Plans over an in-memory set of files; applies the plan to it.
fn onboard(
    files: &mut HashMap<PathBuf, String>,
    cli: AgentCli,
    project: Option<&Path>,
    wiring: &Wiring,
) -> Result<Vec<PlannedFile>, PlanError> {
    let snapshot = files.clone();
    let planned = plan(&env(), cli, project, wiring, |path| {
        Ok(snapshot.get(path).cloned())
    })?;
    for file in &planned {
        files.insert(file.path.clone(), file.after.clone());
    }
    Ok(planned)
}

#[test]
fn a_projects_claude_configuration_gets_the_server_and_the_hooks() {
    let project = Path::new("/home/dana/src/parser");
    let mut files = HashMap::new();
    files.insert(
        project.join(".mcp.json"),
        "{\n    \"mcpServers\": {}\n}\n".to_owned(),
    );
    let planned = onboard(
        &mut files,
        AgentCli::Claude,
        Some(project),
        &wiring("dana/writer"),
    )
    .unwrap();
    assert_eq!(planned.len(), 2);
    let mcp: Value = serde_json::from_str(&files[&project.join(".mcp.json")]).unwrap();
    assert_eq!(
        mcp["mcpServers"]["roundtable"]["env"],
        json!({"ROUNDTABLE_HOME": "/home/dana/.rt"})
    );
    let settings: Value =
        serde_json::from_str(&files[&project.join(".claude/settings.json")]).unwrap();
    let stop = &settings["hooks"]["Stop"][0]["hooks"][0];
    assert_eq!(
        stop["command"],
        "ROUNDTABLE_HOME=/home/dana/.rt '/opt/round table/bin/roundtable' hook claude --agent dana/writer"
    );
    assert_eq!(stop["timeout"], 660);
    assert_eq!(
        settings["hooks"]["Notification"][0]["matcher"],
        "permission_prompt|idle_prompt"
    );
    // A mention reaches a working agent at its next tool boundary.
    assert_eq!(
        settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
        stop["command"]
    );
    // Today's default models get Claude Code's own task tools.
    assert_eq!(settings["env"]["CLAUDE_CODE_ENABLE_TODO_TOOLS"], "1");
    // A `roundtable` run in the session knows it is in one, and the file tools are
    // kept out of every profile.
    assert_eq!(settings["env"]["ROUNDTABLE_AGENT_SESSION"], "dana/writer");
    assert_eq!(
        settings["permissions"]["deny"],
        json!([
            "Read(//home/dana/.rt/profiles/**)",
            "Edit(//home/dana/.rt/profiles/**)"
        ])
    );
    // Again: nothing to do.
    assert!(
        onboard(
            &mut files,
            AgentCli::Claude,
            Some(project),
            &wiring("dana/writer")
        )
        .unwrap()
        .is_empty()
    );
    // Another agent in the same place is refused.
    assert!(matches!(
        onboard(
            &mut files,
            AgentCli::Claude,
            Some(project),
            &wiring("dana/other")
        ),
        Err(PlanError::Edit(EditError::Taken { .. }))
    ));
    // Undone, the files are what they were (the settings file was created).
    for file in &planned {
        let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
        assert_eq!(
            Some(undone.as_str()).filter(|t| !t.is_empty()),
            file.before.as_deref()
        );
    }
}

#[test]
fn the_persons_own_task_tool_setting_stays_and_no_task_tools_leaves_it_off() {
    let mut files = HashMap::new();
    let settings = PathBuf::from("/home/dana/.claude/settings.json");
    files.insert(
        settings.clone(),
        "{\"env\": {\"CLAUDE_CODE_ENABLE_TODO_TOOLS\": \"0\"}}\n".to_owned(),
    );
    onboard(&mut files, AgentCli::Claude, None, &wiring("dana/writer")).unwrap();
    let value: Value = serde_json::from_str(&files[&settings]).unwrap();
    assert_eq!(value["env"]["CLAUDE_CODE_ENABLE_TODO_TOOLS"], "0");
    let mut files = HashMap::new();
    let without = Wiring {
        task_tools: false,
        ..wiring("dana/writer")
    };
    onboard(&mut files, AgentCli::Claude, None, &without).unwrap();
    onboard(&mut files, AgentCli::Codex, None, &without).unwrap();
    let value: Value = serde_json::from_str(&files[&settings]).unwrap();
    assert!(value["env"].get(CLAUDE_TASK_TOOLS).is_none(), "{value}");
    let config = &files[&PathBuf::from("/home/dana/.codex/config.toml")];
    assert!(!config.contains("update_plan"), "{config}");
}

#[test]
fn opencode_gets_its_server_and_our_plugin_and_gives_back_every_byte() {
    // The person's `.jsonc`, with comments, is the one edited (OpenCode reads it after
    // the `.json`).
    let mut files = HashMap::new();
    let dir = PathBuf::from("/home/dana/.config/opencode");
    let jsonc = dir.join("opencode.jsonc");
    let original = "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  // my model\n  \"model\": \"anthropic/claude-sonnet-4-5\"\n}\n";
    files.insert(jsonc.clone(), original.to_owned());
    let planned = onboard(&mut files, AgentCli::Opencode, None, &wiring("dana/coder")).unwrap();
    assert_eq!(planned.len(), 2, "{planned:#?}");
    assert!(!files.contains_key(&dir.join("opencode.json")));
    assert!(files[&jsonc].contains("// my model"), "{}", files[&jsonc]);
    let server = json_text::value_at(&files[&jsonc], &["mcp", SERVER_NAME])
        .unwrap()
        .unwrap();
    assert_eq!(
        server,
        json!({
            "type": "local",
            "command": ["/opt/round table/bin/roundtable", "mcp", "--agent", "dana/coder"],
            "environment": {"ROUNDTABLE_HOME": "/home/dana/.rt"},
            "enabled": true,
        })
    );
    // The plugin runs the hook by its program and arguments (no shell), passes
    // ROUNDTABLE_HOME on, and marks the session's shell commands.
    let plugin = files[&dir.join("plugins").join(OPENCODE_PLUGIN)].clone();
    assert!(plugin.contains(
        r#"const HOOK = ["/opt/round table/bin/roundtable","hook","opencode","--agent","dana/coder"];"#
    ), "{plugin}");
    assert!(plugin.contains(r#"const ENVIRONMENT = {"ROUNDTABLE_HOME":"/home/dana/.rt"};"#));
    assert!(plugin.contains(r#"const AGENT = "dana/coder";"#));
    assert!(plugin.contains("Stop: 660,"), "{plugin}");
    assert!(!plugin.contains("__"), "a value was left out: {plugin}");
    // Again: nothing to do. Another agent: refused, as is a plugin of someone else's.
    assert!(
        onboard(&mut files, AgentCli::Opencode, None, &wiring("dana/coder"))
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        onboard(&mut files, AgentCli::Opencode, None, &wiring("dana/other")),
        Err(PlanError::Edit(EditError::Taken { other, .. })) if other == "dana/coder"
    ));
    // Undone: the configuration byte for byte, the plugin gone (empty: removed).
    for file in &planned {
        let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
        assert_eq!(
            Some(undone.as_str()).filter(|t| !t.is_empty()),
            file.before.as_deref()
        );
    }
    // A plugin the person changed since is theirs: it stays.
    let changed = format!("{plugin}// mine\n");
    let undone = undo_all(&dir, &changed, &planned[1].undo).unwrap();
    assert_eq!(undone, changed);
    // A trailing comma (which OpenCode reads) is refused with what to do, the file
    // untouched: the edit keeps every byte it does not own, so it reads JSON exactly.
    let mut files = HashMap::new();
    let trailing = "{\n  \"model\": \"anthropic/claude-sonnet-4-5\",\n}\n";
    files.insert(jsonc.clone(), trailing.to_owned());
    let refused = onboard(&mut files, AgentCli::Opencode, None, &wiring("dana/coder"));
    let Err(PlanError::Edit(EditError::Unparsable { detail, .. })) = refused else {
        panic!("{refused:?}");
    };
    assert!(detail.contains("trailing commas"), "{detail}");
    assert_eq!(files[&jsonc], trailing);
}

#[test]
fn antigravity_gets_its_server_and_a_hook_group_of_ours_beside_the_persons() {
    // Written from Antigravity CLI's documentation: hook names at the top level, each
    // mapping events to handlers (flat lists for the lifecycle events).
    let mut files = HashMap::new();
    let dir = PathBuf::from("/home/dana/.gemini/config");
    let hooks_path = dir.join("hooks.json");
    let theirs = "{\n  // lint after edits\n  \"my-linter\": {\n    \"PostToolUse\": [{\"matcher\": \"run_command\", \"hooks\": [{\"command\": \"./lint.sh\", \"timeout\": 10}]}]\n  }\n}\n";
    files.insert(hooks_path.clone(), theirs.to_owned());
    let planned = onboard(
        &mut files,
        AgentCli::Antigravity,
        None,
        &wiring("dana/scout"),
    )
    .unwrap();
    assert_eq!(planned.len(), 2, "{planned:#?}");
    let mcp: Value = serde_json::from_str(&files[&dir.join("mcp_config.json")]).unwrap();
    assert_eq!(
        mcp["mcpServers"]["roundtable"],
        json!({
            "command": "/opt/round table/bin/roundtable",
            "args": ["mcp", "--agent", "dana/scout"],
            "env": {"ROUNDTABLE_HOME": "/home/dana/.rt"},
        })
    );
    let hooks = &files[&hooks_path];
    assert!(hooks.contains("// lint after edits"), "{hooks}");
    let group = json_text::value_at(hooks, &[SERVER_NAME]).unwrap().unwrap();
    assert_eq!(
        group["Stop"],
        json!([{
            "type": "command",
            "command": "ROUNDTABLE_HOME=/home/dana/.rt '/opt/round table/bin/roundtable' hook agy --agent dana/scout Stop",
            "timeout": 660,
        }])
    );
    assert_eq!(group["PreInvocation"][0]["timeout"], 30);
    assert!(
        group.get("PreToolUse").is_none(),
        "a failing hook there would block tools"
    );
    // Again: nothing to do. Another agent: refused, naming the one there.
    assert!(
        onboard(
            &mut files,
            AgentCli::Antigravity,
            None,
            &wiring("dana/scout")
        )
        .unwrap()
        .is_empty()
    );
    assert!(matches!(
        onboard(&mut files, AgentCli::Antigravity, None, &wiring("dana/other")),
        Err(PlanError::Edit(EditError::Taken { other, .. })) if other == "dana/scout"
    ));
    // Undone: both files as they were, byte for byte.
    for file in &planned {
        let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
        assert_eq!(
            Some(undone.as_str()).filter(|t| !t.is_empty()),
            file.before.as_deref()
        );
    }
    // A project's files are its `.agents/` folder's.
    let project = Path::new("/home/dana/src/app");
    assert_eq!(
        env().config_files(AgentCli::Antigravity, Some(project)),
        [
            project.join(".agents/mcp_config.json"),
            project.join(".agents/hooks.json")
        ]
    );
}

#[test]
fn copilot_gets_its_server_and_a_hooks_file_of_ours_that_no_shell_reads() {
    let mut files = HashMap::new();
    let dir = PathBuf::from("/home/dana/.copilot");
    let mcp = dir.join("mcp-config.json");
    let original = "{\n  \"mcpServers\": {\n    \"github\": {\"type\": \"http\", \"url\": \"https://example.com/mcp\", \"tools\": [\"*\"]}\n  }\n}\n";
    files.insert(mcp.clone(), original.to_owned());
    let planned = onboard(&mut files, AgentCli::Copilot, None, &wiring("dana/pilot")).unwrap();
    assert_eq!(planned.len(), 2, "{planned:#?}");
    let config: Value = serde_json::from_str(&files[&mcp]).unwrap();
    assert_eq!(config["mcpServers"]["github"]["type"], "http");
    let server = &config["mcpServers"]["roundtable"];
    assert_eq!(server["type"], "local");
    assert_eq!(server["command"], "/opt/round table/bin/roundtable");
    assert_eq!(server["args"], json!(["mcp", "--agent", "dana/pilot"]));
    assert_eq!(server["tools"], json!(["*"]));
    assert_eq!(server["env"], json!({"ROUNDTABLE_HOME": "/home/dana/.rt"}));
    // Each hook is a program and its arguments, told its event; the path with a space
    // needs no quoting.
    let hooks_path = dir.join("hooks").join(COPILOT_HOOKS_FILE);
    let hooks: Value = serde_json::from_str(&files[&hooks_path]).unwrap();
    assert_eq!(hooks["version"], 1);
    for event in COPILOT_HOOKS {
        let hook = &hooks["hooks"][event][0];
        assert_eq!(hook["exec"], "/opt/round table/bin/roundtable", "{hooks}");
        assert_eq!(
            hook["args"],
            json!(["hook", "copilot", "--agent", "dana/pilot", event])
        );
        assert_eq!(hook["env"], json!({"ROUNDTABLE_HOME": "/home/dana/.rt"}));
        assert!(hook.get("bash").is_none() && hook.get("command").is_none());
    }
    assert_eq!(hooks["hooks"]["agentStop"][0]["timeoutSec"], 660);
    assert_eq!(hooks["hooks"]["permissionRequest"][0]["timeoutSec"], 150);
    assert_eq!(hooks["hooks"]["postToolUse"][0]["timeoutSec"], 30);
    // Again: nothing to do; another agent, or a hooks file that is not ours: refused.
    assert!(
        onboard(&mut files, AgentCli::Copilot, None, &wiring("dana/pilot"))
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        onboard(&mut files, AgentCli::Copilot, None, &wiring("dana/other")),
        Err(PlanError::Edit(EditError::Taken { other, .. })) if other == "dana/pilot"
    ));
    let mut theirs = HashMap::new();
    theirs.insert(
        hooks_path.clone(),
        "{\"version\": 1, \"hooks\": {}}".to_owned(),
    );
    assert!(matches!(
        onboard(&mut theirs, AgentCli::Copilot, None, &wiring("dana/pilot")),
        Err(PlanError::Edit(EditError::NotOurs { .. }))
    ));
    // Undone: the person's configuration byte for byte, our hooks gone.
    for file in &planned {
        let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
        assert_eq!(
            Some(undone.as_str()).filter(|t| !t.is_empty()),
            file.before.as_deref()
        );
    }
    // `$COPILOT_HOME` moves everything.
    let moved = Environment {
        copilot_home: Some(PathBuf::from("/srv/copilot")),
        ..env()
    };
    assert_eq!(
        moved.config_files(AgentCli::Copilot, None),
        [
            PathBuf::from("/srv/copilot/mcp-config.json"),
            PathBuf::from("/srv/copilot/hooks/roundtable.json")
        ]
    );
    assert_eq!(
        moved.log_dirs(AgentCli::Copilot),
        [PathBuf::from("/srv/copilot/session-state")]
    );
}

#[test]
fn opencode_with_no_configuration_gets_a_file_of_ours_with_the_schema_it_would_add() {
    let mut files = HashMap::new();
    let project = Path::new("/home/dana/src/app");
    let planned = onboard(
        &mut files,
        AgentCli::Opencode,
        Some(project),
        &wiring("dana/coder"),
    )
    .unwrap();
    let config = &files[&project.join("opencode.json")];
    let value: Value = serde_json::from_str(config).unwrap();
    assert_eq!(value["$schema"], OPENCODE_SCHEMA);
    assert_eq!(value["mcp"][SERVER_NAME]["command"][3], "dana/coder");
    // `$schema` comes first, as OpenCode puts it.
    assert!(
        config.trim_start()[1..]
            .trim_start()
            .starts_with("\"$schema\""),
        "{config}"
    );
    assert!(files.contains_key(&project.join(".opencode/plugins").join(OPENCODE_PLUGIN)));
    // Both files were created: undone, both are empty (offboarding removes them).
    for file in &planned {
        assert_eq!(file.before, None);
        assert_eq!(
            undo_all(&file.path, &files[&file.path], &file.undo).unwrap(),
            ""
        );
    }
    // A plugin of that name that is not ours is never overwritten.
    let mut files = HashMap::new();
    files.insert(
        project.join(".opencode/plugins").join(OPENCODE_PLUGIN),
        "export const Mine = async () => ({});\n".to_owned(),
    );
    assert!(matches!(
        onboard(
            &mut files,
            AgentCli::Opencode,
            Some(project),
            &wiring("dana/coder")
        ),
        Err(PlanError::Edit(EditError::NotOurs { .. }))
    ));
}

#[test]
fn gemini_gets_a_trusted_server_with_a_timeout_long_enough_to_wait_and_its_hooks() {
    let mut files = HashMap::new();
    let path = PathBuf::from("/home/dana/.gemini/settings.json");
    let original = "// Gemini CLI settings\n{\n  \"theme\": \"GitHub\"\n}\n";
    files.insert(path.clone(), original.to_owned());
    let planned = onboard(&mut files, AgentCli::Gemini, None, &wiring("dana/helper")).unwrap();
    assert!(files[&path].starts_with("// Gemini CLI settings\n{\n  \"theme\": \"GitHub\""));
    let server = json_text::value_at(&files[&path], &["mcpServers", SERVER_NAME])
        .unwrap()
        .unwrap();
    assert_eq!(server["timeout"], 660_000);
    assert_eq!(server["trust"], true);
    assert_eq!(server["args"], json!(["mcp", "--agent", "dana/helper"]));
    for event in GEMINI_HOOKS {
        let hook = json_text::value_at(&files[&path], &["hooks", event, "0"])
            .unwrap()
            .map(|group| group["hooks"][0].clone())
            .or_else(|| {
                json_text::value_at(&files[&path], &["hooks", event])
                    .unwrap()
                    .map(|groups| groups[0]["hooks"][0].clone())
            })
            .unwrap();
        assert!(
            hook["command"]
                .as_str()
                .unwrap()
                .ends_with("hook gemini --agent dana/helper"),
            "{hook}"
        );
    }
    // Milliseconds: the turn's end listens as long as the others'.
    let after_agent = json_text::value_at(&files[&path], &["hooks", "AfterAgent"])
        .unwrap()
        .unwrap();
    assert_eq!(after_agent[0]["hooks"][0]["timeout"], 660_000);
    let undone = undo_all(&path, &files[&path], &planned[0].undo).unwrap();
    assert_eq!(undone, original);
}

#[test]
fn codex_gets_its_hooks_trusted_by_the_hash_it_computes_and_its_plan_tool() {
    let mut files = HashMap::new();
    let config_path = env().codex_dir().join("config.toml");
    let hooks_path = env().codex_dir().join("hooks.json");
    let config = "model = \"o3\"\nnotify = [\"notify-send\", \"codex\"]\n";
    // The person has a Stop hook of their own: ours comes after it.
    let hooks = "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"say done\"}]}]}}\n";
    files.insert(config_path.clone(), config.to_owned());
    files.insert(hooks_path.clone(), hooks.to_owned());
    let planned = onboard(&mut files, AgentCli::Codex, None, &wiring("dana/reviewer")).unwrap();
    let parsed: toml::Table = toml::from_str(&files[&config_path]).unwrap();
    // The person's notify is theirs: Codex's hooks do the work now.
    assert_eq!(parsed["notify"].as_array().unwrap().len(), 2);
    assert_eq!(
        parsed["mcp_servers"]["roundtable"]["tool_timeout_sec"].as_integer(),
        Some(660)
    );
    assert_eq!(
        parsed["tools"]["update_plan"]["enabled"].as_bool(),
        Some(true)
    );
    let written: Value = serde_json::from_str(&files[&hooks_path]).unwrap();
    let command = written["hooks"]["Stop"][1]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        command.ends_with("hook codex --agent dana/reviewer"),
        "{command}"
    );
    let state = parsed["hooks"]["state"].as_table().unwrap();
    let stop = &state[&format!("{}:stop:1:0", hooks_path.display())];
    assert_eq!(
        stop["trusted_hash"].as_str(),
        Some(codex_hook_hash("stop", None, &command, 660).as_str())
    );
    assert_eq!(state.len(), CODEX_HOOKS.len());
    assert!(state.contains_key(&format!("{}:session_start:0:0", hooks_path.display())));
    // Onboarding again changes nothing.
    assert!(
        onboard(&mut files, AgentCli::Codex, None, &wiring("dana/reviewer"))
            .unwrap()
            .is_empty()
    );
    for file in &planned {
        let undone = undo_all(&file.path, &files[&file.path], &file.undo).unwrap();
        assert_eq!(Some(undone.as_str()), file.before.as_deref());
    }
}

#[test]
fn codexs_trust_hash_is_the_one_codex_reports() {
    // `hooks/list` of Codex 0.169.0 for these hooks (a research run's hooks.json).
    let command = "python3 /tmp/research/codex/hooklog.py /tmp/research/codex/r3/hooks.log /tmp/research/codex/r3/resp";
    assert_eq!(
        codex_hook_hash("stop", None, command, 30),
        "sha256:48ce08bd28a08b793fddc32a90a8a6552a19a2317b02e816647671e191b28c9f"
    );
    assert_eq!(
        codex_hook_hash("pre_tool_use", Some("*"), command, 30),
        "sha256:f63faccac555f6f5a6148721cb87fe8d61b5be0c98a1259bcde72d5a66b8d76a"
    );
}

#[test]
fn changed_lines_show_what_was_added_and_removed() {
    let (added, removed) = changed_lines("a\nb\nc\n", "a\nb\nx\ny\nc\n");
    assert_eq!(
        (added, removed),
        (vec!["x".to_owned(), "y".to_owned()], vec![])
    );
    let (added, removed) = changed_lines("a\nb\n", "a\n");
    assert_eq!((added, removed), (vec![], vec!["b".to_owned()]));
}

#[test]
fn each_cli_s_hook_command_is_written_for_the_shell_it_runs_hooks_in_on_each_os() {
    assert_eq!(
        HookShell::of(AgentCli::Claude, Os::Windows),
        HookShell::Posix
    );
    assert_eq!(HookShell::of(AgentCli::Codex, Os::Windows), HookShell::Cmd);
    assert_eq!(
        HookShell::of(AgentCli::Gemini, Os::Windows),
        HookShell::PowerShell
    );
    for cli in [AgentCli::Claude, AgentCli::Codex, AgentCli::Gemini] {
        assert_eq!(HookShell::of(cli, Os::MacOs), HookShell::Posix);
        assert_eq!(HookShell::of(cli, Os::Linux), HookShell::Posix);
    }
    let windows = Wiring {
        roundtable: PathBuf::from(r"C:\Program Files\Roundtable\roundtable.exe"),
        roundtable_home: None,
        os: Os::Windows,
        ..wiring("dana/writer")
    };
    assert_eq!(
        windows.hook_command_for("codex", HookShell::Cmd),
        r#""C:\Program Files\Roundtable\roundtable.exe" hook codex --agent dana/writer"#
    );
    assert_eq!(
        windows.hook_command_for("gemini", HookShell::PowerShell),
        r"& 'C:\Program Files\Roundtable\roundtable.exe' hook gemini --agent dana/writer"
    );
    assert_eq!(
        windows.hook_command_for("claude", HookShell::Posix),
        r"'C:\Program Files\Roundtable\roundtable.exe' hook claude --agent dana/writer"
    );
    let at_home = Wiring {
        roundtable: PathBuf::from(r"C:\Users\o'neil\bin\roundtable.exe"),
        roundtable_home: Some(PathBuf::from(r"C:\Users\o'neil\rt home")),
        ..windows
    };
    assert_eq!(
        at_home.hook_command_for("codex", HookShell::Cmd),
        r#"set "ROUNDTABLE_HOME=C:\Users\o'neil\rt home" && "C:\Users\o'neil\bin\roundtable.exe" hook codex --agent dana/writer"#
    );
    assert_eq!(
        at_home.hook_command_for("gemini", HookShell::PowerShell),
        r"$env:ROUNDTABLE_HOME = 'C:\Users\o''neil\rt home'; & 'C:\Users\o''neil\bin\roundtable.exe' hook gemini --agent dana/writer"
    );
    assert_eq!(
        at_home.hook_command_for("claude", HookShell::Posix),
        r"ROUNDTABLE_HOME='C:\Users\o'\''neil\rt home' 'C:\Users\o'\''neil\bin\roundtable.exe' hook claude --agent dana/writer"
    );
    // A path with nothing to quote stays bare where a backslash is no escape.
    let bare = Wiring {
        roundtable: PathBuf::from(r"C:\rt\roundtable.exe"),
        roundtable_home: None,
        ..at_home
    };
    assert_eq!(
        bare.hook_command_for("codex", HookShell::Cmd),
        r"C:\rt\roundtable.exe hook codex --agent dana/writer"
    );
    assert_eq!(
        bare.hook_command_for("gemini", HookShell::PowerShell),
        r"& C:\rt\roundtable.exe hook gemini --agent dana/writer"
    );
}
