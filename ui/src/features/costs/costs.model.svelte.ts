/**
 * Costs: what agents' work cost, by day, agent, person, team or model, the person's own
 * figures (their agents, and sessions on this machine no onboarded agent publishes) beside
 * what teammates share to rooms. The core hands over figures at their finest (room, day,
 * agent, person, model: the same figures as `roundtable usage`); this model groups them as
 * the person asks, for a chart and for a table with the same numbers.
 *
 * A model without a price is flagged, never counted as $0: its tokens count, its cost is
 * unknown. Every figure says how fresh it is (when its newest entry was reported).
 */
import type { CoreChanged, CostBoard, CostRow } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import { ShownBoard } from "../../app/coalesced";

export const COSTS_EMPTY =
  "No usage yet. Costs appear as agents work: onboard an agent CLI from the Onboarding view (its logs are read on this machine), or join a room where teammates share theirs.";

export type CostKey = "day" | "agent" | "person" | "team" | "model";

export const COST_KEYS: readonly { key: CostKey; label: string }[] = [
  { key: "day", label: "Day" },
  { key: "agent", label: "Agent" },
  { key: "person", label: "Person" },
  { key: "team", label: "Team" },
  { key: "model", label: "Model" },
];

export type Period = "7d" | "30d" | "all";

export const PERIODS: readonly { period: Period; label: string; days: number | null }[] = [
  { period: "7d", label: "Last 7 days", days: 7 },
  { period: "30d", label: "Last 30 days", days: 30 },
  { period: "all", label: "All time", days: null },
];

export type CostSum = {
  /** Priced entries only. */
  cost: number;
  input: number;
  output: number;
  cacheWrite: number;
  cacheRead: number;
  /** Entries of models without a price. */
  unpriced: number;
};

export type CostGroup = {
  key: string;
  /** The person's own figures. */
  mine: CostSum;
  /** What teammates shared. */
  shared: CostSum;
  total: CostSum;
  unpricedModels: string[];
  /** Entries read from this machine's logs. */
  localEntries: number;
  /** When the newest entry was reported. */
  latestMs: number;
};

const zero = (): CostSum => ({ cost: 0, input: 0, output: 0, cacheWrite: 0, cacheRead: 0, unpriced: 0 });

function add(sum: CostSum, row: CostRow): void {
  // Never null in practice (serde writes a non-finite number as null).
  sum.cost += row.cost_usd ?? 0;
  sum.input += row.input;
  sum.output += row.output;
  sum.cacheWrite += row.cache_write;
  sum.cacheRead += row.cache_read;
  sum.unpriced += row.unpriced_entries;
}

export function tokens(sum: CostSum): number {
  return sum.input + sum.output + sum.cacheWrite + sum.cacheRead;
}

/** The values a row has for `key` (a person in two teams counts in both). */
function keysOf(row: CostRow, key: CostKey): string[] {
  switch (key) {
    case "day":
      return [row.day];
    case "agent":
      return [row.agent];
    case "person":
      return [row.person];
    case "model":
      return [row.model];
    case "team":
      return row.teams.length > 0 ? row.teams : ["(no team)"];
  }
}

/**
 * Rows grouped by `key`, mine (person `me`) and shared apart. Days in order; the rest most
 * expensive first. Pure.
 */
export function groupCosts(rows: readonly CostRow[], key: CostKey, me: string): CostGroup[] {
  const groups = new Map<string, CostGroup & { models: Set<string> }>();
  for (const row of rows) {
    for (const value of keysOf(row, key)) {
      let group = groups.get(value);
      if (!group) {
        group = { key: value, mine: zero(), shared: zero(), total: zero(), unpricedModels: [], localEntries: 0, latestMs: 0, models: new Set() };
        groups.set(value, group);
      }
      add(row.person === me ? group.mine : group.shared, row);
      add(group.total, row);
      for (const model of row.unpriced_models) group.models.add(model);
      group.localEntries += row.local_entries;
      group.latestMs = Math.max(group.latestMs, row.latest_ms);
    }
  }
  const out: CostGroup[] = [...groups.values()].map(({ models, ...group }) => ({
    ...group,
    unpricedModels: [...models].sort(),
  }));
  if (key === "day") out.sort((a, b) => a.key.localeCompare(b.key));
  else out.sort((a, b) => b.total.cost - a.total.cost || b.total.unpriced - a.total.unpriced || a.key.localeCompare(b.key));
  return out;
}

/** Everything added up. Pure. */
export function totalOf(groups: readonly CostGroup[]): CostGroup {
  const total: CostGroup = { key: "total", mine: zero(), shared: zero(), total: zero(), unpricedModels: [], localEntries: 0, latestMs: 0 };
  const models = new Set<string>();
  for (const group of groups) {
    for (const part of ["mine", "shared", "total"] as const) {
      const into = total[part];
      const from = group[part];
      into.cost += from.cost;
      into.input += from.input;
      into.output += from.output;
      into.cacheWrite += from.cacheWrite;
      into.cacheRead += from.cacheRead;
      into.unpriced += from.unpriced;
    }
    for (const model of group.unpricedModels) models.add(model);
    total.localEntries += group.localEntries;
    total.latestMs = Math.max(total.latestMs, group.latestMs);
  }
  total.unpricedModels = [...models].sort();
  return total;
}

/** Dollars as people read them: cents above a dollar, more digits below. */
export function formatUsd(cost: number): string {
  return `$${cost.toFixed(cost >= 1 || cost === 0 ? 2 : 4)}`;
}

/** A cost with its unpriced part flagged: never "$0.00" for usage that has no price. */
export function costText(sum: Pick<CostSum, "cost" | "unpriced">, unpricedModels: readonly string[] = []): string {
  if (sum.unpriced === 0) return formatUsd(sum.cost);
  const which = unpricedModels.length > 0 ? ` (${unpricedModels.join(", ")})` : "";
  if (sum.cost === 0) return `unpriced${which}`;
  return `${formatUsd(sum.cost)} + unpriced${which}`;
}

/** Token counts, short: 1.2k, 3.4M. */
export function formatTokens(count: number): string {
  if (count >= 1_000_000) return `${(count / 1_000_000).toFixed(1)}M`;
  if (count >= 1_000) return `${(count / 1_000).toFixed(1)}k`;
  return String(count);
}

export type Bar = {
  key: string;
  /** Lengths in units of the chart's width (0 to 1). */
  mine: number;
  shared: number;
  label: string;
  unpriced: boolean;
};

/** The bars of a chart, each as long as its cost against the largest. Pure. */
export function chartBars(groups: readonly CostGroup[]): Bar[] {
  const largest = Math.max(0, ...groups.map((group) => group.total.cost));
  return groups.map((group) => ({
    key: group.key,
    mine: largest > 0 ? group.mine.cost / largest : 0,
    shared: largest > 0 ? group.shared.cost / largest : 0,
    label: costText(group.total, group.unpricedModels),
    unpriced: group.total.unpriced > 0,
  }));
}

export type CostsDeps = { backend: Backend; errors: ErrorReporter; now?: () => number };

export class CostsModel extends ShownBoard {
  board: CostBoard | null = $state.raw(null);
  loaded = $state(false);
  key = $state<CostKey>("agent");
  period = $state<Period>("all");

  private readonly deps: CostsDeps;

  constructor(deps: CostsDeps) {
    super();
    this.deps = deps;
  }

  readonly groups = $derived(this.board ? groupCosts(this.board.rows, this.key, this.board.me) : []);
  readonly total = $derived(totalOf(this.groups));
  readonly bars = $derived(chartBars(this.groups));
  readonly hasShared = $derived(this.groups.some((group) => tokens(group.shared) > 0 || group.shared.unpriced > 0));

  groupBy(key: CostKey): void {
    this.key = key;
  }

  async setPeriod(period: Period): Promise<void> {
    this.period = period;
    await this.loads.changed();
  }

  async applyChange(change: CoreChanged): Promise<void> {
    if (change.work || change.everything) await this.loads.changed();
  }

  private sinceMs(): number | null {
    const days = PERIODS.find((entry) => entry.period === this.period)?.days ?? null;
    if (days === null) return null;
    const now = (this.deps.now ?? Date.now)();
    return now - days * 24 * 3_600_000;
  }

  protected async fetch(): Promise<void> {
    try {
      this.board = await this.deps.backend.costs(this.sinceMs());
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    }
  }
}
