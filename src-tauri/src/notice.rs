//! A desktop notification with buttons, as each OS shows one.
//!
//! Why a seam: the three desktops differ in what a notification can do, and `alerts` should
//! not care.
//!
//! - **Linux**: the freedesktop notification service over D-Bus. Buttons, a notification that
//!   stays until acted on, and one withdrawn when its question is answered elsewhere.
//! - **Windows**: a toast. Buttons; a toast cannot be withdrawn, so one whose question was
//!   answered elsewhere stays until dismissed, and a press on it is then ignored.
//! - **macOS**: not yet. Apple's notification service needs the app signed and bundled,
//!   which this build is not, so questions and mentions wait in the app and the tray's count
//!   says how many (`docs/platforms.md`).

use tokio::sync::oneshot;

/// What a notification says and offers.
#[derive(Debug, Clone)]
pub struct Notice {
    pub summary: String,
    pub body: String,
    /// Its buttons (identifier, label); a click on the notification itself is `default`.
    pub actions: Vec<(String, String)>,
    /// Stays until acted on (a question), rather than for the desktop's usual while.
    pub lasting: bool,
}

/// The action chosen on `notice` (`default` for a click on it), or `None` when it was
/// dismissed, or withdrawn because `withdrawn` fired first. An error when this desktop
/// shows no notifications.
pub async fn show(
    notice: Notice,
    withdrawn: oneshot::Receiver<()>,
) -> Result<Option<String>, String> {
    imp::show(notice, withdrawn).await
}

#[cfg(all(unix, not(target_os = "macos")))]
mod imp {
    use super::Notice;
    use tokio::sync::oneshot;

    pub(super) async fn show(
        notice: Notice,
        withdrawn: oneshot::Receiver<()>,
    ) -> Result<Option<String>, String> {
        let mut notification = notify_rust::Notification::new();
        notification
            .appname("Roundtable")
            .summary(&notice.summary)
            .body(&notice.body);
        if notice.lasting {
            notification
                .hint(notify_rust::Hint::Category("im.received".into()))
                .hint(notify_rust::Hint::Resident(true))
                .timeout(notify_rust::Timeout::Never);
        }
        for (identifier, label) in &notice.actions {
            notification.action(identifier, label);
        }
        let handle = notification
            .show_async()
            .await
            .map_err(|error| error.to_string())?;
        let mut chosen = None;
        tokio::select! {
            () = handle.wait_for_action_async(|response| {
                chosen = match response {
                    notify_rust::NotificationResponse::Action(action) => Some(action.clone()),
                    notify_rust::NotificationResponse::Default => Some("default".to_owned()),
                    _ => None,
                };
            }) => {}
            _ = withdrawn => {
                handle.close_async().await;
                return Ok(None);
            }
        }
        Ok(chosen.filter(|action| !action.is_empty() && action != "__closed"))
    }
}

#[cfg(windows)]
mod imp {
    use super::Notice;
    use tokio::sync::oneshot;

    /// The app's id: the installer's Start-menu shortcut carries it, so toasts name the app.
    const APP_ID: &str = "dev.roundtable.desktop";

    pub(super) async fn show(
        notice: Notice,
        withdrawn: oneshot::Receiver<()>,
    ) -> Result<Option<String>, String> {
        let mut notification = notify_rust::Notification::new();
        notification
            .app_id(APP_ID)
            .summary(&notice.summary)
            .body(&notice.body);
        if notice.lasting {
            notification.timeout(notify_rust::Timeout::Never);
        }
        for (identifier, label) in &notice.actions {
            notification.action(identifier, label);
        }
        // Showing a toast and waiting on it block: a thread of its own, which ends when the
        // toast is acted on, dismissed or expires.
        let waited = tokio::task::spawn_blocking(move || {
            let handle = notification.show().map_err(|error| error.to_string())?;
            let mut chosen = None;
            handle
                .wait_for_response(|response: &notify_rust::NotificationResponse| {
                    chosen = match response {
                        notify_rust::NotificationResponse::Action(action) => Some(action.clone()),
                        notify_rust::NotificationResponse::Default => Some("default".to_owned()),
                        _ => None,
                    };
                })
                .map_err(|error| error.to_string())?;
            Ok::<_, String>(chosen)
        });
        tokio::select! {
            waited = waited => waited.map_err(|error| error.to_string())?,
            // A toast cannot be withdrawn: what is pressed on it now is ignored.
            _ = withdrawn => Ok(None),
        }
    }
}

#[cfg(not(any(all(unix, not(target_os = "macos")), windows)))]
mod imp {
    use super::Notice;
    use tokio::sync::oneshot;

    pub(super) async fn show(
        _notice: Notice,
        _withdrawn: oneshot::Receiver<()>,
    ) -> Result<Option<String>, String> {
        Err("this build shows no desktop notifications (an unsigned macOS app cannot)".to_owned())
    }
}
