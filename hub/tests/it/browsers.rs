//! Browsers stay out (`docs/protocol.md`, section 6): signup takes JSON only, a foreign
//! `Origin` gets 403 on every route and the WebSocket upgrade, a foreign `Host` gets 421.
//! Requests are written byte for byte over raw TCP, since an HTTP client would set `Host`
//! and `Content-Type` itself.

use std::net::SocketAddr;

use roundtable_testkit::{PATIENCE, TestHub, http};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::fingerprint;

const EVIL: &str = "https://evil.example";
const ALLOWED: &str = "https://app.example.com";

/// A response read off a raw connection.
#[derive(Debug)]
struct Raw {
    status: u16,
    body: String,
}

impl Raw {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// Writes `head` (request line and headers, each ending in CRLF, without the blank line)
/// and `body` exactly as given; reads the status line, the headers and a body of
/// `Content-Length` bytes (none after a 101, whose connection stays open).
async fn raw(addr: SocketAddr, head: &str, body: &str) -> Raw {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(format!("{head}\r\n{body}").as_bytes())
            .await
            .unwrap();
        let mut received = Vec::new();
        let head_end = loop {
            if let Some(end) = received.windows(4).position(|window| window == b"\r\n\r\n") {
                break end + 4;
            }
            let mut chunk = [0u8; 4096];
            let read = stream.read(&mut chunk).await.unwrap();
            assert!(read > 0, "the hub closed before answering: {received:?}");
            received.extend_from_slice(&chunk[..read]);
        };
        let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|status| status.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head:?}"));
        let length = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        let mut body = received[head_end..].to_vec();
        while body.len() < length {
            let mut chunk = [0u8; 4096];
            let read = stream.read(&mut chunk).await.unwrap();
            assert!(read > 0, "the body ended early");
            body.extend_from_slice(&chunk[..read]);
        }
        Raw {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    };
    tokio::time::timeout(PATIENCE, exchange)
        .await
        .expect("the hub answers")
}

/// `GET path` with the given extra header lines.
async fn get(addr: SocketAddr, path: &str, headers: &str) -> Raw {
    raw(
        addr,
        &format!("GET {path} HTTP/1.1\r\n{headers}Connection: close\r\n"),
        "",
    )
    .await
}

/// `POST /v1/signup` of `handle` with the given extra header lines (no Content-Type unless
/// they carry one).
async fn signup(addr: SocketAddr, handle: &str, headers: &str) -> Raw {
    let body = format!(r#"{{"handle":"{handle}","name":"{handle}"}}"#);
    raw(
        addr,
        &format!(
            "POST /v1/signup HTTP/1.1\r\n{headers}Content-Length: {}\r\nConnection: close\r\n",
            body.len()
        ),
        &body,
    )
    .await
}

/// The WebSocket upgrade of `/v1/ws` with the given extra header lines.
async fn upgrade(addr: SocketAddr, headers: &str) -> Raw {
    raw(
        addr,
        &format!(
            "GET /v1/ws HTTP/1.1\r\n{headers}Upgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        ),
        "",
    )
    .await
}

/// WebSocket connections the hub has accepted, from its metrics.
async fn sockets_opened(hub: &TestHub) -> f64 {
    let metrics = http(hub.addr, "GET", "/metrics", None).await.unwrap();
    metrics
        .body
        .lines()
        .find_map(|line| line.strip_prefix("roundtable_connections_total "))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no roundtable_connections_total in {}", metrics.body))
}

fn assert_refused(case: &str, response: &Raw, status: u16, code: &str, says: &str) {
    assert_eq!(response.status, status, "{case}: {}", response.body);
    assert_eq!(response.json()["code"], code, "{case}: {}", response.body);
    let msg = response.json()["msg"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        msg.contains(says),
        "{case}: the message says what to do: {msg}"
    );
}

#[tokio::test]
async fn signup_without_a_json_content_type_is_refused_and_creates_no_user() {
    let hub = TestHub::start().await;
    let host = format!("Host: {}\r\n", hub.addr);
    let before = fingerprint(&hub);
    let refused = [
        "Content-Type: text/plain\r\n",
        "Content-Type: text/plain; charset=utf-8\r\n",
        "Content-Type: application/x-www-form-urlencoded\r\n",
        "Content-Type: multipart/form-data; boundary=x\r\n",
        "Content-Type: application/jsonp\r\n",
        "",
    ];
    for content_type in refused {
        let response = signup(hub.addr, "dana", &format!("{host}{content_type}")).await;
        assert_refused(
            content_type,
            &response,
            415,
            "bad_frame",
            "Content-Type: application/json",
        );
    }
    assert_eq!(
        fingerprint(&hub),
        before,
        "a refused signup created something"
    );
    // The handle is still free, and parameters and case do not matter.
    let accepted = [
        ("dana", "Content-Type: application/json; charset=utf-8\r\n"),
        ("sam", "Content-Type: Application/JSON\r\n"),
    ];
    for (handle, content_type) in accepted {
        let response = signup(hub.addr, handle, &format!("{host}{content_type}")).await;
        assert_eq!(response.status, 200, "{content_type}: {}", response.body);
        assert_eq!(response.json()["principal"]["handle"], handle);
    }
}

#[tokio::test]
async fn a_foreign_origin_is_forbidden_on_every_route_and_opens_no_socket() {
    let hub = TestHub::start().await;
    let before = fingerprint(&hub);
    let headers = format!("Host: {}\r\nOrigin: {EVIL}\r\n", hub.addr);
    let json = "Content-Type: application/json\r\n";
    let cases = [
        ("health", get(hub.addr, "/v1/health", &headers).await),
        ("metrics", get(hub.addr, "/metrics", &headers).await),
        ("unknown path", get(hub.addr, "/nowhere", &headers).await),
        (
            "signup",
            signup(hub.addr, "dana", &format!("{headers}{json}")).await,
        ),
        ("websocket", upgrade(hub.addr, &headers).await),
        (
            "localhost on another port",
            get(
                hub.addr,
                "/v1/health",
                &format!("Host: {}\r\nOrigin: http://localhost:3000\r\n", hub.addr),
            )
            .await,
        ),
        (
            "null",
            get(
                hub.addr,
                "/v1/health",
                &format!("Host: {}\r\nOrigin: null\r\n", hub.addr),
            )
            .await,
        ),
    ];
    for (case, response) in &cases {
        assert_refused(case, response, 403, "forbidden", "--allowed-origin");
    }
    assert_eq!(
        fingerprint(&hub),
        before,
        "the refused signup created a user"
    );
    assert_eq!(
        sockets_opened(&hub).await,
        0.0,
        "the refused upgrade opened a socket"
    );
}

#[tokio::test]
async fn the_hubs_own_origin_and_an_allowed_origin_pass() {
    let hub = TestHub::start_with(|config| {
        config.allowed_origins = vec![ALLOWED.parse().unwrap()];
    })
    .await;
    let port = hub.addr.port();
    let origins = [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        ALLOWED.to_owned(),
        format!("{ALLOWED}:443"),
    ];
    for (n, origin) in origins.iter().enumerate() {
        let headers = format!("Host: {}\r\nOrigin: {origin}\r\n", hub.addr);
        let health = get(hub.addr, "/v1/health", &headers).await;
        assert_eq!(health.status, 200, "{origin}: {}", health.body);
        let created = signup(
            hub.addr,
            &format!("user{n}"),
            &format!("{headers}Content-Type: application/json\r\n"),
        )
        .await;
        assert_eq!(created.status, 200, "{origin}: {}", created.body);
        let upgraded = upgrade(hub.addr, &headers).await;
        assert_eq!(upgraded.status, 101, "{origin}: {}", upgraded.body);
    }
    // Allowing one origin allows no other.
    let headers = format!("Host: {}\r\nOrigin: {EVIL}\r\n", hub.addr);
    assert_eq!(get(hub.addr, "/v1/health", &headers).await.status, 403);
}

#[tokio::test]
async fn a_host_that_is_not_the_hub_is_misdirected() {
    let hub = TestHub::start().await;
    let before = fingerprint(&hub);
    let evil = "Host: evil.example\r\n";
    let json = "Content-Type: application/json\r\n";
    let cases = [
        ("health", get(hub.addr, "/v1/health", evil).await),
        (
            "health, with the hub's port",
            get(
                hub.addr,
                "/v1/health",
                &format!("Host: evil.example:{}\r\n", hub.addr.port()),
            )
            .await,
        ),
        (
            "signup",
            signup(hub.addr, "dana", &format!("{evil}{json}")).await,
        ),
        ("websocket", upgrade(hub.addr, evil).await),
    ];
    for (case, response) in &cases {
        assert_refused(case, response, 421, "forbidden", "--public-address");
    }
    assert_eq!(
        fingerprint(&hub),
        before,
        "the refused signup created a user"
    );
    assert_eq!(
        sockets_opened(&hub).await,
        0.0,
        "the refused upgrade opened a socket"
    );
}

#[tokio::test]
async fn loopback_names_pass_on_any_port() {
    let hub = TestHub::start().await;
    let port = hub.addr.port();
    for host in [
        format!("localhost:{port}"),
        "localhost".to_owned(),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("hub.localhost:{port}"),
    ] {
        let response = get(hub.addr, "/v1/health", &format!("Host: {host}\r\n")).await;
        assert_eq!(response.status, 200, "{host}: {}", response.body);
    }
    let upgraded = upgrade(hub.addr, &format!("Host: localhost:{port}\r\n")).await;
    assert_eq!(upgraded.status, 101, "{}", upgraded.body);
}

#[tokio::test]
async fn a_request_without_a_host_is_malformed() {
    let hub = TestHub::start().await;
    let response = raw(hub.addr, "GET /v1/health HTTP/1.0\r\n", "").await;
    assert_refused("no Host", &response, 400, "bad_frame", "Host");
    let response = get(
        hub.addr,
        "/v1/health",
        "Host: localhost\r\nHost: evil.example\r\n",
    )
    .await;
    assert_refused("two Hosts", &response, 400, "bad_frame", "exactly one");
}
