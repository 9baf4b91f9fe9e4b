//! Teams of agents from a template: `roundtable team create --template trio --room NAME`
//! registers one agent per role (`<person>/<room>-<role>`), binds each to the agent CLI the
//! person chooses, writes each role's instructions where its runs read them (the agent's
//! directory description, and `instructions.md` in its profile, given with the first
//! message of each session), and puts them with the person in one room. With
//! `roundtable run`, a request sent to that room sets the three to work, talking to each
//! other.
//!
//! Templates are TOML data files: the project's own ([`BUILT_IN`]) and any a person adds in
//! `$ROUNDTABLE_HOME/templates/` or `templates/` in the OS's settings folder for Roundtable
//! (`~/.config/roundtable` on Linux; `roundtable_platform::places`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use roundtable_protocol::client::{MemberSet, RoomCreate};
use roundtable_protocol::model::Routing;
use serde::{Deserialize, Serialize};

use crate::agents::AgentSettings;
use crate::client::PATIENCE;
use crate::local_agents::AgentCli;
use crate::profile::{Profile, profile_name_for};
use crate::{Core, CoreError};

/// The templates that ship with Roundtable.
pub const BUILT_IN: &[&str] = &[include_str!("../../templates/teams/trio.toml")];

/// A team template.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Template {
    pub name: String,
    pub description: String,
    pub roles: Vec<Role>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Role {
    pub name: String,
    pub description: String,
    /// `all` (every message of the room) or `mentions`.
    #[serde(default)]
    pub routing: Option<String>,
    /// With `{person}` and `{<role>}` standing for handles.
    pub instructions: String,
}

/// Where a person's own templates are.
pub fn user_template_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = std::env::var_os("ROUNDTABLE_HOME") {
        dirs.push(PathBuf::from(home).join("templates"));
    }
    if let Some(config) = roundtable_platform::places::config() {
        dirs.push(config.join("templates"));
    }
    dirs
}

/// Every template: the person's own first (a file named like a built-in one replaces it).
pub fn templates(dirs: &[PathBuf]) -> Result<Vec<Template>, CoreError> {
    let mut found: BTreeMap<String, Template> = BTreeMap::new();
    for text in BUILT_IN {
        let template = parse_template(text, Path::new("built-in"))?;
        found.insert(template.name.clone(), template);
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(|source| CoreError::Io {
                context: format!("cannot read the template {}", path.display()),
                source,
            })?;
            let template = parse_template(&text, &path)?;
            found.insert(template.name.clone(), template);
        }
    }
    Ok(found.into_values().collect())
}

/// Reads a template, checking it can make a team.
pub fn parse_template(text: &str, path: &Path) -> Result<Template, CoreError> {
    let template: Template = toml::from_str(text).map_err(|error| {
        CoreError::Invalid(format!(
            "the template {} is not valid: {error}",
            path.display()
        ))
    })?;
    if template.roles.is_empty() {
        return Err(CoreError::Invalid(format!(
            "the template {} has no roles",
            path.display()
        )));
    }
    for role in &template.roles {
        if !role
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            || role.name.is_empty()
        {
            return Err(CoreError::Invalid(format!(
                "the template {}: a role's name is lower-case letters and digits, not {:?}",
                path.display(),
                role.name
            )));
        }
        if let Some(routing) = &role.routing
            && Routing::parse(routing).is_none()
        {
            return Err(CoreError::Invalid(format!(
                "the template {}: routing is `all` or `mentions`, not {routing:?}",
                path.display()
            )));
        }
    }
    Ok(template)
}

/// The agent name of `role` in a team for `room`: `<room>-<role>`, fitted to the handle
/// rules (lower case, digits, `-` and `_`, at most 32).
pub fn agent_name(room: &str, role: &str) -> String {
    let mut base: String = room
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    base = base.trim_matches('-').to_owned();
    let room_part_limit = 31usize.saturating_sub(role.len());
    base.truncate(room_part_limit);
    let base = base.trim_end_matches('-');
    if base.is_empty() {
        format!("team-{role}")
    } else {
        format!("{base}-{role}")
    }
}

/// The instructions of `role`, with `{person}` and `{<role>}` put in.
pub fn instructions(
    template: &Template,
    role: &Role,
    person: &str,
    handles: &BTreeMap<String, String>,
) -> String {
    let mut text = role.instructions.replace("{person}", &format!("@{person}"));
    for (role, handle) in handles {
        text = text.replace(&format!("{{{role}}}"), &format!("@{handle}"));
    }
    format!("{}\n(Team: {}.)", text.trim(), template.description)
}

/// A team made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Team {
    pub room: String,
    pub room_title: String,
    pub members: Vec<TeamMember>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TeamMember {
    pub role: String,
    pub handle: String,
    pub cli: AgentCli,
    pub profile: String,
}

/// The agent CLI an agent runs on, when it was bound without onboarding (a team's).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Binding {
    pub cli: AgentCli,
}

/// The agent CLI bound to the agent whose profile is `dir`, if any.
pub fn bound_cli(dir: &Path) -> Option<AgentCli> {
    let text = std::fs::read_to_string(dir.join("agent.toml")).ok()?;
    toml::from_str::<Binding>(&text)
        .ok()
        .map(|binding| binding.cli)
}

impl Core {
    /// Makes a team from `template` in a new room titled `room`, each role on the agent CLI
    /// `clis` names for it (else `default_cli`). Run on the person's core.
    pub async fn create_team(
        &self,
        template: &Template,
        room: &str,
        clis: &BTreeMap<String, AgentCli>,
        default_cli: AgentCli,
    ) -> Result<Team, CoreError> {
        for role in clis.keys() {
            if !template.roles.iter().any(|r| &r.name == role) {
                return Err(CoreError::Invalid(format!(
                    "the template {} has no role {role:?}",
                    template.name
                )));
            }
        }
        self.synced(PATIENCE).await?;
        let person = self.profile().handle.clone();
        let handles: BTreeMap<String, String> = template
            .roles
            .iter()
            .map(|role| {
                (
                    role.name.clone(),
                    format!("{person}/{}", agent_name(room, &role.name)),
                )
            })
            .collect();
        let mut members = Vec::new();
        let mut profiles = Vec::new();
        for role in &template.roles {
            let name = agent_name(room, &role.name);
            let handle = &handles[&role.name];
            let cli = clis.get(&role.name).copied().unwrap_or(default_cli);
            let profile = match Profile::load(self.profile().base(), &profile_name_for(handle)) {
                Ok(profile) => profile,
                Err(_) => {
                    let settings = AgentSettings {
                        description: Some(format!("{} ({} team)", role.description, template.name)),
                        ..AgentSettings::default()
                    };
                    self.register_agent(&name, settings, PATIENCE)
                        .await?
                        .profile
                }
            };
            let text = instructions(template, role, &person, &handles);
            crate::profile::write_private(&profile.dir.join("instructions.md"), &text)?;
            let binding = toml::to_string(&Binding { cli }).expect("bindings serialize");
            crate::profile::write_private(&profile.dir.join("agent.toml"), &binding)?;
            members.push(TeamMember {
                role: role.name.clone(),
                handle: handle.clone(),
                cli,
                profile: profile.name.clone(),
            });
            profiles.push((profile, role.routing.clone()));
        }
        let created = self
            .call(
                RoomCreate {
                    id: 0,
                    title: Some(room.to_owned()),
                    topic: Some(template.description.clone()),
                    members: members.iter().map(|m| m.handle.clone()).collect(),
                },
                PATIENCE,
            )
            .await?;
        let room_id = created.room.id;
        // Routing is each agent's own setting: set it as the agent.
        for (profile, routing) in profiles {
            let Some(routing) = routing.as_deref().and_then(Routing::parse) else {
                continue;
            };
            if routing == Routing::Mentions {
                continue;
            }
            let agent = Core::open(profile).await?;
            let sync = agent.start();
            agent.synced(PATIENCE).await?;
            agent
                .call(
                    MemberSet {
                        id: 0,
                        room: room_id.clone(),
                        routing,
                    },
                    PATIENCE,
                )
                .await?;
            sync.stop().await;
        }
        Ok(Team {
            room: room_id,
            room_title: room.to_owned(),
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_templates_are_valid() {
        let all = templates(&[]).unwrap();
        let trio = all.iter().find(|t| t.name == "trio").unwrap();
        let roles: Vec<&str> = trio.roles.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(roles, ["manager", "developer", "architect"]);
    }

    #[test]
    fn a_persons_template_is_found_and_a_bad_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("pair.toml"),
            r#"name = "pair"
description = "two"
[[roles]]
name = "writer"
description = "writes"
instructions = "Write for {person}; ask {reviewer}."
[[roles]]
name = "reviewer"
description = "reviews"
routing = "all"
instructions = "Review {writer}."
"#,
        )
        .unwrap();
        let all = templates(&[dir.path().to_path_buf()]).unwrap();
        let pair = all.iter().find(|t| t.name == "pair").unwrap();
        let handles: BTreeMap<String, String> = [
            ("writer".to_owned(), "dana/x-writer".to_owned()),
            ("reviewer".to_owned(), "dana/x-reviewer".to_owned()),
        ]
        .into_iter()
        .collect();
        let text = instructions(pair, &pair.roles[0], "dana", &handles);
        assert!(
            text.starts_with("Write for @dana; ask @dana/x-reviewer."),
            "{text}"
        );
        std::fs::write(
            dir.path().join("bad.toml"),
            "name = \"bad\"\ndescription = \"x\"\nroles = []\n",
        )
        .unwrap();
        assert!(matches!(
            templates(&[dir.path().to_path_buf()]),
            Err(CoreError::Invalid(_))
        ));
    }

    #[test]
    fn agent_names_fit_the_handle_rules() {
        assert_eq!(agent_name("Parser v2!", "manager"), "parser-v2-manager");
        assert_eq!(agent_name("!!!", "developer"), "team-developer");
        let long = agent_name(&"x".repeat(60), "architect");
        assert!(long.len() <= 32 && long.ends_with("-architect"), "{long}");
    }
}
