//! Reading a task off its room: a message and the events that point back at it, folded in
//! page by page and read on from where it was; the tasks of a context listed by page.

use super::*;

impl RoomTasks {
    /// The events of `room` after `after` the caller may read, one page; a refused read is
    /// audited as the WebSocket audits a refused `history`, and is the task's "not found".
    pub(super) async fn page(
        &self,
        who: &Who,
        id: &str,
        room: &str,
        after: u64,
    ) -> Result<Vec<EventRecord>, A2AError> {
        match self
            .gateway
            .room_events_for_task(&who.caller, room, after, TASK_PAGE)
            .await
        {
            Ok(events) => Ok(events),
            Err(error @ (ReadError::NotFound | ReadError::NotMember)) => {
                let code = match error {
                    ReadError::NotFound => ErrorCode::NotFound,
                    _ => ErrorCode::NotMember,
                };
                let refusal = Refusal::new(code, "the task's room is not readable to the caller");
                self.gateway
                    .record_refusal(&who.caller.id, "history", &refusal);
                Err(A2AError::task_not_found(id))
            }
            Err(ReadError::Store(error)) => {
                tracing::warn!(%error, "task read failed");
                Err(A2AError::internal("the hub could not read the task; retry"))
            }
        }
    }

    /// The task whose first message is at `(room, seq)`, as the caller may read it.
    pub(super) async fn read_task_at(
        &self,
        who: &Who,
        id: &str,
        room: &str,
        seq: u64,
    ) -> Result<TaskView, A2AError> {
        let key = (who.caller.id.clone(), id.to_owned());
        let known = self
            .folds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_task
            .get(&key)
            .cloned();
        if let Some(fold) = known {
            // Read on from where it was read last; one page at least, which also checks
            // that the caller is still in the room.
            let events = self.page(who, id, room, fold.read_to).await?;
            let more = events.len() == TASK_PAGE;
            let mut fold = fold;
            for event in &events {
                fold.fold(event);
            }
            return self.read_on(who, fold, more).await;
        }
        let events = self.page(who, id, room, seq - 1).await?;
        let more = events.len() == TASK_PAGE;
        let Some((first, later)) = events.split_first() else {
            return Err(A2AError::task_not_found(id));
        };
        if first.seq != seq {
            return Err(A2AError::task_not_found(id));
        }
        let mut fold = task::TaskFold::new(id.to_owned(), first.clone(), who.parties());
        for event in later {
            fold.fold(event);
        }
        self.read_on(who, fold, more).await
    }

    /// Reads a task's room on from where `fold` stopped, page by page, until its end or
    /// the task's (nothing changes a finished task).
    pub(super) async fn read_on(
        &self,
        who: &Who,
        mut fold: task::TaskFold,
        mut more: bool,
    ) -> Result<TaskView, A2AError> {
        while more && !fold.settled() {
            let room = fold.room().to_owned();
            let events = self.page(who, fold.id(), &room, fold.read_to).await?;
            more = events.len() == TASK_PAGE;
            for event in &events {
                fold.fold(event);
            }
        }
        let view = fold.view(self.gateway.context().now_ms());
        self.folds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .put((who.caller.id.clone(), fold.id().to_owned()), fold);
        Ok(view)
    }

    /// A task of the caller's with this endpoint's agent, by id: its message in a room,
    /// or held with a contact request. Any other id (another principal's task too) is
    /// unknown.
    pub(super) async fn task_by_id(&self, who: &Who, id: &str) -> Result<TaskView, A2AError> {
        let key = task::key_of_task(id).ok_or_else(|| A2AError::task_not_found(id))?;
        let unreadable = |_| A2AError::internal("the hub could not read the task; retry");
        let sent = self
            .gateway
            .keyed_sends(&who.caller.id, &key, None, 1)
            .await
            .map_err(unreadable)?;
        if let Some(first) = sent.into_iter().next() {
            if first.client_key.as_deref() != Some(key.as_str())
                || first.kind != "message"
                || !first.mentions.contains(&who.target)
            {
                return Err(A2AError::task_not_found(id));
            }
            let room = room_of(&first).to_owned();
            return self.read_task_at(who, id, &room, first.seq).await;
        }
        match self
            .gateway
            .request_holding(&who.caller.id, &key)
            .await
            .map_err(unreadable)?
        {
            Some(request) if request.to == who.target => Ok(task::held_view(
                id.to_owned(),
                &request,
                &who.target_handle,
                who.parties(),
            )),
            _ => Err(A2AError::task_not_found(id)),
        }
    }

    /// Waits until the task changes from `seen` (or `until` passes), and returns it as it
    /// is then.
    pub(super) async fn next_view(
        &self,
        who: &Who,
        seen: &TaskView,
        watch: &mut tokio::sync::broadcast::Receiver<crate::dispatch::RoomWritten>,
        until: tokio::time::Instant,
    ) -> Result<Option<TaskView>, A2AError> {
        let Some(mut fold) = seen.fold.clone() else {
            return Ok(None);
        };
        let room = fold.room().to_owned();
        // What landed before `watch` was subscribed would wake nothing: read once first.
        // Each read reads only what is new since the last.
        loop {
            let now = self.read_on(who, fold, true).await?;
            if now.task != seen.task {
                return Ok(Some(now));
            }
            let Some(read) = now.fold else {
                return Ok(None);
            };
            fold = read;
            loop {
                match tokio::time::timeout_at(until, watch.recv()).await {
                    Err(_) => return Ok(None),
                    Ok(Ok(written)) if &*written.room != room.as_str() => continue,
                    // Ours, or possibly ours (the channel lagged): read again.
                    Ok(Ok(_)) | Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {
                        break;
                    }
                    Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return Ok(None),
                }
            }
        }
    }

    /// The updates of a task from `start` on, ending with the task's end (or the hub's).
    pub(super) fn follow(
        &self,
        who: Who,
        start: TaskView,
        first: StreamResponse,
        history_length: Option<i32>,
    ) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        let handler = self.clone();
        let context = self.gateway.context();
        let open = GaugeUnit::hold(context.metrics.clone(), |metrics| &metrics.a2a_streams);
        let ends = Ends {
            stopping: context.stopping.subscribe(),
            closes: crate::a2a::take_closes().unwrap_or_else(|| context.dispatch.watch_closes()),
            principal: who.caller.id.clone(),
        };
        let watch = context.dispatch.watch_rooms();
        let head = stream::iter([Ok(first)]);
        let ended = task::stream_ends(&start.task);
        // Counted open until the stream is dropped (ended, or its client gone).
        let ends = (ends, open);
        let rest = stream::unfold(
            (Some(start), watch, ends, ended),
            move |(seen, mut watch, mut ends, ended)| {
                let handler = handler.clone();
                let who = who.clone();
                async move {
                    let seen = seen?;
                    if ended {
                        return None;
                    }
                    let far = tokio::time::Instant::now() + Duration::from_secs(24 * 3600);
                    let next = tokio::select! {
                        next = handler.next_view(&who, &seen, &mut watch, far) => next,
                        () = ends.0.reached() => return None,
                    };
                    match next {
                        Ok(Some(now)) => {
                            let updates: Vec<Result<StreamResponse, A2AError>> =
                                task::updates(&seen.task, &now.task)
                                    .into_iter()
                                    .map(Ok)
                                    .collect();
                            let ended = task::stream_ends(&now.task);
                            Some((updates, (Some(now), watch, ends, ended)))
                        }
                        Ok(None) => Some((Vec::new(), (Some(seen), watch, ends, false))),
                        Err(error) => Some((vec![Err(error)], (None, watch, ends, true))),
                    }
                }
            },
        )
        .flat_map(stream::iter);
        let _ = history_length;
        head.chain(rest).boxed()
    }

    /// A task as the client asked for it.
    pub(super) fn shaped(view: &TaskView, history_length: Option<i32>) -> Task {
        task::shaped(view.task.clone(), history_length, true)
    }

    /// `ListTasks`: the caller's tasks with this agent, newest first.
    pub(super) async fn list(
        &self,
        who: &Who,
        request: ListTasksRequest,
    ) -> Result<ListTasksResponse, A2AError> {
        let page_size = a2a_server::pagination::resolve_page_size(request.page_size);
        let before = match request
            .page_token
            .as_deref()
            .filter(|token| !token.is_empty())
        {
            Some(token) => Some(decode_page_token(token).ok_or_else(|| {
                A2AError::invalid_params("pageToken is not one this hub gave; start without it")
            })?),
            None => None,
        };
        let sent = self
            .gateway
            .keyed_sends(
                &who.caller.id,
                &format!("{TASK_KEY}:"),
                before,
                page_size + 1,
            )
            .await
            .map_err(|_| A2AError::internal("the hub could not read the tasks; retry"))?;
        let more = sent.len() > page_size;
        let mut tasks = Vec::new();
        let mut last = None;
        for event in sent.into_iter().take(page_size) {
            last = Some((event.ts_ms, event.id.clone()));
            if !event.mentions.contains(&who.target) {
                continue;
            }
            let room = room_of(&event).to_owned();
            if request
                .context_id
                .as_deref()
                .is_some_and(|context| !context.is_empty() && context != room)
            {
                continue;
            }
            let Some(id) = event.client_key.as_deref().and_then(task::task_id_of) else {
                continue;
            };
            let view = match self.read_task_at(who, &id, &room, event.seq).await {
                Ok(view) => view,
                // A room the caller has left: its tasks are no longer its to read.
                Err(error) if error.code == a2a::error_code::TASK_NOT_FOUND => continue,
                Err(error) => return Err(error),
            };
            if request.status.as_ref().is_some_and(|status| {
                *status != TaskState::Unspecified && *status != view.task.status.state
            }) {
                continue;
            }
            if let (Some(after), Some(at)) =
                (request.status_timestamp_after, view.task.status.timestamp)
                && at <= after
            {
                continue;
            }
            tasks.push(task::shaped(
                view.task,
                request.history_length,
                request.include_artifacts == Some(true),
            ));
        }
        let next_page_token = match (more, last) {
            (true, Some((ts_ms, id))) => encode_page_token(ts_ms, &id),
            _ => String::new(),
        };
        Ok(ListTasksResponse {
            total_size: tasks.len() as i32,
            page_size: page_size as i32,
            tasks,
            next_page_token,
        })
    }
}

pub(super) fn encode_page_token(ts_ms: i64, id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{ts_ms}:{id}"))
}

pub(super) fn decode_page_token(token: &str) -> Option<(i64, String)> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (ts, id) = text.split_once(':')?;
    let valid_id = !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    valid_id.then_some((ts.parse().ok()?, id.to_owned()))
}
