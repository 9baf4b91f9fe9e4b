//! Where a hub is: what people type (`127.0.0.1:7300`, `https://hub.example.com`,
//! `wss://…/v1/ws`), or the embedded hub's Unix socket (`unix:/…/hub.sock`), turned into the
//! WebSocket and HTTP addresses the core uses, and the TLS setup for `wss`/`https`.

use std::sync::Arc;

use rustls::ClientConfig;

/// A hub's addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubAddress {
    /// `host:port` (`unix:PATH` for a Unix socket): which hub this is.
    pub authority: String,
    pub host: String,
    pub tls: bool,
    /// The Unix socket the hub is reached at, instead of TCP.
    pub unix: Option<std::path::PathBuf>,
    /// The SHA-256 of the hub's certificate (`#sha256=HEX` after a `wss://` or `https://`
    /// address): that certificate, and no other, is the hub, whoever signed it.
    pub pin: Option<[u8; 32]>,
}

impl HubAddress {
    /// Parses `host:port`, `ws://host:port[/…]`, `wss://…`, `http://…` or `https://…`
    /// (the last two optionally pinned, `…#sha256=HEX`), or `unix:/path`.
    pub fn parse(text: &str) -> Result<HubAddress, String> {
        let text = text.trim();
        if let Some((address, fragment)) = text.split_once('#') {
            let pin = parse_pin(fragment).ok_or_else(|| {
                format!(
                    "{text:?} ends in {fragment:?}: a pinned hub is written ADDRESS#sha256= and the 64 hex digits of its certificate's SHA-256 (`roundtable hub` prints them)"
                )
            })?;
            let mut parsed = HubAddress::parse(address)?;
            if !parsed.tls {
                return Err(format!(
                    "{text:?} pins a certificate for a hub without TLS: write wss:// or https://"
                ));
            }
            parsed.pin = Some(pin);
            return Ok(parsed);
        }
        if let Some(path) = text.strip_prefix("unix:") {
            let path = std::path::PathBuf::from(path);
            if !path.is_absolute() {
                return Err(format!(
                    "the hub socket {text:?} is not an absolute path: write unix:/path/to/hub.sock"
                ));
            }
            return Ok(HubAddress {
                authority: text.to_owned(),
                host: "localhost".to_owned(),
                tls: false,
                unix: Some(path),
                pin: None,
            });
        }
        let (tls, rest) = if let Some(rest) = text.strip_prefix("wss://") {
            (true, rest)
        } else if let Some(rest) = text.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = text.strip_prefix("ws://") {
            (false, rest)
        } else if let Some(rest) = text.strip_prefix("http://") {
            (false, rest)
        } else if text.contains("://") {
            return Err(format!(
                "unsupported hub address {text:?}: use host:port, ws://, wss://, http:// or https://"
            ));
        } else {
            (false, text)
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.is_empty() {
            return Err(format!("the hub address {text:?} has no host"));
        }
        let host = match authority.rsplit_once(':') {
            Some((host, port)) if port.parse::<u16>().is_ok() => host,
            Some(_) => {
                return Err(format!("the hub address {text:?} has an invalid port"));
            }
            None => authority,
        };
        let authority = if authority.contains(':') {
            authority.to_owned()
        } else {
            format!("{authority}:{}", if tls { 443 } else { 80 })
        };
        Ok(HubAddress {
            authority,
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            tls,
            unix: None,
            pin: None,
        })
    }

    /// Whether the hub is on this machine: its Unix socket, `localhost` or a loopback
    /// address.
    pub fn is_loopback(&self) -> bool {
        self.unix.is_some()
            || self.host.eq_ignore_ascii_case("localhost")
            || self
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// Refuses a hub reached without TLS from another machine unless the person said it
    /// is fine (`insecure`): its token would cross the network in the clear.
    pub fn check_plain(&self, insecure: bool) -> Result<(), String> {
        if self.tls || insecure || self.is_loopback() {
            return Ok(());
        }
        Err(format!(
            "{} is not on this machine and has no TLS: your token would cross the network in the clear. \
             Use wss:// or https:// (a hub behind TLS); for a hub on a network you trust, pass --insecure \
             (in the app: tick \"No TLS: a hub on my own network\")",
            self.authority
        ))
    }

    /// What HTTP's `Host` names: the authority, or `localhost` over a Unix socket.
    pub fn host_header(&self) -> &str {
        if self.unix.is_some() {
            "localhost"
        } else {
            &self.authority
        }
    }

    pub fn ws_url(&self) -> String {
        if self.unix.is_some() {
            return format!("ws://localhost{}", roundtable_protocol::WS_PATH);
        }
        format!(
            "{}://{}{}",
            if self.tls { "wss" } else { "ws" },
            self.authority,
            roundtable_protocol::WS_PATH
        )
    }

    pub fn http_base(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.authority
        )
    }
}

impl std::fmt::Display for HubAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.unix.is_some() {
            return f.write_str(&self.authority);
        }
        f.write_str(&self.http_base())
    }
}

/// `sha256=HEX` (64 hex digits).
fn parse_pin(fragment: &str) -> Option<[u8; 32]> {
    let hex = fragment.strip_prefix("sha256=")?;
    if hex.len() != 64 {
        return None;
    }
    let mut pin = [0u8; 32];
    for (byte, pair) in pin.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(pin)
}

/// How a certificate is pinned: `sha256=` and its SHA-256 in hex.
pub fn pin_of(certificate_der: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(certificate_der);
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256={hex}")
}

/// Trusts exactly the certificate whose SHA-256 is pinned, whoever signed it (a hub with a
/// certificate of its own, on a network): the hub is authenticated before any token is
/// sent to it. Handshake signatures are checked as usual.
#[derive(Debug)]
struct PinnedCertificate {
    pin: [u8; 32],
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::client::danger::ServerCertVerifier for PinnedCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(end_entity.as_ref());
        if digest.as_slice() == self.pin {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "the hub's certificate is not the one pinned (it is {})",
                pin_of(end_entity.as_ref())
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &rustls_pki_types::CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, certificate, signature, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &rustls_pki_types::CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, certificate, signature, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// TLS trust for `hub`: its pinned certificate when its address pins one, else the public
/// web roots plus a PEM CA file when the hub uses a private CA.
pub fn tls_config_for(
    hub: &HubAddress,
    extra_ca: Option<&std::path::Path>,
) -> Result<Arc<ClientConfig>, String> {
    let Some(pin) = hub.pin else {
        return tls_config(extra_ca);
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = PinnedCertificate {
        pin,
        algorithms: provider.signature_verification_algorithms,
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// TLS trust: the public web roots, plus a PEM CA file when the hub uses a private CA.
pub fn tls_config(extra_ca: Option<&std::path::Path>) -> Result<Arc<ClientConfig>, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = extra_ca {
        let certificates = CertificateDer::pem_file_iter(path)
            .map_err(|error| format!("cannot read the CA file {}: {error}", path.display()))?;
        for certificate in certificates {
            let certificate = certificate
                .map_err(|error| format!("cannot read the CA file {}: {error}", path.display()))?;
            roots.add(certificate).map_err(|error| {
                format!("a certificate of {} is invalid: {error}", path.display())
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window's in-memory backend takes from here (`ui/src/backend/fixtures/hub-addresses.json`)
    /// what a typed hub address is, and whether the app would reach it without TLS. The
    /// table is a Unix machine's: on Windows `unix:/home/dana/hub.sock` is no absolute path
    /// (a socket's path there is a Windows one, as `parses_what_people_type` checks), so a
    /// Windows core answers it otherwise; the table is kept where it is made.
    #[cfg(unix)]
    #[test]
    fn the_uis_hub_address_verdicts_are_the_cores_own() {
        let typed = [
            "127.0.0.1:7300",
            "localhost:7300",
            "[::1]:7300",
            "hub.example.com:443",
            "hub.example.com",
            "ws://192.168.1.20:7300",
            "192.168.1.20:7300",
            "http://hub.example.com:8080/v1/ws",
            "wss://hub.example.com",
            "https://hub.example.com:8443",
            " wss://hub.example.com ",
            "unix:/home/dana/hub.sock",
            "unix:relative.sock",
            "ftp://hub.example.com",
            "hub.example.com:port",
            "",
            "wss://",
            "ws://192.168.1.20:7300#sha256=00",
        ];
        let mut cases = Vec::new();
        for address in typed {
            for insecure in [false, true] {
                let reached = HubAddress::parse(address).and_then(|parsed| {
                    parsed.check_plain(insecure)?;
                    Ok(serde_json::json!({ "authority": parsed.authority, "host": parsed.host, "tls": parsed.tls }))
                });
                cases.push(serde_json::json!({
                    "address": address,
                    "insecure": insecure,
                    "outcome": crate::ui_outcome(reached.map_err(crate::CoreError::Invalid)),
                }));
            }
        }
        crate::keep_ui_fixture(
            "hub-addresses.json",
            &serde_json::json!({ "cases": cases }),
            "hub_address_verdicts",
        );
    }

    #[test]
    fn parses_what_people_type() {
        let plain = HubAddress::parse("127.0.0.1:7300").unwrap();
        assert_eq!(plain.ws_url(), "ws://127.0.0.1:7300/v1/ws");
        assert_eq!(plain.http_base(), "http://127.0.0.1:7300");
        let secure = HubAddress::parse("https://hub.example.com").unwrap();
        assert_eq!(secure.ws_url(), "wss://hub.example.com:443/v1/ws");
        assert_eq!(secure.host, "hub.example.com");
        assert_eq!(
            HubAddress::parse("ws://localhost:7300/v1/ws")
                .unwrap()
                .authority,
            "localhost:7300"
        );
        assert!(HubAddress::parse("ftp://x").is_err());
        // Plain text only on this machine, unless the person says so.
        for (address, refused) in [
            ("127.0.0.1:7300", false),
            ("127.8.0.1:7300", false),
            ("[::1]:7300", false),
            ("localhost:7300", false),
            ("192.168.1.20:7300", true),
            ("hub.example.com:7300", true),
            ("localhost.evil.example:7300", true),
            ("wss://hub.example.com", false),
            ("https://192.168.1.20:7300", false),
        ] {
            let parsed = HubAddress::parse(address).unwrap();
            assert_eq!(parsed.check_plain(false).is_err(), refused, "{address}");
            assert!(parsed.check_plain(true).is_ok(), "{address}");
        }
        // An absolute path names the local socket (on Windows, the pipe made from it).
        let local = if cfg!(windows) {
            r"unix:C:\Users\dana\AppData\Local\roundtable\hub\hub.sock"
        } else {
            "unix:/home/dana/.local/share/roundtable/hub/hub.sock"
        };
        let socket = HubAddress::parse(local).unwrap();
        assert!(socket.is_loopback() && !socket.tls);
        assert_eq!(socket.ws_url(), "ws://localhost/v1/ws");
        assert_eq!(socket.to_string(), local);
        assert!(HubAddress::parse("unix:hub.sock").is_err());
        // A pinned certificate, after a TLS address only.
        let hex = "ab".repeat(32);
        let pinned = HubAddress::parse(&format!("wss://192.168.1.20:7300#sha256={hex}")).unwrap();
        assert_eq!(pinned.pin, Some([0xab; 32]));
        assert_eq!(pinned.authority, "192.168.1.20:7300");
        assert!(pinned.check_plain(false).is_ok());
        assert!(HubAddress::parse(&format!("192.168.1.20:7300#sha256={hex}")).is_err());
        assert!(HubAddress::parse("wss://h:1#sha256=abc").is_err());
        assert!(HubAddress::parse(&format!("wss://h:1#md5={hex}")).is_err());
        assert_eq!(pin_of(b"x").len(), "sha256=".len() + 64);
        let error = HubAddress::parse("10.0.0.2:7300")
            .unwrap()
            .check_plain(false)
            .unwrap_err();
        assert!(error.contains("--insecure"), "{error}");
        assert!(HubAddress::parse("host:notaport").is_err());
        assert!(HubAddress::parse("").is_err());
    }
}
