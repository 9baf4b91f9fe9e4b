//! The records of a transcript, as far as they are read. Every field is optional and
//! lenient (`work::lenient`, and below for the kinds of its own); fields not named here are skipped without being decoded.

use super::*;

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Record<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: LenientStr<'a>,
    #[serde(rename = "sessionId", borrow)]
    pub(super) session_id: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) cwd: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) timestamp: LenientStr<'a>,
    #[serde(rename = "isSidechain")]
    pub(super) is_sidechain: LenientBool,
    #[serde(rename = "agentId", borrow)]
    pub(super) agent_id: LenientStr<'a>,
    #[serde(rename = "requestId", borrow)]
    pub(super) request_id: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) message: Lenient<Message<'a>>,
    #[serde(rename = "toolUseResult", borrow)]
    pub(super) tool_use_result: ToolUseResult<'a>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Message<'a> {
    #[serde(borrow)]
    pub(super) id: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) model: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) content: Blocks<'a>,
    #[serde(borrow)]
    pub(super) usage: Lenient<Usage<'a>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Usage<'a> {
    pub(super) input_tokens: LenientCount,
    pub(super) output_tokens: LenientCount,
    pub(super) cache_creation_input_tokens: LenientCount,
    pub(super) cache_read_input_tokens: LenientCount,
    pub(super) cache_creation: Lenient<CacheCreation>,
    /// `"fast"` in fast mode.
    #[serde(borrow)]
    pub(super) speed: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) inference_geo: LenientStr<'a>,
    pub(super) server_tool_use: Lenient<ServerToolUse>,
    /// The steps of the request; an advisor's (`advisor_message`) ran on its own model and
    /// is billed at its price, apart from the request's own tokens.
    #[serde(borrow)]
    pub(super) iterations: Iterations<'a>,
}

#[derive(Default)]
pub(super) struct Iterations<'a>(pub(super) Vec<Iteration<'a>>);

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Iteration<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) model: LenientStr<'a>,
    pub(super) input_tokens: LenientCount,
    pub(super) output_tokens: LenientCount,
    pub(super) cache_creation_input_tokens: LenientCount,
    pub(super) cache_read_input_tokens: LenientCount,
    pub(super) cache_creation: Lenient<CacheCreation>,
}

impl Iteration<'_> {
    pub(super) fn tokens(&self) -> TokenCounts {
        split_cache_writes(
            self.input_tokens.get(),
            self.output_tokens.get(),
            self.cache_creation_input_tokens.get(),
            self.cache_read_input_tokens.get(),
            self.cache_creation.0.as_ref(),
        )
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct ServerToolUse {
    pub(super) web_search_requests: LenientCount,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct CacheCreation {
    pub(super) ephemeral_5m_input_tokens: Option<LenientCount>,
    pub(super) ephemeral_1h_input_tokens: Option<LenientCount>,
}

impl Usage<'_> {
    /// What the request is billed for besides its tokens.
    pub(super) fn billing(&self) -> Billing {
        Billing {
            fast: self.speed.as_str() == Some("fast"),
            service_tier: None,
            geo: self
                .inference_geo
                .as_str()
                .filter(|geo| !geo.is_empty())
                .map(str::to_owned),
            web_searches: self
                .server_tool_use
                .0
                .as_ref()
                .map_or(0, |tools| tools.web_search_requests.get()),
        }
    }

    pub(super) fn tokens(&self) -> TokenCounts {
        split_cache_writes(
            self.input_tokens.get(),
            self.output_tokens.get(),
            self.cache_creation_input_tokens.get(),
            self.cache_read_input_tokens.get(),
            self.cache_creation.0.as_ref(),
        )
    }
}

/// Tokens of a usage block, cache writes split by how long they are kept (all five-minute
/// without a breakdown).
pub(super) fn split_cache_writes(
    input: u64,
    output: u64,
    cache_write: u64,
    cache_read: u64,
    breakdown: Option<&CacheCreation>,
) -> TokenCounts {
    let breakdown = breakdown.filter(|cache| {
        cache.ephemeral_5m_input_tokens.is_some() || cache.ephemeral_1h_input_tokens.is_some()
    });
    let (cache_write_5m, cache_write_1h) = match breakdown {
        Some(cache) => (
            cache.ephemeral_5m_input_tokens.unwrap_or_default().get(),
            cache.ephemeral_1h_input_tokens.unwrap_or_default().get(),
        ),
        None => (cache_write, 0),
    };
    TokenCounts {
        input,
        output,
        cache_write_5m,
        cache_write_1h,
        cache_read,
    }
}

/// The content blocks this parser acts on: `tool_use` and `tool_result` (text and
/// thinking blocks are read past).
#[derive(Default)]
pub(super) struct Blocks<'a>(pub(super) Vec<Block<'a>>);

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Block<'a> {
    #[serde(rename = "type")]
    pub(super) kind: BlockKind,
    #[serde(borrow)]
    pub(super) id: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) name: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) input: Lenient<ToolInput<'a>>,
    #[serde(borrow)]
    pub(super) tool_use_id: LenientStr<'a>,
    pub(super) is_error: LenientBool,
    /// A tool result's text, read only for the id a `TaskCreate` got.
    pub(super) content: CreatedTask,
}

/// The id in a `TaskCreate` result's text (`Task #3 created successfully: …`): where a
/// transcript's `toolUseResult` does not carry it, the text still does.
#[derive(Default)]
pub(super) struct CreatedTask(pub(super) Option<String>);

/// `Task #N created successfully…` → `N`.
pub(super) fn created_task_id(text: &str) -> Option<String> {
    let rest = text.trim_start().strip_prefix("Task #")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && rest[digits..].starts_with(" created")).then(|| rest[..digits].to_owned())
}

/// Whether `key` (`"name":`) is in `line` at most once and, where it is, says `value`
/// (written as JSON writes a string that needs no escapes); with no value known, it must
/// be absent.
pub(super) fn names_once(
    line: &[u8],
    key: &memchr::memmem::Finder<'_>,
    value: Option<&str>,
) -> bool {
    let mut found = key.find_iter(line);
    let Some(at) = found.next() else {
        return true;
    };
    let Some(value) = value else {
        return false;
    };
    if found.next().is_some()
        || value
            .bytes()
            .any(|byte| byte == b'"' || byte == b'\\' || byte < 0x20)
    {
        return false;
    }
    let rest = &line[at + key.needle().len()..];
    rest.first() == Some(&b'"')
        && rest[1..].starts_with(value.as_bytes())
        && rest.get(1 + value.len()) == Some(&b'"')
}

/// A text block of a tool result's content.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct ResultText {
    pub(super) text: CreatedTaskText,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum BlockKind {
    ToolUse,
    ToolResult,
    #[default]
    Other,
}

/// The input keys of every tool read here, in one struct (the tool's name may come after
/// its input in the JSON).
#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct ToolInput<'a> {
    #[serde(borrow)]
    pub(super) todos: Todos<'a>,
    #[serde(borrow)]
    pub(super) file_path: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) notebook_path: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) subject: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) status: LenientStr<'a>,
    // Claude Code repairs `id`/`task_id` to `taskId` and `active_form` to `activeForm`
    // before running the tool, but the transcript keeps what the model wrote.
    #[serde(rename = "taskId", borrow)]
    pub(super) task_id_camel: LenientStr<'a>,
    #[serde(rename = "task_id", borrow)]
    pub(super) task_id_snake: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) id: LenientStr<'a>,
    #[serde(rename = "activeForm", borrow)]
    pub(super) active_form_camel: LenientStr<'a>,
    #[serde(rename = "active_form", borrow)]
    pub(super) active_form_snake: LenientStr<'a>,
}

impl ToolInput<'_> {
    pub(super) fn task_id(&self) -> Option<&str> {
        self.task_id_camel
            .as_str()
            .or(self.id.as_str())
            .or(self.task_id_snake.as_str())
    }

    pub(super) fn active_form(&self) -> Option<&str> {
        self.active_form_camel
            .as_str()
            .or(self.active_form_snake.as_str())
    }
}

/// `TodoWrite`'s `todos`: `Some` only when it is an array.
#[derive(Default)]
pub(super) struct Todos<'a>(pub(super) Option<Vec<Todo<'a>>>);

/// A `TodoWrite` item: `{content, status, activeForm}`, or before mid-2025
/// `{id, content, status, priority}`.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Todo<'a> {
    #[serde(borrow)]
    pub(super) id: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) content: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) status: LenientStr<'a>,
    #[serde(rename = "activeForm", borrow)]
    pub(super) active_form: LenientStr<'a>,
}

impl Todo<'_> {
    pub(super) fn to_task(&self) -> TaskItem {
        TaskItem {
            id: self.id.as_str().map(str::to_owned),
            title: self.content.as_str().unwrap_or_default().to_owned(),
            status: self
                .status
                .as_str()
                .and_then(task_status)
                .unwrap_or(TaskStatus::Pending),
            active_form: self.active_form.as_str().map(str::to_owned),
        }
    }
}

/// What a record's `toolUseResult` tells of its tool's outcome: an error string, a
/// `success: false`, or the id a `TaskCreate` got.
#[derive(Default)]
pub(super) struct ToolUseResult<'a> {
    pub(super) error_text: bool,
    pub(super) success: Option<bool>,
    pub(super) task_id: LenientStr<'a>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct ToolUseResultObject<'a> {
    pub(super) success: LenientBool,
    #[serde(borrow)]
    pub(super) task: Lenient<TaskRef<'a>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct TaskRef<'a> {
    #[serde(borrow)]
    pub(super) id: LenientStr<'a>,
}

/// A file of the Task tools' store: `{id, subject, description, activeForm, status, …}`.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct TaskFile<'a> {
    #[serde(borrow)]
    pub(super) id: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) subject: LenientStr<'a>,
    #[serde(borrow)]
    pub(super) status: LenientStr<'a>,
    #[serde(rename = "activeForm", borrow)]
    pub(super) active_form: LenientStr<'a>,
}

// How the records' own kinds are read leniently.

impl LenientValue<'_> for BlockKind {
    fn from_str(value: &str) -> Self {
        match value {
            "tool_use" => BlockKind::ToolUse,
            "tool_result" => BlockKind::ToolResult,
            _ => BlockKind::Other,
        }
    }
}
deserialize_leniently!(BlockKind);

impl<'de: 'a, 'a> LenientValue<'de> for Blocks<'a> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut blocks = Vec::new();
        while let Some(block) = seq.next_element::<Lenient<Block<'a>>>()? {
            if let Some(block) = block.0.filter(|block| block.kind != BlockKind::Other) {
                blocks.push(block);
            }
        }
        Ok(Blocks(blocks))
    }
}
deserialize_leniently!(Blocks<'a>);

impl<'de: 'a, 'a> LenientValue<'de> for Iterations<'a> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut iterations = Vec::new();
        while let Some(iteration) = seq.next_element::<Lenient<Iteration<'a>>>()? {
            iterations.extend(iteration.0);
        }
        Ok(Iterations(iterations))
    }
}
deserialize_leniently!(Iterations<'a>);

impl<'de> Deserialize<'de> for CreatedTask {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A result's content is mostly long text (a file, a command's output): it is
        // skipped as raw JSON, never unescaped, unless it may say `Task #N created`.
        let raw = <&'de serde_json::value::RawValue>::deserialize(deserializer)?;
        if memchr::memmem::find(raw.get().as_bytes(), b"Task #").is_none() {
            return Ok(CreatedTask(None));
        }
        Ok(serde_json::from_str::<CreatedTaskText>(raw.get())
            .map(|text| text.0)
            .unwrap_or_default())
    }
}

/// A result's content that may hold a created task's id, read leniently.
#[derive(Default)]
pub(super) struct CreatedTaskText(pub(super) CreatedTask);

impl<'de> LenientValue<'de> for CreatedTaskText {
    fn from_str(value: &str) -> Self {
        CreatedTaskText(CreatedTask(created_task_id(value)))
    }

    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut found = None;
        while let Some(block) = seq.next_element::<Lenient<ResultText>>()? {
            if found.is_none() {
                found = block.0.and_then(|block| block.text.0.0);
            }
        }
        Ok(CreatedTaskText(CreatedTask(found)))
    }
}
deserialize_leniently!(CreatedTaskText);

impl<'de: 'a, 'a> LenientValue<'de> for Todos<'a> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut todos = Vec::new();
        while let Some(todo) = seq.next_element::<Lenient<Todo<'a>>>()? {
            todos.extend(todo.0);
        }
        Ok(Todos(Some(todos)))
    }
}
deserialize_leniently!(Todos<'a>);

impl<'de: 'a, 'a> LenientValue<'de> for ToolUseResult<'a> {
    fn from_str(value: &str) -> Self {
        ToolUseResult {
            error_text: is_error_text(value),
            ..ToolUseResult::default()
        }
    }

    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let object = ToolUseResultObject::deserialize(MapAccessDeserializer::new(map))?;
        Ok(ToolUseResult {
            error_text: false,
            success: object.success.0,
            task_id: object.task.0.map(|task| task.id).unwrap_or_default(),
        })
    }
}
deserialize_leniently!(ToolUseResult<'a>);
