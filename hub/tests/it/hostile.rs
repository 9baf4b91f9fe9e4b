//! The hostile cases: every attempt to read, write, invite, decide, impersonate or flood
//! that the protocol forbids gets the exact error code, writes nothing (every table a
//! command can write is counted before and after), and leaks nothing.

use std::time::Duration;

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::*;
use roundtable_protocol::model::Discoverable;
use roundtable_protocol::server::{
    DirectoryOk, ErrReply, InviteCreateOk, RegisterAgentOk, ServerFrame, SyncOk,
};
use roundtable_testkit::{Client, Incoming, TestHub, http, message, numbered, signup_with};
use serde_json::json;

use crate::support::{fingerprint, login, make_public, request_contact, respond, room};

/// Who makes an attempt: the people and agents of the suite, each with a connection.
#[derive(Debug, Clone, Copy)]
enum Who {
    Dana,
    Sam,
    Eve,
    /// `dana/writer`.
    Writer,
    /// `eve/bot`.
    Bot,
}

use Who::*;

struct Cast {
    dana: Client,
    sam: Client,
    eve: Client,
    writer: Client,
    bot: Client,
}

impl Cast {
    fn client(&mut self, who: Who) -> &mut Client {
        match who {
            Dana => &mut self.dana,
            Sam => &mut self.sam,
            Eve => &mut self.eve,
            Writer => &mut self.writer,
            Bot => &mut self.bot,
        }
    }
}

/// Counts the cases it checks.
struct Suite {
    hub: TestHub,
    cases: usize,
}

impl Suite {
    /// `frame` from `client` (numbered here, whatever id it carries) is refused with `code`
    /// and writes nothing.
    async fn refused(
        &mut self,
        case: &str,
        client: &mut Client,
        frame: ClientFrame,
        code: ErrorCode,
    ) -> ErrReply {
        let frame = numbered(frame, client.id()).expect("a frame renumbers");
        let before = fingerprint(&self.hub);
        let err = match client.call(frame).await.expect("the call completes") {
            Ok(ok) => panic!("{case}: accepted: {ok:?}"),
            Err(err) => err,
        };
        assert_eq!(err.code, code, "{case}: {}", err.msg);
        assert!(!err.msg.is_empty(), "{case}: the message says what to do");
        assert_eq!(
            fingerprint(&self.hub),
            before,
            "{case}: something was written"
        );
        self.cases += 1;
        err
    }

    /// A signup over HTTP is refused with `status` and `code`, and creates nobody.
    async fn signup_refused(
        &mut self,
        case: &str,
        body: serde_json::Value,
        status: u16,
        code: &str,
    ) {
        let before = fingerprint(&self.hub);
        let response = http(self.hub.addr, "POST", "/v1/signup", Some(&body.to_string()))
            .await
            .unwrap();
        assert_eq!(response.status, status, "{case}: {}", response.body);
        assert_eq!(response.json()["code"], code, "{case}");
        assert_eq!(
            fingerprint(&self.hub),
            before,
            "{case}: something was written"
        );
        self.cases += 1;
    }
}

async fn register(owner: &mut Client, name: &str, discoverable: Discoverable) -> RegisterAgentOk {
    owner
        .request(RegisterAgent {
            id: 0,
            name: name.into(),
            description: Some(format!("{name} agent")),
            card: None,
            discoverable: Some(discoverable),
        })
        .await
        .expect("the call completes")
        .expect("the agent is registered")
}

fn send(id: u64, room: &str, key: &str, text: &str) -> ClientFrame {
    message(id, room, key, text)
}

fn contact_request(id: u64, to: &str, message: Option<String>) -> ClientFrame {
    ClientFrame::ContactRequest(ContactRequestCmd {
        id,
        to: to.into(),
        message,
    })
}

fn decide(id: u64, request: &str, accept: bool) -> ClientFrame {
    ClientFrame::ContactRespond(ContactRespond {
        id,
        request: request.into(),
        accept,
    })
}

fn control(id: u64, agent: &str, action: ControlAction, room: Option<&str>) -> ClientFrame {
    ClientFrame::Control(Control {
        id,
        agent: agent.into(),
        action,
        room: room.map(str::to_owned),
        reason: None,
    })
}

fn token_action(id: u64, agent: &str, action: TokenAction) -> ClientFrame {
    ClientFrame::AgentToken(AgentToken {
        id,
        agent: agent.into(),
        action,
    })
}

fn invite_create(id: u64, room: Option<&str>, max_uses: u32, expires_in_s: u64) -> ClientFrame {
    ClientFrame::InviteCreate(InviteCreate {
        id,
        room: room.map(str::to_owned),
        max_uses: Some(max_uses),
        expires_in_s: Some(expires_in_s),
    })
}

fn invite_revoke(id: u64, invite: &str) -> ClientFrame {
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

async fn directory_handles(client: &mut Client, query: Option<&str>) -> Vec<String> {
    let id = client.id();
    let found: DirectoryOk = client
        .ok(ClientFrame::Directory(Directory {
            id,
            query: query.map(str::to_owned),
            limit: None,
        }))
        .await
        .decode()
        .unwrap();
    found
        .entries
        .into_iter()
        .map(|entry| entry.handle)
        .collect()
}

/// A hub with several owners:
/// - dana (discoverable: contacts) with agents dana/writer and dana/reviewer;
/// - sam (public) with agent sam/security (public); dana and sam are contacts;
/// - eve (public) with agent eve/bot (public): a stranger to everyone;
/// - priv (private), nobody's contact.
///
/// Rooms: `shared` (dana, dana/writer, sam), `eves` (eve, eve/bot).
#[tokio::test]
async fn every_forbidden_attempt_is_refused_exactly_and_writes_nothing() {
    let hub = TestHub::start_with(|config| {
        config.rate_limits = Some(roundtable_engine::RateLimits {
            // Every write an agent makes draws a token, refused ones too: room for the
            // agents' forbidden attempts below; the burst is made by a fresh agent.
            agent: "30/0.2".parse().unwrap(),
            user: "1000/1000".parse().unwrap(),
        })
    })
    .await;
    let (mut dana, dana_created) = hub.user("dana").await;
    let (mut sam, sam_created) = hub.user("sam").await;
    let (mut eve, _) = hub.user("eve").await;
    let private = signup_with(
        hub.addr,
        SignupRequest {
            handle: "priv".into(),
            name: "Private".into(),
            discoverable: Some(Discoverable::Private),
            invite: None,
        },
    )
    .await
    .unwrap();
    make_public(&mut sam).await;
    make_public(&mut eve).await;
    let writer = register(&mut dana, "writer", Discoverable::Contacts).await;
    register(&mut dana, "reviewer", Discoverable::Contacts).await;
    let security = register(&mut sam, "security", Discoverable::Public).await;
    let bot = register(&mut eve, "bot", Discoverable::Public).await;
    let request = request_contact(&mut dana, "sam").await;
    respond(&mut sam, &request.id, true).await;
    let shared = room(&mut dana, &["dana/writer", "sam"]).await;
    let eves = room(&mut eve, &["eve/bot"]).await;
    let writer_client = login(&hub, &writer.token, "w").await;
    let bot_client = login(&hub, &bot.token, "b").await;
    let mut cast = Cast {
        dana,
        sam,
        eve,
        writer: writer_client,
        bot: bot_client,
    };
    let mut suite = Suite { hub, cases: 0 };

    // --- Reading or writing a room without membership.
    for (case, who, frame, code) in [
        (
            "send without membership",
            Eve,
            send(0, &shared, "eve-sneak-01", "hi"),
            ErrorCode::NotMember,
        ),
        (
            "history without membership",
            Eve,
            ClientFrame::History(History {
                id: 0,
                room: shared.clone(),
                before: None,
                after: None,
                limit: None,
            }),
            ErrorCode::NotMember,
        ),
        (
            "invite into a room one is not in",
            Eve,
            ClientFrame::RoomInvite(RoomInvite {
                id: 0,
                room: shared.clone(),
                handle: "eve/bot".into(),
            }),
            ErrorCode::NotMember,
        ),
        (
            "update a room one is not in",
            Eve,
            ClientFrame::RoomUpdate(RoomUpdate {
                id: 0,
                room: shared.clone(),
                title: Some("mine".into()),
                topic: None,
            }),
            ErrorCode::NotMember,
        ),
        (
            "leave a room one is not in",
            Eve,
            ClientFrame::RoomLeave(RoomLeave {
                id: 0,
                room: shared.clone(),
            }),
            ErrorCode::NotMember,
        ),
        (
            "routing in a room one is not in",
            Eve,
            ClientFrame::MemberSet(MemberSet {
                id: 0,
                room: shared.clone(),
                routing: roundtable_protocol::model::Routing::All,
            }),
            ErrorCode::NotMember,
        ),
        (
            "kick from a room one is not in",
            Eve,
            ClientFrame::RoomKick(RoomKick {
                id: 0,
                room: shared.clone(),
                handle: "dana/writer".into(),
            }),
            ErrorCode::NotMember,
        ),
        (
            "invite code for a room one is not in",
            Eve,
            invite_create(0, Some(&shared), 1, 60),
            ErrorCode::NotMember,
        ),
        (
            "send to a room that does not exist",
            Eve,
            send(0, "r_nonexistent00000", "eve-sneak-02", "hi"),
            ErrorCode::NotFound,
        ),
        (
            "kick by a member who is not the creator",
            Sam,
            ClientFrame::RoomKick(RoomKick {
                id: 0,
                room: shared.clone(),
                handle: "dana/writer".into(),
            }),
            ErrorCode::Forbidden,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    // A cursor for someone else's room replays nothing and reveals nothing.
    let id = cast.eve.id();
    let heads: SyncOk = cast
        .eve
        .ok(ClientFrame::Sync(SyncCmd {
            id,
            cursors: [(shared.clone(), 0)].into_iter().collect(),
        }))
        .await
        .decode()
        .unwrap();
    assert!(!heads.heads.contains_key(&shared));
    assert!(cast.eve.backlog.iter().all(
        |frame| !matches!(frame, ServerFrame::Evt(e) if e.room.as_deref() == Some(shared.as_str()))
    ));
    cast.eve.backlog.clear();
    suite.cases += 1;

    // --- Invitations across owners without consent.
    for (case, who, frame, code) in [
        (
            "invite a public stranger",
            Dana,
            ClientFrame::RoomInvite(RoomInvite {
                id: 0,
                room: shared.clone(),
                handle: "eve".into(),
            }),
            ErrorCode::NoConsent,
        ),
        (
            "invite a stranger's agent",
            Dana,
            ClientFrame::RoomInvite(RoomInvite {
                id: 0,
                room: shared.clone(),
                handle: "eve/bot".into(),
            }),
            ErrorCode::NoConsent,
        ),
        (
            "invite a private principal",
            Dana,
            ClientFrame::RoomInvite(RoomInvite {
                id: 0,
                room: shared.clone(),
                handle: "priv".into(),
            }),
            ErrorCode::NotFound,
        ),
        (
            "create a room with a stranger",
            Dana,
            ClientFrame::RoomCreate(RoomCreate {
                id: 0,
                title: None,
                topic: None,
                members: vec!["sam".into(), "eve".into()],
            }),
            ErrorCode::NoConsent,
        ),
        (
            "an agent invites its owner's non-contact",
            Writer,
            ClientFrame::RoomInvite(RoomInvite {
                id: 0,
                room: shared.clone(),
                handle: "eve".into(),
            }),
            ErrorCode::NoConsent,
        ),
        (
            "invite someone one cannot see",
            Eve,
            ClientFrame::RoomInvite(RoomInvite {
                id: 0,
                room: eves.clone(),
                handle: "dana".into(),
            }),
            ErrorCode::NotFound,
        ),
        (
            "invite a public user who is not a contact",
            Eve,
            ClientFrame::RoomInvite(RoomInvite {
                id: 0,
                room: eves.clone(),
                handle: "sam".into(),
            }),
            ErrorCode::NoConsent,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    let pending = request_contact(&mut cast.eve, "sam").await;
    for (case, who, frame, code) in [
        (
            "a pending request is not consent",
            Eve,
            ClientFrame::RoomInvite(RoomInvite {
                id: 0,
                room: eves.clone(),
                handle: "sam".into(),
            }),
            ErrorCode::NoConsent,
        ),
        // --- Contact decisions by the wrong principal, and impossible requests.
        (
            "the requester accepts its own request",
            Eve,
            decide(0, &pending.id, true),
            ErrorCode::Forbidden,
        ),
        (
            "a third party accepts",
            Dana,
            decide(0, &pending.id, true),
            ErrorCode::Forbidden,
        ),
        (
            "a third party rejects",
            Dana,
            decide(0, &pending.id, false),
            ErrorCode::Forbidden,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    let to_agent = request_contact(&mut cast.bot, "sam/security").await;
    for (case, who, frame, code) in [
        (
            "another owner's agent decides for an agent",
            Writer,
            decide(0, &to_agent.id, true),
            ErrorCode::Forbidden,
        ),
        (
            "the requesting agent accepts for the target",
            Bot,
            decide(0, &to_agent.id, true),
            ErrorCode::Forbidden,
        ),
        (
            "decide a request that does not exist",
            Sam,
            decide(0, "c_doesnotexist0000", true),
            ErrorCode::NotFound,
        ),
        (
            "a duplicate pending request",
            Eve,
            contact_request(0, "sam", None),
            ErrorCode::Conflict,
        ),
        (
            "the reverse of a pending request",
            Sam,
            contact_request(0, "eve", None),
            ErrorCode::Conflict,
        ),
        (
            "a request to oneself",
            Eve,
            contact_request(0, "eve", None),
            ErrorCode::Conflict,
        ),
        (
            "a request to one's kin",
            Dana,
            contact_request(0, "dana/writer", None),
            ErrorCode::Conflict,
        ),
        (
            "a request to an existing contact",
            Dana,
            contact_request(0, "sam", None),
            ErrorCode::Conflict,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    let id = cast.eve.id();
    let hidden = suite
        .refused(
            "a request to a private principal",
            &mut cast.eve,
            contact_request(id, "priv", None),
            ErrorCode::NotFound,
        )
        .await;
    let id = cast.eve.id();
    let unknown = suite
        .refused(
            "a request to a handle that does not exist",
            &mut cast.eve,
            contact_request(id, "nobody", None),
            ErrorCode::NotFound,
        )
        .await;
    assert_eq!(
        hidden.msg.replace("priv", "X"),
        unknown.msg.replace("nobody", "X"),
        "hidden and missing look alike"
    );
    for (case, who, frame, code) in [
        (
            "a request to a contacts-only stranger",
            Eve,
            contact_request(0, "dana", None),
            ErrorCode::NotFound,
        ),
        (
            "an oversized request message",
            Bot,
            contact_request(0, "sam", Some("x".repeat(501))),
            ErrorCode::TooLarge,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    respond(&mut cast.sam, &pending.id, false).await;
    for (case, who, frame, code) in [
        (
            "deciding twice",
            Sam,
            decide(0, &pending.id, true),
            ErrorCode::Conflict,
        ),
        // --- Agents acting beyond their station, and on others' agents.
        (
            "an agent registers an agent",
            Writer,
            ClientFrame::RegisterAgent(RegisterAgent {
                id: 0,
                name: "sub".into(),
                description: None,
                card: None,
                discoverable: None,
            }),
            ErrorCode::Forbidden,
        ),
        (
            "an agent creates an invite",
            Writer,
            invite_create(0, None, 1, 60),
            ErrorCode::Forbidden,
        ),
        (
            "an agent rotates its own token",
            Writer,
            token_action(0, &writer.agent.id, TokenAction::Rotate),
            ErrorCode::Forbidden,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    let id = cast.eve.id();
    for (case, who, frame, code) in [
        (
            // Eve may not see dana/writer: answered as an agent that does not exist
            // (amendment 11).
            "rotate another owner's agent's token",
            Eve,
            token_action(id, &writer.agent.id, TokenAction::Rotate),
            ErrorCode::NotFound,
        ),
        (
            "revoke another owner's agent's token",
            Eve,
            token_action(0, &writer.agent.id, TokenAction::Revoke),
            ErrorCode::NotFound,
        ),
        (
            "a token action on a user",
            Dana,
            token_action(0, &sam_created.principal.id, TokenAction::Revoke),
            ErrorCode::NotFound,
        ),
        (
            "control by a non-owner",
            Eve,
            control(0, &writer.agent.id, ControlAction::Pause, None),
            ErrorCode::NotFound,
        ),
        (
            "control by a member who is not the creator",
            Sam,
            control(0, &writer.agent.id, ControlAction::Stop, Some(&shared)),
            ErrorCode::Forbidden,
        ),
        (
            "control in one's room of an agent not in it",
            Eve,
            control(0, &writer.agent.id, ControlAction::Pause, Some(&eves)),
            ErrorCode::NotFound,
        ),
        (
            "control of a user",
            Dana,
            control(0, &sam_created.principal.id, ControlAction::Pause, None),
            ErrorCode::NotFound,
        ),
        (
            "control in a room that does not exist",
            Dana,
            control(
                0,
                &writer.agent.id,
                ControlAction::Pause,
                Some("r_nonexistent00000"),
            ),
            ErrorCode::NotFound,
        ),
        (
            "an agent reads the audit log",
            Writer,
            ClientFrame::Audit(Audit {
                id: 0,
                principal: None,
                since: None,
                limit: None,
            }),
            ErrorCode::Forbidden,
        ),
        (
            "read another user's audit entries",
            Eve,
            ClientFrame::Audit(Audit {
                id: 0,
                principal: Some(dana_created.principal.id.clone()),
                since: None,
                limit: None,
            }),
            ErrorCode::Forbidden,
        ),
        // --- Invite codes: unknown, exhausted, one's own, expired, malformed.
        (
            "an unknown invite code",
            Eve,
            redeem(0, "not-a-real-code-at-all-0000000000000000000"),
            ErrorCode::NotFound,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    let id = cast.dana.id();
    let single: InviteCreateOk = cast
        .dana
        .ok(invite_create(id, None, 1, 3600))
        .await
        .decode()
        .unwrap();
    for (case, who, frame, code) in [(
        "one's own invite",
        Dana,
        redeem(0, &single.code),
        ErrorCode::Conflict,
    )] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    let id = cast.sam.id();
    cast.sam.ok(redeem(id, &single.code)).await;
    for (case, who, frame, code) in [
        (
            "a used-up invite",
            Eve,
            redeem(0, &single.code),
            ErrorCode::Conflict,
        ),
        (
            "an agent redeems an invite",
            Writer,
            redeem(0, &single.code),
            ErrorCode::Forbidden,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    let id = cast.dana.id();
    let short: InviteCreateOk = cast
        .dana
        .ok(invite_create(id, None, 5, 1))
        .await
        .decode()
        .unwrap();
    suite.hub.config.clock.advance(Duration::from_millis(1100));
    for (case, who, frame, code) in [
        (
            "an expired invite",
            Eve,
            redeem(0, &short.code),
            ErrorCode::Conflict,
        ),
        (
            "an invite with no uses",
            Dana,
            invite_create(0, None, 0, 60),
            ErrorCode::BadFrame,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }

    // --- Withdrawing invites: only the creator, and a withdrawn code is dead.
    let id = cast.dana.id();
    let withdrawn: InviteCreateOk = cast
        .dana
        .ok(invite_create(id, None, 5, 3600))
        .await
        .decode()
        .unwrap();
    let withdrawn_id = withdrawn.invite.clone().unwrap();
    for (case, who, frame, code) in [
        (
            "someone else's invite is withdrawn",
            Eve,
            invite_revoke(0, &withdrawn_id),
            ErrorCode::NotFound,
        ),
        (
            "an agent withdraws its owner's invite",
            Writer,
            invite_revoke(0, &withdrawn_id),
            ErrorCode::Forbidden,
        ),
        (
            "an agent lists invites",
            Writer,
            ClientFrame::Invites(Invites { id }),
            ErrorCode::Forbidden,
        ),
        (
            "an invite withdrawn by its code instead of its id",
            Dana,
            invite_revoke(0, &withdrawn.code),
            ErrorCode::NotFound,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    // Invite codes are base64url: nothing to quote, and a `_` in the pattern only matches
    // more.
    assert!(
        withdrawn
            .code
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    );
    let logged_codes = suite.hub.select_i64(&format!(
        "SELECT count(*) FROM audit WHERE coalesce(target, '') LIKE '%{}%'",
        withdrawn.code
    ));
    assert_eq!(
        logged_codes, 0,
        "a code given as an id never reaches the audit log"
    );
    let id = cast.dana.id();
    cast.dana.ok(invite_revoke(id, &withdrawn_id)).await;
    for (case, who, frame, code) in [(
        "a withdrawn invite",
        Eve,
        redeem(0, &withdrawn.code),
        ErrorCode::Conflict,
    )] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    suite
        .signup_refused(
            "a signup with a withdrawn invite",
            json!({"handle": "withdrawn", "name": "W", "invite": withdrawn.code}),
            403,
            "forbidden",
        )
        .await;

    // --- The directory reveals only what discoverability allows.
    let seen = directory_handles(&mut cast.eve, None).await;
    assert_eq!(
        seen,
        vec!["eve/bot", "sam", "sam/security"],
        "kin and public principals only"
    );
    assert!(
        directory_handles(&mut cast.eve, Some("priv"))
            .await
            .is_empty()
    );
    assert!(
        directory_handles(&mut cast.eve, Some("writer"))
            .await
            .is_empty()
    );
    assert!(
        !directory_handles(&mut cast.dana, None)
            .await
            .contains(&"dana".to_owned())
    );
    suite.cases += 4;

    // --- Handle squatting and impersonation.
    for (case, who, frame, code) in [
        (
            "an agent name that looks like a sibling's",
            Dana,
            ClientFrame::RegisterAgent(RegisterAgent {
                id: 0,
                name: "wrlter".into(),
                description: None,
                card: None,
                discoverable: None,
            }),
            ErrorCode::Conflict,
        ),
        (
            "an agent name with a path",
            Dana,
            ClientFrame::RegisterAgent(RegisterAgent {
                id: 0,
                name: "../sam".into(),
                description: None,
                card: None,
                discoverable: None,
            }),
            ErrorCode::BadFrame,
        ),
    ] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    suite
        .signup_refused(
            "a handle one separator away",
            json!({"handle": "dana_", "name": "Dana"}),
            409,
            "conflict",
        )
        .await;
    suite
        .signup_refused(
            "a handle with digits for letters",
            json!({"handle": "5am", "name": "Sam"}),
            409,
            "conflict",
        )
        .await;
    suite
        .signup_refused(
            "a path in a handle",
            json!({"handle": "alice/../bob", "name": "A"}),
            400,
            "bad_frame",
        )
        .await;
    suite
        .signup_refused(
            "an upper-case handle",
            json!({"handle": "Dana", "name": "D"}),
            400,
            "bad_frame",
        )
        .await;
    suite
        .signup_refused(
            "a Unicode look-alike",
            json!({"handle": "dаna", "name": "D"}),
            400,
            "bad_frame",
        )
        .await;

    // --- A paused agent, and a burst past the rate limit.
    let id = cast.dana.id();
    cast.dana
        .ok(control(id, &writer.agent.id, ControlAction::Pause, None))
        .await;
    for (case, who, frame, code) in [(
        "a paused agent sends a message",
        Writer,
        send(0, &shared, "paused-key-01", "flood"),
        ErrorCode::Paused,
    )] {
        suite.refused(case, cast.client(who), frame, code).await;
    }
    let burster = register(&mut cast.eve, "burster", Discoverable::Private).await;
    let home = burster.room.clone().unwrap().id;
    let mut burster = login(&suite.hub, &burster.token, "burst").await;
    for n in 0..30 {
        let id = burster.id();
        burster
            .ok(send(id, &home, &format!("bot-burst-{n:03}"), "burst"))
            .await;
    }
    let id = burster.id();
    let limited = suite
        .refused(
            "a burst past the rate limit",
            &mut burster,
            send(id, &home, "bot-burst-030", "burst"),
            ErrorCode::RateLimited,
        )
        .await;
    assert!(limited.retry_after_ms.is_some());

    let _ = (security, private);
    assert!(suite.cases >= 40, "only {} hostile cases", suite.cases);
}

async fn first_frame_refused(hub: &TestHub, token: &str) {
    let mut client = hub.connect().await;
    client
        .send_frame(&ClientFrame::Auth(Auth {
            id: 1,
            token: token.into(),
            device: "d".into(),
            client: ClientInfo::default(),
        }))
        .await
        .unwrap();
    match client.recv().await.unwrap() {
        Incoming::Frame(ServerFrame::Err(err)) => {
            assert_eq!(err.code, ErrorCode::Unauthorized, "{token}")
        }
        other => panic!("{token}: expected unauthorized, got {other:?}"),
    }
    assert_eq!(client.closed().await.unwrap(), Some(4001));
}

#[tokio::test]
async fn forged_malformed_revoked_and_rotated_tokens_never_authenticate() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let writer = register(&mut dana, "writer", Discoverable::Contacts).await;
    // Forged: the right shape, 256 random-looking bits nobody was given.
    first_frame_refused(&hub, &format!("rt_{}", "Q".repeat(43))).await;
    for malformed in ["", "rt_", "Bearer x", "rt_!!!!", &"rt_a".repeat(100)] {
        first_frame_refused(&hub, malformed).await;
    }
    let id = dana.id();
    let rotated: roundtable_protocol::server::AgentTokenOk = dana
        .ok(token_action(id, &writer.agent.id, TokenAction::Rotate))
        .await
        .decode()
        .unwrap();
    first_frame_refused(&hub, &writer.token).await;
    let new_token = rotated.token.unwrap();
    login(&hub, &new_token, "w").await;
    let id = dana.id();
    dana.ok(token_action(id, &writer.agent.id, TokenAction::Revoke))
        .await;
    first_frame_refused(&hub, &new_token).await;
}

#[tokio::test]
async fn closed_and_invite_only_hubs_refuse_signups_without_a_valid_code() {
    let closed =
        TestHub::start_with(|config| config.signup = roundtable_hub::SignupMode::Closed).await;
    let mut suite = Suite {
        hub: closed,
        cases: 0,
    };
    suite
        .signup_refused(
            "signup on a closed hub",
            json!({"handle": "dana", "name": "D"}),
            403,
            "forbidden",
        )
        .await;
    suite
        .signup_refused(
            "signup on a closed hub, with a code",
            json!({"handle": "dana", "name": "D", "invite": "x"}),
            403,
            "forbidden",
        )
        .await;
    let invite_only =
        TestHub::start_with(|config| config.signup = roundtable_hub::SignupMode::Invite).await;
    let mut suite = Suite {
        hub: invite_only,
        cases: 0,
    };
    suite
        .signup_refused(
            "signup without a code",
            json!({"handle": "dana", "name": "D"}),
            403,
            "forbidden",
        )
        .await;
    suite
        .signup_refused(
            "signup with a bad code",
            json!({"handle": "dana", "name": "D", "invite": "bogus"}),
            403,
            "forbidden",
        )
        .await;
}
