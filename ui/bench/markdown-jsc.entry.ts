// Times renderMarkdown in JavaScriptCore, the engine of the app's WebKitGTK webview, where a
// parser's regular expressions may run far slower than in Node: bundled by `markdown-jsc.sh`.
import { highlight } from "../src/app/markdown/highlight";
import { renderMarkdown } from "../src/app/markdown/render";
import { longMessage } from "../src/testing/long-message";

// A bare JSC context has no URL: a minimal stand-in (scheme, lower-cased; throws when none).
if (typeof (globalThis as { URL?: unknown }).URL === "undefined") {
  (globalThis as Record<string, unknown>).URL = class {
    protocol: string;
    href: string;
    constructor(input: string) {
      const match = /^([a-zA-Z][a-zA-Z0-9+.-]*:)(.*)$/s.exec(input);
      if (!match) throw new TypeError("Invalid URL");
      this.protocol = match[1]!.toLowerCase();
      this.href = this.protocol + match[2]!;
    }
  };
}

// The app bench's largest message (src-tauri/benches/desktop.rs, largest_markdown).
function appMessage(limit = 16 * 1024): string {
  let text = "## Test run\n\nRan the suite after the rebase. Failures below.\n\n";
  for (let n = 0; ; n += 1) {
    let part: string;
    switch (n % 6) {
      case 0: part = `- case ${n}: \`parser::lex_${n}\` **failed** after 12 ms\n`; break;
      case 1: part = `- case ${n}: passed\n`; break;
      case 2: part = `\n\`\`\`rust\nfn case_${n}() {\n    assert_eq!(lex("${n}"), Ok(()));\n}\n\`\`\`\n\n`; break;
      case 3: part = `| case | ms |\n| --- | ---: |\n| ${n} | ${n * 3} |\n\n`; break;
      case 4: part = `See [run ${n}](https://ci.example.com/runs/${n}) for the log.\n\n`; break;
      default: part = `${n}. retried once, *flaky*\n`;
    }
    if (text.length + part.length > limit) return text;
    text += part;
  }
}

const SENTENCES = [
  "I went through the failing cases one at a time and the pattern is clearer now.",
  "The tokenizer was treating a quoted key with an escaped quote as two tokens, which is why the loader saw a stray string.",
  "That explains the flaky run on Tuesday as well, since the fixture order changed when we renamed the directory.",
  "Next I will rewrite the escape handling so it reads one character of lookahead instead of backtracking.",
  "It should not change the public interface, but the error messages will point at the right column (finally).",
  "Dana, if you have a minute, could you check whether the config files in the deploy repo rely on the old behaviour?",
  "I'd rather not break anything that's already in production; we can keep a compatibility flag for a release or two.",
  "Once that is in, I'll run the whole suite again, then the benchmarks, and report back here with the numbers.",
];

/** Plain prose: paragraphs of wrapped sentences, no Markdown syntax, up to `limit` characters. */
function prose(limit = 16 * 1024, lineLimit = Number.POSITIVE_INFINITY): string {
  let text = "";
  let lines = 0;
  for (let n = 0; ; n += 1) {
    const line = SENTENCES[n % SENTENCES.length]! + (n % 3 === 2 ? "\n\n" : "\n");
    if (text.length + line.length > limit || lines >= lineLimit) return text;
    text += line;
    lines += n % 3 === 2 ? 2 : 1;
  }
}

function time(text: string, options: Parameters<typeof renderMarkdown>[1]): number {
  const once = () => {
    const at = Date.now();
    renderMarkdown(text, options);
    return Date.now() - at;
  };
  let estimate = 0;
  for (let warm = 0; warm < 5; warm += 1) estimate = once();
  const reps = Math.max(1, Math.ceil(40 / Math.max(estimate, 0.5)));
  const samples: number[] = [];
  for (let sample = 0; sample < 15; sample += 1) {
    const at = Date.now();
    for (let rep = 0; rep < reps; rep += 1) renderMarkdown(text, options);
    samples.push((Date.now() - at) / reps);
  }
  samples.sort((a, b) => a - b);
  return Math.round(samples[7]! * 10) / 10;
}

const cases: Record<string, string> = {
  long5000: longMessage(5_000),
  app16k: appMessage(),
  prose16k: prose(),
  prose5000lines: prose(Number.POSITIVE_INFINITY, 5_000),
  prose16kOneParagraph: prose().replace(/\n\n/g, "\n"),
  prose16kOneLine: prose().replace(/\n+/g, " "),
};
const only = (globalThis as { ONLY?: string[] }).ONLY;
if (only) for (const name of Object.keys(cases)) if (!only.includes(name)) delete cases[name];
const out: Record<string, unknown> = {};
for (const [name, text] of Object.entries(cases)) {
  out[name] = { kB: Math.round(text.length / 102.4) / 10, lines: text.split("\n").length, plain: time(text, {}), coloured: time(text, { highlight }) };
}
(globalThis as Record<string, unknown>).result = JSON.stringify(out);
