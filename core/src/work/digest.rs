//! "While you were away": per room, what happened since the person last read it — the
//! messages and who wrote them, the tasks agents completed (with their own titles) and those under way, the
//! components touched and by whom, the questions waiting, and what it cost. Computed from
//! the cache alone, deterministically: no model call, the same digest for the same cache.
//!
//! "Since they last read it" is the later of the room's read marker and the moment the
//! person last looked at the app (see [`Core::mark_looked`]): what arrived while they were
//! looking is not news when they come back, read or not.

use roundtable_protocol::bodies::ComponentStatus;

use crate::log_events::TaskStatus;
use serde::Serialize;

use crate::cache::{CacheError, CacheView, PingView, TaskFilter, UsageQuery};
use crate::{Core, CoreError, now_ms};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct DigestTask {
    pub agent: String,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct DigestComponent {
    pub id: String,
    pub name: Option<String>,
    pub status: Option<ComponentStatus>,
    /// Who is working on it, or reported its status last.
    pub by: Vec<String>,
}

/// Who wrote the new messages of a room, and how many.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct DigestWriter {
    /// Their handle (their id when the cache never met them).
    pub author: String,
    pub messages: u64,
}

/// One room's news.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RoomDigest {
    pub room: String,
    pub title: Option<String>,
    /// Since when (the last message read; 0: never read).
    pub since_ms: i64,
    pub messages: u64,
    pub mentions: u64,
    /// Who wrote those messages, the most first.
    pub writers: Vec<DigestWriter>,
    pub tasks_completed: Vec<DigestTask>,
    /// Tasks that went under way since then and still are.
    pub tasks_in_progress: Vec<DigestTask>,
    pub components: Vec<DigestComponent>,
    pub pings_waiting: Vec<PingView>,
    /// Cost of the usage reported in the room since then (priced entries).
    pub cost_usd: f64,
    /// Some usage since then is of models without a price.
    pub unpriced: bool,
}

impl RoomDigest {
    /// Whether there is anything to show.
    pub fn is_empty(&self) -> bool {
        self.messages == 0
            && self.tasks_completed.is_empty()
            && self.tasks_in_progress.is_empty()
            && self.components.is_empty()
            && self.pings_waiting.is_empty()
            && self.cost_usd == 0.0
            && !self.unpriced
    }
}

fn handle(view: &CacheView, id: &str) -> Result<String, CacheError> {
    Ok(view.handle_of(id)?.unwrap_or_else(|| id.to_owned()))
}

/// The digest of every room of `view` for principal `me` at `now_ms`, since each room's read
/// marker or `looked_ms` (when the person last looked), whichever is later: rooms with
/// nothing new are left out; the others in the order of their titles.
pub fn digest(
    view: &CacheView,
    me: &str,
    me_is_user: bool,
    now_ms: i64,
    looked_ms: Option<i64>,
) -> Result<Vec<RoomDigest>, CacheError> {
    let waiting = view.open_pings_for(me, me_is_user, now_ms)?;
    let mut digests = Vec::new();
    for room in view.rooms()? {
        let read_ms = if room.read_to == 0 {
            0
        } else {
            view.event_time(&room.id, room.read_to)?.unwrap_or(0)
        };
        let since_ms = read_ms.max(looked_ms.unwrap_or(0));
        let (messages, mentions, counted_after_ms) = match looked_ms {
            Some(looked) if looked > read_ms => {
                let (messages, mentions) = view.unread_since(&room.id, room.read_to, looked, me)?;
                (messages, mentions, looked)
            }
            _ => (room.unread, room.unread_mentions, i64::MIN),
        };
        let writers = view
            .message_authors_since(&room.id, room.read_to, counted_after_ms, me)?
            .into_iter()
            .map(|(author, messages)| {
                Ok(DigestWriter {
                    author: handle(view, &author)?,
                    messages,
                })
            })
            .collect::<Result<Vec<_>, CacheError>>()?;
        let filter = TaskFilter {
            room: Some(room.id.clone()),
            ..TaskFilter::default()
        };
        let mut completed = Vec::new();
        let mut in_progress = Vec::new();
        for session in view.task_sessions(&filter)? {
            let agent = session
                .agent_handle
                .clone()
                .unwrap_or_else(|| session.agent.clone());
            for task in session.tasks {
                let item = DigestTask {
                    agent: agent.clone(),
                    title: task.title.clone(),
                };
                match task.status {
                    TaskStatus::Completed if task.since_ms > since_ms => completed.push(item),
                    TaskStatus::InProgress if task.since_ms > since_ms => in_progress.push(item),
                    _ => {}
                }
            }
        }
        let mut components = Vec::new();
        for component in view.components(&room.id)? {
            let changed = component.agents.iter().any(|agent| agent.ts_ms > since_ms)
                || component.status_ms.is_some_and(|at| at > since_ms);
            if !changed {
                continue;
            }
            let mut by: Vec<String> = component
                .agents
                .iter()
                .filter(|agent| agent.ts_ms > since_ms)
                .map(|agent| agent.handle.clone().unwrap_or_else(|| agent.agent.clone()))
                .collect();
            if by.is_empty()
                && let Some(reporter) = &component.by
            {
                by.push(handle(view, reporter)?);
            }
            by.sort();
            by.dedup();
            components.push(DigestComponent {
                id: component.id,
                name: component.name,
                status: component.status,
                by,
            });
        }
        let usage = view.usage(&UsageQuery {
            since_ms: Some(since_ms + 1),
            room: Some(room.id.clone()),
            ..UsageQuery::default()
        })?;
        let (cost_usd, unpriced) = usage.iter().fold((0.0, false), |(cost, unpriced), row| {
            (cost + row.cost_usd, unpriced || row.unpriced > 0)
        });
        completed.sort_by(|a, b| (&a.agent, &a.title).cmp(&(&b.agent, &b.title)));
        in_progress.sort_by(|a, b| (&a.agent, &a.title).cmp(&(&b.agent, &b.title)));
        let digest = RoomDigest {
            title: room.title.clone(),
            since_ms,
            messages,
            mentions,
            writers,
            tasks_completed: completed,
            tasks_in_progress: in_progress,
            components,
            pings_waiting: waiting
                .iter()
                .filter(|p| p.room == room.id)
                .cloned()
                .collect(),
            cost_usd,
            unpriced,
            room: room.id,
        };
        if !digest.is_empty() {
            digests.push(digest);
        }
    }
    Ok(digests)
}

/// Where the cache keeps when the person last looked (ms since the epoch).
const LOOKED: &str = "looked_ms";

impl Core {
    /// What happened in our rooms since we last read them, or last looked.
    pub async fn digest(&self) -> Result<Vec<RoomDigest>, CoreError> {
        let (me, is_user, now) = (self.me().to_owned(), !self.is_agent(), now_ms());
        self.read(move |view| {
            let looked = view.meta(LOOKED)?.and_then(|text| text.parse().ok());
            digest(view, &me, is_user, now, looked)
        })
        .await
    }

    /// Records that the person looked at everything at `at_ms`: the next digest begins
    /// there (it never moves back).
    pub async fn mark_looked(&self, at_ms: i64) -> Result<(), CoreError> {
        self.write_job(move |cache| {
            let before: Option<i64> = cache.meta(LOOKED)?.and_then(|text| text.parse().ok());
            if before.is_none_or(|before| at_ms > before) {
                cache.set_meta(LOOKED, &at_ms.to_string())?;
            }
            Ok(())
        })
        .await
    }
}
