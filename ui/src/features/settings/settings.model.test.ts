import { describe, expect, it } from "vitest";
import { FakeBackend } from "../../backend/fake";
import { emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { SettingsModel, reachSummary, remoteLogin, syncStateLabel } from "./settings.model.svelte";

function setup() {
  const world = emptyWorld();
  const backend = new FakeBackend({ world });
  const toasts = new Toasts();
  const model = new SettingsModel({ backend, errors: toasts });
  return { world, backend, toasts, model };
}

describe("settings model", () => {
  it("shows who I am, the hub and the sync state in words", async () => {
    const { model } = setup();
    await model.load();
    expect(model.me?.handle).toBe("dana");
    expect(model.state?.hub_mode).toBe("embedded");
    expect(model.sync?.label).toBe("up to date");
  });

  it("lets teammates on the network in, and out, on the app's own hub only", async () => {
    const { model, toasts } = setup();
    await model.load();
    expect(model.state?.network_address).toBeNull();
    expect(model.state?.hub_address).toMatch(/^unix:/);
    expect(reachSummary(model.state!)).toContain("you alone");
    expect(await model.shareOnNetwork(true)).toBe(true);
    expect(model.state?.network_address).toMatch(/^wss:\/\/.+#sha256=[0-9a-f]{64}$/);
    expect(reachSummary(model.state!)).toContain("fingerprint");
    expect(await model.shareOnNetwork(false)).toBe(true);
    expect(model.state?.network_address).toBeNull();
    model.address = "wss://hub.example.com";
    model.handle = "dana";
    await model.connectRemote();
    expect(reachSummary(model.state!)).toBe("");
    expect(await model.shareOnNetwork(true)).toBe(false);
    expect(toasts.items.at(-1)?.message).toContain("embedded hub first");
  });

  it("says the app's own hub stopped, and starts it again over the same data", async () => {
    const { model, world, backend } = setup();
    await model.load();
    expect(model.hubFailure).toBeNull();
    world.hub_failure = "the hub's writer thread failed (a bug), so the hub stopped";
    world.sync = { state: "offline", detail: "cannot reach the hub" };
    await model.applyChange({ rooms: false, messages: [], pings: false, contacts: false, agents: false, sync: true, work: false, scan: false, everything: true });
    expect(model.hubFailure).toContain("writer thread failed");
    expect(model.sync?.label).toBe("offline");
    expect(await model.restartHub()).toBe(true);
    expect(backend.calls.map((call) => call.command)).toContain("useEmbedded");
    expect(model.hubFailure).toBeNull();
    expect(model.state).toMatchObject({ hub_mode: "embedded", me: { handle: "dana" } });
    expect(model.sync?.label).toBe("up to date");
  });

  it("names every sync state the core reports", () => {
    expect(syncStateLabel("not_started").label).toBe("not started");
    expect(syncStateLabel("syncing").label).toBe("syncing");
    expect(syncStateLabel("offline").label).toBe("offline");
    expect(syncStateLabel("failed").label).toBe("sync failed");
  });

  it("connects to a remote hub by signing up", async () => {
    const { model, backend } = setup();
    model.address = "wss://hub.example.com";
    model.loginKind = "signup";
    model.handle = "dana";
    expect(await model.connectRemote()).toBe(true);
    expect(backend.calls.at(-2)?.args).toEqual(["wss://hub.example.com", { kind: "signup", handle: "dana", name: "dana" }, false]);
    expect(model.state).toMatchObject({ hub_mode: "remote", hub_address: "wss://hub.example.com" });
  });

  it("reaches a hub on another machine without TLS only when the person says so", async () => {
    const { model, toasts } = setup();
    model.address = "192.168.1.20:7300";
    model.loginKind = "signup";
    model.handle = "dana";
    expect(await model.connectRemote()).toBe(false);
    expect(toasts.items[0]?.message).toContain("no TLS");
    model.insecure = true;
    expect(await model.connectRemote()).toBe(true);
    expect(model.state).toMatchObject({ hub_mode: "remote", hub_address: "192.168.1.20:7300" });
  });

  it("says what is missing before asking the core", async () => {
    const { model, toasts, backend } = setup();
    model.address = "hub.example.com:443";
    model.loginKind = "invite";
    model.handle = "dana";
    expect(await model.connectRemote()).toBe(false);
    expect(toasts.items[0]?.message).toBe("Paste the invite code your teammate sent.");
    expect(backend.calls).toEqual([]);
  });

  it("builds each kind of login", () => {
    const form = { kind: "token" as const, handle: "", name: "", code: "", token: " t0k " };
    expect(remoteLogin(form)).toEqual({ kind: "token", token: "t0k" });
    expect(remoteLogin({ ...form, kind: "invite", code: "C", handle: "sam", name: "Sam" })).toEqual({
      kind: "invite",
      code: "C",
      handle: "sam",
      name: "Sam",
    });
  });

  it("goes back to the embedded hub", async () => {
    const { model, world } = setup();
    world.hub_mode = "remote";
    await model.load();
    expect(await model.useEmbedded()).toBe(true);
    expect(model.state?.hub_mode).toBe("embedded");
  });
});
