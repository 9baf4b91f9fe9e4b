// One config for the dev server, the production build (ui/dist, served by Tauri) and Vitest.
import { svelte } from "@sveltejs/vite-plugin-svelte";
import { defineConfig } from "vitest/config";

export default defineConfig(({ mode }) => ({
  plugins: [svelte()],
  // Tauri serves dist/ from its own origin; relative paths work there and in `vite preview`.
  base: "./",
  // Tauri expects a fixed port in dev and shows its own errors; keep Vite's quiet.
  server: { port: 1420, strictPort: true },
  clearScreen: false,
  build: { outDir: "dist", emptyOutDir: true, target: "es2022" },
  // Component tests mount Svelte's client runtime, not its server renderer.
  resolve: mode === "test" ? { conditions: ["browser"] } : undefined,
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
}));
