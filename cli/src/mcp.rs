//! `roundtable mcp --agent HANDLE`: the MCP server an agent CLI (Claude Code, Codex, Gemini
//! CLI) launches over stdio to join Roundtable as that agent. The tools are
//! `roundtable-mcp-tools`'; here each operation is a few lines over the core, which holds
//! the agent's own cache, syncs it, and takes over writes that the agent's hooks hand to it.

use std::time::Duration;

use rmcp::ServiceExt;
use roundtable_core::agent_work::HumanAnswer as CoreAnswer;
use roundtable_core::client::PATIENCE;
use roundtable_core::{Core, CoreError, Delivered, SyncOptions, profile};
use roundtable_mcp_tools::{HubOps, HumanAnswer, Ping, Sent, Shown, ToolError, Tools};
use roundtable_protocol::bodies::{AgentState, ComponentDef, ComponentStatus, Task};
use roundtable_protocol::client::{Directory, RoomCreate, RoomInvite};
use roundtable_protocol::model::DirectoryEntry;
use serde_json::{Value, json};

/// The tools' operations over one agent's core.
pub struct CoreOps {
    core: Core,
    /// Names the task lists this bridge reports when the agent gives no session.
    session: String,
}

fn tool_error(error: CoreError) -> ToolError {
    ToolError::new(error.to_string(), error.code().to_string())
}

fn sent(result: Result<Delivered, CoreError>) -> Result<Sent, ToolError> {
    match result {
        Ok(Delivered::Sent { seq, .. }) => Ok(Sent::Stored { seq: Some(seq) }),
        Ok(Delivered::HandedOff { .. }) => Ok(Sent::Stored { seq: None }),
        Ok(Delivered::Queued { reason, .. }) => Ok(Sent::Queued { reason }),
        Err(error) => Err(tool_error(error)),
    }
}

fn to_value(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

impl CoreOps {
    async fn call<C: roundtable_protocol::client::Command>(
        &self,
        command: C,
    ) -> Result<C::Reply, ToolError> {
        self.core.synced(PATIENCE).await.map_err(tool_error)?;
        self.core.call(command, PATIENCE).await.map_err(tool_error)
    }
}

#[async_trait::async_trait]
impl HubOps for CoreOps {
    async fn whoami(&self) -> Value {
        let profile = self.core.profile();
        let home = self.core.home_room().await.ok();
        let owner = self.core.owner().await.ok().flatten();
        json!({
            "handle": profile.handle, "id": profile.principal, "hub": profile.hub.to_string(),
            "owner": owner, "home_room": home,
        })
    }

    async fn find_agents(
        &self,
        query: Option<String>,
        limit: u32,
    ) -> Result<Vec<DirectoryEntry>, ToolError> {
        let found = self
            .call(Directory {
                id: 0,
                query,
                limit: Some(limit),
            })
            .await?;
        Ok(found.entries)
    }

    async fn request_contact(
        &self,
        handle: String,
        message: Option<String>,
    ) -> Result<Shown, ToolError> {
        self.core.synced(PATIENCE).await.map_err(tool_error)?;
        let asked = self
            .core
            .request_contact(&handle, message, PATIENCE)
            .await
            .map_err(tool_error)?;
        Ok(Shown::of(&asked))
    }

    async fn list_rooms(&self) -> Result<Shown, ToolError> {
        self.core.synced(PATIENCE).await.map_err(tool_error)?;
        self.core
            .rooms()
            .await
            .map(|rooms| Shown::of(&rooms))
            .map_err(tool_error)
    }

    async fn create_room(
        &self,
        title: String,
        topic: Option<String>,
        members: Vec<String>,
    ) -> Result<Shown, ToolError> {
        let created = self
            .call(RoomCreate {
                id: 0,
                title: Some(title),
                topic,
                members,
            })
            .await?;
        Ok(Shown::of(&created.room))
    }

    async fn invite(&self, room: &str, handle: &str) -> Result<String, ToolError> {
        let room = self.core.room_id(room).await.map_err(tool_error)?;
        self.call(RoomInvite {
            id: 0,
            room: room.clone(),
            handle: handle.to_owned(),
        })
        .await?;
        Ok(room)
    }

    async fn send_message(&self, room: &str, body: Value) -> Result<Sent, ToolError> {
        let room = self.core.room_id(room).await.map_err(tool_error)?;
        let queued = self.core.send(&room, "message", body).await;
        sent(match queued {
            Ok(n) => self.core.deliver(n, PATIENCE).await,
            Err(error) => Err(error),
        })
    }

    async fn unread_messages(&self, room: Option<&str>) -> Result<Shown, ToolError> {
        let room = match room {
            Some(room) => Some(self.core.room_id(room).await.map_err(tool_error)?),
            None => None,
        };
        self.core
            .read_messages(room.as_deref())
            .await
            .map(|messages| Shown::of(&messages))
            .map_err(tool_error)
    }

    async fn latest_messages(&self, room: &str, limit: u32) -> Result<Shown, ToolError> {
        let room = self.core.room_id(room).await.map_err(tool_error)?;
        self.core
            .room_messages(&room, limit)
            .await
            .map(|messages| Shown::of(&messages))
            .map_err(tool_error)
    }

    async fn messages_since(&self, room: &str, after: u64, limit: u32) -> Result<Shown, ToolError> {
        let room = self.core.room_id(room).await.map_err(tool_error)?;
        self.core.synced(PATIENCE).await.map_err(tool_error)?;
        // History fills the gaps after `after` first (as for the latest messages).
        self.core
            .gaps_filled(&room, after, u64::MAX, PATIENCE)
            .await
            .map_err(tool_error)?;
        let limit = limit.clamp(1, 500);
        self.core
            .read(move |cache| cache.messages_after(&room, after, limit))
            .await
            .map(|messages| Shown::of(&messages))
            .map_err(tool_error)
    }

    async fn wait_for_messages(&self, timeout: Duration) -> Result<Vec<Value>, ToolError> {
        let messages = self
            .core
            .wait_for_messages(timeout)
            .await
            .map_err(tool_error)?;
        Ok(messages.into_iter().map(to_value).collect())
    }

    async fn set_status(
        &self,
        state: AgentState,
        detail: Option<&str>,
        room: Option<&str>,
    ) -> Result<Sent, ToolError> {
        sent(self.core.set_status(state, detail, room).await)
    }

    async fn define_components(
        &self,
        room: &str,
        components: Vec<ComponentDef>,
    ) -> Result<Sent, ToolError> {
        sent(self.core.define_components(room, components).await)
    }

    async fn update_component(
        &self,
        room: &str,
        component: &str,
        status: ComponentStatus,
        note: Option<&str>,
        files: Vec<String>,
    ) -> Result<Sent, ToolError> {
        sent(
            self.core
                .update_component(room, component, status, note, files)
                .await,
        )
    }

    async fn claim_component(
        &self,
        room: &str,
        component: &str,
        claim: bool,
        note: Option<&str>,
    ) -> Result<Sent, ToolError> {
        sent(
            self.core
                .claim_component(room, component, claim, note)
                .await,
        )
    }

    async fn report_tasks(&self, tasks: Vec<Task>, room: Option<&str>) -> Result<Sent, ToolError> {
        sent(
            self.core
                .report_tasks("mcp", &self.session, "report_tasks", tasks, room)
                .await,
        )
    }

    async fn raise_ping(
        &self,
        question: &str,
        options: &[String],
        timeout: Duration,
    ) -> Result<Ping, ToolError> {
        let room = self.core.home_room().await.map_err(tool_error)?;
        let ping = self
            .core
            .raise_ping(&room, question, options, timeout, None)
            .await
            .map_err(tool_error)?;
        Ok(Ping { room, ping, seq: 0 })
    }

    async fn await_answer(&self, ping: &Ping, timeout: Duration) -> Result<HumanAnswer, ToolError> {
        match self
            .core
            .await_answer(&ping.room, &ping.ping, timeout)
            .await
        {
            Ok(CoreAnswer::Yes {
                by, choice, text, ..
            }) => Ok(HumanAnswer::Yes { by, choice, text }),
            Ok(CoreAnswer::TimedOut { .. }) => Ok(HumanAnswer::TimedOut),
            Err(error) => Err(tool_error(error)),
        }
    }

    async fn withdraw_ping(&self, ping: &Ping, reason: &str) -> Result<(), ToolError> {
        let body = json!({"ping": ping.ping, "reason": reason});
        // One withdrawal per ping, however often it is asked for.
        let key: String = format!("withdraw-{}", ping.ping).chars().take(64).collect();
        let queued = self
            .core
            .send_with_key(&ping.room, &key, "x-ping-withdrawn", body)
            .await;
        sent(match queued {
            Ok(n) => self.core.deliver(n, PATIENCE).await,
            Err(error) => Err(error),
        })
        .map(drop)
    }

    fn principal(&self) -> String {
        self.core.profile().principal.clone()
    }
}

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
    let bridge = Tools::new(CoreOps {
        session: roundtable_core::random_key("mcp"),
        core,
    });
    let service = bridge.serve(rmcp::transport::stdio()).await?;
    let reason = service.waiting().await;
    tracing::debug!(?reason, "the MCP client went away");
    sync.stop().await;
    Ok(())
}
