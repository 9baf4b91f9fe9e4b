/**
 * The contract between the window and whatever answers it, as data: `scenarios.json` is a
 * list of calls with the outcome each must have, run by this one runner against the
 * in-memory `FakeBackend` (contract.test.ts) and, in a real WebKit webview through
 * WebDriver, against the desktop app's own commands (src-tauri/tests/desktop/contract.rs).
 * A rule the fake keeps because only a hub can decide it (consent, conflicts, mentions…)
 * that drifts from the hub fails one side or the other; contract.test.ts fails when a
 * command is called by no step.
 *
 * A step either calls a `Backend` method with named arguments (the names of the generated
 * commands, so the app can be invoked with them as they are) or is an `act`: something
 * another person does (sign up, register an agent), which each side performs by its own
 * means; the runner stops there and is resumed after it. Expected values match as patterns:
 * an object matches one with at least its fields, an array one that holds matches of its
 * elements in order (`[]` only an empty one), `"?"` matches anything, `"?name"` matches
 * anything and binds it, `"$name"` stands for what was bound. `until` steps are tried again until they match or patience runs out, since
 * the app answers reads from a cache that sync fills a moment later.
 */

import type { Backend } from "../backend";

export type Pattern = null | boolean | number | string | Pattern[] | { [field: string]: Pattern };

export type Expectation =
  | { ok: Pattern; without?: Pattern }
  | { error: string };

export type CallStep = {
  call: string;
  args: Record<string, Pattern>;
  expect?: Expectation;
  until?: boolean;
};

export type Step = { scenario: string } | { act: string } | CallStep;

/** Calls one `Backend` method with named arguments; rejects with what the method threw. */
export type Call = (method: string, args: Record<string, unknown>) => Promise<unknown>;

export type Bindings = Record<string, unknown>;

export type Progress = {
  bindings: Bindings;
  /** The index of the `act` step the runner stopped at, or null when every step ran. */
  actAt: number | null;
  /** What went wrong, naming the scenario and the step; empty when all held. */
  failure: string | null;
};

export type Patience = { totalMs: number; pauseMs: number };

export const PATIENCE: Patience = { totalMs: 20_000, pauseMs: 100 };

/** The `Backend`'s methods that are commands of the app (the two subscriptions are events). */
export type BackendCommand = Exclude<keyof Backend, "onChanged" | "onOpenTarget">;

/**
 * The arguments of each method, in the order the `Backend` takes them: the fake is called
 * positionally, the app by name, so a step naming an argument wrongly fails on both sides.
 * Every command is here (the type says so), and contract.test.ts fails when one is called
 * by no scenario.
 */
export const ARGUMENTS: Record<BackendCommand, readonly string[]> = {
  appState: [],
  detectAgents: [],
  rooms: [],
  roomMessages: ["room", "beforeSeq", "limit"],
  sendMessage: ["room", "text"],
  createRoom: ["title", "members"],
  inviteToRoom: ["room", "handle"],
  markRead: ["room", "seq"],
  directory: ["query"],
  pings: ["all"],
  answerPing: ["room", "ping", "choice", "text"],
  contacts: [],
  requestContact: ["handle", "message"],
  respondContact: ["request", "accept"],
  createInvite: ["room", "uses", "expiresHours"],
  invites: [],
  revokeInvite: ["invite"],
  redeemInvite: ["codeOrLink"],
  agents: [],
  controlAgent: ["agent", "action", "room"],
  onboardAgent: ["cli", "name", "project"],
  offboardAgent: ["cli", "handle"],
  budgets: [],
  setBudget: ["budget"],
  removeBudget: ["scope", "name", "period"],
  agentToken: ["agent", "action"],
  taskBoard: [],
  architecture: [],
  componentHistory: ["room", "component"],
  costs: ["sinceMs"],
  sessions: [],
  away: [],
  markLooked: [],
  workScan: [],
  connectRemote: ["address", "how", "insecure"],
  useEmbedded: [],
  shareOnNetwork: ["on"],
  takeStartTarget: [],
  openLink: ["url"],
};

/** The code of whatever a call threw: an `ErrorReport`'s or a `BackendError`'s, else `ipc`. */
export function codeOf(thrown: unknown): string {
  if (typeof thrown === "object" && thrown !== null && typeof (thrown as { code?: unknown }).code === "string") {
    return (thrown as { code: string }).code;
  }
  return typeof thrown === "string" ? "ipc" : "internal";
}

/** `pattern` with every `"$name"` replaced by what `name` is bound to. */
export function substitute(pattern: Pattern, bindings: Bindings): unknown {
  if (typeof pattern === "string" && pattern.startsWith("$")) {
    const name = pattern.slice(1);
    if (!(name in bindings)) throw new Error(`nothing is bound to ${name} yet`);
    return bindings[name];
  }
  if (Array.isArray(pattern)) return pattern.map((item) => substitute(item, bindings));
  if (typeof pattern === "object" && pattern !== null) {
    return Object.fromEntries(Object.entries(pattern).map(([key, value]) => [key, substitute(value, bindings)]));
  }
  return pattern;
}

/** Whether `actual` matches `pattern` (already substituted); new bindings go into `bound`. */
export function matches(pattern: unknown, actual: unknown, bound: Bindings): boolean {
  if (pattern === "?") return true;
  if (typeof pattern === "string" && pattern.startsWith("?")) {
    const name = pattern.slice(1);
    if (name in bound) return same(bound[name], actual);
    bound[name] = actual;
    return true;
  }
  if (Array.isArray(pattern)) {
    if (!Array.isArray(actual)) return false;
    if (pattern.length === 0) return actual.length === 0;
    let from = 0;
    for (const item of pattern) {
      let found = false;
      while (from < actual.length) {
        const trial = { ...bound };
        if (matches(item, actual[from++], trial)) {
          Object.assign(bound, trial);
          found = true;
          break;
        }
      }
      if (!found) return false;
    }
    return true;
  }
  if (typeof pattern === "object" && pattern !== null) {
    if (typeof actual !== "object" || actual === null || Array.isArray(actual)) return false;
    const fields = actual as Record<string, unknown>;
    return Object.entries(pattern).every(([key, value]) => key in fields && matches(value, fields[key], bound));
  }
  return same(pattern, actual);
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

type Outcome = { ok: true; value: unknown } | { ok: false; code: string; message: string };

async function attempt(call: Call, step: CallStep, bindings: Bindings): Promise<Outcome> {
  const args = substitute(step.args, bindings) as Record<string, unknown>;
  try {
    return { ok: true, value: await call(step.call, args) };
  } catch (thrown) {
    const message = typeof thrown === "object" && thrown !== null ? String((thrown as { message?: unknown }).message) : String(thrown);
    return { ok: false, code: codeOf(thrown), message };
  }
}

/** Why `outcome` does not meet the step's expectation (binding what it matched), or null. */
function judge(step: CallStep, outcome: Outcome, bindings: Bindings): string | null {
  const expect = step.expect ?? { ok: null };
  if ("error" in expect) {
    if (outcome.ok) return `expected the error ${expect.error}, got ${JSON.stringify(outcome.value)}`;
    return outcome.code === expect.error ? null : `expected the error ${expect.error}, got ${outcome.code}: ${outcome.message}`;
  }
  if (!outcome.ok) return `expected success, got ${outcome.code}: ${outcome.message}`;
  const bound: Bindings = { ...bindings };
  if (!matches(substitute(expect.ok, bindings), outcome.value, bound)) {
    return `expected ${JSON.stringify(expect.ok)}, got ${JSON.stringify(outcome.value)}`;
  }
  if (expect.without !== undefined && Array.isArray(outcome.value)) {
    const unwanted = substitute(expect.without, bound);
    const found = outcome.value.find((item) => matches(unwanted, item, { ...bound }));
    if (found !== undefined) return `expected no ${JSON.stringify(expect.without)}, got ${JSON.stringify(found)}`;
  }
  Object.assign(bindings, bound);
  return null;
}

/**
 * Runs `steps` from `from` until an `act` (returned for the caller to perform), the end, or
 * the first step whose outcome differs from its expectation.
 */
export async function runSteps(
  steps: readonly Step[],
  from: number,
  call: Call,
  bindings: Bindings,
  patience: Patience = PATIENCE,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
): Promise<Progress> {
  let scenario = "(before any scenario)";
  for (let index = 0; index < from; index++) {
    const step = steps[index]!;
    if ("scenario" in step) scenario = step.scenario;
  }
  for (let index = from; index < steps.length; index++) {
    const step = steps[index]!;
    if ("scenario" in step) {
      scenario = step.scenario;
      continue;
    }
    if ("act" in step) return { bindings, actAt: index, failure: null };
    const names = ARGUMENTS[step.call as BackendCommand] as readonly string[] | undefined;
    const given = Object.keys(step.args);
    if (!names || names.length !== given.length || names.some((name, at) => given[at] !== name)) {
      return {
        bindings,
        actAt: null,
        failure: `${scenario}, step ${index} (${step.call}): arguments must be [${names?.join(", ") ?? "unknown method"}], are [${given.join(", ")}]`,
      };
    }
    const started = Date.now();
    for (;;) {
      const why = judge(step, await attempt(call, step, bindings), bindings);
      if (why === null) break;
      if (!step.until || Date.now() - started > patience.totalMs) {
        return { bindings, actAt: null, failure: `${scenario}, step ${index} (${step.call}): ${why}` };
      }
      await sleep(patience.pauseMs);
    }
  }
  return { bindings, actAt: null, failure: null };
}

/** Calls on a `Backend`-shaped object: its methods take the arguments in `ARGUMENTS` order. */
export function positionalCall(target: object): Call {
  return (method, args) => {
    const names = ARGUMENTS[method as BackendCommand] as readonly string[] | undefined;
    const fn = (target as Record<string, unknown>)[method];
    if (!names || typeof fn !== "function") return Promise.reject(new Error(`no method ${method}`));
    return (fn as (...values: unknown[]) => Promise<unknown>).apply(target, names.map((name) => args[name]));
  };
}

/** The generated command a `Backend` method mirrors: `roomMessages` → `room_messages`. */
export function commandOf(method: string): string {
  return method.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}
