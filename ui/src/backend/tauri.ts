/**
 * The `Backend` of the desktop app: the generated tauri-specta bindings, with each
 * `Result` unwrapped into a value or a thrown `BackendError`.
 *
 * This is the only file that imports values from `../bindings`; when src-tauri regenerates
 * that file, a changed command signature fails to type-check here and nowhere else.
 */
import { commands, events, type ErrorReport } from "../bindings";
import { asBackendError, type Backend, type Unsubscribe } from "./backend";

/** What every generated command but the infallible ones resolves to. */
type Reply<T> = { status: "ok"; data: T } | { status: "error"; error: ErrorReport };

/**
 * The generated wrapper turns a rejection of `invoke` into `{status: "error", error}` unless
 * it is an `Error` (which it rethrows); `error` is an `ErrorReport` from the command, or the
 * bare string Tauri rejects with when the arguments do not deserialize. Both, and anything
 * rethrown, end up as a `BackendError`.
 */
async function unwrap<T>(call: Promise<Reply<T>>): Promise<T> {
  let reply: Reply<T>;
  try {
    reply = await call;
  } catch (thrown) {
    throw asBackendError(thrown);
  }
  if (reply.status === "ok") return reply.data;
  throw asBackendError(reply.error);
}

/** A command without a `Result` (it cannot fail in Rust): only IPC can reject it. */
async function plain<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (thrown) {
    throw asBackendError(thrown);
  }
}

/**
 * Tauri's `listen` resolves asynchronously; callers get a synchronous unsubscribe that also
 * works when called before the listener is registered.
 */
function subscribe<T>(
  listen: (handler: (event: { payload: T }) => void) => Promise<() => void>,
  listener: (payload: T) => void,
): Unsubscribe {
  let stopped = false;
  let unlisten: (() => void) | null = null;
  listen((event) => {
    if (!stopped) listener(event.payload);
  }).then(
    (registered) => {
      if (stopped) registered();
      else unlisten = registered;
    },
    (thrown) => console.error("could not listen to a core event", thrown),
  );
  return () => {
    if (stopped) return;
    stopped = true;
    unlisten?.();
  };
}

export function tauriBackend(): Backend {
  return {
    appState: () => unwrap(commands.appState()),
    detectAgents: () => unwrap(commands.detectAgents()),
    onboardAgent: (cli, name, project) => unwrap(commands.onboardAgent(cli, name, project)),
    offboardAgent: (cli, handle) => unwrap(commands.offboardAgent(cli, handle)),
    rooms: () => unwrap(commands.rooms()),
    roomMessages: (room, beforeSeq, limit) => unwrap(commands.roomMessages(room, beforeSeq, limit)),
    sendMessage: (room, text) => unwrap(commands.sendMessage(room, text)),
    createRoom: (title, members) => unwrap(commands.createRoom(title, members)),
    inviteToRoom: (room, handle) => unwrap(commands.inviteToRoom(room, handle)),
    markRead: (room, seq) => unwrap(commands.markRead(room, seq)),
    directory: (query) => unwrap(commands.directory(query)),
    pings: (all) => unwrap(commands.pings(all)),
    answerPing: (room, ping, choice, text) => unwrap(commands.answerPing(room, ping, choice, text)),
    contacts: () => unwrap(commands.contacts()),
    requestContact: (handle, message) => unwrap(commands.requestContact(handle, message)),
    respondContact: (request, accept) => unwrap(commands.respondContact(request, accept)),
    createInvite: (room, uses, expiresHours) => unwrap(commands.createInvite(room, uses, expiresHours)),
    invites: () => unwrap(commands.invites()),
    revokeInvite: (invite) => unwrap(commands.revokeInvite(invite)),
    redeemInvite: (codeOrLink) => unwrap(commands.redeemInvite(codeOrLink)),
    agents: () => unwrap(commands.agents()),
    controlAgent: (agent, action, room) => unwrap(commands.controlAgent(agent, action, room)),
    agentToken: (agent, action) => unwrap(commands.agentToken(agent, action)),
    taskBoard: () => unwrap(commands.taskBoard()),
    architecture: () => unwrap(commands.architecture()),
    componentHistory: (room, component) => unwrap(commands.componentHistory(room, component)),
    costs: (sinceMs) => unwrap(commands.costs(sinceMs)),
    budgets: () => unwrap(commands.budgets()),
    setBudget: (budget) => unwrap(commands.setBudget(budget)),
    removeBudget: (scope, name, period) => unwrap(commands.removeBudget(scope, name, period)),
    sessions: () => unwrap(commands.sessions()),
    away: () => unwrap(commands.away()),
    markLooked: () => unwrap(commands.markLooked()),
    workScan: () => unwrap(commands.workScan()),
    connectRemote: (address, how, insecure) => unwrap(commands.connectRemote(address, how, insecure)),
    useEmbedded: () => unwrap(commands.useEmbedded()),
    shareOnNetwork: (on) => unwrap(commands.shareOnNetwork(on)),
    takeStartTarget: () => plain(commands.takeStartTarget()),
    openLink: async (url) => {
      await unwrap(commands.openLink(url));
    },
    onChanged: (listener) => subscribe((handler) => events.coreChanged.listen(handler), listener),
    onOpenTarget: (listener) => subscribe((handler) => events.openTarget.listen(handler), listener),
  };
}
