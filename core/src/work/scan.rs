//! Reading the agent CLIs' logs on this machine in one pass (`roundtable scan`, and the
//! watcher's first look): find the files, parse them on every core, add them up.
//!
//! The walk never leaves the logs' directories: a symbolic link that points outside them is
//! counted and skipped. A last line without its newline is still being written: it is left
//! for later, not counted as skipped.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::summary::Summary;
use super::{claude, codex, copilot, gemini, opencode_db};
use crate::local_agents::Environment;
use crate::log_events::{Framework, LineOutcome, LogEvent};

/// What kind of log a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogKind {
    /// A Claude Code transcript (main or subagent).
    ClaudeTranscript,
    /// A task of Claude Code's Task tools (`tasks/<list>/<id>.json`).
    ClaudeTask,
    CodexRollout,
    /// A Codex rollout compressed (`rollout-*.jsonl.zst`): read whole, decompressed.
    CodexCompressed,
    GeminiChat,
    /// OpenCode's SQLite database (`opencode.db`), read by its rows, never by bytes.
    OpencodeDb,
    /// A GitHub Copilot CLI session's `events.jsonl`.
    CopilotEvents,
    /// A GitHub Copilot CLI session's own database (`session.db`), for its task list.
    CopilotTodos,
}

impl LogKind {
    pub fn framework(self) -> Framework {
        match self {
            LogKind::ClaudeTranscript | LogKind::ClaudeTask => Framework::ClaudeCode,
            LogKind::CodexRollout | LogKind::CodexCompressed => Framework::Codex,
            LogKind::GeminiChat => Framework::Gemini,
            LogKind::OpencodeDb => Framework::Opencode,
            LogKind::CopilotEvents | LogKind::CopilotTodos => Framework::Copilot,
        }
    }

    /// Whether the file is read line by line (and can be followed by offset).
    pub fn by_line(self) -> bool {
        matches!(
            self,
            LogKind::ClaudeTranscript | LogKind::CodexRollout | LogKind::CopilotEvents
        )
    }
}

/// A log file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub path: PathBuf,
    pub kind: LogKind,
    pub size: u64,
    /// The file's device and inode (zero where the system has none), to tell a file
    /// replaced under the same name.
    pub device: u64,
    pub inode: u64,
}

/// The device and inode of the file at `path` (on Windows, its volume and index).
pub fn identity(path: &Path, metadata: &std::fs::Metadata) -> (u64, u64) {
    roundtable_platform::file_identity::of(path, metadata)
}

/// The directories the agent CLIs write their logs to, and what each holds.
pub fn roots(env: &Environment) -> Vec<(PathBuf, LogKind)> {
    let claude = env.claude_dir();
    let mut roots = vec![
        (claude.join("projects"), LogKind::ClaudeTranscript),
        (claude.join("tasks"), LogKind::ClaudeTask),
        (env.codex_dir().join("sessions"), LogKind::CodexRollout),
        (
            env.codex_dir().join("archived_sessions"),
            LogKind::CodexRollout,
        ),
        (env.gemini_dir().join("tmp"), LogKind::GeminiChat),
        (env.opencode_data_dir(), LogKind::OpencodeDb),
        // Both of a session's files: `entry` tells them apart.
        (
            env.copilot_dir().join("session-state"),
            LogKind::CopilotEvents,
        ),
    ];
    // Claude Code also wrote under ~/.config/claude (ccusage reads it too).
    let legacy = env.home.join(".config/claude/projects");
    if env.claude_config_dir.is_none() && legacy != claude.join("projects") {
        roots.push((legacy, LogKind::ClaudeTranscript));
    }
    roots
}

fn wanted(kind: LogKind, path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    match kind {
        LogKind::ClaudeTranscript => name.ends_with(".jsonl"),
        LogKind::ClaudeTask => name.ends_with(".json"),
        LogKind::CodexRollout | LogKind::CodexCompressed => {
            name.starts_with("rollout-")
                && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst"))
        }
        LogKind::GeminiChat => {
            // A session's chat in `chats/`, a sub-agent's in `chats/<parent session>/`.
            let in_chats = |dir: Option<&Path>| {
                dir.and_then(Path::file_name)
                    .is_some_and(|dir| dir == "chats")
            };
            let parent = path.parent();
            (name.ends_with(".json") || name.ends_with(".jsonl"))
                && (in_chats(parent) || in_chats(parent.and_then(Path::parent)))
        }
        LogKind::OpencodeDb => name == opencode_db::DATABASE,
        // `session-state/<session>/events.jsonl` and `…/session.db`.
        LogKind::CopilotEvents | LogKind::CopilotTodos => {
            (name == copilot::EVENTS_FILE || name == copilot::SESSION_DB)
                && path
                    .parent()
                    .and_then(Path::parent)
                    .and_then(Path::file_name)
                    .is_some_and(|dir| dir == "session-state")
        }
    }
}

/// What a path under a root of logs is.
enum Entry {
    Dir,
    Log(LogFile),
    /// A link out of the root: never followed.
    OutOfTree,
    Other,
}

fn entry(canonical_root: &Path, kind: LogKind, path: PathBuf) -> Entry {
    let Ok(mut metadata) = std::fs::symlink_metadata(&path) else {
        return Entry::Other;
    };
    if metadata.file_type().is_symlink() {
        // Followed only to a file inside the logs' directory.
        match path.canonicalize() {
            Ok(target) if target.starts_with(canonical_root) => match std::fs::metadata(&path) {
                Ok(followed) if followed.is_file() => metadata = followed,
                _ => return Entry::Other,
            },
            _ => return Entry::OutOfTree,
        }
    }
    if metadata.is_dir() {
        // OpenCode's database is at the top of its data folder, beside thousands of
        // files of its own (snapshots as git stores): never walked into. A Copilot
        // session's folder holds its logs; the folders within it (snapshots, checkpoints,
        // the session's own files) hold none.
        let walked = match kind {
            LogKind::OpencodeDb => false,
            LogKind::CopilotEvents => path
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|dir| dir == "session-state"),
            _ => true,
        };
        if walked { Entry::Dir } else { Entry::Other }
    } else if metadata.is_file() && wanted(kind, &path) {
        let (device, inode) = identity(&path, &metadata);
        let kind = match kind {
            LogKind::CodexRollout if path.extension().is_some_and(|ext| ext == "zst") => {
                LogKind::CodexCompressed
            }
            LogKind::CopilotEvents
                if path
                    .file_name()
                    .is_some_and(|name| name == copilot::SESSION_DB) =>
            {
                LogKind::CopilotTodos
            }
            kind => kind,
        };
        Entry::Log(LogFile {
            path,
            kind,
            size: metadata.len(),
            device,
            inode,
        })
    } else {
        Entry::Other
    }
}

/// Every log file under the roots, and how many links pointing out of them were skipped.
/// Directories are listed on every core (a listing waits on the file system more than it
/// computes).
pub fn find(roots: &[(PathBuf, LogKind)]) -> (Vec<LogFile>, u64) {
    /// The directories left to list (with their root's index), and how many are being
    /// listed: the walk is over when both are none.
    struct Walk {
        dirs: Vec<(PathBuf, usize)>,
        listing: usize,
    }
    let canonical: Vec<Option<PathBuf>> = roots
        .iter()
        .map(|(root, _)| root.canonicalize().ok())
        .collect();
    let walk = Mutex::new(Walk {
        dirs: roots
            .iter()
            .enumerate()
            .filter(|(index, _)| canonical[*index].is_some())
            .map(|(index, (root, _))| (root.clone(), index))
            .collect(),
        listing: 0,
    });
    let more = std::sync::Condvar::new();
    let lock = || walk.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (mut files, skipped) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut files = Vec::new();
                    let mut skipped = 0u64;
                    loop {
                        let (dir, index) = {
                            let mut state = lock();
                            loop {
                                if let Some(next) = state.dirs.pop() {
                                    state.listing += 1;
                                    break next;
                                }
                                if state.listing == 0 {
                                    more.notify_all();
                                    return (files, skipped);
                                }
                                state = more
                                    .wait(state)
                                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                            }
                        };
                        let (root, kind) = (&canonical[index], roots[index].1);
                        let mut found = Vec::new();
                        if let (Ok(entries), Some(root)) = (std::fs::read_dir(&dir), root) {
                            for dir_entry in entries.flatten() {
                                let path = dir_entry.path();
                                match entry(root, kind, path.clone()) {
                                    Entry::Dir => found.push((path, index)),
                                    Entry::Log(file) => files.push(file),
                                    Entry::OutOfTree => skipped += 1,
                                    Entry::Other => {}
                                }
                            }
                        }
                        let mut state = lock();
                        state.listing -= 1;
                        state.dirs.extend(found);
                        more.notify_all();
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .fold((Vec::new(), 0), |(mut all, skipped), worker| {
                let (files, more_skipped) = worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                all.extend(files);
                (all, skipped + more_skipped)
            })
    });
    files.sort_by(|a, b| a.path.cmp(&b.path));
    (files, skipped)
}

/// The log file at `path`, when it is one under one of the roots (by the same rules as
/// [`find`]).
pub fn log_file_at(roots: &[(PathBuf, LogKind)], path: &Path) -> Option<LogFile> {
    // OpenCode writes its database's write-ahead log, not the database, between
    // checkpoints: a change to the log is one to the database.
    let database;
    let path = match path.file_name().and_then(|name| name.to_str()) {
        Some(name) if name == format!("{}-wal", opencode_db::DATABASE) => {
            database = path.with_file_name(opencode_db::DATABASE);
            database.as_path()
        }
        _ => path,
    };
    let (root, kind) = roots.iter().find(|(root, _)| path.starts_with(root))?;
    let canonical_root = root.canonicalize().ok()?;
    // Its directory, links resolved, is inside the logs (a listing never walks into a
    // linked directory; a path reported by a watch must not either).
    if !path
        .parent()?
        .canonicalize()
        .ok()?
        .starts_with(&canonical_root)
    {
        return None;
    }
    match entry(&canonical_root, *kind, path.to_path_buf()) {
        Entry::Log(file) => Some(file),
        _ => None,
    }
}

/// The longest line read: a longer one (an agent pasting a disk image into a log) is
/// skipped and counted, never held in memory.
pub const MAX_LINE: u64 = 16 << 20;
/// How much of a log is read at once (more only for one line up to [`MAX_LINE`]).
const READ_CHUNK: u64 = 4 << 20;

/// What [`read_lines`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinesRead {
    /// Where the next line starts (past the last complete line).
    pub offset: u64,
    /// Lines over [`MAX_LINE`], skipped.
    pub too_long: u64,
}

/// Reads the complete lines of `file` from `offset` (where a line starts) to `size`, in
/// chunks, handing each to `each` with its offset; a line over [`MAX_LINE`] is skipped
/// unread. `clear_to`: the file holds no newline in `offset..clear_to` (what an earlier read
/// of a last line without its newline learned), so a line that grows slowly is not read
/// again from its start each time, only once it is whole.
pub fn read_lines(
    file: &mut std::fs::File,
    mut offset: u64,
    clear_to: u64,
    size: u64,
    mut each: impl FnMut(u64, &[u8]),
) -> std::io::Result<LinesRead> {
    use std::io::{Read, Seek, SeekFrom};
    let mut too_long = 0;
    let mut clear_to = clear_to.max(offset);
    let mut buffer = Vec::new();
    while offset < size {
        let mut wanted = READ_CHUNK.min(size - offset);
        if clear_to > offset {
            // The line at `offset` is longer than what was looked at: where it ends is
            // looked for past that, and it is read only if it is not too long.
            let Some(newline) = next_newline(file, clear_to, size)? else {
                break;
            };
            if newline - offset > MAX_LINE {
                too_long += 1;
                offset = newline + 1;
                clear_to = offset;
                continue;
            }
            wanted = wanted.max(newline + 1 - offset);
        }
        buffer.clear();
        file.seek(SeekFrom::Start(offset))?;
        file.by_ref().take(wanted).read_to_end(&mut buffer)?;
        let (_, end) = complete_lines(&buffer);
        let mut start = 0;
        for piece in buffer[..end].split_inclusive(|&b| b == b'\n') {
            let line = piece.strip_suffix(b"\n").unwrap_or(piece);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let at = offset + start as u64;
            start += piece.len();
            if line.len() as u64 > MAX_LINE {
                too_long += 1;
            } else if !line.is_empty() {
                each(at, line);
            }
        }
        // No newline past the last complete line, up to what was read.
        clear_to = offset + buffer.len() as u64;
        offset += end as u64;
        if (buffer.len() as u64) < wanted {
            // The file was cut short while it was read: what is there is read.
            break;
        }
    }
    Ok(LinesRead { offset, too_long })
}

/// The position of the first newline of `file` in `from..to`.
fn next_newline(file: &mut std::fs::File, from: u64, to: u64) -> std::io::Result<Option<u64>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut block = vec![0u8; 64 << 10];
    let mut at = from;
    file.seek(SeekFrom::Start(at))?;
    while at < to {
        let wanted = block.len().min((to - at) as usize);
        let read = file.read(&mut block[..wanted])?;
        if read == 0 {
            return Ok(None);
        }
        if let Some(index) = memchr::memchr(b'\n', &block[..read]) {
            return Ok(Some(at + index as u64));
        }
        at += read as u64;
    }
    Ok(None)
}

/// The complete lines of `bytes` (a last line without its newline is left out), and where
/// the complete part ends.
pub fn complete_lines(bytes: &[u8]) -> (impl Iterator<Item = &[u8]>, usize) {
    let end = memchr::memrchr(b'\n', bytes).map_or(0, |newline| newline + 1);
    let complete = &bytes[..end];
    let mut start = 0;
    let lines = memchr::memchr_iter(b'\n', complete)
        .map(move |newline| {
            let line = &complete[start..newline];
            start = newline + 1;
            line
        })
        .filter(|line| !line.is_empty())
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    (lines, end)
}

/// The most a compressed log may hold decompressed: more is not a log, and is not read.
pub const MAX_DECOMPRESSED: u64 = 4 << 30;

/// A compressed log's content; `None` when it is not zstd or holds more than
/// [`MAX_DECOMPRESSED`] bytes.
pub fn decompress(bytes: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let decoder = ruzstd::decoding::StreamingDecoder::new(bytes).ok()?;
    let mut out = Vec::new();
    decoder
        .take(MAX_DECOMPRESSED + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 <= MAX_DECOMPRESSED).then_some(out)
}

/// A line-by-line parser of one file.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "parser", rename_all = "snake_case")]
pub enum LineParser {
    Claude(claude::ClaudeParser),
    Codex(codex::CodexParser),
    Copilot(copilot::CopilotParser),
}

impl LineParser {
    pub fn for_file(kind: LogKind, path: &Path) -> Option<LineParser> {
        match kind {
            LogKind::ClaudeTranscript => Some(LineParser::Claude(claude::ClaudeParser::new())),
            LogKind::CodexRollout | LogKind::CodexCompressed => {
                let name = path
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let name = name.strip_suffix(".zst").unwrap_or(&name);
                Some(LineParser::Codex(codex::CodexParser::new(name)))
            }
            // The session is the folder the log is in.
            LogKind::CopilotEvents => Some(LineParser::Copilot(copilot::CopilotParser::new(
                &copilot_session(path),
            ))),
            _ => None,
        }
    }

    pub fn line(&mut self, line: &[u8], events: &mut Vec<LogEvent>) -> LineOutcome {
        match self {
            LineParser::Claude(parser) => parser.line(line, events),
            LineParser::Codex(parser) => parser.line(line, events),
            LineParser::Copilot(parser) => parser.line(line, events),
        }
    }
}

/// Reads one whole file into `summary` (for a line log, its complete lines). Returns the
/// number of lines skipped.
pub fn read_file(file: &LogFile, bytes: &[u8], summary: &mut Summary) -> u64 {
    let framework = file.kind.framework();
    let mut events = Vec::new();
    let mut skipped = 0;
    let decompressed;
    let bytes = if file.kind == LogKind::CodexCompressed {
        match decompress(bytes) {
            Some(content) => {
                decompressed = content;
                &decompressed[..]
            }
            None => return 1,
        }
    } else {
        bytes
    };
    match file.kind {
        LogKind::ClaudeTranscript
        | LogKind::CodexRollout
        | LogKind::CodexCompressed
        | LogKind::CopilotEvents => {
            let Some(mut parser) = LineParser::for_file(file.kind, &file.path) else {
                return 0;
            };
            let (lines, _) = complete_lines(bytes);
            for line in lines {
                if line.len() as u64 > MAX_LINE
                    || parser.line(line, &mut events) == LineOutcome::Skipped
                {
                    skipped += 1;
                }
                for event in events.drain(..) {
                    summary.add(framework, event);
                }
            }
        }
        LogKind::ClaudeTask => {
            if let Some(task) = claude::parse_task_file(bytes) {
                summary.add_task_file(&file.path, task);
            }
        }
        LogKind::GeminiChat => {
            let name = file
                .path
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            let chat = gemini::parse_chat_in(bytes, &name, &gemini_context(&file.path));
            skipped += chat.skipped_lines;
            for event in chat.events {
                summary.add(framework, event);
            }
        }
        // Read by their rows ([`read_database`]).
        LogKind::OpencodeDb | LogKind::CopilotTodos => {}
    }
    skipped
}

/// The session a Copilot session's file belongs to: the name of the folder it is in.
pub fn copilot_session(path: &Path) -> String {
    path.parent()
        .and_then(Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Reads a database whole into `summary` (OpenCode's, a Copilot session's); the rows
/// skipped.
fn read_database(file: &LogFile, summary: &mut Summary) -> std::io::Result<u64> {
    if file.kind == LogKind::CopilotTodos {
        let tasks = super::copilot_db::read_todos(&file.path, &copilot_session(&file.path))
            .map_err(std::io::Error::other)?;
        if let Some(tasks) = tasks {
            summary.add(Framework::Copilot, tasks);
        }
        return Ok(0);
    }
    let read = opencode_db::read_since(&file.path, 0).map_err(std::io::Error::other)?;
    for event in read.read.events {
        summary.add(Framework::Opencode, event);
    }
    Ok(read.read.skipped_rows)
}

/// Where a Gemini CLI chat is: a sub-agent's (`chats/<parent session>/<agent>.jsonl`)
/// names its parent session; the project's directory is in `tmp/<project>/.project_root`.
pub fn gemini_context(path: &Path) -> gemini::ChatContext {
    let dir = path.parent();
    let sub_agent = dir
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .is_some_and(|name| name == "chats");
    let chats = if sub_agent {
        dir.and_then(Path::parent)
    } else {
        dir
    };
    let project_root = chats
        .and_then(Path::parent)
        .and_then(|project| std::fs::read_to_string(project.join(".project_root")).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| text.starts_with('/'));
    gemini::ChatContext {
        parent_session: sub_agent
            .then(|| dir.and_then(Path::file_name))
            .flatten()
            .map(|name| name.to_string_lossy().into_owned()),
        project_root,
    }
}

/// How far a scan has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub files_done: usize,
    pub files: usize,
    pub bytes_done: u64,
    pub bytes: u64,
}

/// Reads every file on `threads` threads and adds them up; `progress` hears of each file
/// read (from any thread).
/// Logs up to this size are read whole; larger ones a chunk at a time.
const READ_WHOLE: u64 = 64 << 20;

/// [`read_file`] for a log too large to hold at once, read through [`read_lines`]; the
/// lines it skipped.
fn read_large_file(file: &LogFile, summary: &mut Summary) -> std::io::Result<u64> {
    let framework = file.kind.framework();
    let Some(mut parser) = LineParser::for_file(file.kind, &file.path) else {
        return Ok(0);
    };
    let mut opened = std::fs::File::open(&file.path)?;
    let mut events = Vec::new();
    let mut skipped = 0;
    let read = read_lines(&mut opened, 0, 0, file.size, |_, line| {
        if parser.line(line, &mut events) == LineOutcome::Skipped {
            skipped += 1;
        }
        for event in events.drain(..) {
            summary.add(framework, event);
        }
    })?;
    Ok(skipped + read.too_long)
}

pub fn scan(files: &[LogFile], threads: usize, progress: &(dyn Fn(Progress) + Sync)) -> Summary {
    let bytes_total: u64 = files.iter().map(|file| file.size).sum();
    // Largest first, so no thread is left with one big file at the end.
    let mut order: Vec<&LogFile> = files.iter().collect();
    order.sort_by_key(|file| std::cmp::Reverse(file.size));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let bytes_done = AtomicU64::new(0);
    let merged = Mutex::new(Summary::default());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let mut summary = Summary::default();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(file) = order.get(index) else { break };
                    let read = if matches!(file.kind, LogKind::OpencodeDb | LogKind::CopilotTodos) {
                        read_database(file, &mut summary)
                    } else if file.size > READ_WHOLE && file.kind.by_line() {
                        read_large_file(file, &mut summary)
                    } else {
                        std::fs::read(&file.path)
                            .map(|bytes| read_file(file, &bytes, &mut summary))
                    };
                    match read {
                        Ok(skipped) => summary.skipped_lines += skipped,
                        Err(error) => {
                            tracing::debug!(%error, path = %file.path.display(), "cannot read a log");
                        }
                    }
                    progress(Progress {
                        files_done: done.fetch_add(1, Ordering::Relaxed) + 1,
                        files: files.len(),
                        bytes_done: bytes_done.fetch_add(file.size, Ordering::Relaxed)
                            + file.size,
                        bytes: bytes_total,
                    });
                }
                merged
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .merge(summary);
            });
        }
    });
    merged
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_line_without_its_newline_waits() {
        let (lines, end) = complete_lines(b"{\"a\":1}\r\n{\"b\":2}\n{\"c\":");
        assert_eq!(
            lines.collect::<Vec<_>>(),
            [b"{\"a\":1}".as_slice(), b"{\"b\":2}".as_slice()]
        );
        assert_eq!(end, 17);
        let (lines, end) = complete_lines(b"no newline yet");
        assert_eq!((lines.count(), end), (0, 0));
    }

    #[test]
    fn lines_are_read_in_chunks_past_what_was_looked_at_and_long_ones_skipped() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        // Lines across several chunks, one over the limit among them.
        let line = format!("{{\"pad\":\"{}\"}}\n", "p".repeat(1000));
        let mut expected = Vec::new();
        let mut at = 0u64;
        for n in 0..6000 {
            if n == 3000 {
                let long = format!("{{\"x\":\"{}\"}}\n", "x".repeat(MAX_LINE as usize));
                file.write_all(long.as_bytes()).unwrap();
                at += long.len() as u64;
            }
            file.write_all(line.as_bytes()).unwrap();
            expected.push(at);
            at += line.len() as u64;
        }
        file.write_all(b"{\"torn\":").unwrap();
        drop(file);
        let size = std::fs::metadata(&path).unwrap().len();
        let mut seen = Vec::new();
        let mut opened = std::fs::File::open(&path).unwrap();
        let read = read_lines(&mut opened, 0, 0, size, |at, text| {
            assert_eq!(text, line.trim_end().as_bytes());
            seen.push(at);
        })
        .unwrap();
        assert_eq!(seen, expected);
        assert_eq!(
            read,
            LinesRead {
                offset: at,
                too_long: 1
            }
        );
        // What is known to hold no newline is not looked at again: told (wrongly) that
        // the last lines hold none, the reader finds nothing there.
        let mut none = 0;
        let read = read_lines(&mut opened, expected[5990], size, size, |_, _| none += 1).unwrap();
        assert_eq!((none, read.offset), (0, expected[5990]));
    }

    // Unix only: making a symbolic link on Windows takes Developer Mode or an administrator,
    // which a test cannot count on (the walk's code is the same on every OS).
    #[cfg(unix)]
    #[test]
    fn links_out_of_the_logs_are_skipped_and_links_within_followed() {
        let home = tempfile::tempdir().unwrap();
        let projects = home.path().join(".claude/projects/p");
        std::fs::create_dir_all(&projects).unwrap();
        std::fs::write(projects.join("a.jsonl"), "{}\n").unwrap();
        std::fs::write(home.path().join("secret.jsonl"), "{}\n").unwrap();
        std::os::unix::fs::symlink(home.path().join("secret.jsonl"), projects.join("out.jsonl"))
            .unwrap();
        std::os::unix::fs::symlink("/", projects.join("root")).unwrap();
        std::os::unix::fs::symlink(projects.join("a.jsonl"), projects.join("in.jsonl")).unwrap();
        let env = Environment {
            home: home.path().to_path_buf(),
            ..Environment::default()
        };
        let (files, skipped) = find(&roots(&env));
        let names: Vec<String> = files
            .iter()
            .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.jsonl", "in.jsonl"]);
        assert_eq!(skipped, 2);
        // A path a watch reports under a linked directory is no log either, nor is a
        // file linked out; one inside is.
        let outside = home.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("b.jsonl"), "{}\n").unwrap();
        std::os::unix::fs::symlink(&outside, projects.join("linked")).unwrap();
        let roots = roots(&env);
        assert_eq!(log_file_at(&roots, &projects.join("linked/b.jsonl")), None);
        assert_eq!(log_file_at(&roots, &projects.join("out.jsonl")), None);
        assert!(log_file_at(&roots, &projects.join("a.jsonl")).is_some());
        assert!(log_file_at(&roots, &projects.join("in.jsonl")).is_some());
    }

    #[test]
    fn archived_and_compressed_rollouts_are_read_and_a_copy_counts_once() {
        let home = tempfile::tempdir().unwrap();
        let codex = home.path().join(".codex");
        let name = "rollout-2026-11-20T10-00-00-0199a213-81c0-7000-8000-000000000001.jsonl";
        let lines = concat!(
            r#"{"timestamp":"2026-11-20T10:00:00.000Z","type":"session_meta","payload":{"id":"0199a213-81c0-7000-8000-000000000001","cwd":"/w"}}"#,
            "\n",
            r#"{"timestamp":"2026-11-20T10:00:01.000Z","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5.5"}}"#,
            "\n",
            r#"{"timestamp":"2026-11-20T10:00:02.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"cached_input_tokens":400,"output_tokens":50}}}}"#,
            "\n",
        );
        let day = codex.join("sessions/2026/11/20");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::write(day.join(name), lines).unwrap();
        // The same rollout archived, and another compressed the way Codex does.
        let archived = codex.join("archived_sessions");
        std::fs::create_dir_all(&archived).unwrap();
        std::fs::write(archived.join(name), lines).unwrap();
        let other = lines.replace("000000000001", "000000000002");
        let compressed = ruzstd::encoding::compress_to_vec(
            other.as_bytes(),
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        std::fs::write(
            archived.join(format!(
                "{}.zst",
                name.replace("000000000001", "000000000002")
            )),
            compressed,
        )
        .unwrap();
        std::fs::write(archived.join("rollout-broken.jsonl.zst"), b"not zstd").unwrap();
        let env = Environment {
            home: home.path().to_path_buf(),
            ..Environment::default()
        };
        let (files, _) = find(&roots(&env));
        let kinds: Vec<LogKind> = files.iter().map(|file| file.kind).collect();
        assert_eq!(
            kinds,
            [
                LogKind::CodexRollout,
                LogKind::CodexCompressed,
                LogKind::CodexCompressed,
                LogKind::CodexRollout
            ]
        );
        let summary = scan(&files, 2, &|_| {});
        assert_eq!(summary.sessions.len(), 2, "{:?}", summary.sessions.keys());
        for session in summary.sessions.values() {
            let tokens = session.tokens_by_model()["gpt-5.5"];
            assert_eq!(
                (tokens.input, tokens.cache_read, tokens.output),
                (600, 400, 50)
            );
        }
        assert_eq!(summary.skipped_lines, 1, "the broken file");
    }
}
