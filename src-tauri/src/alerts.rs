//! What the person must hear of. The window learns what changed (and refetches only that),
//! the tray shows how many questions wait, and each new question for the person and each
//! mention of them becomes a desktop notification that names who asks, where, and what —
//! answerable from the notification where the desktop shows actions, and always in the app.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use roundtable_core::budgets::{BudgetAlert, BudgetLevel};
use roundtable_core::cache::{PingState, PingView};
use roundtable_core::work::watch::WatchState;
use roundtable_core::{Change, Core, notification_text};
use serde::{Deserialize, Serialize};
use tauri::{AppHandle, Manager};
use tauri_specta::Event as _;
use tokio::sync::{broadcast, oneshot, watch};

use crate::notice::{self, Notice};

/// How long changes gather before the window hears of them (a sync writes thousands).
const GATHER: Duration = Duration::from_millis(30);
/// At most this many options become notification buttons.
const NOTIFIED_OPTIONS: usize = 3;

/// What changed, for the window to refetch.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, specta::Type, tauri_specta::Event,
)]
pub struct CoreChanged {
    /// Rooms, their titles, members or unread counts.
    pub rooms: bool,
    /// Rooms whose messages changed.
    pub messages: Vec<String>,
    pub pings: bool,
    pub contacts: bool,
    /// Agents' statuses or controls.
    pub agents: bool,
    /// The connection to the hub.
    pub sync: bool,
    /// Tasks, components, usage (from the hub or this machine's agent logs).
    pub work: bool,
    /// The agent-log watcher's progress (see the `work_scan` command).
    pub scan: bool,
    /// Everything (the hub's data was reset, or the session switched hubs).
    pub everything: bool,
}

impl CoreChanged {
    fn add(&mut self, change: &Change) {
        match change {
            Change::Messages { room } | Change::Mentioned { room, .. } => {
                if !self.messages.contains(room) {
                    self.messages.push(room.clone());
                }
                self.rooms = true;
            }
            Change::Members { .. }
            | Change::Room { .. }
            | Change::Rooms
            | Change::ReadMarker { .. } => self.rooms = true,
            Change::Tasks { .. }
            | Change::Components { .. }
            | Change::Usage { .. }
            | Change::LocalWork => self.work = true,
            Change::Ping { .. } => self.pings = true,
            Change::Status { .. } | Change::Controls => self.agents = true,
            // Spend against budgets is on the costs board; a budget reached pauses agents.
            Change::Budgets => {
                self.work = true;
                self.agents = true;
            }
            Change::Contacts => self.contacts = true,
            Change::Outbox => self.rooms = true,
            Change::Reset => self.everything = true,
        }
    }
}

/// Where a notification, the tray or a link sends the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, specta::Type, tauri_specta::Event)]
#[serde(tag = "view", rename_all = "snake_case")]
pub enum OpenTarget {
    Ping {
        room: String,
        ping: String,
    },
    /// Every question waiting.
    Pings,
    /// The costs board, with spend against budgets.
    Costs,
    Room {
        room: String,
    },
    Redeem {
        code: String,
        hub: Option<String>,
    },
}

/// Tells the window the session changed (started, failed, switched hubs).
pub fn session_changed(app: &AppHandle) {
    let _ = CoreChanged {
        everything: true,
        sync: true,
        ..CoreChanged::default()
    }
    .emit(app);
}

/// Tells the window the person's agents changed (one was onboarded, offboarded, paused…).
pub fn agents_changed(app: &AppHandle) {
    let _ = CoreChanged {
        agents: true,
        ..CoreChanged::default()
    }
    .emit(app);
}

/// Shows the window as it was.
pub fn open_window(app: &AppHandle) {
    if let Some(window) = app.get_webview_window("main") {
        let _ = window.unminimize();
        let _ = window.show();
        let _ = window.set_focus();
    }
}

/// Shows the window on the questions waiting.
pub fn open_pings(app: &AppHandle) {
    open(app, OpenTarget::Pings);
}

/// Shows the window and sends it to `target`.
pub fn open(app: &AppHandle, target: OpenTarget) {
    open_window(app);
    if let Err(error) = target.emit(app) {
        tracing::warn!(%error, "cannot tell the window where to go");
    }
}

/// Follows one session's core.
pub struct Alerts {
    app: AppHandle,
    core: Core,
    /// The agent-log watcher's progress.
    scan: watch::Receiver<WatchState>,
    /// Pings notified in this run (each once).
    notified: HashSet<(String, String)>,
    /// Notifications still shown, by ping: closing them when the ping is answered elsewhere.
    shown: HashMap<(String, String), oneshot::Sender<()>>,
    /// What keeping the budgets did (a warning at 80 %, a pause at 100 %).
    budgets: Option<broadcast::Receiver<BudgetAlert>>,
}

impl Alerts {
    pub fn new(app: AppHandle, core: Core, scan: watch::Receiver<WatchState>) -> Alerts {
        Alerts {
            app,
            core,
            scan,
            notified: HashSet::new(),
            shown: HashMap::new(),
            budgets: None,
        }
    }

    /// Also tells the person what keeping their budgets did.
    pub fn with_budgets(mut self, alerts: broadcast::Receiver<BudgetAlert>) -> Alerts {
        self.budgets = Some(alerts);
        self
    }

    pub async fn run(mut self) {
        let mut changes = self.core.changes();
        let mut sync = self.core.sync_state();
        let mut scan = self.scan.clone();
        // The watcher ends (stopped, or failed and said why): its last state stays readable.
        let mut scanning = true;
        self.pings_changed().await;
        loop {
            let mut gathered = CoreChanged::default();
            let mut mentions = Vec::new();
            tokio::select! {
                change = changes.recv() => match change {
                    Ok(change) => self.gather(&mut gathered, &mut mentions, change),
                    Err(broadcast::error::RecvError::Lagged(_)) => gathered.everything = true,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                changed = sync.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    gathered.sync = true;
                }
                changed = scan.changed(), if scanning => {
                    scanning = changed.is_ok();
                    gathered.scan = true;
                }
                alert = next_budget_alert(&mut self.budgets) => {
                    if let Some(alert) = alert {
                        notify_budget(self.app.clone(), alert);
                    }
                    continue;
                }
            }
            let gather_until = tokio::time::sleep(GATHER);
            tokio::pin!(gather_until);
            loop {
                tokio::select! {
                    change = changes.recv() => match change {
                        Ok(change) => self.gather(&mut gathered, &mut mentions, change),
                        Err(broadcast::error::RecvError::Lagged(_)) => gathered.everything = true,
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    () = &mut gather_until => break,
                }
            }
            if let Err(error) = gathered.clone().emit(&self.app) {
                tracing::warn!(%error, "cannot tell the window what changed");
            }
            if gathered.pings || gathered.everything || gathered.sync {
                self.pings_changed().await;
            }
            for (room, seq) in mentions {
                self.mentioned(&room, seq).await;
            }
        }
    }

    fn gather(
        &self,
        gathered: &mut CoreChanged,
        mentions: &mut Vec<(String, u64)>,
        change: Change,
    ) {
        if let Change::Mentioned { room, seq } = &change {
            mentions.push((room.clone(), *seq));
        }
        gathered.add(&change);
    }

    /// Updates the tray, notifies new questions, closes notifications of answered ones.
    async fn pings_changed(&mut self) {
        let Ok(open) = self.core.open_pings().await else {
            return;
        };
        crate::tray::show_waiting(&self.app, open.len());
        let open_keys: HashSet<(String, String)> = open
            .iter()
            .map(|ping| (ping.room.clone(), ping.ping.clone()))
            .collect();
        // Dropping a notification's sender closes it: answered or expired elsewhere.
        self.shown
            .retain(|key, close| open_keys.contains(key) && !close.is_closed());
        for ping in open {
            let key = (ping.room.clone(), ping.ping.clone());
            if ping.state != PingState::Open || !self.notified.insert(key.clone()) {
                continue;
            }
            let room_title = self.room_title(&ping.room).await;
            let (close, closed) = oneshot::channel();
            self.shown.insert(key, close);
            tokio::spawn(notify_ping(
                self.app.clone(),
                self.core.clone(),
                ping,
                room_title,
                closed,
            ));
        }
    }

    async fn room_title(&self, room: &str) -> String {
        let room = room.to_owned();
        self.core
            .read(move |cache| {
                Ok(cache
                    .rooms()?
                    .into_iter()
                    .find(|r| r.id == room)
                    .and_then(|r| r.title)
                    .unwrap_or(room))
            })
            .await
            .unwrap_or_default()
    }

    async fn mentioned(&self, room: &str, seq: u64) {
        let messages = match self.core.conversation(room, Some(seq + 1), 1).await {
            Ok(messages) => messages,
            Err(_) => return,
        };
        let Some(message) = messages.into_iter().find(|m| m.message.seq == Some(seq)) else {
            return;
        };
        let who = message
            .message
            .from_handle
            .clone()
            .unwrap_or(message.message.from.clone());
        let title = self.room_title(room).await;
        let text = notification_text::of(
            &format!("{who} mentioned you in {title}"),
            &message.message.text,
        );
        let target = OpenTarget::Room {
            room: room.to_owned(),
        };
        notify_opening(self.app.clone(), text.summary, text.body, "Open", target);
    }
}

/// The next budget alert; never, without a budget watch (or once it has stopped).
async fn next_budget_alert(
    alerts: &mut Option<broadcast::Receiver<BudgetAlert>>,
) -> Option<BudgetAlert> {
    let Some(receiver) = alerts else {
        return std::future::pending().await;
    };
    match receiver.recv().await {
        Ok(alert) => Some(alert),
        Err(broadcast::error::RecvError::Lagged(_)) => None,
        Err(broadcast::error::RecvError::Closed) => {
            *alerts = None;
            None
        }
    }
}

/// A budget's warning or pause as a notification; clicking it opens the costs board.
fn notify_budget(app: AppHandle, alert: BudgetAlert) {
    let summary = match (alert.level, &alert.agent) {
        (BudgetLevel::Reached, Some(agent)) => format!("{agent} paused: budget reached"),
        (BudgetLevel::Reached, None) => "A budget was reached".to_owned(),
        _ => format!("{} of a budget spent", percent_of(&alert)),
    };
    notify_opening(app, summary, alert.text, "Open costs", OpenTarget::Costs);
}

/// A notification whose click (or its one action, `label`) shows the window at `target`.
fn notify_opening(app: AppHandle, summary: String, body: String, label: &str, target: OpenTarget) {
    let notice = Notice {
        summary,
        body,
        actions: vec![("default".to_owned(), label.to_owned())],
        lasting: false,
    };
    tokio::spawn(async move {
        // Never withdrawn: the sender lives as long as the notification is waited on.
        let (_keep, withdrawn) = oneshot::channel();
        match notice::show(notice, withdrawn).await {
            Ok(Some(action)) if action == "default" => open(&app, target),
            Ok(_) => {}
            Err(error) => tracing::info!(%error, "no desktop notifications"),
        }
    });
}

fn percent_of(alert: &BudgetAlert) -> String {
    format!("{:.0}%", alert.spent_usd / alert.budget.usd * 100.0)
}

/// The notification of one question, with its options as buttons; a button answers it.
async fn notify_ping(
    app: AppHandle,
    core: Core,
    ping: PingView,
    room_title: String,
    closed: oneshot::Receiver<()>,
) {
    let asker = ping.asker_handle.clone().unwrap_or(ping.asker.clone());
    // Answerable here only when the whole question shows (see `notification_text`).
    let text = notification_text::of(&format!("{asker} asks, in {room_title}"), &ping.question);
    let mut actions = vec![("default".to_owned(), "Open".to_owned())];
    let buttons = notification_text::answer_buttons(&text, &ping.options);
    for (index, label) in buttons.iter().take(NOTIFIED_OPTIONS) {
        actions.push((format!("answer:{index}"), label.clone()));
    }
    let notice = Notice {
        summary: text.summary,
        body: text.body,
        actions,
        lasting: true,
    };
    let chosen = match notice::show(notice, closed).await {
        Ok(chosen) => chosen,
        Err(error) => {
            tracing::info!(%error, "no desktop notifications; the question waits in the app");
            return;
        }
    };
    let Some(action) = chosen else { return };
    if let Some(index) = action
        .strip_prefix("answer:")
        .and_then(|i| i.parse::<usize>().ok())
    {
        let choice = ping.options.get(index).cloned();
        if let Err(error) = core
            .answer_ping(Some(&ping.room), &ping.ping, choice.as_deref(), None)
            .await
        {
            tracing::warn!(%error, "cannot answer from the notification; open the app");
            open(
                &app,
                OpenTarget::Ping {
                    room: ping.room,
                    ping: ping.ping,
                },
            );
        }
    } else if action == "default" {
        open(
            &app,
            OpenTarget::Ping {
                room: ping.room,
                ping: ping.ping,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_gather_into_what_the_window_refetches() {
        let mut gathered = CoreChanged::default();
        for change in [
            Change::Messages { room: "r1".into() },
            Change::Mentioned {
                room: "r1".into(),
                seq: 4,
            },
            Change::Messages { room: "r2".into() },
            Change::Ping {
                room: "r1".into(),
                ping: "q".into(),
            },
            Change::Controls,
            Change::LocalWork,
        ] {
            gathered.add(&change);
        }
        assert_eq!(gathered.messages, ["r1", "r2"]);
        assert!(gathered.rooms && gathered.pings && gathered.agents && gathered.work);
        assert!(!gathered.contacts && !gathered.everything && !gathered.sync);
        gathered.add(&Change::Reset);
        assert!(gathered.everything);
    }
}
