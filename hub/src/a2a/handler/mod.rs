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
use crate::gateway::Gateway;
use crate::metrics::GaugeUnit;
use crate::store::ReadError;
use roundtable_engine::records::{EventRecord, StreamKey};
use roundtable_engine::{Caller, HoldForConsent, Refusal, Reply};

mod reading;
mod sending;

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
        let principal = roundtable_engine::records::PrincipalRecord {
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

#[cfg(test)]
mod tests {
    use super::reading::{decode_page_token, encode_page_token};
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
