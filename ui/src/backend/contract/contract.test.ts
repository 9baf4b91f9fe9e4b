import { describe, expect, it } from "vitest";
import { type AgentCli, type AgentView, type Detected, type DirectoryView, commands } from "../../bindings";
import { FakeBackend } from "../fake";
import { emptyWorld, supportOf, type FakeWorld } from "../fake-world";
import scenarios from "./scenarios.json";
import { ARGUMENTS, type Bindings, type Step, matches, positionalCall, runSteps } from "./runner";

const steps = scenarios as Step[];

/**
 * The machine the desktop test runs the app on: the project's fake claude, codex and gemini
 * on `PATH` (tests/fixtures/agent-clis), none onboarded.
 */
function testMachineClis(): Detected[] {
  const installed = (cli: AgentCli, name: string, config: string[]): Detected => ({
    cli,
    name,
    path: `/work/tests/fixtures/agent-clis/${cli}`,
    version: null,
    supported: true,
    support: supportOf(cli),
    config,
    logs: [],
    onboarded: false,
    handle: null,
  });
  return [
    installed("claude", "Claude Code", ["~/.claude.json"]),
    installed("codex", "Codex", ["~/.codex/config.toml"]),
    installed("gemini", "Gemini CLI", ["~/.gemini/settings.json"]),
  ];
}

/** The acts of the scenarios, played on the fake's world as the hub would record them. */
function act(world: FakeWorld, name: string): void {
  const entry = (id: string, handle: string, kind: "user" | "agent", contact: DirectoryView["contact"]): DirectoryView => ({
    id,
    handle,
    name: handle,
    description: null,
    kind,
    owner: kind === "agent" ? "u-bob" : null,
    contact,
  });
  switch (name) {
    case "bob joins with an invite from dana and registers his agent bob/bot":
      world.directory.push(entry("u-bob", "bob", "user", "accepted"), entry("a-bob-bot", "bob/bot", "agent", "none"));
      world.contacts.push({ principal: "u-bob", handle: "bob", name: "Bob", kind: "user", since_ms: 0 });
      return;
    case "dana registers an agent named helper": {
      const helper: AgentView = {
        id: "a-dana-helper",
        handle: "dana/helper",
        name: "helper",
        cli: null,
        state: "idle",
        detail: null,
        room: null,
        since_ms: null,
        controls: [],
      };
      world.agents.push(helper);
      world.directory.push({ ...entry(helper.id, helper.handle, "agent", "kin"), owner: "u-dana" });
      return;
    }
    default:
      throw new Error(`the fake cannot play the act "${name}"`);
  }
}

describe("the contract, on the fake backend", () => {
  it("holds for every scenario, in order", async () => {
    const world = emptyWorld();
    world.detected = testMachineClis();
    const backend = new FakeBackend({ world, now: () => 1_700_000_000_000 });
    let bindings: Bindings = {};
    let from = 0;
    for (;;) {
      const progress = await runSteps(steps, from, positionalCall(backend), bindings, { totalMs: 0, pauseMs: 0 });
      expect(progress.failure).toBeNull();
      bindings = progress.bindings;
      if (progress.actAt === null) break;
      act(world, (steps[progress.actAt] as { act: string }).act);
      from = progress.actAt + 1;
    }
    expect(Object.keys(bindings).sort()).toEqual(["bob", "botRequest", "code", "first", "helper", "invite", "plans", "roomInvite", "withBob"]);
  });
});

describe("the contract's reach", () => {
  it("names every command the app has, but the benchmark's clock", () => {
    const generated = Object.keys(commands).filter((command) => command !== "startedAtMs");
    expect(Object.keys(ARGUMENTS).sort()).toEqual(generated.sort());
  });

  it("calls every command at least once", () => {
    const called = new Set(steps.flatMap((step) => ("call" in step ? [step.call] : [])));
    expect(Object.keys(ARGUMENTS).filter((command) => !called.has(command))).toEqual([]);
  });
});

describe("the runner", () => {
  it("matches fields, arrays in order and binds names", () => {
    const bound: Bindings = {};
    expect(matches([{ a: 1 }, { b: "?x" }], [{ a: 1, z: 0 }, { c: 1 }, { b: 7 }], bound)).toBe(true);
    expect(bound).toEqual({ x: 7 });
    expect(matches([{ b: 2 }, { a: 1 }], [{ a: 1 }, { b: 2 }], {})).toBe(false);
    expect(matches({ b: "?x" }, { b: 8 }, { x: 7 })).toBe(false);
    expect(matches([], [1], {})).toBe(false);
    expect(matches("?", { anything: true }, {})).toBe(true);
  });

  it("reports the first step that does not hold, and a misnamed argument", async () => {
    const call = async (method: string) => (method === "rooms" ? [] : null);
    const bad: Step[] = [{ scenario: "s" }, { call: "rooms", args: {}, expect: { ok: [{ id: "x" }] } }];
    expect((await runSteps(bad, 0, call, {})).failure).toMatch(/^s, step 1 \(rooms\): expected/);
    const misnamed: Step[] = [{ call: "sendMessage", args: { text: "hi", room: "r" } }];
    expect((await runSteps(misnamed, 0, call, {})).failure).toMatch(/arguments must be \[room, text\]/);
    const refused: Step[] = [{ call: "rooms", args: {}, expect: { error: "not_found" } }];
    expect((await runSteps(refused, 0, call, {})).failure).toMatch(/expected the error not_found, got \[\]/);
  });
});
