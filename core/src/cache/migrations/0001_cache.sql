-- Roundtable client cache, schema 1: a mirror of what one principal may see on its hub,
-- the projections the apps read, and the outbox of writes not yet acknowledged.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- Per stream (a room id, or 'inbox'): the highest seq processed. Events below it that a
-- gap skipped are listed in `gaps` until history fills them.
CREATE TABLE cursors (
    stream TEXT PRIMARY KEY,
    seq    INTEGER NOT NULL
) STRICT;

CREATE TABLE gaps (
    room     TEXT NOT NULL,
    from_seq INTEGER NOT NULL,
    to_seq   INTEGER NOT NULL,
    PRIMARY KEY (room, from_seq)
) STRICT;

-- Every event received, as the hub sent it.
CREATE TABLE events (
    stream     TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    id         TEXT NOT NULL,
    ts_ms      INTEGER NOT NULL,
    sender     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    body       TEXT NOT NULL,
    client_key TEXT,
    PRIMARY KEY (stream, seq)
) STRICT, WITHOUT ROWID;

CREATE INDEX events_kind ON events (kind, stream, seq);

-- Principals met in replies (rooms, contacts, directory): to show handles, not ids.
CREATE TABLE principals (
    id     TEXT PRIMARY KEY,
    kind   TEXT NOT NULL,
    handle TEXT NOT NULL,
    name   TEXT NOT NULL,
    owner  TEXT
) STRICT;

-- Projections. Each value remembers the seq (or time) of the event that set it, and an
-- older event never overwrites a newer one, so events may be applied in any order (gap
-- filling applies old events after new ones).
CREATE TABLE rooms (
    id         TEXT PRIMARY KEY,
    title      TEXT,
    title_seq  INTEGER NOT NULL DEFAULT 0,
    topic      TEXT,
    topic_seq  INTEGER NOT NULL DEFAULT 0,
    creator    TEXT,
    -- Whether we are a member, per our inbox (room_added / room_removed).
    joined     INTEGER NOT NULL DEFAULT 1,
    joined_seq INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE members (
    room      TEXT NOT NULL,
    principal TEXT NOT NULL,
    present   INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (room, principal)
) STRICT, WITHOUT ROWID;

CREATE TABLE mentions (
    room      TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    principal TEXT NOT NULL,
    PRIMARY KEY (room, seq, principal)
) STRICT, WITHOUT ROWID;

CREATE INDEX mentions_principal ON mentions (principal, room, seq);

-- The latest task list of each agent session.
CREATE TABLE tasks (
    agent      TEXT NOT NULL,
    framework  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    room       TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    ts_ms      INTEGER NOT NULL,
    source     TEXT NOT NULL,
    tasks      TEXT NOT NULL,
    PRIMARY KEY (agent, framework, session_id)
) STRICT;

CREATE TABLE components (
    room        TEXT NOT NULL,
    id          TEXT NOT NULL,
    name        TEXT,
    description TEXT,
    paths       TEXT,
    depends_on  TEXT,
    def_seq     INTEGER NOT NULL DEFAULT 0,
    status      TEXT,
    note        TEXT,
    files       TEXT,
    status_by   TEXT,
    status_seq  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (room, id)
) STRICT;

CREATE TABLE usage (
    room        TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    agent       TEXT NOT NULL,
    framework   TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    model       TEXT NOT NULL,
    input       INTEGER NOT NULL,
    output      INTEGER NOT NULL,
    cache_write INTEGER NOT NULL,
    cache_read  INTEGER NOT NULL,
    cost_usd    REAL,
    from_ms     INTEGER NOT NULL,
    to_ms       INTEGER NOT NULL,
    PRIMARY KEY (room, seq)
) STRICT;

CREATE TABLE pings (
    room        TEXT NOT NULL,
    ping        TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    asker       TEXT NOT NULL,
    question    TEXT NOT NULL,
    options     TEXT,
    recipients  TEXT,
    expires_ms  INTEGER,
    answer_seq  INTEGER,
    answered_by TEXT,
    choice      TEXT,
    answer_text TEXT,
    PRIMARY KEY (room, ping)
) STRICT;

-- The latest status each agent reported (in any room).
CREATE TABLE agent_status (
    agent  TEXT PRIMARY KEY,
    room   TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    ts_ms  INTEGER NOT NULL,
    state  TEXT NOT NULL,
    detail TEXT
) STRICT;

CREATE TABLE requests (
    id      TEXT PRIMARY KEY,
    sender  TEXT NOT NULL,
    target  TEXT NOT NULL,
    state   TEXT NOT NULL,
    message TEXT,
    seq     INTEGER NOT NULL,
    ts_ms   INTEGER NOT NULL
) STRICT;

CREATE TABLE contacts (
    principal TEXT PRIMARY KEY,
    since_ms  INTEGER NOT NULL
) STRICT;

-- Pause and stop in force on us (when we are an agent), per room ('' = everywhere).
CREATE TABLE controls (
    room   TEXT PRIMARY KEY,
    action TEXT NOT NULL,
    by     TEXT NOT NULL,
    seq    INTEGER NOT NULL
) STRICT;

-- Writes waiting for the hub. A `send` carries its client_key, so replaying it is safe; any
-- other command is sent at most once (one interrupted in flight is marked failed).
CREATE TABLE outbox (
    n          INTEGER PRIMARY KEY AUTOINCREMENT,
    client_key TEXT UNIQUE,
    kind       TEXT NOT NULL CHECK (kind IN ('send', 'command')),
    room       TEXT,
    frame      TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('queued', 'inflight', 'done', 'failed')),
    error_code TEXT,
    error_msg  TEXT,
    retry_ms   INTEGER,
    reply      TEXT,
    created_ms INTEGER NOT NULL
) STRICT;

CREATE INDEX outbox_state ON outbox (state, n);
