/**
 * Lays graphs out in a Web Worker (one, started on first use, kept for the window's life).
 * Where there are no workers (unit tests, a page without them) it lays them out in place:
 * the same pure function, the same answer.
 */
import { layoutGraph, type GraphInput, type GraphLayout } from "./layout";

type Pending = { resolve: (layout: GraphLayout) => void; reject: (error: unknown) => void };

export class GraphLayouter {
  private worker: Worker | null = null;
  private failed = false;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  /** Whether layouts run off the window's thread. */
  get offThread(): boolean {
    return this.ensureWorker() !== null;
  }

  layout(graph: GraphInput): Promise<GraphLayout> {
    const worker = this.ensureWorker();
    if (worker === null) return Promise.resolve(layoutGraph(graph));
    const id = this.nextId++;
    return new Promise<GraphLayout>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, graph });
    });
  }

  private ensureWorker(): Worker | null {
    if (this.worker !== null) return this.worker;
    if (this.failed || typeof Worker === "undefined") return null;
    try {
      const worker = new Worker(new URL("./layout.worker.ts", import.meta.url), { type: "module" });
      worker.onmessage = (event: MessageEvent<{ id: number; layout: GraphLayout }>) => {
        this.pending.get(event.data.id)?.resolve(event.data.layout);
        this.pending.delete(event.data.id);
      };
      worker.onerror = (event) => {
        // The worker could not run: lay out in place from now on, and answer what waits.
        this.failed = true;
        this.worker = null;
        worker.terminate();
        for (const [id, waiting] of this.pending) {
          waiting.reject(new Error(`the graph layout worker failed: ${event.message}`));
          this.pending.delete(id);
        }
      };
      this.worker = worker;
      return worker;
    } catch {
      this.failed = true;
      return null;
    }
  }
}
