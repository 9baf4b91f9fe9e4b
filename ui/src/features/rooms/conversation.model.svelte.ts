/**
 * One room's conversation: the messages the core holds (paged backwards from the newest),
 * the ones I just sent that the core has not confirmed yet, and the composer.
 *
 * Message seqs are not dense — a room's log also carries pings, tasks and usage — so paging
 * and merging compare seqs, never count them. `messages` is `$state.raw`: a room can hold
 * tens of thousands, and each change replaces the array rather than proxying every item.
 */
import type { Me, MemberView, MessageView, RoomMessage } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import { ComposerModel } from "./composer.model.svelte";

export const PAGE_SIZE = 50;

export const CONVERSATION_EMPTY = "No messages yet. Say hello, or @mention an agent to give it work.";

/** A row of the conversation list. */
export type ConversationEntry = {
  /** Stable across refetches: the seq once stored, the outbox slot while queued. */
  key: string;
  message: RoomMessage;
  mine: boolean;
  /** Set only for a message the core has not accepted yet: in flight, or refused. */
  local: { state: "sending" | "failed"; error: string | null } | null;
};

type LocalSend = { key: string; text: string; ts_ms: number; state: "sending" | "failed"; error: string | null };

export function messageKey(message: Pick<MessageView, "seq" | "outbox" | "ts_ms" | "from">): string {
  if (message.seq !== null) return `seq:${message.seq}`;
  if (message.outbox !== null) return `outbox:${message.outbox}`;
  return `pending:${message.ts_ms}:${message.from}`;
}

/**
 * Puts a fresh newest page on top of what is loaded. Older loaded messages below the page
 * are kept; if the page does not reach them (more new messages arrived than a page holds),
 * the loaded ones are dropped and paging starts again from the page, rather than showing a
 * conversation with a hole in it.
 */
export function mergeLatest(
  current: readonly RoomMessage[],
  latest: readonly RoomMessage[],
  pageSize: number,
): { messages: RoomMessage[]; gap: boolean } {
  const latestStored = latest.filter((message) => message.seq !== null);
  const currentStored = current.filter((message) => message.seq !== null);
  if (latestStored.length === 0) return { messages: [...latest], gap: false };
  const oldestInPage = latestStored[0]!.seq!;
  const newestLoaded = currentStored.at(-1)?.seq ?? null;
  const gap = latestStored.length >= pageSize && newestLoaded !== null && newestLoaded < oldestInPage;
  if (gap) return { messages: [...latest], gap: true };
  const kept = currentStored.filter((message) => message.seq! < oldestInPage);
  return { messages: [...kept, ...latest], gap: false };
}

/** Adds an older page in front, skipping anything already loaded. */
export function prependOlder(current: readonly RoomMessage[], older: readonly RoomMessage[]): RoomMessage[] {
  const oldestLoaded = current.find((message) => message.seq !== null)?.seq ?? Number.POSITIVE_INFINITY;
  const fresh = older.filter((message) => message.seq !== null && message.seq < oldestLoaded);
  return [...fresh, ...current];
}

export type ConversationDeps = {
  backend: Backend;
  errors: ErrorReporter;
  roomId: string;
  me: () => Me | null;
  members: () => readonly MemberView[];
  /** My read marker for the room, and how to move it (the rooms list owns both). */
  readTo: () => number;
  markRead: (seq: number) => void;
  now?: () => number;
  pageSize?: number;
};

export class ConversationModel {
  readonly roomId: string;
  readonly composer: ComposerModel;

  messages: RoomMessage[] = $state.raw([]);
  loaded = $state(false);
  loadingOlder = $state(false);
  hasOlder = $state(false);
  /**
   * True from the moment older messages go in front until the list has rendered them, so
   * the virtualized list keeps the reader's place instead of jumping (virtua's `shift`).
   */
  prepending = $state(false);

  private localSends: LocalSend[] = $state.raw([]);
  private readonly deps: ConversationDeps;
  private readonly pageSize: number;
  private readonly now: () => number;
  private refreshing: Promise<void> | null = null;
  private refreshAgain = false;
  private nextLocal = 1;
  private highestMarked = 0;

  constructor(deps: ConversationDeps) {
    this.deps = deps;
    this.roomId = deps.roomId;
    this.pageSize = deps.pageSize ?? PAGE_SIZE;
    this.now = deps.now ?? (() => Date.now());
    this.composer = new ComposerModel(deps.members, () => deps.me()?.id ?? null);
  }

  readonly entries: ConversationEntry[] = $derived.by(() => {
    const myId = this.deps.me()?.id ?? null;
    const entries: ConversationEntry[] = this.messages.map((message) => ({
      key: messageKey(message),
      message,
      mine: message.from === myId,
      local: null,
    }));
    for (const send of this.localSends) entries.push(this.localEntry(send));
    return entries;
  });

  /** The newest message the core has stored; reading up to it clears the room's unread. */
  readonly newestStoredSeq: number | null = $derived.by(() => {
    for (let index = this.messages.length - 1; index >= 0; index -= 1) {
      const seq = this.messages[index]!.seq;
      if (seq !== null) return seq;
    }
    return null;
  });

  async loadLatest(): Promise<void> {
    try {
      const page = await this.deps.backend.roomMessages(this.roomId, null, this.pageSize);
      this.messages = page;
      this.hasOlder = page.filter((message) => message.seq !== null).length >= this.pageSize;
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    }
  }

  /** Fetches the page before the oldest loaded message; the view calls it near the top. */
  async loadOlder(): Promise<void> {
    if (this.loadingOlder || !this.hasOlder) return;
    const oldest = this.messages.find((message) => message.seq !== null)?.seq ?? null;
    if (oldest === null) {
      this.hasOlder = false;
      return;
    }
    this.loadingOlder = true;
    try {
      const page = await this.deps.backend.roomMessages(this.roomId, oldest, this.pageSize);
      this.hasOlder = page.length >= this.pageSize;
      if (page.length > 0) {
        this.prepending = true;
        this.messages = prependOlder(this.messages, page);
      }
    } catch (error) {
      this.deps.errors.report(error);
    } finally {
      this.loadingOlder = false;
    }
  }

  /** The list has laid out the prepended page; later changes append again. */
  prependRendered(): void {
    this.prepending = false;
  }

  /** The core says this room's messages changed: fetch the newest page and merge it. */
  refresh(): Promise<void> {
    if (this.refreshing) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      do {
        this.refreshAgain = false;
        try {
          const latest = await this.deps.backend.roomMessages(this.roomId, null, this.pageSize);
          const merged = mergeLatest(this.messages, latest, this.pageSize);
          if (merged.gap) this.hasOlder = true;
          this.messages = merged.messages;
          this.loaded = true;
        } catch (error) {
          this.deps.errors.report(error);
        }
      } while (this.refreshAgain);
      this.refreshing = null;
    })();
    return this.refreshing;
  }

  /**
   * Sends the composer's draft. It shows at once as "sending"; once the core has it (stored,
   * or queued in its outbox while offline) the core's own copy replaces it. If the core
   * refuses it, it stays as "failed" with the reason, to retry or to edit.
   */
  async send(): Promise<void> {
    if (!this.composer.canSend) return;
    const text = this.composer.take();
    const send: LocalSend = { key: `local:${this.nextLocal++}`, text, ts_ms: this.now(), state: "sending", error: null };
    this.localSends = [...this.localSends, send];
    await this.deliver(send);
  }

  async retry(key: string): Promise<void> {
    const send = this.localSends.find((candidate) => candidate.key === key);
    if (!send || send.state !== "failed") return;
    this.replaceLocal({ ...send, state: "sending", error: null });
    await this.deliver({ ...send, state: "sending", error: null });
  }

  /** Drops a refused message, putting its text back in the composer if that is empty. */
  edit(key: string): void {
    const send = this.localSends.find((candidate) => candidate.key === key);
    if (!send) return;
    this.discard(key);
    this.composer.restore(send.text);
  }

  discard(key: string): void {
    this.localSends = this.localSends.filter((candidate) => candidate.key !== key);
  }

  /** The newest message is on screen: move my read marker there, once per seq. */
  markSeen(seq: number): void {
    if (seq <= this.highestMarked || seq <= this.deps.readTo()) return;
    this.highestMarked = seq;
    this.deps.markRead(seq);
  }

  private async deliver(send: LocalSend): Promise<void> {
    try {
      await this.deps.backend.sendMessage(this.roomId, send.text);
    } catch (error) {
      this.deps.errors.report(error);
      const message = error instanceof Error ? error.message : String(error);
      this.replaceLocal({ ...send, state: "failed", error: message });
      return;
    }
    await this.refresh();
    this.discard(send.key);
  }

  private replaceLocal(send: LocalSend): void {
    this.localSends = this.localSends.map((candidate) => (candidate.key === send.key ? send : candidate));
  }

  private localEntry(send: LocalSend): ConversationEntry {
    const me = this.deps.me();
    return {
      key: send.key,
      mine: true,
      local: { state: send.state, error: send.error },
      message: {
        room: this.roomId,
        seq: null,
        id: null,
        ts_ms: send.ts_ms,
        from: me?.id ?? "",
        from_handle: me?.handle ?? null,
        from_kind: "user",
        text: send.text,
        mentions: [],
        reply_to: null,
        delivery: send.state === "failed" ? "failed" : "queued",
        error: send.error,
        outbox: null,
        mention_states: [],
      },
    };
  }
}
