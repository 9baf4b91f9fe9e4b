//! Posting as the remote agent: its answers, questions and notices written through the
//! gateway as any client's, with keys derived from the call (a retried call repeats
//! nothing), and the thread kept per room and remote agent.

use super::*;

impl Worker {
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn post_answer(
        &self,
        held: &Held<'_>,
        event: &EventRecord,
        parties: &CallParties,
        thread: Option<RemoteThreadRecord>,
        continues: bool,
        fold: &Fold,
        answer: Answer,
    ) -> Result<(), CallError> {
        // The message the conversation began with: the mention, or for an answer the
        // mention that led to the question.
        let answering = event.kind == "answer";
        let mention = match answering {
            true => thread
                .as_ref()
                .and_then(|thread| thread.mention.clone())
                .unwrap_or_else(|| event.id.clone()),
            false => event.id.clone(),
        };
        let asker = match answering {
            true => thread
                .as_ref()
                .and_then(|thread| thread.asker.clone())
                .unwrap_or_else(|| event.from.clone()),
            false => event.from.clone(),
        };
        let asker_is_user = self.asker_is_user(event, parties, thread.as_ref());
        // What the thread waits on stays unless this call went on with it or asks anew.
        let mut next = match (&thread, continues) {
            (Some(thread), false) => thread.clone(),
            _ => RemoteThreadRecord {
                room: held.call.room.clone(),
                remote: held.call.remote.clone(),
                ..RemoteThreadRecord::default()
            },
        };
        if fold.context_id.is_some() {
            next.context_id = fold.context_id.clone();
        }
        enum Post {
            Message(&'static str, String, Option<&'static str>),
            Ping(Value),
        }
        let post = match answer {
            Answer::Done { text } if text.is_empty() => {
                Post::Message("r", "(it answered with no text)".to_owned(), None)
            }
            Answer::Done { text } => Post::Message("r", text, None),
            Answer::Ended { state, text } => {
                let text = match text.is_empty() {
                    true => format!("{} {state} the task", parties.remote_handle),
                    false => format!("{} {state} the task: {text}", parties.remote_handle),
                };
                Post::Message("r", text, Some(state))
            }
            Answer::Needs {
                task_id,
                question,
                auth,
            } => {
                next.task_id = Some(task_id);
                next.asker = Some(asker.clone());
                next.mention = Some(mention.clone());
                next.ping = None;
                if auth || asker_is_user {
                    // A person answers: a ping to the asker, or for authorization to the
                    // remote agent's owner. The answer comes back as a call of its own.
                    let ping = format!("a2a-{}", &self.message_id(held.call)[..16]);
                    let to = if auth { &parties.owner } else { &asker };
                    let question = if auth {
                        format!(
                            "{} asks for authorization: {}",
                            parties.remote_handle, question
                        )
                    } else {
                        question
                    };
                    next.ping = Some(ping.clone());
                    Post::Ping(
                        serde_json::to_value(PingBody {
                            ping,
                            question: answer::cut(&plain(&question), 4096),
                            options: None,
                            to: Some(vec![to.clone()]),
                            expires_at: None,
                        })
                        .unwrap_or(Value::Null),
                    )
                } else {
                    // An agent answers by mentioning the remote agent again.
                    Post::Message("q", question, None)
                }
            }
        };
        // The thread first: once the answer is out, a person's answer to its question must
        // find the task it goes to. (The post is keyed: posting again repeats nothing.)
        self.put_thread(&held.caller, next).await?;
        let posted = match post {
            Post::Message(what, text, state) => {
                self.post(held, &mention, &asker, asker_is_user, what, text, state)
                    .await
            }
            Post::Ping(body) => {
                self.send(held, "ping", body, self.key(held.call, "p"))
                    .await
            }
        };
        if !posted {
            return Err(CallError::Transient(
                "its answer could not be posted in the room".into(),
            ));
        }
        Ok(())
    }

    /// Posts a message as the remote agent, in reply to `mention`, mentioning an agent
    /// asker (an agent hears only what mentions it).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn post(
        &self,
        held: &Held<'_>,
        mention: &str,
        asker: &str,
        asker_is_user: bool,
        what: &str,
        text: String,
        state: Option<&str>,
    ) -> bool {
        let mut body = serde_json::json!({
            "text": answer::cut(&plain(&text), limits::MESSAGE_TEXT),
            "reply_to": mention,
        });
        if !asker_is_user {
            body["mentions"] = serde_json::json!([asker]);
        }
        if let Some(state) = state {
            body["x_a2a"] = serde_json::json!({ "state": state });
        }
        self.send(held, "message", body, self.key(held.call, what))
            .await
    }

    /// Sends an event as the remote agent, waiting out its rate limit a few times (the
    /// answer is in hand: calling the remote agent again would cost it the work again);
    /// true once it is stored (or was already), or refused for good.
    pub(super) async fn send(
        &self,
        held: &Held<'_>,
        kind: &str,
        body: Value,
        client_key: String,
    ) -> bool {
        for _ in 0..5 {
            match self
                .send_once(held, kind, body.clone(), client_key.clone())
                .await
            {
                Sent::Stored | Sent::Refused => return true,
                Sent::Later(after) => tokio::time::sleep(after).await,
                Sent::Failed => return false,
            }
        }
        false
    }

    pub(super) async fn send_once(
        &self,
        held: &Held<'_>,
        kind: &str,
        body: Value,
        client_key: String,
    ) -> Sent {
        let frame = ClientFrame::Send(SendCmd {
            id: 1,
            room: held.call.room.clone(),
            client_key,
            kind: kind.to_owned(),
            body,
        });
        match self.gateway.execute(&held.caller, &frame).await {
            Ok(_) => Sent::Stored,
            Err(refusal) => {
                tracing::info!(code = refusal.code.as_str(), message = %refusal.msg, "a remote agent's answer was refused");
                match refusal.code {
                    roundtable_protocol::ErrorCode::RateLimited => {
                        Sent::Later(Duration::from_millis(
                            refusal.retry_after_ms.unwrap_or(1_000).clamp(100, 30_000),
                        ))
                    }
                    // Paused meanwhile: the call waits for the resume (calling again then).
                    roundtable_protocol::ErrorCode::Internal
                    | roundtable_protocol::ErrorCode::Busy
                    | roundtable_protocol::ErrorCode::Paused => Sent::Failed,
                    // Paused, stopped, not a member, too large: retrying changes nothing.
                    _ => Sent::Refused,
                }
            }
        }
    }

    pub(super) async fn put_thread(
        &self,
        caller: &Arc<Caller>,
        thread: RemoteThreadRecord,
    ) -> Result<(), CallError> {
        self.gateway
            .remote(caller, RemoteCommand::Thread(thread))
            .await
            .map(|_| ())
            .map_err(|refusal| {
                CallError::Transient(format!(
                    "its conversation could not be kept: {}",
                    refusal.msg
                ))
            })
    }

    pub(super) async fn thread(
        &self,
        room: &str,
        remote: &str,
    ) -> Result<Option<RemoteThreadRecord>, CallError> {
        let reader = self.gateway.context().reader.clone();
        let (room, remote) = (room.to_owned(), remote.to_owned());
        tokio::task::spawn_blocking(move || reader.remote_thread(&room, &remote))
            .await
            .map_err(|_| CallError::Transient("the read was cancelled".into()))?
            .map_err(|error| CallError::Transient(error.to_string()))
    }
}
