// @vitest-environment happy-dom
/**
 * What the rendered Markdown does when clicked, as a person uses it: a code block's copy
 * button copies the code as written, a link never navigates the window but asks first
 * (showing where it really goes), and a long message opens on "Show more".
 */
import { flushSync, mount, unmount } from "svelte";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { settle } from "../../testing/settle";
import Markdown from "./Markdown.svelte";
import { COLLAPSE } from "./render";

let mounted: ReturnType<typeof mount> | null = null;
const writeText = vi.fn<(text: string) => Promise<void>>();

beforeEach(() => {
  writeText.mockReset();
  writeText.mockResolvedValue(undefined);
  Object.defineProperty(navigator, "clipboard", { value: { writeText }, configurable: true });
});

afterEach(() => {
  if (mounted) unmount(mounted);
  mounted = null;
  document.body.innerHTML = "";
  vi.useRealTimers();
});

function render(text: string, props: { collapsible?: boolean; testid?: string } = {}) {
  const opened: string[] = [];
  const target = document.createElement("div");
  document.body.append(target);
  mounted = mount(Markdown, { target, props: { text, onopenlink: (url: string) => opened.push(url), ...props } });
  flushSync();
  return { target, opened };
}

const testid = (target: HTMLElement, id: string) => target.querySelector<HTMLElement>(`[data-testid="${id}"]`);

/** A click as a person's: cancelable, so a prevented default shows. Returns whether it was prevented. */
function click(element: Element): boolean {
  const allowed = element.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true }));
  flushSync();
  return !allowed;
}

describe("Markdown", () => {
  it("shows a one-line message as exactly its text", () => {
    const { target } = render("Parser is done. @dana/reviewer please review src/parser.rs", { testid: "message-text" });
    expect(testid(target, "message-text")!.textContent).toBe("Parser is done. @dana/reviewer please review src/parser.rs");
    expect(testid(target, "show-more")).toBeNull();
  });

  it("copies a code block's raw code and says so for a moment", async () => {
    vi.useFakeTimers();
    const code = 'fn main() {\n    println!("<hi> & bye");\n}';
    const { target } = render(`Run this:\n\n\`\`\`rust\n${code}\n\`\`\`\n\n\`\`\`\nsecond\n\`\`\``);
    const [first, second] = target.querySelectorAll<HTMLButtonElement>('[data-testid="code-copy"]');
    click(second!);
    click(first!);
    await vi.advanceTimersByTimeAsync(0);
    expect(writeText.mock.calls).toEqual([["second"], [code]]);
    expect(first!.textContent).toBe("Copied");
    await vi.advanceTimersByTimeAsync(1_600);
    expect(first!.textContent).toBe("Copy");
  });

  it("colours code once the highlighter has loaded", async () => {
    const { target } = render("```rust\nfn main() {}\n```");
    for (let turn = 0; turn < 20 && !target.querySelector(".hljs-keyword"); turn += 1) {
      await settle();
      flushSync();
    }
    expect(target.querySelector("pre code .hljs-keyword")?.textContent).toBe("fn");
    expect(target.querySelector("pre code")!.textContent).toBe("fn main() {}");
  });

  it("asks before opening a link, showing its real target, and opens it only through the app", () => {
    const { target, opened } = render("Read [the docs](https://evil.example/phish?from=docs) first.");
    expect(testid(target, "link-dialog")).toBeNull();
    const prevented = click(target.querySelector("a")!);
    expect(prevented).toBe(true);
    const dialog = testid(target, "link-dialog") as HTMLDialogElement;
    expect(dialog).not.toBeNull();
    expect(dialog.open).toBe(true);
    expect(testid(target, "link-target")!.textContent).toBe("https://evil.example/phish?from=docs");
    expect(dialog.textContent).toContain("evil.example");
    expect(opened).toEqual([]);
    click(testid(target, "link-open")!);
    expect(opened).toEqual(["https://evil.example/phish?from=docs"]);
    expect(testid(target, "link-dialog")).toBeNull();
  });

  it("opens nothing when the person cancels, and copies the link on request", async () => {
    const { target, opened } = render("<https://ci.example/run/42>");
    click(target.querySelector("a")!);
    click(testid(target, "link-copy")!);
    await settle(1);
    expect(writeText).toHaveBeenCalledWith("https://ci.example/run/42");
    click(testid(target, "link-cancel")!);
    expect(testid(target, "link-dialog")).toBeNull();
    expect(opened).toEqual([]);
  });

  it("opens a long message on Show more, and closes it on Show less", () => {
    const lines = Array.from({ length: 200 }, (_, at) => `line ${at + 1}`);
    const { target } = render(lines.join("\n"), { testid: "message-text" });
    const text = testid(target, "message-text")!;
    expect(text.textContent).toContain(`line ${COLLAPSE.shownLines}`);
    expect(text.textContent).not.toContain(`line ${COLLAPSE.shownLines + 1}`);
    // The button is not part of the text.
    expect(text.querySelector('[data-testid="show-more"]')).toBeNull();
    const more = testid(target, "show-more")!;
    expect(more.textContent).toContain("Show more");
    expect(more.textContent).toContain(`${200 - COLLAPSE.shownLines} more lines`);
    click(more);
    expect(text.textContent).toContain("line 200");
    expect(testid(target, "show-more")!.textContent).toBe("Show less");
    click(testid(target, "show-more")!);
    expect(text.textContent).not.toContain("line 200");
  });

  it("shows everything when it may not collapse", () => {
    const lines = Array.from({ length: 200 }, (_, at) => `line ${at + 1}`);
    const { target } = render(lines.join("\n"), { collapsible: false });
    expect(testid(target, "markdown")!.textContent).toContain("line 200");
    expect(testid(target, "show-more")).toBeNull();
  });
});
