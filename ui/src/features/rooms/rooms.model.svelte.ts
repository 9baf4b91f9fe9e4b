/**
 * The rooms I am in: the list with unread and mention counts, which one is open, creating
 * a room and inviting into it. Each opened room keeps its `ConversationModel` (and so its
 * draft and loaded pages) while the app runs.
 */
import type { CoreChanged, Me, MemberView, RoomView } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import { DirectorySearch } from "../contacts/directory-search.svelte";
import { ConversationModel } from "./conversation.model.svelte";

export const ROOMS_EMPTY = "No rooms yet. Create one with “New room”, or ask an agent to create one and invite you.";

/** A room's name for people: its title, else who is in it. */
export function roomTitle(room: Pick<RoomView, "id" | "title" | "members">, myId: string | null = null): string {
  if (room.title) return room.title;
  const others = room.members.filter((member) => member.id !== myId).map((member) => member.handle);
  return others.length > 0 ? others.join(", ") : room.id;
}

export function isAgent(member: Pick<MemberView, "kind">): boolean {
  return member.kind === "agent";
}

export type RoomsDeps = {
  backend: Backend;
  errors: ErrorReporter;
  me: () => Me | null;
  now?: () => number;
  pageSize?: number;
};

export class RoomsModel {
  rooms: RoomView[] = $state.raw([]);
  loaded = $state(false);
  selectedId = $state<string | null>(null);
  conversation = $state<ConversationModel | null>(null);

  /** The "New room" form. */
  creating = $state(false);
  newTitle = $state("");
  newMembers = $state("");
  /** The "Invite" form of the open room. */
  inviting = $state(false);
  readonly inviteSearch: DirectorySearch;

  private readonly deps: RoomsDeps;
  private readonly conversations = new Map<string, ConversationModel>();
  /** Rooms whose messages changed while another room was open: refetched when opened. */
  private readonly stale = new Set<string>();

  constructor(deps: RoomsDeps) {
    this.deps = deps;
    this.inviteSearch = new DirectorySearch(
      deps.backend,
      deps.errors,
      (entry) => !this.selected?.members.some((member) => member.id === entry.id),
    );
  }

  readonly selected: RoomView | null = $derived(this.rooms.find((room) => room.id === this.selectedId) ?? null);
  readonly totalUnread = $derived(this.rooms.reduce((sum, room) => sum + room.unread, 0));
  readonly totalMentions = $derived(this.rooms.reduce((sum, room) => sum + room.unread_mentions, 0));

  title(room: RoomView): string {
    return roomTitle(room, this.deps.me()?.id ?? null);
  }

  titleOf(roomId: string | null): string {
    if (roomId === null) return "no room";
    const room = this.rooms.find((candidate) => candidate.id === roomId);
    return room ? this.title(room) : roomId;
  }

  async load(): Promise<void> {
    try {
      this.rooms = await this.deps.backend.rooms();
      this.loaded = true;
      if (this.selectedId !== null && !this.rooms.some((room) => room.id === this.selectedId)) {
        this.selectedId = null;
        this.conversation = null;
      }
    } catch (error) {
      this.deps.errors.report(error);
    }
  }

  async select(roomId: string): Promise<void> {
    if (this.selectedId !== roomId) {
      this.inviting = false;
      this.inviteSearch.clear();
    }
    this.selectedId = roomId;
    let conversation = this.conversations.get(roomId);
    if (!conversation) {
      conversation = new ConversationModel({
        backend: this.deps.backend,
        errors: this.deps.errors,
        roomId,
        me: this.deps.me,
        members: () => this.rooms.find((room) => room.id === roomId)?.members ?? [],
        readTo: () => this.rooms.find((room) => room.id === roomId)?.read_to ?? 0,
        markRead: (seq) => void this.markRead(roomId, seq),
        now: this.deps.now,
        pageSize: this.deps.pageSize,
      });
      this.conversations.set(roomId, conversation);
    }
    this.conversation = conversation;
    if (!conversation.loaded) await conversation.loadLatest();
    else if (this.stale.delete(roomId)) await conversation.refresh();
  }

  /** Moves my read marker: the unread counts drop at once, the core confirms later. */
  async markRead(roomId: string, seq: number): Promise<void> {
    this.rooms = this.rooms.map((room) =>
      room.id === roomId && seq > room.read_to
        ? { ...room, read_to: seq, ...(seq >= room.head ? { unread: 0, unread_mentions: 0 } : {}) }
        : room,
    );
    try {
      await this.deps.backend.markRead(roomId, seq);
    } catch (error) {
      this.deps.errors.report(error);
    }
  }

  /** Creates a room from the form; members are handles separated by spaces or commas. */
  async create(): Promise<boolean> {
    const title = this.newTitle.trim();
    const members = splitHandles(this.newMembers);
    try {
      const roomId = await this.deps.backend.createRoom(title, members);
      this.creating = false;
      this.newTitle = "";
      this.newMembers = "";
      await this.load();
      await this.select(roomId);
      return true;
    } catch (error) {
      this.deps.errors.report(error);
      return false;
    }
  }

  async invite(): Promise<boolean> {
    const room = this.selectedId;
    const handle = this.inviteSearch.query.trim().replace(/^@/, "");
    if (room === null || handle === "") return false;
    try {
      await this.deps.backend.inviteToRoom(room, handle);
      this.inviteSearch.clear();
      this.inviting = false;
      await this.load();
      return true;
    } catch (error) {
      this.deps.errors.report(error);
      return false;
    }
  }

  async applyChange(change: CoreChanged): Promise<void> {
    const work: Promise<void>[] = [];
    if (change.rooms) work.push(this.load());
    for (const roomId of change.messages) {
      if (roomId === this.selectedId && this.conversation) work.push(this.conversation.refresh());
      else if (this.conversations.has(roomId)) this.stale.add(roomId);
    }
    // New messages change unread counts even when the core did not flag `rooms`.
    if (!change.rooms && change.messages.length > 0) work.push(this.load());
    await Promise.all(work);
  }
}

export function splitHandles(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((handle) => handle.replace(/^@/, ""))
    .filter((handle) => handle !== "");
}
