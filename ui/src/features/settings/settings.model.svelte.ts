/**
 * Who I am, which hub I use and how sync is going. The embedded hub needs nothing; a remote
 * hub needs an address and one way in: sign up, an invite code from a teammate, or a token.
 */
import type { AppState, CoreChanged, RemoteLogin, SyncPhase } from "../../bindings";
import { BackendError, type Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import type { StatusLabel } from "../../app/status";

export const SETTINGS_SIGNED_OUT = "You are not signed in to a hub. Use the embedded hub, or connect to your team's hub below.";

/** The sync states the core reports, each in words. */
export const SYNC_STATES: Readonly<Record<SyncPhase, StatusLabel>> = {
  not_started: { icon: "○", label: "not started", tone: "neutral" },
  syncing: { icon: "↻", label: "syncing", tone: "progress" },
  idle: { icon: "✓", label: "up to date", tone: "ok" },
  offline: { icon: "⚠", label: "offline", tone: "attention" },
  failed: { icon: "✕", label: "sync failed", tone: "bad" },
};

/** A sync state in words. */
export function syncStateLabel(state: SyncPhase): StatusLabel {
  return SYNC_STATES[state];
}

/** What the hub's section says about who can reach the app's own hub. */
export function reachSummary(state: AppState): string {
  if (state.hub_mode !== "embedded") return "";
  if (state.network_address === null) {
    return "Your hub listens only on a socket in its data folder: you alone, on this computer, reach it. Let teammates in to invite someone on another machine.";
  }
  return "Teammates on your network reach your hub at this address. Invite links carry it with the fingerprint of your hub's certificate, so their apps trust this hub and no other there.";
}

export type LoginKind = RemoteLogin["kind"];

/** The login the form describes, or a sentence saying what is missing. */
export function remoteLogin(form: {
  kind: LoginKind;
  handle: string;
  name: string;
  code: string;
  token: string;
}): RemoteLogin | string {
  const handle = form.handle.trim();
  const name = form.name.trim();
  switch (form.kind) {
    case "signup":
      if (handle === "") return "Choose a handle to sign up with.";
      return { kind: "signup", handle, name: name === "" ? handle : name };
    case "invite":
      if (form.code.trim() === "") return "Paste the invite code your teammate sent.";
      if (handle === "") return "Choose a handle to join with.";
      return { kind: "invite", code: form.code.trim(), handle, name: name === "" ? handle : name };
    case "token":
      if (form.token.trim() === "") return "Paste your token.";
      return { kind: "token", token: form.token.trim() };
  }
}

export type SettingsDeps = { backend: Backend; errors: ErrorReporter };

export class SettingsModel {
  state = $state<AppState | null>(null);
  loaded = $state(false);
  busy = $state(false);

  address = $state("");
  /** The person says the hub is on a network they trust and has no TLS. */
  insecure = $state(false);
  loginKind = $state<LoginKind>("signup");
  handle = $state("");
  name = $state("");
  code = $state("");
  token = $state("");

  private readonly deps: SettingsDeps;

  constructor(deps: SettingsDeps) {
    this.deps = deps;
  }

  readonly me = $derived(this.state?.me ?? null);
  readonly sync = $derived(this.state ? syncStateLabel(this.state.sync.state) : null);
  /** Why the app's own hub stopped, when it failed: said above every view, with a way to start it again. */
  readonly hubFailure = $derived(this.state?.hub_failure ?? null);

  async load(): Promise<void> {
    try {
      this.state = await this.deps.backend.appState();
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    }
  }

  async connectRemote(): Promise<boolean> {
    const login = remoteLogin({
      kind: this.loginKind,
      handle: this.handle,
      name: this.name,
      code: this.code,
      token: this.token,
    });
    if (this.address.trim() === "") {
      this.deps.errors.report(new BackendError("invalid_input", "Write the hub's address, for example hub.example.com:443."));
      return false;
    }
    if (typeof login === "string") {
      this.deps.errors.report(new BackendError("invalid_input", login));
      return false;
    }
    return this.switchHub(() => this.deps.backend.connectRemote(this.address.trim(), login, this.insecure));
  }

  async useEmbedded(): Promise<boolean> {
    return this.switchHub(() => this.deps.backend.useEmbedded());
  }

  /** Starts the app's own hub again after it failed: a new session over the same data. */
  async restartHub(): Promise<boolean> {
    return this.useEmbedded();
  }

  /** Lets teammates on the network reach the app's own hub, or stops letting them (it restarts). */
  async shareOnNetwork(on: boolean): Promise<boolean> {
    return this.switchHub(() => this.deps.backend.shareOnNetwork(on));
  }

  async applyChange(change: CoreChanged): Promise<void> {
    // The tray count (open_pings) and sync state both live in AppState.
    if (change.sync || change.pings) await this.load();
  }

  private async switchHub(call: () => Promise<AppState>): Promise<boolean> {
    this.busy = true;
    try {
      this.state = await call();
      this.token = "";
      this.code = "";
      return true;
    } catch (error) {
      this.deps.errors.report(error);
      return false;
    } finally {
      this.busy = false;
    }
  }
}
