//! TLS: with a certificate and key, the hub serves `wss` and `https` only; a client that
//! trusts the certificate's CA connects, authenticates and exchanges messages.

use std::sync::Arc;

use roundtable_hub::config::TlsFiles;
use roundtable_protocol::client::{ClientFrame, Rooms};
use roundtable_testkit::{Client, TestHub, http, https};

/// A test CA and a server certificate for localhost signed by it; returns the client
/// configuration that trusts the CA.
fn test_pki(dir: &std::path::Path) -> (TlsFiles, Arc<rustls::ClientConfig>) {
    let pki = roundtable_testkit::pki::signed_by_ca(dir);
    let files = TlsFiles {
        cert: pki.hub.cert,
        key: pki.hub.key,
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca_der.into()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (files, Arc::new(client))
}

#[tokio::test]
async fn a_client_trusting_the_ca_talks_to_the_hub_over_wss() {
    let dir = tempfile::tempdir().unwrap();
    let (files, trust) = test_pki(dir.path());
    let hub = TestHub::start_with(|config| config.tls = Some(files)).await;

    let health = https(
        hub.addr,
        "localhost",
        trust.clone(),
        "GET",
        "/v1/health",
        None,
    )
    .await
    .unwrap();
    assert_eq!(health.status, 200, "{}", health.body);
    let signup = https(
        hub.addr,
        "localhost",
        trust.clone(),
        "POST",
        "/v1/signup",
        Some(r#"{"handle":"dana","name":"Dana"}"#),
    )
    .await
    .unwrap();
    assert_eq!(signup.status, 200, "{}", signup.body);
    let token = signup.json()["token"].as_str().unwrap().to_owned();

    let url = format!("wss://localhost:{}/v1/ws", hub.addr.port());
    let mut client = Client::connect_tls(&url, trust.clone()).await.unwrap();
    client.auth(&token, "laptop").await.unwrap();
    let id = client.id();
    client.ok(ClientFrame::Rooms(Rooms { id })).await;

    // Plain HTTP is not served, and a client that does not trust the CA is refused.
    assert!(
        http(hub.addr, "GET", "/v1/health", None)
            .await
            .map(|r| r.status)
            .ok()
            != Some(200)
    );
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let stranger = Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
    );
    assert!(Client::connect_tls(&url, stranger).await.is_err());
}

#[tokio::test]
async fn a_bad_certificate_stops_the_hub_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = test_pki(dir.path());
    std::fs::write(&files.key, "not a key").unwrap();
    let mut config = roundtable_hub::HubConfig::new(dir.path().join("hub"));
    config.tls = Some(files);
    let error = roundtable_hub::Hub::open(config).unwrap_err().to_string();
    assert!(error.contains("private key"), "{error}");
}
