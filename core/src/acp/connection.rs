//! One ACP agent process, spoken to over its stdio: requests matched to their answers by
//! id, `session/update` notifications routed to the session's listener, and the agent's own
//! requests (a permission asked) handed to whoever serves them. The process runs in a
//! group of its own; dropping the [`AcpAgent`] ends it and everything it started.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roundtable_platform::process_group::ProcessGroup;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::updates::{Incoming, PROTOCOL_VERSION, RpcError, Update, read_line, read_update};

/// The longest line read from an agent: a longer one is skipped, never held.
const MAX_LINE: usize = 16 << 20;

/// How long the agent may take to answer `initialize`, `session/new` or `session/load`.
pub const SETUP_PATIENCE: Duration = Duration::from_secs(120);

/// Why talking to the agent failed.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("cannot start the ACP agent {program}: {detail}")]
    Start { program: String, detail: String },
    #[error("the ACP agent refused {method}: {error}")]
    Refused { method: String, error: RpcError },
    #[error("the ACP agent ended")]
    Ended,
    #[error("the ACP agent did not answer {method} in {patience:?}")]
    Silent { method: String, patience: Duration },
    #[error("the ACP agent speaks protocol version {0}; Roundtable speaks 1")]
    Version(u64),
}

/// A request of the agent's, for the runner to answer with [`AcpAgent::respond`].
#[derive(Debug)]
pub struct AgentRequest {
    pub id: Value,
    pub method: String,
    pub params: Value,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>>;
type Listeners = Arc<Mutex<HashMap<String, (String, mpsc::UnboundedSender<Update>)>>>;

/// A running ACP agent, initialized.
pub struct AcpAgent {
    lines: mpsc::UnboundedSender<String>,
    pending: Pending,
    listeners: Listeners,
    next_id: AtomicU64,
    /// Cleared when its output ends (it exited, or closed it).
    alive: Arc<AtomicBool>,
    /// What the agent said it can do (`initialize`'s `agentCapabilities`).
    pub capabilities: Value,
    child: tokio::process::Child,
    _group: ProcessGroup,
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<()>,
}

impl Drop for AcpAgent {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
        let _ = self.child.start_kill();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl AcpAgent {
    /// Starts `program args` in `cwd` with `env` added, and initializes it. The agent's
    /// requests come out of the returned receiver.
    pub async fn start(
        program: &Path,
        args: &[String],
        cwd: &Path,
        env: &[(String, String)],
    ) -> Result<(AcpAgent, mpsc::UnboundedReceiver<AgentRequest>), AcpError> {
        let mut command = tokio::process::Command::new(program);
        roundtable_platform::process_group::start_own_group(&mut command);
        let started = command
            .args(args)
            .current_dir(cwd)
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn();
        let start_error = |detail: String| AcpError::Start {
            program: program.display().to_string(),
            detail,
        };
        let mut child = started.map_err(|error| start_error(error.to_string()))?;
        let group = ProcessGroup::of(&child).map_err(|error| start_error(error.to_string()))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        // What the agent says of itself is the runner's debug log; it ends with the agent.
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(log_stderr(stderr));
        }
        let (lines, mut to_write) = mpsc::unbounded_channel::<String>();
        let writer = tokio::spawn(async move {
            while let Some(mut line) = to_write.recv().await {
                line.push('\n');
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
        });
        let pending: Pending = Arc::default();
        let listeners: Listeners = Arc::default();
        let (requests, requested) = mpsc::unbounded_channel();
        let alive = Arc::new(AtomicBool::new(true));
        let reader = tokio::spawn(read_agent(
            stdout,
            (pending.clone(), listeners.clone()),
            requests,
            lines.clone(),
            alive.clone(),
        ));
        let mut agent = AcpAgent {
            lines,
            pending,
            listeners,
            next_id: AtomicU64::new(0),
            alive,
            capabilities: Value::Null,
            child,
            _group: group,
            reader,
            writer,
        };
        let initialized = agent
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    // Roundtable offers no files or terminal of its own: the agent works
                    // in its directory with its own tools.
                    "clientCapabilities": {
                        "fs": {"readTextFile": false, "writeTextFile": false},
                        "terminal": false,
                    },
                    "clientInfo": {"name": "roundtable", "version": env!("CARGO_PKG_VERSION")},
                }),
                SETUP_PATIENCE,
            )
            .await?;
        let version = initialized["protocolVersion"]
            .as_u64()
            .unwrap_or(PROTOCOL_VERSION);
        if version != PROTOCOL_VERSION {
            return Err(AcpError::Version(version));
        }
        agent.capabilities = initialized["agentCapabilities"].clone();
        Ok((agent, requested))
    }

    /// Whether the agent can load a session it had (`session/load`).
    pub fn loads_sessions(&self) -> bool {
        self.capabilities["loadSession"] == json!(true)
    }

    /// Sends a request and waits for its answer, at most `patience`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        patience: Duration,
    ) -> Result<Value, AcpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        lock(&self.pending).insert(id, answer);
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self.lines.send(line.to_string()).is_err() {
            lock(&self.pending).remove(&id);
            return Err(AcpError::Ended);
        }
        match tokio::time::timeout(patience, answered).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => Err(AcpError::Refused {
                method: method.to_owned(),
                error,
            }),
            Ok(Err(_)) => Err(AcpError::Ended),
            Err(_) => {
                lock(&self.pending).remove(&id);
                Err(AcpError::Silent {
                    method: method.to_owned(),
                    patience,
                })
            }
        }
    }

    /// Sends a notification (`session/cancel`).
    pub fn notify(&self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let _ = self.lines.send(line.to_string());
    }

    /// Answers one of the agent's requests.
    pub fn respond(&self, id: &Value, result: Result<Value, RpcError>) {
        let line = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id,
                                 "error": {"code": error.code, "message": error.message}}),
        };
        let _ = self.lines.send(line.to_string());
    }

    /// Hears `session`'s updates (its relative paths resolved against `cwd`) until
    /// [`AcpAgent::stop_listening`].
    pub fn listen(&self, session: &str, cwd: &str) -> mpsc::UnboundedReceiver<Update> {
        let (sender, receiver) = mpsc::unbounded_channel();
        lock(&self.listeners).insert(session.to_owned(), (cwd.to_owned(), sender));
        receiver
    }

    pub fn stop_listening(&self, session: &str) {
        lock(&self.listeners).remove(session);
    }

    /// Whether the agent still talks (its output is open).
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }
}

/// Reads the agent's output to its end: answers to their requests, updates to their
/// session's listener, the agent's requests out; each line on its own, a bad one skipped.
async fn read_agent(
    stdout: tokio::process::ChildStdout,
    (pending, listeners): (Pending, Listeners),
    requests: mpsc::UnboundedSender<AgentRequest>,
    lines: mpsc::UnboundedSender<String>,
    alive: Arc<AtomicBool>,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            // Too long: the rest of it is read and dropped.
            let mut rest = Vec::new();
            if reader.read_until(b'\n', &mut rest).await.is_err() {
                break;
            }
            tracing::debug!("an ACP agent's line over {MAX_LINE} bytes was skipped");
            continue;
        }
        let message = match read_line(line.trim_ascii()) {
            Ok(message) => message,
            Err(error) => {
                tracing::debug!(%error, "an ACP agent's line was skipped");
                continue;
            }
        };
        match message {
            Incoming::Response { id, result } => {
                if let Some(answer) = lock(&pending).remove(&id) {
                    let _ = answer.send(result);
                }
            }
            Incoming::Notification { method, params } if method == "session/update" => {
                let session = params["sessionId"].as_str().unwrap_or_default().to_owned();
                let listener = lock(&listeners).get(&session).cloned();
                if let Some((cwd, sender)) = listener
                    && let Some((_, update)) = read_update(&params, &cwd)
                {
                    let _ = sender.send(update);
                }
            }
            Incoming::Notification { .. } => {}
            Incoming::Request { id, method, params } => {
                if method == "session/request_permission" {
                    let _ = requests.send(AgentRequest { id, method, params });
                } else {
                    // Files and terminals are not offered: said at once.
                    let answer = json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32601, "message": format!("{method} is not offered by Roundtable"),
                    }});
                    let _ = lines.send(answer.to_string());
                }
            }
        }
    }
    // Ended: whoever waits for an answer hears so.
    alive.store(false, Ordering::Relaxed);
    lock(&pending).clear();
    lock(&listeners).clear();
}

/// Logs the agent's stderr line by line (a longer line cut at [`MAX_LINE`]) until it ends.
async fn log_stderr(stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut lines)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                tracing::debug!(target: "roundtable_core::acp::agent", "{}", String::from_utf8_lossy(&line).trim_end())
            }
        }
    }
}
