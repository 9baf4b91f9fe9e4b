//! Waiting for the OS to ask a program to stop.
//!
//! Why: `roundtable hub` and `roundtable run` end cleanly when asked (the hub's last commit
//! made durable, the runner's turn ended), and each OS asks differently: Unix with SIGTERM
//! (a service manager, `kill`) or SIGINT (Ctrl-C); Windows with Ctrl-C, Ctrl-Break, or the
//! console window closing.

/// Listening for the OS's requests to stop, from the moment it is made.
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
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn sigterm_is_a_request_to_stop() {
        let mut requests = StopRequests::listen().unwrap();
        let me = rustix::process::getpid();
        rustix::process::kill_process(me, rustix::process::Signal::TERM).unwrap();
        tokio::time::timeout(Duration::from_secs(10), requests.requested())
            .await
            .expect("the request is heard");
    }
}
