/**
 * The agent-log watcher's first pass: a large log directory takes a while, so the boards
 * say how far it is (files and bytes) rather than looking empty. Reading happens in the
 * core, off the window's thread; this only follows its progress.
 */
import type { CoreChanged, WatchState } from "../bindings";
import type { Backend } from "../backend/backend";
import type { ErrorReporter } from "./toasts.svelte";
import { Coalesced } from "./coalesced";

/** "1.2 GB", "340 MB", "12 kB". */
export function formatBytes(bytes: number): string {
  if (bytes >= 1e9) return `${(bytes / 1e9).toFixed(1)} GB`;
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(1)} MB`;
  if (bytes >= 1e3) return `${Math.round(bytes / 1e3)} kB`;
  return `${bytes} B`;
}

/** How far the first pass is, 0 to 1 (by bytes, else by files). */
export function scanFraction(state: WatchState): number {
  if (state.state !== "scanning") return 1;
  if (state.bytes > 0) return Math.min(1, state.bytes_done / state.bytes);
  if (state.files > 0) return Math.min(1, state.files_done / state.files);
  return 0;
}

/** What to say about it; `null` once it is following the logs. */
export function scanText(state: WatchState): string | null {
  switch (state.state) {
    case "scanning":
      if (state.files === 0) return "Looking for your agents' logs…";
      return `Reading your agents' logs: ${state.files_done.toLocaleString()} of ${state.files.toLocaleString()} files (${formatBytes(state.bytes_done)} of ${formatBytes(state.bytes)}). The boards fill in as it goes.`;
    case "failed":
      return `Your agents' logs cannot be followed: ${state.reason}`;
    case "watching":
      return null;
  }
}

export class ScanModel {
  state: WatchState = $state.raw({ state: "watching", files: 0 });

  private readonly deps: { backend: Backend; errors: ErrorReporter };
  private readonly loads: Coalesced;

  constructor(deps: { backend: Backend; errors: ErrorReporter }) {
    this.deps = deps;
    this.loads = new Coalesced(() => this.fetch());
  }

  readonly text = $derived(scanText(this.state));
  readonly fraction = $derived(scanFraction(this.state));

  load(): Promise<void> {
    return this.loads.request();
  }

  async applyChange(change: CoreChanged): Promise<void> {
    if (change.scan || change.everything) await this.load();
  }

  private async fetch(): Promise<void> {
    try {
      this.state = await this.deps.backend.workScan();
    } catch (error) {
      this.deps.errors.report(error);
    }
  }
}
