/**
 * Who may reach me and my agents: contacts, contact requests (incoming ones include those
 * addressed to my agents — a stranger's agent that found `dana/writer` must ask Dana), the
 * invite links I created, and redeeming someone else's.
 */
import type { ContactRequest, ContactView, CoreChanged, InviteCreated, InviteView, Redeemed } from "../../bindings";
import { BackendError, type Backend } from "../../backend/backend";
import type { ErrorReporter } from "../../app/toasts.svelte";
import { DirectorySearch } from "./directory-search.svelte";

export const CONTACTS_EMPTY = "No contacts yet. Create an invite link below and send it to a teammate, or redeem one you received.";
export const REQUESTS_EMPTY = "No pending requests.";
export const INVITES_EMPTY = "No open invites. Create one to bring a teammate in.";

export function splitRequests(requests: readonly ContactRequest[]): {
  incoming: ContactRequest[];
  outgoing: ContactRequest[];
  settled: ContactRequest[];
} {
  const newestFirst = [...requests].sort((a, b) => b.ts_ms - a.ts_ms);
  return {
    incoming: newestFirst.filter((request) => request.incoming && request.state === "pending"),
    outgoing: newestFirst.filter((request) => !request.incoming && request.state === "pending"),
    settled: newestFirst.filter((request) => request.state !== "pending"),
  };
}

/** Optional number fields of the invite form: blank means "no limit" (null). */
export function optionalPositive(text: string): number | null | "invalid" {
  const trimmed = text.trim();
  if (trimmed === "") return null;
  const value = Number(trimmed);
  return Number.isInteger(value) && value > 0 ? value : "invalid";
}

/** The link form of an invite, as `create_invite` makes it: `roundtable://invite/CODE?hub=ADDR`. */
export function inviteLink(code: string, hub: string): string {
  return `roundtable://invite/${encodeURIComponent(code)}?hub=${hub}`;
}

/** Whether an invite link names the app's own hub on its socket, which no other machine reaches. */
export function reachesThisComputerOnly(link: string): boolean {
  return /[?&]hub=unix:/.test(link);
}

export const LOCAL_ONLY_INVITE =
  "This link reaches your hub from this computer only. To invite a teammate on another machine, let teammates on your network in (Settings), then create the invite again.";

/**
 * What redeeming an invite did, in words. Redeeming always makes its creator a contact (the
 * hub does it unless you already were), and joins the invite's room when it names one.
 */
export function redeemedSummary(redeemed: Redeemed, roomTitle: (roomId: string) => string): string {
  const contact = "you and whoever sent it are contacts";
  if (redeemed.room === null) return `Invite redeemed: ${contact}.`;
  return `Invite redeemed: ${contact}, and you joined ${roomTitle(redeemed.room)}.`;
}

export type ContactsDeps = {
  backend: Backend;
  errors: ErrorReporter;
  roomTitle: (roomId: string) => string;
};

/**
 * How long an invite lasts when the form leaves it blank, in hours: the hub's default
 * (`INVITE_DEFAULT_EXPIRY_S` in the protocol, seven days), which contacts.model.test.ts holds
 * to the core's word.
 */
export const INVITE_DEFAULT_HOURS = 168;

export class ContactsModel {
  contacts: ContactView[] = $state.raw([]);
  requests: ContactRequest[] = $state.raw([]);
  invites: InviteView[] = $state.raw([]);
  loaded = $state(false);
  /** Requests answered here, shown as such until the core confirms. */
  responding: Record<string, "accepting" | "rejecting"> = $state({});

  /** Invite form: blank fields mean no room, one use, the hub's default expiry. */
  inviteRoom = $state<string | null>(null);
  inviteUses = $state("");
  inviteHours = $state("");
  created = $state<InviteCreated | null>(null);

  redeemCode = $state("");
  redeemed = $state<string | null>(null);
  /** The hub a `roundtable://invite/CODE?hub=…` link named, while its code is in the form. */
  redeemHub = $state<string | null>(null);

  requestMessage = $state("");
  readonly requestSearch: DirectorySearch;

  private readonly deps: ContactsDeps;

  constructor(deps: ContactsDeps) {
    this.deps = deps;
    this.requestSearch = new DirectorySearch(
      deps.backend,
      deps.errors,
      (entry) => entry.contact === "none" || entry.contact === "pending_in",
    );
  }

  readonly split = $derived(splitRequests(this.requests));
  readonly incoming = $derived(this.split.incoming);
  readonly outgoing = $derived(this.split.outgoing);
  /** Incoming requests waiting for me: the nav shows this count. */
  readonly waitingCount = $derived(this.incoming.length);

  async load(): Promise<void> {
    try {
      const [view, invites] = await Promise.all([this.deps.backend.contacts(), this.deps.backend.invites()]);
      this.contacts = view.contacts;
      this.requests = view.requests;
      this.invites = invites;
      this.loaded = true;
    } catch (error) {
      this.deps.errors.report(error);
    }
  }

  async respond(request: ContactRequest, accept: boolean): Promise<void> {
    this.responding[request.id] = accept ? "accepting" : "rejecting";
    try {
      await this.deps.backend.respondContact(request.id, accept);
      this.requests = this.requests.map((candidate) =>
        candidate.id === request.id ? { ...candidate, state: accept ? "accepted" : "rejected" } : candidate,
      );
    } catch (error) {
      this.deps.errors.report(error);
    } finally {
      delete this.responding[request.id];
    }
  }

  async requestContact(): Promise<boolean> {
    const handle = this.requestSearch.query.trim().replace(/^@/, "");
    if (handle === "") return false;
    const message = this.requestMessage.trim();
    try {
      await this.deps.backend.requestContact(handle, message === "" ? null : message);
      this.requestSearch.clear();
      this.requestMessage = "";
      await this.load();
      return true;
    } catch (error) {
      this.deps.errors.report(error);
      return false;
    }
  }

  async createInvite(): Promise<InviteCreated | null> {
    const uses = optionalPositive(this.inviteUses);
    const hours = optionalPositive(this.inviteHours);
    if (uses === "invalid" || hours === "invalid") {
      this.deps.errors.report(new BackendError("invalid_input", "Uses and expiry must be whole numbers above zero, or blank."));
      return null;
    }
    try {
      this.created = await this.deps.backend.createInvite(this.inviteRoom, uses, hours);
      await this.load();
      return this.created;
    } catch (error) {
      this.deps.errors.report(error);
      return null;
    }
  }

  /** Withdraws an invite; it disappears at once and comes back if the core refuses. */
  async revoke(invite: InviteView): Promise<void> {
    const before = this.invites;
    this.invites = this.invites.filter((candidate) => candidate.id !== invite.id);
    try {
      await this.deps.backend.revokeInvite(invite.id);
    } catch (error) {
      this.invites = before;
      this.deps.errors.report(error);
    }
  }

  /**
   * Fills the redeem form from a `roundtable://invite/…` link that opened the app. The form
   * shows the code; the hub the link named is kept and sent along (as the link) so the
   * core knows where the invite lives.
   */
  prefillRedeem(code: string, hub: string | null = null): void {
    this.redeemCode = code;
    this.redeemHub = hub;
    this.redeemed = null;
  }

  async redeem(): Promise<boolean> {
    const code = this.redeemCode.trim();
    if (code === "") return false;
    const codeOrLink = this.redeemHub !== null && !code.includes("://") ? inviteLink(code, this.redeemHub) : code;
    try {
      const redeemed = await this.deps.backend.redeemInvite(codeOrLink);
      this.redeemed = redeemedSummary(redeemed, this.deps.roomTitle);
      this.redeemCode = "";
      this.redeemHub = null;
      await this.load();
      return true;
    } catch (error) {
      this.deps.errors.report(error);
      return false;
    }
  }

  async applyChange(change: CoreChanged): Promise<void> {
    if (change.contacts) await this.load();
  }
}
