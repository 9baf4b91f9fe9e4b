//! Following the agent CLIs' logs as they are written. A long-running process (the desktop
//! app, `roundtable watch`) reads each log from where it stopped — the offset is kept in the
//! cache, so a restart reads nothing twice — then follows changes through the operating
//! system's file notifications, a few milliseconds after they settle. A last line without
//! its newline waits for it; a file that shrank or was replaced is read again from the
//! start. What the lines say goes into the cache, and the work of onboarded agents is
//! published (see [`super::publish`]) in the same transaction.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use super::architecture::{self, Architecture, Loaded};
use super::pricing::Pricing;
use super::publish::{AgentTarget, Targets, WorkPublisher};
use super::scan::{self, LineParser, LogFile, LogKind};
use crate::cache::{Cache, CacheError, LogFileState, LogRead, Publishing};
use crate::local_agents::Environment;
use crate::log_events::{Framework, LineOutcome, LogEvent, TaskItem};
use crate::session_claims::SessionClaims;
use crate::{Change, Core, CoreError, now_ms};

mod reading;

pub use reading::{has_news, read_new};

/// How long changes settle before they are read.
const SETTLE: Duration = Duration::from_millis(30);
/// How often the directories are looked at again (new directories; missed notifications)
/// and the agents reloaded (a session's claim is read when its lines are, not at rescans).
const RESCAN: Duration = Duration::from_secs(10);

/// What the watcher is doing, for a view to show.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum WatchState {
    /// The first pass over the logs.
    Scanning {
        files_done: usize,
        files: usize,
        bytes_done: u64,
        bytes: u64,
    },
    /// Caught up; following changes.
    Watching { files: usize },
    /// It cannot go on (and says why).
    Failed { reason: String },
}

/// What the watcher needs.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub env: Environment,
    /// The profiles directory (onboarded agents, their bindings).
    pub profiles: PathBuf,
    pub pricing: Pricing,
    /// Rooms (ids) the person shares their agents' work with, besides each home room.
    pub share_rooms: Vec<String>,
}

/// A running watcher; dropping it stops it.
#[derive(Debug)]
pub struct LogWatch {
    stop: watch::Sender<bool>,
    reload: Arc<tokio::sync::Notify>,
    task: Option<tokio::task::JoinHandle<()>>,
    pub state: watch::Receiver<WatchState>,
}

impl LogWatch {
    /// Reads the onboarded agents again now (one was onboarded or offboarded), rather than at
    /// the next rescan: what their sessions write from then on is published.
    pub fn reload_agents(&self) {
        self.reload.notify_one();
    }

    /// Stops the watcher and waits for it.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for LogWatch {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The agents of the person whose profiles are in `profiles` (onboarded on an agent CLI, or
/// a team's), with their home rooms, and who claimed which session of this machine.
pub fn load_targets(profiles: &Path, share_rooms: &[String]) -> Targets {
    let mut agents = Vec::new();
    if let Ok(entries) = std::fs::read_dir(profiles) {
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let Ok(profile) = crate::profile::Profile::load(profiles, &name) else {
                continue;
            };
            if !profile.handle.contains('/') {
                continue;
            }
            let Some(home) = profile.home_room.clone() else {
                continue;
            };
            let mut rooms = vec![home];
            rooms.extend(share_rooms.iter().cloned());
            rooms.dedup();
            agents.push(AgentTarget {
                agent_id: profile.principal.clone(),
                handle: profile.handle.clone(),
                rooms,
            });
        }
    }
    agents.sort_by(|a, b| a.handle.cmp(&b.handle));
    let claims = SessionClaims::beside(profiles);
    Targets {
        agents,
        owner_of: Some(Arc::new(move |framework, session| {
            claims.owner(framework, session)
        })),
    }
}

/// The architecture of the repository `path` is in, looked up once per repository.
fn architecture_of(path: &Path, known: &mut HashMap<PathBuf, Loaded>) -> Option<Architecture> {
    let root = architecture::find_repository(path)?;
    let now = std::time::Instant::now();
    known
        .entry(root.clone())
        .or_insert_with(|| Loaded::load(&root, now))
        .current(&root, now)
}

/// What the watcher carries from one read to the next.
struct Following {
    options: Arc<WatchOptions>,
    targets: Arc<Targets>,
    /// Repositories' architectures by root, as loaded (none: no manifest, or a broken file).
    architectures: HashMap<PathBuf, Loaded>,
    /// Where the cache is in each file, kept in step with it.
    positions: HashMap<String, LogFileState>,
}

/// How many reads go into one transaction, at most, and how many bytes of logs.
const BATCH_READS: usize = 256;
const BATCH_BYTES: u64 = 32 << 20;

impl Core {
    /// Starts following this machine's agent logs into the cache (and publishing onboarded
    /// agents' work); dropping the handle stops it.
    pub fn watch_logs(&self, options: WatchOptions) -> LogWatch {
        let (stop, stopped) = watch::channel(false);
        let (state, state_receiver) = watch::channel(WatchState::Scanning {
            files_done: 0,
            files: 0,
            bytes_done: 0,
            bytes: 0,
        });
        let core = self.clone();
        let reload = Arc::new(tokio::sync::Notify::new());
        let reloads = reload.clone();
        let task = tokio::spawn(async move {
            if let Err(error) = core.follow_logs(options, stopped, &reloads, &state).await {
                let _ = state.send(WatchState::Failed {
                    reason: error.to_string(),
                });
            }
        });
        LogWatch {
            stop,
            reload,
            task: Some(task),
            state: state_receiver,
        }
    }

    /// What following the logs starts from: the agents that publish, and where the cache is
    /// in each file.
    async fn start_following(&self, options: WatchOptions) -> Result<Following, CoreError> {
        let positions = self
            .read(|cache| cache.log_files())
            .await?
            .into_iter()
            .map(|state| (state.path.clone(), state))
            .collect();
        Ok(Following {
            targets: Arc::new(load_targets(&options.profiles, &options.share_rooms)),
            options: Arc::new(options),
            architectures: HashMap::new(),
            positions,
        })
    }

    /// Reads what is new in this machine's agent logs into the cache once (publishing
    /// claimed sessions' work), without following them: what a one-off view does first, so
    /// it shows this machine's sessions as they are now, watcher or not.
    pub async fn read_logs_once(&self, options: WatchOptions) -> Result<(), CoreError> {
        let roots = scan::roots(&options.env);
        let mut following = self.start_following(options).await?;
        let (_never, stop) = watch::channel(false);
        let files = find_blocking(&roots).await?;
        self.catch_up_files(files, &mut following, &stop, |_| {})
            .await?;
        self.publish_claimed(&mut following).await
    }

    async fn follow_logs(
        &self,
        options: WatchOptions,
        mut stop: watch::Receiver<bool>,
        reload: &tokio::sync::Notify,
        state: &watch::Sender<WatchState>,
    ) -> Result<(), CoreError> {
        let roots = scan::roots(&options.env);
        let (changed, mut changes) = mpsc::unbounded_channel::<PathBuf>();
        let handler = move |event: notify::Result<notify::Event>| {
            use notify::event::{AccessKind, AccessMode, EventKind};
            // Opening and reading a file is no change (and the watcher's own reads would
            // wake it again); closing it after writing is.
            if let Ok(event) = event
                && (!matches!(event.kind, EventKind::Access(_))
                    || event.kind == EventKind::Access(AccessKind::Close(AccessMode::Write)))
            {
                for path in event.paths {
                    let _ = changed.send(path);
                }
            }
        };
        // A linked directory in the logs is not walked into (`~/.claude/projects/x -> /`
        // would watch the whole file system and use up the inotify watches).
        let mut watcher = notify::RecommendedWatcher::new(
            handler,
            notify::Config::default().with_follow_symlinks(false),
        )
        .map_err(|error| CoreError::Invalid(format!("cannot watch the logs: {error}")))?;
        let mut watched: HashSet<PathBuf> = HashSet::new();
        let mut following = self.start_following(options).await?;
        // The first pass, with progress. Watching starts before it, so nothing written
        // meanwhile is missed.
        for (root, _) in &roots {
            if root.is_dir() && watcher.watch(root, RecursiveMode::Recursive).is_ok() {
                watched.insert(root.clone());
            }
        }
        // Claims of sessions: one that appears publishes what was read of its session.
        let claims = SessionClaims::beside(&following.options.profiles);
        if let Err(error) = crate::profile::create_private_dir(claims.dir())
            .map_err(|error| error.to_string())
            .and_then(|()| {
                watcher
                    .watch(claims.dir(), RecursiveMode::Recursive)
                    .map_err(|error| error.to_string())
            })
        {
            tracing::warn!(%error, "cannot follow the sessions' claims; they are read at each rescan");
        }
        let files = find_blocking(&roots).await?;
        let mut progress = WatchState::Scanning {
            files_done: 0,
            files: files.len(),
            bytes_done: 0,
            bytes: files.iter().map(|file| file.size).sum(),
        };
        let mut known = files.len();
        let finished = self
            .catch_up_files(files, &mut following, &stop, |file| {
                if let WatchState::Scanning {
                    files_done,
                    bytes_done,
                    ..
                } = &mut progress
                {
                    *files_done += 1;
                    *bytes_done += file.size;
                }
                let _ = state.send(progress.clone());
            })
            .await?;
        if !finished {
            return Ok(());
        }
        self.publish_claimed(&mut following).await?;
        let _ = state.send(WatchState::Watching { files: known });
        let mut rescan = tokio::time::interval(RESCAN);
        rescan.tick().await;
        loop {
            tokio::select! {
                Some(first) = changes.recv() => {
                    // Let a burst of writes settle, then read each file once.
                    let mut paths: HashSet<PathBuf> = [first].into_iter().collect();
                    tokio::time::sleep(SETTLE).await;
                    while let Ok(path) = changes.try_recv() {
                        paths.insert(path);
                    }
                    let files = paths
                        .iter()
                        .filter_map(|path| scan::log_file_at(&roots, path))
                        .collect();
                    self.catch_up_files(files, &mut following, &stop, |_| {}).await?;
                    if paths.iter().any(|path| path.starts_with(claims.dir())) {
                        self.publish_claimed(&mut following).await?;
                    }
                }
                _ = rescan.tick() => {
                    following.targets =
                        Arc::new(load_targets(&following.options.profiles, &following.options.share_rooms));
                    following.architectures.clear();
                    for (root, _) in &roots {
                        if !watched.contains(root)
                            && root.is_dir()
                            && watcher.watch(root, RecursiveMode::Recursive).is_ok()
                        {
                            watched.insert(root.clone());
                        }
                    }
                    let files = find_blocking(&roots).await?;
                    let found = files.len();
                    self.catch_up_files(files, &mut following, &stop, |_| {}).await?;
                    self.publish_claimed(&mut following).await?;
                    if found != known {
                        known = found;
                        let _ = state.send(WatchState::Watching { files: known });
                    }
                }
                () = reload.notified() => {
                    following.targets =
                        Arc::new(load_targets(&following.options.profiles, &following.options.share_rooms));
                    self.publish_claimed(&mut following).await?;
                }
                _ = stop.changed() => return Ok(()),
            }
        }
    }

    /// Reads what is new in `files` (several at once) and applies it in batches, in the
    /// files' order; `done` is told of each file. `false` when stopped before the end.
    async fn catch_up_files(
        &self,
        files: Vec<LogFile>,
        following: &mut Following,
        stop: &watch::Receiver<bool>,
        mut done: impl FnMut(&LogFile),
    ) -> Result<bool, CoreError> {
        use futures_util::StreamExt as _;
        let mut news = Vec::new();
        for file in files {
            let stored = following.positions.get(&file.path.display().to_string());
            if has_news(&file, stored) {
                let stored = stored.cloned();
                news.push((file, stored));
            } else {
                done(&file);
            }
        }
        let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut reads = futures_util::stream::iter(news)
            .map(|(file, stored)| {
                tokio::task::spawn_blocking(move || {
                    let read = read_new(&file, stored.as_ref());
                    (file, read)
                })
            })
            .buffered(parallel);
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        while let Some(joined) = reads.next().await {
            if *stop.borrow() {
                return Ok(false);
            }
            let (file, read) = joined.map_err(|error| CoreError::Invalid(error.to_string()))?;
            if let Some(read) = read {
                batch_bytes += read.state.offset.saturating_sub(read.from);
                batch.push(read);
            }
            if batch.len() >= BATCH_READS || batch_bytes >= BATCH_BYTES {
                self.apply_reads(std::mem::take(&mut batch), following)
                    .await?;
                batch_bytes = 0;
            }
            done(&file);
        }
        if !batch.is_empty() {
            self.apply_reads(batch, following).await?;
        }
        Ok(true)
    }

    /// Runs `job` on the cache's writer with the publisher of this machine's work (the
    /// rooms of `following`'s agents, its prices, each repository's architecture looked up
    /// once and kept for next time); what it returned and how many events it published.
    async fn publishing_job<T: Send + 'static>(
        &self,
        following: &mut Following,
        job: impl FnOnce(&mut Cache, &str, &mut dyn Publishing) -> Result<T, CacheError>
        + Send
        + 'static,
    ) -> Result<(T, usize), CoreError> {
        let owner = self.shared.lock.id.clone();
        let (options, targets) = (following.options.clone(), following.targets.clone());
        let mut architectures = std::mem::take(&mut following.architectures);
        let (done, published, architectures) = self
            .write_job(move |cache| {
                let mut lookup = |path: &Path| architecture_of(path, &mut architectures);
                let mut publisher = Counted {
                    inner: WorkPublisher {
                        targets: &targets,
                        pricing: &options.pricing,
                        architecture_of: &mut lookup,
                    },
                    published: 0,
                };
                let done = job(cache, &owner, &mut publisher)?;
                Ok((done, publisher.published, architectures))
            })
            .await?;
        following.architectures = architectures;
        Ok((done, published))
    }

    /// Applies reads in one transaction, with what they publish.
    async fn apply_reads(
        &self,
        reads: Vec<LogRead>,
        following: &mut Following,
    ) -> Result<(), CoreError> {
        let ((reads, applied), published) = self
            .publishing_job(following, move |cache, owner, publisher| {
                let applied = cache.apply_log_reads(&reads, now_ms(), owner, publisher)?;
                Ok((reads, applied))
            })
            .await?;
        let mut changed = false;
        for (read, changes) in reads.into_iter().zip(applied) {
            match changes {
                Some(changes) => {
                    changed |= !(changes.usage.is_empty()
                        && changes.tasks.is_empty()
                        && changes.files.is_empty()
                        && changes.sessions.is_empty());
                    following
                        .positions
                        .insert(read.state.path.clone(), read.state);
                }
                None => {
                    // Another watcher went on with this file: start from where it is.
                    let path = read.state.path;
                    let stored = self
                        .read({
                            let path = path.clone();
                            move |cache| cache.log_file(&path)
                        })
                        .await?;
                    match stored {
                        Some(stored) => following.positions.insert(path, stored),
                        None => following.positions.remove(&path),
                    };
                }
            }
        }
        if changed {
            self.shared.changed(Change::LocalWork);
        }
        self.published(published);
        Ok(())
    }

    /// Publishes what is known of sessions an agent claimed after their lines were read.
    async fn publish_claimed(&self, following: &mut Following) -> Result<(), CoreError> {
        let ((), published) = self
            .publishing_job(following, |cache, owner, publisher| {
                cache.publish_claimed(now_ms(), owner, publisher)?;
                Ok(())
            })
            .await?;
        if published > 0 {
            self.shared.changed(Change::LocalWork);
        }
        self.published(published);
        Ok(())
    }

    /// Wakes the outbox for `count` new publications.
    fn published(&self, count: usize) {
        if count > 0 {
            self.shared.changed(Change::Outbox);
            self.shared.outbox_ready.notify_one();
        }
    }
}

/// A publisher that counts what it publishes.
struct Counted<P> {
    inner: P,
    published: usize,
}

impl<P: Publishing> Publishing for Counted<P> {
    fn price(
        &self,
        model: &str,
        tokens: &crate::log_events::TokenCounts,
        billing: &crate::log_events::Billing,
    ) -> Option<f64> {
        self.inner.price(model, tokens, billing)
    }

    fn publishes(&self, framework: Framework, session_id: &str) -> bool {
        self.inner.publishes(framework, session_id)
    }

    fn publications(
        &mut self,
        read: Option<crate::cache::ReadSpan<'_>>,
        changes: &crate::cache::LocalChanges,
    ) -> Vec<crate::cache::Publication> {
        let publications = self.inner.publications(read, changes);
        self.published += publications.len();
        publications
    }
}

async fn find_blocking(roots: &[(PathBuf, LogKind)]) -> Result<Vec<LogFile>, CoreError> {
    let roots = roots.to_vec();
    let (files, _) = tokio::task::spawn_blocking(move || scan::find(&roots))
        .await
        .map_err(|error| CoreError::Invalid(error.to_string()))?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    const LINE: &str = r#"{"type":"user","sessionId":"s1","cwd":"/work","timestamp":"2026-12-01T10:00:00.000Z","message":{"role":"user","content":"hello"}}"#;

    fn found(path: &Path) -> LogFile {
        let metadata = std::fs::metadata(path).unwrap();
        let (device, inode) = scan::identity(path, &metadata);
        LogFile {
            path: path.to_path_buf(),
            kind: LogKind::ClaudeTranscript,
            size: metadata.len(),
            device,
            inode,
        }
    }

    fn append(path: &Path, text: &str) {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    #[test]
    fn reads_go_on_from_the_stored_offset_and_a_torn_line_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        append(&path, &format!("{LINE}\n{}", &LINE[..20]));
        let first = read_new(&found(&path), None).unwrap();
        assert_eq!(first.from, 0);
        assert_eq!(first.based_on, None);
        assert_eq!(first.state.offset, LINE.len() as u64 + 1);
        assert!(!first.events.is_empty());
        // The torn line was looked at: no news until the file grows.
        let file = found(&path);
        assert!(!has_news(&file, Some(&first.state)));
        assert!(read_new(&file, Some(&first.state)).is_none());
        // It grows, still without its newline: news, but nothing yet.
        append(&path, &LINE[20..40]);
        let file = found(&path);
        assert!(has_news(&file, Some(&first.state)));
        let waiting = read_new(&file, Some(&first.state)).unwrap();
        assert_eq!(waiting.state.offset, first.state.offset);
        assert_eq!(waiting.state.size, file.size);
        assert!(waiting.events.is_empty());
        // Its end arrives: the line is read from its start, once.
        append(&path, &format!("{}\n", &LINE[40..]));
        let second = read_new(&found(&path), Some(&waiting.state)).unwrap();
        assert_eq!(second.from, first.state.offset);
        assert_eq!(second.based_on, Some(waiting.state.position()));
        assert_eq!(second.state.offset, 2 * (LINE.len() as u64 + 1));
        assert_eq!(second.state.skipped, 0);
        assert!(!has_news(&found(&path), Some(&second.state)));
        assert!(read_new(&found(&path), Some(&second.state)).is_none());
    }

    #[test]
    fn a_line_over_the_limit_is_skipped_counted_and_never_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        // A huge line written in pieces, between two ordinary ones.
        append(&path, &format!("{LINE}\n"));
        let first = read_new(&found(&path), None).unwrap();
        let piece = "x".repeat(1 << 20);
        let mut state = first.state.clone();
        for _ in 0..=(scan::MAX_LINE >> 20) {
            append(&path, &piece);
            let read = read_new(&found(&path), Some(&state)).unwrap();
            assert!(read.events.is_empty());
            assert_eq!(read.state.offset, first.state.offset);
            state = read.state;
        }
        append(&path, &format!("\n{LINE}\n"));
        let last = read_new(&found(&path), Some(&state)).unwrap();
        assert_eq!(last.state.skipped, 1);
        assert_eq!(last.state.offset, found(&path).size);
        // The line after it was read (it repeats the first line, so it says nothing new).
        assert_eq!(last.from, first.state.offset);
    }

    #[test]
    fn a_shrunk_or_replaced_file_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        append(&path, &format!("{LINE}\n{LINE}\n"));
        let read = read_new(&found(&path), None).unwrap();
        std::fs::write(&path, format!("{LINE}\n")).unwrap();
        let again = read_new(&found(&path), Some(&read.state)).unwrap();
        assert_eq!(again.from, 0);
        assert_eq!(again.based_on, Some(read.state.position()));
        assert_eq!(again.state.offset, LINE.len() as u64 + 1);
        // Replaced by another file of the same length: another inode, read again.
        let other = dir.path().join("other.jsonl");
        std::fs::write(&other, format!("{LINE}\n")).unwrap();
        std::fs::rename(&other, &path).unwrap();
        let file = found(&path);
        assert_eq!(file.size, again.state.offset);
        assert!(has_news(&file, Some(&again.state)));
        assert_eq!(read_new(&file, Some(&again.state)).unwrap().from, 0);
    }
}

#[cfg(test)]
mod opencode_tests {
    use rusqlite::{Connection, params};

    use super::*;
    use crate::work::opencode_db::DATABASE;

    fn step(id: &str, at: i64) -> (String, i64, String) {
        (
            id.to_owned(),
            at,
            r#"{"role":"assistant","modelID":"claude-sonnet-4-5","tokens":{"input":5,"output":1,"reasoning":0,"cache":{"read":0,"write":0}}}"#.to_owned(),
        )
    }

    fn usage_keys(read: &LogRead) -> Vec<String> {
        read.events
            .iter()
            .filter_map(|(_, event)| match event {
                LogEvent::Usage { key, .. } => key.as_ref().map(|key| key.message_id.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn opencodes_database_is_followed_by_time_through_its_write_ahead_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DATABASE);
        let writer = Connection::open(&path).unwrap();
        writer.pragma_update(None, "journal_mode", "wal").unwrap();
        writer
            .execute_batch(
                "CREATE TABLE session (id text PRIMARY KEY, directory text NOT NULL,
                     parent_id text, model text, time_created integer NOT NULL,
                     time_updated integer NOT NULL);
                 CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
                     time_created integer NOT NULL, time_updated integer NOT NULL,
                     data text NOT NULL);
                 INSERT INTO session VALUES ('ses_a', '/src/app', NULL, NULL, 10, 10);",
            )
            .unwrap();
        let insert = |(id, at, data): (String, i64, String)| {
            writer
                .execute(
                    "INSERT INTO message VALUES (?1, 'ses_a', ?2, ?2, ?3)",
                    params![id, at, data],
                )
                .unwrap();
        };
        insert(step("msg_1", 100));
        // A notification names the write-ahead log: it is the database's change.
        let roots = [(dir.path().to_path_buf(), LogKind::OpencodeDb)];
        let file = scan::log_file_at(&roots, &dir.path().join(format!("{DATABASE}-wal")))
            .expect("the database, through its log");
        assert_eq!(file.path, path);
        assert!(scan::log_file_at(&roots, &dir.path().join("opencode.db-shm")).is_none());
        let first = read_new(&file, None).unwrap();
        assert_eq!((first.from, first.state.offset), (0, 100));
        assert_eq!(usage_keys(&first), ["msg_1"]);
        // Nothing since: no read. A step written since: read from the position, with the
        // rows of its last millisecond again (one written in that millisecond after the
        // read is not missed; a message counts once, by its id).
        assert!(has_news(&file, Some(&first.state)));
        assert!(read_new(&file, Some(&first.state)).is_none());
        insert(step("msg_2", 250));
        let second = read_new(&file, Some(&first.state)).unwrap();
        assert_eq!((second.from, second.state.offset), (100, 250));
        assert_eq!(usage_keys(&second), ["msg_1", "msg_2"]);
        insert(step("msg_3", 400));
        let third = read_new(&file, Some(&second.state)).unwrap();
        assert_eq!(usage_keys(&third), ["msg_2", "msg_3"]);
        assert_eq!(second.based_on, Some(first.state.position()));
    }
}

#[cfg(test)]
mod copilot_tests {
    use std::io::Write as _;

    use rusqlite::Connection;

    use super::*;
    use crate::local_agents::Environment;
    use crate::log_events::TaskStatus;

    #[test]
    fn a_copilot_session_is_followed_by_its_log_lines_and_its_databases_version() {
        let home = tempfile::tempdir().unwrap();
        let session = home.path().join(".copilot/session-state/7d1e-44");
        std::fs::create_dir_all(session.join("rewind-file-snapshots")).unwrap();
        // What is not a session's log is not read: a file deeper in its folder.
        std::fs::write(session.join("rewind-file-snapshots/index.json"), "{}").unwrap();
        let env = Environment {
            home: home.path().to_path_buf(),
            ..Environment::default()
        };
        let roots = scan::roots(&env);
        let events_path = session.join("events.jsonl");
        let mut log = std::fs::File::create(&events_path).unwrap();
        writeln!(
            log,
            r#"{{"type":"session.start","data":{{"sessionId":"7d1e-44","selectedModel":"claude-sonnet-4-5","context":{{"cwd":"/src/app"}}}},"timestamp":"2026-12-06T10:00:00Z"}}"#
        )
        .unwrap();
        let usage = |n: u32| {
            format!(
                r#"{{"type":"session.usage_record","data":{{"usage":{{"model":"claude-sonnet-4-5","inputTokens":{},"outputTokens":5,"cacheReadTokens":0,"cacheWriteTokens":0,"apiCallId":"msg_{n}"}}}}}}"#,
                100 * n
            )
        };
        writeln!(log, "{}", usage(1)).unwrap();
        let db_path = session.join("session.db");
        let writer = Connection::open(&db_path).unwrap();
        writer
            .execute_batch(
                "CREATE TABLE todos (id TEXT PRIMARY KEY, title TEXT NOT NULL, status TEXT,
                     updated_at TEXT);
                 INSERT INTO todos VALUES ('a', 'Write the parser', 'in_progress', NULL);",
            )
            .unwrap();
        let (found, _) = scan::find(&roots);
        let kinds: Vec<(String, LogKind)> = found
            .iter()
            .map(|file| {
                let name = file
                    .path
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                (name, file.kind)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("events.jsonl".to_owned(), LogKind::CopilotEvents),
                ("session.db".to_owned(), LogKind::CopilotTodos)
            ]
        );
        // The log, by line, from where it was left.
        let events = scan::log_file_at(&roots, &events_path).unwrap();
        let first = read_new(&events, None).unwrap();
        assert_eq!(first.framework, Framework::Copilot);
        assert_eq!(first.events.len(), 2, "{:?}", first.events);
        writeln!(log, "{}", usage(2)).unwrap();
        let events = scan::log_file_at(&roots, &events_path).unwrap();
        assert!(has_news(&events, Some(&first.state)));
        let second = read_new(&events, Some(&first.state)).unwrap();
        assert_eq!(second.from, first.state.offset);
        assert!(matches!(
            &second.events[..],
            [(_, LogEvent::Usage { session_id, tokens, .. })] if session_id == "7d1e-44" && tokens.input == 200
        ));
        // The database, whole, each time its version changes; not again otherwise.
        let todos = scan::log_file_at(&roots, &db_path).unwrap();
        let listed = read_new(&todos, None).unwrap();
        let status = |read: &LogRead| match &read.events[..] {
            [
                (
                    _,
                    LogEvent::Tasks {
                        session_id, tasks, ..
                    },
                ),
            ] if session_id == "7d1e-44" => tasks[0].status,
            other => panic!("{other:?}"),
        };
        assert_eq!(status(&listed), TaskStatus::InProgress);
        assert!(read_new(&todos, Some(&listed.state)).is_none());
        writer
            .execute("UPDATE todos SET status = 'done'", [])
            .unwrap();
        let changed = read_new(&todos, Some(&listed.state)).unwrap();
        assert_eq!(status(&changed), TaskStatus::Completed);
        assert_ne!(changed.state.offset, listed.state.offset);
    }
}
