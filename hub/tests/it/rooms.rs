//! Rooms, membership and agents: every command and every error it can produce.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::{MemberBody, RoomChangeBody};
use roundtable_protocol::client::*;
use roundtable_protocol::model::{PrincipalKind, Routing};
use roundtable_protocol::server::{ProfileOk, RoomOk, RoomsOk};
use roundtable_testkit::TestHub;

use crate::support::{agent, invite, login, room, say, seqs, sync};

fn create(id: u64, members: &[&str]) -> ClientFrame {
    ClientFrame::RoomCreate(RoomCreate {
        id,
        title: Some("t".into()),
        topic: Some("topic".into()),
        members: members.iter().map(|m| m.to_string()).collect(),
    })
}

#[tokio::test]
async fn room_create_adds_kin_and_refuses_strangers_atomically() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    crate::support::make_public(&mut sam).await;
    let writer = agent(&mut dana, "writer").await;

    let id = dana.id();
    let ok = dana.ok(create(id, &["dana/writer"])).await;
    let created = ok.decode::<RoomOk>().unwrap().room;
    assert_eq!(created.title.as_deref(), Some("t"));
    assert_eq!(created.creator, writer.agent.owner.clone().unwrap());
    let members: Vec<_> = created.members.iter().map(|m| m.handle.as_str()).collect();
    assert_eq!(members.len(), 2);
    assert!(members.contains(&"dana") && members.contains(&"dana/writer"));
    // room event, two joins: the head is 3.
    assert_eq!(created.head, 3);
    // Users see everything; agents start with what concerns them.
    for member in &created.members {
        let expected = match member.kind {
            PrincipalKind::User => Routing::All,
            PrincipalKind::Agent => Routing::Mentions,
        };
        assert_eq!(member.routing, expected, "{}", member.handle);
    }

    let id = dana.id();
    assert_eq!(
        dana.err(create(id, &["dana/writer", "sam"])).await.code,
        ErrorCode::NoConsent
    );
    let id = dana.id();
    assert_eq!(
        dana.err(create(id, &["nobody"])).await.code,
        ErrorCode::NotFound
    );
    let id = dana.id();
    let bad = dana
        .err(ClientFrame::RoomCreate(RoomCreate {
            id,
            title: Some("x".repeat(300)),
            topic: None,
            members: vec![],
        }))
        .await;
    assert_eq!(bad.code, ErrorCode::TooLarge);

    // Nothing of the refused rooms exists: dana has her agent's home room and one room.
    let id = dana.id();
    let rooms = dana
        .ok(ClientFrame::Rooms(Rooms { id }))
        .await
        .decode::<RoomsOk>()
        .unwrap()
        .rooms;
    assert_eq!(rooms.len(), 2);
    let id = sam.id();
    let rooms = sam
        .ok(ClientFrame::Rooms(Rooms { id }))
        .await
        .decode::<RoomsOk>()
        .unwrap()
        .rooms;
    assert!(rooms.is_empty());
}

#[tokio::test]
async fn members_get_room_added_and_the_join_events() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let mut writer_client = login(&hub, &writer.token, "agent").await;
    sync(&mut writer_client, &[]).await;
    let room_id = room(&mut dana, &["dana/writer"]).await;
    // Live: the new room's events (the agent is a member when they are delivered), then
    // the inbox's room_added.
    let mut live = Vec::new();
    for _ in 0..4 {
        live.push(writer_client.next_event().await.unwrap());
    }
    let kinds: Vec<_> = live
        .iter()
        .map(|e| (e.stream_name().to_owned(), e.kind.clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (room_id.clone(), "room".to_owned()),
            (room_id.clone(), "member".to_owned()),
            (room_id.clone(), "member".to_owned()),
            ("inbox".to_owned(), "room_added".to_owned()),
        ]
    );
    let body: RoomChangeBody = live[3].body_as().unwrap();
    assert_eq!(body.room, room_id);
    // A fresh device of the agent replays the same room from scratch.
    let mut fresh = login(&hub, &writer.token, "fresh").await;
    let (frames, heads) = sync(&mut fresh, &[]).await;
    assert_eq!(heads[&room_id], 3);
    let in_room: Vec<_> = seqs(&frames)
        .into_iter()
        .filter(|(s, _)| *s == room_id)
        .collect();
    assert_eq!(in_room.len(), 3);
}

#[tokio::test]
async fn room_invite_rules_and_errors() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    crate::support::make_public(&mut sam).await;
    agent(&mut dana, "writer").await;
    agent(&mut dana, "reviewer").await;
    let room_id = room(&mut dana, &[]).await;

    let frame = |client: &mut roundtable_testkit::Client, room: &str, handle: &str| {
        let id = client.id();
        ClientFrame::RoomInvite(RoomInvite {
            id,
            room: room.into(),
            handle: handle.into(),
        })
    };
    let f = frame(&mut dana, "r_nonexistent", "dana/writer");
    assert_eq!(dana.err(f).await.code, ErrorCode::NotFound);
    let f = frame(&mut sam, &room_id, "sam");
    assert_eq!(sam.err(f).await.code, ErrorCode::NotMember);
    let f = frame(&mut dana, &room_id, "sam");
    assert_eq!(dana.err(f).await.code, ErrorCode::NoConsent);
    let f = frame(&mut dana, &room_id, "ghost");
    assert_eq!(dana.err(f).await.code, ErrorCode::NotFound);

    invite(&mut dana, &room_id, "dana/writer").await;
    let head = |rooms: RoomsOk| rooms.rooms.iter().find(|r| r.id == room_id).unwrap().head;
    let id = dana.id();
    let before = head(
        dana.ok(ClientFrame::Rooms(Rooms { id }))
            .await
            .decode()
            .unwrap(),
    );
    // Inviting a member again is ok and changes nothing.
    invite(&mut dana, &room_id, "dana/writer").await;
    let id = dana.id();
    let after = head(
        dana.ok(ClientFrame::Rooms(Rooms { id }))
            .await
            .decode()
            .unwrap(),
    );
    assert_eq!(before, after);

    // A sibling agent may invite its kin.
    let writer_token = {
        let w = agent(&mut dana, "helper").await;
        w.token
    };
    let mut helper = login(&hub, &writer_token, "h").await;
    invite(&mut dana, &room_id, "dana/helper").await;
    invite(&mut helper, &room_id, "dana/reviewer").await;
}

#[tokio::test]
async fn room_kick_by_creator_or_owner_only() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let reviewer = agent(&mut dana, "reviewer").await;
    let room_id = room(&mut dana, &["dana/writer", "dana/reviewer"]).await;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    sync(&mut writer_client, &[]).await;

    let kick = |id: u64, room: &str, handle: &str| {
        ClientFrame::RoomKick(RoomKick {
            id,
            room: room.into(),
            handle: handle.into(),
        })
    };
    let id = writer_client.id();
    assert_eq!(
        writer_client
            .err(kick(id, &room_id, "dana/reviewer"))
            .await
            .code,
        ErrorCode::Forbidden
    );
    let id = dana.id();
    assert_eq!(
        dana.err(kick(id, "r_none", "dana/reviewer")).await.code,
        ErrorCode::NotFound
    );
    let id = dana.id();
    assert_eq!(
        dana.err(kick(id, &room_id, "nobody")).await.code,
        ErrorCode::NotFound
    );
    let id = dana.id();
    dana.ok(kick(id, &room_id, "dana/writer")).await;
    let id = dana.id();
    assert_eq!(
        dana.err(kick(id, &room_id, "dana/writer")).await.code,
        ErrorCode::NotMember
    );

    // An owner may take its agent out of a room it is not (or no longer) a member of.
    let owner_outside = agent(&mut dana, "outside").await;
    invite(&mut dana, &room_id, "dana/outside").await;
    let id = dana.id();
    dana.ok(ClientFrame::RoomLeave(RoomLeave {
        id,
        room: room_id.clone(),
    }))
    .await;
    let id = dana.id();
    dana.ok(kick(id, &room_id, "dana/outside")).await;
    let _ = owner_outside;

    // The kicked agent sees its own removal, then room_removed, and can no longer write.
    let removal = writer_client.next_event().await.unwrap();
    let body: MemberBody = removal.body_as().unwrap();
    assert_eq!(body.principal, writer.agent.id);
    assert_eq!(body.action, roundtable_protocol::bodies::MemberAction::Kick);
    let removed = writer_client.next_event().await.unwrap();
    assert_eq!(removed.kind, "room_removed");
    let id = writer_client.id();
    let refused = writer_client
        .err(roundtable_testkit::message(
            id,
            &room_id,
            "kicked-0001",
            "hi",
        ))
        .await;
    assert_eq!(refused.code, ErrorCode::NotMember);
    assert_ne!(reviewer.agent.id, writer.agent.id);
}

#[tokio::test]
async fn room_update_and_leave_write_events_members_see() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    let room_id = room(&mut dana, &["dana/writer"]).await;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    sync(&mut writer_client, &[(&room_id, 3), ("inbox", 100)]).await;

    let id = dana.id();
    dana.ok(ClientFrame::RoomUpdate(RoomUpdate {
        id,
        room: room_id.clone(),
        title: None,
        topic: Some("parser work".into()),
    }))
    .await;
    let update = writer_client.next_event().await.unwrap();
    assert_eq!(update.kind, "room");
    assert_eq!(update.body["topic"], "parser work");
    let id = dana.id();
    let empty = dana
        .err(ClientFrame::RoomUpdate(RoomUpdate {
            id,
            room: room_id.clone(),
            title: None,
            topic: None,
        }))
        .await;
    assert_eq!(empty.code, ErrorCode::BadFrame);

    let id = writer_client.id();
    writer_client
        .ok(ClientFrame::RoomLeave(RoomLeave {
            id,
            room: room_id.clone(),
        }))
        .await;
    // The leaver gets its own leave event live (the commanding connection included) and
    // its inbox room_removed; the others see the leave.
    let leave = writer_client.next_event().await.unwrap();
    assert_eq!(leave.body["action"], "leave");
    assert_eq!(
        writer_client.next_event().await.unwrap().kind,
        "room_removed"
    );
    let id = writer_client.id();
    assert_eq!(
        writer_client
            .err(ClientFrame::RoomLeave(RoomLeave {
                id,
                room: room_id.clone()
            }))
            .await
            .code,
        ErrorCode::NotMember
    );
    let (frames, _) = sync(&mut dana, &[(&room_id, 4), ("inbox", 100)]).await;
    let in_room: Vec<_> = seqs(&frames)
        .into_iter()
        .filter(|(stream, _)| *stream == room_id)
        .collect();
    assert_eq!(in_room, vec![(room_id.clone(), 5)]);
}

#[tokio::test]
async fn member_set_routes_every_message_to_an_agent() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut sam_kin, _) = hub.user("sam").await;
    let writer = agent(&mut dana, "writer").await;
    agent(&mut dana, "reviewer").await;
    // Three members: the pair rule does not apply.
    let room_id = room(&mut dana, &["dana/writer", "dana/reviewer"]).await;
    let mut writer_client = login(&hub, &writer.token, "w").await;
    sync(&mut writer_client, &[(&room_id, 100), ("inbox", 100)]).await;

    say(&mut dana, &room_id, "unrouted-001", "not for agents").await;
    writer_client
        .expect_silence(std::time::Duration::from_millis(200))
        .await
        .unwrap();

    let id = writer_client.id();
    writer_client
        .ok(ClientFrame::MemberSet(MemberSet {
            id,
            room: room_id.clone(),
            routing: Routing::All,
        }))
        .await;
    say(&mut dana, &room_id, "routed-0001", "now everyone hears").await;
    assert_eq!(
        writer_client.next_event().await.unwrap().body["text"],
        "now everyone hears"
    );

    let id = sam_kin.id();
    let refused = sam_kin
        .err(ClientFrame::MemberSet(MemberSet {
            id,
            room: room_id.clone(),
            routing: Routing::All,
        }))
        .await;
    assert_eq!(refused.code, ErrorCode::NotMember);
}

#[tokio::test]
async fn register_agent_creates_a_home_room_and_a_working_token() {
    let hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let writer = agent(&mut dana, "writer").await;
    assert_eq!(writer.agent.handle, "dana/writer");
    assert_eq!(writer.agent.kind, PrincipalKind::Agent);
    assert_eq!(
        writer.agent.owner.as_deref(),
        Some(created.principal.id.as_str())
    );
    let home = writer.room.clone().unwrap();
    assert_eq!(home.members.len(), 2);

    let id = dana.id();
    let dup = dana
        .err(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: "writer".into(),
            description: None,
            card: None,
            discoverable: None,
        }))
        .await;
    assert_eq!(dup.code, ErrorCode::Conflict);
    for bad in ["Writer", "w", "a/b", "../x", "wrïter"] {
        let id = dana.id();
        let refused = dana
            .err(ClientFrame::RegisterAgent(RegisterAgent {
                id,
                name: bad.into(),
                description: None,
                card: None,
                discoverable: None,
            }))
            .await;
        assert_eq!(refused.code, ErrorCode::BadFrame, "{bad}");
    }
    let id = dana.id();
    let card = dana
        .err(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: "carded".into(),
            description: None,
            card: Some(serde_json::json!(["not", "an", "object"])),
            discoverable: None,
        }))
        .await;
    assert_eq!(card.code, ErrorCode::BadFrame);

    let mut agent_client = login(&hub, &writer.token, "agent").await;
    let id = agent_client.id();
    let forbidden = agent_client
        .err(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: "sub".into(),
            description: None,
            card: None,
            discoverable: None,
        }))
        .await;
    assert_eq!(forbidden.code, ErrorCode::Forbidden);

    // In its two-member home room the agent sees every message.
    sync(&mut agent_client, &[(&home.id, 100), ("inbox", 100)]).await;
    say(&mut dana, &home.id, "home-000001", "no mention needed").await;
    assert_eq!(
        agent_client.next_event().await.unwrap().body["text"],
        "no mention needed"
    );
}

#[tokio::test]
async fn profile_set_changes_name_and_discoverability() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let id = dana.id();
    let ok = dana
        .ok(ClientFrame::ProfileSet(ProfileSet {
            id,
            principal: None,
            name: Some("Dana Q.".into()),
            discoverable: Some(roundtable_protocol::model::Discoverable::Public),
        }))
        .await;
    assert_eq!(ok.decode::<ProfileOk>().unwrap().principal.name, "Dana Q.");
    let id = dana.id();
    let refused = dana
        .err(ClientFrame::ProfileSet(ProfileSet {
            id,
            principal: None,
            name: Some(String::new()),
            discoverable: None,
        }))
        .await;
    assert_eq!(refused.code, ErrorCode::BadFrame);
    let id = dana.id();
    let long = dana
        .err(ClientFrame::ProfileSet(ProfileSet {
            id,
            principal: None,
            name: Some("n".repeat(129)),
            discoverable: None,
        }))
        .await;
    assert_eq!(long.code, ErrorCode::BadFrame);
}
