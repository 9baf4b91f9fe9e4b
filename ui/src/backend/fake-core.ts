/**
 * What every side of the in-memory backend shares: the world, its clock, its ids, the way
 * it announces a write, and the two refusals any command may meet (no one is signed in, no
 * such room). `FakeBackend` (fake.ts) makes one and hands it to each side it delegates to
 * (the people in fake-people.ts, the agents in fake-agents.ts), so a side behaves as the
 * whole fake does: same ids from the same counter, `CoreChanged` after the command returns,
 * the same errors. A side records no calls and plays no `failNext`: `FakeBackend` does that
 * before it hands the command on.
 */
import type { CoreChanged, Me } from "../bindings";
import type { FakeRoom, FakeWorld } from "./fake-world";

export type FakeCore = {
  readonly world: FakeWorld;
  now(): number;
  /** The next number of the fake's one counter: ids, invite codes, agent controls' `seq`. */
  freshId(): number;
  /** Announces a write the way the core does: after the command has returned. */
  changed(change: Partial<CoreChanged>): void;
  /** Who is signed in, or the `profile` error when no one is. */
  requireMe(): Me;
  /** The room `id`, or the `not_found` error the hub gives for a room one cannot see. */
  room(id: string): FakeRoom;
};

/** What a command hands out: a copy, so that a model that mutates it cannot change the world. */
export function copy<T>(value: T): T {
  return structuredClone(value);
}
