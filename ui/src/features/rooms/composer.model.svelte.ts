/**
 * The message composer: the draft, the caret, and the @mention suggestion list with its
 * keyboard (arrows move, Tab/Enter pick, Escape closes; Enter sends when the list is closed,
 * Shift+Enter is a new line). The view only forwards input, caret moves and keys.
 */
import type { MemberView } from "../../bindings";
import { insertMention, matchMembers, mentionQueryAt } from "./mentions";

export type ComposerKey = { key: string; shiftKey?: boolean; isComposing?: boolean };
/** What a key did: moved within the suggestions, asked to send, or nothing (let it type). */
export type ComposerKeyResult = "handled" | "send" | "none";

export class ComposerModel {
  text = $state("");
  caret = $state(0);
  activeIndex = $state(0);
  /** The `@` position whose suggestions were closed with Escape, so they stay closed. */
  private dismissedAt = $state<number | null>(null);

  private readonly members: () => readonly MemberView[];
  private readonly myId: () => string | null;

  constructor(members: () => readonly MemberView[], myId: () => string | null) {
    this.members = members;
    this.myId = myId;
  }

  readonly mention = $derived(mentionQueryAt(this.text, this.caret));

  readonly suggestions: MemberView[] = $derived.by(() => {
    const mention = this.mention;
    if (mention === null || mention.start === this.dismissedAt) return [];
    return matchMembers(this.members(), mention.query, this.myId());
  });

  readonly open = $derived(this.suggestions.length > 0);
  readonly canSend = $derived(this.text.trim() !== "");

  /** The textarea changed (typing, paste, cut). */
  edit(text: string, caret: number): void {
    this.text = text;
    this.caret = caret;
    this.activeIndex = 0;
    if (this.mention === null) this.dismissedAt = null;
  }

  /** The caret moved without an edit (click, arrow keys outside the list). */
  moveCaret(caret: number): void {
    if (caret === this.caret) return;
    this.caret = caret;
    this.activeIndex = 0;
  }

  move(delta: number): void {
    const count = this.suggestions.length;
    if (count === 0) return;
    this.activeIndex = (this.activeIndex + delta + count) % count;
  }

  /** Inserts `@handle ` for the suggestion at `index` (default: the highlighted one). */
  pick(index: number = this.activeIndex): void {
    const mention = this.mention;
    const chosen = this.suggestions[index];
    if (mention === null || chosen === undefined) return;
    const next = insertMention(this.text, this.caret, mention, chosen.handle);
    this.text = next.text;
    this.caret = next.caret;
    this.activeIndex = 0;
  }

  dismiss(): void {
    if (this.mention) this.dismissedAt = this.mention.start;
  }

  handleKey(event: ComposerKey): ComposerKeyResult {
    if (event.isComposing) return "none";
    if (this.open) {
      switch (event.key) {
        case "ArrowDown":
          this.move(1);
          return "handled";
        case "ArrowUp":
          this.move(-1);
          return "handled";
        case "Enter":
        case "Tab":
          this.pick();
          return "handled";
        case "Escape":
          this.dismiss();
          return "handled";
      }
    }
    if (event.key === "Enter" && !event.shiftKey) return "send";
    return "none";
  }

  /** Hands the draft over for sending and clears it. */
  take(): string {
    const text = this.text.trim();
    this.text = "";
    this.caret = 0;
    this.activeIndex = 0;
    this.dismissedAt = null;
    return text;
  }

  /** Puts a draft back (sending it failed before the core took it). */
  restore(text: string): void {
    if (this.text.trim() !== "") return;
    this.text = text;
    this.caret = text.length;
  }
}
