//! The runner's turns over ACP (see [`crate::acp`]): the agent process, started once and
//! shared by the rooms' turns (started again if it ended), one session per room, a prompt
//! per batch of messages, and the agent's permission requests asked of its person.

use std::collections::HashMap;

use crate::acp::connection::{AcpAgent, AcpError, AgentRequest, SETUP_PATIENCE};
use crate::acp::updates::{TurnEnd, Update, read_permission, read_turn_end, session_model};
use crate::agent_work::{HumanAnswer, TurnSpent};

use super::*;

/// How the runner starts an agent CLI in its ACP mode (`roundtable run --acp`), and the
/// agent once started.
#[derive(Clone)]
pub struct AcpMode {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Set for the agent besides the runner's own (an adapter's CLI executable).
    pub env: Vec<(String, String)>,
    state: Arc<AcpState>,
}

impl std::fmt::Debug for AcpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpMode")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &self.env)
            .finish()
    }
}

#[derive(Default)]
struct AcpState {
    agent: tokio::sync::Mutex<Option<Running>>,
    /// The sessions this agent process made or loaded, with the model each said it uses.
    open: std::sync::Mutex<HashMap<String, Option<String>>>,
}

/// The agent, and what serves its permission requests (ended with it).
struct Running {
    agent: Arc<AcpAgent>,
    serving: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

impl AcpMode {
    /// `program args` speaks ACP on its stdio.
    pub fn new(program: PathBuf, args: Vec<String>) -> AcpMode {
        AcpMode {
            program,
            args,
            env: Vec::new(),
            state: Arc::default(),
        }
    }

    /// The same agent, with `name=value` in its environment.
    pub fn with_env(mut self, name: &str, value: String) -> AcpMode {
        self.env.push((name.to_owned(), value));
        self
    }

    fn is_open(&self, session: &str) -> bool {
        self.state
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains_key(session)
    }

    /// `session` was made or loaded, with `result` (which may name its model).
    fn opened(&self, session: &str, result: &Value) {
        self.state
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(session.to_owned(), session_model(result));
    }

    /// The model `session` said it uses, if it did.
    fn model_of(&self, session: &str) -> Option<String> {
        self.state
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(session)
            .cloned()
            .flatten()
    }
}

/// The model of a session that named none: unpriced.
const UNKNOWN_MODEL: &str = "unknown";

/// The most tool calls under way a turn keeps the files of, and files per call.
const MAX_CALLS_HELD: usize = 1024;
const MAX_FILES_HELD: usize = 256;

/// What the session said in a turn: its reply, and its tool calls under way.
#[derive(Default)]
struct Said {
    reply: String,
    calls: std::collections::HashMap<String, ToolCallSeen>,
}

/// A tool call's files and whether it edits them, from all its updates so far.
#[derive(Default)]
struct ToolCallSeen {
    files: Vec<String>,
    edits: bool,
}

/// What a permission request is answered with when no choice was made.
fn cancelled() -> Value {
    json!({"outcome": {"outcome": "cancelled"}})
}

impl Core {
    /// The agent, started if it is not running.
    async fn acp_agent(
        &self,
        settings: &RunSettings,
        acp: &AcpMode,
    ) -> Result<Arc<AcpAgent>, AcpError> {
        let mut slot = acp.state.agent.lock().await;
        if let Some(running) = slot.as_ref()
            && running.agent.alive()
        {
            return Ok(running.agent.clone());
        }
        acp.state
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
        // Its sessions are the runner's, for this agent. One process serves every room, so
        // no hook of its hands it a room's messages (the runner brings each room's to that
        // room's session): the room named is none.
        let mut env = acp.env.clone();
        env.extend([
            (RUNNER_ENV.to_owned(), "1".to_owned()),
            (ACP_ENV.to_owned(), "1".to_owned()),
            (AGENT_ENV.to_owned(), self.profile().handle.clone()),
            (ROOM_ENV.to_owned(), String::new()),
        ]);
        let (agent, requests) =
            AcpAgent::start(&acp.program, &acp.args, &settings.cwd, &env).await?;
        let agent = Arc::new(agent);
        let wait = Duration::from_secs(
            crate::hook_settings::HookSettings::load(&self.profile().dir).permission_wait_s,
        );
        let serving = tokio::spawn(serve_permissions(
            self.clone(),
            Arc::downgrade(&agent),
            requests,
            wait,
        ));
        *slot = Some(Running {
            agent: agent.clone(),
            serving,
        });
        Ok(agent)
    }

    /// Roundtable's MCP server, as ACP's `session/new` takes it.
    fn acp_mcp_server(&self, settings: &RunSettings) -> Value {
        let roundtable = settings
            .mcp
            .as_ref()
            .map(|mcp| mcp.roundtable.clone())
            .or_else(|| std::env::current_exe().ok())
            .unwrap_or_else(|| PathBuf::from("roundtable"));
        let home = settings
            .mcp
            .as_ref()
            .and_then(|mcp| mcp.roundtable_home.clone())
            .or_else(|| std::env::var_os("ROUNDTABLE_HOME").map(PathBuf::from));
        let env: Vec<Value> = home
            .map(|home| json!({"name": "ROUNDTABLE_HOME", "value": home.display().to_string()}))
            .into_iter()
            .collect();
        json!({
            "name": crate::local_agents::edits::SERVER_NAME,
            "command": roundtable.display().to_string(),
            "args": ["mcp", "--agent", self.profile().handle],
            "env": env,
        })
    }

    /// The room's session: the one bound to it (loaded again if this process has not
    /// made or loaded it and the agent can), else a new one, bound at once.
    async fn acp_session(
        &self,
        settings: &RunSettings,
        acp: &AcpMode,
        agent: &AcpAgent,
        room: &str,
        bound: Option<&str>,
    ) -> Result<String, AcpError> {
        let cwd = settings.cwd.display().to_string();
        let servers = json!([self.acp_mcp_server(settings)]);
        match bound {
            Some(session) if acp.is_open(session) => return Ok(session.to_owned()),
            Some(session) if agent.loads_sessions() => {
                let params = json!({"sessionId": session, "cwd": cwd, "mcpServers": servers});
                match agent.request("session/load", params, SETUP_PATIENCE).await {
                    Ok(loaded) => {
                        acp.opened(session, &loaded);
                        return Ok(session.to_owned());
                    }
                    Err(error) => {
                        tracing::warn!(%error, %session, "the room's session could not be loaded; a new one starts");
                    }
                }
            }
            _ => {}
        }
        let made = agent
            .request(
                "session/new",
                json!({"cwd": cwd, "mcpServers": servers}),
                SETUP_PATIENCE,
            )
            .await?;
        let Some(session) = made["sessionId"].as_str().map(str::to_owned) else {
            return Err(AcpError::Refused {
                method: "session/new".into(),
                error: crate::acp::updates::RpcError {
                    code: 0,
                    message: "it named no session".into(),
                },
            });
        };
        acp.opened(&session, &made);
        self.bind_turn_session(settings.cli, settings.framework(), room, &session)
            .await;
        Ok(session)
    }

    /// One turn over ACP: the room's session prompted with `prompt`, the reply gathered
    /// from its message chunks, its plan reported as the agent's task list; cancelled if
    /// the agent is paused or stopped in the room meanwhile (what it said by then is its
    /// reply).
    pub(super) async fn acp_turn(
        &self,
        settings: &RunSettings,
        acp: &AcpMode,
        room: &str,
        bound: Option<&str>,
        prompt: &str,
    ) -> Result<Turn, TurnFailure> {
        let agent = self
            .acp_agent(settings, acp)
            .await
            .map_err(|error| TurnFailure::Spawn(error.to_string()))?;
        let session = match self.acp_session(settings, acp, &agent, room, bound).await {
            Ok(session) => session,
            Err(error) => {
                return Ok(Turn {
                    session: bound.map(str::to_owned),
                    reply: None,
                    error: Some(error.to_string()),
                });
            }
        };
        let mut updates = agent.listen(&session, &settings.cwd.display().to_string());
        let started_ms = now_ms();
        let prompting = agent.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}),
            TURN_LIMIT,
        );
        tokio::pin!(prompting);
        let mut changes = self.changes();
        let mut said = Said::default();
        let mut cancelled = false;
        let ended = loop {
            tokio::select! {
                ended = &mut prompting => break ended,
                Some(update) = updates.recv() => {
                    self.acp_update(settings, &session, update, &mut said).await;
                }
                received = changes.recv(), if !cancelled => {
                    if matches!(received, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                        cancelled = true;
                        continue;
                    }
                    if self.held_in(room).await {
                        agent.notify("session/cancel", json!({"sessionId": session}));
                        cancelled = true;
                    }
                }
            }
        };
        while let Ok(update) = updates.try_recv() {
            self.acp_update(settings, &session, update, &mut said).await;
        }
        agent.stop_listening(&session);
        let reply = (!said.reply.trim().is_empty()).then_some(said.reply);
        Ok(match ended {
            Ok(result) => {
                let TurnEnd {
                    stop_reason,
                    tokens,
                } = read_turn_end(&result);
                // The tokens of an agent whose log Roundtable does not read come from ACP.
                if let Some(tokens) = tokens
                    && settings.cli.and_then(AgentCli::work_framework).is_none()
                {
                    let model = acp.model_of(&session);
                    let spent = TurnSpent {
                        session: &session,
                        model: model.as_deref().unwrap_or(UNKNOWN_MODEL),
                        tokens: &tokens,
                        from_ms: started_ms,
                        to_ms: now_ms(),
                    };
                    if let Err(error) = self.report_turn_usage(settings.framework(), spent).await {
                        tracing::warn!(%error, "the turn's usage could not be reported");
                    }
                }
                let error = match stop_reason.as_str() {
                    "refusal" if reply.is_none() => Some("the agent refused".to_owned()),
                    _ => None,
                };
                Turn {
                    session: Some(session),
                    reply,
                    error,
                }
            }
            Err(error) => Turn {
                session: Some(session),
                reply,
                error: Some(error.to_string()),
            },
        })
    }

    /// What one update of the session becomes.
    async fn acp_update(
        &self,
        settings: &RunSettings,
        session: &str,
        update: Update,
        said: &mut Said,
    ) {
        match update {
            Update::Message(text) => said.reply.push_str(&text),
            Update::Plan(items) => {
                let tasks = items
                    .into_iter()
                    .map(|item| roundtable_protocol::bodies::Task {
                        id: item.id,
                        title: item.title,
                        status: item.status.on_the_wire(),
                        active_form: item.active_form,
                    })
                    .collect();
                if let Err(error) = self
                    .report_tasks(settings.framework(), session, "plan", tasks, None)
                    .await
                {
                    tracing::warn!(%error, "the agent's plan could not be reported");
                }
            }
            // The files of an agent whose log Roundtable does not read come from ACP: what
            // a tool call said of them in all its updates, once it completed.
            Update::ToolCall {
                id,
                files,
                edits,
                completed,
            } if settings.cli.and_then(AgentCli::work_framework).is_none() => {
                // Bounded: an agent that never completes its calls holds no more than this.
                if said.calls.len() >= MAX_CALLS_HELD && !said.calls.contains_key(&id) {
                    return;
                }
                let call = said.calls.entry(id.clone()).or_default();
                call.edits |= edits;
                for file in files {
                    if call.files.len() < MAX_FILES_HELD && !call.files.contains(&file) {
                        call.files.push(file);
                    }
                }
                if completed
                    && let Some(call) = said.calls.remove(&id)
                    && call.edits
                {
                    let files = call.files.into_iter().map(PathBuf::from).collect();
                    if let Err(error) = self.report_edited_files(session, &id, files).await {
                        tracing::warn!(%error, "the agent's edits could not be reported");
                    }
                }
            }
            Update::ToolCall { .. } | Update::Context { .. } | Update::Other(_) => {}
        }
    }

    /// Whether a control holds the agent in `room` now.
    async fn held_in(&self, room: &str) -> bool {
        let controls = self.read(|cache| cache.controls()).await;
        controls.is_ok_and(|controls| control_in(&controls, room).is_some())
    }

    /// Asks the person a permission the agent asked for, with the agent's own options;
    /// the option chosen, or a cancel when no one answered in `wait`.
    async fn acp_permission(&self, params: &Value, wait: Duration) -> Value {
        let Some(asked) = read_permission(params) else {
            return cancelled();
        };
        let question = roundtable_protocol::text::cleaned(
            &format!(
                "{} asks permission for {}",
                self.profile().handle,
                asked.what
            ),
            roundtable_protocol::text::Shape::Prose,
        )
        .into_owned();
        let names: Vec<String> = asked.options.iter().map(|(_, name)| name.clone()).collect();
        match self.ask_human(&question, &names, wait).await {
            Ok(HumanAnswer::Yes {
                choice: Some(choice),
                ..
            }) => asked
                .options
                .iter()
                .find(|(_, name)| *name == choice)
                .map_or_else(
                    cancelled,
                    |(id, _)| json!({"outcome": {"outcome": "selected", "optionId": id}}),
                ),
            Ok(_) => cancelled(),
            Err(error) => {
                tracing::warn!(%error, "the agent's permission request could not be asked");
                cancelled()
            }
        }
    }
}

/// Serves the agent's requests while it runs: each permission asked of the person on a
/// task of its own, so one unanswered question holds no other up.
async fn serve_permissions(
    core: Core,
    agent: std::sync::Weak<AcpAgent>,
    mut requests: tokio::sync::mpsc::UnboundedReceiver<AgentRequest>,
    wait: Duration,
) {
    let mut asking = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            request = requests.recv() => {
                let Some(request) = request else { break };
                let (core, agent) = (core.clone(), agent.clone());
                asking.spawn(async move {
                    let answer = core.acp_permission(&request.params, wait).await;
                    if let Some(agent) = agent.upgrade() {
                        agent.respond(&request.id, Ok(answer));
                    }
                });
            }
            Some(_) = asking.join_next(), if !asking.is_empty() => {}
        }
    }
}
