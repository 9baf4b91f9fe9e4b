//! What the desktop's screens show, each assembled in one call: the cache's projections
//! joined with what the hub alone knows (the directory, one's own agents), so the shell's
//! commands stay a line or two and the CLI could show the same.
//!
//! A mention's delivery state is derived from what the cache holds, since the hub does not
//! tell one principal another's read markers: a mention is `sent` once stored, `working`,
//! `waiting_human` or `delivered` once the agent reported a status in the room after it, and
//! `done` once the agent wrote in the room after it (see [`mention_state`]).

use std::collections::HashMap;

use roundtable_protocol::client::{
    ContactRequestCmd, Contacts, Directory, InviteCreate, InviteRedeem, InviteRevoke, Invites,
};
use roundtable_protocol::model::{ContactRelation, PrincipalKind};
use serde::{Deserialize, Serialize};

use crate::cache::{AgentStatusView, ContactView, ControlView, Delivery, MessageView, RequestView};
use crate::local_agents::AgentCli;
use crate::{Core, CoreError};

const COMMAND_PATIENCE: std::time::Duration = std::time::Duration::from_secs(15);

/// Where a mention of an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum MentionState {
    /// The message waits in our outbox.
    Queued,
    /// Stored on the hub; the agent has not shown it has seen it.
    Sent,
    /// The agent reported it was idle after it.
    Delivered,
    Working,
    WaitingHuman,
    /// The agent wrote in the room after it.
    Done,
    /// The message was refused, or the agent reported an error after it.
    Failed,
}

/// One mentioned agent of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct MentionView {
    pub principal: String,
    pub handle: String,
    pub state: MentionState,
}

/// A message as a conversation shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RoomMessage {
    #[serde(flatten)]
    pub message: MessageView,
    /// One per mentioned agent.
    pub mention_states: Vec<MentionView>,
}

/// What one agent did in a room after a message: its latest status there (state, when), and
/// the latest message it wrote there (seq).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentActivity {
    pub status: Option<(roundtable_protocol::bodies::AgentState, i64)>,
    pub last_message_seq: Option<u64>,
}

/// Where a mention of an agent is, from the message and what the agent did since. Pure.
pub fn mention_state(message: &MessageView, activity: &AgentActivity) -> MentionState {
    match message.delivery {
        Delivery::Queued => return MentionState::Queued,
        Delivery::Failed => return MentionState::Failed,
        Delivery::Stored => {}
    }
    let seq = message.seq.unwrap_or(0);
    if activity.last_message_seq.is_some_and(|last| last > seq) {
        return MentionState::Done;
    }
    match &activity.status {
        Some((state, ts_ms)) if *ts_ms >= message.ts_ms => {
            use roundtable_protocol::bodies::AgentState as Reported;
            match state {
                Reported::Working => MentionState::Working,
                Reported::WaitingHuman => MentionState::WaitingHuman,
                Reported::Error => MentionState::Failed,
                Reported::Idle | Reported::Stopped => MentionState::Delivered,
            }
        }
        _ => MentionState::Sent,
    }
}

/// A principal of the hub's directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct DirectoryView {
    pub id: String,
    pub kind: roundtable_protocol::model::PrincipalKind,
    pub handle: String,
    pub name: String,
    pub description: Option<String>,
    pub owner: Option<String>,
    pub contact: ContactRelation,
}

/// A contact request, with which way it goes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ContactRequest {
    #[serde(flatten)]
    pub request: RequestView,
    /// Someone asks us (or one of our agents): ours to decide.
    pub incoming: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ContactsScreen {
    pub contacts: Vec<ContactView>,
    pub requests: Vec<ContactRequest>,
}

/// What an agent is doing, as far as anyone told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    Working,
    Idle,
    WaitingHuman,
    Error,
    Stopped,
    /// It never reported a status where we could see it.
    Unknown,
}

impl From<roundtable_protocol::bodies::AgentState> for AgentState {
    fn from(state: roundtable_protocol::bodies::AgentState) -> AgentState {
        use roundtable_protocol::bodies::AgentState as Reported;
        match state {
            Reported::Working => AgentState::Working,
            Reported::Idle => AgentState::Idle,
            Reported::WaitingHuman => AgentState::WaitingHuman,
            Reported::Error => AgentState::Error,
            Reported::Stopped => AgentState::Stopped,
        }
    }
}

/// One of our agents.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct AgentView {
    pub id: String,
    pub handle: String,
    pub name: String,
    /// The agent CLI it was onboarded on, on this machine.
    pub cli: Option<AgentCli>,
    pub state: AgentState,
    pub detail: Option<String>,
    /// Where it reported its latest status.
    pub room: Option<String>,
    pub since_ms: Option<i64>,
    /// Controls in force, as far as this machine knows.
    pub controls: Vec<ControlView>,
}

/// The latest status of each agent across rooms. Pure.
pub fn latest_statuses(statuses: &[AgentStatusView]) -> HashMap<&str, &AgentStatusView> {
    let mut latest: HashMap<&str, &AgentStatusView> = HashMap::new();
    for status in statuses {
        let slot = latest.entry(status.agent.as_str()).or_insert(status);
        if status.ts_ms > slot.ts_ms {
            *slot = status;
        }
    }
    latest
}

/// An invite just created.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct InviteCreated {
    pub code: String,
    /// `roundtable://invite/CODE?hub=ADDRESS`, to paste to a teammate.
    pub link: String,
    /// The invite's id, to withdraw it with [`Core::revoke_invite`]; `None` from a hub that
    /// predates withdrawing invites.
    pub invite: Option<String>,
}

/// One of our invites that can still be redeemed (the hub lists no withdrawn, used-up or
/// expired ones). Its code is not kept anywhere: it was shown once, when created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct InviteView {
    pub id: String,
    /// The room its redeemer joins, if any.
    pub room: Option<String>,
    pub uses_left: u32,
    /// A wire timestamp (`2026-11-30T09:00:00.123Z`).
    pub expires_at: Option<String>,
    pub created_at: String,
}

/// The code of an invite given as a code or as its link.
pub fn invite_code(code_or_link: &str) -> Result<&str, CoreError> {
    let text = code_or_link.trim();
    let code = match text.strip_prefix("roundtable://invite/") {
        Some(rest) => rest.split(['?', '#']).next().unwrap_or_default(),
        None => text,
    };
    if code.is_empty()
        || !code
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
    {
        return Err(CoreError::Invalid(format!(
            "{text:?} is not an invite: paste the code or the whole roundtable://invite/… link"
        )));
    }
    Ok(code)
}

/// Checks how often an invite may be used and how long it lasts (`None`: the hub's
/// defaults), before it is asked for.
pub fn check_invite_terms(
    max_uses: Option<u32>,
    expires_in_s: Option<u64>,
) -> Result<(), CoreError> {
    use roundtable_protocol::client::{INVITE_MAX_EXPIRY_S, INVITE_MAX_USES};
    if max_uses.is_some_and(|uses| !(1..=INVITE_MAX_USES).contains(&uses)) {
        return Err(CoreError::Invalid(format!(
            "an invite can be used 1 to {INVITE_MAX_USES} times"
        )));
    }
    if expires_in_s.is_some_and(|expiry| !(1..=INVITE_MAX_EXPIRY_S).contains(&expiry)) {
        return Err(CoreError::Invalid(
            "an invite can last up to 90 days; choose a shorter expiry".to_owned(),
        ));
    }
    Ok(())
}

impl Core {
    /// The latest `limit` messages of a room before `before` (all the latest, with ours still
    /// waiting, when `None`), each with the states of its mentions.
    pub async fn conversation(
        &self,
        room: &str,
        before: Option<u64>,
        limit: u32,
    ) -> Result<Vec<RoomMessage>, CoreError> {
        let room = room.to_owned();
        self.read(move |cache| {
            let messages = match before {
                Some(before) => cache.messages_before(&room, before, limit)?,
                None => cache.messages(&room, 0, limit)?,
            };
            let agents: HashMap<String, String> = cache
                .members(&room)?
                .into_iter()
                .filter(|member| {
                    member.kind == Some(roundtable_protocol::model::PrincipalKind::Agent)
                })
                .map(|member| (member.id, member.handle))
                .collect();
            let mut activity: HashMap<String, AgentActivity> = HashMap::new();
            for status in cache.agent_statuses()? {
                if status.room == room && agents.contains_key(&status.agent) {
                    activity.entry(status.agent).or_default().status =
                        Some((status.state, status.ts_ms));
                }
            }
            for (sender, seq) in cache.last_message_seqs(&room)? {
                if agents.contains_key(&sender) {
                    activity.entry(sender).or_default().last_message_seq = Some(seq);
                }
            }
            let none = AgentActivity::default();
            Ok(messages
                .into_iter()
                .map(|message| {
                    let mention_states = message
                        .mentions
                        .iter()
                        .filter_map(|principal| {
                            let handle = agents.get(principal)?;
                            Some(MentionView {
                                principal: principal.clone(),
                                handle: handle.clone(),
                                state: mention_state(
                                    &message,
                                    activity.get(principal).unwrap_or(&none),
                                ),
                            })
                        })
                        .collect();
                    RoomMessage {
                        message,
                        mention_states,
                    }
                })
                .collect())
        })
        .await
    }

    /// The hub's directory, as far as it lets us see (needs the hub).
    pub async fn directory(&self, query: &str) -> Result<Vec<DirectoryView>, CoreError> {
        let query = query.trim();
        let reply = self
            .call(
                Directory {
                    id: 0,
                    query: (!query.is_empty()).then(|| query.to_owned()),
                    limit: Some(50),
                },
                COMMAND_PATIENCE,
            )
            .await?;
        Ok(reply
            .entries
            .into_iter()
            .map(|entry| DirectoryView {
                id: entry.id,
                kind: entry.kind,
                handle: entry.handle,
                name: entry.name,
                description: entry.description,
                owner: entry.owner,
                contact: entry.contact,
            })
            .collect())
    }

    /// Asks `handle` (a person or an agent; a leading `@` is dropped) to become a contact,
    /// waiting `patience` for the hub. The hub names who was asked by id alone, so they are
    /// remembered by the handle they were asked by: the request shows it, where it would
    /// show an id, until the hub tells more of them (once they are a contact).
    pub async fn request_contact(
        &self,
        handle: &str,
        message: Option<String>,
        patience: std::time::Duration,
    ) -> Result<roundtable_protocol::model::ContactRequest, CoreError> {
        let handle = handle.trim().trim_start_matches('@').to_owned();
        let asked = self
            .call(
                ContactRequestCmd {
                    id: 0,
                    to: handle.clone(),
                    message,
                },
                patience,
            )
            .await?;
        let asked_whom = crate::cache::PrincipalRow {
            id: asked.request.to.clone(),
            kind: match handle.contains('/') {
                true => PrincipalKind::Agent,
                false => PrincipalKind::User,
            }
            .as_str()
            .to_owned(),
            name: handle.clone(),
            handle,
            owner: None,
        };
        // Asked already: a cache that cannot note the handle shows the id, and says why.
        if let Err(error) = self.write_job(move |cache| cache.meet(asked_whom)).await {
            tracing::warn!(%error, "cannot note whom a contact request asked");
        }
        Ok(asked.request)
    }

    /// Our contacts and requests, each request marked incoming when it is ours (or one of
    /// our agents') to decide.
    pub async fn contacts_screen(&self) -> Result<ContactsScreen, CoreError> {
        self.learn_contacts().await;
        let me = self.me().to_owned();
        self.read(move |cache| {
            let contacts = cache.contacts()?;
            let requests = cache
                .requests()?
                .into_iter()
                .map(|request| {
                    let to_mine = request.to == me
                        || cache
                            .principal(&request.to)
                            .ok()
                            .flatten()
                            .is_some_and(|target| target.owner.as_deref() == Some(&me));
                    ContactRequest {
                        incoming: to_mine && request.from != me,
                        request,
                    }
                })
                .collect();
            Ok(ContactsScreen { contacts, requests })
        })
        .await
    }

    /// Asks the hub who our contacts are when the cache has one it never met: a contact made
    /// by redeeming an invite arrives as ids only (the `contact` event), and a contact shown
    /// without a handle or name tells the person nothing. Offline, the view waits for the
    /// next look.
    async fn learn_contacts(&self) {
        let unknown = self
            .read(|cache| {
                Ok(cache
                    .contacts()?
                    .iter()
                    .any(|contact| contact.handle.is_none()))
            })
            .await
            .unwrap_or(false);
        let online = matches!(*self.sync_state().borrow(), crate::SyncState::Idle);
        if !unknown || !online {
            return;
        }
        match self.call(Contacts { id: 0 }, COMMAND_PATIENCE).await {
            Ok(reply) => {
                let met = reply
                    .contacts
                    .into_iter()
                    .map(|contact| crate::cache::PrincipalRow {
                        id: contact.id,
                        kind: contact.kind.as_str().to_owned(),
                        handle: contact.handle,
                        name: contact.name,
                        owner: contact.owner,
                    })
                    .collect();
                self.remember(met).await;
            }
            Err(error) => {
                tracing::debug!(%error, "contacts stay without handles until the hub answers")
            }
        }
    }

    /// Our agents: from the hub's directory when it answers (else from what the cache
    /// met), with their latest status and the agent CLI each was onboarded on here.
    pub async fn my_agents(&self, profiles: &std::path::Path) -> Result<Vec<AgentView>, CoreError> {
        let me = self.me().to_owned();
        let online = matches!(*self.sync_state().borrow(), crate::SyncState::Idle);
        let known: Vec<(String, String, String)> = if online {
            self.directory("")
                .await?
                .into_iter()
                .filter(|entry| {
                    entry.kind == PrincipalKind::Agent && entry.owner.as_deref() == Some(&me)
                })
                .map(|entry| (entry.id, entry.handle, entry.name))
                .collect()
        } else {
            let me = me.clone();
            self.read(move |cache| cache.agents_of(&me))
                .await?
                .into_iter()
                .map(|row| (row.id, row.handle, row.name))
                .collect()
        };
        let records = crate::local_agents::onboarding::onboarded(profiles);
        let (statuses, mut controls) = self
            .read(move |cache| Ok((cache.agent_statuses()?, cache.issued_controls(&me)?)))
            .await?;
        let latest = latest_statuses(&statuses);
        let mut agents: Vec<AgentView> = known
            .into_iter()
            .map(|(id, handle, name)| {
                let status = latest.get(id.as_str());
                AgentView {
                    cli: records
                        .iter()
                        .find(|record| record.handle == handle)
                        .map(|record| record.cli),
                    state: status.map_or(AgentState::Unknown, |s| AgentState::from(s.state)),
                    detail: status.and_then(|s| s.detail.clone()),
                    room: status.map(|s| s.room.clone()),
                    since_ms: status.map(|s| s.ts_ms),
                    controls: controls.remove(&id).unwrap_or_default(),
                    id,
                    handle,
                    name,
                }
            })
            .collect();
        agents.sort_by(|a, b| a.handle.cmp(&b.handle));
        Ok(agents)
    }

    /// Creates an invite (to become contacts, and with `room`, to join it).
    pub async fn create_invite(
        &self,
        room: Option<&str>,
        max_uses: Option<u32>,
        expires_in_s: Option<u64>,
    ) -> Result<InviteCreated, CoreError> {
        check_invite_terms(max_uses, expires_in_s)?;
        let reply = self
            .call(
                InviteCreate {
                    id: 0,
                    room: room.map(str::to_owned),
                    max_uses,
                    expires_in_s,
                },
                COMMAND_PATIENCE,
            )
            .await?;
        Ok(InviteCreated {
            code: reply.code,
            link: reply.link,
            invite: reply.invite,
        })
    }

    /// Our invites that can still be redeemed, oldest first (needs the hub).
    pub async fn invites(&self) -> Result<Vec<InviteView>, CoreError> {
        let reply = self.call(Invites { id: 0 }, COMMAND_PATIENCE).await?;
        Ok(reply
            .invites
            .into_iter()
            .map(|invite| InviteView {
                id: invite.id,
                room: invite.room,
                uses_left: invite.uses_left,
                expires_at: Some(invite.expires_at),
                created_at: invite.created_at,
            })
            .collect())
    }

    /// Withdraws one of our invites by its id (see [`Core::invites`]): its code no longer
    /// redeems. Withdrawing one already withdrawn is fine; an id that is not one of ours is
    /// `not_found`.
    pub async fn revoke_invite(&self, invite: &str) -> Result<(), CoreError> {
        let invite = invite.trim();
        if invite.is_empty() {
            return Err(CoreError::Invalid(
                "name the invite to withdraw by its id (see the list of your invites)".into(),
            ));
        }
        self.call(
            InviteRevoke {
                id: 0,
                invite: invite.to_owned(),
            },
            COMMAND_PATIENCE,
        )
        .await?;
        Ok(())
    }

    /// Redeems an invite given as a code or a link; returns the room joined, if any.
    pub async fn redeem_invite(&self, code_or_link: &str) -> Result<Option<String>, CoreError> {
        let code = invite_code(code_or_link)?;
        let reply = self
            .call(
                InviteRedeem {
                    id: 0,
                    code: code.to_owned(),
                },
                COMMAND_PATIENCE,
            )
            .await?;
        Ok(reply.room.map(|room| room.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window's in-memory backend takes from here (`ui/src/backend/fixtures/invites.json`)
    /// what a pasted code or link is, and which terms an invite may have.
    #[test]
    fn the_uis_invite_verdicts_are_the_cores_own() {
        use roundtable_protocol::client::{
            INVITE_DEFAULT_EXPIRY_S, INVITE_MAX_EXPIRY_S, INVITE_MAX_USES,
        };
        let pasted = [
            "TEAMHUB42",
            "  TEAMHUB42\n",
            "nosuchcode42",
            "a-b_C9",
            "roundtable://invite/nosuchcode42?hub=unix:/nowhere",
            "roundtable://invite/TEAMHUB42#later",
            "roundtable://invite/TEAMHUB42",
            "roundtable://invite/",
            "roundtable://invite/?hub=wss://hub.example.com",
            "not a code!",
            "",
            "code/with/slashes",
            "https://hub.example.com/invite/TEAMHUB42",
        ];
        let codes: Vec<_> = pasted
            .iter()
            .map(|text| {
                serde_json::json!({ "input": text, "outcome": crate::ui_outcome(invite_code(text)) })
            })
            .collect();
        let uses = [
            None,
            Some(0),
            Some(1),
            Some(2),
            Some(INVITE_MAX_USES),
            Some(INVITE_MAX_USES + 1),
        ];
        let expiries = [
            None,
            Some(0),
            Some(3600),
            Some(24 * 3600),
            Some(INVITE_MAX_EXPIRY_S),
            Some(INVITE_MAX_EXPIRY_S + 3600),
        ];
        let mut terms = Vec::new();
        for uses in uses {
            for expires_in_s in expiries {
                terms.push(serde_json::json!({
                    "uses": uses,
                    "expires_in_s": expires_in_s,
                    "outcome": crate::ui_outcome(check_invite_terms(uses, expires_in_s)),
                }));
            }
        }
        crate::keep_ui_fixture(
            "invites.json",
            &serde_json::json!({
                "max_uses": INVITE_MAX_USES,
                "max_expiry_s": INVITE_MAX_EXPIRY_S,
                "default_expiry_s": INVITE_DEFAULT_EXPIRY_S,
                "codes": codes,
                "terms": terms,
            }),
            "invite_verdicts",
        );
    }

    fn message(delivery: Delivery, seq: Option<u64>, ts_ms: i64) -> MessageView {
        MessageView {
            room: "r".into(),
            seq,
            id: seq.map(|seq| format!("e{seq}")),
            ts_ms,
            from: "p_dana".into(),
            from_handle: Some("dana".into()),
            from_kind: Some(PrincipalKind::User),
            text: "@dana/writer go".into(),
            mentions: vec!["p_writer".into()],
            reply_to: None,
            delivery,
            error: None,
            outbox: None,
        }
    }

    #[test]
    fn a_mention_goes_from_queued_to_done_by_what_the_agent_did_after_it() {
        let stored = message(Delivery::Stored, Some(10), 1_000);
        let activity = |status: Option<(&str, i64)>, last: Option<u64>| AgentActivity {
            status: status.map(|(state, ts)| (crate::wire(state), ts)),
            last_message_seq: last,
        };
        assert_eq!(
            mention_state(
                &message(Delivery::Queued, None, 1_000),
                &activity(None, None)
            ),
            MentionState::Queued
        );
        assert_eq!(
            mention_state(
                &message(Delivery::Failed, None, 1_000),
                &activity(None, None)
            ),
            MentionState::Failed
        );
        assert_eq!(
            mention_state(&stored, &activity(None, None)),
            MentionState::Sent
        );
        // A status from before the message says nothing about it.
        assert_eq!(
            mention_state(&stored, &activity(Some(("working", 900)), Some(9))),
            MentionState::Sent
        );
        for (state, expected) in [
            ("working", MentionState::Working),
            ("waiting_human", MentionState::WaitingHuman),
            ("error", MentionState::Failed),
            ("idle", MentionState::Delivered),
            ("stopped", MentionState::Delivered),
        ] {
            assert_eq!(
                mention_state(&stored, &activity(Some((state, 1_500)), None)),
                expected,
                "{state}"
            );
        }
        // A reply after it: done, whatever the status.
        assert_eq!(
            mention_state(&stored, &activity(Some(("working", 2_000)), Some(11))),
            MentionState::Done
        );
    }

    #[test]
    fn an_invite_is_taken_as_a_code_or_a_link_and_anything_else_is_refused() {
        assert_eq!(invite_code(" abc-DEF_12 ").unwrap(), "abc-DEF_12");
        assert_eq!(
            invite_code("roundtable://invite/abc123?hub=127.0.0.1:9000").unwrap(),
            "abc123"
        );
        for bad in ["", "roundtable://invite/", "https://evil.example/x", "a b"] {
            let error = invite_code(bad).unwrap_err().to_string();
            assert!(error.contains("roundtable://invite/"), "{error}");
        }
    }

    #[test]
    fn the_latest_status_of_an_agent_wins_across_rooms() {
        let status = |room: &str, state: &str, ts_ms| AgentStatusView {
            agent: "p_writer".into(),
            handle: Some("dana/writer".into()),
            room: room.into(),
            state: crate::wire(state),
            detail: None,
            ts_ms,
        };
        let statuses = [
            status("a", "working", 5),
            status("b", "idle", 9),
            status("c", "error", 7),
        ];
        let latest = latest_statuses(&statuses);
        assert_eq!(latest["p_writer"].room, "b");
        assert_eq!(AgentState::from(latest["p_writer"].state), AgentState::Idle);
    }
}
