//! One snapshot per wire type. A failing snapshot means the wire changed: if that is meant,
//! update PROTOCOL-facing docs (`docs/protocol.md`) and accept the new snapshot.

use std::collections::BTreeMap;

use roundtable_protocol::bodies::*;
use roundtable_protocol::client::*;
use roundtable_protocol::model::*;
use roundtable_protocol::server::*;
use roundtable_protocol::{ClientFrame, ErrorCode, ServerFrame};
use serde::Serialize;
use serde_json::json;

fn wire<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

fn principal() -> Principal {
    Principal {
        id: "p_agent".into(),
        kind: PrincipalKind::Agent,
        handle: "dana/writer".into(),
        name: "Writer".into(),
        owner: Some("p_dana".into()),
    }
}

fn room() -> Room {
    Room {
        id: "r_1".into(),
        title: Some("parser".into()),
        topic: None,
        head: 45,
        creator: "p_dana".into(),
        members: vec![Member {
            id: "p_agent".into(),
            kind: PrincipalKind::Agent,
            handle: "dana/writer".into(),
            name: "Writer".into(),
            routing: Routing::Mentions,
        }],
    }
}

fn event() -> Event {
    Event {
        room: Some("r_1".into()),
        stream: None,
        seq: 42,
        id: "e_1".into(),
        ts: "2026-11-30T09:00:00.123Z".into(),
        from: "p_dana".into(),
        kind: "message".into(),
        body: json!({"text": "hi @dana/writer", "mentions": ["p_agent"]}),
        client_key: Some("k-00000001".into()),
    }
}

fn request() -> ContactRequest {
    ContactRequest {
        id: "c_1".into(),
        from: "p_a".into(),
        to: "p_b".into(),
        state: RequestState::Pending,
        message: Some("let's pair".into()),
        ts: "2026-11-30T09:00:00.000Z".into(),
    }
}

#[test]
fn client_frames() {
    let mut cursors = BTreeMap::new();
    cursors.insert("r_1".to_owned(), 41);
    cursors.insert("inbox".to_owned(), 7);
    let frames = vec![
        ClientFrame::Auth(Auth {
            id: 1,
            token: "rt_x".into(),
            device: "laptop".into(),
            client: ClientInfo {
                name: "roundtable-desktop".into(),
                version: "0.1.0".into(),
            },
        }),
        ClientFrame::Sync(SyncCmd {
            id: 2,
            cursors: cursors.clone(),
        }),
        ClientFrame::Ack(Ack { id: 3, cursors }),
        ClientFrame::Send(SendCmd {
            id: 4,
            room: "r_1".into(),
            client_key: "k-00000001".into(),
            kind: "message".into(),
            body: json!({"text": "hi"}),
        }),
        ClientFrame::History(History {
            id: 5,
            room: "r_1".into(),
            before: Some(40),
            after: None,
            limit: Some(10),
        }),
        ClientFrame::RoomCreate(RoomCreate {
            id: 6,
            title: Some("parser".into()),
            topic: None,
            members: vec!["dana/reviewer".into()],
        }),
        ClientFrame::RoomInvite(RoomInvite {
            id: 7,
            room: "r_1".into(),
            handle: "sam".into(),
        }),
        ClientFrame::RoomKick(RoomKick {
            id: 8,
            room: "r_1".into(),
            handle: "sam".into(),
        }),
        ClientFrame::RoomUpdate(RoomUpdate {
            id: 9,
            room: "r_1".into(),
            title: None,
            topic: Some("v2".into()),
        }),
        ClientFrame::RoomLeave(RoomLeave {
            id: 10,
            room: "r_1".into(),
        }),
        ClientFrame::Rooms(Rooms { id: 11 }),
        ClientFrame::MemberSet(MemberSet {
            id: 12,
            room: "r_1".into(),
            routing: Routing::All,
        }),
        ClientFrame::ProfileSet(ProfileSet {
            id: 13,
            principal: Some("p_agent".into()),
            name: Some("Dana".into()),
            discoverable: Some(Discoverable::Public),
        }),
        ClientFrame::Directory(Directory {
            id: 14,
            query: Some("review".into()),
            limit: Some(20),
        }),
        ClientFrame::RegisterAgent(RegisterAgent {
            id: 15,
            name: "writer".into(),
            description: Some("writes code".into()),
            card: Some(json!({"framework": "claude-code"})),
            discoverable: Some(Discoverable::Contacts),
        }),
        ClientFrame::RegisterRemoteAgent(RegisterRemoteAgent {
            id: 27,
            name: "weather".into(),
            card_url: "https://weather.example/.well-known/agent-card.json".into(),
            credential: Some(RemoteCredential {
                scheme: RemoteCredentialScheme::ApiKey,
                value: "k-123".into(),
                header: Some("X-Weather-Key".into()),
            }),
            description: Some("forecasts".into()),
            discoverable: Some(Discoverable::Contacts),
        }),
        ClientFrame::AgentToken(AgentToken {
            id: 16,
            agent: "p_agent".into(),
            action: TokenAction::Rotate,
        }),
        ClientFrame::UserToken(UserToken {
            id: 26,
            action: TokenAction::Revoke,
        }),
        ClientFrame::ContactRequest(ContactRequestCmd {
            id: 17,
            to: "b/assistant".into(),
            message: Some("hello".into()),
        }),
        ClientFrame::ContactRespond(ContactRespond {
            id: 18,
            request: "c_1".into(),
            accept: true,
        }),
        ClientFrame::Contacts(Contacts { id: 19 }),
        ClientFrame::InviteCreate(InviteCreate {
            id: 20,
            room: Some("r_1".into()),
            max_uses: Some(2),
            expires_in_s: Some(3600),
        }),
        ClientFrame::InviteRedeem(InviteRedeem {
            id: 21,
            code: "abc".into(),
        }),
        ClientFrame::InviteRevoke(InviteRevoke {
            id: 24,
            invite: "i_1".into(),
        }),
        ClientFrame::Invites(Invites { id: 25 }),
        ClientFrame::Control(Control {
            id: 22,
            agent: "p_agent".into(),
            action: ControlAction::Pause,
            room: None,
            reason: Some("budget: $5.00 a day for dana/writer reached".into()),
        }),
        ClientFrame::Audit(Audit {
            id: 23,
            principal: None,
            since: Some("2026-11-30T00:00:00.000Z".into()),
            limit: Some(100),
        }),
    ];
    assert_eq!(frames.len(), ClientFrame::TYPES.len());
    let mut text = String::new();
    for (frame, t) in frames.iter().zip(ClientFrame::TYPES) {
        assert_eq!(frame.type_name(), t);
        text.push_str(&frame.to_json());
        text.push('\n');
    }
    let signup = SignupRequest {
        handle: "dana".into(),
        name: "Dana".into(),
        discoverable: None,
        invite: Some("code".into()),
    };
    text.push_str(&wire(&signup));
    insta::assert_snapshot!("client_frames", text);
}

#[test]
fn server_frames() {
    let frames = [
        ServerFrame::Hello(Hello {
            proto: 1,
            hub: "h_1".into(),
            epoch: "ep_1".into(),
            hb_ms: 20000,
            max_frame: 1_048_576,
            max_queue: 4096,
            replay_max: Some(500),
            max_queue_bytes: Some(8_388_608),
        }),
        ServerFrame::Ok(OkReply::empty(3)),
        ServerFrame::Err(ErrReply {
            re: Some(7),
            code: ErrorCode::RateLimited,
            msg: "slow down".into(),
            retry_after_ms: Some(1200),
        }),
        ServerFrame::Err(ErrReply {
            re: None,
            code: ErrorCode::BadFrame,
            msg: "not JSON".into(),
            retry_after_ms: None,
        }),
        ServerFrame::Evt(event()),
        ServerFrame::Evt(Event {
            room: None,
            stream: Some("inbox".into()),
            seq: 7,
            id: "e_2".into(),
            ts: "2026-11-30T09:00:00.000Z".into(),
            from: "p_dana".into(),
            kind: "room_added".into(),
            body: json!({"room": "r_1", "by": "p_dana"}),
            client_key: None,
        }),
        ServerFrame::Gap(Gap {
            room: "r_1".into(),
            from: 3,
            to: 40,
        }),
    ];
    let text: Vec<String> = frames.iter().map(ServerFrame::to_json).collect();
    insta::assert_snapshot!("server_frames", text.join("\n"));
}

#[test]
fn ok_payloads() {
    let mut heads = BTreeMap::new();
    heads.insert("r_1".to_owned(), 45);
    heads.insert("inbox".to_owned(), 7);
    let payloads = vec![
        OkReply::with(
            1,
            &AuthOk {
                principal: principal(),
            },
        ),
        OkReply::with(
            2,
            &SyncOk {
                heads,
                read: [("r_1".to_owned(), 40)].into_iter().collect(),
            },
        ),
        OkReply::with(
            3,
            &SendOk {
                event: event(),
                dup: false,
            },
        ),
        OkReply::with(
            4,
            &HistoryOk {
                events: vec![event()],
                more: false,
            },
        ),
        OkReply::with(5, &RoomOk { room: room() }),
        OkReply::with(
            6,
            &RoomsOk {
                rooms: vec![room()],
            },
        ),
        OkReply::with(
            7,
            &ProfileOk {
                principal: principal(),
            },
        ),
        OkReply::with(
            8,
            &DirectoryOk {
                entries: vec![DirectoryEntry {
                    id: "p_agent".into(),
                    kind: PrincipalKind::Agent,
                    handle: "dana/writer".into(),
                    name: "Writer".into(),
                    description: Some("writes".into()),
                    owner: Some("p_dana".into()),
                    card: Some(
                        json!({"framework": "claude-code", "skills": [{"id": "rust", "name": "Rust"}]}),
                    ),
                    contact: ContactRelation::PendingOut,
                }],
            },
        ),
        OkReply::with(
            9,
            &RegisterAgentOk {
                agent: principal(),
                token: "rt_x".into(),
                room: Some(room()),
            },
        ),
        OkReply::with(
            27,
            &RegisterRemoteAgentOk {
                agent: principal(),
                card_url: "https://weather.example/.well-known/agent-card.json".into(),
                room: Some(room()),
            },
        ),
        OkReply::with(
            10,
            &AgentTokenOk {
                token: Some("rt_y".into()),
            },
        ),
        OkReply::with(
            17,
            &UserTokenOk {
                token: Some("rt_z".into()),
            },
        ),
        OkReply::with(11, &ContactRequestOk { request: request() }),
        OkReply::with(
            12,
            &ContactsOk {
                contacts: vec![Contact {
                    id: "p_b".into(),
                    kind: PrincipalKind::User,
                    handle: "sam".into(),
                    name: "Sam".into(),
                    owner: None,
                    since: "2026-11-30T09:00:00.000Z".into(),
                }],
                requests: vec![request()],
            },
        ),
        OkReply::with(
            13,
            &InviteCreateOk {
                code: "abc".into(),
                link: "roundtable://invite/abc?hub=127.0.0.1:7300".into(),
                invite: Some("i_1".into()),
            },
        ),
        OkReply::with(14, &InviteRedeemOk { room: None }),
        OkReply::with(
            15,
            &AuditOk {
                entries: vec![
                    AuditEntry {
                        n: 1,
                        ts: "2026-11-30T09:00:00.000Z".into(),
                        principal: "p_dana".into(),
                        action: "room_create".into(),
                        target: Some("r_1".into()),
                        reason: None,
                        result: AuditResult::Ok,
                        code: None,
                        count: None,
                        via: None,
                        hash: "00".into(),
                    },
                    AuditEntry {
                        n: 2,
                        ts: "2026-11-30T09:00:01.000Z".into(),
                        principal: "p_eve".into(),
                        action: "send".into(),
                        target: Some("r_1".into()),
                        reason: None,
                        result: AuditResult::Err,
                        code: Some("not_member".into()),
                        count: Some(40),
                        via: Some("a2a".into()),
                        hash: "01".into(),
                    },
                    AuditEntry {
                        n: 3,
                        ts: "2026-11-30T09:00:02.000Z".into(),
                        principal: "p_dana".into(),
                        action: "control".into(),
                        target: Some("p_writer pause".into()),
                        reason: Some("budget: $5.00 a day for dana/writer reached".into()),
                        result: AuditResult::Ok,
                        code: None,
                        count: None,
                        via: None,
                        hash: "02".into(),
                    },
                ],
            },
        ),
        OkReply::with(
            16,
            &InvitesOk {
                invites: vec![
                    Invite {
                        id: "i_1".into(),
                        room: Some("r_1".into()),
                        uses_left: 2,
                        expires_at: "2026-12-07T09:00:00.000Z".into(),
                        created_at: "2026-11-30T09:00:00.000Z".into(),
                    },
                    Invite {
                        id: "i_2".into(),
                        room: None,
                        uses_left: 1,
                        expires_at: "2026-12-07T10:00:00.000Z".into(),
                        created_at: "2026-11-30T10:00:00.000Z".into(),
                    },
                ],
            },
        ),
    ];
    let text: Vec<String> = payloads
        .into_iter()
        .map(|ok| ServerFrame::Ok(ok).to_json())
        .collect();
    insta::assert_snapshot!("ok_payloads", text.join("\n"));
}

#[test]
fn http_bodies() {
    let text = [
        wire(&SignupOk {
            principal: principal(),
            token: "rt_x".into(),
        }),
        wire(&HttpError {
            code: ErrorCode::Conflict,
            msg: "taken".into(),
        }),
        wire(&Health {
            ok: true,
            version: "0.1.0".into(),
            epoch: "ep_1".into(),
            audit_head: Some(AuditHead {
                n: 42,
                hash: "9f".into(),
            }),
        }),
        wire(&WellKnown {
            hub: "h_1".into(),
            proto: vec![1],
            signup: "open".into(),
        }),
    ];
    insta::assert_snapshot!("http_bodies", text.join("\n"));
}

#[test]
fn event_bodies() {
    let session = SessionRef {
        agent: "p_agent".into(),
        framework: "claude-code".into(),
        session_id: "s1".into(),
    };
    let text = [
        wire(&MessageBody {
            text: "hi".into(),
            mentions: Some(vec!["p_b".into()]),
            reply_to: Some("e_1".into()),
        }),
        wire(&TasksBody {
            session: session.clone(),
            source: "TodoWrite".into(),
            tasks: vec![Task {
                id: Some("1".into()),
                title: "Write the parser".into(),
                status: TaskStatus::InProgress,
                active_form: Some("Writing the parser".into()),
            }],
        }),
        wire(&ArchBody::Define {
            source: None,
            define: vec![ComponentDef {
                id: "parser".into(),
                name: "Parser".into(),
                description: None,
                paths: vec!["src/parser/**".into()],
                depends_on: vec!["lexer".into()],
            }],
        }),
        wire(&ArchBody::Status {
            component: "parser".into(),
            status: ComponentStatus::Working,
            note: Some("halfway".into()),
            files: Some(vec!["src/parser/mod.rs".into()]),
            agent: None,
            claim: Some(true),
        }),
        wire(&UsageBody {
            session,
            model: "claude-sonnet-4-5".into(),
            input: 1200,
            output: 300,
            cache_write: 0,
            cache_read: 5000,
            cost_usd: Some(0.0123),
            from: "2026-11-30T09:00:00.000Z".into(),
            to: "2026-11-30T09:01:00.000Z".into(),
        }),
        wire(&StatusBody {
            state: AgentState::WaitingHuman,
            detail: None,
        }),
        wire(&PingBody {
            ping: "q1".into(),
            question: "Keep the old config format?".into(),
            options: Some(vec!["yes".into(), "no".into()]),
            to: Some(vec!["p_dana".into()]),
            expires_at: None,
        }),
        wire(&AnswerBody {
            ping: "q1".into(),
            choice: Some("yes".into()),
            text: None,
        }),
        wire(&MemberBody {
            principal: "p_b".into(),
            action: MemberAction::Join,
            by: "p_a".into(),
        }),
        wire(&RoomBody {
            title: Some("t".into()),
            topic: None,
        }),
        wire(&ContactBody {
            request: "c_1".into(),
            from: "p_a".into(),
            to: "p_b".into(),
            state: RequestState::Accepted,
            message: None,
        }),
        wire(&RoomChangeBody {
            room: "r_1".into(),
            by: "p_a".into(),
        }),
        wire(&ControlBody {
            action: ControlAction::Stop,
            room: None,
            by: "p_dana".into(),
            reason: None,
        }),
        wire(&ControlBody {
            action: ControlAction::Pause,
            room: None,
            by: "p_dana".into(),
            reason: Some("budget: $5.00 a day for dana/writer reached".into()),
        }),
    ];
    insta::assert_snapshot!("event_bodies", text.join("\n"));
}
