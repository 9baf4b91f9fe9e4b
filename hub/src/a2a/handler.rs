//! The A2A operations over rooms: a message becomes a `send` in a room the caller shares
//! with the agent, and a task is read back from that room (see [`super::task`]).
//!
//! Every write goes through [`Gateway::execute`], so membership, the invite rule, pauses,
//! rate limits, sizes, `client_key` deduplication and the audit log apply as they do to a
//! WebSocket client. Reads are the caller's own `history` of the room: a task another
//! principal sent, or one in a room the caller has left, is unknown to it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use a2a::{
    A2AError, AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, PartContent, SendMessageRequest, SendMessageResponse,
    StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState,
    TypedDetail,
};
use a2a_server::{RequestHandler, ServiceParams};
use async_trait::async_trait;
use base64::Engine as _;
use futures_util::stream::{self, BoxStream, StreamExt as _};
use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::{ClientFrame, RoomCreate, RoomInvite, Rooms, SendCmd};
use roundtable_protocol::model::PrincipalKind;
use roundtable_protocol::server::{RoomOk, RoomsOk};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::task::{self, EXTENSION_FIELD, Parties, TaskView};
use crate::engine::{Caller, HoldForConsent, Refusal, Reply};
use crate::gateway::Gateway;
use crate::store::{EventRecord, ReadError, StreamKey};

/// The most bytes of text one message may carry (the protocol's limit for a `message`).
const MAX_TEXT: usize = 16 * 1024;

/// The most parts one message may have.
const MAX_PARTS: usize = 64;

/// Events of a room read at a time to follow a task.
const TASK_PAGE: usize = 500;

/// The error domain of Roundtable's reasons.
const DOMAIN: &str = "roundtable";

/// Who a request is between, as the gate set it.
#[derive(Debug, Clone)]
struct Who {
    caller: Arc<Caller>,
    caller_handle: String,
    target: String,
    target_handle: String,
}

impl Who {
    fn parties(&self) -> Parties<'_> {
        Parties {
            requester: &self.caller.id,
            target: &self.target,
        }
    }
}

/// The A2A [`RequestHandler`] of the hub.
#[derive(Debug, Clone)]
pub struct RoomTasks {
    gateway: Gateway,
    /// One lock per (caller, agent) while their A2A room is found or made, so two first
    /// messages at once make one room.
    pair_rooms: Arc<Mutex<PairLocks>>,
    /// Tasks as last read, by (caller, task): a task read again is read on from there, not
    /// from its first message (memory only, bounded; a miss reads the task whole).
    folds: Arc<Mutex<Folds>>,
}

/// The last folds read, at most [`FOLDS_KEPT`], the oldest forgotten first.
#[derive(Debug, Default)]
struct Folds {
    by_task: HashMap<(String, String), task::TaskFold>,
    order: std::collections::VecDeque<(String, String)>,
}

/// Task folds kept in memory.
const FOLDS_KEPT: usize = 4096;

impl Folds {
    fn put(&mut self, key: (String, String), fold: task::TaskFold) {
        if self.by_task.insert(key.clone(), fold).is_none() {
            self.order.push_back(key);
            while self.order.len() > FOLDS_KEPT {
                if let Some(oldest) = self.order.pop_front() {
                    self.by_task.remove(&oldest);
                }
            }
        }
    }
}

type PairLocks = HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>;

fn param<'p>(params: &'p ServiceParams, name: &str) -> Option<&'p str> {
    params
        .get(name)
        .and_then(|values| values.first())
        .map(String::as_str)
}

fn with_reason(error: A2AError, reason: &str) -> A2AError {
    error.with_details(vec![TypedDetail::error_info(reason, DOMAIN, None)])
}

/// A Roundtable refusal, told as A2A tells it.
fn refused(refusal: Refusal) -> A2AError {
    match refusal.code {
        ErrorCode::RateLimited => {
            super::note_rate_limit(refusal.retry_after_ms.unwrap_or(1000));
            with_reason(A2AError::internal(refusal.msg), "RATE_LIMITED")
        }
        ErrorCode::Paused => with_reason(A2AError::unsupported_operation(refusal.msg), "PAUSED"),
        ErrorCode::NotMember | ErrorCode::NotFound => context_not_available(),
        ErrorCode::NoConsent => {
            with_reason(A2AError::unsupported_operation(refusal.msg), "NO_CONSENT")
        }
        ErrorCode::TooLarge => with_reason(A2AError::invalid_params(refusal.msg), "TOO_LARGE"),
        ErrorCode::BadFrame | ErrorCode::Conflict => A2AError::invalid_params(refusal.msg),
        ErrorCode::Forbidden => {
            with_reason(A2AError::unsupported_operation(refusal.msg), "FORBIDDEN")
        }
        _ => A2AError::internal(refusal.msg),
    }
}

/// The same error for an unknown room and one the caller is not in.
fn context_not_available() -> A2AError {
    with_reason(
        A2AError::invalid_params(
            "no such context for you: give the contextId of a room you are in, or none",
        ),
        "CONTEXT_NOT_AVAILABLE",
    )
}

/// The `client_key` a message id stands for, sent to `target`: `<kind>:` and 43 characters of
/// the SHA-256 of both, so a retried message is the same event, and the same message id sent
/// to two agents is two messages (keys are unique per sender across every room).
fn key_of(kind: &str, target: &str, message_id: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(target.as_bytes());
    hash.update([0]);
    hash.update(message_id.as_bytes());
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.finalize());
    format!("{kind}:{}", &encoded[..43])
}

/// The prefix of the keys of tasks' first messages (follow-ups use another).
pub const TASK_KEY: &str = "a2a";
const FOLLOW_UP_KEY: &str = "a2f";
const ANSWER_KEY: &str = "a2q";
const CANCEL_KEY: &str = "a2c";

fn sent_event(reply: Reply) -> Result<Arc<EventRecord>, A2AError> {
    match reply {
        Reply::Sent { event, .. } => Ok(event),
        Reply::Ok(_) => Err(A2AError::internal(
            "the hub answered a send without its event",
        )),
    }
}

fn room_of(event: &EventRecord) -> &str {
    match &event.stream {
        StreamKey::Room(room) => room,
        StreamKey::Inbox(principal) => principal,
    }
}

impl RoomTasks {
    pub fn new(gateway: Gateway) -> RoomTasks {
        RoomTasks {
            gateway,
            pair_rooms: Arc::new(Mutex::new(HashMap::new())),
            folds: Arc::new(Mutex::new(Folds::default())),
        }
    }

    fn who(&self, params: &ServiceParams) -> Result<Who, A2AError> {
        let missing = || A2AError::internal("the request did not pass the hub's gate");
        let id = param(params, super::PRINCIPAL).ok_or_else(missing)?;
        let kind = match param(params, super::PRINCIPAL_KIND) {
            Some("user") => PrincipalKind::User,
            Some("agent") => PrincipalKind::Agent,
            _ => return Err(missing()),
        };
        let principal = crate::store::PrincipalRecord {
            id: id.to_owned(),
            kind,
            handle: param(params, super::PRINCIPAL_HANDLE)
                .unwrap_or_default()
                .to_owned(),
            name: String::new(),
            owner: None,
            discoverable: Default::default(),
            description: None,
            card: None,
            created_ms: 0,
            remote: None,
        };
        Ok(Who {
            caller: Arc::new(self.gateway.caller(&principal)),
            caller_handle: principal.handle,
            target: param(params, super::TARGET).ok_or_else(missing)?.to_owned(),
            target_handle: param(params, super::TARGET_HANDLE)
                .ok_or_else(missing)?
                .to_owned(),
        })
    }

    async fn execute(&self, who: &Who, frame: ClientFrame) -> Result<Reply, A2AError> {
        self.gateway
            .execute(&who.caller, &frame)
            .await
            .map_err(refused)
    }

    async fn send(
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

    /// The events of `room` after `after` the caller may read, one page; a refused read is
    /// audited as the WebSocket audits a refused `history`, and is the task's "not found".
    async fn page(
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
    async fn read_task_at(
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
    async fn read_on(
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
        let view = fold.view(crate::unix_ms());
        self.folds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .put((who.caller.id.clone(), fold.id().to_owned()), fold);
        Ok(view)
    }

    /// A task of the caller's with this endpoint's agent, by id: its message in a room,
    /// or held with a contact request. Any other id (another principal's task too) is
    /// unknown.
    async fn task_by_id(&self, who: &Who, id: &str) -> Result<TaskView, A2AError> {
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

    /// The room of a message without a `contextId`: the caller's A2A room with the agent,
    /// made the first time (under the invite rule); `None` when the caller has no consent.
    async fn pair_room(&self, who: &Who) -> Result<Option<String>, A2AError> {
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
    async fn hold(
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
    async fn named_room(&self, who: &Who, room: &str) -> Result<String, A2AError> {
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
    async fn submit(&self, who: &Who, request: SendMessageRequest) -> Result<TaskView, A2AError> {
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

    /// Waits until the task changes from `seen` (or `until` passes), and returns it as it
    /// is then.
    async fn next_view(
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
    fn follow(
        &self,
        who: Who,
        start: TaskView,
        first: StreamResponse,
        history_length: Option<i32>,
    ) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        let handler = self.clone();
        let context = self.gateway.context();
        let open = OpenStream::new(context.metrics.clone());
        let ends = Ends {
            stopping: context.stopping.subscribe(),
            closes: super::take_closes().unwrap_or_else(|| context.dispatch.watch_closes()),
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
    fn shaped(view: &TaskView, history_length: Option<i32>) -> Task {
        task::shaped(view.task.clone(), history_length, true)
    }
}

/// An open stream, in the `roundtable_a2a_streams` gauge while it lives.
struct OpenStream(Arc<crate::metrics::Metrics>);

impl OpenStream {
    fn new(metrics: Arc<crate::metrics::Metrics>) -> OpenStream {
        metrics
            .a2a_streams
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        OpenStream(metrics)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0
            .a2a_streams
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What ends a stream besides its task: the hub stopping, or its caller's connections
/// closed (its token revoked or rotated, or it was stopped by its owner), at once.
struct Ends {
    stopping: tokio::sync::watch::Receiver<bool>,
    closes: tokio::sync::broadcast::Receiver<crate::dispatch::PrincipalClosed>,
    principal: String,
}

impl Ends {
    async fn reached(&mut self) {
        loop {
            tokio::select! {
                _ = self.stopping.wait_for(|stopping| *stopping) => return,
                closed = self.closes.recv() => match closed {
                    Ok(closed) if *closed.principal == *self.principal => return,
                    Ok(_) => {}
                    // Too many closes to tell whether ours was one: end, to be safe (the
                    // client subscribes again, if it still may).
                    Err(_) => return,
                },
            }
        }
    }
}

fn state_name(state: &TaskState) -> &'static str {
    match state {
        TaskState::Unspecified => "unspecified",
        TaskState::Submitted => "submitted",
        TaskState::Working => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::InputRequired => "input required",
        TaskState::Rejected => "rejected",
        TaskState::AuthRequired => "auth required",
    }
}

#[async_trait]
impl RequestHandler for RoomTasks {
    async fn send_message(
        &self,
        params: &ServiceParams,
        request: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2AError> {
        let who = self.who(params)?;
        let configuration = request.configuration.as_ref();
        if configuration.is_some_and(|c| c.task_push_notification_config.is_some()) {
            return Err(A2AError::push_notification_not_supported());
        }
        let history_length = configuration.and_then(|c| c.history_length);
        let return_immediately = configuration.and_then(|c| c.return_immediately) == Some(true);
        let view = self.submit(&who, request).await?;
        if return_immediately || task::stream_ends(&view.task) {
            return Ok(SendMessageResponse::Task(RoomTasks::shaped(
                &view,
                history_length,
            )));
        }
        let mut watch = self.gateway.context().dispatch.watch_rooms();
        let until = tokio::time::Instant::now() + self.gateway.context().config.a2a_block_max;
        // Stored: from here on the answer is the task, whenever it ends.
        super::note_waiting();
        // A caller closed meanwhile (revoked, rotated, stopped) waits no more.
        let mut ends = Ends {
            stopping: self.gateway.context().stopping.subscribe(),
            closes: super::take_closes()
                .unwrap_or_else(|| self.gateway.context().dispatch.watch_closes()),
            principal: who.caller.id.clone(),
        };
        let mut view = view;
        while !task::stream_ends(&view.task) {
            let next = tokio::select! {
                next = self.next_view(&who, &view, &mut watch, until) => next?,
                () = ends.reached() => break,
            };
            match next {
                Some(now) => view = now,
                None => break,
            }
        }
        Ok(SendMessageResponse::Task(RoomTasks::shaped(
            &view,
            history_length,
        )))
    }

    async fn send_streaming_message(
        &self,
        params: &ServiceParams,
        request: SendMessageRequest,
    ) -> Result<BoxStream<'static, Result<StreamResponse, A2AError>>, A2AError> {
        let who = self.who(params)?;
        let history_length = request
            .configuration
            .as_ref()
            .and_then(|configuration| configuration.history_length);
        if request
            .configuration
            .as_ref()
            .is_some_and(|configuration| configuration.task_push_notification_config.is_some())
        {
            return Err(A2AError::push_notification_not_supported());
        }
        let view = self.submit(&who, request).await?;
        let first = StreamResponse::Task(RoomTasks::shaped(&view, history_length));
        Ok(self.follow(who, view, first, history_length))
    }

    async fn get_task(
        &self,
        params: &ServiceParams,
        request: GetTaskRequest,
    ) -> Result<Task, A2AError> {
        let who = self.who(params)?;
        let view = self.task_by_id(&who, &request.id).await?;
        Ok(RoomTasks::shaped(&view, request.history_length))
    }

    async fn list_tasks(
        &self,
        params: &ServiceParams,
        request: ListTasksRequest,
    ) -> Result<ListTasksResponse, A2AError> {
        let who = self.who(params)?;
        self.list(&who, request).await
    }

    async fn cancel_task(
        &self,
        params: &ServiceParams,
        request: CancelTaskRequest,
    ) -> Result<Task, A2AError> {
        let who = self.who(params)?;
        let view = self.task_by_id(&who, &request.id).await?;
        if view.task.status.state == TaskState::AuthRequired {
            // Held for consent: withdrawing the contact request deletes the message.
            self.execute(
                &who,
                ClientFrame::ContactRespond(roundtable_protocol::client::ContactRespond {
                    id: 1,
                    request: view.task.context_id.clone(),
                    accept: false,
                }),
            )
            .await?;
            let view = self.task_by_id(&who, &request.id).await?;
            return Ok(RoomTasks::shaped(&view, None));
        }
        match view.task.status.state {
            TaskState::Canceled => return Ok(RoomTasks::shaped(&view, None)),
            state if state.is_terminal() => {
                return Err(A2AError::task_not_cancelable(&request.id));
            }
            _ => {}
        }
        let body = json!({
            "text": format!("(task canceled by {})", who.caller_handle),
            "mentions": [who.target],
            "reply_to": view.last_event,
            EXTENSION_FIELD: {"task": request.id, "state": "canceled"},
        });
        self.send(
            &who,
            &view.task.context_id,
            "message",
            key_of(CANCEL_KEY, &who.target, &request.id),
            body,
        )
        .await?;
        let view = self.task_by_id(&who, &request.id).await?;
        Ok(RoomTasks::shaped(&view, None))
    }

    async fn subscribe_to_task(
        &self,
        params: &ServiceParams,
        request: SubscribeToTaskRequest,
    ) -> Result<BoxStream<'static, Result<StreamResponse, A2AError>>, A2AError> {
        let who = self.who(params)?;
        let view = self.task_by_id(&who, &request.id).await?;
        if view.task.status.state.is_terminal() {
            return Err(A2AError::unsupported_operation(format!(
                "task {} is over ({}); read it with GetTask",
                request.id,
                state_name(&view.task.status.state)
            )));
        }
        let first = StreamResponse::Task(RoomTasks::shaped(&view, None));
        Ok(self.follow(who, view, first, None))
    }

    async fn create_push_config(
        &self,
        _params: &ServiceParams,
        _request: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        Err(A2AError::push_notification_not_supported())
    }

    async fn get_push_config(
        &self,
        _params: &ServiceParams,
        _request: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        Err(A2AError::push_notification_not_supported())
    }

    async fn list_push_configs(
        &self,
        _params: &ServiceParams,
        _request: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2AError> {
        Err(A2AError::push_notification_not_supported())
    }

    async fn delete_push_config(
        &self,
        _params: &ServiceParams,
        _request: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), A2AError> {
        Err(A2AError::push_notification_not_supported())
    }

    async fn get_extended_agent_card(
        &self,
        _params: &ServiceParams,
        _request: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, A2AError> {
        Err(A2AError::unsupported_operation(
            "this agent has no extended card (capabilities.extendedAgentCard is false)",
        ))
    }
}

impl RoomTasks {
    /// `ListTasks`: the caller's tasks with this agent, newest first.
    async fn list(
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

fn encode_page_token(ts_ms: i64, id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{ts_ms}:{id}"))
}

fn decode_page_token(token: &str) -> Option<(i64, String)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_give_keys_of_the_protocol_s_shape_and_kinds_never_collide() {
        let key = key_of(TASK_KEY, "p_x", "msg-1");
        assert_eq!(key.len(), 47);
        assert!(key.starts_with("a2a:"));
        assert_eq!(key, key_of(TASK_KEY, "p_x", "msg-1"));
        assert_ne!(key, key_of(TASK_KEY, "p_x", "msg-2"));
        assert_ne!(
            key,
            key_of(TASK_KEY, "p_y", "msg-1"),
            "one id to two agents"
        );
        assert_ne!(
            key,
            key_of(TASK_KEY, "p_xm", "sg-1"),
            "the parts cannot slide"
        );
        assert_ne!(key[4..], key_of(FOLLOW_UP_KEY, "p_x", "msg-2")[4..]);
        assert_ne!(key, key_of(FOLLOW_UP_KEY, "p_x", "msg-1"));
    }

    #[test]
    fn page_tokens_round_trip_and_strangers_are_refused() {
        let token = encode_page_token(1_800_000_000_000, "e_abc");
        assert_eq!(
            decode_page_token(&token),
            Some((1_800_000_000_000, "e_abc".into()))
        );
        for bad in ["", "!!", "bm9jb2xvbg", &encode_page_token(1, "a'; drop")] {
            assert_eq!(decode_page_token(bad), None, "{bad}");
        }
    }
}
