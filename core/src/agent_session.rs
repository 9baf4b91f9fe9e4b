//! Whether a `roundtable` process runs inside an agent CLI's session, where it must never
//! act as the person.
//!
//! Why: an agent CLI runs what its model says as the person's Unix user, so a prompt
//! injected into a session can run `roundtable answer q-… Allow` and approve its own
//! permission request, or accept a contact, with the person's profile. The person answers
//! from the app, a notification or another device; a process started inside a session is
//! refused (see `docs/security.md`, which also says what this cannot stop).
//!
//! A session is known by [`SESSION_ENV`] (set by onboarding in the CLI's own environment
//! settings, and by the runner on the CLIs it starts) or [`crate::runner::AGENT_ENV`], in
//! this process's environment or in any ancestor's: a session that drops the variable
//! before running `roundtable` still has it in the shell or CLI process it came from. An
//! ancestor that is an agent CLI itself (Claude Code, Codex, Gemini CLI) marks one too,
//! for the CLIs whose settings have no place to set it.

use std::path::Path;

/// Set in every agent session's environment: its value names the agent, or the CLI.
pub const SESSION_ENV: &str = "ROUNDTABLE_AGENT_SESSION";

/// How many ancestors are looked at (a session's shell is within a few of its CLI).
const MAX_ANCESTORS: usize = 32;

/// One process above this one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ancestor {
    pub pid: u32,
    /// Its command line, as started.
    pub argv: Vec<String>,
    /// The marker variables in its environment, as started (name, value).
    pub marks: Vec<(String, String)>,
}

/// What showed that this process runs in an agent session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// A marker variable in this process's own environment.
    Environment { name: String, value: String },
    /// A marker variable in an ancestor's environment.
    Ancestor {
        pid: u32,
        name: String,
        value: String,
    },
    /// An ancestor that is an agent CLI.
    AgentCli { pid: u32, cli: &'static str },
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Evidence::Environment { name, value } => write!(f, "{name}={value} is set"),
            Evidence::Ancestor { pid, name, value } => {
                write!(f, "process {pid} above it has {name}={value}")
            }
            Evidence::AgentCli { pid, cli } => write!(f, "process {pid} above it is {cli}"),
        }
    }
}

/// The variables that mark a session.
fn is_mark(name: &str) -> bool {
    name == SESSION_ENV || name == crate::runner::AGENT_ENV
}

/// The agent CLI a command line runs, if any: by its program's name, or by the script a
/// runtime (node, python) was given.
pub fn agent_cli_of(argv: &[String]) -> Option<&'static str> {
    let program = argv.first()?;
    if let Some(cli) = cli_named(program) {
        return Some(cli);
    }
    let runtime = Path::new(program)
        .file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| {
            ["node", "bun", "deno", "python"]
                .iter()
                .any(|r| name.starts_with(r))
        });
    // The script a runtime runs (its first argument that is not an option).
    let script = argv[1..].iter().find(|word| !word.starts_with('-'))?;
    runtime.then(|| cli_named(script)).flatten()
}

/// The agent CLI an executable or script path is, by its name or its npm package.
fn cli_named(path: &str) -> Option<&'static str> {
    let name = Path::new(path).file_name()?.to_str()?;
    match name {
        "claude" => Some("Claude Code"),
        "codex" => Some("Codex"),
        "gemini" => Some("Gemini CLI"),
        _ if name.starts_with("codex-") => Some("Codex"),
        _ if path.contains("/@anthropic-ai/claude-code/") => Some("Claude Code"),
        _ if path.contains("/@openai/codex/") => Some("Codex"),
        _ if path.contains("/@google/gemini-cli/") => Some("Gemini CLI"),
        _ => None,
    }
}

/// Whether `own` (this process's environment) and `ancestors` (nearest first) show an
/// agent session.
pub fn find<'a>(
    own: impl IntoIterator<Item = (&'a str, &'a str)>,
    ancestors: &[Ancestor],
) -> Option<Evidence> {
    for (name, value) in own {
        if is_mark(name) && !value.is_empty() {
            return Some(Evidence::Environment {
                name: name.to_owned(),
                value: value.to_owned(),
            });
        }
    }
    for ancestor in ancestors {
        if let Some((name, value)) = ancestor
            .marks
            .iter()
            .find(|(name, value)| is_mark(name) && !value.is_empty())
        {
            return Some(Evidence::Ancestor {
                pid: ancestor.pid,
                name: name.clone(),
                value: value.clone(),
            });
        }
        if let Some(cli) = agent_cli_of(&ancestor.argv) {
            return Some(Evidence::AgentCli {
                pid: ancestor.pid,
                cli,
            });
        }
    }
    None
}

/// This process's evidence of an agent session, if any.
pub fn current() -> Option<Evidence> {
    let own: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect();
    find(
        own.iter()
            .map(|(name, value)| (name.as_str(), value.as_str())),
        &ancestors(),
    )
}

/// The processes above this one, nearest first, as far as `/proc` shows them (none where
/// there is no `/proc`).
pub fn ancestors() -> Vec<Ancestor> {
    let mut found = Vec::new();
    let mut pid = std::process::id();
    while found.len() < MAX_ANCESTORS {
        let Some(parent) = parent_of(pid) else {
            break;
        };
        if parent <= 1 {
            break;
        }
        let dir = Path::new("/proc").join(parent.to_string());
        let argv = std::fs::read(dir.join("cmdline"))
            .map(|bytes| nul_separated(&bytes))
            .unwrap_or_default();
        let marks = std::fs::read(dir.join("environ"))
            .map(|bytes| {
                nul_separated(&bytes)
                    .into_iter()
                    .filter_map(|entry| {
                        let (name, value) = entry.split_once('=')?;
                        is_mark(name).then(|| (name.to_owned(), value.to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        found.push(Ancestor {
            pid: parent,
            argv,
            marks,
        });
        pid = parent;
    }
    found
}

/// The parent of `pid`, from `/proc/PID/stat` (after the command's closing parenthesis,
/// which may itself hold spaces and parentheses).
pub fn parent_of(pid: u32) -> Option<u32> {
    parent_in_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parent_in_stat(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// The words of a `/proc` file (each ends with a NUL; empty words are kept).
fn nul_separated(bytes: &[u8]) -> Vec<String> {
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .strip_suffix(&[0])
        .unwrap_or(bytes)
        .split(|byte| *byte == 0)
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn agent_clis_are_known_by_their_program_or_their_script() {
        let cases: [(&[&str], Option<&str>); 11] = [
            (&["/usr/local/bin/claude", "-p", "hi"], Some("Claude Code")),
            (
                &["node", "/usr/lib/node_modules/.bin/codex", "exec"],
                Some("Codex"),
            ),
            (
                &["/opt/npm/lib/node_modules/@openai/codex/vendor/x/codex-x86_64-linux"],
                Some("Codex"),
            ),
            (
                &[
                    "node",
                    "/n/lib/node_modules/@google/gemini-cli/dist/index.js",
                ],
                Some("Gemini CLI"),
            ),
            (
                &["node", "/n/node_modules/@anthropic-ai/claude-code/cli.js"],
                Some("Claude Code"),
            ),
            (&["gemini"], Some("Gemini CLI")),
            (&["bash", "-c", "claude -p hi"], None),
            (&["/usr/bin/vim", "claude"], None),
            (
                &["python3", "-u", "/tests/agent-clis/claude", "-p"],
                Some("Claude Code"),
            ),
            (&["node", "/home/dana/app.js", "claude"], None),
            (&[], None),
        ];
        for (words, expected) in cases {
            assert_eq!(agent_cli_of(&argv(words)), expected, "{words:?}");
        }
    }

    #[test]
    fn a_mark_anywhere_up_the_tree_or_an_agent_cli_above_is_a_session() {
        let shell = Ancestor {
            pid: 40,
            argv: argv(&[
                "bash",
                "-c",
                "env -u ROUNDTABLE_AGENT_SESSION roundtable answer",
            ]),
            marks: vec![(SESSION_ENV.to_owned(), "dana/writer".to_owned())],
        };
        let terminal = Ancestor {
            pid: 10,
            argv: argv(&["/usr/bin/gnome-terminal"]),
            marks: Vec::new(),
        };
        let codex = Ancestor {
            pid: 20,
            argv: argv(&["/usr/bin/codex"]),
            marks: Vec::new(),
        };
        assert_eq!(find([], std::slice::from_ref(&terminal)), None);
        assert_eq!(
            find([("PATH", "/bin"), (SESSION_ENV, "1")], &[]),
            Some(Evidence::Environment {
                name: SESSION_ENV.to_owned(),
                value: "1".to_owned()
            })
        );
        // An empty value marks nothing (a person clearing it in their own shell).
        assert_eq!(
            find([(SESSION_ENV, "")], std::slice::from_ref(&terminal)),
            None
        );
        assert_eq!(
            find([], &[shell, terminal.clone()]),
            Some(Evidence::Ancestor {
                pid: 40,
                name: SESSION_ENV.to_owned(),
                value: "dana/writer".to_owned()
            })
        );
        assert_eq!(
            find([], &[terminal, codex]),
            Some(Evidence::AgentCli {
                pid: 20,
                cli: "Codex"
            })
        );
        let runner_child = Ancestor {
            pid: 7,
            argv: argv(&["python3", "/tmp/agent.py"]),
            marks: vec![(crate::runner::AGENT_ENV.to_owned(), "dana/x".to_owned())],
        };
        assert!(matches!(
            find([], &[runner_child]),
            Some(Evidence::Ancestor { pid: 7, .. })
        ));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_sees_its_own_ancestors() {
        // The test runner is above the test: the walk reads real `/proc` entries.
        let ancestors = ancestors();
        assert!(!ancestors.is_empty());
        assert!(ancestors.iter().all(|ancestor| ancestor.pid > 1));
        assert_eq!(ancestors[0].pid, parent_of(std::process::id()).unwrap());
    }

    #[test]
    fn a_parent_is_read_past_a_command_holding_parentheses() {
        assert_eq!(parent_in_stat("123 (a) b (c)) S 77 123 123"), Some(77));
        assert_eq!(parent_in_stat("123 (bash) S 1 123"), Some(1));
        assert_eq!(parent_in_stat("123 (cut"), None);
        assert_eq!(parent_in_stat("123 (x) S"), None);
    }

    #[test]
    fn proc_words_keep_empty_arguments() {
        assert_eq!(
            nul_separated(b"codex\0-c\0\0exec\0"),
            argv(&["codex", "-c", "", "exec"])
        );
        assert_eq!(nul_separated(b""), Vec::<String>::new());
    }
}
