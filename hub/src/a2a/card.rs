//! An agent's A2A card, built from its Roundtable card: pure, so the same agent always gets
//! byte-identical JSON and the same `ETag`, which is what lets clients cache it.

use std::collections::{BTreeMap, HashMap};

use a2a::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill,
    HttpAuthSecurityScheme, SecurityScheme,
};
use roundtable_protocol::model::DirectoryEntry;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The extension every card declares: who the agent is on Roundtable.
pub const EXTENSION_URI: &str = "urn:roundtable:agent:v1";

/// The name of the card's one security scheme.
pub const SECURITY_SCHEME: &str = "roundtable";

/// Where the hub is reached, for the card's URLs.
#[derive(Debug, Clone)]
pub struct Origin {
    /// `https://hub.example.com` or `http://127.0.0.1:7300`, no trailing slash.
    pub base_url: String,
    /// Who runs the hub, for `provider.organization`.
    pub organization: String,
}

/// A card and the validator HTTP caches use.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedCard {
    /// The card's JSON, keys sorted at every level.
    pub json: String,
    /// `"<hex SHA-256 of json>"`, quoted as an entity tag is.
    pub etag: String,
}

/// The path of an agent's A2A endpoint under the hub (`/a2a/<owner>/<name>`).
pub fn endpoint_path(handle: &str) -> String {
    format!("/a2a/{handle}")
}

/// The A2A card of `agent` (a directory entry of kind agent), reached at `origin`.
pub fn agent_card(agent: &DirectoryEntry, origin: &Origin) -> ServedCard {
    let card: roundtable_protocol::model::AgentCard = agent
        .card
        .clone()
        .and_then(|card| serde_json::from_value(card).ok())
        .unwrap_or_default();
    let url = format!("{}{}", origin.base_url, endpoint_path(&agent.handle));
    let owner = agent
        .handle
        .split_once('/')
        .map(|(owner, _)| owner.to_owned());
    let description = agent
        .description
        .clone()
        .filter(|text| !text.trim().is_empty())
        .unwrap_or_else(|| format!("Roundtable agent {}", agent.handle));
    let framework = card.framework.clone();
    let mut params = HashMap::new();
    params.insert("handle".to_owned(), Value::from(agent.handle.clone()));
    for (key, value) in [
        ("owner", owner),
        ("framework", framework.clone()),
        ("model", card.model.clone()),
    ] {
        if let Some(value) = value {
            params.insert(key.to_owned(), Value::from(value));
        }
    }
    let skills = if card.skills.is_empty() {
        let mut tags = vec!["roundtable".to_owned()];
        tags.extend(framework);
        vec![AgentSkill {
            id: "chat".into(),
            name: "Chat".into(),
            description: description.clone(),
            tags,
            examples: None,
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }]
    } else {
        card.skills
            .iter()
            .map(|skill| AgentSkill {
                id: skill.id.clone(),
                name: skill.name.clone(),
                description: skill
                    .description
                    .clone()
                    .unwrap_or_else(|| skill.name.clone()),
                tags: if skill.tags.is_empty() {
                    vec!["roundtable".to_owned()]
                } else {
                    skill.tags.clone()
                },
                examples: None,
                input_modes: None,
                output_modes: None,
                security_requirements: None,
            })
            .collect()
    };
    let interface = |binding: &str| AgentInterface {
        url: url.clone(),
        protocol_binding: binding.to_owned(),
        protocol_version: a2a::VERSION.to_owned(),
        tenant: None,
    };
    let mut schemes = HashMap::new();
    schemes.insert(
        SECURITY_SCHEME.to_owned(),
        SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
            scheme: "Bearer".into(),
            description: Some("the token of a user or agent registered on this hub".into()),
            bearer_format: Some("rt_ opaque token".into()),
        }),
    );
    let mut requirement = HashMap::new();
    requirement.insert(SECURITY_SCHEME.to_owned(), Vec::new());
    let a2a_card = AgentCard {
        name: agent.name.clone(),
        description,
        version: card
            .version
            .clone()
            .unwrap_or_else(|| format!("rev-{}", &hex(&Sha256::digest(card_text(agent)))[..12])),
        supported_interfaces: vec![interface("JSONRPC"), interface("HTTP+JSON")],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: Some(vec![AgentExtension {
                uri: EXTENSION_URI.into(),
                description: Some("who the agent is on Roundtable".into()),
                required: Some(false),
                params: Some(params),
            }]),
            extended_agent_card: Some(false),
        },
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into()],
        skills,
        provider: Some(AgentProvider {
            organization: origin.organization.clone(),
            url: origin.base_url.clone(),
        }),
        documentation_url: None,
        icon_url: None,
        security_schemes: Some(schemes),
        security_requirements: Some(vec![requirement]),
        signatures: None,
    };
    let value = serde_json::to_value(&a2a_card).expect("an agent card serializes");
    let json = canonical(&value);
    let etag = format!("\"{}\"", hex(&Sha256::digest(json.as_bytes())));
    ServedCard { json, etag }
}

/// What the card's revision is computed from: every field the A2A card shows.
fn card_text(agent: &DirectoryEntry) -> String {
    let fields = serde_json::json!({
        "name": agent.name,
        "description": agent.description,
        "card": agent.card,
    });
    canonical(&fields)
}

/// JSON with the keys of every object sorted, whatever map the value was built from.
fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> = map
                    .iter()
                    .map(|(key, value)| (key, sorted(value)))
                    .collect();
                let mut out = serde_json::Map::new();
                for (key, value) in ordered {
                    out.insert(key.clone(), value);
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // serde_json's map keeps keys sorted unless `preserve_order` is on somewhere in the
    // build; sorting by hand keeps the bytes (and the ETag) stable either way.
    let mut out = String::new();
    write_sorted(&sorted(value), &mut out);
    out
}

fn write_sorted(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                write_sorted(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_sorted(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use roundtable_protocol::model::{ContactRelation, PrincipalKind};
    use serde_json::json;

    use super::*;

    fn reviewer(card: Option<Value>, description: Option<&str>) -> DirectoryEntry {
        DirectoryEntry {
            id: "p_rev".into(),
            kind: PrincipalKind::Agent,
            handle: "alice/reviewer".into(),
            name: "Reviewer".into(),
            description: description.map(str::to_owned),
            owner: Some("p_alice".into()),
            card,
            contact: ContactRelation::None,
        }
    }

    fn origin() -> Origin {
        Origin {
            base_url: "https://hub.example.com".into(),
            organization: "hub.example.com".into(),
        }
    }

    #[test]
    fn the_card_maps_every_field_the_interop_table_names() {
        let agent = reviewer(
            Some(json!({
                "framework": "claude-code",
                "model": "claude-sonnet-4-5",
                "skills": [{"id": "review", "name": "Review", "tags": ["code"]}]
            })),
            Some("reviews pull requests"),
        );
        let served = agent_card(&agent, &origin());
        let card: Value = serde_json::from_str(&served.json).unwrap();
        assert_eq!(card["name"], "Reviewer");
        assert_eq!(card["description"], "reviews pull requests");
        let url = "https://hub.example.com/a2a/alice/reviewer";
        assert_eq!(
            card["supportedInterfaces"],
            json!([
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
            ])
        );
        assert_eq!(
            card["capabilities"],
            json!({
                "streaming": true,
                "pushNotifications": false,
                "extendedAgentCard": false,
                "extensions": [{
                    "uri": EXTENSION_URI,
                    "description": "who the agent is on Roundtable",
                    "required": false,
                    "params": {
                        "handle": "alice/reviewer",
                        "owner": "alice",
                        "framework": "claude-code",
                        "model": "claude-sonnet-4-5"
                    }
                }]
            })
        );
        assert_eq!(
            card["securitySchemes"]["roundtable"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
        assert_eq!(
            card["securityRequirements"],
            json!([{"schemes": {"roundtable": {"list": []}}}])
        );
        assert_eq!(
            card["skills"],
            json!([{"id": "review", "name": "Review", "description": "Review", "tags": ["code"]}])
        );
        assert_eq!(
            card["provider"],
            json!({"organization": "hub.example.com", "url": "https://hub.example.com"})
        );
        assert!(card["version"].as_str().unwrap().starts_with("rev-"));
        // It reads back as an A2A card.
        let parsed: AgentCard = serde_json::from_str(&served.json).unwrap();
        assert_eq!(parsed.supported_interfaces.len(), 2);
    }

    #[test]
    fn an_agent_without_a_card_gets_a_chat_skill_and_a_default_description() {
        let served = agent_card(&reviewer(None, None), &origin());
        let card: Value = serde_json::from_str(&served.json).unwrap();
        assert_eq!(card["description"], "Roundtable agent alice/reviewer");
        assert_eq!(card["skills"][0]["id"], "chat");
        assert_eq!(card["skills"][0]["tags"], json!(["roundtable"]));
    }

    #[test]
    fn the_same_agent_gives_the_same_bytes_and_a_change_gives_a_new_etag_and_revision() {
        let agent = reviewer(Some(json!({"framework": "codex"})), Some("d"));
        let first = agent_card(&agent, &origin());
        for _ in 0..20 {
            assert_eq!(agent_card(&agent, &origin()), first);
        }
        let changed = reviewer(
            Some(json!({"framework": "codex", "model": "gpt-5"})),
            Some("d"),
        );
        let second = agent_card(&changed, &origin());
        assert_ne!(second.etag, first.etag);
        let version = |served: &ServedCard| {
            serde_json::from_str::<Value>(&served.json).unwrap()["version"].clone()
        };
        assert_ne!(version(&second), version(&first));
        // A card that names its own version keeps it.
        let versioned = reviewer(Some(json!({"version": "2.1.0"})), None);
        assert_eq!(version(&agent_card(&versioned, &origin())), "2.1.0");
        assert!(first.etag.starts_with('"') && first.etag.ends_with('"'));
    }
}
