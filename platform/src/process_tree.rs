//! The processes above this one, as the OS shows them: each one's id, command line and
//! environment.
//!
//! Why: a `roundtable` started inside an agent CLI's session must never act as the person
//! (`docs/security.md`), and a session is known by a variable in the environment of this
//! process or of a process above it, or by an agent CLI above it. Each OS shows other
//! processes its own way:
//!
//! - Linux: `/proc/PID/stat` (the parent), `cmdline` and `environ` (as the process started).
//! - macOS and Windows, through `sysinfo`: on macOS `sysctl` (`KERN_PROC_PID` for the parent,
//!   `KERN_PROCARGS2` for the command line and the environment the process started with); on
//!   Windows a snapshot of the processes (the parents) and each one's environment block (its
//!   command line and environment as they are now). A Windows parent id may name a process
//!   that ended and whose id was given to a newer one: a parent that started after its child
//!   is no parent.
//!
//! Another user's process, or one the OS keeps from us, shows no command line or
//! environment; the walk goes on above it where it can.

/// A process above this one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    /// Its command line.
    pub argv: Vec<String>,
    /// Its environment (name, value).
    pub env: Vec<(String, String)>,
}

/// The processes above this one, nearest first, at most `limit`; the walk ends at the
/// system's first process, or at one whose parent cannot be known.
pub fn ancestors(limit: usize) -> Vec<Process> {
    imp::ancestors(limit)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::path::Path;

    use super::Process;

    pub(super) fn ancestors(limit: usize) -> Vec<Process> {
        let mut found = Vec::new();
        let mut pid = std::process::id();
        while found.len() < limit {
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
            let env = std::fs::read(dir.join("environ"))
                .map(|bytes| {
                    nul_separated(&bytes)
                        .into_iter()
                        .filter_map(|entry| {
                            let (name, value) = entry.split_once('=')?;
                            Some((name.to_owned(), value.to_owned()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            found.push(Process {
                pid: parent,
                argv,
                env,
            });
            pid = parent;
        }
        found
    }

    /// The parent of `pid`, from `/proc/PID/stat` (after the command's closing parenthesis,
    /// which may itself hold spaces and parentheses).
    fn parent_of(pid: u32) -> Option<u32> {
        parent_in_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    pub(super) fn parent_in_stat(stat: &str) -> Option<u32> {
        let after = &stat[stat.rfind(')')? + 1..];
        after.split_whitespace().nth(1)?.parse().ok()
    }

    /// The words of a `/proc` file (each ends with a NUL; empty words are kept).
    pub(super) fn nul_separated(bytes: &[u8]) -> Vec<String> {
        if bytes.is_empty() {
            return Vec::new();
        }
        let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
        bytes
            .split(|&b| b == 0)
            .map(|word| String::from_utf8_lossy(word).into_owned())
            .collect()
    }
}

#[cfg(any(target_os = "macos", windows))]
mod imp {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};

    use super::Process;

    pub(super) fn ancestors(limit: usize) -> Vec<Process> {
        // No process table to read (the OS refused): no ancestors known.
        let Ok(mut system) = System::new() else {
            return Vec::new();
        };
        let wanted = ProcessRefreshKind::nothing()
            .with_cmd(UpdateKind::Always)
            .with_environ(UpdateKind::Always);
        let mut found = Vec::new();
        let mut pid = Pid::from_u32(std::process::id());
        system.refresh_processes_specifics(ProcessesToUpdate::Some(&[pid]), true, wanted);
        while found.len() < limit {
            let Some(this) = system.process(pid) else {
                break;
            };
            let Some(parent) = this.parent() else {
                break;
            };
            // The system's own processes (0 and 4 on Windows, launchd's 1 on macOS).
            if parent.as_u32() <= 1 || (cfg!(windows) && parent.as_u32() == 4) {
                break;
            }
            let started = this.start_time();
            system.refresh_processes_specifics(ProcessesToUpdate::Some(&[parent]), true, wanted);
            let Some(above) = system.process(parent) else {
                break;
            };
            // A parent that started after its child is a newer process given a dead
            // parent's id (Windows reuses ids; start times are in whole seconds).
            if above.start_time() > started {
                break;
            }
            let text = |value: &std::ffi::OsStr| value.to_string_lossy().into_owned();
            found.push(Process {
                pid: parent.as_u32(),
                argv: above.cmd().iter().map(|word| text(word)).collect(),
                env: above
                    .environ()
                    .iter()
                    .filter_map(|entry| {
                        let entry = text(entry);
                        let (name, value) = entry.split_once('=')?;
                        Some((name.to_owned(), value.to_owned()))
                    })
                    .collect(),
            });
            pid = parent;
        }
        found
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
mod imp {
    use super::Process;

    /// Elsewhere no process above this one is known.
    pub(super) fn ancestors(_limit: usize) -> Vec<Process> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    //! The test binary is its own child and grandchild: run again with
    //! `ROUNDTABLE_TEST_TREE_ROLE` set, its one test below plays the part, so the walk is
    //! checked on every OS with no program of the OS's.

    use std::io::Write as _;
    use std::process::{Command, Stdio};

    use super::*;

    const ROLE: &str = "ROUNDTABLE_TEST_TREE_ROLE";
    const MARK: &str = "ROUNDTABLE_TEST_TREE_MARK";

    fn again(role: &str) -> Command {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "--exact",
                "process_tree::tests::a_process_sees_the_command_line_and_environment_above_it",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, role)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        command
    }

    #[test]
    fn a_process_sees_the_command_line_and_environment_above_it() {
        match std::env::var(ROLE).as_deref() {
            // The middle process: carries the mark, starts the walker without it, passes on
            // what it found.
            Ok("middle") => {
                let walked = again("walker")
                    .env_remove(MARK)
                    .stdout(Stdio::piped())
                    .output()
                    .unwrap();
                std::io::stdout().write_all(&walked.stdout).unwrap();
                return;
            }
            // The walker: says what it sees of its parent.
            Ok("walker") => {
                let above = ancestors(4);
                let parent = above.first().expect("a parent");
                let mark = parent
                    .env
                    .iter()
                    .find(|(name, _)| name == MARK)
                    .map(|(_, value)| value.clone())
                    .unwrap_or_default();
                let role = parent
                    .env
                    .iter()
                    .find(|(name, _)| name == ROLE)
                    .map(|(_, value)| value.clone())
                    .unwrap_or_default();
                let runs_tests = parent.argv.iter().any(|word| word == "--exact");
                writeln!(
                    std::io::stdout(),
                    "WALKED mark={mark} role={role} argv={runs_tests}"
                )
                .unwrap();
                return;
            }
            _ => {}
        }
        let out = again("middle")
            .env(MARK, "seen-from-below")
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.contains("WALKED mark=seen-from-below role=middle argv=true"),
            "{out}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_stat_line_s_parent_follows_the_command_whatever_it_holds() {
        assert_eq!(
            imp::parent_in_stat("4242 (a) b (c)) S 17 4242 4242 0 -1"),
            Some(17)
        );
        assert_eq!(imp::nul_separated(b"node\0cli.js\0"), ["node", "cli.js"]);
        assert!(imp::nul_separated(b"").is_empty());
    }
}
