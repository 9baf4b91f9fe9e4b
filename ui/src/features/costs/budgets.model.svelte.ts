/**
 * Budgets: what an agent, a person or a team may spend in a day, a week or a month. The
 * core keeps them (a warning at 80 %, the person's agents paused at 100 %); this model is
 * what Settings edits and what the costs board shows beside the spend: one model for both,
 * so a budget set in Settings is on the costs board at once.
 */
import type { Budget, BudgetBoard, BudgetLevel, BudgetPeriod, BudgetScope, BudgetState, CoreChanged } from "../../bindings";
import { BackendError, type Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";

export const SCOPES: readonly { scope: BudgetScope; label: string; placeholder: string }[] = [
  { scope: "agent", label: "An agent", placeholder: "writer, or dana/writer" },
  { scope: "person", label: "A person", placeholder: "dana" },
  { scope: "team", label: "A team", placeholder: "core" },
];

export const PERIODS: readonly { period: BudgetPeriod; label: string; per: string }[] = [
  { period: "day", label: "Day", per: "a day" },
  { period: "week", label: "Week (Monday to Sunday)", per: "a week" },
  { period: "month", label: "Month", per: "a month" },
];

export const BUDGETS_EMPTY =
  "No budgets. Set one in Settings: at 80 % you are told, at 100 % your agents that count toward it are paused until you resume them.";

/** The budget the form describes, or a sentence saying what is missing. Pure. */
export function budgetOf(form: { scope: BudgetScope; name: string; period: BudgetPeriod; usd: string }): Budget | string {
  const name = form.name.trim();
  if (name === "") return form.scope === "team" ? "Name the team." : `Write the ${form.scope}'s handle.`;
  const usd = Number(form.usd.trim().replace(/^\$/, ""));
  if (form.usd.trim() === "" || !Number.isFinite(usd) || usd <= 0) return "Write the budget in dollars, for example 5 or 12.50.";
  return { scope: form.scope, name, period: form.period, usd };
}

/** "dana/writer: $4.02 of $5.00 a day (80 %)". Pure. */
export function budgetText(state: BudgetState): string {
  const per = PERIODS.find((entry) => entry.period === state.budget.period)?.per ?? state.budget.period;
  const percent = Math.floor(shareOf(state) * 100);
  const scope = state.budget.scope === "team" ? "team " : "";
  return `${scope}${state.budget.name}: ${amountText(state.spent_usd ?? 0)} of ${amountText(state.budget.usd ?? 0)} ${per} (${percent} %)`;
}

/** Dollars to the cent, or to a hundredth of a cent where that matters: $5.00, $0.02, $0.0125. Pure. */
export function amountText(usd: number): string {
  return `$${usd.toFixed(4).replace(/0{1,2}$/, "")}`;
}

/** The share spent, 0 when unknown (a figure serde could not write is `null`). Pure. */
export function shareOf(state: BudgetState): number {
  return state.share ?? 0;
}

export const LEVEL_WORDS: Readonly<Record<BudgetLevel, string>> = {
  under: "",
  near: "over 80 %: you were told",
  reached: "reached: your agents that count toward it are paused",
};

/** A budget's key, for lists and busy flags. */
export function budgetKey(budget: Budget): string {
  return `${budget.scope}:${budget.name}:${budget.period}`;
}

export type BudgetsDeps = { backend: Backend; errors: ErrorReporter };

export class BudgetsModel {
  board: BudgetBoard | null = $state.raw(null);
  loaded = $state(false);
  busy = $state(false);

  scope = $state<BudgetScope>("agent");
  name = $state("");
  period = $state<BudgetPeriod>("day");
  usd = $state("");

  private readonly deps: BudgetsDeps;

  constructor(deps: BudgetsDeps) {
    this.deps = deps;
  }

  readonly states = $derived(this.board?.states ?? []);

  async load(): Promise<void> {
    try {
      this.board = await this.deps.backend.budgets();
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    }
  }

  /** Spend changes with usage (`work`); a budget reached pauses agents. */
  async applyChange(change: CoreChanged): Promise<void> {
    if (this.loaded && (change.work || change.everything)) await this.load();
  }

  /** Sets the budget the form describes; true when it was set (the form is then cleared). */
  async set(): Promise<boolean> {
    const budget = budgetOf({ scope: this.scope, name: this.name, period: this.period, usd: this.usd });
    if (typeof budget === "string") {
      this.deps.errors.report(new BackendError("invalid", budget));
      return false;
    }
    this.busy = true;
    try {
      await this.deps.backend.setBudget(budget);
      this.name = "";
      this.usd = "";
      await this.load();
      return true;
    } catch (error) {
      this.deps.errors.report(error);
      return false;
    } finally {
      this.busy = false;
    }
  }

  /** Puts a budget in the form, to change its amount. */
  edit(budget: Budget): void {
    this.scope = budget.scope;
    this.name = budget.name;
    this.period = budget.period;
    this.usd = String(budget.usd);
  }

  async remove(budget: Budget): Promise<void> {
    this.busy = true;
    try {
      await this.deps.backend.removeBudget(budget.scope, budget.name, budget.period);
      await this.load();
    } catch (error) {
      this.deps.errors.report(error);
    } finally {
      this.busy = false;
    }
  }
}
