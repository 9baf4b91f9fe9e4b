//! Connection lifecycle: hello, auth, replacement, heartbeats, shutdown.

use std::time::Duration;

use roundtable_protocol::client::{Auth, ClientFrame, ClientInfo, Rooms};
use roundtable_protocol::{ErrorCode, ServerFrame};
use roundtable_testkit::{Incoming, TestHub, signup};

#[tokio::test]
async fn hello_announces_the_limits() {
    let hub = TestHub::start().await;
    let client = hub.connect().await;
    assert_eq!(client.hello.proto, 1);
    assert!(client.hello.hub.starts_with("h_"));
    assert!(!client.hello.epoch.is_empty());
    assert_eq!(client.hello.hb_ms, 20_000);
    assert_eq!(client.hello.max_frame, 1_048_576);
    assert_eq!(client.hello.max_queue, 4096);
    assert_eq!(client.hello.replay_max, Some(500));
}

async fn expect_unauthorized(hub: &TestHub, first: &str, re: Option<u64>) {
    let mut client = hub.connect().await;
    client.send_text(first).await.unwrap();
    match client.recv().await.unwrap() {
        Incoming::Frame(ServerFrame::Err(err)) => {
            assert_eq!(err.code, ErrorCode::Unauthorized, "{first}");
            assert_eq!(err.re, re, "{first}");
        }
        other => panic!("{first}: expected err, got {other:?}"),
    }
    assert_eq!(client.closed().await.unwrap(), Some(4001), "{first}");
}

#[tokio::test]
async fn bad_first_frames_get_unauthorized_and_close_4001() {
    let hub = TestHub::start().await;
    let good = signup(hub.addr, "dana").await.unwrap();
    expect_unauthorized(
        &hub,
        r#"{"t":"auth","id":1,"token":"rt_nope","device":"d"}"#,
        Some(1),
    )
    .await;
    let forged = format!("rt_{}", "A".repeat(43));
    expect_unauthorized(
        &hub,
        &format!(r#"{{"t":"auth","id":2,"token":"{forged}","device":"d"}}"#),
        Some(2),
    )
    .await;
    expect_unauthorized(&hub, r#"{"t":"rooms","id":3}"#, Some(3)).await;
    expect_unauthorized(
        &hub,
        &format!(r#"{{"t":"auth","id":4,"token":"{}"}}"#, good.token),
        Some(4),
    )
    .await;
    expect_unauthorized(
        &hub,
        &format!(
            r#"{{"t":"auth","id":5,"token":"{}","device":""}}"#,
            good.token
        ),
        Some(5),
    )
    .await;
    expect_unauthorized(&hub, "not json", None).await;
}

#[tokio::test]
async fn a_connection_without_auth_is_closed_after_the_timeout() {
    let hub = TestHub::start_with(|config| config.auth_timeout = Duration::from_millis(300)).await;
    let mut client = hub.connect().await;
    match client.recv().await.unwrap() {
        Incoming::Frame(ServerFrame::Err(err)) => assert_eq!(err.code, ErrorCode::Unauthorized),
        other => panic!("expected err, got {other:?}"),
    }
    assert_eq!(client.closed().await.unwrap(), Some(4001));
}

#[tokio::test]
async fn auth_twice_is_a_bad_frame() {
    let hub = TestHub::start().await;
    let (mut dana, created) = hub.user("dana").await;
    let id = dana.id();
    let err = dana
        .err(ClientFrame::Auth(Auth {
            id,
            token: created.token.clone(),
            device: "again".into(),
            client: ClientInfo::default(),
        }))
        .await;
    assert_eq!(err.code, ErrorCode::BadFrame);
    // Still usable.
    let id = dana.id();
    dana.ok(ClientFrame::Rooms(Rooms { id })).await;
}

#[tokio::test]
async fn a_second_connection_of_the_same_device_replaces_the_first() {
    let hub = TestHub::start().await;
    let created = signup(hub.addr, "dana").await.unwrap();
    let mut first = crate::support::login(&hub, &created.token, "laptop").await;
    let mut other_device = crate::support::login(&hub, &created.token, "phone").await;
    let mut second = crate::support::login(&hub, &created.token, "laptop").await;
    assert_eq!(first.closed().await.unwrap(), Some(4009));
    for client in [&mut second, &mut other_device] {
        let id = client.id();
        client.ok(ClientFrame::Rooms(Rooms { id })).await;
    }
}

#[tokio::test]
async fn silent_peers_are_dropped_and_live_ones_kept() {
    let hub = TestHub::start_with(|config| config.heartbeat = Duration::from_millis(150)).await;
    let (mut silent, _) = hub.user("silent").await;
    let (mut lively, _) = hub.user("lively").await;
    assert_eq!(lively.hello.hb_ms, 150);
    // The lively client reads (and so answers the hub's pings) for well over two beats.
    lively
        .expect_silence(Duration::from_millis(900))
        .await
        .unwrap();
    let id = lively.id();
    lively.ok(ClientFrame::Rooms(Rooms { id })).await;
    // The silent one read nothing meanwhile, so it answered no ping: the hub dropped it
    // (without a close frame: a silent peer is gone). Had the hub kept it, `closed` would
    // wait in vain and fail.
    assert_eq!(silent.closed().await.unwrap(), None);
}

#[tokio::test]
async fn stopping_the_hub_closes_connections_with_1012() {
    let mut hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    hub.stop().await;
    assert_eq!(dana.closed().await.unwrap(), Some(1012));
}
