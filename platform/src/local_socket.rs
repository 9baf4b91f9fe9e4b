//! A byte stream between processes of one user on one machine, named by a path: how this
//! machine's clients reach its hub (the app's own hub, a hub's operator commands) and how
//! its processes hand work to each other.
//!
//! - Unix: a Unix socket at the path, in a directory only its owner may enter (the callers'
//!   0700 directories), the socket itself 0600. The peer's user is the socket's credential.
//! - Windows: a named pipe whose name is derived from the path (and the user), created with a
//!   security descriptor that lets only its creator's user in, refusing clients on other
//!   machines. A client checks that the server runs as its own user before it says
//!   anything: a pipe's name is global, so while the real server is down another user could
//!   take it. The peer's user is that of the client's process token.
//!
//! Why named pipes rather than AF_UNIX, which Windows 10 also has: tokio (like mio under it)
//! serves named pipes and not AF_UNIX on Windows; a pipe carries a security descriptor of its
//! own, where a socket file's protection would hang on the directory's; and a pipe names the
//! process at its other end, from which its user follows, where AF_UNIX on Windows has no
//! peer credentials.

use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Who is at the other end of an accepted stream: its OS user, as a number (a uid on Unix;
/// on Windows, a digest of the SID). Equal for the same user, for per-user counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerUser(pub u64);

/// Listens for streams at a path.
#[derive(Debug)]
pub struct LocalListener {
    inner: imp::Listener,
}

/// A connected stream, either end.
#[derive(Debug)]
pub struct LocalStream {
    inner: imp::Stream,
}

impl LocalListener {
    /// Listens at `path`, replacing a socket a process that ended left there. Only this
    /// user's processes may connect. Call it within the tokio runtime that will serve it.
    pub fn bind(path: &Path) -> std::io::Result<LocalListener> {
        Ok(LocalListener {
            inner: imp::Listener::bind(path)?,
        })
    }

    /// The next stream, and its peer's user.
    pub async fn accept(&self) -> std::io::Result<(LocalStream, PeerUser)> {
        let (inner, peer) = self.inner.accept().await?;
        Ok((LocalStream { inner }, peer))
    }
}

impl LocalStream {
    /// Connects to the listener at `path`, which must run as this process's user.
    pub async fn connect(path: &Path) -> std::io::Result<LocalStream> {
        Ok(LocalStream {
            inner: imp::Stream::connect(path).await?,
        })
    }
}

/// Whether a listener may be at `path`: false when none can be (on Unix, no socket file);
/// true when one may, and only connecting tells.
pub fn may_listen_at(path: &Path) -> bool {
    imp::may_listen_at(path)
}

/// Whether a listener can be bound at `path` on this OS: a Unix socket's path has room for
/// 103 bytes on macOS and 107 on Linux (`sun_path`, with its terminating zero); a pipe's name
/// is made short whatever the path.
pub fn fits(path: &Path) -> bool {
    imp::fits(path)
}

impl AsyncRead for LocalStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for LocalStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(unix)]
mod imp {
    use std::path::Path;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::net::{UnixListener, UnixStream};

    use super::PeerUser;

    #[derive(Debug)]
    pub(super) struct Listener(UnixListener);

    #[derive(Debug)]
    pub(super) struct Stream(UnixStream);

    impl Listener {
        pub(super) fn bind(path: &Path) -> std::io::Result<Listener> {
            use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
            // A socket a process that ended left behind; never a file of another kind.
            if std::fs::symlink_metadata(path).is_ok_and(|found| found.file_type().is_socket()) {
                std::fs::remove_file(path)?;
            }
            let listener = UnixListener::bind(path)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            Ok(Listener(listener))
        }

        pub(super) async fn accept(&self) -> std::io::Result<(Stream, PeerUser)> {
            loop {
                let (stream, _) = self.0.accept().await?;
                // A peer whose credentials cannot be read is turned away.
                if let Ok(credentials) = stream.peer_cred() {
                    return Ok((Stream(stream), PeerUser(u64::from(credentials.uid()))));
                }
            }
        }
    }

    impl Stream {
        pub(super) async fn connect(path: &Path) -> std::io::Result<Stream> {
            UnixStream::connect(path).await.map(Stream)
        }
    }

    pub(super) fn may_listen_at(path: &Path) -> bool {
        path.exists()
    }

    pub(super) fn fits(path: &Path) -> bool {
        std::os::unix::net::SocketAddr::from_pathname(path).is_ok()
    }

    impl AsyncRead for Stream {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Stream {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().0).poll_flush(cx)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
        }
    }
}

#[cfg(windows)]
#[allow(
    unsafe_code,
    reason = "Win32 pipe and security-descriptor calls; every handle and allocation is checked and released"
)]
mod imp {
    use std::os::windows::io::AsRawHandle as _;
    use std::path::Path;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::net::windows::named_pipe::{
        ClientOptions, NamedPipeClient, NamedPipeServer, ServerOptions,
    };
    use windows_sys::Win32::Foundation::{ERROR_PIPE_BUSY, HANDLE, HLOCAL, LocalFree};
    use windows_sys::Win32::Security::Authorization::{
        ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
    };
    use windows_sys::Win32::Security::{PSECURITY_DESCRIPTOR, SECURITY_ATTRIBUTES};
    use windows_sys::Win32::System::Pipes::{
        GetNamedPipeClientProcessId, GetNamedPipeServerProcessId,
    };

    use super::PeerUser;
    use crate::windows_user::UserSid;

    /// The pipe's name: `\\.\pipe\roundtable-` and a digest of the user and the path, so
    /// one path names one pipe per user, and no path is too long for a name.
    fn pipe_name(path: &Path, user: &UserSid) -> String {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let lowered = absolute.to_string_lossy().to_lowercase();
        format!(
            r"\\.\pipe\roundtable-{:016x}{:016x}",
            fnv1a(user.bytes()),
            fnv1a(lowered.as_bytes())
        )
    }

    /// FNV-1a, 64 bits: a stable digest (std's hasher is seeded per process).
    fn fnv1a(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }

    /// A security descriptor that lets only `user` in (no inherited entries).
    struct OwnerOnly(PSECURITY_DESCRIPTOR);

    impl OwnerOnly {
        fn of(user: &UserSid) -> std::io::Result<OwnerOnly> {
            let sddl: Vec<u16> = format!("D:P(A;;GA;;;{})", user.to_text()?)
                .encode_utf16()
                .chain([0])
                .collect();
            let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
            // SAFETY: `sddl` is zero-terminated; the system allocates `descriptor`, freed on
            // drop.
            let made = unsafe {
                ConvertStringSecurityDescriptorToSecurityDescriptorW(
                    sddl.as_ptr(),
                    SDDL_REVISION_1,
                    &mut descriptor,
                    std::ptr::null_mut(),
                )
            };
            if made == 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(OwnerOnly(descriptor))
        }
    }

    impl Drop for OwnerOnly {
        fn drop(&mut self) {
            // SAFETY: allocated by the system with LocalAlloc, freed once.
            unsafe { LocalFree(self.0 as HLOCAL) };
        }
    }

    /// The pipe's next instance, waiting for a client.
    fn instance(name: &str, user: &UserSid, first: bool) -> std::io::Result<NamedPipeServer> {
        let descriptor = OwnerOnly::of(user)?;
        let mut attributes = SECURITY_ATTRIBUTES {
            nLength: size_of::<SECURITY_ATTRIBUTES>() as u32,
            lpSecurityDescriptor: descriptor.0,
            bInheritHandle: 0,
        };
        // SAFETY: the attributes and the descriptor they point to live through the call.
        unsafe {
            ServerOptions::new()
                .first_pipe_instance(first)
                .reject_remote_clients(true)
                .create_with_security_attributes_raw(name, (&raw mut attributes).cast())
        }
    }

    #[derive(Debug)]
    pub(super) struct Listener {
        name: String,
        user: UserSid,
        /// The instance the next client connects to.
        waiting: tokio::sync::Mutex<NamedPipeServer>,
    }

    impl Listener {
        pub(super) fn bind(path: &Path) -> std::io::Result<Listener> {
            let user = UserSid::current()?;
            let name = pipe_name(path, &user);
            let first = instance(&name, &user, true)?;
            Ok(Listener {
                name,
                user,
                waiting: tokio::sync::Mutex::new(first),
            })
        }

        pub(super) async fn accept(&self) -> std::io::Result<(Stream, PeerUser)> {
            let mut waiting = self.waiting.lock().await;
            loop {
                waiting.connect().await?;
                // The next instance first, so no client finds the pipe gone meanwhile.
                let next = instance(&self.name, &self.user, false)?;
                let connected = std::mem::replace(&mut *waiting, next);
                let mut pid = 0u32;
                // SAFETY: the handle is the connected instance's, valid for the call.
                let named = unsafe {
                    GetNamedPipeClientProcessId(connected.as_raw_handle() as HANDLE, &mut pid)
                };
                // A client whose user cannot be read is turned away.
                if named != 0
                    && let Ok(user) = UserSid::of_process_id(pid)
                {
                    let peer = PeerUser(fnv1a(user.bytes()));
                    return Ok((Stream::Server(connected), peer));
                }
            }
        }
    }

    #[derive(Debug)]
    pub(super) enum Stream {
        Server(NamedPipeServer),
        Client(NamedPipeClient),
    }

    impl Stream {
        pub(super) async fn connect(path: &Path) -> std::io::Result<Stream> {
            let user = UserSid::current()?;
            let name = pipe_name(path, &user);
            let client = loop {
                match ClientOptions::new().open(&name) {
                    Ok(client) => break client,
                    // Every instance busy: the server makes the next one at once.
                    Err(error) if error.raw_os_error() == Some(ERROR_PIPE_BUSY as i32) => {
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                    Err(error) => return Err(error),
                }
            };
            let mut pid = 0u32;
            // SAFETY: the handle is the client's, valid for the call.
            let named =
                unsafe { GetNamedPipeServerProcessId(client.as_raw_handle() as HANDLE, &mut pid) };
            if named == 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Another user's process serving this name is not ours to talk to.
            if UserSid::of_process_id(pid)? != user {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "the process serving this pipe runs as another user",
                ));
            }
            Ok(Stream::Client(client))
        }
    }

    pub(super) fn may_listen_at(_path: &Path) -> bool {
        true
    }

    pub(super) fn fits(_path: &Path) -> bool {
        true
    }

    impl AsyncRead for Stream {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            match self.get_mut() {
                Stream::Server(pipe) => Pin::new(pipe).poll_read(cx, buf),
                Stream::Client(pipe) => Pin::new(pipe).poll_read(cx, buf),
            }
        }
    }

    impl AsyncWrite for Stream {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            match self.get_mut() {
                Stream::Server(pipe) => Pin::new(pipe).poll_write(cx, buf),
                Stream::Client(pipe) => Pin::new(pipe).poll_write(cx, buf),
            }
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            match self.get_mut() {
                Stream::Server(pipe) => Pin::new(pipe).poll_flush(cx),
                Stream::Client(pipe) => Pin::new(pipe).poll_flush(cx),
            }
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            match self.get_mut() {
                Stream::Server(pipe) => Pin::new(pipe).poll_shutdown(cx),
                Stream::Client(pipe) => Pin::new(pipe).poll_shutdown(cx),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

    use super::*;

    fn scratch() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "rt-sock-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn a_stream_carries_lines_both_ways_and_knows_its_peer_s_user() {
        let dir = scratch();
        let path = dir.join("t.sock");
        let listener = LocalListener::bind(&path).unwrap();
        assert!(may_listen_at(&path));
        let server = tokio::spawn(async move {
            let mut peers = Vec::new();
            for _ in 0..2 {
                let (stream, peer) = listener.accept().await.unwrap();
                peers.push(peer);
                let (read, mut write) = tokio::io::split(stream);
                let mut line = String::new();
                BufReader::new(read).read_line(&mut line).await.unwrap();
                write
                    .write_all(format!("heard {line}").as_bytes())
                    .await
                    .unwrap();
            }
            peers
        });
        for word in ["one", "two"] {
            let stream = LocalStream::connect(&path).await.unwrap();
            let (read, mut write) = tokio::io::split(stream);
            write
                .write_all(format!("{word}\n").as_bytes())
                .await
                .unwrap();
            let mut line = String::new();
            BufReader::new(read).read_line(&mut line).await.unwrap();
            assert_eq!(line, format!("heard {word}\n"));
        }
        let peers = server.await.unwrap();
        // The same user both times: this one.
        assert_eq!(peers[0], peers[1]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn nothing_listening_is_an_error_not_a_wait() {
        let dir = scratch();
        let error = LocalStream::connect(&dir.join("none.sock"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ),
            "{error:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn on_unix_the_socket_is_its_owner_s_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = scratch();
        let path = dir.join("t.sock");
        let _listener = LocalListener::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let _ = std::fs::remove_dir_all(dir);
    }
}
