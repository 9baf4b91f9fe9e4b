/**
 * The code highlighter arrives late on purpose: it is a chunk of its own (`highlight.ts`),
 * loaded the first time a message shows a code block that names a language, so a window
 * without code never pays for it. Until then code blocks show escaped and uncoloured;
 * `highlighter.highlight` is reactive, so every message that read it renders again, coloured,
 * once the chunk is in.
 */
import type { Highlight } from "./render";

export const highlighter = $state<{ highlight: Highlight | null }>({ highlight: null });

let loading: Promise<void> | null = null;

/** Loads the highlighter once; later calls wait for the same load. A failed load leaves code uncoloured. */
export function loadHighlighter(): Promise<void> {
  loading ??= import("./highlight").then(
    (module) => {
      highlighter.highlight = module.highlight;
    },
    (error: unknown) => console.error("could not load the code highlighter", error),
  );
  return loading;
}
