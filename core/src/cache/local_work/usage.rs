//! Usage from the logs, stored once per request: a request reported again (streamed, or
//! copied into a side chain) adds only what it adds beyond what was stored.

use super::*;

/// Adds usage to the per-(session, model) deltas of a read.
pub(super) fn add_delta(
    deltas: &mut BTreeMap<(String, String), UsageDelta>,
    framework: Framework,
    session_id: &str,
    model: &str,
    added: Added,
    at_ms: Option<i64>,
) {
    if added.tokens.total() == 0 && added.cost_usd.is_none_or(|cost| cost == 0.0) {
        return;
    }
    let delta = deltas
        .entry((session_id.to_owned(), model.to_owned()))
        .or_insert_with(|| UsageDelta {
            framework,
            session_id: session_id.to_owned(),
            model: model.to_owned(),
            tokens: TokenCounts::default(),
            cost_usd: Some(0.0),
            first_ms: at_ms,
            last_ms: at_ms,
        });
    delta.tokens.add(&added.tokens);
    delta.cost_usd = delta.cost_usd.zip(added.cost_usd).map(|(a, b)| a + b);
    if let Some(at) = at_ms {
        delta.first_ms = Some(delta.first_ms.map_or(at, |first| first.min(at)));
        delta.last_ms = Some(delta.last_ms.map_or(at, |last| last.max(at)));
    }
}

/// What storing a report of a request added: tokens, and what they cost (`None`: unpriced).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Added {
    pub(super) tokens: TokenCounts,
    pub(super) cost_usd: Option<f64>,
}

impl Added {
    const NOTHING: Added = Added {
        tokens: TokenCounts {
            input: 0,
            output: 0,
            cache_write_5m: 0,
            cache_write_1h: 0,
            cache_read: 0,
        },
        cost_usd: Some(0.0),
    };
}

pub(super) fn billing_text(billing: &Billing) -> Option<String> {
    (!billing.is_standard()).then(|| serde_json::to_string(billing).expect("billing serializes"))
}

pub(super) fn billing_of(text: Option<String>) -> Billing {
    text.and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// One report of a request as stored.
pub(super) struct Stored {
    pub(super) request_id: String,
    pub(super) sidechain: bool,
    pub(super) tokens: TokenCounts,
    pub(super) billing: Billing,
}

/// One report of a request, de-duplicated as [`crate::work::summary`] does: the largest
/// report of a request counts; a side chain's copy of a main chain's request does not.
/// Returns what it added, priced by `price` (the cost of one whole request).
#[allow(clippy::too_many_arguments)]
pub(super) fn store_usage(
    tx: &rusqlite::Transaction<'_>,
    framework: &str,
    session_id: &str,
    message_id: &str,
    request_id: &str,
    sidechain: bool,
    model: &str,
    tokens: &TokenCounts,
    billing: &Billing,
    at_ms: Option<i64>,
    price: &dyn Fn(&str, &TokenCounts, &Billing) -> Option<f64>,
) -> Result<Added, CacheError> {
    let reports: Vec<Stored> = tx
        .prepare_cached(
            "SELECT request_id, sidechain, input, output, cache_write_5m, cache_write_1h,
                    cache_read, billing
             FROM local_usage WHERE framework = ?1 AND session_id = ?2 AND message_id = ?3",
        )?
        .query_map(params![framework, session_id, message_id], |row| {
            Ok(Stored {
                request_id: row.get(0)?,
                sidechain: row.get::<_, bool>(1)?,
                tokens: counts(row, 2)?,
                billing: billing_of(row.get(7)?),
            })
        })?
        .collect::<Result<_, _>>()?;
    let insert = |tx: &rusqlite::Transaction<'_>| -> Result<(), CacheError> {
        tx.prepare_cached(
            "INSERT INTO local_usage (framework, session_id, message_id, request_id, sidechain, model,
                 input, output, cache_write_5m, cache_write_1h, cache_read, at_ms, billing)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
             ON CONFLICT (framework, session_id, message_id, request_id) DO UPDATE SET
                 sidechain = excluded.sidechain, model = excluded.model, input = excluded.input,
                 output = excluded.output, cache_write_5m = excluded.cache_write_5m,
                 cache_write_1h = excluded.cache_write_1h, cache_read = excluded.cache_read,
                 at_ms = excluded.at_ms, billing = excluded.billing",
        )?
        .execute(params![
            framework,
            session_id,
            message_id,
            request_id,
            sidechain,
            model,
            tokens.input as i64,
            tokens.output as i64,
            tokens.cache_write_5m as i64,
            tokens.cache_write_1h as i64,
            tokens.cache_read as i64,
            at_ms,
            billing_text(billing)
        ])?;
        Ok(())
    };
    let delete = |tx: &rusqlite::Transaction<'_>, request_id: &str| -> Result<(), CacheError> {
        tx.execute(
            "DELETE FROM local_usage WHERE framework = ?1 AND session_id = ?2 AND message_id = ?3
                 AND request_id = ?4",
            params![framework, session_id, message_id, request_id],
        )?;
        Ok(())
    };
    // What replacing `old` reports by this one adds.
    let replacing = |old: &[&Stored]| -> Added {
        let mut removed = TokenCounts::default();
        let mut cost = price(model, tokens, billing);
        for report in old {
            removed.add(&report.tokens);
            cost = cost
                .zip(price(model, &report.tokens, &report.billing))
                .map(|(new, old)| new - old);
        }
        Added {
            tokens: minus(tokens, &removed),
            cost_usd: cost,
        }
    };
    if let Some(same) = reports
        .iter()
        .find(|report| report.request_id == request_id)
    {
        if tokens.total() <= same.tokens.total() {
            return Ok(Added::NOTHING);
        }
        insert(tx)?;
        return Ok(replacing(&[same]));
    }
    if reports.is_empty() {
        insert(tx)?;
        return Ok(replacing(&[]));
    }
    let main_present = reports.iter().any(|report| !report.sidechain);
    if sidechain && main_present {
        return Ok(Added::NOTHING);
    }
    if sidechain {
        // Only side chains' copies so far: one counts, the largest.
        let kept = &reports[0];
        if tokens.total() <= kept.tokens.total() {
            return Ok(Added::NOTHING);
        }
        delete(tx, &kept.request_id)?;
        insert(tx)?;
        return Ok(replacing(&[kept]));
    }
    // A main-chain report arrives after side-chain copies: they go.
    let side: Vec<&Stored> = reports.iter().filter(|report| report.sidechain).collect();
    for report in &side {
        delete(tx, &report.request_id)?;
    }
    insert(tx)?;
    Ok(replacing(&side))
}
