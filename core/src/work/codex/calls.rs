//! Tool calls: what a call is by its name, and what it says — an `update_plan`'s task list,
//! or the files of an `apply_patch`, given to the tool itself or to a shell (as an argument
//! or a heredoc, after a `cd`).

use super::*;

/// What a tool call is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CallKind {
    /// The name is not known yet (it comes after the arguments in this line).
    Unknown,
    Plan,
    Patch,
    /// A command runner, which may run `apply_patch`.
    Shell,
    Other,
}

impl CallKind {
    pub(super) fn of(name: Option<&str>) -> CallKind {
        match name {
            None => CallKind::Unknown,
            Some("update_plan") => CallKind::Plan,
            Some("apply_patch") => CallKind::Patch,
            Some("shell" | "container.exec" | "shell_command" | "exec_command" | "local_shell") => {
                CallKind::Shell
            }
            Some(_) => CallKind::Other,
        }
    }
}

/// `update_plan`'s arguments.
#[derive(Deserialize)]
pub(super) struct PlanArguments {
    pub(super) plan: Vec<PlanStep>,
}

#[derive(Deserialize)]
pub(super) struct PlanStep {
    pub(super) step: String,
    pub(super) status: String,
}

/// The plan of an `update_plan` call, or `None` when Codex would have refused it.
pub(super) fn plan_tasks(arguments: &str) -> Option<Vec<TaskItem>> {
    let arguments: PlanArguments = serde_json::from_str(arguments).ok()?;
    arguments
        .plan
        .into_iter()
        .map(|step| {
            let status = match step.status.as_str() {
                "pending" => TaskStatus::Pending,
                "in_progress" => TaskStatus::InProgress,
                "completed" => TaskStatus::Completed,
                _ => return None,
            };
            Some(TaskItem {
                id: None,
                title: step.step,
                status,
                active_form: None,
            })
        })
        .collect()
}

/// The patch of an `apply_patch` `function_call`'s arguments (`{"input": …}`, or `patch`).
pub(super) fn patch_from_arguments(arguments: &str) -> Option<String> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct PatchArguments<'a> {
        #[serde(borrow)]
        input: LenientStr<'a>,
        #[serde(borrow)]
        patch: LenientStr<'a>,
    }
    let arguments: PatchArguments<'_> = serde_json::from_str(arguments).ok()?;
    arguments
        .input
        .into_owned()
        .or(arguments.patch.into_owned())
}

/// A patch that a shell call runs through `apply_patch`, and where it runs.
#[derive(Debug, PartialEq)]
pub(super) struct ShellPatch {
    pub(super) patch: String,
    /// The directory the command runs in, relative to the turn's: `workdir`, then a leading
    /// `cd DIR &&` of the script.
    pub(super) dir: Option<String>,
}

/// The patch a shell call's arguments apply, if they run `apply_patch`: `{"command":
/// ["apply_patch", PATCH]}`, `{"command": ["bash", "-lc", SCRIPT]}`, `{"command": SCRIPT}`
/// or `{"cmd": SCRIPT}`, where SCRIPT runs `apply_patch` on a heredoc.
pub(super) fn shell_patch(arguments: &str) -> Option<ShellPatch> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct ShellArguments<'a> {
        command: Command,
        #[serde(borrow)]
        cmd: LenientStr<'a>,
        #[serde(borrow)]
        workdir: LenientStr<'a>,
    }
    let arguments: ShellArguments<'_> = serde_json::from_str(arguments).ok()?;
    let workdir = arguments.workdir.into_owned();
    let (patch, cd) = match (arguments.command, arguments.cmd.0) {
        (Command::Argv(argv), _) => match argv.as_slice() {
            [program, patch, ..] if is_apply_patch(program) => (patch.clone(), None),
            [.., script] => script_patch(script)?,
            [] => return None,
        },
        (Command::Script(script), _) => script_patch(&script)?,
        (Command::Absent, Some(script)) => script_patch(&script)?,
        (Command::Absent, None) => return None,
    };
    let dir = match (workdir, cd) {
        (Some(workdir), Some(cd)) => Some(paths::join(&workdir, &cd)),
        (workdir, cd) => workdir.or(cd),
    };
    patch
        .contains("*** Begin Patch")
        .then_some(ShellPatch { patch, dir })
}

pub(super) fn is_apply_patch(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    name == "apply_patch" || name == "applypatch"
}

/// The patch of a script that runs `apply_patch` (a heredoc), and the directory of a
/// leading `cd DIR &&`.
pub(super) fn script_patch(script: &str) -> Option<(String, Option<String>)> {
    let begin = script.find("*** Begin Patch")?;
    let before = &script[..begin];
    if !before.contains("apply_patch") && !before.contains("applypatch") {
        return None;
    }
    let rest = &script[begin..];
    let end = rest
        .find("*** End Patch")
        .map_or(rest.len(), |at| at + "*** End Patch".len());
    let cd = before
        .trim_start()
        .strip_prefix("cd ")
        .and_then(|after| after.split("&&").next())
        .map(|dir| dir.trim().trim_matches(['"', '\'']).to_owned())
        .filter(|dir| !dir.is_empty() && !dir.contains(char::is_whitespace));
    Some((rest[..end].to_owned(), cd))
}

/// A shell call's `command`: a script or an argument vector.
#[derive(Debug, Default)]
pub(super) enum Command {
    #[default]
    Absent,
    Script(String),
    Argv(Vec<String>),
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CommandVisitor;
        impl<'de> Visitor<'de> for CommandVisitor {
            type Value = Command;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a command")
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<Command, E> {
                Ok(Command::Script(value.to_owned()))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Command, A::Error> {
                let mut argv = Vec::new();
                while let Some(argument) = seq.next_element::<LenientStr<'_>>()? {
                    argv.push(argument.0.map(Cow::into_owned).unwrap_or_default());
                }
                Ok(Command::Argv(argv))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Command, A::Error> {
                drain_map(map)?;
                Ok(Command::Absent)
            }

            other_scalars_are_absent!(Command::Absent);
        }
        deserializer.deserialize_any(CommandVisitor)
    }
}

/// The files a patch changes, by its `*** Add File:`, `*** Update File:`, `*** Delete File:`
/// and `*** Move to:` headers, in order and once each, resolved against `dir`. A header must
/// start its line: inside an update hunk, a context line starts with a space.
pub(super) fn patch_paths(patch: &str, dir: Option<&str>) -> Vec<String> {
    const HEADERS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    let mut paths: Vec<String> = Vec::new();
    for line in patch.lines() {
        if !line.starts_with("*** ") {
            continue;
        }
        let Some(path) = HEADERS.iter().find_map(|header| line.strip_prefix(header)) else {
            continue;
        };
        let path = path.trim();
        if path.is_empty() {
            continue;
        }
        let path = paths::resolve(dir, path);
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}
