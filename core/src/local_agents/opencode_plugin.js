// Roundtable's plugin for OpenCode, written by `roundtable agents onboard opencode` and
// removed by `roundtable agents offboard`: it hands the moments of a session to
// `roundtable hook opencode` (as Claude Code's command hooks do) and acts on the answers.
//
// - a prompt begins, a tool ends: the agent's unread Roundtable messages are added (to the
//   prompt, to the tool's output), so a mention reaches a working agent at its next tool;
// - the session goes idle: messages that came meanwhile start its next turn;
// - its shell commands carry ROUNDTABLE_AGENT_SESSION, so a `roundtable` run by the model
//   never acts as the person.
//
// It never stops a session: a hook that fails or takes too long is left out.
const HOOK = __HOOK_COMMAND__;
const ENVIRONMENT = __ENVIRONMENT__;
const AGENT = __AGENT__;
// Seconds a hook may take: the turn's end listens for messages a while.
const PATIENCE = { Stop: __STOP_PATIENCE__, default: 30 };

async function hook(event, fields) {
  try {
    const child = Bun.spawn(HOOK, {
      stdin: new Blob([JSON.stringify({ hook_event_name: event, ...fields })]),
      stdout: "pipe",
      stderr: "ignore",
      env: { ...process.env, ...ENVIRONMENT },
    });
    const limit = (PATIENCE[event] ?? PATIENCE.default) * 1000;
    const timer = setTimeout(() => child.kill(), limit);
    const text = await new Response(child.stdout).text();
    await child.exited;
    clearTimeout(timer);
    return text.trim() ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

const contextOf = (reply) => reply?.hookSpecificOutput?.additionalContext;

export const Roundtable = async ({ client, directory }) => {
  const started = new Set();
  const begin = async (sessionID) => {
    if (!sessionID || started.has(sessionID)) return;
    started.add(sessionID);
    await hook("SessionStart", { session_id: sessionID, cwd: directory, source: "startup" });
  };
  return {
    "shell.env": async (_input, output) => {
      output.env.ROUNDTABLE_AGENT_SESSION = AGENT;
    },
    "chat.message": async (input, output) => {
      try {
        await begin(input.sessionID);
        const context = contextOf(
          await hook("UserPromptSubmit", { session_id: input.sessionID, cwd: directory }),
        );
        const prompt = output.parts?.find((part) => part.type === "text");
        if (context && prompt) prompt.text += "\n\n" + context;
      } catch {}
    },
    "tool.execute.after": async (input, output) => {
      try {
        await begin(input.sessionID);
        const context = contextOf(
          await hook("PostToolUse", { session_id: input.sessionID, cwd: directory }),
        );
        if (context && typeof output.output === "string") output.output += "\n\n" + context;
      } catch {}
    },
    event: async ({ event }) => {
      try {
        if (event?.type !== "session.idle") return;
        const sessionID = event.properties?.sessionID;
        if (!sessionID) return;
        const reply = await hook("Stop", { session_id: sessionID, cwd: directory });
        if (reply?.decision === "block" && reply.reason) {
          await client.session.prompt({
            path: { id: sessionID },
            body: { parts: [{ type: "text", text: reply.reason }] },
          });
        }
      } catch {}
    },
  };
};
