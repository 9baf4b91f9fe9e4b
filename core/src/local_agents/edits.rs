//! The configuration edits that wire an agent CLI to Roundtable, as pure functions of the
//! files' text: an MCP server entry that runs `roundtable mcp --agent HANDLE`, and hooks
//! that run `roundtable hook …`. Each edit keeps every byte it does not own and returns the
//! record that undoes it exactly ([`Undo`]); a file that cannot be parsed is refused and
//! left as it is.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{AgentCli, Environment, json_text, toml_text};
use crate::hooks::HookSettings;

/// The name of Roundtable's MCP server in every agent CLI's configuration.
pub const SERVER_NAME: &str = "roundtable";

/// Claude Code hook events Roundtable installs, with their matcher.
const CLAUDE_HOOKS: [(&str, Option<&str>); 5] = [
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    ("Notification", Some("permission_prompt|idle_prompt")),
    ("PermissionRequest", None),
    ("Stop", None),
];

/// What the entries run.
#[derive(Debug, Clone, PartialEq)]
pub struct Wiring {
    /// The agent's handle (`dana/writer`).
    pub handle: String,
    /// The `roundtable` executable, by absolute path (agent CLIs do not share a shell's PATH).
    pub roundtable: PathBuf,
    /// `ROUNDTABLE_HOME`, when this installation uses one: the entries pass it on.
    pub roundtable_home: Option<PathBuf>,
    pub settings: HookSettings,
}

/// One recorded edit, to undo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Undo {
    Json { inserted: json_text::Inserted },
    TomlTable { appended: toml_text::Appended },
    TomlKey { set: toml_text::TopLevelEdit },
}

/// The planned new content of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFile {
    pub path: PathBuf,
    /// The text before (`None`: the file does not exist).
    pub before: Option<String>,
    pub after: String,
    /// The edits, in the order made.
    pub undo: Vec<Undo>,
}

/// Why a configuration cannot be edited.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error(
        "{path} cannot be parsed ({detail}); it was left untouched: fix it, then onboard again"
    )]
    Unparsable { path: String, detail: String },
    #[error(
        "{path} already has an MCP server named {SERVER_NAME:?} for {other}; offboard that agent first (or onboard this one in another project with --project)"
    )]
    Taken { path: String, other: String },
    #[error("{0} is not an agent CLI Roundtable onboards yet (claude, codex, gemini)")]
    Unsupported(AgentCli),
}

fn unparsable(path: &Path, detail: impl std::fmt::Display) -> EditError {
    EditError::Unparsable {
        path: path.display().to_string(),
        detail: detail.to_string(),
    }
}

/// Quotes a word for `/bin/sh` when it needs it.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:@,".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

impl Wiring {
    fn bin(&self) -> String {
        self.roundtable.display().to_string()
    }

    fn mcp_args(&self) -> Vec<String> {
        vec!["mcp".into(), "--agent".into(), self.handle.clone()]
    }

    fn env(&self) -> Value {
        match &self.roundtable_home {
            Some(home) => json!({ "ROUNDTABLE_HOME": home.display().to_string() }),
            None => json!({}),
        }
    }

    /// The shell command a Claude Code hook runs.
    fn claude_hook_command(&self) -> String {
        let mut words = Vec::new();
        if let Some(home) = &self.roundtable_home {
            words.push(format!(
                "ROUNDTABLE_HOME={}",
                shell_word(&home.display().to_string())
            ));
        }
        words.push(shell_word(&self.bin()));
        words.extend(["hook", "claude", "--agent"].map(str::to_owned));
        words.push(shell_word(&self.handle));
        words.join(" ")
    }

    /// How long Claude Code lets each hook run: the hook's own wait and a margin.
    fn claude_timeout(&self, event: &str) -> u64 {
        match event {
            "Stop" => self.settings.listen_s + 60,
            "PermissionRequest" => self.settings.permission_wait_s + 30,
            _ => 30,
        }
    }

    /// Codex's `notify` command: ours, then (after `--then`) the one the person had.
    fn codex_notify(&self, previous: Option<&Value>) -> Value {
        let mut argv: Vec<Value> = Vec::new();
        if let Some(home) = &self.roundtable_home {
            argv.push(json!("env"));
            argv.push(json!(format!("ROUNDTABLE_HOME={}", home.display())));
        }
        argv.push(json!(self.bin()));
        for word in ["hook", "codex", "--agent", &self.handle] {
            argv.push(json!(word));
        }
        if let Some(Value::Array(previous)) = previous
            && !previous.is_empty()
        {
            argv.push(json!("--then"));
            argv.extend(previous.iter().cloned());
        }
        Value::Array(argv)
    }
}

/// Plans the edits onboarding makes for `cli`; `read` gives a file's current text (`None`
/// when it does not exist).
pub fn plan(
    env: &Environment,
    cli: AgentCli,
    project: Option<&Path>,
    wiring: &Wiring,
    read: impl Fn(&Path) -> std::io::Result<Option<String>>,
) -> Result<Vec<PlannedFile>, PlanError> {
    let files = env.config_files(cli, project);
    let read = |path: &Path| {
        read(path).map_err(|source| PlanError::Read {
            path: path.display().to_string(),
            source,
        })
    };
    let mut planned = Vec::new();
    match cli {
        AgentCli::Claude => {
            let (mcp, settings) = (&files[0], &files[1]);
            let before = read(mcp)?;
            let entry = json!({
                "type": "stdio", "command": wiring.bin(), "args": wiring.mcp_args(), "env": wiring.env(),
            });
            planned.push(json_server(mcp, before, &entry)?);
            let before = read(settings)?;
            planned.push(claude_hooks(settings, before, wiring)?);
        }
        AgentCli::Codex => {
            let config = &files[0];
            let before = read(config)?;
            planned.push(codex_config(config, before, wiring)?);
        }
        AgentCli::Gemini => {
            let settings = &files[0];
            let before = read(settings)?;
            let entry = json!({
                "command": wiring.bin(), "args": wiring.mcp_args(), "env": wiring.env(),
                // Milliseconds: waiting for messages or an answer takes up to ten minutes.
                "timeout": (crate::agent_work::LONGEST_WAIT.as_millis() as u64) + 60_000,
            });
            planned.push(json_server(settings, before, &entry)?);
        }
        other => return Err(EditError::Unsupported(other).into()),
    }
    planned.retain(|file| file.before.as_deref() != Some(file.after.as_str()));
    Ok(planned)
}

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Edit(#[from] EditError),
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// `mcpServers.roundtable` in a JSON configuration.
fn json_server(
    path: &Path,
    before: Option<String>,
    entry: &Value,
) -> Result<PlannedFile, EditError> {
    let text = before.clone().unwrap_or_default();
    let present = json_text::value_at(&text, &["mcpServers", SERVER_NAME])
        .map_err(|error| unparsable(path, error))?;
    let mut planned = PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text.clone(),
        undo: Vec::new(),
    };
    match present {
        Some(existing) if existing == *entry => {}
        Some(existing) => {
            return Err(EditError::Taken {
                path: path.display().to_string(),
                other: existing["args"]
                    .as_array()
                    .and_then(|args| args.last())
                    .and_then(Value::as_str)
                    .unwrap_or("another agent")
                    .to_owned(),
            });
        }
        None => {
            let (after, inserted) =
                json_text::insert_member(&text, &["mcpServers"], SERVER_NAME, entry)
                    .map_err(|error| unparsable(path, error))?;
            planned.after = after;
            planned.undo.push(Undo::Json { inserted });
        }
    }
    Ok(planned)
}

/// Claude Code's hooks in a `settings.json`: one group per event, appended after any the
/// person has.
fn claude_hooks(
    path: &Path,
    before: Option<String>,
    wiring: &Wiring,
) -> Result<PlannedFile, EditError> {
    let mut text = before.clone().unwrap_or_default();
    let command = wiring.claude_hook_command();
    let mut undo = Vec::new();
    for (event, matcher) in CLAUDE_HOOKS {
        let existing = json_text::value_at(&text, &["hooks", event])
            .map_err(|error| unparsable(path, error))?;
        let ours_there = existing
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(|groups| {
                groups.iter().any(|group| {
                    group["hooks"].as_array().is_some_and(|hooks| {
                        hooks.iter().any(|hook| hook["command"] == json!(command))
                    })
                })
            });
        if ours_there {
            continue;
        }
        let mut group = json!({
            "hooks": [{"type": "command", "command": command, "timeout": wiring.claude_timeout(event)}],
        });
        if let Some(matcher) = matcher {
            group["matcher"] = json!(matcher);
        }
        let (after, inserted) = json_text::append_element(&text, &["hooks", event], &group)
            .map_err(|error| unparsable(path, error))?;
        text = after;
        undo.push(Undo::Json { inserted });
    }
    Ok(PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text,
        undo,
    })
}

/// Codex's `config.toml`: `[mcp_servers.roundtable]` and `notify`, chained with the
/// person's own notify program.
fn codex_config(
    path: &Path,
    before: Option<String>,
    wiring: &Wiring,
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
    let previous = toml_text::top_level_value(&text, "notify")
        .map_err(|error| unparsable(path, error))?
        .map(|value| json_of_toml(&value));
    let ours = wiring.codex_notify(None);
    let already = previous
        .as_ref()
        .and_then(Value::as_array)
        .is_some_and(|argv| {
            ours.as_array()
                .is_some_and(|ours| argv.len() >= ours.len() && argv[..ours.len()] == ours[..])
        });
    if !already {
        let notify = wiring.codex_notify(previous.as_ref());
        let (after, set) =
            toml_text::set_top_level(&text, "notify", &toml_value(&notify).to_string())
                .map_err(|error| unparsable(path, error))?;
        text = after;
        undo.push(Undo::TomlKey { set });
    }
    Ok(PlannedFile {
        path: path.to_path_buf(),
        before,
        after: text,
        undo,
    })
}

/// Undoes `undo` (edits made in that order) on `text`; the person's later changes stay.
pub fn undo_all(path: &Path, text: &str, undo: &[Undo]) -> Result<String, EditError> {
    let mut text = text.to_owned();
    for edit in undo.iter().rev() {
        text =
            match edit {
                Undo::Json { inserted } => json_text::remove_inserted(&text, inserted)
                    .map_err(|error| unparsable(path, error)),
                Undo::TomlTable { appended } => toml_text::remove_appended(&text, appended)
                    .map_err(|error| unparsable(path, error)),
                Undo::TomlKey { set } => {
                    toml_text::revert_top_level(&text, set).map_err(|error| unparsable(path, error))
                }
            }?;
    }
    Ok(text)
}

/// The lines added and removed between two texts, for a person to read: the edits are
/// insertions, so the common beginning and end are set aside.
pub fn changed_lines(before: &str, after: &str) -> (Vec<String>, Vec<String>) {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let removed = old[prefix..old.len() - suffix]
        .iter()
        .map(|line| (*line).to_owned())
        .collect();
    let added = new[prefix..new.len() - suffix]
        .iter()
        .map(|line| (*line).to_owned())
        .collect();
    (added, removed)
}

/// A JSON value as a TOML value (objects as inline tables; `null` is dropped by callers).
fn toml_value(value: &Value) -> toml_edit::Value {
    match value {
        Value::String(text) => text.as_str().into(),
        Value::Bool(flag) => (*flag).into(),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => integer.into(),
            None => number.as_f64().unwrap_or_default().into(),
        },
        Value::Array(items) => {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(toml_value(item));
            }
            toml_edit::Value::Array(array)
        }
        Value::Object(_) => toml_edit::Value::InlineTable(inline_table(value)),
        Value::Null => "".into(),
    }
}

fn inline_table(value: &Value) -> toml_edit::InlineTable {
    let mut table = toml_edit::InlineTable::new();
    if let Value::Object(members) = value {
        for (key, member) in members {
            if !member.is_null() {
                table.insert(key, toml_value(member));
            }
        }
    }
    table
}

/// A TOML value as JSON, to compare with what we write.
fn json_of_toml(value: &toml_edit::Value) -> Value {
    match value {
        toml_edit::Value::String(text) => json!(text.value()),
        toml_edit::Value::Integer(integer) => json!(integer.value()),
        toml_edit::Value::Float(float) => json!(float.value()),
        toml_edit::Value::Boolean(flag) => json!(flag.value()),
        toml_edit::Value::Datetime(datetime) => json!(datetime.value().to_string()),
        toml_edit::Value::Array(array) => Value::Array(array.iter().map(json_of_toml).collect()),
        toml_edit::Value::InlineTable(table) => Value::Object(
            table
                .iter()
                .map(|(key, value)| (key.to_owned(), json_of_toml(value)))
                .collect(),
        ),
    }
}

fn json_of_toml_table(table: &toml_edit::Table) -> Value {
    Value::Object(
        table
            .iter()
            .filter_map(|(key, item)| {
                let value = match item {
                    toml_edit::Item::Value(value) => json_of_toml(value),
                    toml_edit::Item::Table(table) => json_of_toml_table(table),
                    _ => return None,
                };
                Some((key.to_owned(), value))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn wiring(handle: &str) -> Wiring {
        Wiring {
            handle: handle.into(),
            roundtable: PathBuf::from("/opt/round table/bin/roundtable"),
            roundtable_home: Some(PathBuf::from("/home/dana/.rt")),
            settings: HookSettings::default(),
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
    fn gemini_gets_a_server_with_a_timeout_long_enough_to_wait() {
        let mut files = HashMap::new();
        let path = PathBuf::from("/home/dana/.gemini/settings.json");
        files.insert(
            path.clone(),
            "// Gemini CLI settings\n{\n  \"theme\": \"GitHub\"\n}\n".to_owned(),
        );
        onboard(&mut files, AgentCli::Gemini, None, &wiring("dana/helper")).unwrap();
        assert!(files[&path].starts_with("// Gemini CLI settings\n{\n  \"theme\": \"GitHub\""));
        let server = json_text::value_at(&files[&path], &["mcpServers", SERVER_NAME])
            .unwrap()
            .unwrap();
        assert_eq!(server["timeout"], 660_000);
        assert_eq!(server["args"], json!(["mcp", "--agent", "dana/helper"]));
    }

    #[test]
    fn codex_keeps_the_persons_notify_program_after_ours() {
        let mut files = HashMap::new();
        let path = PathBuf::from("/home/dana/.codex/config.toml");
        let original = "model = \"o3\"\nnotify = [\"notify-send\", \"codex\"]\n";
        files.insert(path.clone(), original.to_owned());
        let planned = onboard(&mut files, AgentCli::Codex, None, &wiring("dana/reviewer")).unwrap();
        let config: toml::Table = toml::from_str(&files[&path]).unwrap();
        let notify: Vec<&str> = config["notify"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            notify,
            [
                "env",
                "ROUNDTABLE_HOME=/home/dana/.rt",
                "/opt/round table/bin/roundtable",
                "hook",
                "codex",
                "--agent",
                "dana/reviewer",
                "--then",
                "notify-send",
                "codex"
            ]
        );
        assert_eq!(
            config["mcp_servers"]["roundtable"]["tool_timeout_sec"].as_integer(),
            Some(660)
        );
        // Onboarding again neither chains ours after itself nor adds a second table.
        assert!(
            onboard(&mut files, AgentCli::Codex, None, &wiring("dana/reviewer"))
                .unwrap()
                .is_empty()
        );
        let undone = undo_all(&path, &files[&path], &planned[0].undo).unwrap();
        assert_eq!(undone, original);
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
}
