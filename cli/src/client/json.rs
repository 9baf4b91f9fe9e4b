//! What `--json` prints for the commands whose answer is not a view of the core's (rooms,
//! contacts, messages… print the core's own serialised views). Scripts read these: each is a
//! struct, so a field cannot be misspelt in one command and right in another, and the
//! snapshot test below shows every shape, so a change to one is a reviewed change.

use roundtable_protocol::client::ControlAction;
use roundtable_protocol::model::Principal;
use serde::Serialize;

/// `signup` and `login`: the profile saved.
#[derive(Debug, Serialize)]
pub(crate) struct ProfileSaved<'a> {
    pub profile: &'a str,
    pub principal: &'a str,
    pub handle: &'a str,
}

/// `status`.
#[derive(Debug, Serialize)]
pub(crate) struct Status<'a> {
    pub profile: &'a str,
    pub handle: &'a str,
    pub hub: String,
    /// "idle (up to date)", "syncing", or why the last sync failed.
    pub sync: String,
    pub outbox: OutboxCounts,
}

#[derive(Debug, Serialize)]
pub(crate) struct OutboxCounts {
    pub waiting: usize,
    pub failed: usize,
}

/// `sync` (without `--follow`): entries still in the outbox.
#[derive(Debug, Serialize)]
pub(crate) struct Synced {
    pub outbox: usize,
}

/// `room invite`.
#[derive(Debug, Serialize)]
pub(crate) struct RoomInvited<'a> {
    pub room: &'a str,
    pub handle: &'a str,
}

/// `room leave`.
#[derive(Debug, Serialize)]
pub(crate) struct RoomLeft<'a> {
    pub room: &'a str,
}

/// `send`: what became of the message, and how many entries the outbox holds.
#[derive(Debug, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(crate) enum SendOutcome {
    /// The hub stored it at `seq`.
    Sent { seq: u64, outbox: u64 },
    /// A running `roundtable` process on the profile took it over.
    HandedOff { outbox: u64 },
    /// The hub is unreachable: it waits in the outbox.
    Queued { outbox: u64 },
}

/// `contacts accept` and `contacts reject`.
#[derive(Debug, Serialize)]
pub(crate) struct ContactAnswered<'a> {
    pub request: &'a str,
    pub accepted: bool,
}

/// `invite revoke`.
#[derive(Debug, Serialize)]
pub(crate) struct InviteRevoked<'a> {
    pub invite: &'a str,
    pub revoked: bool,
}

/// `agents register`: the agent, its token (shown once), its profile and home room.
#[derive(Debug, Serialize)]
pub(crate) struct AgentRegistered<'a> {
    pub agent: &'a Principal,
    pub token: &'a str,
    pub profile: &'a str,
    pub room: Option<&'a str>,
}

/// `agents register-remote`: the agent, where its card is, and its home room.
#[derive(Debug, Serialize)]
pub(crate) struct RemoteAgentRegistered<'a> {
    pub agent: &'a Principal,
    pub card_url: &'a str,
    pub room: Option<&'a str>,
}

/// `agents rotate`: the new token (shown once), and the profile it was saved in.
#[derive(Debug, Serialize)]
pub(crate) struct TokenRotated<'a> {
    pub agent: &'a str,
    pub token: &'a str,
    pub profile: Option<&'a str>,
}

/// `agents revoke`.
#[derive(Debug, Serialize)]
pub(crate) struct TokenRevoked<'a> {
    pub agent: &'a str,
    pub revoked: bool,
}

/// `agents pause`, `resume` and `stop`.
#[derive(Debug, Serialize)]
pub(crate) struct Controlled<'a> {
    pub agent: &'a str,
    pub action: ControlAction,
}

/// `answer`: where the answer was posted.
#[derive(Debug, Serialize)]
pub(crate) struct PingAnswered<'a> {
    pub ping: &'a str,
    pub room: &'a str,
    pub seq: u64,
}

#[cfg(test)]
mod tests {
    use roundtable_protocol::model::PrincipalKind;

    use super::*;

    fn line(name: &str, value: impl Serialize) -> String {
        format!("{name}: {}", serde_json::to_string(&value).unwrap())
    }

    #[test]
    fn every_json_answer_keeps_its_shape() {
        let agent = Principal {
            id: "p_agent".into(),
            kind: PrincipalKind::Agent,
            handle: "ana/scout".into(),
            name: "scout".into(),
            owner: Some("p_ana".into()),
        };
        let lines = [
            line(
                "signup, login",
                ProfileSaved {
                    profile: "default",
                    principal: "p_ana",
                    handle: "ana",
                },
            ),
            line(
                "status",
                Status {
                    profile: "default",
                    handle: "ana",
                    hub: "ws://127.0.0.1:7300".into(),
                    sync: "idle (up to date)".into(),
                    outbox: OutboxCounts {
                        waiting: 2,
                        failed: 1,
                    },
                },
            ),
            line("sync", Synced { outbox: 0 }),
            line(
                "room invite",
                RoomInvited {
                    room: "r_1",
                    handle: "bo",
                },
            ),
            line("room leave", RoomLeft { room: "r_1" }),
            line("send (stored)", SendOutcome::Sent { seq: 7, outbox: 0 }),
            line("send (handed off)", SendOutcome::HandedOff { outbox: 1 }),
            line("send (queued)", SendOutcome::Queued { outbox: 3 }),
            line(
                "contacts accept",
                ContactAnswered {
                    request: "cr_1",
                    accepted: true,
                },
            ),
            line(
                "invite revoke",
                InviteRevoked {
                    invite: "i_1",
                    revoked: true,
                },
            ),
            line(
                "agents register",
                AgentRegistered {
                    agent: &agent,
                    token: "rt_secret",
                    profile: "ana.scout",
                    room: Some("r_home"),
                },
            ),
            line(
                "agents rotate",
                TokenRotated {
                    agent: "ana/scout",
                    token: "rt_new",
                    profile: None,
                },
            ),
            line(
                "agents revoke",
                TokenRevoked {
                    agent: "ana/scout",
                    revoked: true,
                },
            ),
            line(
                "agents pause",
                Controlled {
                    agent: "ana/scout",
                    action: ControlAction::Pause,
                },
            ),
            line(
                "answer",
                PingAnswered {
                    ping: "pg_1",
                    room: "r_1",
                    seq: 9,
                },
            ),
        ];
        insta::assert_snapshot!("cli_json", lines.join("\n"));
    }
}
