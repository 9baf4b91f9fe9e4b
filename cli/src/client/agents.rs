//! The commands about agents: registering and controlling them and their tokens, finding
//! and onboarding agent CLIs, teams from templates, and the rooms their work is shared with.

use roundtable_core::agents::{AgentSettings, TokenChange};
use roundtable_core::client::PATIENCE;
use roundtable_core::local_agents::onboarding::{self, OnboardOptions, Report};
use roundtable_core::local_agents::{Environment, detect::detect as detect_clis};
use roundtable_core::{Core, profile, teams};
use roundtable_protocol::client::{
    ControlAction, RemoteCredential, RemoteCredentialScheme, TokenAction,
};

use super::json::{AgentRegistered, Controlled, RemoteAgentRegistered, TokenRevoked, TokenRotated};
use super::{Exit, Failure, Out, agent_cli, discoverable, refuse_in_agent_session};
use crate::args::ShareCommand;

pub(super) async fn agent_register(
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
        AgentRegistered {
            agent: &registered.agent,
            token,
            profile: &registered.profile.name,
            room: registered.home.as_ref().map(|room| room.id.as_str()),
        },
    )
}

/// What `agents register-remote` was given.
pub(super) struct RemoteRegistration {
    pub card: String,
    pub credential_env: Option<String>,
    pub api_key_header: Option<String>,
    pub description: Option<String>,
    pub discoverable: Option<String>,
}

pub(super) async fn agent_register_remote(
    core: &Core,
    out: &Out,
    name: &str,
    remote: RemoteRegistration,
) -> Result<(), Failure> {
    let credential = match &remote.credential_env {
        None => None,
        Some(variable) => {
            let value = std::env::var(variable).map_err(|_| {
                Failure::new(
                    Exit::Usage,
                    format!("{variable} is not set: put the remote agent's credential in it"),
                )
            })?;
            Some(RemoteCredential {
                scheme: match remote.api_key_header {
                    Some(_) => RemoteCredentialScheme::ApiKey,
                    None => RemoteCredentialScheme::Bearer,
                },
                value: value.trim().to_owned(),
                header: remote.api_key_header.clone(),
            })
        }
    };
    let settings = AgentSettings {
        description: remote.description,
        discoverable: discoverable(remote.discoverable)?,
        card: None,
    };
    core.synced(PATIENCE).await?;
    let registered = core
        .register_remote_agent(name, &remote.card, credential, settings, PATIENCE)
        .await?;
    out.show(
        format!(
            "registered {} ({}), called at {} when a message mentions it",
            registered.agent.handle, registered.agent.id, registered.card_url
        ),
        RemoteAgentRegistered {
            agent: &registered.agent,
            card_url: &registered.card_url,
            room: registered.home.as_ref().map(|room| room.id.as_str()),
        },
    )
}

pub(super) async fn agent_token(
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
            TokenRotated {
                agent: &agent,
                token: token.expose(),
                profile: profile.as_ref().map(|p| p.name.as_str()),
            },
        ),
        TokenChange::Revoked => out.show(
            format!("revoked {agent}'s token; `roundtable agents rotate` issues a new one"),
            TokenRevoked {
                agent: &agent,
                revoked: true,
            },
        ),
    }
}

pub(super) async fn control(
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
        Controlled {
            agent: &agent,
            action,
        },
    )
}

pub(super) async fn detect(out: &Out, profiles: &std::path::Path) -> Result<(), Failure> {
    let found = detect_clis(&Environment::current(), profiles).await;
    let text = found
        .iter()
        .map(|cli| {
            let mut text = format!(
                "{:<13} {:<24} {}{}",
                cli.cli.command(),
                cli.version.as_deref().unwrap_or("(version unknown)"),
                cli.path.display(),
                match (&cli.handle, cli.supported) {
                    (Some(handle), _) => format!("  onboarded as {handle}"),
                    (None, true) => String::new(),
                    (None, false) =>
                        "  (listed only: Roundtable does not onboard it yet)".to_owned(),
                }
            );
            // What Roundtable does with it, aspect by aspect.
            for row in &cli.support {
                text.push_str(&format!(
                    "\n    {:<12} {}",
                    format!("{}:", row.aspect.label()),
                    row.how
                ));
            }
            text
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

pub(super) fn show_report(out: &Out, verb: &str, report: &Report) -> Result<(), Failure> {
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

pub(super) async fn onboard(
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

pub(super) fn offboard(
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

pub(super) fn team_templates(out: &Out) -> Result<(), Failure> {
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

pub(super) async fn team_create(
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

pub(super) async fn share(
    core: &Core,
    out: &Out,
    command: Option<ShareCommand>,
) -> Result<(), Failure> {
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
