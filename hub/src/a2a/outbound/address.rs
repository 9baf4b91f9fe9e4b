//! The SSRF guard: which addresses the hub may call on a user's behalf.
//!
//! Why: a remote agent's card address is typed by a user, and its endpoints are whatever
//! that card says; left alone, the hub would fetch its operator's metadata service or an
//! internal admin page for anyone who registers one. So every URL is checked before a
//! request (scheme, and a host written as an address), and every name the hub resolves is
//! checked again at connect time ([`GuardedResolver`]), so a name that changes its answer
//! after registration (DNS rebinding) is refused too. Redirects are not followed.
//!
//! The operator opens exceptions: hosts named one by one (`--a2a-outbound-allow`), or
//! every private address (`--a2a-outbound-allow-private`, for tests and a LAN). Plain
//! `http` is allowed only to such exceptions: anything else is `https`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use roundtable_protocol::client::{RemoteCredential, RemoteCredentialScheme};

/// The operator's exceptions to the guard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Hosts (names or addresses, lower case) the hub may call whatever they resolve to,
    /// over `http` too.
    pub allow_hosts: Vec<String>,
    /// Private and loopback addresses allowed, over `http` too (not link-local ones, where
    /// cloud metadata services answer: those only when named in `allow_hosts`).
    pub allow_private: bool,
}

impl OutboundPolicy {
    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allow_hosts.contains(&host)
    }
}

/// Why a link-local or metadata address is refused when private ones are allowed.
const METADATA: &str = "a link-local or metadata address (allowed only when named)";

/// The longest card or endpoint address accepted.
pub const MAX_URL: usize = 2048;

/// The longest credential value accepted.
pub const MAX_CREDENTIAL: usize = 4096;

/// Why an address may not be called, or `None` when it may: loopback, private (RFC 1918,
/// IPv6 unique-local), link-local (which holds the cloud metadata services), shared
/// (CGNAT), unspecified, broadcast, multicast, documentation, benchmarking and reserved
/// ranges, and IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4),
/// judged by that address.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => forbidden_v4(ip),
        IpAddr::V6(ip) => forbidden_v6(ip),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address (where cloud metadata services answer)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address")
    } else if a == 0 || ip.is_broadcast() || a >= 240 {
        Some("a reserved address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if (a, b, c) == (192, 0, 0)
        || (a, b, c) == (192, 0, 2)
        || (a, b, c) == (198, 51, 100)
        || (a, b, c) == (203, 0, 113)
        || (a == 198 && (b == 18 || b == 19))
    {
        Some("a special-purpose address")
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    let segments = ip.segments();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("a reserved address")
    } else if segments[0] & 0xfe00 == 0xfc00 {
        Some("a private (unique local) address")
    } else if segments[0] & 0xffc0 == 0xfe80 || segments[0] & 0xffc0 == 0xfec0 {
        Some("a link-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if segments[..6] == [0, 0, 0, 0, 0, 0] {
        // IPv4-compatible (deprecated): judged by the address it carries.
        forbidden_v4(embedded_v4(segments[6], segments[7]))
    } else if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64: reaches the IPv4 address it carries.
        forbidden_v4(embedded_v4(segments[6], segments[7]))
    } else if segments[0] == 0x2002 {
        // 6to4: reaches the IPv4 address in bits 16..48.
        forbidden_v4(embedded_v4(segments[1], segments[2]))
    } else if segments[0] == 0x2001 && segments[1] == 0 {
        Some("a Teredo address")
    } else if segments[0] == 0x2001 && segments[1] == 0x0db8 {
        Some("a documentation address")
    } else if segments[0] == 0x0100 && segments[1..4] == [0, 0, 0] {
        Some("a discard address")
    } else {
        None
    }
}

/// Whether an address is link-local (IPv4 169.254/16, IPv6 fe80::/10, in any IPv6 form
/// that carries such an IPv4 address) or a cloud's metadata address (`fd00:ec2::254`):
/// refused even when private addresses are allowed.
pub fn metadata_reach(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => ip.is_link_local(),
        IpAddr::V6(ip) => {
            if let Some(v4) = ip.to_ipv4_mapped() {
                return v4.is_link_local();
            }
            let segments = ip.segments();
            let carried = match segments {
                [0, 0, 0, 0, 0, 0, high, low] | [0x64, 0xff9b, 0, 0, 0, 0, high, low] => {
                    Some(embedded_v4(high, low))
                }
                [0x2002, high, low, ..] => Some(embedded_v4(high, low)),
                _ => None,
            };
            carried.is_some_and(|v4| v4.is_link_local())
                || segments[0] & 0xffc0 == 0xfe80
                || ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
        }
    }
}

fn embedded_v4(high: u16, low: u16) -> Ipv4Addr {
    let [a, b] = high.to_be_bytes();
    let [c, d] = low.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

/// Checks an address the hub is to call (a card's, or an endpoint a card names): `https`
/// (or `http` to an exception), a host, no user name or password, at most [`MAX_URL`]
/// bytes, and a host written as an address that the guard allows. A name is checked when
/// it is resolved. The error says what to do.
pub fn check_card_url(policy: &OutboundPolicy, text: &str) -> Result<url::Url, String> {
    if text.len() > MAX_URL {
        return Err(format!(
            "the address is {} bytes; the limit is {MAX_URL}",
            text.len()
        ));
    }
    let url = url::Url::parse(text)
        .map_err(|error| format!("{text:?} is not an address ({error}); give https://…"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "the address carries a user name or password; give the credential apart".to_owned(),
        );
    }
    let host = match url.host() {
        Some(host) => host,
        None => return Err(format!("{text:?} names no host; give https://host/…")),
    };
    let (name, ip) = match host {
        url::Host::Domain(name) => (name.trim_end_matches('.').to_ascii_lowercase(), None),
        url::Host::Ipv4(ip) => (ip.to_string(), Some(IpAddr::V4(ip))),
        url::Host::Ipv6(ip) => (ip.to_string(), Some(IpAddr::V6(ip))),
    };
    let excepted = policy.allows_host(&name);
    match url.scheme() {
        "https" => {}
        "http" if excepted || policy.allow_private => {}
        "http" => {
            return Err(format!(
                "{text:?} is plain http; remote agents are called over https (an operator \
                 may allow a host with --a2a-outbound-allow)"
            ));
        }
        other => return Err(format!("{other}: is not https; give https://…")),
    }
    if excepted {
        return Ok(url);
    }
    let reason = match ip {
        Some(ip) if policy.allow_private => metadata_reach(ip).then_some(METADATA),
        Some(ip) => forbidden(ip),
        None if policy.allow_private => None,
        None if name == "localhost" || name.ends_with(".localhost") => Some("a loopback name"),
        None => None,
    };
    match reason {
        Some(reason) => Err(format!(
            "{name} is {reason}, which remote agents may not have (an operator may allow it \
             with --a2a-outbound-allow {name})"
        )),
        None => Ok(url),
    }
}

/// Checks what every address `name` resolves to, at registration or at connect time.
pub fn check_resolved(
    policy: &OutboundPolicy,
    name: &str,
    addresses: &[SocketAddr],
) -> Result<(), String> {
    if addresses.is_empty() {
        return Err(format!("{name} resolves to no address"));
    }
    if policy.allows_host(name) {
        return Ok(());
    }
    // Every answer must pass: a name that also resolves to an inner address is refused
    // whichever answer a connection would try first.
    for address in addresses {
        let reason = match policy.allow_private {
            true => metadata_reach(address.ip()).then_some(METADATA),
            false => forbidden(address.ip()),
        };
        // The address itself is not said: the refusal must not map the network inside.
        if let Some(reason) = reason {
            return Err(format!(
                "{name} resolves to {reason}, which remote agents may not have (an operator \
                 may allow it with --a2a-outbound-allow {name})"
            ));
        }
    }
    Ok(())
}

/// Checks a credential the hub is to present: a value a header can carry, not a
/// Roundtable token, and a header name that is not one the hub or HTTP itself sets.
pub fn check_credential(credential: &RemoteCredential) -> Result<(), String> {
    let value = &credential.value;
    if value.is_empty() || value.len() > MAX_CREDENTIAL {
        return Err(format!(
            "the credential is {} bytes; give 1 to {MAX_CREDENTIAL}",
            value.len()
        ));
    }
    if !value.bytes().all(|byte| (0x21..0x7f).contains(&byte)) {
        return Err(
            "the credential has spaces, control or non-ASCII characters; a header cannot carry it"
                .to_owned(),
        );
    }
    if crate::ids::is_token_shaped(value) {
        return Err(
            "this is a Roundtable token: the hub never gives one to a remote agent; give the \
             remote agent's own credential"
                .to_owned(),
        );
    }
    match (credential.scheme, &credential.header) {
        (RemoteCredentialScheme::Bearer, Some(_)) => {
            Err("a bearer credential goes in Authorization; give no header".to_owned())
        }
        (RemoteCredentialScheme::Bearer, None) | (RemoteCredentialScheme::ApiKey, None) => Ok(()),
        (RemoteCredentialScheme::ApiKey, Some(header)) => {
            let lower = header.to_ascii_lowercase();
            let token = !header.is_empty()
                && header.len() <= 64
                && header
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || b"-_".contains(&byte));
            const RESERVED: [&str; 11] = [
                "host",
                "content-length",
                "content-type",
                "transfer-encoding",
                "connection",
                "upgrade",
                "te",
                "trailer",
                "keep-alive",
                "proxy-authorization",
                "a2a-version",
            ];
            if !token {
                Err(format!(
                    "{header:?} is not a header name; give letters, digits and -"
                ))
            } else if RESERVED.contains(&lower.as_str()) || lower.starts_with("x-roundtable-") {
                Err(format!("{header} is a header the hub sets; give another"))
            } else {
                Ok(())
            }
        }
    }
}

/// The header and value a credential is presented as.
pub fn credential_header(credential: &RemoteCredential) -> (String, String) {
    match credential.scheme {
        RemoteCredentialScheme::Bearer => (
            "authorization".to_owned(),
            format!("Bearer {}", credential.value),
        ),
        RemoteCredentialScheme::ApiKey => (
            credential
                .header
                .clone()
                .unwrap_or_else(|| "x-api-key".to_owned())
                .to_ascii_lowercase(),
            credential.value.clone(),
        ),
    }
}

/// Resolves names for the outbound client and refuses those the guard forbids, at every
/// connection (so a name cannot pass at registration and point inwards later).
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    pub policy: Arc<OutboundPolicy>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            check_resolved(&policy, &name, &addresses).map_err(
                |refusal| -> Box<dyn std::error::Error + Send + Sync> { refusal.into() },
            )?;
            let addresses: reqwest::dns::Addrs = Box::new(addresses.into_iter());
            Ok(addresses)
        })
    }
}

/// Checks a registration before it goes to the writer: the credential, the address, then
/// what the address's name resolves to now (the one check that needs the network, done
/// off the writer).
pub async fn admit_registration(
    policy: &OutboundPolicy,
    register: &roundtable_protocol::client::RegisterRemoteAgent,
) -> Result<(), String> {
    if let Some(credential) = &register.credential {
        check_credential(credential)?;
    }
    admit_card_url(policy, &register.card_url).await
}

/// Checks a card address: the URL, then what its name resolves to now.
pub async fn admit_card_url(policy: &OutboundPolicy, text: &str) -> Result<(), String> {
    let url = check_card_url(policy, text)?;
    let Some(url::Host::Domain(name)) = url.host() else {
        return Ok(());
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let lookup = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tokio::net::lookup_host((name, port)),
    )
    .await
    .map_err(|_| format!("{name} did not resolve within 5 s; check the address"))?
    .map_err(|error| format!("{name} does not resolve ({error}); check the address"))?;
    let addresses: Vec<SocketAddr> = lookup.collect();
    check_resolved(policy, &name.to_ascii_lowercase(), &addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        check_card_url(&OutboundPolicy::default(), text).unwrap_err()
    }

    #[test]
    fn inner_addresses_are_refused_and_public_ones_pass() {
        for inner in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::10.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "2001::1",
            "ff02::1",
        ] {
            let ip: IpAddr = inner.parse().unwrap();
            assert!(forbidden(ip).is_some(), "{inner} passed");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "100.128.0.1",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::",
        ] {
            let ip: IpAddr = public.parse().unwrap();
            assert_eq!(forbidden(ip), None, "{public}");
        }
    }

    #[test]
    fn card_addresses_need_https_and_a_public_host() {
        assert!(
            check_card_url(
                &OutboundPolicy::default(),
                "https://agents.example.com/a/.well-known/agent-card.json"
            )
            .is_ok()
        );
        assert!(refused("http://agents.example.com/").contains("plain http"));
        assert!(refused("http://169.254.169.254/latest/meta-data/").contains("plain http"));
        assert!(refused("https://169.254.169.254/").contains("link-local"));
        assert!(refused("https://10.1.2.3/").contains("private"));
        assert!(refused("https://[::ffff:7f00:1]/").contains("loopback"));
        assert!(refused("https://localhost:8443/").contains("loopback"));
        assert!(refused("https://api.localhost/").contains("loopback"));
        assert!(refused("https://LOCALHOST./").contains("loopback"));
        assert!(refused("ftp://example.com/").contains("not https"));
        assert!(refused("https://user:pw@example.com/").contains("password"));
        assert!(refused("not a url").contains("not an address"));
        assert!(refused(&format!("https://e.com/{}", "a".repeat(MAX_URL))).contains("limit"));
        // Decimal and hex spellings of an address are addresses.
        assert!(refused("https://2130706433/").contains("loopback"));
        assert!(refused("https://0x7f.1/").contains("loopback"));
    }

    #[test]
    fn exceptions_open_named_hosts_or_every_private_address() {
        let named = OutboundPolicy {
            allow_hosts: vec!["10.1.2.3".into(), "echo.lan".into()],
            allow_private: false,
        };
        assert!(check_card_url(&named, "http://10.1.2.3:8080/").is_ok());
        assert!(check_card_url(&named, "http://ECHO.lan./").is_ok());
        assert!(check_card_url(&named, "https://10.1.2.4/").is_err());
        let private = OutboundPolicy {
            allow_hosts: Vec::new(),
            allow_private: true,
        };
        assert!(check_card_url(&private, "http://127.0.0.1:9/").is_ok());
        assert!(check_card_url(&private, "http://10.1.2.3/").is_ok());
        assert!(check_card_url(&private, "ftp://127.0.0.1/").is_err());
        // Metadata services stay out unless named.
        for metadata in [
            "http://169.254.169.254/",
            "http://[fd00:ec2::254]/",
            "http://[fe80::1]/",
            "http://[::ffff:169.254.169.254]/",
        ] {
            let refusal = check_card_url(&private, metadata).unwrap_err();
            assert!(refusal.contains("metadata"), "{metadata}: {refusal}");
        }
        let metadata: SocketAddr = "169.254.169.254:80".parse().unwrap();
        assert!(check_resolved(&private, "metadata.internal", &[metadata]).is_err());
        let named = OutboundPolicy {
            allow_hosts: vec!["169.254.169.254".into()],
            allow_private: true,
        };
        assert!(check_card_url(&named, "http://169.254.169.254/").is_ok());
    }

    #[test]
    fn resolved_names_pass_only_when_every_answer_does() {
        let policy = OutboundPolicy::default();
        let public: SocketAddr = "93.184.215.14:443".parse().unwrap();
        let inner: SocketAddr = "127.0.0.1:443".parse().unwrap();
        assert!(check_resolved(&policy, "example.com", &[public]).is_ok());
        let refusal = check_resolved(&policy, "rebind.example", &[public, inner]).unwrap_err();
        assert!(refusal.contains("a loopback address"), "{refusal}");
        assert!(
            !refusal.contains("127.0.0.1"),
            "the address is not told: {refusal}"
        );
        assert!(check_resolved(&policy, "none.example", &[]).is_err());
        let named = OutboundPolicy {
            allow_hosts: vec!["rebind.example".into()],
            allow_private: false,
        };
        assert!(check_resolved(&named, "rebind.example", &[inner]).is_ok());
    }

    #[test]
    fn credentials_are_header_safe_and_never_roundtable_tokens() {
        let bearer = |value: &str| RemoteCredential {
            scheme: RemoteCredentialScheme::Bearer,
            value: value.to_owned(),
            header: None,
        };
        assert!(check_credential(&bearer("sk-remote-123")).is_ok());
        assert!(check_credential(&bearer("")).is_err());
        assert!(check_credential(&bearer("two words")).is_err());
        assert!(check_credential(&bearer("line\r\nX-Evil: 1")).is_err());
        let (token, _) = crate::ids::IdSource::seeded(1).token();
        assert!(
            check_credential(&bearer(&token))
                .unwrap_err()
                .contains("Roundtable token")
        );
        let api_key = |header: &str| RemoteCredential {
            scheme: RemoteCredentialScheme::ApiKey,
            value: "k".into(),
            header: Some(header.to_owned()),
        };
        assert!(check_credential(&api_key("X-Weather-Key")).is_ok());
        assert!(check_credential(&api_key("Host")).is_err());
        assert!(check_credential(&api_key("X-Roundtable-Principal")).is_err());
        assert!(check_credential(&api_key("bad header")).is_err());
        assert_eq!(
            credential_header(&api_key("X-Weather-Key")),
            ("x-weather-key".to_owned(), "k".to_owned())
        );
        assert_eq!(
            credential_header(&bearer("abc")),
            ("authorization".to_owned(), "Bearer abc".to_owned())
        );
    }
}
