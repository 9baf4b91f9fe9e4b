//! The HTTP side of a call: the remote agent's credential, its card (fetched, cached,
//! asked again with its `ETag`), the A2A client over a connection the SSRF guard checks,
//! and what its errors mean for the call.

use super::*;

impl Worker {
    pub(super) async fn credential(
        &self,
        remote: &str,
    ) -> Result<Option<RemoteCredential>, CallError> {
        let reader = self.gateway.context().reader.clone();
        let remote = remote.to_owned();
        tokio::task::spawn_blocking(move || reader.remote_credential(&remote))
            .await
            .map_err(|_| CallError::Transient("the read was cancelled".into()))?
            .map_err(|error| CallError::Transient(error.to_string()))
    }

    /// An HTTP client for the guard, for addresses called over `transport`: names resolved
    /// and checked at each connection, no redirects, no proxy from the environment, TLS
    /// with the web's roots.
    pub(super) fn http(
        &self,
        credential: Option<&RemoteCredential>,
        transport: Transport,
    ) -> Result<reqwest::Client, CallError> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(credential) = credential {
            let (name, value) = credential_header(credential);
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|error| CallError::Permanent(format!("its credential header: {error}")))?;
            let mut value = reqwest::header::HeaderValue::from_str(&value)
                .map_err(|error| CallError::Permanent(format!("its credential: {error}")))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        reqwest::Client::builder()
            .use_preconfigured_tls((*self.tls).clone())
            .dns_resolver(Arc::new(crate::outbound_lookup::GuardedResolver {
                policy: self.policy.clone(),
                transport,
            }))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(120))
            .default_headers(headers)
            .user_agent(concat!("roundtable-hub/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| CallError::Permanent(format!("cannot build its client: {error}")))
    }

    /// The remote agent's card: fetched at most every 5 minutes, again with its `ETag`.
    pub(super) async fn card(&self, card_url: &str) -> Result<a2a::AgentCard, CallError> {
        let cached = self
            .cards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(card_url)
            .cloned();
        if let Some(cached) = &cached
            && cached.fetched.elapsed() < CARD_FRESH
        {
            return Ok(cached.card.clone());
        }
        let url = check_card_url(&self.policy, card_url).map_err(CallError::Permanent)?;
        let client = self.http(None, Transport::of(&url))?;
        let mut request = client.get(url).header("accept", "application/json");
        if let Some(etag) = cached.as_ref().and_then(|cached| cached.etag.clone()) {
            request = request.header("if-none-match", etag);
        }
        let response = request.send().await.map_err(|error| classify(&error))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_MODIFIED
            && let Some(mut cached) = cached
        {
            cached.fetched = Instant::now();
            let card = cached.card.clone();
            self.cards
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(card_url.to_owned(), cached);
            return Ok(card);
        }
        if !status.is_success() {
            let error = format!("its card answered HTTP {status}");
            return Err(
                if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                    CallError::Transient(error)
                } else {
                    CallError::Permanent(error)
                },
            );
        }
        let etag = response
            .headers()
            .get("etag")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|error| CallError::Transient(error.to_string()))?;
            if body.len() + chunk.len() > CARD_MAX_BYTES {
                return Err(CallError::Permanent(format!(
                    "its card is larger than {} KiB",
                    CARD_MAX_BYTES / 1024
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let card: a2a::AgentCard = serde_json::from_slice(&body).map_err(|error| {
            CallError::Permanent(format!("its card is not an A2A card: {error}"))
        })?;
        self.cards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                card_url.to_owned(),
                CachedCard {
                    card: card.clone(),
                    etag,
                    fetched: Instant::now(),
                },
            );
        Ok(card)
    }

    /// A client on the first interface of the card the hub speaks (JSON-RPC or HTTP+JSON),
    /// with its tenant, and whether to stream.
    pub(super) fn client(
        &self,
        card: &a2a::AgentCard,
        card_url: &str,
        credential: Option<&RemoteCredential>,
    ) -> Result<(RemoteClient, bool, String), CallError> {
        let interface = card
            .supported_interfaces
            .iter()
            .find(|interface| {
                interface.protocol_binding == TRANSPORT_PROTOCOL_JSONRPC
                    || interface.protocol_binding == TRANSPORT_PROTOCOL_HTTP_JSON
            })
            .ok_or_else(|| {
                CallError::Permanent(
                    "its card offers neither JSON-RPC nor HTTP+JSON, which the hub speaks".into(),
                )
            })?;
        let endpoint =
            check_card_url(&self.policy, &interface.url).map_err(CallError::Permanent)?;
        // The credential was given for the card's scheme, host and port: a card (changed,
        // or not the owner's) that sends calls elsewhere, or to its own host in clear or on
        // another port, does not take it there.
        let bound =
            url::Url::parse(card_url).is_ok_and(|card_url| same_origin(&card_url, &endpoint));
        if credential.is_some() && !bound {
            return Err(CallError::Permanent(format!(
                "its card sends calls to another host, scheme or port ({}) than the card's, and \
                 its credential goes only to the card's; register it with the endpoint's card",
                endpoint.origin().ascii_serialization()
            )));
        }
        let http = self.http(credential, Transport::of(&endpoint))?;
        let transport: Box<dyn a2a_client::Transport> =
            if interface.protocol_binding == TRANSPORT_PROTOCOL_JSONRPC {
                Box::new(a2a_client::jsonrpc::JsonRpcTransport::new(
                    http,
                    endpoint.to_string(),
                ))
            } else {
                Box::new(a2a_client::rest::RestTransport::new(
                    http,
                    endpoint.to_string(),
                ))
            };
        let mut client = a2a_client::A2AClient::new(transport);
        if let Some(tenant) = &interface.tenant {
            client = client.with_tenant(tenant.clone());
        }
        let streaming = card.capabilities.streaming == Some(true);
        Ok((client, streaming, endpoint.to_string()))
    }
}

/// A remote agent's text as the room is shown it: control characters (but line breaks
/// and tabs) dropped, so that its JSON stays within an event's size.
pub(super) fn plain(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

/// An error's text with the queries of the addresses it names cut off: a card's address
/// may carry a key, and failures are posted in the room.
pub(super) fn without_queries(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        let end = after
            .find(|c: char| c.is_whitespace() || c == ')' || c == '"' || c == '\'')
            .unwrap_or(after.len());
        let address = &after[..end];
        out.push_str(address.split(['?', '#']).next().unwrap_or(address));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// What an A2A call's error comes to: the client's own failures (the network, an answer
/// it could not read) are worth retrying; an error the remote agent answered with (an
/// unknown task, invalid parameters…) is not.
pub(super) fn remote_error(error: a2a::A2AError) -> CallError {
    if error.code == a2a::error_code::INTERNAL_ERROR {
        CallError::Transient(error.to_string())
    } else {
        CallError::Permanent(format!(
            "it answered with an error ({}): {}",
            error.code,
            answer::cut(&error.message, 512)
        ))
    }
}

/// A failed request: refused by the guard (for good), or the network (worth retrying).
pub(super) fn classify(error: &reqwest::Error) -> CallError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = source {
        let text = error.to_string();
        if text.contains("which remote agents may not have") {
            return CallError::Permanent(text);
        }
        source = error.source();
    }
    CallError::Transient(error.to_string())
}

/// TLS for calls out: the web's roots (the Mozilla set), ring, TLS 1.2 and 1.3.
pub(super) fn tls_config() -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default protocol versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}
