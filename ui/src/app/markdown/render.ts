/**
 * Agents write Markdown, and what they write is untrusted: a message may carry
 * `<script>`, a `javascript:` link, or an image that phones home when it loads. This turns
 * Markdown into an HTML string that is safe to hand to `{@html}` without a sanitizer,
 * because nothing the author wrote reaches the page except through a renderer of ours:
 * markdown-it only parses (raw HTML off, so `<script>` is text like any other) and its
 * token stream is turned into HTML here, tag by tag from the token's type, never by
 * markdown-it's renderer (which would pass attributes such as `style` through). Every text
 * and attribute is escaped, only http, https and mailto targets become links (which the
 * app opens after the person confirms, never the webview), and images are never loaded,
 * only linked. The CSP (no inline scripts) is the second fence, not the first.
 *
 * Why markdown-it and not marked: the app runs in WebKitGTK, whose JavaScriptCore cannot
 * compile some of marked's regular expressions and interprets them instead, so marked,
 * fast in Node, was slow where it counts: in JavaScriptCore (the GObject binding, medians)
 * a 16 KB message of lists, code and tables took 60 ms, the 5,000-line test message
 * 1.6 s, and 5,000 lines of plain prose 10 s. markdown-it's lexer is written as plain code
 * over character codes; the same texts take 1.1 ms, 9 ms and 12 ms there (Node: 0.8, 7,
 * 6 ms), well under the 50 ms a 5,000-line message may take to render.
 *
 * It is pure (no DOM, no Svelte) so it runs, is tested and is benchmarked in Node. Code
 * colouring is handed in (`highlight`), since the highlighter is a chunk loaded on demand.
 * Long messages collapse to a prefix of their source (`collapse`), so a pasted
 * 5,000-line log costs a room twenty lines until someone asks for the rest.
 */
import MarkdownIt, { type Token } from "markdown-it";

/** Colours `code` written in `language`: HTML already escaped, or null when it cannot. */
export type Highlight = (code: string, language: string) => string | null;

export type RenderOptions = { highlight?: Highlight | null };

export type Rendered = {
  html: string;
  /** The raw code of each code block, by the index its copy button carries (`data-copy`). */
  codeBlocks: string[];
  /** A code block names a language, but no highlighter was given to colour it. */
  wantsHighlight: boolean;
};

/** Code blocks past either limit stay uncoloured: colouring them would stall the window. */
export const HIGHLIGHT_LIMITS = { lines: 2_000, chars: 200_000 } as const;

/**
 * A message is long past `lines` lines or `chars` characters of source; collapsed, it
 * shows its first `shownLines` lines, and at most `shownChars` characters of them.
 */
export const COLLAPSE = { lines: 30, chars: 3_000, shownLines: 20, shownChars: 2_000 } as const;

/** Link targets the app will open; everything else (javascript:, data:, file:, relative) is text. */
const OPENABLE = new Set(["http:", "https:", "mailto:"]);

/** What an image link shows before its text, so nobody mistakes it for a plain link. */
export const IMAGE_MARK = "🖼 ";

/** A refused target shown in parentheses is cut to this many characters (data: URLs are long). */
const SHOWN_TARGET_CHARS = 80;

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeChar = (char: string) => ESCAPES[char]!;
const NEEDS_ESCAPE = /[&<>"']/;

/** Escapes every character with a meaning in HTML text or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return NEEDS_ESCAPE.test(text) ? text.replace(/[&<>"']/g, escapeChar) : text;
}

/**
 * The URL a link may open, written out in full (as `URL` serializes it: the scheme
 * lower-cased, a host in punycode so a look-alike name shows), or null when it may not:
 * not absolute, or not http, https or mailto. The URL parser is the one the app and the
 * browser use, so tabs, newlines, case and leading spaces (`jav\tascript:`, `JAVASCRIPT:`)
 * cannot make it read one scheme here and another there.
 */
export function openableTarget(href: string): string | null {
  let url: URL;
  try {
    url = new URL(href.trim());
  } catch {
    return null;
  }
  if (!OPENABLE.has(url.protocol)) return null;
  return url.protocol === "mailto:" ? mailTarget(url) : url.href;
}

/** The fields of a mail link kept: what the mail is about and what it says. */
const MAIL_FIELDS = new Set(["subject", "body"]);

/**
 * A mail link as opened: its address, `subject` and `body`, nothing else. A mail program
 * takes other fields as more recipients (`cc`, `bcc`, `to`) or as files to attach
 * (`attach`), which a message's author should not choose for the person. The kept fields
 * stay as written (in a mail link `+` is a plus, not a space). The same as the core's
 * `web_links::checked_link`.
 */
function mailTarget(url: URL): string {
  const kept = url.search
    .slice(1)
    .split("&")
    .filter((field) => MAIL_FIELDS.has(field.split("=", 1)[0]!.toLowerCase()));
  return `mailto:${url.pathname}${kept.length > 0 ? `?${kept.join("&")}` : ""}`;
}

/** A refused target, as text after the link's own: short enough not to bury the message. */
function shownTarget(href: string): string {
  const cut = href.length > SHOWN_TARGET_CHARS ? `${href.slice(0, SHOWN_TARGET_CHARS - 1)}…` : href;
  return escapeHtml(cut);
}

function anchor(target: string, inner: string): string {
  const value = escapeHtml(target);
  return `<a href="${value}" data-link="${value}" title="${value}" rel="noreferrer noopener">${inner}</a>`;
}

/** The first word of a fence's info string, when it looks like a language name. */
function languageOf(info: string): string | null {
  const word = info.trim().split(/\s+/, 1)[0]?.toLowerCase() ?? "";
  return /^[a-z0-9][a-z0-9_+#.-]{0,31}$/.test(word) ? word : null;
}

function lineCount(text: string, atMost = Number.POSITIVE_INFINITY): number {
  let lines = 1;
  for (let at = text.indexOf("\n"); at !== -1 && lines <= atMost; at = text.indexOf("\n", at + 1)) lines += 1;
  return lines;
}

function colourable(code: string): boolean {
  return code.length <= HIGHLIGHT_LIMITS.chars && lineCount(code, HIGHLIGHT_LIMITS.lines) <= HIGHLIGHT_LIMITS.lines;
}

/** A highlighter that fails costs only its own block its colours. */
function colour(highlight: Highlight, code: string, language: string): string | null {
  try {
    return highlight(code, language);
  } catch (error) {
    console.error(`could not colour a ${language} code block`, error);
    return null;
  }
}

/** What one call of `renderMarkdown` collects. */
type RenderState = {
  highlight: Highlight | null;
  codeBlocks: string[];
  wantsHighlight: boolean;
};

// CommonMark with GFM tables and strikethrough (`~~`); a single newline is a line break,
// as people and agents write line by line. `html: false` leaves no raw HTML token at all:
// `<script>` is text like any other. No typographer: the text stays as written.
// markdown-it 14.2.0 at least: 14.1.0 is quadratic on a bare URL ending in a run of `*`
// (CVE-2026-2327, in linkify, which is on here), 100 ms for 16 KB in JavaScriptCore.
const markdown = new MarkdownIt("default", { html: false, linkify: true, breaks: true, typographer: false });

// Every target is judged here (`openableTarget`, on the URL as the author wrote it, its
// character references resolved), never by markdown-it, whose default is to leave a link
// it refuses as its raw source (`[click](javascript:…)`), and to encode a target with a
// URL parser other than the browser's. A refused target shows as text.
markdown.validateLink = () => true;
markdown.normalizeLink = (url) => url;

// Bare URLs as GFM links them: with a scheme (http, https, mailto), `www.` and e-mail
// addresses; not a bare name such as `src/parser.rs` (`.rs` is a country's domain).
markdown.linkify.set({ fuzzyLink: false, fuzzyEmail: true, fuzzyIP: false });
markdown.linkify.add("ftp:", null).add("//", null);
markdown.linkify.add("www.", {
  validate(text, pos, self) {
    const re = self.re as Record<string, string | RegExp>;
    re.www ??= new RegExp(
      `^(?:(?:${re.src_domain as string})\\.)+${re.src_domain_root as string}` +
        `${re.src_port as string}${re.src_host_terminator as string}${re.src_path as string}`,
      "i",
    );
    const match = (re.www as RegExp).exec(text.slice(pos));
    return match === null ? 0 : match[0].length;
  },
  normalize(match) {
    match.url = `http://${match.url}`;
  },
});

/** A GFM task item: `[ ]` or `[x]`, then a space, at the start of an item's first paragraph. */
const TASK = /^\[([ xX])\][ \t]+(?=\S)/;

// Task list items, marked before inline parsing so `[x]` is never read as a link label.
markdown.core.ruler.after("block", "task_items", (state) => {
  const tokens = state.tokens;
  for (let at = 0; at + 2 < tokens.length; at += 1) {
    const item = tokens[at]!;
    if (item.type !== "list_item_open" || tokens[at + 1]!.type !== "paragraph_open") continue;
    const inline = tokens[at + 2]!;
    const match = inline.type === "inline" ? TASK.exec(inline.content) : null;
    if (match === null) continue;
    inline.content = inline.content.slice(match[0].length);
    item.meta = { task: true };
    inline.meta = { checked: match[1] !== " " };
  }
  return false;
});

/** The plain text of inline tokens: what a link's or image's text reads. */
function plainText(tokens: Token[], from = 0, to = tokens.length): string {
  let text = "";
  for (let at = from; at < to; at += 1) {
    const token = tokens[at]!;
    if (token.type === "text" || token.type === "text_special" || token.type === "code_inline") text += token.content;
    else if (token.type === "softbreak" || token.type === "hardbreak") text += " ";
    else if (token.type === "image" && token.children) text += plainText(token.children);
  }
  return text;
}

/** The index of the `link_close` that closes the `link_open` at `open`. */
function linkEnd(tokens: Token[], open: number, to: number): number {
  let depth = 0;
  for (let at = open; at < to; at += 1) {
    const type = tokens[at]!.type;
    if (type === "link_open") depth += 1;
    else if (type === "link_close" && --depth === 0) return at;
  }
  return to;
}

/**
 * Inline tokens as HTML. `inLink`: inside a link's text, where a link or image is only its
 * text, as an `<a>` cannot hold another.
 */
function renderInline(tokens: Token[], from: number, to: number, inLink: boolean): string {
  let html = "";
  for (let at = from; at < to; at += 1) {
    const token = tokens[at]!;
    switch (token.type) {
      case "text":
      case "text_special":
        html += escapeHtml(token.content);
        break;
      case "softbreak":
      case "hardbreak":
        html += "<br>";
        break;
      case "code_inline":
        html += `<code>${escapeHtml(token.content)}</code>`;
        break;
      case "em_open":
        html += "<em>";
        break;
      case "em_close":
        html += "</em>";
        break;
      case "strong_open":
        html += "<strong>";
        break;
      case "strong_close":
        html += "</strong>";
        break;
      case "s_open":
        html += "<del>";
        break;
      case "s_close":
        html += "</del>";
        break;
      case "link_open": {
        const end = linkEnd(tokens, at, to);
        html += link(tokens, at, end, inLink);
        at = end;
        break;
      }
      case "image":
        html += image(token, inLink);
        break;
      default:
        // Nothing else is expected (raw HTML is off); whatever it is, only its text shows.
        html += token.children ? renderInline(token.children, 0, token.children.length, inLink) : escapeHtml(token.content);
    }
  }
  return html;
}

function link(tokens: Token[], open: number, close: number, inLink: boolean): string {
  const token = tokens[open]!;
  const inner = renderInline(tokens, open + 1, close, true);
  const href = token.attrGet("href") ?? "";
  const target = openableTarget(href);
  if (target !== null && !inLink) return anchor(target, inner);
  // A bare URL or `<autolink>` refused (or in a link) is the text it was.
  const auto = token.markup === "linkify" || token.markup === "autolink";
  if (auto || inLink || href.trim() === "" || href === plainText(tokens, open + 1, close)) return inner;
  return `${inner} (${shownTarget(href)})`;
}

function image(token: Token, inLink: boolean): string {
  const href = token.attrGet("src") ?? "";
  const alt = escapeHtml(plainText(token.children ?? []));
  const target = openableTarget(href);
  const label = `${IMAGE_MARK}${alt || shownTarget(target ?? href)}`;
  if (target !== null && !inLink) return anchor(target, label);
  if (href.trim() === "" || inLink) return label;
  return `${label} (${shownTarget(href)})`;
}

function codeBlock(state: RenderState, code: string, info: string): string {
  const index = state.codeBlocks.push(code) - 1;
  const language = languageOf(info);
  let body: string | null = null;
  if (language !== null && colourable(code)) {
    if (state.highlight) body = colour(state.highlight, code, language);
    else state.wantsHighlight = true;
  }
  body ??= escapeHtml(code);
  const label = language === null ? "" : escapeHtml(language);
  const codeClass = language === null ? "hljs" : `hljs language-${label}`;
  return (
    `<div class="code-block"><div class="code-head"><span class="code-lang">${label}</span>` +
    `<button type="button" class="copy" data-copy="${index}" data-testid="code-copy">Copy</button></div>` +
    `<pre><code class="${codeClass}">${body}</code></pre></div>`
  );
}

/** A table cell's alignment, as a class: markdown-it's `style` attribute never reaches the page. */
function alignClass(token: Token): string {
  const align = /text-align:(left|right|center)/.exec(token.attrGet("style") ?? "")?.[1];
  return align === undefined ? "" : ` class="align-${align}"`;
}

/** Block tags with nothing of the author's in them. */
const PLAIN_TAGS: Record<string, string> = {
  blockquote_open: "<blockquote>",
  blockquote_close: "</blockquote>",
  bullet_list_close: "</ul>",
  ordered_list_close: "</ol>",
  list_item_close: "</li>",
  table_close: "</table></div>",
  thead_open: "<thead>",
  thead_close: "</thead>",
  tbody_open: "<tbody>",
  tbody_close: "</tbody>",
  tr_open: "<tr>",
  tr_close: "</tr>",
  th_close: "</th>",
  td_close: "</td>",
  hr: "<hr>",
};

const HEADING = /^h[1-6]$/;

/** Block tokens as HTML: every tag is written here, from the token's type, never taken from it. */
function renderBlocks(state: RenderState, tokens: Token[]): string {
  let html = "";
  for (const token of tokens) {
    const plain = PLAIN_TAGS[token.type];
    if (plain !== undefined) {
      html += plain;
      continue;
    }
    switch (token.type) {
      case "inline": {
        const children = token.children ?? [];
        if (token.meta?.checked !== undefined) html += `<input type="checkbox" disabled${token.meta.checked ? " checked" : ""}> `;
        html += renderInline(children, 0, children.length, false);
        break;
      }
      case "paragraph_open":
        if (!token.hidden) html += "<p>";
        break;
      case "paragraph_close":
        if (!token.hidden) html += "</p>";
        break;
      case "heading_open":
      case "heading_close": {
        const tag = HEADING.test(token.tag) ? token.tag : "p";
        html += token.type === "heading_open" ? `<${tag}>` : `</${tag}>`;
        break;
      }
      case "bullet_list_open":
        html += "<ul>";
        break;
      case "ordered_list_open": {
        const start = Number(token.attrGet("start") ?? 1);
        html += Number.isSafeInteger(start) && start !== 1 ? `<ol start="${start}">` : "<ol>";
        break;
      }
      case "list_item_open":
        html += token.meta?.task ? '<li class="task">' : "<li>";
        break;
      case "table_open":
        html += '<div class="table-wrap"><table>';
        break;
      case "th_open":
        html += `<th${alignClass(token)}>`;
        break;
      case "td_open":
        html += `<td${alignClass(token)}>`;
        break;
      case "fence":
        // The code without the newline that ends its last line.
        html += codeBlock(state, token.content.replace(/\n$/, ""), markdown.utils.unescapeAll(token.info));
        break;
      case "code_block":
        html += codeBlock(state, token.content.replace(/\n+$/, ""), "");
        break;
      default:
        // Nothing else is expected (raw HTML is off); whatever it is, it shows as text.
        if (token.content) html += `<p class="raw-html">${escapeHtml(token.content.replace(/\n+$/, ""))}</p>`;
    }
  }
  return html;
}

/**
 * `text` as HTML, the raw code of its code blocks, and whether it has code waiting for a
 * highlighter. Never throws: should the parser fail, the text comes back escaped, whole.
 */
export function renderMarkdown(text: string, options: RenderOptions = {}): Rendered {
  const state: RenderState = { highlight: options.highlight ?? null, codeBlocks: [], wantsHighlight: false };
  try {
    const html = renderBlocks(state, markdown.parse(text, {}));
    return { html, codeBlocks: state.codeBlocks, wantsHighlight: state.wantsHighlight };
  } catch (error) {
    console.error("could not render a message as Markdown", error);
    return { html: `<p class="raw-html">${escapeHtml(text)}</p>`, codeBlocks: [], wantsHighlight: false };
  }
}

/** A long message's shown part: a prefix of its source, and how many lines it leaves out. */
export type Collapsed = { source: string; hiddenLines: number };

/** Whether a message is long enough to collapse. */
export function isLong(text: string): boolean {
  return text.length > COLLAPSE.chars || lineCount(text, COLLAPSE.lines) > COLLAPSE.lines;
}

/** An opening code fence: its indent, its marker (``` or ~~~, or longer), its info string. */
const FENCE_OPEN = /^([ \t]*)(`{3,}|~{3,})(.*)$/;

/**
 * What a long message shows collapsed, or null when it is short enough to show whole: its
 * first `COLLAPSE.shownLines` lines, at most `COLLAPSE.shownChars` characters of them (cut
 * at a space when one is near, marked with "…"). A code block the cut falls in is closed,
 * so the rest of the prefix does not render as code or as a broken fence.
 */
export function collapse(text: string): Collapsed | null {
  if (!isLong(text)) return null;
  const total = lineCount(text);
  let end = -1;
  for (let line = 0; line < COLLAPSE.shownLines; line += 1) {
    end = text.indexOf("\n", end + 1);
    if (end === -1) break;
  }
  let source = end === -1 ? text : text.slice(0, end);
  let cutMidLine = false;
  if (source.length > COLLAPSE.shownChars) {
    const space = source.lastIndexOf(" ", COLLAPSE.shownChars);
    const lineEnd = source.lastIndexOf("\n", COLLAPSE.shownChars);
    const at = Math.max(space, lineEnd);
    source = source.slice(0, at > COLLAPSE.shownChars / 2 ? at : COLLAPSE.shownChars);
    cutMidLine = true;
  }
  source = source.replace(/\s+$/, "");
  if (cutMidLine) source += "…";
  const open = openFence(source);
  if (open !== null) source += `\n${open}`;
  const shownLines = lineCount(source);
  return { source, hiddenLines: Math.max(total - shownLines, 0) };
}

/** The fence that closes a code block still open at the end of `source`, or null. */
function openFence(source: string): string | null {
  let open: { indent: string; char: string; length: number } | null = null;
  for (const line of source.split("\n")) {
    if (open === null) {
      const match = FENCE_OPEN.exec(line);
      if (!match) continue;
      const marker = match[2]!;
      // A backtick fence's info string cannot hold a backtick (that is inline code).
      if (marker[0] === "`" && match[3]!.includes("`")) continue;
      open = { indent: match[1]!, char: marker[0]!, length: marker.length };
    } else {
      const trimmed = line.trim();
      if (trimmed.length >= open.length && trimmed === open.char.repeat(trimmed.length)) open = null;
    }
  }
  return open === null ? null : `${open.indent}${open.char.repeat(open.length)}`;
}
