//! Budgets: a person caps what an agent, a person or a team spends in a day, a week or a
//! month (UTC days, as the costs board counts them). At 80 % the person is warned; at 100 %
//! every agent of theirs that counts toward the budget is paused on the hub, an ordinary
//! `control` `pause` whose reason the agent is told and the hub's audit log keeps.
//!
//! Only the person's own agents are paused: a budget on a teammate's agent, or on a team,
//! warns the person and pauses nothing of anyone else's (pausing is the owner's right, not a
//! manager's). Spend is the costs board's figures (this machine's logs, and what teammates
//! share), so a budget holds whichever machine an agent runs on.
//!
//! A teammate's figure counts at what its tokens can cost at this machine's prices; one for a
//! model this machine has no price for is the teammate's word alone (`unverified_usd`): it is
//! shown and warns, says whose it is, and never pauses anyone (docs/pricing.md). A pause
//! whose spend holds teammates' figures says how much of it they reported.
//!
//! The states and the actions they call for are pure ([`budget_states`], [`actions_due`]);
//! [`Core::keep_budgets`] applies them, and [`BudgetWatch`] does so after every change of
//! usage, so a usage event that crosses a budget pauses its agent before the next one.

use std::collections::BTreeSet;
use std::time::Duration;

use roundtable_protocol::client::ControlAction;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use crate::changes::Change;
use crate::client::PATIENCE;
use crate::work::boards::CostRow;
use crate::work::pricing::Pricing;
use crate::{Core, CoreError};

/// The share of a budget at which the person is warned.
pub const WARN_AT: f64 = 0.8;

/// The largest budget accepted, in dollars (a typo's guard, not a policy).
pub const MAX_USD: f64 = 1_000_000.0;

/// How often [`BudgetWatch`] looks again with no change of usage.
const AGAIN_EVERY: Duration = Duration::from_secs(60);

/// What a budget caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// One agent, by handle (`dana/writer`).
    Agent,
    /// Every agent of one person, by the person's handle.
    Person,
    /// Every agent of a team's people (`teams.toml`), by the team's name.
    Team,
}

impl BudgetScope {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetScope::Agent => "agent",
            BudgetScope::Person => "person",
            BudgetScope::Team => "team",
        }
    }

    pub fn parse(text: &str) -> Option<BudgetScope> {
        Some(match text {
            "agent" => BudgetScope::Agent,
            "person" => BudgetScope::Person,
            "team" => BudgetScope::Team,
            _ => return None,
        })
    }
}

/// How long a budget's period is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum BudgetPeriod {
    Day,
    /// Monday to Sunday.
    Week,
    Month,
}

impl BudgetPeriod {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Week => "week",
            BudgetPeriod::Month => "month",
        }
    }

    pub fn parse(text: &str) -> Option<BudgetPeriod> {
        Some(match text {
            "day" => BudgetPeriod::Day,
            "week" => BudgetPeriod::Week,
            "month" => BudgetPeriod::Month,
            _ => return None,
        })
    }

    /// The first UTC day (`2026-12-01`) of the period holding `now_ms`. Pure.
    pub fn start_day(self, now_ms: i64) -> String {
        const DAY_MS: i64 = 86_400_000;
        let days = now_ms.div_euclid(DAY_MS);
        let day_text =
            |days: i64| roundtable_protocol::ts::format_millis(days * DAY_MS)[..10].to_owned();
        match self {
            BudgetPeriod::Day => day_text(days),
            // 1970-01-01 was a Thursday: three days after a Monday.
            BudgetPeriod::Week => day_text(days - (days + 3).rem_euclid(7)),
            BudgetPeriod::Month => format!("{}-01", &day_text(days)[..7]),
        }
    }

    /// "a day", "a week", "a month".
    fn per(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "a day",
            BudgetPeriod::Week => "a week",
            BudgetPeriod::Month => "a month",
        }
    }
}

/// A cap on spend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct Budget {
    pub scope: BudgetScope,
    /// An agent's handle, a person's handle or a team's name.
    pub name: String,
    pub period: BudgetPeriod,
    pub usd: f64,
}

impl Budget {
    /// Whether a row of figures counts toward this budget.
    pub fn counts(&self, row: &CostRow) -> bool {
        match self.scope {
            BudgetScope::Agent => row.agent == self.name,
            BudgetScope::Person => row.person == self.name,
            BudgetScope::Team => row.teams.contains(&self.name),
        }
    }

    /// "dana/writer's $5.00 a day".
    pub fn describe(&self) -> String {
        let whose = match self.scope {
            BudgetScope::Agent | BudgetScope::Person => format!("{}'s", self.name),
            BudgetScope::Team => format!("team {}'s", self.name),
        };
        format!("{whose} {} {}", dollars(self.usd), self.period.per())
    }
}

/// Dollars to the cent, or to a hundredth of a cent where that matters: `$5.00`, `$0.02`,
/// `$0.0125` (a budget of cents is read to the cent, not rounded away).
pub fn dollars(usd: f64) -> String {
    let text = format!("{usd:.4}");
    let trimmed = text
        .strip_suffix("00")
        .or_else(|| text.strip_suffix('0'))
        .unwrap_or(&text);
    format!("${trimmed}")
}

/// How far into its budget the spend is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum BudgetLevel {
    Under,
    /// At or over [`WARN_AT`].
    Near,
    Reached,
}

impl BudgetLevel {
    /// The level of a spend that is `share` of its budget.
    pub fn of(share: f64) -> BudgetLevel {
        if share >= 1.0 {
            BudgetLevel::Reached
        } else if share >= WARN_AT {
            BudgetLevel::Near
        } else {
            BudgetLevel::Under
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BudgetLevel::Under => "under",
            BudgetLevel::Near => "near",
            BudgetLevel::Reached => "reached",
        }
    }
}

/// A budget and its period's spend.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct BudgetState {
    pub budget: Budget,
    /// The period's first UTC day.
    pub period_start: String,
    pub spent_usd: f64,
    /// Spend over budget: 1.0 is all of it.
    pub share: f64,
    pub level: BudgetLevel,
    /// Entries of models without a price: spend the figure cannot count.
    pub unpriced_entries: u64,
    /// The agents whose spend counts, most first (handles).
    pub agents: Vec<String>,
    /// Of `spent_usd`, what other people reported for models this machine has no price
    /// for: their word alone, which warns but never pauses.
    #[serde(skip)]
    pub unverified_usd: f64,
    /// Whose those figures are, and of which models: (person, model), sorted.
    #[serde(skip)]
    pub unverified: Vec<(String, String)>,
    /// `spent_usd` by person (handles), sorted: whose figures a notification names.
    #[serde(skip)]
    pub by_person: Vec<(String, f64)>,
}

/// Each budget's state at `now_ms`, from figures at their finest (the costs board's rows,
/// covering at least the longest period). Pure.
pub fn budget_states(budgets: &[Budget], rows: &[CostRow], now_ms: i64) -> Vec<BudgetState> {
    budgets
        .iter()
        .map(|budget| {
            let period_start = budget.period.start_day(now_ms);
            let mut spent_usd = 0.0;
            let mut unpriced_entries = 0;
            let mut unverified_usd = 0.0;
            let mut unverified = BTreeSet::new();
            let mut by_agent: Vec<(String, f64)> = Vec::new();
            let mut by_person: std::collections::BTreeMap<String, f64> = Default::default();
            for row in rows
                .iter()
                .filter(|row| row.day >= period_start && budget.counts(row))
            {
                spent_usd += row.cost_usd;
                unpriced_entries += row.unpriced_entries;
                if row.unverified_usd > 0.0 {
                    unverified_usd += row.unverified_usd;
                    unverified.insert((row.person.clone(), row.model.clone()));
                }
                *by_person.entry(row.person.clone()).or_default() += row.cost_usd;
                match by_agent.iter_mut().find(|(agent, _)| *agent == row.agent) {
                    Some((_, spent)) => *spent += row.cost_usd,
                    None => by_agent.push((row.agent.clone(), row.cost_usd)),
                }
            }
            by_agent.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let share = spent_usd / budget.usd;
            let level = BudgetLevel::of(share);
            BudgetState {
                budget: budget.clone(),
                period_start,
                spent_usd,
                share,
                level,
                unpriced_entries,
                agents: by_agent.into_iter().map(|(agent, _)| agent).collect(),
                unverified_usd,
                unverified: unverified.into_iter().collect(),
                by_person: by_person.into_iter().collect(),
            }
        })
        .collect()
}

/// "sam", "sam and lee", "sam, lee and ana".
fn in_words(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

impl BudgetState {
    /// The people whose unverified figures count, and their models, in words.
    fn unverified_in_words(&self) -> (String, String) {
        let mut people: Vec<&str> = self.unverified.iter().map(|(p, _)| p.as_str()).collect();
        people.dedup();
        let mut models: Vec<&str> = self.unverified.iter().map(|(_, m)| m.as_str()).collect();
        models.sort_unstable();
        models.dedup();
        (in_words(&people), in_words(&models))
    }

    /// ", $4.00 of it as sam reported it" when people other than `me` spent some of it.
    fn others_share(&self, me: &str) -> String {
        let others: Vec<&(String, f64)> = self
            .by_person
            .iter()
            .filter(|(person, spent)| person != me && *spent > 0.0)
            .collect();
        if others.is_empty() {
            return String::new();
        }
        let spent: f64 = others.iter().map(|(_, spent)| spent).sum();
        let names: Vec<&str> = others.iter().map(|(person, _)| person.as_str()).collect();
        format!(
            ", {} of it as {} reported it",
            dollars(spent),
            in_words(&names)
        )
    }
}

/// What keeping a budget does, once per budget and period.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct BudgetAction {
    pub budget: Budget,
    pub period_start: String,
    pub level: BudgetLevel,
    /// The agent to pause (one of the person's own); none for a warning, or for a budget
    /// reached with nothing of the person's to pause.
    pub agent: Option<String>,
    pub spent_usd: f64,
    /// What the person is told; for a pause, also the agent and the audit log.
    pub text: String,
}

/// The key of an action done: (budget, period start, level, agent or "").
pub type ActionKey = (
    BudgetScope,
    String,
    BudgetPeriod,
    String,
    BudgetLevel,
    String,
);

impl BudgetAction {
    pub fn key(&self) -> ActionKey {
        (
            self.budget.scope,
            self.budget.name.clone(),
            self.budget.period,
            self.period_start.clone(),
            self.level,
            self.agent.clone().unwrap_or_default(),
        )
    }
}

/// The actions `states` call for that are not in `done`: a warning at 80 %; at 100 % a
/// pause of each of `me`'s agents whose spend counts (or, when none does, one notice).
/// `me` is the person's handle. Pure.
pub fn actions_due(
    states: &[BudgetState],
    me: &str,
    done: &BTreeSet<ActionKey>,
) -> Vec<BudgetAction> {
    let mine = |agent: &str| agent.split_once('/').is_some_and(|(owner, _)| owner == me);
    let mut due = Vec::new();
    for state in states {
        let budget = &state.budget;
        let spent = dollars(state.spent_usd);
        let percent = (state.share * 100.0).floor();
        let action = |level, agent: Option<String>, text: String| BudgetAction {
            budget: budget.clone(),
            period_start: state.period_start.clone(),
            level,
            agent,
            spent_usd: state.spent_usd,
            text,
        };
        let mut wanted = Vec::new();
        let (vouchers, unpriced_models) = state.unverified_in_words();
        if state.level >= BudgetLevel::Near {
            let theirs = if state.unverified_usd > 0.0 {
                format!(
                    "; {} of it is what {vouchers} reported for {unpriced_models}, which \
                     this machine has no price for",
                    dollars(state.unverified_usd)
                )
            } else {
                String::new()
            };
            wanted.push(action(
                BudgetLevel::Near,
                None,
                format!(
                    "{spent} of {} spent ({percent}%) since {}{theirs}",
                    budget.describe(),
                    state.period_start
                ),
            ));
        }
        // Reached on figures this machine can price: a figure only another person vouches
        // for (a model unpriced here) never pauses anyone.
        let verified_reached = state.spent_usd - state.unverified_usd >= budget.usd;
        if state.level == BudgetLevel::Reached && !verified_reached {
            wanted.push(action(
                BudgetLevel::Reached,
                None,
                format!(
                    "{} reached only with {} that {vouchers} reported for {unpriced_models}, \
                     which this machine has no price for: {spent} spent since {}, {} of it \
                     priced here. Only {vouchers} vouch for the rest, so nothing was paused; \
                     give {unpriced_models} a price in pricing.toml to count it",
                    budget.describe(),
                    dollars(state.unverified_usd),
                    state.period_start,
                    dollars(state.spent_usd - state.unverified_usd),
                ),
            ));
        } else if state.level == BudgetLevel::Reached {
            let ours: Vec<&String> = state.agents.iter().filter(|agent| mine(agent)).collect();
            if ours.is_empty() {
                wanted.push(action(
                    BudgetLevel::Reached,
                    None,
                    format!(
                        "{} reached: {spent} spent since {}; no agent of yours counts \
                         toward it, so nothing was paused",
                        budget.describe(),
                        state.period_start
                    ),
                ));
            }
            for agent in ours {
                wanted.push(action(
                    BudgetLevel::Reached,
                    Some(agent.clone()),
                    format!(
                        "budget reached: {} ({spent} spent since {}{}); paused by {me} until \
                         they resume you or raise the budget",
                        budget.describe(),
                        state.period_start,
                        state.others_share(me),
                    ),
                ));
            }
        }
        due.extend(
            wanted
                .into_iter()
                .filter(|action| !done.contains(&action.key())),
        );
    }
    due
}

/// An action done, as the person's views and notifications show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct BudgetAlert {
    pub budget: Budget,
    pub period_start: String,
    pub level: BudgetLevel,
    pub agent: Option<String>,
    pub spent_usd: f64,
    pub text: String,
    pub ts_ms: i64,
}

/// The budgets and their spend, as Settings and the costs board show them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct BudgetBoard {
    pub states: Vec<BudgetState>,
    /// What keeping them did in their current periods, newest first.
    pub alerts: Vec<BudgetAlert>,
}

/// Checks a budget before it is kept: a positive amount, a name of its scope's kind.
pub fn check_budget(budget: &Budget) -> Result<(), CoreError> {
    if !(budget.usd.is_finite() && budget.usd > 0.0 && budget.usd <= MAX_USD) {
        return Err(CoreError::Invalid(format!(
            "a budget is a positive number of dollars up to {MAX_USD}, e.g. 5 or 12.50; got {}",
            budget.usd
        )));
    }
    let name = budget.name.trim();
    if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
        return Err(CoreError::Invalid(format!(
            "name the {} the budget is for (1 to 64 characters)",
            budget.scope.as_str()
        )));
    }
    use roundtable_protocol::handles::{validate_handle, validate_user_handle};
    let valid = match budget.scope {
        BudgetScope::Agent => name.contains('/') && validate_handle(name).is_ok(),
        BudgetScope::Person => validate_user_handle(name).is_ok(),
        BudgetScope::Team => true,
    };
    if !valid {
        return Err(CoreError::Invalid(match budget.scope {
            BudgetScope::Agent => {
                format!("{name:?} is not an agent's handle: write person/agent, e.g. dana/writer")
            }
            _ => format!("{name:?} is not a person's handle, e.g. dana"),
        }));
    }
    Ok(())
}

/// The budget as it is kept, set by the person whose handle is `my_handle`: its name
/// trimmed, an agent named alone taken as one of theirs (`writer` is `dana/writer`), and
/// checked.
pub fn budget_to_keep(mut budget: Budget, my_handle: &str) -> Result<Budget, CoreError> {
    budget.name = budget.name.trim().to_owned();
    if budget.scope == BudgetScope::Agent && !budget.name.contains('/') {
        // One of ours, by its name alone.
        budget.name = format!("{my_handle}/{}", budget.name);
    }
    check_budget(&budget)?;
    Ok(budget)
}

impl Core {
    /// Sets a budget (replacing the one of the same scope, name and period). What keeping
    /// the old one did this period is forgotten: the new amount is kept afresh.
    pub async fn set_budget(&self, budget: Budget, now_ms: i64) -> Result<Budget, CoreError> {
        let budget = budget_to_keep(budget, &self.profile().handle)?;
        let kept = budget.clone();
        self.write_job(move |cache| cache.set_budget(&kept, now_ms))
            .await?;
        self.shared.changed(Change::Budgets);
        Ok(budget)
    }

    /// Removes a budget; says whether there was one.
    pub async fn remove_budget(
        &self,
        scope: BudgetScope,
        name: &str,
        period: BudgetPeriod,
    ) -> Result<bool, CoreError> {
        let name = name.trim().to_owned();
        let removed = self
            .write_job(move |cache| cache.remove_budget(scope, &name, period))
            .await?;
        if removed {
            self.shared.changed(Change::Budgets);
        }
        Ok(removed)
    }

    /// The budgets, their spend at `now_ms` and what keeping them did this period.
    pub async fn budget_board(
        &self,
        now_ms: i64,
        pricing: Pricing,
    ) -> Result<BudgetBoard, CoreError> {
        let budgets = self.read(|cache| cache.budgets()).await?;
        let states = self.budget_states_of(budgets, now_ms, pricing).await?;
        let starts: Vec<(Budget, String)> = states
            .iter()
            .map(|state| (state.budget.clone(), state.period_start.clone()))
            .collect();
        let alerts = self.read(move |cache| cache.budget_alerts(&starts)).await?;
        Ok(BudgetBoard { states, alerts })
    }

    async fn budget_states_of(
        &self,
        budgets: Vec<Budget>,
        now_ms: i64,
        pricing: Pricing,
    ) -> Result<Vec<BudgetState>, CoreError> {
        if budgets.is_empty() {
            return Ok(Vec::new());
        }
        // From the earliest period's first day: a week may begin in the previous month.
        let earliest = budgets
            .iter()
            .map(|budget| budget.period.start_day(now_ms))
            .min()
            .unwrap_or_default();
        let since_ms = roundtable_protocol::ts::parse_millis(&format!("{earliest}T00:00:00.000Z"))
            .unwrap_or(0);
        let rows = self.cost_board(Some(since_ms), pricing).await?.rows;
        Ok(budget_states(&budgets, &rows, now_ms))
    }

    /// Keeps the budgets at `now_ms`: warns at 80 %, pauses the person's agents at 100 %,
    /// each once a period. Returns what it did. An agent the hub cannot pause now (offline)
    /// is tried again next time.
    pub async fn keep_budgets(
        &self,
        now_ms: i64,
        pricing: Pricing,
    ) -> Result<Vec<BudgetAlert>, CoreError> {
        let budgets = self.read(|cache| cache.budgets()).await?;
        if budgets.is_empty() {
            return Ok(Vec::new());
        }
        let states = self.budget_states_of(budgets, now_ms, pricing).await?;
        let done = self.read(|cache| cache.budget_actions_done()).await?;
        let due = actions_due(&states, &self.profile().handle, &done);
        let mut alerts = Vec::new();
        for action in due {
            if let Some(agent) = &action.agent {
                let paused = self
                    .control_agent_because(
                        agent,
                        ControlAction::Pause,
                        None,
                        Some(&action.text),
                        PATIENCE,
                    )
                    .await;
                match paused {
                    Ok(_) => {}
                    // Gone, or not ours after all: said once, not tried forever.
                    Err(error @ (CoreError::NotFound(_) | CoreError::Refused { .. })) => {
                        tracing::warn!(%agent, %error, "a budget could not pause an agent");
                    }
                    Err(error) => return Err(error),
                }
            }
            let alert = BudgetAlert {
                budget: action.budget.clone(),
                period_start: action.period_start.clone(),
                level: action.level,
                agent: action.agent.clone(),
                spent_usd: action.spent_usd,
                text: action.text.clone(),
                ts_ms: now_ms,
            };
            let kept = alert.clone();
            // Recorded here first, told once: another keeper that read the same actions as
            // due (the watch and `roundtable budget check` at once) finds it recorded.
            let first = self
                .write_job(move |cache| cache.record_budget_action(&kept))
                .await?;
            if first {
                alerts.push(alert);
            }
        }
        if !alerts.is_empty() {
            self.shared.changed(Change::Budgets);
        }
        Ok(alerts)
    }

    /// Keeps the budgets now and after every change of usage, until the handle is dropped.
    pub fn watch_budgets(&self, pricing: Pricing) -> BudgetWatch {
        let core = self.clone();
        let mut changes = self.changes();
        let (told, _) = tokio::sync::broadcast::channel(64);
        let tell = told.clone();
        let task = tokio::spawn(async move {
            let keep = |core: &Core| {
                let (core, pricing, tell) = (core.clone(), pricing.clone(), tell.clone());
                async move {
                    match core.keep_budgets(crate::now_ms(), pricing).await {
                        Ok(alerts) => {
                            for alert in alerts {
                                let _ = tell.send(alert);
                            }
                        }
                        Err(error) => tracing::warn!(
                            %error,
                            "keeping the budgets failed; trying again with the next change"
                        ),
                    }
                }
            };
            keep(&core).await;
            // Also now and then: a budget another process set (`roundtable budget set`) or
            // a failed pause is looked at again without waiting for usage.
            let mut now_and_then = tokio::time::interval(AGAIN_EVERY);
            now_and_then.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            now_and_then.tick().await;
            loop {
                let relevant = tokio::select! {
                    change = changes.recv() => match change {
                        Ok(change) => matches!(
                            change,
                            Change::Usage { .. } | Change::LocalWork | Change::Budgets | Change::Reset
                        ),
                        Err(RecvError::Lagged(_)) => true,
                        Err(RecvError::Closed) => return,
                    },
                    _ = now_and_then.tick() => true,
                };
                if !relevant {
                    continue;
                }
                // A burst of usage (a sync's catch-up, a log pass) is looked at once.
                tokio::time::sleep(Duration::from_millis(50)).await;
                while changes.try_recv().is_ok() {}
                keep(&core).await;
            }
        });
        BudgetWatch { task, told }
    }
}

/// Keeps the budgets while it lives ([`Core::watch_budgets`]).
#[derive(Debug)]
pub struct BudgetWatch {
    task: tokio::task::JoinHandle<()>,
    told: tokio::sync::broadcast::Sender<BudgetAlert>,
}

impl BudgetWatch {
    /// What keeping the budgets does from now on (a warning, a pause), to tell the person.
    pub fn alerts(&self) -> tokio::sync::broadcast::Receiver<BudgetAlert> {
        self.told.subscribe()
    }
}

impl Drop for BudgetWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEC_2_2026_NOON: i64 = 1_796_212_800_000;

    /// The window's in-memory backend takes from here (`ui/src/backend/fixtures/budgets.json`)
    /// which budgets are kept and as what, where a period starts and what a share is.
    #[test]
    fn the_uis_budget_verdicts_are_the_cores_own() {
        let me = "dana";
        let asked = |scope: &str, name: &str, period: &str, usd: f64| Budget {
            scope: crate::wire(scope),
            name: name.to_owned(),
            period: crate::wire(period),
            usd,
        };
        let long_team = "t".repeat(65);
        let budgets = [
            asked("agent", "helper", "day", 5.0),
            asked("agent", " helper ", "week", 5.0),
            asked("agent", "dana/helper", "day", 7.5),
            asked("agent", "sam/security", "month", 12.5),
            asked("agent", "helper", "day", 0.0),
            asked("agent", "helper", "day", -1.0),
            asked("agent", "helper", "day", MAX_USD),
            asked("agent", "helper", "day", MAX_USD + 1.0),
            asked("agent", "Bad Name!", "day", 5.0),
            asked("agent", "dana/", "day", 5.0),
            asked("agent", "a/b/c", "day", 5.0),
            asked("agent", "", "day", 5.0),
            asked("person", "sam", "week", 20.0),
            asked("person", "not/a person", "day", 5.0),
            asked("person", "dana/helper", "day", 5.0),
            asked("person", "Sam", "day", 5.0),
            asked("person", "  ", "day", 5.0),
            asked("team", "core", "month", 200.0),
            asked("team", "Core Team", "month", 200.0),
            asked("team", &long_team, "month", 200.0),
            asked("team", "", "month", 200.0),
        ];
        let cases: Vec<_> = budgets
            .into_iter()
            .map(|budget| {
                serde_json::json!({
                    "budget": budget.clone(),
                    "outcome": crate::ui_outcome(budget_to_keep(budget, me)),
                })
            })
            .collect();
        // Noon on a Wednesday, a Monday's first millisecond, a Sunday's last, a new year's day.
        let moments = [
            DEC_2_2026_NOON,
            1_795_996_800_000,
            1_796_601_599_999,
            1_798_761_600_000,
        ];
        let periods: Vec<_> = moments
            .into_iter()
            .map(|now_ms| {
                serde_json::json!({
                    "now_ms": now_ms,
                    "day": BudgetPeriod::Day.start_day(now_ms),
                    "week": BudgetPeriod::Week.start_day(now_ms),
                    "month": BudgetPeriod::Month.start_day(now_ms),
                })
            })
            .collect();
        let levels: Vec<_> = [0.0, 0.5, 0.79, WARN_AT, 0.99, 1.0, 1.5]
            .into_iter()
            .map(|share| serde_json::json!({ "share": share, "level": BudgetLevel::of(share) }))
            .collect();
        crate::keep_ui_fixture(
            "budgets.json",
            &serde_json::json!({
                "me": me,
                "cases": cases,
                "periods": periods,
                "levels": levels,
            }),
            "budget_verdicts",
        );
    }

    fn row(day: &str, agent: &str, person: &str, teams: &[&str], cost: f64) -> CostRow {
        CostRow {
            room: Some("r_1".into()),
            day: day.into(),
            agent: agent.into(),
            person: person.into(),
            teams: teams.iter().map(|team| team.to_string()).collect(),
            model: "claude-sonnet-4-5".into(),
            input: 0,
            output: 0,
            cache_write: 0,
            cache_read: 0,
            cost_usd: cost,
            unpriced_entries: 0,
            unpriced_models: Vec::new(),
            local_entries: 0,
            latest_ms: 0,
            unverified_usd: 0.0,
        }
    }

    fn budget(scope: BudgetScope, name: &str, period: BudgetPeriod, usd: f64) -> Budget {
        Budget {
            scope,
            name: name.into(),
            period,
            usd,
        }
    }

    #[test]
    fn dollars_are_read_to_the_cent_or_finer_when_it_matters() {
        assert_eq!(dollars(5.0), "$5.00");
        assert_eq!(dollars(0.02), "$0.02");
        assert_eq!(dollars(0.022), "$0.022");
        assert_eq!(dollars(0.0125), "$0.0125");
        assert_eq!(dollars(1234.5), "$1234.50");
        assert_eq!(dollars(0.0), "$0.00");
    }

    #[test]
    fn periods_begin_on_the_utc_day_the_monday_and_the_first() {
        assert_eq!(
            roundtable_protocol::ts::format_millis(DEC_2_2026_NOON),
            "2026-12-02T12:00:00.000Z"
        );
        assert_eq!(BudgetPeriod::Day.start_day(DEC_2_2026_NOON), "2026-12-02");
        // Wednesday 2 December: the week began on Monday 30 November, in another month.
        assert_eq!(BudgetPeriod::Week.start_day(DEC_2_2026_NOON), "2026-11-30");
        assert_eq!(BudgetPeriod::Month.start_day(DEC_2_2026_NOON), "2026-12-01");
        // A Monday's week is its own; a Sunday's began six days before.
        let monday = DEC_2_2026_NOON - 2 * 86_400_000;
        assert_eq!(BudgetPeriod::Week.start_day(monday), "2026-11-30");
        let sunday = DEC_2_2026_NOON + 4 * 86_400_000;
        assert_eq!(BudgetPeriod::Week.start_day(sunday), "2026-11-30");
        assert_eq!(
            BudgetPeriod::Week.start_day(sunday + 86_400_000),
            "2026-12-07"
        );
        assert_eq!(BudgetPeriod::Day.start_day(0), "1970-01-01");
    }

    #[test]
    fn spend_counts_the_periods_rows_of_the_budgets_scope() {
        let rows = [
            row("2026-12-02", "dana/writer", "dana", &["core"], 3.0),
            row("2026-12-02", "dana/reviewer", "dana", &["core"], 1.0),
            row("2026-12-01", "dana/writer", "dana", &["core"], 10.0),
            row("2026-11-30", "sam/bot", "sam", &["core"], 2.0),
            row("2026-11-29", "dana/writer", "dana", &["core"], 100.0),
        ];
        let budgets = [
            budget(BudgetScope::Agent, "dana/writer", BudgetPeriod::Day, 5.0),
            budget(BudgetScope::Agent, "dana/writer", BudgetPeriod::Week, 20.0),
            budget(BudgetScope::Person, "dana", BudgetPeriod::Month, 10.0),
            budget(BudgetScope::Team, "core", BudgetPeriod::Week, 1000.0),
        ];
        let states = budget_states(&budgets, &rows, DEC_2_2026_NOON);
        let figures: Vec<(f64, BudgetLevel)> = states
            .iter()
            .map(|state| (state.spent_usd, state.level))
            .collect();
        assert_eq!(
            figures,
            [
                (3.0, BudgetLevel::Under),
                (13.0, BudgetLevel::Under),
                (14.0, BudgetLevel::Reached),
                (16.0, BudgetLevel::Under),
            ]
        );
        assert_eq!(states[2].agents, ["dana/writer", "dana/reviewer"]);
        assert_eq!(
            states[3].agents,
            ["dana/writer", "sam/bot", "dana/reviewer"]
        );
        let near = budget_states(
            &[budget(
                BudgetScope::Agent,
                "dana/writer",
                BudgetPeriod::Day,
                3.75,
            )],
            &rows,
            DEC_2_2026_NOON,
        );
        assert_eq!((near[0].level, near[0].share), (BudgetLevel::Near, 0.8));
    }

    #[test]
    fn a_reached_budget_pauses_each_of_my_agents_once_and_warns_once() {
        let rows = [
            row("2026-12-02", "dana/writer", "dana", &["core"], 4.0),
            row("2026-12-02", "sam/bot", "sam", &["core"], 4.0),
        ];
        let team = budget(BudgetScope::Team, "core", BudgetPeriod::Day, 8.0);
        let states = budget_states(std::slice::from_ref(&team), &rows, DEC_2_2026_NOON);
        let due = actions_due(&states, "dana", &BTreeSet::new());
        let what: Vec<(BudgetLevel, Option<&str>)> = due
            .iter()
            .map(|action| (action.level, action.agent.as_deref()))
            .collect();
        // Sam's agent is Sam's to pause: only Dana's is.
        assert_eq!(
            what,
            [
                (BudgetLevel::Near, None),
                (BudgetLevel::Reached, Some("dana/writer"))
            ]
        );
        assert!(
            due[1]
                .text
                .starts_with("budget reached: team core's $8.00 a day ($8.00 spent"),
            "{}",
            due[1].text
        );
        let done: BTreeSet<ActionKey> = due.iter().map(BudgetAction::key).collect();
        assert!(actions_due(&states, "dana", &done).is_empty());

        // A new agent of mine spending once it is reached is paused too.
        let more = [
            rows[0].clone(),
            rows[1].clone(),
            row("2026-12-02", "dana/reviewer", "dana", &["core"], 0.5),
        ];
        let states = budget_states(std::slice::from_ref(&team), &more, DEC_2_2026_NOON);
        let again = actions_due(&states, "dana", &done);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].agent.as_deref(), Some("dana/reviewer"));

        // The next day is a new period.
        let tomorrow = DEC_2_2026_NOON + 86_400_000;
        let rows_tomorrow = [row("2026-12-03", "dana/writer", "dana", &["core"], 9.0)];
        let states = budget_states(&[team], &rows_tomorrow, tomorrow);
        assert_eq!(actions_due(&states, "dana", &done).len(), 2);
    }

    #[test]
    fn a_reached_budget_with_nothing_of_mine_to_pause_is_said_once() {
        let rows = [row("2026-12-02", "sam/bot", "sam", &[], 6.0)];
        let states = budget_states(
            &[budget(
                BudgetScope::Agent,
                "sam/bot",
                BudgetPeriod::Day,
                5.0,
            )],
            &rows,
            DEC_2_2026_NOON,
        );
        let due = actions_due(&states, "dana", &BTreeSet::new());
        assert_eq!(due.len(), 2);
        assert_eq!(
            (due[1].level, due[1].agent.as_deref()),
            (BudgetLevel::Reached, None)
        );
        assert!(
            due[1].text.contains("nothing was paused"),
            "{}",
            due[1].text
        );
    }

    /// The costs board's rows of Dana's cache, in which Sam's agent reported `model` usage of
    /// a thousand tokens at an absurd cost, and Dana's writer a little real spend.
    fn rows_with_sams_report(model: &str) -> Vec<CostRow> {
        use crate::cache::{Cache, PrincipalRow};
        use crate::work::boards::{COST_GROUPING, cost_rows_from};
        use crate::work::figures::{Teams, figures};
        use roundtable_protocol::server::Event;
        let dir = tempfile::tempdir().unwrap();
        let mut cache = Cache::open(&dir.path().join("cache.db"), DEC_2_2026_NOON).unwrap();
        cache.set_meta("principal", "u_dana").unwrap();
        let principal = |id: &str, kind: &str, handle: &str, owner: Option<&str>| PrincipalRow {
            id: id.into(),
            kind: kind.into(),
            handle: handle.into(),
            name: handle.into(),
            owner: owner.map(str::to_owned),
        };
        cache
            .remember_principals([
                principal("u_dana", "user", "dana", None),
                principal("u_sam", "user", "sam", None),
                principal("a_writer", "agent", "dana/writer", Some("u_dana")),
                principal("a_bot", "agent", "sam/bot", Some("u_sam")),
            ])
            .unwrap();
        let at = roundtable_protocol::ts::format_millis(DEC_2_2026_NOON - 3_600_000);
        let usage = |seq: u64, agent: &str, model: &str, cost: f64| Event {
            room: Some("r_core".into()),
            stream: None,
            seq,
            id: format!("e{seq}"),
            ts: at.clone(),
            from: agent.into(),
            kind: "usage".into(),
            body: serde_json::json!({
                "session": {"agent": agent, "framework": "claude-code", "session_id": format!("s{seq}")},
                "model": model, "input": 1000, "output": 100, "cache_write": 0, "cache_read": 0,
                "cost_usd": cost, "from": at, "to": at,
            }),
            client_key: None,
        };
        cache
            .apply(
                "u_dana",
                "r_core",
                &[
                    usage(1, "a_writer", "claude-sonnet-4-5", 0.004),
                    usage(2, "a_bot", model, 1_000_000.0),
                ],
                Some(2),
            )
            .unwrap();
        let teams = Teams {
            teams: [("core".to_owned(), vec!["dana".to_owned(), "sam".to_owned()])].into(),
        };
        let figures = figures(
            &cache,
            &COST_GROUPING,
            &crate::cache::UsageQuery::default(),
            &teams,
            &|_, _| None,
            &Pricing::built_in(),
            "dana",
        )
        .unwrap();
        cost_rows_from(figures, &teams)
    }

    #[test]
    fn a_teammates_absurd_cost_for_a_model_priced_here_counts_at_what_its_tokens_cost() {
        let rows = rows_with_sams_report("claude-sonnet-4-5");
        let team = budget(BudgetScope::Team, "core", BudgetPeriod::Day, 1.0);
        let states = budget_states(std::slice::from_ref(&team), &rows, DEC_2_2026_NOON);
        // A thousand input and a hundred output tokens of Sonnet 4.5 cost cents at most.
        assert!(states[0].spent_usd < 0.02, "{states:?}");
        assert_eq!(states[0].level, BudgetLevel::Under);
        assert!(actions_due(&states, "dana", &BTreeSet::new()).is_empty());
    }

    #[test]
    fn a_teammates_cost_for_a_model_unpriced_here_warns_but_never_pauses() {
        let rows = rows_with_sams_report("homegrown-9");
        let team = budget(BudgetScope::Team, "core", BudgetPeriod::Day, 1.0);
        let states = budget_states(std::slice::from_ref(&team), &rows, DEC_2_2026_NOON);
        // Shown as spent: the person sees what Sam's agent reported.
        assert_eq!(states[0].level, BudgetLevel::Reached);
        let due = actions_due(&states, "dana", &BTreeSet::new());
        assert!(
            due.iter().all(|action| action.agent.is_none()),
            "nothing of Dana's is paused on Sam's word alone: {due:?}"
        );
        let reached = due
            .iter()
            .find(|action| action.level == BudgetLevel::Reached)
            .unwrap_or_else(|| panic!("the person is told: {due:?}"));
        // Whose figure it is, and that it paused nothing.
        assert!(reached.text.contains("sam"), "{}", reached.text);
        assert!(reached.text.contains("homegrown-9"), "{}", reached.text);
        assert!(
            reached.text.contains("nothing was paused"),
            "{}",
            reached.text
        );
    }

    #[test]
    fn budgets_are_checked_with_what_to_write_instead() {
        let bad = [
            budget(BudgetScope::Agent, "dana/writer", BudgetPeriod::Day, 0.0),
            budget(BudgetScope::Agent, "dana/writer", BudgetPeriod::Day, -1.0),
            budget(
                BudgetScope::Agent,
                "dana/writer",
                BudgetPeriod::Day,
                f64::NAN,
            ),
            budget(BudgetScope::Agent, "dana/writer", BudgetPeriod::Day, 2e6),
            budget(BudgetScope::Agent, "writer", BudgetPeriod::Day, 5.0),
            budget(BudgetScope::Agent, "Dana /writer", BudgetPeriod::Day, 5.0),
            budget(BudgetScope::Person, "dana/writer", BudgetPeriod::Day, 5.0),
            budget(BudgetScope::Team, " ", BudgetPeriod::Day, 5.0),
            budget(BudgetScope::Team, "a\u{7}", BudgetPeriod::Day, 5.0),
        ];
        for budget in bad {
            let error = check_budget(&budget).unwrap_err();
            assert!(
                matches!(error, CoreError::Invalid(_)),
                "{budget:?}: {error}"
            );
        }
        for good in [
            budget(BudgetScope::Agent, "dana/writer", BudgetPeriod::Day, 5.0),
            budget(BudgetScope::Person, "dana", BudgetPeriod::Week, 0.01),
            budget(BudgetScope::Team, "core team", BudgetPeriod::Month, 1e6),
        ] {
            check_budget(&good).unwrap();
        }
    }
}
