/**
 * Entry point. Picks the backend — Tauri's when the page runs inside the desktop shell, the
 * in-memory fake (with demo data and agents that answer) in a plain browser — and mounts
 * the shell. Each backend is its own lazily loaded chunk: the desktop app never loads the
 * fake and its demo world, a browser never loads Tauri's IPC.
 */
import { mount } from "svelte";
import "./app/theme.css";
import App from "./app/App.svelte";
import { AppModel } from "./app/app.model.svelte";
import type { Backend } from "./backend/backend";

declare global {
  interface Window {
    __TAURI_INTERNALS__?: unknown;
    /** Dev only, in a plain browser: the fake backend, to play the core from the console. */
    roundtableFake?: unknown;
    /** When the window first painted, in ms since the epoch (the desktop benchmark reads it). */
    __roundtableFirstPaint?: number;
  }
}

// Read by the desktop benchmark (against `startedAtMs`): the first paint, in epoch ms. WebKitGTK reports only first-contentful-paint.
new PerformanceObserver((list) => void (window.__roundtableFirstPaint ??= performance.timeOrigin + list.getEntries()[0]!.startTime)).observe({ type: "paint", buffered: true });

async function chooseBackend(): Promise<Backend> {
  if (window.__TAURI_INTERNALS__ !== undefined) {
    const { tauriBackend } = await import("./backend/tauri");
    return tauriBackend();
  }
  const [{ FakeBackend }, { demoWorld }] = await Promise.all([
    import("./backend/fake"),
    import("./backend/fake-world"),
  ]);
  const fake = new FakeBackend({ world: demoWorld(Date.now()), schedule: (step, delay) => setTimeout(step, delay) });
  window.roundtableFake = fake;
  return fake;
}

async function start() {
  const backend = await chooseBackend();
  const app = new AppModel(backend);
  mount(App, { target: document.getElementById("app")!, props: { app } });
  await app.start();
}

void start();
