//! The operator's socket: `roundtable hub user …` reaching the running hub (see
//! [`crate::operator`] for what it asks). Over the platform's local socket (a Unix socket;
//! a named pipe kept to its user on Windows); an edge of the hub like its listeners.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use roundtable_platform::local_socket::{LocalListener, LocalStream};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

use crate::operator::{MAX_REQUEST, OperatorError, OperatorReply, OperatorRequest, SOCKET_NAME};
use crate::writer::{Request, WriterHandle};

/// Sends one request to the hub running on `data_dir` and waits for its answer (for
/// at most a minute). Blocks: on a thread and a runtime of its own, whatever runs the
/// caller.
pub fn call(data_dir: &Path, request: &OperatorRequest) -> Result<String, OperatorError> {
    let path = data_dir.join(SOCKET_NAME);
    let unreachable = |source| OperatorError::Unreachable {
        path: path.display().to_string(),
        source,
    };
    let mut line = serde_json::to_string(request).expect("requests serialize");
    line.push('\n');
    let asked = path.clone();
    let answered = std::thread::scope(|scope| {
        scope
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(async {
                    let stream = LocalStream::connect(&asked).await?;
                    let (read, mut write) = tokio::io::split(stream);
                    write.write_all(line.as_bytes()).await?;
                    let mut answer = String::new();
                    tokio::time::timeout(
                        Duration::from_secs(60),
                        tokio::io::BufReader::new(read).read_line(&mut answer),
                    )
                    .await
                    .map_err(|_| {
                        std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the hub did not answer within a minute",
                        )
                    })??;
                    Ok::<String, std::io::Error>(answer)
                })
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the call panicked")))
    });
    let answer = answered.map_err(unreachable)?;
    let reply: OperatorReply = serde_json::from_str(answer.trim())
        .map_err(|error| OperatorError::Garbled(format!("{error}: {answer:?}")))?;
    match reply {
        OperatorReply {
            ok: true, token, ..
        } => Ok(token.unwrap_or_default()),
        OperatorReply { error, .. } => Err(OperatorError::Refused(
            error.unwrap_or_else(|| "refused".to_owned()),
        )),
    }
}

/// Listens on `data_dir/operator.sock` until `stop` resolves, then removes it. The
/// caller holds the data directory's lock, so a socket file left there is stale.
pub async fn serve(
    data_dir: &Path,
    writer: WriterHandle,
    stop: impl std::future::Future<Output = ()>,
) {
    let path = data_dir.join(SOCKET_NAME);
    let listener = match LocalListener::bind(&path) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "no operator socket: the operator must stop the hub to manage tokens");
            return;
        }
    };
    let writer = Arc::new(writer);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(answer(stream, writer.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "operator socket");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(&path);
}

/// Reads one request, has the writer carry it out, and answers.
async fn answer(stream: LocalStream, writer: Arc<WriterHandle>) {
    let (read, mut write) = tokio::io::split(stream);
    let mut line = String::new();
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::BufReader::new(read.take(MAX_REQUEST)).read_line(&mut line),
    )
    .await;
    let reply = match read {
        Ok(Ok(_)) => match serde_json::from_str::<OperatorRequest>(line.trim()) {
            Ok(request) => carry_out(request, &writer).await,
            Err(error) => refused(format!("not a request the hub knows: {error}")),
        },
        _ => refused("no request arrived".to_owned()),
    };
    let mut text = serde_json::to_string(&reply).expect("replies serialize");
    text.push('\n');
    let _ = write.write_all(text.as_bytes()).await;
}

async fn carry_out(request: OperatorRequest, writer: &WriterHandle) -> OperatorReply {
    let (reply, answer) = oneshot::channel();
    if !writer.submit(Request::Operator { request, reply }) {
        return refused("the hub is stopping".to_owned());
    }
    match answer.await {
        Ok(Ok(token)) => OperatorReply {
            ok: true,
            token,
            error: None,
        },
        Ok(Err(refusal)) => refused(refusal.msg),
        Err(_) => refused("the hub is stopping".to_owned()),
    }
}

fn refused(error: String) -> OperatorReply {
    OperatorReply {
        ok: false,
        token: None,
        error: Some(error),
    }
}
