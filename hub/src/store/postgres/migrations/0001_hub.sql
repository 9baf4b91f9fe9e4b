-- Roundtable hub on PostgreSQL, schema 1: the same records as the SQLite store's schemas
-- 1 to 6, with the rows a cluster of hub processes will lock (stream heads) from the start.
-- Times are milliseconds since the Unix epoch, as the hub's records carry them.

CREATE TABLE hub_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE principals (
    id           text PRIMARY KEY,
    kind         text NOT NULL CHECK (kind IN ('user', 'agent')),
    handle       text NOT NULL UNIQUE,
    name         text NOT NULL,
    owner        text REFERENCES principals (id),
    discoverable text NOT NULL CHECK (discoverable IN ('private', 'contacts', 'public')),
    description  text,
    card         text,
    created_ms   bigint NOT NULL,
    CHECK ((kind = 'user') = (owner IS NULL))
);

CREATE INDEX principals_owner ON principals (owner) WHERE owner IS NOT NULL;

-- Only SHA-256 hashes of tokens are stored.
CREATE TABLE tokens (
    hash       bytea PRIMARY KEY CHECK (length(hash) = 32),
    principal  text NOT NULL REFERENCES principals (id),
    created_ms bigint NOT NULL,
    revoked_ms bigint
);

CREATE INDEX tokens_principal ON tokens (principal);

CREATE TABLE rooms (
    id         text PRIMARY KEY,
    title      text,
    topic      text,
    creator    text NOT NULL REFERENCES principals (id),
    created_ms bigint NOT NULL
);

CREATE TABLE members (
    room      text NOT NULL REFERENCES rooms (id),
    principal text NOT NULL REFERENCES principals (id),
    routing   text NOT NULL CHECK (routing IN ('mentions', 'all')),
    joined_ms bigint NOT NULL,
    PRIMARY KEY (room, principal)
);

CREATE INDEX members_principal ON members (principal, room);

-- Every stream's events: a room's log (stream = room id) or an inbox
-- (stream = 'inbox:' || principal id). seq is dense per stream from 1.
CREATE TABLE events (
    stream     text NOT NULL,
    seq        bigint NOT NULL CHECK (seq >= 1),
    id         text NOT NULL,
    ts_ms      bigint NOT NULL,
    sender     text NOT NULL,
    kind       text NOT NULL,
    -- The body's JSON text, byte for byte as the hub wrote it.
    body       text NOT NULL,
    client_key text,
    -- Principal ids a message mentions.
    mentions   text[] NOT NULL DEFAULT '{}',
    -- Whether the room had exactly two members as the event was stored.
    pair       boolean NOT NULL,
    PRIMARY KEY (stream, seq)
);

-- Each stream's last seq, written with its events: the head `sync` plans from, and the row
-- an appending transaction of another hub process would lock.
CREATE TABLE stream_heads (
    stream text PRIMARY KEY,
    head   bigint NOT NULL CHECK (head >= 1)
);

CREATE TABLE pings (
    room        text NOT NULL REFERENCES rooms (id),
    ping        text NOT NULL,
    seq         bigint NOT NULL,
    -- User ids who may answer; empty: any user member.
    recipients  text[] NOT NULL,
    expires_ms  bigint,
    answered_by text,
    PRIMARY KEY (room, ping)
);

CREATE INDEX pings_open ON pings (expires_ms) WHERE answered_by IS NULL;

-- Read markers per (principal, device, stream).
CREATE TABLE acks (
    principal text NOT NULL,
    device    text NOT NULL,
    stream    text NOT NULL,
    seq       bigint NOT NULL,
    PRIMARY KEY (principal, device, stream)
);

-- An accepted contact between two principals, stored once with a < b.
CREATE TABLE contacts (
    a        text NOT NULL REFERENCES principals (id),
    b        text NOT NULL REFERENCES principals (id),
    since_ms bigint NOT NULL,
    request  text,
    PRIMARY KEY (a, b),
    CHECK (a < b)
);

CREATE INDEX contacts_b ON contacts (b, a);

CREATE TABLE contact_requests (
    id         text PRIMARY KEY,
    sender     text NOT NULL REFERENCES principals (id),
    target     text NOT NULL REFERENCES principals (id),
    state      text NOT NULL CHECK (state IN ('pending', 'accepted', 'rejected', 'cancelled', 'expired')),
    message    text,
    created_ms bigint NOT NULL,
    decided_ms bigint
);

CREATE INDEX contact_requests_pending ON contact_requests (sender, target) WHERE state = 'pending';

-- Invite codes: only the SHA-256 of a code is stored. A withdrawn invite stays, so its code
-- redeems as withdrawn rather than unknown, and its uses remain counted.
CREATE TABLE invites (
    id         text PRIMARY KEY,
    code_hash  bytea NOT NULL UNIQUE CHECK (length(code_hash) = 32),
    creator    text NOT NULL REFERENCES principals (id),
    room       text REFERENCES rooms (id),
    max_uses   bigint NOT NULL CHECK (max_uses >= 1),
    uses       bigint NOT NULL DEFAULT 0,
    expires_ms bigint NOT NULL,
    created_ms bigint NOT NULL,
    revoked_ms bigint
);

-- Pause and stop of agents, by scope: room '' is every room.
CREATE TABLE controls (
    agent  text NOT NULL REFERENCES principals (id),
    room   text NOT NULL,
    action text NOT NULL CHECK (action IN ('pause', 'stop')),
    by_id  text NOT NULL,
    ts_ms  bigint NOT NULL,
    reason text,
    PRIMARY KEY (agent, room)
);

-- The audit log, hash-chained: hash = SHA-256(previous hash ‖ canonical JSON of the entry
-- without hash), hex; the first entry's previous hash is 64 zeros.
CREATE TABLE audit (
    n         bigint PRIMARY KEY CHECK (n >= 1),
    ts_ms     bigint NOT NULL,
    principal text NOT NULL,
    action    text NOT NULL,
    target    text,
    result    text NOT NULL CHECK (result IN ('ok', 'err')),
    code      text,
    hash      text NOT NULL,
    count     bigint CHECK (count IS NULL OR count >= 2),
    reason    text
);

CREATE INDEX audit_principal ON audit (principal, n);
