//! What an agent does through the core, whichever program drives it (the MCP bridge inside
//! an agent CLI, a hook, the headless runner): read and wait for the messages meant for it,
//! say what it is doing, keep the architecture board, report its task list, and ask its
//! person a question. Each is one call here, so no client re-implements it.

use std::time::Duration;

use roundtable_protocol::bodies::{
    AgentState, ArchBody, ComponentDef, ComponentStatus, PingBody, SessionRef, StatusBody, Task,
    TasksBody,
};
use serde::Serialize;
use serde_json::json;

use crate::cache::{MessageView, PingView};
use crate::wait_for::{Arrived, WaitFilter};
use crate::work::overlaps::{self, Overlap};
use crate::{Core, CoreError, Delivered, now_ms, random_key};

/// The longest a client may wait for messages or an answer in one call.
pub const LONGEST_WAIT: Duration = Duration::from_secs(600);

/// The most messages one read returns.
const READ_AT_ONCE: u32 = 100;

/// How a question to a person ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "answered", rename_all = "snake_case")]
pub enum HumanAnswer {
    /// Someone answered: with one of the options, or in words.
    Yes {
        by: Option<String>,
        choice: Option<String>,
        text: Option<String>,
        room: String,
        ping: String,
    },
    /// Nobody answered in time (the ping stays visible, marked expired).
    TimedOut { room: String, ping: String },
}

/// What one turn of an agent spent: its session, model and tokens, from when to when.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnSpent<'a> {
    pub session: &'a str,
    pub model: &'a str,
    pub tokens: &'a crate::log_events::TokenCounts,
    pub from_ms: i64,
    pub to_ms: i64,
}

impl Core {
    /// The agent's home room (the room the hub made for it and its owner): recorded in its
    /// profile when it was registered here, else found among its rooms.
    pub async fn home_room(&self) -> Result<String, CoreError> {
        if let Some(room) = &self.profile().home_room {
            return Ok(room.clone());
        }
        let me = self.me().to_owned();
        let owner = self
            .read({
                let me = me.clone();
                move |cache| Ok(cache.principal(&me)?.and_then(|principal| principal.owner))
            })
            .await?;
        let rooms = self.rooms().await?;
        rooms
            .iter()
            .find(|room| {
                room.members.len() == 2
                    && room.members.iter().any(|m| m.id == me)
                    && owner
                        .as_deref()
                        .is_some_and(|owner| room.members.iter().any(|m| m.id == owner))
            })
            .map(|room| room.id.clone())
            .ok_or_else(|| {
                CoreError::NotFound(
                    "no home room with your owner: ask your owner to invite you to a room".into(),
                )
            })
    }

    /// Unread messages for us (mentions, rooms of two, everything routed to an agent), in
    /// `room` only when given, oldest first; they count as read once returned.
    pub async fn read_messages(&self, room: Option<&str>) -> Result<Vec<MessageView>, CoreError> {
        let me = self.me().to_owned();
        let everything = self.is_agent();
        let mut messages = self
            .read(move |cache| cache.unread_messages_for(&me, everything, READ_AT_ONCE))
            .await?;
        if let Some(room) = room {
            messages.retain(|message| message.room == room);
        }
        self.mark_read_through(&messages).await?;
        Ok(messages)
    }

    /// The latest `limit` messages of a room, read or not; they count as read.
    pub async fn room_messages(
        &self,
        room: &str,
        limit: u32,
    ) -> Result<Vec<MessageView>, CoreError> {
        let page = self
            .latest_messages(room, None, limit, crate::client::PATIENCE)
            .await?;
        self.mark_read_through(&page.messages).await?;
        Ok(page.messages)
    }

    /// Waits (at most [`LONGEST_WAIT`]) until messages for us arrive; returns them (they
    /// count as read), or nothing at the timeout.
    pub async fn wait_for_messages(
        &self,
        timeout: Duration,
    ) -> Result<Vec<MessageView>, CoreError> {
        let filter = WaitFilter::MessagesFor {
            principal: self.me().to_owned(),
        };
        match self.wait_for(&filter, timeout.min(LONGEST_WAIT)).await? {
            Arrived::Messages { messages } => {
                self.mark_read_through(&messages).await?;
                Ok(messages)
            }
            _ => Ok(Vec::new()),
        }
    }

    /// Moves the read markers past `messages`.
    pub(crate) async fn mark_read_through(
        &self,
        messages: &[MessageView],
    ) -> Result<(), CoreError> {
        let mut highest: std::collections::BTreeMap<&str, u64> = Default::default();
        for message in messages {
            if let Some(seq) = message.seq {
                let entry = highest.entry(message.room.as_str()).or_default();
                *entry = (*entry).max(seq);
            }
        }
        for (room, seq) in highest {
            self.mark_read(room, seq).await?;
        }
        Ok(())
    }

    /// Sends an event now and waits for the hub (or for a running process to take it).
    async fn post(
        &self,
        room: &str,
        kind: &str,
        body: serde_json::Value,
        client_key: Option<&str>,
    ) -> Result<Delivered, CoreError> {
        let n = match client_key {
            Some(key) => self.send_with_key(room, key, kind, body).await?,
            None => self.send(room, kind, body).await?,
        };
        self.deliver(n, crate::client::PATIENCE).await
    }

    /// Says what we are doing, in `room` (default: our home room).
    pub async fn set_status(
        &self,
        state: AgentState,
        detail: Option<&str>,
        room: Option<&str>,
    ) -> Result<Delivered, CoreError> {
        let room = match room {
            Some(room) => self.room_id(room).await?,
            None => self.home_room().await?,
        };
        let body = StatusBody {
            state,
            detail: detail.map(str::to_owned),
        };
        self.post(&room, "status", to_body(&body), None).await
    }

    /// Defines (or redefines) components of a room's architecture board.
    pub async fn define_components(
        &self,
        room: &str,
        components: Vec<ComponentDef>,
    ) -> Result<Delivered, CoreError> {
        let room = self.room_id(room).await?;
        let body = ArchBody::Define {
            define: components,
            source: None,
        };
        self.post(&room, "arch", to_body(&body), None).await
    }

    /// Reports a component's status (`working`, `done`, `blocked`, `idle`).
    pub async fn update_component(
        &self,
        room: &str,
        component: &str,
        status: ComponentStatus,
        note: Option<&str>,
        files: Vec<String>,
    ) -> Result<Delivered, CoreError> {
        let room = self.room_id(room).await?;
        let body = ArchBody::Status {
            component: component.to_owned(),
            status,
            note: note.map(str::to_owned),
            files: (!files.is_empty()).then_some(files),
            agent: None,
            claim: None,
        };
        self.post(&room, "arch", to_body(&body), None).await
    }

    /// Reports the files a tool call of ours edited, for an agent whose log Roundtable does
    /// not read (an ACP agent that is none of the CLIs): each file's components in its
    /// repository's architecture are marked as worked on by us in our home room, the
    /// architecture defined there first, as the log watcher does for the CLIs it reads. Keys
    /// come from the session, the tool call and the file, so a report sent again after a
    /// crash is stored once.
    pub(crate) async fn report_edited_files(
        &self,
        session: &str,
        tool_call: &str,
        files: Vec<std::path::PathBuf>,
    ) -> Result<(), CoreError> {
        use crate::work::architecture;
        use crate::work::publish::key;
        let found = tokio::task::spawn_blocking(move || {
            files
                .into_iter()
                .filter_map(|file| {
                    let root = architecture::find_repository(&file)?;
                    Some((architecture::load(&root)?, file))
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        if found.is_empty() {
            return Ok(());
        }
        let room = self.home_room().await?;
        let arch = roundtable_protocol::bodies::EventKind::parse("arch");
        let cleaned = |body: serde_json::Value| match &arch {
            Some(kind) => roundtable_protocol::bodies::clean_work_body(kind, body),
            None => body,
        };
        for (architecture, file) in found {
            let components = architecture.components_of(&file);
            if components.is_empty() {
                continue;
            }
            let define = match &architecture.source {
                Some(source) => json!({"define": architecture.components, "source": source}),
                None => json!({"define": architecture.components}),
            };
            let defined = key("d", &[&key("a", &[&architecture.text]), &room]);
            self.post(&room, "arch", cleaned(define), Some(&defined))
                .await?;
            let path = file.display().to_string();
            for component in components {
                let status =
                    json!({"component": component.id, "status": "working", "files": [path]});
                let reported = key("s", &[session, tool_call, &path, &component.id, &room]);
                self.post(&room, "arch", cleaned(status), Some(&reported))
                    .await?;
            }
        }
        Ok(())
    }

    /// Reports what a turn of ours spent, for an agent whose log Roundtable does not read:
    /// a `usage` event in our home room, priced when the model is one `pricing.toml` knows
    /// (else unpriced, never free). Keyed by the session and the turn's start, so a report
    /// sent again after a crash is stored once.
    pub(crate) async fn report_turn_usage(
        &self,
        framework: &str,
        spent: TurnSpent<'_>,
    ) -> Result<(), CoreError> {
        use crate::work::pricing::Pricing;
        let pricing = Pricing::with_overrides(&Pricing::override_paths()).unwrap_or_else(|error| {
            tracing::warn!(%error, "a pricing override was refused: the built-in prices are used");
            Pricing::built_in()
        });
        let cost = pricing.cost(spent.model, spent.tokens, &Default::default());
        let room = self.home_room().await?;
        let mut body = json!({
            "session": {"agent": self.me(), "framework": framework, "session_id": spent.session},
            "model": spent.model,
            "input": spent.tokens.input,
            "output": spent.tokens.output,
            "cache_write": spent.tokens.cache_write(),
            "cache_read": spent.tokens.cache_read,
            "from": roundtable_protocol::ts::format_millis(spent.from_ms),
            "to": roundtable_protocol::ts::format_millis(spent.to_ms),
        });
        if let Some(cost) = cost {
            body["cost_usd"] = json!(cost);
        }
        if let Some(kind) = roundtable_protocol::bodies::EventKind::parse("usage") {
            body = roundtable_protocol::bodies::clean_work_body(&kind, body);
        }
        let key = crate::work::publish::key(
            "u",
            &[framework, spent.session, &spent.from_ms.to_string(), &room],
        );
        self.post(&room, "usage", body, Some(&key)).await?;
        Ok(())
    }

    /// Claims a component of a room (`claim` true), or releases our claim: others editing it
    /// are told who holds it. Advisory: it never stops anyone.
    pub async fn claim_component(
        &self,
        room: &str,
        component: &str,
        claim: bool,
        note: Option<&str>,
    ) -> Result<Delivered, CoreError> {
        let room = self.room_id(room).await?;
        let status = if claim {
            ComponentStatus::Working
        } else {
            ComponentStatus::Idle
        };
        let body = ArchBody::Status {
            component: component.to_owned(),
            status,
            note: note.map(str::to_owned),
            files: None,
            agent: None,
            claim: Some(claim),
        };
        self.post(&room, "arch", to_body(&body), None).await
    }

    /// The other agents on the components we edit or claim, at `now_ms`.
    pub async fn overlaps(&self, now_ms: i64) -> Result<Vec<Overlap>, CoreError> {
        let me = self.me().to_owned();
        self.read(move |cache| {
            let touches = cache.component_touches(now_ms - overlaps::WINDOW_MS)?;
            Ok(overlaps::overlaps_for(&me, &touches, now_ms))
        })
        .await
    }

    /// What we have not been told yet of the other agents on our components, as a notice
    /// for our session (what they wrote as room content: [`overlaps::notice`]); recorded as
    /// told.
    pub async fn overlap_notice(&self, now_ms: i64) -> Result<Option<String>, CoreError> {
        let found = self.overlaps(now_ms).await?;
        if found.is_empty() {
            return Ok(None);
        }
        let told = self.read(|cache| cache.overlaps_told()).await?;
        let new = overlaps::untold(found, &told, now_ms);
        if new.is_empty() {
            return Ok(None);
        }
        let keys: Vec<(String, String, String)> = new
            .iter()
            .map(|o| (o.room.clone(), o.component.clone(), o.other.clone()))
            .collect();
        self.write_job(move |cache| cache.record_overlaps_told(&keys, now_ms))
            .await?;
        let rooms = self.rooms().await?;
        let room_label = |id: &str| {
            rooms
                .iter()
                .find(|room| room.id == id)
                .map_or_else(|| id.to_owned(), |room| room.label().to_owned())
        };
        Ok(Some(overlaps::notice(&new, &room_label, now_ms)))
    }

    /// Reports the task list of one of our sessions (a snapshot that replaces the last), to
    /// `room` (default: our home room).
    pub async fn report_tasks(
        &self,
        framework: &str,
        session_id: &str,
        source: &str,
        tasks: Vec<Task>,
        room: Option<&str>,
    ) -> Result<Delivered, CoreError> {
        let room = match room {
            Some(room) => self.room_id(room).await?,
            None => self.home_room().await?,
        };
        let body = TasksBody {
            session: SessionRef {
                agent: self.me().to_owned(),
                framework: framework.to_owned(),
                session_id: session_id.to_owned(),
            },
            source: source.to_owned(),
            tasks,
        };
        self.post(&room, "tasks", to_body(&body), None).await
    }

    /// Asks our person (the owner of an agent) a question with a ping in our home room, and
    /// waits for the first answer, from wherever it comes, or for `timeout` (at most
    /// [`LONGEST_WAIT`]; the ping expires then).
    pub async fn ask_human(
        &self,
        question: &str,
        options: &[String],
        timeout: Duration,
    ) -> Result<HumanAnswer, CoreError> {
        let room = self.home_room().await?;
        let ping = self
            .raise_ping(&room, question, options, timeout, None)
            .await?;
        self.await_answer(&room, &ping, timeout).await
    }

    /// Raises a ping in `room` for our owner (or any user member), expiring after
    /// `timeout`; returns its id. `key` makes a retried ping (a hook run again) one ping.
    pub async fn raise_ping(
        &self,
        room: &str,
        question: &str,
        options: &[String],
        timeout: Duration,
        key: Option<&str>,
    ) -> Result<String, CoreError> {
        let ping = match key {
            Some(key) => format!("q-{key}"),
            None => random_key("q"),
        };
        let owner = self.owner().await?;
        let expires = roundtable_protocol::ts::format_millis(
            now_ms() + timeout.min(LONGEST_WAIT).as_millis() as i64,
        );
        let body = to_body(&PingBody {
            ping: ping.clone(),
            question: question.to_owned(),
            options: (!options.is_empty()).then(|| options.to_vec()),
            to: owner.map(|owner| vec![owner]),
            expires_at: Some(expires),
        });
        let client_key = key.map(|key| format!("ping-{key}"));
        match self.post(room, "ping", body, client_key.as_deref()).await? {
            Delivered::Queued { reason, .. } => Err(CoreError::Offline(reason)),
            _ => Ok(ping),
        }
    }

    /// Waits for the answer to ping `ping` of `room`.
    pub async fn await_answer(
        &self,
        room: &str,
        ping: &str,
        timeout: Duration,
    ) -> Result<HumanAnswer, CoreError> {
        let filter = WaitFilter::PingAnswered {
            room: room.to_owned(),
            ping: ping.to_owned(),
        };
        match self.wait_for(&filter, timeout.min(LONGEST_WAIT)).await? {
            Arrived::Ping { ping: answered } => Ok(answer_of(answered)),
            _ => Ok(HumanAnswer::TimedOut {
                room: room.to_owned(),
                ping: ping.to_owned(),
            }),
        }
    }

    /// Our owner's id, when we are an agent and know it.
    pub async fn owner(&self) -> Result<Option<String>, CoreError> {
        let me = self.me().to_owned();
        self.read(move |cache| Ok(cache.principal(&me)?.and_then(|principal| principal.owner)))
            .await
    }
}

fn answer_of(ping: PingView) -> HumanAnswer {
    match ping.state {
        crate::cache::PingState::Answered => HumanAnswer::Yes {
            by: ping.answered_by_handle.or(ping.answered_by),
            choice: ping.choice,
            text: ping.text,
            room: ping.room,
            ping: ping.ping,
        },
        _ => HumanAnswer::TimedOut {
            room: ping.room,
            ping: ping.ping,
        },
    }
}

/// A typed body as the JSON a send carries.
fn to_body(body: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(body).unwrap_or(serde_json::Value::Null)
}
