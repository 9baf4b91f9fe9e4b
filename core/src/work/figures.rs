//! Cost and tokens as a person asks for them: grouped by session, agent, person, team, model
//! or day, over a period, with their own agents' figures and their teammates' together.
//!
//! Two sources meet here. `usage` events in rooms carry what onboarded agents' work cost —
//! this machine's agents (published by its watcher) and teammates' agents they share. The
//! logs of this machine also hold sessions of no onboarded agent; those are counted from
//! the logs, as the person's own ("local"). A session is never counted twice: one that is
//! published is taken from the events only.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::events::{Framework, TokenCounts};
use super::pricing::{PriceMemo, Pricing};
use super::publish::Targets;
use crate::cache::{CacheError, CacheView, UsageKey, UsageQuery};
use crate::{Core, CoreError};

/// Teams: named sets of people (by handle), from the person's `teams.toml`:
/// `[teams]` then `core = ["dana", "sam"]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Teams {
    #[serde(default)]
    pub teams: BTreeMap<String, Vec<String>>,
}

impl Teams {
    /// The teams in a profile directory's `teams.toml` (none when it is absent).
    pub fn load(profile_dir: &std::path::Path) -> Result<Teams, crate::CoreError> {
        let path = profile_dir.join("teams.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).map_err(|error| {
                crate::CoreError::Invalid(format!(
                    "{} is not valid ({error}); it lists teams as `[teams]` then `name = [\"handle\", …]`",
                    path.display()
                ))
            }),
            Err(_) => Ok(Teams::default()),
        }
    }

    /// The teams of a person (a handle), or `(no team)`.
    pub fn of(&self, person: &str) -> Vec<String> {
        let teams: Vec<String> = self
            .teams
            .iter()
            .filter(|(_, people)| people.iter().any(|p| p == person))
            .map(|(name, _)| name.clone())
            .collect();
        if teams.is_empty() {
            vec!["(no team)".to_owned()]
        } else {
            teams
        }
    }
}

/// How figures are grouped: the keys of [`UsageKey`], and teams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grouping {
    Room,
    Session,
    Agent,
    Person,
    Team,
    Model,
    Day,
}

impl Grouping {
    pub fn parse(text: &str) -> Option<Grouping> {
        Some(match text {
            "room" => Grouping::Room,
            "session" => Grouping::Session,
            "agent" => Grouping::Agent,
            "person" => Grouping::Person,
            "team" => Grouping::Team,
            "model" => Grouping::Model,
            "day" => Grouping::Day,
            _ => return None,
        })
    }
}

/// One line of figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// The value of each grouping key.
    pub group: BTreeMap<Grouping, String>,
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    pub cost_usd: f64,
    /// Usage of models without a price (their tokens are here, their cost is not).
    pub unpriced_entries: u64,
    pub unpriced_models: Vec<String>,
    /// Entries from this machine's logs only, not published.
    pub local_entries: u64,
    /// When the newest entry in it was reported.
    pub latest_ms: i64,
}

#[derive(Debug, Default)]
struct Sum {
    tokens: TokenCounts,
    cost: f64,
    unpriced_entries: u64,
    unpriced_models: std::collections::BTreeSet<String>,
    local_entries: u64,
    latest_ms: i64,
}

/// Figures for `query` (its `group_by` is replaced by `grouping`), with teams and local
/// sessions of no onboarded agent (`me_handle`'s own).
pub fn figures(
    view: &CacheView,
    grouping: &[Grouping],
    query: &UsageQuery,
    teams: &Teams,
    targets: &Targets,
    pricing: &Pricing,
    me_handle: &str,
) -> Result<Vec<Figure>, CacheError> {
    // Shared figures, at their finest: every key but team (which comes from person).
    let finest = UsageQuery {
        group_by: vec![
            UsageKey::Room,
            UsageKey::Session,
            UsageKey::Agent,
            UsageKey::Person,
            UsageKey::Model,
            UsageKey::Day,
        ],
        ..query.clone()
    };
    let mut sums: BTreeMap<BTreeMap<Grouping, String>, Sum> = BTreeMap::new();
    let mut prices = PriceMemo::new(pricing);
    let mut add = |values: &BTreeMap<Grouping, String>, person: &str, add_to: &dyn Fn(&mut Sum)| {
        for team in teams.of(person) {
            let mut values = values.clone();
            values.insert(Grouping::Team, team);
            let group: BTreeMap<Grouping, String> = grouping
                .iter()
                .map(|key| (*key, values.get(key).cloned().unwrap_or_default()))
                .collect();
            add_to(sums.entry(group).or_default());
            if !grouping.contains(&Grouping::Team) {
                // Without grouping by team, a person in two teams counts once.
                break;
            }
        }
    };
    for row in view.usage(&finest)? {
        let value = |key: UsageKey| row.group.get(&key).cloned().unwrap_or_default();
        let values: BTreeMap<Grouping, String> = [
            (Grouping::Room, value(UsageKey::Room)),
            (Grouping::Session, value(UsageKey::Session)),
            (Grouping::Agent, value(UsageKey::Agent)),
            (Grouping::Person, value(UsageKey::Person)),
            (Grouping::Model, value(UsageKey::Model)),
            (Grouping::Day, value(UsageKey::Day)),
        ]
        .into_iter()
        .collect();
        let person = value(UsageKey::Person);
        let model = value(UsageKey::Model);
        add(&values, &person, &|sum: &mut Sum| {
            sum.tokens.add(&TokenCounts {
                input: row.input,
                output: row.output,
                cache_write_5m: row.cache_write,
                cache_write_1h: 0,
                cache_read: row.cache_read,
            });
            sum.cost += row.cost_usd;
            sum.unpriced_entries += row.unpriced;
            if row.unpriced > 0 {
                sum.unpriced_models.insert(model.clone());
            }
            sum.latest_ms = sum.latest_ms.max(row.to_ms);
        });
    }
    // This machine's sessions that no onboarded agent publishes.
    let published: HashSet<(String, String)> = view
        .local_sessions()?
        .into_iter()
        .filter(|session| {
            let framework = match session.framework.as_str() {
                "claude-code" => Framework::ClaudeCode,
                "codex" => Framework::Codex,
                _ => Framework::Gemini,
            };
            targets
                .of(framework, &session.session_id, session.cwd.as_deref())
                .is_some()
        })
        .map(|session| (session.framework, session.session_id))
        .collect();
    if query.room.is_none() {
        for entry in view.local_usage_entries(query.since_ms, query.until_ms)? {
            if published.contains(&(entry.framework.clone(), entry.session_id.clone())) {
                continue;
            }
            let day = entry
                .at_ms
                .map(|at| roundtable_protocol::ts::format_millis(at)[..10].to_owned())
                .unwrap_or_default();
            let values: BTreeMap<Grouping, String> = [
                (Grouping::Room, "(this machine)".to_owned()),
                (
                    Grouping::Session,
                    format!("{}:{}", entry.framework, entry.session_id),
                ),
                (Grouping::Agent, format!("(local {})", entry.framework)),
                (Grouping::Person, me_handle.to_owned()),
                (Grouping::Model, entry.model.clone()),
                (Grouping::Day, day),
            ]
            .into_iter()
            .collect();
            let cost = prices.cost(&entry.model, &entry.tokens);
            add(&values, me_handle, &|sum: &mut Sum| {
                sum.tokens.add(&entry.tokens);
                match cost {
                    Some(cost) => sum.cost += cost,
                    None => {
                        sum.unpriced_entries += 1;
                        sum.unpriced_models.insert(entry.model.clone());
                    }
                }
                sum.local_entries += 1;
                sum.latest_ms = sum.latest_ms.max(entry.at_ms.unwrap_or(0));
            });
        }
    }
    Ok(sums
        .into_iter()
        .map(|(group, sum)| Figure {
            group,
            input: sum.tokens.input,
            output: sum.tokens.output,
            cache_write: sum.tokens.cache_write(),
            cache_read: sum.tokens.cache_read,
            cost_usd: sum.cost,
            unpriced_entries: sum.unpriced_entries,
            unpriced_models: sum.unpriced_models.into_iter().collect(),
            local_entries: sum.local_entries,
            latest_ms: sum.latest_ms,
        })
        .collect())
}

impl Core {
    /// [`figures`] for this profile's person: their teams (`teams.toml` in the profile), the
    /// agents onboarded on this machine (whose sessions are counted from the rooms, not the
    /// logs), at `pricing`. What `roundtable usage` prints and the desktop's costs board shows.
    pub async fn usage_figures(
        &self,
        grouping: Vec<Grouping>,
        query: UsageQuery,
        pricing: Pricing,
    ) -> Result<Vec<Figure>, CoreError> {
        let profile = self.profile();
        let teams = Teams::load(&profile.dir)?;
        let (profiles, share_rooms) = (profile.base().to_path_buf(), profile.share_rooms.clone());
        let me = profile.handle.clone();
        self.read(move |view| {
            // Reads the agents' profiles: on the blocking thread, with the cache.
            let targets = super::watch::load_targets(&profiles, &share_rooms);
            figures(view, &grouping, &query, &teams, &targets, &pricing, &me)
        })
        .await
    }
}
