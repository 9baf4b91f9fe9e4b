/**
 * Every agent session, the ones that need the person first: its state, framework, where it
 * runs and which room it answers, how much it writes, its last error, the questions it
 * asked, and pause / resume / stop for the person's own agents (the controls act on the
 * agent, so every session of it).
 */
import type { AgentControl, CoreChanged, SessionView } from "../../bindings";
import type { Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import { Coalesced } from "../../app/coalesced";

export const SESSIONS_EMPTY =
  "No agent sessions yet. Onboard Claude Code, Codex or Gemini CLI from the Onboarding view: each session they run shows here, with what it needs from you.";
export const SESSIONS_NONE_WAITING = "Nothing waits for you: no question, no agent in error or waiting.";

/** A session's name: its agent, or what ran when no agent was onboarded. */
export function sessionName(session: Pick<SessionView, "agent_handle" | "framework">): string {
  return session.agent_handle ?? `${session.framework} (not onboarded)`;
}

/** Its message rate, in words. */
export function rateText(count: number): string {
  if (count === 0) return "quiet this hour";
  return `${count} message${count === 1 ? "" : "s"} in the last hour`;
}

/** Its questions, in words. */
export function questionsText(session: Pick<SessionView, "questions_asked" | "questions_waiting">): string {
  if (session.questions_asked === 0) return "asked nothing";
  const waiting = session.questions_waiting > 0 ? `, ${session.questions_waiting} waiting for you` : "";
  return `asked ${session.questions_asked} question${session.questions_asked === 1 ? "" : "s"}${waiting}`;
}

/** The controls offered: resume when one is in force or it stopped; pause and stop otherwise. */
export function offeredControls(session: Pick<SessionView, "mine" | "agent" | "controls" | "state">): AgentControl[] {
  if (!session.mine || session.agent === null) return [];
  const offered: AgentControl[] = [];
  if (session.controls.length > 0 || session.state === "stopped") offered.push("resume");
  if (!session.controls.includes("pause") && session.state !== "stopped") offered.push("pause");
  if (!session.controls.includes("stop") && session.state !== "stopped") offered.push("stop");
  return offered;
}

export type SessionsDeps = { backend: Backend; errors: ErrorReporter };

export class SessionsModel {
  sessions: SessionView[] = $state.raw([]);
  loaded = $state(false);
  /** Controls on their way, by session key. */
  busy: Record<string, AgentControl> = $state({});

  private readonly deps: SessionsDeps;
  private readonly loads: Coalesced;

  constructor(deps: SessionsDeps) {
    this.deps = deps;
    this.loads = new Coalesced(() => this.fetch());
  }

  readonly needsYou = $derived(this.sessions.filter((session) => session.needs_you));
  readonly others = $derived(this.sessions.filter((session) => !session.needs_you));
  readonly needsYouCount = $derived(this.needsYou.length);

  load(): Promise<void> {
    return this.loads.request();
  }

  /**
   * Pauses, resumes or stops this session: in the room it is bound to (its runner's, or the
   * one its hooks report to), so the agent's other sessions go on; a session bound to no room
   * can only be held with the whole agent.
   */
  async control(session: SessionView, action: AgentControl): Promise<void> {
    if (session.agent === null) return;
    this.busy[session.key] = action;
    try {
      await this.deps.backend.controlAgent(session.agent, action, session.bound_room);
      await this.load();
    } catch (error) {
      this.deps.errors.report(error);
    } finally {
      delete this.busy[session.key];
    }
  }

  /** Kept current whatever shows: the nav counts what needs the person. */
  async applyChange(change: CoreChanged): Promise<void> {
    if (change.work || change.agents || change.pings || change.messages.length > 0 || change.everything) {
      await this.load();
    }
  }

  private async fetch(): Promise<void> {
    try {
      this.sessions = await this.deps.backend.sessions();
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    }
  }
}
