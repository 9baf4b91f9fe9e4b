/**
 * The boards' data for the in-memory backend: Dana's agents at work (journeys 1, 3 and 4),
 * and a generator of large task boards (thousands of tasks) for the virtualized list and
 * its benchmark. Deterministic: time comes in as `now`, nothing is random.
 */
import type {
  ArchitectureBoard,
  ComponentChange,
  CostRow,
  RoomDigest,
  SessionView,
  TaskLane,
  TaskStatus,
  TaskView,
  WatchState,
} from "../bindings";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

export type FakeBoards = {
  tasks: TaskLane[];
  architecture: ArchitectureBoard[];
  /** By `room/component`. */
  componentHistory: Record<string, ComponentChange[]>;
  costs: CostRow[];
  sessions: SessionView[];
  away: RoomDigest[];
  scan: WatchState;
};

export function emptyBoards(): FakeBoards {
  return {
    tasks: [],
    architecture: [],
    componentHistory: {},
    costs: [],
    sessions: [],
    away: [],
    scan: { state: "watching", files: 0 },
  };
}

export function task(title: string, status: TaskStatus, since: number, history: [TaskStatus, number][] = []): TaskView {
  const changes = history.length > 0 ? history : [[status, since] as [TaskStatus, number]];
  return {
    id: null,
    title,
    status,
    active_form: status === "in_progress" ? `${title[0]!.toUpperCase()}${title.slice(1)}…` : null,
    since_ms: since,
    history: changes.map(([state, ts]) => ({ status: state, ts_ms: ts })),
  };
}

export function lane(overrides: Partial<TaskLane> & Pick<TaskLane, "key" | "tasks">): TaskLane {
  return {
    agent: null,
    agent_handle: null,
    person: "dana",
    framework: "claude-code",
    session_id: overrides.key,
    machine: "this_machine",
    room: null,
    ts_ms: 0,
    source: "TodoWrite",
    no_list: null,
    ...overrides,
  };
}

/** `lanes` lanes holding `tasks` tasks between them, statuses spread over the columns. */
export function manyTasks(tasks: number, lanes: number, now: number): TaskLane[] {
  const statuses: TaskStatus[] = ["pending", "in_progress", "completed", "completed"];
  const out: TaskLane[] = [];
  for (let index = 0; index < lanes; index += 1) {
    const person = index % 3 === 0 ? "sam" : "dana";
    const handle = `${person}/agent-${index}`;
    const count = Math.floor(tasks / lanes) + (index < tasks % lanes ? 1 : 0);
    const list: TaskView[] = [];
    for (let n = 0; n < count; n += 1) {
      const status = statuses[(n + index) % statuses.length]!;
      list.push(task(`task ${index}.${n}: ${n % 5 === 0 ? "wire the loader into the parser" : "fix a case"}`, status, now - n * MINUTE));
    }
    out.push(
      lane({
        key: `a-${index}:claude-code:s-${index}`,
        agent: `a-${index}`,
        agent_handle: handle,
        person,
        session_id: `s-${index}`,
        machine: person === "dana" ? "this_machine" : "elsewhere",
        room: index % 2 === 0 ? "r-parser" : "r-security",
        ts_ms: now - index * MINUTE,
        tasks: list,
      }),
    );
  }
  return out;
}

function cost(
  day: string,
  agent: string,
  person: string,
  model: string,
  cost_usd: number,
  latest_ms: number,
  extra: Partial<CostRow> = {},
): CostRow {
  return {
    room: "r-parser",
    day,
    agent,
    person,
    teams: person === "dana" || person === "sam" ? ["core"] : [],
    model,
    input: Math.round(cost_usd * 100_000),
    output: Math.round(cost_usd * 20_000),
    cache_write: 0,
    cache_read: Math.round(cost_usd * 400_000),
    cost_usd,
    unpriced_entries: 0,
    unpriced_models: [],
    local_entries: 0,
    latest_ms,
    ...extra,
  };
}

/** Dana's boards: the writer and the reviewer on the parser, Sam's security agent. */
export function demoBoards(now: number): FakeBoards {
  const day = (daysAgo: number) => new Date(now - daysAgo * DAY).toISOString().slice(0, 10);
  const writerLane = lane({
    key: "a-writer:claude-code:7f1c5e2a",
    agent: "a-writer",
    agent_handle: "dana/writer",
    session_id: "7f1c5e2a",
    room: "r-parser",
    ts_ms: now - 5 * MINUTE,
    tasks: [
      task("write the tokenizer", "completed", now - 3 * HOUR, [
        ["pending", now - 5 * HOUR],
        ["in_progress", now - 4 * HOUR],
        ["completed", now - 3 * HOUR],
      ]),
      task("write the parser", "completed", now - 40 * MINUTE, [
        ["pending", now - 5 * HOUR],
        ["in_progress", now - 3 * HOUR],
        ["completed", now - 40 * MINUTE],
      ]),
      task("wire the loader", "in_progress", now - 30 * MINUTE, [
        ["pending", now - 5 * HOUR],
        ["in_progress", now - 30 * MINUTE],
      ]),
      task("document the format", "pending", now - 5 * HOUR),
    ],
  });
  const reviewerLane = lane({
    key: "a-reviewer:codex:019a2b",
    agent: "a-reviewer",
    agent_handle: "dana/reviewer",
    framework: "codex",
    session_id: "019a2b",
    room: "r-parser",
    ts_ms: now - 2 * MINUTE,
    source: "update_plan",
    tasks: [
      task("read src/parser.rs", "completed", now - 20 * MINUTE),
      task("check error messages", "in_progress", now - 10 * MINUTE),
      task("write the review", "pending", now - 20 * MINUTE),
    ],
  });
  const securityLane = lane({
    key: "a-security:claude-code:c3d4",
    agent: "a-security",
    agent_handle: "sam/security",
    person: "sam",
    session_id: "c3d4",
    machine: "elsewhere",
    room: "r-security",
    ts_ms: now - HOUR,
    tasks: [
      task("list token stores", "completed", now - 2 * HOUR),
      task("check file permissions", "in_progress", now - HOUR),
    ],
  });
  const localLane = lane({
    key: "local:claude-code:e5f6",
    session_id: "e5f6",
    ts_ms: now - 26 * HOUR,
    source: "log",
    tasks: [task("try the new lint rules", "completed", now - 26 * HOUR)],
  });

  const components: ArchitectureBoard = {
    room: "r-parser",
    title: "parser",
    components: [
      {
        room: "r-parser",
        id: "tokenizer",
        name: "Tokenizer",
        description: "Bytes to tokens",
        paths: ["src/tokenizer/**"],
        depends_on: [],
        status: "done",
        note: null,
        files: ["src/tokenizer/mod.rs"],
        by: "a-writer",
        status_ms: now - 3 * HOUR,
        agents: [
          { agent: "a-writer", handle: "dana/writer", status: "done", note: null, files: ["src/tokenizer/mod.rs"], ts_ms: now - 3 * HOUR },
        ],
        working: [],
      },
      {
        room: "r-parser",
        id: "parser",
        name: "Parser",
        description: "Tokens to a syntax tree",
        paths: ["src/parser/**"],
        depends_on: ["tokenizer"],
        status: "working",
        note: "review under way",
        files: ["src/parser/mod.rs", "src/parser/errors.rs"],
        by: "a-reviewer",
        status_ms: now - 10 * MINUTE,
        agents: [
          { agent: "a-reviewer", handle: "dana/reviewer", status: "working", note: "review under way", files: ["src/parser/errors.rs"], ts_ms: now - 10 * MINUTE },
          { agent: "a-writer", handle: "dana/writer", status: "done", note: null, files: ["src/parser/mod.rs"], ts_ms: now - 40 * MINUTE },
        ],
        working: ["a-reviewer"],
      },
      {
        room: "r-parser",
        id: "loader",
        name: "Loader",
        description: "Reads config files",
        paths: ["src/loader/**"],
        depends_on: ["parser"],
        status: "working",
        note: null,
        files: ["src/loader/mod.rs"],
        by: "a-writer",
        status_ms: now - 30 * MINUTE,
        agents: [{ agent: "a-writer", handle: "dana/writer", status: "working", note: null, files: ["src/loader/mod.rs"], ts_ms: now - 30 * MINUTE }],
        working: ["a-writer"],
      },
      {
        room: "r-parser",
        id: "cli",
        name: "CLI",
        description: null,
        paths: ["src/main.rs"],
        depends_on: ["loader", "parser"],
        status: "blocked",
        note: "waits for the config format decision",
        files: [],
        by: "a-writer",
        status_ms: now - 20 * MINUTE,
        agents: [],
        working: [],
      },
      {
        room: "r-parser",
        id: "docs",
        name: "Docs",
        description: null,
        paths: ["docs/**"],
        depends_on: ["cli"],
        status: null,
        note: null,
        files: [],
        by: null,
        status_ms: null,
        agents: [],
        working: [],
      },
    ],
  };
  const componentHistory: Record<string, ComponentChange[]> = {
    "r-parser/parser": [
      {
        seq: 12,
        ts_ms: now - 5 * HOUR,
        kind: "defined",
        by: "u-dana",
        by_handle: "dana",
        agent_handle: "dana",
        status: null,
        note: "Tokens to a syntax tree",
        files: ["src/parser/**"],
        depends_on: ["tokenizer"],
      },
      {
        seq: 80,
        ts_ms: now - 3 * HOUR,
        kind: "status",
        by: "u-dana",
        by_handle: "dana",
        agent_handle: "dana/writer",
        status: "working",
        note: null,
        files: ["src/parser/mod.rs"],
        depends_on: [],
      },
      {
        seq: 140,
        ts_ms: now - 40 * MINUTE,
        kind: "status",
        by: "a-writer",
        by_handle: "dana/writer",
        agent_handle: "dana/writer",
        status: "done",
        note: null,
        files: ["src/parser/mod.rs"],
        depends_on: [],
      },
      {
        seq: 160,
        ts_ms: now - 10 * MINUTE,
        kind: "status",
        by: "a-reviewer",
        by_handle: "dana/reviewer",
        agent_handle: "dana/reviewer",
        status: "working",
        note: "review under way",
        files: ["src/parser/errors.rs"],
        depends_on: [],
      },
    ],
  };

  const costs: CostRow[] = [];
  for (let daysAgo = 6; daysAgo >= 0; daysAgo -= 1) {
    const at = now - daysAgo * DAY;
    costs.push(cost(day(daysAgo), "dana/writer", "dana", "claude-sonnet-4-5", 1.2 + daysAgo * 0.31, at));
    costs.push(cost(day(daysAgo), "dana/reviewer", "dana", "gpt-5-codex", 0.4 + (daysAgo % 3) * 0.2, at));
    if (daysAgo % 2 === 0) {
      costs.push(cost(day(daysAgo), "sam/security", "sam", "claude-opus-4-6", 2.1 + daysAgo * 0.1, at - HOUR, { room: "r-security" }));
    }
  }
  costs.push(
    cost(day(1), "(local claude-code)", "dana", "claude-sonnet-4-5", 0.35, now - 26 * HOUR, {
      room: null,
      local_entries: 12,
    }),
    cost(day(0), "dana/reviewer", "dana", "homegrown-9", 0, now - 15 * MINUTE, {
      unpriced_entries: 3,
      unpriced_models: ["homegrown-9"],
      input: 12_000,
      output: 900,
      cache_read: 0,
    }),
  );

  const session = (overrides: Partial<SessionView> & Pick<SessionView, "key">): SessionView => ({
    agent: null,
    agent_handle: null,
    person: "dana",
    mine: true,
    framework: "claude-code",
    session_id: overrides.key,
    machine: "this_machine",
    bound_room: null,
    rooms: [],
    state: "idle",
    detail: null,
    last_error: null,
    last_active_ms: now,
    messages_last_hour: 0,
    questions_asked: 0,
    questions_waiting: 0,
    controls: [],
    needs_you: false,
    ...overrides,
  });
  const sessions: SessionView[] = [
    session({
      key: "a-reviewer:codex:019a2b",
      agent: "a-reviewer",
      agent_handle: "dana/reviewer",
      framework: "codex",
      session_id: "019a2b",
      bound_room: "r-parser",
      rooms: ["r-parser"],
      state: "waiting_human",
      detail: "Keep the old config format for one release?",
      last_active_ms: now - 2 * MINUTE,
      messages_last_hour: 6,
      questions_asked: 1,
      questions_waiting: 1,
      needs_you: true,
    }),
    session({
      key: "a-security:claude-code:c3d4",
      agent: "a-security",
      agent_handle: "sam/security",
      person: "sam",
      mine: false,
      session_id: "c3d4",
      machine: "elsewhere",
      rooms: ["r-security"],
      state: "working",
      detail: "Reviewing token storage",
      last_active_ms: now - HOUR,
      messages_last_hour: 1,
    }),
    session({
      key: "a-writer:claude-code:7f1c5e2a",
      agent: "a-writer",
      agent_handle: "dana/writer",
      session_id: "7f1c5e2a",
      rooms: ["r-parser"],
      state: "idle",
      detail: "Waiting for a review",
      last_active_ms: now - 5 * MINUTE,
      messages_last_hour: 14,
      questions_asked: 1,
    }),
    session({
      key: "local:claude-code:e5f6",
      session_id: "e5f6",
      mine: false,
      last_active_ms: now - 26 * HOUR,
    }),
  ];

  const away: RoomDigest[] = [
    {
      room: "r-parser",
      title: "parser",
      since_ms: now - 3 * HOUR,
      messages: 10,
      mentions: 1,
      tasks_completed: [{ agent: "dana/writer", title: "write the parser" }],
      tasks_in_progress: [
        { agent: "dana/reviewer", title: "check error messages" },
        { agent: "dana/writer", title: "wire the loader" },
      ],
      components: [
        { id: "parser", name: "Parser", status: "working", by: ["dana/reviewer"] },
        { id: "cli", name: "CLI", status: "blocked", by: ["dana/writer"] },
      ],
      pings_waiting: [],
      cost_usd: 3.42,
      unpriced: true,
    },
  ];

  return {
    tasks: [writerLane, reviewerLane, securityLane, localLane],
    architecture: [components],
    componentHistory,
    costs,
    sessions,
    away,
    scan: { state: "watching", files: 42 },
  };
}
