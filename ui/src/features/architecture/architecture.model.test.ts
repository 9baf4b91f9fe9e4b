import { describe, expect, it } from "vitest";
import type { ComponentView } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { demoBoards } from "../../backend/fake-boards";
import { emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import {
  ArchitectureModel,
  COMPONENT_STATES,
  changeText,
  componentState,
  graphOf,
  missingDependencies,
  sourceText,
  touchedFiles,
  workingAgents, collidingAgents, claimHolder } from "./architecture.model.svelte";
import type { GraphLayouter } from "./layout-client";
import { layoutGraph } from "./layout";

const NOW = Date.UTC(2026, 11, 1, 12);

function component(id: string, overrides: Partial<ComponentView> = {}): ComponentView {
  return {
    room: "r",
    id,
    name: null,
    description: null,
    paths: [],
    depends_on: [],
    status: null,
    note: null,
    files: [],
    by: null,
    status_ms: null,
    source: null,
    agents: [],
    working: [],
    ...overrides,
  };
}

function setup() {
  const world = emptyWorld();
  world.boards = demoBoards(NOW);
  const backend = new FakeBackend({ world, now: () => NOW });
  const laidOut: string[] = [];
  const layouter = {
    layout: async (graph) => {
      laidOut.push(graph.nodes.map((n) => n.id).join(","));
      return layoutGraph(graph);
    },
  } as GraphLayouter;
  const model = new ArchitectureModel({ backend, errors: new Toasts(), layouter });
  backend.onChanged((change) => void model.applyChange(change));
  return { world, backend, model, laidOut };
}

describe("architecture board", () => {
  it("says each state in words, idle when nobody reported one", () => {
    expect(componentState(component("a"))).toBe("idle");
    expect(componentState(component("a", { status: "blocked" }))).toBe("blocked");
    for (const state of Object.values(COMPONENT_STATES)) expect(state.label.length).toBeGreaterThan(0);
  });

  it("names who works on a component and every file touched, once", () => {
    const parser = component("parser", {
      files: ["src/b.rs"],
      agents: [
        { agent: "a1", handle: "dana/writer", status: "working", note: null, files: ["src/a.rs", "src/b.rs"], ts_ms: 1, claimed: false },
        { agent: "a2", handle: null, status: "done", note: null, files: ["src/c.rs"], ts_ms: 2, claimed: false },
        { agent: "a3", handle: null, status: "working", note: null, files: [], ts_ms: 3, claimed: false },
      ],
    });
    expect(workingAgents(parser)).toEqual(["dana/writer", "a3"]);
    expect(touchedFiles(parser)).toEqual(["src/a.rs", "src/b.rs", "src/c.rs"]);
  });

  it("marks two agents editing at once within the window, and who claims it", () => {
    const minute = 60_000;
    const now = 100 * minute;
    const agent = (id: string, minutesAgo: number, claimed = false) => ({
      agent: id,
      handle: `dana/${id}`,
      status: "working" as const,
      note: null,
      files: [],
      ts_ms: now - minutesAgo * minute,
      claimed,
    });
    expect(collidingAgents(component("p", { agents: [agent("a", 1), agent("b", 14)] }), now)).toEqual(["dana/a", "dana/b"]);
    expect(collidingAgents(component("p", { agents: [agent("a", 1), agent("b", 16)] }), now)).toEqual([]);
    expect(collidingAgents(component("p", { agents: [agent("a", 1)] }), now)).toEqual([]);
    expect(claimHolder(component("p", { agents: [agent("a", 1), agent("b", 90, true)] }))).toBe("dana/b");
    expect(claimHolder(component("p", { agents: [agent("a", 1)] }))).toBeNull();
  });

  it("draws an edge from each dependency to its user and lists the undefined ones", () => {
    const components = [component("parser", { depends_on: ["lexer", "ghost"] }), component("lexer", { name: "Lexer" })];
    expect(graphOf(components)).toEqual({
      nodes: [
        { id: "parser", label: "parser" },
        { id: "lexer", label: "Lexer" },
      ],
      edges: [
        { from: "lexer", to: "parser" },
        { from: "ghost", to: "parser" },
      ],
    });
    expect(missingDependencies(components)).toEqual(["ghost"]);
  });

  it("tells a history line in words", () => {
    const base = { seq: 1, ts_ms: 1, by: "u", by_handle: "dana", files: [], depends_on: [], note: null, status: null };
    expect(changeText({ ...base, kind: "defined", agent_handle: "dana", depends_on: ["lexer"] })).toBe("defined by dana, uses lexer");
    expect(changeText({ ...base, kind: "status", agent_handle: "dana/writer", status: "done", note: "merged" })).toBe(
      "done — dana/writer: merged",
    );
  });

  it("loads when shown, lays the graph out once per shape, and follows status changes", async () => {
    const { world, backend, model, laidOut } = setup();
    await model.show();
    expect(model.board?.room).toBe("r-parser");
    expect(model.layout?.nodes).toHaveLength(5);
    expect(laidOut).toHaveLength(1);

    // A status changes: the card follows, the graph is not laid out again.
    world.boards.architecture[0]!.components[4]!.status = "working";
    backend.emitChanged({ work: true });
    await settle();
    expect(componentState(model.board!.components[4]!)).toBe("working");
    expect(laidOut).toHaveLength(1);

    // A new component: laid out again.
    world.boards.architecture[0]!.components.push(component("tests", { room: "r-parser", depends_on: ["parser"] }));
    backend.emitChanged({ work: true });
    await settle();
    expect(laidOut).toHaveLength(2);
    expect(model.layout?.nodes).toHaveLength(6);
  });

  it("opens a component's history, newest change last from the core", async () => {
    const { backend, model } = setup();
    await model.show();
    await model.selectComponent("parser");
    expect(model.component?.id).toBe("parser");
    expect(model.history.map((change) => change.status)).toEqual([null, "working", "done", "working"]);
    expect(backend.calls.some((call) => call.command === "componentHistory" && call.args[1] === "parser")).toBe(true);
    await model.selectComponent(null);
    expect(model.history).toEqual([]);
  });
});

describe("where the components came from", () => {
  it("says whether they were written or inferred, and how to replace inferred ones", () => {
    expect(sourceText({ source: null })).toMatch(/^As written/);
    const inferred = sourceText({ source: "Cargo workspace, npm packages" });
    expect(inferred).toContain("Inferred from the repository's Cargo workspace, npm packages.");
    expect(inferred).toContain(".roundtable/architecture.toml");
  });
});
