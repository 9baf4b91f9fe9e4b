//! A child process and whatever it starts, ended together.
//!
//! Why: an agent CLI is a launcher (Codex's npm package starts its native binary; Claude
//! Code and Gemini CLI start shells and MCP servers), so ending the child alone would leave
//! its own children running past a turn that ran out of time or a runner that stopped. On
//! Unix the child leads a process group of its own, and the group is killed. On Windows the
//! child is put in a Job Object that kills what is in it when it is closed: when the group
//! is ended or dropped, and also when the program holding it ends, however it ends (which a
//! Unix process group does not do).
//!
//! [`start_own_group`] prepares the command, [`ProcessGroup::of`] takes the child just
//! started; dropping the group ends it, [`ProcessGroup::release`] leaves what is left of it
//! running (the child ended by itself).

use tokio::process::{Child, Command};

/// Prepares `command` so that its child starts a group of its own (on Windows, with no
/// console window of its own either: the runner's turns run unseen, also from the app).
pub fn start_own_group(command: &mut Command) {
    #[cfg(unix)]
    {
        command.process_group(0);
    }
    #[cfg(windows)]
    {
        command.creation_flags(windows_sys::Win32::System::Threading::CREATE_NO_WINDOW);
    }
}

/// Starts `command` apart from this program's group, so that it outlives it (a hook's
/// waker, which must outlive the hook and the agent's turn): a process group of its own on
/// Unix; on Windows, a process of its own out of this program's Job Object (when the job
/// lets it break away; else in it) with no console.
pub fn spawn_detached(command: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    #[cfg(unix)]
    {
        std::os::unix::process::CommandExt::process_group(command, 0);
        command.spawn()
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt as _;
        use windows_sys::Win32::System::Threading::{
            CREATE_BREAKAWAY_FROM_JOB, CREATE_NEW_PROCESS_GROUP, DETACHED_PROCESS,
        };
        let apart = DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP;
        command.creation_flags(apart | CREATE_BREAKAWAY_FROM_JOB);
        match command.spawn() {
            // A job that does not let its processes break away refuses the flag.
            Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
                command.creation_flags(apart);
                command.spawn()
            }
            spawned => spawned,
        }
    }
}

/// A child's group: ended when dropped, unless released.
#[derive(Debug)]
pub struct ProcessGroup {
    group: Option<imp::Group>,
}

impl ProcessGroup {
    /// The group of `child`, just started from a command prepared with
    /// [`start_own_group`]. Fails when the child has already ended and been reaped.
    pub fn of(child: &Child) -> std::io::Result<ProcessGroup> {
        Ok(ProcessGroup {
            group: Some(imp::Group::of(child)?),
        })
    }

    /// Leaves whatever is left of the group running: the child ended by itself.
    pub fn release(mut self) {
        if let Some(group) = self.group.take() {
            group.release();
        }
    }

    /// Ends every process of the group now.
    pub fn end(mut self) {
        if let Some(group) = self.group.take() {
            group.end();
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            group.end();
        }
    }
}

#[cfg(unix)]
mod imp {
    use rustix::process::{Pid, Signal, kill_process_group};

    /// The group the child leads: its id is the child's.
    #[derive(Debug)]
    pub(super) struct Group(Pid);

    impl Group {
        pub(super) fn of(child: &tokio::process::Child) -> std::io::Result<Group> {
            child
                .id()
                .and_then(|pid| i32::try_from(pid).ok())
                .and_then(Pid::from_raw)
                .map(Group)
                .ok_or_else(|| std::io::Error::other("the child has already ended"))
        }

        pub(super) fn release(self) {}

        pub(super) fn end(self) {
            let _ = kill_process_group(self.0, Signal::KILL);
        }
    }
}

#[cfg(windows)]
#[allow(
    unsafe_code,
    reason = "Win32 Job Object calls; every handle is checked, then owned by an OwnedHandle"
)]
mod imp {
    use std::os::windows::io::{AsRawHandle as _, FromRawHandle as _, OwnedHandle};

    use windows_sys::Win32::Foundation::HANDLE;
    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT,
        JOB_OBJECT_LIMIT_BREAKAWAY_OK, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
        SetInformationJobObject, TerminateJobObject,
    };

    /// The Job Object the child was put in. Children may break away from it when they
    /// ask to (a Codex waker that must outlive the turn).
    #[derive(Debug)]
    pub(super) struct Group(OwnedHandle);

    impl Group {
        pub(super) fn of(child: &tokio::process::Child) -> std::io::Result<Group> {
            let process = child
                .raw_handle()
                .ok_or_else(|| std::io::Error::other("the child has already ended"))?;
            // SAFETY: no security attributes and no name: a new anonymous job object.
            let job = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
            if job.is_null() {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: `job` is a valid handle just returned to us, owned by nothing else.
            let job = Group(unsafe { OwnedHandle::from_raw_handle(job) });
            job.limit(JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_BREAKAWAY_OK)?;
            // SAFETY: both handles are valid: the job's is owned by `job`, the process's by
            // `child`, which the caller still holds.
            if unsafe { AssignProcessToJobObject(job.handle(), process as HANDLE) } == 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(job)
        }

        fn handle(&self) -> HANDLE {
            self.0.as_raw_handle() as HANDLE
        }

        /// Sets the job's limits to `flags` (and nothing else).
        fn limit(&self, flags: JOB_OBJECT_LIMIT) -> std::io::Result<()> {
            // SAFETY: the structure is plain data, for which all zeroes is a valid value.
            let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
            limits.BasicLimitInformation.LimitFlags = flags;
            // SAFETY: the handle is valid, and the pointer and size are those of `limits`,
            // which outlives the call.
            let set = unsafe {
                SetInformationJobObject(
                    self.handle(),
                    JobObjectExtendedLimitInformation,
                    (&raw const limits).cast(),
                    size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                )
            };
            if set == 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        }

        /// Closes the job without ending what is in it.
        pub(super) fn release(self) {
            let _ = self.limit(JOB_OBJECT_LIMIT_BREAKAWAY_OK);
        }

        pub(super) fn end(self) {
            // SAFETY: the handle is valid until `self` drops, after this call.
            unsafe {
                TerminateJobObject(self.handle(), 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The test binary is its own child and grandchild: run again with
    //! `ROUNDTABLE_TEST_GROUP_ROLE` set, its one test below plays the part and never
    //! returns, so the same test runs on every OS with no shell or tool of the OS's.

    use std::path::Path;
    use std::time::Duration;

    use super::*;

    const ROLE: &str = "ROUNDTABLE_TEST_GROUP_ROLE";
    const PID_FILE: &str = "ROUNDTABLE_TEST_GROUP_PID_FILE";

    fn again(role: &str, pid_file: &Path) -> Command {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "--exact",
                "process_group::tests::a_group_ends_with_the_child_s_own_children",
                "--nocapture",
            ])
            .env(ROLE, role)
            .env(PID_FILE, pid_file)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        command
    }

    /// Whether the process `pid` still runs.
    #[cfg(unix)]
    fn alive(pid: u32) -> bool {
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        rustix::process::test_kill_process(pid).is_ok()
    }

    #[cfg(windows)]
    #[allow(unsafe_code, reason = "asking Windows whether a process has ended")]
    fn alive(pid: u32) -> bool {
        use windows_sys::Win32::Foundation::{CloseHandle, WAIT_TIMEOUT};
        use windows_sys::Win32::System::Threading::{
            OpenProcess, PROCESS_SYNCHRONIZE, WaitForSingleObject,
        };
        // SAFETY: a plain query; a handle returned is closed below.
        let process = unsafe { OpenProcess(PROCESS_SYNCHRONIZE, 0, pid) };
        if process.is_null() {
            return false;
        }
        // SAFETY: `process` is valid until it is closed, right after.
        let running = unsafe { WaitForSingleObject(process, 0) } == WAIT_TIMEOUT;
        // SAFETY: closed once.
        unsafe { CloseHandle(process) };
        running
    }

    #[tokio::test]
    async fn a_group_ends_with_the_child_s_own_children() {
        let pid_file = std::env::var_os(PID_FILE).map(std::path::PathBuf::from);
        match (std::env::var(ROLE).as_deref(), pid_file) {
            // The child: starts a grandchild of its own, says which, and waits.
            (Ok("child"), Some(pid_file)) => {
                let grandchild = again("grandchild", &pid_file).spawn().unwrap();
                std::fs::write(&pid_file, grandchild.id().unwrap().to_string()).unwrap();
                tokio::time::sleep(Duration::from_secs(600)).await;
                return;
            }
            (Ok("grandchild"), _) => {
                tokio::time::sleep(Duration::from_secs(600)).await;
                return;
            }
            _ => {}
        }
        let dir = tempfile_dir();
        let pid_file = dir.join("grandchild.pid");
        let mut command = again("child", &pid_file);
        start_own_group(&mut command);
        let mut child = command.spawn().unwrap();
        let group = ProcessGroup::of(&child).unwrap();
        let grandchild = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok())
            {
                break pid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(alive(grandchild));
        group.end();
        child.wait().await.unwrap();
        // Killing is asynchronous: the grandchild is gone soon after, never left running.
        let mut waited = Duration::ZERO;
        while alive(grandchild) {
            assert!(
                waited < Duration::from_secs(10),
                "the grandchild outlived its group"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
            waited += Duration::from_millis(20);
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A fresh directory of this test's own.
    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "roundtable-group-test-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
