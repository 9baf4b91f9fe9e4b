// @vitest-environment happy-dom
/**
 * The renderer's output goes into the page as HTML, so these tests read it as a browser
 * would (parsed into a DOM) and hold it to an allowlist: hostile Markdown in every syntax
 * must come out as text, never as an element, attribute or link target of its own.
 */
import { describe, expect, it, vi } from "vitest";
import { longMessage, longProse } from "../../testing/long-message";
import { highlight } from "./highlight";
import { COLLAPSE, HIGHLIGHT_LIMITS, IMAGE_MARK, collapse, isLong, openableTarget, renderMarkdown } from "./render";

const ELEMENTS = new Set([
  "DIV", "SPAN", "P", "BR", "STRONG", "EM", "DEL", "CODE", "PRE", "UL", "OL", "LI", "INPUT",
  "TABLE", "THEAD", "TBODY", "TR", "TH", "TD", "BLOCKQUOTE", "H1", "H2", "H3", "H4", "H5", "H6",
  "HR", "A", "BUTTON",
]);
const ATTRIBUTES = new Set(["class", "href", "data-link", "data-copy", "data-testid", "title", "rel", "type", "disabled", "checked", "start"]);

function parse(html: string): HTMLElement {
  const root = document.createElement("div");
  root.innerHTML = html;
  return root;
}

/** Every element and attribute of `html` is one the renderer may produce, with a safe value. */
function expectOnlyAllowed(html: string): HTMLElement {
  const root = parse(html);
  const problems: string[] = [];
  for (const element of root.querySelectorAll("*")) {
    const tag = element.tagName.toLowerCase();
    if (!ELEMENTS.has(element.tagName)) problems.push(`<${tag}>`);
    for (const attribute of element.attributes) {
      if (attribute.name.startsWith("on") || !ATTRIBUTES.has(attribute.name)) problems.push(`<${tag} ${attribute.name}>`);
      if ((attribute.name === "href" || attribute.name === "data-link") && openableTarget(attribute.value) !== attribute.value) {
        problems.push(`<${tag} ${attribute.name}="${attribute.value}">`);
      }
    }
    if (tag === "input" && (element.getAttribute("type") !== "checkbox" || !element.hasAttribute("disabled"))) {
      problems.push("<input> that is not a disabled checkbox");
    }
    if (tag === "a" && (element.getAttribute("data-link") !== element.getAttribute("href") || element.getAttribute("rel") !== "noreferrer noopener")) {
      problems.push(`<a> whose data-link is not its href, or without rel: ${element.outerHTML}`);
    }
  }
  expect(problems, html).toEqual([]);
  return root;
}

const render = (text: string) => renderMarkdown(text).html;

describe("hostile Markdown renders as text", () => {
  const hostile: [string, string][] = [
    ["a script block", "<script>alert(1)</script>"],
    ["an inline script", "hello <script>alert(1)</script> world"],
    ["an image with onerror", '<img src=x onerror="alert(1)">'],
    ["an inline image with onerror", "look: <img src=x onerror=alert(1)> here"],
    ["an iframe", '<iframe src="https://evil.example"></iframe>'],
    ["an svg", "<svg onload=alert(1)><circle r=1 /></svg>"],
    ["a style block", "<style>body{display:none}</style>"],
    ["a form", '<form action="https://evil.example"><input name=x><button>Go</button></form>'],
    ["a details block", "<details open ontoggle=alert(1)>\n<summary>x</summary>\n\nbody\n</details>"],
    ["a javascript: inline link", "[click](javascript:alert(1))"],
    ["a JavaScript: link in capitals", "[click](JaVaScRiPt:alert(1))"],
    ["a javascript: link with a tab", "[click](java\tscript:alert(1))"],
    ["a javascript: link with spaces around", "[click]( javascript:alert(1) )"],
    ["a javascript: link in angle brackets", "[click](<javascript:alert(1)>)"],
    ["a javascript: link with a newline", "[click](<java\nscript:alert(1)>)"],
    ["a hex-encoded javascript: link", "[click](jav&#x61;script:alert(1))"],
    ["a decimal-encoded javascript: link", "[click](&#106;avascript:alert(1))"],
    ["a javascript: link with an encoded colon", "[click](javascript&colon;alert(1))"],
    ["a javascript: link with a tab entity", "[click](java&Tab;script:alert(1))"],
    ["a percent-encoded javascript: link", "[click](javascript%3Aalert(1))"],
    ["a reference-style javascript: link", "[click][evil]\n\n[evil]: javascript:alert(1)"],
    ["a collapsed reference javascript: link", "[evil][]\n\n[evil]: javascript:alert(1) \"title\""],
    ["a javascript: autolink", "<javascript:alert(1)>"],
    ["a vbscript: link", "[x](vbscript:msgbox(1))"],
    ["a data: link", "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)"],
    ["a data: autolink", "<data:text/html,<script>alert(1)</script>>"],
    ["a file: link", "[x](file:///etc/passwd)"],
    ["a relative link", "[x](../secrets)"],
    ["a protocol-relative link", "[x](//evil.example/a)"],
    ["a link breaking out of the quotes", '[x](https://a.example/"onmouseover="alert(1))'],
    ["a link title breaking out", '[x](https://a.example/ "a\\" onmouseover=\\"alert(1)")'],
    ["a link text with HTML", "[<img src=x onerror=alert(1)>](https://a.example/)"],
    ["an image with a javascript: url", "![pic](javascript:alert(1))"],
    ["an image with a remote url", "![tracker](https://evil.example/pixel.png)"],
    ["an image with a data: url", "![pic](data:image/png;base64,iVBORw0KGgo=)"],
    ["an image in a link", "[![pic](https://evil.example/p.png)](https://a.example/)"],
    ["an image with HTML alt", '![<script>alert(1)</script>"onerror=x](https://a.example/p.png)'],
    ["HTML in a table cell", "| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | <script>x</script> |"],
    ["HTML in a code span", "`<script>alert(1)</script>`"],
    ["HTML in a code block", "```html\n<script>alert(1)</script>\n<img src=x onerror=alert(1)>\n```"],
    ["HTML in an indented code block", "    <script>alert(1)</script>"],
    ["a language breaking out of the class", '```"><img src=x onerror=alert(1)>\ncode\n```'],
    ["entities spelling a tag", "&lt;script&gt;alert(1)&lt;/script&gt; &#60;img src=x onerror=alert(1)&#62;"],
    ["a comment and CDATA", "<!-- <script>alert(1)</script> --> <![CDATA[<script>]]>"],
    ["a bare javascript: URL", "go to javascript:alert(1) now"],
    ["a link in a heading", "# [x](javascript:alert(1))"],
    ["a nested list with HTML", "- a\n  - <b onclick=alert(1)>b</b>\n    1. <a href=javascript:alert(1)>c</a>"],
    ["a blockquote with HTML", "> <div onclick=alert(1)>quoted</div>"],
    ["a task list with HTML", "- [x] <img src=x onerror=alert(1)>\n- [ ] ok"],
  ];

  it.each(hostile)("%s", (_name, source) => {
    const rendered = renderMarkdown(source);
    expectOnlyAllowed(rendered.html);
    // Coloured by highlight.js, the same holds.
    expectOnlyAllowed(renderMarkdown(source, { highlight }).html);
  });

  it("shows raw HTML as the text the author wrote", () => {
    const root = expectOnlyAllowed(render("<script>alert(1)</script>"));
    expect(root.textContent).toBe("<script>alert(1)</script>");
    const inline = expectOnlyAllowed(render("hello <b onclick=x>there</b>"));
    expect(inline.textContent).toBe("hello <b onclick=x>there</b>");
    expect(inline.querySelector("b")).toBeNull();
  });

  it("never makes a link of a target it will not open, but shows where it pointed", () => {
    for (const source of ["[click](javascript:alert(1))", "[click](jav&#x61;script:alert(1))", "[click][evil]\n\n[evil]: javascript:alert(1)"]) {
      const root = expectOnlyAllowed(render(source));
      expect(root.querySelector("a"), source).toBeNull();
      expect(root.textContent, source).toContain("click");
    }
    expect(parse(render("[click](javascript:alert(1))")).textContent).toBe("click (javascript:alert(1))");
    expect(parse(render("<javascript:alert(1)>")).textContent).toBe("javascript:alert(1)");
    expect(parse(render("[notes](docs/notes.md)")).textContent).toBe("notes (docs/notes.md)");
  });

  it("keeps a link target that breaks out of the quotes inside the attribute", () => {
    const root = expectOnlyAllowed(render('[x](https://a.example/"onmouseover="alert(1))'));
    const link = root.querySelector("a")!;
    expect(link.getAttributeNames().sort()).toEqual(["data-link", "href", "rel", "title"]);
    expect(link.getAttribute("href")).toBe("https://a.example/%22onmouseover=%22alert(1)");
  });

  it("never loads an image: it is a marked link, or text", () => {
    const root = expectOnlyAllowed(render("![build graph](https://ci.example/graph.png)"));
    expect(root.querySelector("img")).toBeNull();
    const link = root.querySelector("a")!;
    expect(link.textContent).toBe(`${IMAGE_MARK}build graph`);
    expect(link.getAttribute("data-link")).toBe("https://ci.example/graph.png");
    expect(parse(render("![](https://ci.example/graph.png)")).textContent).toBe(`${IMAGE_MARK}https://ci.example/graph.png`);
    const refused = expectOnlyAllowed(render("![pic](javascript:alert(1))"));
    expect(refused.querySelector("a")).toBeNull();
    expect(refused.textContent).toBe(`${IMAGE_MARK}pic (javascript:alert(1))`);
  });

  it("shortens a long refused target", () => {
    const data = `data:image/png;base64,${"A".repeat(5_000)}`;
    const text = parse(render(`![pic](${data})`)).textContent!;
    expect(text.length).toBeLessThan(120);
    expect(text.endsWith("…)")).toBe(true);
  });

  it("shows character references as the characters they stand for, never as markup", () => {
    const root = expectOnlyAllowed(render("AT&amp;T &copy; &lt;b&gt; &#60;i&#62; a & b"));
    expect(root.textContent).toBe("AT&T © <b> <i> a & b");
    expect(root.querySelector("b, i")).toBeNull();
  });
});

describe("openable targets", () => {
  it("are absolute http, https and mailto URLs, written out in full", () => {
    expect(openableTarget("https://docs.example/guide?a=1#x")).toBe("https://docs.example/guide?a=1#x");
    expect(openableTarget("HTTP://Docs.Example")).toBe("http://docs.example/");
    expect(openableTarget("mailto:dana@example.com")).toBe("mailto:dana@example.com");
    expect(openableTarget("https://аpple.example/")).toBe("https://xn--pple-43d.example/");
  });

  it("keep only a mail link's address, subject and body", () => {
    expect(openableTarget("mailto:dana@example.com?attach=/home/dana/.ssh/id_ed25519")).toBe("mailto:dana@example.com");
    expect(openableTarget("mailto:dana@example.com?subject=Hi%20there&cc=eve@evil.example&body=See%20you&Attachment=~/.aws/credentials#x")).toBe(
      "mailto:dana@example.com?subject=Hi%20there&body=See%20you",
    );
    expect(openableTarget("mailto:dana@example.com?BODY=x&ATTACH=y&Subject=z")).toBe("mailto:dana@example.com?BODY=x&Subject=z");
    const rendered = render("[write](mailto:dana@example.com?subject=s&attach=/etc/passwd)");
    expect(rendered).toContain('href="mailto:dana@example.com?subject=s"');
    expect(rendered).not.toContain("attach");
  });

  it("are nothing else", () => {
    for (const href of ["javascript:alert(1)", " JAVASCRIPT:x", "java\tscript:x", "data:text/html,x", "vbscript:x", "file:///etc", "ftp://a.example", "//evil.example", "/abs", "rel/path", "#frag", "", "roundtable://invite/X"]) {
      expect(openableTarget(href), href).toBeNull();
    }
  });
});

describe("Markdown", () => {
  it("renders a one-line message as one paragraph of just its text", () => {
    const root = parse(render("Parser is done. @dana/reviewer please review src/parser.rs"));
    expect(root.innerHTML).toBe("<p>Parser is done. @dana/reviewer please review src/parser.rs</p>");
    expect(root.textContent).toBe("Parser is done. @dana/reviewer please review src/parser.rs");
  });

  it("breaks lines where the author did", () => {
    const root = parse(render("Step 5: tokenizer handles keys.\nNext I will wire it in."));
    expect(root.querySelectorAll("p")).toHaveLength(1);
    expect(root.querySelectorAll("br")).toHaveLength(1);
    expect(parse(render("one\n\ntwo")).querySelectorAll("p")).toHaveLength(2);
  });

  it("renders emphasis, strikethrough, inline code, headings, quotes and rules", () => {
    const root = expectOnlyAllowed(render("# Title\n###### Small\n**bold** *em* ~~gone~~ `code <x>`\n\n> quoted\n\n---"));
    expect(root.querySelector("h1")!.textContent).toBe("Title");
    expect(root.querySelector("h6")!.textContent).toBe("Small");
    expect(root.querySelector("strong")!.textContent).toBe("bold");
    expect(root.querySelector("em")!.textContent).toBe("em");
    expect(root.querySelector("del")!.textContent).toBe("gone");
    expect(root.querySelector("p > code")!.textContent).toBe("code <x>");
    expect(root.querySelector("blockquote")!.textContent).toBe("quoted");
    expect(root.querySelector("hr")).not.toBeNull();
  });

  it("renders a code block with its language, a copy button and the raw code kept aside", () => {
    const code = 'fn main() {\n    println!("<hi> & bye");\n}';
    const rendered = renderMarkdown(`Before\n\n\`\`\`rust\n${code}\n\`\`\`\n\n\`\`\`\nplain\n\`\`\``);
    const root = expectOnlyAllowed(rendered.html);
    expect(rendered.codeBlocks).toEqual([code, "plain"]);
    expect(rendered.wantsHighlight).toBe(true);
    const [first, second] = root.querySelectorAll(".code-block");
    expect(first!.querySelector(".code-lang")!.textContent).toBe("rust");
    expect(first!.querySelector("button.copy")!.getAttribute("data-copy")).toBe("0");
    expect(first!.querySelector("button.copy")!.getAttribute("data-testid")).toBe("code-copy");
    expect(first!.querySelector("pre > code")!.className).toBe("hljs language-rust");
    expect(first!.querySelector("pre > code")!.textContent).toBe(code);
    expect(second!.querySelector("button.copy")!.getAttribute("data-copy")).toBe("1");
    expect(second!.querySelector("pre > code")!.textContent).toBe("plain");
  });

  it("colours a code block with the highlighter it is given, the code unchanged", () => {
    const code = 'fn main() {\n    let x = "<hi>"; // done\n}';
    const rendered = renderMarkdown(`\`\`\`rs\n${code}\n\`\`\``, { highlight });
    expect(rendered.wantsHighlight).toBe(false);
    const root = expectOnlyAllowed(rendered.html);
    const block = root.querySelector("pre > code")!;
    expect(block.querySelector(".hljs-keyword")?.textContent).toBe("fn");
    expect(block.querySelector(".hljs-string")?.textContent).toBe('"<hi>"');
    expect(block.textContent).toBe(code);
  });

  it("leaves a language it does not know, and no language, uncoloured", () => {
    for (const source of ["```brainfuck\n+[-]<>\n```", "```\nlet x = 1;\n```"]) {
      const root = expectOnlyAllowed(renderMarkdown(source, { highlight }).html);
      expect(root.querySelector("pre > code span"), source).toBeNull();
    }
    expect(renderMarkdown("```\nlet x = 1;\n```").wantsHighlight).toBe(false);
  });

  it("leaves a huge code block uncoloured", () => {
    const calls: string[] = [];
    const spy = (code: string, language: string) => {
      calls.push(language);
      return highlight(code, language);
    };
    const lines = Array.from({ length: HIGHLIGHT_LIMITS.lines + 1 }, (_, at) => `let x${at} = ${at};`).join("\n");
    const rendered = renderMarkdown(`\`\`\`rust\n${lines}\n\`\`\``, { highlight: spy });
    expect(calls).toEqual([]);
    expect(rendered.wantsHighlight).toBe(false);
    expect(parse(rendered.html).querySelector("pre > code span")).toBeNull();
    renderMarkdown("```rust\nlet x = 1;\n```", { highlight: spy });
    expect(calls).toEqual(["rust"]);
  });

  it("shows a block escaped when the highlighter fails on it", () => {
    const failing = () => {
      throw new Error("grammar blew up");
    };
    const quiet = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const rendered = renderMarkdown("```rust\nlet x = \"<y>\";\n```\n\nafter", { highlight: failing });
    quiet.mockRestore();
    const root = expectOnlyAllowed(rendered.html);
    expect(root.querySelector("pre > code")!.textContent).toBe('let x = "<y>";');
    expect(root.querySelector("p")!.textContent).toBe("after");
  });

  it("renders a table with its alignment", () => {
    const root = expectOnlyAllowed(render("| name | count | note |\n|:---|---:|:---:|\n| a | 1 | *x* |\n| b | 22 | y |"));
    expect([...root.querySelectorAll("th")].map((cell) => cell.textContent)).toEqual(["name", "count", "note"]);
    expect([...root.querySelectorAll("tbody tr")].map((row) => row.textContent)).toEqual(["a1x", "b22y"]);
    expect([...root.querySelectorAll("th")].map((cell) => cell.className)).toEqual(["align-left", "align-right", "align-center"]);
    expect(root.querySelector("td em")!.textContent).toBe("x");
  });

  it("renders nested lists, numbered ones where they start, and task lists", () => {
    const root = expectOnlyAllowed(render("- one\n  - one.a\n    1. deep\n- two\n\n3. three\n4. four\n\n- [x] done\n- [ ] todo"));
    expect(root.querySelector("ul > li > ul > li > ol > li")!.textContent).toBe("deep");
    expect(root.querySelector("ol[start='3']")!.children).toHaveLength(2);
    const boxes = root.querySelectorAll("li.task > input[type='checkbox'][disabled]");
    expect([...boxes].map((box) => box.hasAttribute("checked"))).toEqual([true, false]);
  });

  it("renders links and bare URLs as links the app opens", () => {
    const root = expectOnlyAllowed(
      render("See [the docs](https://docs.example/guide \"Guide\"), https://ci.example/run/42 and <mailto:dana@example.com>, or www.example.com."),
    );
    const links = [...root.querySelectorAll("a")].map((link) => [link.textContent, link.getAttribute("data-link"), link.getAttribute("title")]);
    expect(links).toEqual([
      ["the docs", "https://docs.example/guide", "https://docs.example/guide"],
      ["https://ci.example/run/42", "https://ci.example/run/42", "https://ci.example/run/42"],
      ["mailto:dana@example.com", "mailto:dana@example.com", "mailto:dana@example.com"],
      ["www.example.com", "http://www.example.com/", "http://www.example.com/"],
    ]);
  });

  it("resolves character references in a link target", () => {
    const link = parse(render("[q](https://a.example/?a=1&amp;b=2)")).querySelector("a")!;
    expect(link.getAttribute("data-link")).toBe("https://a.example/?a=1&b=2");
  });
});

describe("collapsing", () => {
  const lines = (count: number, prefix = "line") => Array.from({ length: count }, (_, at) => `${prefix} ${at + 1}`).join("\n");

  it("leaves short messages whole", () => {
    expect(isLong(lines(COLLAPSE.lines))).toBe(false);
    expect(collapse(lines(COLLAPSE.lines))).toBeNull();
    expect(collapse("x".repeat(COLLAPSE.chars))).toBeNull();
  });

  it("cuts a message of many lines to its first lines", () => {
    const text = lines(5_000);
    expect(isLong(lines(COLLAPSE.lines + 1))).toBe(true);
    const collapsed = collapse(text)!;
    expect(collapsed.source).toBe(lines(COLLAPSE.shownLines));
    expect(collapsed.hiddenLines).toBe(5_000 - COLLAPSE.shownLines);
  });

  it("cuts a message of few but long lines to a bounded prefix", () => {
    const text = `${"word ".repeat(1_000)}\nsecond line`;
    expect(isLong(text)).toBe(true);
    const collapsed = collapse(text)!;
    expect(collapsed.source.length).toBeLessThanOrEqual(COLLAPSE.shownChars + 1);
    expect(collapsed.source.endsWith("…")).toBe(true);
    expect(collapsed.hiddenLines).toBe(1);
    const unbroken = collapse("x".repeat(COLLAPSE.chars + 1))!;
    expect(unbroken.source).toBe(`${"x".repeat(COLLAPSE.shownChars)}…`);
  });

  it("closes a code fence the cut falls in", () => {
    const text = `Here is the log:\n\n\`\`\`\`text\n${lines(100, "log")}\n\`\`\`\`\n\nThat is all.`;
    const collapsed = collapse(text)!;
    expect(collapsed.source.endsWith("log 17\n````")).toBe(true);
    const rendered = renderMarkdown(collapsed.source);
    expect(rendered.codeBlocks).toEqual([lines(17, "log")]);
    expect(parse(rendered.html).lastElementChild!.className).toBe("code-block");
  });

  it("closes an indented tilde fence with its own indent, and leaves a closed one alone", () => {
    const nested = `- step one:\n  ~~~bash\n${lines(40, "  echo")}\n  ~~~`;
    expect(collapse(nested)!.source.endsWith("  echo 18\n  ~~~")).toBe(true);
    const closed = `\`\`\`\ncode\n\`\`\`\n${lines(40)}`;
    expect(collapse(closed)!.source).toBe(`\`\`\`\ncode\n\`\`\`\n${lines(17)}`);
    const inline = `\`\`\`not a fence\`\`\`\n${lines(40)}`;
    expect(collapse(inline)!.source).toBe(`\`\`\`not a fence\`\`\`\n${lines(19)}`);
  });
});

describe("a long message", () => {
  it("renders whole without a hitch", () => {
    const text = longMessage(5_000);
    const rendered = renderMarkdown(text, { highlight });
    const root = expectOnlyAllowed(rendered.html);
    expect(rendered.codeBlocks.length).toBeGreaterThan(10);
    expect(root.querySelectorAll("table").length).toBeGreaterThan(0);
  });

  it("of plain prose renders as its paragraphs and lines, nothing more", () => {
    const text = longProse(5_000);
    const paragraphs = text.split("\n\n");
    const root = expectOnlyAllowed(render(text));
    expect(root.children).toHaveLength(paragraphs.length);
    expect([...root.children].every((child) => child.tagName === "P")).toBe(true);
    // A line break in each paragraph where the author broke the line, and no other element.
    const breaks = paragraphs.reduce((sum, paragraph) => sum + paragraph.split("\n").length - 1, 0);
    expect(root.querySelectorAll("p > br")).toHaveLength(breaks);
    expect(root.querySelectorAll("*")).toHaveLength(paragraphs.length + breaks);
    expect(root.textContent).toBe(paragraphs.join("").replaceAll("\n", ""));
  });
});
