//! The SSRF guard's checks that need the network: resolving a card's name at registration,
//! and at every connection of the outbound client. The checks themselves are pure and sit
//! low in the hub ([`roundtable_engine::outbound_guard`]), where the engine and the configuration
//! reach them.

use std::net::SocketAddr;
use std::sync::Arc;

use roundtable_engine::outbound_guard::{
    OutboundPolicy, Transport, check_card_url, check_credential, check_resolved,
};

/// Resolves names for the outbound client and refuses those the guard forbids, at every
/// connection (so a name cannot pass at registration and point inwards later). A client
/// calls one address, so its resolver knows the transport that address is called over.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    pub policy: Arc<OutboundPolicy>,
    pub transport: Transport,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let (policy, transport) = (self.policy.clone(), self.transport);
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            check_resolved(&policy, &name, &addresses, transport).map_err(
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
    check_resolved(
        policy,
        &name.to_ascii_lowercase(),
        &addresses,
        Transport::of(&url),
    )
}
