//! Waking a resting Codex session: Codex's turn ends at once (it has no hook that may wait),
//! so messages that arrive later are handed to the idle session through Codex's own queue by
//! a short-lived watcher, which steps aside when the session's next turn begins by itself or
//! a newer watcher for the same session takes over.

use super::*;

/// The longest text handed to a Codex session at once (it goes as one argument).
const QUEUED_TEXT: usize = 64 * 1024;

/// Whether lines appended to a Codex rollout show its next turn began (the person typed, or
/// anything else started it). Only whole lines count. Pure.
pub fn codex_turn_began(appended: &[u8]) -> bool {
    let whole = match appended.iter().rposition(|&b| b == b'\n') {
        Some(end) => &appended[..end],
        None => return false,
    };
    whole.split(|&b| b == b'\n').any(|line| {
        serde_json::from_slice::<Value>(line).is_ok_and(|record| {
            record["type"] == "event_msg"
                && matches!(
                    record["payload"]["type"].as_str(),
                    Some("task_started" | "turn_started" | "user_message")
                )
        })
    })
}

/// Waits until the Codex session whose rollout is `path` begins a turn (after its first
/// `from` bytes); never returns without a rollout to watch.
pub(super) async fn codex_turn_begins(path: Option<PathBuf>, from: u64) {
    appended_until(path, from, codex_turn_began).await
}

/// A file name for a thread id, inside the agent's profile.
pub(super) fn thread_file(thread: &str) -> String {
    thread
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect()
}

impl Core {
    /// Hands the messages for us that arrive while the Codex session `thread` rests to it,
    /// through Codex's queue (`codex queue --thread T --message TEXT`: an interactive Codex
    /// runs it as a new turn at once; otherwise it waits for the thread's next turn).
    /// Gives up when the session's next turn begins by itself (its rollout says so), after
    /// `listen`, or when a waker started later for the same session takes over. Returns
    /// whether it handed the session anything.
    pub async fn wake_codex(
        &self,
        codex: &Path,
        thread: &str,
        rollout: Option<&Path>,
        listen: Duration,
    ) -> Result<bool, CoreError> {
        let wakers = self.profile().dir.join("wakers");
        crate::profile::create_private_dir(&wakers).map_err(|source| CoreError::Io {
            context: format!("cannot create {}", wakers.display()),
            source,
        })?;
        sweep_old_markers(&wakers, listen).await;
        let marker = wakers.join(thread_file(thread));
        let me = std::process::id().to_string();
        crate::profile::write_private(&marker, &me)?;
        let superseded = {
            let (marker, me) = (marker.clone(), me.clone());
            async move {
                loop {
                    tokio::time::sleep(TYPING_CHECK).await;
                    if tokio::fs::read_to_string(&marker).await.ok().as_deref() != Some(&me) {
                        return;
                    }
                }
            }
        };
        let rollout = rollout.map(Path::to_path_buf);
        let from = match &rollout {
            Some(path) => tokio::fs::metadata(path).await.map_or(0, |m| m.len()),
            None => 0,
        };
        let sync = self.start();
        let filter = crate::wait_for::WaitFilter::MessagesFor {
            principal: self.me().to_owned(),
        };
        let arrived = tokio::select! {
            arrived = self.wait_for(&filter, listen) => Some(arrived?),
            () = codex_turn_begins(rollout, from) => None,
            () = superseded => None,
        };
        let mut handed = false;
        if let Some(crate::wait_for::Arrived::Messages { messages }) = arrived {
            // As many as fit in one argument; the rest stay unread for the next turn.
            let rooms = self.rooms().await?;
            let mut taken = messages.len();
            let mut text = render_messages(&messages, &rooms);
            while text.len() > QUEUED_TEXT && taken > 1 {
                taken -= 1;
                text = render_messages(&messages[..taken], &rooms);
            }
            let queued = tokio::process::Command::new(codex)
                .args(["queue", "--thread", thread, "--message", &text])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .output()
                .await
                .map_err(|source| CoreError::Io {
                    context: format!("cannot run {}", codex.display()),
                    source,
                })?;
            if queued.status.success() {
                self.mark_read_through(&messages[..taken]).await?;
                self.status_now(AgentState::Working, "woken by new messages")
                    .await;
                handed = true;
            } else {
                tracing::warn!(
                    stderr = %String::from_utf8_lossy(&queued.stderr),
                    "codex queue refused the messages"
                );
            }
        }
        // The marker stays: removing it could remove a newer waker's (it writes the same
        // file); old ones are swept when a waker starts.
        sync.stop().await;
        Ok(handed)
    }
}

/// Removes the markers of wakers that have ended for sure: older than the longest a waker
/// listens, and a day.
pub(super) async fn sweep_old_markers(wakers: &Path, listen: Duration) {
    let Ok(mut entries) = tokio::fs::read_dir(wakers).await else {
        return;
    };
    let old = listen + Duration::from_secs(24 * 3600);
    while let Ok(Some(entry)) = entries.next_entry().await {
        let stale = entry
            .metadata()
            .await
            .ok()
            .and_then(|meta| meta.modified().ok())
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > old);
        if stale {
            let _ = tokio::fs::remove_file(entry.path()).await;
        }
    }
}
