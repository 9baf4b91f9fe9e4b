/**
 * The architecture board of a room: its components (from `.roundtable/architecture.toml` or
 * an agent's `define_components`), each with its status, the agents working on it and the
 * files they touched; the dependencies as a graph laid out in a Web Worker; and, for the
 * component the person opens, its history.
 */
import type { ArchitectureBoard, ComponentChange, ComponentStatus, ComponentView, CoreChanged } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import type { StatusLabel } from "../../app/status";
import { ShownBoard } from "../../app/coalesced";
import { GraphLayouter } from "./layout-client";
import { layoutGraph, type GraphInput, type GraphLayout } from "./layout";

export const ARCHITECTURE_EMPTY =
  "No components yet. They appear as agents edit files in a repository: its packages (Cargo, npm, Go, Python) or its top-level folders, or what you describe in .roundtable/architecture.toml (id, name, paths, depends_on) or an agent defines with define_components.";

/** Where a board's components came from, in words. */
export function sourceText(board: Pick<ArchitectureBoard, "source">): string {
  return board.source === null
    ? "As written (.roundtable/architecture.toml or define_components)."
    : `Inferred from the repository's ${board.source}. Write .roundtable/architecture.toml, or have an agent call define_components, to replace it.`;
}

export type ComponentState = ComponentStatus;

export const COMPONENT_STATES: Record<ComponentState, StatusLabel> = {
  idle: { icon: "○", label: "idle", tone: "neutral" },
  working: { icon: "⚙", label: "working", tone: "progress" },
  done: { icon: "✔", label: "done", tone: "ok" },
  blocked: { icon: "⛔", label: "blocked", tone: "bad" },
};

/** The component's state: the latest anyone reported, else idle. */
export function componentState(component: Pick<ComponentView, "status">): ComponentState {
  return component.status ?? "idle";
}

/** Agents whose latest report says they work on it, by handle. */
export function workingAgents(component: Pick<ComponentView, "agents">): string[] {
  return component.agents.filter((agent) => agent.status === "working").map((agent) => agent.handle ?? agent.agent);
}

/** Edits this close together are "at once" (the core's `overlaps::WINDOW_MS`). */
export const OVERLAP_WINDOW_MS = 15 * 60 * 1000;

/**
 * Two or more agents editing it at once (each reported working within the window): who,
 * or none. Advisory: the agents themselves are told at their next tool boundary.
 */
export function collidingAgents(component: Pick<ComponentView, "agents">, now: number): string[] {
  const editing = component.agents
    .filter((agent) => agent.status === "working" && now - agent.ts_ms <= OVERLAP_WINDOW_MS)
    .map((agent) => agent.handle ?? agent.agent);
  return editing.length >= 2 ? editing : [];
}

/** Who claims it (advisory), if anyone. */
export function claimHolder(component: Pick<ComponentView, "agents">): string | null {
  const holder = component.agents.find((agent) => agent.claimed);
  return holder ? (holder.handle ?? holder.agent) : null;
}

/** Every file reported on it, each once, sorted. */
export function touchedFiles(component: Pick<ComponentView, "files" | "agents">): string[] {
  const files = new Set(component.files);
  for (const agent of component.agents) for (const file of agent.files) files.add(file);
  return [...files].sort((a, b) => a.localeCompare(b));
}

/** The dependency graph: an edge from each dependency to the component that uses it. */
export function graphOf(components: readonly ComponentView[]): GraphInput {
  return {
    nodes: components.map((component) => ({ id: component.id, label: component.name ?? component.id })),
    edges: components.flatMap((component) => component.depends_on.map((dependency) => ({ from: dependency, to: component.id }))),
  };
}

/** Dependencies the board does not define (a typo, or a component not described yet). */
export function missingDependencies(components: readonly ComponentView[]): string[] {
  const ids = new Set(components.map((component) => component.id));
  const missing = new Set<string>();
  for (const component of components) for (const dependency of component.depends_on) if (!ids.has(dependency)) missing.add(dependency);
  return [...missing].sort();
}

/** A line of a component's history, in words. */
export function changeText(change: ComponentChange): string {
  const who = change.agent_handle ?? change.by_handle ?? change.by;
  if (change.kind === "defined") {
    const uses = change.depends_on.length > 0 ? `, uses ${change.depends_on.join(", ")}` : "";
    return `defined by ${change.by_handle ?? change.by}${uses}`;
  }
  const state = COMPONENT_STATES[componentState({ status: change.status })].label;
  return `${state} — ${who}${change.note ? `: ${change.note}` : ""}`;
}

export type ArchitectureDeps = { backend: Backend; errors: ErrorReporter; layouter?: GraphLayouter };

export class ArchitectureModel extends ShownBoard {
  boards: ArchitectureBoard[] = $state.raw([]);
  loaded = $state(false);
  /** The room whose board shows (the first when none was picked). */
  room = $state<string | null>(null);
  /** The component whose history is open. */
  selected = $state<string | null>(null);
  history: ComponentChange[] = $state.raw([]);
  historyLoaded = $state(false);
  layout: GraphLayout | null = $state.raw(null);

  private readonly deps: ArchitectureDeps;
  private readonly layouter: GraphLayouter;
  private laidOut = "";

  constructor(deps: ArchitectureDeps) {
    super();
    this.deps = deps;
    this.layouter = deps.layouter ?? new GraphLayouter();
  }

  readonly board: ArchitectureBoard | null = $derived(
    this.boards.find((board) => board.room === this.room) ?? this.boards[0] ?? null,
  );
  readonly component: ComponentView | null = $derived(
    this.board?.components.find((component) => component.id === this.selected) ?? null,
  );
  readonly missing = $derived(this.board ? missingDependencies(this.board.components) : []);

  async selectRoom(room: string): Promise<void> {
    this.room = room;
    this.selected = null;
    this.history = [];
    await this.relayout();
  }

  async selectComponent(id: string | null): Promise<void> {
    this.selected = id;
    this.history = [];
    this.historyLoaded = false;
    if (id !== null) await this.fetchHistory();
  }

  async applyChange(change: CoreChanged): Promise<void> {
    if (change.work || change.everything) await this.loads.changed();
  }

  protected async fetch(): Promise<void> {
    try {
      this.boards = await this.deps.backend.architecture();
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
      return;
    }
    await Promise.all([this.relayout(), this.selected !== null ? this.fetchHistory() : Promise.resolve()]);
  }

  private async fetchHistory(): Promise<void> {
    const board = this.board;
    const id = this.selected;
    if (!board || id === null) return;
    try {
      const history = await this.deps.backend.componentHistory(board.room, id);
      if (this.selected === id) {
        this.history = history;
        this.historyLoaded = true;
      }
    } catch (error) {
      this.deps.errors.report(error);
    }
  }

  /** Lays the graph out again when its shape changed (not for a status change). */
  private async relayout(): Promise<void> {
    const board = this.board;
    if (!board) {
      this.layout = null;
      this.laidOut = "";
      return;
    }
    const graph = graphOf(board.components);
    const shape = JSON.stringify([board.room, graph]);
    if (shape === this.laidOut) return;
    this.laidOut = shape;
    let layout: GraphLayout;
    try {
      layout = await this.layouter.layout(graph);
    } catch {
      layout = layoutGraph(graph);
    }
    if (this.laidOut === shape) this.layout = layout;
  }
}
