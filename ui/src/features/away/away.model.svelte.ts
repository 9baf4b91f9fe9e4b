/**
 * "While you were away": per room, what happened since the person last read it or last
 * looked at the app — messages, tasks agents completed and started, components changed,
 * questions waiting, what it cost. The core computes it from the cache alone (no model
 * call: the same cache, the same digest); this view shows it on start when there is news,
 * and "Mark as seen" starts the next one from now.
 */
import type { CoreChanged, RoomDigest } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import { Coalesced } from "../../app/coalesced";
import { costText } from "../costs/costs.model.svelte";

export const AWAY_EMPTY = "Nothing new since you last looked. Agents' messages, finished tasks, changed components and questions for you gather here while you are away.";

/**
 * Tasks listed per room and list; the rest are counted, a click from the tasks board. A
 * night of agents' work can finish thousands: the digest says how many, not every title.
 */
export const AWAY_TASKS_SHOWN = 8;

/** The first tasks of a list and how many more there are. */
export function firstTasks<T>(tasks: readonly T[], shown: number = AWAY_TASKS_SHOWN): { shown: readonly T[]; more: number } {
  return { shown: tasks.slice(0, shown), more: Math.max(0, tasks.length - shown) };
}

/** One line saying what a room holds, for the list and for screen readers. */
export function digestSummary(digest: RoomDigest): string {
  const parts: string[] = [];
  if (digest.messages > 0) {
    const mentions = digest.mentions > 0 ? ` (${digest.mentions} for you)` : "";
    parts.push(`${digest.messages} message${digest.messages === 1 ? "" : "s"}${mentions}`);
  }
  if (digest.tasks_completed.length > 0) parts.push(`${digest.tasks_completed.length} task${digest.tasks_completed.length === 1 ? "" : "s"} done`);
  if (digest.tasks_in_progress.length > 0) parts.push(`${digest.tasks_in_progress.length} under way`);
  if (digest.components.length > 0) parts.push(`${digest.components.length} component${digest.components.length === 1 ? "" : "s"} changed`);
  if (digest.pings_waiting.length > 0) parts.push(`${digest.pings_waiting.length} question${digest.pings_waiting.length === 1 ? "" : "s"} waiting`);
  if ((digest.cost_usd ?? 0) > 0 || digest.unpriced) parts.push(`${digestCost(digest)} spent`);
  return parts.join(" · ") || "nothing new";
}

/** Who wrote the room's new messages, the most first: `dana/writer (6), sam (2)`. */
export function digestWriters(digest: Pick<RoomDigest, "writers">): string {
  return digest.writers.map((writer) => `${writer.author} (${writer.messages})`).join(", ");
}

/** What the room's agents spent, unpriced usage flagged (never $0). */
export function digestCost(digest: Pick<RoomDigest, "cost_usd" | "unpriced">): string {
  return costText({ cost: digest.cost_usd ?? 0, unpriced: digest.unpriced ? 1 : 0 });
}

/** Everything waiting, over all rooms (for the nav's count). */
export function newsCount(digests: readonly RoomDigest[]): number {
  return digests.reduce(
    (sum, digest) => sum + digest.tasks_completed.length + digest.components.length + digest.pings_waiting.length + (digest.messages > 0 ? 1 : 0),
    0,
  );
}

export type AwayDeps = { backend: Backend; errors: ErrorReporter };

export class AwayModel {
  digests: RoomDigest[] = $state.raw([]);
  loaded = $state(false);
  marking = $state(false);

  private readonly deps: AwayDeps;
  private readonly loads: Coalesced;

  constructor(deps: AwayDeps) {
    this.deps = deps;
    this.loads = new Coalesced(() => this.fetch());
  }

  readonly hasNews = $derived(this.digests.length > 0);
  readonly count = $derived(newsCount(this.digests));

  load(): Promise<void> {
    return this.loads.request();
  }

  /** The person has seen it all: the next digest begins now. */
  async markSeen(): Promise<void> {
    this.marking = true;
    try {
      await this.deps.backend.markLooked();
      await this.load();
    } catch (error) {
      this.deps.errors.report(error);
    } finally {
      this.marking = false;
    }
  }

  async applyChange(change: CoreChanged): Promise<void> {
    if (change.rooms || change.messages.length > 0 || change.work || change.pings || change.everything) await this.load();
  }

  private async fetch(): Promise<void> {
    try {
      this.digests = await this.deps.backend.away();
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    }
  }
}
