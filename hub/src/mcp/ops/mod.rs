//! The MCP tools' operations for one caller of `/mcp`, over the hub itself: every write is
//! the frame a WebSocket client would send, through the [`Gateway`] (same rules, audit
//! `via: mcp`); reads are the store's, as `history` and `sync` read it for that principal.
//!
//! An MCP client keeps no cache, so its read markers are the hub's, its device's own: what
//! `read_messages` and `wait_for_messages` return is acknowledged at once (`ack`, device
//! `mcp`, or `mcp-<name>` with `X-Roundtable-Device`, so two clients of one agent each read
//! everything). Each message carries its room and seq, the
//! cursor a client that lost a result reads again from (`read_messages` with
//! `unread_only: false`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use roundtable_mcp_tools::{HubOps, HumanAnswer, Ping, Sent, Shown, ToolError};
use roundtable_protocol::bodies::{
    AgentState, AnswerBody, ArchBody, ComponentDef, ComponentStatus, MessageBody, PingBody,
    SessionRef, StatusBody, Task, TasksBody,
};
use roundtable_protocol::client::{
    Ack, ClientFrame, ContactRequestCmd, RoomCreate, RoomInvite, Rooms, SendCmd,
};
use roundtable_protocol::model::{DirectoryEntry, PrincipalKind, Room};
use roundtable_protocol::server::{ContactRequestOk, RoomOk, RoomsOk};
use serde::Serialize;
use serde_json::{Value, json};

use crate::gateway::Gateway;
use crate::metrics::GaugeUnit;
use crate::reads::HistoryRange;
use crate::store::ReadError;
use roundtable_engine::records::{EventRecord, PrincipalRecord, StreamKey};
use roundtable_engine::{Caller, Refusal, Reply};

mod reading;

use reading::woken;

/// The most messages one read returns (as the stdio bridge).
const READ_AT_ONCE: usize = 100;

/// Events read per page while looking for messages.
const PAGE: u32 = 200;

/// How often a wait looks again without being woken (a safety net: every room write wakes
/// it).
const LOOK_AGAIN: Duration = Duration::from_secs(5);

/// One caller's operations.
pub struct CallerOps {
    pub(crate) gateway: Gateway,
    pub(crate) caller: Arc<Caller>,
    pub(crate) principal: PrincipalRecord,
    /// The hub's URL as the client reached it.
    pub(crate) hub_url: String,
    /// Names the task lists this client reports.
    pub(crate) session: String,
}

/// A message as the model reads it (the fields of the stdio bridge's messages that a hub
/// knows).
#[derive(Debug, Serialize)]
struct MessageOut {
    room: String,
    seq: u64,
    id: String,
    ts_ms: i64,
    from: String,
    from_handle: Option<String>,
    from_kind: Option<PrincipalKind>,
    text: String,
    mentions: Vec<String>,
    reply_to: Option<String>,
}

/// A room as `list_rooms` shows it.
#[derive(Debug, Serialize)]
struct RoomOut {
    id: String,
    title: Option<String>,
    topic: Option<String>,
    head: u64,
    /// The seq up to which this device of the caller has read it.
    read_through: u64,
    members: Vec<MemberOut>,
}

#[derive(Debug, Serialize)]
struct MemberOut {
    handle: String,
    kind: PrincipalKind,
    name: String,
}

/// Members' handles and kinds, by id.
type Handles = BTreeMap<String, (String, PrincipalKind)>;

fn refused(refusal: Refusal) -> ToolError {
    ToolError::new(refusal.msg, refusal.code.to_string())
}

fn read_failed(error: ReadError) -> ToolError {
    match error {
        ReadError::NotFound => ToolError::new(
            "no such room: list_rooms shows yours (by id or title)",
            "not_found",
        ),
        ReadError::NotMember => ToolError::new(
            "you are not a member of that room: ask a member to invite you",
            "not_member",
        ),
        ReadError::Store(error) => {
            tracing::warn!(%error, "an MCP read failed");
            ToolError::new("the hub could not read; retry", "internal")
        }
    }
}

fn odd(what: &str) -> ToolError {
    ToolError::new(format!("the hub answered {what} oddly; retry"), "internal")
}

fn random_key(prefix: &str) -> String {
    format!("{prefix}-{:032x}", rand::random::<u128>())
}

/// The client key of a ping's withdrawal (8 to 64 bytes, as keys are).
fn withdrawal_key(ping: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(ping.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("withdraw-{hex}")
}

fn room_of(event: &EventRecord) -> &str {
    match &event.stream {
        StreamKey::Room(room) | StreamKey::Inbox(room) => room,
    }
}

impl CallerOps {
    fn me(&self) -> &str {
        &self.caller.id
    }

    fn is_agent(&self) -> bool {
        self.caller.kind == PrincipalKind::Agent
    }

    async fn execute(&self, frame: ClientFrame) -> Result<Reply, ToolError> {
        self.gateway
            .execute(&self.caller, &frame)
            .await
            .map_err(refused)
    }

    /// Runs a command whose `ok` is a `T` (`what` names it if the hub answers otherwise).
    async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        frame: ClientFrame,
        what: &str,
    ) -> Result<T, ToolError> {
        match self.execute(frame).await? {
            Reply::Ok(ok) => ok.decode::<T>().map_err(|_| odd(what)),
            Reply::Sent { .. } => Err(odd(what)),
        }
    }

    async fn rooms(&self) -> Result<Vec<Room>, ToolError> {
        let rooms: RoomsOk = self
            .ask(ClientFrame::Rooms(Rooms { id: 1 }), "rooms")
            .await?;
        Ok(rooms.rooms)
    }

    /// A room named by id or title (exactly, else the one title equal but for case).
    async fn room_id(&self, room: &str) -> Result<String, ToolError> {
        let rooms = self.rooms().await?;
        if let Some(found) = rooms.iter().find(|r| r.id == room) {
            return Ok(found.id.clone());
        }
        let titled: Vec<&Room> = rooms
            .iter()
            .filter(|r| r.title.as_deref() == Some(room))
            .collect();
        let titled = if titled.is_empty() {
            rooms
                .iter()
                .filter(|r| {
                    r.title
                        .as_deref()
                        .is_some_and(|title| title.eq_ignore_ascii_case(room))
                })
                .collect()
        } else {
            titled
        };
        match titled.as_slice() {
            [one] => Ok(one.id.clone()),
            [] => Err(ToolError::new(
                format!("you are in no room {room:?}: list_rooms shows yours (by id or title)"),
                "not_found",
            )),
            _ => Err(ToolError::new(
                format!("several of your rooms are titled {room:?}: name one by its id"),
                "invalid",
            )),
        }
    }

    /// The room of this agent and its owner, made when the agent was registered (users have
    /// none).
    async fn home_room(&self) -> Result<String, ToolError> {
        let Some(owner) = self.principal.owner.as_deref() else {
            return Err(ToolError::new(
                "you have no home room (only agents do): name a room",
                "invalid",
            ));
        };
        // The hub makes it titled with the agent's handle; a room of the two titled
        // otherwise is home only when there is no such room (it was renamed).
        let pairs: Vec<Room> = self
            .rooms()
            .await?
            .into_iter()
            .filter(|room| {
                room.members.len() == 2
                    && room.members.iter().any(|m| m.id == self.me())
                    && room.members.iter().any(|m| m.id == owner)
            })
            .collect();
        let titled = pairs
            .iter()
            .position(|room| room.title.as_deref() == Some(self.principal.handle.as_str()));
        titled
            .or((!pairs.is_empty()).then_some(0))
            .map(|at| pairs[at].id.clone())
            .ok_or_else(|| {
                ToolError::new(
                    "no home room with your owner: ask your owner to invite you to a room",
                    "not_found",
                )
            })
    }

    async fn room_or_home(&self, room: Option<&str>) -> Result<String, ToolError> {
        match room {
            Some(room) => self.room_id(room).await,
            None => self.home_room().await,
        }
    }

    /// Sends an event; what became of it.
    async fn post(&self, room: &str, kind: &str, body: Value) -> Result<u64, ToolError> {
        self.post_keyed(room, kind, body, random_key("mcp")).await
    }

    /// Sends an event under `client_key` (the same key again is the same event).
    async fn post_keyed(
        &self,
        room: &str,
        kind: &str,
        body: Value,
        client_key: String,
    ) -> Result<u64, ToolError> {
        let frame = ClientFrame::Send(SendCmd {
            id: 1,
            room: room.to_owned(),
            client_key,
            kind: kind.to_owned(),
            body,
        });
        match self.execute(frame).await? {
            Reply::Sent { event, .. } => Ok(event.seq),
            Reply::Ok(_) => Err(odd("a send")),
        }
    }

    async fn post_typed(
        &self,
        room: &str,
        kind: &str,
        body: impl Serialize,
    ) -> Result<Sent, ToolError> {
        let seq = self
            .post(
                room,
                kind,
                serde_json::to_value(body).unwrap_or(Value::Null),
            )
            .await?;
        Ok(Sent::Stored { seq: Some(seq) })
    }
}

#[async_trait::async_trait]
impl HubOps for CallerOps {
    async fn whoami(&self) -> Value {
        let home = self.home_room().await.ok();
        json!({
            "handle": self.principal.handle, "id": self.principal.id, "hub": self.hub_url,
            "owner": self.principal.owner, "home_room": home,
        })
    }

    async fn find_agents(
        &self,
        query: Option<String>,
        limit: u32,
    ) -> Result<Vec<DirectoryEntry>, ToolError> {
        self.gateway
            .directory(
                &self.caller,
                query.map(|query| query.trim().to_lowercase()),
                limit.clamp(1, 200) as usize,
            )
            .await
            .map_err(refused)
    }

    async fn request_contact(
        &self,
        handle: String,
        message: Option<String>,
    ) -> Result<Shown, ToolError> {
        let frame = ClientFrame::ContactRequest(ContactRequestCmd {
            id: 1,
            to: handle,
            message,
        });
        let asked: ContactRequestOk = self.ask(frame, "a contact request").await?;
        Ok(Shown::of(&asked.request))
    }

    async fn list_rooms(&self) -> Result<Shown, ToolError> {
        let rooms = self.rooms().await?;
        let markers = self.read_markers().await?;
        let shown: Vec<RoomOut> = rooms
            .into_iter()
            .map(|room| RoomOut {
                read_through: markers.get(&room.id).map_or(0, |(marker, _)| *marker),
                id: room.id,
                title: room.title,
                topic: room.topic,
                head: room.head,
                members: room
                    .members
                    .into_iter()
                    .map(|member| MemberOut {
                        handle: member.handle,
                        kind: member.kind,
                        name: member.name,
                    })
                    .collect(),
            })
            .collect();
        Ok(Shown::of(&shown))
    }

    async fn create_room(
        &self,
        title: String,
        topic: Option<String>,
        members: Vec<String>,
    ) -> Result<Shown, ToolError> {
        let frame = ClientFrame::RoomCreate(RoomCreate {
            id: 1,
            title: Some(title),
            topic,
            members,
        });
        let created: RoomOk = self.ask(frame, "room_create").await?;
        Ok(Shown::of(&created.room))
    }

    async fn invite(&self, room: &str, handle: &str) -> Result<String, ToolError> {
        let room = self.room_id(room).await?;
        self.execute(ClientFrame::RoomInvite(RoomInvite {
            id: 1,
            room: room.clone(),
            handle: handle.to_owned(),
        }))
        .await?;
        Ok(room)
    }

    async fn send_message(&self, room: &str, body: Value) -> Result<Sent, ToolError> {
        let room = self.room_id(room).await?;
        let seq = self.post(&room, "message", body).await?;
        Ok(Sent::Stored { seq: Some(seq) })
    }

    async fn unread_messages(&self, room: Option<&str>) -> Result<Shown, ToolError> {
        self.unread(room).await.map(|found| Shown::of(&found))
    }

    async fn latest_messages(&self, room: &str, limit: u32) -> Result<Shown, ToolError> {
        let room = self.room_id(room).await?;
        let handles = self.handles().await;
        let limit = limit.clamp(1, 500) as usize;
        let mut found: Vec<MessageOut> = Vec::new();
        let mut before = None;
        let mut newest = None;
        while found.len() < limit {
            let events = self.events(&room, None, before, PAGE, false).await?;
            let Some(first) = events.first().map(|event| event.seq) else {
                break;
            };
            newest = newest.or(events.last().map(|event| event.seq));
            let mut page: Vec<MessageOut> = events
                .iter()
                .filter_map(|event| Self::message_out(event, &handles))
                .collect();
            let room_left = limit - found.len();
            if page.len() > room_left {
                page.drain(..page.len() - room_left);
            }
            page.append(&mut found);
            found = page;
            before = Some(first);
            if first <= 1 {
                break;
            }
        }
        if let Some(newest) = newest {
            self.acknowledge(BTreeMap::from([(room, newest)])).await?;
        }
        Ok(Shown::of(&found))
    }

    async fn messages_since(&self, room: &str, after: u64, limit: u32) -> Result<Shown, ToolError> {
        let room = self.room_id(room).await?;
        let handles = self.handles().await;
        let limit = limit.clamp(1, 500) as usize;
        let mut found = Vec::new();
        let mut after = after;
        while found.len() < limit {
            let events = self.events(&room, Some(after), None, PAGE, false).await?;
            let Some(last) = events.last().map(|event| event.seq) else {
                break;
            };
            found.extend(
                events
                    .iter()
                    .filter_map(|event| Self::message_out(event, &handles))
                    .take(limit - found.len()),
            );
            after = last;
        }
        Ok(Shown::of(&found))
    }

    async fn wait_for_messages(&self, timeout: Duration) -> Result<Vec<Value>, ToolError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let context = self.gateway.context();
        let mut watch = context.dispatch.watch_rooms();
        let mut closes = context.dispatch.watch_closes();
        let handles = self.handles().await;
        loop {
            let mut found = self.unread_with(None, &handles).await?;
            if !found.is_empty() {
                // A sender who joined during the wait is named too.
                if found.iter().any(|message| message.from_handle.is_none()) {
                    let now = self.handles().await;
                    for message in &mut found {
                        if let Some((handle, kind)) = now.get(&message.from) {
                            message.from_handle = Some(handle.clone());
                            message.from_kind = Some(*kind);
                        }
                    }
                }
                return Ok(found
                    .into_iter()
                    .map(|message| serde_json::to_value(message).unwrap_or(Value::Null))
                    .collect());
            }
            let rooms = self.read_markers().await?.into_keys().collect();
            // Counted waiting (`roundtable_mcp_waits`) until a message or the deadline.
            let _waiting = GaugeUnit::hold(context.metrics.clone(), |metrics| &metrics.mcp_waits);
            if !woken(&mut watch, &mut closes, self.me(), &rooms, deadline).await? {
                return Ok(Vec::new());
            }
        }
    }

    async fn set_status(
        &self,
        state: AgentState,
        detail: Option<&str>,
        room: Option<&str>,
    ) -> Result<Sent, ToolError> {
        let room = self.room_or_home(room).await?;
        let body = StatusBody {
            state,
            detail: detail.map(str::to_owned),
        };
        self.post_typed(&room, "status", body).await
    }

    async fn define_components(
        &self,
        room: &str,
        components: Vec<ComponentDef>,
    ) -> Result<Sent, ToolError> {
        let room = self.room_id(room).await?;
        let body = ArchBody::Define {
            define: components,
            source: None,
        };
        self.post_typed(&room, "arch", body).await
    }

    async fn update_component(
        &self,
        room: &str,
        component: &str,
        status: ComponentStatus,
        note: Option<&str>,
        files: Vec<String>,
    ) -> Result<Sent, ToolError> {
        let room = self.room_id(room).await?;
        let body = ArchBody::Status {
            component: component.to_owned(),
            status,
            note: note.map(str::to_owned),
            files: (!files.is_empty()).then_some(files),
            agent: None,
            claim: None,
        };
        self.post_typed(&room, "arch", body).await
    }

    async fn claim_component(
        &self,
        room: &str,
        component: &str,
        claim: bool,
        note: Option<&str>,
    ) -> Result<Sent, ToolError> {
        let room = self.room_id(room).await?;
        let body = ArchBody::Status {
            component: component.to_owned(),
            status: if claim {
                ComponentStatus::Working
            } else {
                ComponentStatus::Idle
            },
            note: note.map(str::to_owned),
            files: None,
            agent: None,
            claim: Some(claim),
        };
        self.post_typed(&room, "arch", body).await
    }

    async fn report_tasks(&self, tasks: Vec<Task>, room: Option<&str>) -> Result<Sent, ToolError> {
        let room = self.room_or_home(room).await?;
        let body = TasksBody {
            session: SessionRef {
                agent: self.me().to_owned(),
                framework: "mcp".into(),
                session_id: self.session.clone(),
            },
            source: "report_tasks".into(),
            tasks,
        };
        self.post_typed(&room, "tasks", body).await
    }

    async fn raise_ping(
        &self,
        question: &str,
        options: &[String],
        timeout: Duration,
    ) -> Result<Ping, ToolError> {
        let room = self.home_room().await?;
        let ping = random_key("q");
        let body = PingBody {
            ping: ping.clone(),
            question: question.to_owned(),
            options: (!options.is_empty()).then(|| options.to_vec()),
            to: self.principal.owner.clone().map(|owner| vec![owner]),
            expires_at: Some(roundtable_protocol::ts::format_millis(
                crate::unix_ms() + timeout.as_millis() as i64,
            )),
        };
        let seq = self
            .post(
                &room,
                "ping",
                serde_json::to_value(body).unwrap_or(Value::Null),
            )
            .await?;
        Ok(Ping { room, ping, seq })
    }

    async fn await_answer(&self, ping: &Ping, timeout: Duration) -> Result<HumanAnswer, ToolError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let context = self.gateway.context();
        let mut watch = context.dispatch.watch_rooms();
        let mut closes = context.dispatch.watch_closes();
        let rooms = std::collections::BTreeSet::from([ping.room.clone()]);
        let mut after = ping.seq;
        loop {
            if let Some((event, body)) = self.answer_to(&ping.room, &ping.ping, &mut after).await? {
                let handles = self.handles().await;
                return Ok(HumanAnswer::Yes {
                    by: Some(
                        handles
                            .get(&event.from)
                            .map_or(event.from.clone(), |(handle, _)| handle.clone()),
                    ),
                    choice: body.choice,
                    text: body.text,
                });
            }
            if !woken(&mut watch, &mut closes, self.me(), &rooms, deadline).await? {
                return Ok(HumanAnswer::TimedOut);
            }
        }
    }

    async fn withdraw_ping(&self, ping: &Ping, reason: &str) -> Result<(), ToolError> {
        // One withdrawal per ping, however often it is asked for.
        self.post_keyed(
            &ping.room,
            "x-ping-withdrawn",
            json!({"ping": ping.ping, "reason": reason}),
            withdrawal_key(&ping.ping),
        )
        .await
        .map(drop)
    }

    fn principal(&self) -> String {
        self.caller.id.clone()
    }
}
