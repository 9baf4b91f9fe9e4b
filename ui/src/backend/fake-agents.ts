/**
 * The agents side of the in-memory backend: the agent CLIs found on this machine, onboarding
 * an agent onto one (and off again), the person's agents, their controls (pause, stop,
 * resume: per room or everywhere, as the core records them) and their tokens. What the core
 * decides about an agent's name is read from its verdicts (fake-rules.ts); which CLIs it
 * supports, from its table (fake-world.ts).
 *
 * `FakeBackend` (fake.ts) records each command and plays `failNext`, then hands it here.
 */
import type { AgentCli, AgentControl, AgentView, Detected, Report, TokenChangeKind, TokenChanged } from "../bindings";
import { BackendError } from "./backend";
import { copy, type FakeCore } from "./fake-core";
import { agentNameVerdict, decided } from "./fake-rules";
import { isSupported } from "./fake-world";

export class FakeAgents {
  constructor(private readonly core: FakeCore) {}

  detectAgents(): Detected[] {
    return copy(this.core.world.detected);
  }

  onboardAgent(cli: AgentCli, name: string): Report {
    const world = this.core.world;
    // In the core's order: the CLI must be one Roundtable supports, then the name is checked
    // (as the core says: fake-rules.ts), before anything is looked up.
    if (!isSupported(cli)) throw new BackendError("invalid", `${cli} is not supported yet.`);
    name = name.trim();
    decided(agentNameVerdict(name));
    const detected = this.detectedCli(cli);
    const me = this.core.requireMe();
    const handle = `${me.handle}/${name}`;
    if (detected.onboarded && detected.handle === handle) {
      return { cli, handle, profile: this.profilePath(handle), unchanged: true, changes: [] };
    }
    detected.onboarded = true;
    detected.handle = handle;
    const id = `agent-${this.core.freshId()}`;
    world.agents.push({
      id,
      handle,
      name,
      cli,
      state: "idle",
      detail: null,
      room: null,
      since_ms: this.core.now(),
      controls: [],
    });
    world.directory.push({ id, kind: "agent", handle, name, description: detected.name, owner: me.id, contact: "kin" });
    this.core.changed({ agents: true });
    return this.configReport(cli, handle, detected.config, "added");
  }

  /** What onboarding (`added`) or offboarding (`removed`) did to each of a CLI's config files. */
  private configReport(cli: AgentCli, handle: string, config: string[], side: "added" | "removed"): Report {
    const entry = `"roundtable": { "command": "roundtable", "args": ["mcp", "--agent", "${handle}"] }`;
    return copy({
      cli,
      handle,
      profile: this.profilePath(handle),
      unchanged: false,
      changes: config.map((path) => ({
        path,
        added: side === "added" ? [entry] : [],
        removed: side === "removed" ? [entry] : [],
        backup: `${path}.roundtable-backup`,
      })),
    });
  }

  offboardAgent(cli: AgentCli, handle: string): Report {
    const world = this.core.world;
    const detected = world.detected.find((candidate) => candidate.cli === cli);
    if (!detected || !detected.onboarded || detected.handle !== handle) {
      // As the core does: nothing recorded for this agent on this CLI, nothing to undo.
      return { cli, handle, profile: handle.replace("/", "."), unchanged: true, changes: [] };
    }
    detected.onboarded = false;
    detected.handle = null;
    world.agents = world.agents.filter((agent) => agent.handle !== handle);
    this.core.changed({ agents: true });
    return this.configReport(cli, handle, detected.config, "removed");
  }

  agents(): AgentView[] {
    return copy(this.core.world.agents);
  }

  controlAgent(agent: string, action: AgentControl, room: string | null): null {
    const found = this.agent(agent);
    const me = this.core.requireMe();
    if (room !== null) this.core.room(room);
    // As the core records it: one control per room (null: everywhere); a resume lifts what
    // it covers, everywhere lifts them all.
    // One control per room: everywhere replaces the everywhere one (a resume everywhere lifts all).
    const others =
      room === null
        ? action === "resume"
          ? []
          : found.controls.filter((control) => control.room !== null)
        : found.controls.filter((control) => control.room !== room);
    found.controls = action === "resume" ? others : [...others, { room, action, by: me.id, seq: this.core.freshId(), reason: null }];
    const inForce = (at: string | null) =>
      [...new Set(found.controls.filter((control) => control.room === null || control.room === at).map((control) => control.action))].sort();
    found.state = found.controls.some((control) => control.action === "stop" && control.room === null)
      ? "stopped"
      : found.state === "stopped"
        ? "idle"
        : found.state;
    for (const session of this.core.world.boards.sessions) {
      if (session.agent !== agent) continue;
      session.controls = inForce(session.bound_room);
      if (session.controls.includes("stop")) session.state = "stopped";
      else if (session.state === "stopped") session.state = "idle";
    }
    this.core.changed({ agents: true });
    return null;
  }

  agentToken(agent: string, action: TokenChangeKind): TokenChanged {
    const found = this.agent(agent);
    this.core.requireMe();
    this.core.changed({ agents: true });
    if (action === "revoke") {
      found.state = "stopped";
      found.detail = "Token revoked: onboard it again to give it a new one.";
      return { agent: found.handle, revoked: true, saved_in: null, token: null };
    }
    // Onboarded here: its profile takes the new token. Otherwise the token is handed back
    // once, for wherever the agent runs.
    if (found.cli !== null) {
      return { agent: found.handle, revoked: false, saved_in: found.handle.replaceAll("/", "."), token: null };
    }
    return { agent: found.handle, revoked: false, saved_in: null, token: `rt_fake_${found.name}_${this.core.freshId()}` };
  }

  private profilePath(handle: string): string {
    return `~/.config/roundtable/agents/${handle.replace("/", "_")}.toml`;
  }

  private detectedCli(cli: AgentCli): Detected {
    const found = this.core.world.detected.find((candidate) => candidate.cli === cli);
    if (!found) throw new BackendError("not_found", `${cli} is not installed on this machine. Install it, then scan again.`);
    return found;
  }

  private agent(id: string): AgentView {
    const found = this.core.world.agents.find((agent) => agent.id === id);
    if (!found) throw new BackendError("not_found", "This agent is gone. Refresh the Agents view.");
    return found;
  }
}
