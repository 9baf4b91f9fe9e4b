/**
 * Every agent I can see, what it is doing, and the levers on it: pause/resume/stop (a
 * control in force in the hub: its next sends are refused with "paused") and its token
 * (rotate or revoke, each after an explicit confirmation since a revoked agent is cut off).
 * A rotated token lands in the agent's profile on this machine; when there is none (the
 * agent runs elsewhere) the core hands it back once, and this view shows it once.
 */
import type { AgentControl, AgentState, AgentView, CoreChanged, TokenChangeKind, TokenChanged } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import type { StatusLabel } from "../../app/status";

export const AGENTS_EMPTY = "No agents yet. Onboard Claude Code from the Onboarding view, or any other agent CLI found there.";

export const AGENT_STATES: Record<AgentState, StatusLabel> = {
  working: { icon: "⚙", label: "working", tone: "progress" },
  idle: { icon: "○", label: "idle", tone: "neutral" },
  waiting_human: { icon: "!", label: "waiting for a person", tone: "attention" },
  error: { icon: "⚠", label: "error", tone: "bad" },
  stopped: { icon: "■", label: "stopped", tone: "neutral" },
  unknown: { icon: "?", label: "unknown", tone: "neutral" },
};

export function agentStateLabel(state: AgentState): StatusLabel {
  return AGENT_STATES[state] ?? AGENT_STATES.unknown;
}

/** The `data-testid` suffix of an agent's row: its handle with `/` replaced by `_`. */
export function agentRowId(handle: string): string {
  return handle.replaceAll("/", "_");
}

/** The controls in force ("pause", "stop"), which decide whether Resume is offered. */
export function controlsInForce(agent: Pick<AgentView, "controls">): string[] {
  return [...new Set(agent.controls.map((control) => control.action))];
}

/** Agents that need a person first, then the rest in the core's order. */
export function needsAttention(agent: Pick<AgentView, "state">): boolean {
  return agent.state === "waiting_human" || agent.state === "error";
}

export type TokenConfirmation = { agent: AgentView; action: TokenChangeKind };

export const TOKEN_CONFIRMATIONS: Record<TokenChangeKind, (handle: string) => string> = {
  rotate: (handle) =>
    `Rotate the token of ${handle}? Its old token stops working at once. The new one goes to its profile on this machine, or, when it runs elsewhere, is shown here once.`,
  revoke: (handle) => `Revoke the token of ${handle}? It is cut off from the hub until it is onboarded again.`,
};

/** Said once a token change is done; a new token to copy is shown apart, not in words. */
export function tokenChangedSummary(changed: TokenChanged): string {
  if (changed.revoked) return `Revoked the token of ${changed.agent}.`;
  if (changed.saved_in !== null) {
    return `Rotated the token of ${changed.agent}. The new one is saved in its profile “${changed.saved_in}” on this machine.`;
  }
  if (changed.token !== null) {
    return `Rotated the token of ${changed.agent}. No profile on this machine holds it: give the new token below to wherever the agent runs.`;
  }
  return `Rotated the token of ${changed.agent}.`;
}

export type AgentsDeps = { backend: Backend; errors: ErrorReporter };

export class AgentsModel {
  agents: AgentView[] = $state.raw([]);
  loaded = $state(false);
  /** Controls on their way to the core, by agent id. */
  busy: Record<string, AgentControl | TokenChangeKind> = $state({});
  confirming = $state<TokenConfirmation | null>(null);
  /** What the last token action did, until dismissed or the next one. */
  tokenResult = $state<TokenChanged | null>(null);
  /** A line saying what the last token action did. */
  readonly notice: string | null = $derived(this.tokenResult ? tokenChangedSummary(this.tokenResult) : null);
  /** A new token to copy now: the core hands it out once and keeps no copy. */
  readonly newToken: string | null = $derived(this.tokenResult?.token ?? null);

  private readonly deps: AgentsDeps;

  constructor(deps: AgentsDeps) {
    this.deps = deps;
  }

  readonly ordered = $derived([
    ...this.agents.filter(needsAttention),
    ...this.agents.filter((agent) => !needsAttention(agent)),
  ]);
  readonly attentionCount = $derived(this.agents.filter(needsAttention).length);

  async load(): Promise<void> {
    try {
      this.agents = await this.deps.backend.agents();
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    }
  }

  async control(agent: AgentView, action: AgentControl): Promise<void> {
    this.busy[agent.id] = action;
    try {
      // From the agents view: the whole agent, everywhere.
      await this.deps.backend.controlAgent(agent.id, action, null);
      await this.load();
    } catch (error) {
      this.deps.errors.report(error);
    } finally {
      delete this.busy[agent.id];
    }
  }

  askToken(agent: AgentView, action: TokenChangeKind): void {
    this.tokenResult = null;
    this.confirming = { agent, action };
  }

  /** Forgets the last token change, and with it a new token shown once. */
  dismissTokenResult(): void {
    this.tokenResult = null;
  }

  cancelToken(): void {
    this.confirming = null;
  }

  async confirmToken(): Promise<void> {
    const pending = this.confirming;
    if (!pending) return;
    this.confirming = null;
    this.busy[pending.agent.id] = pending.action;
    try {
      this.tokenResult = await this.deps.backend.agentToken(pending.agent.id, pending.action);
      await this.load();
    } catch (error) {
      this.deps.errors.report(error);
    } finally {
      delete this.busy[pending.agent.id];
    }
  }

  async applyChange(change: CoreChanged): Promise<void> {
    if (change.agents) await this.load();
  }
}
