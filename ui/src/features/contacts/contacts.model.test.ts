import { describe, expect, it } from "vitest";
import type { ContactRequest } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { emptyWorld } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import invitesVerdicts from "../../backend/fixtures/invites.json";
import { ContactsModel, INVITE_DEFAULT_HOURS, optionalPositive, reachesThisComputerOnly, redeemedSummary, splitRequests } from "./contacts.model.svelte";
import { contactLabel } from "./directory-search.svelte";

function request(id: string, overrides: Partial<ContactRequest>): ContactRequest {
  return {
    id,
    from: "u-x",
    from_handle: "x",
    to: "u-dana",
    to_handle: "dana",
    state: "pending",
    message: null,
    ts_ms: 0,
    incoming: true,
    ...overrides,
  };
}

function setup() {
  const world = emptyWorld();
  world.requests = [
    request("to-my-agent", { from: "a-crawler", from_handle: "eve/crawler", to: "a-writer", to_handle: "dana/writer", ts_ms: 3 }),
    request("to-me", { from: "u-sam", from_handle: "sam", ts_ms: 2 }),
    request("mine", { from: "u-dana", from_handle: "dana", to: "u-lee", to_handle: "lee", incoming: false, ts_ms: 1 }),
    request("old", { state: "rejected" }),
  ];
  world.directory = [
    { id: "a-crawler", kind: "agent", handle: "eve/crawler", name: "crawler", description: null, owner: "u-eve", contact: "pending_in" },
    { id: "u-sam", kind: "user", handle: "sam", name: "Sam", description: null, owner: null, contact: "pending_in" },
    { id: "u-lee", kind: "user", handle: "lee", name: "Lee", description: null, owner: null, contact: "pending_out" },
    { id: "u-kim", kind: "user", handle: "kim", name: "Kim", description: null, owner: null, contact: "none" },
  ];
  world.rooms = [{ id: "r-1", title: "parser", topic: null, creator: null, members: [], read_to: 0, messages: [] }];
  world.redeemable = { TEAM42: { creator: "u-lee", room: "r-1" } };
  const backend = new FakeBackend({ world, now: () => 1_000_000 });
  const toasts = new Toasts();
  const model = new ContactsModel({ backend, errors: toasts, roomTitle: (id) => (id === "r-1" ? "parser" : id) });
  backend.onChanged((change) => void model.applyChange(change));
  return { world, backend, toasts, model };
}

describe("contacts model", () => {
  it("separates incoming requests (mine and my agents') from outgoing ones", async () => {
    const { model } = setup();
    await model.load();
    expect(model.incoming.map((r) => r.id)).toEqual(["to-my-agent", "to-me"]);
    expect(model.outgoing.map((r) => r.id)).toEqual(["mine"]);
    expect(model.waitingCount).toBe(2);
    expect(splitRequests(model.requests).settled.map((r) => r.id)).toEqual(["old"]);
  });

  it("approves a request and the contact appears", async () => {
    const { model } = setup();
    await model.load();
    await model.respond(model.incoming.find((r) => r.id === "to-me")!, true);
    expect(model.incoming.map((r) => r.id)).toEqual(["to-my-agent"]);
    await settle();
    expect(model.contacts.map((c) => c.handle)).toEqual(["sam"]);
  });

  it("rejects a request", async () => {
    const { model, backend } = setup();
    await model.load();
    await model.respond(model.incoming[0]!, false);
    expect(backend.calls.find((call) => call.command === "respondContact")?.args).toEqual(["to-my-agent", false]);
    expect(model.incoming.map((r) => r.id)).toEqual(["to-me"]);
  });

  it("creates an invite and shows the link to paste", async () => {
    const { model, backend } = setup();
    await model.load();
    model.inviteRoom = "r-1";
    model.inviteUses = "3";
    model.inviteHours = "24";
    const created = await model.createInvite();
    expect(backend.calls.find((call) => call.command === "createInvite")?.args).toEqual(["r-1", 3, 24]);
    // The app's own hub, not yet open to the network: the link reaches this computer only.
    expect(created?.link).toMatch(/^roundtable:\/\/invite\/\w+\?hub=unix:\/\S+\/hub\.sock$/);
    expect(reachesThisComputerOnly(created!.link)).toBe(true);
    expect(model.created).toEqual(created);
    expect(model.invites).toHaveLength(1);
    expect(model.invites[0]).toMatchObject({ room: "r-1", uses_left: 3 });
  });

  it("makes links teammates on the network reach once the person lets them in", async () => {
    const { model, backend } = setup();
    await backend.shareOnNetwork(true);
    const created = await model.createInvite();
    expect(created?.link).toMatch(/\?hub=wss:\/\/192\.168\.1\.20:47300#sha256=[0-9a-f]{64}$/);
    expect(reachesThisComputerOnly(created!.link)).toBe(false);
    expect(reachesThisComputerOnly("roundtable://invite/abc?hub=hub.example.com:443")).toBe(false);
  });

  it("refuses invite numbers that are not whole and positive", async () => {
    const { model, toasts, backend } = setup();
    model.inviteUses = "two";
    expect(await model.createInvite()).toBeNull();
    expect(toasts.items[0]?.code).toBe("invalid_input");
    expect(backend.calls.some((call) => call.command === "createInvite")).toBe(false);
    expect(optionalPositive("")).toBeNull();
    expect(optionalPositive(" 5 ")).toBe(5);
    expect(optionalPositive("0")).toBe("invalid");
  });

  it("withdraws an invite at once, and brings it back if the core refuses", async () => {
    const { model, backend } = setup();
    await model.createInvite();
    await settle();
    const invite = model.invites[0]!;
    backend.failNext("revokeInvite", "unreachable", "The hub is unreachable. Try again when online.");
    await model.revoke(invite);
    expect(model.invites).toEqual([invite]);
    await model.revoke(invite);
    expect(model.invites).toEqual([]);
  });

  it("redeems a link and says what it did", async () => {
    const { model, backend, world } = setup();
    model.prefillRedeem("roundtable://invite/TEAM42?hub=hub.example.com:443");
    expect(await model.redeem()).toBe(true);
    expect(backend.calls.find((call) => call.command === "redeemInvite")?.args).toEqual([
      "roundtable://invite/TEAM42?hub=hub.example.com:443",
    ]);
    expect(model.redeemed).toBe("Invite redeemed: you and whoever sent it are contacts, and you joined parser.");
    expect(model.redeemCode).toBe("");
    // Reloaded after redeeming: the invite's creator is a contact now, and I am in its room.
    expect(model.contacts.map((c) => c.handle)).toEqual(["lee"]);
    expect(world.rooms[0]!.members.map((m) => m.id)).toEqual(["u-dana"]);
  });

  it("sends the hub a deep link named along with its code", async () => {
    const { model, backend, world } = setup();
    model.prefillRedeem("TEAM42", "hub.example.com:443");
    expect(model.redeemCode).toBe("TEAM42");
    expect(await model.redeem()).toBe(true);
    expect(backend.calls.find((call) => call.command === "redeemInvite")?.args).toEqual([
      "roundtable://invite/TEAM42?hub=hub.example.com:443",
    ]);
    expect(model.redeemHub).toBeNull();
    expect(world.redeemable).toEqual({});
  });

  it("keeps the code in the form when redeeming fails", async () => {
    const { model, toasts } = setup();
    model.prefillRedeem("NOPE");
    expect(await model.redeem()).toBe(false);
    expect(model.redeemCode).toBe("NOPE");
    expect(toasts.items[0]?.code).toBe("not_found");
  });

  it("sends a contact request to someone found in the directory", async () => {
    const { model, backend } = setup();
    await model.requestSearch.search("ki");
    expect(model.requestSearch.results.map((e) => e.handle)).toEqual(["kim"]);
    model.requestSearch.choose(model.requestSearch.results[0]);
    model.requestMessage = "hi from dana";
    expect(await model.requestContact()).toBe(true);
    expect(backend.calls.find((call) => call.command === "requestContact")?.args).toEqual(["kim", "hi from dana"]);
    expect(model.outgoing.map((r) => r.to_handle)).toContain("kim");
  });

  it("summarizes redeeming", () => {
    expect(redeemedSummary({ room: null }, String)).toBe("Invite redeemed: you and whoever sent it are contacts.");
    expect(redeemedSummary({ room: "r-1" }, (id) => (id === "r-1" ? "parser" : id))).toBe(
      "Invite redeemed: you and whoever sent it are contacts, and you joined parser.",
    );
  });

  it("says how a directory entry relates to me", () => {
    const entry = { id: "u-kim", kind: "user" as const, handle: "kim", name: "Kim", description: null, owner: null };
    expect(contactLabel({ ...entry, contact: "kin" })).toBe("yours");
    expect(contactLabel({ ...entry, contact: "accepted" })).toBe("contact");
    expect(contactLabel({ ...entry, contact: "pending_out" })).toBe("request sent");
    expect(contactLabel({ ...entry, contact: "pending_in" })).toBe("asked to connect");
    expect(contactLabel({ ...entry, contact: "none" })).toBe("not a contact");
  });
});

describe("the invite form's blank expiry", () => {
  it("is the hub's default, as the core says", () => {
    expect(INVITE_DEFAULT_HOURS * 3_600).toBe(invitesVerdicts.default_expiry_s);
  });
});
