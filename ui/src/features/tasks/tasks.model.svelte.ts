/**
 * The tasks board: the task lists agents keep for themselves, a swim lane per agent session
 * (agent, framework, machine, person), columns by status. Filters narrow it by room, agent,
 * person and state; a task shows when it moved from one status to the next.
 *
 * The board is drawn as rows for a virtualized list: a lane's header, then rows holding one
 * task per column side by side. Thousands of tasks are thousands of data rows, and only the
 * rows on screen become elements.
 */
import type { CoreChanged, TaskBoard, TaskLane, TaskView } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import type { StatusLabel } from "../../app/status";
import { ShownBoard } from "../../app/coalesced";

export const TASKS_EMPTY =
  "No task lists yet. Agents show theirs here as they work: onboard Claude Code or Codex from the Onboarding view, and what they plan appears as they write it.";
export const TASKS_FILTERED_EMPTY = "No task matches these filters. Clear them to see every lane.";

export type Column = "pending" | "in_progress" | "completed" | "deleted";

/** The board's columns, left to right. Removed tasks show only when asked for. */
export const COLUMNS: readonly { column: Column; label: string; status: StatusLabel }[] = [
  { column: "pending", label: "To do", status: { icon: "○", label: "to do", tone: "neutral" } },
  { column: "in_progress", label: "In progress", status: { icon: "◐", label: "in progress", tone: "progress" } },
  { column: "completed", label: "Done", status: { icon: "✔", label: "done", tone: "ok" } },
  { column: "deleted", label: "Removed", status: { icon: "✕", label: "removed", tone: "neutral" } },
];

/**
 * The column of a status: a cancelled task was removed from the plan, a blocked one is still
 * to do; an unknown one goes with the tasks to do.
 */
export function columnOf(status: string): Column {
  if (status === "cancelled") return "deleted";
  return status === "in_progress" || status === "completed" || status === "deleted" ? status : "pending";
}

const BLOCKED: StatusLabel = { icon: "⊘", label: "blocked", tone: "attention" };
const CANCELLED: StatusLabel = { icon: "✕", label: "cancelled", tone: "neutral" };

export function statusLabel(status: string): StatusLabel {
  if (status === "blocked") return BLOCKED;
  if (status === "cancelled") return CANCELLED;
  return COLUMNS.find((entry) => entry.column === columnOf(status))!.status;
}

/** A lane's name: the agent's handle, or what ran when no onboarded agent did. */
export function laneAgent(lane: Pick<TaskLane, "agent_handle" | "framework">): string {
  return lane.agent_handle ?? `${lane.framework} (not onboarded)`;
}

export type TaskFilters = { room: string | null; agent: string | null; person: string | null; state: Column | null };

export const NO_FILTERS: TaskFilters = { room: null, agent: null, person: null, state: null };

/**
 * Lanes and their tasks that pass `filters`; lanes left with no task are left out, but for a
 * session that keeps no list (it says why) when no status is asked for. Pure.
 */
export function filterLanes(lanes: readonly TaskLane[], filters: TaskFilters): TaskLane[] {
  const out: TaskLane[] = [];
  for (const lane of lanes) {
    if (filters.room !== null && lane.room !== filters.room) continue;
    if (filters.agent !== null && laneAgent(lane) !== filters.agent) continue;
    if (filters.person !== null && lane.person !== filters.person) continue;
    const tasks = lane.tasks.filter((task) =>
      filters.state === null ? columnOf(task.status) !== "deleted" : columnOf(task.status) === filters.state,
    );
    if (tasks.length > 0) out.push(tasks.length === lane.tasks.length ? lane : { ...lane, tasks });
    else if (lane.no_list !== null && filters.state === null) out.push(lane);
  }
  return out;
}

/** What the filters offer: the values present on the board, sorted. Pure. */
export function filterOptions(lanes: readonly TaskLane[]): { rooms: string[]; agents: string[]; people: string[] } {
  const rooms = new Set<string>();
  const agents = new Set<string>();
  const people = new Set<string>();
  for (const lane of lanes) {
    if (lane.room !== null) rooms.add(lane.room);
    agents.add(laneAgent(lane));
    people.add(lane.person);
  }
  const sorted = (set: Set<string>) => [...set].sort((a, b) => a.localeCompare(b));
  return { rooms: sorted(rooms), agents: sorted(agents), people: sorted(people) };
}

export type LaneRow = { kind: "lane"; key: string; lane: TaskLane; counts: Record<Column, number> };
export type TaskRow = { kind: "tasks"; key: string; lane: TaskLane; cells: (TaskView | null)[] };
export type BoardRow = LaneRow | TaskRow;

/**
 * The rows of a virtualized board: per lane, its header, then rows of one task per column in
 * `columns` (the nth task of each column side by side). Pure.
 */
export function boardRows(lanes: readonly TaskLane[], columns: readonly Column[]): BoardRow[] {
  const rows: BoardRow[] = [];
  for (const lane of lanes) {
    const byColumn = new Map<Column, TaskView[]>(columns.map((column) => [column, []]));
    const counts: Record<Column, number> = { pending: 0, in_progress: 0, completed: 0, deleted: 0 };
    for (const task of lane.tasks) {
      const column = columnOf(task.status);
      counts[column] += 1;
      byColumn.get(column)?.push(task);
    }
    rows.push({ kind: "lane", key: `lane:${lane.key}`, lane, counts });
    const depth = Math.max(0, ...columns.map((column) => byColumn.get(column)!.length));
    for (let index = 0; index < depth; index += 1) {
      rows.push({
        kind: "tasks",
        key: `tasks:${lane.key}:${index}`,
        lane,
        cells: columns.map((column) => byColumn.get(column)![index] ?? null),
      });
    }
  }
  return rows;
}

/** How many tasks of each column the lanes hold. Pure. */
export function columnTotals(lanes: readonly TaskLane[]): Record<Column, number> {
  const totals: Record<Column, number> = { pending: 0, in_progress: 0, completed: 0, deleted: 0 };
  for (const lane of lanes) for (const task of lane.tasks) totals[columnOf(task.status)] += 1;
  return totals;
}

export type SelectedTask = { lane: TaskLane; task: TaskView };

export type TasksDeps = { backend: Backend; errors: ErrorReporter };

export class TasksModel extends ShownBoard {
  board: TaskBoard = $state.raw({ lanes: [] });
  loaded = $state(false);
  filters: TaskFilters = $state({ ...NO_FILTERS });
  /** The task whose history is open. */
  selected = $state<SelectedTask | null>(null);

  private readonly deps: TasksDeps;

  constructor(deps: TasksDeps) {
    super();
    this.deps = deps;
  }

  readonly lanes = $derived(filterLanes(this.board.lanes, this.filters));
  readonly options = $derived(filterOptions(this.board.lanes));
  readonly columns: readonly Column[] = $derived(
    this.filters.state === "deleted" ? COLUMNS.map((entry) => entry.column) : ["pending", "in_progress", "completed"],
  );
  readonly rows = $derived(boardRows(this.lanes, this.columns));
  readonly totals = $derived(columnTotals(this.lanes));
  readonly filtered = $derived(
    this.filters.room !== null || this.filters.agent !== null || this.filters.person !== null || this.filters.state !== null,
  );

  setFilter<K extends keyof TaskFilters>(key: K, value: TaskFilters[K]): void {
    this.filters = { ...this.filters, [key]: value };
  }

  clearFilters(): void {
    this.filters = { ...NO_FILTERS };
  }

  select(lane: TaskLane, task: TaskView): void {
    this.selected = { lane, task };
  }

  closeHistory(): void {
    this.selected = null;
  }

  async applyChange(change: CoreChanged): Promise<void> {
    if (change.work || change.everything) await this.loads.changed();
  }

  protected async fetch(): Promise<void> {
    try {
      this.board = await this.deps.backend.taskBoard();
      this.loaded = true;
      // The open history follows the task as it moves.
      const open = this.selected;
      if (open) {
        const lane = this.board.lanes.find((candidate) => candidate.key === open.lane.key);
        const task = lane?.tasks.find(
          (candidate) => (candidate.id ?? candidate.title) === (open.task.id ?? open.task.title),
        );
        this.selected = lane && task ? { lane, task } : null;
      }
    } catch (error) {
      this.deps.errors.report(error);
    }
  }
}
