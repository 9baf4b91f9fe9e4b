import { describe, expect, it } from "vitest";
import { Coalesced } from "./coalesced";

describe("coalesced loads", () => {
  it("runs one load at a time and one more for every burst of requests during it", async () => {
    let running = 0;
    let most = 0;
    let loads = 0;
    let release: () => void = () => {};
    const coalesced = new Coalesced(async () => {
      running += 1;
      most = Math.max(most, running);
      loads += 1;
      await new Promise<void>((resolve) => (release = resolve));
      running -= 1;
    });
    const first = coalesced.request();
    const burst = [coalesced.request(), coalesced.request(), coalesced.request()];
    release();
    await new Promise((resolve) => setTimeout(resolve, 0));
    release();
    await Promise.all([first, ...burst]);
    expect(loads).toBe(2);
    expect(most).toBe(1);
    // Idle again: the next request loads at once.
    const next = coalesced.request();
    release();
    await next;
    expect(loads).toBe(3);
  });
});
