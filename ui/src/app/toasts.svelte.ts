/**
 * Errors shown to people. Every model reports a failed command here instead of keeping its
 * own error banner, so there is one place (role="alert", data-testid="error") where an
 * `ErrorReport.message` — which already says what to do next — appears.
 */
import { asBackendError, type AnyCode } from "../backend/backend";

export type Toast = { id: number; code: AnyCode; message: string };

/** What a model needs from the toasts: somewhere to put an error. */
export interface ErrorReporter {
  report(error: unknown): void;
}

/** Older errors are dropped beyond this many, so a burst cannot cover the window. */
const MAX_VISIBLE = 3;

export class Toasts implements ErrorReporter {
  items = $state<Toast[]>([]);
  private nextId = 1;

  report(error: unknown): void {
    const { code, message } = asBackendError(error);
    // The same error twice in a row (a retry that failed again) is shown once.
    const withoutRepeat = this.items.filter((toast) => toast.message !== message);
    this.items = [...withoutRepeat, { id: this.nextId++, code, message }].slice(-MAX_VISIBLE);
  }

  dismiss(id: number): void {
    this.items = this.items.filter((toast) => toast.id !== id);
  }

  dismissAll(): void {
    this.items = [];
  }
}
