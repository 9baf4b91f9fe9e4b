//! `roundtable hook claude|codex --agent HANDLE …`: what an agent CLI runs at the moments of
//! a session it reports (see `roundtable_core::hooks`). It always exits 0 and never stalls a
//! session past its configured wait: a hook that cannot reach the hub says so on stderr and
//! lets the session go on.
//!
//! - Claude Code: `roundtable hook claude --agent dana/writer [EVENT]` with the hook's JSON on
//!   stdin; the answer, if any, on stdout in Claude Code's format.
//! - Codex: `notify = ["roundtable", "hook", "codex", "--agent", "dana/reviewer", "--then",
//!   PROGRAM…]`; Codex appends the turn's JSON as the last argument. The program the person
//!   had as `notify` before onboarding (after `--then`) runs first, with that JSON, as Codex
//!   would have run it.

use std::io::{Read as _, Write as _};

use roundtable_core::hooks::{self, HookSettings};
use roundtable_core::session_claims::SessionClaims;
use roundtable_core::work::events::Framework;
use roundtable_core::{Core, profile};

/// Runs a hook; returns the text to print on stdout.
pub async fn run(cli: &str, agent: &str, rest: &[String]) -> Option<String> {
    match cli {
        "claude" => claude(agent, rest.first().map(String::as_str)).await,
        "codex" => {
            codex(agent, rest).await;
            None
        }
        other => {
            eprintln!("roundtable hook: no hooks for {other:?} (claude or codex)");
            None
        }
    }
}

/// Claims a session for its agent (see `roundtable_core::session_claims`): the agent a
/// runner started it for, else this hook's. Whether the session is this hook's agent's.
fn claim(agent: &str, framework: Framework, session_id: &str) -> bool {
    let candidate = std::env::var(roundtable_core::runner::AGENT_ENV)
        .ok()
        .filter(|handle| !handle.is_empty())
        .unwrap_or_else(|| agent.to_owned());
    if session_id.is_empty() {
        return candidate == agent;
    }
    let claims = SessionClaims::beside(&profile::profiles_dir());
    match claims.claim(framework, session_id, &candidate) {
        Ok(owner) => owner == agent,
        Err(error) => {
            eprintln!("roundtable hook: cannot record whose session this is: {error}");
            candidate == agent
        }
    }
}

async fn open(agent: &str) -> Option<Core> {
    let base = profile::profiles_dir();
    let profile = match profile::Profile::load(&base, &profile::profile_name_for(agent)) {
        Ok(profile) => profile,
        Err(error) => {
            eprintln!("roundtable hook: {error}");
            return None;
        }
    };
    match Core::open(profile).await {
        Ok(core) => Some(core),
        Err(error) => {
            eprintln!("roundtable hook: {error}");
            None
        }
    }
}

async fn claude(agent: &str, event: Option<&str>) -> Option<String> {
    let mut input = Vec::new();
    if let Err(error) = std::io::stdin()
        .take(hooks::MAX_INPUT as u64 + 1)
        .read_to_end(&mut input)
    {
        eprintln!("roundtable hook: cannot read the hook's input: {error}");
        return None;
    }
    let hook = match hooks::parse_claude(&input, event) {
        Ok(hook) => hook,
        Err(error) => {
            eprintln!("roundtable hook: {error}");
            return None;
        }
    };
    let event_name = match &hook {
        hooks::ClaudeHook::SessionStart { .. } => "SessionStart",
        hooks::ClaudeHook::UserPromptSubmit { .. } => "UserPromptSubmit",
        hooks::ClaudeHook::Notification { .. } => "Notification",
        hooks::ClaudeHook::PermissionRequest { .. } => "PermissionRequest",
        hooks::ClaudeHook::Stop { .. } => "Stop",
        hooks::ClaudeHook::Other(_) => return None,
    };
    // The session is one agent's: another's hooks leave it alone.
    if !claim(agent, Framework::ClaudeCode, hook.session_id()) {
        return None;
    }
    // Under `roundtable run`, the runner brings the messages itself.
    if std::env::var_os(roundtable_core::runner::RUNNER_ENV).is_some()
        && matches!(event_name, "Stop" | "UserPromptSubmit")
    {
        return None;
    }
    let core = open(agent).await?;
    let settings = HookSettings::load(&core.profile().dir);
    core.on_claude_hook(hook, &settings)
        .await
        .claude_stdout(event_name)
}

async fn codex(agent: &str, rest: &[String]) {
    // [--then PROGRAM ARGS…] JSON
    let Some((payload, before)) = rest.split_last() else {
        eprintln!("roundtable hook codex: Codex gives the turn's JSON as the last argument");
        return;
    };
    if let Some(("--then", chained)) = before
        .split_first()
        .map(|(flag, rest)| (flag.as_str(), rest))
        && let Some((program, arguments)) = chained.split_first()
    {
        // The person's own notify program first, exactly as Codex would have run it.
        if let Err(error) = std::process::Command::new(program)
            .args(arguments)
            .arg(payload)
            .stdin(std::process::Stdio::null())
            .spawn()
        {
            eprintln!("roundtable hook codex: cannot run {program:?}: {error}");
        }
    }
    let notify = match hooks::parse_codex_notify(payload) {
        Ok(notify) => notify,
        Err(error) => {
            eprintln!("roundtable hook codex: {error}");
            return;
        }
    };
    if notify.is_hidden_thread() {
        return;
    }
    if !claim(
        agent,
        Framework::Codex,
        notify.thread.as_deref().unwrap_or_default(),
    ) {
        return;
    }
    if let Some(core) = open(agent).await {
        core.on_codex_notify(notify).await;
    }
}

/// Prints a hook's answer.
pub fn print(answer: Option<String>) {
    if let Some(answer) = answer {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{answer}");
        let _ = stdout.flush();
    }
}
