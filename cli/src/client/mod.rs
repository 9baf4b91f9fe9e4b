//! The client commands: `roundtable signup`, `login`, `rooms`, `send`, `tail`… Each parses
//! its arguments, calls one function of the core (`roundtable-core`, which the desktop app
//! and the MCP bridge use too) and prints the result as text or JSON. `send` works offline,
//! and hands its message to a running `roundtable` process on the profile when there is
//! one; everything else that needs the hub says so clearly when it cannot reach it.
//!
//! [`run`] is one exhaustive match: each arm says what its command needs (no profile, the
//! profile's core, or the core with this process syncing beside it), so a command cannot
//! be routed to a match that quietly does nothing with it.

mod agents;
mod contacts;
mod identity;
mod json;
mod messages;

use std::io::Write as _;
use std::path::PathBuf;

use roundtable_core::cache::MessageView;
use roundtable_core::client::PATIENCE;
use roundtable_core::hook_settings::HookSettings;
use roundtable_core::local_agents::AgentCli;
use roundtable_core::local_agents::onboarding::OnboardOptions;
use roundtable_core::{Core, CoreError, SyncOptions, profile};
use roundtable_protocol::client::{Command, ControlAction, TokenAction};
use roundtable_protocol::model::Discoverable;
use serde::Serialize;

use crate::args::{
    AgentsCommand, ClientCommand, ContactsCommand, Global, InviteCommand, RoomCommand, TeamCommand,
};

pub async fn run(global: Global, command: ClientCommand) -> Result<(), Failure> {
    let cx = Context {
        out: Out { json: global.json },
        base: profile::profiles_dir(),
        profile: global.profile,
    };
    let out = &cx.out;
    match command {
        // Without a profile: they make one, or read this machine only.
        ClientCommand::Signup(args) => identity::signup(&cx, args).await,
        ClientCommand::Login {
            hub,
            token,
            ca_file,
            insecure,
        } => identity::login(&cx, &hub, token, ca_file, insecure).await,
        ClientCommand::Agents(command) => agents_command(&cx, command).await,
        ClientCommand::Team(command) => team_command(&cx, command).await,
        ClientCommand::Scan => crate::work::scan(out),
        // The core, with sync options of their own or none.
        ClientCommand::Send { room, text } => {
            // No connection of its own when a running process takes the message over.
            let core = cx.open().await?;
            messages::send(&core, out, &room, &text).await
        }
        ClientCommand::Tail {
            room,
            limit,
            follow,
        } => {
            let options = SyncOptions {
                serve_hand_offs: follow,
            };
            cx.syncing(options, async |core| {
                messages::tail(core, out, &room, limit, follow).await
            })
            .await
        }
        ClientCommand::Sync { follow } => {
            let options = SyncOptions {
                serve_hand_offs: follow,
            };
            cx.syncing(options, async |core| {
                messages::sync_now(core, out, follow).await
            })
            .await
        }
        // The core, syncing beside the command.
        ClientCommand::Status => {
            cx.synced(async |core| messages::status(core, out).await)
                .await
        }
        ClientCommand::Rooms => {
            cx.synced(async |core| messages::rooms(core, out).await)
                .await
        }
        ClientCommand::Room(command) => room_command(&cx, command).await,
        ClientCommand::History {
            room,
            before,
            limit,
        } => {
            cx.synced(async |core| messages::history(core, out, &room, before, limit).await)
                .await
        }
        ClientCommand::Outbox { command } => {
            cx.synced(async |core| messages::outbox(core, out, command).await)
                .await
        }
        ClientCommand::Pings { all } => {
            cx.synced(async |core| messages::pings(core, out, all).await)
                .await
        }
        ClientCommand::Answer {
            ping,
            choice,
            text,
            room,
        } => {
            cx.synced(async |core| messages::answer(core, out, &ping, choice, text, room).await)
                .await
        }
        ClientCommand::Contacts { command: None } => {
            cx.synced(async |core| contacts::contacts(core, out).await)
                .await
        }
        ClientCommand::Contacts {
            command: Some(ContactsCommand::Request { handle, message }),
        } => {
            cx.synced(async |core| contacts::contact_request(core, out, handle, message).await)
                .await
        }
        ClientCommand::Contacts {
            command: Some(ContactsCommand::Accept { request }),
        } => {
            cx.synced(async |core| contacts::contact_respond(core, out, request, true).await)
                .await
        }
        ClientCommand::Contacts {
            command: Some(ContactsCommand::Reject { request }),
        } => {
            cx.synced(async |core| contacts::contact_respond(core, out, request, false).await)
                .await
        }
        ClientCommand::Invite(command) => invite_command(&cx, command).await,
        ClientCommand::Share { command } => {
            cx.synced(async |core| agents::share(core, out, command).await)
                .await
        }
        ClientCommand::Watch => {
            cx.synced(async |core| crate::work::watch(core, out).await)
                .await
        }
        ClientCommand::Usage { by, since } => {
            cx.synced(async |core| crate::work::usage(core, out, &by, since.as_deref()).await)
                .await
        }
        ClientCommand::Tasks => {
            cx.synced(async |core| crate::work::tasks(core, out).await)
                .await
        }
        ClientCommand::Arch { room } => {
            cx.synced(async |core| crate::work::arch(core, out, room.as_deref()).await)
                .await
        }
        ClientCommand::Digest => {
            cx.synced(async |core| crate::work::digest(core, out).await)
                .await
        }
        ClientCommand::Budget { command } => {
            cx.synced(async |core| crate::work::budget(core, out, command).await)
                .await
        }
    }
}

/// `roundtable agents …`: this machine's agent CLIs, and the person's agents on the hub.
async fn agents_command(cx: &Context, command: AgentsCommand) -> Result<(), Failure> {
    let out = &cx.out;
    match command {
        AgentsCommand::Detect => agents::detect(out, &cx.base).await,
        AgentsCommand::Offboard { cli, name } => {
            agents::offboard(out, &cx.base, &cx.profile, &cli, &name)
        }
        AgentsCommand::Onboard {
            cli,
            name,
            project,
            description,
            listen_seconds,
            permission_wait_seconds,
            no_task_tools,
        } => {
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
            cx.synced(async |core| agents::onboard(core, out, &cli, &name, options).await)
                .await
        }
        AgentsCommand::Register {
            name,
            description,
            discoverable,
        } => {
            cx.synced(async |core| {
                agents::agent_register(core, out, &name, description, discoverable).await
            })
            .await
        }
        AgentsCommand::RegisterRemote {
            name,
            card,
            credential_env,
            api_key_header,
            description,
            discoverable,
        } => {
            let remote = agents::RemoteRegistration {
                card,
                credential_env,
                api_key_header,
                description,
                discoverable,
            };
            cx.synced(async |core| agents::agent_register_remote(core, out, &name, remote).await)
                .await
        }
        AgentsCommand::Pause { agent, room } => {
            cx.synced(async |core| {
                agents::control(core, out, &agent, ControlAction::Pause, room).await
            })
            .await
        }
        AgentsCommand::Resume { agent, room } => {
            cx.synced(async |core| {
                agents::control(core, out, &agent, ControlAction::Resume, room).await
            })
            .await
        }
        AgentsCommand::Stop { agent, room } => {
            cx.synced(async |core| {
                agents::control(core, out, &agent, ControlAction::Stop, room).await
            })
            .await
        }
        AgentsCommand::Rotate { agent } => {
            cx.synced(async |core| {
                agents::agent_token(core, out, &agent, TokenAction::Rotate).await
            })
            .await
        }
        AgentsCommand::Revoke { agent } => {
            cx.synced(async |core| {
                agents::agent_token(core, out, &agent, TokenAction::Revoke).await
            })
            .await
        }
    }
}

/// `roundtable room …`.
async fn room_command(cx: &Context, command: RoomCommand) -> Result<(), Failure> {
    let out = &cx.out;
    match command {
        RoomCommand::Create {
            title,
            topic,
            members,
        } => {
            cx.synced(async |core| messages::room_create(core, out, title, topic, members).await)
                .await
        }
        RoomCommand::Invite { room, handle } => {
            cx.synced(async |core| messages::room_invite(core, out, &room, handle).await)
                .await
        }
        RoomCommand::Leave { room } => {
            cx.synced(async |core| messages::room_leave(core, out, &room).await)
                .await
        }
    }
}

/// `roundtable invite …`.
async fn invite_command(cx: &Context, command: InviteCommand) -> Result<(), Failure> {
    let out = &cx.out;
    match command {
        InviteCommand::Create {
            room,
            max_uses,
            expires_in,
        } => {
            cx.synced(async |core| {
                contacts::invite_create(core, out, room, max_uses, expires_in).await
            })
            .await
        }
        InviteCommand::Redeem { code } => {
            cx.synced(async |core| contacts::invite_redeem(core, out, &code).await)
                .await
        }
        InviteCommand::List => {
            cx.synced(async |core| contacts::invite_list(core, out).await)
                .await
        }
        InviteCommand::Revoke { invite } => {
            cx.synced(async |core| contacts::invite_revoke(core, out, &invite).await)
                .await
        }
    }
}

/// `roundtable team …`.
async fn team_command(cx: &Context, command: TeamCommand) -> Result<(), Failure> {
    let out = &cx.out;
    match command {
        TeamCommand::Templates => agents::team_templates(out),
        TeamCommand::Create {
            template,
            room,
            cli,
            role_cli,
        } => {
            cx.synced(async |core| {
                agents::team_create(core, out, &template, &room, &cli, &role_cli).await
            })
            .await
        }
    }
}

/// What every command runs with: how to print, and which profile.
struct Context {
    out: Out,
    base: PathBuf,
    profile: String,
}

impl Context {
    /// The profile's core. A person's profile is refused inside an agent session, before
    /// its token is read (from the secret store, perhaps with a prompt).
    async fn open(&self) -> Result<Core, Failure> {
        let checked = profile::Profile::handle_of(&self.base, &self.profile);
        if let Some(handle) = &checked {
            refuse_in_agent_session(handle)?;
        }
        let profile = profile::Profile::load(&self.base, &self.profile)
            .map_err(|error| Failure::new(Exit::Failure, error.to_string()))?;
        if checked.is_none() {
            refuse_in_agent_session(&profile.handle)?;
        }
        Ok(Core::open(profile).await?)
    }

    /// Runs `command` on the profile's core while this process syncs beside it.
    async fn synced(
        &self,
        command: impl AsyncFnOnce(&Core) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        self.syncing(SyncOptions::default(), command).await
    }

    /// As [`Context::synced`], syncing with `options`.
    async fn syncing(
        &self,
        options: SyncOptions,
        command: impl AsyncFnOnce(&Core) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        let core = self.open().await?;
        let sync = core.start_with(options);
        let result = command(&core).await;
        sync.stop().await;
        result
    }
}

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

/// Sends a command once synced, and waits for the hub's answer.
async fn call<C: Command>(core: &Core, command: C) -> Result<C::Reply, Failure> {
    core.synced(PATIENCE).await?;
    Ok(core.call(command, PATIENCE).await?)
}

fn agent_cli(cli: &str) -> Result<AgentCli, Failure> {
    AgentCli::parse(cli).ok_or_else(|| {
        Failure::new(
            Exit::Usage,
            format!("no agent CLI {cli:?}: claude, codex or gemini (opencode, cursor-agent and copilot are detected only)"),
        )
    })
}
