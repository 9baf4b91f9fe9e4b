import { describe, expect, it } from "vitest";
import type { SessionView } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { demoWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import { SessionsModel, offeredControls, questionsText, rateText, sessionName } from "./sessions.model.svelte";

const NOW = Date.UTC(2026, 11, 1, 12);

function setup() {
  const world = demoWorld(NOW);
  const backend = new FakeBackend({ world, now: () => NOW });
  const model = new SessionsModel({ backend, errors: new Toasts() });
  backend.onChanged((change) => void model.applyChange(change));
  return { world, backend, model };
}

const base: Pick<SessionView, "mine" | "agent" | "controls" | "state"> = { mine: true, agent: "a", controls: [], state: "working" };

describe("sessions board", () => {
  it("puts what needs the person first", async () => {
    const { model } = setup();
    await model.load();
    expect(model.needsYou.map((session) => session.agent_handle)).toEqual(["dana/reviewer"]);
    expect(model.needsYouCount).toBe(1);
    // In the core's order: the most recently active first.
    expect(model.others.map(sessionName)).toEqual(["dana/writer", "sam/security", "claude-code (not onboarded)"]);
  });

  it("says rates and questions in words", () => {
    expect(rateText(0)).toBe("quiet this hour");
    expect(rateText(1)).toBe("1 message in the last hour");
    expect(rateText(14)).toBe("14 messages in the last hour");
    expect(questionsText({ questions_asked: 0, questions_waiting: 0 })).toBe("asked nothing");
    expect(questionsText({ questions_asked: 3, questions_waiting: 1 })).toBe("asked 3 questions, 1 waiting for you");
  });

  it("offers controls on the person's own agents only, resume when one is in force", () => {
    expect(offeredControls(base)).toEqual(["pause", "stop"]);
    expect(offeredControls({ ...base, controls: ["pause"] })).toEqual(["resume", "stop"]);
    expect(offeredControls({ ...base, state: "stopped" })).toEqual(["resume"]);
    expect(offeredControls({ ...base, mine: false })).toEqual([]);
    expect(offeredControls({ ...base, agent: null })).toEqual([]);
  });

  it("pauses and resumes an agent, and shows it in force", async () => {
    const { model } = setup();
    await model.load();
    const writer = model.sessions.find((session) => session.agent_handle === "dana/writer")!;
    await model.control(writer, "pause");
    const paused = model.sessions.find((session) => session.agent_handle === "dana/writer")!;
    expect(paused.controls).toEqual(["pause"]);
    expect(offeredControls(paused)).toEqual(["resume", "stop"]);
    await model.control(paused, "resume");
    expect(model.sessions.find((session) => session.agent_handle === "dana/writer")!.controls).toEqual([]);
  });

  it("pauses one session in its own room and leaves the agent's other sessions alone", async () => {
    const { world, backend, model } = setup();
    const base = world.boards.sessions.find((session) => session.agent_handle === "dana/writer")!;
    world.boards.sessions = [
      { ...base, key: "w:parser", session_id: "s-parser", bound_room: "r-parser" },
      { ...base, key: "w:security", session_id: "s-security", bound_room: "r-security" },
    ];
    await model.load();
    const byKey = (key: string) => model.sessions.find((session) => session.key === key)!;
    await model.control(byKey("w:parser"), "pause");
    expect(backend.calls.find((call) => call.command === "controlAgent")?.args).toEqual([base.agent, "pause", "r-parser"]);
    expect(byKey("w:parser").controls).toEqual(["pause"]);
    expect(byKey("w:security").controls).toEqual([]);
    await model.control(byKey("w:security"), "stop");
    expect(byKey("w:security").state).toBe("stopped");
    expect(byKey("w:parser").state).not.toBe("stopped");
  });

  it("follows changes to work, agents and pings, and reports failures", async () => {
    const { world, backend, model } = setup();
    await model.load();
    world.boards.sessions = world.boards.sessions.map((session) => ({ ...session, needs_you: false }));
    backend.emitChanged({ pings: true });
    await settle();
    expect(model.needsYouCount).toBe(0);
    const toasts = new Toasts();
    const failing = new SessionsModel({ backend, errors: toasts });
    backend.failNext("sessions", "cache", "The cache cannot be read: restart the app.");
    await failing.load();
    expect(toasts.items.map((toast) => toast.message)).toEqual(["The cache cannot be read: restart the app."]);
  });
});
