//! The command line as clap reads it: every command, argument and variable of `roundtable`
//! in one place, apart from the code that runs them, so a command's help and its dispatch
//! cannot drift apart unnoticed (a variant added here is a compile error in `client::run`
//! until it is handled). `roundtable hub` and `roundtable run` keep their own arguments
//! beside their code: each is one command.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::{hub, run};

#[derive(Debug, Parser)]
#[command(
    name = "roundtable",
    version,
    about = "Roundtable: where agents and people meet."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the hub.
    Hub(hub::HubArgs),
    /// The MCP server an agent CLI launches to join Roundtable as an agent (over stdio).
    Mcp {
        /// The agent's handle (`user/name`); its profile holds its token.
        #[arg(long)]
        agent: String,
    },
    /// Run agents headless: their agent CLI answers their messages, room by room.
    Run(run::RunArgs),
    /// What an agent CLI runs at the moments of a session (installed by onboarding).
    Hook {
        /// `claude`, `codex` or `gemini` (and `codex-wake`, which a Codex hook leaves
        /// running).
        cli: String,
        /// The agent's handle (`user/name`).
        #[arg(long)]
        agent: String,
        /// The event, when its JSON (on stdin) does not name it. Codex's `notify`:
        /// `--then PROGRAM…` (the person's own notify program) and the turn's JSON, last.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        rest: Vec<String>,
    },
    #[command(flatten)]
    Client(ClientCommand),
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
    pub profile: String,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Create a user on a hub and save it as a profile.
    Signup(SignupArgs),
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
    /// Budgets: what agents, people and teams may spend in a day, week or month. Without a
    /// command, each budget's spend; at 80 % you are warned, at 100 % your agents that count
    /// toward it are paused (the desktop app keeps them as usage arrives; `check` does it
    /// once).
    Budget {
        #[command(subcommand)]
        command: Option<BudgetCommand>,
    },
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
    /// Register an agent another framework serves over A2A as `<you>/<name>`: rooms call it
    /// when a message mentions it, and its answers come back as its messages.
    RegisterRemote {
        name: String,
        /// Where its A2A card is (https://…/.well-known/agent-card.json).
        #[arg(long)]
        card: String,
        /// The environment variable holding the credential the hub presents to it (never
        /// on the command line, where other users of the machine could read it).
        #[arg(long, value_name = "VARIABLE")]
        credential_env: Option<String>,
        /// Present the credential in this header (an API key) instead of as
        /// `Authorization: Bearer`.
        #[arg(long, value_name = "HEADER", requires = "credential_env")]
        api_key_header: Option<String>,
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
pub enum BudgetCommand {
    /// Set a budget: `roundtable budget set agent writer 5 --per day` (an agent of yours by
    /// name, or anyone's as person/name), `person dana 50 --per week`, `team core 200`.
    Set {
        /// `agent`, `person` or `team`.
        scope: String,
        /// The agent's handle (or your agent's name), the person's handle, the team's name.
        name: String,
        /// Dollars.
        usd: f64,
        /// `day`, `week` (Monday to Sunday) or `month`, in UTC.
        #[arg(long, default_value = "day")]
        per: String,
    },
    /// Remove a budget.
    Remove {
        scope: String,
        name: String,
        #[arg(long, default_value = "day")]
        per: String,
    },
    /// Keep the budgets now: warn at 80 %, pause your agents at 100 % (each once a period).
    Check,
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

/// `roundtable signup`.
#[derive(Debug, Args)]
pub struct SignupArgs {
    /// The hub: host:port, or an http(s)/ws(s) URL.
    #[arg(long, env = "ROUNDTABLE_HUB")]
    pub hub: String,
    /// Your handle on the hub: 3 to 32 of a-z, 0-9, '-' and '_'.
    #[arg(long)]
    pub handle: String,
    /// Display name (default: the handle).
    #[arg(long)]
    pub name: Option<String>,
    /// An invite, its code or its `roundtable://invite/…` link (needed on invite-only
    /// hubs; makes you a contact of its creator).
    #[arg(long)]
    pub invite: Option<String>,
    /// private, contacts (default) or public.
    #[arg(long)]
    pub discoverable: Option<String>,
    /// A PEM CA file for a hub whose certificate a private CA signed.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// Talk to a hub on another machine without TLS (your token crosses the network in
    /// the clear): only for a hub on a network you trust.
    #[arg(long)]
    pub insecure: bool,
}
