/**
 * What the core decides about what a person types — an agent's name, an invite's code and
 * terms, a budget, a link, a hub's address — as the in-memory backend answers it: from the
 * verdicts the core's own tests write into `fixtures/` (`agent-names.json` by
 * `local_agents/onboarding.rs`, `invites.json` by `screens.rs`, `budgets.json` by
 * `budgets.rs`, `links.json` by `web_links.rs`, `hub-addresses.json` by `hub_address.rs`),
 * so that the fake does not decide them a second time and cannot drift from the core.
 *
 * An input a table holds gets the core's verdict, its message included. Any other (a name
 * typed into `npm run dev`) gets a fallback's, kept as small as the rule allows;
 * fake-rules.test.ts holds every fallback to every case of its table, so when the core
 * changes a rule (and its test writes the table anew) the UI's tests fail until the
 * fallback follows.
 */
import type { Budget, BudgetLevel, BudgetPeriod, ReportCode } from "../bindings";
import { BackendError } from "./backend";
import agentNames from "./fixtures/agent-names.json";
import budgets from "./fixtures/budgets.json";
import hubAddresses from "./fixtures/hub-addresses.json";
import invites from "./fixtures/invites.json";
import links from "./fixtures/links.json";

/** A check's outcome as the core's tests write it: the value kept, or the error as it crosses IPC. */
export type Verdict<T> = { ok: T } | { error: { code: ReportCode; message: string } };

/** Where the app reaches a hub, as the core reads a typed address. */
export type ReachedHub = { authority: string; host: string; tls: boolean };

/** The value of `verdict`, or its error thrown as the app's command would. */
export function decided<T>(verdict: Verdict<T>): T {
  if ("error" in verdict) throw new BackendError(verdict.error.code, verdict.error.message);
  return verdict.ok;
}

function invalid(message: string): Verdict<never> {
  return { error: { code: "invalid", message } };
}

function fromTable<T>(outcome: unknown): Verdict<T> {
  return outcome as Verdict<T>;
}

// ---- agent names ------------------------------------------------------------------------

/** An agent's name: `^[a-z0-9][a-z0-9_-]{1,31}$`, the protocol's rule for a handle's segment. */
const HANDLE_SEGMENT = /^[a-z0-9][a-z0-9_-]{1,31}$/;

export function agentNameFallback(name: string): Verdict<null> {
  return HANDLE_SEGMENT.test(name)
    ? { ok: null }
    : invalid(`agent name ${JSON.stringify(name)} must be 2 to 32 characters of a-z, 0-9, '_' and '-', starting with a letter or digit`);
}

/** Whether the core would onboard an agent of this name. */
export function agentNameVerdict(name: string): Verdict<null> {
  const known = agentNames.cases.find((entry) => entry.name === name);
  return known ? fromTable(known.outcome) : agentNameFallback(name);
}

// ---- invites ----------------------------------------------------------------------------

export function inviteCodeFallback(codeOrLink: string): Verdict<string> {
  const text = codeOrLink.trim();
  const code = text.startsWith("roundtable://invite/") ? text.slice("roundtable://invite/".length).split(/[?#]/)[0]! : text;
  return /^[A-Za-z0-9_-]+$/.test(code)
    ? { ok: code }
    : invalid(`${JSON.stringify(text)} is not an invite: paste the code or the whole roundtable://invite/… link`);
}

/** The code in a pasted code or `roundtable://invite/CODE?hub=…` link. */
export function inviteCodeVerdict(codeOrLink: string): Verdict<string> {
  const known = invites.codes.find((entry) => entry.input === codeOrLink);
  return known ? fromTable(known.outcome) : inviteCodeFallback(codeOrLink);
}

/** How long an invite lasts when its maker does not say (the protocol's default). */
export const INVITE_DEFAULT_EXPIRY_S: number = invites.default_expiry_s;

export function inviteTermsFallback(uses: number | null, expiresInS: number | null): Verdict<null> {
  if (uses !== null && !(uses >= 1 && uses <= invites.max_uses)) {
    return invalid(`an invite can be used 1 to ${invites.max_uses} times`);
  }
  if (expiresInS !== null && !(expiresInS >= 1 && expiresInS <= invites.max_expiry_s)) {
    return invalid("an invite can last up to 90 days; choose a shorter expiry");
  }
  return { ok: null };
}

/** Whether the core asks the hub for an invite of these terms (`null`: the hub's default). */
export function inviteTermsVerdict(uses: number | null, expiresInS: number | null): Verdict<null> {
  const known = invites.terms.find((entry) => entry.uses === uses && entry.expires_in_s === expiresInS);
  return known ? fromTable(known.outcome) : inviteTermsFallback(uses, expiresInS);
}

// ---- budgets ----------------------------------------------------------------------------

export function budgetFallback(budget: Budget, me: string): Verdict<Budget> {
  let name = budget.name.trim();
  if (budget.scope === "agent" && !name.includes("/")) name = `${me}/${name}`;
  const usd = budget.usd ?? Number.NaN;
  if (!(Number.isFinite(usd) && usd > 0 && usd <= 1_000_000)) {
    return invalid(`a budget is a positive number of dollars up to 1000000, e.g. 5 or 12.50; got ${usd}`);
  }
  if (name === "" || name.length > 64) return invalid(`name the ${budget.scope} the budget is for (1 to 64 characters)`);
  const parts = name.split("/");
  const valid =
    budget.scope === "agent"
      ? parts.length === 2 && parts.every((part) => HANDLE_SEGMENT.test(part))
      : budget.scope === "person"
        ? HANDLE_SEGMENT.test(name)
        : true;
  if (!valid) {
    return invalid(
      budget.scope === "agent"
        ? `${JSON.stringify(name)} is not an agent's handle: write person/agent, e.g. dana/writer`
        : `${JSON.stringify(name)} is not a person's handle, e.g. dana`,
    );
  }
  return { ok: { ...budget, name } };
}

/** The budget as the core keeps it when `me` sets it, or why it refuses it. */
export function budgetVerdict(budget: Budget, me: string): Verdict<Budget> {
  const known =
    me === budgets.me
      ? budgets.cases.find(
          (entry) =>
            entry.budget.scope === budget.scope &&
            entry.budget.name === budget.name &&
            entry.budget.period === budget.period &&
            entry.budget.usd === budget.usd,
        )
      : undefined;
  return known ? fromTable(known.outcome) : budgetFallback(budget, me);
}

export function periodStartFallback(period: BudgetPeriod, nowMs: number): string {
  const day = Math.floor(nowMs / 86_400_000);
  const text = (days: number) => new Date(days * 86_400_000).toISOString().slice(0, 10);
  switch (period) {
    case "day":
      return text(day);
    case "week":
      // 1970-01-01 was a Thursday: three days after a Monday.
      return text(day - ((((day + 3) % 7) + 7) % 7));
    case "month":
      return `${text(day).slice(0, 7)}-01`;
  }
}

/** The first UTC day of the budget period holding `nowMs`. */
export function periodStart(period: BudgetPeriod, nowMs: number): string {
  const known = budgets.periods.find((entry) => entry.now_ms === nowMs);
  return known ? known[period] : periodStartFallback(period, nowMs);
}

export function budgetLevelFallback(share: number): BudgetLevel {
  return share >= 1 ? "reached" : share >= 0.8 ? "near" : "under";
}

/** How far into its budget a spend of `share` of it is. */
export function budgetLevel(share: number): BudgetLevel {
  const known = budgets.levels.find((entry) => entry.share === share);
  return known ? (known.level as BudgetLevel) : budgetLevelFallback(share);
}

// ---- links ------------------------------------------------------------------------------

export function linkFallback(url: string): Verdict<string> {
  const refuse = (why: string) => invalid(`this link is not opened: ${why}. Copy it if you trust it`);
  if (/[\s\p{Cc}]/u.test(url)) return refuse("it holds spaces or control characters");
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return refuse("it is not a full address such as https://example.com/");
  }
  if (parsed.protocol === "mailto:") {
    const kept = parsed.search
      .slice(1)
      .split("&")
      .filter((field) => ["subject", "body"].includes(field.split("=")[0]!.toLowerCase()));
    return { ok: `mailto:${parsed.pathname}${kept.length > 0 ? `?${kept.join("&")}` : ""}` };
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    return refuse(`only web (https) and mail links open, not ${parsed.protocol}`);
  }
  if (parsed.hostname === "") return refuse("it names no host");
  return { ok: parsed.href };
}

/** The link as the app would open it in the browser, or why it would not. */
export function linkVerdict(url: string): Verdict<string> {
  const known = links.cases.find((entry) => entry.url === url);
  return known ? fromTable(known.outcome) : linkFallback(url);
}

// ---- hub addresses ----------------------------------------------------------------------

export function hubAddressFallback(address: string, insecure: boolean): Verdict<ReachedHub> {
  const text = address.trim();
  const pinAt = text.indexOf("#");
  if (pinAt !== -1) {
    // `ADDRESS#sha256=HEX`: that certificate is the hub, which only a hub with TLS can have.
    if (!/^sha256=[0-9a-fA-F]{64}$/.test(text.slice(pinAt + 1))) {
      return invalid(`${JSON.stringify(text)}: a pinned hub is written ADDRESS#sha256= and the 64 hex digits of its certificate's SHA-256`);
    }
    const pinned = hubAddressFallback(text.slice(0, pinAt), insecure);
    if ("ok" in pinned && !pinned.ok.tls) return invalid(`${JSON.stringify(text)} pins a certificate for a hub without TLS: write wss:// or https://`);
    return pinned;
  }
  const scheme = /^([a-z]+):\/\//.exec(text)?.[1];
  if (text.startsWith("unix:")) {
    return text.startsWith("unix:/")
      ? { ok: { authority: text, host: "localhost", tls: false } }
      : invalid(`the hub socket ${JSON.stringify(text)} is not an absolute path: write unix:/path/to/hub.sock`);
  }
  if (scheme !== undefined && !["ws", "wss", "http", "https"].includes(scheme)) {
    return invalid(`unsupported hub address ${JSON.stringify(text)}: use host:port, ws://, wss://, http:// or https://`);
  }
  const tls = scheme === "wss" || scheme === "https";
  const rest = scheme === undefined ? text : text.slice(scheme.length + 3);
  const authority = rest.split("/")[0]!;
  if (authority === "") return invalid(`the hub address ${JSON.stringify(text)} has no host`);
  const colon = authority.lastIndexOf(":");
  let host = authority;
  if (colon !== -1) {
    const port = authority.slice(colon + 1);
    if (!/^\d+$/.test(port) || Number(port) > 65_535) return invalid(`the hub address ${JSON.stringify(text)} has an invalid port`);
    host = authority.slice(0, colon);
  }
  host = host.replace(/^\[/, "").replace(/\]$/, "");
  const reached = { authority: colon === -1 ? `${authority}:${tls ? 443 : 80}` : authority, host, tls };
  const loopback = host.toLowerCase() === "localhost" || host.startsWith("127.") || host === "::1";
  if (!tls && !insecure && !loopback) {
    return invalid(`${reached.authority} is not on this machine and has no TLS: tick "No TLS: a hub on my own network" only for a network you trust`);
  }
  return { ok: reached };
}

/** Where the app would reach the hub at `address`, or why it would not try. */
export function hubAddressVerdict(address: string, insecure: boolean): Verdict<ReachedHub> {
  const known = hubAddresses.cases.find((entry) => entry.address === address && entry.insecure === insecure);
  return known ? fromTable(known.outcome) : hubAddressFallback(address, insecure);
}
