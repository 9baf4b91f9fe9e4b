/**
 * The graph layout, off the window's thread: a request is `{id, graph}`, the answer
 * `{id, layout}`. The window keeps drawing and answering keys while a large board is laid out.
 */
import { layoutGraph, type GraphInput } from "./layout";

self.onmessage = (event: MessageEvent<{ id: number; graph: GraphInput }>) => {
  const { id, graph } = event.data;
  self.postMessage({ id, layout: layoutGraph(graph) });
};
