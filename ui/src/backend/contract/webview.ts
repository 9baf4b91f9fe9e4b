/**
 * The contract runner as the desktop test loads it into the app's webview (bundled on the
 * fly by src-tauri/tests/desktop/contract.rs): each call goes to the app's own command
 * through Tauri's IPC, by its generated name and with the step's named arguments.
 */
import scenarios from "./scenarios.json";
import { type Bindings, type Step, commandOf, runSteps } from "./runner";

type TauriInternals = { invoke(command: string, args: Record<string, unknown>): Promise<unknown> };

const steps = scenarios as Step[];

const invoke = (method: string, args: Record<string, unknown>): Promise<unknown> =>
  (window as unknown as { __TAURI_INTERNALS__: TauriInternals }).__TAURI_INTERNALS__.invoke(commandOf(method), args);

(window as unknown as { roundtableContract: unknown }).roundtableContract = {
  run: (from: number, bindings: Bindings) => runSteps(steps, from, invoke, bindings),
};
