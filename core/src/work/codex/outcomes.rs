//! Whether a tool call succeeded, read from its output: a patch's files are reported only
//! when it did.

use super::*;

/// What a tool call's output says of the call.
///
/// A patch counts only when its output says it succeeded:
/// - a structured exit status decides: `{"output", "metadata": {"exit_code"}}` (older
///   builds, as a JSON string), `{"content", "success": false}`, or a text whose header
///   (the lines before `Output:`) has `Exit code: N` (shell and freeform tools) or
///   `Process exited with code N` (unified exec): 0 succeeded, anything else failed;
/// - otherwise a text that starts with an error (`apply_patch verification failed`,
///   `patch rejected`, `error`, `failed`, `aborted`, `exec command rejected`, …, see
///   [`FAILURE_STARTS`]) failed, and so did a command still running (`Process running with
///   session ID`): it was not confirmed;
/// - otherwise (`Success. Updated the following files:` and anything else) succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CallOutcome {
    Succeeded,
    Failed,
}

/// How an output text that failed starts (compared without case), as Codex and its tools
/// write them.
pub(super) const FAILURE_STARTS: [&str; 14] = [
    "apply_patch verification failed",
    "patch rejected",
    "rejected",
    "error",
    "err:",
    "failed",
    "failure",
    "aborted",
    "exec command rejected",
    "execution error",
    "command timed out",
    "timed out",
    "invalid",
    "process running with session id",
];

pub(super) fn text_outcome(text: &str, depth: u8) -> CallOutcome {
    let text = text.trim_start();
    if text.starts_with('{')
        && depth < 4
        && let Ok(object) = serde_json::from_str::<OutputObject<'_>>(text)
    {
        return object.outcome(depth + 1);
    }
    for line in text.lines().take(8) {
        let line = line.trim();
        if line == "Output:" {
            break;
        }
        let code = line
            .strip_prefix("Exit code:")
            .or_else(|| line.strip_prefix("Process exited with code"));
        if let Some(code) = code {
            return match code.trim().parse::<i64>() {
                Ok(0) => CallOutcome::Succeeded,
                _ => CallOutcome::Failed,
            };
        }
    }
    let first_line = text.lines().next().unwrap_or_default();
    let starts_with = |prefix: &str| {
        first_line
            .get(..prefix.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
    };
    if FAILURE_STARTS.iter().any(|prefix| starts_with(prefix)) {
        CallOutcome::Failed
    } else {
        CallOutcome::Succeeded
    }
}

/// An output written as an object: `{"content", "success"}` or `{"output", "metadata"}`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct OutputObject<'a> {
    #[serde(borrow)]
    pub(super) content: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) output: LenientStr<'a>,
    pub(super) success: LenientBool,
    pub(super) metadata: Lenient<OutputMetadata>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct OutputMetadata {
    pub(super) exit_code: LenientInt,
}

impl OutputObject<'_> {
    pub(super) fn outcome(&self, depth: u8) -> CallOutcome {
        if self.success.0 == Some(false) {
            return CallOutcome::Failed;
        }
        if let Some(code) = self
            .metadata
            .0
            .as_ref()
            .and_then(|metadata| metadata.exit_code.0)
        {
            return if code == 0 {
                CallOutcome::Succeeded
            } else {
                CallOutcome::Failed
            };
        }
        match self.content.0.as_deref().or(self.output.0.as_deref()) {
            Some(text) => text_outcome(text, depth),
            None => CallOutcome::Succeeded,
        }
    }
}

/// Reads an `output` value into its outcome as it is parsed (its text is not kept): a
/// string, content items (`[{"type":"input_text","text"}]`, the first text decides), or an
/// object.
pub(super) struct OutcomeSeed;

impl<'de> DeserializeSeed<'de> for OutcomeSeed {
    type Value = Option<CallOutcome>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for OutcomeSeed {
    type Value = Option<CallOutcome>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a tool output")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(Some(text_outcome(value, 0)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct ContentItem<'a> {
            #[serde(borrow)]
            text: LenientStr<'a>,
        }
        let mut outcome = None;
        while let Some(item) = seq.next_element::<Lenient<ContentItem<'_>>>()? {
            if outcome.is_none()
                && let Some(text) = item.0.as_ref().and_then(|item| item.text.0.as_deref())
            {
                outcome = Some(text_outcome(text, 0));
            }
        }
        Ok(outcome)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let object = OutputObject::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(Some(object.outcome(0)))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    other_scalars_are_absent!(None);
}
