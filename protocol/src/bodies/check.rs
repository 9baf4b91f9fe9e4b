//! A body a client wrote, parsed and checked once: only its kind's fields, every string
//! against its shape, paths and lists within their bounds; and a work body cleaned of what
//! a client does not control.

use super::*;

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError {
    /// `bad_frame` or `too_large`.
    pub code: ErrorCode,
    pub msg: String,
}

impl BodyError {
    fn bad(msg: impl Into<String>) -> BodyError {
        BodyError {
            code: ErrorCode::BadFrame,
            msg: msg.into(),
        }
    }
}

/// A body a client wrote, parsed once and checked: what the hub acts on and stores.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientBody {
    Message(MessageBody),
    Tasks(TasksBody),
    Arch(ArchBody),
    Usage(UsageBody),
    Status(StatusBody),
    Ping(PingBody),
    Answer(AnswerBody),
    /// `x-…`: opaque to the hub.
    Extension,
}

impl ClientBody {
    /// The agent whose work a `usage`, `tasks` or `arch` status reports, as the typed body
    /// names it (`session.agent`; an `arch` status's `agent`); `None` for other kinds and for
    /// an `arch` status about its sender.
    pub fn reported_agent(&self) -> Option<&str> {
        match self {
            ClientBody::Usage(usage) => Some(&usage.session.agent),
            ClientBody::Tasks(tasks) => Some(&tasks.session.agent),
            ClientBody::Arch(ArchBody::Status { agent, .. }) => agent.as_deref(),
            _ => None,
        }
    }
}

/// Checks that `body` is a valid body of the client-writable `kind`, within size limits.
/// `serialized_len` is the length in bytes of the body as it will be stored.
pub fn validate_client_body(
    kind: &EventKind,
    body: &Value,
    serialized_len: usize,
) -> Result<(), BodyError> {
    parse_client_body(kind, body, serialized_len).map(drop)
}

/// Parses the body of a `send` of the client-writable `kind` into its type and checks it:
/// its shape, its size limits, and every string in it ([`crate::text::Shape`]: no NUL
/// anywhere, ids and paths printable, prose without control characters but line breaks and
/// tabs). Work bodies (`tasks`, `usage`, `arch`) take no fields besides their own, so what
/// the hub checks (whose work it is) is what clients show. `serialized_len` is the length in
/// bytes of the body as it will be stored.
pub fn parse_client_body(
    kind: &EventKind,
    body: &Value,
    serialized_len: usize,
) -> Result<ClientBody, BodyError> {
    if !kind.is_client_writable() {
        return Err(BodyError::bad(format!(
            "kind {:?} is written by the hub only; send message, tasks, arch, usage, status, \
             ping, answer or x-<name>",
            kind.as_str()
        )));
    }
    if !body.is_object() {
        return Err(BodyError::bad(format!(
            "the body of a {} event must be a JSON object",
            kind.as_str()
        )));
    }
    if serialized_len > limits::EVENT_BODY {
        return Err(BodyError {
            code: ErrorCode::TooLarge,
            msg: format!(
                "the body is {serialized_len} bytes; the limit is {} bytes",
                limits::EVENT_BODY
            ),
        });
    }
    let name = kind.as_str();
    text::check_no_nul("body", body).map_err(|refused| refused_in(name, refused))?;
    fn typed<T: serde::de::DeserializeOwned>(kind: &str, body: &Value) -> Result<T, BodyError> {
        T::deserialize(body)
            .map_err(|error| BodyError::bad(format!("invalid {kind} body: {error}")))
    }
    let parsed = match kind {
        EventKind::Message => {
            let message: MessageBody = typed(name, body)?;
            if message.text.len() > limits::MESSAGE_TEXT {
                return Err(BodyError {
                    code: ErrorCode::TooLarge,
                    msg: format!(
                        "the message text is {} bytes; the limit is {} bytes: split it into \
                         several messages",
                        message.text.len(),
                        limits::MESSAGE_TEXT
                    ),
                });
            }
            ClientBody::Message(message)
        }
        EventKind::Tasks => {
            only_fields(name, body, "body", &["session", "source", "tasks"])?;
            only_fields(name, &body["session"], "body.session", SESSION_FIELDS)?;
            each_only_fields(
                name,
                &body["tasks"],
                "body.tasks",
                &["id", "title", "status", "active_form"],
            )?;
            ClientBody::Tasks(typed(name, body)?)
        }
        EventKind::Arch => {
            if body.get("define").is_some() {
                only_fields(name, body, "body", &["define", "source"])?;
                each_only_fields(
                    name,
                    &body["define"],
                    "body.define",
                    &["id", "name", "description", "paths", "depends_on"],
                )?;
                let define: DefineOnly = typed(name, body)?;
                ClientBody::Arch(ArchBody::Define {
                    define: define.define,
                    source: define.source,
                })
            } else if body.get("component").is_some() {
                only_fields(
                    name,
                    body,
                    "body",
                    &["component", "status", "note", "files", "agent", "claim"],
                )?;
                let status: StatusOnly = typed(name, body)?;
                ClientBody::Arch(ArchBody::Status {
                    component: status.component,
                    status: status.status,
                    note: status.note,
                    files: status.files,
                    agent: status.agent,
                    claim: status.claim,
                })
            } else {
                return Err(BodyError::bad(
                    "invalid arch body: give either \"define\" (a list of components) or \
                     \"component\" and \"status\"",
                ));
            }
        }
        EventKind::Usage => {
            only_fields(
                name,
                body,
                "body",
                &[
                    "session",
                    "model",
                    "input",
                    "output",
                    "cache_write",
                    "cache_read",
                    "cost_usd",
                    "from",
                    "to",
                ],
            )?;
            only_fields(name, &body["session"], "body.session", SESSION_FIELDS)?;
            let usage: UsageBody = typed(name, body)?;
            for (field, value) in [("from", &usage.from), ("to", &usage.to)] {
                if ts::parse_millis(value).is_none() {
                    return Err(BodyError::bad(format!(
                        "invalid usage body: {field} must be an RFC 3339 timestamp"
                    )));
                }
            }
            if usage
                .cost_usd
                .is_some_and(|cost| !cost.is_finite() || cost < 0.0)
            {
                return Err(BodyError::bad(
                    "invalid usage body: cost_usd must be a finite, non-negative number",
                ));
            }
            ClientBody::Usage(usage)
        }
        EventKind::Status => ClientBody::Status(typed(name, body)?),
        EventKind::Ping => {
            let ping: PingBody = typed(name, body)?;
            if ping.ping.is_empty() || ping.ping.len() > 128 {
                return Err(BodyError::bad(
                    "invalid ping body: ping must be an id of 1 to 128 bytes",
                ));
            }
            if let Some(expires_at) = &ping.expires_at
                && ts::parse_millis(expires_at).is_none()
            {
                return Err(BodyError::bad(
                    "invalid ping body: expires_at must be an RFC 3339 timestamp",
                ));
            }
            ClientBody::Ping(ping)
        }
        EventKind::Answer => {
            let answer: AnswerBody = typed(name, body)?;
            if answer.choice.is_none() && answer.text.is_none() {
                return Err(BodyError::bad(
                    "invalid answer body: give a choice or a text",
                ));
            }
            ClientBody::Answer(answer)
        }
        EventKind::Extension(_) => ClientBody::Extension,
        EventKind::Member
        | EventKind::Room
        | EventKind::Contact
        | EventKind::RoomAdded
        | EventKind::RoomRemoved
        | EventKind::Control => unreachable!("refused above as hub-written"),
    };
    let mut parsed = parsed;
    check_strings(&mut parsed).map_err(|refused| refused_in(name, refused))?;
    if let ClientBody::Arch(arch) = &parsed {
        path_lengths(arch)?;
    }
    Ok(parsed)
}

/// The fields of a work body's `session`.
pub(super) const SESSION_FIELDS: &[&str] = &["agent", "framework", "session_id"];

pub(super) fn refused_in(kind: &str, refused: RefusedString) -> BodyError {
    BodyError::bad(format!("invalid {kind} body: {refused}"))
}

/// Refuses a field of an object `at` other than `allowed` (a work body's, so that no field
/// the hub does not check can change what clients show). Not an object: left to the typed
/// parse, which says what it should be.
pub(super) fn only_fields(
    kind: &str,
    value: &Value,
    at: &str,
    allowed: &[&str],
) -> Result<(), BodyError> {
    let Some(fields) = value.as_object() else {
        return Ok(());
    };
    match fields.keys().find(|key| !allowed.contains(&key.as_str())) {
        None => Ok(()),
        Some(unknown) => Err(BodyError::bad(format!(
            "invalid {kind} body: {at} has an unknown field {unknown:?}; its fields are {}",
            allowed.join(", ")
        ))),
    }
}

/// What [`visit_strings`] calls for each string: its field's name (made only when needed),
/// the string, and its shape.
type StringVisit<'v> =
    dyn FnMut(&dyn Fn() -> String, &mut String, Shape) -> Result<(), RefusedString> + 'v;

/// Calls `visit` on every string of a parsed body with its field and [`Shape`]: the one
/// table of which field is which shape, for checking ([`check_strings`]) and cleaning
/// ([`clean_work_body`]).
pub(super) fn visit_strings(
    body: &mut ClientBody,
    visit: &mut StringVisit<'_>,
) -> Result<(), RefusedString> {
    use Shape::{Identifier, Line, Prose};
    fn named(field: &'static str) -> impl Fn() -> String {
        move || field.to_owned()
    }
    fn each(
        field: &'static str,
        values: &mut [String],
        shape: Shape,
        visit: &mut StringVisit<'_>,
    ) -> Result<(), RefusedString> {
        values
            .iter_mut()
            .enumerate()
            .try_for_each(|(index, value)| visit(&|| format!("{field}[{index}]"), value, shape))
    }
    fn maybe(
        field: &'static str,
        value: &mut Option<String>,
        shape: Shape,
        visit: &mut StringVisit<'_>,
    ) -> Result<(), RefusedString> {
        match value {
            Some(value) => visit(&named(field), value, shape),
            None => Ok(()),
        }
    }
    fn session(session: &mut SessionRef, visit: &mut StringVisit<'_>) -> Result<(), RefusedString> {
        visit(&named("body.session.agent"), &mut session.agent, Identifier)?;
        visit(
            &named("body.session.framework"),
            &mut session.framework,
            Identifier,
        )?;
        visit(
            &named("body.session.session_id"),
            &mut session.session_id,
            Identifier,
        )
    }
    match body {
        ClientBody::Message(message) => {
            visit(&named("body.text"), &mut message.text, Prose)?;
            each(
                "body.mentions",
                message.mentions.as_deref_mut().unwrap_or_default(),
                Identifier,
                visit,
            )?;
            maybe("body.reply_to", &mut message.reply_to, Identifier, visit)
        }
        ClientBody::Tasks(tasks) => {
            session(&mut tasks.session, visit)?;
            visit(&named("body.source"), &mut tasks.source, Line)?;
            tasks
                .tasks
                .iter_mut()
                .enumerate()
                .try_for_each(|(index, task)| {
                    let field = |name: &'static str| move || format!("body.tasks[{index}].{name}");
                    if let Some(id) = &mut task.id {
                        visit(&field("id"), id, Identifier)?;
                    }
                    visit(&field("title"), &mut task.title, Prose)?;
                    match &mut task.active_form {
                        Some(active) => visit(&field("active_form"), active, Prose),
                        None => Ok(()),
                    }
                })
        }
        ClientBody::Arch(ArchBody::Define { define, source }) => {
            maybe("body.source", source, Line, visit)?;
            define
                .iter_mut()
                .enumerate()
                .try_for_each(|(index, component)| {
                    let field = |name: &'static str| move || format!("body.define[{index}].{name}");
                    visit(&field("id"), &mut component.id, Identifier)?;
                    visit(&field("name"), &mut component.name, Line)?;
                    if let Some(description) = &mut component.description {
                        visit(&field("description"), description, Prose)?;
                    }
                    for (at, path) in component.paths.iter_mut().enumerate() {
                        visit(
                            &|| format!("body.define[{index}].paths[{at}]"),
                            path,
                            Identifier,
                        )?;
                    }
                    for (at, dependency) in component.depends_on.iter_mut().enumerate() {
                        visit(
                            &|| format!("body.define[{index}].depends_on[{at}]"),
                            dependency,
                            Identifier,
                        )?;
                    }
                    Ok(())
                })
        }
        ClientBody::Arch(ArchBody::Status {
            component,
            note,
            files,
            agent,
            ..
        }) => {
            visit(&named("body.component"), component, Identifier)?;
            maybe("body.note", note, Prose, visit)?;
            maybe("body.agent", agent, Identifier, visit)?;
            each(
                "body.files",
                files.as_deref_mut().unwrap_or_default(),
                Identifier,
                visit,
            )
        }
        ClientBody::Usage(usage) => {
            session(&mut usage.session, visit)?;
            visit(&named("body.model"), &mut usage.model, Line)
        }
        ClientBody::Status(status) => maybe("body.detail", &mut status.detail, Prose, visit),
        ClientBody::Ping(ping) => {
            visit(&named("body.ping"), &mut ping.ping, Identifier)?;
            visit(&named("body.question"), &mut ping.question, Prose)?;
            each(
                "body.options",
                ping.options.as_deref_mut().unwrap_or_default(),
                Line,
                visit,
            )?;
            each(
                "body.to",
                ping.to.as_deref_mut().unwrap_or_default(),
                Identifier,
                visit,
            )
        }
        ClientBody::Answer(answer) => {
            visit(&named("body.ping"), &mut answer.ping, Identifier)?;
            maybe("body.choice", &mut answer.choice, Line, visit)?;
            maybe("body.text", &mut answer.text, Prose, visit)
        }
        ClientBody::Extension => Ok(()),
    }
}

/// [`only_fields`] for each object of an array `at` (not an array: left to the typed parse).
pub(super) fn each_only_fields(
    kind: &str,
    items: &Value,
    at: &str,
    allowed: &[&str],
) -> Result<(), BodyError> {
    items
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .try_for_each(|(index, item)| only_fields(kind, item, &format!("{at}[{index}]"), allowed))
}

/// Checks the strings of a parsed body against their shapes.
pub(super) fn check_strings(body: &mut ClientBody) -> Result<(), RefusedString> {
    visit_strings(body, &mut |field, value, shape| {
        text::check(field, value, shape)
    })
}

/// A work body (`tasks`, `usage`, `arch`) a client makes from what it does not control (an
/// agent's logs, a repository's manifests) with every character its field refuses taken
/// out, and paths the hub would refuse (blank, too long, past [`limits::ARCH_FILES`]) left
/// out, so that one odd character does not keep the rest of the work unpublished. Other
/// bodies, and bodies of the wrong shape (which the hub refuses anyway), are returned as
/// they are.
pub fn clean_work_body(kind: &EventKind, body: Value) -> Value {
    let parsed = match kind {
        EventKind::Tasks => TasksBody::deserialize(&body).map(ClientBody::Tasks),
        EventKind::Usage => UsageBody::deserialize(&body).map(ClientBody::Usage),
        EventKind::Arch => ArchBody::deserialize(&body).map(ClientBody::Arch),
        _ => return body,
    };
    let Ok(mut parsed) = parsed else {
        return body;
    };
    let _ = visit_strings(&mut parsed, &mut |_, value, shape| {
        if let std::borrow::Cow::Owned(clean) = text::cleaned(value, shape) {
            *value = clean;
        }
        Ok(())
    });
    let usable = |path: &String| !path.trim().is_empty() && path.len() <= limits::PATH;
    let cleaned = match parsed {
        ClientBody::Tasks(tasks) => serde_json::to_value(tasks),
        ClientBody::Usage(usage) => serde_json::to_value(usage),
        ClientBody::Arch(ArchBody::Status {
            component,
            status,
            note,
            files,
            agent,
            claim,
        }) => {
            let files = files
                .map(|files| {
                    let mut kept: Vec<String> = files.into_iter().filter(usable).collect();
                    let past = kept.len().saturating_sub(limits::ARCH_FILES);
                    kept.drain(..past);
                    kept
                })
                .filter(|files| !files.is_empty());
            serde_json::to_value(ArchBody::Status {
                component,
                status,
                note,
                files,
                agent,
                claim,
            })
        }
        ClientBody::Arch(ArchBody::Define { mut define, source }) => {
            for component in &mut define {
                component.paths.retain(usable);
            }
            serde_json::to_value(ArchBody::Define { define, source })
        }
        _ => return body,
    };
    cleaned.unwrap_or(body)
}

/// Refuses a path of an `arch` body (a status's `files`, a component's `paths`) that is blank
/// or longer than [`limits::PATH`].
pub(super) fn path_lengths(body: &ArchBody) -> Result<(), BodyError> {
    let paths: Vec<(String, &String)> = match body {
        ArchBody::Status { files, .. } => files
            .iter()
            .flatten()
            .enumerate()
            .map(|(index, file)| (format!("body.files[{index}]"), file))
            .collect(),
        ArchBody::Define { define, .. } => define
            .iter()
            .enumerate()
            .flat_map(|(index, component)| {
                component
                    .paths
                    .iter()
                    .enumerate()
                    .map(move |(at, path)| (format!("body.define[{index}].paths[{at}]"), path))
            })
            .collect(),
    };
    match paths
        .into_iter()
        .find(|(_, path)| path.trim().is_empty() || path.len() > limits::PATH)
    {
        None => Ok(()),
        Some((field, path)) => Err(BodyError::bad(format!(
            "invalid arch body: {field} is {} bytes; a path has 1 to {} bytes and is not blank",
            path.len(),
            limits::PATH
        ))),
    }
}

/// The `define` form of `arch`, checked on its own so errors name the right fields.
#[derive(Deserialize)]
pub(super) struct DefineOnly {
    define: Vec<ComponentDef>,
    #[serde(default)]
    source: Option<String>,
}

/// The status form of `arch`.
#[derive(Deserialize)]
pub(super) struct StatusOnly {
    component: String,
    status: ComponentStatus,
    #[serde(default)]
    note: Option<String>,
    #[serde(default, deserialize_with = "bounded_files")]
    files: Option<Vec<String>>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    claim: Option<bool>,
}

/// `files` of an `arch` status: at most [`limits::ARCH_FILES`] (the body's size bounds how
/// many are read before that is known).
pub(super) fn bounded_files<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    let files: Option<Vec<String>> = Option::deserialize(deserializer)?;
    match &files {
        Some(files) if files.len() > limits::ARCH_FILES => Err(serde::de::Error::custom(format!(
            "files lists {} paths; the limit is {}: name the ones you changed last",
            files.len(),
            limits::ARCH_FILES
        ))),
        _ => Ok(files),
    }
}
