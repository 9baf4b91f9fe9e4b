//! Roundtable's client engine. The desktop app, the CLI and the MCP bridge see the network
//! through it: a local SQLite cache of what one principal may see on its hub (so apps open
//! instantly and work offline), kept in sync by a background task, and an outbox that holds
//! every write until the hub has it. It knows nothing of any UI toolkit.
//!
//! Layout:
//! - [`profile`]: who we are and where the hub is; the token, kept private.
//! - [`cache`]: the SQLite cache, its projections and its outbox.
//! - [`projection`]: what an event changes; pure.
//! - [`link`]: one WebSocket connection to the hub.
//! - [`process_lock`]: which processes use the profile, so several can share it.
//! - [`sync`]: the task that keeps the cache in step with the hub and drains the outbox.
//! - [`http`], [`hub_address`]: signup and addresses.
//!
//! Start with [`Core::open`], then [`Core::start`] to sync; read with the `Core` queries,
//! write with [`Core::send`] and [`Core::command`], watch [`Core::changes`] and
//! [`Core::sync_state`].

pub mod cache;
pub mod http;
pub mod hub_address;
pub mod link;
pub mod process_lock;
pub mod profile;
pub mod projection;
pub mod sync;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use rand::RngCore;
use roundtable_protocol::ClientFrame;
use roundtable_protocol::client::{Send, SignupRequest};
use roundtable_protocol::server::{OkReply, SignupOk};
use serde::Serialize;
use tokio::sync::{Notify, broadcast, oneshot, watch};

use crate::cache::{Cache, CacheError, OutboxKind, OutboxState};
use crate::hub_address::HubAddress;
use crate::process_lock::ProcessLock;
use crate::profile::{Profile, ProfileError, Secret};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

/// A random key with a prefix: 128 bits, base64url (client keys, device ids).
pub fn random_key(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    let mut key = format!("{prefix}-");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_string(bytes, &mut key);
    key
}

/// The one state of synchronisation the apps show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SyncState {
    /// Connected and up to date; live.
    Idle,
    /// Connecting, or catching up.
    Syncing,
    /// The hub cannot be reached; retrying with backoff. Writes wait in the outbox.
    Offline { reason: String },
    /// Retrying cannot help (the token was refused or revoked): the user must act.
    Error { reason: String },
}

/// What changed in the cache, for views to refresh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", content = "room", rename_all = "snake_case")]
pub enum Change {
    /// A room's events or projections.
    Room(String),
    /// The inbox: membership, contacts, controls.
    Inbox,
    Outbox,
    /// The cache was emptied (a new hub epoch) and is being rebuilt.
    Reset,
}

/// Why a core call failed.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Http(#[from] http::HttpError),
    #[error("the hub refused: {msg} ({code})")]
    Refused { code: String, msg: String },
    #[error(
        "the hub did not answer in time; the command was sent and may still be applied: see `roundtable outbox`"
    )]
    Timeout,
    #[error("the hub could not be reached in time; nothing was sent")]
    NotSent,
    #[error("{0}")]
    Invalid(String),
}

impl CoreError {
    /// A stable code for IPC and exit statuses.
    pub fn code(&self) -> &str {
        match self {
            CoreError::Cache(_) => "cache",
            CoreError::Profile(_) => "profile",
            CoreError::Http(http::HttpError::Unreachable { .. } | http::HttpError::Timeout(_)) => {
                "unreachable"
            }
            CoreError::Http(_) => "http",
            CoreError::Refused { code, .. } => code,
            CoreError::Timeout => "timeout",
            CoreError::NotSent => "not_sent",
            CoreError::Invalid(_) => "invalid",
        }
    }
}

/// How a queued write ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The hub stored it (a send) or did it (a command); the `ok` as JSON.
    Done(String),
    /// The hub refused it.
    Failed { code: String, msg: String },
}

pub(crate) struct Shared {
    profile: Profile,
    cache: Mutex<Cache>,
    tls: Option<Arc<rustls::ClientConfig>>,
    changes: broadcast::Sender<Change>,
    state: watch::Sender<SyncState>,
    /// Wakes the sync task when the outbox has something new.
    outbox_ready: Notify,
    /// Outbox entries someone waits on.
    waiters: Mutex<HashMap<u64, Vec<oneshot::Sender<Outcome>>>>,
    /// This process's hold on the profile: its outbox owner id and its device.
    lock: ProcessLock,
}

impl Shared {
    pub(crate) fn cache(&self) -> MutexGuard<'_, Cache> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn changed(&self, change: Change) {
        let _ = self.changes.send(change);
    }

    pub(crate) fn set_state(&self, state: SyncState) {
        self.state.send_if_modified(|current| {
            if *current == state {
                false
            } else {
                *current = state.clone();
                true
            }
        });
    }

    pub(crate) fn finish(&self, n: u64, outcome: Outcome) {
        let waiters = self
            .waiters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&n);
        for waiter in waiters.into_iter().flatten() {
            let _ = waiter.send(outcome.clone());
        }
    }
}

/// A profile's engine: its cache, its outbox, its sync task.
#[derive(Clone)]
pub struct Core {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("profile", &self.shared.profile.name)
            .finish()
    }
}

/// Stops the sync task when dropped.
#[derive(Debug)]
pub struct SyncHandle {
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl SyncHandle {
    /// Stops the task and waits for it to close its connection.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for SyncHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Core {
    /// Opens a profile's cache. Writes interrupted in flight by a crash are recovered: sends
    /// go back to the queue, other commands are reported failed.
    pub fn open(profile: Profile) -> Result<Core, CoreError> {
        let lock = ProcessLock::acquire(&profile.dir, &profile.device).map_err(|error| {
            CoreError::Invalid(format!(
                "cannot lock the profile directory {}: {error}",
                profile.dir.display()
            ))
        })?;
        let mut cache = Cache::open(&profile.cache_path(), now_ms())?;
        cache.recover_outbox(|owner| lock.is_alive(owner))?;
        cache.forget_done_before(now_ms() - sync::DONE_KEPT_MS)?;
        if let Some(principal) = cache.meta("principal")?
            && principal != profile.principal
        {
            // Another identity's cache: start over (the outbox was written by it too).
            drop(cache);
            drop(lock);
            std::fs::remove_file(profile.cache_path()).map_err(|error| {
                CoreError::Invalid(format!(
                    "cannot replace the cache of another identity: {error}"
                ))
            })?;
            return Core::open(profile);
        }
        cache.set_meta("principal", &profile.principal)?;
        let tls = if profile.hub.tls {
            Some(hub_address::tls_config(profile.ca_file.as_deref()).map_err(CoreError::Invalid)?)
        } else {
            None
        };
        let (changes, _) = broadcast::channel(1024);
        Ok(Core {
            shared: Arc::new(Shared {
                profile,
                cache: Mutex::new(cache),
                tls,
                changes,
                state: watch::Sender::new(SyncState::Offline {
                    reason: "not started".into(),
                }),
                outbox_ready: Notify::new(),
                waiters: Mutex::new(HashMap::new()),
                lock,
            }),
        })
    }

    pub fn profile(&self) -> &Profile {
        &self.shared.profile
    }

    /// Starts syncing; dropping the handle stops it.
    pub fn start(&self) -> SyncHandle {
        // Set before the task runs, so no one reads a state left by an earlier task.
        self.shared.set_state(SyncState::Syncing);
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(sync::run(self.shared.clone(), stopped));
        SyncHandle {
            stop,
            task: Some(task),
        }
    }

    pub fn sync_state(&self) -> watch::Receiver<SyncState> {
        self.shared.state.subscribe()
    }

    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.shared.changes.subscribe()
    }

    /// Reads the cache.
    pub fn read<T>(
        &self,
        read: impl FnOnce(&Cache) -> Result<T, CacheError>,
    ) -> Result<T, CoreError> {
        Ok(read(&self.shared.cache())?)
    }

    /// Queues an event for a room; returns its outbox number. Works offline.
    pub fn send(&self, room: &str, kind: &str, body: serde_json::Value) -> Result<u64, CoreError> {
        // The hub would refuse a bad body; refusing it here keeps it out of the outbox.
        let Some(event_kind) = roundtable_protocol::bodies::EventKind::parse(kind) else {
            return Err(CoreError::Invalid(format!("unknown event kind {kind:?}")));
        };
        let length = serde_json::to_string(&body).map_or(0, |text| text.len());
        roundtable_protocol::bodies::validate_client_body(&event_kind, &body, length)
            .map_err(|error| CoreError::Invalid(error.msg))?;
        let client_key = random_key("k");
        let frame = ClientFrame::Send(Send {
            id: 0,
            room: room.to_owned(),
            client_key: client_key.clone(),
            kind: kind.to_owned(),
            body,
        });
        let n = self.shared.cache().enqueue(
            OutboxKind::Send,
            Some(&client_key),
            Some(room),
            &frame.to_json(),
            now_ms(),
            &self.shared.lock.id,
        )?;
        self.shared.changed(Change::Outbox);
        self.shared.outbox_ready.notify_one();
        Ok(n)
    }

    /// Queues a message (text with @mentions) for a room.
    pub fn send_message(&self, room: &str, text: &str) -> Result<u64, CoreError> {
        self.send(room, "message", serde_json::json!({ "text": text }))
    }

    /// Queues any other command; returns its outbox number. It is sent once the sync task
    /// is connected, at most once.
    pub fn command(&self, frame: ClientFrame) -> Result<u64, CoreError> {
        if matches!(frame, ClientFrame::Send(_)) {
            return Err(CoreError::Invalid("use Core::send for events".into()));
        }
        let n = self.shared.cache().enqueue(
            OutboxKind::Command,
            None,
            None,
            &frame.to_json(),
            now_ms(),
            &self.shared.lock.id,
        )?;
        self.shared.changed(Change::Outbox);
        self.shared.outbox_ready.notify_one();
        Ok(n)
    }

    /// Waits until outbox entry `n` is done or failed, or `timeout` passes.
    pub async fn wait(&self, n: u64, timeout: Duration) -> Result<Outcome, CoreError> {
        let (notify, outcome) = oneshot::channel();
        self.shared
            .waiters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(n)
            .or_default()
            .push(notify);
        // It may have ended before we started waiting.
        if let Some(outcome) = self.settled(n)? {
            return Ok(outcome);
        }
        match tokio::time::timeout(timeout, outcome).await {
            Ok(Ok(outcome)) => {
                let _ = self.shared.cache().forget_done(n);
                Ok(outcome)
            }
            _ => match self.settled(n)? {
                Some(outcome) => Ok(outcome),
                None => Err(CoreError::Timeout),
            },
        }
    }

    /// An outbox entry's end, if it has ended; a finished entry is forgotten once read.
    fn settled(&self, n: u64) -> Result<Option<Outcome>, CoreError> {
        let cache = self.shared.cache();
        let entry = cache.outbox_entry(n)?;
        if entry
            .as_ref()
            .is_some_and(|entry| entry.state == OutboxState::Done)
        {
            cache.forget_done(n)?;
        }
        Ok(match entry {
            // Collected by another waiter.
            None => Some(Outcome::Done(String::new())),
            Some(entry) => match entry.state {
                OutboxState::Done => Some(Outcome::Done(entry.reply.unwrap_or_default())),
                OutboxState::Failed => Some(Outcome::Failed {
                    code: entry.error_code.unwrap_or_default(),
                    msg: entry.error_msg.unwrap_or_default(),
                }),
                OutboxState::Queued | OutboxState::Inflight => None,
            },
        })
    }

    /// Sends a command and waits for the hub's `ok`. When time runs out before it was
    /// sent, it is withdrawn: nobody would see its reply.
    pub async fn call(&self, frame: ClientFrame, timeout: Duration) -> Result<OkReply, CoreError> {
        let n = self.command(frame)?;
        let outcome = match self.wait(n, timeout).await {
            Err(CoreError::Timeout) => {
                if self.shared.cache().cancel_queued(n)? {
                    return Err(CoreError::NotSent);
                }
                return Err(CoreError::Timeout);
            }
            other => other?,
        };
        let _ = self.shared.cache().forget_done(n);
        match outcome {
            Outcome::Done(reply) => serde_json::from_str(&reply)
                .map_err(|error| CoreError::Invalid(format!("an unreadable reply: {error}"))),
            Outcome::Failed { code, msg } => Err(CoreError::Refused { code, msg }),
        }
    }

    /// Remembers principals met in replies, so views show handles rather than ids.
    pub fn remember(&self, principals: impl IntoIterator<Item = cache::PrincipalRow>) {
        if let Err(error) = self.shared.cache().remember_principals(principals) {
            tracing::warn!(%error, "cannot remember principals");
        }
    }

    /// Puts a failed outbox entry back in the queue.
    pub fn retry(&self, n: u64) -> Result<bool, CoreError> {
        let retried = self.shared.cache().retry(n, &self.shared.lock.id)?;
        if retried {
            self.shared.changed(Change::Outbox);
            self.shared.outbox_ready.notify_one();
        }
        Ok(retried)
    }
}

/// Creates a user on a hub (`POST /v1/signup`) and saves it as profile `name` in `base`.
pub async fn signup(
    base: &std::path::Path,
    name: &str,
    hub: &str,
    request: SignupRequest,
    ca_file: Option<std::path::PathBuf>,
) -> Result<Profile, CoreError> {
    let address = HubAddress::parse(hub).map_err(CoreError::Invalid)?;
    let tls = if address.tls {
        Some(hub_address::tls_config(ca_file.as_deref()).map_err(CoreError::Invalid)?)
    } else {
        None
    };
    let body = serde_json::to_string(&request).expect("signup requests serialize");
    let response = http::request(&address, tls, "POST", "/v1/signup", Some(&body)).await?;
    if response.status != 200 {
        let error: serde_json::Value = serde_json::from_str(&response.body).unwrap_or_default();
        return Err(CoreError::Refused {
            code: error["code"].as_str().unwrap_or("http").to_owned(),
            msg: error["msg"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("HTTP {}", response.status)),
        });
    }
    let created: SignupOk = serde_json::from_str(&response.body)
        .map_err(|error| CoreError::Invalid(format!("an unreadable signup reply: {error}")))?;
    Ok(Profile::save(
        base,
        name,
        hub,
        &created.principal.id,
        &created.principal.handle,
        &Secret::new(created.token),
        ca_file,
    )?)
}

/// Saves a profile for an existing token, after checking it with the hub.
pub async fn login(
    base: &std::path::Path,
    name: &str,
    hub: &str,
    token: &str,
    ca_file: Option<std::path::PathBuf>,
) -> Result<Profile, CoreError> {
    let address = HubAddress::parse(hub).map_err(CoreError::Invalid)?;
    let tls = if address.tls {
        Some(hub_address::tls_config(ca_file.as_deref()).map_err(CoreError::Invalid)?)
    } else {
        None
    };
    let mut link = link::Link::connect(&address, tls)
        .await
        .map_err(|error| CoreError::Invalid(error.to_string()))?;
    let principal = link
        .auth(token, &random_key("login"))
        .await
        .map_err(|error| CoreError::Refused {
            code: "unauthorized".into(),
            msg: error.to_string(),
        })?;
    link.close().await;
    Ok(Profile::save(
        base,
        name,
        hub,
        &principal.id,
        &principal.handle,
        &Secret::new(token),
        ca_file,
    )?)
}
