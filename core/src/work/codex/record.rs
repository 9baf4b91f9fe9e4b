//! One rollout line, decoded in one pass with seeds that keep only what the parser uses
//! (and borrow it from the line), whatever the key order, spacing or escaping.

use super::*;

/// The parts of a line the parser uses.
#[derive(Default)]
pub(super) struct Record<'a> {
    pub(super) timestamp: LenientStr<'a>,
    pub(super) kind: LenientStr<'a>,
    pub(super) payload: Payload<'a>,
}

/// The union of the payload fields of every line type the parser uses. Large values it may
/// not need (a call's arguments, an output) are kept only when they can matter: see
/// [`PayloadSeed`].
#[derive(Default)]
pub(super) struct Payload<'a> {
    pub(super) kind: LenientStr<'a>,
    /// `session_meta`: the thread id.
    pub(super) id: LenientStr<'a>,
    pub(super) cwd: LenientStr<'a>,
    pub(super) model: LenientStr<'a>,
    /// `collaboration_mode.settings.model`.
    pub(super) settings_model: LenientStr<'a>,
    pub(super) turn_id: LenientStr<'a>,
    pub(super) forked_from_id: LenientStr<'a>,
    /// `source.subagent.thread_spawn.parent_thread_id`.
    pub(super) parent_thread_id: LenientStr<'a>,
    /// `token_count`'s `info` (absent when null).
    pub(super) info: Lenient<TokenInfo<'a>>,
    pub(super) name: LenientStr<'a>,
    pub(super) call_id: LenientStr<'a>,
    pub(super) arguments: LenientStr<'a>,
    pub(super) input: LenientStr<'a>,
    /// A call output's outcome (read only for a call that is waited for).
    pub(super) output: Option<CallOutcome>,
    /// `thread_settings_applied`: the thread's service tier (absent: the default).
    pub(super) service_tier: LenientStr<'a>,
}

/// `thread_settings_applied`'s settings: what is read of them.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct ThreadSettings<'a> {
    #[serde(borrow)]
    pub(super) service_tier: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) model: LenientStr<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct TokenInfo<'a> {
    pub(super) total_token_usage: Lenient<TokenUsage>,
    pub(super) last_token_usage: Lenient<TokenUsage>,
    #[serde(borrow)]
    pub(super) model: LenientStr<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct TokenUsage {
    pub(super) input_tokens: LenientCount,
    #[serde(alias = "cache_read_input_tokens")]
    pub(super) cached_input_tokens: LenientCount,
    #[serde(alias = "cache_creation_input_tokens")]
    pub(super) cache_write_input_tokens: LenientCount,
    pub(super) output_tokens: LenientCount,
    pub(super) reasoning_output_tokens: LenientCount,
}

impl TokenUsage {
    pub(super) fn totals(&self) -> TokenTotals {
        TokenTotals {
            input: self.input_tokens.get(),
            cached: self.cached_input_tokens.get(),
            cache_write: self.cache_write_input_tokens.get(),
            output: self.output_tokens.get(),
            reasoning: self.reasoning_output_tokens.get(),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct CollaborationMode<'a> {
    #[serde(borrow)]
    pub(super) settings: Lenient<ModelSettings<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct ModelSettings<'a> {
    #[serde(borrow)]
    pub(super) model: LenientStr<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct SessionSource<'a> {
    #[serde(borrow, alias = "sub_agent")]
    pub(super) subagent: Lenient<SubagentSource<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct SubagentSource<'a> {
    #[serde(borrow)]
    pub(super) thread_spawn: Lenient<ThreadSpawn<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct ThreadSpawn<'a> {
    #[serde(borrow)]
    pub(super) parent_thread_id: LenientStr<'a>,
}

/// Reads a line, knowing which calls are waited for.
pub(super) struct RecordSeed<'p> {
    pub(super) pending: &'p [PendingPatch],
}

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Record<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Record<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a rollout line")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut record = Record::default();
        while let Some(key) = map.next_key::<LenientStr<'de>>()? {
            match key.0.as_deref() {
                Some("timestamp") => record.timestamp = map.next_value()?,
                Some("type") => record.kind = map.next_value()?,
                Some("payload") => {
                    record.payload = map.next_value_seed(PayloadSeed {
                        pending: self.pending,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(record)
    }
}

/// Reads a payload. A call's `arguments`/`input` are kept only for a call the parser reads
/// (`update_plan`, `apply_patch`, a shell call whose text holds a patch, or a call whose name
/// comes later in the line); an `output` is read only for a call waited for (or whose
/// `call_id` comes later). Everything else is skipped unparsed.
pub(super) struct PayloadSeed<'p> {
    pub(super) pending: &'p [PendingPatch],
}

impl<'de> DeserializeSeed<'de> for PayloadSeed<'_> {
    type Value = Payload<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PayloadSeed<'_> {
    type Value = Payload<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a payload")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut payload = Payload::default();
        while let Some(key) = map.next_key::<LenientStr<'de>>()? {
            match key.0.as_deref() {
                Some("type") => payload.kind = map.next_value()?,
                Some("id") => payload.id = map.next_value()?,
                Some("cwd") => payload.cwd = map.next_value()?,
                Some("model") => payload.model = map.next_value()?,
                Some("turn_id") => payload.turn_id = map.next_value()?,
                Some("forked_from_id") => payload.forked_from_id = map.next_value()?,
                Some("name") => payload.name = map.next_value()?,
                Some("call_id") => payload.call_id = map.next_value()?,
                Some("info") => payload.info = map.next_value()?,
                Some("thread_settings") => {
                    let settings: Lenient<ThreadSettings<'de>> = map.next_value()?;
                    if let Some(settings) = settings.0 {
                        payload.service_tier = settings.service_tier;
                        if payload.model.0.is_none() {
                            payload.model = settings.model;
                        }
                    }
                }
                Some("collaboration_mode") => {
                    let mode: Lenient<CollaborationMode<'de>> = map.next_value()?;
                    if let Some(settings) = mode.0.and_then(|mode| mode.settings.0) {
                        payload.settings_model = settings.model;
                    }
                }
                Some("source") => {
                    let source: Lenient<SessionSource<'de>> = map.next_value()?;
                    if let Some(spawn) = source
                        .0
                        .and_then(|source| source.subagent.0)
                        .and_then(|subagent| subagent.thread_spawn.0)
                    {
                        payload.parent_thread_id = spawn.parent_thread_id;
                    }
                }
                Some(field @ ("arguments" | "input")) => {
                    let text = match CallKind::of(payload.name.0.as_deref()) {
                        CallKind::Unknown | CallKind::Plan | CallKind::Patch => map.next_value()?,
                        CallKind::Shell => map.next_value_seed(TextHoldingPatch)?,
                        CallKind::Other => {
                            map.next_value::<IgnoredAny>()?;
                            LenientStr(None)
                        }
                    };
                    if field == "arguments" {
                        payload.arguments = text;
                    } else {
                        payload.input = text;
                    }
                }
                Some("output") => {
                    let waited_for = match payload.call_id.0.as_deref() {
                        Some(call_id) => self.pending.iter().any(|p| p.call_id == call_id),
                        None => !self.pending.is_empty(),
                    };
                    if waited_for {
                        payload.output = map.next_value_seed(OutcomeSeed)?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(payload)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq)?;
        Ok(Payload::default())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Payload::default())
    }

    other_scalars_are_absent!(Payload::default());
}

/// A string kept only when it holds a patch (a shell call's arguments: most run no patch,
/// and are dropped without a copy).
pub(super) struct TextHoldingPatch;

impl TextHoldingPatch {
    pub(super) fn holds_patch(text: &str) -> bool {
        text.contains("*** Begin Patch")
    }
}

impl<'de> DeserializeSeed<'de> for TextHoldingPatch {
    type Value = LenientStr<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TextHoldingPatch {
    type Value = LenientStr<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a call's arguments")
    }

    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(LenientStr(
            Self::holds_patch(value).then_some(Cow::Borrowed(value)),
        ))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(LenientStr(
            Self::holds_patch(value).then(|| Cow::Owned(value.to_owned())),
        ))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq)?;
        Ok(LenientStr(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map)?;
        Ok(LenientStr(None))
    }

    other_scalars_are_absent!(LenientStr(None));
}
