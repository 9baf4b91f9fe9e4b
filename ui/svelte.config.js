// Svelte compiler settings shared by Vite, Vitest and svelte-check.
// `runes: true` makes the legacy syntax (`export let`, `$:`, stores as `$store`) a compile
// error, so every component and `.svelte.ts` module uses $state/$derived/$props/$effect.
import { vitePreprocess } from "@sveltejs/vite-plugin-svelte";

export default {
  preprocess: vitePreprocess(),
  compilerOptions: { runes: true },
};
