//! Sending: a message becomes a room event as its sender's (the pair's room, or the one the
//! message names), or waits with a contact request until the owner consents.

use super::*;

impl RoomTasks {
    pub(super) async fn execute(&self, who: &Who, frame: ClientFrame) -> Result<Reply, A2AError> {
        self.gateway
            .execute(&who.caller, &frame)
            .await
            .map_err(refused)
    }

    pub(super) async fn send(
        &self,
        who: &Who,
        room: &str,
        kind: &str,
        key: String,
        body: Value,
    ) -> Result<Arc<EventRecord>, A2AError> {
        let reply = self
            .execute(
                who,
                ClientFrame::Send(SendCmd {
                    id: 1,
                    room: room.to_owned(),
                    client_key: key,
                    kind: kind.to_owned(),
                    body,
                }),
            )
            .await?;
        sent_event(reply)
    }

    /// The room of a message without a `contextId`: the caller's A2A room with the agent,
    /// made the first time (under the invite rule); `None` when the caller has no consent.
    pub(super) async fn pair_room(&self, who: &Who) -> Result<Option<String>, A2AError> {
        let title = format!("A2A: {} → {}", who.caller_handle, who.target_handle);
        let lock = {
            let mut locks = self
                .pair_rooms
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            locks
                .entry((who.caller.id.clone(), who.target.clone()))
                .or_default()
                .clone()
        };
        let _held = lock.lock().await;
        let reply = self
            .execute(who, ClientFrame::Rooms(Rooms { id: 1 }))
            .await?;
        if let Reply::Ok(ok) = reply
            && let Ok(rooms) = ok.decode::<RoomsOk>()
            && let Some(room) = rooms.rooms.into_iter().find(|room| {
                room.title.as_deref() == Some(title.as_str())
                    && room.members.len() == 2
                    && room.members.iter().any(|member| member.id == who.target)
            })
        {
            return Ok(Some(room.id));
        }
        let created = self
            .gateway
            .execute(
                &who.caller,
                &ClientFrame::RoomCreate(RoomCreate {
                    id: 1,
                    title: Some(title),
                    topic: None,
                    members: vec![who.target_handle.clone()],
                }),
            )
            .await;
        match created {
            Ok(Reply::Ok(ok)) => ok
                .decode::<RoomOk>()
                .map(|created| Some(created.room.id))
                .map_err(|_| A2AError::internal("the hub's room reply did not decode")),
            Ok(Reply::Sent { .. }) => Err(A2AError::internal("room_create answered as a send")),
            Err(refusal) if refusal.code == ErrorCode::NoConsent => Ok(None),
            Err(refusal) => Err(refused(refusal)),
        }
    }

    /// Holds a message for consent: one contact request to the agent's owner, carrying
    /// only a note, and the message kept with it (never in a room).
    pub(super) async fn hold(
        &self,
        who: &Who,
        key: String,
        text: &str,
        body: Value,
    ) -> Result<TaskView, A2AError> {
        let hold = HoldForConsent {
            target: who.target_handle.clone(),
            note: text.to_owned(),
            client_key: key.clone(),
            body,
        };
        if let Err(refusal) = self.gateway.hold(&who.caller, hold).await {
            return Err(if refusal.code == ErrorCode::Conflict {
                with_reason(
                    A2AError::unsupported_operation(refusal.msg),
                    "CONSENT_PENDING",
                )
            } else {
                refused(refusal)
            });
        }
        let id = task::task_id_of(&key).ok_or_else(|| A2AError::internal("a task key"))?;
        self.task_by_id(who, &id).await
    }

    /// A room the caller named: it must be in it, and the agent must be or may be invited.
    pub(super) async fn named_room(&self, who: &Who, room: &str) -> Result<String, A2AError> {
        let reply = self
            .execute(who, ClientFrame::Rooms(Rooms { id: 1 }))
            .await?;
        let rooms = match reply {
            Reply::Ok(ok) => ok
                .decode::<RoomsOk>()
                .map_err(|_| context_not_available())?,
            Reply::Sent { .. } => return Err(context_not_available()),
        };
        let Some(found) = rooms.rooms.into_iter().find(|found| found.id == room) else {
            return Err(context_not_available());
        };
        if !found.members.iter().any(|member| member.id == who.target) {
            self.execute(
                who,
                ClientFrame::RoomInvite(RoomInvite {
                    id: 1,
                    room: room.to_owned(),
                    handle: who.target_handle.clone(),
                }),
            )
            .await
            .map_err(|error| {
                if error.code == a2a::error_code::INVALID_PARAMS {
                    context_not_available()
                } else {
                    error
                }
            })?;
        }
        Ok(found.id)
    }

    /// Stores a message (a new task, or a follow-up of one) and returns its task.
    pub(super) async fn submit(
        &self,
        who: &Who,
        request: SendMessageRequest,
    ) -> Result<TaskView, A2AError> {
        let message = request.message;
        let message_id = message.message_id.trim();
        if message_id.is_empty() || message_id.len() > 256 {
            return Err(A2AError::invalid_params(
                "messageId is required, at most 256 bytes; a retry sends the same one",
            ));
        }
        if message.parts.is_empty() || message.parts.len() > MAX_PARTS {
            return Err(A2AError::invalid_params(format!(
                "a message has 1 to {MAX_PARTS} parts"
            )));
        }
        // Its ids and text are checked as a WebSocket client's would be, before anything is
        // done with them (a room made for a message that is then refused).
        use roundtable_protocol::text::{self, Shape};
        let ids = [
            ("messageId", Some(message_id)),
            ("taskId", message.task_id.as_deref()),
            ("contextId", message.context_id.as_deref()),
        ];
        let refs = message.reference_task_ids.iter().flatten();
        ids.into_iter()
            .filter_map(|(field, id)| Some((field, id?)))
            .chain(refs.map(|id| ("referenceTaskIds", id.as_str())))
            .try_for_each(|(field, id)| text::check(|| field.to_owned(), id, Shape::Identifier))
            .and_then(|()| {
                let parts = serde_json::to_value(&message.parts).unwrap_or(Value::Null);
                text::check_no_nul("parts", &parts)
            })
            .map_err(|refused| A2AError::invalid_params(refused.to_string()))?;
        let text = task::text_of(&message.parts).map_err(|why| {
            let mut error = A2AError::content_type_not_supported();
            error.message = why.to_owned();
            error
        })?;
        text::check(|| "the text of the parts".to_owned(), &text, Shape::Prose)
            .map_err(|refused| A2AError::invalid_params(refused.to_string()))?;
        if text.len() > MAX_TEXT {
            return Err(with_reason(
                A2AError::invalid_params(format!(
                    "the message's text is {} bytes, more than {MAX_TEXT}; send less",
                    text.len()
                )),
                "TOO_LARGE",
            ));
        }
        let mut marks = serde_json::Map::new();
        if message
            .parts
            .iter()
            .any(|part| !matches!(part.content, PartContent::Text(_)))
        {
            marks.insert(
                "parts".into(),
                serde_json::to_value(&message.parts).unwrap_or(Value::Null),
            );
        }
        if let Some(refs) = message.reference_task_ids.filter(|refs| !refs.is_empty()) {
            marks.insert("refs".into(), json!(refs));
        }
        let mut body = json!({"text": text, "mentions": [who.target]});
        match message.task_id.filter(|id| !id.is_empty()) {
            Some(task_id) => {
                let view = self.task_by_id(who, &task_id).await?;
                if view.task.status.state == TaskState::AuthRequired {
                    return Err(with_reason(
                        A2AError::unsupported_operation(
                            "this task waits for the agent's owner to accept your contact \
                             request; send more once it is accepted",
                        ),
                        "CONSENT_PENDING",
                    ));
                }
                if message
                    .context_id
                    .as_deref()
                    .is_some_and(|context| !context.is_empty() && context != view.task.context_id)
                {
                    return Err(A2AError::invalid_params(
                        "the contextId is not the task's; leave it out or send the task's",
                    ));
                }
                if view.task.status.state.is_terminal() {
                    return Err(A2AError::unsupported_operation(format!(
                        "task {task_id} is over ({}); start a new task",
                        state_name(&view.task.status.state)
                    )));
                }
                let room = view.task.context_id.clone();
                // A user answering the agent's question answers its ping too, so every
                // Roundtable client sees the question answered.
                if let Some((ping, options)) = &view.open_ping
                    && who.caller.kind == PrincipalKind::User
                {
                    let answer = if options.contains(&text) {
                        json!({"ping": ping, "choice": text})
                    } else {
                        json!({"ping": ping, "text": text})
                    };
                    match self
                        .send(
                            who,
                            &room,
                            "answer",
                            key_of(ANSWER_KEY, &who.target, message_id),
                            answer,
                        )
                        .await
                    {
                        // Someone answered first: the follow-up still goes to the agent.
                        Err(error) if error.code == a2a::error_code::INVALID_PARAMS => {}
                        other => {
                            other?;
                        }
                    }
                }
                body["reply_to"] = json!(view.last_event);
                marks.insert("task".into(), json!(task_id));
                body[EXTENSION_FIELD] = Value::Object(marks);
                self.send(
                    who,
                    &room,
                    "message",
                    key_of(FOLLOW_UP_KEY, &who.target, message_id),
                    body,
                )
                .await?;
                self.task_by_id(who, &task_id).await
            }
            None => {
                let key = key_of(TASK_KEY, &who.target, message_id);
                let id = task::task_id_of(&key).ok_or_else(|| A2AError::internal("a task key"))?;
                // A retry: the task it already is (sent, or held for consent).
                match self.task_by_id(who, &id).await {
                    Ok(view) => return Ok(view),
                    Err(error) if error.code == a2a::error_code::TASK_NOT_FOUND => {}
                    Err(error) => return Err(error),
                }
                if !marks.is_empty() {
                    body[EXTENSION_FIELD] = Value::Object(marks);
                }
                let room = match message.context_id.as_deref().filter(|id| !id.is_empty()) {
                    Some(room) => self.named_room(who, room).await?,
                    None => match self.pair_room(who).await? {
                        Some(room) => room,
                        None => return self.hold(who, key, &text, body).await,
                    },
                };
                self.send(who, &room, "message", key, body).await?;
                self.task_by_id(who, &id).await
            }
        }
    }
}
