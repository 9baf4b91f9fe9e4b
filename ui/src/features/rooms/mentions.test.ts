import { describe, expect, it } from "vitest";
import type { MemberView } from "../../bindings";
import { insertMention, matchMembers, mentionQueryAt } from "./mentions";
import { ComposerModel } from "./composer.model.svelte";

const members: MemberView[] = [
  { id: "u-dana", handle: "dana", kind: "user" },
  { id: "a-writer", handle: "dana/writer", kind: "agent" },
  { id: "a-reviewer", handle: "dana/reviewer", kind: "agent" },
  { id: "u-sam", handle: "sam", kind: "user" },
  { id: "a-security", handle: "sam/security", kind: "agent" },
];

describe("mention query", () => {
  it("finds the @partial before the caret", () => {
    expect(mentionQueryAt("ask @da", 7)).toEqual({ start: 4, query: "da" });
    expect(mentionQueryAt("@", 1)).toEqual({ start: 0, query: "" });
    expect(mentionQueryAt("(@sam/se", 8)).toEqual({ start: 1, query: "sam/se" });
  });

  it("is not a mention without an @ opening a word", () => {
    expect(mentionQueryAt("ask dana", 8)).toBeNull();
    expect(mentionQueryAt("mail dana@host", 14)).toBeNull();
    expect(mentionQueryAt("@dana done", 10)).toBeNull();
  });
});

describe("mention matching", () => {
  it("matches by handle prefix, agents included, and leaves me out", () => {
    expect(matchMembers(members, "da", "u-dana").map((m) => m.handle)).toEqual(["dana/writer", "dana/reviewer"]);
    expect(matchMembers(members, "sam", "u-dana").map((m) => m.handle)).toEqual(["sam", "sam/security"]);
    expect(matchMembers(members, "", "u-dana")).toHaveLength(4);
  });

  it("also matches an agent by the name after the slash, after handle matches", () => {
    expect(matchMembers(members, "rev", null).map((m) => m.handle)).toEqual(["dana/reviewer"]);
    expect(matchMembers(members, "s", null).map((m) => m.handle)).toEqual(["sam", "sam/security"]);
  });

  it("is case-insensitive and finds nothing for a stranger", () => {
    expect(matchMembers(members, "DANA/W", null).map((m) => m.handle)).toEqual(["dana/writer"]);
    expect(matchMembers(members, "zed", null)).toEqual([]);
  });
});

describe("mention insertion", () => {
  it("inserts @handle and a space, caret after it", () => {
    const text = "ask @da";
    expect(insertMention(text, 7, { start: 4, query: "da" }, "dana/reviewer")).toEqual({
      text: "ask @dana/reviewer ",
      caret: 19,
    });
  });

  it("replaces the rest of the word being edited and does not double the space", () => {
    const text = "hi @dawr please";
    expect(insertMention(text, 6, { start: 3, query: "da" }, "dana/writer")).toEqual({
      text: "hi @dana/writer please",
      caret: 16,
    });
  });
});

describe("composer", () => {
  function composer() {
    return new ComposerModel(() => members, () => "u-dana");
  }

  it("opens suggestions on @ and picks with Tab", () => {
    const model = composer();
    model.edit("ping @rev", 9);
    expect(model.open).toBe(true);
    expect(model.suggestions.map((m) => m.handle)).toEqual(["dana/reviewer"]);
    expect(model.handleKey({ key: "Tab" })).toBe("handled");
    expect(model.text).toBe("ping @dana/reviewer ");
    expect(model.caret).toBe(20);
    expect(model.open).toBe(false);
  });

  it("moves with arrows (wrapping) and picks with Enter instead of sending", () => {
    const model = composer();
    model.edit("@da", 3);
    expect(model.handleKey({ key: "ArrowDown" })).toBe("handled");
    expect(model.activeIndex).toBe(1);
    model.handleKey({ key: "ArrowDown" });
    expect(model.activeIndex).toBe(0);
    model.handleKey({ key: "ArrowUp" });
    expect(model.activeIndex).toBe(1);
    expect(model.handleKey({ key: "Enter" })).toBe("handled");
    expect(model.text).toBe("@dana/reviewer ");
  });

  it("closes on Escape and stays closed while typing the same mention", () => {
    const model = composer();
    model.edit("@s", 2);
    expect(model.open).toBe(true);
    model.handleKey({ key: "Escape" });
    expect(model.open).toBe(false);
    model.edit("@sa", 3);
    expect(model.open).toBe(false);
    model.edit("@sa ", 4);
    model.edit("@sa @s", 6);
    expect(model.open).toBe(true);
  });

  it("sends on Enter when no list is open, new line on Shift+Enter", () => {
    const model = composer();
    model.edit("hello", 5);
    expect(model.handleKey({ key: "Enter", shiftKey: true })).toBe("none");
    expect(model.handleKey({ key: "Enter" })).toBe("send");
    expect(model.take()).toBe("hello");
    expect(model.text).toBe("");
    expect(model.canSend).toBe(false);
  });

  it("leaves keys alone while an input method is composing", () => {
    const model = composer();
    model.edit("@da", 3);
    expect(model.handleKey({ key: "Enter", isComposing: true })).toBe("none");
  });
});
