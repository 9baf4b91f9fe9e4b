import { describe, expect, it } from "vitest";
import { FakeBackend } from "../backend/fake";
import { emptyWorld } from "../backend/fake-world";
import { settle } from "../testing/settle";
import { ScanModel, formatBytes, scanFraction, scanText } from "./scan.model.svelte";
import { Toasts } from "./toasts.svelte";

describe("the first scan of the agents' logs", () => {
  it("says how far it is in files and bytes", () => {
    const state = { state: "scanning", files_done: 1200, files: 3000, bytes_done: 400e6, bytes: 1.6e9 } as const;
    expect(scanFraction(state)).toBeCloseTo(0.25);
    expect(scanText(state)).toContain("of 3,000 files (400.0 MB of 1.6 GB)");
    expect(scanText({ state: "scanning", files_done: 0, files: 0, bytes_done: 0, bytes: 0 })).toBe("Looking for your agents' logs…");
    expect(scanText({ state: "watching", files: 3000 })).toBeNull();
    expect(scanText({ state: "failed", reason: "no inotify watches left" })).toContain("no inotify watches left");
    expect(formatBytes(12_345)).toBe("12 kB");
  });

  it("follows the watcher's progress as the core reports it", async () => {
    const world = emptyWorld();
    world.boards.scan = { state: "scanning", files_done: 1, files: 10, bytes_done: 10, bytes: 100 };
    const backend = new FakeBackend({ world });
    const scan = new ScanModel({ backend, errors: new Toasts() });
    backend.onChanged((change) => void scan.applyChange(change));
    await scan.load();
    expect(scan.fraction).toBeCloseTo(0.1);
    world.boards.scan = { state: "watching", files: 10 };
    backend.emitChanged({ scan: true });
    await settle();
    expect(scan.text).toBeNull();
  });
});
