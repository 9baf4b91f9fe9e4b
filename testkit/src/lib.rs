//! Test support shared by the hub's, the CLI's and the end-to-end tests: a real hub on a
//! free loopback port with its data in a temporary directory, plain HTTP calls, and a
//! protocol client that speaks raw frames so tests can also send what a good client never
//! would, and ([`model_server`], [`agent_clis`]) a scripted model server that the real agent
//! CLIs run against on loopback.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::{SinkExt, StreamExt};
use roundtable_hub::HubConfig;
use roundtable_protocol::client::{Auth, ClientFrame, ClientInfo, Command, SignupRequest};
use roundtable_protocol::server::{ErrReply, Event, Hello, OkReply, ServerFrame, SignupOk};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub mod agent_clis;
pub mod model_server;
pub mod module_imports;
pub mod pki;
pub mod postgres;
mod process;
pub mod seed;
mod wait;
pub use process::{HubProcess, roundtable_beside_this_binary, roundtable_bin};
pub use wait::{eventually, until};

/// How long a test waits for something that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// How long a command's reply is waited for while events keep coming before it.
pub const REPLY_PATIENCE: Duration = Duration::from_secs(60);

/// Hub processes (in this process) of one cluster, sharing a fresh PostgreSQL database,
/// each on its own port and data directory.
pub struct TestCluster {
    pub hubs: Vec<TestHub>,
    pub database: postgres::TestDatabase,
}

impl TestCluster {
    /// `nodes` hubs named hub-1, hub-2…, with default test settings adjusted by `adjust`.
    pub async fn start(nodes: usize, adjust: impl Fn(&mut HubConfig)) -> TestCluster {
        let database = postgres::TestDatabase::create();
        let mut hubs = Vec::new();
        for node in 1..=nodes {
            let dir = tempfile::tempdir().expect("temporary directory");
            let mut config = HubConfig::new(dir.path().join("hub"));
            config.rate_limits = None;
            config.signups_per_hour = None;
            config.store = roundtable_hub::StoreLocation::Postgres(database.url.clone());
            config.node = Some(format!("hub-{node}"));
            config.cluster_poll = Duration::from_millis(5);
            adjust(&mut config);
            let mut hub = TestHub::of(config, dir, None);
            hub.launch().await;
            hubs.push(hub);
        }
        TestCluster { hubs, database }
    }

    /// Stops every hub (so the database outlives them).
    pub async fn stop(&mut self) {
        for hub in &mut self.hubs {
            hub.stop().await;
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        // Hubs still running keep the database (see `TestHub`'s drop).
        if self.hubs.iter().any(|hub| hub.task.is_some()) {
            let database = std::mem::replace(
                &mut self.database,
                postgres::TestDatabase {
                    url: String::new(),
                    server: String::new(),
                    name: String::new(),
                },
            );
            std::mem::forget(database);
        }
    }
}

/// Whether the hubs of this test run keep their data in PostgreSQL
/// (`ROUNDTABLE_TEST_HUB_STORE=postgres`, or `cluster`) rather than SQLite.
pub fn on_postgres() -> bool {
    std::env::var("ROUNDTABLE_TEST_HUB_STORE")
        .is_ok_and(|store| store == "postgres" || store == "cluster")
}

/// Whether each hub of this test run is three hub processes of one cluster
/// (`ROUNDTABLE_TEST_HUB_STORE=cluster`), its clients spread over them.
pub fn in_cluster() -> bool {
    std::env::var("ROUNDTABLE_TEST_HUB_STORE").is_ok_and(|store| store == "cluster")
}

/// A hub running in this process.
pub struct TestHub {
    pub addr: SocketAddr,
    pub config: HubConfig,
    dir: Option<tempfile::TempDir>,
    /// The hub's PostgreSQL database, when the suite runs on one (see [`TestHub::start_with`]).
    _database: Option<postgres::TestDatabase>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The other processes of its cluster, when the suite runs on one: connections go to
    /// each in turn, this one included.
    peers: Vec<TestHub>,
    turn: std::sync::atomic::AtomicUsize,
}

impl TestHub {
    /// Starts a hub with default settings in a fresh directory.
    pub async fn start() -> TestHub {
        TestHub::start_with(|_| {}).await
    }

    /// Starts a hub in a fresh directory, letting the test adjust its settings. Rate
    /// limits, of writes and of signups, start off (tests send fast); a test of them turns
    /// them on. With `ROUNDTABLE_TEST_HUB_STORE=postgres` the hub keeps its data in a fresh
    /// PostgreSQL database instead of SQLite (see [`postgres`]); with `cluster`, it is
    /// three hub processes sharing that database, and [`TestHub::connect`] and
    /// [`TestHub::user`] connect to each in turn: the suites run on all three.
    pub async fn start_with(adjust: impl FnOnce(&mut HubConfig)) -> TestHub {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut config = HubConfig::new(dir.path().join("hub"));
        config.rate_limits = None;
        config.signups_per_hour = None;
        let database = on_postgres().then(postgres::TestDatabase::create);
        if let Some(database) = &database {
            config.store = roundtable_hub::StoreLocation::Postgres(database.url.clone());
        }
        if in_cluster() {
            config.node = Some("hub-1".into());
            config.cluster_poll = Duration::from_millis(5);
        }
        adjust(&mut config);
        let mut peers = Vec::new();
        if in_cluster() {
            for node in 2..=3 {
                let dir = tempfile::tempdir().expect("temporary directory");
                let mut peer = config.clone();
                peer.data_dir = dir.path().join("hub");
                peer.node = Some(format!("hub-{node}"));
                let mut peer = TestHub::of(peer, dir, None);
                peer.launch().await;
                peers.push(peer);
            }
        }
        let mut hub = TestHub::of(config, dir, database);
        hub.peers = peers;
        hub.launch().await;
        hub
    }

    fn of(
        config: HubConfig,
        dir: tempfile::TempDir,
        database: Option<postgres::TestDatabase>,
    ) -> TestHub {
        TestHub {
            addr: "127.0.0.1:0".parse().unwrap(),
            config,
            dir: Some(dir),
            _database: database,
            stop: None,
            task: None,
            peers: Vec::new(),
            turn: Default::default(),
        }
    }

    /// The address of each process of this hub: this one, then the others of its cluster.
    pub fn processes(&self) -> Vec<SocketAddr> {
        std::iter::once(self.addr)
            .chain(self.peers.iter().map(|peer| peer.addr))
            .collect()
    }

    /// The WebSocket URL of the process whose turn it is (this one, but in a cluster).
    fn next_ws_url(&self) -> String {
        let turn =
            self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % (self.peers.len() + 1);
        match turn {
            0 => self.ws_url(),
            peer => self.peers[peer - 1].ws_url(),
        }
    }

    async fn launch(&mut self) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding a loopback port");
        self.addr = listener.local_addr().unwrap();
        self.config.public_address = Some(self.addr.to_string());
        let hub = roundtable_hub::Hub::open(self.config.clone()).expect("opening the hub");
        let (stop, stopped) = oneshot::channel::<()>();
        self.stop = Some(stop);
        self.task = Some(tokio::spawn(async move {
            hub.serve(listener, async {
                let _ = stopped.await;
            })
            .await
            .expect("the hub serves");
        }));
    }

    /// Stops the hub gracefully (clients see 1012) and waits for it.
    pub async fn stop(&mut self) {
        for peer in &mut self.peers {
            Box::pin(peer.stop()).await;
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("the hub task ends cleanly");
        }
    }

    /// Stops and starts again on the same data, on a new port.
    pub async fn restart(&mut self) {
        self.stop().await;
        for peer in &mut self.peers {
            peer.launch().await;
        }
        self.launch().await;
    }

    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/v1/ws", self.addr)
    }

    pub async fn connect(&self) -> Client {
        Client::connect(&self.next_ws_url())
            .await
            .expect("connecting")
    }

    /// Signs a user up and returns it, connected and authenticated.
    pub async fn user(&self, handle: &str) -> (Client, SignupOk) {
        let signup = signup(self.addr, handle).await.expect("signup");
        let mut client = self.connect().await;
        client
            .auth(&signup.token, "test-device")
            .await
            .expect("auth");
        (client, signup)
    }

    /// Rows `sql` selects from the hub's store, each column as text (NULL as ""), for tests
    /// that look at what was stored. The SQL must read the same in SQLite and PostgreSQL:
    /// the two schemas name the tables and columns they share alike.
    pub fn select(&self, sql: &str) -> Vec<Vec<String>> {
        match &self.config.store {
            roundtable_hub::StoreLocation::Postgres(url) => postgres::select(url, sql),
            roundtable_hub::StoreLocation::DataDir => {
                let db = rusqlite::Connection::open_with_flags(
                    self.config.database_path(),
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                )
                .expect("opening the hub's database");
                let mut statement = db.prepare(sql).expect("a valid query");
                let columns = statement.column_count();
                statement
                    .query_map([], |row| {
                        (0..columns)
                            .map(|index| {
                                Ok(match row.get_ref(index)? {
                                    rusqlite::types::ValueRef::Null => String::new(),
                                    rusqlite::types::ValueRef::Integer(value) => value.to_string(),
                                    rusqlite::types::ValueRef::Real(value) => value.to_string(),
                                    rusqlite::types::ValueRef::Text(text)
                                    | rusqlite::types::ValueRef::Blob(text) => {
                                        String::from_utf8_lossy(text).into_owned()
                                    }
                                })
                            })
                            .collect()
                    })
                    .and_then(|rows| rows.collect())
                    .expect("reading the rows")
            }
        }
    }

    /// The one integer `sql` selects (see [`TestHub::select`]).
    pub fn select_i64(&self, sql: &str) -> i64 {
        let rows = self.select(sql);
        assert_eq!(rows.len(), 1, "{sql} selects one row");
        rows[0][0].parse().expect("an integer")
    }

    /// Everything the store holds, as bytes to search (a secret must appear nowhere): the
    /// SQLite files, or a dump of the PostgreSQL database.
    pub fn stored_bytes(&self) -> Vec<u8> {
        match &self.config.store {
            roundtable_hub::StoreLocation::Postgres(url) => postgres::dump(url),
            roundtable_hub::StoreLocation::DataDir => {
                let path = self.config.database_path();
                let mut bytes = std::fs::read(&path).expect("reading the database");
                let wal = format!("{}-wal", path.display());
                bytes.extend(std::fs::read(wal).unwrap_or_default());
                bytes
            }
        }
    }

    /// Bytes the store takes on disk: the data directory, or the PostgreSQL database.
    pub fn stored_size(&self) -> u64 {
        match &self.config.store {
            roundtable_hub::StoreLocation::Postgres(url) => {
                postgres::select(url, "SELECT pg_database_size(current_database())")[0][0]
                    .parse()
                    .expect("a size")
            }
            roundtable_hub::StoreLocation::DataDir => tree_size(self.data_dir()),
        }
    }

    /// Runs `sql` (a change) on the hub's store, as someone with the database in hand
    /// would; the SQL must read the same in SQLite and PostgreSQL.
    pub fn execute(&self, sql: &str) {
        match &self.config.store {
            roundtable_hub::StoreLocation::Postgres(url) => {
                postgres::select(url, sql);
            }
            roundtable_hub::StoreLocation::DataDir => {
                rusqlite::Connection::open(self.config.database_path())
                    .expect("opening the hub's database")
                    .execute_batch(sql)
                    .expect("a valid change");
            }
        }
    }

    /// The hub's directory outlives the hub only while the test holds it.
    pub fn keep_dir(&mut self) -> PathBuf {
        self.dir.take().expect("kept once").keep()
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // A hub still running (nobody awaited `stop`) keeps its database: dropping it under
        // the hub would fail the hub's next commit, and the hub would wait for the database
        // to come back. The server is a throwaway one (scripts/test.sh).
        if self.task.is_some()
            && let Some(database) = self._database.take()
        {
            std::mem::forget(database);
        }
    }
}

fn tree_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("reading a directory")
        .filter_map(Result::ok)
        .map(|entry| match entry.metadata() {
            Ok(metadata) if metadata.is_dir() => tree_size(&entry.path()),
            Ok(metadata) => metadata.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A plain HTTP/1.1 response.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub body: String,
}

impl HttpResponse {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// Sends one HTTP request over a fresh connection and reads the whole response.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<HttpResponse> {
    let hub = roundtable_core::hub_address::HubAddress::parse(&addr.to_string())
        .map_err(|error| anyhow!(error))?;
    let response = roundtable_core::http::request(&hub, None, method, path, body).await?;
    Ok(HttpResponse {
        status: response.status,
        body: response.body,
    })
}

/// A plain HTTP/1.1 response with its headers (names lower-cased).
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawResponse {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// Sends one HTTP/1.1 request with the given headers over a fresh connection, exactly as
/// written (no header is added but `Host`, `Content-Length` and `Connection: close`), and
/// reads the whole response, chunked or not.
pub async fn http_raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<RawResponse> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let mut request = format!("{method} {path} HTTP/1.1\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    if let Some(body) = body {
        stream.write_all(body).await?;
    }
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let split = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("no end of headers in {:?}", String::from_utf8_lossy(&raw)))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut rest = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow!("no status line in {head:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    if chunked {
        let mut decoded = Vec::new();
        let mut at = 0;
        while let Some(end) = rest[at..].windows(2).position(|w| w == b"\r\n") {
            let size_text = String::from_utf8_lossy(&rest[at..at + end]).into_owned();
            let size =
                usize::from_str_radix(size_text.split(';').next().unwrap_or("0").trim(), 16)?;
            at += end + 2;
            if size == 0 {
                break;
            }
            decoded.extend_from_slice(&rest[at..(at + size).min(rest.len())]);
            at += size + 2;
        }
        rest = decoded;
    }
    Ok(RawResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&rest).into_owned(),
    })
}

/// Sends one HTTPS request (trusting what `tls` trusts) to `server_name` at `addr`.
pub async fn https(
    addr: SocketAddr,
    server_name: &str,
    tls: std::sync::Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<HttpResponse> {
    let hub = roundtable_core::hub_address::HubAddress {
        authority: addr.to_string(),
        host: server_name.to_owned(),
        tls: true,
        unix: None,
        pin: None,
    };
    let response = roundtable_core::http::request(&hub, Some(tls), method, path, body).await?;
    Ok(HttpResponse {
        status: response.status,
        body: response.body,
    })
}

/// `POST /v1/signup` with a handle and a name derived from it.
pub async fn signup(addr: SocketAddr, handle: &str) -> Result<SignupOk> {
    signup_with(
        addr,
        SignupRequest {
            handle: handle.into(),
            name: format!("{handle} (test)"),
            discoverable: None,
            invite: None,
        },
    )
    .await
}

/// `POST /v1/signup` with a full request.
pub async fn signup_with(addr: SocketAddr, request: SignupRequest) -> Result<SignupOk> {
    let body = serde_json::to_string(&request)?;
    let response = http(addr, "POST", "/v1/signup", Some(&body)).await?;
    if response.status != 200 {
        bail!(
            "signup {}: {} {}",
            request.handle,
            response.status,
            response.body
        );
    }
    Ok(serde_json::from_str(&response.body)?)
}

/// What a client read from the socket.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Frame(ServerFrame),
    /// The hub closed the connection with this code (None: no close frame, or the socket
    /// simply ended).
    Closed(Option<u16>),
}

/// A WebSocket upgrade the hub answered with an HTTP error.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub status: u16,
    pub retry_after: Option<String>,
}

/// A raw protocol client.
pub struct Client {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    pub hello: Hello,
    next_id: u64,
    /// Events (and gaps) read while waiting for a reply.
    pub backlog: VecDeque<ServerFrame>,
    closed: Option<Option<u16>>,
}

impl Client {
    /// Connects and reads `hello`.
    pub async fn connect(url: &str) -> Result<Client> {
        let (socket, _) = tokio::time::timeout(
            PATIENCE,
            tokio_tungstenite::connect_async_with_config(
                url,
                Some(
                    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
                        .read_buffer_size(16 * 1024),
                ),
                true,
            ),
        )
        .await
        .context("connect timed out")??;
        Client::from_socket(socket).await
    }

    async fn from_socket(socket: WebSocketStream<MaybeTlsStream<TcpStream>>) -> Result<Client> {
        let mut client = Client {
            socket,
            hello: Hello::default(),
            next_id: 1,
            backlog: VecDeque::new(),
            closed: None,
        };
        match client.recv().await? {
            Incoming::Frame(ServerFrame::Hello(hello)) => client.hello = hello,
            other => bail!("expected hello, got {other:?}"),
        }
        Ok(client)
    }

    /// Connects from the loopback address `source` (any of 127.0.0.0/8 on Linux), so a
    /// test can be several clients in the hub's eyes; reads `hello`. An upgrade the hub
    /// refuses comes back as `Err` with its status and `Retry-After`.
    pub async fn connect_from(
        url: &str,
        source: std::net::IpAddr,
    ) -> Result<std::result::Result<Client, Refused>> {
        let target: SocketAddr = url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .unwrap_or_default()
            .parse()
            .context("connect_from takes ws://ip:port/...")?;
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(source, 0))?;
        let stream = tokio::time::timeout(PATIENCE, socket.connect(target))
            .await
            .context("connect timed out")??;
        let handshake = tokio::time::timeout(
            PATIENCE,
            tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream)),
        )
        .await
        .context("the upgrade timed out")?;
        match handshake {
            Ok((socket, _)) => Ok(Ok(Client::from_socket(socket).await?)),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Ok(Err(Refused {
                status: response.status().as_u16(),
                retry_after: response
                    .headers()
                    .get("retry-after")
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned),
            })),
            Err(error) => Err(error.into()),
        }
    }

    /// Connects over TLS (`wss://`), trusting what `tls` trusts, and reads `hello`.
    pub async fn connect_tls(
        url: &str,
        tls: std::sync::Arc<rustls::ClientConfig>,
    ) -> Result<Client> {
        let (socket, _) = tokio::time::timeout(
            PATIENCE,
            tokio_tungstenite::connect_async_tls_with_config(
                url,
                None,
                true,
                Some(tokio_tungstenite::Connector::Rustls(tls)),
            ),
        )
        .await
        .context("connect timed out")??;
        Client::from_socket(socket).await
    }

    /// The raw socket, for load generators that encode and decode frames themselves.
    pub fn into_socket(self) -> WebSocketStream<MaybeTlsStream<TcpStream>> {
        self.socket
    }

    /// A fresh command id.
    pub fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Authenticates; returns the `ok` fields.
    pub async fn auth(&mut self, token: &str, device: &str) -> Result<OkReply> {
        let id = self.id();
        let frame = ClientFrame::Auth(Auth {
            id,
            token: token.into(),
            device: device.into(),
            client: ClientInfo {
                name: "roundtable-testkit".into(),
                version: "0".into(),
            },
        });
        self.call(frame)
            .await?
            .map_err(|err| anyhow!("auth refused: {err:?}"))
    }

    pub async fn send_text(&mut self, text: impl Into<String>) -> Result<()> {
        self.socket.send(Message::Text(text.into().into())).await?;
        Ok(())
    }

    pub async fn send_message(&mut self, message: Message) -> Result<()> {
        self.socket.send(message).await?;
        Ok(())
    }

    pub async fn send_frame(&mut self, frame: &ClientFrame) -> Result<()> {
        self.send_text(frame.to_json()).await
    }

    /// Reads the next frame or the close.
    pub async fn recv(&mut self) -> Result<Incoming> {
        self.recv_within(PATIENCE)
            .await?
            .ok_or_else(|| anyhow!("nothing arrived within {PATIENCE:?}"))
    }

    /// Reads the next frame or the close, or `None` if nothing arrives in time.
    pub async fn recv_within(&mut self, wait: Duration) -> Result<Option<Incoming>> {
        if let Some(code) = self.closed {
            return Ok(Some(Incoming::Closed(code)));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let next = match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Err(_) => return Ok(None),
                Ok(next) => next,
            };
            match next {
                None | Some(Err(_)) => {
                    self.closed = Some(None);
                    return Ok(Some(Incoming::Closed(None)));
                }
                Some(Ok(Message::Text(text))) => {
                    let frame = ServerFrame::from_json(text.as_str())
                        .with_context(|| format!("undecodable frame: {text}"))?;
                    return Ok(Some(Incoming::Frame(frame)));
                }
                Some(Ok(Message::Close(frame))) => {
                    let code = frame.map(|frame| u16::from(frame.code));
                    self.closed = Some(code);
                    return Ok(Some(Incoming::Closed(code)));
                }
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Sends a command and waits for its reply, keeping events that arrive meanwhile.
    pub async fn call(&mut self, frame: ClientFrame) -> Result<Result<OkReply, ErrReply>> {
        let id = frame.id();
        self.send_frame(&frame).await?;
        self.reply_to(id).await
    }

    /// Sends `command`, numbered here whatever id it carries, and reads its `ok` as the
    /// command's own reply type (an `err` as the hub's refusal).
    pub async fn request<C: Command>(&mut self, command: C) -> Result<Result<C::Reply, ErrReply>> {
        let frame = numbered(command.into(), self.id())?;
        match self.call(frame).await? {
            Ok(ok) => Ok(Ok(ok.decode()?)),
            Err(err) => Ok(Err(err)),
        }
    }

    /// Waits for the reply to command `id`, keeping the events that come first, within
    /// [`REPLY_PATIENCE`] however many come.
    pub async fn reply_to(&mut self, id: u64) -> Result<Result<OkReply, ErrReply>> {
        let deadline = tokio::time::Instant::now() + REPLY_PATIENCE;
        let mut kept = 0usize;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(next) = self.recv_within(left.min(PATIENCE)).await? else {
                let last: Vec<String> = self
                    .backlog
                    .iter()
                    .rev()
                    .take(5)
                    .map(|frame| format!("{frame:?}").chars().take(300).collect())
                    .collect();
                bail!(
                    "no reply to {id} within {:?}; {kept} events came meanwhile, the last: {last:#?}",
                    if left.is_zero() {
                        REPLY_PATIENCE
                    } else {
                        PATIENCE
                    }
                );
            };
            match next {
                Incoming::Frame(ServerFrame::Ok(ok)) if ok.re == id => return Ok(Ok(ok)),
                Incoming::Frame(ServerFrame::Err(err)) if err.re == Some(id) => {
                    return Ok(Err(err));
                }
                Incoming::Frame(frame @ (ServerFrame::Evt(_) | ServerFrame::Gap(_))) => {
                    kept += 1;
                    self.backlog.push_back(frame);
                }
                Incoming::Frame(other) => {
                    bail!("unexpected frame while waiting for {id}: {other:?}")
                }
                Incoming::Closed(code) => bail!("closed ({code:?}) while waiting for reply {id}"),
            }
        }
    }

    /// Sends a command that must succeed; returns the `ok`.
    pub async fn ok(&mut self, frame: ClientFrame) -> OkReply {
        let t = frame.type_name();
        match self.call(frame).await.expect("the call completes") {
            Ok(ok) => ok,
            Err(err) => panic!("{t} refused: {err:?}"),
        }
    }

    /// Sends a command that must fail; returns the `err`.
    pub async fn err(&mut self, frame: ClientFrame) -> ErrReply {
        let t = frame.type_name();
        match self.call(frame).await.expect("the call completes") {
            Ok(ok) => panic!("{t} unexpectedly succeeded: {ok:?}"),
            Err(err) => err,
        }
    }

    /// The next event (from the backlog first).
    pub async fn next_event(&mut self) -> Result<Event> {
        let next = match self.backlog.pop_front() {
            Some(frame) => Incoming::Frame(frame),
            None => self.recv().await?,
        };
        match next {
            Incoming::Frame(ServerFrame::Evt(event)) => Ok(event),
            other => bail!("expected an event, got {other:?}"),
        }
    }

    /// Asserts nothing arrives for `wait`.
    pub async fn expect_silence(&mut self, wait: Duration) -> Result<()> {
        if let Some(frame) = self.backlog.pop_front() {
            bail!("expected silence, have {frame:?}");
        }
        match self.recv_within(wait).await? {
            None => Ok(()),
            Some(incoming) => bail!("expected silence, got {incoming:?}"),
        }
    }

    /// Reads until the hub closes the connection; returns the close code.
    /// Every event of the room `room` as the hub holds them, oldest first (read with
    /// `history`, page after page).
    pub async fn room_log(&mut self, room: &str) -> Result<Vec<Event>> {
        let mut events = Vec::new();
        let mut after = 0;
        loop {
            let id = self.id();
            let page: roundtable_protocol::server::HistoryOk = self
                .ok(ClientFrame::History(roundtable_protocol::client::History {
                    id,
                    room: room.to_owned(),
                    before: None,
                    after: Some(after),
                    limit: Some(500),
                }))
                .await
                .decode()?;
            let Some(last) = page.events.last().map(|event| event.seq) else {
                return Ok(events);
            };
            after = last;
            events.extend(page.events);
        }
    }

    pub async fn closed(&mut self) -> Result<Option<u16>> {
        loop {
            if let Incoming::Closed(code) = self.recv().await? {
                return Ok(code);
            }
        }
    }
}

/// `{"t":"send",...}` for a message.
pub fn message(id: u64, room: &str, client_key: &str, text: &str) -> ClientFrame {
    ClientFrame::Send(roundtable_protocol::client::SendCmd {
        id,
        room: room.into(),
        client_key: client_key.into(),
        kind: "message".into(),
        body: serde_json::json!({ "text": text }),
    })
}

/// `frame` with the id `id`, whatever id it was written with: tests write frames as data,
/// and the client that sends one numbers it.
pub fn numbered(frame: ClientFrame, id: u64) -> Result<ClientFrame> {
    let mut value = serde_json::to_value(&frame)?;
    value["id"] = Value::from(id);
    Ok(serde_json::from_value(value)?)
}
