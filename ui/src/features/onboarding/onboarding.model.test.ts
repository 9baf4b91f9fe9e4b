import { describe, expect, it } from "vitest";
import type { Detected } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { OnboardingModel, agentNameProblem } from "./onboarding.model.svelte";

function cli(overrides: Partial<Detected>): Detected {
  return {
    cli: "claude",
    name: "Claude Code",
    path: "/usr/bin/claude",
    version: "2.1.4",
    supported: true,
    support: [],
    config: ["~/.claude.json"],
    logs: [],
    onboarded: false,
    handle: null,
    ...overrides,
  };
}

function setup() {
  const world = emptyWorld();
  world.detected = [
    cli({}),
    cli({ cli: "codex", name: "Codex", path: "/usr/bin/codex", config: ["~/.codex/config.toml"] }),
    cli({ cli: "copilot", name: "Copilot CLI", path: "/usr/bin/copilot", supported: false, version: null }),
  ];
  const backend = new FakeBackend({ world });
  const toasts = new Toasts();
  const model = new OnboardingModel({ backend, errors: toasts });
  return { world, backend, toasts, model };
}

describe("onboarding model", () => {
  it("lists supported CLIs apart from those not supported yet", async () => {
    const { model } = setup();
    await model.scan();
    expect(model.supported.map((c) => c.cli)).toEqual(["claude", "codex"]);
    expect(model.unsupported.map((c) => c.cli)).toEqual(["copilot"]);
  });

  it("defaults the agent name to the CLI's command name", async () => {
    const { model } = setup();
    await model.scan();
    expect(model.nameFor("claude")).toBe("claude");
    model.names.claude = "writer";
    expect(model.nameFor("claude")).toBe("writer");
  });

  it("reports which lines went into which file, with the backup", async () => {
    const { model, backend } = setup();
    await model.scan();
    model.names.claude = "writer";
    expect(await model.onboard("claude")).toBe(true);
    expect(backend.calls.find((call) => call.command === "onboardAgent")?.args).toEqual(["claude", "writer", null]);
    expect(model.outcome?.action).toBe("onboarded");
    expect(model.outcome?.report.handle).toBe("dana/writer");
    expect(model.outcome?.report.changes).toEqual([
      {
        path: "~/.claude.json",
        added: [expect.stringContaining("dana/writer")],
        removed: [],
        backup: "~/.claude.json.roundtable-backup",
      },
    ]);
    expect(model.detected.find((c) => c.cli === "claude")).toMatchObject({ onboarded: true, handle: "dana/writer" });
    expect(model.onboardedCount).toBe(1);
  });

  it("offboards with the handle it was onboarded as", async () => {
    const { model, backend } = setup();
    await model.scan();
    await model.onboard("codex");
    await model.offboard(model.detected.find((c) => c.cli === "codex")!);
    expect(backend.calls.find((call) => call.command === "offboardAgent")?.args).toEqual(["codex", "dana/codex"]);
    expect(model.outcome?.action).toBe("offboarded");
    expect(model.outcome?.report.changes[0]?.removed).toHaveLength(1);
    expect(model.onboardedCount).toBe(0);
  });

  it("shows the core's error on the CLI's row and as a toast", async () => {
    const { model, toasts } = setup();
    await model.scan();
    model.names.claude = "Bad Name!";
    expect(await model.onboard("claude")).toBe(false);
    expect(model.failures.claude).toBe(`agent name "Bad Name!" must start with a lower-case letter or a digit`);
    expect(toasts.items.map((toast) => toast.code)).toEqual(["invalid"]);
    expect(model.busy.claude).toBeUndefined();
    expect(model.outcome).toBeNull();
  });

  it("clears a row's error when the next attempt works", async () => {
    const { model, backend } = setup();
    await model.scan();
    backend.failNext("onboardAgent", "io", "Close Claude Code, then try again.");
    await model.onboard("claude");
    expect(model.failures.claude).toBe("Close Claude Code, then try again.");
    await model.onboard("claude");
    expect(model.failures.claude).toBeUndefined();
  });

  it("says what is wrong with a name before sending it", () => {
    expect(agentNameProblem("writer")).toBeNull();
    expect(agentNameProblem("w")).toBe("2 to 32 characters");
    expect(agentNameProblem("Writer")).toContain("a-z");
  });
});
