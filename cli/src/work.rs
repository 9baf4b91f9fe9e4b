//! The work view from the command line: `roundtable scan` (this machine's agent logs, read
//! once, no hub needed), `roundtable watch` (follow them, publish onboarded agents' work),
//! and the views over the cache: `usage`, `tasks`, `arch`, `digest`.

use roundtable_protocol::bodies::ComponentStatus;
use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::time::Instant;

use roundtable_core::budgets::{Budget, BudgetLevel, BudgetPeriod, BudgetScope};
use roundtable_core::cache::UsageQuery;
use roundtable_core::client::PATIENCE;
use roundtable_core::local_agents::Environment;
use roundtable_core::work::digest::RoomDigest;
use roundtable_core::work::figures::Grouping;
use roundtable_core::work::pricing::Pricing;
use roundtable_core::work::scan;
use roundtable_core::work::watch::{WatchOptions, WatchState};
use roundtable_core::{Core, SyncOptions, now_ms};

use crate::args::BudgetCommand;
use crate::client::{Exit, Failure, Out};

fn pricing() -> Result<Pricing, Failure> {
    Pricing::with_overrides(&Pricing::override_paths())
        .map_err(|error| Failure::new(Exit::Usage, error.to_string()))
}

/// A progress line, shown once per tenth of the work: redrawn in place on a terminal, and
/// printed as a line of its own elsewhere, so a log keeps ten lines rather than thousands
/// or a run of carriage returns.
struct ProgressLine {
    terminal: bool,
    /// The tenth of the work last shown (and whether anything was).
    shown: Option<u64>,
    /// The width of the line last drawn on the terminal, to blank what a shorter one leaves.
    width: usize,
}

impl ProgressLine {
    fn new(terminal: bool) -> ProgressLine {
        ProgressLine {
            terminal,
            shown: None,
            width: 0,
        }
    }

    /// What to write for `done` of `total` described by `text`, if anything.
    fn update(&mut self, done: u64, total: u64, text: &str) -> Option<String> {
        let tenth = if done >= total {
            10
        } else {
            done * 10 / total.max(1)
        };
        if self.shown.is_some_and(|shown| shown >= tenth) {
            return None;
        }
        self.shown = Some(tenth);
        if !self.terminal {
            return Some(format!("{text}\n"));
        }
        let pad = self.width.saturating_sub(text.chars().count());
        self.width = text.chars().count();
        Some(format!("\r{text}{}", " ".repeat(pad)))
    }

    /// What ends the line: a newline on a terminal when one was drawn.
    fn finish(self) -> &'static str {
        if self.terminal && self.shown.is_some() {
            "\n"
        } else {
            ""
        }
    }
}

/// `roundtable scan`: every agent log of this machine, read afresh.
pub fn scan(out: &Out) -> Result<(), Failure> {
    let env = Environment::current();
    let started = Instant::now();
    let (files, links) = scan::find(&scan::roots(&env));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let line = Mutex::new(ProgressLine::new(std::io::stderr().is_terminal()));
    let mut summary = scan::scan(&files, threads, &|progress| {
        // To stderr: stdout carries only the result.
        let text = format!(
            "scanning: {}/{} files, {:.1}/{:.1} MB",
            progress.files_done,
            progress.files,
            progress.bytes_done as f64 / 1e6,
            progress.bytes as f64 / 1e6
        );
        let mut line = line.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(write) = line.update(progress.bytes_done, progress.bytes, &text) {
            eprint!("{write}");
        }
    });
    let finish = line
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .finish();
    eprint!("{finish}");
    let report = summary.report(&pricing()?, threads);
    // Freeing the summary's many small allocations takes longer than the exit that
    // reclaims them at once.
    std::mem::forget(summary);
    if links > 0 {
        eprintln!("skipped {links} links that point outside the logs' directories");
    }
    eprintln!(
        "read {} files in {:.2} s",
        files.len(),
        started.elapsed().as_secs_f64()
    );
    out.show(ScanText(&report), &report)
}

/// `roundtable scan` as text: a line per session (written only when shown).
struct ScanText<'a>(&'a roundtable_core::work::summary::ScanReport);

impl std::fmt::Display for ScanText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.sessions.is_empty() {
            return write!(f, "no agent logs found");
        }
        for (n, session) in self.0.sessions.iter().enumerate() {
            if n > 0 {
                writeln!(f)?;
            }
            let tokens = session.tokens.input
                + session.tokens.output
                + session.tokens.cache_write
                + session.tokens.cache_read;
            write!(
                f,
                "{:<11} {}  {}  {} tokens  ",
                session.framework.as_str(),
                session.session_id,
                session.model.as_deref().unwrap_or("-"),
                tokens,
            )?;
            match session.cost_usd {
                Some(cost) => write!(f, "${cost:.4}")?,
                None => write!(f, "unpriced ({})", session.unpriced_models.join(", "))?,
            }
            write!(
                f,
                "  {} tasks  {} files",
                session.tasks.len(),
                session.files.len()
            )?;
        }
        Ok(())
    }
}

/// The watcher's settings for `core`'s person.
fn watch_options(core: &Core) -> Result<WatchOptions, Failure> {
    Ok(WatchOptions {
        env: Environment::current(),
        profiles: core.profile().base().to_path_buf(),
        pricing: pricing()?,
        share_rooms: core.profile().share_rooms.clone(),
    })
}

/// `roundtable watch`: follow the logs until interrupted.
pub async fn watch(core: &Core, out: &Out) -> Result<(), Failure> {
    let sync = core.start_with(SyncOptions {
        serve_hand_offs: true,
    });
    let watcher = core.watch_logs(watch_options(core)?);
    let mut state = watcher.state.clone();
    loop {
        let current = state.borrow_and_update().clone();
        match &current {
            WatchState::Scanning {
                files_done, files, ..
            } => eprintln!("reading the agent logs: {files_done}/{files} files"),
            WatchState::Watching { files } => {
                out.show(format!("watching {files} agent logs"), &current)?;
            }
            WatchState::Failed { reason } => {
                return Err(Failure::new(Exit::Failure, reason.clone()));
            }
        }
        tokio::select! {
            changed = state.changed() => if changed.is_err() { break },
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    watcher.stop().await;
    sync.stop().await;
    Ok(())
}

/// `roundtable usage`.
pub async fn usage(
    core: &Core,
    out: &Out,
    by: &[String],
    since: Option<&str>,
) -> Result<(), Failure> {
    let grouping: Vec<Grouping> = if by.is_empty() {
        vec![Grouping::Model]
    } else {
        by.iter()
            .map(|key| {
                Grouping::parse(key).ok_or_else(|| {
                    Failure::new(
                        Exit::Usage,
                        format!("--by takes session, agent, person, team, model, day or room, not {key:?}"),
                    )
                })
            })
            .collect::<Result<_, _>>()?
    };
    let since_ms = since.map(parse_since).transpose()?;
    core.synced(PATIENCE).await?;
    read_logs(core).await?;
    let query = UsageQuery {
        since_ms,
        ..UsageQuery::default()
    };
    let rows = core.usage_figures(grouping, query, pricing()?).await?;
    let mut total = 0.0;
    let mut unpriced = false;
    let mut lines: Vec<String> = rows
        .iter()
        .map(|row| {
            total += row.cost_usd;
            unpriced |= row.unpriced_entries > 0;
            let group: Vec<&str> = row.group.values().map(String::as_str).collect();
            let tokens = row.input + row.output + row.cache_write + row.cache_read;
            let cost = if row.unpriced_entries > 0 {
                format!(
                    "${:.4} + unpriced ({})",
                    row.cost_usd,
                    row.unpriced_models.join(", ")
                )
            } else {
                format!("${:.4}", row.cost_usd)
            };
            format!("{:<40} {tokens:>12} tokens  {cost}", group.join("  "))
        })
        .collect();
    lines.push(format!(
        "total: ${total:.4}{}",
        if unpriced {
            " and usage of unpriced models"
        } else {
            ""
        }
    ));
    out.show(lines.join("\n"), &rows)
}

/// `--since`: a date (2026-11-30), an RFC 3339 time, or a duration back from now (`7d`,
/// `12h`, `30m`).
fn parse_since(text: &str) -> Result<i64, Failure> {
    let bad = || {
        Failure::new(
            Exit::Usage,
            format!(
                "--since takes a date (2026-11-30), a time (RFC 3339) or a duration (7d, 12h, 30m), not {text:?}"
            ),
        )
    };
    if let Some(ms) = roundtable_protocol::ts::parse_millis(text) {
        return Ok(ms);
    }
    if let Some(ms) = roundtable_protocol::ts::parse_millis(&format!("{text}T00:00:00Z")) {
        return Ok(ms);
    }
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let number: i64 = number.parse().map_err(|_| bad())?;
    let unit_ms = match unit {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        _ => return Err(bad()),
    };
    Ok(now_ms() - number * unit_ms)
}

/// Brings this machine's agent logs into the cache, so a view shows its sessions as they
/// are now (the desktop app's watcher does this all the time; a one-off command once).
async fn read_logs(core: &Core) -> Result<(), Failure> {
    core.read_logs_once(watch_options(core)?).await?;
    Ok(())
}

/// `roundtable tasks`: every agent session's own task list, as the tasks board shows them.
pub async fn tasks(core: &Core, out: &Out) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    read_logs(core).await?;
    let board = core.task_board().await?;
    let mut text = Vec::new();
    for lane in &board.lanes {
        let who = lane
            .agent_handle
            .clone()
            .or_else(|| lane.agent.clone())
            .unwrap_or_else(|| format!("{} (this machine)", lane.person));
        text.push(format!("{who} ({} {})", lane.framework, lane.session_id));
        for task in &lane.tasks {
            text.push(format!("  [{}] {}", task.status.as_str(), task.title));
        }
        if let Some(why) = &lane.no_list {
            text.push(format!("  no task list: {why}"));
        }
    }
    out.show(
        if text.is_empty() {
            "no task lists yet".into()
        } else {
            text.join("\n")
        },
        &board,
    )
}

/// `roundtable arch [ROOM]`: the architecture boards.
pub async fn arch(core: &Core, out: &Out, room: Option<&str>) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    read_logs(core).await?;
    let mut boards = core.architecture_boards().await?;
    if let Some(room) = room {
        let room = core.room_id(room).await?;
        boards.retain(|board| board.room == room);
    }
    let mut text = Vec::new();
    for board in &boards {
        text.push(board.title.clone().unwrap_or_else(|| board.room.clone()));
        for component in &board.components {
            let working: Vec<String> = component
                .agents
                .iter()
                .filter(|agent| agent.status == ComponentStatus::Working)
                .map(|agent| agent.handle.clone().unwrap_or_else(|| agent.agent.clone()))
                .collect();
            text.push(format!(
                "  {:<16} {:<8} {}",
                component.id,
                component.status.map_or("idle", ComponentStatus::as_str),
                if working.is_empty() {
                    String::new()
                } else {
                    format!("working: {}", working.join(", "))
                }
            ));
        }
    }
    out.show(
        if text.is_empty() {
            "no components yet".into()
        } else {
            text.join("\n")
        },
        &boards,
    )
}

fn digest_text(digest: &RoomDigest) -> String {
    let mut lines = vec![format!(
        "{}: {} messages ({} for you), {} tasks completed, {} in progress, ${:.2}{}",
        digest.title.as_deref().unwrap_or(&digest.room),
        digest.messages,
        digest.mentions,
        digest.tasks_completed.len(),
        digest.tasks_in_progress.len(),
        digest.cost_usd,
        if digest.unpriced { " + unpriced" } else { "" }
    )];
    if !digest.writers.is_empty() {
        let writers: Vec<String> = digest
            .writers
            .iter()
            .map(|writer| format!("{} ({})", writer.author, writer.messages))
            .collect();
        lines.push(format!("  from: {}", writers.join(", ")));
    }
    for task in &digest.tasks_completed {
        lines.push(format!("  done: {} ({})", task.title, task.agent));
    }
    for task in &digest.tasks_in_progress {
        lines.push(format!("  doing: {} ({})", task.title, task.agent));
    }
    for component in &digest.components {
        lines.push(format!(
            "  {}: {} by {}",
            component.id,
            component.status.map_or("touched", ComponentStatus::as_str),
            component.by.join(", ")
        ));
    }
    for ping in &digest.pings_waiting {
        lines.push(format!(
            "  waiting for you: {} ({})",
            ping.question, ping.ping
        ));
    }
    lines.join("\n")
}

/// `roundtable digest`: what happened while you were away.
pub async fn digest(core: &Core, out: &Out) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    read_logs(core).await?;
    let digests = core.digest().await?;
    let text: Vec<String> = digests.iter().map(digest_text).collect();
    out.show(
        if text.is_empty() {
            "nothing new since you last looked".into()
        } else {
            text.join("\n")
        },
        &digests,
    )
}

/// The budget's scope and period from their words.
fn budget_words(scope: &str, per: &str) -> Result<(BudgetScope, BudgetPeriod), Failure> {
    let scope = BudgetScope::parse(scope).ok_or_else(|| {
        Failure::new(
            Exit::Usage,
            format!("{scope:?} is not a budget's scope: write agent, person or team"),
        )
    })?;
    let period = BudgetPeriod::parse(per).ok_or_else(|| {
        Failure::new(
            Exit::Usage,
            format!("{per:?} is not a budget's period: write --per day, week or month"),
        )
    })?;
    Ok((scope, period))
}

/// `roundtable budget`: list, set, remove, or keep the budgets once.
pub async fn budget(core: &Core, out: &Out, command: Option<BudgetCommand>) -> Result<(), Failure> {
    match command {
        Some(BudgetCommand::Set {
            scope,
            name,
            usd,
            per,
        }) => {
            let (scope, period) = budget_words(&scope, &per)?;
            let budget = core
                .set_budget(
                    Budget {
                        scope,
                        name,
                        period,
                        usd,
                    },
                    now_ms(),
                )
                .await?;
            out.show(format!("budget set: {}", budget.describe()), &budget)
        }
        Some(BudgetCommand::Remove { scope, name, per }) => {
            let (scope, period) = budget_words(&scope, &per)?;
            if core.remove_budget(scope, &name, period).await? {
                out.show(
                    format!("budget removed: {} {name} per {per}", scope.as_str()),
                    true,
                )
            } else {
                Err(Failure::new(
                    Exit::Failure,
                    format!(
                        "there is no budget for {} {name} per {per}; list them with `roundtable budget`",
                        scope.as_str()
                    ),
                ))
            }
        }
        Some(BudgetCommand::Check) => {
            read_logs(core).await?;
            let alerts = core.keep_budgets(now_ms(), pricing()?).await?;
            let text: Vec<&str> = alerts.iter().map(|alert| alert.text.as_str()).collect();
            out.show(
                if text.is_empty() {
                    "nothing to do: no budget crossed 80 % or 100 % since last time".into()
                } else {
                    text.join("\n")
                },
                &alerts,
            )
        }
        None => {
            read_logs(core).await?;
            let board = core.budget_board(now_ms(), pricing()?).await?;
            let mut text: Vec<String> = board
                .states
                .iter()
                .map(|state| {
                    format!(
                        "{:<7} {:<24} ${:>9.2} of ${:.2} per {} ({:.0}%){}",
                        state.budget.scope.as_str(),
                        state.budget.name,
                        state.spent_usd,
                        state.budget.usd,
                        state.budget.period.as_str(),
                        state.share * 100.0,
                        match state.level {
                            BudgetLevel::Under => "",
                            BudgetLevel::Near => "  near",
                            BudgetLevel::Reached => "  REACHED",
                        }
                    )
                })
                .collect();
            if text.is_empty() {
                text.push(
                    "no budgets; set one with `roundtable budget set agent NAME USD --per day`"
                        .into(),
                );
            }
            text.extend(board.alerts.iter().map(|alert| format!("  {}", alert.text)));
            out.show(text.join("\n"), &board)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ProgressLine;

    #[test]
    fn a_log_gets_a_line_per_tenth_and_a_terminal_one_line_redrawn() {
        let updates = [
            (0, 100),
            (3, 100),
            (5, 100),
            (12, 100),
            (55, 100),
            (100, 100),
        ];
        let mut log = ProgressLine::new(false);
        let written: Vec<String> = updates
            .iter()
            .filter_map(|&(done, total)| log.update(done, total, &format!("{done}%")))
            .collect();
        assert_eq!(written, ["0%\n", "12%\n", "55%\n", "100%\n"]);
        assert_eq!(log.finish(), "");

        let mut terminal = ProgressLine::new(true);
        let written: String = updates
            .iter()
            .filter_map(|&(done, total)| terminal.update(done, total, &format!("{done}%")))
            .collect();
        assert_eq!(written, "\r0%\r12%\r55%\r100%");
        assert!(!written.contains('\n'));
        assert_eq!(terminal.finish(), "\n");
    }

    #[test]
    fn a_shorter_line_blanks_what_the_longer_one_left() {
        let mut terminal = ProgressLine::new(true);
        assert_eq!(terminal.update(0, 10, "long line").unwrap(), "\rlong line");
        assert_eq!(terminal.update(10, 10, "done").unwrap(), "\rdone     ");
    }
}
