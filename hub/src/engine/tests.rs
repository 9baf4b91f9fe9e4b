//! The command logic on a real store, without sockets: the rules the protocol states in
//! prose, each pinned by a test.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::*;
use serde_json::json;

use roundtable_engine::records::{EventRecord, StreamKey};
use roundtable_engine::*;
use roundtable_engine::{Caller, Command};

use super::test_support::Fixture;

fn message(id: u64, room: &str, key: &str, body: serde_json::Value) -> ClientFrame {
    ClientFrame::Send(SendCmd {
        id,
        room: room.into(),
        client_key: key.into(),
        kind: "message".into(),
        body,
    })
}

fn create_room(fixture: &mut Fixture, caller: &Caller, members: &[&str]) -> String {
    let outcome = fixture
        .run(
            caller,
            ClientFrame::RoomCreate(RoomCreate {
                id: 1,
                title: None,
                topic: None,
                members: members.iter().map(|m| m.to_string()).collect(),
            }),
        )
        .unwrap();
    let Reply::Ok(ok) = outcome.reply else {
        panic!("room_create replies with ok")
    };
    ok.decode::<roundtable_protocol::server::RoomOk>()
        .unwrap()
        .room
        .id
}

fn register(fixture: &mut Fixture, owner: &Caller, name: &str) -> Caller {
    let outcome = fixture
        .run(
            owner,
            ClientFrame::RegisterAgent(RegisterAgent {
                id: 1,
                name: name.into(),
                description: None,
                card: None,
                discoverable: None,
            }),
        )
        .unwrap();
    let Reply::Ok(ok) = outcome.reply else {
        panic!("register_agent replies with ok")
    };
    let agent: roundtable_protocol::server::RegisterAgentOk = ok.decode().unwrap();
    fixture.caller(&agent.agent.id)
}

fn sent(outcome: Outcome) -> (EventRecord, bool) {
    match outcome.reply {
        Reply::Sent { event, dup } => ((*event).clone(), dup),
        Reply::Ok(ok) => panic!("send replies with the event, got {ok:?}"),
    }
}

#[test]
fn mentions_resolve_member_handles_only_and_keep_listed_ids() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let writer = register(&mut fixture, &dana, "writer");
    let reviewer = register(&mut fixture, &dana, "reviewer");
    let outsider = register(&mut fixture, &dana, "outsider");
    let room = create_room(&mut fixture, &dana, &["dana/writer", "dana/reviewer"]);
    let (event, _) = sent(
        fixture
            .run(
                &dana,
                message(
                    2,
                    &room,
                    "mentions-001",
                    json!({"text": "@dana/reviewer and @dana/writer, not @dana/outsider nor @dana/writerx", "mentions": [reviewer.id]}),
                ),
            )
            .unwrap(),
    );
    assert_eq!(event.mentions, vec![reviewer.id.clone(), writer.id.clone()]);
    let body: serde_json::Value = serde_json::from_str(&event.body).unwrap();
    assert_eq!(body["mentions"], json!([reviewer.id, writer.id]));
    assert!(!event.mentions.contains(&outsider.id));
}

#[test]
fn a_gateway_caller_meets_the_websocket_rules_and_its_entries_say_how_it_came() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let eve = fixture.signup("eve");
    let room = create_room(&mut fixture, &dana, &[]);
    let over = |caller: &Caller, via: Via| Caller {
        via,
        ..caller.clone()
    };
    let before = fixture.audit_log().len();
    // Not a member: the same refusal whichever way the command comes.
    for via in [Via::Ws, Via::A2a, Via::Mcp] {
        let refused = fixture
            .run(
                &over(&eve, via),
                message(
                    1,
                    &room,
                    &format!("gateway-key-{}", via.as_str()),
                    json!({"text": "hi"}),
                ),
            )
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotMember, "{via:?}");
    }
    // A member's send over MCP is stored, and its key deduplicates across ways: the
    // retry over the WebSocket is the same event.
    let (first, dup) = sent(
        fixture
            .run(
                &over(&dana, Via::Mcp),
                message(2, &room, "key-shared-1", json!({"text": "hello"})),
            )
            .unwrap(),
    );
    assert!(!dup);
    let (again, dup) = sent(
        fixture
            .run(
                &dana,
                message(3, &room, "key-shared-1", json!({"text": "hello"})),
            )
            .unwrap(),
    );
    assert!(dup);
    assert_eq!(again.id, first.id);
    let entries = fixture.audit_log();
    let ways: Vec<(&str, Option<&str>, Via)> = entries[before..]
        .iter()
        .map(|entry| (entry.principal.as_str(), entry.code.as_deref(), entry.via))
        .collect();
    assert_eq!(
        ways,
        [
            (eve.id.as_str(), Some("not_member"), Via::Ws),
            (eve.id.as_str(), Some("not_member"), Via::A2a),
            (eve.id.as_str(), Some("not_member"), Via::Mcp),
        ],
        "refusals are audited with their way (sends that succeed are not audited)"
    );
    // The chain with gateway entries in it verifies.
    let mut check = roundtable_engine::audit::ChainCheck::new();
    assert!(entries.iter().all(|entry| check.feed(entry)));
    assert!(check.finish().is_ok());
    // A failed authentication over a gateway is audited with its way too.
    fixture.transaction(|engine, tx, now_ms| {
        let refused = engine
            .authenticate(
                tx,
                now_ms,
                "rt_not_a_real_token_at_all_000000000000",
                Via::A2a,
            )
            .unwrap()
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Unauthorized);
    });
    let last = fixture.audit_log().pop().unwrap();
    assert_eq!((last.action.as_str(), last.via), ("auth", Via::A2a));
}

#[test]
fn a_known_key_is_answered_before_membership_is_checked() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let room = create_room(&mut fixture, &dana, &[]);
    let (original, dup) = sent(
        fixture
            .run(
                &dana,
                message(2, &room, "before-leave", json!({"text": "hi"})),
            )
            .unwrap(),
    );
    assert!(!dup);
    fixture
        .run(
            &dana,
            ClientFrame::RoomLeave(RoomLeave {
                id: 3,
                room: room.clone(),
            }),
        )
        .unwrap();
    // No longer a member, yet the retry returns the original.
    let (again, dup) = sent(
        fixture
            .run(
                &dana,
                message(4, &room, "before-leave", json!({"text": "hi"})),
            )
            .unwrap(),
    );
    assert!(dup);
    assert_eq!(again, original);
    // A new key is refused for membership.
    let refused = fixture
        .run(
            &dana,
            message(5, &room, "after-leave1", json!({"text": "hi"})),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotMember);
    // But an invalid frame is refused before the key is even looked up.
    let invalid = fixture
        .run(
            &dana,
            message(6, &room, "before-leave", json!({"txt": "hi"})),
        )
        .unwrap_err();
    assert_eq!(invalid.code, ErrorCode::BadFrame);
}

#[test]
fn a_key_is_remembered_across_a_reload_until_its_retention_ends() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let room = create_room(&mut fixture, &dana, &[]);
    let frame = || message(2, &room, "kept-a-week", json!({"text": "hi"}));
    let (original, _) = sent(fixture.run(&dana, frame()).unwrap());
    let sent_at = fixture.now_ms;

    // The keys come back from the events themselves.
    fixture.now_ms = sent_at + 7 * 24 * 60 * 60 * 1000;
    fixture.restart();
    let (again, dup) = sent(fixture.run(&dana, frame()).unwrap());
    assert!(
        dup,
        "a retry within 7 days is a duplicate, also after a restart"
    );
    assert_eq!(again, original);

    // Past the retention the key is free again once the writer's housekeeping, every
    // minute, has walked every shard: the retry is a new message.
    fixture.now_ms = sent_at + roundtable_engine::sent_keys::RETENTION_MS;
    for _ in 0..60 {
        fixture.now_ms += 60 * 1000;
        fixture.housekeeping();
    }
    let (fresh, dup) = sent(fixture.run(&dana, frame()).unwrap());
    assert!(!dup);
    assert_eq!(fresh.seq, original.seq + 1);
}

#[test]
fn a_remembered_position_is_checked_against_the_stored_event() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let room = create_room(&mut fixture, &dana, &[]);
    let (first, _) = sent(
        fixture
            .run(&dana, message(2, &room, "first-key", json!({"text": "a"})))
            .unwrap(),
    );
    // As after a hash collision: another key's candidate points at `first` (in every
    // process's memory alike: the hash is keyed the same).
    for state in [&mut fixture.engine.state, &mut fixture.replica] {
        state
            .sent_keys
            .insert(&dana.id, "second-key", &room, first.seq, fixture.now_ms);
    }
    let (second, dup) = sent(
        fixture
            .run(&dana, message(3, &room, "second-key", json!({"text": "b"})))
            .unwrap(),
    );
    assert!(!dup, "the stored event has another key: not a duplicate");
    assert_eq!(second.seq, first.seq + 1);
    assert_eq!(second.client_key.as_deref(), Some("second-key"));
}

#[test]
fn a_refused_room_create_changes_nothing() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let sam = fixture.signup("sam");
    // Sam is visible to Dana, but not her contact.
    fixture
        .run(
            &sam,
            ClientFrame::ProfileSet(ProfileSet {
                id: 1,
                principal: None,
                name: None,
                discoverable: Some(roundtable_protocol::model::Discoverable::Public),
            }),
        )
        .unwrap();
    let rooms_before = fixture.engine.state.rooms.len();
    let refused = fixture
        .run(
            &dana,
            ClientFrame::RoomCreate(RoomCreate {
                id: 1,
                title: None,
                topic: None,
                members: vec!["sam".into()],
            }),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NoConsent);
    assert_eq!(fixture.engine.state.rooms.len(), rooms_before);
    assert_eq!(fixture.store.load(1).unwrap().rooms.len(), rooms_before);
    assert_eq!(
        fixture
            .engine
            .state
            .head(&StreamKey::Inbox(dana.id.clone())),
        0
    );
}

#[test]
fn seqs_are_dense_per_stream_and_the_pair_flag_follows_membership() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let writer = register(&mut fixture, &dana, "writer");
    let home = fixture.engine.state.rooms_of[&writer.id]
        .iter()
        .next()
        .unwrap()
        .clone();
    let (first, _) = sent(
        fixture
            .run(
                &dana,
                message(2, &home, "pair-000001", json!({"text": "a"})),
            )
            .unwrap(),
    );
    assert!(first.pair, "a two-member room");
    register(&mut fixture, &dana, "reviewer");
    fixture
        .run(
            &dana,
            ClientFrame::RoomInvite(RoomInvite {
                id: 3,
                room: home.clone(),
                handle: "dana/reviewer".into(),
            }),
        )
        .unwrap();
    let (second, _) = sent(
        fixture
            .run(
                &dana,
                message(4, &home, "pair-000002", json!({"text": "b"})),
            )
            .unwrap(),
    );
    assert!(!second.pair, "three members now");
    assert_eq!(second.seq, first.seq + 2, "the join sits between them");
}

#[test]
fn answers_follow_the_ping_rules() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let agent = register(&mut fixture, &dana, "asker");
    let home = fixture.engine.state.rooms_of[&agent.id]
        .iter()
        .next()
        .unwrap()
        .clone();
    let ping = |id, key: &str, body| {
        ClientFrame::Send(SendCmd {
            id,
            room: home.clone(),
            client_key: key.into(),
            kind: "ping".into(),
            body,
        })
    };
    let answer = |id, key: &str, body| {
        ClientFrame::Send(SendCmd {
            id,
            room: home.clone(),
            client_key: key.into(),
            kind: "answer".into(),
            body,
        })
    };
    let expires = roundtable_protocol::ts::format_millis(fixture.now_ms + 1000);
    fixture
        .run(
            &agent,
            ping(
                1,
                "ping-soon-01",
                json!({"ping": "soon", "question": "?", "expires_at": expires}),
            ),
        )
        .unwrap();
    fixture.now_ms += 1000;
    let late = fixture
        .run(
            &dana,
            answer(2, "answer-soon1", json!({"ping": "soon", "choice": "y"})),
        )
        .unwrap_err();
    assert_eq!(
        late.code,
        ErrorCode::Conflict,
        "expired at exactly expires_at"
    );

    fixture
        .run(
            &agent,
            ping(
                3,
                "ping-now-001",
                json!({"ping": "now", "question": "?", "to": [dana.id]}),
            ),
        )
        .unwrap();
    fixture
        .run(
            &dana,
            answer(4, "answer-now-1", json!({"ping": "now", "text": "fine"})),
        )
        .unwrap();
    // Answered, the ping leaves the writer's memory; the store keeps who answered.
    assert!(
        !fixture
            .engine
            .state
            .pings
            .contains_key(&(home.clone(), "now".to_owned()))
    );
    let stored = fixture
        .store
        .transaction()
        .unwrap()
        .ping(&home, "now")
        .unwrap()
        .unwrap();
    assert_eq!(stored.answered_by.as_deref(), Some(dana.id.as_str()));
    let second = fixture
        .run(
            &dana,
            answer(5, "answer-now-2", json!({"ping": "now", "text": "again"})),
        )
        .unwrap_err();
    assert_eq!(second.code, ErrorCode::Conflict);
}

#[test]
fn a_retried_answer_returns_the_original_not_a_conflict() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let agent = register(&mut fixture, &dana, "asker");
    let home = fixture.engine.state.rooms_of[&agent.id]
        .iter()
        .next()
        .unwrap()
        .clone();
    let send = |id, key: &str, kind: &str, body| {
        ClientFrame::Send(SendCmd {
            id,
            room: home.clone(),
            client_key: key.into(),
            kind: kind.into(),
            body,
        })
    };
    fixture
        .run(
            &agent,
            send(
                1,
                "ping-retry-1",
                "ping",
                json!({"ping": "p", "question": "?"}),
            ),
        )
        .unwrap();
    // The same ping sent again with its key: the original, though the id is now taken.
    let (again, dup) = sent(
        fixture
            .run(
                &agent,
                send(
                    2,
                    "ping-retry-1",
                    "ping",
                    json!({"ping": "p", "question": "?"}),
                ),
            )
            .unwrap(),
    );
    assert!(dup);
    assert_eq!(again.kind, "ping");
    let (answer, _) = sent(
        fixture
            .run(
                &dana,
                send(
                    3,
                    "answer-retry",
                    "answer",
                    json!({"ping": "p", "choice": "y"}),
                ),
            )
            .unwrap(),
    );
    let head = fixture.engine.state.head(&StreamKey::Room(home.clone()));
    let (retried, dup) = sent(
        fixture
            .run(
                &dana,
                send(
                    4,
                    "answer-retry",
                    "answer",
                    json!({"ping": "p", "choice": "y"}),
                ),
            )
            .unwrap(),
    );
    assert!(dup);
    assert_eq!(retried, answer);
    assert_eq!(
        fixture.engine.state.head(&StreamKey::Room(home)),
        head,
        "no seq was used up"
    );
}

#[test]
fn ack_ignores_unreadable_streams_and_clamps() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let sam = fixture.signup("sam");
    let sams_room = create_room(&mut fixture, &sam, &[]);
    let dana_room = create_room(&mut fixture, &dana, &[]);
    let cursors = [(sams_room.clone(), 5), (dana_room.clone(), 50)]
        .into_iter()
        .collect();
    fixture
        .run(&dana, ClientFrame::Ack(Ack { id: 1, cursors }))
        .unwrap();
    let markers = fixture
        .reader
        .device_read_markers(&dana.id, "test")
        .unwrap();
    assert_eq!(markers, vec![(StreamKey::Room(dana_room), 2)]);
}

#[test]
fn an_event_goes_to_the_members_of_the_moment_it_was_stored() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let writer = register(&mut fixture, &dana, "writer");
    let room = create_room(&mut fixture, &dana, &["dana/writer"]);
    // In one transaction (one batch): a message, then the agent leaves.
    let (message, leave) = fixture.transaction(|engine, tx, now_ms| {
        let message = engine
            .execute(
                tx,
                now_ms,
                &dana,
                &Command::Frame(message(
                    2,
                    &room,
                    "before-leave",
                    json!({"text": "@dana/writer bye"}),
                )),
            )
            .unwrap();
        let leave = engine
            .execute(
                tx,
                now_ms,
                &writer,
                &Command::Frame(ClientFrame::RoomLeave(RoomLeave {
                    id: 3,
                    room: room.clone(),
                })),
            )
            .unwrap();
        (message, leave)
    });
    let members = |event: &NewEvent| match &event.recipients {
        roundtable_engine::state::Recipients::Room { members, also_to } => {
            let mut ids: Vec<String> = members
                .iter()
                .chain(also_to.iter())
                .map(|r| r.id.to_string())
                .collect();
            ids.sort();
            ids
        }
        roundtable_engine::state::Recipients::One(principal) => vec![principal.to_string()],
    };
    let mut both = vec![dana.id.clone(), writer.id.clone()];
    both.sort();
    assert_eq!(
        members(&message.events[0]),
        both,
        "the agent was a member when it was stored"
    );
    assert_eq!(
        members(&leave.events[0]),
        both,
        "the leaver sees its own departure"
    );
}

#[test]
fn read_markers_never_move_backwards() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let room = create_room(&mut fixture, &dana, &[]);
    for seq in [2, 1] {
        let cursors = [(room.clone(), seq)].into_iter().collect();
        fixture
            .run(&dana, ClientFrame::Ack(Ack { id: 1, cursors }))
            .unwrap();
    }
    let markers = fixture
        .reader
        .device_read_markers(&dana.id, "test")
        .unwrap();
    assert_eq!(markers, vec![(StreamKey::Room(room), 2)]);
}

#[test]
fn pending_contact_requests_expire_after_fourteen_days() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let sam = fixture.signup("sam");
    fixture
        .run(
            &sam,
            ClientFrame::ProfileSet(ProfileSet {
                id: 1,
                principal: None,
                name: None,
                discoverable: Some(roundtable_protocol::model::Discoverable::Public),
            }),
        )
        .unwrap();
    let outcome = fixture
        .run(
            &dana,
            ClientFrame::ContactRequest(ContactRequestCmd {
                id: 2,
                to: "sam".into(),
                message: None,
            }),
        )
        .unwrap();
    let Reply::Ok(ok) = outcome.reply else {
        panic!()
    };
    let request = ok
        .decode::<roundtable_protocol::server::ContactRequestOk>()
        .unwrap()
        .request;

    // A day short of the limit, nothing expires.
    fixture.now_ms += 13 * 24 * 3600 * 1000;
    assert!(
        fixture
            .transaction(|engine, tx, now_ms| engine.expire_requests(tx, now_ms).unwrap())
            .is_empty()
    );

    fixture.now_ms += 24 * 3600 * 1000;
    // Past it, the request can no longer be accepted…
    let refused = fixture
        .run(
            &sam,
            ClientFrame::ContactRespond(ContactRespond {
                id: 3,
                request: request.id.clone(),
                accept: true,
            }),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Conflict);
    assert!(refused.msg.contains("expired"));
    // …and the writer's housekeeping records it and tells both sides.
    let events =
        fixture.transaction(|engine, tx, now_ms| engine.expire_requests(tx, now_ms).unwrap());
    assert_eq!(events.len(), 2);
    for event in &events {
        assert_eq!(event.record.kind, "contact");
        assert!(
            event.record.body.contains("\"state\":\"expired\""),
            "{}",
            event.record.body
        );
    }
    // Expired, the request leaves the writer's memory; the store keeps it.
    assert!(!fixture.engine.state.requests.contains_key(&request.id));
    assert_eq!(
        fixture
            .store
            .transaction()
            .unwrap()
            .request(&request.id)
            .unwrap()
            .unwrap()
            .state,
        roundtable_protocol::model::RequestState::Expired
    );
    assert!(!fixture.engine.state.is_contact(&dana.id, &sam.id));
    // A new request may now be sent.
    fixture
        .run(
            &dana,
            ClientFrame::ContactRequest(ContactRequestCmd {
                id: 4,
                to: "sam".into(),
                message: None,
            }),
        )
        .unwrap();
}

#[test]
fn what_time_ends_leaves_the_writers_memory_and_is_still_answered_from_the_store() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let sam = fixture.signup("sam");
    let agent = register(&mut fixture, &dana, "asker");
    let home = fixture.engine.state.rooms_of[&agent.id]
        .iter()
        .next()
        .unwrap()
        .clone();
    let invites_before = fixture.engine.state.invites.len();
    let created = fixture
        .run(
            &dana,
            ClientFrame::InviteCreate(InviteCreate {
                id: 1,
                room: None,
                max_uses: None,
                expires_in_s: Some(60),
            }),
        )
        .unwrap();
    let Reply::Ok(ok) = created.reply else {
        panic!("invite_create replies with ok")
    };
    let code = ok
        .decode::<roundtable_protocol::server::InviteCreateOk>()
        .unwrap()
        .code;
    let expires = roundtable_protocol::ts::format_millis(fixture.now_ms + 60_000);
    fixture
        .run(
            &agent,
            ClientFrame::Send(SendCmd {
                id: 2,
                room: home.clone(),
                client_key: "ping-later-01".into(),
                kind: "ping".into(),
                body: json!({"ping": "later", "question": "?", "expires_at": expires}),
            }),
        )
        .unwrap();
    assert_eq!(fixture.engine.state.invites.len(), invites_before + 1);
    assert_eq!(fixture.engine.state.pings.len(), 1);

    // A minute on, the writer's housekeeping forgets both.
    fixture.now_ms += 60_000;
    fixture.housekeeping();
    assert_eq!(fixture.engine.state.invites.len(), invites_before);
    assert!(fixture.engine.state.pings.is_empty());

    // Named again, they are read from the store and answered as before: expired, and a
    // ping id that is taken.
    let redeemed = fixture
        .run(
            &sam,
            ClientFrame::InviteRedeem(InviteRedeem { id: 3, code }),
        )
        .unwrap_err();
    assert_eq!(redeemed.code, ErrorCode::Conflict);
    assert!(redeemed.msg.contains("expired"), "{}", redeemed.msg);
    let answered = fixture
        .run(
            &dana,
            ClientFrame::Send(SendCmd {
                id: 4,
                room: home.clone(),
                client_key: "answer-late-1".into(),
                kind: "answer".into(),
                body: json!({"ping": "later", "choice": "y"}),
            }),
        )
        .unwrap_err();
    assert_eq!(answered.code, ErrorCode::Conflict);
    assert!(answered.msg.contains("expired"), "{}", answered.msg);
    let again = fixture
        .run(
            &agent,
            ClientFrame::Send(SendCmd {
                id: 5,
                room: home.clone(),
                client_key: "ping-later-02".into(),
                kind: "ping".into(),
                body: json!({"ping": "later", "question": "again?"}),
            }),
        )
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::Conflict);
    assert!(fixture.engine.state.pings.is_empty());
}

#[test]
fn work_is_reported_by_the_agent_that_did_it_or_its_owner_only() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let writer = register(&mut fixture, &dana, "writer");
    let reviewer = register(&mut fixture, &dana, "reviewer");
    let room = create_room(&mut fixture, &dana, &["dana/writer", "dana/reviewer"]);
    let session =
        |agent: &str| json!({"agent": agent, "framework": "claude-code", "session_id": "s-1"});
    let usage = |agent: &str| {
        json!({"session": session(agent), "model": "claude-opus-5-5", "input": 1, "output": 2,
               "cache_write": 0, "cache_read": 0, "from": "2026-12-02T06:00:00Z",
               "to": "2026-12-02T06:01:00Z"})
    };
    let tasks = |agent: &str| {
        json!({"session": session(agent), "source": "TodoWrite",
               "tasks": [{"title": "ship it", "status": "completed"}]})
    };
    let status = |agent: &str| json!({"component": "parser", "status": "working", "agent": agent});
    let mut key = 0;
    let mut send = |fixture: &mut Fixture, caller: &Caller, kind: &str, body: serde_json::Value| {
        key += 1;
        fixture.run(
            caller,
            ClientFrame::Send(SendCmd {
                id: key,
                room: room.clone(),
                client_key: format!("work-report-{key:04}"),
                kind: kind.into(),
                body,
            }),
        )
    };
    // A sibling agent, however it words it, cannot charge or credit the writer.
    for (kind, body) in [
        ("usage", usage(&writer.id)),
        ("tasks", tasks(&writer.id)),
        ("arch", status(&writer.id)),
    ] {
        let refused = send(&mut fixture, &reviewer, kind, body).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Forbidden, "{kind}");
        assert!(
            refused.msg.contains("only that agent or its owner"),
            "{kind}: {}",
            refused.msg
        );
    }
    // The agent itself and its owner may.
    for caller in [&writer, &dana] {
        for (kind, body) in [
            ("usage", usage(&writer.id)),
            ("tasks", tasks(&writer.id)),
            ("arch", status(&writer.id)),
        ] {
            let (event, _) = sent(send(&mut fixture, caller, kind, body).unwrap());
            assert_eq!(event.kind, kind);
        }
    }
    // An owner cannot report for someone else's agent: here, another user's id.
    let sam = fixture.signup("sam");
    let refused = send(&mut fixture, &dana, "usage", usage(&sam.id)).unwrap_err();
    assert_eq!(refused.code, ErrorCode::Forbidden);
    // The agent a report names is the one its kind's own field names, which is what every
    // client shows: a `session` an `arch` status does not have, naming the sender, cannot
    // pass off a status about the writer as the sender's own.
    let forged = json!({"component": "parser", "status": "working", "agent": writer.id,
                        "session": session(&reviewer.id)});
    let refused = send(&mut fixture, &reviewer, "arch", forged).unwrap_err();
    assert_eq!(refused.code, ErrorCode::BadFrame);
    assert!(
        refused.msg.contains("unknown field \"session\""),
        "{}",
        refused.msg
    );
    // Nor can a field the hub does not read, in any work body.
    let mut padded = tasks(&reviewer.id);
    padded["agent"] = json!(writer.id);
    assert_eq!(
        send(&mut fixture, &reviewer, "tasks", padded)
            .unwrap_err()
            .code,
        ErrorCode::BadFrame
    );
    // A status about the sender itself, and definitions, name no one.
    sent(
        send(
            &mut fixture,
            &reviewer,
            "arch",
            json!({"component": "parser", "status": "idle"}),
        )
        .unwrap(),
    );
    sent(
        send(
            &mut fixture,
            &reviewer,
            "arch",
            json!({"define": [{"id": "parser", "name": "Parser", "paths": ["src/parser/**"], "depends_on": []}]}),
        )
        .unwrap(),
    );
}

/// Every kind of change a command makes reaches another process's memory through what
/// its transaction shares: the fixture's replica must equal the engine after each command
/// (checked here as it goes, and once more as the fixture drops).
#[test]
fn every_kind_of_change_reaches_another_process_through_what_it_shares() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let sam = fixture.signup("sam");
    let asker = register(&mut fixture, &dana, "asker");
    let room = create_room(&mut fixture, &dana, &["dana/asker"]);
    let frame =
        |value: serde_json::Value| -> ClientFrame { serde_json::from_value(value).unwrap() };
    let steps: Vec<(&Caller, ClientFrame)> = vec![
        (
            &dana,
            frame(
                json!({"t": "room_update", "id": 1, "room": room, "title": "Plans", "topic": "v2"}),
            ),
        ),
        (
            &dana,
            frame(json!({"t": "member_set", "id": 2, "room": room, "routing": "all"})),
        ),
        (
            &dana,
            frame(json!({"t": "profile_set", "id": 3, "name": "Dana D", "discoverable": "public"})),
        ),
        (
            &dana,
            frame(
                json!({"t": "control", "id": 4, "agent": asker.id, "action": "pause", "room": room, "reason": "budget reached"}),
            ),
        ),
        (
            &dana,
            frame(json!({"t": "control", "id": 5, "agent": asker.id, "action": "stop"})),
        ),
        (
            &dana,
            frame(
                json!({"t": "control", "id": 6, "agent": asker.id, "action": "resume", "room": room}),
            ),
        ),
        (
            &dana,
            frame(json!({"t": "control", "id": 7, "agent": asker.id, "action": "resume"})),
        ),
        (
            &sam,
            frame(json!({"t": "profile_set", "id": 8, "discoverable": "public"})),
        ),
        (
            &dana,
            frame(json!({"t": "contact_request", "id": 8, "to": "sam", "message": "hi"})),
        ),
        (
            &dana,
            frame(json!({"t": "invite_create", "id": 9, "room": room, "max_uses": 2})),
        ),
        (
            &dana,
            frame(json!({"t": "agent_token", "id": 10, "agent": asker.id, "action": "rotate"})),
        ),
        (
            &asker,
            message(11, &room, "from-the-agent", json!({"text": "done"})),
        ),
        (
            &dana,
            message(
                12,
                &room,
                "from-dana-0001",
                json!({"text": "@dana/asker thanks"}),
            ),
        ),
        (
            &dana,
            frame(json!({"t": "room_kick", "id": 13, "room": room, "handle": "dana/asker"})),
        ),
    ];
    for (step, (caller, frame)) in steps.into_iter().enumerate() {
        let caller = caller.clone();
        if let Err(refusal) = fixture.run(&caller, frame) {
            panic!("step {step} refused: {refusal:?}");
        }
        fixture.assert_replica_matches();
    }
    // Sam accepts the request; an invite is redeemed and withdrawn.
    let request = fixture.engine.state.pending[&(dana.id.clone(), sam.id.clone())].clone();
    fixture
        .run(
            &sam,
            frame(json!({"t": "contact_respond", "id": 14, "request": request, "accept": true})),
        )
        .unwrap();
    let invite = fixture
        .engine
        .state
        .invites
        .values()
        .next()
        .unwrap()
        .id
        .clone();
    fixture
        .run(
            &dana,
            frame(json!({"t": "invite_revoke", "id": 15, "invite": invite})),
        )
        .unwrap();
    fixture
        .run(
            &dana,
            frame(json!({"t": "user_token", "id": 16, "action": "rotate"})),
        )
        .unwrap();
    fixture.assert_replica_matches();
    assert!(fixture.engine.state.is_contact(&dana.id, &sam.id));
}

/// Makes a principal (the caller, or one of its agents) visible to everyone.
fn make_public(fixture: &mut Fixture, owner: &Caller, principal: Option<&str>) {
    fixture
        .run(
            owner,
            ClientFrame::ProfileSet(ProfileSet {
                id: 1,
                principal: principal.map(str::to_owned),
                name: None,
                discoverable: Some(roundtable_protocol::model::Discoverable::Public),
            }),
        )
        .unwrap();
}

fn hold(
    fixture: &mut Fixture,
    caller: &Caller,
    target: &str,
    key: &str,
) -> Result<Outcome, Refusal> {
    let command = Command::Hold(HoldForConsent {
        target: target.into(),
        note: format!("{} ", "note").repeat(200),
        client_key: key.into(),
        body: json!({"text": format!("held {key}"), "x_a2a": {"parts": [{"text": "held"}]}}),
    });
    match fixture.transaction(|engine, tx, now_ms| engine.execute(tx, now_ms, caller, &command)) {
        Ok(outcome) => Ok(outcome),
        Err(ExecError::Refused(refusal)) => Err(refusal),
        Err(ExecError::Store(error)) => panic!("store error: {error}"),
    }
}

fn request_of(outcome: &Outcome) -> roundtable_protocol::model::ContactRequest {
    let Reply::Ok(ok) = &outcome.reply else {
        panic!("a hold answers with its request")
    };
    ok.decode::<roundtable_protocol::server::ContactRequestOk>()
        .unwrap()
        .request
}

fn stored_request(fixture: &mut Fixture, id: &str) -> roundtable_engine::records::RequestRecord {
    fixture.transaction(|_, tx, _| tx.request(id).unwrap().unwrap())
}

#[test]
fn a_message_without_consent_is_held_with_one_request_and_sent_once_accepted() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let erin = fixture.signup("erin");
    let reviewer = register(&mut fixture, &dana, "reviewer");
    let erin_a2a = Caller {
        via: Via::A2a,
        ..erin.clone()
    };
    // erin cannot see a contacts-only agent she has no tie to: nothing is held.
    let hidden = hold(&mut fixture, &erin_a2a, "dana/reviewer", "a2a:first-key").unwrap_err();
    assert_eq!(hidden.code, ErrorCode::NotFound);
    make_public(&mut fixture, &dana, Some(&reviewer.id));
    let held = hold(&mut fixture, &erin_a2a, "dana/reviewer", "a2a:first-key").unwrap();
    let request = request_of(&held);
    // Only the note travels, cut to fit with its ellipsis; no room event anywhere.
    let note = request.message.clone().unwrap();
    assert!(
        note.len() <= roundtable_protocol::limits::CONTACT_MESSAGE,
        "{}",
        note.len()
    );
    assert!(note.ends_with('…'));
    assert!(
        held.events.iter().all(|event| matches!(
            event.record.stream,
            roundtable_engine::records::StreamKey::Inbox(_)
        )),
        "nothing but inbox notices of the request"
    );
    // The same message again is the same request; another one waits its turn.
    let again = hold(&mut fixture, &erin_a2a, "dana/reviewer", "a2a:first-key").unwrap();
    assert_eq!(request_of(&again).id, request.id);
    let second = hold(&mut fixture, &erin_a2a, "dana/reviewer", "a2a:other-key").unwrap_err();
    assert_eq!(second.code, ErrorCode::Conflict);
    assert_eq!(
        stored_request(&mut fixture, &request.id)
            .held
            .unwrap()
            .body
            .as_deref(),
        Some(r#"{"text":"held a2a:first-key","x_a2a":{"parts":[{"text":"held"}]}}"#)
    );

    // dana accepts: the message goes to a new room of erin and the reviewer, as erin's.
    let accepted = fixture
        .run(
            &dana,
            ClientFrame::ContactRespond(ContactRespond {
                id: 2,
                request: request.id.clone(),
                accept: true,
            }),
        )
        .unwrap();
    let sent: Vec<&EventRecord> = accepted
        .events
        .iter()
        .map(|event| &*event.record)
        .filter(|event| event.kind == "message")
        .collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].from, erin.id);
    assert_eq!(sent[0].client_key.as_deref(), Some("a2a:first-key"));
    assert_eq!(
        sent[0].mentions,
        Vec::<String>::new(),
        "the body's own mentions only"
    );
    let roundtable_engine::records::StreamKey::Room(room) = &sent[0].stream else {
        panic!("sent in a room")
    };
    assert!(fixture.engine.state.is_member(room, &reviewer.id));
    assert!(fixture.engine.state.is_member(room, &erin.id));
    let after = stored_request(&mut fixture, &request.id);
    assert_eq!(
        after.held,
        Some(roundtable_engine::records::HeldMessage {
            client_key: "a2a:first-key".into(),
            body: None
        }),
        "delivered: the key stays, the body is gone"
    );
}

#[test]
fn a_rejected_or_expired_request_deletes_its_held_message() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let reviewer = register(&mut fixture, &dana, "reviewer");
    make_public(&mut fixture, &dana, Some(&reviewer.id));
    let erin = fixture.signup("erin");
    let frank = fixture.signup("frank");
    let rejected = request_of(&hold(&mut fixture, &erin, "dana/reviewer", "a2a:erin-key").unwrap());
    let expiring =
        request_of(&hold(&mut fixture, &frank, "dana/reviewer", "a2a:frank-key").unwrap());
    let decided = fixture
        .run(
            &dana,
            ClientFrame::ContactRespond(ContactRespond {
                id: 2,
                request: rejected.id.clone(),
                accept: false,
            }),
        )
        .unwrap();
    assert!(
        decided
            .events
            .iter()
            .all(|event| event.record.kind == "contact")
    );
    let gone = stored_request(&mut fixture, &rejected.id).held.unwrap();
    assert_eq!(
        (gone.client_key.as_str(), gone.body),
        ("a2a:erin-key", None)
    );
    fixture.now_ms += REQUEST_LIFETIME_MS;
    fixture.transaction(|engine, tx, now_ms| engine.expire_requests(tx, now_ms).unwrap());
    assert_eq!(
        stored_request(&mut fixture, &expiring.id)
            .held
            .unwrap()
            .body,
        None
    );
    // Nothing was ever sent in a room.
    assert_eq!(
        fixture
            .engine
            .state
            .rooms
            .values()
            .filter(|room| room.members.contains_key(&reviewer.id))
            .count(),
        1,
        "the reviewer's home room only"
    );
}

#[test]
fn contact_requests_are_limited_per_day_agents_tighter_than_users() {
    let mut fixture = Fixture::new();
    let dana = fixture.signup("dana");
    let scout = register(&mut fixture, &dana, "scout");
    let mut made = 0;
    for n in 0..DAILY_REQUESTS_AGENT + 1 {
        let other = fixture.signup(&format!("target{n}"));
        make_public(&mut fixture, &other, None);
        let asked = fixture.run(
            &scout,
            ClientFrame::ContactRequest(ContactRequestCmd {
                id: 2,
                to: format!("target{n}"),
                message: None,
            }),
        );
        match asked {
            Ok(_) => made += 1,
            Err(refusal) => {
                assert_eq!(refusal.code, ErrorCode::RateLimited);
                assert!(refusal.retry_after_ms.unwrap() > 23 * 3600 * 1000);
            }
        }
    }
    assert_eq!(made, DAILY_REQUESTS_AGENT);
    // A day later, there is room again.
    fixture.now_ms += 24 * 3600 * 1000;
    let other = fixture.signup("late");
    make_public(&mut fixture, &other, None);
    fixture
        .run(
            &scout,
            ClientFrame::ContactRequest(ContactRequestCmd {
                id: 3,
                to: "late".into(),
                message: None,
            }),
        )
        .unwrap();
}
