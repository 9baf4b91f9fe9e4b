/**
 * Handle suggestions from the hub's directory, for every input that takes someone's handle
 * (invite to a room, contact request). Answers can arrive out of order while someone types;
 * only the answer to the latest query is kept.
 */
import type { DirectoryView } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";

export class DirectorySearch {
  query = $state("");
  results: DirectoryView[] = $state.raw([]);
  activeIndex = $state(-1);

  private readonly backend: Backend;
  private readonly errors: ErrorReporter;
  private readonly keep: (entry: DirectoryView) => boolean;
  private latestTicket = 0;

  /** `keep` filters the suggestions, e.g. leaving out who is already in the room. */
  constructor(backend: Backend, errors: ErrorReporter, keep: (entry: DirectoryView) => boolean = () => true) {
    this.backend = backend;
    this.errors = errors;
    this.keep = keep;
  }

  async search(query: string): Promise<void> {
    this.query = query;
    this.activeIndex = -1;
    const ticket = ++this.latestTicket;
    const needle = query.trim();
    if (needle === "") {
      this.results = [];
      return;
    }
    try {
      const found = await this.backend.directory(needle);
      if (ticket === this.latestTicket) this.results = found.filter(this.keep).slice(0, 8);
    } catch (error) {
      if (ticket === this.latestTicket) this.errors.report(error);
    }
  }

  move(delta: number): void {
    const count = this.results.length;
    if (count === 0) return;
    this.activeIndex = this.activeIndex === -1 && delta < 0 ? count - 1 : (this.activeIndex + delta + count) % count;
  }

  /** Takes the highlighted suggestion (or `entry`) into the input and closes the list. */
  choose(entry: DirectoryView | undefined = this.results[this.activeIndex]): boolean {
    if (!entry) return false;
    this.latestTicket += 1;
    this.query = entry.handle;
    this.results = [];
    this.activeIndex = -1;
    return true;
  }

  clear(): void {
    this.latestTicket += 1;
    this.query = "";
    this.results = [];
    this.activeIndex = -1;
  }
}

/** How a directory entry relates to me, in words. */
export function contactLabel(entry: DirectoryView): string {
  switch (entry.contact) {
    case "kin":
      return "yours";
    case "accepted":
      return "contact";
    case "pending_out":
      return "request sent";
    case "pending_in":
      return "asked to connect";
    case "none":
      return "not a contact";
  }
}
