import { describe, expect, it } from "vitest";
import { FakeBackend } from "../../backend/fake";
import { lane, manyTasks, task } from "../../backend/fake-boards";
import { emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import {
  NO_FILTERS,
  TasksModel,
  boardRows,
  columnOf,
  columnTotals,
  filterLanes,
  filterOptions,
  laneAgent,
  statusLabel,
  type TaskRow,
} from "./tasks.model.svelte";

const NOW = Date.UTC(2026, 11, 1, 12);

const writer = lane({
  key: "a-writer:claude-code:s1",
  agent: "a-writer",
  agent_handle: "dana/writer",
  room: "r-parser",
  tasks: [task("lex", "completed", 1), task("parse", "in_progress", 2), task("docs", "pending", 3), task("old", "deleted", 4)],
});
const security = lane({
  key: "a-sec:codex:s2",
  agent: "a-sec",
  agent_handle: "sam/security",
  person: "sam",
  framework: "codex",
  machine: "elsewhere",
  room: "r-security",
  tasks: [task("scan", "pending", 5), task("report", "pending", 6)],
});
const loose = lane({ key: "local:claude-code:s3", tasks: [task("try", "completed", 7)] });

function setup(lanes = [writer, security, loose]) {
  const world = emptyWorld();
  world.boards.tasks = lanes;
  const backend = new FakeBackend({ world, now: () => NOW });
  const model = new TasksModel({ backend, errors: new Toasts() });
  backend.onChanged((change) => void model.applyChange(change));
  return { world, backend, model };
}

describe("tasks board", () => {
  it("puts each status in its column, never by colour alone", () => {
    expect(columnOf("pending")).toBe("pending");
    expect(columnOf("in_progress")).toBe("in_progress");
    expect(columnOf("completed")).toBe("completed");
    expect(columnOf("deleted")).toBe("deleted");
    expect(columnOf("someday")).toBe("pending");
    expect(columnOf("cancelled")).toBe("deleted");
    expect(columnOf("blocked")).toBe("pending");
    expect(statusLabel("blocked").label).toBe("blocked");
    expect(statusLabel("completed").label).toBe("done");
    expect(statusLabel("in_progress").icon.length).toBeGreaterThan(0);
  });

  it("names a lane by its agent, or by what ran when no agent was onboarded", () => {
    expect(laneAgent(writer)).toBe("dana/writer");
    expect(laneAgent(loose)).toBe("claude-code (not onboarded)");
  });

  it("filters by room, agent, person and state, dropping lanes left empty", () => {
    const lanes = [writer, security, loose];
    expect(filterLanes(lanes, { ...NO_FILTERS, room: "r-security" }).map((l) => l.key)).toEqual([security.key]);
    expect(filterLanes(lanes, { ...NO_FILTERS, agent: "dana/writer" }).map((l) => l.key)).toEqual([writer.key]);
    expect(filterLanes(lanes, { ...NO_FILTERS, person: "dana" }).map((l) => l.key)).toEqual([writer.key, loose.key]);
    const done = filterLanes(lanes, { ...NO_FILTERS, state: "completed" });
    expect(done.map((l) => [l.key, l.tasks.map((t) => t.title)])).toEqual([
      [writer.key, ["lex"]],
      [loose.key, ["try"]],
    ]);
    // Removed tasks are hidden unless asked for.
    expect(filterLanes(lanes, NO_FILTERS)[0]!.tasks.map((t) => t.title)).toEqual(["lex", "parse", "docs"]);
    expect(filterLanes(lanes, { ...NO_FILTERS, state: "deleted" })[0]!.tasks.map((t) => t.title)).toEqual(["old"]);
  });

  it("keeps a session with no list, which says why, unless a status is asked for", () => {
    const listless = lane({ key: "local:codex:t1", framework: "codex", tasks: [], no_list: "update_plan is off" });
    const empty = lane({ key: "local:codex:t2", framework: "codex", tasks: [] });
    expect(filterLanes([listless, empty], NO_FILTERS).map((l) => l.key)).toEqual([listless.key]);
    expect(filterLanes([listless], { ...NO_FILTERS, state: "pending" })).toEqual([]);
    expect(boardRows([listless], ["pending", "in_progress", "completed"]).map((row) => row.kind)).toEqual(["lane"]);
  });

  it("offers the rooms, agents and people on the board", () => {
    expect(filterOptions([writer, security, loose])).toEqual({
      rooms: ["r-parser", "r-security"],
      agents: ["claude-code (not onboarded)", "dana/writer", "sam/security"],
      people: ["dana", "sam"],
    });
  });

  it("lays lanes out as a header and rows of one task per column", () => {
    const rows = boardRows([security, loose], ["pending", "in_progress", "completed"]);
    expect(rows.map((row) => row.kind)).toEqual(["lane", "tasks", "tasks", "lane", "tasks"]);
    const first = rows[1] as TaskRow;
    expect(first.cells.map((cell) => cell?.title ?? null)).toEqual(["scan", null, null]);
    expect((rows[2] as TaskRow).cells.map((cell) => cell?.title ?? null)).toEqual(["report", null, null]);
    expect((rows[4] as TaskRow).cells.map((cell) => cell?.title ?? null)).toEqual([null, null, "try"]);
    expect(rows[0]).toMatchObject({ kind: "lane", counts: { pending: 2, in_progress: 0, completed: 0 } });
    expect(new Set(rows.map((row) => row.key)).size).toBe(rows.length);
  });

  it("keeps 5,000 tasks as rows for the virtualized list, each task once", () => {
    const lanes = manyTasks(5_000, 24, NOW);
    const rows = boardRows(lanes, ["pending", "in_progress", "completed"]);
    const cells = rows.flatMap((row) => (row.kind === "tasks" ? row.cells.filter((cell) => cell !== null) : []));
    expect(cells).toHaveLength(5_000);
    expect(rows.filter((row) => row.kind === "lane")).toHaveLength(24);
    expect(rows.length).toBeLessThan(5_000);
    const totals = columnTotals(lanes);
    expect(totals.pending + totals.in_progress + totals.completed).toBe(5_000);
  });

  it("loads when shown, then follows the agents' lists live", async () => {
    const { world, backend, model } = setup();
    backend.emitChanged({ work: true });
    await settle();
    expect(backend.calls.filter((call) => call.command === "taskBoard")).toHaveLength(0);
    await model.show();
    expect(model.loaded).toBe(true);
    expect(model.rows.filter((row) => row.kind === "lane")).toHaveLength(3);

    // An agent marks a task done: it moves column.
    world.boards.tasks = [
      { ...writer, tasks: writer.tasks.map((t) => (t.title === "parse" ? { ...t, status: "completed" } : t)) },
      security,
      loose,
    ];
    backend.emitChanged({ work: true });
    await settle();
    expect(model.lanes[0]!.tasks.find((t) => t.title === "parse")!.status).toBe("completed");

    // Hidden, it waits for the next look.
    model.hide();
    const before = backend.calls.length;
    backend.emitChanged({ work: true });
    await settle();
    expect(backend.calls.length).toBe(before);
    await model.show();
    expect(backend.calls.length).toBe(before + 1);
  });

  it("opens a task's history and keeps it on the task as it moves", async () => {
    const { world, backend, model } = setup();
    await model.show();
    const parse = model.lanes[0]!.tasks[1]!;
    model.select(model.lanes[0]!, parse);
    world.boards.tasks = [
      {
        ...writer,
        tasks: writer.tasks.map((t) =>
          t.title === "parse"
            ? { ...t, status: "completed", since_ms: 9, history: [...t.history, { status: "completed", ts_ms: 9 }] }
            : t,
        ),
      },
    ];
    backend.emitChanged({ work: true });
    await settle();
    expect(model.selected?.task.status).toBe("completed");
    expect(model.selected?.task.history.map((change) => change.status)).toEqual(["in_progress", "completed"]);
    model.closeHistory();
    expect(model.selected).toBeNull();
  });

  it("clears its filters in one step", async () => {
    const { model } = setup();
    await model.show();
    model.setFilter("person", "sam");
    expect(model.filtered).toBe(true);
    expect(model.lanes.map((l) => l.key)).toEqual([security.key]);
    model.clearFilters();
    expect(model.lanes).toHaveLength(3);
  });
});
