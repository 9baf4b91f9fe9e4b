/**
 * The shell's state: which view is showing, the feature models, and the wiring between them
 * and the core. It subscribes once to `CoreChanged` and hands each change to every model
 * (each refetches only what the change names), and turns `OpenTarget` (a notification, the
 * tray, a `roundtable://` link, also the one the app was started with) into navigation. Routing is this one `view` field: a desktop
 * window has no URL bar worth a router.
 */
import type { CoreChanged, OpenTarget } from "../bindings";
import type { Backend, Unsubscribe } from "../backend/backend";
import { AgentsModel } from "../features/agents/agents.model.svelte";
import { ArchitectureModel } from "../features/architecture/architecture.model.svelte";
import { AwayModel } from "../features/away/away.model.svelte";
import { CostsModel } from "../features/costs/costs.model.svelte";
import { BudgetsModel } from "../features/costs/budgets.model.svelte";
import { SessionsModel } from "../features/sessions/sessions.model.svelte";
import { TasksModel } from "../features/tasks/tasks.model.svelte";
import { ContactsModel } from "../features/contacts/contacts.model.svelte";
import { OnboardingModel } from "../features/onboarding/onboarding.model.svelte";
import { PingsModel } from "../features/pings/pings.model.svelte";
import { RoomsModel } from "../features/rooms/rooms.model.svelte";
import { SettingsModel } from "../features/settings/settings.model.svelte";
import { PaletteModel, type PaletteCommand } from "./palette.model.svelte";
import { ScanModel } from "./scan.model.svelte";
import { Toasts } from "./toasts.svelte";

export type ViewName =
  | "rooms"
  | "pings"
  | "agents"
  | "onboarding"
  | "contacts"
  | "settings"
  | "away"
  | "tasks"
  | "architecture"
  | "costs"
  | "sessions";

/** `modifier` + `shortcut` (a digit) jumps to the view: Ctrl/⌘ for the main views, Alt for the boards. */
export type ViewEntry = { name: ViewName; label: string; shortcut: string; modifier: "command" | "alt"; group: "main" | "boards" };

/** The nav, in order. */
export const VIEWS: readonly ViewEntry[] = [
  { name: "rooms", label: "Rooms", shortcut: "1", modifier: "command", group: "main" },
  { name: "pings", label: "Pings", shortcut: "2", modifier: "command", group: "main" },
  { name: "agents", label: "Agents", shortcut: "3", modifier: "command", group: "main" },
  { name: "onboarding", label: "Onboarding", shortcut: "4", modifier: "command", group: "main" },
  { name: "contacts", label: "Contacts", shortcut: "5", modifier: "command", group: "main" },
  { name: "settings", label: "Settings", shortcut: "6", modifier: "command", group: "main" },
  { name: "away", label: "While you were away", shortcut: "1", modifier: "alt", group: "boards" },
  { name: "tasks", label: "Tasks", shortcut: "2", modifier: "alt", group: "boards" },
  { name: "architecture", label: "Architecture", shortcut: "3", modifier: "alt", group: "boards" },
  { name: "costs", label: "Costs", shortcut: "4", modifier: "alt", group: "boards" },
  { name: "sessions", label: "Sessions", shortcut: "5", modifier: "alt", group: "boards" },
];

/** How a view's shortcut reads ("Ctrl+1", "Alt+2"). */
export function shortcutText(entry: ViewEntry): string {
  return `${entry.modifier === "alt" ? "Alt" : "Ctrl"}+${entry.shortcut}`;
}

/** The `aria-keyshortcuts` of a view. */
export function ariaShortcut(entry: ViewEntry): string {
  return entry.modifier === "alt" ? `Alt+${entry.shortcut}` : `Control+${entry.shortcut} Meta+${entry.shortcut}`;
}

/** DOM ids the shell can ask a view to focus after navigating. */
export const FOCUS = {
  roomCreateTitle: "room-create-title",
  composer: "composer",
  inviteCreate: "invite-create",
  redeemCode: "redeem-code",
  ping: (pingId: string) => `ping-${pingId}`,
  viewHeading: (view: ViewName) => `${view}-heading`,
} as const;

/** A key press as the shell sees it; `inEditable` is true inside inputs and textareas. */
export type ShellKey = {
  key: string;
  ctrlKey: boolean;
  metaKey: boolean;
  altKey: boolean;
  inEditable: boolean;
};

export type AppOptions = { now?: () => number };

export class AppModel {
  view = $state<ViewName>("rooms");
  shortcutsOpen = $state(false);
  /** An element id to focus once the current view has rendered; the shell clears it. */
  focusTarget = $state<string | null>(null);
  started = $state(false);

  readonly toasts = new Toasts();
  readonly settings: SettingsModel;
  readonly onboarding: OnboardingModel;
  readonly rooms: RoomsModel;
  readonly pings: PingsModel;
  readonly contacts: ContactsModel;
  readonly agents: AgentsModel;
  readonly tasks: TasksModel;
  readonly architecture: ArchitectureModel;
  readonly costs: CostsModel;
  /** Shared by Settings (where they are set) and the costs board (spend against them). */
  readonly budgets: BudgetsModel;
  readonly sessions: SessionsModel;
  readonly away: AwayModel;
  readonly scan: ScanModel;
  readonly palette: PaletteModel;

  private readonly backend: Backend;
  /** Set once someone (or an OpenTarget) navigates, so the start-up choice never overrides it. */
  private navigated = false;

  constructor(backend: Backend, options: AppOptions = {}) {
    this.backend = backend;
    const errors = this.toasts;
    const me = () => this.settings.me;
    this.settings = new SettingsModel({ backend, errors });
    this.onboarding = new OnboardingModel({ backend, errors });
    this.rooms = new RoomsModel({ backend, errors, me, now: options.now });
    this.pings = new PingsModel({ backend, errors });
    this.contacts = new ContactsModel({ backend, errors, roomTitle: (roomId) => this.rooms.titleOf(roomId) });
    this.agents = new AgentsModel({ backend, errors });
    this.tasks = new TasksModel({ backend, errors });
    this.architecture = new ArchitectureModel({ backend, errors });
    this.costs = new CostsModel({ backend, errors, now: options.now });
    this.budgets = new BudgetsModel({ backend, errors });
    this.sessions = new SessionsModel({ backend, errors });
    this.away = new AwayModel({ backend, errors });
    this.scan = new ScanModel({ backend, errors });
    this.palette = new PaletteModel(() => this.paletteCommands());
  }

  /** Badge numbers in the nav: what waits for me in each view. */
  readonly counts: Record<ViewName, number> = $derived.by(() => ({
    rooms: this.rooms.totalUnread,
    pings: this.pings.loaded ? this.pings.count : (this.settings.state?.open_pings ?? 0),
    agents: this.agents.attentionCount,
    contacts: this.contacts.waitingCount,
    onboarding: 0,
    settings: 0,
    away: this.away.digests.length,
    sessions: this.sessions.needsYouCount,
    tasks: 0,
    architecture: 0,
    costs: 0,
  }));

  /**
   * Subscribes to the core, loads every view once, and picks where to start: where the link
   * the app was started with points (asked for once, after subscribing, so a target is
   * either handed over here or arrives as an event), else `startingView()`.
   */
  async start(): Promise<Unsubscribe> {
    const stopChanged = this.backend.onChanged((change) => void this.applyChange(change));
    const stopTargets = this.backend.onOpenTarget((target) => void this.open(target));
    const startTarget = this.backend.takeStartTarget().catch((error: unknown) => {
      this.toasts.report(error);
      return null;
    });
    await Promise.all([
      this.settings.load(),
      this.onboarding.scan(),
      this.rooms.load(),
      this.pings.load(),
      this.contacts.load(),
      this.agents.load(),
      this.sessions.load(),
      this.away.load(),
      this.scan.load(),
    ]);
    // Opened once the views have loaded, so a room it names is in the list.
    const target = await startTarget;
    if (target !== null) await this.open(target);
    else if (!this.navigated) this.show(this.startingView());
    this.started = true;
    return () => {
      stopChanged();
      stopTargets();
    };
  }

  /**
   * Signed out: Settings. Nothing onboarded and no rooms (a first start): Onboarding.
   * News since the person last looked: While you were away (it lists the questions
   * waiting too). A question waiting: Pings. Otherwise Rooms.
   */
  startingView(): ViewName {
    if (this.settings.loaded && this.settings.me === null) return "settings";
    if (this.onboarding.onboardedCount === 0 && this.agents.agents.length === 0 && this.rooms.rooms.length === 0) {
      return "onboarding";
    }
    if (this.away.hasNews) return "away";
    if (this.pings.count > 0) return "pings";
    return "rooms";
  }

  go(view: ViewName, focus: string | null = FOCUS.viewHeading(view)): void {
    this.navigated = true;
    this.show(view);
    this.focusTarget = focus;
  }

  /** Shows a view; the boards that load on sight load (or catch up) now, the others rest. */
  private show(view: ViewName): void {
    this.view = view;
    const lazy = { tasks: this.tasks, architecture: this.architecture, costs: this.costs } as const;
    for (const [name, board] of Object.entries(lazy)) {
      if (name === view) void board.show();
      else board.hide();
    }
    // Budgets are set in Settings and shown on the costs board; once loaded, changes keep them.
    if (view === "costs" || view === "settings") void this.budgets.load();
  }

  async openRoom(roomId: string): Promise<void> {
    this.go("rooms", FOCUS.composer);
    await this.rooms.select(roomId);
  }

  /** Opens a link the person confirmed (from a message or a question) in their browser. */
  async openLink(url: string): Promise<void> {
    try {
      await this.backend.openLink(url);
    } catch (error) {
      this.toasts.report(error);
    }
  }

  /** The tasks board, narrowed to one room. */
  openTasks(roomId: string): void {
    this.tasks.clearFilters();
    this.tasks.setFilter("room", roomId);
    this.go("tasks");
  }

  async open(target: OpenTarget): Promise<void> {
    switch (target.view) {
      case "pings":
        this.go("pings");
        return;
      case "costs":
        this.go("costs");
        return;
      case "ping":
        this.pings.focus(target.ping);
        this.go("pings", FOCUS.ping(target.ping));
        if (!this.pings.needsYou.some((ping) => ping.ping === target.ping)) await this.pings.load();
        return;
      case "room":
        await this.openRoom(target.room);
        return;
      case "redeem":
        this.contacts.prefillRedeem(target.code, target.hub);
        this.go("contacts", FOCUS.redeemCode);
        return;
    }
  }

  /** `everything` (the hub's data was reset, or the session switched hubs) sets every flag. */
  async applyChange(reported: CoreChanged): Promise<void> {
    const change: CoreChanged = reported.everything
      ? {
          rooms: true,
          messages: this.rooms.rooms.map((room) => room.id),
          pings: true,
          contacts: true,
          agents: true,
          sync: true,
          work: true,
          scan: true,
          everything: true,
        }
      : reported;
    await Promise.all([
      this.settings.applyChange(change),
      this.rooms.applyChange(change),
      this.pings.applyChange(change),
      this.contacts.applyChange(change),
      this.agents.applyChange(change),
      this.tasks.applyChange(change),
      this.architecture.applyChange(change),
      this.costs.applyChange(change),
      this.budgets.applyChange(change),
      this.sessions.applyChange(change),
      this.away.applyChange(change),
      this.scan.applyChange(change),
      // Onboarding is not in CoreChanged: detection is a local scan, rerun when agents change.
      change.agents ? this.onboarding.scan() : Promise.resolve(),
    ]);
  }

  /** Shell-wide keys. Returns true when the key was handled (the caller prevents default). */
  handleKey(key: ShellKey): boolean {
    const command = key.ctrlKey || key.metaKey;
    if (command && !key.altKey && key.key.toLowerCase() === "k") {
      if (this.palette.open) this.palette.close();
      else {
        this.shortcutsOpen = false;
        this.palette.show();
      }
      return true;
    }
    if (command && !key.altKey) {
      const entry = VIEWS.find((view) => view.modifier === "command" && view.shortcut === key.key);
      if (entry) {
        this.go(entry.name);
        return true;
      }
    }
    if (key.altKey && !command && !key.inEditable) {
      const entry = VIEWS.find((view) => view.modifier === "alt" && view.shortcut === key.key);
      if (entry) {
        this.go(entry.name);
        return true;
      }
    }
    if (key.key === "?" && !key.inEditable && !command) {
      this.shortcutsOpen = !this.shortcutsOpen;
      return true;
    }
    if (key.key === "Escape") {
      if (this.shortcutsOpen) {
        this.shortcutsOpen = false;
        return true;
      }
      if (this.toasts.items.length > 0 && !key.inEditable) {
        this.toasts.dismissAll();
        return true;
      }
    }
    return false;
  }

  paletteCommands(): PaletteCommand[] {
    const commands: PaletteCommand[] = VIEWS.map((view) => ({
      id: `view:${view.name}`,
      label: view.label,
      group: "Go to",
      hint: shortcutText(view),
      run: () => this.go(view.name),
    }));
    for (const room of this.rooms.rooms) {
      commands.push({
        id: `room:${room.id}`,
        label: this.rooms.title(room),
        group: "Room",
        hint: room.unread > 0 ? `${room.unread} unread` : undefined,
        run: () => void this.openRoom(room.id),
      });
    }
    for (const ping of this.pings.needsYou) {
      commands.push({
        id: `ping:${ping.ping}`,
        label: ping.question,
        group: "Question",
        hint: ping.asker_handle ?? undefined,
        run: () => void this.open({ view: "ping", room: ping.room, ping: ping.ping }),
      });
    }
    commands.push(
      {
        id: "action:new-room",
        label: "New room",
        group: "Action",
        run: () => {
          this.rooms.creating = true;
          this.go("rooms", FOCUS.roomCreateTitle);
        },
      },
      {
        id: "action:scan",
        label: "Scan again for agent CLIs",
        group: "Action",
        run: () => {
          this.go("onboarding");
          void this.onboarding.scan();
        },
      },
      {
        id: "action:invite",
        label: "Create an invite link",
        group: "Action",
        run: () => this.go("contacts", FOCUS.inviteCreate),
      },
      {
        id: "action:redeem",
        label: "Redeem an invite",
        group: "Action",
        run: () => this.go("contacts", FOCUS.redeemCode),
      },
      {
        id: "action:mark-seen",
        label: "Mark everything as seen (While you were away)",
        group: "Action",
        run: () => {
          this.go("away");
          void this.away.markSeen();
        },
      },
      ...(["day", "agent", "person", "team", "model"] as const).map((key) => ({
        id: `action:costs-by-${key}`,
        label: `Costs by ${key}`,
        group: "Action" as const,
        run: () => {
          this.costs.groupBy(key);
          this.go("costs");
        },
      })),
      {
        id: "action:tasks-clear",
        label: "Show every task (clear the filters)",
        group: "Action",
        run: () => {
          this.tasks.clearFilters();
          this.go("tasks");
        },
      },
      {
        id: "action:shortcuts",
        label: "Keyboard shortcuts",
        group: "Action",
        hint: "?",
        run: () => {
          this.shortcutsOpen = true;
        },
      },
    );
    return commands;
  }
}
