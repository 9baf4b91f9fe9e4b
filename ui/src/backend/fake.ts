/**
 * An in-memory `Backend`: unit tests drive the view models with it, and `npm run dev` in a
 * plain browser (no Tauri) runs the whole UI on it.
 *
 * It behaves like the core where the UI can tell: it returns copies (a model that mutates
 * what it got cannot change the world), it pages messages as `room_messages` does, it emits
 * `CoreChanged` after every write, and it refuses what the hub refuses with an `ErrorReport`
 * code. Tests reach into `world` to set up a case and use `emitChanged`, `emitOpenTarget`
 * and `failNext` to play the core's part.
 *
 * What the core decides about what a person types (agent names, invite codes and terms,
 * budgets, links, hub addresses) is not decided here: `fake-rules.ts` reads the core's own
 * verdicts. What the hub decides (consent, who may request or answer whom, what is a
 * conflict) needs a hub to decide, so it stays here, as little of it as the views need, and
 * the contract's scenarios (contract/scenarios.json) hold it to the real app's answers.
 */
import type {
  AgentCli,
  AgentControl,
  AgentView,
  AppState,
  ArchitectureBoard,
  Budget,
  BudgetBoard,
  BudgetPeriod,
  BudgetScope,
  BudgetState,
  ComponentChange,
  ContactsScreen,
  CostBoard,
  CoreChanged,
  Detected,
  DirectoryView,
  InviteCreated,
  InviteView,
  MemberView,
  MentionView,
  OpenTarget,
  PingView,
  Redeemed,
  RemoteLogin,
  Report,
  RoomDigest,
  RoomMessage,
  RoomView,
  SessionView,
  TaskBoard,
  TokenChangeKind,
  TokenChanged,
  WatchState,
} from "../bindings";
import { type AnyCode, BackendError, type Backend, type Unsubscribe } from "./backend";
import {
  agentNameVerdict,
  budgetLevel,
  budgetVerdict,
  decided,
  hubAddressVerdict,
  INVITE_DEFAULT_EXPIRY_S,
  inviteCodeVerdict,
  inviteTermsVerdict,
  linkVerdict,
  periodStart,
} from "./fake-rules";
import { DANA, EMBEDDED_HUB, NETWORK_HUB, emptyWorld, isSupported, member, type FakeRoom, type FakeWorld } from "./fake-world";

export type FakeOptions = {
  world?: FakeWorld;
  now?: () => number;
  /**
   * When given, mentioned agents act: their delivery state moves on and they reply, each
   * step after a delay. The dev server passes `setTimeout`; tests leave it out so nothing
   * happens behind their back.
   */
  schedule?: (step: () => void, delayMs: number) => void;
};

type CommandName = Exclude<keyof Backend, "onChanged" | "onOpenTarget">;

const NO_CHANGE: CoreChanged = {
  rooms: false,
  messages: [],
  pings: false,
  contacts: false,
  agents: false,
  sync: false,
  work: false,
  scan: false,
  everything: false,
};

const MENTION = /@([a-z0-9_\-/]+)/g;

function copy<T>(value: T): T {
  return structuredClone(value);
}

export class FakeBackend implements Backend {
  readonly world: FakeWorld;
  /** Every command called, in order, with its arguments. */
  readonly calls: { command: CommandName; args: unknown[] }[] = [];

  private readonly now: () => number;
  private readonly schedule: FakeOptions["schedule"];
  private readonly changeListeners = new Set<(change: CoreChanged) => void>();
  private readonly targetListeners = new Set<(target: OpenTarget) => void>();
  private readonly failures = new Map<CommandName, BackendError>();
  private nextId = 1;
  private nextOutbox = 100;
  /** Codes the hub refuses with `conflict` (one's own invite, one used up), and why. */
  private readonly refusedCodes = new Map<string, string>();
  /** Every invite this person made, withdrawn or not. */
  private readonly inviteIds = new Set<string>();

  constructor(options: FakeOptions = {}) {
    this.world = options.world ?? emptyWorld();
    this.now = options.now ?? (() => Date.now());
    this.schedule = options.schedule;
  }

  // ---- test controls -------------------------------------------------------------------

  /** The next call of `command` throws `BackendError(code, message)` instead of running. */
  failNext(command: CommandName, code: AnyCode, message: string): void {
    this.failures.set(command, new BackendError(code, message));
  }

  emitChanged(change: Partial<CoreChanged>): void {
    const full = { ...NO_CHANGE, ...change };
    for (const listener of this.changeListeners) listener(full);
  }

  emitOpenTarget(target: OpenTarget): void {
    for (const listener of this.targetListeners) listener(target);
  }

  onChanged(listener: (change: CoreChanged) => void): Unsubscribe {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  onOpenTarget(listener: (target: OpenTarget) => void): Unsubscribe {
    this.targetListeners.add(listener);
    return () => this.targetListeners.delete(listener);
  }

  // ---- commands ------------------------------------------------------------------------

  async appState(): Promise<AppState> {
    this.enter("appState", []);
    const me = this.world.me;
    return copy({
      me,
      hub_mode: this.world.hub_mode,
      hub_address: this.world.hub_address,
      network_address: this.world.hub_mode === "embedded" ? this.world.network_address : null,
      sync: this.world.sync,
      hub_failure: this.world.hub_mode === "embedded" ? this.world.hub_failure : null,
      open_pings: this.world.pings.filter((ping) => this.isOpenForMe(ping)).length,
      version: this.world.version,
    });
  }

  async detectAgents(): Promise<Detected[]> {
    this.enter("detectAgents", []);
    return copy(this.world.detected);
  }

  async onboardAgent(cli: AgentCli, name: string, project: string | null): Promise<Report> {
    this.enter("onboardAgent", [cli, name, project]);
    // In the core's order: the CLI must be one Roundtable supports, then the name is checked
    // (as the core says: fake-rules.ts), before anything is looked up.
    if (!isSupported(cli)) throw new BackendError("invalid", `${cli} is not supported yet.`);
    name = name.trim();
    decided(agentNameVerdict(name));
    const detected = this.detectedCli(cli);
    const me = this.requireMe();
    const handle = `${me.handle}/${name}`;
    if (detected.onboarded && detected.handle === handle) {
      return { cli, handle, profile: this.profilePath(handle), unchanged: true, changes: [] };
    }
    detected.onboarded = true;
    detected.handle = handle;
    const id = `agent-${this.freshId()}`;
    this.world.agents.push({
      id,
      handle,
      name,
      cli,
      state: "idle",
      detail: null,
      room: null,
      since_ms: this.now(),
      controls: [],
    });
    this.world.directory.push({ id, kind: "agent", handle, name, description: detected.name, owner: me.id, contact: "kin" });
    this.changed({ agents: true });
    return copy({
      cli,
      handle,
      profile: this.profilePath(handle),
      unchanged: false,
      changes: detected.config.map((path) => ({
        path,
        added: [`"roundtable": { "command": "roundtable", "args": ["mcp", "--agent", "${handle}"] }`],
        removed: [],
        backup: `${path}.roundtable-backup`,
      })),
    });
  }

  async offboardAgent(cli: AgentCli, handle: string): Promise<Report> {
    this.enter("offboardAgent", [cli, handle]);
    const detected = this.world.detected.find((candidate) => candidate.cli === cli);
    if (!detected || !detected.onboarded || detected.handle !== handle) {
      // As the core does: nothing recorded for this agent on this CLI, nothing to undo.
      return { cli, handle, profile: handle.replace("/", "."), unchanged: true, changes: [] };
    }
    detected.onboarded = false;
    detected.handle = null;
    this.world.agents = this.world.agents.filter((agent) => agent.handle !== handle);
    this.changed({ agents: true });
    return copy({
      cli,
      handle,
      profile: this.profilePath(handle),
      unchanged: false,
      changes: detected.config.map((path) => ({
        path,
        added: [],
        removed: [`"roundtable": { "command": "roundtable", "args": ["mcp", "--agent", "${handle}"] }`],
        backup: `${path}.roundtable-backup`,
      })),
    });
  }

  async rooms(): Promise<RoomView[]> {
    this.enter("rooms", []);
    return this.world.rooms.map((room) => this.roomView(room));
  }

  async roomMessages(room: string, beforeSeq: number | null, limit: number): Promise<RoomMessage[]> {
    this.enter("roomMessages", [room, beforeSeq, limit]);
    const found = this.room(room);
    const stored = found.messages.filter((message) => message.seq !== null);
    const below = beforeSeq === null ? stored : stored.filter((message) => message.seq! < beforeSeq);
    const page = below.slice(Math.max(0, below.length - limit));
    const pending = beforeSeq === null ? found.messages.filter((message) => message.seq === null) : [];
    return copy([...page, ...pending]);
  }

  async sendMessage(room: string, text: string): Promise<null> {
    this.enter("sendMessage", [room, text]);
    if (text.trim() === "") throw new BackendError("invalid", "Write something first: the message is empty.");
    const found = this.room(room);
    const me = this.requireMe();
    const mentioned = this.mentionedMembers(found, text);
    const mentionStates: MentionView[] = mentioned
      .filter((member) => member.kind === "agent")
      .map((member) => ({ principal: member.id, handle: member.handle, state: "queued" }));
    const offline = this.world.sync.state === "offline";
    const message: RoomMessage = {
      room,
      seq: offline ? null : this.head(found) + 1,
      id: offline ? null : `${room}-m${this.freshId()}`,
      ts_ms: this.now(),
      from: me.id,
      from_handle: me.handle,
      from_kind: "user",
      text,
      mentions: mentioned.map((member) => member.id),
      reply_to: null,
      delivery: offline ? "queued" : "stored",
      error: null,
      outbox: offline ? this.nextOutbox++ : null,
      mention_states: offline ? mentionStates : mentionStates.map((state) => ({ ...state, state: "sent" })),
    };
    if (offline) found.messages.push(message);
    else this.insertStored(found, message);
    if (message.seq !== null) found.read_to = message.seq;
    this.changed({ messages: [room], rooms: true });
    if (!offline) this.actOnMentions(found, message);
    return null;
  }

  async createRoom(title: string, members: string[]): Promise<string> {
    this.enter("createRoom", [title, members]);
    const me = this.requireMe();
    const id = `room-${this.freshId()}`;
    const resolved = members.filter((handle) => handle !== me.handle).map((handle) => this.reachable(handle));
    this.world.rooms.push({
      id,
      title: title.trim() === "" ? null : title.trim(),
      topic: null,
      creator: me.id,
      members: [member(me.id, me.handle, "user"), ...resolved],
      read_to: 0,
      messages: [],
    });
    this.changed({ rooms: true });
    return id;
  }

  async inviteToRoom(room: string, handle: string): Promise<null> {
    this.enter("inviteToRoom", [room, handle]);
    const found = this.room(room);
    const invited = this.reachable(handle.replace(/^@/, ""));
    // As the hub does: inviting a member again changes nothing and is no error.
    if (found.members.some((member) => member.id === invited.id)) return null;
    found.members.push(invited);
    this.changed({ rooms: true });
    return null;
  }

  async markRead(room: string, seq: number): Promise<null> {
    this.enter("markRead", [room, seq]);
    const found = this.room(room);
    found.read_to = Math.max(found.read_to, Math.min(seq, this.head(found)));
    this.changed({ rooms: true });
    return null;
  }

  async directory(query: string): Promise<DirectoryView[]> {
    this.enter("directory", [query]);
    const needle = query.trim().toLowerCase();
    return copy(
      this.world.directory.filter(
        (entry) => needle === "" || entry.handle.includes(needle) || entry.name.toLowerCase().includes(needle),
      ),
    );
  }

  async pings(all: boolean): Promise<PingView[]> {
    this.enter("pings", [all]);
    return copy(all ? this.world.pings : this.world.pings.filter((ping) => this.isOpenForMe(ping)));
  }

  async answerPing(room: string, ping: string, choice: string | null, text: string | null): Promise<null> {
    this.enter("answerPing", [room, ping, choice, text]);
    if (choice === null && (text === null || text.trim() === "")) {
      throw new BackendError("invalid", "Pick an option or write an answer.");
    }
    const found = this.world.pings.find((candidate) => candidate.room === room && candidate.ping === ping);
    if (!found) throw new BackendError("not_found", "This question no longer exists.");
    if (found.state === "answered") {
      throw new BackendError("conflict", `Already answered by ${found.answered_by_handle ?? "someone else"}.`);
    }
    if (found.state === "expired") throw new BackendError("conflict", "This question expired; the agent went on without an answer.");
    if (choice !== null && !found.options.includes(choice)) {
      throw new BackendError("invalid", `${choice} is not one of the question's options.`);
    }
    const me = this.requireMe();
    Object.assign(found, {
      state: "answered",
      answered_by: me.id,
      answered_by_handle: me.handle,
      answered_ms: this.now(),
      choice,
      text,
    } satisfies Partial<PingView>);
    for (const agent of this.world.agents) {
      if (agent.id === found.asker && agent.state === "waiting_human") {
        agent.state = "working";
        agent.detail = null;
      }
    }
    this.changed({ pings: true, agents: true });
    return null;
  }

  async contacts(): Promise<ContactsScreen> {
    this.enter("contacts", []);
    return copy({ contacts: this.world.contacts, requests: this.world.requests });
  }

  async requestContact(handle: string, message: string | null): Promise<null> {
    this.enter("requestContact", [handle, message]);
    // The hub's rules (hub/src/engine/contacts.rs), held to it by the contract's consent
    // scenario: not oneself, someone who exists, not a contact already, one request at a time.
    const me = this.requireMe();
    if (handle === me.handle) throw new BackendError("conflict", "That is you: you need no contact request.");
    const entry = this.world.directory.find((candidate) => candidate.handle === handle);
    if (!entry) throw new BackendError("not_found", `No one is called ${handle} on this hub. Check the spelling.`);
    if (entry.contact === "accepted" || entry.contact === "kin") {
      throw new BackendError("conflict", `${handle} is already a contact.`);
    }
    if (entry.contact === "pending_out" || entry.contact === "pending_in") {
      throw new BackendError("conflict", `A contact request between you and ${handle} is already waiting.`);
    }
    entry.contact = "pending_out";
    this.world.requests.push({
      id: `request-${this.freshId()}`,
      from: me.id,
      from_handle: me.handle,
      to: entry.id,
      to_handle: entry.handle,
      state: "pending",
      message,
      ts_ms: this.now(),
      incoming: false,
    });
    this.changed({ contacts: true });
    return null;
  }

  async respondContact(request: string, accept: boolean): Promise<null> {
    this.enter("respondContact", [request, accept]);
    const found = this.world.requests.find((candidate) => candidate.id === request);
    if (!found) throw new BackendError("not_found", "This request no longer exists.");
    // As the hub does: who may decide first, then whether it is still to decide.
    if (!found.incoming && accept) throw new BackendError("forbidden", `Only ${found.to_handle} can accept this request.`);
    if (found.state !== "pending") throw new BackendError("conflict", `This request was already ${found.state}.`);
    if (!found.incoming) {
      // One's own request can be withdrawn, never accepted.
      found.state = "cancelled";
      const entry = this.world.directory.find((candidate) => candidate.id === found.to);
      if (entry) entry.contact = "none";
      this.changed({ contacts: true });
      return null;
    }
    found.state = accept ? "accepted" : "rejected";
    const entry = this.world.directory.find((candidate) => candidate.id === found.from);
    if (entry) entry.contact = accept ? "accepted" : "none";
    if (accept) {
      this.world.contacts.push({
        principal: found.from,
        handle: found.from_handle,
        name: entry?.name ?? null,
        kind: entry?.kind ?? null,
        since_ms: this.now(),
      });
    }
    this.changed({ contacts: true });
    return null;
  }

  async createInvite(room: string | null, uses: number | null, expiresHours: number | null): Promise<InviteCreated> {
    this.enter("createInvite", [room, uses, expiresHours]);
    // As the app does: the terms are the core's to check (in seconds), the room the hub's.
    decided(inviteTermsVerdict(uses, expiresHours === null ? null : expiresHours * 3_600));
    if (room !== null) this.room(room);
    const id = `invite-${this.freshId()}`;
    const code = `CODE${this.nextId * 7919}`;
    const now = this.now();
    this.world.invites.push({
      id,
      room,
      // The hub's default: one use (held to it by the contract's invite scenario).
      uses_left: uses ?? 1,
      expires_at: new Date(now + (expiresHours === null ? INVITE_DEFAULT_EXPIRY_S : expiresHours * 3_600) * 1_000).toISOString(),
      created_at: new Date(now).toISOString(),
    });
    this.refusedCodes.set(code, "This is your own invite: send it to the teammate you made it for.");
    this.inviteIds.add(id);
    this.changed({ contacts: true });
    return { code, link: `roundtable://invite/${code}?hub=${this.inviteHub()}`, invite: id };
  }

  async invites(): Promise<InviteView[]> {
    this.enter("invites", []);
    return copy(this.world.invites);
  }

  async revokeInvite(invite: string): Promise<null> {
    this.enter("revokeInvite", [invite]);
    if (invite.trim() === "") throw new BackendError("invalid", "Name the invite to withdraw.");
    const known = this.inviteIds.has(invite) || this.world.invites.some((candidate) => candidate.id === invite);
    if (!known) throw new BackendError("not_found", "There is no such invite.");
    this.inviteIds.add(invite);
    // As the hub does: withdrawing an invite twice is no error.
    this.world.invites = this.world.invites.filter((candidate) => candidate.id !== invite);
    this.changed({ contacts: true });
    return null;
  }

  async redeemInvite(codeOrLink: string): Promise<Redeemed> {
    this.enter("redeemInvite", [codeOrLink]);
    const code = decided(inviteCodeVerdict(codeOrLink));
    const refused = this.refusedCodes.get(code);
    if (refused !== undefined) throw new BackendError("conflict", refused);
    const invite = this.world.redeemable[code];
    if (!invite) {
      throw new BackendError("not_found", "This invite is unknown, used up or expired. Ask for a new link.");
    }
    const me = this.requireMe();
    delete this.world.redeemable[code];
    this.refusedCodes.set(code, "This invite was used up. Ask for a new link.");
    // As the hub does: the redeemer and the creator become contacts (unless they are), and
    // the redeemer joins the invite's room (unless a member).
    const creator = this.world.directory.find((candidate) => candidate.id === invite.creator);
    if (creator && creator.contact !== "kin" && creator.contact !== "accepted") {
      creator.contact = "accepted";
      this.world.contacts.push({
        principal: creator.id,
        handle: creator.handle,
        name: creator.name,
        kind: creator.kind,
        since_ms: this.now(),
      });
    }
    const room = invite.room === null ? null : this.room(invite.room);
    if (room && !room.members.some((candidate) => candidate.id === me.id)) {
      room.members.push(member(me.id, me.handle, "user"));
    }
    this.changed({ contacts: true, rooms: room !== null });
    return { room: invite.room } satisfies Redeemed;
  }

  async agents(): Promise<AgentView[]> {
    this.enter("agents", []);
    return copy(this.world.agents);
  }

  async controlAgent(agent: string, action: AgentControl, room: string | null): Promise<null> {
    this.enter("controlAgent", [agent, action, room]);
    const found = this.agent(agent);
    const me = this.requireMe();
    if (room !== null) this.room(room);
    // As the core records it: one control per room (null: everywhere); a resume lifts what
    // it covers, everywhere lifts them all.
    // One control per room: everywhere replaces the everywhere one (a resume everywhere lifts all).
    const others =
      room === null
        ? action === "resume"
          ? []
          : found.controls.filter((control) => control.room !== null)
        : found.controls.filter((control) => control.room !== room);
    found.controls = action === "resume" ? others : [...others, { room, action, by: me.id, seq: this.nextId++, reason: null }];
    const inForce = (at: string | null) =>
      [...new Set(found.controls.filter((control) => control.room === null || control.room === at).map((control) => control.action))].sort();
    found.state = found.controls.some((control) => control.action === "stop" && control.room === null)
      ? "stopped"
      : found.state === "stopped"
        ? "idle"
        : found.state;
    for (const session of this.world.boards.sessions) {
      if (session.agent !== agent) continue;
      session.controls = inForce(session.bound_room);
      if (session.controls.includes("stop")) session.state = "stopped";
      else if (session.state === "stopped") session.state = "idle";
    }
    this.changed({ agents: true });
    return null;
  }

  async agentToken(agent: string, action: TokenChangeKind): Promise<TokenChanged> {
    this.enter("agentToken", [agent, action]);
    const found = this.agent(agent);
    this.requireMe();
    this.changed({ agents: true });
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
    return { agent: found.handle, revoked: false, saved_in: null, token: `rt_fake_${found.name}_${this.freshId()}` };
  }

  async taskBoard(): Promise<TaskBoard> {
    this.enter("taskBoard", []);
    return copy({ lanes: this.world.boards.tasks });
  }

  async architecture(): Promise<ArchitectureBoard[]> {
    this.enter("architecture", []);
    return copy(this.world.boards.architecture);
  }

  async componentHistory(room: string, component: string): Promise<ComponentChange[]> {
    this.enter("componentHistory", [room, component]);
    return copy(this.world.boards.componentHistory[`${room}/${component}`] ?? []);
  }

  async costs(sinceMs: number | null): Promise<CostBoard> {
    this.enter("costs", [sinceMs]);
    const me = this.requireMe();
    const rows = this.world.boards.costs.filter((row) => sinceMs === null || row.latest_ms >= sinceMs);
    return copy({ me: me.handle, since_ms: sinceMs, rows });
  }

  async budgets(): Promise<BudgetBoard> {
    this.enter("budgets", []);
    this.requireMe();
    const now = this.now();
    const states: BudgetState[] = this.world.budgets.map((budget) => {
      // As the core counts: the period's rows (UTC days from its first) of the budget's scope.
      const start = periodStart(budget.period, now);
      const rows = this.world.boards.costs.filter(
        (row) =>
          row.day >= start &&
          (budget.scope === "agent" ? row.agent === budget.name : budget.scope === "person" ? row.person === budget.name : row.teams.includes(budget.name)),
      );
      const byAgent = new Map<string, number>();
      for (const row of rows) byAgent.set(row.agent, (byAgent.get(row.agent) ?? 0) + (row.cost_usd ?? 0));
      const spent = rows.reduce((sum, row) => sum + (row.cost_usd ?? 0), 0);
      const share = spent / (budget.usd ?? Number.NaN);
      return {
        budget: { ...budget },
        period_start: start,
        spent_usd: spent,
        share,
        level: budgetLevel(share),
        unpriced_entries: rows.reduce((sum, row) => sum + row.unpriced_entries, 0),
        agents: [...byAgent.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([agent]) => agent),
      };
    });
    return copy({ states, alerts: [] });
  }

  async setBudget(budget: Budget): Promise<Budget> {
    this.enter("setBudget", [budget]);
    const me = this.requireMe();
    const kept = decided(budgetVerdict(budget, me.handle));
    this.world.budgets = [
      ...this.world.budgets.filter((other) => !(other.scope === kept.scope && other.name === kept.name && other.period === kept.period)),
      kept,
    ].sort((a, b) => a.scope.localeCompare(b.scope) || a.name.localeCompare(b.name) || a.period.localeCompare(b.period));
    this.changed({ work: true, agents: true });
    return copy(kept);
  }

  async removeBudget(scope: BudgetScope, name: string, period: BudgetPeriod): Promise<null> {
    this.enter("removeBudget", [scope, name, period]);
    this.requireMe();
    const before = this.world.budgets.length;
    this.world.budgets = this.world.budgets.filter((other) => !(other.scope === scope && other.name === name.trim() && other.period === period));
    if (this.world.budgets.length === before) {
      throw new BackendError("not_found", `There is no budget for ${scope} ${name}; it may have been removed.`);
    }
    this.changed({ work: true, agents: true });
    return null;
  }

  async sessions(): Promise<SessionView[]> {
    this.enter("sessions", []);
    return copy(this.world.boards.sessions);
  }

  /** As the core: the stored digests, with the questions waiting for me in each room. */
  async away(): Promise<RoomDigest[]> {
    this.enter("away", []);
    const digests = this.world.boards.away.map((digest) => ({
      ...digest,
      pings_waiting: this.world.pings.filter((ping) => ping.room === digest.room && this.isOpenForMe(ping)),
    }));
    return copy(digests);
  }

  async markLooked(): Promise<null> {
    this.enter("markLooked", []);
    this.world.boards.away = [];
    return null;
  }

  async workScan(): Promise<WatchState> {
    this.enter("workScan", []);
    return copy(this.world.boards.scan);
  }

  async connectRemote(address: string, how: RemoteLogin, insecure: boolean): Promise<AppState> {
    this.enter("connectRemote", [address, how, insecure]);
    // In the app's order: an invite's code, then the address (and whether it may go without
    // TLS), both as the core reads them; then the hub is asked.
    if (how.kind === "invite") decided(inviteCodeVerdict(how.code));
    decided(hubAddressVerdict(address, insecure));
    this.world.hub_mode = "remote";
    this.world.hub_address = address.trim();
    if (how.kind === "token") this.world.me = { ...DANA };
    else this.world.me = { id: `u-${how.handle}`, handle: how.handle, name: how.name };
    // As the desktop shell does when the session switches hubs.
    this.changed({ sync: true, everything: true });
    return this.appState();
  }

  async useEmbedded(): Promise<AppState> {
    this.enter("useEmbedded", []);
    this.world.hub_mode = "embedded";
    this.world.hub_address = EMBEDDED_HUB;
    this.world.me = { ...DANA };
    if (this.world.hub_failure !== null) {
      // A hub that failed starts again, over the same data, and the new session syncs.
      this.world.hub_failure = null;
      this.world.sync = { state: "idle", detail: null };
    }
    // As the desktop shell does when the session switches hubs.
    this.changed({ sync: true, everything: true });
    return this.appState();
  }

  async shareOnNetwork(on: boolean): Promise<AppState> {
    this.enter("shareOnNetwork", [on]);
    if (this.world.hub_mode !== "embedded") {
      throw new BackendError("invalid", "Only the app's own hub lets teammates in: use the embedded hub first.");
    }
    this.world.network_address = on ? NETWORK_HUB : null;
    // The hub restarts: as the desktop shell does when the session switches.
    this.changed({ sync: true, everything: true });
    return this.appState();
  }

  async takeStartTarget(): Promise<OpenTarget | null> {
    this.enter("takeStartTarget", []);
    const target = this.world.startTarget;
    this.world.startTarget = null;
    return copy(target);
  }

  async openLink(url: string): Promise<void> {
    this.enter("openLink", [url]);
    // As the core does: only web and mail links leave the app, as it normalizes them.
    this.world.openedLinks.push(decided(linkVerdict(url)));
  }

  // ---- internals -----------------------------------------------------------------------

  /** Where invite links send teammates: as the hub's public address names it. */
  private inviteHub(): string {
    if (this.world.hub_mode === "embedded" && this.world.network_address !== null) return this.world.network_address;
    return this.world.hub_address;
  }

  private enter(command: CommandName, args: unknown[]): void {
    this.calls.push({ command, args });
    const failure = this.failures.get(command);
    if (failure) {
      this.failures.delete(command);
      throw failure;
    }
  }

  /** Announces a write the way the core does: after the command has returned. */
  private changed(change: Partial<CoreChanged>): void {
    queueMicrotask(() => this.emitChanged(change));
  }

  private freshId(): number {
    return this.nextId++;
  }

  private requireMe() {
    const me = this.world.me;
    if (!me) throw new BackendError("profile", "Connect to a hub in Settings first.");
    return me;
  }

  private profilePath(handle: string): string {
    return `~/.config/roundtable/agents/${handle.replace("/", "_")}.toml`;
  }

  private detectedCli(cli: AgentCli): Detected {
    const found = this.world.detected.find((candidate) => candidate.cli === cli);
    if (!found) throw new BackendError("not_found", `${cli} is not installed on this machine. Install it, then scan again.`);
    return found;
  }

  private room(id: string): FakeRoom {
    const found = this.world.rooms.find((room) => room.id === id);
    if (!found) throw new BackendError("not_found", "This room does not exist or you are no longer a member.");
    return found;
  }

  private agent(id: string): AgentView {
    const found = this.world.agents.find((agent) => agent.id === id);
    if (!found) throw new BackendError("not_found", "This agent is gone. Refresh the Agents view.");
    return found;
  }

  /**
   * A member for `handle`, if I may bring them in: mine, or a contact (the hub's consent rule,
   * held to it by the contract's consent scenario).
   */
  private reachable(handle: string): MemberView {
    const entry = this.world.directory.find((candidate) => candidate.handle === handle);
    if (!entry) throw new BackendError("not_found", `No one is called ${handle} on this hub. Check the spelling.`);
    if (entry.contact !== "kin" && entry.contact !== "accepted") {
      throw new BackendError(
        "no_consent",
        `${handle} is not a contact yet. Send a contact request from Contacts, or share an invite link.`,
      );
    }
    return member(entry.id, entry.handle, entry.kind === "agent" ? "agent" : "user");
  }

  private head(room: FakeRoom): number {
    let head = 0;
    for (const message of room.messages) if (message.seq !== null && message.seq > head) head = message.seq;
    return head;
  }

  private insertStored(room: FakeRoom, message: RoomMessage): void {
    const firstPending = room.messages.findIndex((candidate) => candidate.seq === null);
    if (firstPending === -1) room.messages.push(message);
    else room.messages.splice(firstPending, 0, message);
  }

  private roomView(room: FakeRoom): RoomView {
    const me = this.world.me;
    let unread = 0;
    let unreadMentions = 0;
    for (const message of room.messages) {
      if (message.seq === null || message.seq <= room.read_to || message.from === me?.id) continue;
      unread += 1;
      if (me && message.mentions.includes(me.id)) unreadMentions += 1;
    }
    return copy({
      id: room.id,
      title: room.title,
      topic: room.topic,
      creator: room.creator,
      head: this.head(room),
      members: room.members,
      read_to: room.read_to,
      unread,
      unread_mentions: unreadMentions,
    });
  }

  private mentionedMembers(room: FakeRoom, text: string): MemberView[] {
    const found: MemberView[] = [];
    for (const match of text.matchAll(MENTION)) {
      const candidate = room.members.find((member) => member.handle === match[1]);
      if (candidate && !found.includes(candidate)) found.push(candidate);
    }
    return found;
  }

  private isOpenForMe(ping: PingView): boolean {
    const me = this.world.me;
    return ping.state === "open" && me !== null && ping.recipients.includes(me.id);
  }

  /** Plays the mentioned agents: delivered, working, a reply, done. */
  private actOnMentions(room: FakeRoom, message: RoomMessage): void {
    const schedule = this.schedule;
    if (!schedule || message.mention_states.length === 0) return;
    const advance = (state: MentionView["state"]) => {
      for (const mention of message.mention_states) mention.state = state;
      this.changed({ messages: [room.id] });
    };
    schedule(() => advance("delivered"), 600);
    schedule(() => advance("working"), 1_400);
    schedule(() => {
      for (const mention of message.mention_states) {
        const author = room.members.find((member) => member.id === mention.principal);
        if (!author) continue;
        this.insertStored(
          room,
          {
            ...message,
            seq: this.head(room) + 1,
            id: `${room.id}-m${this.freshId()}`,
            ts_ms: this.now(),
            from: author.id,
            from_handle: author.handle,
            from_kind: "agent",
            text: `@${message.from_handle} on it: "${message.text.slice(0, 60)}"`,
            mentions: [message.from],
            mention_states: [],
          },
        );
      }
      advance("done");
      this.changed({ rooms: true });
    }, 3_000);
  }
}
