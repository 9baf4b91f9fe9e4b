/**
 * Questions agents ask people (`ask_human`, permission prompts). "Needs you" is exactly what
 * the core answers to `pings(false)` — open and addressed to me — so this list, the nav
 * badge and the tray count agree; everything else (answered, expired, or open for someone
 * else) comes from `pings(true)`. The first answer wins: when someone else got there first,
 * the core refuses mine and the refetch shows who answered.
 */
import type { CoreChanged, PingView } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";

export const PINGS_EMPTY_OPEN = "Nothing needs you right now. When an agent asks you a question, it appears here.";
export const PINGS_EMPTY_REST = "No answered or expired questions yet.";

export function pingKey(ping: Pick<PingView, "room" | "ping">): string {
  return `${ping.room}/${ping.ping}`;
}

/** Oldest question first in "needs you" (it has waited longest); newest first for the rest. */
export function splitPings(
  openForMe: readonly PingView[],
  all: readonly PingView[],
): { needsYou: PingView[]; rest: PingView[] } {
  const mine = new Set(openForMe.map(pingKey));
  const needsYou = [...openForMe].sort((a, b) => (a.asked_ms ?? 0) - (b.asked_ms ?? 0));
  const rest = all
    .filter((ping) => !mine.has(pingKey(ping)))
    .sort((a, b) => (b.answered_ms ?? b.asked_ms ?? 0) - (a.answered_ms ?? a.asked_ms ?? 0));
  return { needsYou, rest };
}

/** What became of a ping that is not waiting for me, in words. */
export function pingOutcome(ping: PingView): string {
  switch (ping.state) {
    case "answered": {
      const who = ping.answered_by_handle ?? ping.answered_by ?? "someone";
      const answer = [ping.choice, ping.text].filter((part) => part !== null && part !== "").join(" — ");
      return answer === "" ? `Answered by ${who}` : `Answered by ${who}: ${answer}`;
    }
    case "expired":
      return "Expired without an answer";
    case "open":
      return "Open, waiting for someone else";
  }
}

export type PingsDeps = { backend: Backend; errors: ErrorReporter };

export class PingsModel {
  needsYou: PingView[] = $state.raw([]);
  rest: PingView[] = $state.raw([]);
  loaded = $state(false);
  /** Free-text answers being written, by ping key. */
  drafts: Record<string, string> = $state({});
  /** Answers on their way to the core, by ping key. */
  sending: Record<string, boolean> = $state({});
  /** The ping a notification or the tray asked to show. */
  focused = $state<string | null>(null);

  private readonly deps: PingsDeps;

  constructor(deps: PingsDeps) {
    this.deps = deps;
  }

  readonly count = $derived(this.needsYou.length);

  async load(): Promise<void> {
    try {
      const [openForMe, all] = await Promise.all([this.deps.backend.pings(false), this.deps.backend.pings(true)]);
      const { needsYou, rest } = splitPings(openForMe, all);
      this.needsYou = needsYou;
      this.rest = rest;
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    }
  }

  focus(pingId: string): void {
    this.focused = pingId;
  }

  /** Answers with an option (`choice`) or with the free text written for this ping. */
  async answer(ping: PingView, choice: string | null): Promise<boolean> {
    const key = pingKey(ping);
    const written = (this.drafts[key] ?? "").trim();
    const text = choice === null ? written : written === "" ? null : written;
    if (choice === null && text === "") return false;
    this.sending[key] = true;
    try {
      await this.deps.backend.answerPing(ping.room, ping.ping, choice, text === "" ? null : text);
      delete this.drafts[key];
      return true;
    } catch (error) {
      this.deps.errors.report(error);
      return false;
    } finally {
      delete this.sending[key];
      await this.load();
    }
  }

  async applyChange(change: CoreChanged): Promise<void> {
    if (change.pings) await this.load();
  }
}
