//! The person's budgets and what keeping them did (see [`crate::budgets`]): kept in the
//! profile's cache, so the app's Settings and `roundtable budget` edit the same ones, and a
//! warning or a pause is done once a period whichever process keeps them.

use std::collections::BTreeSet;

use rusqlite::params;

use super::{Cache, CacheError, CacheView};
use crate::budgets::{ActionKey, Budget, BudgetAlert, BudgetLevel, BudgetPeriod, BudgetScope};

fn level_of(text: &str) -> BudgetLevel {
    match text {
        "reached" => BudgetLevel::Reached,
        "near" => BudgetLevel::Near,
        _ => BudgetLevel::Under,
    }
}

fn corrupt(column: usize, what: &str, text: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        column,
        rusqlite::types::Type::Text,
        format!("unknown budget {what} {text:?}").into(),
    )
}

fn scope_at(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<BudgetScope> {
    let text: String = row.get(column)?;
    BudgetScope::parse(&text).ok_or_else(|| corrupt(column, "scope", &text))
}

fn period_at(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<BudgetPeriod> {
    let text: String = row.get(column)?;
    BudgetPeriod::parse(&text).ok_or_else(|| corrupt(column, "period", &text))
}

impl Cache {
    /// Sets a budget, forgetting what keeping the one it replaces did.
    pub fn set_budget(&mut self, budget: &Budget, now_ms: i64) -> Result<(), CacheError> {
        let tx = self.conn().transaction()?;
        let key = params![budget.scope.as_str(), budget.name, budget.period.as_str()];
        tx.execute(
            "DELETE FROM budget_actions WHERE scope = ?1 AND name = ?2 AND period = ?3",
            key,
        )?;
        tx.execute(
            "INSERT INTO budgets (scope, name, period, usd, set_ms) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (scope, name, period) DO UPDATE SET usd = excluded.usd,
                 set_ms = excluded.set_ms",
            params![
                budget.scope.as_str(),
                budget.name,
                budget.period.as_str(),
                budget.usd,
                now_ms
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Removes a budget and what keeping it did; says whether there was one.
    pub fn remove_budget(
        &mut self,
        scope: BudgetScope,
        name: &str,
        period: BudgetPeriod,
    ) -> Result<bool, CacheError> {
        let tx = self.conn().transaction()?;
        let key = params![scope.as_str(), name, period.as_str()];
        tx.execute(
            "DELETE FROM budget_actions WHERE scope = ?1 AND name = ?2 AND period = ?3",
            key,
        )?;
        let removed = tx.execute(
            "DELETE FROM budgets WHERE scope = ?1 AND name = ?2 AND period = ?3",
            key,
        )?;
        tx.commit()?;
        Ok(removed > 0)
    }

    /// Records an action done; false when it was already (a second record of the same key
    /// is ignored).
    pub fn record_budget_action(&mut self, alert: &BudgetAlert) -> Result<bool, CacheError> {
        let recorded = self.conn().execute(
            "INSERT INTO budget_actions (scope, name, period, period_start, level, agent,
                 spent_usd, budget_usd, text, ts_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT DO NOTHING",
            params![
                alert.budget.scope.as_str(),
                alert.budget.name,
                alert.budget.period.as_str(),
                alert.period_start,
                alert.level.as_str(),
                alert.agent.as_deref().unwrap_or(""),
                alert.spent_usd,
                alert.budget.usd,
                alert.text,
                alert.ts_ms
            ],
        )?;
        Ok(recorded == 1)
    }
}

impl CacheView {
    /// The budgets, by scope, name and period.
    pub fn budgets(&self) -> Result<Vec<Budget>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT scope, name, period, usd FROM budgets ORDER BY scope, name, period",
        )?;
        let budgets = statement
            .query_map([], |row| {
                Ok(Budget {
                    scope: scope_at(row, 0)?,
                    name: row.get(1)?,
                    period: period_at(row, 2)?,
                    usd: row.get(3)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(budgets)
    }

    /// The keys of every action done.
    pub fn budget_actions_done(&self) -> Result<BTreeSet<ActionKey>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT scope, name, period, period_start, level, agent FROM budget_actions",
        )?;
        let done = statement
            .query_map([], |row| {
                Ok((
                    scope_at(row, 0)?,
                    row.get(1)?,
                    period_at(row, 2)?,
                    row.get(3)?,
                    level_of(&row.get::<_, String>(4)?),
                    row.get(5)?,
                ))
            })?
            .collect::<Result<_, _>>()?;
        Ok(done)
    }

    /// What keeping each budget did in the period beginning on the day given with it,
    /// newest first.
    pub fn budget_alerts(
        &self,
        periods: &[(Budget, String)],
    ) -> Result<Vec<BudgetAlert>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT level, agent, spent_usd, text, ts_ms FROM budget_actions
             WHERE scope = ?1 AND name = ?2 AND period = ?3 AND period_start = ?4",
        )?;
        let mut alerts = Vec::new();
        for (budget, start) in periods {
            let rows = statement.query_map(
                params![
                    budget.scope.as_str(),
                    budget.name,
                    budget.period.as_str(),
                    start
                ],
                |row| {
                    let agent: String = row.get(1)?;
                    Ok(BudgetAlert {
                        budget: budget.clone(),
                        period_start: start.clone(),
                        level: level_of(&row.get::<_, String>(0)?),
                        agent: (!agent.is_empty()).then_some(agent),
                        spent_usd: row.get(2)?,
                        text: row.get(3)?,
                        ts_ms: row.get(4)?,
                    })
                },
            )?;
            for alert in rows {
                alerts.push(alert?);
            }
        }
        alerts.sort_by_key(|alert| std::cmp::Reverse(alert.ts_ms));
        Ok(alerts)
    }
}
