-- What `/mcp` keeps of its clients across a restart: each MCP session (2025-11-25) with the
-- principal that opened it and its `initialize` parameters, and the SSE events sent on its
-- streams, for `Last-Event-ID` to replay (an event's principal is set once the gate has
-- passed its id to that principal).
CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    principal    TEXT NOT NULL,
    state        TEXT,
    created_ms   INTEGER NOT NULL,
    last_used_ms INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_by_principal ON sessions (principal, last_used_ms);

-- Keys of this hub's own, e.g. the one that seals a question's state (2026-07-28).
CREATE TABLE keys (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
) STRICT;

CREATE TABLE events (
    n          INTEGER PRIMARY KEY AUTOINCREMENT,
    stream     TEXT NOT NULL,
    principal  TEXT NOT NULL,
    secret     TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_ms INTEGER NOT NULL
) STRICT;

CREATE INDEX events_by_stream ON events (stream, n);
CREATE INDEX events_by_age ON events (created_ms);
