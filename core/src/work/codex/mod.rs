//! Codex CLI rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl`), read
//! line by line into [`LogEvent`]s. Each line is `{"timestamp","type","payload"}`
//! (`session_meta`, `turn_context`, `event_msg`, `response_item`, `compacted`); lines are read
//! as JSON, in any key order, spacing or escaping, never by text patterns.
//!
//! What a rollout says, and how it is read:
//!
//! - **The session.** Its id is the first `session_meta`'s `payload.id`, else the UUID at the
//!   end of the file name. (A later `session_meta` is a parent's, copied by a fork.) The
//!   working directory comes from `session_meta.cwd` and each `turn_context.cwd`; the model
//!   from `turn_context.model` (or `collaboration_mode.settings.model`) and from a
//!   `token_count`'s `info.model`. A [`LogEvent::Session`] is said whenever the pair changes.
//! - **Tokens.** Each `event_msg` `token_count` carries the session's cumulative
//!   `total_token_usage`; its increase since the previous one is spent once (a
//!   [`LogEvent::Usage`] without a key). The first of a file counts from zero. Codex writes
//!   the same totals again at each rate-limit refresh: no increase, no event. Totals that
//!   drop (a reset) count that event's `last_token_usage`. `info: null` says nothing. Mapping:
//!   `input = input_tokens − cached_input_tokens − cache_write_input_tokens`,
//!   `cache_read = cached_input_tokens`, `cache_write_5m = cache_write_input_tokens`,
//!   `output = output_tokens` (reasoning is already inside it). Without a model known yet the
//!   model is `gpt-5`, as ccusage assumes. On the localpush rollouts this gives ccusage 20's
//!   totals exactly (1,766,028 tokens for `12-41-04`, where adding up every
//!   `last_token_usage`, re-emits included, says 3,416,998).
//! - **Forks and spawned subagents** (`forked_from_id`, or
//!   `source.subagent.thread_spawn.parent_thread_id`) first replay their parent's history,
//!   token counts, plans and patches included, rewritten to the fork instant. Until the
//!   child's own first turn (a `turn_context` or `task_started` whose `turn_id`, a UUIDv7, was
//!   minted no earlier than the child's own thread id; any turn when either id is not a
//!   UUIDv7) every line is the parent's: its totals only set the baseline the child's counts
//!   continue from, and nothing else is reported (the parent's own log reports it).
//! - **Plans.** An `update_plan` call (`function_call` `arguments`, or `custom_tool_call`
//!   `input`: a JSON string `{"explanation"?, "plan":[{"step","status"}]}`) replaces the
//!   session's task list ([`LogEvent::Tasks`], source `update_plan`) when the call is made:
//!   Codex accepts any plan that parses. Arguments that do not parse, or a status other than
//!   `pending`, `in_progress`, `completed`, are what Codex would reject: nothing is said.
//! - **Files.** `apply_patch` as a `custom_tool_call` (`input` is the patch), a
//!   `function_call` (`arguments` `{"input"|"patch": …}`), or a shell call (`shell`,
//!   `container.exec`, `shell_command`, `exec_command`) that runs `apply_patch` with the patch
//!   as an argument or a heredoc, with its `workdir` and a leading `cd DIR &&`. The files are
//!   those of the `*** Add File:`, `*** Update File:`, `*** Delete File:` and `*** Move to:`
//!   headers, resolved against the turn's working directory (`.` and `..` resolved
//!   lexically). They are reported ([`LogEvent::FileTouched`], tool `apply_patch`) when the
//!   call's output (paired by `call_id`) says it succeeded; see [`CallOutcome`] for how.
//!
//! The parser is pure and its state serializes, so a watcher can stop after any line and
//! resume later with the same results.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::lenient::{
    Lenient, LenientBool, LenientCount, LenientInt, LenientStr, drain_map, drain_seq,
    is_json_object, is_uuid, opens_object, other_scalars_are_absent, timestamp_ms, uuid_v7_ms,
};
use super::paths;
use crate::log_events::{
    Billing, LineOutcome, LogEvent, RequestKey, TaskItem, TaskStatus, TokenCounts,
};

mod calls;
mod outcomes;
mod record;
#[cfg(test)]
mod tests;

use calls::*;
use outcomes::*;
use record::*;

/// The model ccusage assumes for rollouts that never name one (September 2025 logs lack
/// `turn_context`).
const FALLBACK_MODEL: &str = "gpt-5";

/// Patch calls waiting for their output, at most: a call whose output never comes (the
/// turn was cut short) must not hold memory forever.
const MAX_PENDING_PATCHES: usize = 256;

/// Parses one Codex rollout file, line by line. Stateful (the turn's cwd and model, the
/// session's previous token totals, calls waiting for their output) but pure; serializes
/// (serde) so a watcher can stop after any line and resume later.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CodexParser {
    /// The thread id the file name gives, for a rollout without `session_meta`.
    thread_from_file_name: String,
    /// The session's id, fixed by the first `session_meta` or the first event said.
    session_id: Option<String>,
    /// Whether the file's own `session_meta` was read (later ones are a parent's, replayed).
    read_session_meta: bool,
    /// A spawned subagent's thread: its usage is a side chain of its parent's.
    subagent: bool,
    cwd: Option<String>,
    model: Option<String>,
    /// What the last `Session` event said (cwd, model), to speak again only on a change.
    announced: Option<(Option<String>, Option<String>)>,
    /// The session's cumulative token totals at the last `token_count`.
    totals: Option<TokenTotals>,
    /// Set while a fork or spawned child is still replaying its parent's history.
    replaying_parent: Option<ParentReplay>,
    /// `apply_patch` calls made and not yet answered, oldest first.
    pending_patches: Vec<PendingPatch>,
    /// The service tier the thread runs at (`thread_settings_applied`), when not the default.
    service_tier: Option<String>,
}

/// A record's type and its payload's, off the front of a line written as Codex writes
/// them (`{"timestamp":"…","type":"…","payload":{"type":"…"`); `None` for any other front.
fn front_types(line: &[u8]) -> Option<(&[u8], &[u8])> {
    /// A string's text up to its closing quote, and what follows; `None` at an escape.
    fn string(rest: &[u8]) -> Option<(&[u8], &[u8])> {
        let end = memchr::memchr2(b'"', b'\\', rest)?;
        (rest[end] == b'"').then(|| (&rest[..end], &rest[end + 1..]))
    }
    let rest = line.strip_prefix(b"{\"timestamp\":\"")?;
    let (_, rest) = string(rest)?;
    let rest = rest.strip_prefix(b",\"type\":\"")?;
    let (kind, rest) = string(rest)?;
    let rest = rest.strip_prefix(b",\"payload\":{\"type\":\"")?;
    let (payload, _) = string(rest)?;
    Some((kind, payload))
}

/// A child thread still replaying its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct ParentReplay {
    /// When the child's thread id was minted (UUIDv7): its own turns' ids are no older.
    child_minted_ms: Option<u64>,
}

impl ParentReplay {
    /// Whether a turn (by its id) is the child's own rather than a replayed parent turn.
    fn is_own_turn(self, turn_id: Option<&str>) -> bool {
        match (self.child_minted_ms, turn_id.and_then(uuid_v7_ms)) {
            (Some(child), Some(turn)) => turn >= child,
            _ => true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PendingPatch {
    call_id: String,
    /// Absolute (or, with no working directory known, normalised relative) paths.
    paths: Vec<String>,
}

/// Cumulative token counts as Codex reports them (`cached` and `cache_write` are parts of
/// `input`; `reasoning` is part of `output`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct TokenTotals {
    input: u64,
    cached: u64,
    cache_write: u64,
    output: u64,
    reasoning: u64,
}

impl TokenTotals {
    fn any_below(&self, previous: &TokenTotals) -> bool {
        self.input < previous.input
            || self.cached < previous.cached
            || self.cache_write < previous.cache_write
            || self.output < previous.output
            || self.reasoning < previous.reasoning
    }

    fn minus(&self, previous: &TokenTotals) -> TokenTotals {
        TokenTotals {
            input: self.input - previous.input,
            cached: self.cached - previous.cached,
            cache_write: self.cache_write - previous.cache_write,
            output: self.output - previous.output,
            reasoning: self.reasoning - previous.reasoning,
        }
    }

    fn counts(&self) -> TokenCounts {
        let cached = self.cached.min(self.input);
        let cache_write = self.cache_write.min(self.input - cached);
        TokenCounts {
            input: self.input - cached - cache_write,
            output: self.output,
            cache_write_5m: cache_write,
            cache_write_1h: 0,
            cache_read: cached,
        }
    }
}

impl CodexParser {
    /// `file_name` gives the thread id when session_meta is missing
    /// (rollout-<date>-<uuid>.jsonl).
    pub fn new(file_name: &str) -> Self {
        let name = file_name.rsplit(['/', '\\']).next().unwrap_or(file_name);
        let stem = name.strip_suffix(".jsonl").unwrap_or(name);
        let thread = match stem.len().checked_sub(36).and_then(|at| stem.get(at..)) {
            Some(tail) if is_uuid(tail) => tail,
            _ => stem,
        };
        CodexParser {
            thread_from_file_name: thread.to_owned(),
            ..CodexParser::default()
        }
    }

    /// Reads one line (without its newline) and appends what it says to `events`.
    pub fn line(&mut self, line: &[u8], events: &mut Vec<LogEvent>) -> LineOutcome {
        self.read_line(line, events, true)
    }

    /// [`CodexParser::line`], with or without the look that spares reading a line.
    fn read_line(&mut self, line: &[u8], events: &mut Vec<LogEvent>, look: bool) -> LineOutcome {
        let Ok(text) = simdutf8::basic::from_utf8(line) else {
            return LineOutcome::Skipped;
        };
        if !opens_object(line) {
            return LineOutcome::Skipped;
        }
        if look && self.says_nothing(line) {
            return LineOutcome::Read;
        }
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let record = RecordSeed {
            pending: &self.pending_patches,
        }
        .deserialize(&mut deserializer)
        .and_then(|record| deserializer.end().map(|()| record));
        match record {
            Ok(record) => {
                self.record(record, events);
                LineOutcome::Read
            }
            // A JSON object of a shape we do not know (say, a key written twice): read,
            // saying nothing.
            Err(_) if is_json_object(text) => LineOutcome::Read,
            Err(_) => LineOutcome::Skipped,
        }
    }

    /// Whether `line` is a record this parser does nothing with, by its front as Codex
    /// writes it (`{"timestamp":"…","type":"…","payload":{"type":"…"`): messages,
    /// reasoning, the events that repeat them, and tool outputs when no patch waits for
    /// one. A look is many times cheaper than reading them; unsure means no.
    fn says_nothing(&self, line: &[u8]) -> bool {
        if line.last() != Some(&b'}') {
            return false;
        }
        match front_types(line) {
            Some((b"response_item", payload)) => match payload {
                b"function_call" | b"custom_tool_call" => false,
                b"function_call_output" | b"custom_tool_call_output" => {
                    self.pending_patches.is_empty()
                }
                _ => true,
            },
            Some((b"event_msg", payload)) => !matches!(
                payload,
                b"token_count" | b"thread_settings_applied" | b"task_started" | b"turn_started"
            ),
            _ => false,
        }
    }

    fn record(&mut self, record: Record<'_>, events: &mut Vec<LogEvent>) {
        let at_ms = record.timestamp.0.as_deref().and_then(timestamp_ms);
        let payload = record.payload;
        match record.kind.0.as_deref() {
            Some("session_meta") => self.session_meta(payload, at_ms, events),
            Some("turn_context") => {
                if self.turn_is_replayed(payload.turn_id.0.as_deref()) {
                    return;
                }
                let model = payload
                    .model
                    .non_empty()
                    .or(payload.settings_model.non_empty());
                self.learn(payload.cwd.non_empty(), model, at_ms, events);
            }
            Some("event_msg") => match payload.kind.0.as_deref() {
                Some("token_count") => self.token_count(payload, at_ms, events),
                Some("thread_settings_applied") => {
                    // Each application states the tier in force: absent, the default.
                    self.service_tier = payload
                        .service_tier
                        .non_empty()
                        .filter(|tier| !matches!(*tier, "default" | "standard"))
                        .map(str::to_owned);
                    let model = payload.model.non_empty();
                    self.learn(None, model, at_ms, events);
                }
                Some("task_started" | "turn_started") => {
                    self.turn_is_replayed(payload.turn_id.0.as_deref());
                }
                _ => {}
            },
            Some("response_item") if self.replaying_parent.is_none() => {
                match payload.kind.0.as_deref() {
                    Some("function_call" | "custom_tool_call") => {
                        self.tool_call(payload, at_ms, events);
                    }
                    Some("function_call_output" | "custom_tool_call_output") => {
                        self.tool_output(payload, at_ms, events);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// What the thread's requests are billed for besides their tokens.
    fn billing(&self) -> Billing {
        Billing {
            service_tier: self.service_tier.clone(),
            ..Billing::default()
        }
    }

    fn session_id(&mut self) -> String {
        self.session_id
            .get_or_insert_with(|| self.thread_from_file_name.clone())
            .clone()
    }

    fn session_meta(
        &mut self,
        payload: Payload<'_>,
        at_ms: Option<i64>,
        events: &mut Vec<LogEvent>,
    ) {
        if self.read_session_meta {
            return;
        }
        self.read_session_meta = true;
        if self.session_id.is_none()
            && let Some(id) = payload.id.non_empty()
        {
            self.session_id = Some(id.to_owned());
        }
        let spawned = payload.parent_thread_id.non_empty().is_some();
        if spawned || payload.forked_from_id.non_empty().is_some() {
            self.subagent = spawned;
            let own_id = self.session_id();
            self.replaying_parent = Some(ParentReplay {
                child_minted_ms: uuid_v7_ms(&own_id),
            });
        }
        self.learn(payload.cwd.non_empty(), None, at_ms, events);
    }

    /// Whether a turn start (`turn_context`, `task_started`) belongs to the parent's replayed
    /// history; the child's own first turn ends the replay.
    fn turn_is_replayed(&mut self, turn_id: Option<&str>) -> bool {
        match self.replaying_parent {
            Some(replay) if !replay.is_own_turn(turn_id) => true,
            Some(_) => {
                self.replaying_parent = None;
                false
            }
            None => false,
        }
    }

    /// Takes a working directory and model, and says so when the pair changed.
    fn learn(
        &mut self,
        cwd: Option<&str>,
        model: Option<&str>,
        at_ms: Option<i64>,
        events: &mut Vec<LogEvent>,
    ) {
        if let Some(cwd) = cwd
            && self.cwd.as_deref() != Some(cwd)
        {
            self.cwd = Some(cwd.to_owned());
        }
        if let Some(model) = model
            && self.model.as_deref() != Some(model)
        {
            self.model = Some(model.to_owned());
        }
        if self.cwd.is_none() && self.model.is_none() {
            return;
        }
        if let Some((cwd, model)) = &self.announced
            && *cwd == self.cwd
            && *model == self.model
        {
            return;
        }
        self.announced = Some((self.cwd.clone(), self.model.clone()));
        events.push(LogEvent::Session {
            session_id: self.session_id(),
            cwd: self.cwd.clone(),
            model: self.model.clone(),
            at_ms,
        });
    }

    fn token_count(
        &mut self,
        payload: Payload<'_>,
        at_ms: Option<i64>,
        events: &mut Vec<LogEvent>,
    ) {
        let Some(info) = payload.info.0 else {
            return;
        };
        let total = info.total_token_usage.0.map(|usage| usage.totals());
        let last = info.last_token_usage.0.map(|usage| usage.totals());
        if self.replaying_parent.is_some() {
            // The parent's spending, copied: only the baseline the child continues from.
            if total.is_some() {
                self.totals = total;
            }
            return;
        }
        self.learn(None, info.model.non_empty(), at_ms, events);
        let spent = match (total, self.totals) {
            (Some(total), Some(previous)) if total == previous => None,
            (Some(total), Some(previous)) if total.any_below(&previous) => last.or(Some(total)),
            (Some(total), Some(previous)) => Some(total.minus(&previous)),
            (Some(total), None) => Some(total),
            // No cumulative count to compare with: each report is its own.
            (None, _) => last,
        };
        if total.is_some() {
            self.totals = total;
        }
        let Some(spent) = spent else {
            return;
        };
        let tokens = spent.counts();
        if tokens.total() == 0 {
            return;
        }
        // The thread's totals after this increase name it: the same in every copy of the
        // rollout (archived, compressed), so a copy read twice counts once.
        let key = total.map(|total| RequestKey {
            message_id: format!(
                "totals:{}:{}:{}:{}:{}",
                total.input, total.cached, total.cache_write, total.output, total.reasoning
            ),
            request_id: None,
        });
        events.push(LogEvent::Usage {
            session_id: self.session_id(),
            key,
            sidechain: self.subagent,
            model: self
                .model
                .clone()
                .unwrap_or_else(|| FALLBACK_MODEL.to_owned()),
            tokens,
            billing: self.billing(),
            at_ms,
        });
    }

    fn tool_call(&mut self, payload: Payload<'_>, at_ms: Option<i64>, events: &mut Vec<LogEvent>) {
        let custom = payload.kind.is("custom_tool_call");
        let (first, second) = if custom {
            (payload.input.0, payload.arguments.0)
        } else {
            (payload.arguments.0, payload.input.0)
        };
        let Some(text) = first.or(second) else {
            return;
        };
        let call_id = payload.call_id.non_empty();
        match CallKind::of(payload.name.0.as_deref()) {
            CallKind::Plan => {
                if let Some(tasks) = plan_tasks(&text) {
                    events.push(LogEvent::Tasks {
                        session_id: self.session_id(),
                        lane: None,
                        source: "update_plan".to_owned(),
                        tasks,
                        at_ms,
                    });
                }
            }
            CallKind::Patch => {
                let patch = if custom || text.trim_start().starts_with("*** Begin Patch") {
                    Some(text)
                } else {
                    patch_from_arguments(&text).map(Cow::Owned)
                };
                if let (Some(patch), Some(call_id)) = (patch, call_id) {
                    let paths = patch_paths(&patch, self.cwd.as_deref());
                    self.wait_for_output(call_id, paths);
                }
            }
            CallKind::Shell => {
                if let (Some(shell), Some(call_id)) = (shell_patch(&text), call_id) {
                    let dir = shell
                        .dir
                        .as_deref()
                        .map(|dir| paths::resolve(self.cwd.as_deref(), dir));
                    let paths = patch_paths(&shell.patch, dir.as_deref().or(self.cwd.as_deref()));
                    self.wait_for_output(call_id, paths);
                }
            }
            CallKind::Unknown | CallKind::Other => {}
        }
    }

    fn wait_for_output(&mut self, call_id: &str, paths: Vec<String>) {
        if paths.is_empty() {
            return;
        }
        self.pending_patches
            .retain(|pending| pending.call_id != call_id);
        if self.pending_patches.len() >= MAX_PENDING_PATCHES {
            self.pending_patches.remove(0);
        }
        self.pending_patches.push(PendingPatch {
            call_id: call_id.to_owned(),
            paths,
        });
    }

    fn tool_output(
        &mut self,
        payload: Payload<'_>,
        at_ms: Option<i64>,
        events: &mut Vec<LogEvent>,
    ) {
        let Some(call_id) = payload.call_id.non_empty() else {
            return;
        };
        let Some(index) = self
            .pending_patches
            .iter()
            .position(|pending| pending.call_id == call_id)
        else {
            return;
        };
        let pending = self.pending_patches.remove(index);
        if payload.output != Some(CallOutcome::Succeeded) {
            return;
        }
        let session_id = self.session_id();
        for path in pending.paths {
            events.push(LogEvent::FileTouched {
                session_id: session_id.clone(),
                path,
                tool: "apply_patch".to_owned(),
                at_ms,
            });
        }
    }
}
