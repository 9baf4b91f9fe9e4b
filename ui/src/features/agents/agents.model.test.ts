import { describe, expect, it } from "vitest";
import type { AgentState, AgentView } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import {
  AGENT_STATES,
  AgentsModel,
  agentRowId,
  agentStateLabel,
  controlsInForce,
  tokenChangedSummary,
} from "./agents.model.svelte";

function agent(handle: string, state: AgentState, overrides: Partial<AgentView> = {}): AgentView {
  return {
    id: `id-${handle}`,
    handle,
    name: handle.split("/")[1] ?? handle,
    cli: null,
    state,
    detail: null,
    room: null,
    since_ms: null,
    controls: [],
    ...overrides,
  };
}

function setup(agents: AgentView[]) {
  const world = emptyWorld();
  world.agents = agents;
  const backend = new FakeBackend({ world });
  const toasts = new Toasts();
  const model = new AgentsModel({ backend, errors: toasts });
  backend.onChanged((change) => void model.applyChange(change));
  return { world, backend, toasts, model };
}

describe("agents model", () => {
  it("maps every state to words (never colour alone)", () => {
    expect(agentStateLabel("working").label).toBe("working");
    expect(agentStateLabel("idle").label).toBe("idle");
    expect(agentStateLabel("waiting_human").label).toBe("waiting for a person");
    expect(agentStateLabel("error").label).toBe("error");
    expect(agentStateLabel("stopped").label).toBe("stopped");
    expect(agentStateLabel("unknown").label).toBe("unknown");
    for (const status of Object.values(AGENT_STATES)) {
      expect(status.label.length).toBeGreaterThan(0);
      expect(status.icon.length).toBeGreaterThan(0);
    }
  });

  it("falls back to unknown for a state this UI does not know yet", () => {
    expect(agentStateLabel("rebooting" as AgentState).label).toBe("unknown");
  });

  it("names rows by handle with / replaced by _", () => {
    expect(agentRowId("dana/writer")).toBe("dana_writer");
  });

  it("lists agents that need a person first", async () => {
    const { model } = setup([agent("dana/a", "working"), agent("dana/b", "error"), agent("dana/c", "waiting_human")]);
    await model.load();
    expect(model.ordered.map((a) => a.handle)).toEqual(["dana/b", "dana/c", "dana/a"]);
    expect(model.attentionCount).toBe(2);
  });

  it("pauses and resumes, refetching after each", async () => {
    const { model, backend } = setup([agent("dana/writer", "working")]);
    await model.load();
    await model.control(model.agents[0]!, "pause");
    expect(backend.calls.find((call) => call.command === "controlAgent")?.args).toEqual(["id-dana/writer", "pause", null]);
    expect(controlsInForce(model.agents[0]!)).toEqual(["pause"]);
    await model.control(model.agents[0]!, "resume");
    expect(controlsInForce(model.agents[0]!)).toEqual([]);
    expect(model.busy).toEqual({});
  });

  it("rotates a token only after confirmation, and says which profile here took it", async () => {
    const { model, backend } = setup([agent("dana/writer", "idle", { cli: "claude" })]);
    await model.load();
    model.askToken(model.agents[0]!, "rotate");
    expect(backend.calls.some((call) => call.command === "agentToken")).toBe(false);
    expect(model.confirming?.action).toBe("rotate");
    await model.confirmToken();
    expect(backend.calls.find((call) => call.command === "agentToken")?.args).toEqual(["id-dana/writer", "rotate"]);
    expect(model.tokenResult).toEqual({ agent: "dana/writer", revoked: false, saved_in: "dana.writer", token: null });
    expect(model.notice).toBe("Rotated the token of dana/writer. The new one is saved in its profile “dana.writer” on this machine.");
    expect(model.newToken).toBeNull();
    expect(model.confirming).toBeNull();
    expect(model.busy).toEqual({});
  });

  it("shows a new token once when no profile on this machine took it", async () => {
    const { model } = setup([agent("dana/remote", "idle")]);
    await model.load();
    model.askToken(model.agents[0]!, "rotate");
    await model.confirmToken();
    expect(model.tokenResult).toMatchObject({ agent: "dana/remote", revoked: false, saved_in: null });
    expect(model.newToken).toMatch(/^rt_fake_remote_/);
    expect(model.notice).toContain("give the new token below to wherever the agent runs");
    model.dismissTokenResult();
    expect(model.newToken).toBeNull();
    expect(model.notice).toBeNull();
  });

  it("forgets the last token change when asked for the next one", async () => {
    const { model } = setup([agent("dana/remote", "idle")]);
    await model.load();
    model.askToken(model.agents[0]!, "rotate");
    await model.confirmToken();
    expect(model.newToken).not.toBeNull();
    model.askToken(model.agents[0]!, "revoke");
    expect(model.tokenResult).toBeNull();
  });

  it("revokes a token after confirmation", async () => {
    const { model } = setup([agent("dana/writer", "idle", { cli: "claude" })]);
    await model.load();
    model.askToken(model.agents[0]!, "revoke");
    await model.confirmToken();
    expect(model.tokenResult).toEqual({ agent: "dana/writer", revoked: true, saved_in: null, token: null });
    expect(model.notice).toBe("Revoked the token of dana/writer.");
    expect(model.newToken).toBeNull();
    expect(agentStateLabel(model.agents[0]!.state).label).toBe("stopped");
  });

  it("keeps no token result when the core refuses", async () => {
    const { model, backend, toasts } = setup([agent("dana/writer", "idle")]);
    await model.load();
    backend.failNext("agentToken", "forbidden", "Only the agent's owner can change its token.");
    model.askToken(model.agents[0]!, "rotate");
    await model.confirmToken();
    expect(model.tokenResult).toBeNull();
    expect(toasts.items.map((toast) => toast.code)).toEqual(["forbidden"]);
    expect(model.busy).toEqual({});
  });

  it("summarizes each kind of token change", () => {
    const base = { agent: "dana/x", revoked: false, saved_in: null, token: null };
    expect(tokenChangedSummary({ ...base, revoked: true })).toBe("Revoked the token of dana/x.");
    expect(tokenChangedSummary({ ...base, saved_in: "dana.x" })).toContain("saved in its profile “dana.x”");
    expect(tokenChangedSummary({ ...base, token: "t" })).toContain("No profile on this machine holds it");
    expect(tokenChangedSummary(base)).toBe("Rotated the token of dana/x.");
  });

  it("does nothing when the confirmation is cancelled", async () => {
    const { model, backend } = setup([agent("dana/writer", "idle")]);
    await model.load();
    model.askToken(model.agents[0]!, "revoke");
    model.cancelToken();
    await model.confirmToken();
    expect(backend.calls.some((call) => call.command === "agentToken")).toBe(false);
  });

  it("follows the core's agent changes", async () => {
    const { model, backend, world } = setup([agent("dana/writer", "idle")]);
    await model.load();
    world.agents[0]!.state = "waiting_human";
    backend.emitChanged({ agents: true });
    await settle();
    expect(agentStateLabel(model.agents[0]!.state).label).toBe("waiting for a person");
  });
});
