//! Reading what a log file gained since the stored state: by byte offset for a line log
//! (a torn last line waits, a shrunk or replaced file is read from its start), by time for
//! a database, whole for a todos file; what the session said, as the cache keeps it.

use super::*;

pub(super) fn identity(path: &Path) -> Option<(u64, u64, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    let (device, inode) = scan::identity(path, &metadata);
    Some((device, inode, metadata.len()))
}

/// Whether `file`, as found, may hold what the cache has not read (a cheap look, before
/// opening it).
pub fn has_news(file: &LogFile, stored: Option<&LogFileState>) -> bool {
    let Some(stored) = stored else { return true };
    // A database's size says little (its write-ahead log takes the writes, then is
    // rewritten from its start): its rows say, by their times.
    // Nor does a Copilot session's database, rewritten in place: its version says, and is
    // read by [`read_new`] before anything else.
    if matches!(file.kind, LogKind::OpencodeDb | LogKind::CopilotTodos) {
        return true;
    }
    if (stored.device, stored.inode) != (file.device, file.inode) {
        return true;
    }
    // By line too: a last line without its newline was looked at up to `size`.
    file.size != stored.size
}

pub(super) fn kind_text(kind: LogKind) -> &'static str {
    match kind {
        LogKind::ClaudeTranscript => "claude_transcript",
        LogKind::ClaudeTask => "claude_task",
        LogKind::CodexRollout => "codex_rollout",
        LogKind::CodexCompressed => "codex_rollout_zst",
        LogKind::GeminiChat => "gemini_chat",
        LogKind::OpencodeDb => "opencode_db",
        LogKind::CopilotEvents => "copilot_events",
        LogKind::CopilotTodos => "copilot_todos",
    }
}

/// Reads what `file` holds past `stored` (or all of it when it is new, shrank or was
/// replaced). `None` when there is nothing new.
pub fn read_new(file: &LogFile, stored: Option<&LogFileState>) -> Option<LogRead> {
    let (device, inode, size) = identity(&file.path)?;
    if file.kind == LogKind::OpencodeDb {
        return read_database_news(file, stored, (device, inode, size));
    }
    if file.kind == LogKind::CopilotTodos {
        return read_todos_news(file, stored, (device, inode, size));
    }
    let framework = file.kind.framework();
    let path_text = file.path.display().to_string();
    let same_file = stored.is_some_and(|stored| {
        stored.device == device && stored.inode == inode && size >= stored.offset
    });
    let (offset, parser) = match stored {
        Some(stored) if same_file => {
            // Nothing written since (by line: a last line without its newline was looked
            // at up to `size`, and waits for more).
            if stored.size == size || (file.kind.by_line() && stored.offset == size) {
                return None;
            }
            let parser = stored
                .parser
                .as_deref()
                .and_then(|text| serde_json::from_str::<LineParser>(text).ok());
            (stored.offset, parser)
        }
        _ => (0, None),
    };
    let mut events = Vec::new();
    let mut skipped = if same_file {
        stored.map_or(0, |stored| stored.skipped)
    } else {
        0
    };
    let mut state = LogFileState {
        path: path_text,
        kind: kind_text(file.kind).to_owned(),
        device,
        inode,
        size,
        offset: size,
        parser: None,
        skipped,
    };
    match file.kind {
        LogKind::ClaudeTranscript | LogKind::CodexRollout | LogKind::CopilotEvents => {
            let mut parser = match parser {
                Some(parser) if offset > 0 => parser,
                _ => LineParser::for_file(file.kind, &file.path)?,
            };
            // No newline in `offset..clear_to`: what the last read looked at of a last
            // line without one.
            let clear_to = match stored {
                Some(stored) if same_file => stored.size,
                _ => offset,
            };
            let mut opened = std::fs::File::open(&file.path).ok()?;
            let mut said = Vec::new();
            let read = scan::read_lines(&mut opened, offset, clear_to, size, |at, line| {
                if parser.line(line, &mut said) == LineOutcome::Skipped {
                    skipped += 1;
                }
                events.extend(said.drain(..).map(|event| (at, event)));
            })
            .ok()?;
            state.offset = read.offset;
            state.parser = serde_json::to_string(&parser).ok();
            state.skipped = skipped + read.too_long;
        }
        LogKind::CodexCompressed => {
            // Compressed once done with: read whole when it changes, like a chat.
            let bytes = scan::decompress(&std::fs::read(&file.path).ok()?);
            let mut parser = LineParser::for_file(file.kind, &file.path)?;
            let Some(bytes) = bytes else {
                state.skipped = 1;
                return Some(LogRead {
                    framework,
                    state,
                    events,
                    from: 0,
                    based_on: stored.map(LogFileState::position),
                });
            };
            let (_, end) = scan::complete_lines(&bytes);
            let mut line_start = 0usize;
            skipped = 0;
            for piece in bytes[..end].split_inclusive(|&b| b == b'\n') {
                let line = piece.strip_suffix(b"\n").unwrap_or(piece);
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let at = line_start as u64;
                line_start += piece.len();
                if line.is_empty() {
                    continue;
                }
                let mut said = Vec::new();
                if parser.line(line, &mut said) == LineOutcome::Skipped {
                    skipped += 1;
                }
                events.extend(said.into_iter().map(|event| (at, event)));
            }
            state.skipped = skipped;
        }
        LogKind::GeminiChat => {
            let bytes = std::fs::read(&file.path).ok()?;
            let name = file
                .path
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            let chat = crate::work::gemini::parse_chat_in(
                &bytes,
                &name,
                &scan::gemini_context(&file.path),
            );
            state.skipped = chat.skipped_lines;
            events.extend(chat.events.into_iter().map(|event| (0, event)));
        }
        // Read by [`read_database_news`] and [`read_todos_news`], above.
        LogKind::OpencodeDb | LogKind::CopilotTodos => return None,
        LogKind::ClaudeTask => {
            // The list is the directory: read all of it.
            let list = file.path.parent()?;
            let session_id = list.file_name()?.to_string_lossy().into_owned();
            let mut tasks: Vec<(String, TaskItem)> = std::fs::read_dir(list)
                .ok()?
                .flatten()
                .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "json"))
                .filter_map(|entry| {
                    let bytes = std::fs::read(entry.path()).ok()?;
                    let task = crate::work::claude::parse_task_file(&bytes)?;
                    let id = task.id.clone().unwrap_or_default();
                    Some((id, task))
                })
                .collect();
            tasks.sort_by_key(|(id, _)| (id.parse::<u64>().unwrap_or(u64::MAX), id.clone()));
            events.push((
                0,
                LogEvent::Tasks {
                    session_id,
                    lane: None,
                    source: "task_file".into(),
                    tasks: tasks.into_iter().map(|(_, task)| task).collect(),
                    at_ms: None,
                },
            ));
        }
    }
    Some(LogRead {
        framework,
        state,
        events,
        from: offset,
        based_on: stored.map(LogFileState::position),
    })
}

/// [`read_new`] for a Copilot session's database: its whole task list when its version
/// (kept as the `offset`) changed.
pub(super) fn read_todos_news(
    file: &LogFile,
    stored: Option<&LogFileState>,
    (device, inode, size): (u64, u64, u64),
) -> Option<LogRead> {
    let version = crate::work::copilot_db::version(&file.path).ok()?;
    let same_file = stored.is_some_and(|stored| stored.device == device && stored.inode == inode);
    if same_file && stored.is_some_and(|stored| stored.offset == version) {
        return None;
    }
    let tasks = crate::work::copilot_db::read_todos(&file.path, &scan::copilot_session(&file.path))
        .inspect_err(|error| {
            tracing::debug!(%error, path = %file.path.display(), "cannot read a Copilot session's database");
        })
        .ok()?;
    Some(LogRead {
        framework: file.kind.framework(),
        state: LogFileState {
            path: file.path.display().to_string(),
            kind: kind_text(file.kind).to_owned(),
            device,
            inode,
            size,
            offset: version,
            parser: None,
            skipped: 0,
        },
        events: tasks.into_iter().map(|event| (0, event)).collect(),
        from: 0,
        based_on: stored.map(LogFileState::position),
    })
}

/// [`read_new`] for OpenCode's database: its rows changed since the time position the
/// cache holds for it (its `offset`: milliseconds, not bytes).
pub(super) fn read_database_news(
    file: &LogFile,
    stored: Option<&LogFileState>,
    (device, inode, size): (u64, u64, u64),
) -> Option<LogRead> {
    let same_file = stored.is_some_and(|stored| stored.device == device && stored.inode == inode);
    let since = match stored {
        Some(stored) if same_file => stored.offset,
        _ => 0,
    };
    let read = crate::work::opencode_db::read_since(&file.path, since as i64)
        .inspect_err(|error| {
            tracing::debug!(%error, path = %file.path.display(), "cannot read OpenCode's database");
        })
        .ok()?;
    let position = read.position.max(0) as u64;
    // Nothing newer than the last read (its last millisecond's rows, read again, are read
    // with the next change, if one came in that millisecond after it).
    if same_file && position == since {
        return None;
    }
    Some(LogRead {
        framework: file.kind.framework(),
        state: LogFileState {
            path: file.path.display().to_string(),
            kind: kind_text(file.kind).to_owned(),
            device,
            inode,
            size,
            offset: position,
            parser: None,
            skipped: read.read.skipped_rows,
        },
        events: read
            .read
            .events
            .into_iter()
            .map(|event| (position, event))
            .collect(),
        from: since,
        based_on: stored.map(LogFileState::position),
    })
}
