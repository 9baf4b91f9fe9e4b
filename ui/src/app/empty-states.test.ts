// @vitest-environment happy-dom
/**
 * Every view, mounted on a fresh install's data, says what to do next instead of showing
 * an empty area. The texts come from the models, so this also checks each view renders them.
 */
import { flushSync, mount, unmount } from "svelte";
import { afterEach, describe, expect, it } from "vitest";
import { FakeBackend } from "../backend/fake";
import { emptyWorld } from "../backend/fake-world";
import { AGENTS_EMPTY } from "../features/agents/agents.model.svelte";
import { ARCHITECTURE_EMPTY } from "../features/architecture/architecture.model.svelte";
import { AWAY_EMPTY } from "../features/away/away.model.svelte";
import { COSTS_EMPTY } from "../features/costs/costs.model.svelte";
import { SESSIONS_EMPTY } from "../features/sessions/sessions.model.svelte";
import { TASKS_EMPTY } from "../features/tasks/tasks.model.svelte";
import { demoWorld } from "../backend/fake-world";
import { manyTasks } from "../backend/fake-boards";
import { CONTACTS_EMPTY, INVITES_EMPTY, REQUESTS_EMPTY } from "../features/contacts/contacts.model.svelte";
import { ONBOARDING_EMPTY } from "../features/onboarding/onboarding.model.svelte";
import { PINGS_EMPTY_OPEN, PINGS_EMPTY_REST } from "../features/pings/pings.model.svelte";
import { CONVERSATION_EMPTY } from "../features/rooms/conversation.model.svelte";
import { ROOMS_EMPTY } from "../features/rooms/rooms.model.svelte";
import { SETTINGS_SIGNED_OUT } from "../features/settings/settings.model.svelte";
import { settle } from "../testing/settle";
import App from "./App.svelte";
import { AppModel, type ViewName } from "./app.model.svelte";

let mounted: ReturnType<typeof mount> | null = null;

afterEach(() => {
  if (mounted) unmount(mounted);
  mounted = null;
  document.body.innerHTML = "";
});

async function render(world = emptyWorld()) {
  const backend = new FakeBackend({ world });
  const app = new AppModel(backend);
  const target = document.createElement("div");
  document.body.append(target);
  mounted = mount(App, { target, props: { app } });
  await app.start();
  flushSync();
  return { app, backend, target };
}

async function show(app: AppModel, view: ViewName) {
  app.go(view);
  flushSync();
  await settle();
}

const testid = (target: HTMLElement, id: string) => target.querySelector(`[data-testid="${id}"]`);

describe("empty states", () => {
  const cases: [ViewName, string[]][] = [
    ["onboarding", [ONBOARDING_EMPTY]],
    ["rooms", [ROOMS_EMPTY]],
    ["pings", [PINGS_EMPTY_OPEN, PINGS_EMPTY_REST]],
    ["contacts", [CONTACTS_EMPTY, REQUESTS_EMPTY, INVITES_EMPTY]],
    ["agents", [AGENTS_EMPTY]],
    ["away", [AWAY_EMPTY]],
    ["tasks", [TASKS_EMPTY]],
    ["architecture", [ARCHITECTURE_EMPTY]],
    ["costs", [COSTS_EMPTY]],
    ["sessions", [SESSIONS_EMPTY]],
  ];

  it.each(cases)("the %s view says what to do next", async (view, texts) => {
    const { app, target } = await render();
    await show(app, view);
    expect(testid(target, `view-${view}`)).not.toBeNull();
    for (const text of texts) expect(target.textContent).toContain(text);
  });

  it("the agents empty state points to Onboarding for Claude Code", () => {
    expect(AGENTS_EMPTY).toContain("Onboard Claude Code from the Onboarding view");
  });

  it("the settings view says how to sign in when signed out", async () => {
    const world = emptyWorld();
    world.me = null;
    const { target } = await render(world);
    expect(testid(target, "view-settings")).not.toBeNull();
    expect(target.textContent).toContain(SETTINGS_SIGNED_OUT);
  });

  it("an empty room invites a first message", async () => {
    const world = emptyWorld();
    world.rooms = [{ id: "r-new", title: "new", topic: null, creator: null, members: [], read_to: 0, messages: [] }];
    const { app, target } = await render(world);
    await app.openRoom("r-new");
    flushSync();
    expect(target.textContent).toContain(CONVERSATION_EMPTY);
    expect(testid(target, "messages")).not.toBeNull();
    expect(testid(target, "composer")).not.toBeNull();
  });
});

describe("shell", () => {
  it("has a nav button per view and shows the open-ping count", async () => {
    const world = emptyWorld();
    world.pings = [
      {
        room: "r",
        ping: "p1",
        seq: 1,
        asker: "a",
        asker_handle: "dana/reviewer",
        question: "Keep the old format?",
        options: ["yes", "no"],
        recipients: ["u-dana"],
        asked_ms: 0,
        expires_ms: null,
        state: "open",
        answered_by: null,
        answered_by_handle: null,
        answered_ms: null,
        choice: null,
        text: null,
      },
    ];
    const { app, target } = await render(world);
    for (const view of ["rooms", "pings", "agents", "onboarding", "contacts", "settings", "away", "tasks", "architecture", "costs", "sessions"]) {
      expect(testid(target, `nav-${view}`)).not.toBeNull();
    }
    expect(testid(target, "nav-pings-count")?.textContent).toContain("1");
    await show(app, "pings");
    const ping = testid(target, "ping-p1")!;
    expect([...ping.querySelectorAll('[data-testid="ping-option"]')].map((b) => b.textContent?.trim())).toEqual([
      "yes",
      "no",
    ]);
    (ping.querySelector('[data-testid="ping-option"]') as HTMLButtonElement).click();
    await settle();
    flushSync();
    expect(testid(target, "nav-pings-count")).toBeNull();
    expect(testid(target, "pings-answered")?.textContent).toContain("Answered by dana: yes");
  });

  it("shows a rotated token once, selectable and with a copy button, then forgets it", async () => {
    const world = emptyWorld();
    world.agents = [
      {
        id: "a-remote",
        handle: "dana/remote",
        name: "remote",
        cli: null,
        state: "idle",
        detail: null,
        room: null,
        since_ms: null,
        controls: [],
      },
    ];
    const { app, target } = await render(world);
    await show(app, "agents");
    const row = testid(target, "agent-dana_remote")!;
    (row.querySelector('[data-testid="agent-rotate"]') as HTMLButtonElement).click();
    flushSync();
    (testid(target, "agent-token-confirm") as HTMLButtonElement).click();
    await settle();
    flushSync();
    const result = testid(target, "agent-token-result")!;
    const field = result.querySelector('[data-testid="agent-token-value"]') as HTMLInputElement;
    expect(field.value).toMatch(/^rt_fake_remote_/);
    expect(field.readOnly).toBe(true);
    expect(result.querySelector('[data-testid="agent-token-copy"]')).not.toBeNull();
    expect(result.textContent).toContain("Shown once");
    (result.querySelector('[data-testid="agent-token-dismiss"]') as HTMLButtonElement).click();
    flushSync();
    expect(testid(target, "agent-token-result")).toBeNull();
  });

  it("says where a rotated token was saved when a profile here took it", async () => {
    const world = emptyWorld();
    world.agents = [
      {
        id: "a-writer",
        handle: "dana/writer",
        name: "writer",
        cli: "claude",
        state: "idle",
        detail: null,
        room: null,
        since_ms: null,
        controls: [],
      },
    ];
    const { app, target } = await render(world);
    await show(app, "agents");
    (testid(target, "agent-rotate") as HTMLButtonElement).click();
    flushSync();
    (testid(target, "agent-token-confirm") as HTMLButtonElement).click();
    await settle();
    flushSync();
    const result = testid(target, "agent-token-result")!;
    expect(result.textContent).toContain("dana.writer");
    expect(result.querySelector('[data-testid="agent-token-value"]')).toBeNull();
  });

  it("shows a failed command's message in the alert region", async () => {
    const world = emptyWorld();
    const backend = new FakeBackend({ world });
    backend.failNext("agents", "cache", "The local cache is busy.");
    const app = new AppModel(backend);
    const target = document.createElement("div");
    document.body.append(target);
    mounted = mount(App, { target, props: { app } });
    await app.start();
    flushSync();
    const region = testid(target, "error")!;
    expect(region.getAttribute("role")).toBe("alert");
    expect(region.textContent).toContain("The local cache is busy.");
  });

  it("shows a question as Markdown, and opens its link in the browser only once confirmed", async () => {
    const world = demoWorld(Date.UTC(2026, 11, 1, 12));
    world.pings[0]!.question = "Keep the **old** config format? See [the notes](https://docs.example/format).";
    const { app, backend, target } = await render(world);
    await show(app, "pings");
    const question = testid(target, "ping-question")!;
    expect(question.id).toBe("ping-question-p-format");
    expect(question.textContent).toBe("Keep the old config format? See the notes.");
    expect(question.querySelector("strong")?.textContent).toBe("old");
    question.querySelector("a")!.click();
    flushSync();
    expect(testid(target, "link-target")?.textContent).toBe("https://docs.example/format");
    expect(backend.calls.some((call) => call.command === "openLink")).toBe(false);
    (testid(target, "link-open") as HTMLButtonElement).click();
    await settle();
    expect(world.openedLinks).toEqual(["https://docs.example/format"]);
  });
});

describe("boards", () => {
  const NOW = Date.UTC(2026, 11, 1, 12);

  it("draws every board from the demo world", async () => {
    const { app, target } = await render(demoWorld(NOW));
    await show(app, "away");
    expect(testid(target, "away-room")?.textContent).toContain("write the parser");
    expect(testid(target, "away-ping")?.textContent).toContain("Keep the old config format");
    await show(app, "tasks");
    // The lanes are a virtualized list: happy-dom lays nothing out, so it draws no row (the
    // WebDriver tests see them); the board and its totals are there.
    expect(testid(target, "tasks-rows")).not.toBeNull();
    expect(testid(target, "view-tasks")?.textContent).toContain("In progress: 3");
    await show(app, "architecture");
    expect(testid(target, "component-parser")?.getAttribute("data-status")).toBe("working");
    expect(testid(target, "arch-graph")?.querySelectorAll("g[role='button']")).toHaveLength(5);
    (testid(target, "graph-node-parser") as unknown as HTMLElement).dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    await settle();
    flushSync();
    expect(target.querySelectorAll('[data-testid="history-item"]')).toHaveLength(4);
    await show(app, "costs");
    expect(target.querySelectorAll('[data-testid="costs-row"]').length).toBeGreaterThan(0);
    expect(testid(target, "costs-table")?.textContent).toContain("unpriced (homegrown-9)");
    await show(app, "sessions");
    expect(testid(target, "sessions-needs-you")?.textContent).toContain("dana/reviewer");
    expect(target.querySelectorAll('[data-testid="session-pause"]').length).toBeGreaterThan(0);
  });

  it("renders only part of a board of 5,000 tasks", async () => {
    const world = demoWorld(NOW);
    world.boards.tasks = manyTasks(5_000, 24, NOW);
    const { app, target } = await render(world);
    await show(app, "tasks");
    expect(testid(target, "view-tasks")?.textContent).toContain("Done: 2500");
    // Virtualized: never an element per task.
    expect(target.querySelectorAll('[data-testid="task-card"]').length).toBeLessThan(500);
  });

  it("shows the first scan's progress above the boards", async () => {
    const world = emptyWorld();
    world.boards.scan = { state: "scanning", files_done: 3, files: 12, bytes_done: 2e6, bytes: 8e6 };
    const { app, target } = await render(world);
    await show(app, "tasks");
    expect(testid(target, "work-scan")?.textContent).toContain("3 of 12 files");
    await show(app, "rooms");
    expect(testid(target, "work-scan")).toBeNull();
  });
});
