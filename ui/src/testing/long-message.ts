/**
 * A long agent message, generated: what the renderer's test and benchmark feed it to see
 * that a pasted report of thousands of lines renders whole without stalling the window.
 */
/** A message of about `lineCount` lines: paragraphs, lists, code blocks, a table, links. */
export function longMessage(lineCount: number): string {
  const parts: string[] = [];
  let lines = 0;
  for (let section = 0; lines < lineCount; section += 1) {
    const chunk = [
      `## Section ${section}`,
      `Working through **step ${section}**: the tokenizer handles *quoted keys*, \`escapes\` and [trailing commas](https://docs.example/${section}).`,
      "Next I will wire it into the loader, then run the tests again.",
      "",
      `- checked \`src/parser/${section}.rs\``,
      "- updated the fixtures",
      "  - nested note with ~~old~~ new text",
      "",
      "```rust",
      `fn step_${section}(input: &str) -> Result<Value, Error> {`,
      "    let tokens = tokenize(input)?;",
      '    parse(tokens).map_err(|e| Error::new(format!("bad input: {e}")))',
      "}",
      "```",
      "",
      "| file | lines | status |",
      "|:-----|------:|:------:|",
      `| parser.rs | ${section * 10} | ok |`,
      "",
    ];
    parts.push(...chunk);
    lines += chunk.length;
  }
  return parts.join("\n");
}

const SENTENCES = [
  "I went through the failing cases one at a time, and the pattern is clearer now.",
  "The tokenizer read a quoted key with an escaped quote as two tokens, which is why the loader saw a stray string in src/parser.rs.",
  "That explains Tuesday's flaky run as well: the fixture order changed when we renamed the directory (twice).",
  "Next I will rewrite the escape handling so it reads one character ahead instead of backtracking; it should take ~2 hours.",
  "Dana, if you have a minute, could you check whether the deploy repo's config files rely on the old behaviour?",
  "I'd rather not break anything already in production, so we can keep a compatibility flag for a release or two.",
];

/**
 * Plain prose of `lineCount` lines, no Markdown in it: paragraphs of three lines, each
 * line a sentence, as an agent writes a long report. The slowest text for a Markdown
 * lexer built on regular expressions that JavaScriptCore cannot compile.
 */
export function longProse(lineCount: number): string {
  const lines: string[] = [];
  for (let line = 0; lines.length < lineCount; line += 1) {
    lines.push(SENTENCES[line % SENTENCES.length]!);
    if (line % 3 === 2 && lines.length < lineCount - 1) lines.push("");
  }
  return lines.join("\n");
}
