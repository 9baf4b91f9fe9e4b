//! What tokens cost. Prices are data (`core/data/pricing.toml`, embedded), which a person
//! overrides or extends with a file of their own; a model with no price is *unpriced*, and
//! every figure says so rather than counting it as free.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::events::TokenCounts;

/// The prices that ship with Roundtable.
pub const BUILT_IN: &str = include_str!("../../data/pricing.toml");

/// Past this many tokens of one kind in one request, the `above_200k` prices apply.
const TIER: u64 = 200_000;

/// One model's prices, in dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_write_5m: Option<f64>,
    #[serde(default)]
    pub cache_write_1h: Option<f64>,
    #[serde(default)]
    pub cache_read: Option<f64>,
    #[serde(default)]
    pub above_200k_input: Option<f64>,
    #[serde(default)]
    pub above_200k_output: Option<f64>,
    #[serde(default)]
    pub above_200k_cache_write_5m: Option<f64>,
    #[serde(default)]
    pub above_200k_cache_write_1h: Option<f64>,
    #[serde(default)]
    pub above_200k_cache_read: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct PriceFile {
    #[serde(default)]
    models: BTreeMap<String, ModelPrice>,
}

/// Why a price file was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "the price file {path} is not valid: {detail}; fix it (see core/data/pricing.toml for the form)"
)]
pub struct PricingError {
    pub path: String,
    pub detail: String,
}

/// The prices in force.
#[derive(Debug, Clone, PartialEq)]
pub struct Pricing {
    /// By normalized name (`.` and `@` as `-`, lower case).
    models: BTreeMap<String, ModelPrice>,
}

fn normalize(name: &str) -> String {
    name.trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c == '.' || c == '@' { '-' } else { c })
        .collect()
}

/// Charges `tokens` at `base` per million, the part past the tier at `above` when given.
fn charge(tokens: u64, base: f64, above: Option<f64>) -> f64 {
    match above {
        Some(above) if tokens > TIER => {
            (TIER as f64 * base + (tokens - TIER) as f64 * above) / 1_000_000.0
        }
        _ => tokens as f64 * base / 1_000_000.0,
    }
}

impl ModelPrice {
    /// The cost of one request's tokens.
    pub fn cost(&self, tokens: &TokenCounts) -> f64 {
        let write_5m = self.cache_write_5m.unwrap_or(self.input);
        let write_1h = self.cache_write_1h.unwrap_or(write_5m);
        let read = self.cache_read.unwrap_or(self.input);
        charge(tokens.input, self.input, self.above_200k_input)
            + charge(tokens.output, self.output, self.above_200k_output)
            + charge(
                tokens.cache_write_5m,
                write_5m,
                self.above_200k_cache_write_5m,
            )
            + charge(
                tokens.cache_write_1h,
                write_1h,
                self.above_200k_cache_write_1h,
            )
            + charge(tokens.cache_read, read, self.above_200k_cache_read)
    }
}

impl Pricing {
    /// The built-in prices.
    pub fn built_in() -> Pricing {
        Pricing::parse(BUILT_IN, Path::new("core/data/pricing.toml"))
            .expect("the built-in prices parse")
    }

    /// Prices from a file's text.
    pub fn parse(text: &str, path: &Path) -> Result<Pricing, PricingError> {
        let file: PriceFile = toml::from_str(text).map_err(|error| PricingError {
            path: path.display().to_string(),
            detail: error.to_string(),
        })?;
        for (name, price) in &file.models {
            let all = [
                Some(price.input),
                Some(price.output),
                price.cache_write_5m,
                price.cache_write_1h,
                price.cache_read,
                price.above_200k_input,
                price.above_200k_output,
                price.above_200k_cache_write_5m,
                price.above_200k_cache_write_1h,
                price.above_200k_cache_read,
            ];
            if all.into_iter().flatten().any(|p| !p.is_finite() || p < 0.0) {
                return Err(PricingError {
                    path: path.display().to_string(),
                    detail: format!("{name}: prices are non-negative numbers"),
                });
            }
        }
        Ok(Pricing {
            models: file
                .models
                .into_iter()
                .map(|(name, price)| (normalize(&name), price))
                .collect(),
        })
    }

    /// The built-in prices with the person's own over them (from the first of `paths` that
    /// exists; a model they list replaces the built-in one).
    pub fn with_overrides(paths: &[PathBuf]) -> Result<Pricing, PricingError> {
        let mut pricing = Pricing::built_in();
        for path in paths {
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            let theirs = Pricing::parse(&text, path)?;
            pricing.models.extend(theirs.models);
            break;
        }
        Ok(pricing)
    }

    /// Where a person's price file may be.
    pub fn override_paths() -> Vec<PathBuf> {
        let mut paths = Vec::new();
        if let Some(home) = std::env::var_os("ROUNDTABLE_HOME") {
            paths.push(PathBuf::from(home).join("pricing.toml"));
        }
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")));
        if let Some(config) = config {
            paths.push(config.join("roundtable").join("pricing.toml"));
        }
        paths
    }

    /// The price of `model`: the longest known name that is the model's name or a part of it
    /// between dashes.
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        let name = normalize(model);
        if let Some(price) = self.models.get(&name) {
            return Some(price);
        }
        self.models
            .iter()
            .filter(|(key, _)| contains_between_dashes(&name, key))
            .max_by_key(|(key, _)| key.len())
            .map(|(_, price)| price)
    }

    /// The cost of one request's tokens, or `None` when the model is unpriced.
    pub fn cost(&self, model: &str, tokens: &TokenCounts) -> Option<f64> {
        self.price(model).map(|price| price.cost(tokens))
    }
}

/// Prices looked up once per model name, for loops over many requests.
#[derive(Debug)]
pub struct PriceMemo<'a> {
    pricing: &'a Pricing,
    known: std::collections::HashMap<String, Option<&'a ModelPrice>>,
}

impl<'a> PriceMemo<'a> {
    pub fn new(pricing: &'a Pricing) -> PriceMemo<'a> {
        PriceMemo {
            pricing,
            known: std::collections::HashMap::new(),
        }
    }

    pub fn price(&mut self, model: &str) -> Option<&'a ModelPrice> {
        if let Some(price) = self.known.get(model) {
            return *price;
        }
        let price = self.pricing.price(model);
        self.known.insert(model.to_owned(), price);
        price
    }

    /// The cost of one request's tokens, or `None` when the model is unpriced.
    pub fn cost(&mut self, model: &str, tokens: &TokenCounts) -> Option<f64> {
        self.price(model).map(|price| price.cost(tokens))
    }
}

/// Whether `part` occurs in `name` starting and ending at a dash or an end.
fn contains_between_dashes(name: &str, part: &str) -> bool {
    name.match_indices(part).any(|(start, _)| {
        let end = start + part.len();
        (start == 0 || name.as_bytes()[start - 1] == b'-')
            && (end == name.len() || name.as_bytes()[end] == b'-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: u64, output: u64, w5: u64, w1h: u64, read: u64) -> TokenCounts {
        TokenCounts {
            input,
            output,
            cache_write_5m: w5,
            cache_write_1h: w1h,
            cache_read: read,
        }
    }

    #[test]
    fn models_match_their_longest_known_name() {
        let pricing = Pricing::built_in();
        let sonnet_45 = pricing.price("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(sonnet_45, pricing.price("claude-sonnet-4-5").unwrap());
        assert_eq!(
            pricing.price("claude-sonnet-4-20250514").unwrap().input,
            3.0
        );
        assert_eq!(pricing.price("gpt-5.3-codex").unwrap().output, 14.0);
        assert_eq!(
            pricing.price("GPT-5@2").map(|p| p.input),
            pricing.price("gpt-5.2").map(|p| p.input)
        );
        // A part inside a word does not match: "claude-opus-4" is not in "claude-opus-40".
        assert!(pricing.price("claude-opus-40").is_none());
        assert!(pricing.price("some-new-model").is_none());
        assert!(
            pricing
                .cost("some-new-model", &tokens(1, 1, 0, 0, 0))
                .is_none()
        );
    }

    #[test]
    fn costs_agree_with_ccusage_on_real_sessions() {
        let pricing = Pricing::built_in();
        // ccusage 20.0.24 on the public fixture sessions (see tests/e2e/work.rs), whose
        // requests each stay under the 200k tier: here, three of them.
        let sniffly = pricing
            .cost(
                "claude-sonnet-4-20250514",
                &tokens(91, 2266, 16072, 0, 167_923),
            )
            .unwrap()
            + 2.0
                * pricing
                    .cost("claude-sonnet-4-20250514", &tokens(0, 0, 0, 0, 167_923))
                    .unwrap();
        assert!((sniffly - 0.2456637).abs() < 1e-9, "{sniffly}");
        let opus_1h = pricing
            .cost("claude-opus-4-6", &tokens(54, 212, 0, 17696, 88231))
            .unwrap();
        assert!((opus_1h - 0.2266455).abs() < 1e-9, "{opus_1h}");
        let codex = pricing
            .cost("gpt-5.3-codex", &tokens(99460, 14600, 0, 0, 1_651_968))
            .unwrap();
        assert!((codex - 0.6675494).abs() < 1e-9, "{codex}");
    }

    #[test]
    fn requests_past_200k_tokens_pay_the_higher_price_for_the_rest() {
        let pricing = Pricing::built_in();
        let cost = pricing
            .cost("claude-sonnet-4-5", &tokens(250_000, 0, 0, 0, 0))
            .unwrap();
        assert!((cost - (0.6 + 0.3)).abs() < 1e-9, "{cost}");
        // A model without tiers pays its one price.
        let cost = pricing
            .cost("claude-sonnet-4-6", &tokens(250_000, 0, 0, 0, 0))
            .unwrap();
        assert!((cost - 0.75).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn a_persons_file_overrides_and_a_bad_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pricing.toml");
        std::fs::write(
            &path,
            "[models.claude-haiku-4-5]\ninput = 2.0\noutput = 10.0\n[models.in-house-7b]\ninput = 0.1\noutput = 0.1\n",
        )
        .unwrap();
        let pricing = Pricing::with_overrides(std::slice::from_ref(&path)).unwrap();
        assert_eq!(
            pricing.price("claude-haiku-4-5-20251001").unwrap().input,
            2.0
        );
        assert!(pricing.price("in-house-7b").is_some());
        assert!(pricing.price("claude-opus-4-6").is_some(), "the rest stays");
        std::fs::write(&path, "[models.x]\ninput = -1.0\noutput = 1.0\n").unwrap();
        assert!(Pricing::with_overrides(&[path]).is_err());
    }
}
