-- Roundtable hub, schema 2: contacts and their requests, invite codes, agent controls, the
-- audit log.

-- An accepted contact between two principals, stored once with a < b.
CREATE TABLE contacts (
    a        TEXT NOT NULL REFERENCES principals (id),
    b        TEXT NOT NULL REFERENCES principals (id),
    since_ms INTEGER NOT NULL,
    request  TEXT,
    PRIMARY KEY (a, b),
    CHECK (a < b)
) STRICT, WITHOUT ROWID;

CREATE TABLE contact_requests (
    id         TEXT PRIMARY KEY,
    sender     TEXT NOT NULL REFERENCES principals (id),
    target     TEXT NOT NULL REFERENCES principals (id),
    state      TEXT NOT NULL CHECK (state IN ('pending', 'accepted', 'rejected', 'cancelled', 'expired')),
    message    TEXT,
    created_ms INTEGER NOT NULL,
    decided_ms INTEGER
) STRICT;

-- Invite codes: only the SHA-256 of a code is stored.
CREATE TABLE invites (
    id         TEXT PRIMARY KEY,
    code_hash  BLOB NOT NULL UNIQUE CHECK (length(code_hash) = 32),
    creator    TEXT NOT NULL REFERENCES principals (id),
    room       TEXT REFERENCES rooms (id),
    max_uses   INTEGER NOT NULL CHECK (max_uses >= 1),
    uses       INTEGER NOT NULL DEFAULT 0,
    expires_ms INTEGER NOT NULL,
    created_ms INTEGER NOT NULL
) STRICT;

-- Pause and stop of agents, by scope: room '' is every room.
CREATE TABLE controls (
    agent  TEXT NOT NULL REFERENCES principals (id),
    room   TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('pause', 'stop')),
    by     TEXT NOT NULL,
    ts_ms  INTEGER NOT NULL,
    PRIMARY KEY (agent, room)
) STRICT, WITHOUT ROWID;

-- The audit log, hash-chained: hash = SHA-256(previous hash ‖ canonical JSON of the entry
-- without hash), hex; the first entry's previous hash is 64 zeros.
CREATE TABLE audit (
    n         INTEGER PRIMARY KEY,
    ts_ms     INTEGER NOT NULL,
    principal TEXT NOT NULL,
    action    TEXT NOT NULL,
    target    TEXT,
    result    TEXT NOT NULL CHECK (result IN ('ok', 'err')),
    code      TEXT,
    hash      TEXT NOT NULL
) STRICT;

CREATE INDEX audit_principal ON audit (principal, n);
