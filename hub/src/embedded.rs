//! A hub inside another program (the desktop app, a test): on a runtime and threads of its
//! own, so the host's async workers never run the hub's tasks and the hub's never run the
//! host's. One person with local agents needs nothing else: the app starts this on
//! 127.0.0.1 and talks to it like to any other hub.

use std::net::SocketAddr;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::{Hub, HubConfig, HubError};

/// Worker threads of the embedded hub's runtime: enough to keep sockets moving while the
/// writer and flush threads (its own, besides these) do the storage work.
const WORKERS: usize = 2;

/// A hub running on its own runtime; dropping it stops the hub and waits for its last
/// commit.
#[derive(Debug)]
pub struct EmbeddedHub {
    /// Where it listens (its port chosen by the system when asked for port 0).
    pub addr: SocketAddr,
    /// Its Unix socket, where this machine's clients reach it (see
    /// [`crate::Hub::bind_socket`]).
    pub socket: Option<std::path::PathBuf>,
    pub hub_id: String,
    pub epoch: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), HubError>>>,
}

/// Starts a hub over `config.data_dir` listening on `listen` (`127.0.0.1:0` picks a free
/// port) and on its Unix socket in the data directory. Invite links name
/// `config.public_address`, or the address it listens on.
pub fn start(mut config: HubConfig, listen: SocketAddr) -> Result<EmbeddedHub, HubError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .thread_name("roundtable-hub")
        .enable_all()
        .build()?;
    // Bound here, so the caller learns the port (and a busy port fails here); adopted by
    // the hub's own runtime on its thread (the caller may be inside a runtime of its own).
    let listener = std::net::TcpListener::bind(listen)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    if config.public_address.is_none() {
        config.public_address = Some(addr.to_string());
    }
    let socket_path = config.data_dir.join(crate::SOCKET);
    let hub = Hub::open(config)?;
    // A socket that cannot be made (a data directory whose path is longer than a socket
    // address holds) leaves the hub on its port alone, and says why.
    #[cfg(unix)]
    let (socket, unix) = match hub.bind_socket() {
        Ok(listener) => (Some(socket_path), Some(listener)),
        Err(error) => {
            tracing::warn!(%error, path = %socket_path.display(), "no Unix socket for the hub; its clients use its port");
            (None, None)
        }
    };
    #[cfg(not(unix))]
    let socket = {
        let _ = socket_path;
        None
    };
    let hub_id = hub.hub_id().to_owned();
    let epoch = hub.epoch().to_owned();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("roundtable-hub-main".into())
        .spawn(move || {
            let served = runtime.block_on(async move {
                let listeners = crate::listener::Listeners {
                    tcp: Some(tokio::net::TcpListener::from_std(listener)?),
                    #[cfg(unix)]
                    unix: unix.map(tokio::net::UnixListener::from_std).transpose()?,
                };
                hub.serve_on(listeners, async {
                    let _ = stopped.await;
                })
                .await
            });
            // Connections still open are told 1012 by `serve`; whatever tasks remain end here.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            served
        })?;
    Ok(EmbeddedHub {
        addr,
        socket,
        hub_id,
        epoch,
        stop: Some(stop),
        thread: Some(thread),
    })
}

impl EmbeddedHub {
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

    #[test]
    fn an_embedded_hub_serves_health_and_stops_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let hub = start(
            HubConfig::new(dir.path().join("hub")),
            "127.0.0.1:0".parse().unwrap(),
        )
        .unwrap();
        assert!(hub.addr.ip().is_loopback());
        assert_ne!(hub.addr.port(), 0);
        let addr = hub.addr;
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
        // And on its Unix socket, which only its user may use.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let socket = hub.socket.clone().unwrap();
            assert_eq!(socket, dir.path().join("hub").join(crate::SOCKET));
            let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let dir_mode = std::fs::metadata(socket.parent().unwrap())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(dir_mode & 0o777, 0o700);
            let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            write!(
                stream,
                "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        }
        drop(hub);
        // Stopped: the port no longer answers, and the data directory can be opened again.
        assert!(std::net::TcpStream::connect(addr).is_err());
        // A data directory too deep for a socket address: the hub serves on its port.
        #[cfg(unix)]
        {
            let deep = dir.path().join("d".repeat(120)).join("hub");
            let hub = start(HubConfig::new(&deep), "127.0.0.1:0".parse().unwrap()).unwrap();
            assert_eq!(hub.socket, None);
            assert!(std::net::TcpStream::connect(hub.addr).is_ok());
            hub.stop().unwrap();
        }
        // The socket it leaves behind is replaced by the next hub's.
        let again = start(
            HubConfig::new(dir.path().join("hub")),
            "127.0.0.1:0".parse().unwrap(),
        )
        .unwrap();
        #[cfg(unix)]
        assert!(std::os::unix::net::UnixStream::connect(again.socket.as_ref().unwrap()).is_ok());
        again.stop().unwrap();
    }
}
