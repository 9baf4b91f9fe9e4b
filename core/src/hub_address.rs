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
}

impl HubAddress {
    /// Parses `host:port`, `ws://host:port[/…]`, `wss://…`, `http://…` or `https://…`.
    pub fn parse(text: &str) -> Result<HubAddress, String> {
        let text = text.trim();
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
        let socket =
            HubAddress::parse("unix:/home/dana/.local/share/roundtable/hub/hub.sock").unwrap();
        assert!(socket.is_loopback() && !socket.tls);
        assert_eq!(socket.ws_url(), "ws://localhost/v1/ws");
        assert_eq!(
            socket.to_string(),
            "unix:/home/dana/.local/share/roundtable/hub/hub.sock"
        );
        assert!(HubAddress::parse("unix:hub.sock").is_err());
        let error = HubAddress::parse("10.0.0.2:7300")
            .unwrap()
            .check_plain(false)
            .unwrap_err();
        assert!(error.contains("--insecure"), "{error}");
        assert!(HubAddress::parse("host:notaport").is_err());
        assert!(HubAddress::parse("").is_err());
    }
}
