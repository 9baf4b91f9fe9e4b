import { describe, expect, it } from "vitest";
import type { RoomMessage } from "../../bindings";
import { FakeBackend } from "../../backend/fake";
import { emptyWorld, member, storedMessage, type FakeRoom } from "../../backend/fake-world";
import { Toasts } from "../../app/toasts.svelte";
import { settle } from "../../testing/settle";
import { ConversationModel, mergeLatest, prependOlder } from "./conversation.model.svelte";

const dana = member("u-dana", "dana", "user");
const writer = member("a-writer", "dana/writer", "agent");

/** A room whose messages have seqs 2, 4, 6, … (the log also holds other events). */
function roomWith(count: number): FakeRoom {
  const room: FakeRoom = { id: "r-1", title: "parser", topic: null, creator: null, members: [dana, writer], read_to: 0, messages: [] };
  for (let index = 1; index <= count; index += 1) {
    room.messages.push(storedMessage("r-1", index * 2, writer, `message ${index}`, index * 1_000));
  }
  return room;
}

function setup(count: number, pageSize = 5) {
  const world = emptyWorld();
  const room = roomWith(count);
  world.rooms = [room];
  const backend = new FakeBackend({ world, now: () => 99_000 });
  const toasts = new Toasts();
  const marked: number[] = [];
  const conversation = new ConversationModel({
    backend,
    errors: toasts,
    roomId: "r-1",
    me: () => world.me,
    members: () => room.members,
    readTo: () => room.read_to,
    markRead: (seq) => marked.push(seq),
    now: () => 99_000,
    pageSize,
  });
  return { world, room, backend, toasts, conversation, marked };
}

const seqs = (conversation: ConversationModel) => conversation.entries.map((entry) => entry.message.seq);

describe("conversation paging", () => {
  it("opens on the newest page", async () => {
    const { conversation } = setup(12);
    await conversation.loadLatest();
    expect(seqs(conversation)).toEqual([16, 18, 20, 22, 24]);
    expect(conversation.hasOlder).toBe(true);
    expect(conversation.newestStoredSeq).toBe(24);
  });

  it("pages older messages with beforeSeq and keeps ascending order", async () => {
    const { conversation, backend } = setup(12);
    await conversation.loadLatest();
    await conversation.loadOlder();
    expect(backend.calls.at(-1)).toEqual({ command: "roomMessages", args: ["r-1", 16, 5] });
    expect(seqs(conversation)).toEqual([6, 8, 10, 12, 14, 16, 18, 20, 22, 24]);
    expect(conversation.prepending).toBe(true);
    conversation.prependRendered();
    await conversation.loadOlder();
    expect(seqs(conversation)).toEqual([2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24]);
    expect(conversation.hasOlder).toBe(false);
    const callsBefore = backend.calls.length;
    await conversation.loadOlder();
    expect(backend.calls.length).toBe(callsBefore);
  });

  it("knows a short room has nothing older", async () => {
    const { conversation } = setup(3);
    await conversation.loadLatest();
    expect(seqs(conversation)).toEqual([2, 4, 6]);
    expect(conversation.hasOlder).toBe(false);
  });

  it("keeps loaded older pages when new messages arrive", async () => {
    const { conversation, room } = setup(12);
    await conversation.loadLatest();
    await conversation.loadOlder();
    room.messages.push(storedMessage("r-1", 30, writer, "new", 50_000));
    await conversation.refresh();
    expect(seqs(conversation)).toEqual([6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 30]);
  });

  it("starts over from the newest page when more arrived than a page holds", async () => {
    const { conversation, room } = setup(12);
    await conversation.loadLatest();
    for (let seq = 100; seq < 110; seq += 1) room.messages.push(storedMessage("r-1", seq, writer, `burst ${seq}`, seq));
    await conversation.refresh();
    expect(seqs(conversation)).toEqual([105, 106, 107, 108, 109]);
    expect(conversation.hasOlder).toBe(true);
  });
});

describe("merging pages", () => {
  const m = (seq: number | null, outbox: number | null = null): RoomMessage => ({
    ...storedMessage("r", seq ?? 0, dana, "t", 0),
    seq,
    outbox,
    delivery: seq === null ? "queued" : "stored",
  });

  it("replaces queued messages with the page's and keeps older stored ones", () => {
    const { messages, gap } = mergeLatest([m(1), m(2), m(3), m(null, 7)], [m(3), m(4), m(null, 8)], 5);
    expect(gap).toBe(false);
    expect(messages.map((x) => x.seq ?? `o${x.outbox}`)).toEqual([1, 2, 3, 4, "o8"]);
  });

  it("does not duplicate what is already loaded when prepending", () => {
    expect(prependOlder([m(5), m(6)], [m(3), m(4), m(5)]).map((x) => x.seq)).toEqual([3, 4, 5, 6]);
  });
});

describe("sending", () => {
  it("shows my message at once as sending, then the core's copy", async () => {
    const { conversation } = setup(2);
    await conversation.loadLatest();
    conversation.composer.edit("hello @dana/writer", 18);
    const sending = conversation.send();
    const pending = conversation.entries.at(-1)!;
    expect(pending).toMatchObject({ mine: true, local: { state: "sending" } });
    expect(pending.message.text).toBe("hello @dana/writer");
    expect(conversation.composer.text).toBe("");
    await sending;
    const stored = conversation.entries.at(-1)!;
    expect(stored.local).toBeNull();
    expect(stored.message).toMatchObject({ seq: 5, delivery: "stored", text: "hello @dana/writer" });
    expect(stored.message.mention_states).toEqual([{ principal: "a-writer", handle: "dana/writer", state: "sent" }]);
    expect(conversation.entries.filter((entry) => entry.mine)).toHaveLength(1);
  });

  it("keeps a message queued in the outbox while offline, marked as mine", async () => {
    const { conversation, world } = setup(2);
    world.sync = { state: "offline", detail: null };
    await conversation.loadLatest();
    conversation.composer.edit("later", 5);
    await conversation.send();
    const last = conversation.entries.at(-1)!;
    expect(last).toMatchObject({ mine: true, local: null });
    expect(last.message).toMatchObject({ seq: null, delivery: "queued" });
    expect(last.key).toMatch(/^outbox:/);
  });

  // The hub's refusals (paused, too large) come back on the queued message itself; what
  // `sendMessage` throws is the core failing to queue it (a full disk, an empty text).
  it("marks a message the core could not queue failed, and retries it", async () => {
    const { conversation, backend, toasts } = setup(2);
    await conversation.loadLatest();
    backend.failNext("sendMessage", "cache", "The cache could not be written: the disk is full.");
    conversation.composer.edit("try", 3);
    await conversation.send();
    const failed = conversation.entries.at(-1)!;
    expect(failed.local).toEqual({ state: "failed", error: "The cache could not be written: the disk is full." });
    expect(toasts.items[0]?.message).toBe("The cache could not be written: the disk is full.");
    await conversation.retry(failed.key);
    expect(conversation.entries.at(-1)!.local).toBeNull();
    expect(conversation.entries.at(-1)!.message.text).toBe("try");
  });

  it("puts a failed message back in the composer to edit", async () => {
    const { conversation, backend } = setup(1);
    await conversation.loadLatest();
    backend.failNext("sendMessage", "invalid", "Too long.");
    conversation.composer.edit("draft", 5);
    await conversation.send();
    conversation.edit(conversation.entries.at(-1)!.key);
    expect(conversation.composer.text).toBe("draft");
    expect(conversation.entries.every((entry) => entry.local === null)).toBe(true);
  });
});

describe("reading", () => {
  it("marks read once per new seq, never backwards", async () => {
    const { conversation, marked, room } = setup(3);
    room.read_to = 2;
    await conversation.loadLatest();
    conversation.markSeen(6);
    conversation.markSeen(6);
    conversation.markSeen(4);
    expect(marked).toEqual([6]);
  });

  it("does not mark what is already read", async () => {
    const { conversation, marked, room } = setup(3);
    room.read_to = 6;
    conversation.markSeen(6);
    expect(marked).toEqual([]);
    await settle();
  });
});
