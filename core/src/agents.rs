//! Registering and governing one's agents. A token the hub issues for an agent is handed to
//! the caller and written only to that agent's own profile (a 0600 file beside its own
//! cache): never to the owner's cache, never to its outbox.

use std::time::Duration;

use roundtable_protocol::client::{
    AgentToken, Control, ControlAction, RegisterAgent, RegisterRemoteAgent, RemoteCredential,
    TokenAction,
};
use roundtable_protocol::model::{Discoverable, Principal, Room};
use serde::Serialize;

use crate::profile::{Profile, Secret, profile_name_for};
use crate::{Core, CoreError};

/// A newly registered agent.
#[derive(Debug)]
pub struct RegisteredAgent {
    pub agent: Principal,
    /// The room the hub made for the owner and the agent.
    pub home: Option<Room>,
    /// The agent's own profile, holding its token.
    pub profile: Profile,
}

/// A newly registered remote agent (one another A2A server runs): no token, no profile.
#[derive(Debug)]
pub struct RegisteredRemoteAgent {
    pub agent: Principal,
    pub card_url: String,
    pub home: Option<Room>,
}

/// What an agent's token became.
#[derive(Debug)]
pub enum TokenChange {
    /// A new token; the old one no longer works. `profile`: the agent's profile that now
    /// holds it, when this machine has one.
    Rotated {
        token: Secret,
        profile: Option<Profile>,
    },
    Revoked,
}

/// What an agent registration needs besides its name.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentSettings {
    pub description: Option<String>,
    pub discoverable: Option<Discoverable>,
    pub card: Option<serde_json::Value>,
}

impl Core {
    /// Registers the agent `<me>/<name>` and saves its profile (`<me>.<name>`) with its
    /// token beside this one.
    pub async fn register_agent(
        &self,
        name: &str,
        settings: AgentSettings,
        patience: Duration,
    ) -> Result<RegisteredAgent, CoreError> {
        let registered = self
            .call(
                RegisterAgent {
                    id: 0,
                    name: name.to_owned(),
                    description: settings.description,
                    card: settings.card,
                    discoverable: settings.discoverable,
                },
                patience,
            )
            .await?;
        let mut profile = Profile::save(
            self.profile().base(),
            &profile_name_for(&registered.agent.handle),
            &self.profile().hub.to_string(),
            &registered.agent.id,
            &registered.agent.handle,
            &Secret::new(registered.token),
            self.profile().ca_file.clone(),
        )?;
        if let Some(home) = &registered.room {
            profile.set_home_room(&home.id)?;
        }
        self.remember_agent(&registered.agent).await;
        Ok(RegisteredAgent {
            agent: registered.agent,
            home: registered.room,
            profile,
        })
    }

    /// Registers an agent that another A2A server runs, at `card_url`, presented
    /// `credential` (never a Roundtable token); rooms call it when they mention it.
    pub async fn register_remote_agent(
        &self,
        name: &str,
        card_url: &str,
        credential: Option<RemoteCredential>,
        settings: AgentSettings,
        patience: Duration,
    ) -> Result<RegisteredRemoteAgent, CoreError> {
        let registered = self
            .call(
                RegisterRemoteAgent {
                    id: 0,
                    name: name.to_owned(),
                    card_url: card_url.to_owned(),
                    credential,
                    description: settings.description,
                    discoverable: settings.discoverable,
                },
                patience,
            )
            .await?;
        self.remember_agent(&registered.agent).await;
        Ok(RegisteredRemoteAgent {
            agent: registered.agent,
            card_url: registered.card_url,
            home: registered.room,
        })
    }

    /// Keeps a newly registered agent in the cache, so views show its handle at once.
    async fn remember_agent(&self, agent: &Principal) {
        self.remember(vec![crate::cache::PrincipalRow {
            id: agent.id.clone(),
            kind: agent.kind.as_str().to_owned(),
            handle: agent.handle.clone(),
            name: agent.name.clone(),
            owner: agent.owner.clone(),
        }])
        .await;
    }

    /// Rotates or revokes the token of one of our agents (`name` or `user/name`). A rotated
    /// token replaces the one in the agent's profile on this machine, if there is one.
    pub async fn agent_token(
        &self,
        agent: &str,
        action: TokenAction,
        patience: Duration,
    ) -> Result<(String, TokenChange), CoreError> {
        let (handle, id) = self.resolve_agent(agent).await?;
        let reply = self
            .call(
                AgentToken {
                    id: 0,
                    agent: id,
                    action,
                },
                patience,
            )
            .await?;
        let change = match reply.token {
            Some(token) => {
                let token = Secret::new(token);
                let profile = match Profile::load(self.profile().base(), &profile_name_for(&handle))
                {
                    Ok(mut profile) => {
                        profile.replace_token(&token)?;
                        Some(profile)
                    }
                    Err(_) => None,
                };
                TokenChange::Rotated { token, profile }
            }
            None => TokenChange::Revoked,
        };
        Ok((handle, change))
    }

    /// Pauses, resumes or stops an agent (`name` for one of ours, or `user/name`), in
    /// `room` or everywhere. Returns the agent's handle.
    pub async fn control_agent(
        &self,
        agent: &str,
        action: ControlAction,
        room: Option<&str>,
        patience: Duration,
    ) -> Result<String, CoreError> {
        self.control_agent_because(agent, action, room, None, patience)
            .await
    }

    /// [`Core::control_agent`] with a reason the agent is told and the hub's audit log
    /// keeps.
    pub async fn control_agent_because(
        &self,
        agent: &str,
        action: ControlAction,
        room: Option<&str>,
        reason: Option<&str>,
        patience: Duration,
    ) -> Result<String, CoreError> {
        let room = match room {
            Some(room) => Some(self.room_id(room).await?),
            None => None,
        };
        let (handle, id) = self.resolve_agent(agent).await?;
        let reason = reason.map(str::to_owned);
        self.call(
            Control {
                id: 0,
                agent: id.clone(),
                action,
                room: room.clone(),
                reason: reason.clone(),
            },
            patience,
        )
        .await?;
        // The hub tells only the agent; our views learn it from what we record.
        let now = crate::now_ms();
        self.shared
            .write(move |cache| {
                cache.record_issued_control(&id, room.as_deref(), action, reason.as_deref(), now)
            })
            .await?;
        Ok(handle)
    }
}
