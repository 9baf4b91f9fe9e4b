//! What tokens cost, as the agent CLIs themselves bill them. Prices are data
//! (`core/data/pricing.toml`, embedded, each row with its source), which a person overrides
//! or extends with a file of their own; a model with no price is *unpriced*, and every
//! figure says so rather than counting it as free.
//!
//! One request is priced whole (AGENT-FORMATS §8, and the CLIs' own cost code):
//! - its rates are the model's, or its fast-mode rates when it ran in fast mode, or its
//!   long-context rates when its prompt (input, cache reads and cache writes together) is
//!   past the model's threshold — then every kind of token of the request, output included,
//!   is charged at the higher rates, never just the part past the threshold;
//! - the token cost is multiplied by the service tier's factor (priority, flex) and by the
//!   region's (`inference_geo`);
//! - web searches are charged each, on top.
//!
//! A model's name in a log matches a price only through suffixes that do not change the
//! model ([`canonical_model`]: a date stamp, `[1m]`, a provider's prefix, Claude's `-fast`);
//! `gpt-5-mini` is not `gpt-5`, and a name with no row is unpriced, never a parent's price.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::log_events::{Billing, TokenCounts};

/// The prices that ship with Roundtable.
pub const BUILT_IN: &str = include_str!("../../data/pricing.toml");

/// Dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rates {
    pub input: f64,
    pub output: f64,
    /// A prompt-cache write kept 5 minutes (default: the input rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_5m: Option<f64>,
    /// A prompt-cache write kept an hour (default: the 5-minute rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
    /// A prompt-cache read (default: the input rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
}

impl Rates {
    /// What `tokens` cost at these rates.
    pub fn charge(&self, tokens: &TokenCounts) -> f64 {
        let write_5m = self.cache_write_5m.unwrap_or(self.input);
        let write_1h = self.cache_write_1h.unwrap_or(write_5m);
        let read = self.cache_read.unwrap_or(self.input);
        (tokens.input as f64 * self.input
            + tokens.output as f64 * self.output
            + tokens.cache_write_5m as f64 * write_5m
            + tokens.cache_write_1h as f64 * write_1h
            + tokens.cache_read as f64 * read)
            / 1_000_000.0
    }

    fn all(&self) -> [Option<f64>; 5] {
        [
            Some(self.input),
            Some(self.output),
            self.cache_write_5m,
            self.cache_write_1h,
            self.cache_read,
        ]
    }
}

/// The rates of a request whose prompt is past `above` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongContext {
    pub above: u64,
    pub input: f64,
    pub output: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_5m: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
}

impl LongContext {
    fn rates(&self) -> Rates {
        Rates {
            input: self.input,
            output: self.output,
            cache_write_5m: self.cache_write_5m,
            cache_write_1h: self.cache_write_1h,
            cache_read: self.cache_read,
        }
    }
}

/// One model's prices, in dollars per million tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Where the prices come from (a catalog and its version, a vendor's page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub input: f64,
    pub output: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_5m: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Rates for a whole request whose prompt is past a threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_context: Option<LongContext>,
    /// Rates in fast mode (Claude's `speed: "fast"`); without them fast mode costs the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast: Option<Rates>,
    /// Factors of the token cost by service tier (`priority`, `flex`); others cost ×1.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tiers: BTreeMap<String, f64>,
    /// Other names of the same model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

impl ModelPrice {
    fn rates(&self) -> Rates {
        Rates {
            input: self.input,
            output: self.output,
            cache_write_5m: self.cache_write_5m,
            cache_write_1h: self.cache_write_1h,
            cache_read: self.cache_read,
        }
    }

    /// The cost of one request: its tokens at the rates that apply to it, its tier's and
    /// region's factors, its web searches.
    pub fn cost(&self, tokens: &TokenCounts, billing: &Billing, rules: &Rules) -> f64 {
        let prompt = tokens.input + tokens.cache_read + tokens.cache_write();
        let rates = match (billing.fast, &self.fast, &self.long_context) {
            (true, Some(fast), _) => *fast,
            (_, _, Some(long)) if prompt > long.above => long.rates(),
            _ => self.rates(),
        };
        let tier = billing
            .service_tier
            .as_deref()
            .map(|tier| if tier == "fast" { "priority" } else { tier })
            .and_then(|tier| self.tiers.get(tier))
            .copied()
            .unwrap_or(1.0);
        let geo = billing
            .geo
            .as_deref()
            .and_then(|geo| rules.geo.get(geo))
            .copied()
            .unwrap_or(1.0);
        rates.charge(tokens) * tier * geo + billing.web_searches as f64 * rules.web_search
    }

    /// The least and the most `tokens` can cost at these prices, however their requests were
    /// billed: at the cheapest and the dearest of the model's rates (standard, long-context,
    /// fast), cache writes kept five minutes or an hour, times the lowest and the highest
    /// tier and region factors (1 among them). Web searches are not in tokens: not counted.
    pub fn cost_range(&self, tokens: &TokenCounts, rules: &Rules) -> (f64, f64) {
        let rates = std::iter::once(self.rates())
            .chain(self.long_context.map(|long| long.rates()))
            .chain(self.fast);
        let written = tokens.cache_write();
        let placed = [
            TokenCounts {
                cache_write_5m: written,
                cache_write_1h: 0,
                ..*tokens
            },
            TokenCounts {
                cache_write_5m: 0,
                cache_write_1h: written,
                ..*tokens
            },
        ];
        let (mut least, mut most) = (f64::INFINITY, 0.0_f64);
        for rates in rates {
            for tokens in &placed {
                let charge = rates.charge(tokens);
                least = least.min(charge);
                most = most.max(charge);
            }
        }
        let factors = |values: &mut dyn Iterator<Item = f64>| {
            values.fold((1.0_f64, 1.0_f64), |(low, high), factor| {
                (low.min(factor), high.max(factor))
            })
        };
        let (tier_low, tier_high) = factors(&mut self.tiers.values().copied());
        let (geo_low, geo_high) = factors(&mut rules.geo.values().copied());
        (least * tier_low * geo_low, most * tier_high * geo_high)
    }

    /// What usage another machine reported costs here: its `reported` cost held within what
    /// its tokens can cost at these prices ([`ModelPrice::cost_range`]), or, with none
    /// reported, its tokens at the standard rates. The reporter's own figure is exact where
    /// this machine cannot be (fast mode, tiers, regions, searches); the range keeps a
    /// figure no tokens could cost (a teammate's `cost_usd` of a million dollars for a
    /// thousand tokens) from counting as spent.
    pub fn shared_cost(&self, tokens: &TokenCounts, reported: Option<f64>, rules: &Rules) -> f64 {
        let (least, most) = self.cost_range(tokens, rules);
        match reported {
            Some(reported) if !reported.is_nan() => reported.clamp(least, most),
            _ => self.cost(tokens, &Billing::default(), rules),
        }
    }
}

/// What holds for every model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Factors of the token cost by the region a request ran in (`inference_geo`).
    #[serde(default)]
    pub geo: BTreeMap<String, f64>,
    /// Dollars per web search a request ran.
    #[serde(default)]
    pub web_search: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    #[serde(default)]
    rules: Option<Rules>,
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
    /// By canonical name ([`canonical_model`]), aliases included.
    models: HashMap<String, ModelPrice>,
    rules: Rules,
}

/// Strips `suffix`-like endings matched by `cut` (the length to keep), once.
fn strip_end(name: &mut String, cut: impl Fn(&str) -> Option<usize>) {
    if let Some(keep) = cut(name) {
        name.truncate(keep);
    }
}

fn all_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// A model's name as prices know it: lower case; without a provider's prefix
/// (`openai/`, `us.anthropic.`), a context-size tag (`[1m]`), Bedrock's version (`-v1:0`),
/// a date stamp (`-20250929`, `@20250929`, `-2025-08-07`), or Claude's `-fast` and
/// `-latest` trailers; with `.` as `-` (`gpt-5.5` is `gpt-5-5`). Nothing else is removed:
/// `-mini`, `-pro`, `-codex`, `-lite` name other models.
pub fn canonical_model(name: &str) -> String {
    let mut name = name.trim().to_ascii_lowercase();
    // A context-size tag: `[1m]`, `[2m]`.
    if name.ends_with(']')
        && let Some(open) = name.rfind('[')
    {
        name.truncate(open);
    }
    if let Some(slash) = name.rfind('/') {
        name = name[slash + 1..].to_owned();
    }
    for region in ["us.", "eu.", "apac.", "jp.", "au.", "us-gov.", "global."] {
        if let Some(rest) = name.strip_prefix(region)
            && rest.starts_with("anthropic.")
        {
            name = rest.to_owned();
        }
    }
    if let Some(rest) = name.strip_prefix("anthropic.") {
        name = rest.to_owned();
    }
    // Bedrock's version of a Claude model: `-v1:0`, `-v1` (other models keep theirs:
    // `deepseek-v3` is no `deepseek`).
    strip_end(&mut name, |name| {
        if !name.starts_with("claude") {
            return None;
        }
        let at = name.rfind("-v")?;
        let version = &name[at + 2..];
        let (major, minor) = version.split_once(':').unwrap_or((version, "1"));
        (all_digits(major) && major.len() <= 3 && all_digits(minor) && !name.contains('@'))
            .then_some(at)
    });
    // Anthropic's date `-20250929`, Vertex's `@20250929` or `-v2@20241022`.
    strip_end(&mut name, |name| {
        let at = name.rfind(['-', '@'])?;
        if name.len() - at != 9 || !all_digits(&name[at + 1..]) {
            return None;
        }
        if name.as_bytes()[at] == b'@'
            && let Some(version) = name[..at].rfind("-v")
            && all_digits(&name[version + 2..at])
        {
            return Some(version);
        }
        Some(at)
    });
    // OpenAI's date: `-2025-08-07`.
    strip_end(&mut name, |name| {
        let at = name.len().checked_sub(11)?;
        let date = name.get(at..)?;
        let bytes = date.as_bytes();
        (bytes[0] == b'-'
            && bytes[5] == b'-'
            && bytes[8] == b'-'
            && all_digits(&date[1..5])
            && all_digits(&date[6..8])
            && all_digits(&date[9..]))
        .then_some(at)
    });
    if name.starts_with("claude-") {
        for trailer in ["-fast", "-latest"] {
            if let Some(rest) = name.strip_suffix(trailer) {
                name = rest.to_owned();
                break;
            }
        }
    }
    name.replace(['.', '@'], "-")
}

impl Pricing {
    /// The built-in prices.
    pub fn built_in() -> Pricing {
        Pricing::parse(BUILT_IN, Path::new("core/data/pricing.toml"))
            .expect("the built-in prices parse")
    }

    /// Prices from a file's text.
    pub fn parse(text: &str, path: &Path) -> Result<Pricing, PricingError> {
        let refuse = |detail: String| PricingError {
            path: path.display().to_string(),
            detail,
        };
        let file: PriceFile = toml::from_str(text).map_err(|error| {
            let mut detail = error.to_string();
            if detail.contains("above_200k") {
                detail.push_str(
                    " (a model's higher rates past a prompt size are now one table: \
                     long_context = { above = 200000, input = …, output = … })",
                );
            }
            refuse(detail)
        })?;
        let mut models = HashMap::new();
        for (name, price) in file.models {
            let rates = price
                .rates()
                .all()
                .into_iter()
                .chain(
                    price
                        .long_context
                        .map(|long| long.rates().all())
                        .into_iter()
                        .flatten(),
                )
                .chain(price.fast.map(|fast| fast.all()).into_iter().flatten())
                .chain(price.tiers.values().copied().map(Some));
            if rates.flatten().any(|rate| !rate.is_finite() || rate < 0.0) {
                return Err(refuse(format!("{name}: prices are non-negative numbers")));
            }
            for alias in &price.aliases {
                models.insert(canonical_model(alias), price.clone());
            }
            models.insert(canonical_model(&name), price);
        }
        let rules = file.rules.unwrap_or_default();
        if rules
            .geo
            .values()
            .chain([&rules.web_search])
            .any(|rate| !rate.is_finite() || *rate < 0.0)
        {
            return Err(refuse(
                "rules: factors and prices are non-negative numbers".into(),
            ));
        }
        Ok(Pricing { models, rules })
    }

    /// The built-in prices with the person's own over them (from the first of `paths` that
    /// exists; a model they list replaces the built-in one, their rules replace the
    /// built-in rules).
    pub fn with_overrides(paths: &[PathBuf]) -> Result<Pricing, PricingError> {
        let mut pricing = Pricing::built_in();
        for path in paths {
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            let theirs = Pricing::parse(&text, path)?;
            pricing.models.extend(theirs.models);
            // However they spell it (`[rules]`, `[rules.geo]`, `rules.web_search = …`).
            let has_rules =
                toml::from_str::<toml::Table>(&text).is_ok_and(|table| table.contains_key("rules"));
            if has_rules {
                pricing.rules = theirs.rules;
            }
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
        if let Some(config) = roundtable_platform::places::config() {
            paths.push(config.join("pricing.toml"));
        }
        paths
    }

    /// The price of `model`, if it has one ([`canonical_model`]).
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        self.models.get(&canonical_model(model))
    }

    /// The rules every model's prices follow.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The cost of one request, or `None` when the model is unpriced.
    pub fn cost(&self, model: &str, tokens: &TokenCounts, billing: &Billing) -> Option<f64> {
        self.price(model)
            .map(|price| price.cost(tokens, billing, &self.rules))
    }
}

/// Prices looked up once per model name, for loops over many requests.
#[derive(Debug)]
pub struct PriceMemo<'a> {
    pricing: &'a Pricing,
    known: HashMap<String, Option<&'a ModelPrice>>,
}

impl<'a> PriceMemo<'a> {
    pub fn new(pricing: &'a Pricing) -> PriceMemo<'a> {
        PriceMemo {
            pricing,
            known: HashMap::new(),
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

    /// The cost of one request, or `None` when the model is unpriced.
    pub fn cost(&mut self, model: &str, tokens: &TokenCounts, billing: &Billing) -> Option<f64> {
        let rules = &self.pricing.rules;
        self.price(model)
            .map(|price| price.cost(tokens, billing, rules))
    }
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

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn names_match_only_through_suffixes_that_keep_the_model() {
        for (logged, canonical) in [
            ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
            ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
            ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),
            ("us.anthropic.claude-opus-4-6-v1:0", "claude-opus-4-6"),
            (
                "anthropic.claude-haiku-4-5-20251001-v1:0",
                "claude-haiku-4-5",
            ),
            ("claude-opus-4-6[1m]", "claude-opus-4-6"),
            ("Claude-Opus-4-8-fast", "claude-opus-4-8"),
            ("claude-opus-4.6", "claude-opus-4-6"),
            ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
            ("openai/gpt-5.5", "gpt-5-5"),
            ("gpt-5.1-codex-max", "gpt-5-1-codex-max"),
            ("gemini-2.5-flash-lite", "gemini-2-5-flash-lite"),
            ("models/gemini-3-pro-preview", "gemini-3-pro-preview"),
            ("codex-mini-latest", "codex-mini-latest"),
            ("deepseek-v3", "deepseek-v3"),
            ("mistral-large-v2:1", "mistral-large-v2:1"),
        ] {
            assert_eq!(canonical_model(logged), canonical, "{logged}");
        }
        let pricing = Pricing::built_in();
        let input = |model: &str| pricing.price(model).map(|price| price.input);
        assert_eq!(input("claude-sonnet-4-5-20250929"), Some(3.0));
        assert_eq!(input("claude-opus-4-6[1m]"), Some(5.0));
        assert_eq!(input("gpt-5.3-codex"), Some(1.75));
        // A longer name is another model: its own price, or none — never its parent's.
        assert_eq!(input("gpt-5-mini"), Some(0.25));
        assert_eq!(input("gpt-5.1-codex-mini"), Some(0.25));
        assert_eq!(input("gemini-2.5-flash-lite"), Some(0.1));
        assert_eq!(input("gpt-5.5-pro"), None);
        assert_eq!(input("claude-opus-40"), None);
        assert_eq!(input("gpt-5.6-luna-cyber"), None);
        assert!(
            pricing
                .cost(
                    "some-new-model",
                    &tokens(1, 1, 0, 0, 0),
                    &Billing::default()
                )
                .is_none()
        );
    }

    #[test]
    fn every_model_the_clis_use_today_has_a_price_with_its_source() {
        let pricing = Pricing::built_in();
        for model in [
            "claude-opus-5-5",
            "claude-opus-5",
            "claude-opus-4-8",
            "claude-sonnet-5-5",
            "claude-sonnet-5",
            "claude-sonnet-4-6",
            "claude-haiku-5-5",
            "claude-haiku-4-5-20251001",
            "claude-fable-5-2",
            "claude-mythos-5-2",
            "gpt-5.5",
            "gpt-5.6-sol",
            "gpt-5.6-terra",
            "gpt-5.6-luna",
            "gpt-6-astra",
            "gpt-6-sol",
            "gpt-6-luna",
            "gpt-6.1-sol",
            "gpt-6.1-terra",
            "gpt-5.4-mini",
            "o3",
            "o4-mini",
            "gemini-2.5-pro",
            "gemini-2.5-flash",
            "gemini-3-pro-preview",
            "gemini-3.1-pro-preview",
            "gemini-3-flash-preview",
            "gemini-3.5-flash",
            "gemini-3.8-flash",
            "gemini-3.5-flash-lite",
        ] {
            let price = pricing.price(model).unwrap_or_else(|| panic!("{model}"));
            assert!(
                price.source.as_deref().is_some_and(|s| !s.is_empty()),
                "{model} has no source"
            );
        }
    }

    #[test]
    fn costs_agree_with_ccusage_where_their_rules_agree() {
        let pricing = Pricing::built_in();
        let standard = Billing::default();
        // ccusage 20.0.24 on the public fixture sessions (see tests/e2e/work.rs): three
        // requests of one session, each below any threshold.
        let sniffly = pricing
            .cost(
                "claude-sonnet-4-20250514",
                &tokens(91, 2266, 16072, 0, 167_923),
                &standard,
            )
            .unwrap()
            + 2.0
                * pricing
                    .cost(
                        "claude-sonnet-4-20250514",
                        &tokens(0, 0, 0, 0, 167_923),
                        &standard,
                    )
                    .unwrap();
        assert!(close(sniffly, 0.2456637), "{sniffly}");
        let opus_1h = pricing
            .cost(
                "claude-opus-4-6",
                &tokens(54, 212, 0, 17696, 88231),
                &standard,
            )
            .unwrap();
        assert!(close(opus_1h, 0.2266455), "{opus_1h}");
        let codex = pricing
            .cost(
                "gpt-5.3-codex",
                &tokens(99460, 14600, 0, 0, 1_651_968),
                &standard,
            )
            .unwrap();
        assert!(close(codex, 0.6675494), "{codex}");
    }

    #[test]
    fn a_long_prompt_reprices_the_whole_request_past_its_models_threshold() {
        let pricing = Pricing::built_in();
        let standard = Billing::default();
        // haiku-5-5: past 100k prompt tokens, every kind at the higher rates.
        let short = pricing
            .cost(
                "claude-haiku-5-5",
                &tokens(60_000, 1000, 0, 0, 40_000),
                &standard,
            )
            .unwrap();
        assert!(close(
            short,
            (60_000.0 * 0.1 + 1000.0 * 0.5 + 40_000.0 * 0.01) / 1e6
        ));
        let long = pricing
            .cost(
                "claude-haiku-5-5",
                &tokens(60_001, 1000, 0, 0, 40_000),
                &standard,
            )
            .unwrap();
        assert!(close(
            long,
            (60_001.0 * 0.5 + 1000.0 * 2.5 + 40_000.0 * 0.05) / 1e6
        ));
        // Claude Code bills no tier for sonnet-4-5: a long prompt costs its one price.
        let sonnet = pricing
            .cost(
                "claude-sonnet-4-5",
                &tokens(1_000_000, 0, 0, 0, 0),
                &standard,
            )
            .unwrap();
        assert!(close(sonnet, 3.0), "{sonnet}");
        // OpenAI past 272k, Gemini past 200k.
        let gpt = pricing
            .cost(
                "gpt-5.5",
                &tokens(100_000, 10_000, 0, 0, 200_000),
                &standard,
            )
            .unwrap();
        assert!(close(
            gpt,
            (100_000.0 * 10.0 + 10_000.0 * 45.0 + 200_000.0 * 1.0) / 1e6
        ));
        let gemini = pricing
            .cost(
                "gemini-2.5-pro",
                &tokens(150_000, 1000, 0, 0, 60_000),
                &standard,
            )
            .unwrap();
        assert!(close(
            gemini,
            (150_000.0 * 2.5 + 1000.0 * 15.0 + 60_000.0 * 0.25) / 1e6
        ));
    }

    #[test]
    fn fast_mode_tiers_regions_and_searches_cost_what_the_clis_say() {
        let pricing = Pricing::built_in();
        let one_m_in = tokens(1_000_000, 0, 0, 0, 0);
        let fast = Billing {
            fast: true,
            ..Billing::default()
        };
        for (model, dollars) in [
            ("claude-opus-4-6", 30.0),
            ("claude-opus-4-7", 30.0),
            ("claude-opus-4-8", 10.0),
            ("claude-opus-5", 10.0),
            ("claude-opus-5-5", 8.0),
            // No fast rates: fast mode costs the same.
            ("claude-sonnet-4-6", 3.0),
        ] {
            let cost = pricing.cost(model, &one_m_in, &fast).unwrap();
            assert!(close(cost, dollars), "{model}: {cost}");
        }
        let tier = |tier: &str| Billing {
            service_tier: Some(tier.into()),
            ..Billing::default()
        };
        // 100k tokens: below gpt-5.5's long-context threshold.
        let gpt = |billing: &Billing| {
            pricing
                .cost("gpt-5.5", &tokens(100_000, 0, 0, 0, 0), billing)
                .unwrap()
        };
        assert!(close(gpt(&tier("priority")), 1.25));
        assert!(close(gpt(&tier("fast")), 1.25));
        assert!(close(gpt(&tier("flex")), 0.25));
        assert!(close(gpt(&tier("default")), 0.5));
        let us = Billing {
            geo: Some("us".into()),
            web_searches: 3,
            ..Billing::default()
        };
        let cost = pricing.cost("claude-opus-4-6", &one_m_in, &us).unwrap();
        assert!(close(cost, 5.0 * 1.1 + 0.03), "{cost}");
        let elsewhere = Billing {
            geo: Some("global".into()),
            ..Billing::default()
        };
        assert!(close(
            pricing
                .cost("claude-opus-4-6", &one_m_in, &elsewhere)
                .unwrap(),
            5.0
        ));
    }

    #[test]
    fn shared_usage_counts_its_reported_cost_only_within_what_its_tokens_can_cost() {
        let pricing = Pricing::built_in();
        let opus = pricing.price("claude-opus-4-6").unwrap();
        let rules = pricing.rules();
        let one_m_in = tokens(1_000_000, 0, 0, 0, 0);
        // From $5 (standard) to $30 fast, times 1.1 in the US region.
        let (least, most) = opus.cost_range(&one_m_in, rules);
        assert!(close(least, 5.0) && close(most, 33.0), "{least} {most}");
        // An honest figure (fast mode, which the report does not say) counts as reported.
        assert!(close(opus.shared_cost(&one_m_in, Some(30.0), rules), 30.0));
        // One no tokens could cost counts as the most they could; one too low as the least.
        assert!(close(
            opus.shared_cost(&one_m_in, Some(1_000_000.0), rules),
            33.0
        ));
        assert!(close(opus.shared_cost(&one_m_in, Some(0.0), rules), 5.0));
        // None reported: the standard rates.
        assert!(close(opus.shared_cost(&one_m_in, None, rules), 5.0));
        // Cache writes at the cheaper or the dearer lifetime; a flex tier halves the least.
        let written = tokens(0, 0, 1_000_000, 0, 0);
        let (least, most) = opus.cost_range(&written, rules);
        assert!(
            close(least, 6.25) && close(most, 60.0 * 1.1),
            "{least} {most}"
        );
        let gpt = pricing.price("gpt-5.5").unwrap();
        let (least, _) = gpt.cost_range(&tokens(100_000, 0, 0, 0, 0), rules);
        assert!(close(least, 0.25), "{least}");
    }

    #[test]
    fn a_persons_file_overrides_and_a_bad_one_is_refused_with_what_to_do() {
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
        assert_eq!(pricing.rules(), Pricing::built_in().rules());
        // Rules replace the built-in ones however they are spelled; a comment is no rule.
        for (text, web_search) in [
            ("[rules]\nweb_search = 0.02\n", 0.02),
            ("rules.web_search = 0.03\n", 0.03),
            ("[rules.geo]\neu = 1.2\n", 0.0),
            (
                "# no [rules] here\n",
                Pricing::built_in().rules().web_search,
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let pricing = Pricing::with_overrides(std::slice::from_ref(&path)).unwrap();
            assert_eq!(pricing.rules().web_search, web_search, "{text}");
        }
        std::fs::write(&path, "[models.x]\ninput = -1.0\noutput = 1.0\n").unwrap();
        assert!(Pricing::with_overrides(std::slice::from_ref(&path)).is_err());
        std::fs::write(
            &path,
            "[models.x]\ninput = 1.0\noutput = 1.0\nouput = 2.0\n",
        )
        .unwrap();
        assert!(Pricing::with_overrides(std::slice::from_ref(&path)).is_err());
        std::fs::write(
            &path,
            "[models.x]\ninput = 1.0\noutput = 1.0\nabove_200k_input = 2.0\n",
        )
        .unwrap();
        let error = Pricing::with_overrides(&[path]).unwrap_err().to_string();
        assert!(error.contains("long_context"), "{error}");
    }
}
