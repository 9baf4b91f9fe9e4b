//! The client commands: `roundtable signup`, `login`, `rooms`, `send`, `tail`… Each parses
//! its arguments, calls one function of the core (`roundtable-core`, which the desktop app
//! and the MCP bridge use too) and prints the result as text or JSON. `send` works offline,
//! and hands its message to a running `roundtable` process on the profile when there is
//! one; everything else that needs the hub says so clearly when it cannot reach it.

use std::io::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use roundtable_core::agents::{AgentSettings, TokenChange};
use roundtable_core::cache::{MessageView, OutboxState};
use roundtable_core::client::{Delivered, PATIENCE};
use roundtable_core::hooks::HookSettings;
use roundtable_core::local_agents::onboarding::{self, OnboardOptions, Report};
use roundtable_core::local_agents::{AgentCli, Environment, detect::detect as detect_clis};
use roundtable_core::teams;
use roundtable_core::{Core, CoreError, SyncOptions, SyncState, profile};
use roundtable_protocol::client::*;
use roundtable_protocol::model::Discoverable;
use serde::Serialize;
use serde_json::json;

/// What the exit status says went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Anything else.
    Failure = 1,
    /// Bad usage: an argument that cannot be right.
    Usage = 2,
    /// The hub could not be reached.
    Unreachable = 3,
    /// The hub refused (its code is printed), or what was named does not exist.
    Refused = 4,
    /// The token was refused or revoked (or the agent is stopped).
    TokenRefused = 5,
}

/// A failure with its exit status.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub(crate) fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
        }
    }
}

impl From<CoreError> for Failure {
    fn from(error: CoreError) -> Failure {
        let exit = match &error {
            CoreError::TokenRefused(_) | CoreError::Stopped(_) => Exit::TokenRefused,
            CoreError::Refused { .. } | CoreError::NotFound(_) => Exit::Refused,
            CoreError::Timeout
            | CoreError::NotSent
            | CoreError::Offline(_)
            | CoreError::Http(_) => Exit::Unreachable,
            CoreError::Ambiguous(_) => Exit::Usage,
            _ => Exit::Failure,
        };
        Failure::new(exit, error.to_string())
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Failure {
        Failure::new(Exit::Failure, error.to_string())
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
        /// An invite, its code or its `roundtable://invite/…` link (needed on invite-only
        /// hubs; makes you a contact of its creator).
        #[arg(long)]
        invite: Option<String>,
        /// private, contacts (default) or public.
        #[arg(long)]
        discoverable: Option<String>,
        /// A PEM CA file for a hub whose certificate a private CA signed.
        #[arg(long)]
        ca_file: Option<PathBuf>,
        /// Talk to a hub on another machine without TLS (your token crosses the network in
        /// the clear): only for a hub on a network you trust.
        #[arg(long)]
        insecure: bool,
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
        /// Talk to a hub on another machine without TLS (your token crosses the network in
        /// the clear): only for a hub on a network you trust.
        #[arg(long)]
        insecure: bool,
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
    /// Read this machine's agent logs once (no hub needed): per session, its task list, the
    /// files it changed, its tokens and cost.
    Scan,
    /// Follow this machine's agent logs: keep the work view current and publish onboarded
    /// agents' tasks, usage and components.
    Watch,
    /// Cost and tokens, grouped (`--by` session, agent, person, team, model, day, room; repeat
    /// for several).
    Usage {
        #[arg(long)]
        by: Vec<String>,
        /// From a date (2026-11-30), a time, or a duration back (7d, 12h).
        #[arg(long)]
        since: Option<String>,
    },
    /// Every agent session's own task list.
    Tasks,
    /// The architecture boards (of one room, or all).
    Arch { room: Option<String> },
    /// What happened in your rooms since you last read them.
    Digest,
    /// The rooms your agents' work is shared with besides their home rooms.
    Share {
        #[command(subcommand)]
        command: Option<ShareCommand>,
    },
    /// Teams of agents from a template.
    #[command(subcommand)]
    Team(TeamCommand),
    /// Questions agents asked you that wait for an answer (`--all`: answered ones too).
    Pings {
        #[arg(long)]
        all: bool,
    },
    /// Answer a ping: with one of its options, or in words with `--text`.
    Answer {
        /// The ping's id (see `roundtable pings`).
        ping: String,
        /// The option chosen.
        choice: Option<String>,
        /// An answer in words.
        #[arg(long)]
        text: Option<String>,
        /// The ping's room (title or id), when its id is not enough.
        #[arg(long)]
        room: Option<String>,
    },
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
    /// Add one of your agents or one of your contacts to a room. Contacts are per principal:
    /// a contact's agent joins only once it is your contact too (`contacts request`).
    /// An agent may add its kin, its own contacts and its person's.
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
    /// Your invites that can still be redeemed (not withdrawn, used up or expired).
    List,
    /// Withdraw one of your invites: its code stops working at once.
    Revoke {
        /// The invite's id, `i_…` (see `roundtable invite list`), not its code.
        invite: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// The agent CLIs installed here (claude, codex, gemini; opencode, cursor-agent and
    /// copilot are listed), with their versions and whether an agent is onboarded on them.
    Detect,
    /// Onboard an agent CLI in one step: register `<you>/<name>` and wire the CLI's
    /// configuration (an MCP server and hooks) to it.
    Onboard {
        /// claude, codex or gemini.
        cli: String,
        /// The agent's name: it becomes `<you>/<name>`.
        #[arg(long)]
        name: String,
        /// Edit this project's configuration (`.mcp.json`, `.claude/settings.json`) instead
        /// of your own.
        #[arg(long)]
        project: Option<PathBuf>,
        /// What the agent does, shown in the directory.
        #[arg(long)]
        description: Option<String>,
        /// How long a finished turn listens for messages before the session rests.
        #[arg(long, default_value_t = 600)]
        listen_seconds: u64,
        /// How long a permission request waits for your answer before the terminal asks.
        #[arg(long, default_value_t = 120)]
        permission_wait_seconds: u64,
        /// Leave the CLI's own task tool as it is (by default onboarding turns on Claude
        /// Code's task tools and Codex's update_plan, which today's default models lack).
        #[arg(long)]
        no_task_tools: bool,
    },
    /// Undo an onboarding: remove exactly what it added to the CLI's configuration (the
    /// agent stays registered).
    Offboard {
        /// claude, codex or gemini.
        cli: String,
        /// The agent's name (or `user/name`).
        #[arg(long)]
        name: String,
    },
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
pub enum ShareCommand {
    /// Share your agents' tasks, usage and components with a room (its title or id).
    Add { room: String },
    /// Stop sharing with a room.
    Remove { room: String },
}

#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// The templates there are (built in, and yours).
    Templates,
    /// Register one agent per role of a template, each on an agent CLI, and put them with
    /// you in a new room; `roundtable run` then sets them to work.
    Create {
        /// The template (see `roundtable team templates`).
        #[arg(long)]
        template: String,
        /// The room's title; the agents are named `<room>-<role>`.
        #[arg(long)]
        room: String,
        /// The agent CLI for every role (claude, codex or gemini).
        #[arg(long, default_value = "claude")]
        cli: String,
        /// The agent CLI of one role, as ROLE=CLI (repeat for more).
        #[arg(long = "role-cli")]
        role_cli: Vec<String>,
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
pub(crate) struct Out {
    json: bool,
}

impl Out {
    pub(crate) fn show(
        &self,
        text: impl std::fmt::Display,
        value: impl Serialize,
    ) -> Result<(), Failure> {
        let mut stdout = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
        if self.json {
            serde_json::to_writer(&mut stdout, &value).map_err(std::io::Error::from)?;
            writeln!(stdout)?;
        } else {
            writeln!(stdout, "{text}")?;
        }
        stdout.flush()?;
        Ok(())
    }

    fn message(&self, message: &MessageView) -> Result<(), Failure> {
        let who = message.from_handle.as_deref().unwrap_or(&message.from);
        let mark = match message.delivery.as_str() {
            "stored" => String::new(),
            other => format!(" ({other})"),
        };
        let seq = message
            .seq
            .map_or_else(|| "…".to_owned(), |seq| seq.to_string());
        self.show(format!("[{seq}] {who}: {}{mark}", message.text), message)
    }
}

fn discoverable(value: Option<String>) -> Result<Option<Discoverable>, Failure> {
    value
        .map(|value| {
            Discoverable::parse(&value).ok_or_else(|| {
                Failure::new(
                    Exit::Usage,
                    format!("discoverable is private, contacts or public, not {value:?}"),
                )
            })
        })
        .transpose()
}

fn warn_if_incomplete(complete: bool) {
    if !complete {
        eprintln!(
            "roundtable: older messages of this room are still being fetched; this list may miss some"
        );
    }
}

/// Refuses to act as a person from inside an agent session (see
/// `roundtable_core::agent_session`): an agent's profile is its own to use there, a
/// person's never is.
fn refuse_in_agent_session(handle: &str) -> Result<(), Failure> {
    if handle.contains('/') {
        return Ok(());
    }
    match roundtable_core::agent_session::current() {
        None => Ok(()),
        Some(evidence) => Err(Failure::new(
            Exit::Refused,
            format!(
                "refused: this runs inside an agent session ({evidence}), and an agent never acts as its person. \
                 Answer pings and act as yourself from the Roundtable app, its notifications, or a terminal outside any agent session; \
                 an agent uses its own Roundtable tools (see docs/security.md)"
            ),
        )),
    }
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
            insecure,
        } => {
            let invite = match invite {
                Some(invite) => Some(roundtable_core::screens::invite_code(&invite)?.to_owned()),
                None => None,
            };
            let request = SignupRequest {
                name: name.unwrap_or_else(|| handle.clone()),
                handle,
                discoverable: discoverable(visibility)?,
                invite,
            };
            let profile =
                roundtable_core::signup(&base, &global.profile, &hub, request, ca_file, insecure)
                    .await?;
            return out.show(
                format!(
                    "signed up as {} on {}; profile {:?} saved (token in {})",
                    profile.handle,
                    profile.hub,
                    profile.name,
                    if profile.in_secret_store {
                        "the OS secret store".to_owned()
                    } else {
                        profile.dir.join("token").display().to_string()
                    }
                ),
                json!({"profile": profile.name, "principal": profile.principal, "handle": profile.handle}),
            );
        }
        ClientCommand::Login {
            hub,
            token,
            ca_file,
            insecure,
        } => {
            let token = if token == "-" {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line)?;
                line.trim().to_owned()
            } else {
                token
            };
            let profile =
                roundtable_core::login(&base, &global.profile, &hub, &token, ca_file, insecure)
                    .await?;
            return out.show(
                format!("logged in as {} on {}; profile {:?} saved", profile.handle, profile.hub, profile.name),
                json!({"profile": profile.name, "principal": profile.principal, "handle": profile.handle}),
            );
        }
        ClientCommand::Agents(AgentsCommand::Detect) => return detect(&out, &base).await,
        ClientCommand::Team(TeamCommand::Templates) => return team_templates(&out),
        ClientCommand::Scan => return crate::work::scan(&out),
        ClientCommand::Agents(AgentsCommand::Offboard { cli, name }) => {
            return offboard(&out, &base, &global.profile, &cli, &name);
        }
        _ => {}
    }
    // Refused before the token is read (from the secret store, perhaps with a prompt).
    let checked = profile::Profile::handle_of(&base, &global.profile);
    if let Some(handle) = &checked {
        refuse_in_agent_session(handle)?;
    }
    let profile = profile::Profile::load(&base, &global.profile)
        .map_err(|error| Failure::new(Exit::Failure, error.to_string()))?;
    if checked.is_none() {
        refuse_in_agent_session(&profile.handle)?;
    }
    let core = Core::open(profile).await?;
    match command {
        ClientCommand::Signup { .. } | ClientCommand::Login { .. } => Ok(()),
        // A send needs no connection of its own when a running process takes it over.
        ClientCommand::Send { room, text } => send(&core, &out, &room, &text).await,
        ClientCommand::Tail {
            room,
            limit,
            follow,
        } => {
            let sync = core.start_with(SyncOptions {
                serve_hand_offs: follow,
            });
            let result = tail(&core, &out, &room, limit, follow).await;
            sync.stop().await;
            result
        }
        ClientCommand::Sync { follow } => {
            let sync = core.start_with(SyncOptions {
                serve_hand_offs: follow,
            });
            let result = sync_now(&core, &out, follow).await;
            sync.stop().await;
            result
        }
        command => {
            let sync = core.start();
            let result = with_sync(&core, &out, command).await;
            sync.stop().await;
            result
        }
    }
}

/// The commands that run beside this process's own sync task.
async fn with_sync(core: &Core, out: &Out, command: ClientCommand) -> Result<(), Failure> {
    match command {
        ClientCommand::Status => status(core, out).await,
        ClientCommand::Rooms => rooms(core, out).await,
        ClientCommand::Room(RoomCommand::Create {
            title,
            topic,
            members,
        }) => room_create(core, out, title, topic, members).await,
        ClientCommand::Room(RoomCommand::Invite { room, handle }) => {
            room_invite(core, out, &room, handle).await
        }
        ClientCommand::Room(RoomCommand::Leave { room }) => room_leave(core, out, &room).await,
        ClientCommand::History {
            room,
            before,
            limit,
        } => history(core, out, &room, before, limit).await,
        ClientCommand::Contacts { command: None } => contacts(core, out).await,
        ClientCommand::Contacts {
            command: Some(ContactsCommand::Request { handle, message }),
        } => contact_request(core, out, handle, message).await,
        ClientCommand::Contacts {
            command: Some(ContactsCommand::Accept { request }),
        } => contact_respond(core, out, request, true).await,
        ClientCommand::Contacts {
            command: Some(ContactsCommand::Reject { request }),
        } => contact_respond(core, out, request, false).await,
        ClientCommand::Invite(InviteCommand::Create {
            room,
            max_uses,
            expires_in,
        }) => invite_create(core, out, room, max_uses, expires_in).await,
        ClientCommand::Invite(InviteCommand::Redeem { code }) => {
            invite_redeem(core, out, &code).await
        }
        ClientCommand::Invite(InviteCommand::List) => invite_list(core, out).await,
        ClientCommand::Invite(InviteCommand::Revoke { invite }) => {
            invite_revoke(core, out, &invite).await
        }
        ClientCommand::Agents(AgentsCommand::Onboard {
            cli,
            name,
            project,
            description,
            listen_seconds,
            permission_wait_seconds,
            no_task_tools,
        }) => {
            let options = OnboardOptions {
                project,
                description,
                settings: HookSettings {
                    listen_s: listen_seconds,
                    permission_wait_s: permission_wait_seconds,
                    listen_unattended: false,
                },
                roundtable: None,
                no_task_tools,
            };
            onboard(core, out, &cli, &name, options).await
        }
        ClientCommand::Agents(AgentsCommand::Detect | AgentsCommand::Offboard { .. }) => Ok(()),
        ClientCommand::Agents(AgentsCommand::Register {
            name,
            description,
            discoverable: visibility,
        }) => agent_register(core, out, &name, description, visibility).await,
        ClientCommand::Agents(AgentsCommand::Pause { agent, room }) => {
            control(core, out, &agent, ControlAction::Pause, room).await
        }
        ClientCommand::Agents(AgentsCommand::Resume { agent, room }) => {
            control(core, out, &agent, ControlAction::Resume, room).await
        }
        ClientCommand::Agents(AgentsCommand::Stop { agent, room }) => {
            control(core, out, &agent, ControlAction::Stop, room).await
        }
        ClientCommand::Agents(AgentsCommand::Rotate { agent }) => {
            agent_token(core, out, &agent, TokenAction::Rotate).await
        }
        ClientCommand::Agents(AgentsCommand::Revoke { agent }) => {
            agent_token(core, out, &agent, TokenAction::Revoke).await
        }
        ClientCommand::Outbox { command } => outbox(core, out, command).await,
        ClientCommand::Pings { all } => pings(core, out, all).await,
        ClientCommand::Team(TeamCommand::Create {
            template,
            room,
            cli,
            role_cli,
        }) => team_create(core, out, &template, &room, &cli, &role_cli).await,
        ClientCommand::Team(TeamCommand::Templates) | ClientCommand::Scan => Ok(()),
        ClientCommand::Watch => crate::work::watch(core, out).await,
        ClientCommand::Usage { by, since } => {
            crate::work::usage(core, out, &by, since.as_deref()).await
        }
        ClientCommand::Tasks => crate::work::tasks(core, out).await,
        ClientCommand::Arch { room } => crate::work::arch(core, out, room.as_deref()).await,
        ClientCommand::Digest => crate::work::digest(core, out).await,
        ClientCommand::Share { command } => share(core, out, command).await,
        ClientCommand::Answer {
            ping,
            choice,
            text,
            room,
        } => answer(core, out, &ping, choice, text, room).await,
        ClientCommand::Signup { .. }
        | ClientCommand::Login { .. }
        | ClientCommand::Send { .. }
        | ClientCommand::Tail { .. }
        | ClientCommand::Sync { .. } => Ok(()),
    }
}

/// Sends a command once synced, and waits for the hub's answer.
async fn call<C: Command>(core: &Core, command: C) -> Result<C::Reply, Failure> {
    core.synced(PATIENCE).await?;
    Ok(core.call(command, PATIENCE).await?)
}

async fn status(core: &Core, out: &Out) -> Result<(), Failure> {
    let state = match tokio::time::timeout(std::time::Duration::from_secs(3), core.synced(PATIENCE))
        .await
    {
        Ok(Ok(())) => "idle (up to date)".to_owned(),
        Ok(Err(error)) => error.to_string(),
        Err(_) => "syncing".to_owned(),
    };
    let profile = core.profile();
    let pending = core.read(|cache| cache.outbox_pending()).await?;
    let failed = pending
        .iter()
        .filter(|e| e.state == OutboxState::Failed)
        .count();
    let waiting = pending.len() - failed;
    out.show(
        format!(
            "profile {} ({} on {})\nsync: {state}\noutbox: {waiting} waiting, {failed} failed",
            profile.name, profile.handle, profile.hub
        ),
        json!({"profile": profile.name, "handle": profile.handle, "hub": profile.hub.to_string(),
               "sync": state, "outbox": {"waiting": waiting, "failed": failed}}),
    )
}

async fn sync_now(core: &Core, out: &Out, follow: bool) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    core.outbox_drained(PATIENCE).await?;
    if follow {
        let mut changes = core.changes();
        loop {
            match changes.recv().await {
                Ok(change) => out.show(format!("{change:?}"), &change)?,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return Ok(()),
            }
        }
    }
    let pending = core.read(|cache| cache.outbox_pending()).await?;
    out.show(
        format!("synced; {} in the outbox", pending.len()),
        json!({"outbox": pending.len()}),
    )
}

async fn rooms(core: &Core, out: &Out) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let rooms = core.rooms().await?;
    let text = rooms
        .iter()
        .map(|room| {
            let members: Vec<&str> = room.members.iter().map(|m| m.handle.as_str()).collect();
            let unread = if room.unread > 0 {
                format!("  ({} unread)", room.unread)
            } else {
                String::new()
            };
            format!(
                "{}  {}  [{}]{unread}",
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
        &rooms,
    )
}

async fn room_create(
    core: &Core,
    out: &Out,
    title: Option<String>,
    topic: Option<String>,
    members: Vec<String>,
) -> Result<(), Failure> {
    let created = call(
        core,
        RoomCreate {
            id: 0,
            title,
            topic,
            members,
        },
    )
    .await?;
    out.show(
        format!(
            "created room {} ({})",
            created.room.title.as_deref().unwrap_or("untitled"),
            created.room.id
        ),
        &created.room,
    )
}

async fn room_invite(core: &Core, out: &Out, room: &str, handle: String) -> Result<(), Failure> {
    let room = core.room_id(room).await?;
    call(
        core,
        RoomInvite {
            id: 0,
            room: room.clone(),
            handle: handle.clone(),
        },
    )
    .await?;
    out.show(
        format!("{handle} is in room {room}"),
        json!({"room": room, "handle": handle}),
    )
}

async fn room_leave(core: &Core, out: &Out, room: &str) -> Result<(), Failure> {
    let room = core.room_id(room).await?;
    call(
        core,
        RoomLeave {
            id: 0,
            room: room.clone(),
        },
    )
    .await?;
    out.show(format!("left room {room}"), json!({"room": room}))
}

async fn send(core: &Core, out: &Out, room: &str, text: &str) -> Result<(), Failure> {
    match core.send_message_now(room, text, PATIENCE).await? {
        Delivered::Sent { seq, outbox, .. } => out.show(
            format!("sent (seq {seq})"),
            json!({"state": "sent", "seq": seq, "outbox": outbox}),
        ),
        Delivered::HandedOff { state, outbox, .. } => out.show(
            match state {
                SyncState::Idle => "handed to the running roundtable process, which sends it".to_owned(),
                _ => "queued: the running roundtable process sends it when the hub is back".to_owned(),
            },
            json!({"state": "handed_off", "outbox": outbox}),
        ),
        Delivered::Queued { reason, outbox } => out.show(
            format!("queued: the hub is unreachable now ({reason}); it will be sent by the next roundtable command that reaches it"),
            json!({"state": "queued", "outbox": outbox}),
        ),
    }
}

async fn tail(core: &Core, out: &Out, room: &str, limit: u32, follow: bool) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let room = core.room_id(room).await?;
    let page = core.latest_messages(&room, None, limit, PATIENCE).await?;
    warn_if_incomplete(page.complete);
    let mut follower = core.follow(&room, &page);
    for message in &page.messages {
        out.message(message)?;
    }
    if !follow {
        return Ok(());
    }
    while let Some(messages) = follower.next(core).await? {
        for message in &messages {
            out.message(message)?;
        }
    }
    Ok(())
}

async fn history(
    core: &Core,
    out: &Out,
    room: &str,
    before: Option<u64>,
    limit: u32,
) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let room = core.room_id(room).await?;
    let page = core
        .latest_messages(&room, Some(before.unwrap_or(u64::MAX)), limit, PATIENCE)
        .await?;
    warn_if_incomplete(page.complete);
    for message in &page.messages {
        out.message(message)?;
    }
    Ok(())
}

async fn contacts(core: &Core, out: &Out) -> Result<(), Failure> {
    let contacts = call(core, Contacts { id: 0 }).await?;
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
        &contacts,
    )
}

async fn contact_request(
    core: &Core,
    out: &Out,
    handle: String,
    message: Option<String>,
) -> Result<(), Failure> {
    let asked = call(
        core,
        ContactRequestCmd {
            id: 0,
            to: handle.clone(),
            message,
        },
    )
    .await?;
    out.show(
        format!("asked {handle} (request {})", asked.request.id),
        &asked.request,
    )
}

async fn contact_respond(
    core: &Core,
    out: &Out,
    request: String,
    accept: bool,
) -> Result<(), Failure> {
    call(
        core,
        ContactRespond {
            id: 0,
            request: request.clone(),
            accept,
        },
    )
    .await?;
    out.show(
        format!("{} {request}", if accept { "accepted" } else { "declined" }),
        json!({"request": request, "accepted": accept}),
    )
}

async fn invite_create(
    core: &Core,
    out: &Out,
    room: Option<String>,
    max_uses: u32,
    expires_in: Option<u64>,
) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let room = match room {
        Some(room) => Some(core.room_id(&room).await?),
        None => None,
    };
    let created = call(
        core,
        InviteCreate {
            id: 0,
            room,
            max_uses: Some(max_uses),
            expires_in_s: expires_in,
        },
    )
    .await?;
    let withdraw = created
        .invite
        .as_deref()
        .map(|id| format!("\nid: {id} (withdraw it with `roundtable invite revoke {id}`)"))
        .unwrap_or_default();
    out.show(
        format!("{}\ncode: {}{withdraw}", created.link, created.code),
        &created,
    )
}

async fn invite_list(core: &Core, out: &Out) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let invites = core.invites().await?;
    let text = invites
        .iter()
        .map(|invite| {
            format!(
                "{}  {}  {} use{} left  expires {}",
                invite.id,
                invite.room.as_deref().unwrap_or("(contact only)"),
                invite.uses_left,
                if invite.uses_left == 1 { "" } else { "s" },
                invite.expires_at.as_deref().unwrap_or("never"),
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.show(
        if text.is_empty() {
            "no invites can be redeemed; create one with `roundtable invite create`".into()
        } else {
            text
        },
        &invites,
    )
}

async fn invite_revoke(core: &Core, out: &Out, invite: &str) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    core.revoke_invite(invite).await?;
    out.show(
        format!("withdrew invite {invite}: its code no longer works"),
        json!({"invite": invite, "revoked": true}),
    )
}

async fn invite_redeem(core: &Core, out: &Out, code: &str) -> Result<(), Failure> {
    let code = roundtable_core::screens::invite_code(code)?.to_owned();
    let redeemed = call(core, InviteRedeem { id: 0, code }).await?;
    out.show(
        match &redeemed.room {
            Some(room) => format!("redeemed: you are now a contact, and in room {}", room.id),
            None => "redeemed: you are now a contact".into(),
        },
        &redeemed,
    )
}

async fn agent_register(
    core: &Core,
    out: &Out,
    name: &str,
    description: Option<String>,
    visibility: Option<String>,
) -> Result<(), Failure> {
    let settings = AgentSettings {
        description,
        discoverable: discoverable(visibility)?,
        card: None,
    };
    core.synced(PATIENCE).await?;
    let registered = core.register_agent(name, settings, PATIENCE).await?;
    let token = registered.profile.token.expose();
    out.show(
        format!(
            "registered {} ({}); its profile {:?} holds its token ({}), shown once:\n{token}",
            registered.agent.handle,
            registered.agent.id,
            registered.profile.name,
            registered.profile.dir.join("token").display()
        ),
        json!({"agent": registered.agent, "token": token, "profile": registered.profile.name,
               "room": registered.home.map(|r| r.id)}),
    )
}

async fn agent_token(
    core: &Core,
    out: &Out,
    agent: &str,
    action: TokenAction,
) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let (agent, change) = core.agent_token(agent, action, PATIENCE).await?;
    match change {
        TokenChange::Rotated { token, profile } => out.show(
            format!(
                "new token for {agent}, shown once (the old one no longer works){}:\n{}",
                profile
                    .as_ref()
                    .map(|p| format!("; saved in profile {:?}", p.name))
                    .unwrap_or_default(),
                token.expose()
            ),
            json!({"agent": agent, "token": token.expose(), "profile": profile.map(|p| p.name)}),
        ),
        TokenChange::Revoked => out.show(
            format!("revoked {agent}'s token; `roundtable agents rotate` issues a new one"),
            json!({"agent": agent, "revoked": true}),
        ),
    }
}

async fn control(
    core: &Core,
    out: &Out,
    agent: &str,
    action: ControlAction,
    room: Option<String>,
) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let agent = core
        .control_agent(agent, action, room.as_deref(), PATIENCE)
        .await?;
    let done = match action {
        ControlAction::Pause => "paused",
        ControlAction::Resume => "resumed",
        ControlAction::Stop => "stopped",
    };
    out.show(
        format!(
            "{done} {agent}{}",
            room.as_deref()
                .map(|r| format!(" in {r}"))
                .unwrap_or_default()
        ),
        json!({"agent": agent, "action": action.as_str()}),
    )
}

async fn outbox(core: &Core, out: &Out, command: Option<OutboxCommand>) -> Result<(), Failure> {
    if let Some(OutboxCommand::Retry { n }) = command {
        if !core.retry(n).await? {
            return Err(Failure::new(
                Exit::Usage,
                format!("outbox entry {n} is not a failed entry"),
            ));
        }
        core.synced(PATIENCE).await?;
        core.outbox_drained(PATIENCE).await?;
    }
    let pending = core.read(|cache| cache.outbox_pending()).await?;
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
        &pending,
    )
}

async fn pings(core: &Core, out: &Out, all: bool) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let pings = if all {
        core.pings().await?
    } else {
        core.open_pings().await?
    };
    let text = pings
        .iter()
        .map(|ping| {
            let options = if ping.options.is_empty() {
                String::new()
            } else {
                format!(" [{}]", ping.options.join(" / "))
            };
            let state = match &ping.answered_by_handle {
                Some(by) => format!(
                    "  answered by {by}: {}",
                    ping.choice
                        .as_deref()
                        .or(ping.text.as_deref())
                        .unwrap_or("")
                ),
                None => String::new(),
            };
            format!(
                "{}  {}: {}{options}{state}",
                ping.ping,
                ping.asker_handle.as_deref().unwrap_or(&ping.asker),
                ping.question
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.show(
        if text.is_empty() {
            "no questions wait for you".into()
        } else {
            text
        },
        &pings,
    )
}

async fn answer(
    core: &Core,
    out: &Out,
    ping: &str,
    choice: Option<String>,
    text: Option<String>,
    room: Option<String>,
) -> Result<(), Failure> {
    if choice.is_none() && text.is_none() {
        return Err(Failure::new(
            Exit::Usage,
            "give the option you choose, or an answer with --text",
        ));
    }
    core.synced(PATIENCE).await?;
    let room = match room {
        Some(room) => Some(core.room_id(&room).await?),
        None => None,
    };
    let answered = core
        .answer_ping(room.as_deref(), ping, choice.as_deref(), text.as_deref())
        .await?;
    out.show(
        format!("answered {ping} in {}", answered.room),
        json!({"ping": ping, "room": answered.room, "seq": answered.seq}),
    )
}

fn agent_cli(cli: &str) -> Result<AgentCli, Failure> {
    AgentCli::parse(cli).ok_or_else(|| {
        Failure::new(
            Exit::Usage,
            format!("no agent CLI {cli:?}: claude, codex or gemini (opencode, cursor-agent and copilot are detected only)"),
        )
    })
}

async fn detect(out: &Out, profiles: &std::path::Path) -> Result<(), Failure> {
    let found = detect_clis(&Environment::current(), profiles).await;
    let text = found
        .iter()
        .map(|cli| {
            format!(
                "{:<13} {:<24} {}{}",
                cli.cli.command(),
                cli.version.as_deref().unwrap_or("(version unknown)"),
                cli.path.display(),
                match (&cli.handle, cli.supported) {
                    (Some(handle), _) => format!("  onboarded as {handle}"),
                    (None, true) => String::new(),
                    (None, false) => "  (listed only)".to_owned(),
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.show(
        if text.is_empty() {
            "no agent CLI found (looked on PATH and in the usual install places)".into()
        } else {
            text
        },
        &found,
    )
}

fn show_report(out: &Out, verb: &str, report: &Report) -> Result<(), Failure> {
    let mut text = if report.unchanged {
        format!(
            "{} is already {verb} for {}; nothing changed",
            report.handle, report.cli
        )
    } else {
        format!("{verb} {} for {}:", report.handle, report.cli)
    };
    for change in &report.changes {
        text.push_str(&format!("\n{}", change.path.display()));
        for line in &change.added {
            text.push_str(&format!("\n  + {line}"));
        }
        for line in &change.removed {
            text.push_str(&format!("\n  - {line}"));
        }
        if let Some(backup) = &change.backup {
            text.push_str(&format!("\n  (backup: {})", backup.display()));
        }
    }
    out.show(text, report)
}

async fn onboard(
    core: &Core,
    out: &Out,
    cli: &str,
    name: &str,
    options: OnboardOptions,
) -> Result<(), Failure> {
    let cli = agent_cli(cli)?;
    let report = core
        .onboard(&Environment::current(), cli, name, options)
        .await?;
    show_report(out, "onboarded", &report)
}

fn offboard(
    out: &Out,
    profiles: &std::path::Path,
    user: &str,
    cli: &str,
    name: &str,
) -> Result<(), Failure> {
    let cli = agent_cli(cli)?;
    // Offboarding edits the person's own configuration: the person's to do.
    refuse_in_agent_session("")?;
    let handle = if name.contains('/') {
        name.to_owned()
    } else {
        let profile = profile::Profile::load(profiles, user)
            .map_err(|error| Failure::new(Exit::Failure, error.to_string()))?;
        format!("{}/{name}", profile.handle)
    };
    let report = onboarding::offboard(profiles, cli, &handle)?;
    show_report(out, "offboarded", &report)
}

fn team_templates(out: &Out) -> Result<(), Failure> {
    let templates = teams::templates(&teams::user_template_dirs())?;
    let text = templates
        .iter()
        .map(|template| {
            let roles: Vec<&str> = template.roles.iter().map(|r| r.name.as_str()).collect();
            format!(
                "{}  [{}]  {}",
                template.name,
                roles.join(", "),
                template.description
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.show(text, &templates)
}

async fn team_create(
    core: &Core,
    out: &Out,
    template: &str,
    room: &str,
    cli: &str,
    role_clis: &[String],
) -> Result<(), Failure> {
    let templates = teams::templates(&teams::user_template_dirs())?;
    let Some(template) = templates.iter().find(|t| t.name == template) else {
        let names: Vec<&str> = templates.iter().map(|t| t.name.as_str()).collect();
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "no team template {template:?}; there are: {}",
                names.join(", ")
            ),
        ));
    };
    let default_cli = agent_cli(cli)?;
    let mut clis = std::collections::BTreeMap::new();
    for pair in role_clis {
        let Some((role, cli)) = pair.split_once('=') else {
            return Err(Failure::new(
                Exit::Usage,
                format!("--role-cli takes ROLE=CLI, not {pair:?}"),
            ));
        };
        clis.insert(role.to_owned(), agent_cli(cli)?);
    }
    let team = core.create_team(template, room, &clis, default_cli).await?;
    let mut text = format!(
        "team {} in room {} ({}):",
        template.name, team.room_title, team.room
    );
    for member in &team.members {
        text.push_str(&format!(
            "\n  {:<10} {}  on {}",
            member.role, member.handle, member.cli
        ));
    }
    let handles: Vec<String> = team
        .members
        .iter()
        .map(|m| format!("--agent {}", m.handle))
        .collect();
    text.push_str(&format!(
        "\nset them to work with: roundtable run {}",
        handles.join(" ")
    ));
    out.show(text, &team)
}

async fn share(core: &Core, out: &Out, command: Option<ShareCommand>) -> Result<(), Failure> {
    let mut profile = core.profile().clone();
    let mut rooms = profile.share_rooms.clone();
    match command {
        Some(ShareCommand::Add { room }) => {
            core.synced(PATIENCE).await?;
            let room = core.room_id(&room).await?;
            if !rooms.contains(&room) {
                rooms.push(room);
            }
        }
        Some(ShareCommand::Remove { room }) => {
            let id = core.find_room(&room).await.unwrap_or(room);
            rooms.retain(|shared| *shared != id);
        }
        None => {}
    }
    profile
        .set_share_rooms(rooms.clone())
        .map_err(|error| Failure::new(Exit::Failure, error.to_string()))?;
    out.show(
        if rooms.is_empty() {
            "your agents' work goes to their home rooms only".to_owned()
        } else {
            format!(
                "your agents' work also goes to: {} (a running `roundtable watch` picks this up within seconds)",
                rooms.join(", ")
            )
        },
        &rooms,
    )
}
