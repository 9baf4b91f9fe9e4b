//! Running the real agent CLIs against a [`ModelServer`](crate::model_server::ModelServer): each helper
//! writes the CLI's configuration into a throwaway HOME and returns the command as data
//! ([`CliCommand`]), which a test may extend before running it.
//!
//! Depends only on the server's base URL, so it can live next to the server in any crate.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// Where the CLIs are: `$ROUNDTABLE_TEST_AGENT_CLIS` (the test command installs them from npm
/// at pinned versions into `target/agent-clis`), else that place in this checkout.
pub fn cli_bin_dir() -> PathBuf {
    std::env::var_os("ROUNDTABLE_TEST_AGENT_CLIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/agent-clis/node_modules/.bin")
        })
}

/// Where the ACP adapters of Claude Code and Codex are (`claude-agent-acp`, `codex-acp`):
/// beside the CLIs, in their prefix's `acp` folder.
pub fn acp_bin_dir() -> PathBuf {
    cli_bin_dir().join("../../acp/node_modules/.bin")
}

/// Whether the real CLIs are there. When they are not, a test of them fails with what to do,
/// unless `ROUNDTABLE_SKIP_REAL_CLIS=1` says to skip it (then this is `false`).
pub fn real_clis_present() -> bool {
    let dir = cli_bin_dir();
    if ["claude", "codex", "gemini", "opencode", "copilot"]
        .iter()
        .all(|cli| dir.join(cli).exists())
        && ["claude-agent-acp", "codex-acp"]
            .iter()
            .all(|adapter| acp_bin_dir().join(adapter).exists())
    {
        return true;
    }
    if std::env::var_os("ROUNDTABLE_SKIP_REAL_CLIS").is_some_and(|value| value == "1") {
        eprintln!("skipping: the real agent CLIs are not in {}", dir.display());
        return false;
    }
    panic!(
        "the real agent CLIs are not in {}: run ./scripts/test.sh (it installs them with npm), \
         point ROUNDTABLE_TEST_AGENT_CLIS at their node_modules/.bin, or set \
         ROUNDTABLE_SKIP_REAL_CLIS=1 to skip these tests",
        dir.display()
    );
}

/// A stdio MCP server for a CLI to start.
#[derive(Clone, Debug)]
pub struct McpServer {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// What a CLI run needs; the helpers write the CLI's config under `home`.
#[derive(Clone, Debug)]
pub struct CliSetup {
    /// The directory holding the `claude`, `codex` and `gemini` launchers.
    pub bin_dir: PathBuf,
    /// The throwaway HOME (it must exist).
    pub home: PathBuf,
    /// The working directory (it must exist).
    pub work: PathBuf,
    pub prompt: String,
    /// The model to ask for; each helper has a default.
    pub model: Option<String>,
    pub mcp_servers: Vec<McpServer>,
    pub extra_args: Vec<String>,
    pub extra_env: Vec<(String, String)>,
    /// More configuration: for Codex TOML appended to `config.toml`; for Claude a JSON object
    /// merged into `~/.claude/settings.json`; for Gemini into `~/.gemini/settings.json`.
    pub extra_config: String,
    /// Run every tool without asking (Claude `--dangerously-skip-permissions`, Codex
    /// `--dangerously-bypass-approvals-and-sandbox`, Gemini yolo); on by default.
    pub skip_permissions: bool,
}

impl CliSetup {
    pub fn new(
        home: impl Into<PathBuf>,
        work: impl Into<PathBuf>,
        prompt: impl Into<String>,
    ) -> CliSetup {
        CliSetup {
            bin_dir: cli_bin_dir(),
            home: home.into(),
            work: work.into(),
            prompt: prompt.into(),
            model: None,
            mcp_servers: Vec::new(),
            extra_args: Vec::new(),
            extra_env: Vec::new(),
            extra_config: String::new(),
            skip_permissions: true,
        }
    }
}

/// A CLI invocation as data: tests may add arguments or variables before running it.
#[derive(Clone, Debug)]
pub struct CliCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The whole environment, apart from `PATH`, which is inherited.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
}

/// How a CLI run ended.
#[derive(Clone, Debug)]
pub struct CliOutput {
    /// The exit code (`None` when killed by a signal or the timeout).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub timed_out: bool,
}

impl CliCommand {
    /// The command: a clean environment (`PATH` plus [`CliCommand::env`]), stdin from
    /// `/dev/null` (Codex waits for EOF otherwise), and a process group of its own.
    pub fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.program);
        command.args(&self.args).current_dir(&self.cwd).env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        roundtable_platform::process_group::start_own_group(&mut command);
        command.kill_on_drop(true);
        command
    }

    /// Runs the CLI to its end, or kills its process group after `timeout` (the output so far
    /// is kept): what a CLI that ran out of time started ends with it.
    pub async fn run(&self, timeout: Duration) -> std::io::Result<CliOutput> {
        async fn drain(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = tokio::io::AsyncReadExt::read_to_end(&mut pipe, &mut buf).await;
            }
            buf
        }
        let started = Instant::now();
        let mut child = self.command().spawn()?;
        let group = roundtable_platform::process_group::ProcessGroup::of(&child)?;
        let stdout = tokio::spawn(drain(child.stdout.take()));
        let stderr = tokio::spawn(drain(child.stderr.take()));
        let waited = tokio::time::timeout(timeout, child.wait()).await;
        match waited {
            Ok(_) => group.release(),
            Err(_) => group.end(),
        }
        let _ = child.kill().await;
        let elapsed = started.elapsed();
        // A process outside the group may still hold a pipe: wait for the rest only briefly.
        let text = |read: Result<Result<Vec<u8>, _>, _>| {
            String::from_utf8_lossy(&read.ok().and_then(Result::ok).unwrap_or_default())
                .into_owned()
        };
        let stdout = text(tokio::time::timeout(Duration::from_secs(2), stdout).await);
        let stderr = text(tokio::time::timeout(Duration::from_secs(2), stderr).await);
        let timed_out = waited.is_err();
        let code = match waited {
            Ok(status) => status?.code(),
            Err(_) => None,
        };
        Ok(CliOutput {
            code,
            stdout,
            stderr,
            elapsed,
            timed_out,
        })
    }
}

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message)
}

/// `base` with `extra` (JSON object text, may be empty) merged in, objects recursively.
fn merged_json(base: Value, extra: &str) -> std::io::Result<Value> {
    fn merge(base: &mut Value, extra: Value) {
        match (base, extra) {
            (Value::Object(base), Value::Object(extra)) => {
                for (k, v) in extra {
                    merge(base.entry(k).or_insert(Value::Null), v);
                }
            }
            (base, extra) => *base = extra,
        }
    }
    let mut base = base;
    if !extra.trim().is_empty() {
        let extra = serde_json::from_str(extra)
            .map_err(|e| invalid(format!("extra_config is not JSON: {e}")))?;
        merge(&mut base, extra);
    }
    Ok(base)
}

fn mcp_json(servers: &[McpServer], add: &Value) -> Value {
    let mut out = Map::new();
    for s in servers {
        let env: Map<String, Value> = s.env.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        let mut entry = json!({"command": s.command, "args": s.args, "env": env});
        if let (Some(entry), Some(add)) = (entry.as_object_mut(), add.as_object()) {
            entry.extend(add.clone());
        }
        out.insert(s.name.clone(), entry);
    }
    Value::Object(out)
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn base_env(setup: &CliSetup) -> Vec<(String, String)> {
    vec![
        ("HOME".into(), setup.home.display().to_string()),
        ("NO_COLOR".into(), "1".into()),
    ]
}

fn finish(
    program: &str,
    setup: &CliSetup,
    mut args: Vec<String>,
    mut env: Vec<(String, String)>,
) -> CliCommand {
    args.extend(setup.extra_args.iter().cloned());
    env.extend(setup.extra_env.iter().cloned());
    CliCommand {
        program: setup.bin_dir.join(program),
        args,
        env,
        cwd: setup.work.clone(),
    }
}

/// Claude Code: [`prepare_claude`], then [`claude_command`].
pub fn claude(base_url: &str, setup: &CliSetup) -> std::io::Result<CliCommand> {
    prepare_claude(setup)?;
    Ok(claude_command(base_url, setup))
}

/// Writes Claude Code's `~/.claude.json` (onboarding done, the trust dialog of `work`
/// accepted, `mcpServers`) and `~/.claude/settings.json`.
pub fn prepare_claude(setup: &CliSetup) -> std::io::Result<()> {
    let servers = mcp_json(&setup.mcp_servers, &json!({"type": "stdio"}));
    let project = json!({ setup.work.display().to_string(): {"hasTrustDialogAccepted": true} });
    let state = json!({"hasCompletedOnboarding": true, "mcpServers": servers, "projects": project});
    write(&setup.home.join(".claude.json"), &state.to_string())?;
    let settings = merged_json(json!({}), &setup.extra_config)?;
    write(
        &setup.home.join(".claude/settings.json"),
        &settings.to_string(),
    )
}

/// `claude -p PROMPT --output-format stream-json --verbose`. Env: `ANTHROPIC_BASE_URL`, a
/// dummy key, `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`, one retry, and `IS_SANDBOX=1` so
/// `--dangerously-skip-permissions` works as root.
/// What Claude Code logged of its MCP servers under `home` (its cache's `mcp-logs-*`
/// folders), each file headed by its path: for a test's failure message, since a server
/// that failed to start is otherwise only "failed" in the run's `init` line.
pub fn claude_mcp_logs(home: &Path) -> String {
    files_text(&home.join(".cache").join("claude-cli-nodejs"), |path| {
        path.parent()
            .and_then(Path::file_name)
            .is_some_and(|name| name.to_string_lossy().starts_with("mcp-logs-"))
    })
}

/// The text of every file under `dir` that `keep` keeps, each headed by its path, in path
/// order: what an agent logged, for a test's failure message.
pub fn files_text(dir: &Path, keep: impl Fn(&Path) -> bool) -> String {
    fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, keep, out);
            } else if keep(&path) {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &keep, &mut files);
    files.sort();
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            format!("== {}\n{text}", file.display())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn claude_command(base_url: &str, setup: &CliSetup) -> CliCommand {
    let mut args = vec!["-p".to_owned(), setup.prompt.clone()];
    args.extend(["--output-format", "stream-json", "--verbose"].map(String::from));
    if setup.skip_permissions {
        args.push("--dangerously-skip-permissions".into());
    }
    if let Some(model) = &setup.model {
        args.extend(["--model".to_owned(), model.clone()]);
    }
    let mut env = base_env(setup);
    for (k, v) in [
        ("ANTHROPIC_BASE_URL", base_url),
        ("ANTHROPIC_API_KEY", "sk-ant-model-server"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("CLAUDE_CODE_MAX_RETRIES", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("IS_SANDBOX", "1"),
    ] {
        env.push((k.into(), v.into()));
    }
    finish("claude", setup, args, env)
}

/// Codex: [`prepare_codex`], then [`codex_command`].
pub fn codex(base_url: &str, setup: &CliSetup) -> std::io::Result<CliCommand> {
    prepare_codex(base_url, setup)?;
    Ok(codex_command(setup))
}

/// Writes `~/.codex/config.toml` with a custom Responses provider at `BASE/v1` (no retries),
/// the model (default `gpt-5.5`, the one that takes plain function calls) and
/// `[mcp_servers.*]`.
pub fn prepare_codex(base_url: &str, setup: &CliSetup) -> std::io::Result<()> {
    let codex_home = setup.home.join(".codex");
    let model = setup.model.clone().unwrap_or_else(|| "gpt-5.5".into());
    let mut config = format!(
        "model = {model}\nmodel_provider = \"model_server\"\ncheck_for_update_on_startup = false\n\n\
         [model_providers.model_server]\nname = \"Model server\"\nbase_url = {url}\n\
         wire_api = \"responses\"\nenv_key = \"MODEL_SERVER_API_KEY\"\nrequest_max_retries = 0\n\
         stream_max_retries = 0\n",
        model = toml_string(&model),
        url = toml_string(&format!("{base_url}/v1")),
    );
    for s in &setup.mcp_servers {
        let args: Vec<String> = s.args.iter().map(|a| toml_string(a)).collect();
        let env: Vec<String> = s
            .env
            .iter()
            .map(|(k, v)| format!("{} = {}", toml_string(k), toml_string(v)))
            .collect();
        config.push_str(&format!(
            "\n[mcp_servers.{name}]\ncommand = {command}\nargs = [{args}]\nenv = {{ {env} }}\n",
            name = toml_string(&s.name),
            command = toml_string(&s.command),
            args = args.join(", "),
            env = env.join(", "),
        ));
    }
    if !setup.extra_config.is_empty() {
        config.push('\n');
        config.push_str(&setup.extra_config);
        config.push('\n');
    }
    write(&codex_home.join("config.toml"), &config)
}

/// `codex exec --json --skip-git-repo-check [--dangerously-bypass-approvals-and-sandbox]
/// PROMPT`. Env: `CODEX_HOME`, `MODEL_SERVER_API_KEY`.
pub fn codex_command(setup: &CliSetup) -> CliCommand {
    let mut args: Vec<String> = ["exec", "--json", "--skip-git-repo-check"]
        .map(String::from)
        .to_vec();
    if setup.skip_permissions {
        args.push("--dangerously-bypass-approvals-and-sandbox".into());
    }
    args.push(setup.prompt.clone());
    finish("codex", setup, args, codex_env(setup))
}

/// The environment Codex runs in against the server: `CODEX_HOME`, the provider's key.
pub fn codex_env(setup: &CliSetup) -> Vec<(String, String)> {
    let mut env = base_env(setup);
    env.push((
        "CODEX_HOME".into(),
        setup.home.join(".codex").display().to_string(),
    ));
    env.push(("MODEL_SERVER_API_KEY".into(), "sk-model-server".into()));
    env
}

/// Gemini CLI: [`prepare_gemini`], then [`gemini_command`].
pub fn gemini(base_url: &str, setup: &CliSetup) -> std::io::Result<CliCommand> {
    prepare_gemini(setup)?;
    Ok(gemini_command(base_url, setup))
}

/// Writes `~/.gemini/settings.json` (API-key auth, trusted `mcpServers`) and trusts `work`.
pub fn prepare_gemini(setup: &CliSetup) -> std::io::Result<()> {
    let servers = mcp_json(&setup.mcp_servers, &json!({"trust": true}));
    let settings =
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}}, "mcpServers": servers});
    let settings = merged_json(settings, &setup.extra_config)?;
    write(
        &setup.home.join(".gemini/settings.json"),
        &settings.to_string(),
    )?;
    let trusted = json!({ setup.work.display().to_string(): "TRUST_FOLDER" });
    write(
        &setup.home.join(".gemini/trustedFolders.json"),
        &trusted.to_string(),
    )
}

/// `gemini -m MODEL -p PROMPT -o stream-json [--approval-mode yolo]`; the model defaults to
/// `gemini-2.5-pro` (without `-m` the CLI first asks a router model). Env: `GEMINI_API_KEY`,
/// `GOOGLE_GEMINI_BASE_URL`, `GEMINI_CLI_TRUST_WORKSPACE=true`.
pub fn gemini_command(base_url: &str, setup: &CliSetup) -> CliCommand {
    let model = setup
        .model
        .clone()
        .unwrap_or_else(|| "gemini-2.5-pro".into());
    let mut args = vec![
        "-m".to_owned(),
        model,
        "-p".to_owned(),
        setup.prompt.clone(),
    ];
    args.extend(["-o", "stream-json"].map(String::from));
    if setup.skip_permissions {
        args.extend(["--approval-mode", "yolo"].map(String::from));
    }
    let mut env = base_env(setup);
    env.push(("GEMINI_API_KEY".into(), "model-server-key".into()));
    env.push(("GOOGLE_GEMINI_BASE_URL".into(), base_url.into()));
    env.push(("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()));
    finish("gemini", setup, args, env)
}

pub fn opencode(base_url: &str, setup: &CliSetup) -> std::io::Result<CliCommand> {
    prepare_opencode(base_url, setup)?;
    Ok(opencode_command(setup))
}

/// Writes `~/.config/opencode/opencode.json`: the Anthropic provider pointed at the model
/// server (OpenCode's AI SDK appends `/messages` to its `baseURL`), the model, no updates,
/// no sharing, `mcp` servers, and `extra_config` merged in. With `$schema`, which OpenCode
/// would otherwise write into the file at its first start.
pub fn prepare_opencode(base_url: &str, setup: &CliSetup) -> std::io::Result<()> {
    let mut servers = Map::new();
    for server in &setup.mcp_servers {
        let mut command = vec![server.command.clone()];
        command.extend(server.args.iter().cloned());
        let env: Map<String, Value> = server
            .env
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        servers.insert(
            server.name.clone(),
            json!({"type": "local", "command": command, "environment": env, "enabled": true}),
        );
    }
    let model = setup
        .model
        .clone()
        .unwrap_or_else(|| "claude-sonnet-4-5".into());
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"anthropic": {"options": {
            "baseURL": format!("{base_url}/v1"), "apiKey": "model-server-key",
        }}},
        "model": format!("anthropic/{model}"),
        "small_model": format!("anthropic/{model}"),
        "autoupdate": false,
        "share": "disabled",
        "mcp": servers,
    });
    let config = merged_json(config, &setup.extra_config)?;
    write(
        &setup.home.join(".config/opencode/opencode.json"),
        &serde_json::to_string_pretty(&config).unwrap_or_default(),
    )
}

/// `opencode run --format json PROMPT` (the prompt as one argument: OpenCode sends an
/// argument with spaces in quotes). Env: no update checks, no models.dev fetch.
pub fn opencode_command(setup: &CliSetup) -> CliCommand {
    let args = vec![
        "run".to_owned(),
        "--format".to_owned(),
        "json".to_owned(),
        setup.prompt.clone(),
    ];
    let mut env = base_env(setup);
    env.push(("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()));
    env.push(("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()));
    finish("opencode", setup, args, env)
}

/// Writes `~/.copilot/mcp-config.json` with `mcp_servers` (when there are any) and
/// `extra_config` merged in.
pub fn prepare_copilot(setup: &CliSetup) -> std::io::Result<()> {
    if setup.mcp_servers.is_empty() && setup.extra_config.is_empty() {
        return Ok(());
    }
    let servers = mcp_json(
        &setup.mcp_servers,
        &json!({"type": "local", "tools": ["*"]}),
    );
    let config = merged_json(json!({"mcpServers": servers}), &setup.extra_config)?;
    write(
        &setup.home.join(".copilot/mcp-config.json"),
        &serde_json::to_string_pretty(&config).unwrap_or_default(),
    )
}

/// `copilot -p PROMPT --output-format json [--allow-all-tools]` against the server with no
/// GitHub login: Copilot's own provider settings (`COPILOT_PROVIDER_*`, Anthropic's API at
/// the server's root, which Copilot appends `/v1/messages` to) and `COPILOT_OFFLINE`, which
/// keeps it from every other network call. The model defaults to `claude-sonnet-4-5`.
pub fn copilot_command(base_url: &str, setup: &CliSetup) -> CliCommand {
    let mut args = vec![
        "-p".to_owned(),
        setup.prompt.clone(),
        "--output-format".to_owned(),
        "json".to_owned(),
    ];
    if setup.skip_permissions {
        args.push("--allow-all-tools".into());
    }
    finish("copilot", setup, args, copilot_env(base_url, setup))
}

/// The environment GitHub Copilot CLI runs in against the server.
pub fn copilot_env(base_url: &str, setup: &CliSetup) -> Vec<(String, String)> {
    let model = setup
        .model
        .clone()
        .unwrap_or_else(|| "claude-sonnet-4-5".into());
    let mut env = base_env(setup);
    env.extend(
        [
            ("COPILOT_OFFLINE", "true"),
            ("COPILOT_PROVIDER_TYPE", "anthropic"),
            ("COPILOT_PROVIDER_BASE_URL", base_url),
            ("COPILOT_PROVIDER_API_KEY", "model-server-key"),
            ("COPILOT_MODEL", &model),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned())),
    );
    env
}

/// A stdio MCP server in Python (stdlib only) with one tool, `ping {text}` → `pong: TEXT`. Run
/// it as `python3 FILE LOG`: it appends every JSON-RPC message it receives to LOG.
pub const PING_MCP_SERVER_PY: &str = r#"import json, sys
log = open(sys.argv[1], "a")
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    log.write(json.dumps(msg) + "\n")
    log.flush()
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        version = msg.get("params", {}).get("protocolVersion", "2025-06-18")
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": version,
              "capabilities": {"tools": {}}, "serverInfo": {"name": "ping", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{"name": "ping",
              "description": "Replies pong with the given text.",
              "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                              "required": ["text"]}}]}})
    elif method == "tools/call":
        text = (msg.get("params", {}).get("arguments") or {}).get("text")
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text",
              "text": "pong: %s" % text}], "isError": False}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no method " + str(method)}})
"#;
