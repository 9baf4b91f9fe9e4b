//! The window's commands: each a few lines over the core. Errors cross as `{code, message}`,
//! the message saying what to do.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use roundtable_core::budgets::{Budget, BudgetBoard, BudgetPeriod, BudgetScope};
use roundtable_core::cache::{PingView, RoomView};
use roundtable_core::local_agents::onboarding::{self, OnboardOptions, Report};
use roundtable_core::local_agents::{AgentCli, Environment, detect::Detected};
use roundtable_core::screens::{
    AgentView, ContactsScreen, DirectoryView, InviteCreated, InviteView, RoomMessage,
};
use roundtable_core::work::boards::{
    ArchitectureBoard, ComponentChange, CostBoard, SessionView, TaskBoard,
};
use roundtable_core::work::digest::RoomDigest;
use roundtable_core::work::watch::WatchState;
use roundtable_core::{ErrorReport, SyncState};
use roundtable_protocol::client::{
    ContactRespond, ControlAction, RoomCreate, RoomInvite, TokenAction,
};
use serde::{Deserialize, Serialize};
use tauri::State;

use crate::desktop::Desktop;
use crate::home::{HubMode, REMOTE_PROFILE, Settings};

type Reply<T> = Result<T, ErrorReport>;
type App<'a> = State<'a, Arc<Desktop>>;

/// How long a command waits for the hub.
const PATIENCE: Duration = Duration::from_secs(15);

fn invalid(message: impl Into<String>) -> ErrorReport {
    ErrorReport::new(roundtable_core::ClientCode::Invalid, message)
}

#[derive(Debug, Clone, Serialize, specta::Type)]
pub struct Me {
    pub id: String,
    pub handle: String,
    pub name: String,
}

/// Where syncing with the hub is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, specta::Type)]
#[serde(rename_all = "snake_case")]
pub enum SyncPhase {
    NotStarted,
    Syncing,
    Idle,
    Offline,
    Failed,
}

#[derive(Debug, Clone, Serialize, specta::Type)]
pub struct SyncView {
    pub state: SyncPhase,
    /// Why it is offline or failed.
    pub detail: Option<String>,
}

impl From<&SyncState> for SyncView {
    fn from(state: &SyncState) -> SyncView {
        let (state, detail) = match state {
            SyncState::NotStarted => (SyncPhase::NotStarted, None),
            SyncState::Idle => (SyncPhase::Idle, None),
            SyncState::Syncing => (SyncPhase::Syncing, None),
            SyncState::Offline { reason } => (SyncPhase::Offline, Some(reason.clone())),
            SyncState::Error { reason } => (SyncPhase::Failed, Some(reason.clone())),
        };
        SyncView { state, detail }
    }
}

#[derive(Debug, Clone, Serialize, specta::Type)]
pub struct AppState {
    pub me: Option<Me>,
    pub hub_mode: HubMode,
    /// Where this app reaches its hub (`unix:PATH` for its own).
    pub hub_address: String,
    /// Where teammates on the network reach the app's own hub (`wss://HOST:PORT#sha256=…`),
    /// when the person lets them in.
    pub network_address: Option<String>,
    pub sync: SyncView,
    /// Why the app's own hub stopped, when it failed (the app stays up): the window says so
    /// and offers to start it again (`use_embedded`).
    pub hub_failure: Option<String>,
    /// Questions waiting for the person.
    pub open_pings: u32,
    pub version: String,
}

#[tauri::command]
#[specta::specta]
pub async fn app_state(app: App<'_>) -> Reply<AppState> {
    let session = app.session().await?;
    let core = &session.core;
    let me = core.me().to_owned();
    let profile = core.profile();
    let name = core
        .read(move |cache| Ok(cache.principal(&me)?.map(|row| row.name)))
        .await?
        .unwrap_or_else(|| profile.handle.clone());
    let sync = SyncView::from(&*core.sync_state().borrow());
    Ok(AppState {
        me: Some(Me {
            id: profile.principal.clone(),
            handle: profile.handle.clone(),
            name,
        }),
        hub_mode: session.mode,
        hub_address: profile.hub.authority.clone(),
        network_address: session.network_address.clone(),
        sync,
        hub_failure: session.hub_failure(),
        open_pings: core.open_pings().await?.len() as u32,
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

#[tauri::command]
#[specta::specta]
pub async fn detect_agents(app: App<'_>) -> Reply<Vec<Detected>> {
    Ok(
        roundtable_core::local_agents::detect::detect(
            &Environment::current(),
            &app.places.profiles,
        )
        .await,
    )
}

/// The `roundtable` command the agents' configurations run: beside the app, else on PATH.
fn roundtable_command() -> Reply<PathBuf> {
    // `roundtable.exe` on Windows.
    let program = format!("roundtable{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&program)))
        .filter(|path| path.is_file());
    let on_path = || {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(&program))
                .find(|path| path.is_file())
        })
    };
    beside.or_else(on_path).ok_or_else(|| {
        invalid("the `roundtable` command is neither beside the app nor on PATH: install it (cargo install --path cli), then onboard again")
    })
}

#[tauri::command]
#[specta::specta]
pub async fn onboard_agent(
    app: App<'_>,
    window: tauri::AppHandle,
    cli: AgentCli,
    name: String,
    project: Option<String>,
) -> Reply<Report> {
    let core = app.core().await?;
    let options = OnboardOptions {
        project: project.filter(|p| !p.trim().is_empty()).map(PathBuf::from),
        roundtable: Some(roundtable_command()?),
        ..OnboardOptions::default()
    };
    let report = core
        .onboard(&Environment::current(), cli, name.trim(), options)
        .await?;
    // Its sessions' work is published from now on, not from the watcher's next rescan.
    app.session().await?.watch.reload_agents();
    crate::alerts::agents_changed(&window);
    Ok(report)
}

#[tauri::command]
#[specta::specta]
pub async fn offboard_agent(
    app: App<'_>,
    window: tauri::AppHandle,
    cli: AgentCli,
    handle: String,
) -> Reply<Report> {
    let report = onboarding::offboard(&app.places.profiles, cli, &handle)?;
    if let Ok(session) = app.session().await {
        session.watch.reload_agents();
    }
    crate::alerts::agents_changed(&window);
    Ok(report)
}

#[tauri::command]
#[specta::specta]
pub async fn rooms(app: App<'_>) -> Reply<Vec<RoomView>> {
    Ok(app.core().await?.read(|cache| cache.rooms()).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn room_messages(
    app: App<'_>,
    room: String,
    before_seq: Option<u64>,
    limit: u32,
) -> Reply<Vec<RoomMessage>> {
    Ok(app
        .core()
        .await?
        .conversation(&room, before_seq, limit.clamp(1, 500))
        .await?)
}

#[tauri::command]
#[specta::specta]
pub async fn send_message(app: App<'_>, room: String, text: String) -> Reply<()> {
    if text.trim().is_empty() {
        return Err(invalid("the message is empty: write something first"));
    }
    app.core().await?.send_message(&room, &text).await?;
    Ok(())
}

#[tauri::command]
#[specta::specta]
pub async fn create_room(app: App<'_>, title: String, members: Vec<String>) -> Reply<String> {
    let core = app.core().await?;
    let title = title.trim();
    let reply = core
        .call(
            RoomCreate {
                id: 0,
                title: (!title.is_empty()).then(|| title.to_owned()),
                topic: None,
                members,
            },
            PATIENCE,
        )
        .await?;
    Ok(reply.room.id)
}

#[tauri::command]
#[specta::specta]
pub async fn invite_to_room(app: App<'_>, room: String, handle: String) -> Reply<()> {
    let handle = handle.trim().trim_start_matches('@').to_owned();
    app.core()
        .await?
        .call(
            RoomInvite {
                id: 0,
                room,
                handle,
            },
            PATIENCE,
        )
        .await?;
    Ok(())
}

#[tauri::command]
#[specta::specta]
pub async fn mark_read(app: App<'_>, room: String, seq: u64) -> Reply<()> {
    Ok(app.core().await?.mark_read(&room, seq).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn directory(app: App<'_>, query: String) -> Reply<Vec<DirectoryView>> {
    Ok(app.core().await?.directory(&query).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn pings(app: App<'_>, all: bool) -> Reply<Vec<PingView>> {
    let core = app.core().await?;
    Ok(if all {
        core.pings().await?
    } else {
        core.open_pings().await?
    })
}

#[tauri::command]
#[specta::specta]
pub async fn answer_ping(
    app: App<'_>,
    room: String,
    ping: String,
    choice: Option<String>,
    text: Option<String>,
) -> Reply<()> {
    let text = text.filter(|text| !text.trim().is_empty());
    if choice.is_none() && text.is_none() {
        return Err(invalid("pick an option or write an answer"));
    }
    app.core()
        .await?
        .answer_ping(Some(&room), &ping, choice.as_deref(), text.as_deref())
        .await?;
    Ok(())
}

#[tauri::command]
#[specta::specta]
pub async fn contacts(app: App<'_>) -> Reply<ContactsScreen> {
    Ok(app.core().await?.contacts_screen().await?)
}

#[tauri::command]
#[specta::specta]
pub async fn request_contact(app: App<'_>, handle: String, message: Option<String>) -> Reply<()> {
    app.core()
        .await?
        .request_contact(&handle, message, PATIENCE)
        .await?;
    Ok(())
}

#[tauri::command]
#[specta::specta]
pub async fn respond_contact(app: App<'_>, request: String, accept: bool) -> Reply<()> {
    app.core()
        .await?
        .call(
            ContactRespond {
                id: 0,
                request,
                accept,
            },
            PATIENCE,
        )
        .await?;
    Ok(())
}

#[tauri::command]
#[specta::specta]
pub async fn create_invite(
    app: App<'_>,
    room: Option<String>,
    uses: Option<u32>,
    expires_hours: Option<u32>,
) -> Reply<InviteCreated> {
    let expires = expires_hours.map(|hours| u64::from(hours) * 3600);
    Ok(app
        .core()
        .await?
        .create_invite(room.as_deref(), uses, expires)
        .await?)
}

#[tauri::command]
#[specta::specta]
pub async fn invites(app: App<'_>) -> Reply<Vec<InviteView>> {
    Ok(app.core().await?.invites().await?)
}

#[tauri::command]
#[specta::specta]
pub async fn revoke_invite(app: App<'_>, invite: String) -> Reply<()> {
    Ok(app.core().await?.revoke_invite(&invite).await?)
}

#[derive(Debug, Clone, Serialize, specta::Type)]
pub struct Redeemed {
    /// The room it let us into, if any.
    pub room: Option<String>,
}

#[tauri::command]
#[specta::specta]
pub async fn redeem_invite(app: App<'_>, code_or_link: String) -> Reply<Redeemed> {
    let room = app.core().await?.redeem_invite(&code_or_link).await?;
    Ok(Redeemed { room })
}

#[tauri::command]
#[specta::specta]
pub async fn agents(app: App<'_>) -> Reply<Vec<AgentView>> {
    Ok(app.core().await?.my_agents(&app.places.profiles).await?)
}

#[derive(Debug, Clone, Copy, Deserialize, specta::Type)]
#[serde(rename_all = "snake_case")]
pub enum AgentControl {
    Pause,
    Resume,
    Stop,
}

#[tauri::command]
#[specta::specta]
/// Pauses, resumes or stops `agent` everywhere, or in `room` only (a session's own room).
pub async fn control_agent(
    app: App<'_>,
    window: tauri::AppHandle,
    agent: String,
    action: AgentControl,
    room: Option<String>,
) -> Reply<()> {
    let action = match action {
        AgentControl::Pause => ControlAction::Pause,
        AgentControl::Resume => ControlAction::Resume,
        AgentControl::Stop => ControlAction::Stop,
    };
    app.core()
        .await?
        .control_agent(&agent, action, room.as_deref(), PATIENCE)
        .await?;
    crate::alerts::agents_changed(&window);
    Ok(())
}

#[derive(Debug, Clone, Copy, Deserialize, specta::Type)]
#[serde(rename_all = "snake_case")]
pub enum TokenChangeKind {
    Rotate,
    Revoke,
}

/// What a token change did.
#[derive(Debug, Clone, Serialize, specta::Type)]
pub struct TokenChanged {
    pub agent: String,
    pub revoked: bool,
    /// The profile on this machine that now holds the new token.
    pub saved_in: Option<String>,
    /// The new token, shown once, when no profile on this machine took it (to give to
    /// wherever the agent runs).
    pub token: Option<String>,
}

#[tauri::command]
#[specta::specta]
pub async fn agent_token(
    app: App<'_>,
    agent: String,
    action: TokenChangeKind,
) -> Reply<TokenChanged> {
    let action = match action {
        TokenChangeKind::Rotate => TokenAction::Rotate,
        TokenChangeKind::Revoke => TokenAction::Revoke,
    };
    let (agent, change) = app
        .core()
        .await?
        .agent_token(&agent, action, PATIENCE)
        .await?;
    Ok(match change {
        roundtable_core::agents::TokenChange::Rotated { token, profile } => TokenChanged {
            agent,
            revoked: false,
            token: profile.is_none().then(|| token.expose().to_owned()),
            saved_in: profile.map(|profile| profile.name),
        },
        roundtable_core::agents::TokenChange::Revoked => TokenChanged {
            agent,
            revoked: true,
            saved_in: None,
            token: None,
        },
    })
}

/// How to become someone on a remote hub.
#[derive(Debug, Clone, Deserialize, specta::Type)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RemoteLogin {
    Signup {
        handle: String,
        name: String,
    },
    Invite {
        code: String,
        handle: String,
        name: String,
    },
    Token {
        token: String,
    },
}

#[tauri::command]
#[specta::specta]
pub async fn connect_remote(
    app: App<'_>,
    address: String,
    how: RemoteLogin,
    insecure: bool,
) -> Reply<AppState> {
    let address = address.trim();
    let profiles = app.places.profiles.clone();
    let signup = |handle: String, name: String, invite: Option<String>| {
        roundtable_protocol::client::SignupRequest {
            handle: handle.trim().to_owned(),
            name: name.trim().to_owned(),
            discoverable: None,
            invite,
        }
    };
    match how {
        RemoteLogin::Signup { handle, name } => {
            roundtable_core::signup(
                &profiles,
                REMOTE_PROFILE,
                address,
                signup(handle, name, None),
                None,
                insecure,
            )
            .await?;
        }
        RemoteLogin::Invite { code, handle, name } => {
            let code = roundtable_core::screens::invite_code(&code)?.to_owned();
            roundtable_core::signup(
                &profiles,
                REMOTE_PROFILE,
                address,
                signup(handle, name, Some(code)),
                None,
                insecure,
            )
            .await?;
        }
        RemoteLogin::Token { token } => {
            roundtable_core::login(
                &profiles,
                REMOTE_PROFILE,
                address,
                token.trim(),
                None,
                insecure,
            )
            .await?;
        }
    }
    let settings = Settings {
        hub: HubMode::Remote,
        ..Settings::load(&app.places)?
    };
    app.switch(settings).await?;
    app_state(app).await
}

/// Uses the app's own hub: switches to it from a remote one, or starts it again after it
/// failed (a new session, over the same data directory).
#[tauri::command]
#[specta::specta]
pub async fn use_embedded(app: App<'_>) -> Reply<AppState> {
    let settings = Settings {
        hub: HubMode::Embedded,
        ..Settings::load(&app.places)?
    };
    app.switch(settings).await?;
    app_state(app).await
}

/// Lets teammates on the network reach the app's own hub (a port with TLS, pinned by the
/// invite links), or stops letting them: the hub restarts either way.
#[tauri::command]
#[specta::specta]
pub async fn share_on_network(app: App<'_>, on: bool) -> Reply<AppState> {
    let settings = Settings::load(&app.places)?;
    if settings.hub != HubMode::Embedded {
        return Err(invalid(
            "Only the app's own hub lets teammates in: use the embedded hub first.",
        ));
    }
    let settings = Settings {
        share_on_network: on,
        ..settings
    };
    app.switch(settings).await?;
    app_state(app).await
}

/// The tasks board: a lane per agent session, each task with when it changed state.
#[tauri::command]
#[specta::specta]
pub async fn task_board(app: App<'_>) -> Reply<TaskBoard> {
    Ok(app.core().await?.task_board().await?)
}

/// The architecture board of every room that has components.
#[tauri::command]
#[specta::specta]
pub async fn architecture(app: App<'_>) -> Reply<Vec<ArchitectureBoard>> {
    Ok(app.core().await?.architecture_boards().await?)
}

/// What happened to one component, oldest first.
#[tauri::command]
#[specta::specta]
pub async fn component_history(
    app: App<'_>,
    room: String,
    component: String,
) -> Reply<Vec<ComponentChange>> {
    Ok(app
        .core()
        .await?
        .component_history(&room, &component)
        .await?)
}

/// The costs board: the figures of `roundtable usage` at their finest, since `since_ms`.
#[tauri::command]
#[specta::specta]
pub async fn costs(app: App<'_>, since_ms: Option<i64>) -> Reply<CostBoard> {
    let session = app.session().await?;
    Ok(session
        .core
        .cost_board(since_ms, session.pricing.clone())
        .await?)
}

/// Every agent session, "needs you" first.
#[tauri::command]
#[specta::specta]
pub async fn sessions(app: App<'_>) -> Reply<Vec<SessionView>> {
    Ok(app
        .core()
        .await?
        .session_board(&app.places.profiles)
        .await?)
}

/// "While you were away": per room, what happened since the person last read it or looked.
#[tauri::command]
#[specta::specta]
pub async fn away(app: App<'_>) -> Reply<Vec<RoomDigest>> {
    Ok(app.core().await?.digest().await?)
}

/// The person has seen everything up to now: the next "while you were away" starts here.
#[tauri::command]
#[specta::specta]
pub async fn mark_looked(app: App<'_>) -> Reply<()> {
    Ok(app
        .core()
        .await?
        .mark_looked(roundtable_core::now_ms())
        .await?)
}

/// The budgets, each with its period's spend, and what keeping them did this period.
#[tauri::command]
#[specta::specta]
pub async fn budgets(app: App<'_>) -> Reply<BudgetBoard> {
    let session = app.session().await?;
    Ok(session
        .core
        .budget_board(roundtable_core::now_ms(), session.pricing.clone())
        .await?)
}

/// Sets a budget (replacing the one of the same scope, name and period).
#[tauri::command]
#[specta::specta]
pub async fn set_budget(app: App<'_>, budget: Budget) -> Reply<Budget> {
    Ok(app
        .core()
        .await?
        .set_budget(budget, roundtable_core::now_ms())
        .await?)
}

/// Removes a budget.
#[tauri::command]
#[specta::specta]
pub async fn remove_budget(
    app: App<'_>,
    scope: BudgetScope,
    name: String,
    period: BudgetPeriod,
) -> Reply<()> {
    if app
        .core()
        .await?
        .remove_budget(scope, &name, period)
        .await?
    {
        Ok(())
    } else {
        Err(ErrorReport::from(&roundtable_core::CoreError::NotFound(
            format!(
                "there is no budget for {} {name}; it may have been removed",
                scope.as_str()
            ),
        )))
    }
}

/// Opens a link from a message in the person's browser (web and mail links only).
#[tauri::command]
#[specta::specta]
pub async fn open_link(url: String) -> Reply<()> {
    let url = roundtable_core::web_links::checked_link(&url)?;
    // The opener is a program of the desktop's (xdg-open): off the async workers.
    tokio::task::spawn_blocking(move || open::that_detached(&url))
        .await
        .map_err(|error| invalid(format!("the browser could not be started: {error}")))?
        .map_err(|error| {
            invalid(format!(
                "no browser could be started ({error}); copy the link instead"
            ))
        })
}

/// Where the agent-log watcher is (reading the logs the first time, with its progress).
#[tauri::command]
#[specta::specta]
pub async fn work_scan(app: App<'_>) -> Reply<WatchState> {
    Ok(app.session().await?.watch.state.borrow().clone())
}

/// When the app's process started (ms since the epoch), to time its first paint.
#[tauri::command]
#[specta::specta]
pub fn started_at_ms() -> f64 {
    crate::STARTED_AT_MS.get().copied().unwrap_or_default()
}

/// Where the window should go first (the link the app was started with), once.
#[tauri::command]
#[specta::specta]
pub fn take_start_target(
    start: State<'_, crate::StartTarget>,
) -> Option<crate::alerts::OpenTarget> {
    start.0.lock().ok().and_then(|mut target| target.take())
}
