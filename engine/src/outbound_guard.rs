//! The SSRF guard: which addresses the hub may call on a user's behalf.
//!
//! Why: a remote agent's card address is typed by a user, and its endpoints are whatever
//! that card says; left alone, the hub would fetch its operator's metadata service or an
//! internal admin page for anyone who registers one. So every URL is checked before a
//! request (scheme, and a host written as an address), and every name the hub resolves is
//! checked again at connect time (the outbound client's resolver, in
//! the hub's `outbound_lookup`), so a name that changes its answer
//! after registration (DNS rebinding) is refused too. Redirects are not followed.
//!
//! The operator opens exceptions: hosts named one by one (`--a2a-outbound-allow`), or
//! every private address (`--a2a-outbound-allow-private`, for tests and a LAN). Plain
//! `http` goes only to a named host, or (private addresses allowed) to a host whose every
//! address is private: what is sent in clear never crosses the internet. Anything else is
//! `https`. A credential goes only to the scheme, host and port its card is at.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use roundtable_protocol::client::{RemoteCredential, RemoteCredentialScheme};

/// The operator's exceptions to the guard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Hosts (names or addresses, lower case) the hub may call whatever they resolve to,
    /// over `http` too.
    pub allow_hosts: Vec<String>,
    /// Private and loopback addresses allowed, over `http` too (not link-local or metadata
    /// ones, where cloud metadata services answer: those only when named in `allow_hosts`).
    /// Plain `http` then still goes only to private addresses.
    pub allow_private: bool,
}

impl OutboundPolicy {
    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allow_hosts.contains(&host)
    }
}

/// How a connection is made: what it carries is readable on the way (`Plain`, `http`) or
/// not (`Tls`, `https`). Plain connections go only to private addresses unless the host is
/// named by the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tls,
    Plain,
}

impl Transport {
    /// The transport of an address the guard passed (`http` or `https`).
    pub fn of(url: &url::Url) -> Transport {
        match url.scheme() {
            "http" => Transport::Plain,
            _ => Transport::Tls,
        }
    }
}

/// Why a link-local or metadata address is refused when private ones are allowed.
const METADATA: &str = "a link-local or metadata address (allowed only when named)";

/// Why a public address is refused over plain `http` when private ones are allowed.
const PUBLIC_OVER_HTTP: &str = "a public address, over plain http (give https://…)";

/// The longest card or endpoint address accepted.
pub const MAX_URL: usize = 2048;

/// The longest credential value accepted.
pub const MAX_CREDENTIAL: usize = 4096;

/// Why an address may not be called, or `None` when it may: loopback, private (RFC 1918,
/// IPv6 unique-local), link-local (which holds the cloud metadata services), shared
/// (CGNAT), unspecified, broadcast, multicast, documentation, benchmarking and reserved
/// ranges, and IPv6 forms that carry an IPv4 address (mapped, translated, compatible,
/// NAT64 well-known and local-use, 6to4), judged by that address.
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
    let segments = ip.segments();
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if ip.is_unspecified() {
        return Some("a reserved address");
    }
    let carried = carried_v4(ip);
    if !carried.is_empty() {
        // It reaches the IPv4 address it carries: judged by that (by each reading, when
        // its form can put one in several places).
        return carried.into_iter().find_map(forbidden_v4);
    }
    if segments[0] & 0xfe00 == 0xfc00 {
        Some("a private (unique local) address")
    } else if segments[0] & 0xffc0 == 0xfe80 || segments[0] & 0xffc0 == 0xfec0 {
        Some("a link-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
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

/// The IPv4 addresses an IPv6 address reaches, for the forms that carry one: mapped
/// (`::ffff:0:0/96`), translated (`::ffff:0:0:0/96`), compatible (`::/96`, deprecated),
/// NAT64 with the well-known prefix (`64:ff9b::/96`) or the local-use one
/// (`64:ff9b:1::/48`), and 6to4 (`2002::/16`). Empty for any other address.
///
/// A local-use NAT64 prefix may be /48, /56, /64 or /96 long, each putting the IPv4
/// address elsewhere (RFC 6052 §2.2), and the hub cannot know which its network uses: every
/// reading is returned, but those in 0.0.0.0/8 ("this network", which no translator
/// reaches), unless that leaves none.
fn carried_v4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let segments = ip.segments();
    let bytes = ip.octets();
    let v4 = |at: [usize; 4]| Ipv4Addr::new(bytes[at[0]], bytes[at[1]], bytes[at[2]], bytes[at[3]]);
    let last = v4([12, 13, 14, 15]);
    match segments {
        // Mapped, translated (SIIT), compatible.
        [0, 0, 0, 0, 0, 0xffff, _, _]
        | [0, 0, 0, 0, 0xffff, 0, _, _]
        | [0, 0, 0, 0, 0, 0, _, _] => {
            vec![last]
        }
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => vec![last],
        [0x64, 0xff9b, 0x1, ..] => {
            let readings = [
                v4([6, 7, 9, 10]),   // a /48 prefix (byte 8 is RFC 6052's `u`)
                v4([7, 9, 10, 11]),  // /56
                v4([9, 10, 11, 12]), // /64
                last,                // /96
            ];
            let reachable: Vec<Ipv4Addr> = readings
                .into_iter()
                .filter(|reading| reading.octets()[0] != 0)
                .collect();
            if reachable.is_empty() {
                vec![last]
            } else {
                reachable
            }
        }
        [0x2002, ..] => vec![v4([2, 3, 4, 5])],
        _ => Vec::new(),
    }
}

/// Whether an IPv4 address is where a cloud's metadata service answers: link-local
/// (169.254/16, most clouds), `100.100.100.200` (Alibaba Cloud) or `192.0.0.192` (Oracle
/// Cloud's older one).
fn metadata_v4(ip: Ipv4Addr) -> bool {
    ip.is_link_local()
        || ip == Ipv4Addr::new(100, 100, 100, 200)
        || ip == Ipv4Addr::new(192, 0, 0, 192)
}

/// Whether an address is link-local (IPv4 169.254/16, IPv6 fe80::/10, in any IPv6 form
/// that carries such an IPv4 address) or a cloud's metadata address (`fd00:ec2::254`,
/// `100.100.100.200`, `192.0.0.192`): refused even when private addresses are allowed.
pub fn metadata_reach(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => metadata_v4(ip),
        IpAddr::V6(ip) => {
            carried_v4(ip).into_iter().any(metadata_v4)
                || ip.segments()[0] & 0xffc0 == 0xfe80
                || ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
        }
    }
}

/// Why an address may not be called under `policy` over `transport` (the host not named
/// by the operator), or `None` when it may.
fn refusal_for(policy: &OutboundPolicy, ip: IpAddr, transport: Transport) -> Option<&'static str> {
    if !policy.allow_private {
        return forbidden(ip);
    }
    if metadata_reach(ip) {
        Some(METADATA)
    } else if transport == Transport::Plain && forbidden(ip).is_none() {
        Some(PUBLIC_OVER_HTTP)
    } else {
        None
    }
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
        // With private addresses allowed, where the host is decides (below, or when its
        // name is resolved).
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
        Some(ip) => refusal_for(policy, ip, Transport::of(&url)),
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

/// Checks what every address `name` resolves to, at registration or at connect time, for
/// a connection over `transport`.
pub fn check_resolved(
    policy: &OutboundPolicy,
    name: &str,
    addresses: &[SocketAddr],
    transport: Transport,
) -> Result<(), String> {
    if addresses.is_empty() {
        return Err(format!("{name} resolves to no address"));
    }
    if policy.allows_host(name) {
        return Ok(());
    }
    // Every answer must pass: a name that also resolves to an inner address (or, over plain
    // http, to a public one) is refused whichever answer a connection would try first.
    for address in addresses {
        // The address itself is not said: the refusal must not map the network inside.
        if let Some(reason) = refusal_for(policy, address.ip(), transport) {
            return Err(format!(
                "{name} resolves to {reason}, which remote agents may not have (an operator \
                 may allow it with --a2a-outbound-allow {name})"
            ));
        }
    }
    Ok(())
}

/// Whether a credential given for the card at `card` may go to `endpoint`: the same scheme,
/// host and port. A card (changed, or not its registrant's) that names another origin, or
/// the same host over plain `http` or on another port, does not take the credential there.
pub fn same_origin(card: &url::Url, endpoint: &url::Url) -> bool {
    let host = |url: &url::Url| {
        url.host_str()
            .map(|host| host.trim_end_matches('.').to_ascii_lowercase())
    };
    card.scheme() == endpoint.scheme()
        && host(card).is_some()
        && host(card) == host(endpoint)
        && card.port_or_known_default() == endpoint.port_or_known_default()
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
        assert!(
            check_resolved(&private, "metadata.internal", &[metadata], Transport::Tls).is_err()
        );
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
        assert!(check_resolved(&policy, "example.com", &[public], Transport::Tls).is_ok());
        let refusal = check_resolved(&policy, "rebind.example", &[public, inner], Transport::Tls)
            .unwrap_err();
        assert!(refusal.contains("a loopback address"), "{refusal}");
        assert!(
            !refusal.contains("127.0.0.1"),
            "the address is not told: {refusal}"
        );
        assert!(check_resolved(&policy, "none.example", &[], Transport::Tls).is_err());
        let named = OutboundPolicy {
            allow_hosts: vec!["rebind.example".into()],
            allow_private: false,
        };
        assert!(check_resolved(&named, "rebind.example", &[inner], Transport::Plain).is_ok());
    }

    #[test]
    fn ipv6_forms_are_judged_by_the_ipv4_address_they_carry() {
        for (inner, carries) in [
            // Mapped (::ffff:0:0/96) and translated (::ffff:0:0:0/96).
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:0:7f00:1", "loopback"),
            ("::ffff:0:a9fe:a9fe", "link-local"),
            // NAT64, the well-known prefix and the local-use one, in each place a /48,
            // /56, /64 or /96 prefix puts the IPv4 address.
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("64:ff9b:1::7f00:1", "loopback"),
            ("64:ff9b:1::a9fe:a9fe", "link-local"),
            ("64:ff9b:1:7f00:0:100::", "loopback"),
            ("64:ff9b:1:a:0:1::", "private"),
            ("64:ff9b:1:0:c0:a800:100:0", "private"),
            ("64:ff9b:1::", "reserved"),
        ] {
            let ip: IpAddr = inner.parse().unwrap();
            let reason = forbidden(ip).unwrap_or_else(|| panic!("{inner} passed"));
            assert!(reason.contains(carries), "{inner}: {reason}");
        }
        for public in ["64:ff9b:1::808:808", "::ffff:0:808:808", "::ffff:8.8.8.8"] {
            let ip: IpAddr = public.parse().unwrap();
            assert_eq!(forbidden(ip), None, "{public}");
        }
    }

    #[test]
    fn metadata_addresses_stay_refused_when_private_ones_are_allowed() {
        let private = OutboundPolicy {
            allow_hosts: Vec::new(),
            allow_private: true,
        };
        for metadata in [
            "100.100.100.200",
            "192.0.0.192",
            "[::ffff:100.100.100.200]",
            "[64:ff9b::6464:64c8]",
            "[64:ff9b:1::a9fe:a9fe]",
            "[::ffff:0:a9fe:a9fe]",
        ] {
            let refusal = check_card_url(&private, &format!("https://{metadata}/")).unwrap_err();
            assert!(refusal.contains("metadata"), "{metadata}: {refusal}");
        }
        let alibaba: SocketAddr = "100.100.100.200:80".parse().unwrap();
        assert!(check_resolved(&private, "meta.example", &[alibaba], Transport::Tls).is_err());
        // The rest of the shared range is private like any other.
        assert!(check_card_url(&private, "http://100.64.0.1/").is_ok());
    }

    #[test]
    fn plain_http_goes_only_to_private_addresses_when_those_are_allowed() {
        let private = OutboundPolicy {
            allow_hosts: Vec::new(),
            allow_private: true,
        };
        for public in ["http://8.8.8.8/", "http://[2606:4700::1111]:8080/"] {
            let refusal = check_card_url(&private, public).unwrap_err();
            assert!(refusal.contains("plain http"), "{public}: {refusal}");
        }
        assert!(check_card_url(&private, "https://8.8.8.8/").is_ok());
        assert!(check_card_url(&private, "http://10.1.2.3:8080/").is_ok());
        assert!(check_card_url(&private, "http://[fd00::1]/").is_ok());
        // A name: every address it resolves to must be private for http, any for https.
        let public: SocketAddr = "93.184.215.14:80".parse().unwrap();
        let inner: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let refusal = check_resolved(
            &private,
            "mixed.example",
            &[inner, public],
            Transport::Plain,
        )
        .unwrap_err();
        assert!(refusal.contains("plain http"), "{refusal}");
        assert!(
            refusal.contains("which remote agents may not have"),
            "{refusal}"
        );
        assert!(
            !refusal.contains("93.184"),
            "the address is not told: {refusal}"
        );
        assert!(
            check_resolved(&private, "mixed.example", &[inner, public], Transport::Tls).is_ok()
        );
        assert!(check_resolved(&private, "lan.example", &[inner], Transport::Plain).is_ok());
        // A host the operator named takes http whatever it is.
        let named = OutboundPolicy {
            allow_hosts: vec!["8.8.8.8".into(), "mixed.example".into()],
            allow_private: true,
        };
        assert!(check_card_url(&named, "http://8.8.8.8/").is_ok());
        assert!(check_resolved(&named, "mixed.example", &[public], Transport::Plain).is_ok());
    }

    #[test]
    fn a_credential_is_bound_to_its_card_s_scheme_host_and_port() {
        let url = |text: &str| url::Url::parse(text).unwrap();
        let card = url("https://agents.example/.well-known/agent-card.json");
        for (endpoint, same) in [
            ("https://agents.example/a2a", true),
            ("https://AGENTS.example.:443/a2a", true),
            ("http://agents.example:8080/", false),
            ("http://agents.example/", false),
            ("https://agents.example:8443/", false),
            ("https://other.example/", false),
        ] {
            assert_eq!(same_origin(&card, &url(endpoint)), same, "{endpoint}");
        }
        assert!(!same_origin(
            &url("http://127.0.0.1:1/card"),
            &url("http://127.0.0.1:2/")
        ));
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
