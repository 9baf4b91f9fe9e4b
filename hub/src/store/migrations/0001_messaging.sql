-- Roundtable hub, schema 1: principals, tokens, rooms, members and the event log.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE principals (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('user', 'agent')),
    handle       TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL,
    owner        TEXT REFERENCES principals (id),
    discoverable TEXT NOT NULL CHECK (discoverable IN ('private', 'contacts', 'public')),
    description  TEXT,
    card         TEXT,
    created_ms   INTEGER NOT NULL,
    CHECK ((kind = 'user') = (owner IS NULL))
) STRICT;

-- Only SHA-256 hashes of tokens are stored.
CREATE TABLE tokens (
    hash       BLOB PRIMARY KEY CHECK (length(hash) = 32),
    principal  TEXT NOT NULL REFERENCES principals (id),
    created_ms INTEGER NOT NULL,
    revoked_ms INTEGER
) STRICT;

CREATE INDEX tokens_principal ON tokens (principal);

CREATE TABLE rooms (
    id         TEXT PRIMARY KEY,
    title      TEXT,
    topic      TEXT,
    creator    TEXT NOT NULL REFERENCES principals (id),
    created_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE members (
    room      TEXT NOT NULL REFERENCES rooms (id),
    principal TEXT NOT NULL REFERENCES principals (id),
    routing   TEXT NOT NULL CHECK (routing IN ('mentions', 'all')),
    joined_ms INTEGER NOT NULL,
    PRIMARY KEY (room, principal)
) STRICT, WITHOUT ROWID;

CREATE INDEX members_principal ON members (principal, room);

-- Every stream's events: a room's log (stream = room id) or an inbox
-- (stream = 'inbox:' || principal id). seq is dense per stream from 1.
CREATE TABLE events (
    stream     TEXT NOT NULL,
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    id         TEXT NOT NULL,
    ts_ms      INTEGER NOT NULL,
    sender     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    body       TEXT NOT NULL,
    client_key TEXT,
    -- Space-separated principal ids a message mentions.
    mentions   TEXT,
    -- 1 when the room had exactly two members as the event was stored.
    pair       INTEGER NOT NULL CHECK (pair IN (0, 1)),
    PRIMARY KEY (stream, seq)
) STRICT, WITHOUT ROWID;

-- Idempotency: one event per (sender, client_key), kept as long as the event.
CREATE UNIQUE INDEX events_client_key ON events (sender, client_key) WHERE client_key IS NOT NULL;

CREATE TABLE pings (
    room        TEXT NOT NULL REFERENCES rooms (id),
    ping        TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    -- JSON array of user ids who may answer; empty: any user member.
    recipients  TEXT NOT NULL,
    expires_ms  INTEGER,
    answered_by TEXT,
    PRIMARY KEY (room, ping)
) STRICT;

-- Read markers per (principal, device, stream).
CREATE TABLE acks (
    principal TEXT NOT NULL,
    device    TEXT NOT NULL,
    stream    TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (principal, device, stream)
) STRICT, WITHOUT ROWID;
