//! Whether the person typed at a session while a turn's end listened for messages: the
//! session's transcript, read from where the turn ended.

use super::*;

/// Whether lines appended to a Claude Code transcript show the person typed a prompt: Claude
/// writes it as a `queue-operation` `enqueue` the moment it is submitted, while a hook runs.
/// Only whole lines count. Pure.
pub fn person_typed(appended: &[u8]) -> bool {
    let whole = match appended.iter().rposition(|&b| b == b'\n') {
        Some(end) => &appended[..end],
        None => return false,
    };
    whole.split(|&b| b == b'\n').any(|line| {
        serde_json::from_slice::<Value>(line).is_ok_and(|record| {
            record["type"] == "queue-operation" && record["operation"] == "enqueue"
        })
    })
}

/// Waits until the person types into the session whose transcript is `path` (after its
/// first `from` bytes); never returns when there is no transcript to watch.
pub(super) async fn person_types(path: Option<PathBuf>, from: u64) {
    appended_until(path, from, person_typed).await
}

/// Waits until what was appended to `path` after its first `from` bytes `says` so, looking
/// whenever the file grew; never returns without a file to watch.
pub(super) async fn appended_until(path: Option<PathBuf>, from: u64, says: fn(&[u8]) -> bool) {
    let Some(path) = path else {
        return std::future::pending().await;
    };
    let mut seen = from;
    loop {
        tokio::time::sleep(TYPING_CHECK).await;
        let Ok(metadata) = tokio::fs::metadata(&path).await else {
            continue;
        };
        if metadata.len() <= seen {
            continue;
        }
        if read_range(&path, from)
            .await
            .is_ok_and(|bytes| says(&bytes))
        {
            return;
        }
        seen = metadata.len();
    }
}

pub(super) async fn read_range(path: &Path, from: u64) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(std::io::SeekFrom::Start(from)).await?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT as u64).read_to_end(&mut bytes).await?;
    Ok(bytes)
}
