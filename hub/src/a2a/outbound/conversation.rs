//! The remote conversation: one call's message sent to the remote agent, its task
//! followed (streamed, or polled from 1 s to 30 s apart) to an answer, a question or an
//! error, and what it comes to posted in the room.

use super::*;

impl Worker {
    /// Sends the event to the remote agent and posts its answer in the room.
    pub(super) async fn exchange(
        &self,
        held: &Held<'_>,
        event: &EventRecord,
        parties: &CallParties,
    ) -> Result<(), CallError> {
        let call = held.call;
        let thread = self.thread(&call.room, &call.remote).await?;
        let Some((request, continues)) = self.request_for(call, event, thread.as_ref()) else {
            // An answer to a question the remote agent no longer waits on.
            return Ok(());
        };
        let conversed = self
            .converse(held, event, parties, thread.clone(), request, continues)
            .await;
        if let (Err(CallError::Permanent(_)), true, Some(thread)) = (&conversed, continues, thread)
        {
            // The task it went on with is gone (unknown to the remote agent, failed): later
            // mentions start afresh rather than fail on it again.
            self.put_thread(
                &held.caller,
                RemoteThreadRecord {
                    room: call.room.clone(),
                    remote: call.remote.clone(),
                    context_id: thread.context_id,
                    ..RemoteThreadRecord::default()
                },
            )
            .await?;
        }
        conversed
    }

    /// Sends the request and posts what comes back.
    pub(super) async fn converse(
        &self,
        held: &Held<'_>,
        event: &EventRecord,
        parties: &CallParties,
        thread: Option<RemoteThreadRecord>,
        request: SendMessageRequest,
        continues: bool,
    ) -> Result<(), CallError> {
        let call = held.call;
        let credential = self.credential(&call.remote).await?;
        let card = self.card(&parties.card_url).await?;
        let (client, streaming, endpoint) =
            self.client(&card, &parties.card_url, credential.as_ref())?;
        // The endpoint's name is checked now too (and again at connect): the client's errors
        // would not say that the guard refused it.
        crate::outbound_lookup::admit_card_url(&self.policy, &endpoint)
            .await
            .map_err(CallError::Permanent)?;
        let mut fold = Fold::default();
        let mut said_working = 0u32;
        if streaming {
            let mut stream = client
                .send_streaming_message(&request)
                .await
                .map_err(remote_error)?;
            while let Some(item) = stream.next().await {
                let item = item.map_err(remote_error)?;
                fold.event(item);
                self.say_working(held, &mut fold, &mut said_working).await;
                if fold.answer().is_some() {
                    break;
                }
            }
        } else {
            let mut request = request;
            request.configuration = Some(SendMessageConfiguration {
                accepted_output_modes: Some(vec!["text/plain".into()]),
                task_push_notification_config: None,
                history_length: None,
                return_immediately: Some(true),
            });
            let response = client.send_message(&request).await.map_err(remote_error)?;
            fold.response(response);
            let mut wait = POLL_FIRST;
            while fold.answer().is_none() {
                let Some(task_id) = fold.task_id.clone() else {
                    return Err(CallError::Permanent(
                        "it answered with neither a task nor a message".into(),
                    ));
                };
                self.say_working(held, &mut fold, &mut said_working).await;
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(POLL_MAX);
                let task = client
                    .get_task(&GetTaskRequest {
                        id: task_id,
                        history_length: Some(0),
                        tenant: None,
                    })
                    .await
                    .map_err(remote_error)?;
                fold.task(task);
            }
        }
        let Some(answer) = fold.answer() else {
            return Err(CallError::Transient(
                "its stream ended before the task did".into(),
            ));
        };
        self.post_answer(held, event, parties, thread, continues, &fold, answer)
            .await
    }

    /// Posts a working status with text as the remote agent's `status` (a few per call).
    pub(super) async fn say_working(&self, held: &Held<'_>, fold: &mut Fold, said: &mut u32) {
        let Some(detail) = fold.working.take() else {
            return;
        };
        if *said >= 4 {
            return;
        }
        *said += 1;
        let body = serde_json::json!({
            "state": "working",
            "detail": answer::cut(&detail, 1024),
        });
        let key = self.key(held.call, &format!("w{said}"));
        // A status is worth no retry: it is refused or not.
        let _ = self.send_once(held, "status", body, key).await;
    }

    /// The A2A request for a call: the mentioning message's text, or the answer to the
    /// remote agent's question with its task; and whether it goes on with the thread's
    /// waiting task.
    pub(super) fn request_for(
        &self,
        call: &RemoteCallRecord,
        event: &EventRecord,
        thread: Option<&RemoteThreadRecord>,
    ) -> Option<(SendMessageRequest, bool)> {
        let body: Value = serde_json::from_str(&event.body).ok()?;
        let (text, task_id) = match event.kind.as_str() {
            "answer" => {
                let answer: AnswerBody = serde_json::from_value(body).ok()?;
                let thread = thread?;
                if thread.ping.as_deref() != Some(answer.ping.as_str()) {
                    return None;
                }
                let text = match (answer.choice, answer.text) {
                    (Some(choice), Some(text)) => format!("{choice}\n\n{text}"),
                    (Some(choice), None) => choice,
                    (None, Some(text)) => text,
                    (None, None) => return None,
                };
                (text, thread.task_id.clone())
            }
            _ => {
                let message: MessageBody = serde_json::from_value(body).ok()?;
                // An agent that was asked a question answers by mentioning the remote
                // agent again: that goes on with the task that asked.
                let task_id = thread.and_then(|thread| {
                    (thread.ping.is_none() && thread.asker.as_deref() == Some(event.from.as_str()))
                        .then(|| thread.task_id.clone())
                        .flatten()
                });
                (message.text, task_id)
            }
        };
        let continues = task_id.is_some();
        let mut message = Message::new(Role::User, vec![Part::text(text)]);
        message.message_id = self.message_id(call);
        message.context_id = thread.and_then(|thread| thread.context_id.clone());
        message.task_id = task_id;
        Some((
            SendMessageRequest {
                message,
                configuration: None,
                metadata: None,
                tenant: None,
            },
            continues,
        ))
    }

    /// The same for every attempt of a call, so the remote agent can drop a repeat.
    pub(super) fn message_id(&self, call: &RemoteCallRecord) -> String {
        let mut hash = Sha256::new();
        for part in [
            self.hub_id.as_bytes(),
            call.room.as_bytes(),
            &call.seq.to_be_bytes(),
            call.remote.as_bytes(),
        ] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part);
        }
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.finalize())
    }

    /// A `client_key` of what the remote agent posts for a call (`what` names which), under
    /// the prefix the store indexes, so that an attempt finds what an earlier one posted.
    pub(super) fn key(&self, call: &RemoteCallRecord, what: &str) -> String {
        format!("a2a:out:{}:{what}", &self.message_id(call)[..22])
    }
}
