/**
 * Code colouring, in its own chunk: highlight.js and its grammars weigh more than the rest
 * of a message's rendering, and most windows never show a code block, so this module is
 * only ever loaded with `import()` (see `highlighter.svelte.ts`), the first time one does.
 *
 * It is highlight.js's core with a fixed set of grammars — the languages agents write in
 * and about — rather than its full build of nearly two hundred. A language outside the set
 * gets no colour (the caller shows the code escaped), and there is no guessing
 * (`highlightAuto` on a pasted log would run every grammar over it).
 */
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import ini from "highlight.js/lib/languages/ini";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

// Each grammar brings its own aliases: rs, ts/tsx, js/jsx, py, sh/zsh, console, toml (ini),
// yml, golang, patch, html/svg (xml), md, h, cc/hpp, jsonc.
const LANGUAGES = { bash, c, cpp, css, diff, go, ini, java, javascript, json, markdown, python, rust, shell, sql, typescript, xml, yaml };
for (const [name, grammar] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, grammar);

/**
 * `code` coloured as `language` (a name or an alias), as HTML: highlight.js escapes the code
 * and adds only `<span class="hljs-…">`. Null when the language is not one of ours.
 */
export function highlight(code: string, language: string): string | null {
  if (hljs.getLanguage(language) === undefined) return null;
  return hljs.highlight(code, { language, ignoreIllegals: true }).value;
}
