//! Encoding replies: the neutral [`Reply`](super::Reply) in each API's own streaming format.

use super::*;

/// `base` with `extra`'s top-level keys merged over it.
pub(super) fn with_extra(mut base: Value, extra: &Value) -> Value {
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    base
}

/// One SSE event, with its `event:` line (Claude Code needs it).
pub(super) fn sse(out: &mut String, event: &str, data: &Value) {
    out.push_str(&format!("event: {event}\ndata: {data}\n\n"));
}

pub(super) fn object_or_empty(input: &Value) -> Value {
    if input.is_null() {
        json!({})
    } else {
        input.clone()
    }
}

pub(super) fn encode(state: &State, request: &Request, reply: Reply) -> Exchange {
    let ids: Vec<u64> = reply.calls.iter().map(|_| state.next_id()).collect();
    let id = state.next_id();
    let (body, usage, call_ids) = match request.api {
        Api::Anthropic => encode_anthropic(request, &reply, id, &ids),
        Api::OpenAiResponses => encode_responses(request, &reply, id, &ids),
        Api::Gemini => encode_gemini(request, &reply, id, &ids),
    };
    let mut exchange = Exchange::new(200, &Value::Null);
    exchange.response = body;
    exchange.usage_sent = Some(usage);
    exchange.call_ids = call_ids;
    exchange.reply = Some(reply);
    exchange
}

/// The body, the usage object sent and the call ids.
type Encoded = (String, Value, Vec<String>);

pub(super) fn encode_anthropic(request: &Request, reply: &Reply, id: u64, ids: &[u64]) -> Encoded {
    let u = &reply.usage;
    let usage = json!({
        "input_tokens": u.input,
        "cache_creation_input_tokens": u.cache_write_5m + u.cache_write_1h,
        "cache_read_input_tokens": u.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": u.cache_write_5m,
            "ephemeral_1h_input_tokens": u.cache_write_1h,
        },
        "output_tokens": u.output,
    });
    let usage = with_extra(usage, &u.extra);
    let mut blocks = Vec::new();
    if reply.text.is_some() || reply.calls.is_empty() {
        blocks.push(json!({"type": "text", "text": reply.text.clone().unwrap_or_default()}));
    }
    let call_ids: Vec<String> = ids.iter().map(|n| format!("toolu_rt{n:08}")).collect();
    for (call, call_id) in reply.calls.iter().zip(&call_ids) {
        let input = object_or_empty(&call.input);
        blocks.push(json!({"type": "tool_use", "id": call_id, "name": call.name, "input": input}));
    }
    let stop = if reply.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let message = json!({"id": format!("msg_rt{id:08}"), "type": "message", "role": "assistant",
        "model": request.model, "content": blocks, "stop_reason": stop, "stop_sequence": null,
        "usage": usage});
    if !request.stream {
        return (message.to_string(), usage, call_ids);
    }
    let mut out = String::new();
    let start = with_extra(message, &json!({"content": [], "stop_reason": null}));
    sse(
        &mut out,
        "message_start",
        &json!({"type": "message_start", "message": start}),
    );
    for (index, block) in blocks.iter().enumerate() {
        // Claude Code reads tool input only from input_json_delta, never from the start block.
        let (empty, delta) = match &block["input"] {
            Value::Null => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            ),
            input => (
                with_extra(block.clone(), &json!({"input": {}})),
                json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            ),
        };
        let start = json!({"type": "content_block_start", "index": index, "content_block": empty});
        sse(&mut out, "content_block_start", &start);
        let delta = json!({"type": "content_block_delta", "index": index, "delta": delta});
        sse(&mut out, "content_block_delta", &delta);
        sse(
            &mut out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
    }
    let delta = json!({"stop_reason": stop, "stop_sequence": null});
    sse(
        &mut out,
        "message_delta",
        &json!({"type": "message_delta", "delta": delta, "usage": usage}),
    );
    sse(&mut out, "message_stop", &json!({"type": "message_stop"}));
    (out, usage, call_ids)
}

pub(super) fn encode_responses(request: &Request, reply: &Reply, id: u64, ids: &[u64]) -> Encoded {
    let u = &reply.usage;
    let written = u.cache_write_5m + u.cache_write_1h;
    let input = u.input + u.cache_read + written;
    let usage = json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": u.cache_read, "cache_write_tokens": written},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + u.output,
    });
    let usage = with_extra(usage, &u.extra);
    let tools = codex_tools(&request.raw);
    let mut output = Vec::new();
    if let Some(text) = &reply.text {
        let content = json!([{"type": "output_text", "text": text, "annotations": []}]);
        output.push(
            json!({"type": "message", "id": format!("msg_rt{id:08}"), "role": "assistant",
            "status": "completed", "content": content}),
        );
    }
    let call_ids: Vec<String> = ids.iter().map(|n| format!("call_rt{n:08}")).collect();
    for ((call, call_id), n) in reply.calls.iter().zip(&call_ids).zip(ids) {
        let (namespace, name, kind) = match (
            tools.iter().find(|t| t.neutral == call.name),
            split_mcp(&call.name),
        ) {
            (Some(t), _) => (t.namespace.clone(), t.name.clone(), t.kind.as_str()),
            (None, Some((server, tool))) => (format!("mcp__{server}"), tool.to_owned(), "function"),
            (None, None) => (String::new(), call.name.clone(), "function"),
        };
        let text = match &call.input {
            Value::String(s) => s.clone(),
            Value::Object(o) if kind == "custom" && o.len() == 1 => text_of(o.values().next()),
            other => object_or_empty(other).to_string(),
        };
        let mut item = match kind {
            "tool_search" => {
                json!({"type": "tool_search_call", "execution": "client", "arguments": call.input})
            }
            "custom" => json!({"type": "custom_tool_call", "name": name, "input": text}),
            _ => json!({"type": "function_call", "name": name, "arguments": text}),
        };
        item = with_extra(
            item,
            &json!({"id": format!("fc_rt{n:08}"), "call_id": call_id, "status": "completed"}),
        );
        if !namespace.is_empty() && namespace != "functions" {
            item["namespace"] = json!(namespace);
        }
        output.push(item);
    }
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let response = json!({"id": format!("resp_rt{id:08}"), "object": "response", "created_at": created,
        "status": "completed", "model": request.model, "output": output, "usage": usage});
    if !request.stream {
        return (response.to_string(), usage, call_ids);
    }
    let mut out = String::new();
    let mut event =
        |kind: &str, data: Value| sse(&mut out, kind, &with_extra(data, &json!({"type": kind})));
    let created = with_extra(
        response.clone(),
        &json!({"status": "in_progress", "output": [], "usage": null}),
    );
    event("response.created", json!({"response": created}));
    for (index, item) in output.iter().enumerate() {
        event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        if let Some(text) = item.pointer("/content/0/text") {
            let at = json!({"item_id": item["id"], "output_index": index, "content_index": 0});
            event(
                "response.output_text.delta",
                with_extra(json!({"delta": text}), &at),
            );
            event(
                "response.output_text.done",
                with_extra(json!({"text": text}), &at),
            );
        }
        event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }
    // Codex fails the turn unless response.completed carries the response's id.
    event("response.completed", json!({"response": response}));
    (out, usage, call_ids)
}

pub(super) fn encode_gemini(request: &Request, reply: &Reply, id: u64, ids: &[u64]) -> Encoded {
    let u = &reply.usage;
    let prompt = u.input + u.cache_read;
    let usage = json!({
        "promptTokenCount": prompt,
        "cachedContentTokenCount": u.cache_read,
        "candidatesTokenCount": u.output,
        "totalTokenCount": prompt + u.output,
    });
    let usage = with_extra(usage, &u.extra);
    let mut parts = Vec::new();
    if reply.text.is_some() || reply.calls.is_empty() {
        parts.push(json!({"text": reply.text.clone().unwrap_or_default()}));
    }
    let call_ids: Vec<String> = ids.iter().map(|n| format!("rt{n:08}")).collect();
    for (call, call_id) in reply.calls.iter().zip(&call_ids) {
        let name = split_mcp(&call.name).map_or(call.name.clone(), |(s, t)| format!("mcp_{s}_{t}"));
        let args = object_or_empty(&call.input);
        parts.push(json!({"functionCall": {"id": call_id, "name": name, "args": args}}));
    }
    // A text reply without finishReason "STOP" is retried by the CLI.
    let candidate =
        json!({"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0});
    let body = json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": request.model,
        "responseId": format!("rt{id:08}")});
    let body = if request.stream {
        format!("data: {body}\r\n\r\n")
    } else {
        body.to_string()
    };
    (body, usage, call_ids)
}
