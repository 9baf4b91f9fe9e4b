import { describe, expect, it } from "vitest";
import { FakeBackend } from "../../backend/fake";
import { emptyWorld, member, storedMessage, type FakeRoom } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import { RoomsModel, roomTitle, splitHandles } from "./rooms.model.svelte";

const dana = member("u-dana", "dana", "user");
const writer = member("a-writer", "dana/writer", "agent");

function setup() {
  const world = emptyWorld();
  const room: FakeRoom = {
    id: "r-1",
    title: "parser",
    topic: null,
    creator: dana.id,
    members: [dana, writer],
    read_to: 1,
    messages: [
      storedMessage("r-1", 1, writer, "one", 1),
      storedMessage("r-1", 2, writer, "two", 2),
      storedMessage("r-1", 3, writer, "@dana look", 3, { mentions: ["u-dana"] }),
    ],
  };
  world.rooms = [room];
  world.directory = [
    { id: "a-writer", kind: "agent", handle: "dana/writer", name: "writer", description: null, owner: "u-dana", contact: "kin" },
    { id: "u-sam", kind: "user", handle: "sam", name: "Sam", description: null, owner: null, contact: "accepted" },
    { id: "u-eve", kind: "user", handle: "eve", name: "Eve", description: null, owner: null, contact: "none" },
  ];
  const backend = new FakeBackend({ world });
  const toasts = new Toasts();
  const model = new RoomsModel({ backend, errors: toasts, me: () => world.me, pageSize: 10 });
  backend.onChanged((change) => void model.applyChange(change));
  return { world, room, backend, toasts, model };
}

describe("rooms model", () => {
  it("counts unread messages and mentions across rooms", async () => {
    const { model } = setup();
    await model.load();
    expect(model.rooms[0]).toMatchObject({ unread: 2, unread_mentions: 1 });
    expect(model.totalUnread).toBe(2);
    expect(model.totalMentions).toBe(1);
  });

  it("clears the unread count at once when the newest message is seen", async () => {
    const { model, backend } = setup();
    await model.load();
    await model.select("r-1");
    model.conversation!.markSeen(3);
    expect(model.rooms[0]).toMatchObject({ read_to: 3, unread: 0, unread_mentions: 0 });
    await settle();
    expect(backend.calls.filter((call) => call.command === "markRead").map((call) => call.args)).toEqual([["r-1", 3]]);
    expect(model.totalUnread).toBe(0);
  });

  it("refetches the open room when the core says its messages changed", async () => {
    const { model, backend, room } = setup();
    await model.load();
    await model.select("r-1");
    room.messages.push(storedMessage("r-1", 4, writer, "four", 4));
    backend.emitChanged({ messages: ["r-1"] });
    await settle();
    expect(model.conversation!.entries.map((entry) => entry.message.seq)).toEqual([1, 2, 3, 4]);
    expect(model.rooms[0]!.unread).toBe(3);
  });

  it("creates a room from the form and opens it", async () => {
    const { model } = setup();
    await model.load();
    model.newTitle = "review";
    model.newMembers = "@dana/writer, sam";
    expect(await model.create()).toBe(true);
    expect(model.selected).toMatchObject({ title: "review" });
    expect(model.selected!.members.map((m) => m.handle)).toEqual(["dana", "dana/writer", "sam"]);
    expect(model.newTitle).toBe("");
    expect(model.conversation?.roomId).toBe(model.selectedId);
  });

  it("invites a contact, and says why a stranger cannot be invited", async () => {
    const { model, toasts } = setup();
    await model.load();
    await model.select("r-1");
    await model.inviteSearch.search("sa");
    expect(model.inviteSearch.results.map((entry) => entry.handle)).toEqual(["sam"]);
    model.inviteSearch.move(1);
    model.inviteSearch.choose();
    expect(await model.invite()).toBe(true);
    expect(model.selected!.members.map((m) => m.handle)).toContain("sam");

    await model.inviteSearch.search("eve");
    model.inviteSearch.choose(model.inviteSearch.results[0]);
    expect(await model.invite()).toBe(false);
    expect(toasts.items.at(-1)).toMatchObject({ code: "no_consent" });
  });

  it("leaves members already in the room out of the invite suggestions", async () => {
    const { model } = setup();
    await model.load();
    await model.select("r-1");
    await model.inviteSearch.search("dana");
    expect(model.inviteSearch.results).toEqual([]);
  });

  it("names an untitled room after who else is in it", () => {
    expect(roomTitle({ id: "r", title: null, members: [dana, writer] }, "u-dana")).toBe("dana/writer");
    expect(roomTitle({ id: "r", title: "parser", members: [] })).toBe("parser");
  });

  it("reads handles separated by commas or spaces, with or without @", () => {
    expect(splitHandles(" @sam, dana/writer  lee ")).toEqual(["sam", "dana/writer", "lee"]);
  });
});
