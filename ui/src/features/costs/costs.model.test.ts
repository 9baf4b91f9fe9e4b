import { describe, expect, it } from "vitest";
import type { CostRow } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { demoBoards } from "../../backend/fake-boards";
import { emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import { CostsModel, chartBars, costText, formatTokens, formatUsd, groupCosts, tokens, totalOf } from "./costs.model.svelte";

const NOW = Date.UTC(2026, 11, 1, 12);

function row(overrides: Partial<CostRow>): CostRow {
  return {
    room: "r",
    day: "2026-11-30",
    agent: "dana/writer",
    person: "dana",
    teams: ["core"],
    model: "claude-sonnet-4-5",
    input: 100,
    output: 10,
    cache_write: 0,
    cache_read: 1000,
    cost_usd: 1,
    unpriced_entries: 0,
    unpriced_models: [],
    local_entries: 0,
    latest_ms: 5,
    ...overrides,
  };
}

const rows: CostRow[] = [
  row({ day: "2026-11-29", cost_usd: 1.5 }),
  row({ day: "2026-11-30", cost_usd: 0.25, latest_ms: 9 }),
  row({ agent: "dana/writer", model: "homegrown-9", cost_usd: 0, unpriced_entries: 2, unpriced_models: ["homegrown-9"] }),
  row({ agent: "(local claude-code)", room: null, cost_usd: 0.5, local_entries: 4 }),
  row({ agent: "sam/security", person: "sam", teams: ["core", "sec"], model: "claude-opus-4-6", cost_usd: 3, latest_ms: 7 }),
  row({ agent: "lee/bot", person: "lee", teams: [], model: "claude-opus-4-6", cost_usd: 0.75 }),
];

describe("costs board", () => {
  it("groups by agent with the person's own apart from what teammates shared", () => {
    const groups = groupCosts(rows, "agent", "dana");
    expect(groups.map((group) => [group.key, group.total.cost])).toEqual([
      ["sam/security", 3],
      ["dana/writer", 1.75],
      ["lee/bot", 0.75],
      ["(local claude-code)", 0.5],
    ]);
    const writer = groups[1]!;
    expect(writer.mine.cost).toBe(1.75);
    expect(writer.shared.cost).toBe(0);
    expect(writer.total.unpriced).toBe(2);
    expect(writer.unpricedModels).toEqual(["homegrown-9"]);
    expect(writer.latestMs).toBe(9);
    expect(groups[0]!.shared.cost).toBe(3);
    expect(groups[3]!.localEntries).toBe(4);
  });

  it("orders days in time and counts a person in each of their teams", () => {
    expect(groupCosts(rows, "day", "dana").map((group) => group.key)).toEqual(["2026-11-29", "2026-11-30"]);
    const teams = groupCosts(rows, "team", "dana");
    expect(teams.map((group) => [group.key, group.total.cost])).toEqual([
      ["core", 5.25],
      ["sec", 3],
      ["(no team)", 0.75],
    ]);
    expect(groupCosts(rows, "model", "dana").map((group) => group.key)).toEqual(["claude-opus-4-6", "claude-sonnet-4-5", "homegrown-9"]);
    expect(groupCosts(rows, "person", "dana").map((group) => group.key)).toEqual(["sam", "dana", "lee"]);
  });

  it("adds everything up once, however it is grouped (teams aside)", () => {
    for (const key of ["day", "agent", "person", "model"] as const) {
      const total = totalOf(groupCosts(rows, key, "dana"));
      expect(total.total.cost).toBeCloseTo(6, 10);
      expect(total.total.unpriced).toBe(2);
      expect(tokens(total.total)).toBe(rows.length * 1110);
      expect(total.unpricedModels).toEqual(["homegrown-9"]);
    }
  });

  it("never shows unpriced usage as $0", () => {
    expect(costText({ cost: 0, unpriced: 2 }, ["homegrown-9"])).toBe("unpriced (homegrown-9)");
    expect(costText({ cost: 1.5, unpriced: 1 }, ["m"])).toBe("$1.50 + unpriced (m)");
    expect(costText({ cost: 0, unpriced: 0 })).toBe("$0.00");
    expect(formatUsd(0.0123)).toBe("$0.0123");
    expect(formatTokens(1_234)).toBe("1.2k");
    expect(formatTokens(2_500_000)).toBe("2.5M");
    expect(formatTokens(12)).toBe("12");
  });

  it("draws bars against the largest, split into mine and shared, flagging unpriced ones", () => {
    const groups = groupCosts(
      [row({ cost_usd: 2 }), row({ person: "sam", agent: "sam/x", cost_usd: 4 }), row({ agent: "dana/writer", person: "sam", cost_usd: 2 }), row({ agent: "u", cost_usd: 0, unpriced_entries: 1, unpriced_models: ["m"] })],
      "agent",
      "dana",
    );
    const bars = chartBars(groups);
    expect(bars.map((bar) => [bar.key, bar.mine, bar.shared, bar.unpriced])).toEqual([
      ["dana/writer", 0.5, 0.5, false],
      ["sam/x", 0, 1, false],
      ["u", 0, 0, true],
    ]);
    expect(bars[2]!.label).toBe("unpriced (m)");
  });

  it("loads when shown, asks the core for a period, and refetches on work changes", async () => {
    const world = emptyWorld();
    world.boards = demoBoards(NOW);
    const backend = new FakeBackend({ world, now: () => NOW });
    const model = new CostsModel({ backend, errors: new Toasts(), now: () => NOW });
    backend.onChanged((change) => void model.applyChange(change));
    await model.show();
    expect(model.groups.length).toBeGreaterThan(0);
    expect(model.hasShared).toBe(true);
    expect(backend.calls.at(-1)).toEqual({ command: "costs", args: [null] });
    await model.setPeriod("7d");
    expect(backend.calls.at(-1)).toEqual({ command: "costs", args: [NOW - 7 * 24 * 3_600_000] });
    const loads = backend.calls.length;
    backend.emitChanged({ work: true });
    await settle();
    expect(backend.calls.length).toBe(loads + 1);
    backend.emitChanged({ pings: true });
    await settle();
    expect(backend.calls.length).toBe(loads + 1);
  });
});
