//! Discovery and consent: the directory, contact requests decided by the other side (or its
//! owner), invites for remote teammates (and their withdrawal), and the scenario the whole
//! design exists for.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::*;
use roundtable_protocol::model::{ContactRelation, Discoverable, PrincipalKind, RequestState};
use roundtable_protocol::server::{
    ContactsOk, DirectoryOk, InviteCreateOk, InviteRedeemOk, InvitesOk,
};
use roundtable_testkit::{TestHub, message, signup_with};

use crate::support::{agent, invite, login, make_public, request_contact, respond, room, sync};

async fn directory(client: &mut roundtable_testkit::Client, query: Option<&str>) -> DirectoryOk {
    let id = client.id();
    client
        .ok(ClientFrame::Directory(Directory {
            id,
            query: query.map(str::to_owned),
            limit: None,
        }))
        .await
        .decode()
        .unwrap()
}

async fn contacts(client: &mut roundtable_testkit::Client) -> ContactsOk {
    let id = client.id();
    client
        .ok(ClientFrame::Contacts(Contacts { id }))
        .await
        .decode()
        .unwrap()
}

#[tokio::test]
async fn the_seed_scenario_crosses_owners_only_with_consent() {
    // User A registers agent a/codex; user B has agent b/assistant.
    let hub = TestHub::start().await;
    let (mut user_a, _) = hub.user("alpha").await;
    let (mut user_b, _) = hub.user("bravo").await;
    let codex = agent(&mut user_a, "codex").await;
    let assistant = {
        let id = user_b.id();
        user_b
            .ok(ClientFrame::RegisterAgent(RegisterAgent {
                id,
                name: "assistant".into(),
                description: Some("answers questions about the billing service".into()),
                card: Some(serde_json::json!({
                    "framework": "claude-code",
                    "model": "claude-sonnet-4-5",
                    "skills": [{"id": "billing", "name": "Billing questions", "tags": ["finance"]}]
                })),
                discoverable: Some(Discoverable::Public),
            }))
            .await
            .decode::<roundtable_protocol::server::RegisterAgentOk>()
            .unwrap()
    };
    let mut codex_client = login(&hub, &codex.token, "codex").await;
    let mut assistant_client = login(&hub, &assistant.token, "assistant").await;
    sync(&mut user_b, &[]).await;
    sync(&mut assistant_client, &[]).await;
    sync(&mut codex_client, &[]).await;

    // a/codex finds b/assistant, with its card, and asks for contact.
    let found = directory(&mut codex_client, Some("billing")).await;
    assert_eq!(found.entries.len(), 1);
    assert_eq!(found.entries[0].handle, "bravo/assistant");
    assert_eq!(found.entries[0].contact, ContactRelation::None);
    assert_eq!(
        found.entries[0].card.as_ref().unwrap()["skills"][0]["id"],
        "billing"
    );

    // Before consent, a/codex cannot bring b/assistant into a room.
    let room_id = room(&mut codex_client, &[]).await;
    let id = codex_client.id();
    let refused = codex_client
        .err(ClientFrame::RoomInvite(RoomInvite {
            id,
            room: room_id.clone(),
            handle: "bravo/assistant".into(),
        }))
        .await;
    assert_eq!(refused.code, ErrorCode::NoConsent);

    let request = request_contact(&mut codex_client, "bravo/assistant").await;
    assert_eq!(request.state, RequestState::Pending);
    // B (the target's owner) hears of it in its inbox, as does the agent.
    let heard = user_b.next_event().await.unwrap();
    assert_eq!(
        (heard.stream.as_deref(), heard.kind.as_str()),
        (Some("inbox"), "contact")
    );
    assert_eq!(heard.body["state"], "pending");
    assert_eq!(
        assistant_client.next_event().await.unwrap().body["request"],
        request.id.as_str()
    );
    let pending = contacts(&mut user_b).await;
    assert_eq!(
        pending.requests.len(),
        1,
        "B sees its agent's pending request"
    );

    // B approves.
    respond(&mut user_b, &request.id, true).await;
    let directory_after = directory(&mut codex_client, Some("bravo/assistant")).await;
    assert_eq!(
        directory_after.entries[0].contact,
        ContactRelation::Accepted
    );

    // a/codex invites b/assistant and mentions it; b/assistant receives and replies.
    invite(&mut codex_client, &room_id, "bravo/assistant").await;
    let id = codex_client.id();
    codex_client
        .ok(message(
            id,
            &room_id,
            "seed-mention-1",
            "@bravo/assistant what does invoice 42 cost?",
        ))
        .await;
    let question = loop {
        let event = assistant_client.next_event().await.unwrap();
        if event.kind == "message" {
            break event;
        }
    };
    assert_eq!(question.from, codex.agent.id);
    assert_eq!(
        question.body["mentions"],
        serde_json::json!([assistant.agent.id])
    );
    let id = assistant_client.id();
    assistant_client
        .ok(message(
            id,
            &room_id,
            "seed-reply-001",
            "@alpha/codex 42 credits",
        ))
        .await;
    let reply = loop {
        let event = codex_client.next_event().await.unwrap();
        if event.kind == "message" {
            break event;
        }
    };
    assert_eq!(reply.from, assistant.agent.id);
    assert_eq!(reply.body["text"], "@alpha/codex 42 credits");
}

#[tokio::test]
async fn requests_can_be_rejected_and_cancelled() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    make_public(&mut sam).await;
    make_public(&mut dana).await;

    let first = request_contact(&mut dana, "sam").await;
    respond(&mut sam, &first.id, false).await;
    let ContactsOk {
        contacts: none,
        requests,
    } = contacts(&mut dana).await;
    assert!(none.is_empty() && requests.is_empty());

    let second = request_contact(&mut dana, "sam").await;
    respond(&mut dana, &second.id, false).await;
    let id = sam.id();
    let late = sam
        .err(ClientFrame::ContactRespond(ContactRespond {
            id,
            request: second.id.clone(),
            accept: true,
        }))
        .await;
    assert_eq!(late.code, ErrorCode::Conflict);
    assert!(late.msg.contains("cancelled"), "{}", late.msg);

    let third = request_contact(&mut sam, "dana").await;
    respond(&mut dana, &third.id, true).await;
    let mine = contacts(&mut dana).await;
    assert_eq!(mine.contacts.len(), 1);
    assert_eq!(mine.contacts[0].handle, "sam");
    assert_eq!(mine.contacts[0].kind, PrincipalKind::User);
}

#[tokio::test]
async fn discoverability_decides_who_appears_in_the_directory() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await; // contacts (the default)
    let (mut sam, _) = hub.user("sam").await;
    let (mut eve, _) = hub.user("eve").await;
    make_public(&mut sam).await;
    let writer = agent(&mut dana, "writer").await; // contacts
    {
        let id = dana.id();
        dana.ok(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: "hidden".into(),
            description: None,
            card: None,
            discoverable: Some(Discoverable::Private),
        }))
        .await;
    }
    let _ = writer;

    // Eve, a stranger, sees only public principals.
    let seen: Vec<String> = directory(&mut eve, None)
        .await
        .entries
        .into_iter()
        .map(|e| e.handle)
        .collect();
    assert_eq!(seen, vec!["sam"]);
    // Dana sees her kin (even the private agent) and public sam, never herself.
    let seen: Vec<String> = directory(&mut dana, None)
        .await
        .entries
        .into_iter()
        .map(|e| e.handle)
        .collect();
    assert_eq!(seen, vec!["dana/hidden", "dana/writer", "sam"]);
    // Once sam is dana's contact, sam sees dana and her contacts-visible agents (contacts
    // of its owner), not the private one.
    let request = request_contact(&mut dana, "sam").await;
    respond(&mut sam, &request.id, true).await;
    let entries = directory(&mut sam, None).await.entries;
    let seen: Vec<(String, ContactRelation)> =
        entries.into_iter().map(|e| (e.handle, e.contact)).collect();
    assert_eq!(
        seen,
        vec![
            ("dana".to_owned(), ContactRelation::Accepted),
            ("dana/writer".to_owned(), ContactRelation::None),
        ]
    );
    // Search matches handle, name and description; an empty result reveals nothing.
    assert!(directory(&mut eve, Some("hidden")).await.entries.is_empty());
    assert_eq!(directory(&mut sam, Some("WRITER")).await.entries.len(), 1);
}

#[tokio::test]
async fn an_invite_makes_contacts_and_a_member_of_a_remote_teammate() {
    let hub = TestHub::start().await;
    let (mut dana, dana_created) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    sync(&mut dana, &[]).await;
    let id = dana.id();
    let created: InviteCreateOk = dana
        .ok(ClientFrame::InviteCreate(InviteCreate {
            id,
            room: Some(room_id.clone()),
            max_uses: Some(2),
            expires_in_s: None,
        }))
        .await
        .decode()
        .unwrap();
    assert!(created.code.len() >= 22, "at least 128 bits");
    assert_eq!(
        created.link,
        format!("roundtable://invite/{}?hub={}", created.code, hub.addr)
    );
    // The code is stored hashed: it appears nowhere in the database.
    let stored = hub.stored_bytes();
    assert!(
        !stored
            .windows(created.code.len())
            .any(|w| w == created.code.as_bytes())
    );

    // Sam redeems it: contacts with dana, member of the room.
    let (mut sam, sam_created) = hub.user("sam").await;
    let id = sam.id();
    let redeemed: InviteRedeemOk = sam
        .ok(ClientFrame::InviteRedeem(InviteRedeem {
            id,
            code: created.code.clone(),
        }))
        .await
        .decode()
        .unwrap();
    assert_eq!(redeemed.room.unwrap().id, room_id);
    let mine = contacts(&mut sam).await;
    assert_eq!(mine.contacts[0].id, dana_created.principal.id);
    // Sam brings his agent (kin), dana sees it join; the room is theirs now.
    let security = agent(&mut sam, "security").await;
    invite(&mut sam, &room_id, "sam/security").await;
    let joined = loop {
        let event = dana.next_event().await.unwrap();
        if event.kind == "member" && event.body["principal"] == security.agent.id.as_str() {
            break event;
        }
    };
    assert_eq!(joined.body["by"], sam_created.principal.id.as_str());
    // Signing up with an invite redeems it too; the third use is refused.
    let tom = signup_with(
        hub.addr,
        SignupRequest {
            handle: "tom".into(),
            name: "Tom".into(),
            discoverable: None,
            invite: Some(created.code.clone()),
        },
    )
    .await
    .unwrap();
    let mut tom_client = login(&hub, &tom.token, "t").await;
    assert_eq!(contacts(&mut tom_client).await.contacts.len(), 1);
    let (mut ann, _) = hub.user("ann").await;
    let id = ann.id();
    let used_up = ann
        .err(ClientFrame::InviteRedeem(InviteRedeem {
            id,
            code: created.code,
        }))
        .await;
    assert_eq!(used_up.code, ErrorCode::Conflict);
}

#[tokio::test]
async fn invite_mode_signs_up_with_a_code_only() {
    let hub =
        TestHub::start_with(|config| config.signup = roundtable_hub::SignupMode::Invite).await;
    // The first user comes from the operator (the hub is invite-only).
    let dana = roundtable_hub::admin::add_user(&hub.config, "dana", "Dana");
    assert!(
        matches!(
            dana,
            Err(roundtable_hub::admin::AdminError::Hub(
                roundtable_hub::HubError::Locked { .. }
            ))
        ),
        "user add refuses while the hub runs: {dana:?}"
    );
    let mut hub = hub;
    hub.stop().await;
    let dana = roundtable_hub::admin::add_user(&hub.config, "dana", "Dana").unwrap();
    hub.restart().await;
    let mut dana_client = login(&hub, &dana.token, "d").await;
    let id = dana_client.id();
    let created: InviteCreateOk = dana_client
        .ok(ClientFrame::InviteCreate(InviteCreate {
            id,
            room: None,
            max_uses: None,
            expires_in_s: Some(60),
        }))
        .await
        .decode()
        .unwrap();
    let sam = signup_with(
        hub.addr,
        SignupRequest {
            handle: "sam".into(),
            name: "Sam".into(),
            discoverable: None,
            invite: Some(created.code),
        },
    )
    .await
    .unwrap();
    assert_eq!(sam.principal.handle, "sam");
}

async fn create_invite(
    client: &mut roundtable_testkit::Client,
    room: Option<&str>,
    max_uses: u32,
) -> InviteCreateOk {
    let id = client.id();
    client
        .ok(ClientFrame::InviteCreate(InviteCreate {
            id,
            room: room.map(str::to_owned),
            max_uses: Some(max_uses),
            expires_in_s: None,
        }))
        .await
        .decode()
        .unwrap()
}

async fn invites(
    client: &mut roundtable_testkit::Client,
) -> Vec<roundtable_protocol::model::Invite> {
    let id = client.id();
    client
        .ok(ClientFrame::Invites(Invites { id }))
        .await
        .decode::<InvitesOk>()
        .unwrap()
        .invites
}

fn revoke(id: u64, invite: &str) -> ClientFrame {
    ClientFrame::InviteRevoke(InviteRevoke {
        id,
        invite: invite.into(),
    })
}

fn redeem(id: u64, code: &str) -> ClientFrame {
    ClientFrame::InviteRedeem(InviteRedeem {
        id,
        code: code.into(),
    })
}

#[tokio::test]
async fn an_invite_is_listed_until_its_creator_withdraws_it_and_then_never_redeems() {
    let mut hub = TestHub::start().await;
    let (mut dana, dana_created) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    let (mut eve, eve_created) = hub.user("eve").await;

    let created = create_invite(&mut dana, None, 3).await;
    let invite_id = created.invite.clone().expect("the hub names the invite");
    assert!(invite_id.starts_with("i_"), "{invite_id}");
    let listed = invites(&mut dana).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].id.as_str(),
            listed[0].room.as_deref(),
            listed[0].uses_left
        ),
        (invite_id.as_str(), None, 3)
    );
    let created_ms = roundtable_protocol::ts::parse_millis(&listed[0].created_at).unwrap();
    let expires_ms = roundtable_protocol::ts::parse_millis(&listed[0].expires_at).unwrap();
    assert_eq!(
        expires_ms - created_ms,
        7 * 24 * 60 * 60 * 1000,
        "the default week"
    );
    // Each use counts down; nobody else sees dana's invites.
    let id = sam.id();
    sam.ok(redeem(id, &created.code)).await;
    assert_eq!(invites(&mut dana).await[0].uses_left, 2);
    assert!(invites(&mut eve).await.is_empty());

    // Someone else's invite and an unknown one are the same `not_found`: ids reveal nothing.
    let id = eve.id();
    let others = eve.err(revoke(id, &invite_id)).await;
    let id = eve.id();
    let unknown = eve.err(revoke(id, "i_aaaaaaaaaaaaaaaa")).await;
    assert_eq!(others.code, ErrorCode::NotFound);
    assert_eq!((unknown.code, unknown.msg), (others.code, others.msg));
    assert_eq!(invites(&mut dana).await.len(), 1, "eve withdrew nothing");

    // The creator withdraws it, twice (the second changes nothing); it is listed no more.
    for _ in 0..2 {
        let id = dana.id();
        dana.ok(revoke(id, &invite_id)).await;
    }
    assert!(invites(&mut dana).await.is_empty());
    let id = eve.id();
    let withdrawn = eve.err(redeem(id, &created.code)).await;
    assert_eq!(withdrawn.code, ErrorCode::Conflict);
    assert!(withdrawn.msg.contains("withdrawn"), "{}", withdrawn.msg);
    // Signing up with it fails too, and creates nobody.
    let body = serde_json::json!({"handle": "tom", "name": "Tom", "invite": created.code});
    let refused = roundtable_testkit::http(hub.addr, "POST", "/v1/signup", Some(&body.to_string()))
        .await
        .unwrap();
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.json()["code"], "forbidden");
    assert!(refused.body.contains("withdrawn"), "{}", refused.body);

    // The withdrawal is durable, and audited under the invite's id; listing is a read.
    hub.restart().await;
    let mut eve = login(&hub, &eve_created.token, "e2").await;
    let id = eve.id();
    assert_eq!(
        eve.err(redeem(id, &created.code)).await.code,
        ErrorCode::Conflict
    );
    let mut dana = login(&hub, &dana_created.token, "d2").await;
    assert!(invites(&mut dana).await.is_empty());
    let id = dana.id();
    let audit: roundtable_protocol::server::AuditOk = dana
        .ok(ClientFrame::Audit(Audit {
            id,
            principal: None,
            since: None,
            limit: None,
        }))
        .await
        .decode()
        .unwrap();
    let actions: Vec<(&str, Option<&str>)> = audit
        .entries
        .iter()
        .filter(|entry| entry.action.starts_with("invite"))
        .map(|entry| (entry.action.as_str(), entry.target.as_deref()))
        .collect();
    assert_eq!(
        actions,
        vec![
            ("invite_create", Some(invite_id.as_str())),
            ("invite_revoke", Some(invite_id.as_str())),
            ("invite_revoke", Some(invite_id.as_str())),
        ]
    );
}

#[tokio::test]
async fn a_room_invite_is_void_while_its_creator_is_out_of_the_room() {
    let hub = TestHub::start().await;
    let (mut dana, dana_created) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    let (mut lee, _) = hub.user("lee").await;
    make_public(&mut dana).await;
    let request = request_contact(&mut sam, "dana").await;
    respond(&mut dana, &request.id, true).await;
    let room_id = room(&mut dana, &["sam"]).await;
    let created = create_invite(&mut dana, Some(&room_id), 2).await;

    let id = dana.id();
    dana.ok(ClientFrame::RoomLeave(RoomLeave {
        id,
        room: room_id.clone(),
    }))
    .await;
    let id = lee.id();
    let void = lee.err(redeem(id, &created.code)).await;
    assert_eq!(void.code, ErrorCode::Conflict);
    assert!(void.msg.contains("not in its room"), "{}", void.msg);
    assert!(
        contacts(&mut lee).await.contacts.is_empty(),
        "nothing happened"
    );
    // Still dana's to withdraw, and no use was counted.
    let listed = invites(&mut dana).await;
    assert_eq!(
        (listed[0].room.as_deref(), listed[0].uses_left),
        (Some(room_id.as_str()), 2)
    );

    // Back in the room, dana's invite works again.
    invite(&mut sam, &room_id, "dana").await;
    let id = lee.id();
    let redeemed: InviteRedeemOk = lee.ok(redeem(id, &created.code)).await.decode().unwrap();
    let joined = redeemed.room.expect("the invite's room");
    assert_eq!(joined.id, room_id);
    assert!(joined.members.iter().any(|m| m.handle == "lee"));
    assert_eq!(
        contacts(&mut lee).await.contacts[0].id,
        dana_created.principal.id
    );
    assert_eq!(invites(&mut dana).await[0].uses_left, 1);
}
