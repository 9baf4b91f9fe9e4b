//! The app's running state: the core for the person's profile, syncing (and serving the
//! hand-offs of the person's short-lived CLI commands), the agent-log watcher, and, in
//! local mode, the app's own hub. Everything long-running hangs off one [`Session`];
//! switching hubs drops it (stopping all of it) and opens another.
//!
//! Starting takes a moment (the hub opens its database; the core opens the cache), so the
//! session is opened in the background and commands wait for it.
//!
//! The app's own hub may fail (one of its threads panics): it stops alone, and the app
//! stays up. The session keeps what it said ([`Session::hub_failure`]), the window is told
//! and says so, and starting the session again (`use_embedded`) starts a new hub over the
//! same data directory.

use std::time::Duration;

use roundtable_core::budgets::BudgetWatch;
use roundtable_core::local_agents::Environment;
use roundtable_core::profile::Profile;
use roundtable_core::work::pricing::Pricing;
use roundtable_core::work::watch::{LogWatch, WatchOptions};
use roundtable_core::{ClientCode, Core, ErrorReport, SyncHandle, SyncOptions};
use roundtable_hub::embedded::EmbeddedHub;
use tauri::AppHandle;
use tokio::sync::{Mutex, watch};

use crate::alerts::Alerts;
use crate::home::{HomeError, HubMode, Places, Settings};

/// How long a switch waits for the old session's commands and hub to let go.
const SESSION_RELEASE: Duration = Duration::from_secs(10);

/// Everything that runs for one profile on one hub; dropping it stops it all.
pub struct Session {
    pub core: Core,
    pub mode: HubMode,
    /// The prices the watcher and the costs board use (the built-in ones, with the
    /// person's overrides).
    pub pricing: Pricing,
    _sync: SyncHandle,
    /// The agent-log watcher: its progress (the first pass over a large directory takes a
    /// while) and a way to tell it of a newly onboarded agent.
    pub watch: LogWatch,
    /// Keeps the person's budgets as usage arrives: warns, pauses their agents.
    _budgets: BudgetWatch,
    forwarding: tokio::task::JoinHandle<()>,
    /// Waits for the app's own hub to fail, to tell the window.
    watching_hub: Option<tokio::task::JoinHandle<()>>,
    /// Where teammates on the network reach the app's own hub, when let in.
    pub network_address: Option<String>,
    /// Last: the hub stops after the core let go of it.
    hub: Option<EmbeddedHub>,
    /// Told when the hub has stopped (so the next one can open its data directory).
    hub_stopped: Option<std::sync::mpsc::Sender<()>>,
}

impl Session {
    /// Why the app's own hub stopped by itself, if it did: the window says so and offers to
    /// start it again.
    pub fn hub_failure(&self) -> Option<String> {
        let failure = self.hub.as_ref()?.failure()?;
        Some(failure.to_string())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.forwarding.abort();
        if let Some(watching) = self.watching_hub.take() {
            watching.abort();
        }
        if let Some(hub) = self.hub.take() {
            let stopped = self.hub_stopped.take();
            // Waits for its last commit: off the async workers.
            std::thread::spawn(move || {
                match hub.stop() {
                    Ok(()) => {}
                    // Said when it happened; it has let go of everything since.
                    Err(roundtable_hub::HubError::Failed(_)) => {}
                    Err(error) => tracing::warn!(%error, "the local hub did not stop cleanly"),
                }
                if let Some(stopped) = stopped {
                    let _ = stopped.send(());
                }
            });
        }
    }
}

/// Where the session is.
#[derive(Clone)]
enum Phase {
    Starting,
    Ready(std::sync::Arc<Session>),
    Failed(ErrorReport),
}

/// The app's state, managed by Tauri.
pub struct Desktop {
    pub places: Places,
    app: AppHandle,
    phase: watch::Sender<Phase>,
    /// Serializes hub switches.
    switching: Mutex<()>,
    /// Told when the current session's hub has stopped.
    hub_stopped: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

fn report(error: impl std::fmt::Display, code: ClientCode) -> ErrorReport {
    ErrorReport::new(code, error.to_string())
}

impl From<HomeError> for ErrorReport {
    fn from(error: HomeError) -> ErrorReport {
        report(error, ClientCode::Setup)
    }
}

impl Desktop {
    /// Starts opening the session of the saved settings.
    pub fn start(app: AppHandle, places: Places) -> std::sync::Arc<Desktop> {
        let desktop = std::sync::Arc::new(Desktop {
            places,
            app,
            phase: watch::channel(Phase::Starting).0,
            switching: Mutex::new(()),
            hub_stopped: std::sync::Mutex::new(None),
        });
        let starting = desktop.clone();
        tauri::async_runtime::spawn(async move {
            let opened = match Settings::load(&starting.places) {
                Ok(settings) => starting.open(settings).await,
                Err(error) => Err(error.into()),
            };
            starting.settle(opened);
        });
        desktop
    }

    fn settle(&self, opened: Result<Session, ErrorReport>) {
        let phase = match opened {
            Ok(session) => Phase::Ready(std::sync::Arc::new(session)),
            Err(error) => {
                tracing::error!(code = %error.code, message = %error.message, "cannot start");
                Phase::Failed(error)
            }
        };
        self.phase.send_replace(phase);
        crate::alerts::session_changed(&self.app);
    }

    /// The session, once started (or why it could not start).
    pub async fn session(&self) -> Result<std::sync::Arc<Session>, ErrorReport> {
        let mut phase = self.phase.subscribe();
        let settled = phase
            .wait_for(|phase| !matches!(phase, Phase::Starting))
            .await
            .map_err(|_| report("the app is shutting down", ClientCode::ShuttingDown))?
            .clone();
        match settled {
            Phase::Ready(session) => Ok(session),
            Phase::Failed(error) => Err(error),
            Phase::Starting => unreachable!("waited past starting"),
        }
    }

    /// The core of the current session.
    pub async fn core(&self) -> Result<Core, ErrorReport> {
        Ok(self.session().await?.core.clone())
    }

    /// Opens a session for `settings`: the app's own hub and the local person, or the
    /// remote profile.
    async fn open(&self, settings: Settings) -> Result<Session, ErrorReport> {
        let places = self.places.clone();
        let mode = settings.hub;
        let (hub, profile, network_address) = match mode {
            HubMode::Embedded => {
                let local = tokio::task::spawn_blocking(move || {
                    let mut settings = settings;
                    crate::home::start_local_hub(&places, &mut settings)
                })
                .await
                .map_err(|error| report(error, ClientCode::Setup))??;
                (Some(local.hub), local.profile, local.network_address)
            }
            HubMode::Remote => {
                let profile = Profile::load(&places.profiles, settings.profile_name())
                    .map_err(|error| report(error, ClientCode::Profile))?;
                (None, profile, None)
            }
        };
        let hub_stopped = hub.is_some().then(|| {
            let (tell, told) = std::sync::mpsc::channel();
            *self
                .hub_stopped
                .lock()
                .unwrap_or_else(|poison| poison.into_inner()) = Some(told);
            tell
        });
        let share_rooms = profile.share_rooms.clone();
        let core = Core::open(profile)
            .await
            .map_err(|error| ErrorReport::from(&error))?;
        let sync = core.start_with(SyncOptions {
            serve_hand_offs: true,
        });
        let pricing = Pricing::with_overrides(&Pricing::override_paths()).unwrap_or_else(|error| {
            tracing::warn!(%error, "using the built-in prices");
            Pricing::built_in()
        });
        let watch = core.watch_logs(WatchOptions {
            env: Environment::current(),
            profiles: self.places.profiles.clone(),
            pricing: pricing.clone(),
            share_rooms,
        });
        let budgets = core.watch_budgets(pricing.clone());
        let forwarding = tokio::spawn(
            Alerts::new(self.app.clone(), core.clone(), watch.state.clone())
                .with_budgets(budgets.alerts())
                .run(),
        );
        let watching_hub = hub.as_ref().map(|hub| {
            let failed = hub.failed();
            let app = self.app.clone();
            tokio::spawn(async move {
                let failure = failed.await;
                tracing::error!(%failure, "the app's own hub stopped; the window offers to start it again");
                crate::alerts::session_changed(&app);
            })
        });
        Ok(Session {
            core,
            mode,
            pricing,
            _sync: sync,
            watch,
            _budgets: budgets,
            forwarding,
            watching_hub,
            network_address,
            hub,
            hub_stopped,
        })
    }

    /// Switches to `settings` (saved first): the current session stops, the new one opens.
    pub async fn switch(&self, settings: Settings) -> Result<(), ErrorReport> {
        let _switching = self.switching.lock().await;
        settings.save(&self.places)?;
        let old = self.phase.send_replace(Phase::Starting);
        // Commands still running hold the old session a moment; then it stops, and its
        // hub lets go of its data directory and port before the next one opens them.
        if let Phase::Ready(session) = old {
            let deadline = tokio::time::Instant::now() + SESSION_RELEASE;
            while std::sync::Arc::strong_count(&session) > 1
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tracing::info!(
                holders = std::sync::Arc::strong_count(&session) - 1,
                "the old session stops"
            );
            drop(session);
        }
        let stopped = self
            .hub_stopped
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take();
        if let Some(stopped) = stopped {
            let _ =
                tokio::task::spawn_blocking(move || stopped.recv_timeout(SESSION_RELEASE)).await;
        }
        // Let the cache's lock go.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let opened = self.open(settings).await;
        let failed = opened.as_ref().err().cloned();
        self.settle(opened);
        match failed {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}
