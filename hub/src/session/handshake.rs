//! From the socket's first frame to an authenticated connection: `auth` read within the
//! pre-auth limits, the token checked by the writer, and a refusal answered and closed.

use super::*;

pub(super) type Authenticated = (
    roundtable_engine::records::PrincipalRecord,
    String,
    ConnHandle,
);

/// How an `auth` was refused, and the close code that follows the `err`.
pub(super) struct AuthRefusal {
    pub(super) re: Option<u64>,
    pub(super) refusal: Refusal,
    pub(super) close: CloseCode,
    /// Counts against the client address's failed authentications.
    pub(super) failed: bool,
}

impl AuthRefusal {
    pub(super) fn unauthorized(re: Option<u64>, msg: &str) -> AuthRefusal {
        AuthRefusal {
            re,
            refusal: Refusal::new(ErrorCode::Unauthorized, msg.to_owned()),
            close: CloseCode::Unauthorized,
            failed: true,
        }
    }

    pub(super) fn stopping(re: Option<u64>) -> AuthRefusal {
        AuthRefusal {
            re,
            refusal: Refusal::new(ErrorCode::Busy, "the hub is stopping"),
            close: CloseCode::HubRestarting,
            failed: false,
        }
    }
}

/// Waits for `auth` and checks it with the writer, which registers the connection. Any
/// failure answers `err` and closes (4001 for a bad or missing `auth`); a frame over
/// 8 KiB before then closes with 1009.
pub(super) async fn authenticate(
    writer: &Arc<ConnWriter>,
    stream: &mut Stream,
    context: &HubContext,
    conn: ConnId,
    arrival: Arrival,
) -> Option<Authenticated> {
    // Held until the answer is written: nothing is written directly before it.
    let mut state = writer.state.lock().await;
    let sink = &mut state.sink;
    let address = arrival.peer.permit.address();
    let result = match read_auth(stream, context, &arrival.pre_auth).await {
        Err(FirstFrame::Gone) => None,
        Err(FirstFrame::TooLarge) => {
            context
                .admission
                .auth_failed(address, std::time::Instant::now());
            let _ = sink.send(close_message(CloseCode::FrameTooLarge)).await;
            // What follows is read (up to max_frame a frame) only to be dropped.
            arrival.pre_auth.lift();
            linger(stream, PRE_AUTH_LINGER, context).await;
            return None;
        }
        Err(FirstFrame::Refused(refused)) => {
            // Refused before a token was even checked: still a refused auth, on record.
            context
                .writer
                .submit(Request::Refused(crate::writer::RefusalToRecord {
                    principal: String::new(),
                    action: "auth",
                    target: None,
                    refusal: refused.refusal.clone(),
                    via: roundtable_engine::Via::Ws,
                }));
            Some(Err(refused))
        }
        Ok(auth) => Some(check_auth(context, conn, writer, auth).await),
    };
    // Answered: the socket no longer waits to authenticate.
    drop(arrival.unauthenticated);
    match result? {
        Ok((principal, device, handle, re)) => {
            arrival.pre_auth.lift();
            let ok = OkReply::with(
                re,
                &AuthOk {
                    principal: roundtable_protocol::model::Principal {
                        id: principal.id.clone(),
                        kind: principal.kind,
                        handle: principal.handle.clone(),
                        name: principal.name.clone(),
                        owner: principal.owner.clone(),
                    },
                },
            );
            if sink
                .send(text(ServerFrame::Ok(ok).to_json()))
                .await
                .is_err()
            {
                context.dispatch.disconnect(conn);
                return None;
            }
            Some((principal, device, handle))
        }
        Err(refused) => {
            if refused.failed {
                context
                    .admission
                    .auth_failed(address, std::time::Instant::now());
            }
            let _ = sink
                .send(text(err_frame(refused.re, &refused.refusal)))
                .await;
            let _ = sink.send(close_message(refused.close)).await;
            if !super::hub_stops_with(refused.close) {
                linger(stream, PRE_AUTH_LINGER, context).await;
            }
            None
        }
    }
}

/// Why no `auth` frame could be taken from the socket.
pub(super) enum FirstFrame {
    /// The peer left.
    Gone,
    /// A frame over 8 KiB.
    TooLarge,
    /// Not an acceptable `auth` frame, or none in time.
    Refused(AuthRefusal),
}

/// Reads the first frame, which must be a well-formed `auth`.
pub(super) async fn read_auth(
    stream: &mut Stream,
    context: &HubContext,
    pre_auth: &PreAuthLimit,
) -> Result<roundtable_protocol::client::Auth, FirstFrame> {
    let deadline = tokio::time::Instant::now() + context.config.auth_timeout;
    let refuse = |re, msg: &str| FirstFrame::Refused(AuthRefusal::unauthorized(re, msg));
    let mut stopping = context.stopping.subscribe();
    let frame = loop {
        let next = tokio::select! {
            next = tokio::time::timeout_at(deadline, stream.next()) => next,
            _ = stopping.wait_for(|stopping| *stopping) => {
                return Err(FirstFrame::Refused(AuthRefusal::stopping(None)));
            }
        };
        match next {
            Err(_) => {
                return Err(refuse(
                    None,
                    "no auth frame arrived in time; send auth first, within 10 seconds",
                ));
            }
            Ok(Some(Err(error))) => {
                return Err(if pre_auth.exceeded() || is_too_large(&error) {
                    FirstFrame::TooLarge
                } else {
                    FirstFrame::Gone
                });
            }
            Ok(None) | Ok(Some(Ok(Message::Close(_)))) => return Err(FirstFrame::Gone),
            Ok(Some(Ok(Message::Text(frame)))) => break frame,
            Ok(Some(Ok(Message::Binary(_)))) => {
                return Err(refuse(
                    None,
                    "the first frame must be an auth JSON text frame",
                ));
            }
            Ok(Some(Ok(_))) => continue,
        }
    };
    match decode_client_frame(frame.as_str()) {
        Ok(ClientFrame::Auth(auth)) => {
            if auth.device.is_empty() || auth.device.len() > limits::DEVICE {
                Err(refuse(
                    Some(auth.id),
                    "device must be a stable id of 1 to 128 bytes",
                ))
            } else {
                Ok(auth)
            }
        }
        Ok(other) => Err(refuse(
            Some(other.id()),
            &format!("the first frame must be auth, not {}", other.type_name()),
        )),
        Err(error) => Err(refuse(
            error.re,
            &format!("the first frame must be auth: {}", error.msg),
        )),
    }
}

/// Has the writer check the token; the dispatcher registers the connection when it is
/// good and the principal has room for one more device.
pub(super) async fn check_auth(
    context: &HubContext,
    conn: ConnId,
    writer: &Arc<ConnWriter>,
    auth: roundtable_protocol::client::Auth,
) -> Result<
    (
        roundtable_engine::records::PrincipalRecord,
        String,
        ConnHandle,
        u64,
    ),
    AuthRefusal,
> {
    let handle = ConnHandle {
        id: conn,
        outbound: Arc::new(OutboundQueue::new(
            context.config.max_queue,
            context.config.max_queue_bytes,
        )),
        control: Arc::new(ConnControl::default()),
        direct: Some(writer.clone() as Arc<dyn DirectWrite>),
    };
    let (reply, answer) = oneshot::channel();
    let submitted = context.writer.submit(Request::Auth {
        token: auth.token,
        device: auth.device.clone(),
        conn: handle.clone(),
        reply,
    });
    if !submitted {
        return Err(AuthRefusal::stopping(Some(auth.id)));
    }
    let Ok(result) = answer.await else {
        return Err(AuthRefusal::stopping(Some(auth.id)));
    };
    result
        .map(|principal| (principal, auth.device, handle, auth.id))
        .map_err(|refusal| {
            let (close, failed) = match refusal.code {
                ErrorCode::Unauthorized => (CloseCode::Unauthorized, true),
                // A stopped agent (amendment 1): 4011, not 4010; its token stays valid, and
                // it reconnects with its backoff until a resume lets it in.
                ErrorCode::Paused => (CloseCode::Stopped, false),
                // The principal has `max_devices` connections already.
                ErrorCode::Busy => (CloseCode::TryAgainLater, false),
                _ => (CloseCode::HubRestarting, false),
            };
            AuthRefusal {
                re: Some(auth.id),
                refusal,
                close,
                failed,
            }
        })
}
