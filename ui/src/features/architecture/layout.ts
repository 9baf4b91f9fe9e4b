/**
 * Where each component goes in the dependency graph: a layered layout (what nothing else
 * needs at the top, each component one layer below the lowest of its dependencies), the
 * order within a layer settled by a few sweeps that pull each component towards its
 * neighbours (fewer crossings), and edges as curves from a dependency down to what uses it.
 *
 * Pure and self-contained: it runs in a Web Worker (layout.worker.ts) so a large board never
 * holds up the window, and directly in tests.
 */

export type GraphInput = { nodes: { id: string; label: string }[]; edges: { from: string; to: string }[] };

export type PlacedNode = { id: string; label: string; x: number; y: number; width: number; height: number; layer: number };
export type PlacedEdge = { from: string; to: string; path: string };
export type GraphLayout = { width: number; height: number; nodes: PlacedNode[]; edges: PlacedEdge[] };

export const NODE_WIDTH = 150;
export const NODE_HEIGHT = 52;
const GAP_X = 36;
const GAP_Y = 56;
const MARGIN = 12;
const SWEEPS = 4;

/**
 * `edges` go from a dependency to its dependent (`from` is used by `to`). Edges naming an
 * unknown node and edges closing a cycle are drawn but do not shape the layers.
 */
export function layoutGraph(input: GraphInput): GraphLayout {
  const ids = new Set(input.nodes.map((node) => node.id));
  const edges = input.edges.filter((edge) => ids.has(edge.from) && ids.has(edge.to) && edge.from !== edge.to);
  const dependencies = new Map<string, string[]>(input.nodes.map((node) => [node.id, []]));
  for (const edge of edges) dependencies.get(edge.to)!.push(edge.from);

  // Layers: the longest chain of dependencies above each node; a cycle is cut where met.
  const layer = new Map<string, number>();
  const visiting = new Set<string>();
  const depth = (id: string): number => {
    const known = layer.get(id);
    if (known !== undefined) return known;
    if (visiting.has(id)) return -1;
    visiting.add(id);
    let value = 0;
    for (const dependency of dependencies.get(id)!) value = Math.max(value, depth(dependency) + 1);
    visiting.delete(id);
    layer.set(id, value);
    return value;
  };
  const sortedIds = input.nodes.map((node) => node.id).sort((a, b) => a.localeCompare(b));
  for (const id of sortedIds) depth(id);

  const layers: string[][] = [];
  for (const id of sortedIds) {
    const index = layer.get(id)!;
    (layers[index] ??= []).push(id);
  }

  // Order within layers: barycentres of the neighbours, down then up, a few times.
  const position = new Map<string, number>();
  const place = () => layers.forEach((row) => row.forEach((id, index) => position.set(id, index)));
  place();
  const dependents = new Map<string, string[]>(input.nodes.map((node) => [node.id, []]));
  for (const edge of edges) dependents.get(edge.from)!.push(edge.to);
  const barycentre = (id: string, neighbours: string[]) => {
    const placed = neighbours.filter((neighbour) => position.has(neighbour));
    if (placed.length === 0) return position.get(id)!;
    return placed.reduce((sum, neighbour) => sum + position.get(neighbour)!, 0) / placed.length;
  };
  for (let sweep = 0; sweep < SWEEPS; sweep += 1) {
    const down = sweep % 2 === 0;
    const order = down ? layers.map((_, index) => index) : layers.map((_, index) => layers.length - 1 - index);
    for (const index of order) {
      const row = layers[index]!;
      const key = new Map(row.map((id) => [id, barycentre(id, down ? dependencies.get(id)! : dependents.get(id)!)]));
      row.sort((a, b) => key.get(a)! - key.get(b)! || a.localeCompare(b));
      row.forEach((id, position_) => position.set(id, position_));
    }
  }

  const widest = Math.max(1, ...layers.map((row) => row.length));
  const width = MARGIN * 2 + widest * NODE_WIDTH + (widest - 1) * GAP_X;
  const height = MARGIN * 2 + Math.max(1, layers.length) * NODE_HEIGHT + Math.max(0, layers.length - 1) * GAP_Y;
  const labels = new Map(input.nodes.map((node) => [node.id, node.label]));
  const nodes: PlacedNode[] = [];
  const at = new Map<string, PlacedNode>();
  layers.forEach((row, index) => {
    const rowWidth = row.length * NODE_WIDTH + (row.length - 1) * GAP_X;
    const left = (width - rowWidth) / 2;
    row.forEach((id, column) => {
      const node: PlacedNode = {
        id,
        label: labels.get(id) ?? id,
        x: left + column * (NODE_WIDTH + GAP_X),
        y: MARGIN + index * (NODE_HEIGHT + GAP_Y),
        width: NODE_WIDTH,
        height: NODE_HEIGHT,
        layer: index,
      };
      nodes.push(node);
      at.set(id, node);
    });
  });
  const placedEdges: PlacedEdge[] = edges.map((edge) => {
    const from = at.get(edge.from)!;
    const to = at.get(edge.to)!;
    const x1 = from.x + from.width / 2;
    const x2 = to.x + to.width / 2;
    // Downwards from the dependency's bottom to the dependent's top; a cut cycle goes up.
    const downwards = from.y < to.y;
    const y1 = downwards ? from.y + from.height : from.y;
    const y2 = downwards ? to.y : to.y + to.height;
    const bend = (y2 - y1) / 2;
    return {
      from: edge.from,
      to: edge.to,
      path: `M${round(x1)},${round(y1)} C${round(x1)},${round(y1 + bend)} ${round(x2)},${round(y2 - bend)} ${round(x2)},${round(y2)}`,
    };
  });
  return { width, height, nodes, edges: placedEdges };
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
