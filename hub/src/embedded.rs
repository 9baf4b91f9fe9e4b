//! A hub inside another program (the desktop app, a test): on a runtime and threads of its
//! own, so the host's async workers never run the hub's tasks and the hub's never run the
//! host's. One person with local agents needs nothing else: the app starts this on a Unix
//! socket in its data directory (a TCP port only when the person lets teammates in) and
//! talks to it like to any other hub.
//!
//! A hub that fails (one of its threads panics) stops alone: the host hears of it
//! ([`EmbeddedHub::failed`]) once the hub has let go of its socket, port and data directory,
//! and decides what to do, for instance start another over the same data.

use std::net::SocketAddr;
use std::thread::JoinHandle;

use tokio::sync::{oneshot, watch};

use crate::{Hub, HubConfig, HubError, HubFailure};

/// Worker threads of the embedded hub's runtime: enough to keep sockets moving while the
/// writer and flush threads (its own, besides these) do the storage work.
const WORKERS: usize = 2;

/// A hub running on its own runtime; dropping it stops the hub and waits for its last
/// commit.
#[derive(Debug)]
pub struct EmbeddedHub {
    /// Its TCP address, when it has a port: one it was given, or, when it could not make
    /// its Unix socket, one on 127.0.0.1 the system chose.
    pub tcp: Option<SocketAddr>,
    /// Its Unix socket, where this machine's clients reach it (see
    /// [`crate::Hub::bind_socket`]).
    pub socket: Option<std::path::PathBuf>,
    /// Where this machine's clients reach it: `unix:PATH` on its socket, else `HOST:PORT`.
    pub local_address: String,
    pub hub_id: String,
    pub epoch: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), HubError>>>,
    /// Set once the hub stopped because it failed, after it let go of everything.
    failure: watch::Receiver<Option<HubFailure>>,
}

/// Binds `addr` for [`start`] (`127.0.0.1:0` picks a free port): bound by the caller, so
/// it knows the port before the hub starts (to name it in `config.public_address`).
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    std::net::TcpListener::bind(addr)
}

/// Starts a hub over `config.data_dir` on its Unix socket in the data directory, and on
/// `tcp` when given. A hub that cannot make its socket (a data directory whose path is
/// longer than a socket address holds) and has no port listens on one of 127.0.0.1 instead,
/// and says why. Invite links name `config.public_address`, else its port, else its socket
/// (which reaches it from this machine's user only).
pub fn start(
    mut config: HubConfig,
    tcp: Option<std::net::TcpListener>,
) -> Result<EmbeddedHub, HubError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .thread_name("roundtable-hub")
        .enable_all()
        .build()?;
    let socket_path = config.data_dir.join(crate::SOCKET);
    // The one way a socket cannot be made that is known before the hub opens: a path
    // longer than a socket address holds (never on Windows: a pipe's name is made short).
    let socket_fits = roundtable_platform::local_socket::fits(&socket_path);
    let tcp = match tcp {
        Some(listener) => Some(listener),
        None if !socket_fits => {
            tracing::warn!(path = %socket_path.display(), "the hub's socket path is too long; its clients use a port on 127.0.0.1");
            Some(bind(SocketAddr::from(([127, 0, 0, 1], 0)))?)
        }
        None => None,
    };
    let tcp_addr = tcp
        .as_ref()
        .map(std::net::TcpListener::local_addr)
        .transpose()?;
    if let Some(listener) = &tcp {
        // Adopted by the hub's own runtime on its thread (the caller may be inside a
        // runtime of its own).
        listener.set_nonblocking(true)?;
    }
    if config.public_address.is_none() {
        config.public_address = match tcp_addr {
            Some(addr) => Some(addr.to_string()),
            None => Some(format!("unix:{}", socket_path.display())),
        };
    }
    let hub = Hub::open(config)?;
    let (socket, local) = if socket_fits {
        // Bound in the runtime that serves it.
        let _entered = runtime.enter();
        (Some(socket_path), Some(hub.bind_socket()?))
    } else {
        (None, None)
    };
    let local_address = match (&socket, tcp_addr) {
        (Some(path), _) => format!("unix:{}", path.display()),
        (None, Some(addr)) => addr.to_string(),
        (None, None) => {
            return Err(HubError::Io(std::io::Error::other(
                "the embedded hub has neither a socket nor a port",
            )));
        }
    };
    let hub_id = hub.hub_id().to_owned();
    let epoch = hub.epoch().to_owned();
    let (stop, stopped) = oneshot::channel::<()>();
    let (failed, failure) = watch::channel(None);
    let thread = std::thread::Builder::new()
        .name("roundtable-hub-main".into())
        .spawn(move || {
            let served = runtime.block_on(async move {
                let listeners = crate::listener::Listeners {
                    tcp: tcp.map(tokio::net::TcpListener::from_std).transpose()?,
                    local,
                };
                hub.serve_on(listeners, async {
                    let _ = stopped.await;
                })
                .await
            });
            // Connections still open are told 1012 (1011 after a failure) by `serve`;
            // whatever tasks remain end here.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            if let Err(HubError::Failed(failure)) = &served {
                tracing::error!(%failure, "the embedded hub stopped");
                let _ = failed.send(Some(failure.clone()));
            }
            served
        })?;
    Ok(EmbeddedHub {
        tcp: tcp_addr,
        socket,
        local_address,
        hub_id,
        epoch,
        stop: Some(stop),
        thread: Some(thread),
        failure,
    })
}

impl EmbeddedHub {
    /// Resolves when the hub has stopped by itself because one of its threads failed,
    /// with why; never while it serves, nor after it was stopped. By then its connections
    /// were closed (1011) and its socket, port and data directory let go of: another hub
    /// may open them at once. The process is left as it was: what to do is the caller's.
    pub fn failed(&self) -> impl std::future::Future<Output = HubFailure> + Send + 'static {
        let mut failure = self.failure.clone();
        async move {
            let failed = failure
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|failure| failure.clone());
            match failed {
                Some(failure) => failure,
                None => std::future::pending().await,
            }
        }
    }

    /// Why the hub stopped by itself, if it has (see [`EmbeddedHub::failed`]).
    pub fn failure(&self) -> Option<HubFailure> {
        self.failure.borrow().clone()
    }

    /// Stops the hub (clients see 1012) and waits until its last commit is on disk.
    pub fn stop(mut self) -> Result<(), HubError> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<(), HubError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(served)) => served,
            Some(Err(_)) => Err(HubError::Io(std::io::Error::other(
                "the embedded hub's thread panicked",
            ))),
            None => Ok(()),
        }
    }
}

impl Drop for EmbeddedHub {
    fn drop(&mut self) {
        if let Err(error) = self.shut_down() {
            tracing::warn!(%error, "the embedded hub stopped with an error");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Connects to the hub at `addr` as the holder of `token`.
    async fn connected(addr: SocketAddr, token: &str) -> roundtable_testkit::Client {
        let mut client = roundtable_testkit::Client::connect(&format!("ws://{addr}/v1/ws"))
            .await
            .unwrap();
        client.auth(token, "laptop").await.unwrap();
        client
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_on_the_writer_thread_stops_the_embedded_hub_not_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("hub");
        let hub = start(
            HubConfig::new(&data),
            Some(bind("127.0.0.1:0".parse().unwrap()).unwrap()),
        )
        .unwrap();
        let addr = hub.tcp.unwrap();
        let socket = hub.socket.clone().unwrap();
        let token = roundtable_testkit::signup(addr, "dana")
            .await
            .unwrap()
            .token;
        let mut dana = connected(addr, &token).await;
        let id = dana.id();
        let room: roundtable_protocol::server::RoomOk = dana
            .ok(roundtable_protocol::ClientFrame::RoomCreate(
                roundtable_protocol::client::RoomCreate {
                    id,
                    title: Some("lexer".into()),
                    topic: None,
                    members: Vec::new(),
                },
            ))
            .await
            .decode()
            .unwrap();
        let room = room.room.id;
        let id = dana.id();
        dana.ok(roundtable_testkit::message(
            id,
            &room,
            "k-before-the-fault",
            "kept",
        ))
        .await;
        assert_eq!(hub.failure(), None);

        // The writer's next transaction panics, as a bug on its thread would.
        crate::test_faults::panic_next_transaction(&data);
        let id = dana.id();
        dana.send_frame(&roundtable_testkit::message(
            id,
            &room,
            "k-after-the-fault",
            "lost",
        ))
        .await
        .unwrap();
        // The connection is told the hub failed…
        assert_eq!(dana.closed().await.unwrap(), Some(1011));
        // …and whoever started the hub hears of it, in this process, which goes on.
        let failure = tokio::time::timeout(std::time::Duration::from_secs(30), hub.failed())
            .await
            .expect("the failure is reported");
        assert_eq!(failure.thread, "writer");
        assert_eq!(failure.panic, "the test's store failed on purpose");
        assert_eq!(hub.failure(), Some(failure.clone()));
        // By then the hub has let go of its port and its socket…
        assert!(std::net::TcpStream::connect(addr).is_err());
        assert!(!local_answers(&socket));
        assert!(matches!(hub.stop(), Err(HubError::Failed(stopped)) if stopped == failure));

        // …and of its data directory: a new hub serves it, on the same port, with what the
        // failed one acknowledged.
        let again = start(HubConfig::new(&data), Some(bind(addr).unwrap())).unwrap();
        let mut dana = connected(addr, &token).await;
        let texts: Vec<String> = dana
            .room_log(&room)
            .await
            .unwrap()
            .into_iter()
            .filter(|event| event.kind == "message")
            .map(|event| event.body["text"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(texts, ["kept"]);
        assert!(local_answers(&socket));
        again.stop().unwrap();
    }

    #[test]
    fn an_embedded_hub_serves_health_and_stops_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let port = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let hub = start(HubConfig::new(dir.path().join("hub")), Some(port)).unwrap();
        let addr = hub.tcp.unwrap();
        assert!(addr.ip().is_loopback());
        assert_ne!(addr.port(), 0);
        // A plain HTTP request from a thread that is not on any runtime.
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        use std::io::{Read, Write};
        write!(
            stream,
            "GET /v1/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.contains(&hub.epoch), "{response}");
        // And on its local socket, which only its user may use.
        let socket = hub.socket.clone().unwrap();
        assert_eq!(socket, dir.path().join("hub").join(crate::SOCKET));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let dir_mode = std::fs::metadata(socket.parent().unwrap())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(dir_mode & 0o777, 0o700);
        }
        let response = local_health(&socket);
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        drop(hub);
        // Stopped: the port no longer answers, and the data directory can be opened again.
        assert!(std::net::TcpStream::connect(addr).is_err());
        // A data directory too deep for a socket address: the hub serves on its port.
        #[cfg(unix)]
        {
            let deep = dir.path().join("d".repeat(120)).join("hub");
            let hub = start(HubConfig::new(&deep), None).unwrap();
            assert_eq!(hub.socket, None);
            let addr = hub.tcp.expect("a port instead");
            assert!(addr.ip().is_loopback());
            assert!(std::net::TcpStream::connect(addr).is_ok());
            hub.stop().unwrap();
        }
        // The socket it leaves behind is replaced by the next hub's, which, asked for no
        // port, has none.
        let again = start(HubConfig::new(dir.path().join("hub")), None).unwrap();
        assert_eq!(again.tcp, None);
        assert!(local_answers(again.socket.as_ref().unwrap()));
        again.stop().unwrap();
    }

    /// Runs `body` on a runtime of its own, on a thread of its own (the caller may be on a
    /// runtime).
    fn on_a_runtime<T: Send>(body: impl std::future::Future<Output = T> + Send) -> T {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(body)
                })
                .join()
                .unwrap()
        })
    }

    /// Whether a hub answers at the local socket `path`.
    fn local_answers(path: &std::path::Path) -> bool {
        on_a_runtime(roundtable_platform::local_socket::LocalStream::connect(
            path,
        ))
        .is_ok()
    }

    /// `GET /v1/health` over the local socket `path`: the whole response.
    fn local_health(path: &std::path::Path) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        on_a_runtime(async {
            let mut stream = roundtable_platform::local_socket::LocalStream::connect(path)
                .await
                .unwrap();
            stream
                .write_all(
                    b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                )
                .await
                .unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).await.unwrap();
            response
        })
    }
}
