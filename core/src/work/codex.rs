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

use super::events::{
    Billing, LineOutcome, LogEvent, RequestKey, TaskItem, TaskStatus, TokenCounts,
};
use super::lenient::{
    Lenient, LenientBool, LenientCount, LenientInt, LenientStr, drain_map, drain_seq,
    is_json_object, is_uuid, opens_object, other_scalars_are_absent, timestamp_ms, uuid_v7_ms,
};

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
                        .map(|dir| resolve_path(self.cwd.as_deref(), dir));
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

// ------------------------------------------------------------------ calls

/// What a tool call is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallKind {
    /// The name is not known yet (it comes after the arguments in this line).
    Unknown,
    Plan,
    Patch,
    /// A command runner, which may run `apply_patch`.
    Shell,
    Other,
}

impl CallKind {
    fn of(name: Option<&str>) -> CallKind {
        match name {
            None => CallKind::Unknown,
            Some("update_plan") => CallKind::Plan,
            Some("apply_patch") => CallKind::Patch,
            Some("shell" | "container.exec" | "shell_command" | "exec_command" | "local_shell") => {
                CallKind::Shell
            }
            Some(_) => CallKind::Other,
        }
    }
}

/// `update_plan`'s arguments.
#[derive(Deserialize)]
struct PlanArguments {
    plan: Vec<PlanStep>,
}

#[derive(Deserialize)]
struct PlanStep {
    step: String,
    status: String,
}

/// The plan of an `update_plan` call, or `None` when Codex would have refused it.
fn plan_tasks(arguments: &str) -> Option<Vec<TaskItem>> {
    let arguments: PlanArguments = serde_json::from_str(arguments).ok()?;
    arguments
        .plan
        .into_iter()
        .map(|step| {
            let status = match step.status.as_str() {
                "pending" => TaskStatus::Pending,
                "in_progress" => TaskStatus::InProgress,
                "completed" => TaskStatus::Completed,
                _ => return None,
            };
            Some(TaskItem {
                id: None,
                title: step.step,
                status,
                active_form: None,
            })
        })
        .collect()
}

/// The patch of an `apply_patch` `function_call`'s arguments (`{"input": …}`, or `patch`).
fn patch_from_arguments(arguments: &str) -> Option<String> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct PatchArguments<'a> {
        #[serde(borrow)]
        input: LenientStr<'a>,
        #[serde(borrow)]
        patch: LenientStr<'a>,
    }
    let arguments: PatchArguments<'_> = serde_json::from_str(arguments).ok()?;
    arguments
        .input
        .into_owned()
        .or(arguments.patch.into_owned())
}

/// A patch that a shell call runs through `apply_patch`, and where it runs.
#[derive(Debug, PartialEq)]
struct ShellPatch {
    patch: String,
    /// The directory the command runs in, relative to the turn's: `workdir`, then a leading
    /// `cd DIR &&` of the script.
    dir: Option<String>,
}

/// The patch a shell call's arguments apply, if they run `apply_patch`: `{"command":
/// ["apply_patch", PATCH]}`, `{"command": ["bash", "-lc", SCRIPT]}`, `{"command": SCRIPT}`
/// or `{"cmd": SCRIPT}`, where SCRIPT runs `apply_patch` on a heredoc.
fn shell_patch(arguments: &str) -> Option<ShellPatch> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct ShellArguments<'a> {
        command: Command,
        #[serde(borrow)]
        cmd: LenientStr<'a>,
        #[serde(borrow)]
        workdir: LenientStr<'a>,
    }
    let arguments: ShellArguments<'_> = serde_json::from_str(arguments).ok()?;
    let workdir = arguments.workdir.into_owned();
    let (patch, cd) = match (arguments.command, arguments.cmd.0) {
        (Command::Argv(argv), _) => match argv.as_slice() {
            [program, patch, ..] if is_apply_patch(program) => (patch.clone(), None),
            [.., script] => script_patch(script)?,
            [] => return None,
        },
        (Command::Script(script), _) => script_patch(&script)?,
        (Command::Absent, Some(script)) => script_patch(&script)?,
        (Command::Absent, None) => return None,
    };
    let dir = match (workdir, cd) {
        (Some(workdir), Some(cd)) => Some(join_path(&workdir, &cd)),
        (workdir, cd) => workdir.or(cd),
    };
    patch
        .contains("*** Begin Patch")
        .then_some(ShellPatch { patch, dir })
}

fn is_apply_patch(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    name == "apply_patch" || name == "applypatch"
}

/// The patch of a script that runs `apply_patch` (a heredoc), and the directory of a
/// leading `cd DIR &&`.
fn script_patch(script: &str) -> Option<(String, Option<String>)> {
    let begin = script.find("*** Begin Patch")?;
    let before = &script[..begin];
    if !before.contains("apply_patch") && !before.contains("applypatch") {
        return None;
    }
    let rest = &script[begin..];
    let end = rest
        .find("*** End Patch")
        .map_or(rest.len(), |at| at + "*** End Patch".len());
    let cd = before
        .trim_start()
        .strip_prefix("cd ")
        .and_then(|after| after.split("&&").next())
        .map(|dir| dir.trim().trim_matches(['"', '\'']).to_owned())
        .filter(|dir| !dir.is_empty() && !dir.contains(char::is_whitespace));
    Some((rest[..end].to_owned(), cd))
}

/// A shell call's `command`: a script or an argument vector.
#[derive(Debug, Default)]
enum Command {
    #[default]
    Absent,
    Script(String),
    Argv(Vec<String>),
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CommandVisitor;
        impl<'de> Visitor<'de> for CommandVisitor {
            type Value = Command;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a command")
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<Command, E> {
                Ok(Command::Script(value.to_owned()))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Command, A::Error> {
                let mut argv = Vec::new();
                while let Some(argument) = seq.next_element::<LenientStr<'_>>()? {
                    argv.push(argument.0.map(Cow::into_owned).unwrap_or_default());
                }
                Ok(Command::Argv(argv))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Command, A::Error> {
                drain_map(map)?;
                Ok(Command::Absent)
            }

            other_scalars_are_absent!(Command::Absent);
        }
        deserializer.deserialize_any(CommandVisitor)
    }
}

/// The files a patch changes, by its `*** Add File:`, `*** Update File:`, `*** Delete File:`
/// and `*** Move to:` headers, in order and once each, resolved against `dir`. A header must
/// start its line: inside an update hunk, a context line starts with a space.
fn patch_paths(patch: &str, dir: Option<&str>) -> Vec<String> {
    const HEADERS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    let mut paths: Vec<String> = Vec::new();
    for line in patch.lines() {
        if !line.starts_with("*** ") {
            continue;
        }
        let Some(path) = HEADERS.iter().find_map(|header| line.strip_prefix(header)) else {
            continue;
        };
        let path = path.trim();
        if path.is_empty() {
            continue;
        }
        let path = resolve_path(dir, path);
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

// ------------------------------------------------------------------ paths

/// Whether a path is absolute, for POSIX (`/x`) or Windows (`C:\x`, `\x`, `\\server\x`).
fn is_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    matches!(bytes.first(), Some(b'/' | b'\\'))
        || (bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && matches!(bytes[2], b'/' | b'\\'))
}

fn is_windows_style(path: &str) -> bool {
    let bytes = path.as_bytes();
    (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
        || (path.contains('\\') && !path.contains('/'))
}

/// `path` resolved against the directory `dir` (when relative and a directory is known),
/// with `.` and `..` resolved lexically.
fn resolve_path(dir: Option<&str>, path: &str) -> String {
    match dir {
        Some(dir) if !is_absolute(path) => normalize_path(&join_path(dir, path)),
        _ => normalize_path(path),
    }
}

fn join_path(dir: &str, path: &str) -> String {
    if is_absolute(path) {
        return path.to_owned();
    }
    let separator = if is_windows_style(dir) { '\\' } else { '/' };
    let mut joined = String::with_capacity(dir.len() + 1 + path.len());
    joined.push_str(dir);
    if !dir.ends_with(['/', '\\']) {
        joined.push(separator);
    }
    joined.push_str(path);
    joined
}

/// Lexical normalisation: empty and `.` components dropped, `..` removes the component
/// before it (never the root; a relative path keeps its leading `..`).
fn normalize_path(path: &str) -> String {
    let windows = is_windows_style(path);
    let separator = if windows { '\\' } else { '/' };
    let (root, rest) = if windows && path.len() >= 2 && path.as_bytes()[1] == b':' {
        let absolute = matches!(path.as_bytes().get(2), Some(b'/' | b'\\'));
        let root = if absolute {
            format!("{}\\", &path[..2])
        } else {
            path[..2].to_owned()
        };
        (root, &path[2..])
    } else if path.starts_with(['/', '\\']) {
        (separator.to_string(), path)
    } else {
        (String::new(), path)
    };
    let mut parts: Vec<&str> = Vec::new();
    let split: Box<dyn Iterator<Item = &str>> = if windows {
        Box::new(rest.split(['/', '\\']))
    } else {
        Box::new(rest.split('/'))
    };
    for part in split {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if root.is_empty() => parts.push(".."),
                _ => {}
            },
            part => parts.push(part),
        }
    }
    let mut normalized = root;
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            normalized.push(separator);
        }
        normalized.push_str(part);
    }
    if normalized.is_empty() {
        normalized.push('.');
    }
    normalized
}

// ------------------------------------------------------------------ call outputs

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
enum CallOutcome {
    Succeeded,
    Failed,
}

/// How an output text that failed starts (compared without case), as Codex and its tools
/// write them.
const FAILURE_STARTS: [&str; 14] = [
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

fn text_outcome(text: &str, depth: u8) -> CallOutcome {
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
struct OutputObject<'a> {
    #[serde(borrow)]
    content: LenientStr<'a>,
    #[serde(borrow)]
    output: LenientStr<'a>,
    success: LenientBool,
    metadata: Lenient<OutputMetadata>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct OutputMetadata {
    exit_code: LenientInt,
}

impl OutputObject<'_> {
    fn outcome(&self, depth: u8) -> CallOutcome {
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
struct OutcomeSeed;

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

// ------------------------------------------------------------------ reading a line

/// The parts of a line the parser uses.
#[derive(Default)]
struct Record<'a> {
    timestamp: LenientStr<'a>,
    kind: LenientStr<'a>,
    payload: Payload<'a>,
}

/// The union of the payload fields of every line type the parser uses. Large values it may
/// not need (a call's arguments, an output) are kept only when they can matter: see
/// [`PayloadSeed`].
#[derive(Default)]
struct Payload<'a> {
    kind: LenientStr<'a>,
    /// `session_meta`: the thread id.
    id: LenientStr<'a>,
    cwd: LenientStr<'a>,
    model: LenientStr<'a>,
    /// `collaboration_mode.settings.model`.
    settings_model: LenientStr<'a>,
    turn_id: LenientStr<'a>,
    forked_from_id: LenientStr<'a>,
    /// `source.subagent.thread_spawn.parent_thread_id`.
    parent_thread_id: LenientStr<'a>,
    /// `token_count`'s `info` (absent when null).
    info: Lenient<TokenInfo<'a>>,
    name: LenientStr<'a>,
    call_id: LenientStr<'a>,
    arguments: LenientStr<'a>,
    input: LenientStr<'a>,
    /// A call output's outcome (read only for a call that is waited for).
    output: Option<CallOutcome>,
    /// `thread_settings_applied`: the thread's service tier (absent: the default).
    service_tier: LenientStr<'a>,
}

/// `thread_settings_applied`'s settings: what is read of them.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ThreadSettings<'a> {
    #[serde(borrow)]
    service_tier: LenientStr<'a>,
    #[serde(borrow)]
    model: LenientStr<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TokenInfo<'a> {
    total_token_usage: Lenient<TokenUsage>,
    last_token_usage: Lenient<TokenUsage>,
    #[serde(borrow)]
    model: LenientStr<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TokenUsage {
    input_tokens: LenientCount,
    #[serde(alias = "cache_read_input_tokens")]
    cached_input_tokens: LenientCount,
    #[serde(alias = "cache_creation_input_tokens")]
    cache_write_input_tokens: LenientCount,
    output_tokens: LenientCount,
    reasoning_output_tokens: LenientCount,
}

impl TokenUsage {
    fn totals(&self) -> TokenTotals {
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
struct CollaborationMode<'a> {
    #[serde(borrow)]
    settings: Lenient<ModelSettings<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ModelSettings<'a> {
    #[serde(borrow)]
    model: LenientStr<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SessionSource<'a> {
    #[serde(borrow, alias = "sub_agent")]
    subagent: Lenient<SubagentSource<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SubagentSource<'a> {
    #[serde(borrow)]
    thread_spawn: Lenient<ThreadSpawn<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ThreadSpawn<'a> {
    #[serde(borrow)]
    parent_thread_id: LenientStr<'a>,
}

/// Reads a line, knowing which calls are waited for.
struct RecordSeed<'p> {
    pending: &'p [PendingPatch],
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
struct PayloadSeed<'p> {
    pending: &'p [PendingPatch],
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
struct TextHoldingPatch;

impl TextHoldingPatch {
    fn holds_patch(text: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/codex");

    /// Reads a whole rollout the way the scanner does (complete lines, `\r\n` allowed).
    fn read(file_name: &str, bytes: &[u8]) -> (Vec<LogEvent>, u64) {
        read_with(CodexParser::new(file_name), bytes)
    }

    fn read_with(mut parser: CodexParser, bytes: &[u8]) -> (Vec<LogEvent>, u64) {
        let mut events = Vec::new();
        let mut skipped = 0;
        for line in bytes
            .split(|&byte| byte == b'\n')
            .filter(|line| !line.is_empty())
        {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if parser.line(line, &mut events) == LineOutcome::Skipped {
                skipped += 1;
            }
        }
        (events, skipped)
    }

    fn lines(text: &str) -> (Vec<LogEvent>, u64) {
        read(
            "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
            text.as_bytes(),
        )
    }

    fn total_tokens(events: &[LogEvent]) -> TokenCounts {
        let mut total = TokenCounts::default();
        for event in events {
            if let LogEvent::Usage { tokens, .. } = event {
                total.add(tokens);
            }
        }
        total
    }

    fn files(events: &[LogEvent]) -> Vec<&str> {
        events
            .iter()
            .filter_map(|event| match event {
                LogEvent::FileTouched { path, .. } => Some(path.as_str()),
                _ => None,
            })
            .collect()
    }

    fn plans(events: &[LogEvent]) -> Vec<&Vec<TaskItem>> {
        events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Tasks { tasks, .. } => Some(tasks),
                _ => None,
            })
            .collect()
    }

    /// What a fixture's `.expected.json` holds, computed from the events.
    fn summary(events: &[LogEvent], skipped: u64) -> Value {
        let tokens = total_tokens(events);
        let mut models: Vec<&str> = Vec::new();
        let mut sidechain = false;
        let mut ids: Vec<&str> = Vec::new();
        for event in events {
            if !ids.contains(&event.session_id()) {
                ids.push(event.session_id());
            }
            if let LogEvent::Usage {
                model,
                sidechain: side,
                ..
            } = event
            {
                sidechain |= *side;
                if !models.contains(&model.as_str()) {
                    models.push(model);
                }
            }
        }
        assert_eq!(ids.len(), 1, "one session per file: {ids:?}");
        let sessions: Vec<Value> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Session { cwd, model, .. } => Some(json!({"cwd": cwd, "model": model})),
                _ => None,
            })
            .collect();
        json!({
            "session_id": ids[0],
            "skipped_lines": skipped,
            "usage_events": events.iter().filter(|e| matches!(e, LogEvent::Usage { .. })).count(),
            "tokens": {
                "input": tokens.input,
                "output": tokens.output,
                "cache_write_5m": tokens.cache_write_5m,
                "cache_read": tokens.cache_read,
            },
            "sessions": sessions,
            "files": files(events),
            "plans": plans(events),
            "sidechain": sidechain,
            "models": models,
        })
    }

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(Path::new(FIXTURES).join(name)).unwrap()
    }

    /// The real rollouts of `shared/fixtures/agent-logs/codex/localpush` (not copied into
    /// the repository): see `crate::shared_agent_logs`.
    fn real_rollouts() -> Option<PathBuf> {
        crate::shared_agent_logs("codex/localpush")
    }

    #[test]
    fn the_lines_a_look_spares_say_nothing_when_read() {
        let mut files: Vec<(String, Vec<u8>)> = [
            "patch-forms.jsonl",
            "plan-and-patch.jsonl",
            "subagent-replay.jsonl",
            "totals-drop.jsonl",
        ]
        .iter()
        .map(|name| ((*name).to_owned(), fixture(name)))
        .collect();
        if let Some(dir) = real_rollouts() {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                files.push((
                    entry.path().display().to_string(),
                    std::fs::read(entry.path()).unwrap(),
                ));
            }
        }
        let mut spared = 0;
        for (name, bytes) in &files {
            let read = |look: bool| {
                let mut parser = CodexParser::new(
                    "rollout-2026-02-23T12-00-00-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
                );
                bytes
                    .split(|&byte| byte == b'\n')
                    .filter(|line| !line.is_empty())
                    .map(|line| {
                        let mut events = Vec::new();
                        let spared = look && parser.says_nothing(line);
                        (parser.read_line(line, &mut events, look), events, spared)
                    })
                    .collect::<Vec<_>>()
            };
            let (looking, reading) = (read(true), read(false));
            spared += looking.iter().filter(|(_, _, spared)| *spared).count();
            let strip = |lines: Vec<(LineOutcome, Vec<LogEvent>, bool)>| {
                lines
                    .into_iter()
                    .map(|(outcome, events, _)| (outcome, events))
                    .collect::<Vec<_>>()
            };
            assert_eq!(strip(looking), strip(reading), "{name}");
        }
        assert!(spared > 0, "no line was spared: the look does nothing");
        // Only Codex's own front is trusted; an output waits while a patch does.
        assert_eq!(
            front_types(br#"{"timestamp":"2026-02-23T11:41:32.240Z","type":"response_item","payload":{"type":"reasoning","summary":[]}}"#),
            Some((b"response_item".as_slice(), b"reasoning".as_slice()))
        );
        assert_eq!(
            front_types(br#"{"type":"response_item","payload":{"type":"reasoning"}}"#),
            None
        );
        assert_eq!(
            front_types(br#"{"timestamp":"a\"b","type":"event_msg","payload":{"type":"x"}}"#),
            None
        );
    }

    // ------------------------------------------------------------ golden files

    #[test]
    fn real_rollouts_add_up_to_ccusage_totals_without_its_reemits() {
        let Some(dir) = real_rollouts() else { return };
        // ccusage 20 (`ccusage codex session --offline --json`): input is non-cached input.
        let cases = [
            (
                "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
                99_460,
                1_651_968,
                14_600,
                28,
            ),
            (
                "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
                31_013,
                3_456,
                431,
                1,
            ),
            (
                "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
                59_525,
                238_848,
                1_123,
                6,
            ),
        ];
        for (name, input, cache_read, output, requests) in cases {
            let (events, skipped) = read(name, &std::fs::read(dir.join(name)).unwrap());
            let tokens = total_tokens(&events);
            assert_eq!(
                (tokens.input, tokens.cache_read, tokens.output),
                (input, cache_read, output),
                "{name}"
            );
            assert_eq!(tokens.cache_write(), 0, "{name}");
            assert_eq!(skipped, 0, "{name}");
            let usage: Vec<_> = events
                .iter()
                .filter(|e| matches!(e, LogEvent::Usage { .. }))
                .collect();
            assert_eq!(
                usage.len(),
                requests,
                "{name}: one event per advance of the totals"
            );
            // The localpush rollouts' call arguments are redacted: no plan, no file.
            assert!(
                files(&events).is_empty() && plans(&events).is_empty(),
                "{name}"
            );
            let thread = &name[name.len() - 42..name.len() - 6];
            for event in &events {
                assert_eq!(event.session_id(), thread, "{name}");
                if let LogEvent::Usage {
                    model,
                    key,
                    sidechain,
                    ..
                } = event
                {
                    assert_eq!((model.as_str(), sidechain), ("gpt-5.3-codex", &false));
                    let key = key.as_ref().expect("a total names each advance");
                    assert!(key.message_id.starts_with("totals:"), "{name}");
                }
            }
            assert!(matches!(events.last(), Some(LogEvent::Usage { .. })));
        }
        // 12-41-04 in full: 1,766,028 tokens, against ccusage's 3,416,998 before its fix.
        let name = cases[0].0;
        let (events, _) = read(name, &std::fs::read(dir.join(name)).unwrap());
        assert_eq!(total_tokens(&events).total(), 1_766_028);
    }

    #[test]
    fn project_fixtures_match_their_expected_summaries() {
        for name in [
            "plan-and-patch",
            "patch-forms",
            "totals-drop",
            "subagent-replay",
        ] {
            let bytes = fixture(&format!("{name}.jsonl"));
            let (events, skipped) = read(&format!("{name}.jsonl"), &bytes);
            let expected: Value =
                serde_json::from_slice(&fixture(&format!("{name}.expected.json"))).unwrap();
            assert_eq!(summary(&events, skipped), expected, "{name}");
        }
    }

    #[test]
    fn a_parser_stopped_after_any_line_and_resumed_says_the_same() {
        let mut files: Vec<(String, Vec<u8>)> = [
            "plan-and-patch",
            "patch-forms",
            "totals-drop",
            "subagent-replay",
        ]
        .iter()
        .map(|name| (format!("{name}.jsonl"), fixture(&format!("{name}.jsonl"))))
        .collect();
        if let Some(dir) = real_rollouts() {
            let name = "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl";
            files.push((name.to_owned(), std::fs::read(dir.join(name)).unwrap()));
        }
        for (name, bytes) in files {
            let (whole, _) = read(&name, &bytes);
            let all: Vec<&[u8]> = bytes
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .collect();
            for stop in 0..=all.len() {
                let mut parser = CodexParser::new(&name);
                let mut events = Vec::new();
                for line in &all[..stop] {
                    parser.line(line, &mut events);
                }
                let saved = serde_json::to_string(&parser).unwrap();
                let mut resumed: CodexParser = serde_json::from_str(&saved).unwrap();
                assert_eq!(resumed, parser);
                for line in &all[stop..] {
                    resumed.line(line, &mut events);
                }
                assert_eq!(events, whole, "{name}, stopped after {stop} lines");
            }
        }
    }

    // ------------------------------------------------------------ reading lines

    #[test]
    fn lines_are_read_as_json_in_any_order_spacing_and_escaping() {
        let lines_read = [
            r#"{"timestamp":"2026-02-23T12:00:00Z","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5.3-codex"}}"#,
            // payload first, spaces, an escaped key and escaped values.
            r#"  { "payload" : { "info" : { "total_token_usage" : { "output_tokens" : 5 , "input_tokens" : 100 , "cached_input_tokens" : 40 } } , "type" : "token\u005fcount" } , "type" : "event_msg" , "timestamp" : "2026-02-23T12:00:01Z" }  "#,
            "{\"type\":\"event_msg\",\"payload\":{\"type\":\"token_count\",\"info\":{\"total_token_usage\":{\"input_tokens\":150,\"cached_input_tokens\":40,\"output_tokens\":9}}}}\t",
        ];
        let (events, skipped) = lines(&lines_read.join("\n"));
        assert_eq!(skipped, 0);
        assert_eq!(
            total_tokens(&events),
            TokenCounts {
                input: 110,
                output: 9,
                cache_read: 40,
                ..TokenCounts::default()
            }
        );
        assert!(matches!(
            &events[1],
            LogEvent::Usage {
                at_ms: Some(1_771_848_001_000),
                ..
            }
        ));
    }

    #[test]
    fn what_is_not_a_json_object_is_skipped_and_never_panics() {
        let deep_array = "[".repeat(100_000) + &"]".repeat(100_000);
        let deep_object = "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000);
        let deep_in_payload = format!(
            "{{\"type\":\"turn_context\",\"payload\":{{\"cwd\":{}1{}}}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let deep_in_ignored = format!(
            "{{\"type\":\"x\",\"extra\":{}1{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let huge_string = format!(
            "{{\"type\":\"response_item\",\"payload\":{{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"{}\"}}}}",
            "x\\n".repeat(4_000_000)
        );
        let huge_garbage = "{\"type\":".to_owned() + &"x".repeat(10_000_000);
        let cases: Vec<(&str, Vec<u8>, LineOutcome)> = vec![
            ("garbage", b"not json at all".to_vec(), LineOutcome::Skipped),
            (
                "truncated",
                br#"{"type":"event_msg","payload":{"ty"#.to_vec(),
                LineOutcome::Skipped,
            ),
            (
                "invalid UTF-8",
                b"{\"type\":\"event_msg\",\"x\":\"\xff\xfe\"}".to_vec(),
                LineOutcome::Skipped,
            ),
            ("an array", b"[1,2,3]".to_vec(), LineOutcome::Skipped),
            (
                "a struct as an array",
                br#"["2026-02-23T12:00:00Z","event_msg",{}]"#.to_vec(),
                LineOutcome::Skipped,
            ),
            ("a number", b"42".to_vec(), LineOutcome::Skipped),
            (
                "a string",
                b"\"token_count\"".to_vec(),
                LineOutcome::Skipped,
            ),
            ("null", b"null".to_vec(), LineOutcome::Skipped),
            ("two objects", b"{} {}".to_vec(), LineOutcome::Skipped),
            (
                "100,000-deep arrays",
                deep_array.into_bytes(),
                LineOutcome::Skipped,
            ),
            // A JSON object however deep: read (its depth costs no recursion), saying nothing.
            (
                "100,000-deep objects",
                deep_object.into_bytes(),
                LineOutcome::Read,
            ),
            (
                "10 MB of garbage",
                huge_garbage.into_bytes(),
                LineOutcome::Skipped,
            ),
            ("an empty object", b"{}".to_vec(), LineOutcome::Read),
            (
                "an unknown record",
                br#"{"type":"compacted","payload":{"message":"..."}}"#.to_vec(),
                LineOutcome::Read,
            ),
            (
                "a payload of another type",
                br#"{"type":"event_msg","payload":"token_count"}"#.to_vec(),
                LineOutcome::Read,
            ),
            (
                "fields of other types",
                br#"{"type":7,"timestamp":[],"payload":{"type":{"a":1},"info":"x"}}"#.to_vec(),
                LineOutcome::Read,
            ),
            (
                "a key twice",
                br#"{"type":"event_msg","type":"turn_context"}"#.to_vec(),
                LineOutcome::Read,
            ),
            (
                "deep arrays in an ignored field",
                deep_in_ignored.into_bytes(),
                LineOutcome::Read,
            ),
            (
                "deep arrays where a string was expected",
                deep_in_payload.into_bytes(),
                LineOutcome::Read,
            ),
            ("a 12 MB line", huge_string.into_bytes(), LineOutcome::Read),
        ];
        for (what, line, expected) in cases {
            let mut parser = CodexParser::new("rollout-x.jsonl");
            let mut events = Vec::new();
            assert_eq!(parser.line(&line, &mut events), expected, "{what}");
            assert!(events.is_empty(), "{what}");
        }
    }

    // ------------------------------------------------------------ the session

    #[test]
    fn the_session_id_comes_from_session_meta_else_the_file_name() {
        let meta = r#"{"type":"session_meta","payload":{"id":"019c8a70-dda7-7f33-98ea-f30553347322","cwd":"/w"}}"#;
        let count = r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"output_tokens":1}}}}"#;
        let cases = [
            (
                "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
                format!("{meta}\n{count}"),
                "019c8a70-dda7-7f33-98ea-f30553347322",
            ),
            (
                "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
                count.to_owned(),
                "019c8a4d-8f45-7010-8b5d-7fad920aa6f9",
            ),
            (
                "/home/dev/.codex/sessions/2026/02/23/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
                count.to_owned(),
                "019c8a4d-8f45-7010-8b5d-7fad920aa6f9",
            ),
            ("odd-name.jsonl", count.to_owned(), "odd-name"),
            // An event said before a late session_meta fixed the id: it stays.
            (
                "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
                format!("{count}\n{meta}"),
                "019c8a4d-8f45-7010-8b5d-7fad920aa6f9",
            ),
        ];
        for (file_name, text, expected) in cases {
            let (events, _) = read(file_name, text.as_bytes());
            assert!(!events.is_empty());
            for event in &events {
                assert_eq!(event.session_id(), expected, "{file_name}: {text}");
            }
        }
    }

    #[test]
    fn the_session_is_announced_when_its_cwd_or_model_is_first_known_or_changes() {
        let text = [
            r#"{"timestamp":"2026-02-23T12:00:00Z","type":"session_meta","payload":{"id":"s","cwd":"/a"}}"#,
            r#"{"type":"turn_context","payload":{"cwd":"/a","collaboration_mode":{"mode":"default","settings":{"model":"gpt-5.2-codex"}}}}"#,
            r#"{"type":"turn_context","payload":{"cwd":"/a","model":"gpt-5.2-codex"}}"#,
            r#"{"type":"turn_context","payload":{"cwd":"/b","model":"gpt-5.2-codex"}}"#,
            r#"{"type":"event_msg","payload":{"type":"token_count","info":{"model":"gpt-5.4","total_token_usage":{"input_tokens":1}}}}"#,
            r#"{"type":"turn_context","payload":{"cwd":"/b"}}"#,
        ]
        .join("\n");
        let (events, _) = lines(&text);
        let announced: Vec<(Option<&str>, Option<&str>)> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Session { cwd, model, .. } => Some((cwd.as_deref(), model.as_deref())),
                _ => None,
            })
            .collect();
        assert_eq!(
            announced,
            [
                (Some("/a"), None),
                (Some("/a"), Some("gpt-5.2-codex")),
                (Some("/b"), Some("gpt-5.2-codex")),
                (Some("/b"), Some("gpt-5.4")),
            ]
        );
        assert!(matches!(
            &events[0],
            LogEvent::Session {
                at_ms: Some(1_771_848_000_000),
                ..
            }
        ));
        assert!(matches!(&events[4], LogEvent::Usage { model, .. } if model == "gpt-5.4"));
    }

    // ------------------------------------------------------------ tokens

    fn count(total: [u64; 3], last: Option<[u64; 3]>) -> String {
        let usage = |[input, cached, output]: [u64; 3]| {
            json!({"input_tokens": input, "cached_input_tokens": cached, "output_tokens": output,
                   "reasoning_output_tokens": 0, "total_tokens": input + output})
        };
        let mut info = json!({"total_token_usage": usage(total), "model_context_window": 258_400});
        if let Some(last) = last {
            info["last_token_usage"] = usage(last);
        }
        json!({"timestamp": "2026-02-23T12:00:00Z", "type": "event_msg",
               "payload": {"type": "token_count", "info": info, "rate_limits": {"primary": null}}})
        .to_string()
    }

    fn spent(events: &[LogEvent]) -> Vec<[u64; 3]> {
        events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Usage { tokens, .. } => {
                    Some([tokens.input, tokens.cache_read, tokens.output])
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn token_totals_count_once_per_advance() {
        let null_info =
            r#"{"type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{}}}"#;
        type Case = (&'static str, Vec<String>, Vec<[u64; 3]>);
        let cases: Vec<Case> = vec![
            (
                "the first count is a delta from zero",
                vec![count([100, 30, 5], Some([60, 10, 2]))],
                vec![[70, 30, 5]],
            ),
            (
                "info: null says nothing",
                vec![
                    null_info.to_owned(),
                    count([100, 30, 5], None),
                    null_info.to_owned(),
                ],
                vec![[70, 30, 5]],
            ),
            (
                "re-emitted totals are skipped",
                vec![
                    count([100, 30, 5], None),
                    count([100, 30, 5], None),
                    count([250, 130, 9], None),
                    count([250, 130, 9], None),
                ],
                vec![[70, 30, 5], [50, 100, 4]],
            ),
            (
                "totals that drop count last_token_usage",
                vec![
                    count([1000, 800, 50], None),
                    count([120, 20, 7], Some([120, 20, 7])),
                    count([300, 150, 10], None),
                ],
                vec![[200, 800, 50], [100, 20, 7], [50, 130, 3]],
            ),
            (
                "a drop without last_token_usage counts the totals",
                vec![count([1000, 800, 50], None), count([120, 20, 7], None)],
                vec![[200, 800, 50], [100, 20, 7]],
            ),
            (
                "a drop in one field alone is a reset",
                vec![
                    count([1000, 800, 50], None),
                    count([1100, 700, 60], Some([100, 0, 10])),
                ],
                vec![[200, 800, 50], [100, 0, 10]],
            ),
            (
                "cached above input never makes input negative",
                vec![count([10, 40, 1], None)],
                vec![[0, 10, 1]],
            ),
        ];
        for (what, counts, expected) in cases {
            let (events, skipped) = lines(&counts.join("\n"));
            assert_eq!(skipped, 0, "{what}");
            assert_eq!(spent(&events), expected, "{what}");
            for event in &events {
                if let LogEvent::Usage { key, model, .. } = event {
                    assert_eq!(model, "gpt-5", "{what}: ccusage's model");
                    assert!(
                        key.as_ref()
                            .is_some_and(|key| key.message_id.starts_with("totals:")),
                        "{what}: named by the totals"
                    );
                }
            }
        }
    }

    #[test]
    fn the_service_tier_in_force_bills_each_request_and_a_copy_counts_once() {
        let settings = |tier: Option<&str>| {
            let mut settings =
                serde_json::json!({"model": "gpt-5.5", "model_provider_id": "openai"});
            if let Some(tier) = tier {
                settings["service_tier"] = serde_json::json!(tier);
            }
            serde_json::json!({"timestamp": "2026-12-02T02:56:39.211Z", "type": "event_msg",
                "payload": {"type": "thread_settings_applied", "thread_id": "t", "thread_settings": settings}})
            .to_string()
        };
        let count = |input: u64| {
            format!(
                r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"output_tokens":1}}}}}}}}"#
            )
        };
        let rollout = [
            settings(Some("priority")),
            count(100),
            settings(None),
            count(300),
            settings(Some("default")),
            count(600),
        ]
        .join("\n");
        let (events, skipped) = lines(&rollout);
        assert_eq!(skipped, 0);
        let tiers: Vec<Option<String>> = events
            .iter()
            .filter_map(|event| match event {
                LogEvent::Usage { billing, .. } => Some(billing.service_tier.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(tiers, [Some("priority".to_owned()), None, None]);
        assert!(events.iter().any(|event| matches!(
            event,
            LogEvent::Session { model: Some(model), .. } if model == "gpt-5.5"
        )));
        // The same rollout twice (archived beside its original): its requests count once.
        let mut summary = crate::work::summary::Summary::default();
        for _ in 0..2 {
            for event in lines(&rollout).0 {
                summary.add(crate::work::events::Framework::Codex, event);
            }
        }
        let total: u64 = summary
            .sessions
            .values()
            .map(|session| {
                session
                    .tokens_by_model()
                    .values()
                    .map(TokenCounts::total)
                    .sum::<u64>()
            })
            .sum();
        assert_eq!(total, 601, "100 + 1, then 200, then 300: once");
    }

    #[test]
    fn cache_writes_are_input_written_to_the_cache() {
        let line = r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"cached_input_tokens":600,"cache_write_input_tokens":300,"output_tokens":50,"reasoning_output_tokens":20}}}}"#;
        let (events, _) = lines(line);
        assert_eq!(
            total_tokens(&events),
            TokenCounts {
                input: 100,
                output: 50,
                cache_write_5m: 300,
                cache_write_1h: 0,
                cache_read: 600
            }
        );
    }

    // ------------------------------------------------------------ forks and subagents

    /// A child thread: its own id, then a replayed parent turn, then `own_turn`.
    fn child(meta_payload: Value, own_turn: &str) -> String {
        let meta = json!({"timestamp": "2026-05-05T21:51:57.991Z", "type": "session_meta", "payload": meta_payload});
        [
            meta.to_string(),
            r#"{"type":"session_meta","payload":{"id":"019c8a4d-0000-7000-8000-000000000001","cwd":"/parent","source":"vscode"}}"#.to_owned(),
            r#"{"type":"event_msg","payload":{"type":"task_started","turn_id":"019c8a4d-0001-7000-8000-000000000002"}}"#.to_owned(),
            r#"{"type":"turn_context","payload":{"turn_id":"019c8a4d-0001-7000-8000-000000000002","cwd":"/parent","model":"gpt-5.5"}}"#.to_owned(),
            count([116_000, 114_000, 1000], Some([73_000, 72_000, 500])),
            r#"{"type":"response_item","payload":{"type":"function_call","name":"update_plan","call_id":"p","arguments":"{\"plan\":[{\"step\":\"Parent's\",\"status\":\"pending\"}]}"}}"#.to_owned(),
            r#"{"type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","call_id":"a","input":"*** Begin Patch\n*** Add File: parent.txt\n+x\n*** End Patch"}}"#.to_owned(),
            r#"{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"a","output":"Exit code: 0\nOutput:\nSuccess."}}"#.to_owned(),
            own_turn.to_owned(),
            count([116_000, 114_000, 1000], Some([73_000, 72_000, 500])),
            count([117_500, 115_000, 1200], Some([1500, 1000, 200])),
        ]
        .join("\n")
    }

    #[test]
    fn a_child_thread_counts_nothing_of_its_parents_replay() {
        let spawned = json!({"id": "019c8a4d-8f45-7010-8b5d-7fad920aa6f9", "cwd": "/child",
            "source": {"subagent": {"thread_spawn": {"parent_thread_id": "019c8a4d-0000-7000-8000-000000000001", "depth": 1}}}});
        let forked = json!({"id": "019c8a4d-8f45-7010-8b5d-7fad920aa6f9", "cwd": "/child",
            "forked_from_id": "019c8a4d-0000-7000-8000-000000000001", "source": "vscode"});
        let own_context = r#"{"type":"turn_context","payload":{"turn_id":"019c8a4d-8f46-7000-8000-000000000003","cwd":"/child","model":"gpt-5.5-mini"}}"#;
        let own_start = r#"{"type":"event_msg","payload":{"type":"task_started","turn_id":"019c8a4d-8f45-7000-8000-000000000003"}}"#;
        let cases = [
            (
                "spawned, own turn_context",
                spawned.clone(),
                own_context,
                true,
            ),
            (
                "spawned, own task_started (same millisecond)",
                spawned.clone(),
                own_start,
                true,
            ),
            ("user fork", forked, own_context, false),
        ];
        for (what, meta, own, is_subagent) in cases {
            let (events, _) = lines(&child(meta, own));
            assert_eq!(spent(&events), [[500, 1000, 200]], "{what}");
            assert!(
                plans(&events).is_empty() && files(&events).is_empty(),
                "{what}"
            );
            for event in &events {
                assert_eq!(
                    event.session_id(),
                    "019c8a4d-8f45-7010-8b5d-7fad920aa6f9",
                    "{what}"
                );
                match event {
                    LogEvent::Session { cwd, .. } => {
                        assert_eq!(cwd.as_deref(), Some("/child"), "{what}")
                    }
                    LogEvent::Usage { sidechain, .. } => {
                        assert_eq!(*sidechain, is_subagent, "{what}")
                    }
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn without_uuid_v7_ids_the_first_turn_ends_a_replay() {
        let meta = json!({"id": "child-thread", "forked_from_id": "parent-thread"});
        let text = [
            json!({"type": "session_meta", "payload": meta}).to_string(),
            count([1000, 0, 100], None),
            r#"{"type":"turn_context","payload":{"model":"gpt-5.5","cwd":"/c"}}"#.to_owned(),
            count([1000, 0, 100], None),
            count([1010, 0, 102], None),
        ]
        .join("\n");
        let (events, _) = lines(&text);
        assert_eq!(spent(&events), [[10, 0, 2]]);
    }

    // ------------------------------------------------------------ plans

    #[test]
    fn each_update_plan_replaces_the_task_list_when_codex_would_accept_it() {
        let call = |kind: &str, field: &str, arguments: &str| {
            json!({"type": "response_item", "payload": {"type": kind, "name": "update_plan", "call_id": "c", field: arguments}})
                .to_string()
        };
        let valid = r#"{"explanation":"why","plan":[{"step":"Parse","status":"completed"},{"step":"Render","status":"in_progress"},{"step":"Ship","status":"pending"}]}"#;
        let expected = vec![
            TaskItem {
                id: None,
                title: "Parse".into(),
                status: TaskStatus::Completed,
                active_form: None,
            },
            TaskItem {
                id: None,
                title: "Render".into(),
                status: TaskStatus::InProgress,
                active_form: None,
            },
            TaskItem {
                id: None,
                title: "Ship".into(),
                status: TaskStatus::Pending,
                active_form: None,
            },
        ];
        let cases: Vec<(&str, String, Option<Vec<TaskItem>>)> = vec![
            ("function_call arguments", call("function_call", "arguments", valid), Some(expected.clone())),
            ("custom_tool_call input", call("custom_tool_call", "input", valid), Some(expected)),
            ("an empty plan", call("function_call", "arguments", r#"{"plan":[]}"#), Some(vec![])),
            ("arguments that are not JSON", call("function_call", "arguments", "{\"plan\":[{"), None),
            ("no plan", call("function_call", "arguments", r#"{"explanation":"x"}"#), None),
            ("a status Codex rejects", call("function_call", "arguments", r#"{"plan":[{"step":"A","status":"blocked"}]}"#), None),
            ("a step without its status", call("function_call", "arguments", r#"{"plan":[{"step":"A"}]}"#), None),
            ("arguments as an object", json!({"type": "response_item", "payload": {"type": "function_call", "name": "update_plan", "arguments": {"plan": []}}}).to_string(), None),
        ];
        for (what, line, expected) in cases {
            let (events, skipped) = lines(&line);
            assert_eq!(skipped, 0, "{what}");
            let found: Vec<Vec<TaskItem>> = plans(&events).into_iter().cloned().collect();
            assert_eq!(found, expected.into_iter().collect::<Vec<_>>(), "{what}");
            for event in &events {
                if let LogEvent::Tasks { lane, source, .. } = event {
                    assert_eq!((lane, source.as_str()), (&None, "update_plan"), "{what}");
                }
            }
        }
    }

    // ------------------------------------------------------------ files

    /// A call and its output (when given), after a turn in `/home/dev/app`.
    fn patch_exchange(call: Value, output: Option<Value>) -> Vec<String> {
        let context =
            r#"{"type":"turn_context","payload":{"cwd":"/home/dev/app","model":"gpt-5.3-codex"}}"#;
        let mut text = vec![
            context.to_owned(),
            json!({"type": "response_item", "payload": call}).to_string(),
        ];
        if let Some(output) = output {
            text.push(json!({"type": "response_item", "payload": output}).to_string());
        }
        let (events, skipped) = lines(&text.join("\n"));
        assert_eq!(skipped, 0);
        files(&events).into_iter().map(str::to_owned).collect()
    }

    #[test]
    fn patched_files_are_reported_when_the_patch_succeeded() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: src/b.rs\n*** Move to: src/c.rs\n@@\n-y\n+z\n*** Delete File: ./old/../d.txt\n*** End Patch";
        let all = [
            "/home/dev/app/a.txt",
            "/home/dev/app/src/b.rs",
            "/home/dev/app/src/c.rs",
            "/home/dev/app/d.txt",
        ];
        let custom = json!({"type": "custom_tool_call", "name": "apply_patch", "call_id": "c1", "input": patch});
        let function = json!({"type": "function_call", "name": "apply_patch", "call_id": "c1",
                              "arguments": json!({"input": patch}).to_string()});
        let output =
            |kind: &str, output: Value| json!({"type": kind, "call_id": "c1", "output": output});
        let custom_output = |text: &str| Some(output("custom_tool_call_output", json!(text)));
        let cases: Vec<(&str, Value, Option<Value>, bool)> = vec![
            ("freeform, exit code 0", custom.clone(), custom_output("Exit code: 0\nWall time: 0.1 seconds\nOutput:\nSuccess. Updated the following files:\nA a.txt\n"), true),
            ("freeform, exit code 1", custom.clone(), custom_output("Exit code: 1\nWall time: 0.1 seconds\nOutput:\nerror: no such file\n"), false),
            ("verification failed", custom.clone(), custom_output("apply_patch verification failed: Failed to find expected lines in /home/dev/app/src/b.rs"), false),
            ("rejected", custom.clone(), custom_output("patch rejected: writing outside of the project; rejected by user approval settings"), false),
            ("aborted", custom.clone(), custom_output("aborted"), false),
            ("a bare success", custom.clone(), custom_output("Success. Updated the following files:\nA a.txt"), true),
            ("no output yet", custom.clone(), None, false),
            ("an output for another call", custom.clone(), Some(json!({"type": "custom_tool_call_output", "call_id": "other", "output": "Success."})), false),
            ("function, JSON output, exit 0", function.clone(), Some(output("function_call_output", json!(json!({"output": "Success.", "metadata": {"exit_code": 0, "duration_seconds": 0.1}}).to_string()))), true),
            ("function, JSON output, exit 1", function.clone(), Some(output("function_call_output", json!(json!({"output": "Success.", "metadata": {"exit_code": 1}}).to_string()))), false),
            ("function, success: false", function.clone(), Some(output("function_call_output", json!({"content": "Success.", "success": false}))), false),
            ("function, content items", function.clone(), Some(output("function_call_output", json!([{"type": "input_text", "text": "Exit code: 0\nOutput:\nSuccess."}]))), true),
            ("function, content items that failed", function.clone(), Some(output("function_call_output", json!([{"type": "input_text", "text": "Exit code: 2\nOutput:\n"}]))), false),
            ("unified exec, exited 0", function.clone(), Some(output("function_call_output", json!("Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nSuccess."))), true),
            ("unified exec, still running", function.clone(), Some(output("function_call_output", json!("Process running with session ID 7\nOutput:\n"))), false),
            ("function, arguments {patch}", json!({"type": "function_call", "name": "apply_patch", "call_id": "c1", "arguments": json!({"patch": patch}).to_string()}), custom_output("Exit code: 0\nOutput:\n"), true),
        ];
        for (what, call, output, reported) in cases {
            let expected: Vec<&str> = if reported { all.to_vec() } else { vec![] };
            assert_eq!(patch_exchange(call, output), expected, "{what}");
        }
    }

    #[test]
    fn patches_run_through_a_shell_are_read_with_their_working_directory() {
        let patch = "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\n";
        let heredoc = format!("apply_patch <<'EOF'\n{patch}EOF\n");
        let call = |name: &str, arguments: Value| json!({"type": "function_call", "name": name, "call_id": "s1", "arguments": arguments.to_string()});
        let ok = Some(json!({"type": "function_call_output", "call_id": "s1",
                             "output": json!({"output": "Success.", "metadata": {"exit_code": 0}}).to_string()}));
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "shell argv",
                call("shell", json!({"command": ["apply_patch", patch]})),
                vec!["/home/dev/app/x.txt"],
            ),
            (
                "shell argv with workdir",
                call(
                    "shell",
                    json!({"command": ["apply_patch", patch], "workdir": "sub"}),
                ),
                vec!["/home/dev/app/sub/x.txt"],
            ),
            (
                "bash -lc heredoc",
                call(
                    "shell",
                    json!({"command": ["bash", "-lc", heredoc], "workdir": "/srv"}),
                ),
                vec!["/srv/x.txt"],
            ),
            (
                "shell_command with cd",
                call(
                    "shell_command",
                    json!({"command": format!("cd 'web' && {heredoc}")}),
                ),
                vec!["/home/dev/app/web/x.txt"],
            ),
            (
                "exec_command cmd",
                call(
                    "exec_command",
                    json!({"cmd": heredoc, "workdir": "/home/dev/app/../lib"}),
                ),
                vec!["/home/dev/lib/x.txt"],
            ),
            (
                "a command that only mentions a patch",
                call(
                    "exec_command",
                    json!({"cmd": format!("cat <<'EOF'\n{patch}EOF")}),
                ),
                vec![],
            ),
            (
                "a plain command",
                call("exec_command", json!({"cmd": "ls"})),
                vec![],
            ),
            (
                "a tool of another name",
                call("read_file", json!({"cmd": heredoc})),
                vec![],
            ),
        ];
        for (what, call, expected) in cases {
            assert_eq!(patch_exchange(call, ok.clone()), expected, "{what}");
        }
    }

    #[test]
    fn paths_resolve_against_the_directory_lexically() {
        let cases = [
            (Some("/home/dev/app"), "src/a.rs", "/home/dev/app/src/a.rs"),
            (
                Some("/home/dev/app/"),
                "./src/./a.rs",
                "/home/dev/app/src/a.rs",
            ),
            (Some("/home/dev/app"), "../lib/a.rs", "/home/dev/lib/a.rs"),
            (Some("/home/dev/app"), "../../../../etc/x", "/etc/x"),
            (Some("/home/dev/app"), "/abs//path/./x", "/abs/path/x"),
            (Some("/"), "a", "/a"),
            (None, "./src/../a.rs", "a.rs"),
            (None, "../a.rs", "../a.rs"),
            (Some(r"C:\work\app"), r"src\a.rs", r"C:\work\app\src\a.rs"),
            (Some(r"C:\work\app"), "../lib/a.rs", r"C:\work\lib\a.rs"),
            (Some("/home/dev/app"), r"D:\x\y", r"D:\x\y"),
        ];
        for (dir, path, expected) in cases {
            assert_eq!(resolve_path(dir, path), expected, "{dir:?} {path}");
        }
    }

    #[test]
    fn patch_headers_name_the_files_once_each() {
        let patch = "*** Begin Patch\n*** Update File: a.rs\n@@\n *** Add File: context.rs\n-*** Delete File: removed-line.rs\n+x\n*** Update File: a.rs\n*** Move to: b.rs\r\n*** Add File:   \n*** End Patch";
        assert_eq!(patch_paths(patch, Some("/w")), ["/w/a.rs", "/w/b.rs"]);
    }

    #[test]
    fn calls_waiting_for_their_output_are_bounded() {
        let mut parser = CodexParser::new("rollout-x.jsonl");
        let mut events = Vec::new();
        for n in 0..1000 {
            let call = json!({"type": "response_item", "payload": {"type": "custom_tool_call", "name": "apply_patch",
                "call_id": format!("c{n}"), "input": "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch"}});
            parser.line(call.to_string().as_bytes(), &mut events);
        }
        assert_eq!(parser.pending_patches.len(), MAX_PENDING_PATCHES);
        assert_eq!(
            parser.pending_patches[0].call_id,
            format!("c{}", 1000 - MAX_PENDING_PATCHES)
        );
    }

    // ------------------------------------------------------------ properties

    /// Lines of a real-shaped rollout (the project fixtures), to cut and mutate.
    fn fixture_lines() -> Vec<Vec<u8>> {
        [
            "plan-and-patch",
            "patch-forms",
            "totals-drop",
            "subagent-replay",
        ]
        .iter()
        .flat_map(|name| {
            fixture(&format!("{name}.jsonl"))
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec)
                .collect::<Vec<_>>()
        })
        .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_bytes_are_read_or_skipped_without_a_panic(lines in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..20)) {
            let mut parser = CodexParser::new("rollout-x.jsonl");
            let mut events = Vec::new();
            for line in &lines {
                parser.line(line, &mut events);
            }
        }

        #[test]
        fn cut_or_mutated_real_lines_never_panic(index in 0usize..1000, cut in 0usize..4000, flip in 0usize..4000, byte in any::<u8>()) {
            let all = fixture_lines();
            let mut line = all[index % all.len()].clone();
            if !line.is_empty() {
                let at = flip % line.len();
                line[at] = byte;
                line.truncate(cut.max(1).min(line.len()));
            }
            let mut parser = CodexParser::new("rollout-x.jsonl");
            let mut events = Vec::new();
            for earlier in all.iter().take(index % all.len()) {
                parser.line(earlier, &mut events);
            }
            parser.line(&line, &mut events);
        }
    }
}
