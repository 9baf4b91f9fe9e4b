/**
 * The people side of the in-memory backend: the directory, contacts and contact requests,
 * and invites (made, withdrawn, redeemed). This is where the hub's consent lives in the
 * fake: who may ask whom to be a contact, who may answer a request, which codes a hub
 * refuses, and whom one may bring into a room (`reachable`, which the rooms use too). Only
 * as much of it as the views need; the contract's consent and invite scenarios
 * (contract/scenarios.json) hold it to the real hub's answers.
 *
 * `FakeBackend` (fake.ts) records each command and plays `failNext`, then hands it here.
 */
import type { ContactsScreen, DirectoryView, InviteCreated, InviteView, MemberView, Redeemed } from "../bindings";
import { BackendError } from "./backend";
import { copy, type FakeCore } from "./fake-core";
import { decided, INVITE_DEFAULT_EXPIRY_S, inviteCodeVerdict, inviteTermsVerdict } from "./fake-rules";
import { member } from "./fake-world";

export class FakePeople {
  /** Codes the hub refuses with `conflict` (one's own invite, one used up), and why. */
  private readonly refusedCodes = new Map<string, string>();
  /** Every invite this person made, withdrawn or not. */
  private readonly inviteIds = new Set<string>();

  constructor(private readonly core: FakeCore) {}

  directory(query: string): DirectoryView[] {
    const needle = query.trim().toLowerCase();
    return copy(
      this.core.world.directory.filter(
        (entry) => needle === "" || entry.handle.includes(needle) || entry.name.toLowerCase().includes(needle),
      ),
    );
  }

  contacts(): ContactsScreen {
    const world = this.core.world;
    return copy({ contacts: world.contacts, requests: world.requests });
  }

  requestContact(handle: string, message: string | null): null {
    const world = this.core.world;
    // The hub's rules (hub/src/engine/contacts.rs), held to it by the contract's consent
    // scenario: not oneself, someone who exists, not a contact already, one request at a time.
    const me = this.core.requireMe();
    if (handle === me.handle) throw new BackendError("conflict", "That is you: you need no contact request.");
    const entry = world.directory.find((candidate) => candidate.handle === handle);
    if (!entry) throw new BackendError("not_found", `No one is called ${handle} on this hub. Check the spelling.`);
    if (entry.contact === "accepted" || entry.contact === "kin") {
      throw new BackendError("conflict", `${handle} is already a contact.`);
    }
    if (entry.contact === "pending_out" || entry.contact === "pending_in") {
      throw new BackendError("conflict", `A contact request between you and ${handle} is already waiting.`);
    }
    entry.contact = "pending_out";
    world.requests.push({
      id: `request-${this.core.freshId()}`,
      from: me.id,
      from_handle: me.handle,
      to: entry.id,
      to_handle: entry.handle,
      state: "pending",
      message,
      ts_ms: this.core.now(),
      incoming: false,
    });
    this.core.changed({ contacts: true });
    return null;
  }

  respondContact(request: string, accept: boolean): null {
    const world = this.core.world;
    const found = world.requests.find((candidate) => candidate.id === request);
    if (!found) throw new BackendError("not_found", "This request no longer exists.");
    // As the hub does: who may decide first, then whether it is still to decide.
    if (!found.incoming && accept) throw new BackendError("forbidden", `Only ${found.to_handle} can accept this request.`);
    if (found.state !== "pending") throw new BackendError("conflict", `This request was already ${found.state}.`);
    if (!found.incoming) {
      // One's own request can be withdrawn, never accepted.
      found.state = "cancelled";
      const entry = world.directory.find((candidate) => candidate.id === found.to);
      if (entry) entry.contact = "none";
      this.core.changed({ contacts: true });
      return null;
    }
    found.state = accept ? "accepted" : "rejected";
    const entry = world.directory.find((candidate) => candidate.id === found.from);
    if (entry) entry.contact = accept ? "accepted" : "none";
    if (accept) {
      world.contacts.push({
        principal: found.from,
        handle: found.from_handle,
        name: entry?.name ?? null,
        kind: entry?.kind ?? null,
        since_ms: this.core.now(),
      });
    }
    this.core.changed({ contacts: true });
    return null;
  }

  createInvite(room: string | null, uses: number | null, expiresHours: number | null): InviteCreated {
    // As the app does: the terms are the core's to check (in seconds), the room the hub's.
    decided(inviteTermsVerdict(uses, expiresHours === null ? null : expiresHours * 3_600));
    if (room !== null) this.core.room(room);
    const number = this.core.freshId();
    const id = `invite-${number}`;
    // Made from the counter's next value, as the fake's codes always were.
    const code = `CODE${(number + 1) * 7919}`;
    const now = this.core.now();
    this.core.world.invites.push({
      id,
      room,
      // The hub's default: one use (held to it by the contract's invite scenario).
      uses_left: uses ?? 1,
      expires_at: new Date(now + (expiresHours === null ? INVITE_DEFAULT_EXPIRY_S : expiresHours * 3_600) * 1_000).toISOString(),
      created_at: new Date(now).toISOString(),
    });
    this.refusedCodes.set(code, "This is your own invite: send it to the teammate you made it for.");
    this.inviteIds.add(id);
    this.core.changed({ contacts: true });
    return { code, link: `roundtable://invite/${code}?hub=${this.inviteHub()}`, invite: id };
  }

  invites(): InviteView[] {
    return copy(this.core.world.invites);
  }

  revokeInvite(invite: string): null {
    const world = this.core.world;
    if (invite.trim() === "") throw new BackendError("invalid", "Name the invite to withdraw.");
    const known = this.inviteIds.has(invite) || world.invites.some((candidate) => candidate.id === invite);
    if (!known) throw new BackendError("not_found", "There is no such invite.");
    this.inviteIds.add(invite);
    // As the hub does: withdrawing an invite twice is no error.
    world.invites = world.invites.filter((candidate) => candidate.id !== invite);
    this.core.changed({ contacts: true });
    return null;
  }

  redeemInvite(codeOrLink: string): Redeemed {
    const world = this.core.world;
    const code = decided(inviteCodeVerdict(codeOrLink));
    const refused = this.refusedCodes.get(code);
    if (refused !== undefined) throw new BackendError("conflict", refused);
    const invite = world.redeemable[code];
    if (!invite) {
      throw new BackendError("not_found", "This invite is unknown, used up or expired. Ask for a new link.");
    }
    const me = this.core.requireMe();
    delete world.redeemable[code];
    this.refusedCodes.set(code, "This invite was used up. Ask for a new link.");
    // As the hub does: the redeemer and the creator become contacts (unless they are), and
    // the redeemer joins the invite's room (unless a member).
    const creator = world.directory.find((candidate) => candidate.id === invite.creator);
    if (creator && creator.contact !== "kin" && creator.contact !== "accepted") {
      creator.contact = "accepted";
      world.contacts.push({
        principal: creator.id,
        handle: creator.handle,
        name: creator.name,
        kind: creator.kind,
        since_ms: this.core.now(),
      });
    }
    const room = invite.room === null ? null : this.core.room(invite.room);
    if (room && !room.members.some((candidate) => candidate.id === me.id)) {
      room.members.push(member(me.id, me.handle, "user"));
    }
    this.core.changed({ contacts: true, rooms: room !== null });
    return { room: invite.room } satisfies Redeemed;
  }

  /**
   * A member for `handle`, if I may bring them in: mine, or a contact (the hub's consent rule,
   * held to it by the contract's consent scenario).
   */
  reachable(handle: string): MemberView {
    const entry = this.core.world.directory.find((candidate) => candidate.handle === handle);
    if (!entry) throw new BackendError("not_found", `No one is called ${handle} on this hub. Check the spelling.`);
    if (entry.contact !== "kin" && entry.contact !== "accepted") {
      throw new BackendError(
        "no_consent",
        `${handle} is not a contact yet. Send a contact request from Contacts, or share an invite link.`,
      );
    }
    return member(entry.id, entry.handle, entry.kind === "agent" ? "agent" : "user");
  }

  /** Where invite links send teammates: as the hub's public address names it. */
  private inviteHub(): string {
    const world = this.core.world;
    if (world.hub_mode === "embedded" && world.network_address !== null) return world.network_address;
    return world.hub_address;
  }
}
