//! Small steps the tests repeat.

use roundtable_protocol::client::{ClientFrame, RegisterAgent, RoomCreate, RoomInvite};
use roundtable_protocol::server::{Event, RegisterAgentOk, RoomOk, SendOk};
use roundtable_testkit::{Client, TestHub, message};

/// Creates a room with the given member handles; returns its id.
pub async fn room(client: &mut Client, members: &[&str]) -> String {
    let id = client.id();
    let ok = client
        .ok(ClientFrame::RoomCreate(RoomCreate {
            id,
            title: Some("test room".into()),
            topic: None,
            members: members.iter().map(|m| m.to_string()).collect(),
        }))
        .await;
    ok.decode::<RoomOk>().unwrap().room.id
}

pub async fn invite(client: &mut Client, room: &str, handle: &str) {
    let id = client.id();
    client
        .ok(ClientFrame::RoomInvite(RoomInvite {
            id,
            room: room.into(),
            handle: handle.into(),
        }))
        .await;
}

/// Sends a message; returns the stored event.
pub async fn say(client: &mut Client, room: &str, key: &str, text: &str) -> Event {
    let id = client.id();
    let ok = client.ok(message(id, room, key, text)).await;
    let sent: SendOk = ok.decode().unwrap();
    assert!(!sent.dup);
    sent.event
}

/// Registers an agent of `owner`; returns the reply (agent, token, home room).
pub async fn agent(owner: &mut Client, name: &str) -> RegisterAgentOk {
    let id = owner.id();
    owner
        .ok(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: name.into(),
            description: Some(format!("{name} for tests")),
            card: None,
            discoverable: None,
        }))
        .await
        .decode()
        .unwrap()
}

/// Connects and authenticates with a token.
pub async fn login(hub: &TestHub, token: &str, device: &str) -> Client {
    let mut client = hub.connect().await;
    client.auth(token, device).await.expect("auth");
    client
}

/// Syncs from the given cursors; returns the events and gaps replayed, then the heads.
pub async fn sync(
    client: &mut Client,
    cursors: &[(&str, u64)],
) -> (
    Vec<roundtable_protocol::ServerFrame>,
    std::collections::BTreeMap<String, u64>,
) {
    let id = client.id();
    client.backlog.clear();
    let ok = client
        .ok(ClientFrame::Sync(roundtable_protocol::client::SyncCmd {
            id,
            cursors: cursors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }))
        .await;
    let heads = ok
        .decode::<roundtable_protocol::server::SyncOk>()
        .unwrap()
        .heads;
    (client.backlog.drain(..).collect(), heads)
}

/// The events of a replay, as (stream, seq).
pub fn seqs(frames: &[roundtable_protocol::ServerFrame]) -> Vec<(String, u64)> {
    frames
        .iter()
        .filter_map(|frame| match frame {
            roundtable_protocol::ServerFrame::Evt(event) => {
                Some((event.stream_name().to_owned(), event.seq))
            }
            _ => None,
        })
        .collect()
}

/// Makes the client's principal visible to everyone in the directory.
pub async fn make_public(client: &mut Client) {
    let id = client.id();
    client
        .ok(ClientFrame::ProfileSet(
            roundtable_protocol::client::ProfileSet {
                id,
                principal: None,
                name: None,
                discoverable: Some(roundtable_protocol::model::Discoverable::Public),
            },
        ))
        .await;
}

/// Asks for a contact; returns the request.
pub async fn request_contact(
    client: &mut Client,
    to: &str,
) -> roundtable_protocol::model::ContactRequest {
    let id = client.id();
    client
        .ok(ClientFrame::ContactRequest(
            roundtable_protocol::client::ContactRequestCmd {
                id,
                to: to.into(),
                message: Some(format!("hello {to}")),
            },
        ))
        .await
        .decode::<roundtable_protocol::server::ContactRequestOk>()
        .unwrap()
        .request
}

/// Accepts or declines a contact request.
pub async fn respond(client: &mut Client, request: &str, accept: bool) {
    let id = client.id();
    client
        .ok(ClientFrame::ContactRespond(
            roundtable_protocol::client::ContactRespond {
                id,
                request: request.into(),
                accept,
            },
        ))
        .await;
}

/// Counts of every table a command can write (the audit log aside): equal before and
/// after a refused command means it wrote nothing.
pub fn fingerprint(hub: &roundtable_testkit::TestHub) -> Vec<(String, i64)> {
    let counts = [
        "SELECT count(*) FROM principals",
        "SELECT count(*) FROM tokens WHERE revoked_ms IS NULL",
        "SELECT count(*) FROM rooms",
        "SELECT count(*) FROM members",
        "SELECT count(*) FROM events",
        "SELECT count(*) FROM contacts",
        "SELECT count(*) FROM contact_requests",
        "SELECT count(*) FROM contact_requests WHERE state = 'pending'",
        "SELECT count(*) FROM invites",
        "SELECT coalesce(sum(uses), 0) FROM invites",
        "SELECT count(*) FROM invites WHERE revoked_ms IS NOT NULL",
        "SELECT count(*) FROM controls",
        "SELECT count(*) FROM acks",
        "SELECT count(*) FROM pings",
    ];
    // One query (and one round trip) for all of them.
    let together = counts
        .iter()
        .map(|sql| format!("({sql})"))
        .collect::<Vec<_>>()
        .join(", ");
    let row = hub.select(&format!("SELECT {together}")).remove(0);
    counts
        .iter()
        .zip(row)
        .map(|(sql, count)| (sql.to_string(), count.parse().unwrap()))
        .collect()
}

/// A value of the hub's `/metrics`.
pub async fn metric(hub: std::net::SocketAddr, name: &str) -> u64 {
    let text = roundtable_testkit::http(hub, "GET", "/metrics", None)
        .await
        .unwrap()
        .body;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}
