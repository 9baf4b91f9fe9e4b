import { describe, expect, it } from "vitest";
import type { Budget, BudgetPeriod } from "../bindings";
import { agentNameProblem } from "../features/onboarding/onboarding.model.svelte";
import {
  type Verdict,
  agentNameFallback,
  budgetFallback,
  budgetLevelFallback,
  hubAddressFallback,
  inviteCodeFallback,
  inviteTermsFallback,
  linkFallback,
  periodStartFallback,
} from "./fake-rules";
import agentNames from "./fixtures/agent-names.json";
import budgets from "./fixtures/budgets.json";
import hubAddresses from "./fixtures/hub-addresses.json";
import invites from "./fixtures/invites.json";
import links from "./fixtures/links.json";

/** A verdict as far as the window can tell: the value kept, or the error's code. */
function gist(verdict: unknown): unknown {
  const outcome = verdict as Verdict<unknown>;
  return "error" in outcome ? { error: outcome.error.code } : { ok: outcome.ok };
}

/**
 * Each fallback of the in-memory backend decides every case of the core's tables as the
 * core did: when the core changes a rule, its test writes the table anew and these fail.
 */
describe("the fake's fallbacks, held to the core's verdicts", () => {
  it("on agent names", () => {
    for (const entry of agentNames.cases) {
      expect(gist(agentNameFallback(entry.name)), entry.name).toEqual(gist(entry.outcome));
    }
  });

  it("on agent names, as the onboarding form checks them before sending", () => {
    for (const entry of agentNames.cases) {
      expect(agentNameProblem(entry.name) === null, entry.name).toBe("ok" in entry.outcome);
    }
  });

  it("on pasted invite codes and links", () => {
    for (const entry of invites.codes) {
      expect(gist(inviteCodeFallback(entry.input)), entry.input).toEqual(gist(entry.outcome));
    }
  });

  it("on an invite's uses and expiry", () => {
    for (const entry of invites.terms) {
      expect(gist(inviteTermsFallback(entry.uses, entry.expires_in_s)), JSON.stringify(entry)).toEqual(gist(entry.outcome));
    }
  });

  it("on budgets, their periods and levels", () => {
    for (const entry of budgets.cases) {
      expect(gist(budgetFallback(entry.budget as Budget, budgets.me)), JSON.stringify(entry.budget)).toEqual(gist(entry.outcome));
    }
    for (const entry of budgets.periods) {
      for (const period of ["day", "week", "month"] as BudgetPeriod[]) {
        expect(periodStartFallback(period, entry.now_ms), `${period} of ${entry.now_ms}`).toBe(entry[period]);
      }
    }
    for (const entry of budgets.levels) expect(budgetLevelFallback(entry.share), String(entry.share)).toBe(entry.level);
  });

  it("on links", () => {
    for (const entry of links.cases) {
      expect(gist(linkFallback(entry.url)), entry.url).toEqual(gist(entry.outcome));
    }
  });

  it("on hub addresses", () => {
    for (const entry of hubAddresses.cases) {
      expect(gist(hubAddressFallback(entry.address, entry.insecure)), `${entry.address} ${entry.insecure}`).toEqual(gist(entry.outcome));
    }
  });
});
