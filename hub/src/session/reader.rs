//! The reader: decodes the client's frames, answers malformed ones, forwards commands to
//! the writer (at most `max_in_flight` waiting) and serves reads — history, directory and
//! audit — a few at a time, each queued for the sink when read.

use super::*;

/// The reader: decodes frames until the peer leaves, errs, falls silent, or the
/// connection is closed by the hub.
pub(super) async fn read_frames(
    stream: &mut Stream,
    context: &Arc<HubContext>,
    caller: &Arc<Caller>,
    handle: &ConnHandle,
) {
    let control = &handle.control;
    let in_flight = Arc::new(Semaphore::new(context.config.max_in_flight.max(1)));
    // Reads hold their results until they are queued: a few at a time bound what one
    // connection can make the hub hold besides its queue.
    let reads = Arc::new(Semaphore::new(context.config.max_reads_in_flight.max(1)));
    let silence_limit = context.config.heartbeat * 2;
    let mut closing = control.watch();
    // One timer for the connection, moved on only when it fires, rather than a timer set
    // and cancelled for every frame read. Silence counts from when the reader began to wait
    // for this frame (not while it waited for the writer to make room).
    let silence = tokio::time::sleep(silence_limit);
    tokio::pin!(silence);
    loop {
        let waiting_since = tokio::time::Instant::now();
        let next = loop {
            tokio::select! {
                biased;
                _ = wait_closing(&mut closing) => return,
                next = stream.next() => break next,
                () = &mut silence => {
                    let quiet_until = waiting_since + silence_limit;
                    if tokio::time::Instant::now() >= quiet_until {
                        debug!(conn = caller.conn.0, "silent for two heartbeats; closing");
                        return;
                    }
                    silence.as_mut().reset(quiet_until);
                }
            }
        };
        let message = match next {
            None => return,
            Some(Err(error)) => {
                if is_too_large(&error) {
                    control.close(CloseCode::FrameTooLarge);
                } else {
                    debug!(conn = caller.conn.0, %error, "read error");
                }
                return;
            }
            Some(Ok(message)) => message,
        };
        let frame = match message {
            Message::Text(frame) => frame,
            Message::Binary(_) => {
                let refusal = Refusal::new(
                    ErrorCode::BadFrame,
                    "binary frames are not part of the protocol; send JSON text frames",
                );
                if !handle.push(Outbound::Err { re: None, refusal }) {
                    return;
                }
                continue;
            }
            Message::Close(_) => return,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        let command = match decode_client_frame(frame.as_str()) {
            Ok(command) => command,
            Err(error) => {
                let refusal = Refusal::new(error.code, error.msg);
                if !handle.push(Outbound::Err {
                    re: error.re,
                    refusal,
                }) {
                    return;
                }
                continue;
            }
        };
        let re = command.id();
        let forwarded = match command {
            ClientFrame::Sync(sync) => handle.push(Outbound::Sync {
                re: sync.id,
                cursors: sync.cursors,
            }),
            ClientFrame::History(history) => {
                spawn_read(&reads, context, caller, handle, Read::History(history)).await
            }
            ClientFrame::Directory(directory) => {
                spawn_read(&reads, context, caller, handle, Read::Directory(directory)).await
            }
            ClientFrame::Audit(audit) => {
                spawn_read(&reads, context, caller, handle, Read::Audit(audit)).await
            }
            // The address is looked up only for a user (the engine refuses agents), off the
            // writer; its answer is checked again at every connection.
            ClientFrame::RegisterRemoteAgent(register)
                if caller.kind == roundtable_protocol::model::PrincipalKind::User
                    && let Err(error) = crate::outbound_lookup::admit_registration(
                        &context.config.outbound,
                        &register,
                    )
                    .await =>
            {
                handle.push(Outbound::Err {
                    re: Some(re),
                    refusal: Refusal::new(roundtable_protocol::ErrorCode::BadFrame, error),
                })
            }
            other => match Command::from_frame(other) {
                Ok(command) => {
                    let Ok(permit) = in_flight.clone().acquire_owned().await else {
                        return;
                    };
                    context.writer.submit(Request::Command {
                        caller: caller.clone(),
                        command,
                        submitted: Instant::now(),
                        permit,
                    })
                }
                Err(refusal) => handle.push(Outbound::Err {
                    re: Some(re),
                    refusal,
                }),
            },
        };
        if !forwarded {
            return;
        }
    }
}

/// A read a connection asked for: served from the store beside the writer, a few at a time.
enum Read {
    History(History),
    Directory(Directory),
    Audit(Audit),
}

/// Serves `read` in a task of its own once a read permit is free, queueing its answer for
/// the sink; false when the connection ended while it waited. A refused history or audit
/// read is recorded in the audit log.
async fn spawn_read(
    reads: &Arc<Semaphore>,
    context: &Arc<HubContext>,
    caller: &Arc<Caller>,
    handle: &ConnHandle,
    read: Read,
) -> bool {
    let Some(permit) = acquire_read(reads, &handle.control).await else {
        return false;
    };
    let (context, caller, handle) = (context.clone(), caller.clone(), handle.clone());
    tokio::spawn(async move {
        let reply = match read {
            Read::History(history) => {
                let reply = serve_history(&context, &caller, history).await;
                record_refusal(&context, &caller, "history", &reply);
                reply
            }
            Read::Directory(directory) => serve_directory(&context, &caller, directory).await,
            Read::Audit(audit) => {
                let reply = serve_audit(&context, &caller, audit).await;
                record_refusal(&context, &caller, "audit", &reply);
                reply
            }
        };
        handle.push(reply);
        drop(permit);
    });
    true
}

/// Waits for a read permit, unless the connection ends first.
pub(super) async fn acquire_read(
    reads: &Arc<Semaphore>,
    control: &ConnControl,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let mut closing = control.watch();
    tokio::select! {
        permit = reads.clone().acquire_owned() => permit.ok(),
        _ = wait_closing(&mut closing) => None,
    }
}

/// Records a `bad_frame` answered on the connection; past 20 in a minute the connection is
/// closed with 1008.
pub(super) fn count_bad_frame(recent: &mut VecDeque<Instant>, control: &ConnControl) {
    let now = Instant::now();
    while recent
        .front()
        .is_some_and(|at| now.duration_since(*at) > Duration::from_secs(60))
    {
        recent.pop_front();
    }
    recent.push_back(now);
    if recent.len() > 20 {
        control.close(CloseCode::TooManyBadFrames);
    }
}

/// Sends a read's refusal to the writer for the audit log.
pub(super) fn record_refusal(
    context: &HubContext,
    caller: &Caller,
    action: &'static str,
    reply: &Outbound,
) {
    if let Outbound::Err { refusal, .. } = reply {
        context
            .writer
            .submit(Request::Refused(crate::writer::RefusalToRecord {
                principal: caller.id.clone(),
                action,
                target: None,
                refusal: refusal.clone(),
                via: caller.via,
            }));
    }
}

/// `audit`: a user reads the entries of itself and its agents.
pub(super) async fn serve_audit(context: &HubContext, caller: &Caller, audit: Audit) -> Outbound {
    let refuse = |code, msg: String| Outbound::Err {
        re: Some(audit.id),
        refusal: Refusal::new(code, msg),
    };
    if caller.kind != PrincipalKind::User {
        return refuse(
            ErrorCode::Forbidden,
            "only users read the audit log; ask your owner".into(),
        );
    }
    let since_ms = match &audit.since {
        None => None,
        Some(since) => match roundtable_protocol::ts::parse_millis(since) {
            Some(ms) => Some(ms),
            None => {
                return refuse(
                    ErrorCode::BadFrame,
                    format!("since must be an RFC 3339 timestamp, got {since:?}"),
                );
            }
        },
    };
    let limit = audit.limit.unwrap_or(AUDIT_DEFAULT);
    if limit == 0 || limit > AUDIT_MAX {
        return refuse(
            ErrorCode::BadFrame,
            format!("limit must be 1 to {AUDIT_MAX}; page with since"),
        );
    }
    let query = AuditQuery {
        viewer: caller.id.clone(),
        principal: audit.principal.clone(),
        since_ms,
        limit,
    };
    let reader = context.reader.clone();
    match tokio::task::spawn_blocking(move || reader.audit(&query)).await {
        Ok(Ok(entries)) => {
            let entries = entries
                .iter()
                .map(roundtable_engine::audit::wire_entry)
                .collect();
            Outbound::Frame(
                ServerFrame::Ok(OkReply::with(audit.id, &AuditOk { entries })).to_json(),
            )
        }
        Ok(Err(ReadError::NotFound | ReadError::NotMember)) => refuse(
            ErrorCode::Forbidden,
            "you may read the audit entries of yourself and your agents only".into(),
        ),
        Ok(Err(ReadError::Store(error))) => {
            warn!(%error, "audit read failed");
            refuse(
                ErrorCode::Internal,
                "the hub could not read the audit log; retry".into(),
            )
        }
        Err(_) => refuse(
            ErrorCode::Internal,
            "the hub could not read the audit log; retry".into(),
        ),
    }
}

/// `directory`: the principals the caller may see, read off the writer (a search reads
/// every principal).
pub(super) async fn serve_directory(
    context: &HubContext,
    caller: &Caller,
    directory: Directory,
) -> Outbound {
    let query = DirectoryQuery {
        viewer: caller.id.clone(),
        handle: None,
        agents_only: false,
        query: directory
            .query
            .as_deref()
            .map(str::trim)
            .filter(|query| !query.is_empty())
            .map(str::to_lowercase),
        limit: directory
            .limit
            .unwrap_or(DIRECTORY_DEFAULT)
            .clamp(1, DIRECTORY_MAX) as usize,
        now_ms: context.now_ms(),
    };
    let reader = context.reader.clone();
    match tokio::task::spawn_blocking(move || reader.directory(&query)).await {
        Ok(Ok(entries)) => Outbound::Frame(
            ServerFrame::Ok(OkReply::with(directory.id, &DirectoryOk { entries })).to_json(),
        ),
        Ok(Err(error)) => {
            warn!(%error, "directory read failed");
            Outbound::Err {
                re: Some(directory.id),
                refusal: Refusal::new(ErrorCode::Internal, "the hub could not read; retry"),
            }
        }
        Err(_) => Outbound::Err {
            re: Some(directory.id),
            refusal: Refusal::new(ErrorCode::Internal, "the hub could not read; retry"),
        },
    }
}

/// `directory` pages: default and most entries.
pub(super) const DIRECTORY_DEFAULT: u32 = 50;
pub(super) const DIRECTORY_MAX: u32 = 200;

/// `audit` pages: default and most entries.
pub(super) const AUDIT_DEFAULT: u32 = 100;
pub(super) const AUDIT_MAX: u32 = 1000;

pub(super) async fn serve_history(
    context: &HubContext,
    caller: &Caller,
    history: History,
) -> Outbound {
    let refuse = |code, msg: String| Outbound::Err {
        re: Some(history.id),
        refusal: Refusal::new(code, msg),
    };
    let limit = history.limit.unwrap_or(limits::HISTORY_DEFAULT);
    if limit > limits::HISTORY_MAX || limit == 0 {
        return refuse(
            ErrorCode::BadFrame,
            format!(
                "limit must be 1 to {}; page with before/after",
                limits::HISTORY_MAX
            ),
        );
    }
    let reader = context.reader.clone();
    let principal = caller.id.clone();
    let is_agent = caller.kind == PrincipalKind::Agent;
    let room = history.room.clone();
    let range = HistoryRange {
        before: history.before,
        after: history.after,
        limit,
        max_bytes: context.config.page_bytes,
    };
    let read = tokio::task::spawn_blocking(move || {
        let reading = crate::reads::Reader {
            principal: &principal,
            is_agent,
        };
        crate::reads::history(&*reader, reading, &room, range)
    })
    .await;
    match read {
        Ok(Ok(page)) => Outbound::Frame(history_frame(
            history.id,
            &page.events,
            page.more,
            &caller.id,
        )),
        Ok(Err(ReadError::NotFound)) => refuse(
            ErrorCode::NotFound,
            format!("there is no room {:?}", history.room),
        ),
        Ok(Err(ReadError::NotMember)) => refuse(
            ErrorCode::NotMember,
            format!("you are not a member of room {:?}", history.room),
        ),
        Ok(Err(ReadError::Store(error))) => {
            warn!(%error, "history read failed");
            refuse(
                ErrorCode::Internal,
                "the hub could not read the room; retry".into(),
            )
        }
        Err(_) => refuse(
            ErrorCode::Internal,
            "the hub could not read the room; retry".into(),
        ),
    }
}
