//! The costs board: figures at their finest (session, model, day, room, team), for a view
//! to group as the person asks.

use super::*;

/// Figures at their finest: one row per room, day, agent, person and model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct CostRow {
    /// A room id; none for sessions of this machine no onboarded agent publishes.
    pub room: Option<String>,
    /// The UTC day (`2026-11-30`).
    pub day: String,
    /// The agent's handle, or `(local claude-code)` for a session of no onboarded agent.
    pub agent: String,
    pub person: String,
    /// The person's teams (from `teams.toml`); empty when in none.
    pub teams: Vec<String>,
    pub model: String,
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    /// Priced entries only.
    pub cost_usd: f64,
    /// Entries of models without a price: their tokens count, their cost is unknown.
    pub unpriced_entries: u64,
    pub unpriced_models: Vec<String>,
    /// Entries read from this machine's logs (not from a room).
    pub local_entries: u64,
    /// When the newest entry of the row was reported.
    pub latest_ms: i64,
    /// Of `cost_usd`, what another person reported for a model this machine has no price
    /// for: their word alone, which a budget warns on but never pauses on.
    #[serde(skip)]
    pub unverified_usd: f64,
}

/// The costs board.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct CostBoard {
    /// The person (by handle): rows of others are what teammates shared.
    pub me: String,
    /// Usage that ended at or after this, if the board is for a period.
    pub since_ms: Option<i64>,
    pub rows: Vec<CostRow>,
}

/// The groupings of [`CostRow`].
pub const COST_GROUPING: [Grouping; 5] = [
    Grouping::Room,
    Grouping::Day,
    Grouping::Agent,
    Grouping::Person,
    Grouping::Model,
];

/// Rows of figures grouped by [`COST_GROUPING`]. Pure.
pub fn cost_rows_from(figures: Vec<Figure>, teams: &Teams) -> Vec<CostRow> {
    figures
        .into_iter()
        .map(|figure| {
            let value = |key: Grouping| figure.group.get(&key).cloned().unwrap_or_default();
            let person = value(Grouping::Person);
            CostRow {
                room: Some(value(Grouping::Room))
                    .filter(|room| room != crate::work::figures::THIS_MACHINE),
                day: value(Grouping::Day),
                agent: value(Grouping::Agent),
                teams: teams.of(&person),
                person,
                model: value(Grouping::Model),
                input: figure.input,
                output: figure.output,
                cache_write: figure.cache_write,
                cache_read: figure.cache_read,
                cost_usd: figure.cost_usd,
                unpriced_entries: figure.unpriced_entries,
                unpriced_models: figure.unpriced_models,
                local_entries: figure.local_entries,
                latest_ms: figure.latest_ms,
                unverified_usd: figure.unverified_usd,
            }
        })
        .collect()
}

impl Core {
    /// The costs board: figures at their finest since `since_ms`, at `pricing`.
    pub async fn cost_board(
        &self,
        since_ms: Option<i64>,
        pricing: Pricing,
    ) -> Result<CostBoard, CoreError> {
        let teams = Teams::load(&self.profile().dir)?;
        let query = UsageQuery {
            since_ms,
            ..UsageQuery::default()
        };
        let figures = self
            .usage_figures(COST_GROUPING.to_vec(), query, pricing)
            .await?;
        Ok(CostBoard {
            me: self.profile().handle.clone(),
            since_ms,
            rows: cost_rows_from(figures, &teams),
        })
    }
}
