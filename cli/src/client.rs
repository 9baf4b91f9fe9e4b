//! The client commands: `roundtable signup`, `login`, `rooms`, `send`, `tail`… over the core
//! (`roundtable-core`), so the CLI sees the network exactly as the desktop app does: through
//! the local cache and the outbox. `send` works offline; everything else that needs the hub
//! says so clearly when it cannot reach it.
//!
//! Exit codes: 0 done; 1 another failure; 2 bad usage; 3 the hub is unreachable; 4 the hub
//! refused (its error code is printed); 5 the token was refused or revoked.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use roundtable_core::{Core, CoreError, Outcome, SyncState, cache::PrincipalRow, profile};
use roundtable_protocol::ClientFrame;
use roundtable_protocol::client::*;
use roundtable_protocol::model::Discoverable;
use roundtable_protocol::server::{
    AgentTokenOk, ContactsOk, DirectoryOk, InviteCreateOk, InviteRedeemOk, RegisterAgentOk, RoomOk,
    RoomsOk,
};
use serde_json::json;

/// How long a command waits for the hub before it gives up (sends stay queued).
const PATIENCE: Duration = Duration::from_secs(10);

/// The exit code for a token the hub refused or revoked.
const TOKEN_REFUSED: u8 = 5;

/// A failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<CoreError> for Failure {
    fn from(error: CoreError) -> Failure {
        let code = match &error {
            CoreError::Refused { code, .. } if code == "unauthorized" => TOKEN_REFUSED,
            CoreError::Refused { .. } => 4,
            CoreError::Timeout | CoreError::NotSent => 3,
            CoreError::Http(_) => 3,
            _ => 1,
        };
        Failure::new(code, error.to_string())
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Failure {
        Failure::new(1, error.to_string())
    }
}

#[derive(Debug, Args)]
pub struct Global {
    /// The profile to use (one identity on one hub).
    #[arg(
        long,
        global = true,
        env = "ROUNDTABLE_PROFILE",
        default_value = "default"
    )]
    profile: String,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Create a user on a hub and save it as a profile.
    Signup {
        /// The hub: host:port, or an http(s)/ws(s) URL.
        #[arg(long, env = "ROUNDTABLE_HUB")]
        hub: String,
        /// Your handle on the hub: 3 to 32 of a-z, 0-9, '-' and '_'.
        #[arg(long)]
        handle: String,
        /// Display name (default: the handle).
        #[arg(long)]
        name: Option<String>,
        /// An invite code (needed on invite-only hubs; makes you a contact of its creator).
        #[arg(long)]
        invite: Option<String>,
        /// private, contacts (default) or public.
        #[arg(long)]
        discoverable: Option<String>,
        /// A PEM CA file for a hub whose certificate a private CA signed.
        #[arg(long)]
        ca_file: Option<PathBuf>,
    },
    /// Save a profile for an existing token (read from ROUNDTABLE_TOKEN, or stdin with `-`).
    Login {
        /// The hub: host:port, or an http(s)/ws(s) URL.
        #[arg(long, env = "ROUNDTABLE_HUB")]
        hub: String,
        /// The token; `-` reads it from stdin (a token on the command line shows in `ps`).
        #[arg(long, env = "ROUNDTABLE_TOKEN", hide_env_values = true)]
        token: String,
        /// A PEM CA file for a hub whose certificate a private CA signed.
        #[arg(long)]
        ca_file: Option<PathBuf>,
    },
    /// Sync state, outbox, hub and profile.
    Status,
    /// Sync with the hub and send what the outbox holds; `--follow` keeps syncing.
    Sync {
        /// Keep syncing (and sending) until interrupted.
        #[arg(long)]
        follow: bool,
    },
    /// The rooms you are in.
    Rooms,
    /// Create, invite into, or leave a room.
    #[command(subcommand)]
    Room(RoomCommand),
    /// Send a message to a room (works offline: it waits in the outbox).
    Send {
        /// The room's title or id.
        room: String,
        /// The message; `@handle` mentions a member.
        text: String,
    },
    /// The latest messages of a room; `--follow` prints new ones as they come.
    Tail {
        /// The room's title or id.
        room: String,
        /// How many of the latest messages to print.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Keep printing new messages until interrupted.
        #[arg(long)]
        follow: bool,
    },
    /// Messages of a room before a seq, from the cache (synced first).
    History {
        /// The room's title or id.
        room: String,
        /// Only messages with a seq below this one (default: up to the latest).
        #[arg(long)]
        before: Option<u64>,
        /// How many messages to print.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Contacts and pending requests; or request, accept, reject.
    Contacts {
        #[command(subcommand)]
        command: Option<ContactsCommand>,
    },
    /// Invite codes for remote teammates.
    #[command(subcommand)]
    Invite(InviteCommand),
    /// Register and control your agents.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// What waits in the outbox; `retry N` sends a failed entry again.
    Outbox {
        #[command(subcommand)]
        command: Option<OutboxCommand>,
    },
}

#[derive(Debug, Subcommand)]
pub enum RoomCommand {
    /// Create a room; you are its creator and first member.
    Create {
        #[arg(long)]
        title: Option<String>,
        #[arg(long)]
        topic: Option<String>,
        /// A member's handle (repeat for more).
        #[arg(long = "member")]
        members: Vec<String>,
    },
    /// Add a principal (a contact, one of your agents, or a contact's agent) to a room.
    Invite {
        /// The room's title or id.
        room: String,
        /// `user` or `user/agent`.
        handle: String,
    },
    /// Leave a room.
    Leave {
        /// The room's title or id.
        room: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ContactsCommand {
    /// Ask a principal to become a contact (they must accept).
    Request {
        /// `user` or `user/agent`.
        handle: String,
        /// A note shown with the request (up to 500 bytes).
        #[arg(long)]
        message: Option<String>,
    },
    /// Accept a pending request made to you or one of your agents.
    Accept {
        /// The request's id (see `roundtable contacts`).
        request: String,
    },
    /// Reject a request made to you, or cancel one you made.
    Reject {
        /// The request's id (see `roundtable contacts`).
        request: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum InviteCommand {
    /// Create an invite link: whoever redeems it becomes your contact (and joins `--room`).
    Create {
        /// A room the invitee joins.
        #[arg(long)]
        room: Option<String>,
        /// How many people may redeem it.
        #[arg(long, default_value_t = 1)]
        max_uses: u32,
        /// Seconds until it expires (default: 7 days).
        #[arg(long)]
        expires_in: Option<u64>,
    },
    /// Redeem an invite: its link (`roundtable://invite/…`) or its code.
    Redeem { code: String },
}

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Register an agent `<you>/<name>`; prints its token (shown once).
    Register {
        name: String,
        /// What the agent does, shown in the directory.
        #[arg(long)]
        description: Option<String>,
        /// private, contacts (default) or public.
        #[arg(long)]
        discoverable: Option<String>,
    },
    /// Its messages are refused until `resume` (in `--room` only, or everywhere).
    Pause {
        /// One of your agents by name, or any agent as `user/name`.
        agent: String,
        #[arg(long)]
        room: Option<String>,
    },
    /// Issue a new token for one of your agents; the old one stops working at once.
    Rotate {
        /// One of your agents by name, or as `user/name`.
        agent: String,
    },
    /// Revoke one of your agents' token: its connections close and it cannot connect again
    /// until you `rotate` (which issues a new token).
    Revoke {
        /// One of your agents by name, or as `user/name`.
        agent: String,
    },
    /// Lift a pause or a stop.
    Resume {
        /// One of your agents by name, or any agent as `user/name`.
        agent: String,
        #[arg(long)]
        room: Option<String>,
    },
    /// As pause, and its connections are closed until `resume`.
    Stop {
        /// One of your agents by name, or any agent as `user/name`.
        agent: String,
        #[arg(long)]
        room: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// Queue a failed entry again.
    Retry {
        /// The entry's number (see `roundtable outbox`).
        n: u64,
    },
}

/// Prints either text or JSON.
struct Out {
    json: bool,
}

impl Out {
    fn show(&self, text: impl std::fmt::Display, value: serde_json::Value) -> Result<(), Failure> {
        let mut stdout = std::io::stdout().lock();
        if self.json {
            writeln!(stdout, "{value}")?;
        } else {
            writeln!(stdout, "{text}")?;
        }
        Ok(())
    }
}

fn discoverable(value: Option<String>) -> Result<Option<Discoverable>, Failure> {
    value
        .map(|value| {
            Discoverable::parse(&value).ok_or_else(|| {
                Failure::new(
                    2,
                    format!("discoverable is private, contacts or public, not {value:?}"),
                )
            })
        })
        .transpose()
}

pub async fn run(global: Global, command: ClientCommand) -> Result<(), Failure> {
    let out = Out { json: global.json };
    let base = profile::profiles_dir();
    match command {
        ClientCommand::Signup {
            hub,
            handle,
            name,
            invite,
            discoverable: visibility,
            ca_file,
        } => {
            let request = SignupRequest {
                name: name.unwrap_or_else(|| handle.clone()),
                handle,
                discoverable: discoverable(visibility)?,
                invite,
            };
            let profile =
                roundtable_core::signup(&base, &global.profile, &hub, request, ca_file).await?;
            return out.show(
                format!(
                    "signed up as {} on {}; profile {:?} saved (token in {})",
                    profile.handle,
                    profile.hub,
                    profile.name,
                    profile.dir.join("token").display()
                ),
                json!({"profile": profile.name, "principal": profile.principal, "handle": profile.handle}),
            );
        }
        ClientCommand::Login {
            hub,
            token,
            ca_file,
        } => {
            let token = if token == "-" {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line)?;
                line.trim().to_owned()
            } else {
                token
            };
            let profile =
                roundtable_core::login(&base, &global.profile, &hub, &token, ca_file).await?;
            return out.show(
                format!("logged in as {} on {}; profile {:?} saved", profile.handle, profile.hub, profile.name),
                json!({"profile": profile.name, "principal": profile.principal, "handle": profile.handle}),
            );
        }
        _ => {}
    }
    let profile = profile::Profile::load(&base, &global.profile)
        .map_err(|error| Failure::new(1, error.to_string()))?;
    let core = Core::open(profile)?;
    let sync = core.start();
    let result = with_core(&core, &out, command).await;
    sync.stop().await;
    result
}

/// Waits until the sync task has caught up; tells why it could not.
async fn synced(core: &Core) -> Result<(), Failure> {
    let mut state = core.sync_state();
    let wait = state.wait_for(|state| {
        matches!(
            state,
            SyncState::Idle | SyncState::Offline { .. } | SyncState::Error { .. }
        ) && !matches!(state, SyncState::Offline { reason } if reason == "not started")
    });
    let state = match tokio::time::timeout(PATIENCE, wait).await {
        Ok(Ok(state)) => state.clone(),
        _ => return Err(Failure::new(3, "the hub did not answer in time")),
    };
    match state {
        SyncState::Idle | SyncState::Syncing => Ok(()),
        SyncState::Offline { reason } => {
            Err(Failure::new(3, format!("the hub is unreachable: {reason}")))
        }
        SyncState::Error { reason } => Err(Failure::new(TOKEN_REFUSED, reason)),
    }
}

/// The seq below which a page of the latest `limit` messages cannot reach: that of its
/// oldest message, or 0 when the page is not full (older ones may still come).
fn window_floor(page: &[roundtable_core::cache::MessageView], limit: u32) -> u64 {
    if page.len() < limit as usize {
        0
    } else {
        page.first()
            .and_then(|m| m.seq)
            .map_or(0, |seq| seq.saturating_sub(1))
    }
}

/// Waits (at most [`PATIENCE`]) until history has filled every gap of `room` between
/// `floor` and `below`; false when some remain.
async fn gaps_filled(core: &Core, room: &str, floor: u64, below: u64) -> Result<bool, Failure> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let open = core
            .read(|cache| cache.gaps())?
            .iter()
            .any(|(r, from, to)| r == room && *to > floor && *from < below);
        if !open {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn warn_if_incomplete(complete: bool) {
    if !complete {
        eprintln!(
            "roundtable: older messages of this room are still being fetched; this list may miss some"
        );
    }
}

/// A room id from an id or a title of one of our rooms.
fn room_id(core: &Core, room: &str) -> Result<String, Failure> {
    let rooms = core.read(|cache| cache.rooms())?;
    if rooms.iter().any(|r| r.id == room) {
        return Ok(room.to_owned());
    }
    let titled: Vec<_> = rooms
        .iter()
        .filter(|r| r.title.as_deref() == Some(room))
        .collect();
    match titled.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(Failure::new(
            4,
            format!("you are in no room {room:?}; list them with `roundtable rooms`"),
        )),
        _ => Err(Failure::new(
            2,
            format!("several rooms are titled {room:?}; use the room's id"),
        )),
    }
}

/// Remembers principals a reply names, to show handles.
fn remember(core: &Core, members: impl IntoIterator<Item = roundtable_protocol::model::Member>) {
    core.remember(members.into_iter().map(|member| PrincipalRow {
        id: member.id,
        kind: member.kind.as_str().to_owned(),
        handle: member.handle,
        name: member.name,
        owner: None,
    }));
}

async fn call(
    core: &Core,
    frame: ClientFrame,
) -> Result<roundtable_protocol::server::OkReply, Failure> {
    synced(core).await?;
    Ok(core.call(frame, PATIENCE).await?)
}

async fn with_core(core: &Core, out: &Out, command: ClientCommand) -> Result<(), Failure> {
    match command {
        ClientCommand::Signup { .. } | ClientCommand::Login { .. } => unreachable!("handled above"),
        ClientCommand::Status => {
            let state = match tokio::time::timeout(Duration::from_secs(3), synced(core)).await {
                Ok(Ok(())) => "idle (up to date)".to_owned(),
                Ok(Err(failure)) => failure.message,
                Err(_) => "syncing".to_owned(),
            };
            let profile = core.profile();
            let pending = core.read(|cache| cache.outbox_pending())?;
            let failed = pending
                .iter()
                .filter(|e| e.state == roundtable_core::cache::OutboxState::Failed)
                .count();
            out.show(
                format!(
                    "profile {} ({} on {})\nsync: {state}\noutbox: {} waiting, {failed} failed",
                    profile.name,
                    profile.handle,
                    profile.hub,
                    pending.len() - failed
                ),
                json!({"profile": profile.name, "handle": profile.handle, "hub": profile.hub.to_string(),
                       "sync": state, "outbox": {"waiting": pending.len() - failed, "failed": failed}}),
            )
        }
        ClientCommand::Sync { follow } => {
            synced(core).await?;
            wait_outbox_drained(core).await;
            if follow {
                let mut changes = core.changes();
                loop {
                    match changes.recv().await {
                        Ok(change) => out.show(
                            format!("{change:?}"),
                            serde_json::to_value(&change).unwrap_or_default(),
                        )?,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(_) => return Ok(()),
                    }
                }
            }
            let pending = core.read(|cache| cache.outbox_pending())?;
            out.show(
                format!("synced; {} in the outbox", pending.len()),
                json!({"outbox": pending.len()}),
            )
        }
        ClientCommand::Rooms => {
            synced(core).await?;
            let ok = core
                .call(ClientFrame::Rooms(Rooms { id: 0 }), PATIENCE)
                .await?;
            let rooms: RoomsOk = ok.decode().map_err(|e| Failure::new(1, e.to_string()))?;
            for room in &rooms.rooms {
                remember(core, room.members.clone());
            }
            let text = rooms
                .rooms
                .iter()
                .map(|room| {
                    let members: Vec<&str> =
                        room.members.iter().map(|m| m.handle.as_str()).collect();
                    format!(
                        "{}  {}  [{}]",
                        room.id,
                        room.title.as_deref().unwrap_or("(untitled)"),
                        members.join(", ")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.show(
                if text.is_empty() {
                    "no rooms".into()
                } else {
                    text
                },
                serde_json::to_value(&rooms.rooms).unwrap_or_default(),
            )
        }
        ClientCommand::Room(RoomCommand::Create {
            title,
            topic,
            members,
        }) => {
            let ok = call(
                core,
                ClientFrame::RoomCreate(RoomCreate {
                    id: 0,
                    title,
                    topic,
                    members,
                }),
            )
            .await?;
            let room: RoomOk = ok.decode().map_err(|e| Failure::new(1, e.to_string()))?;
            remember(core, room.room.members.clone());
            out.show(
                format!(
                    "created room {} ({})",
                    room.room.title.as_deref().unwrap_or("untitled"),
                    room.room.id
                ),
                serde_json::to_value(&room.room).unwrap_or_default(),
            )
        }
        ClientCommand::Room(RoomCommand::Invite { room, handle }) => {
            synced(core).await?;
            let room = room_id(core, &room)?;
            call(
                core,
                ClientFrame::RoomInvite(RoomInvite {
                    id: 0,
                    room: room.clone(),
                    handle: handle.clone(),
                }),
            )
            .await?;
            out.show(
                format!("{handle} is in room {room}"),
                json!({"room": room, "handle": handle}),
            )
        }
        ClientCommand::Room(RoomCommand::Leave { room }) => {
            synced(core).await?;
            let room = room_id(core, &room)?;
            call(
                core,
                ClientFrame::RoomLeave(RoomLeave {
                    id: 0,
                    room: room.clone(),
                }),
            )
            .await?;
            out.show(format!("left room {room}"), json!({"room": room}))
        }
        ClientCommand::Send { room, text } => {
            // A title resolves from the cache (after a sync when it is not there yet); an id,
            // or anything while offline, goes as given.
            // A refused token is no reason to queue: the user must act first.
            let room = match room_id(core, &room) {
                Ok(id) => id,
                Err(_) => match synced(core).await {
                    Ok(()) => room_id(core, &room)?,
                    Err(failure) if failure.code == TOKEN_REFUSED => return Err(failure),
                    Err(_) => room,
                },
            };
            let n = core.send_message(&room, &text)?;
            // Offline, there is nothing to wait for: the message waits in the outbox.
            let outcome = tokio::select! {
                outcome = core.wait(n, PATIENCE) => outcome,
                failure = synced(core) => match failure {
                    Ok(()) => core.wait(n, PATIENCE).await,
                    Err(failure) if failure.code == TOKEN_REFUSED => {
                        return Err(Failure::new(
                            TOKEN_REFUSED,
                            format!("{}; the message waits in the outbox (entry {n})", failure.message),
                        ));
                    }
                    Err(_) => Err(CoreError::Timeout),
                },
            };
            match outcome {
                Ok(Outcome::Done(reply)) => {
                    let seq = serde_json::from_str::<serde_json::Value>(&reply)
                        .ok()
                        .and_then(|ok| ok["event"]["seq"].as_u64());
                    out.show(
                        match seq {
                            Some(seq) => format!("sent (seq {seq})"),
                            None => "sent".into(),
                        },
                        json!({"state": "sent", "seq": seq, "outbox": n}),
                    )
                }
                Ok(Outcome::Failed { code, msg }) => Err(Failure::new(
                    if code == "unauthorized" { TOKEN_REFUSED } else { 4 },
                    format!("the hub refused the message: {msg} ({code}); see `roundtable outbox`"),
                )),
                Err(_) => out.show(
                    "queued: the hub is unreachable now; it will be sent by the next roundtable command that reaches it",
                    json!({"state": "queued", "outbox": n}),
                ),
            }
        }
        ClientCommand::Tail {
            room,
            limit,
            follow,
        } => {
            synced(core).await?;
            let room = room_id(core, &room)?;
            // The window is the latest `limit` messages; what history still has to bring
            // into it is waited for.
            let stored = core.read(|cache| cache.messages_before(&room, u64::MAX, limit))?;
            let floor = window_floor(&stored, limit);
            warn_if_incomplete(gaps_filled(core, &room, floor, u64::MAX).await?);
            let mut changes = core.changes();
            let messages = core.read(|cache| cache.messages(&room, 0, limit))?;
            let mut printed = std::collections::HashSet::new();
            let mut last = floor;
            for message in &messages {
                print_message(core, out, message)?;
                if let Some(seq) = message.seq {
                    printed.insert(seq);
                    last = last.max(seq);
                }
            }
            if !follow {
                return Ok(());
            }
            loop {
                match changes.recv().await {
                    Ok(roundtable_core::Change::Room(changed)) if changed == room => {}
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return Ok(()),
                }
                // New messages after the last printed; and when history filled a gap
                // inside the window (after a long disconnection), the ones it brought.
                let refilled = core
                    .read(|cache| cache.gaps())?
                    .iter()
                    .any(|(r, from, to)| *r == room && *to > floor && *from <= last);
                let mut after = if refilled { floor } else { last };
                loop {
                    let page = core.read(|cache| cache.messages_after(&room, after, 1000))?;
                    let Some(end) = page.last().and_then(|m| m.seq) else {
                        break;
                    };
                    for message in &page {
                        if let Some(seq) = message.seq
                            && printed.insert(seq)
                        {
                            print_message(core, out, message)?;
                            last = last.max(seq);
                        }
                    }
                    after = end;
                }
            }
        }
        ClientCommand::History {
            room,
            before,
            limit,
        } => {
            synced(core).await?;
            let room = room_id(core, &room)?;
            let below = before.unwrap_or(u64::MAX);
            let stored = core.read(|cache| cache.messages_before(&room, below, limit))?;
            let floor = window_floor(&stored, limit);
            warn_if_incomplete(gaps_filled(core, &room, floor, below).await?);
            let page = core.read(|cache| cache.messages_before(&room, below, limit))?;
            for message in &page {
                print_message(core, out, message)?;
            }
            Ok(())
        }
        ClientCommand::Contacts { command: None } => {
            let ok = call(core, ClientFrame::Contacts(Contacts { id: 0 })).await?;
            let contacts: ContactsOk = ok.decode().map_err(|e| Failure::new(1, e.to_string()))?;
            let mut lines: Vec<String> = contacts
                .contacts
                .iter()
                .map(|c| format!("contact  {}  ({})", c.handle, c.kind.as_str()))
                .collect();
            lines.extend(contacts.requests.iter().map(|r| {
                format!(
                    "request  {}  {} -> {}  {}",
                    r.id,
                    r.from,
                    r.to,
                    r.message.as_deref().unwrap_or("")
                )
            }));
            out.show(
                if lines.is_empty() {
                    "no contacts".into()
                } else {
                    lines.join("\n")
                },
                serde_json::to_value(&contacts).unwrap_or_default(),
            )
        }
        ClientCommand::Contacts {
            command: Some(ContactsCommand::Request { handle, message }),
        } => {
            let ok = call(
                core,
                ClientFrame::ContactRequest(ContactRequestCmd {
                    id: 0,
                    to: handle.clone(),
                    message,
                }),
            )
            .await?;
            let request = ok.fields.get("request").cloned().unwrap_or_default();
            out.show(
                format!(
                    "asked {handle} (request {})",
                    request["id"].as_str().unwrap_or("?")
                ),
                request,
            )
        }
        ClientCommand::Contacts {
            command: Some(ContactsCommand::Accept { request }),
        } => {
            call(
                core,
                ClientFrame::ContactRespond(ContactRespond {
                    id: 0,
                    request: request.clone(),
                    accept: true,
                }),
            )
            .await?;
            out.show(
                format!("accepted {request}"),
                json!({"request": request, "accepted": true}),
            )
        }
        ClientCommand::Contacts {
            command: Some(ContactsCommand::Reject { request }),
        } => {
            call(
                core,
                ClientFrame::ContactRespond(ContactRespond {
                    id: 0,
                    request: request.clone(),
                    accept: false,
                }),
            )
            .await?;
            out.show(
                format!("declined {request}"),
                json!({"request": request, "accepted": false}),
            )
        }
        ClientCommand::Invite(InviteCommand::Create {
            room,
            max_uses,
            expires_in,
        }) => {
            synced(core).await?;
            let room = room.map(|room| room_id(core, &room)).transpose()?;
            let ok = call(
                core,
                ClientFrame::InviteCreate(InviteCreate {
                    id: 0,
                    room,
                    max_uses: Some(max_uses),
                    expires_in_s: expires_in,
                }),
            )
            .await?;
            let created: InviteCreateOk =
                ok.decode().map_err(|e| Failure::new(1, e.to_string()))?;
            out.show(
                format!("{}\ncode: {}", created.link, created.code),
                serde_json::to_value(&created).unwrap_or_default(),
            )
        }
        ClientCommand::Invite(InviteCommand::Redeem { code }) => {
            let code = code
                .strip_prefix("roundtable://invite/")
                .map(|rest| rest.split('?').next().unwrap_or_default().to_owned())
                .unwrap_or(code);
            let ok = call(
                core,
                ClientFrame::InviteRedeem(InviteRedeem { id: 0, code }),
            )
            .await?;
            let redeemed: InviteRedeemOk =
                ok.decode().map_err(|e| Failure::new(1, e.to_string()))?;
            out.show(
                match &redeemed.room {
                    Some(room) => {
                        format!("redeemed: you are now a contact, and in room {}", room.id)
                    }
                    None => "redeemed: you are now a contact".into(),
                },
                serde_json::to_value(&redeemed).unwrap_or_default(),
            )
        }
        ClientCommand::Agents(AgentsCommand::Register {
            name,
            description,
            discoverable: visibility,
        }) => {
            let ok = call(
                core,
                ClientFrame::RegisterAgent(RegisterAgent {
                    id: 0,
                    name,
                    description,
                    card: None,
                    discoverable: discoverable(visibility)?,
                }),
            )
            .await?;
            let agent: RegisterAgentOk = ok.decode().map_err(|e| Failure::new(1, e.to_string()))?;
            out.show(
                format!("registered {} ({}); its token, shown once:\n{}", agent.agent.handle, agent.agent.id, agent.token),
                json!({"agent": agent.agent, "token": agent.token, "room": agent.room.map(|r| r.id)}),
            )
        }
        ClientCommand::Agents(AgentsCommand::Pause { agent, room }) => {
            control(core, out, agent, ControlAction::Pause, room).await
        }
        ClientCommand::Agents(AgentsCommand::Resume { agent, room }) => {
            control(core, out, agent, ControlAction::Resume, room).await
        }
        ClientCommand::Agents(AgentsCommand::Stop { agent, room }) => {
            control(core, out, agent, ControlAction::Stop, room).await
        }
        ClientCommand::Agents(AgentsCommand::Rotate { agent }) => {
            agent_token(core, out, agent, TokenAction::Rotate).await
        }
        ClientCommand::Agents(AgentsCommand::Revoke { agent }) => {
            agent_token(core, out, agent, TokenAction::Revoke).await
        }
        ClientCommand::Outbox { command } => {
            if let Some(OutboxCommand::Retry { n }) = command {
                if !core.retry(n)? {
                    return Err(Failure::new(
                        2,
                        format!("outbox entry {n} is not a failed entry"),
                    ));
                }
                synced(core).await?;
                wait_outbox_drained(core).await;
            }
            let pending = core.read(|cache| cache.outbox_pending())?;
            let text = pending
                .iter()
                .map(|entry| {
                    format!(
                        "{}  {}  {}{}",
                        entry.n,
                        entry.state.as_str(),
                        entry.room.as_deref().unwrap_or("-"),
                        entry
                            .error_msg
                            .as_deref()
                            .map(|m| format!("  {m}"))
                            .unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.show(
                if text.is_empty() {
                    "the outbox is empty".into()
                } else {
                    text
                },
                serde_json::to_value(&pending).unwrap_or_default(),
            )
        }
    }
}

async fn wait_outbox_drained(core: &Core) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut changes = core.changes();
    loop {
        let waiting = core
            .read(|cache| cache.outbox_pending())
            .map(|entries| {
                entries
                    .iter()
                    .any(|e| e.state != roundtable_core::cache::OutboxState::Failed)
            })
            .unwrap_or(false);
        if !waiting || tokio::time::Instant::now() >= deadline {
            return;
        }
        let _ = tokio::time::timeout_at(deadline, changes.recv()).await;
    }
}

async fn agent_token(
    core: &Core,
    out: &Out,
    agent: String,
    action: TokenAction,
) -> Result<(), Failure> {
    synced(core).await?;
    let (agent, id) = agent_id(core, agent).await?;
    let ok = core
        .call(
            ClientFrame::AgentToken(AgentToken {
                id: 0,
                agent: id,
                action,
            }),
            PATIENCE,
        )
        .await?;
    let reply: AgentTokenOk = ok.decode().map_err(|e| Failure::new(1, e.to_string()))?;
    match reply.token {
        Some(token) => out.show(
            format!("new token for {agent}, shown once (the old one no longer works):\n{token}"),
            json!({"agent": agent, "token": token}),
        ),
        None => out.show(
            format!("revoked {agent}'s token; `roundtable agents rotate` issues a new one"),
            json!({"agent": agent, "revoked": true}),
        ),
    }
}

async fn control(
    core: &Core,
    out: &Out,
    agent: String,
    action: ControlAction,
    room: Option<String>,
) -> Result<(), Failure> {
    synced(core).await?;
    let room = room.map(|room| room_id(core, &room)).transpose()?;
    let (agent, id) = agent_id(core, agent).await?;
    core.call(
        ClientFrame::Control(Control {
            id: 0,
            agent: id,
            action,
            room: room.clone(),
        }),
        PATIENCE,
    )
    .await?;
    out.show(
        format!(
            "{} {agent}{}",
            match action {
                ControlAction::Pause => "paused",
                ControlAction::Resume => "resumed",
                ControlAction::Stop => "stopped",
            },
            room.map(|r| format!(" in {r}")).unwrap_or_default()
        ),
        json!({"agent": agent, "action": action.as_str()}),
    )
}

/// An agent's handle and id from `user/name`, or `name` (one's own agent).
async fn agent_id(core: &Core, agent: String) -> Result<(String, String), Failure> {
    let handle = if agent.contains('/') {
        agent
    } else {
        format!("{}/{agent}", core.profile().handle)
    };
    let ok = core
        .call(
            ClientFrame::Directory(Directory {
                id: 0,
                query: Some(handle.clone()),
                limit: Some(200),
            }),
            PATIENCE,
        )
        .await?;
    let found: DirectoryOk = ok.decode().map_err(|e| Failure::new(1, e.to_string()))?;
    let id = found
        .entries
        .into_iter()
        .find(|entry| entry.handle == handle)
        .map(|entry| entry.id)
        .ok_or_else(|| Failure::new(4, format!("no agent {handle:?} you can see")))?;
    Ok((handle, id))
}

fn print_message(
    core: &Core,
    out: &Out,
    message: &roundtable_core::cache::MessageView,
) -> Result<(), Failure> {
    let who = match &message.from_handle {
        Some(handle) => handle.clone(),
        None => core
            .read(|cache| cache.handle_of(&message.from))?
            .unwrap_or_else(|| message.from.clone()),
    };
    let mark = match message.delivery {
        "stored" => String::new(),
        other => format!(" ({other})"),
    };
    out.show(
        format!(
            "[{}] {who}: {}{mark}",
            message
                .seq
                .map(|s| s.to_string())
                .unwrap_or_else(|| "…".into()),
            message.text
        ),
        serde_json::to_value(message).unwrap_or_default(),
    )
}
