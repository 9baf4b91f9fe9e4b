//! What a remote agent's answer comes to, read off what it sent: a task and its updates
//! (streamed, or polled), or a message alone. Pure, so every shape an A2A server may send
//! is tested without one.

use a2a::{Artifact, Message, Part, SendMessageResponse, StreamResponse, Task, TaskState};

/// What to post in the room once a call has an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The task completed (or the agent answered with a message): its text.
    Done { text: String },
    /// The task waits for input (`auth` true: for authorization, asked of the remote
    /// agent's owner). The question is the status message's text.
    Needs {
        task_id: String,
        question: String,
        auth: bool,
    },
    /// The task ended otherwise: `failed`, `rejected` or `canceled`, with what it said.
    Ended { state: &'static str, text: String },
}

/// The most text kept of an answer (posted cut to a message's limit): a remote agent
/// streaming without end fills no memory.
const MAX_TEXT: usize = 4 * roundtable_protocol::limits::MESSAGE_TEXT;

/// The most artifacts kept of an answer.
const MAX_ARTIFACTS: usize = 64;

/// A task's answer as it arrives.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fold {
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    state: TaskState,
    status_text: Option<String>,
    /// Artifacts by id, in the order they first came, with their text so far.
    artifacts: Vec<(String, String)>,
    /// An answer that was a message (no task).
    message: Option<String>,
    /// The latest working status text not yet posted.
    pub working: Option<String>,
}

/// The longest task or context id of a remote agent's kept.
const MAX_ID: usize = 256;

/// A remote agent's task or context id, if the hub can keep it: printable, of bounded
/// length (it is stored, and sent back to the remote). Another is as good as none: a
/// context starts anew, a task cannot be gone on with.
fn usable_id(id: String) -> Option<String> {
    use roundtable_protocol::text::{Shape, refused_character};
    (!id.is_empty() && id.len() <= MAX_ID && refused_character(&id, Shape::Identifier).is_none())
        .then_some(id)
}

/// The text of parts: text parts as they are, data parts as JSON, file parts named.
fn parts_text(parts: &[Part]) -> String {
    let mut texts = Vec::new();
    for part in parts {
        match &part.content {
            a2a::PartContent::Text(text) => texts.push(text.clone()),
            a2a::PartContent::Data(value) => texts.push(value.to_string()),
            a2a::PartContent::Url(url) => texts.push(format!("[file: {url}]")),
            a2a::PartContent::Raw(bytes) => texts.push(format!(
                "[file{}: {} bytes]",
                part.filename
                    .as_deref()
                    .map(|name| format!(" {name}"))
                    .unwrap_or_default(),
                bytes.len()
            )),
        }
    }
    texts.join("\n")
}

fn message_text(message: &Message) -> String {
    parts_text(&message.parts)
}

impl Fold {
    /// Takes in a non-streaming answer.
    pub fn response(&mut self, response: SendMessageResponse) {
        match response {
            SendMessageResponse::Task(task) => self.task(task),
            SendMessageResponse::Message(message) => self.message(message),
        }
    }

    /// Takes in one streamed event.
    pub fn event(&mut self, event: StreamResponse) {
        match event {
            StreamResponse::Task(task) => self.task(task),
            StreamResponse::Message(message) => self.message(message),
            StreamResponse::StatusUpdate(update) => {
                self.task_id = usable_id(update.task_id);
                self.context_id = usable_id(update.context_id);
                self.status(update.status.state, update.status.message.as_ref());
            }
            StreamResponse::ArtifactUpdate(update) => {
                self.task_id = usable_id(update.task_id);
                self.context_id = usable_id(update.context_id);
                self.artifact(&update.artifact, update.append.unwrap_or(false));
            }
        }
    }

    /// Takes in a whole task (a snapshot replaces what was known of its artifacts).
    pub fn task(&mut self, task: Task) {
        self.task_id = usable_id(task.id);
        self.context_id = usable_id(task.context_id);
        if let Some(artifacts) = &task.artifacts {
            self.artifacts.clear();
            for artifact in artifacts {
                self.artifact(artifact, false);
            }
        }
        self.status(task.status.state, task.status.message.as_ref());
    }

    fn message(&mut self, message: Message) {
        if let Some(context) = &message.context_id {
            self.context_id = usable_id(context.clone());
        }
        self.message = Some(message_text(&message));
    }

    fn status(&mut self, state: TaskState, message: Option<&Message>) {
        let working = state == TaskState::Working;
        self.state = state;
        let text = message.map(message_text).filter(|text| !text.is_empty());
        // A status says what it says now: an earlier question is not part of the answer.
        if working {
            self.status_text = None;
            if text.is_some() {
                self.working = text;
            }
        } else {
            self.status_text = text;
        }
    }

    fn artifact(&mut self, artifact: &Artifact, append: bool) {
        let text = parts_text(&artifact.parts);
        let text = bounded(text);
        let room = self.artifacts.len() < MAX_ARTIFACTS;
        match self
            .artifacts
            .iter_mut()
            .find(|(id, _)| *id == artifact.artifact_id)
        {
            Some((_, known)) if append && known.len() < MAX_TEXT => {
                known.push_str(&text);
                *known = bounded(std::mem::take(known));
            }
            Some(_) if append => {}
            Some((_, known)) => *known = text,
            None if room => {
                self.artifacts.push((artifact.artifact_id.clone(), text));
            }
            None => {}
        }
    }

    /// The answer, once the task is final or waits for someone; `None` while it works.
    pub fn answer(&self) -> Option<Answer> {
        if let Some(text) = &self.message {
            return Some(Answer::Done { text: text.clone() });
        }
        let said = || {
            let mut parts: Vec<&str> = self
                .artifacts
                .iter()
                .map(|(_, text)| text.as_str())
                .filter(|text| !text.is_empty())
                .collect();
            if let Some(status) = &self.status_text
                && !parts.contains(&status.as_str())
            {
                parts.push(status);
            }
            parts.join("\n\n")
        };
        let ended = |state: &'static str| Answer::Ended {
            state,
            text: said(),
        };
        match self.state {
            TaskState::Completed => Some(Answer::Done { text: said() }),
            // Asked with an id it cannot be answered by: nothing can go on with it.
            TaskState::InputRequired | TaskState::AuthRequired if self.task_id.is_none() => {
                Some(ended("asked, with a task id Roundtable cannot keep, in"))
            }
            TaskState::InputRequired | TaskState::AuthRequired => Some(Answer::Needs {
                task_id: self.task_id.clone()?,
                question: self
                    .status_text
                    .clone()
                    .unwrap_or_else(|| "it needs more input to go on".to_owned()),
                auth: matches!(self.state, TaskState::AuthRequired),
            }),
            TaskState::Failed => Some(ended("failed")),
            TaskState::Rejected => Some(ended("rejected")),
            TaskState::Canceled => Some(ended("canceled")),
            TaskState::Submitted | TaskState::Working | TaskState::Unspecified => None,
        }
    }
}

/// `text` within [`MAX_TEXT`], cut on a character boundary.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Cuts `text` to at most `max` bytes on a character boundary, saying so when it does.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    const MARK: &str = "\n[… cut: the remote agent's answer was longer]";
    let mut end = max.saturating_sub(MARK.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a::{Role, TaskStatus};

    fn message(text: &str) -> Message {
        Message::new(Role::Agent, vec![Part::text(text)])
    }

    fn task(state: TaskState, status: Option<&str>, artifacts: &[(&str, &str)]) -> Task {
        Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state,
                message: status.map(message),
                timestamp: None,
            },
            artifacts: (!artifacts.is_empty()).then(|| {
                artifacts
                    .iter()
                    .map(|(id, text)| Artifact {
                        artifact_id: (*id).into(),
                        name: None,
                        description: None,
                        parts: vec![Part::text(*text)],
                        metadata: None,
                        extensions: None,
                    })
                    .collect()
            }),
            history: None,
            metadata: None,
        }
    }

    #[test]
    fn a_completed_task_says_its_artifacts_then_its_status() {
        let mut fold = Fold::default();
        fold.task(task(TaskState::Working, Some("looking"), &[]));
        assert_eq!(fold.answer(), None);
        assert_eq!(fold.working.as_deref(), Some("looking"));
        fold.task(task(
            TaskState::Completed,
            Some("done"),
            &[("a", "sunny"), ("b", "")],
        ));
        assert_eq!(
            fold.answer(),
            Some(Answer::Done {
                text: "sunny\n\ndone".into()
            })
        );
        assert_eq!(fold.context_id.as_deref(), Some("c1"));
    }

    #[test]
    fn ids_the_hub_cannot_keep_are_no_ids() {
        let mut fold = Fold::default();
        let mut hostile = task(TaskState::InputRequired, Some("which city?"), &[]);
        hostile.id = "t\u{0}1".into();
        hostile.context_id = "c".repeat(MAX_ID + 1);
        fold.task(hostile);
        assert_eq!(fold.context_id, None);
        assert_eq!(fold.task_id, None);
        // A question no answer could reach: the task is over for the room.
        assert!(
            matches!(fold.answer(), Some(Answer::Ended { state, .. }) if state.contains("cannot keep")),
            "{:?}",
            fold.answer()
        );
        let mut fold = Fold::default();
        let mut fine = task(TaskState::InputRequired, Some("which city?"), &[]);
        fine.context_id = "ctx-\u{202E}".into();
        fold.task(fine);
        assert_eq!(
            (fold.task_id.as_deref(), fold.context_id.as_deref()),
            (Some("t1"), None)
        );
        assert!(matches!(fold.answer(), Some(Answer::Needs { .. })));
    }

    #[test]
    fn streamed_artifact_chunks_append_and_input_required_asks() {
        let mut fold = Fold::default();
        fold.event(StreamResponse::Task(task(TaskState::Submitted, None, &[])));
        for (chunk, append) in [("hel", false), ("lo", true)] {
            fold.event(StreamResponse::ArtifactUpdate(
                a2a::TaskArtifactUpdateEvent {
                    task_id: "t1".into(),
                    context_id: "c1".into(),
                    artifact: Artifact {
                        artifact_id: "a".into(),
                        name: None,
                        description: None,
                        parts: vec![Part::text(chunk)],
                        metadata: None,
                        extensions: None,
                    },
                    append: Some(append),
                    last_chunk: None,
                    metadata: None,
                },
            ));
        }
        fold.event(StreamResponse::StatusUpdate(a2a::TaskStatusUpdateEvent {
            task_id: "t1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state: TaskState::InputRequired,
                message: Some(message("which city?")),
                timestamp: None,
            },
            metadata: None,
        }));
        assert_eq!(
            fold.answer(),
            Some(Answer::Needs {
                task_id: "t1".into(),
                question: "which city?".into(),
                auth: false
            })
        );
        fold.event(StreamResponse::StatusUpdate(a2a::TaskStatusUpdateEvent {
            task_id: "t1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: None,
            },
            metadata: None,
        }));
        // The question is not the answer: only what came after it is said.
        assert_eq!(
            fold.answer(),
            Some(Answer::Done {
                text: "hello".into()
            })
        );
    }

    #[test]
    fn a_message_answers_at_once_and_failures_say_their_state() {
        let mut fold = Fold::default();
        fold.response(SendMessageResponse::Message(message("hi")));
        assert_eq!(fold.answer(), Some(Answer::Done { text: "hi".into() }));
        for (state, name) in [
            (TaskState::Failed, "failed"),
            (TaskState::Rejected, "rejected"),
            (TaskState::Canceled, "canceled"),
        ] {
            let mut fold = Fold::default();
            fold.response(SendMessageResponse::Task(task(state, Some("no"), &[])));
            assert_eq!(
                fold.answer(),
                Some(Answer::Ended {
                    state: name,
                    text: "no".into()
                })
            );
        }
        let mut fold = Fold::default();
        fold.task(task(TaskState::AuthRequired, None, &[]));
        assert!(matches!(
            fold.answer(),
            Some(Answer::Needs { auth: true, .. })
        ));
    }

    #[test]
    fn an_endless_stream_is_kept_within_bounds() {
        let mut fold = Fold::default();
        for index in 0..1000 {
            fold.event(StreamResponse::ArtifactUpdate(
                a2a::TaskArtifactUpdateEvent {
                    task_id: "t1".into(),
                    context_id: "c1".into(),
                    artifact: Artifact {
                        artifact_id: format!("a{}", index % 100),
                        name: None,
                        description: None,
                        parts: vec![Part::text("x".repeat(10_000))],
                        metadata: None,
                        extensions: None,
                    },
                    append: Some(true),
                    last_chunk: None,
                    metadata: None,
                },
            ));
        }
        assert_eq!(fold.artifacts.len(), MAX_ARTIFACTS);
        assert!(
            fold.artifacts
                .iter()
                .all(|(_, text)| text.len() <= MAX_TEXT)
        );
    }

    #[test]
    fn cuts_keep_characters_whole_and_say_so() {
        assert_eq!(cut("short", 100), "short");
        let long = "é".repeat(100);
        let cut_text = cut(&long, 80);
        assert!(cut_text.len() <= 80);
        assert!(cut_text.ends_with("longer]"));
    }
}
