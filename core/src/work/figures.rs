//! Cost and tokens as a person asks for them: grouped by session, agent, person, team, model
//! or day, over a period, with their own agents' figures and their teammates' together.
//!
//! Two sources meet here. `usage` events in rooms carry what onboarded agents' work cost —
//! this machine's agents (published by its watcher) and teammates' agents they share. The
//! logs of this machine also hold sessions of no onboarded agent; those are counted from
//! the logs, as the person's own ("local"). A session is never counted twice: one that is
//! published is taken from the events only.
//!
//! What another person's machine reports is their word: a teammate's usage of a model priced
//! here counts at what its tokens can cost at this machine's prices
//! ([`ModelPrice::shared_cost`](super::pricing::ModelPrice::shared_cost)), so no `cost_usd`
//! a teammate writes counts for more than its tokens could cost. A model this machine has no
//! price for keeps the teammate's figure, marked as theirs alone (`unverified_usd`), which
//! budgets show and warn on but never pause on (docs/pricing.md).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::pricing::{PriceMemo, Pricing};
use crate::cache::{CacheError, CacheView, UsageKey, UsageQuery};
use crate::log_events::{Framework, TokenCounts};
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

    /// The teams of a person (a handle); none when `teams.toml` names them in none.
    pub fn of(&self, person: &str) -> Vec<String> {
        self.teams
            .iter()
            .filter(|(_, people)| people.iter().any(|p| p == person))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The team labels a person's figures are grouped under: their teams, or [`NO_TEAM`].
    fn labels_of(&self, person: &str) -> Vec<String> {
        let teams = self.of(person);
        if teams.is_empty() {
            vec![NO_TEAM.to_owned()]
        } else {
            teams
        }
    }
}

/// The team of figures whose person is in no team (a label of `roundtable usage --by team`).
pub const NO_TEAM: &str = "(no team)";
/// The room of figures read from this machine's logs, of sessions no agent publishes.
pub const THIS_MACHINE: &str = "(this machine)";

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
    /// Of `cost_usd`, what other people reported for models this machine has no price for:
    /// their word alone.
    #[serde(skip)]
    pub unverified_usd: f64,
}

#[derive(Debug, Default)]
struct Sum {
    tokens: TokenCounts,
    cost: f64,
    unverified: f64,
    unpriced_entries: u64,
    unpriced_models: std::collections::BTreeSet<String>,
    local_entries: u64,
    latest_ms: i64,
}

/// Who claimed a session of this machine (framework, session id): an agent's handle.
pub type OwnerOf<'a> = &'a dyn Fn(Framework, &str) -> Option<String>;

/// Figures for `query` (its `group_by` is replaced by `grouping`), with teams.
///
/// This machine's sessions are counted from its logs, each request once, under the agent
/// that claimed the session (`owner_of`) or as the person's own (`me_handle`): the same
/// figures as `roundtable scan`, at once, whether or not their reports have reached the hub
/// yet. Reports in rooms count the sessions of other machines (teammates', other devices').
/// Grouped by room, figures are what the rooms hold (a session's share of each room it is
/// published to), and this machine's unclaimed sessions are `(this machine)`; for one room,
/// only what that room holds.
pub fn figures(
    view: &CacheView,
    grouping: &[Grouping],
    query: &UsageQuery,
    teams: &Teams,
    owner_of: OwnerOf<'_>,
    pricing: &Pricing,
    me_handle: &str,
) -> Result<Vec<Figure>, CacheError> {
    let by_room = grouping.contains(&Grouping::Room) || query.room.is_some();
    // Shared figures, at their finest: every key but team (which comes from person), and
    // rooms only when asked (a report in several rooms otherwise counts once).
    let mut finest_keys = vec![
        UsageKey::Session,
        UsageKey::Agent,
        UsageKey::Person,
        UsageKey::Model,
        UsageKey::Day,
    ];
    if by_room {
        finest_keys.insert(0, UsageKey::Room);
    }
    let finest = UsageQuery {
        group_by: finest_keys,
        ..query.clone()
    };
    let here: HashSet<String> = view
        .local_session_keys()?
        .into_iter()
        .map(|(framework, session)| format!("{framework}:{session}"))
        .collect();
    let mut sums: BTreeMap<BTreeMap<Grouping, String>, Sum> = BTreeMap::new();
    let mut prices = PriceMemo::new(pricing);
    let mut add = |values: &BTreeMap<Grouping, String>, person: &str, add_to: &dyn Fn(&mut Sum)| {
        for team in teams.labels_of(person) {
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
        if !by_room && here.contains(&value(UsageKey::Session)) {
            // Counted from this machine's logs below.
            continue;
        }
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
        let tokens = TokenCounts {
            input: row.input,
            output: row.output,
            cache_write_5m: row.cache_write,
            cache_write_1h: 0,
            cache_read: row.cache_read,
        };
        // The person's own figures (their agents', from any of their machines) are theirs to
        // vouch for; another person's count at this machine's prices where it has them.
        let (cost, unpriced, unverified) = match prices.price(&model) {
            Some(price) if person != me_handle => {
                let reported = (row.unpriced < row.entries).then_some(row.cost_usd);
                (
                    price.shared_cost(&tokens, reported, pricing.rules()),
                    0,
                    0.0,
                )
            }
            None if person != me_handle => (row.cost_usd, row.unpriced, row.cost_usd),
            _ => (row.cost_usd, row.unpriced, 0.0),
        };
        add(&values, &person, &|sum: &mut Sum| {
            sum.tokens.add(&tokens);
            sum.cost += cost;
            sum.unverified += unverified;
            sum.unpriced_entries += unpriced;
            if unpriced > 0 {
                sum.unpriced_models.insert(model.clone());
            }
            sum.latest_ms = sum.latest_ms.max(row.to_ms);
        });
    }
    // This machine's sessions, from its logs.
    let mut owners: HashMap<(String, String), Option<String>> = HashMap::new();
    for entry in view.local_usage_entries(query.since_ms, query.until_ms)? {
        let owner = owners
            .entry((entry.framework.clone(), entry.session_id.clone()))
            .or_insert_with(|| {
                Framework::parse(&entry.framework)
                    .and_then(|framework| owner_of(framework, &entry.session_id))
            })
            .clone();
        if query.room.is_some() || (by_room && owner.is_some()) {
            // Its room figures are what its rooms hold; an unclaimed session is in none.
            continue;
        }
        let day = entry
            .at_ms
            .map(|at| roundtable_protocol::ts::format_millis(at)[..10].to_owned())
            .unwrap_or_default();
        let (agent, person) = match &owner {
            Some(handle) => (handle.clone(), super::boards::person_of(handle).to_owned()),
            None => (format!("(local {})", entry.framework), me_handle.to_owned()),
        };
        let values: BTreeMap<Grouping, String> = [
            (Grouping::Room, THIS_MACHINE.to_owned()),
            (
                Grouping::Session,
                format!("{}:{}", entry.framework, entry.session_id),
            ),
            (Grouping::Agent, agent),
            (Grouping::Person, person.clone()),
            (Grouping::Model, entry.model.clone()),
            (Grouping::Day, day),
        ]
        .into_iter()
        .collect();
        let cost = prices.cost(&entry.model, &entry.tokens, &entry.billing);
        add(&values, &person, &|sum: &mut Sum| {
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
            unverified_usd: sum.unverified,
        })
        .collect())
}

impl Core {
    /// [`figures`] for this profile's person: their teams (`teams.toml` in the profile), who
    /// claimed which session of this machine, at `pricing`. What `roundtable usage` prints
    /// and the desktop's costs board shows.
    pub async fn usage_figures(
        &self,
        grouping: Vec<Grouping>,
        query: UsageQuery,
        pricing: Pricing,
    ) -> Result<Vec<Figure>, CoreError> {
        let profile = self.profile();
        let teams = Teams::load(&profile.dir)?;
        let claims = crate::session_claims::SessionClaims::beside(profile.base());
        let me = profile.handle.clone();
        self.read(move |view| {
            // Reads the claims: on the blocking thread, with the cache.
            let owner_of = |framework: Framework, session: &str| claims.owner(framework, session);
            figures(view, &grouping, &query, &teams, &owner_of, &pricing, &me)
        })
        .await
    }
}
