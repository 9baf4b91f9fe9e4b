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
//! ancestor that is an agent CLI itself (Claude Code, Codex, Gemini CLI, OpenCode, GitHub
//! Copilot CLI) marks one too, for the CLIs whose settings have no place to set it.

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
    let program = program.replace('\\', "/").to_lowercase();
    let runtime = program.rsplit('/').next().is_some_and(|name| {
        ["node", "bun", "deno", "python"]
            .iter()
            .any(|r| name.starts_with(r))
    });
    // The script a runtime runs (its first argument that is not an option).
    let script = argv[1..].iter().find(|word| !word.starts_with('-'))?;
    runtime.then(|| cli_named(script)).flatten()
}

/// The agent CLI an executable or script path is, by its name or its npm package.
///
/// Windows names arrive as `claude.exe`, `Codex.EXE` or `codex.cmd`, with either slash,
/// and macOS and Windows file names are case-insensitive: a name is compared lowercased,
/// its slashes forward, without a Windows program's extension.
fn cli_named(path: &str) -> Option<&'static str> {
    let path = path.replace('\\', "/").to_lowercase();
    let file = path.rsplit('/').next()?;
    let name = [".exe", ".cmd", ".bat", ".ps1"]
        .iter()
        .find_map(|extension| file.strip_suffix(extension))
        .unwrap_or(file);
    match name {
        "claude" => Some("Claude Code"),
        "codex" => Some("Codex"),
        "gemini" => Some("Gemini CLI"),
        "opencode" => Some("OpenCode"),
        "copilot" => Some("GitHub Copilot CLI"),
        _ if name.starts_with("codex-") => Some("Codex"),
        // Copilot's native executable, as the npm package links it (`copilot-linux-x64`);
        // not `copilot-language-server`, an editor's.
        _ if ["linux-", "darwin-", "win32-"]
            .iter()
            .any(|os| name.starts_with(&format!("copilot-{os}"))) =>
        {
            Some("GitHub Copilot CLI")
        }
        _ if path.contains("/@anthropic-ai/claude-code/") => Some("Claude Code"),
        _ if path.contains("/@openai/codex/") => Some("Codex"),
        _ if path.contains("/@google/gemini-cli/") => Some("Gemini CLI"),
        _ if path.contains("/opencode-ai/") => Some("OpenCode"),
        _ if path.contains("/@github/copilot") => Some("GitHub Copilot CLI"),
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

/// The processes above this one, nearest first, with the marks in their environments
/// (`roundtable_platform::process_tree` says how each OS shows them).
pub fn ancestors() -> Vec<Ancestor> {
    roundtable_platform::process_tree::ancestors(MAX_ANCESTORS)
        .into_iter()
        .map(|process| Ancestor {
            pid: process.pid,
            argv: process.argv,
            marks: process
                .env
                .into_iter()
                .filter(|(name, _)| is_mark(name))
                .collect(),
        })
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
        let cases: [(&[&str], Option<&str>); 23] = [
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
            (
                &[
                    "/n/lib/node_modules/opencode-ai/node_modules/opencode-linux-x64/bin/opencode",
                    "run",
                ],
                Some("OpenCode"),
            ),
            (
                &["node", "/n/lib/node_modules/opencode-ai/bin/opencode.js"],
                Some("OpenCode"),
            ),
            (
                &[
                    "/n/lib/node_modules/@github/copilot/node_modules/@github/copilot-linux-x64/copilot",
                    "-p",
                ],
                Some("GitHub Copilot CLI"),
            ),
            (
                &["node", "/n/lib/node_modules/@github/copilot/npm-loader.js"],
                Some("GitHub Copilot CLI"),
            ),
            (
                &["copilot-darwin-arm64", "--acp"],
                Some("GitHub Copilot CLI"),
            ),
            (&["copilot-language-server", "--stdio"], None),
            (&["bash", "-c", "claude -p hi"], None),
            (&["/usr/bin/vim", "claude"], None),
            (
                &["python3", "-u", "/tests/agent-clis/claude", "-p"],
                Some("Claude Code"),
            ),
            (&["node", "/home/dana/app.js", "claude"], None),
            (&[], None),
            // Windows: extensions, either case, backslashes, npm's shims.
            (
                &[r"C:\Users\dana\AppData\Roaming\npm\Claude.EXE", "-p"],
                Some("Claude Code"),
            ),
            (
                &[r"C:\Users\dana\AppData\Roaming\npm\codex.cmd"],
                Some("Codex"),
            ),
            (
                &[
                    r"C:\Program Files\nodejs\node.exe",
                    r"C:\Users\dana\AppData\Roaming\npm\node_modules\@google\gemini-cli\dist\index.js",
                ],
                Some("Gemini CLI"),
            ),
            (
                &[
                    r"C:\npm\node_modules\@openai\codex\vendor\x86_64-pc-windows-msvc\codex\codex-x86_64-pc-windows-msvc.exe",
                ],
                Some("Codex"),
            ),
            (&[r"C:\Windows\System32\cmd.exe", "/C", "claude"], None),
            (
                &["/Applications/Claude.app/Contents/MacOS/claude"],
                Some("Claude Code"),
            ),
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

    // Under Wine the test's parent is a Linux process Windows cannot see; the walk itself is
    // tested on every OS in `roundtable_platform::process_tree`.
    #[cfg(unix)]
    #[test]
    fn this_process_sees_its_own_ancestors() {
        // The test runner is above the test: the walk reads the OS's real process table.
        let ancestors = ancestors();
        assert!(!ancestors.is_empty());
        assert!(ancestors.iter().all(|ancestor| ancestor.pid > 1));
        assert_eq!(
            ancestors[0].pid,
            std::os::unix::process::parent_id(),
            "the nearest ancestor is the parent"
        );
    }
}
