import { describe, expect, it } from "vitest";
import { FakeBackend } from "../backend/fake";
import { demoWorld, emptyWorld } from "../backend/fake-world";
import { settle } from "../testing/settle";
import { AppModel, type ShellKey } from "./app.model.svelte";

const NOW = Date.UTC(2026, 11, 1, 12);

function key(overrides: Partial<ShellKey>): ShellKey {
  return { key: "", ctrlKey: false, metaKey: false, altKey: false, inEditable: false, ...overrides };
}

async function started(world = demoWorld(NOW)) {
  const backend = new FakeBackend({ world, now: () => NOW });
  const app = new AppModel(backend, { now: () => NOW });
  const stop = await app.start();
  return { app, backend, world, stop };
}

describe("app shell", () => {
  it("starts on Onboarding on a fresh install", async () => {
    const { app } = await started(emptyWorld());
    expect(app.view).toBe("onboarding");
  });

  it("starts on Settings when signed out", async () => {
    const world = emptyWorld();
    world.me = null;
    const { app } = await started(world);
    expect(app.view).toBe("settings");
  });

  it("starts on While you were away when there is news", async () => {
    const { app } = await started();
    expect(app.view).toBe("away");
    expect(app.counts.away).toBe(1);
  });

  it("starts on Pings when a question waits and nothing else is new", async () => {
    const world = demoWorld(NOW);
    world.boards.away = [];
    const { app } = await started(world);
    expect(app.view).toBe("pings");
  });

  it("loads a board when it is shown, and keeps a hidden one idle", async () => {
    const { app, backend } = await started();
    expect(backend.calls.some((call) => call.command === "taskBoard")).toBe(false);
    app.go("tasks");
    await settle();
    expect(app.tasks.loaded).toBe(true);
    app.go("costs");
    await settle();
    expect(app.costs.loaded).toBe(true);
    const before = backend.calls.filter((call) => call.command === "taskBoard").length;
    backend.emitChanged({ work: true });
    await settle();
    // Costs is on screen: it refetched; the tasks board waits for its next look.
    expect(backend.calls.filter((call) => call.command === "taskBoard").length).toBe(before);
    app.go("tasks");
    await settle();
    expect(backend.calls.filter((call) => call.command === "taskBoard").length).toBe(before + 1);
  });

  it("opens the tasks board narrowed to a room, from While you were away", async () => {
    const { app } = await started();
    app.go("tasks");
    await settle();
    app.tasks.setFilter("agent", "someone");
    app.go("away");
    app.openTasks("r-parser");
    await settle();
    expect(app.view).toBe("tasks");
    expect(app.tasks.filters).toEqual({ room: "r-parser", agent: null, person: null, state: null });
  });

  it("jumps to the boards with Alt and a digit, not while typing", async () => {
    const { app } = await started();
    expect(app.handleKey(key({ key: "2", altKey: true }))).toBe(true);
    expect(app.view).toBe("tasks");
    expect(app.handleKey(key({ key: "4", altKey: true }))).toBe(true);
    expect(app.view).toBe("costs");
    expect(app.handleKey(key({ key: "5", altKey: true, inEditable: true }))).toBe(false);
    expect(app.view).toBe("costs");
    expect(app.paletteCommands().find((command) => command.id === "view:sessions")?.hint).toBe("Alt+5");
  });

  it("counts what waits in each view for the nav", async () => {
    const { app } = await started();
    expect(app.counts.pings).toBe(1);
    // parser: 10 newer than the read marker, one of them my own; security review: 1.
    expect(app.counts.rooms).toBe(10);
    expect(app.counts.contacts).toBe(1);
    expect(app.counts.agents).toBe(1);
  });

  it("opens a ping from a notification", async () => {
    const { app, backend } = await started();
    app.go("agents");
    backend.emitOpenTarget({ view: "ping", room: "r-parser", ping: "p-format" });
    await settle();
    expect(app.view).toBe("pings");
    expect(app.pings.focused).toBe("p-format");
    expect(app.focusTarget).toBe("ping-p-format");
  });

  it("opens a room from the tray", async () => {
    const { app, backend } = await started();
    backend.emitOpenTarget({ view: "room", room: "r-security" });
    await settle();
    expect(app.view).toBe("rooms");
    expect(app.rooms.selectedId).toBe("r-security");
    expect(app.rooms.conversation?.loaded).toBe(true);
  });

  it("opens the redeem form prefilled from a deep link", async () => {
    const { app, backend } = await started();
    backend.emitOpenTarget({ view: "redeem", code: "TEAMHUB42", hub: "hub.example.com:443" });
    await settle();
    expect(app.view).toBe("contacts");
    expect(app.contacts.redeemCode).toBe("TEAMHUB42");
    expect(app.contacts.redeemHub).toBe("hub.example.com:443");
    expect(app.focusTarget).toBe("redeem-code");
  });

  it("goes where the link the app was started with points, asking once", async () => {
    const world = demoWorld(NOW);
    world.startTarget = { view: "redeem", code: "TEAMHUB42", hub: "hub.example.com:443" };
    const { app, backend } = await started(world);
    expect(app.view).toBe("contacts");
    expect(app.contacts.redeemCode).toBe("TEAMHUB42");
    expect(app.contacts.redeemHub).toBe("hub.example.com:443");
    expect(app.focusTarget).toBe("redeem-code");
    expect(backend.calls.filter((call) => call.command === "takeStartTarget")).toHaveLength(1);
    expect(world.startTarget).toBeNull();
  });

  it("opens the room the app was started on, once the rooms are loaded", async () => {
    const world = demoWorld(NOW);
    world.startTarget = { view: "room", room: "r-security" };
    const { app } = await started(world);
    expect(app.view).toBe("rooms");
    expect(app.rooms.selectedId).toBe("r-security");
    expect(app.rooms.conversation?.loaded).toBe(true);
  });

  it("asks for the start target only once it listens for open targets", async () => {
    const backend = new FakeBackend({ world: emptyWorld() });
    let listening = false;
    let listeningWhenAsked: boolean | null = null;
    const onOpenTarget = backend.onOpenTarget.bind(backend);
    const takeStartTarget = backend.takeStartTarget.bind(backend);
    backend.onOpenTarget = (listener) => {
      listening = true;
      return onOpenTarget(listener);
    };
    backend.takeStartTarget = () => {
      listeningWhenAsked = listening;
      return takeStartTarget();
    };
    await new AppModel(backend).start();
    expect(listeningWhenAsked).toBe(true);
  });

  it("starts as usual when the start target cannot be read", async () => {
    const backend = new FakeBackend({ world: demoWorld(NOW), now: () => NOW });
    backend.failNext("takeStartTarget", "ipc", "command take_start_target not found");
    const app = new AppModel(backend, { now: () => NOW });
    await app.start();
    expect(app.view).toBe("away");
    expect(app.toasts.items.map((toast) => toast.code)).toEqual(["ipc"]);
  });

  it("hands each core change to the models that care", async () => {
    const { app, backend, world } = await started();
    world.pings[0]!.state = "expired";
    backend.emitChanged({ pings: true });
    await settle();
    expect(app.counts.pings).toBe(0);
  });

  it("refetches everything when a newer core says everything changed", async () => {
    const { app, backend, world } = await started();
    await app.openRoom("r-security");
    world.pings[0]!.state = "expired";
    world.rooms[1]!.messages.push({ ...world.rooms[1]!.messages[0]!, seq: 50, id: "new", text: "after the reset" });
    const callsBefore = backend.calls.length;
    await app.applyChange({
      rooms: false,
      messages: [],
      pings: false,
      contacts: false,
      agents: false,
      sync: false,
      work: false,
      scan: false,
      everything: true,
    });
    const refetched = new Set(backend.calls.slice(callsBefore).map((call) => call.command));
    // The boards not on screen wait until they are shown.
    expect(refetched).toEqual(
      new Set(["appState", "rooms", "roomMessages", "pings", "contacts", "invites", "agents", "detectAgents", "sessions", "away", "workScan"]),
    );
    expect(app.counts.pings).toBe(0);
    expect(app.rooms.conversation?.entries.some((entry) => entry.message.text === "after the reset")).toBe(true);
  });

  it("shows every waiting question when the tray asks for pings", async () => {
    const { app } = await started();
    app.go("agents");
    await app.open({ view: "pings" });
    expect(app.view).toBe("pings");
  });

  it("stops listening when stopped", async () => {
    const { app, backend, world, stop } = await started();
    stop();
    world.pings[0]!.state = "expired";
    backend.emitChanged({ pings: true });
    await settle();
    expect(app.counts.pings).toBe(1);
  });

  it("routes the shell's keys", async () => {
    const { app } = await started();
    expect(app.handleKey(key({ key: "k", ctrlKey: true }))).toBe(true);
    expect(app.palette.open).toBe(true);
    expect(app.handleKey(key({ key: "k", metaKey: true }))).toBe(true);
    expect(app.palette.open).toBe(false);
    expect(app.handleKey(key({ key: "3", ctrlKey: true }))).toBe(true);
    expect(app.view).toBe("agents");
    expect(app.handleKey(key({ key: "?", inEditable: true }))).toBe(false);
    expect(app.handleKey(key({ key: "?" }))).toBe(true);
    expect(app.shortcutsOpen).toBe(true);
    expect(app.handleKey(key({ key: "Escape" }))).toBe(true);
    expect(app.shortcutsOpen).toBe(false);
    expect(app.handleKey(key({ key: "a" }))).toBe(false);
  });

  it("reports failed loads as toasts", async () => {
    const world = emptyWorld();
    const backend = new FakeBackend({ world });
    backend.failNext("rooms", "cache", "The local cache is busy. Close other Roundtable windows.");
    const app = new AppModel(backend);
    await app.start();
    expect(app.toasts.items.map((toast) => toast.message)).toEqual([
      "The local cache is busy. Close other Roundtable windows.",
    ]);
  });

  it("opens a confirmed link through the core, and shows a refused one as an error", async () => {
    const { app, world } = await started();
    await app.openLink("https://docs.example/guide");
    expect(world.openedLinks).toEqual(["https://docs.example/guide"]);
    await app.openLink("javascript:alert(1)");
    expect(world.openedLinks).toEqual(["https://docs.example/guide"]);
    expect(app.toasts.items.map((toast) => toast.code)).toEqual(["invalid"]);
  });

  it("offers views, rooms, questions and actions in the palette", async () => {
    const { app } = await started();
    const ids = app.paletteCommands().map((command) => command.id);
    expect(ids).toEqual(
      expect.arrayContaining(["view:rooms", "room:r-parser", "ping:p-format", "action:new-room", "action:redeem"]),
    );
    app.palette.show();
    app.palette.type("security");
    expect(app.palette.results[0]?.id).toBe("room:r-security");
    app.palette.run();
    await settle();
    expect(app.view).toBe("rooms");
    expect(app.rooms.selectedId).toBe("r-security");
  });
});
