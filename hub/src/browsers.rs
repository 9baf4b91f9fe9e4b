//! Browsers stay out (`docs/protocol.md`, section 6, and guarantee 6 of section 8).
//!
//! The hub's clients are programs: the core, the CLI, agents' bridges. None of them is a web
//! page, yet a web page the person happens to visit can reach a hub on the person's own
//! machine in two ways, and this module closes both before any route runs:
//!
//! - **Cross-origin requests.** A page on `https://evil.example` (or on `localhost:3000`)
//!   can post to `http://127.0.0.1:7300/v1/signup` or open a WebSocket to it. Browsers mark
//!   such requests with an `Origin` header, and programs send none; so a request whose
//!   `Origin` is present and is neither the hub's own origin nor one the operator allowed
//!   gets 403.
//! - **DNS rebinding.** A page on `evil.example` makes its own name resolve to 127.0.0.1;
//!   its requests to the hub then look same-origin to the browser (a `GET` carries no
//!   `Origin` at all), but they still carry `Host: evil.example`. So a request whose `Host`
//!   names neither a loopback name, nor the hub's public address, nor the address the hub
//!   listens on, gets 421. The defense rests on the *name*: ports are not compared, since a
//!   proxy or a port forward may change them, and an IP literal cannot be rebound. A hub
//!   listening on every address (`0.0.0.0`, `::`) therefore accepts any IP literal; a hub
//!   listening on loopback accepts loopback names and its public address only.
//!
//! A request without any `Host` (HTTP/1.0) gets 400: HTTP/1.1 requires the header, and a
//! request that names no host cannot be told apart from a misdirected one.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use axum::http::{HeaderMap, StatusCode, Uri, header};
use roundtable_protocol::ErrorCode;

/// A host as a `Host` header, an `Origin` or the configuration names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostName {
    Ip(IpAddr),
    /// Lower case, without a trailing dot.
    Domain(String),
}

impl HostName {
    /// Parses a host without its port; an IPv6 address comes in brackets.
    fn parse(text: &str) -> Result<HostName, String> {
        if let Some(inside) = text.strip_prefix('[') {
            let inside = inside
                .strip_suffix(']')
                .ok_or("an IPv6 address needs its closing bracket")?;
            return inside
                .parse::<Ipv6Addr>()
                .map(|ip| HostName::Ip(IpAddr::V6(ip)))
                .map_err(|_| format!("{inside:?} is not an IPv6 address"));
        }
        if let Ok(ip) = text.parse::<std::net::Ipv4Addr>() {
            return Ok(HostName::Ip(IpAddr::V4(ip)));
        }
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_'));
        if valid {
            Ok(HostName::Domain(name))
        } else {
            Err(format!("{text:?} is not a host name or an address"))
        }
    }

    /// `localhost`, a name under `.localhost` (RFC 6761: both always resolve to loopback),
    /// or a loopback address.
    fn is_loopback(&self) -> bool {
        match self {
            HostName::Ip(ip) => ip.is_loopback(),
            HostName::Domain(name) => name == "localhost" || name.ends_with(".localhost"),
        }
    }
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostName::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            HostName::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            HostName::Domain(name) => f.write_str(name),
        }
    }
}

/// `host[:port]`, as in a `Host` header or a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: HostName,
    port: Option<u16>,
}

impl Authority {
    fn parse(text: &str) -> Result<Authority, String> {
        if text.is_empty() {
            return Err("it is empty".into());
        }
        let (host, port) = if text.starts_with('[') {
            match text.find(']') {
                Some(close) => {
                    let (host, rest) = text.split_at(close + 1);
                    match rest {
                        "" => (host, None),
                        _ => match rest.strip_prefix(':') {
                            Some(port) => (host, Some(port)),
                            None => return Err(format!("{rest:?} follows the IPv6 address")),
                        },
                    }
                }
                None => return Err("an IPv6 address needs its closing bracket".into()),
            }
        } else {
            match text.split_once(':') {
                Some((_, port)) if port.contains(':') => {
                    return Err("an IPv6 address goes in brackets, as [::1]:7300".into());
                }
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            }
        };
        let port = match port {
            // RFC 3986 allows an empty port after the colon; it means the default.
            None | Some("") => None,
            Some(port) => Some(
                port.parse::<u16>()
                    .map_err(|_| format!("{port:?} is not a port"))?,
            ),
        };
        Ok(Authority {
            host: HostName::parse(host)?,
            port,
        })
    }
}

/// The port a URL of `scheme` means when it names none.
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

/// A web origin, `scheme://host[:port]`, as a browser sends it in `Origin`; also the form of
/// the hub's `allowed_origins` setting (`--allowed-origin`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// Lower case.
    scheme: String,
    host: HostName,
    /// The port given, or the scheme's default one, so that `https://a.example` and
    /// `https://a.example:443` compare equal.
    port: Option<u16>,
}

impl FromStr for Origin {
    type Err = String;

    fn from_str(text: &str) -> Result<Origin, String> {
        let explain = |reason: String| {
            format!(
                "{text:?} is not a web origin ({reason}): give scheme://host[:port] as a \
                 browser sends it, e.g. https://app.example.com"
            )
        };
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| explain("it has no scheme://".into()))?;
        let scheme = scheme.to_ascii_lowercase();
        let scheme_is_valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'-' | b'.'));
        if !scheme_is_valid {
            return Err(explain(format!("{scheme:?} is not a scheme")));
        }
        // A setting may end in one slash; an origin never has a path.
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#', '@']) {
            return Err(explain("an origin has no path, query or user".into()));
        }
        let authority = Authority::parse(authority).map_err(explain)?;
        let port = authority.port.or_else(|| default_port(&scheme));
        Ok(Origin {
            scheme,
            host: authority.host,
            port,
        })
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match self.port {
            Some(port) if Some(port) != default_port(&self.scheme) => write!(f, ":{port}"),
            _ => Ok(()),
        }
    }
}

/// The hub's public address (`--public-address`) as the Host and Origin checks read it:
/// `host[:port]`, or a hub URL such as `wss://hub.example.com`.
#[derive(Debug, Clone)]
pub struct PublicAddress {
    authority: Authority,
    /// `https` or `http` when the address names a scheme; a hub behind a TLS proxy is seen
    /// by browsers as `https` although it serves plain `http` itself.
    scheme: Option<&'static str>,
}

impl FromStr for PublicAddress {
    type Err = String;

    fn from_str(text: &str) -> Result<PublicAddress, String> {
        let (scheme, rest) = match text.split_once("://") {
            Some(("https" | "wss", rest)) => (Some("https"), rest),
            Some(("http" | "ws", rest)) => (Some("http"), rest),
            Some((other, _)) => {
                return Err(format!(
                    "{other}:// is not a hub scheme; use host:port, https:// or wss://"
                ));
            }
            None => (None, text),
        };
        // A pinned address (`wss://host:port#sha256=…`) names its host before the pin.
        let authority = rest.split(['/', '#', '?']).next().unwrap_or_default();
        Ok(PublicAddress {
            authority: Authority::parse(authority)?,
            scheme,
        })
    }
}

/// Why a request was refused before reaching any route. Each message says what to send
/// instead.
#[derive(Debug, thiserror::Error)]
pub enum BrowserRefusal {
    #[error(
        "the request names no host: send a Host header with the hub's address (HTTP/1.1 \
         requires one), e.g. Host: {expected}"
    )]
    NoHost { expected: String },
    #[error("the request has several Host headers: send exactly one, e.g. Host: {expected}")]
    SeveralHosts { expected: String },
    #[error(
        "the Host {host:?} cannot be read ({reason}): send the hub's address, e.g. Host: {expected}"
    )]
    UnreadableHost {
        host: String,
        reason: String,
        expected: String,
    },
    #[error(
        "this hub does not answer to the host {host:?}: address it as {expected} (or as \
         localhost on its own machine); if clients reach it by this name, start the hub with \
         --public-address set to it"
    )]
    MisdirectedHost { host: String, expected: String },
    #[error(
        "requests from web pages are refused: the Origin {origin:?} is neither this hub's own \
         nor an allowed one. Roundtable's clients send no Origin header; to let a web app at \
         this origin use the hub, start the hub with --allowed-origin set to it"
    )]
    ForeignOrigin { origin: String },
}

impl BrowserRefusal {
    pub fn status(&self) -> StatusCode {
        match self {
            BrowserRefusal::NoHost { .. }
            | BrowserRefusal::SeveralHosts { .. }
            | BrowserRefusal::UnreadableHost { .. } => StatusCode::BAD_REQUEST,
            BrowserRefusal::MisdirectedHost { .. } => StatusCode::MISDIRECTED_REQUEST,
            BrowserRefusal::ForeignOrigin { .. } => StatusCode::FORBIDDEN,
        }
    }

    /// The protocol's code in the JSON body: `bad_frame` for a request that is malformed,
    /// `forbidden` for one that is well formed but not let in.
    pub fn code(&self) -> ErrorCode {
        match self.status() {
            StatusCode::BAD_REQUEST => ErrorCode::BadFrame,
            _ => ErrorCode::Forbidden,
        }
    }
}

/// Which hosts and origins may reach the hub; built when the hub starts serving, since it
/// depends on the address it listens on.
#[derive(Debug)]
pub struct BrowserPolicy {
    /// `https` when the hub serves TLS itself, else `http`: the scheme of its own origin when
    /// a browser reaches it directly.
    own_scheme: &'static str,
    listen: SocketAddr,
    public: Option<PublicAddress>,
    allowed_origins: Vec<Origin>,
}

impl BrowserPolicy {
    pub fn new(
        serves_tls: bool,
        listen: SocketAddr,
        public: Option<PublicAddress>,
        allowed_origins: Vec<Origin>,
    ) -> BrowserPolicy {
        BrowserPolicy {
            own_scheme: if serves_tls { "https" } else { "http" },
            listen,
            public,
            allowed_origins,
        }
    }

    /// Lets a request in, or says why not: its host first (400, 421), then its origin (403).
    pub fn admit(&self, headers: &HeaderMap, uri: &Uri) -> Result<(), BrowserRefusal> {
        let mut host_headers = headers.get_all(header::HOST).iter();
        let host_header = host_headers.next();
        if host_headers.next().is_some() {
            return Err(BrowserRefusal::SeveralHosts {
                expected: self.expected_host(),
            });
        }
        let host_header = host_header.map(|value| String::from_utf8_lossy(value.as_bytes()));
        // A request in absolute form (`GET http://host/… HTTP/1.1`) names its host in the
        // target too, and that one wins (RFC 9112, 3.2.2): both must be ours.
        let target_host = uri.authority().map(|authority| authority.as_str());
        if host_header.is_none() && target_host.is_none() {
            return Err(BrowserRefusal::NoHost {
                expected: self.expected_host(),
            });
        }
        for host in host_header.as_deref().into_iter().chain(target_host) {
            self.check_host(host)?;
        }
        for origin in headers.get_all(header::ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            let admitted = origin
                .parse::<Origin>()
                .is_ok_and(|origin| self.admits_origin(&origin));
            if !admitted {
                return Err(BrowserRefusal::ForeignOrigin {
                    origin: origin.into_owned(),
                });
            }
        }
        Ok(())
    }

    fn check_host(&self, host: &str) -> Result<(), BrowserRefusal> {
        let authority =
            Authority::parse(host).map_err(|reason| BrowserRefusal::UnreadableHost {
                host: host.to_owned(),
                reason,
                expected: self.expected_host(),
            })?;
        if self.accepts_host(&authority.host) {
            Ok(())
        } else {
            Err(BrowserRefusal::MisdirectedHost {
                host: host.to_owned(),
                expected: self.expected_host(),
            })
        }
    }

    /// A loopback name, the public address's host, or an address of the listener itself.
    fn accepts_host(&self, host: &HostName) -> bool {
        host.is_loopback()
            || self.names_public_host(host)
            || (matches!(host, HostName::Ip(_)) && self.reaches_listener(host))
    }

    fn names_public_host(&self, host: &HostName) -> bool {
        self.public
            .as_ref()
            .is_some_and(|public| public.authority.host == *host)
    }

    /// Whether a browser that names `host` reaches this hub's listener itself: a loopback
    /// name when the hub listens on loopback (or everywhere), the listening address, or any
    /// address when the hub listens on every address.
    fn reaches_listener(&self, host: &HostName) -> bool {
        let listen_ip = self.listen.ip();
        if listen_ip.is_unspecified() {
            return host.is_loopback() || matches!(host, HostName::Ip(_));
        }
        match host {
            _ if host.is_loopback() => listen_ip.is_loopback(),
            HostName::Ip(ip) => *ip == listen_ip,
            HostName::Domain(_) => false,
        }
    }

    /// The hub's own origin (as served directly, or at its public address) or an allowed one.
    fn admits_origin(&self, origin: &Origin) -> bool {
        let served_directly = origin.scheme == self.own_scheme
            && origin.port == Some(self.listen.port())
            && self.reaches_listener(&origin.host);
        let at_public_address = self.public.as_ref().is_some_and(|public| {
            public.authority.host == origin.host
                && matches!(origin.scheme.as_str(), "http" | "https")
                && public.scheme.is_none_or(|scheme| scheme == origin.scheme)
                && public
                    .authority
                    .port
                    .or_else(|| default_port(&origin.scheme))
                    == origin.port
        });
        served_directly || at_public_address || self.allowed_origins.contains(origin)
    }

    /// The address to suggest in an error: the public one, else the listening one.
    fn expected_host(&self) -> String {
        match &self.public {
            Some(public) => match public.authority.port {
                Some(port) => format!("{}:{port}", public.authority.host),
                None => public.authority.host.to_string(),
            },
            None => self.listen.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn policy(listen: &str, public: Option<&str>, allowed: &[&str]) -> BrowserPolicy {
        BrowserPolicy::new(
            false,
            listen.parse().unwrap(),
            public.map(|public| public.parse().unwrap()),
            allowed
                .iter()
                .map(|origin| origin.parse().unwrap())
                .collect(),
        )
    }

    fn request(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        headers
    }

    /// (listen, public address, Host, admitted)
    const HOSTS: &[(&str, Option<&str>, &str, bool)] = &[
        // A hub on loopback: loopback names only (the DNS-rebinding defense).
        ("127.0.0.1:7300", None, "127.0.0.1:7300", true),
        ("127.0.0.1:7300", None, "localhost:7300", true),
        ("127.0.0.1:7300", None, "LOCALHOST", true),
        ("127.0.0.1:7300", None, "localhost.:9", true),
        ("127.0.0.1:7300", None, "hub.localhost:7300", true),
        ("127.0.0.1:7300", None, "[::1]:7300", true),
        ("127.0.0.1:7300", None, "evil.example", false),
        ("127.0.0.1:7300", None, "evil.example:7300", false),
        ("127.0.0.1:7300", None, "localhost.evil.example", false),
        ("127.0.0.1:7300", None, "192.168.1.5:7300", false),
        ("127.0.0.1:7300", None, "0.0.0.0:7300", false),
        // Behind a TLS proxy: the public name too, whatever port the proxy forwards.
        (
            "127.0.0.1:7300",
            Some("hub.example.com:443"),
            "hub.example.com",
            true,
        ),
        (
            "127.0.0.1:7300",
            Some("wss://Hub.Example.com"),
            "hub.example.com:443",
            true,
        ),
        (
            "127.0.0.1:7300",
            Some("hub.example.com:443"),
            "evil.example",
            false,
        ),
        // A team's hub on a network address: that address, and the public name.
        ("192.168.1.5:7300", None, "192.168.1.5:7300", true),
        ("192.168.1.5:7300", None, "192.168.1.6:7300", false),
        ("192.168.1.5:7300", None, "hub.lan:7300", false),
        (
            "192.168.1.5:7300",
            Some("hub.lan:7300"),
            "hub.lan:7300",
            true,
        ),
        // Every address: any IP literal (they cannot be rebound), names only when public.
        ("0.0.0.0:7300", Some("0.0.0.0:7300"), "10.0.0.7:7300", true),
        ("0.0.0.0:7300", Some("0.0.0.0:7300"), "localhost:7300", true),
        ("[::]:7300", None, "[fe80::1]:7300", true),
        (
            "0.0.0.0:7300",
            Some("0.0.0.0:7300"),
            "evil.example:7300",
            false,
        ),
        (
            "0.0.0.0:7300",
            Some("hub.example.com:7300"),
            "hub.example.com:7300",
            true,
        ),
    ];

    #[test]
    fn hosts_are_admitted_by_name() {
        for (listen, public, host, admitted) in HOSTS {
            let result = policy(listen, *public, &[])
                .admit(&request(Some(host), None), &Uri::from_static("/v1/health"));
            assert_eq!(
                result.is_ok(),
                *admitted,
                "listen {listen}, public {public:?}, Host {host}: {result:?}"
            );
            if let Err(refusal) = result {
                assert_eq!(refusal.status(), StatusCode::MISDIRECTED_REQUEST, "{host}");
            }
        }
    }

    #[test]
    fn a_request_without_a_usable_host_is_malformed() {
        let policy = policy("127.0.0.1:7300", None, &[]);
        let path = Uri::from_static("/v1/health");
        for host in ["", "a b", "[::1", "::1", "localhost:http", "user@localhost"] {
            let refusal = policy.admit(&request(Some(host), None), &path).unwrap_err();
            assert_eq!(refusal.status(), StatusCode::BAD_REQUEST, "{host:?}");
            assert!(refusal.to_string().contains("127.0.0.1:7300"), "{refusal}");
        }
        let refusal = policy.admit(&request(None, None), &path).unwrap_err();
        assert!(
            matches!(refusal, BrowserRefusal::NoHost { .. }),
            "{refusal}"
        );
        let mut twice = request(Some("localhost"), None);
        twice.append(header::HOST, HeaderValue::from_static("localhost"));
        assert!(matches!(
            policy.admit(&twice, &path),
            Err(BrowserRefusal::SeveralHosts { .. })
        ));
    }

    #[test]
    fn a_target_in_absolute_form_must_name_the_hub_too() {
        let policy = policy("127.0.0.1:7300", None, &[]);
        let foreign = Uri::from_static("http://evil.example/v1/health");
        assert!(matches!(
            policy.admit(&request(Some("localhost"), None), &foreign),
            Err(BrowserRefusal::MisdirectedHost { .. })
        ));
        // HTTP/1.0 with no Host, naming the hub in the target.
        let own = Uri::from_static("http://127.0.0.1:7300/v1/health");
        assert!(policy.admit(&request(None, None), &own).is_ok());
    }

    /// (listen, public address, allowed origins, Origin, admitted)
    type OriginCase = (
        &'static str,
        Option<&'static str>,
        &'static [&'static str],
        &'static str,
        bool,
    );

    const ORIGINS: &[OriginCase] = &[
        ("127.0.0.1:7300", None, &[], "http://127.0.0.1:7300", true),
        ("127.0.0.1:7300", None, &[], "http://localhost:7300", true),
        ("127.0.0.1:7300", None, &[], "http://[::1]:7300", true),
        // Another local web app is another origin.
        ("127.0.0.1:7300", None, &[], "http://localhost:3000", false),
        ("127.0.0.1:7300", None, &[], "https://localhost:7300", false),
        ("127.0.0.1:7300", None, &[], "https://evil.example", false),
        ("127.0.0.1:7300", None, &[], "null", false),
        ("127.0.0.1:7300", None, &[], "", false),
        (
            "127.0.0.1:7300",
            None,
            &[],
            "http://localhost:7300/path",
            false,
        ),
        (
            "127.0.0.1:7300",
            Some("hub.example.com:443"),
            &[],
            "https://hub.example.com",
            true,
        ),
        (
            "127.0.0.1:7300",
            Some("hub.example.com:443"),
            &[],
            "https://hub.example.com:8443",
            false,
        ),
        (
            "127.0.0.1:7300",
            Some("https://hub.example.com"),
            &[],
            "http://hub.example.com",
            false,
        ),
        (
            "127.0.0.1:7300",
            None,
            &["https://App.Example.com/"],
            "https://app.example.com",
            true,
        ),
        (
            "127.0.0.1:7300",
            None,
            &["https://app.example.com"],
            "https://app.example.com:443",
            true,
        ),
        (
            "127.0.0.1:7300",
            None,
            &["https://app.example.com"],
            "http://app.example.com",
            false,
        ),
        (
            "127.0.0.1:7300",
            None,
            &["tauri://localhost"],
            "tauri://localhost",
            true,
        ),
        (
            "192.168.1.5:7300",
            None,
            &[],
            "http://192.168.1.5:7300",
            true,
        ),
        (
            "192.168.1.5:7300",
            None,
            &[],
            "http://localhost:7300",
            false,
        ),
        ("0.0.0.0:7300", None, &[], "http://10.0.0.7:7300", true),
        ("0.0.0.0:7300", None, &[], "http://evil.example:7300", false),
    ];

    #[test]
    fn origins_other_than_the_hubs_own_or_allowed_ones_are_forbidden() {
        for (listen, public, allowed, origin, admitted) in ORIGINS {
            let result = policy(listen, *public, allowed).admit(
                &request(Some("localhost"), Some(origin)),
                &Uri::from_static("/v1/ws"),
            );
            assert_eq!(
                result.is_ok(),
                *admitted,
                "listen {listen}, public {public:?}, allowed {allowed:?}, Origin {origin}: {result:?}"
            );
            if let Err(refusal) = result {
                assert_eq!(refusal.status(), StatusCode::FORBIDDEN, "{origin}");
                assert_eq!(refusal.code(), ErrorCode::Forbidden);
            }
        }
    }

    #[test]
    fn origins_in_the_configuration_must_be_origins() {
        for bad in [
            "app.example.com",
            "https://",
            "https://a.example/path",
            "https://a b",
            "1x://a",
        ] {
            let error = bad.parse::<Origin>().unwrap_err();
            assert!(error.contains("scheme://host[:port]"), "{bad}: {error}");
        }
        let origin: Origin = "HTTPS://App.Example.com:443/".parse().unwrap();
        assert_eq!(origin.to_string(), "https://app.example.com");
        let origin: Origin = "http://[::1]:3000".parse().unwrap();
        assert_eq!(origin.to_string(), "http://[::1]:3000");
    }

    #[test]
    fn public_addresses_are_host_and_port_or_a_hub_url() {
        for good in [
            "hub.example.com:443",
            "hub.example.com",
            "wss://hub.example.com/v1/ws",
            "[::1]:7300",
        ] {
            assert!(good.parse::<PublicAddress>().is_ok(), "{good}");
        }
        // A pinned address names its host before the pin.
        let pinned: PublicAddress = format!("wss://192.168.1.20:7300#sha256={}", "ab".repeat(32))
            .parse()
            .unwrap();
        assert_eq!(
            pinned.authority.host,
            HostName::Ip("192.168.1.20".parse().unwrap())
        );
        assert_eq!(pinned.authority.port, Some(7300));
        for bad in [
            "ftp://hub.example.com",
            "hub.example.com:https",
            "",
            "a b:1",
        ] {
            assert!(bad.parse::<PublicAddress>().is_err(), "{bad}");
        }
    }
}
