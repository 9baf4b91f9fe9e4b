//! `roundtable hook claude|codex|gemini|opencode|copilot --agent HANDLE …`: what an agent CLI
//! runs at the moments of a session it reports (see `roundtable_core::hooks`). It always exits 0 and
//! never stalls a session past its configured wait: a hook that cannot reach the hub says so
//! on stderr and lets the session go on.
//!
//! - Claude Code, Codex and Gemini CLI: `roundtable hook CLI --agent dana/writer [EVENT]` with
//!   the hook's JSON on stdin; the answer, if any, on stdout in the CLI's format. OpenCode's
//!   plugin of ours (`roundtable hook opencode …`) writes and reads Claude Code's shapes.
//!   GitHub Copilot CLI gives its own camelCase payloads, which name no event: its hooks
//!   give the event on the command line, and read flat answers.
//! - Codex's `notify` (onboarding before Codex had hooks): `notify = ["roundtable", "hook",
//!   "codex", "--agent", "dana/reviewer", "--then", PROGRAM…]`; Codex appends the turn's JSON
//!   as the last argument. The program the person had as `notify` before onboarding (after
//!   `--then`) runs first, with that JSON, as Codex would have run it.
//! - `roundtable hook codex-wake --agent HANDLE THREAD [ROLLOUT]`: what a Codex session's
//!   turn end leaves running (detached) to hand it later messages (see
//!   `Core::wake_codex`).

use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use roundtable_core::hook_settings::HookSettings;
use roundtable_core::hooks::{self, HookContext, HookEvent, HookReply};
use roundtable_core::local_agents::AgentCli;
use roundtable_core::local_agents::detect::{find_executable, search_dirs};
use roundtable_core::session_claims::SessionClaims;
use roundtable_core::{Core, profile};

/// Runs a hook; returns the text to print on stdout.
pub async fn run(cli: &str, agent: &str, rest: &[String]) -> Option<String> {
    match cli {
        "claude" => stdin_hook(AgentCli::Claude, agent, rest.first().map(String::as_str)).await,
        "gemini" => stdin_hook(AgentCli::Gemini, agent, rest.first().map(String::as_str)).await,
        // Roundtable's OpenCode plugin writes the hook's JSON as Claude Code's hooks do.
        "opencode" => stdin_hook(AgentCli::Opencode, agent, rest.first().map(String::as_str)).await,
        // Copilot's hooks are told their event on the command line (its payloads name none).
        "copilot" => stdin_hook(AgentCli::Copilot, agent, rest.first().map(String::as_str)).await,
        // So are Antigravity's, which always get JSON back: its hooks may read anything
        // else as a failure.
        "agy" | "antigravity" => {
            let event = rest.first().map(String::as_str);
            stdin_hook(AgentCli::Antigravity, agent, event)
                .await
                .or_else(|| {
                    HookReply::Nothing.stdout_for(AgentCli::Antigravity, event.unwrap_or_default())
                })
        }
        "codex"
            if rest
                .last()
                .is_some_and(|last| last.trim_start().starts_with('{')) =>
        {
            codex_notify(agent, rest).await;
            None
        }
        "codex" => stdin_hook(AgentCli::Codex, agent, rest.first().map(String::as_str)).await,
        "codex-wake" => {
            codex_wake(agent, rest).await;
            None
        }
        other => {
            eprintln!(
                "roundtable hook: no hooks for {other:?} (claude, codex, gemini, opencode, copilot or agy)"
            );
            None
        }
    }
}

/// Claims a session for its agent (see `roundtable_core::session_claims`): the agent a
/// runner started it for, else this hook's. Whether the session is this hook's agent's.
fn claim(agent: &str, cli: AgentCli, session_id: &str) -> bool {
    let candidate = std::env::var(roundtable_core::runner::AGENT_ENV)
        .ok()
        .filter(|handle| !handle.is_empty())
        .unwrap_or_else(|| agent.to_owned());
    let Some(framework) = cli.work_framework() else {
        return candidate == agent;
    };
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
    let profile = match profile::load_agent(&base, agent) {
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

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Whether this hook runs under `codex exec` (a run with no person), by its ancestors.
fn under_codex_exec() -> bool {
    roundtable_core::agent_session::ancestors()
        .iter()
        .take(6)
        .any(|ancestor| {
            // The program itself is Codex (`codex`, `codex.exe`, its native binary).
            let is_codex = ancestor.argv.first().is_some_and(|program| {
                roundtable_core::agent_session::agent_cli_of(std::slice::from_ref(program))
                    == Some("Codex")
            });
            is_codex && codex_subcommand(&ancestor.argv[1..]) == Some("exec")
        })
}

/// The arguments of the GitHub Copilot CLI running this hook (its nearest Copilot ancestor).
fn copilot_arguments() -> Option<Vec<String>> {
    roundtable_core::agent_session::ancestors()
        .into_iter()
        .take(6)
        .find(|ancestor| {
            roundtable_core::agent_session::agent_cli_of(&ancestor.argv)
                == Some(AgentCli::Copilot.display_name())
        })
        .map(|ancestor| ancestor.argv.into_iter().skip(1).collect())
}

/// The subcommand of a `codex` command line (its arguments after the program), read as
/// Codex's parser reads it: options that take a value skip it; `e` is `exec`.
fn codex_subcommand(args: &[String]) -> Option<&str> {
    const TAKE_A_VALUE: &[&str] = &[
        "-c",
        "--config",
        "--enable",
        "--disable",
        "--remote",
        "--remote-auth-token-env",
        "-i",
        "--image",
        "-m",
        "--model",
        "--local-provider",
        "-p",
        "--profile",
        "-s",
        "--sandbox",
        "-C",
        "--cd",
        "--add-dir",
        "-a",
        "--ask-for-approval",
    ];
    let mut words = args.iter().map(String::as_str);
    while let Some(word) = words.next() {
        if word == "--" {
            return None;
        }
        if word.starts_with('-') {
            if TAKE_A_VALUE.contains(&word) {
                words.next();
            }
            continue;
        }
        return Some(if word == "e" { "exec" } else { word });
    }
    None
}

async fn stdin_hook(cli: AgentCli, agent: &str, event: Option<&str>) -> Option<String> {
    let mut input = Vec::new();
    let mut stdin = std::io::stdin().lock();
    if let Err(error) = (&mut stdin)
        .take(hooks::MAX_INPUT as u64 + 1)
        .read_to_end(&mut input)
    {
        eprintln!("roundtable hook: cannot read the hook's input: {error}");
        return None;
    }
    // Past the limit, the rest is read and dropped: the CLI writing it never meets a closed
    // pipe.
    let _ = std::io::copy(&mut stdin, &mut std::io::sink());
    let event = match hooks::parse(cli, &input, event) {
        Ok(event) => event,
        Err(error) => {
            eprintln!("roundtable hook: {error}");
            return None;
        }
    };
    let event_name = match (&event, cli) {
        (HookEvent::Other(_), _) => return None,
        // Copilot's answers name no event; Antigravity's are told theirs.
        (_, AgentCli::Copilot) => "",
        (HookEvent::PromptSubmitted { .. }, AgentCli::Antigravity) => "PreInvocation",
        (HookEvent::SessionStarted { .. }, _) => "SessionStart",
        (HookEvent::PromptSubmitted { .. }, AgentCli::Gemini) => "BeforeAgent",
        (HookEvent::PromptSubmitted { .. }, _) => "UserPromptSubmit",
        (HookEvent::ToolDone { .. }, AgentCli::Gemini) => "AfterTool",
        (HookEvent::ToolDone { .. }, _) => "PostToolUse",
        (HookEvent::Notification { .. }, _) => "Notification",
        (HookEvent::PermissionRequest { .. }, _) => "PermissionRequest",
        (HookEvent::TurnEnded { .. }, AgentCli::Gemini) => "AfterAgent",
        (HookEvent::TurnEnded { .. }, _) => "Stop",
    };
    // The session is one agent's: another's hooks leave it alone.
    if !claim(agent, cli, event.session_id()) {
        return None;
    }
    // Under `roundtable run`, the runner brings the messages itself, turn by turn.
    if std::env::var_os(roundtable_core::runner::RUNNER_ENV).is_some()
        && matches!(
            event,
            HookEvent::TurnEnded { .. } | HookEvent::PromptSubmitted { .. }
        )
    {
        return None;
    }
    let context = match cli {
        AgentCli::Claude => HookContext::claude(&env),
        AgentCli::Codex => HookContext::from_env(cli, Some(!under_codex_exec()), &env),
        AgentCli::Copilot => HookContext::copilot(copilot_arguments().as_deref(), &env),
        _ => HookContext::from_env(cli, None, &env),
    };
    let wake = match (&event, cli) {
        (
            HookEvent::TurnEnded {
                session_id,
                transcript,
                ..
            },
            AgentCli::Codex,
        ) if context.attended == Some(true) || context.listen_asked => {
            Some((session_id.clone(), transcript.clone()))
        }
        _ => None,
    };
    let core = open(agent).await?;
    let settings = HookSettings::load(&core.profile().dir);
    let reply = core.on_hook(event, &context, &settings).await;
    if reply == HookReply::Nothing
        && let Some((thread, rollout)) = wake
    {
        // The turn ends now; messages that come later reach the idle session through
        // Codex's queue, from a process that outlives this hook.
        start_codex_wake(agent, &thread, rollout.as_deref());
    }
    reply.stdout_for(cli, event_name)
}

/// Leaves `roundtable hook codex-wake` running for `thread`, detached from this hook.
fn start_codex_wake(agent: &str, thread: &str, rollout: Option<&str>) {
    let Ok(roundtable) = std::env::current_exe() else {
        return;
    };
    let mut command = std::process::Command::new(roundtable);
    command
        .args(["hook", "codex-wake", "--agent", agent, thread])
        .args(rollout)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Err(error) = roundtable_platform::process_group::spawn_detached(&mut command) {
        eprintln!("roundtable hook: cannot leave a waker for the session: {error}");
    }
}

async fn codex_wake(agent: &str, rest: &[String]) {
    let Some(thread) = rest.first() else {
        eprintln!("roundtable hook codex-wake: give the thread");
        return;
    };
    let rollout = rest.get(1).map(PathBuf::from);
    let Some(codex) = find_executable(
        &search_dirs(&roundtable_core::local_agents::Environment::current()),
        "codex",
    ) else {
        eprintln!("roundtable hook codex-wake: codex is not on PATH");
        return;
    };
    let Some(core) = open(agent).await else {
        return;
    };
    let settings = HookSettings::load(&core.profile().dir);
    if let Err(error) = core
        .wake_codex(
            &codex,
            thread,
            rollout.as_deref(),
            std::time::Duration::from_secs(settings.listen_s),
        )
        .await
    {
        eprintln!("roundtable hook codex-wake: {error}");
    }
}

async fn codex_notify(agent: &str, rest: &[String]) {
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
        AgentCli::Codex,
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

#[cfg(test)]
mod tests {
    use super::codex_subcommand;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn codex_exec_is_found_after_options_and_their_values() {
        for (line, expected) in [
            ("exec --json -", Some("exec")),
            ("-m gpt-5.5 exec resume T -", Some("exec")),
            ("-c model=\"o3\" --enable hooks e -", Some("exec")),
            ("--config=x=1 exec -", Some("exec")),
            ("-m exec", None),
            ("--no-daemon", None),
            ("resume --last", Some("resume")),
            ("-- exec", None),
        ] {
            assert_eq!(codex_subcommand(&words(line)), expected, "{line}");
        }
    }
}
