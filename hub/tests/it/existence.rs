//! Consent belongs to people, and existence never leaks (protocol amendments 3, 4, 7 and
//! 11): an agent neither decides its contacts nor widens its own reach; inviting a member
//! again changes nothing; a command naming what the caller may not see is answered exactly
//! as one naming nothing; names and titles hold no invisible format characters.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::*;
use roundtable_protocol::model::Discoverable;
use roundtable_protocol::server::{ErrReply, InviteCreateOk, ProfileOk, RoomOk, RoomsOk};
use roundtable_testkit::{Client, TestHub, signup_with};

use crate::support::{agent, invite, login, request_contact, room};

async fn make_contacts(a: &mut Client, b: &mut Client) {
    let code = invite_code(a).await;
    let id = b.id();
    b.ok(ClientFrame::InviteRedeem(InviteRedeem { id, code }))
        .await;
}

async fn invite_code(client: &mut Client) -> String {
    let id = client.id();
    let created: InviteCreateOk = client
        .ok(ClientFrame::InviteCreate(InviteCreate {
            id,
            room: None,
            max_uses: None,
            expires_in_s: None,
        }))
        .await
        .decode()
        .unwrap();
    created.code
}

fn profile(id: u64, principal: Option<&str>, discoverable: Discoverable) -> ClientFrame {
    ClientFrame::ProfileSet(ProfileSet {
        id,
        principal: principal.map(str::to_owned),
        name: None,
        discoverable: Some(discoverable),
    })
}

/// The reply with the one part the caller chose (an id or handle it typed) blanked out.
fn without(err: ErrReply, typed: &str) -> (ErrorCode, String) {
    (err.code, err.msg.replace(typed, "…"))
}

#[tokio::test]
async fn commands_naming_what_the_caller_may_not_see_answer_as_for_nothing() {
    let hub = TestHub::start().await;
    let (mut dana, dana_created) = hub.user("dana").await;
    let (mut eve, _) = hub.user("eve").await;
    let writer = agent(&mut dana, "writer").await;
    let hidden = writer.agent.id.clone();
    let nothing = "p_doesnotexist0000000000";
    let eves_room = room(&mut eve, &[]).await;

    type Probe = fn(u64, &str, &str) -> ClientFrame;
    let probes: [(&str, Probe); 4] = [
        ("control", |id, agent, _| {
            ClientFrame::Control(Control {
                id,
                agent: agent.into(),
                action: ControlAction::Stop,
                room: None,
                reason: None,
            })
        }),
        ("agent_token", |id, agent, _| {
            ClientFrame::AgentToken(AgentToken {
                id,
                agent: agent.into(),
                action: TokenAction::Revoke,
            })
        }),
        ("profile_set", |id, agent, _| {
            ClientFrame::ProfileSet(ProfileSet {
                id,
                principal: Some(agent.into()),
                name: Some("mine now".into()),
                discoverable: None,
            })
        }),
        ("control in a room", |id, agent, room| {
            ClientFrame::Control(Control {
                id,
                agent: agent.into(),
                action: ControlAction::Pause,
                room: Some(room.into()),
                reason: None,
            })
        }),
    ];
    for (what, probe) in probes {
        // An agent Eve may not see, a user's id (no agent), and an id of no one.
        let mut answers = Vec::new();
        for target in [hidden.as_str(), &dana_created.principal.id, nothing] {
            let id = eve.id();
            answers.push(without(
                eve.err(probe(id, target, &eves_room)).await,
                target,
            ));
        }
        assert_eq!(
            answers[0].0,
            ErrorCode::NotFound,
            "{what}: {}",
            answers[0].1
        );
        assert_eq!(answers[0], answers[1], "{what}");
        assert_eq!(answers[0], answers[2], "{what}");
    }

    // Kicking someone one may not see from one's own room: as for a handle of no one.
    let mut answers = Vec::new();
    for handle in ["dana/writer", "nobody/here"] {
        let id = eve.id();
        let err = eve
            .err(ClientFrame::RoomKick(RoomKick {
                id,
                room: eves_room.clone(),
                handle: handle.into(),
            }))
            .await;
        answers.push(without(err, handle));
    }
    assert_eq!(answers[0].0, ErrorCode::NotFound);
    assert_eq!(answers[0], answers[1]);

    // Once Eve may see the agent, she learns it is not hers: what changes is visibility.
    let id = dana.id();
    dana.ok(profile(id, Some(&hidden), Discoverable::Public))
        .await;
    let id = eve.id();
    let err = eve
        .err(ClientFrame::AgentToken(AgentToken {
            id,
            agent: hidden.clone(),
            action: TokenAction::Revoke,
        }))
        .await;
    assert_eq!(err.code, ErrorCode::Forbidden, "{}", err.msg);
    // None of it touched the agent.
    login(&hub, &writer.token, "w").await;
}

#[tokio::test]
async fn an_agent_neither_decides_its_contacts_nor_widens_its_reach() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    let writer = agent(&mut dana, "writer").await;
    let mut writer_client = login(&hub, &writer.token, "w").await;

    // The agent narrows itself, but may not widen itself back: its owner does.
    let id = writer_client.id();
    let err = writer_client
        .err(profile(id, None, Discoverable::Public))
        .await;
    assert_eq!(err.code, ErrorCode::Forbidden, "{}", err.msg);
    let id = writer_client.id();
    writer_client
        .ok(profile(id, None, Discoverable::Private))
        .await;
    let id = writer_client.id();
    assert_eq!(
        writer_client
            .err(profile(id, None, Discoverable::Contacts))
            .await
            .code,
        ErrorCode::Forbidden
    );
    let id = dana.id();
    let widened: ProfileOk = dana
        .ok(profile(id, Some(&writer.agent.id), Discoverable::Public))
        .await
        .decode()
        .unwrap();
    assert_eq!(widened.principal.id, writer.agent.id);
    // Another user's agent is not Dana's to set, even when she may see it.
    let helper = agent(&mut sam, "helper").await;
    let id = sam.id();
    sam.ok(profile(id, Some(&helper.agent.id), Discoverable::Public))
        .await;
    let id = dana.id();
    assert_eq!(
        dana.err(profile(id, Some(&helper.agent.id), Discoverable::Private))
            .await
            .code,
        ErrorCode::Forbidden
    );

    // Sam asks the agent to be a contact: the agent may neither accept nor reject.
    let request = request_contact(&mut sam, "dana/writer").await;
    for accept in [true, false] {
        let id = writer_client.id();
        let err = writer_client
            .err(ClientFrame::ContactRespond(ContactRespond {
                id,
                request: request.id.clone(),
                accept,
            }))
            .await;
        assert_eq!(err.code, ErrorCode::Forbidden, "{}", err.msg);
    }
    let id = dana.id();
    dana.ok(ClientFrame::ContactRespond(ContactRespond {
        id,
        request: request.id.clone(),
        accept: true,
    }))
    .await;

    // Nor does it redeem invites: a person's consent, not a program's.
    let code = invite_code(&mut sam).await;
    let id = writer_client.id();
    assert_eq!(
        writer_client
            .err(ClientFrame::InviteRedeem(InviteRedeem { id, code }))
            .await
            .code,
        ErrorCode::Forbidden
    );
}

#[tokio::test]
async fn inviting_a_member_again_is_ok_and_changes_nothing() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    let (mut lee, _) = hub.user("lee").await;
    make_contacts(&mut dana, &mut sam).await;
    make_contacts(&mut sam, &mut lee).await;
    let shared = room(&mut dana, &["sam"]).await;
    invite(&mut sam, &shared, "lee").await;
    let rooms = |ok: roundtable_protocol::server::OkReply| ok.decode::<RoomsOk>().unwrap();
    let id = dana.id();
    let before = rooms(dana.ok(ClientFrame::Rooms(Rooms { id })).await);

    // Dana may not invite Lee (neither kin nor contact), but Lee is a member already:
    // that is checked first, and the answer is `ok` with nothing written.
    let id = dana.id();
    dana.ok(ClientFrame::RoomInvite(RoomInvite {
        id,
        room: shared.clone(),
        handle: "lee".into(),
    }))
    .await;
    let id = dana.id();
    let after = rooms(dana.ok(ClientFrame::Rooms(Rooms { id })).await);
    assert_eq!(before, after, "the room's head and members are unchanged");
    // Someone Dana may not invite, who is not a member, is still refused.
    let (_kim, _) = hub.user("kim").await;
    let id = dana.id();
    let err = dana
        .err(ClientFrame::RoomInvite(RoomInvite {
            id,
            room: shared.clone(),
            handle: "kim".into(),
        }))
        .await;
    assert_eq!(err.code, ErrorCode::NotFound, "{}", err.msg);
}

#[tokio::test]
async fn names_titles_topics_and_descriptions_refuse_format_characters() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let reversed = "dana\u{202E}gpj.exe";
    let zero_width = "da\u{200B}na";

    let signup = signup_with(
        hub.addr,
        SignupRequest {
            handle: "mallory".into(),
            name: reversed.into(),
            discoverable: None,
            invite: None,
        },
    )
    .await;
    assert!(signup.is_err(), "a name with a bidi override signed up");

    let frames = [
        ClientFrame::ProfileSet(ProfileSet {
            id: 0,
            principal: None,
            name: Some(zero_width.into()),
            discoverable: None,
        }),
        ClientFrame::RoomCreate(RoomCreate {
            id: 0,
            title: Some(reversed.into()),
            topic: None,
            members: vec![],
        }),
        ClientFrame::RoomCreate(RoomCreate {
            id: 0,
            title: None,
            topic: Some("an isolate \u{2066}here".into()),
            members: vec![],
        }),
        ClientFrame::RegisterAgent(RegisterAgent {
            id: 0,
            name: "writer".into(),
            description: Some("writes\u{FEFF}code".into()),
            card: None,
            discoverable: None,
        }),
    ];
    for mut frame in frames {
        let id = dana.id();
        set_id(&mut frame, id);
        let t = frame.type_name();
        let err = dana.err(frame).await;
        assert_eq!(err.code, ErrorCode::BadFrame, "{t}: {}", err.msg);
        assert!(err.msg.contains("U+"), "{t}: {}", err.msg);
    }
    let shared = room(&mut dana, &[]).await;
    let id = dana.id();
    let err = dana
        .err(ClientFrame::RoomUpdate(RoomUpdate {
            id,
            room: shared.clone(),
            title: Some("soft\u{00AD}hyphen".into()),
            topic: None,
        }))
        .await;
    assert_eq!(err.code, ErrorCode::BadFrame);

    // Letters, accents, emoji and spaces are fine.
    let id = dana.id();
    let created: RoomOk = dana
        .ok(ClientFrame::RoomCreate(RoomCreate {
            id,
            title: Some("Café ☕ — plan 🦀".into()),
            topic: Some("line one\nline two".into()),
            members: vec![],
        }))
        .await
        .decode()
        .unwrap();
    assert_eq!(created.room.title.as_deref(), Some("Café ☕ — plan 🦀"));
}

fn set_id(frame: &mut ClientFrame, new: u64) {
    match frame {
        ClientFrame::ProfileSet(c) => c.id = new,
        ClientFrame::RoomCreate(c) => c.id = new,
        ClientFrame::RegisterAgent(c) => c.id = new,
        other => panic!("no id to set on {}", other.type_name()),
    }
}
