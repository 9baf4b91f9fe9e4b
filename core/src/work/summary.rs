//! Adding up what logs say, per session: the last task list of each lane, the files
//! touched, and the tokens spent — each model request counted once however many lines and
//! files repeat it (the largest report of a request wins; a side chain's copy of a main
//! chain's request is dropped). Pure: events in, summaries out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::pricing::{PriceMemo, Pricing};
use crate::log_events::{Billing, Framework, LogEvent, TaskItem, TokenCounts};

/// One report of a request, as kept for de-duplication.
#[derive(Debug, Clone, PartialEq)]
struct Request {
    request_id: Option<String>,
    sidechain: bool,
    model: String,
    tokens: TokenCounts,
    billing: Billing,
}

/// What one session's logs add up to so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionLog {
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub first_ms: Option<i64>,
    pub last_ms: Option<i64>,
    /// The last list of each lane (`""`: the session's own; else a subagent's id), with its
    /// source.
    pub tasks: BTreeMap<String, (String, Vec<TaskItem>)>,
    pub files: BTreeSet<String>,
    /// Reports of keyed requests, by message id.
    /// (Most messages have one report: it is kept inline.)
    requests: HashMap<String, smallvec::SmallVec<[Request; 1]>>,
    /// Keyless usage (each counts once), by model: each report, priced on its own.
    deltas: BTreeMap<String, Vec<(TokenCounts, Billing)>>,
}

impl SessionLog {
    fn seen(&mut self, at_ms: Option<i64>) {
        if let Some(at) = at_ms {
            self.first_ms = Some(self.first_ms.map_or(at, |first| first.min(at)));
            self.last_ms = Some(self.last_ms.map_or(at, |last| last.max(at)));
        }
    }

    fn add_request(&mut self, message_id: String, new: Request) {
        let reports = self.requests.entry(message_id).or_default();
        if let Some(same) = reports
            .iter_mut()
            .find(|report| report.request_id == new.request_id)
        {
            // The same request reported again: keep the largest (a later line of a
            // response carries the final output count).
            if new.tokens.total() > same.tokens.total() {
                let sidechain = same.sidechain && new.sidechain;
                *same = Request { sidechain, ..new };
            }
            return;
        }
        if reports.is_empty() {
            reports.push(new);
            return;
        }
        // Another request id for the same message: a side chain replays the main chain's
        // messages under new request ids; the main chain's report wins.
        let main_present = reports.iter().any(|report| !report.sidechain);
        if new.sidechain && main_present {
            return;
        }
        if !new.sidechain && reports.iter().any(|report| report.sidechain) {
            reports.retain(|report| !report.sidechain);
        }
        if new.sidechain && reports.iter().all(|report| report.sidechain) {
            // Side chains' own copies of one message: count it once.
            if let Some(kept) = reports.first_mut()
                && new.tokens.total() > kept.tokens.total()
            {
                *kept = new;
            }
            return;
        }
        reports.push(new);
    }

    /// Tokens by model.
    pub fn tokens_by_model(&self) -> BTreeMap<&str, TokenCounts> {
        let mut by_model: BTreeMap<&str, TokenCounts> = BTreeMap::new();
        for report in self.requests.values().flatten() {
            by_model
                .entry(report.model.as_str())
                .or_default()
                .add(&report.tokens);
        }
        for (model, deltas) in &self.deltas {
            let total = by_model.entry(model.as_str()).or_default();
            for (delta, _) in deltas {
                total.add(delta);
            }
        }
        by_model
    }

    /// The cost of every priced request, and the models without a price.
    pub fn cost(&self, prices: &mut PriceMemo<'_>) -> (f64, BTreeSet<String>) {
        let mut cost = 0.0;
        let mut unpriced = BTreeSet::new();
        let mut add = |model: &str, tokens: &TokenCounts, billing: &Billing| {
            if tokens.total() == 0 && billing.web_searches == 0 {
                return;
            }
            match prices.cost(model, tokens, billing) {
                Some(charged) => cost += charged,
                None => {
                    unpriced.insert(model.to_owned());
                }
            }
        };
        for report in self.requests.values().flatten() {
            add(&report.model, &report.tokens, &report.billing);
        }
        for (model, deltas) in &self.deltas {
            for (delta, billing) in deltas {
                add(model, delta, billing);
            }
        }
        (cost, unpriced)
    }
}

/// Sessions, by framework and id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub sessions: BTreeMap<(Framework, String), SessionLog>,
    pub skipped_lines: u64,
    /// Claude Code's Task tools' store: per list (a session id), its tasks by id.
    task_files: BTreeMap<String, BTreeMap<String, TaskItem>>,
}

/// Orders task ids as numbers when they are (`2` before `10`).
fn task_order(id: &str) -> (u64, String) {
    (id.parse().unwrap_or(u64::MAX), id.to_owned())
}

impl Summary {
    /// Adds a task of Claude Code's store (`tasks/<list>/<id>.json`): it fills in the task
    /// list of a session whose transcript has none.
    pub fn add_task_file(&mut self, path: &std::path::Path, task: TaskItem) {
        let Some(list) = path
            .parent()
            .and_then(std::path::Path::file_name)
            .map(|name| name.to_string_lossy().into_owned())
        else {
            return;
        };
        let id = task.id.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        self.task_files.entry(list).or_default().insert(id, task);
    }

    /// Turns the task store into the lists of sessions that have no list of their own.
    fn settle_task_files(&mut self) {
        for (list, tasks) in std::mem::take(&mut self.task_files) {
            let session = self
                .sessions
                .entry((Framework::ClaudeCode, list))
                .or_default();
            if session.tasks.contains_key("") {
                continue;
            }
            let mut ordered: Vec<(String, TaskItem)> = tasks.into_iter().collect();
            ordered.sort_by_key(|(id, _)| task_order(id));
            session.tasks.insert(
                String::new(),
                (
                    "task_file".to_owned(),
                    ordered.into_iter().map(|(_, task)| task).collect(),
                ),
            );
        }
    }

    /// Adds what one log said.
    pub fn add(&mut self, framework: Framework, event: LogEvent) {
        let session = self
            .sessions
            .entry((framework, event.session_id().to_owned()))
            .or_default();
        match event {
            LogEvent::Session {
                cwd, model, at_ms, ..
            } => {
                if cwd.is_some() {
                    session.cwd = cwd;
                }
                if model.is_some() {
                    session.model = model;
                }
                session.seen(at_ms);
            }
            LogEvent::Tasks {
                lane,
                source,
                tasks,
                at_ms,
                ..
            } => {
                session
                    .tasks
                    .insert(lane.unwrap_or_default(), (source, tasks));
                session.seen(at_ms);
            }
            LogEvent::FileTouched { path, at_ms, .. } => {
                session.files.insert(path);
                session.seen(at_ms);
            }
            LogEvent::Usage {
                key,
                sidechain,
                model,
                tokens,
                billing,
                at_ms,
                ..
            } => {
                if session.model.is_none() {
                    session.model = Some(model.clone());
                }
                session.seen(at_ms);
                match key {
                    Some(key) => session.add_request(
                        key.message_id,
                        Request {
                            request_id: key.request_id,
                            sidechain,
                            model,
                            tokens,
                            billing,
                        },
                    ),
                    None => session
                        .deltas
                        .entry(model)
                        .or_default()
                        .push((tokens, billing)),
                }
            }
        }
    }

    /// Another summary's sessions added to these (a file read by another thread). Keyed
    /// requests are de-duplicated across both.
    pub fn merge(&mut self, other: Summary) {
        self.skipped_lines += other.skipped_lines;
        for (list, tasks) in other.task_files {
            self.task_files.entry(list).or_default().extend(tasks);
        }
        for (key, theirs) in other.sessions {
            // Most sessions were read by one thread only: taken whole.
            let ours = match self.sessions.entry(key) {
                std::collections::btree_map::Entry::Vacant(vacant) => {
                    vacant.insert(theirs);
                    continue;
                }
                std::collections::btree_map::Entry::Occupied(occupied) => occupied.into_mut(),
            };
            if theirs.cwd.is_some() {
                ours.cwd = theirs.cwd;
            }
            if ours.model.is_none() || theirs.last_ms >= ours.last_ms {
                ours.model = theirs.model.or(ours.model.take());
            }
            ours.seen(theirs.first_ms);
            ours.seen(theirs.last_ms);
            for (lane, list) in theirs.tasks {
                ours.tasks.insert(lane, list);
            }
            ours.files.extend(theirs.files);
            for (message_id, reports) in theirs.requests {
                for report in reports {
                    ours.add_request(message_id.clone(), report);
                }
            }
            for (model, deltas) in theirs.deltas {
                ours.deltas.entry(model).or_default().extend(deltas);
            }
        }
    }

    /// The summary as `roundtable scan --json` prints it, added up on `threads` threads.
    /// (It is kept: freeing a large summary takes a while, which a program about to end
    /// can spare itself.)
    pub fn report(&mut self, pricing: &Pricing, threads: usize) -> ScanReport {
        self.settle_task_files();
        let logs: Vec<_> = self.sessions.iter().collect();
        let share = logs.len().div_ceil(threads.max(1)).max(1);
        let sessions = std::thread::scope(|scope| {
            let parts: Vec<_> = logs
                .chunks(share)
                .map(|part| {
                    scope.spawn(move || {
                        let mut prices = PriceMemo::new(pricing);
                        part.iter()
                            .map(|((framework, session_id), log)| {
                                log.scanned(*framework, session_id, &mut prices)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            parts
                .into_iter()
                .flat_map(|part| {
                    part.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        ScanReport {
            sessions,
            skipped_lines: self.skipped_lines,
        }
    }
}

impl SessionLog {
    /// The session as `roundtable scan` shows it.
    fn scanned(
        &self,
        framework: Framework,
        session_id: &str,
        prices: &mut PriceMemo<'_>,
    ) -> ScannedSession {
        let mut tokens = TokenCounts::default();
        for counts in self.tokens_by_model().values() {
            tokens.add(counts);
        }
        let (cost, unpriced) = self.cost(prices);
        ScannedSession {
            framework,
            session_id: session_id.to_owned(),
            model: self.model.clone(),
            tasks: self
                .tasks
                .get("")
                .map(|(_, tasks)| tasks.clone())
                .unwrap_or_default(),
            files: self.files.iter().cloned().collect(),
            tokens: ScannedTokens {
                input: tokens.input,
                output: tokens.output,
                cache_write: tokens.cache_write(),
                cache_read: tokens.cache_read,
            },
            cost_usd: unpriced.is_empty().then_some(cost),
            unpriced_models: unpriced.into_iter().collect(),
        }
    }
}

/// `roundtable scan --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScanReport {
    pub sessions: Vec<ScannedSession>,
    pub skipped_lines: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScannedSession {
    pub framework: Framework,
    pub session_id: String,
    pub model: Option<String>,
    pub tasks: Vec<TaskItem>,
    /// Absolute paths.
    pub files: Vec<String>,
    pub tokens: ScannedTokens,
    /// Absent when some usage is of a model without a price (see `unpriced_models`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unpriced_models: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScannedTokens {
    /// Input not read from the cache.
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_events::RequestKey;

    fn usage(message: &str, request: &str, sidechain: bool, output: u64) -> LogEvent {
        LogEvent::Usage {
            session_id: "s".into(),
            key: Some(RequestKey {
                message_id: message.into(),
                request_id: Some(request.into()),
            }),
            sidechain,
            model: "claude-sonnet-4-5".into(),
            tokens: TokenCounts {
                input: 10,
                output,
                ..TokenCounts::default()
            },
            billing: Billing::default(),
            at_ms: Some(1),
        }
    }

    fn total(summary: &Summary) -> TokenCounts {
        let log = &summary.sessions[&(Framework::ClaudeCode, "s".to_owned())];
        let mut tokens = TokenCounts::default();
        for counts in log.tokens_by_model().values() {
            tokens.add(counts);
        }
        tokens
    }

    #[test]
    fn a_request_counts_once_with_its_largest_report() {
        let mut summary = Summary::default();
        for event in [
            usage("m1", "r1", false, 8),
            usage("m1", "r1", false, 231),
            usage("m1", "r1", false, 100),
            usage("m2", "r2", false, 5),
        ] {
            summary.add(Framework::ClaudeCode, event);
        }
        assert_eq!(total(&summary).output, 236);
        assert_eq!(total(&summary).input, 20);
    }

    #[test]
    fn a_side_chains_replay_of_the_main_chain_is_dropped_whatever_the_order() {
        for order in [[0, 1, 2], [1, 0, 2], [2, 1, 0]] {
            let events = [
                usage("m1", "r1", false, 50),
                usage("m1", "r-side", true, 50),
                usage("m9", "r9", true, 7),
            ];
            let mut summary = Summary::default();
            for i in order {
                summary.add(Framework::ClaudeCode, events[i].clone());
            }
            assert_eq!(total(&summary).output, 57, "{order:?}");
        }
    }

    #[test]
    fn summaries_of_separate_files_merge_as_one_pass() {
        let mut elsewhere = usage("m7", "r7", false, 5);
        if let LogEvent::Usage { session_id, .. } = &mut elsewhere {
            *session_id = "another".into();
        }
        let events = [
            usage("m1", "r1", false, 8),
            usage("m2", "r2", true, 3),
            usage("m1", "r1", false, 40),
            elsewhere,
        ];
        let mut one = Summary::default();
        for event in events.clone() {
            one.add(Framework::ClaudeCode, event);
        }
        let mut first = Summary::default();
        first.add(Framework::ClaudeCode, events[0].clone());
        let mut second = Summary::default();
        for event in &events[1..] {
            second.add(Framework::ClaudeCode, event.clone());
        }
        first.merge(second);
        assert_eq!(total(&first), total(&one));
        // A session only the second had is taken as it was.
        let pricing = Pricing::built_in();
        assert_eq!(first.report(&pricing, 2), one.report(&pricing, 1));
    }

    #[test]
    fn an_unpriced_model_leaves_the_cost_out() {
        let mut summary = Summary::default();
        summary.add(
            Framework::Codex,
            LogEvent::Usage {
                session_id: "t".into(),
                key: None,
                sidechain: false,
                model: "homegrown-9".into(),
                tokens: TokenCounts {
                    input: 100,
                    ..TokenCounts::default()
                },
                billing: Billing::default(),
                at_ms: None,
            },
        );
        let report = summary.report(&Pricing::built_in(), 2);
        assert_eq!(report.sessions[0].cost_usd, None);
        assert_eq!(report.sessions[0].unpriced_models, ["homegrown-9"]);
    }
}
