//! The hub stays bounded under hostile load (protocol amendments 7 and 8, and what the
//! listener adds): timeouts and counts before `auth`, 8 KiB frames until it succeeds,
//! outbound queues bounded in bytes, paged replies, size bounds on `kind` and mentions,
//! live connections per principal, and a rate limit on every write and on signups. Each
//! limit is set small here, so each test shows it from both sides quickly.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use roundtable_engine::RateLimits;
use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::{
    Auth, ClientFrame, ClientInfo, History, RegisterAgent, RoomCreate, RoomUpdate, SendCmd,
};
use roundtable_protocol::server::{HistoryOk, RegisterAgentOk, RoomOk, SendOk, ServerFrame};
use roundtable_testkit::{Client, Incoming, TestHub, message, signup};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{login, room, say, sync};

fn loopback(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// A TCP connection to the hub from `source`.
async fn tcp_from(hub: SocketAddr, source: IpAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(source, 0)).unwrap();
    socket.connect(hub).await.unwrap()
}

/// Reads until the hub closes the connection; what it sent, or `None` if it stayed open
/// for `wait`.
async fn read_until_closed(stream: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    match tokio::time::timeout(wait, stream.read_to_end(&mut received)).await {
        Ok(_) => Some(received),
        Err(_) => None,
    }
}

/// One HTTP/1.1 request from `source` with `Connection: close`; the status line's code
/// and the whole response (0 and nothing when the connection was turned away).
async fn http_from(
    hub: SocketAddr,
    source: IpAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    let mut stream = tcp_from(hub, source).await;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {hub}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        // Turned away before the request was written: no status.
        return (0, String::new());
    }
    let response = read_until_closed(&mut stream, Duration::from_secs(10))
        .await
        .expect("the response arrives");
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, response)
}

fn auth_frame(id: u64, token: &str, padding: usize) -> String {
    ClientFrame::Auth(Auth {
        id,
        token: token.into(),
        device: "laptop".into(),
        client: ClientInfo {
            name: "x".repeat(padding),
            version: "1".into(),
        },
    })
    .to_json()
}

#[tokio::test]
async fn a_half_sent_request_and_an_idle_connection_are_closed_after_the_header_timeout() {
    let hub = TestHub::start_with(|config| {
        config.connections.header_timeout = Duration::from_millis(300);
    })
    .await;
    let started = Instant::now();
    let mut half = TcpStream::connect(hub.addr).await.unwrap();
    half.write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let answered = read_until_closed(&mut half, Duration::from_secs(5))
        .await
        .expect("the hub closes a half-sent request");
    assert!(!String::from_utf8_lossy(&answered).contains("200 OK"));
    assert!(started.elapsed() >= Duration::from_millis(250));

    // A whole request is answered; the connection, idle after it, is closed too.
    let mut idle = TcpStream::connect(hub.addr).await.unwrap();
    idle.write_all(format!("GET /v1/health HTTP/1.1\r\nHost: {}\r\n\r\n", hub.addr).as_bytes())
        .await
        .unwrap();
    let answered = read_until_closed(&mut idle, Duration::from_secs(5))
        .await
        .expect("an idle keep-alive connection is closed");
    assert!(String::from_utf8_lossy(&answered).starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn connections_are_capped_per_client_address_and_in_total() {
    let hub = TestHub::start_with(|config| {
        config.connections.max_connections_per_address = 3;
        config.connections.max_connections = 5;
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(tcp_from(hub.addr, loopback(1)).await);
    }
    let mut fourth = tcp_from(hub.addr, loopback(1)).await;
    assert_eq!(
        read_until_closed(&mut fourth, Duration::from_secs(5)).await,
        Some(Vec::new()),
        "a fourth connection from one address is closed at once"
    );
    for _ in 0..2 {
        held.push(tcp_from(hub.addr, loopback(2)).await);
    }
    let mut sixth = tcp_from(hub.addr, loopback(3)).await;
    assert_eq!(
        read_until_closed(&mut sixth, Duration::from_secs(5)).await,
        Some(Vec::new()),
        "a sixth connection in all is closed at once"
    );
    // The held ones are open and served.
    for stream in &mut held {
        assert!(
            read_until_closed(stream, Duration::from_millis(100))
                .await
                .is_none()
        );
    }
    // One leaves: another address gets its place.
    // (Once the hub has seen it go: until then each try is turned away, and counted.)
    drop(held.remove(0));
    let mut early = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) = http_from(hub.addr, loopback(3), "GET", "/v1/health", "").await;
        if status == 200 {
            break;
        }
        early += 1;
        assert!(
            Instant::now() < deadline,
            "the slot was never freed: {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(held);
    let metrics = loop {
        let (status, metrics) = http_from(hub.addr, loopback(4), "GET", "/metrics", "").await;
        if status == 200 {
            break metrics;
        }
        early += 1;
        assert!(Instant::now() < deadline, "no room for /metrics: {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let turned_away = format!("roundtable_connections_turned_away_total {}", 2 + early);
    assert!(
        metrics.lines().any(|line| line == turned_away),
        "{turned_away} in {metrics}"
    );
}

#[tokio::test]
async fn sockets_waiting_to_authenticate_are_capped_per_address_and_in_total() {
    let hub = TestHub::start_with(|config| {
        config.connections.max_unauthenticated_per_address = 2;
        config.connections.max_unauthenticated = 3;
    })
    .await;
    let dana = signup(hub.addr, "dana").await.unwrap();
    let url = hub.ws_url();
    let mut first = Client::connect_from(&url, loopback(1))
        .await
        .unwrap()
        .unwrap();
    let _second = Client::connect_from(&url, loopback(1))
        .await
        .unwrap()
        .unwrap();
    let refused = Client::connect_from(&url, loopback(1))
        .await
        .unwrap()
        .err()
        .expect("a third from one address is refused");
    assert_eq!(refused.status, 503);
    let _other = Client::connect_from(&url, loopback(2))
        .await
        .unwrap()
        .unwrap();
    let refused = Client::connect_from(&url, loopback(3))
        .await
        .unwrap()
        .err()
        .expect("a fourth in all is refused");
    assert_eq!(refused.status, 503);
    // Authenticated, a socket no longer waits: its place is free.
    first.auth(&dana.token, "laptop").await.unwrap();
    let mut late = Client::connect_from(&url, loopback(3))
        .await
        .unwrap()
        .unwrap();
    late.auth(&dana.token, "phone").await.unwrap();
}

#[tokio::test]
async fn frames_over_8_kib_close_with_1009_until_auth_succeeds() {
    let hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;

    // An oversized first frame: 1009, before its payload is read.
    let mut big = hub.connect().await;
    big.send_text(auth_frame(1, &created.token, 9000))
        .await
        .unwrap();
    assert_eq!(big.closed().await.unwrap(), Some(1009));

    // An auth of nearly 8 KiB passes; once authenticated, frames may be as large as
    // max_frame, even one sent right behind the auth, before its ok.
    let mut padded = hub.connect().await;
    let frame = auth_frame(1, &created.token, 8000);
    assert!(frame.len() <= 8192);
    padded.send_text(frame).await.unwrap();
    let text = "y".repeat(16 * 1024);
    padded
        .send_frame(&message(2, &room_id, "behind-auth-0001", &text))
        .await
        .unwrap();
    padded.reply_to(1).await.unwrap().expect("auth ok");
    let sent: SendOk = padded.reply_to(2).await.unwrap().unwrap().decode().unwrap();
    assert_eq!(sent.event.body["text"], text.as_str());
    let id = padded.id() + 2;
    let ok = padded
        .call(message(id, &room_id, "after-auth-00001", &text))
        .await
        .unwrap();
    assert!(ok.is_ok());
}

#[tokio::test]
async fn an_address_that_fails_to_authenticate_too_often_waits() {
    let hub = TestHub::start_with(|config| {
        config.connections.failed_auth_burst = 2;
        config.connections.failed_auth_interval = Duration::from_secs(60);
    })
    .await;
    let dana = signup(hub.addr, "dana").await.unwrap();
    let url = hub.ws_url();
    for attempt in 0..2 {
        let mut guess = Client::connect_from(&url, loopback(1))
            .await
            .unwrap()
            .unwrap();
        guess
            .send_text(auth_frame(
                1,
                &format!("rt_{}", "Q".repeat(43 + attempt)),
                0,
            ))
            .await
            .unwrap();
        assert_eq!(guess.closed().await.unwrap(), Some(4001));
    }
    // The third attempt is turned away (once the hub has counted the second failure).
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        match Client::connect_from(&url, loopback(1)).await.unwrap() {
            Err(refused) => break refused,
            Ok(early) => drop(early),
        }
        assert!(
            Instant::now() < deadline,
            "a third attempt was never turned away"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(refused.status, 429);
    let seconds: u64 = refused.retry_after.unwrap().parse().unwrap();
    assert!((1..=60).contains(&seconds), "{seconds}");
    // Another address, and a good token, are not held up.
    let mut fine = Client::connect_from(&url, loopback(2))
        .await
        .unwrap()
        .unwrap();
    fine.auth(&dana.token, "laptop").await.unwrap();
}

#[tokio::test]
async fn hello_announces_max_queue_bytes_and_pipelined_history_past_it_closes_4008() {
    let hub = TestHub::start_with(|config| {
        config.max_queue = 1_000_000;
        config.max_queue_bytes = 256 * 1024;
        config.page_bytes = 64 * 1024;
    })
    .await;
    let (mut dana, created) = hub.user("dana").await;
    assert_eq!(dana.hello.max_queue_bytes, Some(256 * 1024));
    let room_id = room(&mut dana, &[]).await;
    let text = "z".repeat(15 * 1024);
    for n in 0..40 {
        say(&mut dana, &room_id, &format!("fill-{n:08}"), &text).await;
    }
    // 1,000 pages of 64 KiB asked for, none read: the hub holds a queue's worth and closes.
    // The requests carry 32 KiB each that the hub ignores, so that they outlast what the
    // sockets buffer: the hub closes while the client is still sending, and must go on
    // reading it, or neither side moves until the hub gives up on the close frame.
    let mut greedy = login(&hub, &created.token, "greedy").await;
    let padding = "p".repeat(32 * 1024);
    for id in 10..1010 {
        let mut frame = serde_json::to_value(ClientFrame::History(History {
            id,
            room: room_id.clone(),
            before: None,
            after: Some(0),
            limit: Some(500),
        }))
        .unwrap();
        frame["padding"] = json!(padding);
        // Each phase says where it stalled, should it: the hub must read on past its 4008.
        tokio::time::timeout(Duration::from_secs(30), greedy.send_text(frame.to_string()))
            .await
            .unwrap_or_else(|_| panic!("the hub stopped reading at request {id}"))
            .unwrap_or_else(|error| panic!("request {id} could not be sent: {error}"));
    }
    let mut pages = 0;
    let code = loop {
        let next = greedy.recv_within(Duration::from_secs(30)).await.unwrap();
        match next.unwrap_or_else(|| panic!("silent after {pages} pages, and no 4008")) {
            Incoming::Frame(ServerFrame::Ok(ok)) => {
                let page: HistoryOk = ok.decode().unwrap();
                assert!(page.more, "a page is cut at 64 KiB");
                assert!(page.events.len() < 40);
                pages += 1;
            }
            Incoming::Frame(other) => panic!("unexpected {other:?}"),
            Incoming::Closed(code) => break code,
        }
    };
    assert_eq!(code, Some(4008));
    assert!(pages < 1000, "closed before every page was sent ({pages})");
    // The hub goes on for everyone else.
    say(&mut dana, &room_id, "after-greedy-01", "still here").await;
}

#[tokio::test]
async fn history_pages_stop_at_their_byte_budget_and_say_more() {
    let hub = TestHub::start_with(|config| config.page_bytes = 8 * 1024).await;
    let (mut dana, _) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let text = "w".repeat(2000);
    for n in 0..10 {
        say(&mut dana, &room_id, &format!("page-{n:08}"), &text).await;
    }
    // The room's log: 2 hub events, then the 10 messages (seq 3 to 12).
    let mut after = 0;
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let id = dana.id();
        let page: HistoryOk = dana
            .ok(ClientFrame::History(History {
                id,
                room: room_id.clone(),
                before: None,
                after: Some(after),
                limit: Some(500),
            }))
            .await
            .decode()
            .unwrap();
        pages += 1;
        seen.extend(page.events.iter().map(|event| event.seq));
        let Some(last) = page.events.last() else {
            break;
        };
        after = last.seq;
        if !page.more {
            break;
        }
    }
    assert_eq!(seen, (1..=12).collect::<Vec<_>>());
    assert!(pages >= 3, "{pages} pages");
}

#[tokio::test]
async fn a_backlog_is_replayed_page_by_page_whole_and_in_order() {
    let hub = TestHub::start_with(|config| {
        config.page_bytes = 4 * 1024;
        config.replay_max = 10_000;
    })
    .await;
    let (mut dana, created) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let second = room(&mut dana, &[]).await;
    let text = "v".repeat(1000);
    for n in 0..60 {
        let target = if n % 3 == 0 { &second } else { &room_id };
        say(&mut dana, target, &format!("replay-{n:07}"), &text).await;
    }
    let mut fresh = login(&hub, &created.token, "fresh").await;
    let (frames, heads) = sync(&mut fresh, &[]).await;
    let mut per_stream: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for frame in &frames {
        if let ServerFrame::Evt(event) = frame {
            per_stream
                .entry(event.stream_name().to_owned())
                .or_default()
                .push(event.seq);
        }
    }
    for (stream, head) in &heads {
        assert_eq!(
            per_stream.get(stream).cloned().unwrap_or_default(),
            (1..=*head).collect::<Vec<_>>(),
            "{stream}"
        );
    }
    assert_eq!(heads[&room_id], 42);
    assert_eq!(heads[&second], 22);
}

#[tokio::test]
async fn a_kind_over_64_bytes_is_too_large() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let send = |id, kind: String| {
        ClientFrame::Send(SendCmd {
            id,
            room: room_id.clone(),
            client_key: format!("kind-key-{id:06}"),
            kind,
            body: json!({"n": 1}),
        })
    };
    let id = dana.id();
    let longest = format!("x-{}", "k".repeat(62));
    dana.ok(send(id, longest)).await;
    let id = dana.id();
    let err = dana.err(send(id, format!("x-{}", "k".repeat(63)))).await;
    assert_eq!(err.code, ErrorCode::TooLarge, "{}", err.msg);
}

async fn register(owner: &mut Client, name: &str) -> RegisterAgentOk {
    let id = owner.id();
    owner
        .ok(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: name.into(),
            description: None,
            card: None,
            discoverable: None,
        }))
        .await
        .decode()
        .unwrap()
}

#[tokio::test]
async fn mentions_are_room_members_once_each_and_at_most_64() {
    let hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let mut handles = Vec::new();
    let mut agents = Vec::new();
    for n in 0..65 {
        let agent = register(&mut dana, &format!("a{n:02}")).await;
        handles.push(agent.agent.handle.clone());
        agents.push(agent.agent.id);
    }
    let id = dana.id();
    let crowd: RoomOk = dana
        .ok(ClientFrame::RoomCreate(RoomCreate {
            id,
            title: Some("crowd".into()),
            topic: None,
            members: handles.clone(),
        }))
        .await
        .decode()
        .unwrap();
    let crowd = crowd.room.id;
    let send = |id: u64, body: serde_json::Value| {
        ClientFrame::Send(SendCmd {
            id,
            room: crowd.clone(),
            client_key: format!("mention-key-{id:05}"),
            kind: "message".into(),
            body,
        })
    };
    let stored_mentions = |ok: roundtable_protocol::server::OkReply| {
        let sent: SendOk = ok.decode().unwrap();
        sent.event.body.get("mentions").cloned()
    };

    // Listed non-members are dropped; duplicates are kept once; text adds members.
    let id = dana.id();
    let ok = dana
        .ok(send(
            id,
            json!({"text": "hi @dana/a01 and @nobody", "mentions": ["p_not_a_member", agents[0], agents[0]]}),
        ))
        .await;
    assert_eq!(stored_mentions(ok), Some(json!([agents[0], agents[1]])));
    let id = dana.id();
    let ok = dana
        .ok(send(
            id,
            json!({"text": "hi", "mentions": ["p_not_a_member"]}),
        ))
        .await;
    assert_eq!(stored_mentions(ok), None, "no member, no mentions field");

    // 64 members written in the text pass; 65 are too many.
    let text = |count: usize| {
        handles[..count]
            .iter()
            .map(|handle| format!("@{handle} @{handle}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let id = dana.id();
    let ok = dana.ok(send(id, json!({ "text": text(64) }))).await;
    assert_eq!(stored_mentions(ok).unwrap().as_array().unwrap().len(), 64);
    let id = dana.id();
    let err = dana.err(send(id, json!({ "text": text(65) }))).await;
    assert_eq!(err.code, ErrorCode::TooLarge, "{}", err.msg);
    // 65 listed, members or not, are refused before the hub looks them up.
    let listed: Vec<String> = (0..65).map(|n| format!("p_listed_{n}")).collect();
    let id = dana.id();
    let err = dana
        .err(send(id, json!({"text": "hi", "mentions": listed})))
        .await;
    assert_eq!(err.code, ErrorCode::TooLarge);
    // A bomb of thousands of distinct @handles that name no member is cheap and stores none.
    let bomb: String = (0..2000).map(|n| format!("@n{n} ")).collect();
    let id = dana.id();
    let ok = dana.ok(send(id, json!({ "text": bomb }))).await;
    assert_eq!(stored_mentions(ok), None);
    let _ = created;
}

#[tokio::test]
async fn a_principal_past_max_devices_gets_busy_and_1013() {
    let hub = TestHub::start_with(|config| config.max_devices = 2).await;
    let (_laptop, created) = hub.user("dana").await;
    let _phone = login(&hub, &created.token, "phone").await;
    let mut third = hub.connect().await;
    third
        .send_text(auth_frame(1, &created.token, 0).replace("laptop", "tablet"))
        .await
        .unwrap();
    match third.recv().await.unwrap() {
        Incoming::Frame(ServerFrame::Err(err)) => {
            assert_eq!(err.code, ErrorCode::Busy, "{}", err.msg);
            assert_eq!(err.re, Some(1));
        }
        other => panic!("expected err busy, got {other:?}"),
    }
    assert_eq!(third.closed().await.unwrap(), Some(1013));
    // A device already connected may still reconnect: it replaces itself.
    let _again = login(&hub, &created.token, "phone").await;
}

#[tokio::test]
async fn every_write_draws_from_the_rate_limit_and_an_agent_also_from_its_owner() {
    let hub = TestHub::start_with(|config| {
        config.rate_limits = Some(RateLimits {
            agent: "3/0.01".parse().unwrap(),
            user: "5/0.01".parse().unwrap(),
        });
    })
    .await;
    // A room_update flood: five pass, the sixth waits.
    let (mut dana, _) = hub.user("dana").await;
    let room_id = room(&mut dana, &[]).await;
    let update = |id: u64, title: String| {
        ClientFrame::RoomUpdate(RoomUpdate {
            id,
            room: room_id.clone(),
            title: Some(title),
            topic: None,
        })
    };
    for n in 0..4 {
        let id = dana.id();
        dana.ok(update(id, format!("title {n}"))).await;
    }
    let id = dana.id();
    let limited = dana.err(update(id, "one too many".into())).await;
    assert_eq!(limited.code, ErrorCode::RateLimited);
    assert!(limited.retry_after_ms.is_some_and(|ms| ms > 0));
    // Another principal has its own bucket.
    let (mut sam, _) = hub.user("sam").await;
    room(&mut sam, &[]).await;

    // An agent's writes also draw from its owner's bucket.
    let (mut eve, _) = hub.user("eve").await;
    let bot = register(&mut eve, "bot").await; // eve: 4 left
    let home = bot.room.unwrap().id;
    let id = eve.id();
    eve.ok(ClientFrame::RoomUpdate(RoomUpdate {
        id,
        room: home.clone(),
        title: Some("home".into()),
        topic: None,
    }))
    .await; // eve: 3 left
    let mut bot_client = login(&hub, &bot.token, "bot").await;
    let status = |id: u64| {
        ClientFrame::Send(SendCmd {
            id,
            room: home.clone(),
            client_key: format!("bot-status-{id:04}"),
            kind: "status".into(),
            body: json!({"state": "working"}),
        })
    };
    for _ in 0..3 {
        let id = bot_client.id();
        bot_client.ok(status(id)).await; // bot: 2, 1, 0 left; eve: 2, 1, 0
    }
    let id = eve.id();
    let owner_limited = eve.err(update_in(id, &home)).await;
    assert_eq!(owner_limited.code, ErrorCode::RateLimited);
    // The agent's own bucket is empty too; both refuse.
    let id = bot_client.id();
    let err = bot_client.err(status(id)).await;
    assert_eq!(err.code, ErrorCode::RateLimited);
}

fn update_in(id: u64, room: &str) -> ClientFrame {
    ClientFrame::RoomUpdate(RoomUpdate {
        id,
        room: room.into(),
        title: Some("again".into()),
        topic: None,
    })
}

#[tokio::test]
async fn an_agent_drawing_on_an_empty_owner_bucket_is_refused_with_its_own_left() {
    let hub = TestHub::start_with(|config| {
        config.rate_limits = Some(RateLimits {
            agent: "10/0.01".parse().unwrap(),
            user: "3/0.01".parse().unwrap(),
        });
    })
    .await;
    let (mut eve, _) = hub.user("eve").await;
    let bot = register(&mut eve, "bot").await; // eve: 2 left
    let home = bot.room.unwrap().id;
    let mut bot_client = login(&hub, &bot.token, "bot").await;
    for _ in 0..2 {
        let id = bot_client.id();
        let key = format!("bot-key-{id:06}");
        bot_client.ok(message(id, &home, &key, "hi")).await; // eve: 1, 0
    }
    let id = bot_client.id();
    let err = bot_client
        .err(message(id, &home, "bot-key-last01", "hi"))
        .await;
    assert_eq!(err.code, ErrorCode::RateLimited);
    assert!(err.msg.contains("owner"), "{}", err.msg);
}

#[tokio::test]
async fn a_user_has_at_most_max_agents() {
    let hub = TestHub::start_with(|config| config.max_agents_per_user = 2).await;
    let (mut dana, _) = hub.user("dana").await;
    register(&mut dana, "one").await;
    register(&mut dana, "two").await;
    let id = dana.id();
    let err = dana
        .err(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: "three".into(),
            description: None,
            card: None,
            discoverable: None,
        }))
        .await;
    assert_eq!(err.code, ErrorCode::Conflict, "{}", err.msg);
}

#[tokio::test]
async fn signups_are_limited_per_client_address_with_429_and_retry_after() {
    let hub = TestHub::start_with(|config| config.signups_per_hour = Some(2)).await;
    let body = |handle: &str| json!({"handle": handle, "name": handle}).to_string();
    for handle in ["dana", "sam"] {
        let (status, response) =
            http_from(hub.addr, loopback(1), "POST", "/v1/signup", &body(handle)).await;
        assert_eq!(status, 200, "{response}");
    }
    let (status, response) =
        http_from(hub.addr, loopback(1), "POST", "/v1/signup", &body("eve")).await;
    assert_eq!(status, 429, "{response}");
    let retry_after: u64 = response
        .lines()
        .find_map(|line| line.strip_prefix("retry-after: "))
        .expect("Retry-After")
        .trim()
        .parse()
        .unwrap();
    assert!((1..=1800).contains(&retry_after), "{retry_after}");
    assert!(response.contains("\"code\":\"rate_limited\""), "{response}");
    let (status, _) = http_from(hub.addr, loopback(2), "POST", "/v1/signup", &body("eve")).await;
    assert_eq!(status, 200, "another address signs up");
}

#[tokio::test]
async fn health_says_ok_while_the_writer_and_the_flush_stage_run() {
    let hub = TestHub::start().await;
    let (status, response) = http_from(hub.addr, loopback(1), "GET", "/v1/health", "").await;
    assert_eq!(status, 200, "{response}");
    assert!(response.contains("\"ok\":true"), "{response}");
}
