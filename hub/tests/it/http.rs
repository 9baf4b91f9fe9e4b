//! Signup, health, discovery and metrics over plain HTTP.

use roundtable_hub::SignupMode;
use roundtable_protocol::model::PrincipalKind;
use roundtable_testkit::{TestHub, http, signup};

#[tokio::test]
async fn open_signup_creates_a_user_whose_token_authenticates() {
    let hub = TestHub::start().await;
    let created = signup(hub.addr, "dana").await.unwrap();
    assert_eq!(created.principal.handle, "dana");
    assert_eq!(created.principal.kind, PrincipalKind::User);
    assert_eq!(created.principal.owner, None);
    assert!(created.token.starts_with("rt_") && created.token.len() >= 3 + 43);
    let mut client = hub.connect().await;
    let ok = client.auth(&created.token, "laptop").await.unwrap();
    let principal: roundtable_protocol::server::AuthOk = ok.decode().unwrap();
    assert_eq!(principal.principal, created.principal);
}

#[tokio::test]
async fn signup_refusals_carry_the_protocol_codes() {
    let hub = TestHub::start().await;
    signup(hub.addr, "dana").await.unwrap();
    let cases = [
        (
            r#"{"handle":"dana","name":"Another Dana"}"#,
            409,
            "conflict",
        ),
        (r#"{"handle":"Dana","name":"Upper"}"#, 400, "bad_frame"),
        (r#"{"handle":"da/na","name":"Slash"}"#, 400, "bad_frame"),
        (r#"{"handle":"d","name":"Short"}"#, 400, "bad_frame"),
        (r#"{"handle":"dаna","name":"Cyrillic a"}"#, 400, "bad_frame"),
        (r#"{"handle":"sam","name":""}"#, 400, "bad_frame"),
        (r#"{"handle":"sam"}"#, 400, "bad_frame"),
        (r#"{"handle":7,"name":"x"}"#, 400, "bad_frame"),
        ("not json", 400, "bad_frame"),
    ];
    for (body, status, code) in cases {
        let response = http(hub.addr, "POST", "/v1/signup", Some(body))
            .await
            .unwrap();
        assert_eq!(response.status, status, "{body}: {}", response.body);
        assert_eq!(response.json()["code"], code, "{body}");
        assert!(
            response.json()["msg"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    // Nothing was created by the refusals: the handle sam is still free.
    signup(hub.addr, "sam").await.unwrap();
}

#[tokio::test]
async fn closed_and_invite_hubs_refuse_plain_signup() {
    for mode in [SignupMode::Closed, SignupMode::Invite] {
        let hub = TestHub::start_with(|config| config.signup = mode).await;
        let response = http(
            hub.addr,
            "POST",
            "/v1/signup",
            Some(r#"{"handle":"dana","name":"Dana"}"#),
        )
        .await
        .unwrap();
        assert_eq!(response.status, 403, "{mode:?}");
        assert_eq!(response.json()["code"], "forbidden");
        let known = http(hub.addr, "GET", "/.well-known/roundtable.json", None)
            .await
            .unwrap();
        assert_eq!(known.json()["signup"], mode.as_str());
    }
}

#[tokio::test]
async fn health_and_well_known_describe_the_hub() {
    let hub = TestHub::start().await;
    let client = hub.connect().await;
    let health = http(hub.addr, "GET", "/v1/health", None).await.unwrap();
    assert_eq!(health.status, 200);
    assert_eq!(health.json()["ok"], true);
    assert_eq!(health.json()["epoch"], client.hello.epoch.as_str());
    assert!(health.json()["version"].as_str().is_some());
    let known = http(hub.addr, "GET", "/.well-known/roundtable.json", None)
        .await
        .unwrap();
    assert_eq!(known.json()["hub"], client.hello.hub.as_str());
    assert_eq!(known.json()["proto"], serde_json::json!([1]));
    assert_eq!(known.json()["signup"], "open");
}

#[tokio::test]
async fn metrics_count_connections_and_events() {
    let hub = TestHub::start().await;
    let (mut dana, _) = hub.user("dana").await;
    let room = crate::support::room(&mut dana, &[]).await;
    crate::support::say(&mut dana, &room, "metrics-0001", "hello").await;
    let metrics = http(hub.addr, "GET", "/metrics", None).await.unwrap();
    assert_eq!(metrics.status, 200);
    let value = |name: &str| -> f64 {
        metrics
            .body
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} missing in {}", metrics.body))
            .parse()
            .unwrap()
    };
    assert_eq!(value("roundtable_connections"), 1.0);
    // room event, creator join, room_added, then the message.
    assert_eq!(value("roundtable_events_written_total"), 4.0);
    assert!(value("roundtable_commits_total") >= 2.0);
    // Each command waited for the writer, and each commit for its flush.
    assert!(value("roundtable_writer_queue_seconds_count") >= value("roundtable_commands_total"));
    assert!(value("roundtable_commands_total") >= 2.0);
    assert!(value("roundtable_flush_wait_seconds_count") >= 1.0);
    assert!(
        metrics
            .body
            .contains("roundtable_delivery_latency_seconds_bucket")
    );
}
