import { describe, expect, it } from "vitest";
import type { CostRow } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { BudgetsModel, budgetOf, budgetText } from "./budgets.model.svelte";

// Wednesday 2 December 2026: the week began on Monday 30 November.
const NOW = Date.UTC(2026, 11, 2, 12);

function row(day: string, agent: string, cost: number): CostRow {
  return {
    room: "r",
    day,
    agent,
    person: agent.split("/")[0],
    teams: ["core"],
    model: "claude-sonnet-4-5",
    input: 1,
    output: 1,
    cache_write: 0,
    cache_read: 0,
    cost_usd: cost,
    unpriced_entries: 0,
    unpriced_models: [],
    local_entries: 0,
    latest_ms: 1,
  };
}

function setup() {
  const world = emptyWorld();
  world.boards.costs = [row("2026-12-02", "dana/writer", 4.2), row("2026-12-01", "dana/writer", 3), row("2026-11-29", "dana/writer", 50)];
  const backend = new FakeBackend({ world, now: () => NOW });
  const errors = new Toasts();
  return { world, backend, errors, model: new BudgetsModel({ backend, errors }) };
}

describe("budgets", () => {
  it("reads a form as a budget, or says what is missing", () => {
    expect(budgetOf({ scope: "agent", name: " writer ", period: "day", usd: "$5" })).toEqual({ scope: "agent", name: "writer", period: "day", usd: 5 });
    expect(budgetOf({ scope: "team", name: "", period: "day", usd: "5" })).toBe("Name the team.");
    expect(budgetOf({ scope: "person", name: "", period: "day", usd: "5" })).toBe("Write the person's handle.");
    for (const usd of ["", "0", "-2", "five", "Infinity"]) {
      expect(budgetOf({ scope: "agent", name: "writer", period: "week", usd })).toMatch(/in dollars/);
    }
  });

  it("sets a budget for an agent of mine by its name, and shows the period's spend against it", async () => {
    const { model, errors } = setup();
    await model.load();
    expect(model.states).toEqual([]);
    model.name = "writer";
    model.usd = "5";
    expect(await model.set()).toBe(true);
    expect(errors.items).toEqual([]);
    expect([model.name, model.usd]).toEqual(["", ""]);
    expect(model.states.map((state) => [state.budget.name, state.spent_usd, state.level])).toEqual([["dana/writer", 4.2, "near"]]);
    expect(budgetText(model.states[0])).toBe("dana/writer: $4.20 of $5.00 a day (84 %)");

    // The same budget per week counts from Monday: reached.
    model.edit(model.states[0].budget);
    model.period = "week";
    await model.set();
    const week = model.states.find((state) => state.budget.period === "week")!;
    expect([week.spent_usd, week.level]).toEqual([7.2, "reached"]);

    await model.remove(model.states[0].budget);
    expect(model.states.map((state) => state.budget.period)).toEqual(["week"]);
  });

  it("refuses what the core refuses, and keeps the form for a fix", async () => {
    const { model, errors } = setup();
    model.scope = "person";
    model.name = "Not A Handle";
    model.usd = "5";
    expect(await model.set()).toBe(false);
    expect(errors.items.map((toast) => toast.code)).toEqual(["invalid"]);
    expect(model.name).toBe("Not A Handle");
    model.name = "";
    expect(await model.set()).toBe(false);
    expect(errors.items.at(-1)?.message).toBe("Write the person's handle.");
  });

  it("follows usage once loaded, not before", async () => {
    const { model, backend, world } = setup();
    let calls = 0;
    const budgets = backend.budgets.bind(backend);
    backend.budgets = async () => {
      calls += 1;
      return budgets();
    };
    await model.applyChange({ rooms: false, messages: [], pings: false, contacts: false, agents: false, sync: false, work: true, scan: false, everything: false });
    expect(calls).toBe(0);
    world.budgets = [{ scope: "team", name: "core", period: "month", usd: 100 }];
    await model.load();
    world.boards.costs.push(row("2026-12-02", "sam/bot", 1));
    await model.applyChange({ rooms: false, messages: [], pings: false, contacts: false, agents: false, sync: false, work: true, scan: false, everything: false });
    expect(calls).toBe(2);
    expect(model.states[0].spent_usd).toBeCloseTo(8.2);
  });
});
