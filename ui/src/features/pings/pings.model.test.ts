import { describe, expect, it } from "vitest";
import type { PingView } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import { PingsModel, pingOutcome, splitPings } from "./pings.model.svelte";

function ping(id: string, overrides: Partial<PingView> = {}): PingView {
  return {
    room: "r-1",
    ping: id,
    seq: 1,
    asker: "a-reviewer",
    asker_handle: "dana/reviewer",
    question: `question ${id}`,
    options: ["yes", "no"],
    recipients: ["u-dana"],
    asked_ms: 1_000,
    expires_ms: null,
    state: "open",
    answered_by: null,
    answered_by_handle: null,
    answered_ms: null,
    choice: null,
    text: null,
    ...overrides,
  };
}

function setup(pings: PingView[]) {
  const world = emptyWorld();
  world.pings = pings;
  const backend = new FakeBackend({ world, now: () => 5_000 });
  const toasts = new Toasts();
  const model = new PingsModel({ backend, errors: toasts });
  const stop = backend.onChanged((change) => void model.applyChange(change));
  return { backend, toasts, model, stop, world };
}

describe("pings model", () => {
  it("separates what needs me from everything else", async () => {
    const { model } = setup([
      ping("open-for-me"),
      ping("answered", { state: "answered", answered_by: "u-sam", answered_by_handle: "sam", choice: "no", answered_ms: 3_000 }),
      ping("expired", { state: "expired" }),
      ping("open-for-sam", { recipients: ["u-sam"] }),
    ]);
    await model.load();
    expect(model.needsYou.map((p) => p.ping)).toEqual(["open-for-me"]);
    expect(model.rest.map((p) => p.ping).sort()).toEqual(["answered", "expired", "open-for-sam"]);
    expect(model.count).toBe(1);
  });

  it("puts the question that waited longest first", () => {
    const { needsYou } = splitPings([ping("new", { asked_ms: 9 }), ping("old", { asked_ms: 1 })], []);
    expect(needsYou.map((p) => p.ping)).toEqual(["old", "new"]);
  });

  it("says who answered and what", () => {
    expect(
      pingOutcome(ping("p", { state: "answered", answered_by_handle: "sam", choice: "yes", text: "ship it" })),
    ).toBe("Answered by sam: yes — ship it");
    expect(pingOutcome(ping("p", { state: "expired" }))).toBe("Expired without an answer");
  });

  it("updates when the core says pings changed", async () => {
    const { model, backend, world } = setup([]);
    await model.load();
    expect(model.needsYou).toEqual([]);
    world.pings.push(ping("new-question"));
    backend.emitChanged({ pings: true });
    await settle();
    expect(model.needsYou.map((p) => p.ping)).toEqual(["new-question"]);
  });

  it("ignores changes that are not about pings", async () => {
    const { model, backend } = setup([ping("p1")]);
    await model.load();
    const before = backend.calls.length;
    backend.emitChanged({ rooms: true, agents: true });
    await settle();
    expect(backend.calls.length).toBe(before);
  });

  it("answers with an option and moves the ping out of needs-you", async () => {
    const { model, backend } = setup([ping("p1")]);
    await model.load();
    expect(await model.answer(model.needsYou[0]!, "yes")).toBe(true);
    await settle();
    expect(backend.calls.find((call) => call.command === "answerPing")?.args).toEqual(["r-1", "p1", "yes", null]);
    expect(model.needsYou).toEqual([]);
    expect(model.rest[0]).toMatchObject({ ping: "p1", state: "answered", choice: "yes", answered_by_handle: "dana" });
  });

  it("answers with free text", async () => {
    const { model, backend } = setup([ping("p1", { options: [] })]);
    await model.load();
    model.drafts["r-1/p1"] = "  keep it for one release  ";
    expect(await model.answer(model.needsYou[0]!, null)).toBe(true);
    expect(backend.calls.find((call) => call.command === "answerPing")?.args).toEqual([
      "r-1",
      "p1",
      null,
      "keep it for one release",
    ]);
    expect(model.drafts["r-1/p1"]).toBeUndefined();
  });

  it("does not send an empty free-text answer", async () => {
    const { model, backend } = setup([ping("p1")]);
    await model.load();
    expect(await model.answer(model.needsYou[0]!, null)).toBe(false);
    expect(backend.calls.some((call) => call.command === "answerPing")).toBe(false);
  });

  it("shows who won when someone else answered first", async () => {
    const { model, toasts, world } = setup([ping("p1")]);
    await model.load();
    Object.assign(world.pings[0]!, { state: "answered", answered_by: "u-sam", answered_by_handle: "sam", choice: "no" });
    expect(await model.answer(model.needsYou[0]!, "yes")).toBe(false);
    expect(toasts.items.map((toast) => toast.code)).toEqual(["conflict"]);
    expect(toasts.items[0]!.message).toContain("sam");
    expect(model.needsYou).toEqual([]);
    expect(pingOutcome(model.rest[0]!)).toBe("Answered by sam: no");
  });
});
