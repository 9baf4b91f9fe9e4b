//! Roundtable's client engine. The desktop app, the CLI, the MCP bridge and hooks see the
//! network through it: a local SQLite cache of what one principal may see on its hub (so
//! apps open instantly and work offline), kept in sync by a background task, and an outbox
//! that holds every write until the hub has it. Several processes may use one profile at
//! once; a short-lived one hands its writes to a long-running one. It knows nothing of any
//! UI toolkit.
//!
//! Layout:
//! - [`profile`]: who we are and where the hub is; the token, kept private.
//! - [`cache`]: the SQLite cache (one writer thread, reading connections of its own), its
//!   projections' queries and its outbox.
//! - [`projection`]: what an event changes; pure. [`changes`]: what views must refresh.
//! - [`link`]: one WebSocket connection to the hub.
//! - [`process_lock`]: which processes use the profile; [`hand_off`]: how a short-lived
//!   one hands its writes to a long-running one.
//! - [`sync`]: the task that keeps the cache in step with the hub and drains the outbox.
//! - [`client`]: what every client does beyond sending frames (finding a room by title,
//!   waiting until synced, resolving an agent, sending now); [`wait_for`]: waiting for
//!   something to arrive; [`agents`]: registering and governing agents.
//! - [`http`], [`hub_address`]: signup and addresses. [`errors`]: typed errors.
//!
//! Start with [`Core::open`], then [`Core::start`] to sync; read with [`Core::read`], write
//! with [`Core::send`] and [`Core::call`], watch [`Core::changes`] and [`Core::sync_state`].
//! No async worker ever blocks on SQLite: writes run on the cache's writer thread, reads on
//! blocking threads over connections of their own.

pub mod acp;
pub mod agent_session;
pub mod agent_work;
pub mod agents;
pub mod budgets;
pub mod cache;
pub mod changes;
pub mod client;
pub mod errors;
pub mod hand_off;
pub mod hook_settings;
pub mod hooks;
pub mod http;
pub mod hub_address;
pub mod link;
pub mod local_agents;
pub mod log_events;
pub mod notification_text;
pub mod pings;
pub mod process_lock;
pub mod profile;
pub mod projection;
pub mod room_text;
pub mod runner;
pub mod screens;
pub mod secret_store;
pub mod session_claims;
pub mod sync;
pub mod teams;
pub mod transport;
pub mod wait_for;
pub mod web_links;
pub mod work;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use rand::RngCore;
use roundtable_protocol::ClientFrame;
use roundtable_protocol::client::{Command, SendCmd, SignupRequest};
use roundtable_protocol::server::{OkReply, SignupOk};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast, oneshot, watch};
use tracing::Instrument as _;

use crate::cache::{
    Cache, CacheError, CacheReaders, CacheView, CacheWriter, OutboxKind, OutboxState,
};
pub use crate::changes::Change;
pub use crate::client::Delivered;
pub use crate::errors::{ClientCode, CoreError, ErrorReport, FailureCode, Outcome, ReportCode};
use crate::hub_address::HubAddress;
use crate::process_lock::ProcessLock;
use crate::profile::{Profile, Secret};

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SyncState {
    /// This process has not started syncing (it reads the cache, or hands its writes to a
    /// process that syncs).
    NotStarted,
    /// Connected and up to date; live.
    Idle,
    /// Connecting, or catching up.
    Syncing,
    /// The hub cannot be reached; retrying with backoff. Writes wait in the outbox.
    Offline { reason: String },
    /// Retrying cannot help (the token was refused or revoked, the cache failed): the user
    /// must act.
    Error { reason: String },
}

/// How a core syncs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncOptions {
    /// Accept writes that short-lived processes on this profile hand over (see
    /// [`hand_off`]). For processes that run long: the desktop app, an MCP bridge,
    /// `tail --follow`.
    pub serve_hand_offs: bool,
}

pub(crate) type Waiters = Mutex<HashMap<u64, Vec<oneshot::Sender<Outcome>>>>;

pub(crate) struct Shared {
    profile: Profile,
    writer: CacheWriter,
    readers: Arc<CacheReaders>,
    tls: Option<Arc<rustls::ClientConfig>>,
    changes: broadcast::Sender<Change>,
    state: watch::Sender<SyncState>,
    /// Wakes the sync task when the outbox has something new.
    outbox_ready: Notify,
    /// Cuts a reconnect's backoff short: a hand-off arrived, someone waits.
    reconnect_now: Notify,
    /// Outbox entries someone waits on.
    waiters: Arc<Waiters>,
    /// This process's hold on the profile: its outbox owner id and its device.
    lock: ProcessLock,
    /// Sync tasks running in this process (0 or 1 in practice).
    syncing: Arc<AtomicUsize>,
    /// The last connection found this agent stopped by its owner (close 4011): offline,
    /// but not for want of a network, and not for a bad token either.
    stopped: AtomicBool,
}

impl Shared {
    pub(crate) fn changed(&self, change: Change) {
        let _ = self.changes.send(change);
    }

    pub(crate) fn changed_all(&self, changes: impl IntoIterator<Item = Change>) {
        for change in changes {
            self.changed(change);
        }
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
        finish(&self.waiters, n, outcome);
    }

    /// Runs a job on the cache's writer thread.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Cache) -> Result<T, CacheError> + Send + 'static,
    ) -> Result<T, CacheError> {
        self.writer.run(job).await
    }
}

pub(crate) fn finish(waiters: &Waiters, n: u64, outcome: Outcome) {
    let waiting = waiters
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .remove(&n);
    for waiter in waiting.into_iter().flatten() {
        let _ = waiter.send(outcome.clone());
    }
}

pub(crate) fn watch_entry(waiters: &Waiters, n: u64) -> oneshot::Receiver<Outcome> {
    let (notify, outcome) = oneshot::channel();
    waiters
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(n)
        .or_default()
        .push(notify);
    outcome
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

/// Stops the sync task (and the hand-off listener) when dropped.
#[derive(Debug)]
pub struct SyncHandle {
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    syncing: Arc<AtomicUsize>,
}

impl SyncHandle {
    /// Stops the tasks and waits for them to close their connections.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }
}

impl Drop for SyncHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for task in &self.tasks {
            task.abort();
        }
        self.syncing.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Core {
    /// Opens a profile's cache (on a blocking thread). Writes interrupted in flight by a
    /// crash are recovered: sends go back to the queue, other commands are reported failed.
    pub async fn open(profile: Profile) -> Result<Core, CoreError> {
        tokio::task::spawn_blocking(move || Core::open_blocking(profile))
            .await
            .map_err(|error| CoreError::Invalid(format!("opening the cache failed: {error}")))?
    }

    /// As [`Core::open`], for callers outside an async runtime.
    pub fn open_blocking(profile: Profile) -> Result<Core, CoreError> {
        let lock = ProcessLock::acquire(&profile.dir, &profile.device).map_err(|source| {
            CoreError::Io {
                context: format!(
                    "cannot lock the profile directory {}",
                    profile.dir.display()
                ),
                source,
            }
        })?;
        let path = profile.cache_path();
        let mut cache = Cache::open(&path, now_ms())?;
        if let Some(principal) = cache.meta("principal")?
            && principal != profile.principal
        {
            // Another identity's cache: start over (the outbox was written by it too).
            drop(cache);
            for suffix in ["", "-wal", "-shm"] {
                let file = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
                match std::fs::remove_file(&file) {
                    Ok(()) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => {
                        return Err(CoreError::Io {
                            context: "cannot replace the cache of another identity".into(),
                            source,
                        });
                    }
                }
            }
            cache = Cache::open(&path, now_ms())?;
        }
        cache.recover_outbox(|owner| lock.is_alive(owner))?;
        cache.forget_done_before(now_ms() - sync::DONE_KEPT_MS)?;
        cache.set_meta("principal", &profile.principal)?;
        let tls = if profile.hub.tls {
            Some(
                hub_address::tls_config_for(&profile.hub, profile.ca_file.as_deref())
                    .map_err(CoreError::Invalid)?,
            )
        } else {
            None
        };
        let writer = CacheWriter::start(cache).map_err(|source| CoreError::Io {
            context: "cannot start the cache's writer thread".into(),
            source,
        })?;
        let (changes, _) = broadcast::channel(4096);
        Ok(Core {
            shared: Arc::new(Shared {
                profile,
                writer,
                readers: Arc::new(CacheReaders::new(path)),
                tls,
                changes,
                state: watch::Sender::new(SyncState::NotStarted),
                outbox_ready: Notify::new(),
                reconnect_now: Notify::new(),
                waiters: Arc::new(Mutex::new(HashMap::new())),
                lock,
                syncing: Arc::new(AtomicUsize::new(0)),
                stopped: AtomicBool::new(false),
            }),
        })
    }

    pub fn profile(&self) -> &Profile {
        &self.shared.profile
    }

    /// Our principal's id.
    pub fn me(&self) -> &str {
        &self.shared.profile.principal
    }

    /// Whether we are an agent (by our handle: agents' handles have an owner part).
    pub fn is_agent(&self) -> bool {
        self.shared.profile.handle.contains('/')
    }

    /// Starts syncing; dropping the handle stops it.
    pub fn start(&self) -> SyncHandle {
        self.start_with(SyncOptions::default())
    }

    /// Starts syncing with `options`; dropping the handle stops it.
    pub fn start_with(&self, options: SyncOptions) -> SyncHandle {
        // Set before the task runs, so no one reads a state left by an earlier task.
        self.shared.set_state(SyncState::Syncing);
        self.shared.syncing.fetch_add(1, Ordering::SeqCst);
        let (stop, stopped) = watch::channel(false);
        // What syncing logs names the profile's principal and hub.
        let span = tracing::debug_span!(
            "sync",
            principal = %self.shared.profile.principal,
            hub = %self.shared.profile.hub
        );
        let mut tasks = vec![tokio::spawn(
            sync::run(self.shared.clone(), stopped.clone()).instrument(span.clone()),
        )];
        if options.serve_hand_offs {
            tasks.push(tokio::spawn(
                hand_off::serve(self.shared.clone(), stopped).instrument(span),
            ));
        }
        SyncHandle {
            stop,
            tasks,
            syncing: self.shared.syncing.clone(),
        }
    }

    /// Whether this process runs a sync task now.
    pub fn is_syncing(&self) -> bool {
        self.shared.syncing.load(Ordering::SeqCst) > 0
    }

    pub fn sync_state(&self) -> watch::Receiver<SyncState> {
        self.shared.state.subscribe()
    }

    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.shared.changes.subscribe()
    }

    /// Reads the cache on a blocking thread, over a reading connection that never waits
    /// for a write. Everything `read` asks sees one committed state.
    pub async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&CacheView) -> Result<T, CacheError> + Send + 'static,
    ) -> Result<T, CoreError> {
        let readers = self.shared.readers.clone();
        tokio::task::spawn_blocking(move || readers.with(read))
            .await
            .map_err(|error| CoreError::Invalid(format!("a cache read failed: {error}")))?
            .map_err(CoreError::from)
    }

    /// As [`Core::read`], for callers outside an async runtime (it blocks while it reads).
    pub fn read_blocking<T>(
        &self,
        read: impl FnOnce(&CacheView) -> Result<T, CacheError>,
    ) -> Result<T, CoreError> {
        Ok(self.shared.readers.with(read)?)
    }

    /// Runs a job on the cache's writer thread.
    pub(crate) async fn write_job<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Cache) -> Result<T, CacheError> + Send + 'static,
    ) -> Result<T, CoreError> {
        Ok(self.shared.write(job).await?)
    }

    /// Queues an event for a room with a fresh `client_key`; returns its outbox number.
    /// Works offline.
    pub async fn send(
        &self,
        room: &str,
        kind: &str,
        body: serde_json::Value,
    ) -> Result<u64, CoreError> {
        self.send_with_key(room, &random_key("k"), kind, body).await
    }

    /// Queues an event with a `client_key` the caller chose (derived, say, from a log file
    /// and an offset): a publisher that runs again after a crash queues it once, and the hub
    /// stores it once. Keys are 8 to 64 characters.
    pub async fn send_with_key(
        &self,
        room: &str,
        client_key: &str,
        kind: &str,
        body: serde_json::Value,
    ) -> Result<u64, CoreError> {
        if !(8..=64).contains(&client_key.len()) {
            return Err(CoreError::Invalid(format!(
                "a client_key has 8 to 64 characters, not {}",
                client_key.len()
            )));
        }
        // The hub would refuse a bad body; refusing it here keeps it out of the outbox.
        let Some(event_kind) = roundtable_protocol::bodies::EventKind::parse(kind) else {
            return Err(CoreError::Invalid(format!("unknown event kind {kind:?}")));
        };
        let length = serde_json::to_string(&body).map_or(0, |text| text.len());
        roundtable_protocol::bodies::validate_client_body(&event_kind, &body, length)
            .map_err(|error| CoreError::Invalid(error.msg))?;
        let frame = ClientFrame::Send(SendCmd {
            id: 0,
            room: room.to_owned(),
            client_key: client_key.to_owned(),
            kind: kind.to_owned(),
            body,
        });
        let (room, key, owner) = (
            room.to_owned(),
            client_key.to_owned(),
            self.shared.lock.id.clone(),
        );
        let json = frame.to_json();
        let n = self
            .shared
            .write(move |cache| {
                cache.enqueue(
                    OutboxKind::Send,
                    Some(&key),
                    Some(&room),
                    &json,
                    now_ms(),
                    &owner,
                )
            })
            .await?;
        self.queued();
        Ok(n)
    }

    /// Queues a message (text with @mentions) for a room.
    pub async fn send_message(&self, room: &str, text: &str) -> Result<u64, CoreError> {
        self.send(room, "message", serde_json::json!({ "text": text }))
            .await
    }

    fn queued(&self) {
        self.shared.changed(Change::Outbox);
        self.shared.outbox_ready.notify_one();
    }

    /// Queues a command (not a `send`: see [`Core::send`]); returns its outbox number and
    /// a receiver of its outcome, registered before anyone can send it. It is sent once the
    /// sync task is connected, at most once.
    pub(crate) async fn enqueue_command(
        &self,
        frame: ClientFrame,
    ) -> Result<(u64, oneshot::Receiver<Outcome>), CoreError> {
        if matches!(frame, ClientFrame::Send(_)) {
            return Err(CoreError::Invalid("use Core::send for events".into()));
        }
        let json = frame.to_json();
        let owner = self.shared.lock.id.clone();
        let waiters = self.shared.waiters.clone();
        let queued = self
            .shared
            .write(move |cache| {
                let n = cache.enqueue(OutboxKind::Command, None, None, &json, now_ms(), &owner)?;
                Ok((n, watch_entry(&waiters, n)))
            })
            .await?;
        self.queued();
        Ok(queued)
    }

    /// Queues a command without waiting for its answer; returns its outbox number (see
    /// [`Core::wait`]). It is sent once the sync task is connected, at most once.
    pub async fn command<C: Command>(&self, command: C) -> Result<u64, CoreError> {
        Ok(self.enqueue_command(command.into()).await?.0)
    }

    /// Waits until outbox entry `n` is done or failed, or `timeout` passes.
    pub async fn wait(&self, n: u64, timeout: Duration) -> Result<Outcome, CoreError> {
        let waiters = self.shared.waiters.clone();
        // Registered on the writer thread: either the entry has ended (and we read how), or
        // its end comes after this and reaches the receiver.
        let (outcome, ended) = self
            .shared
            .write(move |cache| {
                let receiver = watch_entry(&waiters, n);
                Ok((receiver, settled(cache, n)?))
            })
            .await?;
        if let Some(ended) = ended {
            return Ok(ended);
        }
        match tokio::time::timeout(timeout, outcome).await {
            Ok(Ok(outcome)) => {
                let _ = self.shared.write(move |cache| cache.forget_done(n)).await;
                Ok(outcome)
            }
            _ => self
                .shared
                .write(move |cache| settled(cache, n))
                .await?
                .ok_or(CoreError::Timeout),
        }
    }

    /// Sends a command and waits for the hub's answer, decoded as the command's reply.
    /// When time runs out before it was sent, it is withdrawn: nobody would see its reply.
    pub async fn call<C: Command>(
        &self,
        command: C,
        timeout: Duration,
    ) -> Result<C::Reply, CoreError> {
        let (n, outcome) = self.enqueue_command(command.into()).await?;
        let outcome = match tokio::time::timeout(timeout, outcome).await {
            Ok(Ok(outcome)) => outcome,
            _ => {
                let cancelled = self
                    .shared
                    .write(move |cache| cache.cancel_queued(n))
                    .await?;
                if cancelled {
                    self.shared.changed(Change::Outbox);
                    return Err(CoreError::NotSent);
                }
                match self.shared.write(move |cache| settled(cache, n)).await? {
                    Some(outcome) => outcome,
                    None => return Err(CoreError::Timeout),
                }
            }
        };
        let _ = self.shared.write(move |cache| cache.forget_done(n)).await;
        match outcome {
            Outcome::Done(reply) => decode_reply::<C::Reply>(&reply),
            Outcome::Failed { code, msg } => Err(CoreError::from_failure(code, msg)),
        }
    }

    /// Remembers principals met in replies, so views show handles rather than ids.
    pub async fn remember(&self, principals: Vec<cache::PrincipalRow>) {
        if let Err(error) = self
            .shared
            .write(move |cache| cache.remember_principals(principals))
            .await
        {
            tracing::warn!(%error, "cannot remember principals");
        }
    }

    /// Puts a failed outbox entry back in the queue.
    pub async fn retry(&self, n: u64) -> Result<bool, CoreError> {
        let owner = self.shared.lock.id.clone();
        let retried = self
            .shared
            .write(move |cache| cache.retry(n, &owner))
            .await?;
        if retried {
            self.queued();
        }
        Ok(retried)
    }

    /// Moves our read marker of `stream` (a room id, or `inbox`) to `seq`, never back. It
    /// reaches the hub with the next `ack`, and from there our other devices.
    pub async fn mark_read(&self, stream: &str, seq: u64) -> Result<(), CoreError> {
        let owned = stream.to_owned();
        let moved = self
            .shared
            .write(move |cache| cache.mark_read(&owned, seq))
            .await?;
        if moved {
            self.shared.changed(Change::ReadMarker {
                stream: stream.to_owned(),
            });
        }
        Ok(())
    }
}

/// An outbox entry's end, if it has ended; a finished entry is forgotten once read.
fn settled(cache: &mut Cache, n: u64) -> Result<Option<Outcome>, CacheError> {
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
                code: FailureCode::parse(entry.error_code.as_deref().unwrap_or("")),
                msg: entry.error_msg.unwrap_or_default(),
            }),
            OutboxState::Queued | OutboxState::Inflight => None,
        },
    })
}

/// An `ok` frame's fields as the reply type of the command it answers.
pub(crate) fn decode_reply<T: serde::de::DeserializeOwned>(reply: &str) -> Result<T, CoreError> {
    let ok: OkReply = serde_json::from_str(reply).map_err(|error| {
        CoreError::Invalid(format!("an unreadable reply from the hub: {error}"))
    })?;
    ok.decode()
        .map_err(|error| CoreError::Invalid(format!("an unexpected reply from the hub: {error}")))
}

/// The hub at `hub` and how to reach it: its TLS settings (its CA from `ca_file`, or the
/// system's), or none for a plain address, which only loopback may use unless `insecure`.
fn hub_to_reach(
    hub: &str,
    ca_file: Option<&std::path::Path>,
    insecure: bool,
) -> Result<(HubAddress, Option<std::sync::Arc<rustls::ClientConfig>>), CoreError> {
    let address = HubAddress::parse(hub).map_err(CoreError::Invalid)?;
    address.check_plain(insecure).map_err(CoreError::Invalid)?;
    let tls = if address.tls {
        Some(hub_address::tls_config_for(&address, ca_file).map_err(CoreError::Invalid)?)
    } else {
        None
    };
    Ok((address, tls))
}

/// Creates a user on a hub (`POST /v1/signup`) and saves it as profile `name` in `base`.
/// A hub on another machine without TLS is refused unless `insecure`.
pub async fn signup(
    base: &std::path::Path,
    name: &str,
    hub: &str,
    request: SignupRequest,
    ca_file: Option<std::path::PathBuf>,
    insecure: bool,
) -> Result<Profile, CoreError> {
    let (address, tls) = hub_to_reach(hub, ca_file.as_deref(), insecure)?;
    let body = serde_json::to_string(&request).expect("signup requests serialize");
    let response = http::request(&address, tls, "POST", "/v1/signup", Some(&body)).await?;
    if response.status != 200 {
        let error: serde_json::Value = serde_json::from_str(&response.body).unwrap_or_default();
        return Err(CoreError::Refused {
            code: serde_json::from_value(error["code"].clone())
                .unwrap_or(roundtable_protocol::ErrorCode::Unknown),
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
    insecure: bool,
) -> Result<Profile, CoreError> {
    let (address, tls) = hub_to_reach(hub, ca_file.as_deref(), insecure)?;
    let mut link = link::Link::connect(&address, tls)
        .await
        .map_err(|error| CoreError::Offline(error.to_string()))?;
    let principal = link
        .auth(token, &random_key("login"))
        .await
        .map_err(|error| CoreError::TokenRefused(error.to_string()))?;
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

#[cfg(test)]
mod test_support;
#[cfg(test)]
pub(crate) use test_support::{keep_ui_fixture, shared_agent_logs, ui_outcome, wire};
