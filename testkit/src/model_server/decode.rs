//! Decoding requests: each API's request body into the neutral [`Request`](super::Request).

use super::*;

/// The elements of the array `v[key]` (none when it is missing or not an array).
pub(super) fn items<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

pub(super) fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The text of a string, or of an array of blocks with `text` fields, joined by newlines;
/// anything else as JSON.
pub(super) fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| b.get("text")?.as_str())
                .collect();
            texts.join("\n")
        }
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

pub(super) fn push(messages: &mut Vec<Message>, role: Role, part: Part) {
    match messages.last_mut() {
        Some(last) if last.role == role => last.parts.push(part),
        _ => messages.push(Message {
            role,
            parts: vec![part],
        }),
    }
}

pub(super) fn call(id: &str, name: String, input: Value) -> Part {
    Part::Call {
        id: id.to_owned(),
        name,
        input,
    }
}

pub(super) fn result(id: &str, output: String) -> Part {
    Part::Result {
        id: id.to_owned(),
        output,
    }
}

pub(super) fn add_tool(tools: &mut Vec<String>, name: String) {
    if !name.is_empty() && !tools.contains(&name) {
        tools.push(name);
    }
}

/// The names listed after `header`, one a line (`- ` and `: description` stripped) up to
/// the first line that is not a name.
pub(super) fn listed_names<'a>(text: &'a str, header: &str) -> Vec<&'a str> {
    let Some(at) = text.find(header) else {
        return Vec::new();
    };
    let lines = text[at..]
        .lines()
        .skip(1)
        .map(|l| l.trim().trim_start_matches("- "));
    let names = lines.map(|l| l.split(':').next().unwrap_or_default().trim());
    names
        .take_while(|n| !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || "_-".contains(c)))
        .collect()
}

pub(super) fn new_request(
    api: Api,
    raw: Value,
    system: String,
    messages: Vec<Message>,
    tools: Vec<String>,
) -> Request {
    let model = str_of(&raw, "model").to_owned();
    let stream = raw.get("stream").and_then(Value::as_bool).unwrap_or(false);
    Request {
        api,
        model,
        system,
        messages,
        tools,
        stream,
        raw,
    }
}

pub(super) fn parse_anthropic(raw: Value) -> Result<Request, String> {
    const DEFERRED: &str = "deferred tools are now available via ToolSearch";
    let system = text_of(raw.get("system"));
    let mut deferred: Vec<String> = listed_names(&system, DEFERRED)
        .into_iter()
        .map(String::from)
        .collect();
    let mut messages = Vec::new();
    let list = raw
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("`messages` must be an array")?;
    for m in list {
        let role = match str_of(m, "role") {
            "assistant" => Role::Assistant,
            "system" => Role::System,
            "user" => Role::User,
            other => return Err(format!("unknown message role {other:?}")),
        };
        let blocks = match m.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => return Err("a message's `content` must be a string or an array".into()),
        };
        for b in &blocks {
            let part = match str_of(b, "type") {
                "text" => {
                    let text = str_of(b, "text");
                    deferred.extend(listed_names(text, DEFERRED).into_iter().map(String::from));
                    Part::Text(text.to_owned())
                }
                "tool_use" | "server_tool_use" => {
                    let input = b.get("input").cloned().unwrap_or(Value::Null);
                    call(str_of(b, "id"), str_of(b, "name").to_owned(), input)
                }
                "tool_result" => {
                    let output = text_of(b.get("content"));
                    push(
                        &mut messages,
                        Role::Tool,
                        result(str_of(b, "tool_use_id"), output),
                    );
                    continue;
                }
                _ => continue,
            };
            push(&mut messages, role, part);
        }
    }
    let mut tools = Vec::new();
    let names = items(&raw, "tools").map(|t| str_of(t, "name").to_owned());
    for name in names
        .filter(|n| n != "DeferredToolPlaceholder")
        .chain(deferred)
    {
        add_tool(&mut tools, name);
    }
    Ok(new_request(Api::Anthropic, raw, system, messages, tools))
}

/// A tool Codex offers: its neutral name, namespace, name and type.
pub(super) struct CodexTool {
    pub(super) neutral: String,
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) kind: String,
}

/// Codex's tool definitions: `tools`, plus `additional_tools` (code mode) and
/// `tool_search_output` (loaded deferred tools) input items.
pub(super) fn codex_tools(raw: &Value) -> Vec<CodexTool> {
    fn walk(defs: &Value, namespace: &str, out: &mut Vec<CodexTool>) {
        for t in defs.as_array().into_iter().flatten() {
            let (kind, name) = (str_of(t, "type"), str_of(t, "name"));
            if kind == "namespace" {
                walk(t.get("tools").unwrap_or(&Value::Null), name, out);
                continue;
            }
            let name = if name.is_empty() { kind } else { name };
            out.push(CodexTool {
                neutral: canonical_tool_name(Api::OpenAiResponses, namespace, name),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                kind: kind.to_owned(),
            });
        }
    }
    let mut out = Vec::new();
    walk(raw.get("tools").unwrap_or(&Value::Null), "", &mut out);
    for item in items(raw, "input") {
        if matches!(
            str_of(item, "type"),
            "additional_tools" | "tool_search_output"
        ) {
            walk(item.get("tools").unwrap_or(&Value::Null), "", &mut out);
        }
    }
    out
}

pub(super) fn parse_responses(raw: Value) -> Result<Request, String> {
    let mut system = str_of(&raw, "instructions").to_owned();
    let mut messages = Vec::new();
    let mut namespaces = Vec::new();
    let input = match raw.get("input") {
        Some(Value::String(s)) => vec![json!({"type": "message", "role": "user", "content": s})],
        Some(Value::Array(items)) => items.clone(),
        None => Vec::new(),
        Some(_) => return Err("`input` must be a string or an array".into()),
    };
    for item in &input {
        let id = str_of(item, "call_id");
        let name = canonical_tool_name(
            Api::OpenAiResponses,
            str_of(item, "namespace"),
            str_of(item, "name"),
        );
        let (role, part) = match str_of(item, "type") {
            "" if item.get("role").is_none() => continue,
            "message" | "" => {
                let text = text_of(item.get("content"));
                namespaces.extend(
                    listed_names(&text, "Deferred tool namespaces:")
                        .into_iter()
                        .map(String::from),
                );
                let role = match str_of(item, "role") {
                    "assistant" => Role::Assistant,
                    "developer" | "system" if messages.is_empty() => {
                        let separator = if system.is_empty() { "" } else { "\n\n" };
                        system = [system, text].join(separator);
                        continue;
                    }
                    "developer" | "system" => Role::System,
                    _ => Role::User,
                };
                (role, Part::Text(text))
            }
            "function_call" => {
                let arguments = str_of(item, "arguments");
                let input = serde_json::from_str(arguments).unwrap_or_else(|_| json!(arguments));
                (Role::Assistant, call(id, name, input))
            }
            "custom_tool_call" => (
                Role::Assistant,
                call(id, name, json!(str_of(item, "input"))),
            ),
            "tool_search_call" => {
                let input = item.get("arguments").cloned().unwrap_or(Value::Null);
                (Role::Assistant, call(id, "tool_search".into(), input))
            }
            "function_call_output" | "custom_tool_call_output" => {
                (Role::Tool, result(id, text_of(item.get("output"))))
            }
            "tool_search_output" => (Role::Tool, result(id, text_of(item.get("tools")))),
            _ => continue,
        };
        push(&mut messages, role, part);
    }
    let mut tools = Vec::new();
    for tool in codex_tools(&raw) {
        add_tool(&mut tools, tool.neutral);
    }
    for namespace in namespaces {
        if !tools
            .iter()
            .any(|t| t.starts_with(&format!("{namespace}__")))
        {
            add_tool(&mut tools, format!("{namespace}__*"));
        }
    }
    Ok(new_request(
        Api::OpenAiResponses,
        raw,
        system,
        messages,
        tools,
    ))
}

pub(super) fn parse_gemini(raw: Value, path: &str, stream: bool) -> Result<Request, String> {
    let instruction = raw
        .get("systemInstruction")
        .or_else(|| raw.get("system_instruction"));
    let system = match instruction {
        Some(Value::String(s)) => s.clone(),
        Some(v) => text_of(v.get("parts")),
        None => String::new(),
    };
    if !matches!(raw.get("contents"), None | Some(Value::Array(_))) {
        return Err("`contents` must be an array".into());
    }
    let mut messages = Vec::new();
    for content in items(&raw, "contents") {
        let role = if str_of(content, "role") == "model" {
            Role::Assistant
        } else {
            Role::User
        };
        for part in items(content, "parts") {
            if let Some(c) = part.get("functionCall") {
                let name = canonical_tool_name(Api::Gemini, "", str_of(c, "name"));
                let input = c.get("args").cloned().unwrap_or(json!({}));
                push(&mut messages, role, call(str_of(c, "id"), name, input));
            } else if let Some(r) = part.get("functionResponse") {
                let response = r.get("response").unwrap_or(&Value::Null);
                let output = match (response.get("output"), response.get("error")) {
                    (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => s.clone(),
                    _ => response.to_string(),
                };
                push(&mut messages, Role::Tool, result(str_of(r, "id"), output));
            } else if let Some(text) = part.get("text").and_then(Value::as_str)
                && part.get("thought") != Some(&Value::Bool(true))
            {
                push(&mut messages, role, Part::Text(text.to_owned()));
            }
        }
    }
    let mut tools = Vec::new();
    for group in items(&raw, "tools") {
        let declarations = group
            .get("functionDeclarations")
            .or_else(|| group.get("function_declarations"));
        for d in declarations.and_then(Value::as_array).into_iter().flatten() {
            add_tool(
                &mut tools,
                canonical_tool_name(Api::Gemini, "", str_of(d, "name")),
            );
        }
    }
    let mut request = new_request(Api::Gemini, raw, system, messages, tools);
    // The model is in the path (`/v1beta/models/M:streamGenerateContent`), not the body.
    let model = path.rsplit('/').next().unwrap_or_default();
    request.model = model.split(':').next().unwrap_or_default().to_owned();
    request.stream = stream;
    Ok(request)
}
