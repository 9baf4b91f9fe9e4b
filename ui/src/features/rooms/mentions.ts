/**
 * `@mention` autocompletion, as pure functions over (text, caret).
 *
 * The hub resolves mentions itself from the text (protocol `mention_candidates`: after an
 * `@`, the longest run of handle characters `a-z 0-9 _ - /`), so all the composer has to do
 * is help write a member's handle exactly. Matching is by handle prefix; for agents the name
 * after the `/` counts as a prefix too, so `@rev` finds `dana/reviewer`.
 */
import type { MemberView } from "../../bindings";

const HANDLE_CHAR = /[a-z0-9_\-/]/;

/** The `@partial` being typed just before the caret, or null when the caret is not in one. */
export type MentionQuery = {
  /** Index of the `@`. */
  start: number;
  /** What follows the `@` up to the caret (possibly empty). */
  query: string;
};

export function mentionQueryAt(text: string, caret: number): MentionQuery | null {
  let index = caret;
  while (index > 0 && HANDLE_CHAR.test(text[index - 1]!)) index -= 1;
  if (index === 0 || text[index - 1] !== "@") return null;
  const start = index - 1;
  // "mail@host" is an address, not a mention being written: the `@` must open a word.
  const before = start === 0 ? "" : text[start - 1]!;
  if (before !== "" && (HANDLE_CHAR.test(before) || /[A-Za-z@]/.test(before))) return null;
  return { start, query: text.slice(index, caret) };
}

/**
 * Members whose handle starts with `query` (case-insensitive), then agents whose name after
 * the `/` does; within each group the room's member order is kept. `excludeId` (me) is left
 * out: mentioning yourself wakes no one.
 */
export function matchMembers(
  members: readonly MemberView[],
  query: string,
  excludeId: string | null,
  limit = 8,
): MemberView[] {
  const needle = query.toLowerCase();
  const candidates = members.filter((member) => member.id !== excludeId);
  const byHandle = candidates.filter((member) => member.handle.toLowerCase().startsWith(needle));
  const byAgentName = candidates.filter((member) => {
    if (byHandle.includes(member)) return false;
    const slash = member.handle.indexOf("/");
    return slash !== -1 && member.handle.slice(slash + 1).toLowerCase().startsWith(needle);
  });
  return [...byHandle, ...byAgentName].slice(0, limit);
}

/**
 * Replaces the `@partial` at `mention` with `@handle ` and puts the caret after the space.
 * Handle characters right after the caret (the rest of a word being edited) are replaced too.
 */
export function insertMention(
  text: string,
  caret: number,
  mention: MentionQuery,
  handle: string,
): { text: string; caret: number } {
  let end = caret;
  while (end < text.length && HANDLE_CHAR.test(text[end]!)) end += 1;
  const after = text.slice(end);
  const inserted = `@${handle} `;
  const rest = after.startsWith(" ") ? after.slice(1) : after;
  return {
    text: text.slice(0, mention.start) + inserted + rest,
    caret: mention.start + inserted.length,
  };
}
