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
 * conflict) needs a hub to decide, so it stays in the fake, as little of it as the views
 * need, and the contract's scenarios (contract/scenarios.json) hold it to the real app's
 * answers.
 *
 * This file is the `Backend` itself, the app and its hub, rooms, questions and boards. Two
 * sides live beside it, each handed the same world, clock and ids (`FakeCore`, in
 * fake-core.ts): the people (directory, contacts, invites, and the hub's consent) in
 * fake-people.ts, the agents (onboarding, controls, tokens) in fake-agents.ts. Every
 * command still enters here, so `calls` and `failNext` see them all.
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
  Me,
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
import { FakeAgents } from "./fake-agents";
import { copy, type FakeCore } from "./fake-core";
import { FakePeople } from "./fake-people";
import { budgetLevel, budgetVerdict, decided, hubAddressVerdict, inviteCodeVerdict, linkVerdict, periodStart } from "./fake-rules";
import { DANA, EMBEDDED_HUB, NETWORK_HUB, emptyWorld, member, type FakeRoom, type FakeWorld } from "./fake-world";

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
  /** The directory, contacts and invites, with the hub's consent (fake-people.ts). */
  private readonly people: FakePeople;
  /** The agent CLIs found, the person's agents, their controls and tokens (fake-agents.ts). */
  private readonly myAgents: FakeAgents;

  constructor(options: FakeOptions = {}) {
    this.world = options.world ?? emptyWorld();
    this.now = options.now ?? (() => Date.now());
    this.schedule = options.schedule;
    const core: FakeCore = {
      world: this.world,
      now: () => this.now(),
      freshId: () => this.freshId(),
      changed: (change) => this.changed(change),
      requireMe: () => this.requireMe(),
      room: (id) => this.room(id),
    };
    this.people = new FakePeople(core);
    this.myAgents = new FakeAgents(core);
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
    return this.myAgents.detectAgents();
  }

  async onboardAgent(cli: AgentCli, name: string, project: string | null): Promise<Report> {
    this.enter("onboardAgent", [cli, name, project]);
    return this.myAgents.onboardAgent(cli, name);
  }

  async offboardAgent(cli: AgentCli, handle: string): Promise<Report> {
    this.enter("offboardAgent", [cli, handle]);
    return this.myAgents.offboardAgent(cli, handle);
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
    const resolved = members.filter((handle) => handle !== me.handle).map((handle) => this.people.reachable(handle));
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
    const invited = this.people.reachable(handle.replace(/^@/, ""));
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
    return this.people.directory(query);
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
    return this.people.contacts();
  }

  async requestContact(handle: string, message: string | null): Promise<null> {
    this.enter("requestContact", [handle, message]);
    return this.people.requestContact(handle, message);
  }

  async respondContact(request: string, accept: boolean): Promise<null> {
    this.enter("respondContact", [request, accept]);
    return this.people.respondContact(request, accept);
  }

  async createInvite(room: string | null, uses: number | null, expiresHours: number | null): Promise<InviteCreated> {
    this.enter("createInvite", [room, uses, expiresHours]);
    return this.people.createInvite(room, uses, expiresHours);
  }

  async invites(): Promise<InviteView[]> {
    this.enter("invites", []);
    return this.people.invites();
  }

  async revokeInvite(invite: string): Promise<null> {
    this.enter("revokeInvite", [invite]);
    return this.people.revokeInvite(invite);
  }

  async redeemInvite(codeOrLink: string): Promise<Redeemed> {
    this.enter("redeemInvite", [codeOrLink]);
    return this.people.redeemInvite(codeOrLink);
  }

  async agents(): Promise<AgentView[]> {
    this.enter("agents", []);
    return this.myAgents.agents();
  }

  async controlAgent(agent: string, action: AgentControl, room: string | null): Promise<null> {
    this.enter("controlAgent", [agent, action, room]);
    return this.myAgents.controlAgent(agent, action, room);
  }

  async agentToken(agent: string, action: TokenChangeKind): Promise<TokenChanged> {
    this.enter("agentToken", [agent, action]);
    return this.myAgents.agentToken(agent, action);
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

  private requireMe(): Me {
    const me = this.world.me;
    if (!me) throw new BackendError("profile", "Connect to a hub in Settings first.");
    return me;
  }

  private room(id: string): FakeRoom {
    const found = this.world.rooms.find((room) => room.id === id);
    if (!found) throw new BackendError("not_found", "This room does not exist or you are no longer a member.");
    return found;
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
