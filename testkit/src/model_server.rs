//! A scripted model server on a loopback port, speaking the three model APIs the agent CLIs
//! use (Anthropic Messages, OpenAI Responses, Gemini `generateContent`), so the real Claude
//! Code, Codex and Gemini CLIs can be driven end to end without the internet.
//!
//! Every model request is decoded into one neutral [`Request`] (the same shape for all three
//! APIs), handed to the test's [`Script`], and the neutral [`Reply`] it returns is encoded in
//! the API's own streaming format. [`ModelServer::requests`] keeps every request and the reply
//! sent, so a test can check what a CLI asked and compare the token counts in the CLI's own
//! logs with what the server sent ([`Exchange::usage`]).
//!
//! Tool names are normalized so one name works for every CLI ([`canonical_tool_name`]):
//!
//! | tool | Claude Code | Codex (Responses) | Gemini CLI | neutral name |
//! |---|---|---|---|---|
//! | MCP tool `T` of server `S` | `mcp__S__T` | namespace `mcp__S`, name `T` | `mcp_S_T` | `mcp__S__T` |
//! | other namespaced tool | — | namespace `N`, name `T` | — | `N__T` (`functions` → `T`) |
//! | built-in | `Bash`, `Write`… | `exec_command`, `apply_patch`… | `write_file`… | unchanged |
//!
//! Gemini splits `mcp_S_T` at the first `_` (as the CLI does), so a server name containing `_`
//! is not normalized faithfully there. Codex offers MCP tools behind `tool_search`: until a
//! `tool_search_output` names them, the request lists the namespace as `mcp__S__*`, which
//! [`Request::offers`] treats as a wildcard. Claude lists deferred tools (MCP ones included)
//! only by name in a system turn; they are in [`Request::tools`] too, and calling them
//! directly works.
//!
//! [`crate::agent_clis`] prepares a throwaway HOME for each CLI and returns the command to run
//! it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::task::{JoinHandle, JoinSet};

/// The largest request body accepted (Claude Code's requests run to a few hundred KB).
const MAX_BODY: usize = 64 << 20;

// ---------------------------------------------------------------------------------------
// The neutral view
// ---------------------------------------------------------------------------------------

/// Which wire API a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Api {
    /// Anthropic Messages (`POST /v1/messages`), used by Claude Code.
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`), used by Codex.
    OpenAiResponses,
    /// Gemini (`POST /v1beta/models/M:streamGenerateContent?alt=sse`, `:generateContent`).
    Gemini,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    /// Instructions inside the conversation: Claude's `role:"system"` turns, Codex's
    /// `developer` messages after the first other item.
    System,
    /// Tool results (Claude `tool_result` blocks, Codex `*_output` items, Gemini
    /// `functionResponse` parts).
    Tool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text(String),
    /// A tool call made earlier by the model; `name` is neutral.
    Call {
        id: String,
        name: String,
        input: Value,
    },
    /// A tool's result; `output` is its text (text blocks joined by newlines).
    Result {
        id: String,
        output: String,
    },
}

/// One turn; consecutive vendor messages or items of the same role are merged into one.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

/// A model request, the same shape for every API.
#[derive(Clone, Debug)]
pub struct Request {
    pub api: Api,
    pub model: String,
    /// The system prompt: Anthropic `system`, Responses `instructions` plus the `developer`
    /// messages before the first other item, Gemini `systemInstruction`.
    pub system: String,
    pub messages: Vec<Message>,
    /// Neutral names of the tools offered, deferred ones included (see the module docs).
    pub tools: Vec<String>,
    /// False for non-streaming calls (Gemini's router and summary `generateContent`).
    pub stream: bool,
    /// The request body as received.
    pub raw: Value,
}

impl Request {
    /// Whether the model is offered `tool` (a neutral name); an entry `prefix*` matches
    /// every name starting with `prefix`.
    pub fn offers(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| match t.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => t == tool,
        })
    }

    /// Whether the model already called `tool` (a neutral name) in this conversation.
    pub fn called(&self, tool: &str) -> bool {
        let mut parts = self.messages.iter().flat_map(|m| &m.parts);
        parts.any(|p| matches!(p, Part::Call { name, .. } if name == tool))
    }

    /// The newest input for the model: the last text of the last user turn, or the output
    /// of the last tool result, whichever came last (system turns are skipped). `None` when
    /// the conversation ends with the model's own turn.
    pub fn last_input(&self) -> Option<&str> {
        let message = self
            .messages
            .iter()
            .rev()
            .find(|m| m.role != Role::System)?;
        if message.role == Role::Assistant {
            return None;
        }
        message.parts.iter().rev().find_map(|p| match p {
            Part::Text(text) => Some(text.as_str()),
            Part::Result { output, .. } => Some(output.as_str()),
            Part::Call { .. } => None,
        })
    }

    /// The output of the newest tool result in the conversation.
    pub fn last_tool_output(&self) -> Option<&str> {
        let mut parts = self
            .messages
            .iter()
            .rev()
            .flat_map(|m| m.parts.iter().rev());
        parts.find_map(|p| match p {
            Part::Result { output, .. } => Some(output.as_str()),
            _ => None,
        })
    }

    /// Whether the last non-system turn is tool results (the model's calls came back).
    pub fn ends_with_tool_result(&self) -> bool {
        let last = self.messages.iter().rev().find(|m| m.role != Role::System);
        last.is_some_and(|m| m.role == Role::Tool)
    }
}

/// A tool call for the model to make; `name` is neutral (see the module docs). For a Codex
/// custom tool (`apply_patch`, code mode's `exec`) `input` is the freeform text.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub name: String,
    pub input: Value,
}

/// Token counts in Roundtable's terms: `input` is uncached input.
///
/// Each API gets them in its own fields (`extra` is merged over the top level of the vendor's
/// usage object, so it can add or override fields):
/// - Anthropic: `input_tokens`, `output_tokens`, `cache_read_input_tokens`,
///   `cache_creation_input_tokens` (5m + 1h) and `cache_creation.ephemeral_{5m,1h}_input_tokens`,
///   in both `message_start` and `message_delta`.
/// - Responses: `input_tokens` = input + cache_read + cache writes,
///   `input_tokens_details.cached_tokens` = cache_read, `.cache_write_tokens` = 5m + 1h (there
///   is no 1h field: it comes back as 5m), `output_tokens`.
/// - Gemini: `promptTokenCount` = input + cache_read, `cachedContentTokenCount`,
///   `candidatesTokenCount`, `totalTokenCount` (cache writes have no field and are dropped).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write_5m: u64,
    pub cache_write_1h: u64,
    pub extra: Value,
}

impl Usage {
    pub fn new(input: u64, output: u64) -> Usage {
        Usage {
            input,
            output,
            ..Usage::default()
        }
    }

    /// The sum of the token counts (`extra` is left out).
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage {
            input: self.input + other.input,
            output: self.output + other.output,
            cache_read: self.cache_read + other.cache_read,
            cache_write_5m: self.cache_write_5m + other.cache_write_5m,
            cache_write_1h: self.cache_write_1h + other.cache_write_1h,
            extra: Value::Null,
        }
    }
}

/// What the model answers: optional text, then tool calls, with the usage to report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    pub text: Option<String>,
    pub calls: Vec<Call>,
    pub usage: Usage,
}

impl Reply {
    /// A plain text answer (usage: 10 input, 5 output).
    pub fn text(text: impl Into<String>) -> Reply {
        Reply {
            text: Some(text.into()),
            calls: Vec::new(),
            usage: Usage::new(10, 5),
        }
    }

    /// One tool call (usage: 10 input, 5 output).
    pub fn call(name: impl Into<String>, input: Value) -> Reply {
        Reply {
            text: None,
            calls: Vec::new(),
            usage: Usage::new(10, 5),
        }
        .and_call(name, input)
    }

    /// Adds another tool call.
    pub fn and_call(mut self, name: impl Into<String>, input: Value) -> Reply {
        self.calls.push(Call {
            name: name.into(),
            input,
        });
        self
    }

    pub fn with_usage(mut self, usage: Usage) -> Reply {
        self.usage = usage;
        self
    }
}

/// Decides the model's reply to each request. It runs on the server's task: keep it quick.
/// A panic becomes an HTTP 400 carrying its message (a 400 is not retried by the CLIs).
pub type Script = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// Wraps a closure as a [`Script`].
pub fn script(f: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Script {
    Arc::new(f)
}

/// A script answering the streaming requests with `replies` in order, then repeating the
/// last; non-streaming calls (Gemini's router and summaries) get the text `{}`.
pub fn sequence(replies: Vec<Reply>) -> Script {
    let next = AtomicUsize::new(0);
    script(move |request| {
        if !request.stream {
            return Reply::text("{}");
        }
        let n = next.fetch_add(1, Ordering::SeqCst);
        let reply = replies.get(n).or(replies.last());
        reply.cloned().unwrap_or_else(|| Reply::text(""))
    })
}

/// One HTTP request the server received and what it sent back.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The decoded model request (`None` for other requests and for undecodable ones).
    pub request: Option<Request>,
    /// The script's reply, as encoded (`None` when the script was not asked or panicked).
    pub reply: Option<Reply>,
    /// The ids generated for `reply.calls`, in order.
    pub call_ids: Vec<String>,
    pub status: u16,
    /// The vendor usage object exactly as sent.
    pub usage_sent: Option<Value>,
    /// The response body as sent (SSE text or JSON).
    pub response: String,
}

impl Exchange {
    /// The token counts sent, read back from [`Exchange::usage_sent`] with Roundtable's
    /// mapping (so a field overridden through `extra` counts as sent).
    pub fn usage(&self) -> Option<Usage> {
        let api = self.request.as_ref()?.api;
        Some(decode_usage(api, self.usage_sent.as_ref()?))
    }

    fn new(status: u16, body: &Value) -> Exchange {
        Exchange {
            method: String::new(),
            path: String::new(),
            request: None,
            reply: None,
            call_ids: Vec::new(),
            status,
            usage_sent: None,
            response: body.to_string(),
        }
    }

    fn error(api: Option<Api>, status: u16, message: &str) -> Exchange {
        let body = match api {
            Some(Api::Anthropic) => json!({"type": "error",
                "error": {"type": "invalid_request_error", "message": message}}),
            Some(Api::Gemini) => json!({"error": {"code": status, "message": message,
                "status": if status == 404 { "NOT_FOUND" } else { "INVALID_ARGUMENT" }}}),
            _ => json!({"error": {"message": message, "type": "invalid_request_error"}}),
        };
        Exchange::new(status, &body)
    }
}

/// Reads a vendor usage object back into neutral counts, the way Roundtable's scanner does.
pub fn decode_usage(api: Api, u: &Value) -> Usage {
    let n = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
    let mut usage = Usage::default();
    match api {
        Api::Anthropic => {
            usage = Usage::new(n(u, "input_tokens"), n(u, "output_tokens"));
            usage.cache_read = n(u, "cache_read_input_tokens");
            match u.get("cache_creation") {
                Some(split) => {
                    usage.cache_write_5m = n(split, "ephemeral_5m_input_tokens");
                    usage.cache_write_1h = n(split, "ephemeral_1h_input_tokens");
                }
                None => usage.cache_write_5m = n(u, "cache_creation_input_tokens"),
            }
        }
        Api::OpenAiResponses => {
            let details = u.get("input_tokens_details").unwrap_or(&Value::Null);
            let total = n(u, "input_tokens");
            usage.cache_read = n(details, "cached_tokens").min(total);
            usage.cache_write_5m = n(details, "cache_write_tokens").min(total - usage.cache_read);
            usage.input = total - usage.cache_read - usage.cache_write_5m;
            usage.output = n(u, "output_tokens");
        }
        Api::Gemini => {
            let prompt = n(u, "promptTokenCount");
            usage.cache_read = n(u, "cachedContentTokenCount").min(prompt);
            usage.input = prompt - usage.cache_read + n(u, "toolUsePromptTokenCount");
            usage.output = n(u, "candidatesTokenCount") + n(u, "thoughtsTokenCount");
        }
    }
    usage
}

/// The neutral name of a tool as an API names it (`namespace` is Codex's, else empty).
pub fn canonical_tool_name(api: Api, namespace: &str, name: &str) -> String {
    match api {
        Api::OpenAiResponses if !namespace.is_empty() && namespace != "functions" => {
            format!("{namespace}__{name}")
        }
        Api::Gemini if !name.starts_with("mcp__") => match name.strip_prefix("mcp_") {
            Some(rest) => match rest.split_once('_') {
                Some((server, tool)) => format!("mcp__{server}__{tool}"),
                None => name.to_owned(),
            },
            None => name.to_owned(),
        },
        _ => name.to_owned(),
    }
}

/// Splits a neutral MCP name `mcp__S__T` into `("S", "T")`.
fn split_mcp(name: &str) -> Option<(&str, &str)> {
    let (server, tool) = name.strip_prefix("mcp__")?.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

// ---------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------

struct State {
    script: Script,
    log: Mutex<Vec<Exchange>>,
    ids: AtomicU64,
}

impl State {
    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// A model server on `127.0.0.1`; it stops when dropped.
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl ModelServer {
    /// Binds a free loopback port and serves `script` until dropped. Needs a tokio runtime.
    pub async fn start(script: Script) -> ModelServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding a loopback port");
        let addr = listener.local_addr().expect("the bound address");
        let log = Mutex::new(Vec::new());
        let state = Arc::new(State {
            script,
            log,
            ids: AtomicU64::new(0),
        });
        let serving = state.clone();
        let task = tokio::spawn(async move {
            // Dropping the set (when this task is aborted) aborts every connection.
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        let state = serving.clone();
                        let service = service_fn(move |request| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(handle(&state, request).await) }
                        });
                        let connection = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service);
                        connections.spawn(connection);
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        ModelServer { addr, state, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (no trailing slash, no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far and the reply sent, in order.
    pub fn requests(&self) -> Vec<Exchange> {
        self.state
            .log
            .lock()
            .map(|log| log.clone())
            .unwrap_or_default()
    }

    /// The exchanges that were model calls answered by the script.
    pub fn model_calls(&self) -> Vec<Exchange> {
        let mut all = self.requests();
        all.retain(|e| e.reply.is_some());
        all
    }

    /// The sum of the token counts sent ([`Exchange::usage`]).
    pub fn usage_sent(&self) -> Usage {
        let all = self.requests();
        all.iter()
            .filter_map(Exchange::usage)
            .fold(Usage::default(), |sum, u| sum.plus(&u))
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(state: &State, request: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let body = Limited::new(request.into_body(), MAX_BODY).collect().await;
    let mut exchange = match body {
        Err(e) => Exchange::error(None, 400, &format!("could not read the body: {e}")),
        Ok(body) => answer(state, &method, uri.path(), &body.to_bytes()),
    };
    exchange.method = method.to_string();
    exchange.path = uri
        .path_and_query()
        .map_or(uri.path(), |p| p.as_str())
        .to_owned();
    let sse = exchange.status == 200 && exchange.request.as_ref().is_some_and(|r| r.stream);
    let response = hyper::Response::builder()
        .status(StatusCode::from_u16(exchange.status).unwrap_or(StatusCode::BAD_REQUEST))
        .header(
            "content-type",
            if sse {
                "text/event-stream"
            } else {
                "application/json"
            },
        )
        .header("cache-control", "no-cache")
        .header("request-id", format!("req_rt{:08}", state.next_id()))
        .body(Full::new(Bytes::from(exchange.response.clone())))
        .unwrap_or_default();
    if let Ok(mut log) = state.log.lock() {
        log.push(exchange);
    }
    response
}

fn answer(state: &State, method: &Method, path: &str, body: &[u8]) -> Exchange {
    let estimate = 1 + body.len() / 4;
    let (api, stream) = match *method {
        Method::HEAD => return Exchange::new(200, &json!({})),
        Method::GET if path.ends_with("/models") => {
            return Exchange::new(200, &json!({"object": "list", "data": [], "models": []}));
        }
        Method::POST if path.starts_with("/v1/messages/count_tokens") => {
            return Exchange::new(200, &json!({"input_tokens": estimate}));
        }
        Method::POST if path.ends_with(":countTokens") => {
            return Exchange::new(200, &json!({"totalTokens": estimate}));
        }
        Method::POST if path.starts_with("/v1/messages") => (Api::Anthropic, true),
        Method::POST if path.ends_with("/responses") => (Api::OpenAiResponses, true),
        Method::POST if path.ends_with(":streamGenerateContent") => (Api::Gemini, true),
        Method::POST if path.ends_with(":generateContent") => (Api::Gemini, false),
        _ => return Exchange::error(None, 404, &format!("no route for {method} {path}")),
    };
    let raw: Value = match serde_json::from_slice(body) {
        Ok(raw) => raw,
        Err(e) => return Exchange::error(Some(api), 400, &format!("the body is not JSON: {e}")),
    };
    let parsed = match api {
        Api::Anthropic => parse_anthropic(raw),
        Api::OpenAiResponses => parse_responses(raw),
        Api::Gemini => parse_gemini(raw, path, stream),
    };
    let request = match parsed {
        Ok(request) => request,
        Err(e) => return Exchange::error(Some(api), 400, &e),
    };
    let script = state.script.clone();
    let mut exchange = match std::panic::catch_unwind(AssertUnwindSafe(|| script(&request))) {
        Ok(reply) => encode(state, &request, reply),
        Err(panic) => {
            let message = panic.downcast_ref::<&str>().map(|s| (*s).to_owned());
            let message = message.or_else(|| panic.downcast_ref::<String>().cloned());
            let message = format!("the script panicked: {}", message.unwrap_or_default());
            Exchange::error(Some(api), 400, &message)
        }
    };
    exchange.request = Some(request);
    exchange
}

// ---------------------------------------------------------------------------------------
// Decoding requests
// ---------------------------------------------------------------------------------------

/// The elements of the array `v[key]` (none when it is missing or not an array).
fn items<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The text of a string, or of an array of blocks with `text` fields, joined by newlines;
/// anything else as JSON.
fn text_of(v: Option<&Value>) -> String {
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

fn push(messages: &mut Vec<Message>, role: Role, part: Part) {
    match messages.last_mut() {
        Some(last) if last.role == role => last.parts.push(part),
        _ => messages.push(Message {
            role,
            parts: vec![part],
        }),
    }
}

fn call(id: &str, name: String, input: Value) -> Part {
    Part::Call {
        id: id.to_owned(),
        name,
        input,
    }
}

fn result(id: &str, output: String) -> Part {
    Part::Result {
        id: id.to_owned(),
        output,
    }
}

fn add_tool(tools: &mut Vec<String>, name: String) {
    if !name.is_empty() && !tools.contains(&name) {
        tools.push(name);
    }
}

/// The names listed after `header`, one a line (`- ` and `: description` stripped) up to
/// the first line that is not a name.
fn listed_names<'a>(text: &'a str, header: &str) -> Vec<&'a str> {
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

fn new_request(
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

fn parse_anthropic(raw: Value) -> Result<Request, String> {
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
struct CodexTool {
    neutral: String,
    namespace: String,
    name: String,
    kind: String,
}

/// Codex's tool definitions: `tools`, plus `additional_tools` (code mode) and
/// `tool_search_output` (loaded deferred tools) input items.
fn codex_tools(raw: &Value) -> Vec<CodexTool> {
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

fn parse_responses(raw: Value) -> Result<Request, String> {
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

fn parse_gemini(raw: Value, path: &str, stream: bool) -> Result<Request, String> {
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

// ---------------------------------------------------------------------------------------
// Encoding replies
// ---------------------------------------------------------------------------------------

/// `base` with `extra`'s top-level keys merged over it.
fn with_extra(mut base: Value, extra: &Value) -> Value {
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    base
}

/// One SSE event, with its `event:` line (Claude Code needs it).
fn sse(out: &mut String, event: &str, data: &Value) {
    out.push_str(&format!("event: {event}\ndata: {data}\n\n"));
}

fn object_or_empty(input: &Value) -> Value {
    if input.is_null() {
        json!({})
    } else {
        input.clone()
    }
}

fn encode(state: &State, request: &Request, reply: Reply) -> Exchange {
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

fn encode_anthropic(request: &Request, reply: &Reply, id: u64, ids: &[u64]) -> Encoded {
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

fn encode_responses(request: &Request, reply: &Reply, id: u64, ids: &[u64]) -> Encoded {
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

fn encode_gemini(request: &Request, reply: &Reply, id: u64, ids: &[u64]) -> Encoded {
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
