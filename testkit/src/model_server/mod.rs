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

mod decode;
mod encode;

use decode::*;
use encode::*;

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
