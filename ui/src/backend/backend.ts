/**
 * The one seam between the UI and whatever answers its questions.
 *
 * Views and models never call Tauri: they hold a `Backend`. In the desktop app it is
 * `tauriBackend()` (the generated bindings); in unit tests and in a plain browser it is the
 * in-memory `FakeBackend`. Each method mirrors one command of src-tauri/src/commands.rs
 * (generated into `../bindings`), but returns the data itself and throws a `BackendError`
 * instead of handing back a `Result`, so callers write ordinary `try`/`await` code and can
 * switch on a stable `code`. (`startedAtMs` is left out: only the desktop benchmark reads it.)
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
  ComponentChange,
  CostBoard,
  ContactsScreen,
  CoreChanged,
  Detected,
  DirectoryView,
  ErrorReport,
  ReportCode,
  InviteCreated,
  InviteView,
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

/** Stops a subscription. Safe to call more than once. */
export type Unsubscribe = () => void;

export interface Backend {
  appState(): Promise<AppState>;

  detectAgents(): Promise<Detected[]>;
  onboardAgent(cli: AgentCli, name: string, project: string | null): Promise<Report>;
  offboardAgent(cli: AgentCli, handle: string): Promise<Report>;

  rooms(): Promise<RoomView[]>;
  /** Ascending seq, queued ones last; `beforeSeq` pages backwards. */
  roomMessages(room: string, beforeSeq: number | null, limit: number): Promise<RoomMessage[]>;
  sendMessage(room: string, text: string): Promise<null>;
  /** `members` are handles; returns the new room's id. */
  createRoom(title: string, members: string[]): Promise<string>;
  inviteToRoom(room: string, handle: string): Promise<null>;
  markRead(room: string, seq: number): Promise<null>;
  directory(query: string): Promise<DirectoryView[]>;

  /** `all: false` gives only the open pings waiting for me. */
  pings(all: boolean): Promise<PingView[]>;
  answerPing(room: string, ping: string, choice: string | null, text: string | null): Promise<null>;

  contacts(): Promise<ContactsScreen>;
  requestContact(handle: string, message: string | null): Promise<null>;
  respondContact(request: string, accept: boolean): Promise<null>;
  createInvite(room: string | null, uses: number | null, expiresHours: number | null): Promise<InviteCreated>;
  invites(): Promise<InviteView[]>;
  revokeInvite(invite: string): Promise<null>;
  redeemInvite(codeOrLink: string): Promise<Redeemed>;

  agents(): Promise<AgentView[]>;
  /** Everywhere, or in `room` only (a session's own room). */
  controlAgent(agent: string, action: AgentControl, room: string | null): Promise<null>;
  /** A rotated token is saved in the agent's profile here (`saved_in`), or handed back once (`token`). */
  agentToken(agent: string, action: TokenChangeKind): Promise<TokenChanged>;

  /** The tasks board: a lane per agent session. */
  taskBoard(): Promise<TaskBoard>;
  /** The architecture board of every room that has components. */
  architecture(): Promise<ArchitectureBoard[]>;
  /** What happened to one component of a room, oldest first. */
  componentHistory(room: string, component: string): Promise<ComponentChange[]>;
  /** Usage figures at their finest (room, day, agent, person, model), since `sinceMs`. */
  costs(sinceMs: number | null): Promise<CostBoard>;
  /** Budgets with their period's spend, and what keeping them did this period. */
  budgets(): Promise<BudgetBoard>;
  /** Sets a budget (an agent named alone is one of mine); gives it back as kept. */
  setBudget(budget: Budget): Promise<Budget>;
  removeBudget(scope: BudgetScope, name: string, period: BudgetPeriod): Promise<null>;
  /** Every agent session, "needs you" first. */
  sessions(): Promise<SessionView[]>;
  /** "While you were away": per room, what is new since the person last read it or looked. */
  away(): Promise<RoomDigest[]>;
  /** The person has seen everything up to now. */
  markLooked(): Promise<null>;
  /** Where the agent-log watcher is (its first pass over the logs shows progress). */
  workScan(): Promise<WatchState>;

  connectRemote(address: string, how: RemoteLogin, insecure: boolean): Promise<AppState>;
  useEmbedded(): Promise<AppState>;
  /** Lets teammates on the network reach the app's own hub (TLS, pinned), or stops letting them. */
  shareOnNetwork(on: boolean): Promise<AppState>;

  /** Where the window should go first (the `roundtable://` link the app was started with), once. */
  takeStartTarget(): Promise<OpenTarget | null>;

  /**
   * Opens a link from a message in the person's browser, after they confirmed it. Only
   * http, https and mailto links; anything else is refused (`invalid`).
   */
  openLink(url: string): Promise<void>;

  /** The core says what changed; subscribers refetch just that. */
  onChanged(listener: (change: CoreChanged) => void): Unsubscribe;
  /** A notification, the tray or a deep link asks to show something. */
  onOpenTarget(listener: (target: OpenTarget) => void): Unsubscribe;
}

/**
 * An `ErrorReport` as an exception. `code` is stable and meant for `switch`; `message` is for
 * people and already says what to do next.
 */
/** Codes the window raises itself: a form it will not send, a command the shell could not run. */
export type WindowCode = "invalid_input" | "ipc";

/** Every code an error shown in the window can have: the core's, and the window's own. */
export type AnyCode = ReportCode | WindowCode;

export class BackendError extends Error {
  readonly code: AnyCode;

  constructor(code: AnyCode, message: string) {
    super(message);
    this.name = "BackendError";
    this.code = code;
  }
}

/** Turns whatever a call threw into a `BackendError`, keeping the code when there is one. */
export function asBackendError(thrown: unknown): BackendError {
  if (thrown instanceof BackendError) return thrown;
  if (isErrorReport(thrown)) return new BackendError(thrown.code, thrown.message);
  // Tauri rejects with a bare string when the command is missing or its arguments do not
  // deserialize; the generated wrapper passes that string on as if it were an ErrorReport.
  if (typeof thrown === "string") return new BackendError("ipc", thrown);
  if (thrown instanceof Error) return new BackendError("internal", thrown.message);
  return new BackendError("internal", String(thrown));
}

function isErrorReport(value: unknown): value is ErrorReport {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as ErrorReport).code === "string" &&
    typeof (value as ErrorReport).message === "string"
  );
}
