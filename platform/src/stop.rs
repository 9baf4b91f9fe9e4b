//! Asking a program to stop, and waiting to be asked.
//!
//! Why: `roundtable hub` and `roundtable run` end cleanly when asked (the hub's last commit
//! made durable, the runner's turn ended), and each OS asks differently: Unix with SIGTERM
//! (a service manager, `kill`) or SIGINT (Ctrl-C); Windows with Ctrl-C, Ctrl-Break, or the
//! console window closing, none of which another program can send to a process without a
//! console of its own (the app's hub, a hub a test started). So on Windows a program also
//! stops when its named event `Local\roundtable-stop-PID` is set, which [`request`] does:
//! Windows' counterpart of `kill -TERM PID`, for processes of the same session.

/// Listening for requests to stop, from the moment it is made.
#[derive(Debug)]
pub struct StopRequests {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(windows)]
    break_: tokio::signal::windows::CtrlBreak,
    #[cfg(windows)]
    close: tokio::signal::windows::CtrlClose,
    #[cfg(windows)]
    event: imp::StopEvent,
}

impl StopRequests {
    /// Starts listening: a request made from now on is not missed.
    pub fn listen() -> std::io::Result<StopRequests> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(StopRequests {
                terminate: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(windows)]
        {
            Ok(StopRequests {
                break_: tokio::signal::windows::ctrl_break()?,
                close: tokio::signal::windows::ctrl_close()?,
                event: imp::StopEvent::create(std::process::id())?,
            })
        }
    }

    /// Resolves at the next request to stop.
    pub async fn requested(&mut self) {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.terminate.recv() => {}
                _ = self.interrupt.recv() => {}
            }
        }
        #[cfg(windows)]
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = self.break_.recv() => {}
                _ = self.close.recv() => {}
                () = self.event.set() => {}
            }
        }
    }
}

/// Asks the process `pid` to stop: SIGTERM on Unix; on Windows, its stop event set (a
/// process that listens with [`StopRequests`]; others are not asked, and this says so).
pub fn request(pid: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let pid = rustix::process::Pid::from_raw(i32::try_from(pid).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no such process id")
        })?)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no process 0"))?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
        Ok(())
    }
    #[cfg(windows)]
    {
        imp::request(pid)
    }
}

#[cfg(windows)]
#[allow(
    unsafe_code,
    reason = "Win32 event calls; each handle is checked, owned by one value and closed once"
)]
mod imp {
    use std::time::Duration;

    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, WAIT_OBJECT_0};
    use windows_sys::Win32::System::Threading::{
        CreateEventW, EVENT_MODIFY_STATE, OpenEventW, SetEvent, WaitForSingleObject,
    };

    /// How often the event is looked at: a stop is heard within this.
    const LOOK_EVERY: Duration = Duration::from_millis(100);

    fn name(pid: u32) -> Vec<u16> {
        format!("Local\\roundtable-stop-{pid}")
            .encode_utf16()
            .chain([0])
            .collect()
    }

    /// This process's stop event, closed on drop.
    #[derive(Debug)]
    pub(super) struct StopEvent(HANDLE);

    // SAFETY: an event handle may be used and closed from any thread.
    unsafe impl Send for StopEvent {}
    // SAFETY: waiting on an event from several threads at once is allowed.
    unsafe impl Sync for StopEvent {}

    impl StopEvent {
        pub(super) fn create(pid: u32) -> std::io::Result<StopEvent> {
            let name = name(pid);
            // SAFETY: the name is NUL-terminated and outlives the call; default security
            // (the creator's user, SYSTEM, administrators); manual reset, not yet set.
            let handle = unsafe { CreateEventW(std::ptr::null(), 1, 0, name.as_ptr()) };
            if handle.is_null() {
                return Err(std::io::Error::last_os_error());
            }
            Ok(StopEvent(handle))
        }

        /// Resolves once the event is set.
        pub(super) async fn set(&self) {
            loop {
                // SAFETY: the handle is ours and open until drop; a zero wait only looks.
                if unsafe { WaitForSingleObject(self.0, 0) } == WAIT_OBJECT_0 {
                    return;
                }
                tokio::time::sleep(LOOK_EVERY).await;
            }
        }
    }

    impl Drop for StopEvent {
        fn drop(&mut self) {
            // SAFETY: the handle is ours, closed once.
            unsafe { CloseHandle(self.0) };
        }
    }

    pub(super) fn request(pid: u32) -> std::io::Result<()> {
        let name = name(pid);
        // SAFETY: the name is NUL-terminated and outlives the call.
        let handle = unsafe { OpenEventW(EVENT_MODIFY_STATE, 0, name.as_ptr()) };
        if handle.is_null() {
            let error = std::io::Error::last_os_error();
            return Err(std::io::Error::new(
                error.kind(),
                format!("process {pid} does not listen for requests to stop ({error})"),
            ));
        }
        // SAFETY: the handle was just opened with the right to set the event.
        let set = unsafe { SetEvent(handle) };
        let error = std::io::Error::last_os_error();
        // SAFETY: the handle is ours, closed once.
        unsafe { CloseHandle(handle) };
        if set == 0 { Err(error) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_request_to_this_process_is_heard() {
        let mut requests = StopRequests::listen().unwrap();
        request(std::process::id()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), requests.requested())
            .await
            .expect("the request is heard");
    }

    #[cfg(windows)]
    #[test]
    fn a_process_that_does_not_listen_is_not_asked_and_this_says_so() {
        let error = request(u32::MAX - 3).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("does not listen for requests to stop"),
            "{error}"
        );
    }
}
