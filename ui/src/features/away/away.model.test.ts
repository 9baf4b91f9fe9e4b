import { describe, expect, it } from "vitest";
import type { RoomDigest } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { demoWorld, emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import { AWAY_TASKS_SHOWN, AwayModel, digestCost, digestSummary, digestWriters, firstTasks, newsCount } from "./away.model.svelte";

const NOW = Date.UTC(2026, 11, 1, 12);

function digest(overrides: Partial<RoomDigest>): RoomDigest {
  return {
    room: "r",
    title: "parser",
    since_ms: 0,
    messages: 0,
    mentions: 0,
    writers: [],
    tasks_completed: [],
    tasks_in_progress: [],
    components: [],
    pings_waiting: [],
    cost_usd: 0,
    unpriced: false,
    ...overrides,
  };
}

describe("while you were away", () => {
  it("lists the first tasks of a long list and counts the rest", () => {
    const tasks = Array.from({ length: 5000 }, (_, index) => ({ agent: "a", title: `t${index}` }));
    const { shown, more } = firstTasks(tasks);
    expect(shown.map((task) => task.title)).toEqual(tasks.slice(0, AWAY_TASKS_SHOWN).map((task) => task.title));
    expect(more).toBe(5000 - AWAY_TASKS_SHOWN);
    expect(firstTasks(tasks.slice(0, 3))).toEqual({ shown: tasks.slice(0, 3), more: 0 });
    // The summary still counts every one.
    expect(digestSummary(digest({ tasks_completed: tasks }))).toBe("5000 tasks done");
  });

  it("says what a room holds in words", () => {
    expect(
      digestSummary(
        digest({
          messages: 2,
          mentions: 1,
          tasks_completed: [{ agent: "dana/writer", title: "lex" }],
          tasks_in_progress: [{ agent: "dana/writer", title: "parse" }],
          components: [{ id: "lexer", name: null, status: "done", by: ["dana/writer"] }],
          cost_usd: 0.0045,
        }),
      ),
    ).toBe("2 messages (1 for you) · 1 task done · 1 under way · 1 component changed · $0.0045 spent");
    expect(digestSummary(digest({}))).toBe("nothing new");
  });

  it("names who wrote the new messages, the most first", () => {
    const writers = [
      { author: "dana/writer", messages: 6 },
      { author: "sam", messages: 2 },
    ];
    expect(digestWriters(digest({ messages: 8, writers }))).toBe("dana/writer (6), sam (2)");
    expect(digestWriters(digest({}))).toBe("");
  });

  it("flags unpriced usage rather than showing $0", () => {
    expect(digestCost({ cost_usd: 0, unpriced: true })).toBe("unpriced");
    expect(digestCost({ cost_usd: 2, unpriced: true })).toBe("$2.00 + unpriced");
    expect(digestCost({ cost_usd: 2, unpriced: false })).toBe("$2.00");
  });

  it("counts the news for the nav", () => {
    expect(newsCount([digest({ messages: 5, tasks_completed: [{ agent: "a", title: "t" }] }), digest({ components: [{ id: "c", name: null, status: null, by: [] }] })])).toBe(3);
  });

  it("loads the digest with the questions waiting, and starts afresh once seen", async () => {
    const world = demoWorld(NOW);
    const backend = new FakeBackend({ world, now: () => NOW });
    const model = new AwayModel({ backend, errors: new Toasts() });
    backend.onChanged((change) => void model.applyChange(change));
    await model.load();
    expect(model.hasNews).toBe(true);
    expect(model.digests[0]!.pings_waiting.map((ping) => ping.ping)).toEqual(["p-format"]);
    await model.markSeen();
    expect(backend.calls.some((call) => call.command === "markLooked")).toBe(true);
    expect(model.hasNews).toBe(false);
    // News arriving while the app is open refreshes it.
    world.boards.away = [digest({ room: "r-parser", messages: 1 })];
    backend.emitChanged({ messages: ["r-parser"] });
    await settle();
    expect(model.digests).toHaveLength(1);
  });

  it("reports a failure to mark as seen and keeps the digest", async () => {
    const world = emptyWorld();
    world.boards.away = [digest({ messages: 1 })];
    const backend = new FakeBackend({ world });
    const toasts = new Toasts();
    const model = new AwayModel({ backend, errors: toasts });
    await model.load();
    backend.failNext("markLooked", "cache", "Cannot write the cache: free some disk space.");
    await model.markSeen();
    expect(toasts.items[0]?.message).toBe("Cannot write the cache: free some disk space.");
    expect(model.digests).toHaveLength(1);
    expect(model.marking).toBe(false);
  });
});
