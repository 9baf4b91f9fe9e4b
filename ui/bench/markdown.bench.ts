/**
 * How long a 5,000-line agent message takes to render (parse and HTML string), so a
 * pasted report expanded in a room stays well under a frame budget of tens of
 * milliseconds; and 5,000 lines of plain prose, the text a regex-heavy lexer is slowest
 * on. Timings are never asserted in tests (machines differ); this prints them:
 *
 *   cd ui && npx vitest bench --run bench/markdown.bench.ts
 *
 * Before the benchmark table it prints the median of 30 timed renders, plain and coloured.
 * Node's V8 is not the app's engine: WebKitGTK's JavaScriptCore runs some regular
 * expressions far slower (see `render.ts`), so a figure here is a floor, not the app's.
 */
import { bench, describe } from "vitest";
import { highlight } from "../src/app/markdown/highlight";
import { renderMarkdown } from "../src/app/markdown/render";
import { longMessage, longProse } from "../src/testing/long-message";

const LINES = 5_000;
const RUNS = 30;
const message = longMessage(LINES);
const prose = longProse(LINES);

function median(text: string, options: Parameters<typeof renderMarkdown>[1]): number {
  for (let warm = 0; warm < 5; warm += 1) renderMarkdown(text, options);
  const times: number[] = [];
  for (let run = 0; run < RUNS; run += 1) {
    const started = performance.now();
    renderMarkdown(text, options);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return (times[RUNS / 2 - 1]! + times[RUNS / 2]!) / 2;
}

const size = (text: string) => `${text.split("\n").length} lines, ${(text.length / 1024).toFixed(0)} kB`;
console.log(
  `markdown: ${size(message)}; median of ${RUNS} renders: ` +
    `${median(message, {}).toFixed(1)} ms uncoloured, ${median(message, { highlight }).toFixed(1)} ms coloured`,
);
console.log(`prose: ${size(prose)}; median of ${RUNS} renders: ${median(prose, {}).toFixed(1)} ms`);

describe(`a ${LINES}-line message`, () => {
  bench("render, uncoloured", () => void renderMarkdown(message), { iterations: RUNS });
  bench("render, coloured", () => void renderMarkdown(message, { highlight }), { iterations: RUNS });
  bench("render, plain prose", () => void renderMarkdown(prose), { iterations: RUNS });
});
