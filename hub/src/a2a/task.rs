//! An A2A task, read off a room's log.
//!
//! Why no task table: a task *is* the message an A2A client sent (stored with its
//! `client_key`, so durable and deduplicated like any other), and everything that happens to
//! it is a later event of the same room that points back at it with `reply_to`. Deriving
//! the task from those events means it can never disagree with the room, survives every
//! crash the room survives, and works with agents that know nothing of A2A: their plain
//! reply completes the task. Pure: events and the time in, a task out.

use std::collections::HashMap;

use a2a::{
    Artifact, Message, Part, PartContent, Role, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use chrono::{DateTime, TimeZone as _, Utc};
use serde_json::Value;

use roundtable_engine::records::{EventRecord, StreamKey};

/// The key of the body field an agent (or the hub) marks an A2A state with.
pub const EXTENSION_FIELD: &str = "x_a2a";

/// How long a task may wait for its agent's answer before it is failed.
pub const TASK_TTL_MS: i64 = 7 * 24 * 3600 * 1000;

/// A task's id: `t_` and the hash its first message's `client_key` carries (`a2a:<hash>`).
/// Opaque to clients, the same before and after a message held for consent is sent, and
/// found only among its requester's own messages.
pub fn task_id_of(client_key: &str) -> Option<String> {
    let hash = client_key.strip_prefix("a2a:")?;
    is_hash(hash).then(|| format!("t_{hash}"))
}

/// The `client_key` of a task's first message; `None` for anything that is no task id.
pub fn key_of_task(id: &str) -> Option<String> {
    let hash = id.strip_prefix("t_")?;
    is_hash(hash).then(|| format!("a2a:{hash}"))
}

fn is_hash(text: &str) -> bool {
    text.len() == 43
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A task as read: the A2A object, and what the hub needs to act on it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    pub task: Task,
    /// How it was read, to read on from (`None` while it is held for consent).
    pub fold: Option<TaskFold>,
    /// The last event of the task (a follow-up replies to it).
    pub last_event: String,
    /// The open question of an `INPUT_REQUIRED` task, when the agent asked it with a ping:
    /// `(ping id, options)`.
    pub open_ping: Option<(String, Vec<String>)>,
}

/// Who the task is between.
#[derive(Debug, Clone, Copy)]
pub struct Parties<'a> {
    /// Who sent the task's message (the A2A client).
    pub requester: &'a str,
    /// The agent it was sent to.
    pub target: &'a str,
}

fn body(event: &EventRecord) -> Value {
    serde_json::from_str(&event.body).unwrap_or(Value::Null)
}

fn marked_state(body: &Value) -> Option<&str> {
    body.get(EXTENSION_FIELD)?.get("state")?.as_str()
}

pub fn timestamp(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

fn room_of(event: &EventRecord) -> &str {
    match &event.stream {
        StreamKey::Room(room) => room,
        StreamKey::Inbox(principal) => principal,
    }
}

/// The A2A message an event shows as. The requester's own messages give back the parts
/// they were sent with, when the hub kept them.
pub fn message_of(event: &EventRecord, parties: Parties<'_>, task: Option<&str>) -> Message {
    let body = body(event);
    let role = if event.from == parties.requester {
        Role::User
    } else {
        Role::Agent
    };
    let kept_parts = body
        .get(EXTENSION_FIELD)
        .and_then(|marks| marks.get("parts"))
        .and_then(|parts| serde_json::from_value::<Vec<Part>>(parts.clone()).ok())
        .filter(|parts| !parts.is_empty() && role == Role::User);
    let parts = kept_parts.unwrap_or_else(|| {
        let mut parts = Vec::new();
        if let Some(text) = body.get("text").and_then(Value::as_str) {
            parts.push(Part::text(text));
        }
        if event.kind == "ping" {
            if let Some(question) = body.get("question").and_then(Value::as_str) {
                parts.push(Part::text(question));
            }
            if let Some(options) = body.get("options").filter(|options| options.is_array()) {
                parts.push(Part::data(serde_json::json!({ "options": options })));
            }
        }
        if parts.is_empty() {
            parts.push(Part::text(String::new()));
        }
        parts
    });
    Message {
        message_id: event.id.clone(),
        context_id: Some(room_of(event).to_owned()),
        task_id: task.map(str::to_owned),
        role,
        parts,
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    }
}

/// The text of a message's parts, as the room keeps it: text parts joined by a blank
/// line, data parts as fenced JSON. `Err` names a part the hub does not take (files).
pub fn text_of(parts: &[Part]) -> Result<String, &'static str> {
    let mut pieces = Vec::new();
    for part in parts {
        match &part.content {
            PartContent::Text(text) => pieces.push(text.clone()),
            PartContent::Data(value) => pieces.push(format!(
                "```json\n{}\n```",
                serde_json::to_string_pretty(value).unwrap_or_default()
            )),
            PartContent::Raw(_) | PartContent::Url(_) => {
                return Err("file parts (raw bytes or URLs) are not taken; send text or data");
            }
        }
    }
    Ok(pieces.join("\n\n"))
}

/// The task whose message is `first`, given the room's later events, in order. `now_ms`
/// decides whether an unanswered task has outlived [`TASK_TTL_MS`].
#[cfg(test)]
pub fn task_view(
    id: String,
    first: &EventRecord,
    later: &[EventRecord],
    parties: Parties<'_>,
    now_ms: i64,
) -> TaskView {
    let mut fold = TaskFold::new(id, first.clone(), parties);
    for event in later {
        fold.fold(event);
    }
    fold.view(now_ms)
}

/// A task being read: its events folded in one at a time, so a task followed for a while
/// reads only what is new, and a long one is read page by page without holding its room.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFold {
    id: String,
    requester: String,
    target: String,
    room: String,
    /// The task's own messages (its first, the replies and follow-ups), in order.
    chain: Vec<EventRecord>,
    state: TaskState,
    /// Index in `chain` of the message the status shows.
    status_message: Option<usize>,
    status_ms: i64,
    /// Indexes in `chain` of the replies that are the task's artifacts.
    artifacts: Vec<usize>,
    open_ping: Option<(String, Vec<String>)>,
    /// When an unanswered task's time to live ran out, seen from a later event.
    failed_at: Option<i64>,
    /// The last seq folded in.
    pub read_to: u64,
}

impl TaskFold {
    pub fn new(id: String, first: EventRecord, parties: Parties<'_>) -> TaskFold {
        TaskFold {
            id,
            requester: parties.requester.to_owned(),
            target: parties.target.to_owned(),
            room: room_of(&first).to_owned(),
            status_ms: first.ts_ms,
            read_to: first.seq,
            chain: vec![first],
            state: TaskState::Submitted,
            status_message: None,
            artifacts: Vec::new(),
            open_ping: None,
            failed_at: None,
        }
    }

    pub fn room(&self) -> &str {
        &self.room
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether nothing later can change the task (it ended).
    pub fn settled(&self) -> bool {
        self.state.is_terminal() || self.failed_at.is_some()
    }

    fn in_chain(&self, id: &str) -> bool {
        self.chain.iter().any(|event| event.id == id)
    }

    /// Folds in the room's next event.
    pub fn fold(&mut self, event: &EventRecord) {
        self.read_to = self.read_to.max(event.seq);
        if self.settled() {
            return;
        }
        // Unanswered past its time to live, the task failed then: what comes later is late.
        if matches!(self.state, TaskState::Submitted | TaskState::Working)
            && event.ts_ms.saturating_sub(self.status_ms) > TASK_TTL_MS
        {
            self.failed_at = Some(self.status_ms + TASK_TTL_MS);
            return;
        }
        let body = body(event);
        let replies_in_task = body
            .get("reply_to")
            .and_then(Value::as_str)
            .is_some_and(|to| self.in_chain(to));
        let at = self.chain.len();
        let change = if event.from == self.target {
            match event.kind.as_str() {
                "message" if replies_in_task => {
                    self.chain.push(event.clone());
                    self.open_ping = None;
                    Some(match marked_state(&body) {
                        Some("working") => (TaskState::Working, Some(at)),
                        Some("input_required") => (TaskState::InputRequired, Some(at)),
                        Some("failed") => (TaskState::Failed, Some(at)),
                        Some("rejected") => (TaskState::Rejected, Some(at)),
                        _ => {
                            self.artifacts.push(at);
                            (TaskState::Completed, None)
                        }
                    })
                }
                "ping" if replies_in_task => {
                    self.chain.push(event.clone());
                    let ping = body.get("ping").and_then(Value::as_str).unwrap_or_default();
                    let options = body
                        .get("options")
                        .and_then(|options| serde_json::from_value(options.clone()).ok())
                        .unwrap_or_default();
                    self.open_ping = Some((ping.to_owned(), options));
                    Some((TaskState::InputRequired, Some(at)))
                }
                "status"
                    if self.state == TaskState::Submitted
                        && body.get("state").and_then(Value::as_str) == Some("working") =>
                {
                    Some((TaskState::Working, None))
                }
                _ => None,
            }
        } else if event.from == self.requester && event.kind == "message" && replies_in_task {
            self.chain.push(event.clone());
            self.open_ping = None;
            Some(match marked_state(&body) {
                Some("canceled") => (TaskState::Canceled, Some(at)),
                _ => (TaskState::Working, None),
            })
        } else {
            None
        };
        if let Some((state, message)) = change {
            self.state = state;
            self.status_message = message;
            self.status_ms = event.ts_ms;
        }
    }

    /// The task as it stands, at `now_ms`.
    pub fn view(&self, now_ms: i64) -> TaskView {
        let parties = Parties {
            requester: &self.requester,
            target: &self.target,
        };
        let (id, room) = (&self.id, &self.room);
        let mut state = self.state.clone();
        let mut status_ms = self.status_ms;
        let mut failed_by_time = None;
        if self.failed_at.is_some()
            || matches!(state, TaskState::Submitted | TaskState::Working)
                && now_ms.saturating_sub(status_ms) > TASK_TTL_MS
        {
            state = TaskState::Failed;
            status_ms += TASK_TTL_MS;
            failed_by_time = Some(Message {
                message_id: format!("{id}.expired"),
                context_id: Some(room.clone()),
                task_id: Some(id.clone()),
                role: Role::Agent,
                parts: vec![Part::text(
                    "the agent did not answer within 7 days; the task has failed",
                )],
                metadata: None,
                extensions: None,
                reference_task_ids: None,
            });
        }
        let last_event = self
            .chain
            .last()
            .map_or_else(String::new, |event| event.id.clone());
        let history = self
            .chain
            .iter()
            .map(|event| message_of(event, parties, Some(id)))
            .collect();
        let artifacts: Vec<Artifact> = self
            .artifacts
            .iter()
            .map(|at| {
                let event = &self.chain[*at];
                Artifact {
                    artifact_id: event.id.clone(),
                    name: None,
                    description: None,
                    parts: message_of(event, parties, Some(id)).parts,
                    metadata: None,
                    extensions: None,
                }
            })
            .collect();
        let status = TaskStatus {
            state,
            message: failed_by_time.or_else(|| {
                self.status_message
                    .map(|at| message_of(&self.chain[at], parties, Some(id)))
            }),
            timestamp: Some(timestamp(status_ms)),
        };
        TaskView {
            task: Task {
                id: id.clone(),
                context_id: room.clone(),
                status,
                artifacts: (!artifacts.is_empty()).then_some(artifacts),
                history: Some(history),
                metadata: None,
            },
            last_event,
            open_ping: self.open_ping.clone(),
            fold: Some(self.clone()),
        }
    }
}

/// A task whose message is held with a contact request (`request`), or was: waiting for
/// its owner's consent, refused, cancelled, or accepted but not sent (what the hub
/// refused then, the sender sends again).
pub fn held_view(
    id: String,
    request: &roundtable_engine::records::RequestRecord,
    target: &str,
    parties: Parties<'_>,
) -> TaskView {
    use roundtable_protocol::model::RequestState;
    let (state, text) = match request.state {
        RequestState::Pending => (
            TaskState::AuthRequired,
            format!(
                "{target} accepts messages from contacts only; a contact request ({}) awaits \
                 its owner's decision, and this task goes on if it is accepted",
                request.id
            ),
        ),
        RequestState::Accepted => (
            TaskState::Failed,
            "the contact request was accepted but the message could not be sent then; send \
             it again, with a new messageId"
                .to_owned(),
        ),
        RequestState::Cancelled => (
            TaskState::Canceled,
            "the contact request was cancelled; the held message was deleted".to_owned(),
        ),
        RequestState::Rejected | RequestState::Expired => (
            TaskState::Rejected,
            format!(
                "the contact request was {}; the held message was deleted",
                request.state.as_str()
            ),
        ),
    };
    let status_ms = request.decided_ms.unwrap_or(request.created_ms);
    let mut history = Vec::new();
    if let Some(body) = request.held.as_ref().and_then(|held| held.body.as_deref()) {
        let event = EventRecord {
            stream: StreamKey::Room(request.id.clone()),
            seq: 0,
            id: format!("{id}.held"),
            ts_ms: request.created_ms,
            from: parties.requester.to_owned(),
            kind: "message".into(),
            body: body.to_owned(),
            client_key: None,
            mentions: Vec::new(),
            pair: true,
        };
        history.push(message_of(&event, parties, Some(&id)));
    }
    let status_message = Message {
        message_id: format!("{id}.{}", request.state.as_str()),
        context_id: Some(request.id.clone()),
        task_id: Some(id.clone()),
        role: Role::Agent,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    };
    TaskView {
        fold: None,
        task: Task {
            id,
            context_id: request.id.clone(),
            status: TaskStatus {
                state,
                message: Some(status_message),
                timestamp: Some(timestamp(status_ms)),
            },
            artifacts: None,
            history: (!history.is_empty()).then_some(history),
            metadata: None,
        },
        last_event: String::new(),
        open_ping: None,
    }
}

/// A task as a client asked for it: history cut to its last `history_length` messages
/// (none at 0; all when absent), artifacts left out unless wanted.
pub fn shaped(mut task: Task, history_length: Option<i32>, artifacts: bool) -> Task {
    if let (Some(length), Some(history)) = (history_length, task.history.as_mut()) {
        let keep = usize::try_from(length.max(0)).unwrap_or(0);
        let cut = history.len().saturating_sub(keep);
        history.drain(..cut);
    }
    if task.history.as_ref().is_some_and(Vec::is_empty) {
        task.history = None;
    }
    if !artifacts {
        task.artifacts = None;
    }
    task
}

/// What a streaming client is told when a task moves from `before` to `after`: new
/// artifacts, then the new status when it changed. The last update of a terminal task
/// (or one that waits on its client) is marked final in its metadata.
pub fn updates(before: &Task, after: &Task) -> Vec<StreamResponse> {
    let mut out = Vec::new();
    let known: HashMap<&str, ()> = before
        .artifacts
        .iter()
        .flatten()
        .map(|artifact| (artifact.artifact_id.as_str(), ()))
        .collect();
    for artifact in after.artifacts.iter().flatten() {
        if !known.contains_key(artifact.artifact_id.as_str()) {
            out.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: after.id.clone(),
                context_id: after.context_id.clone(),
                artifact: artifact.clone(),
                append: None,
                last_chunk: Some(true),
                metadata: None,
            }));
        }
    }
    let status_changed = before.status.state != after.status.state
        || before.status.message.as_ref().map(|m| &m.message_id)
            != after.status.message.as_ref().map(|m| &m.message_id);
    if status_changed {
        out.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: after.id.clone(),
            context_id: after.context_id.clone(),
            status: after.status.clone(),
            metadata: None,
        }));
    }
    out
}

/// Whether a stream about the task ends here: a terminal state, or one that waits on the
/// client (it answers with a new request).
pub fn stream_ends(task: &Task) -> bool {
    task.status.state.is_terminal()
        || matches!(
            task.status.state,
            TaskState::InputRequired | TaskState::AuthRequired
        )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ROOM: &str = "r_pair";

    fn event(seq: u64, from: &str, kind: &str, body: Value) -> EventRecord {
        EventRecord {
            stream: StreamKey::Room(ROOM.into()),
            seq,
            id: format!("e_{seq}"),
            ts_ms: 1_000 * seq as i64,
            from: from.into(),
            kind: kind.into(),
            body: body.to_string(),
            client_key: None,
            mentions: Vec::new(),
            pair: true,
        }
    }

    const PARTIES: Parties<'static> = Parties {
        requester: "p_client",
        target: "p_agent",
    };

    const ID: &str = "t_0123456789012345678901234567890123456789abc";

    fn view(later: &[EventRecord]) -> TaskView {
        let first = event(3, "p_client", "message", json!({"text": "review this"}));
        task_view(ID.into(), &first, later, PARTIES, 10_000)
    }

    #[test]
    fn task_ids_are_their_first_message_s_key_and_nothing_else_parses() {
        let key = "a2a:0123456789012345678901234567890123456789abc";
        assert_eq!(task_id_of(key).as_deref(), Some(ID));
        assert_eq!(key_of_task(ID).as_deref(), Some(key));
        for bad in [
            "",
            "t_",
            "t_short",
            "r_ab12.7",
            key,
            "t_0123456789012345678901234567890123456789ab!",
        ] {
            assert_eq!(key_of_task(bad), None, "{bad}");
        }
        assert_eq!(
            task_id_of("a2f:0123456789012345678901234567890123456789abc"),
            None
        );
    }

    #[test]
    fn a_message_alone_is_submitted_and_a_plain_reply_completes_it_with_an_artifact() {
        let submitted = view(&[]);
        assert_eq!(submitted.task.status.state, TaskState::Submitted);
        assert_eq!(submitted.task.id, ID);
        assert_eq!(submitted.fold.as_ref().map(TaskFold::room), Some(ROOM));
        assert_eq!(submitted.task.context_id, ROOM);
        // Others' talk in the room is not the task's.
        let noise = event(4, "p_other", "message", json!({"text": "lunch?"}));
        let reply = event(
            5,
            "p_agent",
            "message",
            json!({"text": "looks good", "reply_to": "e_3"}),
        );
        let done = view(&[noise, reply]);
        assert_eq!(done.task.status.state, TaskState::Completed);
        let artifacts = done.task.artifacts.as_ref().unwrap();
        assert_eq!(artifacts[0].artifact_id, "e_5");
        assert_eq!(artifacts[0].parts, vec![Part::text("looks good")]);
        let history = done.task.history.as_ref().unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(
            (history[0].role.clone(), history[1].role.clone()),
            (Role::User, Role::Agent)
        );
        assert_eq!(done.last_event, "e_5");
        assert_eq!(done.task.status.timestamp, Some(timestamp(5_000)));
    }

    #[test]
    fn marked_replies_pings_and_follow_ups_move_the_state_in_order() {
        let working = event(
            4,
            "p_agent",
            "message",
            json!({"text": "on it", "reply_to": "e_3", "x_a2a": {"state": "working"}}),
        );
        let ping = event(
            5,
            "p_agent",
            "ping",
            json!({"ping": "q1", "question": "which branch?", "options": ["main", "dev"], "reply_to": "e_4"}),
        );
        let asked = view(&[working.clone(), ping.clone()]);
        assert_eq!(asked.task.status.state, TaskState::InputRequired);
        assert_eq!(
            asked.open_ping,
            Some(("q1".into(), vec!["main".into(), "dev".into()]))
        );
        let question = asked.task.status.message.as_ref().unwrap();
        assert_eq!(question.parts[0], Part::text("which branch?"));
        assert_eq!(
            question.parts[1],
            Part::data(json!({"options": ["main", "dev"]}))
        );
        let follow_up = event(
            6,
            "p_client",
            "message",
            json!({"text": "main", "reply_to": "e_5"}),
        );
        let resumed = view(&[working.clone(), ping.clone(), follow_up.clone()]);
        assert_eq!(resumed.task.status.state, TaskState::Working);
        assert_eq!(resumed.open_ping, None);
        let failed = event(
            7,
            "p_agent",
            "message",
            json!({"text": "cannot", "reply_to": "e_6", "x_a2a": {"state": "failed"}}),
        );
        let end = view(&[working, ping, follow_up, failed]);
        assert_eq!(end.task.status.state, TaskState::Failed);
        assert_eq!(end.task.history.as_ref().unwrap().len(), 5);
        assert!(end.task.artifacts.is_none());
    }

    #[test]
    fn a_cancel_ends_the_task_and_nothing_after_a_terminal_state_counts() {
        let cancel = event(
            4,
            "p_client",
            "message",
            json!({"text": "(task canceled)", "reply_to": "e_3", "x_a2a": {"state": "canceled"}}),
        );
        let late = event(
            5,
            "p_agent",
            "message",
            json!({"text": "done", "reply_to": "e_3"}),
        );
        let canceled = view(&[cancel, late]);
        assert_eq!(canceled.task.status.state, TaskState::Canceled);
        assert!(canceled.task.artifacts.is_none());
    }

    #[test]
    fn replies_to_other_messages_and_other_senders_do_not_touch_the_task() {
        let elsewhere = event(
            4,
            "p_agent",
            "message",
            json!({"text": "x", "reply_to": "e_1"}),
        );
        let stranger = event(
            5,
            "p_other",
            "message",
            json!({"text": "y", "reply_to": "e_3"}),
        );
        let stranger_ping = event(
            6,
            "p_other",
            "ping",
            json!({"ping": "p", "question": "?", "reply_to": "e_3"}),
        );
        assert_eq!(
            view(&[elsewhere, stranger, stranger_ping])
                .task
                .status
                .state,
            TaskState::Submitted
        );
        let status = event(7, "p_agent", "status", json!({"state": "working"}));
        assert_eq!(view(&[status]).task.status.state, TaskState::Working);
    }

    #[test]
    fn an_unanswered_task_fails_after_its_time_to_live() {
        let first = event(3, "p_client", "message", json!({"text": "hello"}));
        let fresh = task_view(ID.into(), &first, &[], PARTIES, 3_000 + TASK_TTL_MS);
        assert_eq!(fresh.task.status.state, TaskState::Submitted);
        let stale = task_view(ID.into(), &first, &[], PARTIES, 3_001 + TASK_TTL_MS);
        assert_eq!(stale.task.status.state, TaskState::Failed);
        // A reply after the time to live does not undo the failure.
        let mut late = event(
            4,
            "p_agent",
            "message",
            json!({"text": "sorry", "reply_to": "e_3"}),
        );
        late.ts_ms = 3_001 + TASK_TTL_MS;
        let still = task_view(ID.into(), &first, &[late], PARTIES, 4_000 + TASK_TTL_MS);
        assert_eq!(still.task.status.state, TaskState::Failed);
        assert!(still.task.artifacts.is_none());
        assert_eq!(
            stale.task.status.timestamp,
            Some(timestamp(3_000 + TASK_TTL_MS))
        );
    }

    #[test]
    fn the_requester_gets_back_the_parts_it_sent_and_text_is_joined_from_parts() {
        let parts = vec![Part::text("see"), Part::data(json!({"line": 3}))];
        let text = text_of(&parts).unwrap();
        assert_eq!(text, "see\n\n```json\n{\n  \"line\": 3\n}\n```");
        let first = event(
            3,
            "p_client",
            "message",
            json!({"text": text, "x_a2a": {"parts": serde_json::to_value(&parts).unwrap()}}),
        );
        let task = task_view(ID.into(), &first, &[], PARTIES, 3_000).task;
        assert_eq!(task.history.unwrap()[0].parts, parts);
        assert!(text_of(&[Part::url("https://x")]).is_err());
        assert!(text_of(&[Part::raw(vec![1])]).is_err());
    }

    #[test]
    fn folding_in_pages_of_any_size_gives_the_same_task_and_a_finished_one_reads_no_further() {
        let first = event(3, "p_client", "message", json!({"text": "review this"}));
        let later = vec![
            event(4, "p_other", "message", json!({"text": "noise"})),
            event(
                5,
                "p_agent",
                "message",
                json!({"text": "on it", "reply_to": "e_3", "x_a2a": {"state": "working"}}),
            ),
            event(
                6,
                "p_agent",
                "ping",
                json!({"ping": "q", "question": "which?", "reply_to": "e_5"}),
            ),
            event(
                7,
                "p_client",
                "message",
                json!({"text": "main", "reply_to": "e_6"}),
            ),
            event(
                8,
                "p_agent",
                "message",
                json!({"text": "done", "reply_to": "e_7"}),
            ),
            event(
                9,
                "p_agent",
                "message",
                json!({"text": "late", "reply_to": "e_3"}),
            ),
        ];
        let whole = task_view(ID.into(), &first, &later, PARTIES, 10_000);
        assert_eq!(whole.task.status.state, TaskState::Completed);
        for cut in 0..=later.len() {
            let mut fold = TaskFold::new(ID.into(), first.clone(), PARTIES);
            for event in &later[..cut] {
                fold.fold(event);
            }
            let partway = fold.view(10_000);
            for event in &later[cut..] {
                fold.fold(event);
            }
            assert_eq!(fold.view(10_000).task, whole.task, "cut at {cut}");
            assert_eq!(
                partway.fold.unwrap().read_to,
                if cut == 0 { 3 } else { later[cut - 1].seq }
            );
        }
        let mut fold = TaskFold::new(ID.into(), first, PARTIES);
        for event in &later[..5] {
            fold.fold(event);
        }
        assert!(fold.settled(), "completed at seq 8: nothing later matters");
    }

    #[test]
    fn updates_tell_new_artifacts_then_a_changed_status() {
        let submitted = view(&[]).task;
        let done = view(&[event(
            4,
            "p_agent",
            "message",
            json!({"text": "ok", "reply_to": "e_3"}),
        )])
        .task;
        let told = updates(&submitted, &done);
        assert_eq!(told.len(), 2);
        assert!(matches!(told[0], StreamResponse::ArtifactUpdate(_)));
        assert!(
            matches!(&told[1], StreamResponse::StatusUpdate(update) if update.status.state == TaskState::Completed)
        );
        assert!(updates(&done, &done).is_empty());
        assert!(stream_ends(&done));
        assert!(!stream_ends(&submitted));
    }

    #[test]
    fn a_history_length_keeps_the_last_messages_and_zero_leaves_none() {
        let task = view(&[event(
            4,
            "p_agent",
            "message",
            json!({"text": "ok", "reply_to": "e_3"}),
        )])
        .task;
        assert_eq!(
            shaped(task.clone(), Some(1), true).history.unwrap()[0].message_id,
            "e_4"
        );
        assert_eq!(shaped(task.clone(), Some(0), true).history, None);
        assert_eq!(shaped(task.clone(), None, true).history.unwrap().len(), 2);
        assert!(shaped(task, None, false).artifacts.is_none());
    }
}
