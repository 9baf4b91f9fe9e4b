/**
 * Lets queued work finish: the fake backend announces changes in a microtask, and models
 * refetch in promise chains behind them. A few macrotask turns cover both.
 */
export async function settle(turns = 5): Promise<void> {
  for (let turn = 0; turn < turns; turn += 1) await new Promise((resolve) => setTimeout(resolve, 0));
}
