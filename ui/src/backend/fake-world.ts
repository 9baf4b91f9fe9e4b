/**
 * The data the in-memory `FakeBackend` serves: a plain object tests can build, read and
 * mutate directly, plus two seeds — an empty world (a fresh install) and a demo world
 * (Dana's machine from shared/JOURNEYS.md, with one room of 10,000 messages to exercise the
 * virtualized list). Seeds are deterministic: time comes in as `now`, nothing is random.
 */
import type {
  AgentCli,
  AgentView,
  Budget,
  ContactRequest,
  ContactView,
  Detected,
  DirectoryView,
  HubMode,
  InviteView,
  Me,
  MemberView,
  OpenTarget,
  PingView,
  RoomMessage,
  Support,
  SyncView,
} from "../bindings";
import { demoBoards, emptyBoards, type FakeBoards } from "./fake-boards";
import agentClis from "./fixtures/agent-clis.json";

/** What Roundtable does with `cli`, as the core says (`fixtures/agent-clis.json`). */
export function supportOf(cli: AgentCli): Support[] {
  return (agentClis.find((known) => known.cli === cli)?.support ?? []) as Support[];
}

/** Whether Roundtable onboards `cli` at all, as the core says (`fixtures/agent-clis.json`). */
export function isSupported(cli: AgentCli): boolean {
  return agentClis.find((known) => known.cli === cli)?.supported ?? false;
}

export type FakeRoom = {
  id: string;
  title: string | null;
  topic: string | null;
  creator: string | null;
  members: MemberView[];
  /** My read marker; `unread` counts stored messages above it that others wrote. */
  read_to: number;
  /** Stored messages in seq order, then queued/failed ones (seq null). */
  messages: RoomMessage[];
};

/** An invite someone else created: redeeming it makes its creator a contact, and joins `room`. */
export type FakeInvite = {
  /** The creator's principal id (in `directory`). */
  creator: string;
  room: string | null;
};

export type FakeWorld = {
  me: Me | null;
  hub_mode: HubMode;
  hub_address: string;
  /** Where teammates reach the embedded hub, when the person lets them in. */
  network_address: string | null;
  /** Why the app's own hub stopped, when it failed (the app stays up); starting it again clears it. */
  hub_failure: string | null;
  sync: SyncView;
  version: string;
  detected: Detected[];
  rooms: FakeRoom[];
  pings: PingView[];
  contacts: ContactView[];
  requests: ContactRequest[];
  invites: InviteView[];
  agents: AgentView[];
  /** Everyone the directory can find, me and my agents included. */
  directory: DirectoryView[];
  /** Invite codes someone else created that `redeemInvite` accepts. */
  redeemable: Record<string, FakeInvite>;
  /** The `roundtable://` link the app was "started with": `takeStartTarget` hands it out once. */
  startTarget: OpenTarget | null;
  /** What the boards show (tasks, architecture, costs, sessions, "while you were away"). */
  boards: FakeBoards;
  /** Every link `openLink` opened "in the browser", in order. */
  openedLinks: string[];
  /** The person's budgets (their spend is counted from `boards.costs`). */
  budgets: Budget[];
};

/** Where the app reaches its own hub: the socket in its data folder. */
export const EMBEDDED_HUB = "unix:/home/dana/.local/share/roundtable/hub/hub.sock";
/** Where teammates reach it once let in. */
export const NETWORK_HUB = `wss://192.168.1.20:47300#sha256=${"5e".repeat(32)}`;

export const DANA: Me = { id: "u-dana", handle: "dana", name: "Dana" };

/** A fresh install: signed in to the embedded hub, nothing detected, nothing shared. */
export function emptyWorld(): FakeWorld {
  return {
    me: { ...DANA },
    hub_mode: "embedded",
    hub_address: EMBEDDED_HUB,
    network_address: null,
    hub_failure: null,
    sync: { state: "idle", detail: null },
    version: "0.1.0-dev",
    detected: [],
    rooms: [],
    pings: [],
    contacts: [],
    requests: [],
    invites: [],
    agents: [],
    directory: [],
    redeemable: {},
    startTarget: null,
    boards: emptyBoards(),
    openedLinks: [],
    budgets: [],
  };
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

export function member(id: string, handle: string, kind: "user" | "agent"): MemberView {
  return { id, handle, kind };
}

export function storedMessage(
  room: string,
  seq: number,
  from: MemberView,
  text: string,
  ts_ms: number,
  extra: Partial<RoomMessage> = {},
): RoomMessage {
  return {
    room,
    seq,
    id: `${room}-m${seq}`,
    ts_ms,
    from: from.id,
    from_handle: from.handle,
    from_kind: from.kind,
    text,
    mentions: [],
    reply_to: null,
    delivery: "stored",
    error: null,
    outbox: null,
    mention_states: [],
    ...extra,
  };
}

/** An agent's report as agents write them: Markdown, with a list, code, a link and a table. */
const SECURITY_FINDINGS = [
  "Looking at it. Tokens are stored **0600**, good. Two things:",
  "",
  "1. `token_path()` follows symlinks, see [CWE-59](https://cwe.mitre.org/data/definitions/59.html).",
  "2. Rotation leaves the old file behind:",
  "",
  "```rust",
  "fs::write(&path, token)?;",
  "// missing: fs::remove_file(&old)?;",
  "```",
  "",
  "| file | mode |",
  "|:--|--:|",
  "| `agents/*.toml` | 0600 |",
  "| `hub/hub.sock` | 0700 |",
].join("\n");

/** Dana's machine after journeys 1, 3 and 4: two local agents, a teammate, a question. */
export function demoWorld(now: number): FakeWorld {
  const world = emptyWorld();
  const dana = member("u-dana", "dana", "user");
  const writer = member("a-writer", "dana/writer", "agent");
  const reviewer = member("a-reviewer", "dana/reviewer", "agent");
  const sam = member("u-sam", "sam", "user");
  const security = member("a-security", "sam/security", "agent");

  world.detected = [
    {
      cli: "claude",
      name: "Claude Code",
      path: "/usr/local/bin/claude",
      version: "2.1.4",
      supported: true,
      support: supportOf("claude"),
      config: ["~/.claude.json", "~/.claude/settings.json"],
      logs: ["~/.claude/projects"],
      onboarded: true,
      handle: "dana/writer",
    },
    {
      cli: "codex",
      name: "Codex",
      path: "/usr/local/bin/codex",
      version: "0.48.0",
      supported: true,
      support: supportOf("codex"),
      config: ["~/.codex/config.toml"],
      logs: ["~/.codex/sessions"],
      onboarded: true,
      handle: "dana/reviewer",
    },
    {
      cli: "gemini",
      name: "Gemini CLI",
      path: "/usr/local/bin/gemini",
      version: "0.9.0",
      supported: true,
      support: supportOf("gemini"),
      config: ["~/.gemini/settings.json"],
      logs: [],
      onboarded: false,
      handle: null,
    },
    {
      cli: "cursor-agent",
      name: "Cursor Agent",
      path: "/home/dana/.local/bin/cursor-agent",
      version: null,
      supported: false,
      support: supportOf("cursor-agent"),
      config: [],
      logs: [],
      onboarded: false,
      handle: null,
    },
  ];

  const parser: FakeRoom = {
    id: "r-parser",
    title: "parser",
    topic: "Implement and review the config parser",
    creator: writer.id,
    members: [dana, writer, reviewer],
    read_to: 9_990,
    messages: [],
  };
  const total = 10_000;
  for (let seq = 1; seq <= total; seq += 1) {
    const author = seq % 7 === 0 ? dana : seq % 2 === 0 ? reviewer : writer;
    parser.messages.push(
      storedMessage(
        parser.id,
        seq,
        author,
        seq % 5 === 0
          ? `Step ${seq}: tokenizer handles quoted keys, escapes and trailing commas.\nNext I will wire it into the loader.`
          : `Step ${seq}: ${author.handle === "dana" ? "looks good, carry on" : "working through the grammar"}`,
        now - (total - seq) * MINUTE,
      ),
    );
  }
  const lastAsk = parser.messages[total - 2]!;
  lastAsk.text = "Parser is done. @dana/reviewer please review src/parser.rs";
  lastAsk.from = writer.id;
  lastAsk.from_handle = writer.handle;
  lastAsk.from_kind = "agent";
  lastAsk.mentions = [reviewer.id];
  lastAsk.mention_states = [{ principal: reviewer.id, handle: reviewer.handle, state: "working" }];
  const mentionOfMe = parser.messages[total - 1]!;
  mentionOfMe.text = "@dana one question for you in Pings: keep the old config format?";
  mentionOfMe.from = reviewer.id;
  mentionOfMe.from_handle = reviewer.handle;
  mentionOfMe.from_kind = "agent";
  mentionOfMe.mentions = [dana.id];

  const security_review: FakeRoom = {
    id: "r-security",
    title: "security review",
    topic: null,
    creator: dana.id,
    members: [dana, sam, security, writer],
    read_to: 3,
    messages: [
      storedMessage("r-security", 1, dana, "Welcome Sam! This is where the review happens.", now - 3 * HOUR),
      storedMessage("r-security", 2, sam, "Thanks. Inviting @sam/security now.", now - 3 * HOUR + MINUTE, {
        mentions: [security.id],
        mention_states: [{ principal: security.id, handle: security.handle, state: "done" }],
      }),
      storedMessage("r-security", 3, writer, "@sam/security can you check the token handling?", now - 2 * HOUR, {
        mentions: [security.id],
        mention_states: [{ principal: security.id, handle: security.handle, state: "delivered" }],
      }),
      storedMessage("r-security", 4, security, SECURITY_FINDINGS, now - HOUR),
      {
        ...storedMessage("r-security", 0, dana, "I'll be offline this afternoon.", now - 10 * MINUTE),
        seq: null,
        id: null,
        delivery: "queued",
        outbox: 1,
      },
    ],
  };
  world.rooms = [parser, security_review];

  world.pings = [
    {
      room: parser.id,
      ping: "p-format",
      seq: 9_999,
      asker: reviewer.id,
      asker_handle: reviewer.handle,
      question: "Keep the old config format for one release?",
      options: ["yes", "no"],
      recipients: [dana.id],
      asked_ms: now - 2 * MINUTE,
      expires_ms: now + HOUR,
      state: "open",
      answered_by: null,
      answered_by_handle: null,
      answered_ms: null,
      choice: null,
      text: null,
    },
    {
      room: parser.id,
      ping: "p-run-tests",
      seq: 9_200,
      asker: writer.id,
      asker_handle: writer.handle,
      question: "Allow running `cargo test --workspace`?",
      options: ["allow", "deny"],
      recipients: [dana.id],
      asked_ms: now - 3 * HOUR,
      expires_ms: null,
      state: "answered",
      answered_by: dana.id,
      answered_by_handle: dana.handle,
      answered_ms: now - 3 * HOUR + MINUTE,
      choice: "allow",
      text: null,
    },
    {
      room: security_review.id,
      ping: "p-scope",
      seq: 2,
      asker: security.id,
      asker_handle: security.handle,
      question: "Should I include the CLI in the review scope?",
      options: [],
      recipients: [sam.id],
      asked_ms: now - 5 * HOUR,
      expires_ms: now - 4 * HOUR,
      state: "expired",
      answered_by: null,
      answered_by_handle: null,
      answered_ms: null,
      choice: null,
      text: null,
    },
  ];

  world.contacts = [{ principal: sam.id, handle: sam.handle, name: "Sam", kind: "user", since_ms: now - 4 * HOUR }];
  world.requests = [
    {
      id: "req-stranger",
      from: "a-crawler",
      from_handle: "eve/crawler",
      to: writer.id,
      to_handle: writer.handle,
      state: "pending",
      message: "I index public parsers; may I ask your agent questions?",
      ts_ms: now - 30 * MINUTE,
      incoming: true,
    },
    {
      id: "req-lee",
      from: dana.id,
      from_handle: dana.handle,
      to: "u-lee",
      to_handle: "lee",
      state: "pending",
      message: null,
      ts_ms: now - 2 * HOUR,
      incoming: false,
    },
  ];
  world.invites = [
    {
      id: "inv-1",
      room: security_review.id,
      uses_left: 1,
      expires_at: new Date(now + 24 * HOUR).toISOString(),
      created_at: new Date(now - 4 * HOUR).toISOString(),
    },
  ];
  world.redeemable = { TEAMHUB42: { creator: "u-lee", room: null } };

  world.agents = [
    {
      id: writer.id,
      handle: writer.handle,
      name: "writer",
      cli: "claude",
      state: "idle",
      detail: "Waiting for a review",
      room: parser.id,
      since_ms: now - 5 * MINUTE,
      controls: [],
    },
    {
      id: reviewer.id,
      handle: reviewer.handle,
      name: "reviewer",
      cli: "codex",
      state: "waiting_human",
      detail: "Keep the old config format for one release?",
      room: parser.id,
      since_ms: now - 2 * MINUTE,
      controls: [],
    },
    {
      id: security.id,
      handle: security.handle,
      name: "security",
      cli: null,
      state: "working",
      detail: "Reviewing token storage",
      room: security_review.id,
      since_ms: now - HOUR,
      controls: [],
    },
  ];

  world.directory = [
    { id: dana.id, kind: "user", handle: "dana", name: "Dana", description: null, owner: null, contact: "kin" },
    { id: writer.id, kind: "agent", handle: writer.handle, name: "writer", description: "Claude Code", owner: dana.id, contact: "kin" },
    { id: reviewer.id, kind: "agent", handle: reviewer.handle, name: "reviewer", description: "Codex", owner: dana.id, contact: "kin" },
    { id: sam.id, kind: "user", handle: "sam", name: "Sam", description: null, owner: null, contact: "accepted" },
    { id: security.id, kind: "agent", handle: security.handle, name: "security", description: "Security reviews", owner: sam.id, contact: "accepted" },
    { id: "u-lee", kind: "user", handle: "lee", name: "Lee", description: "Team lead", owner: null, contact: "pending_out" },
    { id: "a-crawler", kind: "agent", handle: "eve/crawler", name: "crawler", description: null, owner: "u-eve", contact: "pending_in" },
  ];
  world.boards = demoBoards(now);
  return world;
}
