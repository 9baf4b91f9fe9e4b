/**
 * Agent CLIs found on this machine, and onboarding one in a click. Onboarding edits the
 * CLI's own config files, so the report of what changed (file, lines added and removed,
 * where the backup is) is the point of this view, not a detail: it stays on screen until the
 * next action.
 */
import type { AgentCli, Detected, Report } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";

export const ONBOARDING_EMPTY =
  "No agent CLIs found. Install Claude Code, Codex or Gemini CLI, make sure it is on your PATH, then press “Scan again”.";

/** The hub's rule for an agent name (the part after `you/`). */
const AGENT_NAME = /^[a-z0-9][a-z0-9_-]{1,31}$/;

/** Why a name would be refused, or null when it is fine. */
export function agentNameProblem(name: string): string | null {
  if (AGENT_NAME.test(name)) return null;
  if (name.length < 2 || name.length > 32) return "2 to 32 characters";
  return "use a-z, 0-9, '_' and '-', starting with a letter or digit";
}

export type OnboardingOutcome = {
  cli: AgentCli;
  action: "onboarded" | "offboarded";
  report: Report;
};

export type OnboardingDeps = { backend: Backend; errors: ErrorReporter };

export class OnboardingModel {
  detected: Detected[] = $state.raw([]);
  loaded = $state(false);
  scanning = $state(false);
  /** The agent name typed for each CLI; defaults to the CLI's command name. */
  names: Partial<Record<AgentCli, string>> = $state({});
  /** CLIs with an onboard/offboard on its way. */
  busy: Partial<Record<AgentCli, boolean>> = $state({});
  /** The last failure per CLI, shown on its row (and as a toast). */
  failures: Partial<Record<AgentCli, string>> = $state({});
  outcome = $state<OnboardingOutcome | null>(null);

  private readonly deps: OnboardingDeps;

  constructor(deps: OnboardingDeps) {
    this.deps = deps;
  }

  readonly supported = $derived(this.detected.filter((cli) => cli.supported));
  readonly unsupported = $derived(this.detected.filter((cli) => !cli.supported));
  readonly onboardedCount = $derived(this.detected.filter((cli) => cli.onboarded).length);

  nameFor(cli: AgentCli): string {
    return this.names[cli] ?? cli;
  }

  async scan(): Promise<void> {
    this.scanning = true;
    try {
      this.detected = await this.deps.backend.detectAgents();
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    } finally {
      this.scanning = false;
    }
  }

  async onboard(cli: AgentCli): Promise<boolean> {
    const name = this.nameFor(cli).trim();
    return this.run(cli, "onboarded", () => this.deps.backend.onboardAgent(cli, name, null));
  }

  async offboard(cli: Detected): Promise<boolean> {
    const handle = cli.handle;
    if (handle === null) return false;
    return this.run(cli.cli, "offboarded", () => this.deps.backend.offboardAgent(cli.cli, handle));
  }

  dismissOutcome(): void {
    this.outcome = null;
  }

  private async run(cli: AgentCli, action: OnboardingOutcome["action"], call: () => Promise<Report>): Promise<boolean> {
    this.busy[cli] = true;
    delete this.failures[cli];
    try {
      const report = await call();
      this.outcome = { cli, action, report };
      await this.scan();
      return true;
    } catch (error) {
      this.failures[cli] = error instanceof Error ? error.message : String(error);
      this.deps.errors.report(error);
      return false;
    } finally {
      delete this.busy[cli];
    }
  }
}
