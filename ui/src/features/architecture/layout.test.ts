import { describe, expect, it } from "vitest";
import { NODE_HEIGHT, layoutGraph } from "./layout";

const node = (id: string) => ({ id, label: id.toUpperCase() });

describe("graph layout", () => {
  it("puts each component a layer below the lowest of its dependencies", () => {
    const layout = layoutGraph({
      nodes: ["cli", "parser", "tokenizer", "loader"].map(node),
      edges: [
        { from: "tokenizer", to: "parser" },
        { from: "parser", to: "loader" },
        { from: "loader", to: "cli" },
        { from: "parser", to: "cli" },
      ],
    });
    const layer = Object.fromEntries(layout.nodes.map((placed) => [placed.id, placed.layer]));
    expect(layer).toEqual({ tokenizer: 0, parser: 1, loader: 2, cli: 3 });
    const y = Object.fromEntries(layout.nodes.map((placed) => [placed.id, placed.y]));
    expect(y.parser! - y.tokenizer!).toBeGreaterThan(NODE_HEIGHT);
    expect(layout.edges).toHaveLength(4);
    for (const edge of layout.edges) expect(edge.path).toMatch(/^M[\d.]+,[\d.]+ C/);
    expect(layout.nodes.find((placed) => placed.id === "cli")!.label).toBe("CLI");
  });

  it("never overlaps nodes of a layer and stays inside its size", () => {
    const layout = layoutGraph({
      nodes: ["a", "b", "c", "d", "e", "root"].map(node),
      edges: ["a", "b", "c", "d", "e"].map((id) => ({ from: "root", to: id })),
    });
    const second = layout.nodes.filter((placed) => placed.layer === 1).sort((p, q) => p.x - q.x);
    expect(second).toHaveLength(5);
    for (let index = 1; index < second.length; index += 1) {
      expect(second[index]!.x).toBeGreaterThanOrEqual(second[index - 1]!.x + second[index - 1]!.width);
    }
    for (const placed of layout.nodes) {
      expect(placed.x).toBeGreaterThanOrEqual(0);
      expect(placed.x + placed.width).toBeLessThanOrEqual(layout.width);
      expect(placed.y + placed.height).toBeLessThanOrEqual(layout.height);
    }
  });

  it("orders a layer to follow its dependencies (fewer crossings)", () => {
    const layout = layoutGraph({
      nodes: ["a", "b", "x", "y"].map(node),
      // b's dependent sorts first by name; the sweeps put each under its own dependency.
      edges: [
        { from: "a", to: "y" },
        { from: "b", to: "x" },
      ],
    });
    const x = Object.fromEntries(layout.nodes.map((placed) => [placed.id, placed.x]));
    expect(Math.sign(x.a! - x.b!)).toBe(Math.sign(x.y! - x.x!));
  });

  it("survives cycles, self-references and unknown dependencies", () => {
    const layout = layoutGraph({
      nodes: ["a", "b", "c"].map(node),
      edges: [
        { from: "a", to: "b" },
        { from: "b", to: "a" },
        { from: "c", to: "c" },
        { from: "ghost", to: "c" },
      ],
    });
    expect(layout.nodes).toHaveLength(3);
    expect(layout.edges.map((edge) => `${edge.from}>${edge.to}`).sort()).toEqual(["a>b", "b>a"]);
  });

  it("is the same layout for the same graph", () => {
    const graph = { nodes: ["p", "q", "r"].map(node), edges: [{ from: "p", to: "q" }] };
    expect(layoutGraph(graph)).toEqual(layoutGraph(structuredClone(graph)));
  });
});
