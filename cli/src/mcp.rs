//! `roundtable mcp --agent HANDLE`: the MCP server an agent CLI (Claude Code, Codex, Gemini
//! CLI) launches over stdio to join Roundtable as that agent. Each tool is a few lines over
//! the core, which holds the agent's own cache, syncs it, and takes over writes that the
//! agent's hooks hand to it.
//!
//! Both MCP protocol generations are served by rmcp: 2025-11-25 (an `initialize`
//! handshake; questions to the user as `elicitation/create` requests) and 2026-07-28
//! (stateless requests; questions as `input_required` results). `ask_human` uses whichever
//! the client speaks when it declares elicitation, and otherwise raises a ping in the
//! agent's home room that its person answers from anywhere.

use std::time::Duration;

use rmcp::handler::server::tool::{InputResponses, RequestState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationSchema, InputRequest, InputRequests,
    InputRequiredResult,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use roundtable_core::agent_work::{HumanAnswer, LONGEST_WAIT};
use roundtable_core::client::PATIENCE;
use roundtable_core::{Core, CoreError, Delivered, SyncOptions, profile};
use roundtable_protocol::bodies::{AgentState, ComponentDef, ComponentStatus, Task, TaskStatus};
use roundtable_protocol::client::{ContactRequestCmd, Directory, RoomCreate, RoomInvite};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The bridge: one agent's core.
#[derive(Clone)]
pub struct Bridge {
    core: Core,
    /// Names the task lists this bridge reports when the agent gives no session.
    session: String,
}

/// A tool's answer as text the model reads: JSON, pretty enough to scan.
fn answer(value: impl serde::Serialize) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| "null".into());
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// A failure the model should read and act on: the core's message says what to do.
fn failed(error: CoreError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{} ({})",
        error,
        error.code()
    ))])
}

fn delivered(result: Result<Delivered, CoreError>) -> CallToolResult {
    match result {
        Ok(Delivered::Sent { seq, .. }) => answer(json!({"sent": true, "seq": seq})),
        Ok(Delivered::HandedOff { .. }) => answer(json!({"sent": true})),
        Ok(Delivered::Queued { reason, .. }) => answer(
            json!({"sent": false, "queued": true, "note": format!("the hub is unreachable ({reason}); it will be sent when it is back")}),
        ),
        Err(error) => failed(error),
    }
}

fn seconds(timeout_s: Option<u64>, default: u64) -> Duration {
    Duration::from_secs(timeout_s.unwrap_or(default)).min(LONGEST_WAIT)
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindAgents {
    /// Words to look for in handles, names and descriptions (all agents and people you may
    /// see when empty).
    #[serde(default)]
    query: Option<String>,
    /// At most this many (default 20).
    #[serde(default)]
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RequestContact {
    /// The handle to ask: `user` or `user/agent`.
    handle: String,
    /// A short note shown with the request (up to 500 bytes).
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateRoom {
    /// The room's title, used to name it in later calls.
    title: String,
    #[serde(default)]
    topic: Option<String>,
    /// Handles to add (each must be your kin or a contact).
    #[serde(default)]
    members: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Invite {
    /// The room's title or id.
    room: String,
    /// The handle to add: `user` or `user/agent`.
    handle: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendMessage {
    /// The room's title or id.
    room: String,
    /// The message. Write `@handle` to mention a member: a mentioned agent is woken up.
    text: String,
    /// The id of the message this one answers.
    #[serde(default)]
    reply_to: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadMessages {
    /// Only this room (title or id); all rooms when empty.
    #[serde(default)]
    room: Option<String>,
    /// Only messages you have not read yet (default true). With false, `room` is required
    /// and the latest `limit` messages are returned.
    #[serde(default)]
    unread_only: Option<bool>,
    /// With `unread_only: false`, how many of the latest messages (default 30).
    #[serde(default)]
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WaitForMessages {
    /// How long to wait, in seconds (default 300, at most 600).
    #[serde(default)]
    timeout_s: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Working,
    Idle,
    WaitingHuman,
    Error,
    Stopped,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetStatus {
    /// What you are doing: working, idle, waiting_human, error or stopped.
    state: State,
    /// A few words on it.
    #[serde(default)]
    detail: Option<String>,
    /// The room to say it in (title or id); your home room when empty.
    #[serde(default)]
    room: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Component {
    /// A short stable id (e.g. `parser`).
    id: String,
    /// A readable name.
    name: String,
    #[serde(default)]
    description: Option<String>,
    /// Globs of the files that belong to it (e.g. `src/parser/**`).
    #[serde(default)]
    paths: Vec<String>,
    /// Ids of the components it depends on.
    #[serde(default)]
    depends_on: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DefineComponents {
    /// The room whose architecture board this is (title or id).
    room: String,
    components: Vec<Component>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Progress {
    Idle,
    Working,
    Done,
    Blocked,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateComponent {
    /// The room (title or id).
    room: String,
    /// The component's id.
    component: String,
    /// idle, working, done or blocked.
    status: Progress,
    /// Why, or what is left.
    #[serde(default)]
    note: Option<String>,
    /// Files you changed in it.
    #[serde(default)]
    files: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClaimComponent {
    /// The room (title or id) whose architecture board has the component.
    room: String,
    /// The component's id.
    component: String,
    /// What you are doing in it, for the others.
    #[serde(default)]
    note: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReleaseComponent {
    /// The room (title or id).
    room: String,
    /// The component's id.
    component: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Pending,
    InProgress,
    Completed,
    Deleted,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskItem {
    #[serde(default)]
    id: Option<String>,
    title: String,
    status: Step,
    /// What you are doing, as a phrase (e.g. "Writing the parser").
    #[serde(default)]
    active_form: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReportTasks {
    /// Your whole task list (it replaces the last one you reported).
    tasks: Vec<TaskItem>,
    /// The room to report to (title or id); your home room when empty.
    #[serde(default)]
    room: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskHuman {
    /// The question, with what the person needs to answer it.
    question: String,
    /// The answers to choose from (free text when empty).
    #[serde(default)]
    options: Vec<String>,
    /// How long to wait, in seconds (default 600, at most 600).
    #[serde(default)]
    timeout_s: Option<u64>,
}

/// The answer a person gives through the agent CLI's own prompt.
#[derive(Debug, Deserialize)]
struct Elicited {
    #[serde(default)]
    answer: Option<String>,
}

#[tool_router]
impl Bridge {
    #[tool(
        description = "Who you are on Roundtable: your handle, your owner, your home room (where you and your person talk)."
    )]
    async fn whoami(&self) -> CallToolResult {
        let profile = self.core.profile();
        let home = self.core.home_room().await.ok();
        let owner = self.core.owner().await.ok().flatten();
        answer(json!({
            "handle": profile.handle, "id": profile.principal, "hub": profile.hub.to_string(),
            "owner": owner, "home_room": home,
        }))
    }

    #[tool(
        description = "Find agents and people you may see on the hub, with whether they are already your contacts. Use it to learn a handle before inviting or mentioning someone."
    )]
    async fn find_agents(&self, Parameters(args): Parameters<FindAgents>) -> CallToolResult {
        let found = self
            .call(Directory {
                id: 0,
                query: args.query,
                limit: Some(args.limit.unwrap_or(20)),
            })
            .await;
        match found {
            Ok(found) => answer(found.entries),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Ask someone (`user` or `user/agent`) to become a contact. You can invite them into rooms once they (or their owner) accept."
    )]
    async fn request_contact(
        &self,
        Parameters(args): Parameters<RequestContact>,
    ) -> CallToolResult {
        match self
            .call(ContactRequestCmd {
                id: 0,
                to: args.handle,
                message: args.message,
            })
            .await
        {
            Ok(asked) => answer(asked.request),
            Err(error) => failed(error),
        }
    }

    #[tool(description = "The rooms you are in, with their members and unread counts.")]
    async fn list_rooms(&self) -> CallToolResult {
        if let Err(error) = self.core.synced(PATIENCE).await {
            return failed(error);
        }
        match self.core.rooms().await {
            Ok(rooms) => answer(rooms),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Create a room (you are its first member) with the given members: your kin (your owner and its other agents), your contacts, or your owner's contacts (a contact's agent only once it is a contact itself)."
    )]
    async fn create_room(&self, Parameters(args): Parameters<CreateRoom>) -> CallToolResult {
        match self
            .call(RoomCreate {
                id: 0,
                title: Some(args.title),
                topic: args.topic,
                members: args.members,
            })
            .await
        {
            Ok(created) => answer(created.room),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Add someone (`user` or `user/agent`) to a room you are in: your kin, your contacts, or your owner's contacts (a contact's agent only once it is a contact itself)."
    )]
    async fn invite(&self, Parameters(args): Parameters<Invite>) -> CallToolResult {
        let room = match self.core.room_id(&args.room).await {
            Ok(room) => room,
            Err(error) => return failed(error),
        };
        match self
            .call(RoomInvite {
                id: 0,
                room: room.clone(),
                handle: args.handle.clone(),
            })
            .await
        {
            Ok(_) => answer(json!({"room": room, "invited": args.handle})),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Send a message to a room. Mention members with @handle to wake them: an agent sees the messages that mention it (or every message of a room of two)."
    )]
    async fn send_message(&self, Parameters(args): Parameters<SendMessage>) -> CallToolResult {
        let room = match self.core.room_id(&args.room).await {
            Ok(room) => room,
            Err(error) => return failed(error),
        };
        let mut body = json!({ "text": args.text });
        if let Some(reply_to) = args.reply_to {
            body["reply_to"] = json!(reply_to);
        }
        let queued = self.core.send(&room, "message", body).await;
        delivered(match queued {
            Ok(n) => self.core.deliver(n, PATIENCE).await,
            Err(error) => Err(error),
        })
    }

    #[tool(
        description = "Read the messages meant for you that you have not read yet (they count as read once returned); or, with unread_only false, the latest messages of a room."
    )]
    async fn read_messages(&self, Parameters(args): Parameters<ReadMessages>) -> CallToolResult {
        let room = match &args.room {
            Some(room) => match self.core.room_id(room).await {
                Ok(room) => Some(room),
                Err(error) => return failed(error),
            },
            None => None,
        };
        let messages = if args.unread_only.unwrap_or(true) {
            self.core.read_messages(room.as_deref()).await
        } else {
            match room {
                Some(room) => {
                    self.core
                        .room_messages(&room, args.limit.unwrap_or(30).min(500))
                        .await
                }
                None => Err(CoreError::Invalid(
                    "give a room to read its latest messages".into(),
                )),
            }
        };
        match messages {
            Ok(messages) => answer(messages),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Wait until a message for you arrives (a mention, a message in a room of two, or anything routed to you) and return it; or return nothing when the timeout passes. Use it when you are waiting for another agent or a person."
    )]
    async fn wait_for_messages(
        &self,
        Parameters(args): Parameters<WaitForMessages>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let waited = tokio::select! {
            waited = self.core.wait_for_messages(seconds(args.timeout_s, 300)) => waited,
            _ = ctx.ct.cancelled() => return answer(json!({"messages": [], "cancelled": true})),
        };
        match waited {
            Ok(messages) if messages.is_empty() => {
                answer(json!({"messages": [], "timed_out": true}))
            }
            Ok(messages) => answer(json!({ "messages": messages })),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Say what you are doing (working, idle, waiting_human, error, stopped) so your person and your teammates see it."
    )]
    async fn set_status(&self, Parameters(args): Parameters<SetStatus>) -> CallToolResult {
        let state = match args.state {
            State::Working => AgentState::Working,
            State::Idle => AgentState::Idle,
            State::WaitingHuman => AgentState::WaitingHuman,
            State::Error => AgentState::Error,
            State::Stopped => AgentState::Stopped,
        };
        delivered(
            self.core
                .set_status(state, args.detail.as_deref(), args.room.as_deref())
                .await,
        )
    }

    #[tool(
        description = "Define the components of a room's architecture board: ids, names, the file globs that belong to each, and their dependencies. They replace the components Roundtable inferred from the repository's manifests."
    )]
    async fn define_components(
        &self,
        Parameters(args): Parameters<DefineComponents>,
    ) -> CallToolResult {
        let components = args
            .components
            .into_iter()
            .map(|c| ComponentDef {
                id: c.id,
                name: c.name,
                description: c.description,
                paths: c.paths,
                depends_on: c.depends_on,
            })
            .collect();
        delivered(self.core.define_components(&args.room, components).await)
    }

    #[tool(
        description = "Report a component's status on the architecture board: working when you start on it, done when finished, blocked (with a note) when you cannot go on."
    )]
    async fn update_component(
        &self,
        Parameters(args): Parameters<UpdateComponent>,
    ) -> CallToolResult {
        let status = match args.status {
            Progress::Idle => ComponentStatus::Idle,
            Progress::Working => ComponentStatus::Working,
            Progress::Done => ComponentStatus::Done,
            Progress::Blocked => ComponentStatus::Blocked,
        };
        delivered(
            self.core
                .update_component(
                    &args.room,
                    &args.component,
                    status,
                    args.note.as_deref(),
                    args.files,
                )
                .await,
        )
    }

    #[tool(
        description = "Claim a component of a room's architecture board before working on it at length: other agents editing it are told that you hold it. Advisory, never a lock; release it when done."
    )]
    async fn claim_component(
        &self,
        Parameters(args): Parameters<ClaimComponent>,
    ) -> CallToolResult {
        delivered(
            self.core
                .claim_component(&args.room, &args.component, true, args.note.as_deref())
                .await,
        )
    }

    #[tool(description = "Release your claim on a component (see claim_component).")]
    async fn release_component(
        &self,
        Parameters(args): Parameters<ReleaseComponent>,
    ) -> CallToolResult {
        delivered(
            self.core
                .claim_component(&args.room, &args.component, false, None)
                .await,
        )
    }

    #[tool(
        description = "Report your task list (the whole list, which replaces the last one) so your person sees what you are doing."
    )]
    async fn report_tasks(&self, Parameters(args): Parameters<ReportTasks>) -> CallToolResult {
        let tasks = args
            .tasks
            .into_iter()
            .map(|task| Task {
                id: task.id,
                title: task.title,
                status: match task.status {
                    Step::Pending => TaskStatus::Pending,
                    Step::InProgress => TaskStatus::InProgress,
                    Step::Completed => TaskStatus::Completed,
                    Step::Deleted => TaskStatus::Deleted,
                },
                active_form: task.active_form,
            })
            .collect();
        delivered(
            self.core
                .report_tasks(
                    "mcp",
                    &self.session,
                    "report_tasks",
                    tasks,
                    args.room.as_deref(),
                )
                .await,
        )
    }

    #[tool(
        description = "Ask your person a question and wait for the answer (up to the timeout). Give options when the answer is one of a few; the first answer from any of their devices wins."
    )]
    async fn ask_human(
        &self,
        Parameters(args): Parameters<AskHuman>,
        ctx: RequestContext<RoleServer>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> Result<CallToolResponse, ErrorData> {
        let can_elicit = ctx
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        if !can_elicit {
            let timeout = seconds(args.timeout_s, 600);
            let asked = tokio::select! {
                asked = self.core.ask_human(&args.question, &args.options, timeout) => asked,
                _ = ctx.ct.cancelled() => return Ok(answer(json!({"cancelled": true})).into()),
            };
            return Ok(match asked {
                Ok(answered) => human(answered),
                Err(error) => failed(error),
            }
            .into());
        }
        let schema = elicitation_schema(&args.options)?;
        let modern = ctx
            .protocol_version()
            .is_some_and(|version| !version.has_initialize());
        if !modern {
            let asked = ctx
                .peer
                .create_elicitation(ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: args.question.clone(),
                    requested_schema: schema,
                })
                .await;
            return Ok(match asked {
                Ok(result) => elicited(result),
                Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
                    "the question could not be asked: {error}"
                ))]),
            }
            .into());
        }
        // 2026-07-28: ask with an input request; the client calls again with the answer.
        match (state, responses) {
            (Some(_), Some(responses)) => {
                let result: ElicitResult =
                    serde_json::from_value(responses.get("answer").cloned().unwrap_or_default())
                        .map_err(|error| ErrorData::invalid_params(error.to_string(), None))?;
                Ok(elicited(result).into())
            }
            _ => {
                let mut requests = InputRequests::new();
                requests.insert(
                    "answer".into(),
                    InputRequest::Elicitation(ElicitRequest::new(
                        ElicitRequestParams::FormElicitationParams {
                            meta: None,
                            message: args.question,
                            requested_schema: schema,
                        },
                    )),
                );
                Ok(InputRequiredResult::new(Some(requests), Some("ask_human".into())).into())
            }
        }
    }
}

impl Bridge {
    async fn call<C: roundtable_protocol::client::Command>(
        &self,
        command: C,
    ) -> Result<C::Reply, CoreError> {
        self.core.synced(PATIENCE).await?;
        self.core.call(command, PATIENCE).await
    }
}

/// The form a person fills in: one of the options, or free text.
fn elicitation_schema(options: &[String]) -> Result<ElicitationSchema, ErrorData> {
    let answer = if options.is_empty() {
        json!({"type": "string", "title": "Answer"})
    } else {
        json!({"type": "string", "title": "Answer", "enum": options})
    };
    let schema = json!({
        "type": "object",
        "properties": { "answer": answer },
        "required": ["answer"],
    });
    let serde_json::Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    ElicitationSchema::from_json_schema(schema)
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
}

fn elicited(result: ElicitResult) -> CallToolResult {
    match result.action {
        ElicitationAction::Accept => {
            let answered: Elicited = result
                .content
                .and_then(|content| serde_json::from_value(content).ok())
                .unwrap_or(Elicited { answer: None });
            answer(json!({"answered": "yes", "answer": answered.answer, "via": "elicitation"}))
        }
        ElicitationAction::Decline => answer(json!({"answered": "declined"})),
        _ => answer(json!({"answered": "cancelled"})),
    }
}

fn human(answered: HumanAnswer) -> CallToolResult {
    match answered {
        HumanAnswer::Yes {
            by, choice, text, ..
        } => answer(json!({
            "answered": "yes", "answer": choice.clone().or(text.clone()), "choice": choice,
            "text": text, "by": by, "via": "ping",
        })),
        HumanAnswer::TimedOut { .. } => answer(json!({
            "answered": "timed_out",
            "note": "nobody answered in time; decide yourself, or ask again later",
        })),
    }
}

#[tool_handler(
    name = "roundtable",
    instructions = "Roundtable connects you with other agents and your person. Your messages: read_messages, wait_for_messages. Talk: send_message (mention @handles). Rooms: list_rooms, create_room, invite. Others: find_agents, request_contact. Say what you do: set_status, report_tasks, define_components, update_component; claim_component and release_component when you hold a component for a while (you are told when others edit yours). A decision only your person can make: ask_human. Keep your task list where your person sees it: if you have no task tool of your own (TaskCreate, TodoWrite, update_plan, write_todos), call report_tasks with your whole list whenever it changes."
)]
impl ServerHandler for Bridge {}

/// Runs the bridge over stdio until the agent CLI closes it.
pub async fn run(agent: &str) -> anyhow::Result<()> {
    // A session `roundtable run` started for another agent is that agent's: its own bridge
    // serves it, and this one (configured for the whole user) stays out.
    if let Ok(owner) = std::env::var(roundtable_core::runner::AGENT_ENV)
        && !owner.is_empty()
        && owner != agent
    {
        anyhow::bail!(
            "this session belongs to {owner} (started by `roundtable run`), not to {agent}: its own Roundtable server serves it"
        );
    }
    let base = profile::profiles_dir();
    let profile = profile::load_agent(&base, agent).map_err(|error| match error {
        profile::ProfileError::Missing { .. } => anyhow::anyhow!(
            "{error}; onboard the agent first (`roundtable agents onboard CLI --name NAME`)"
        ),
        error => error.into(),
    })?;
    let core = Core::open(profile).await?;
    let sync = core.start_with(SyncOptions {
        serve_hand_offs: true,
    });
    let bridge = Bridge {
        session: roundtable_core::random_key("mcp"),
        core,
    };
    let service = bridge.serve(rmcp::transport::stdio()).await?;
    let reason = service.waiting().await;
    tracing::debug!(?reason, "the MCP client went away");
    sync.stop().await;
    Ok(())
}
