-- Agents another A2A server runs (remote agents): a principal with the address of its card
-- and no token, the credential the hub presents to it (never shown again), the calls owed
-- to it (one per message mentioning it, or per answer to its question, written with that
-- event; `next_ms` NULL once settled) and, per room, the remote conversation it continues.
ALTER TABLE principals ADD COLUMN remote_card_url TEXT;

CREATE TABLE remote_credentials (
    principal TEXT PRIMARY KEY REFERENCES principals (id),
    scheme    TEXT NOT NULL,
    header    TEXT,
    value     TEXT NOT NULL
);

CREATE TABLE remote_calls (
    room       TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    remote     TEXT NOT NULL REFERENCES principals (id),
    created_ms INTEGER NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    next_ms    INTEGER,
    PRIMARY KEY (room, seq, remote)
);
CREATE INDEX remote_calls_due ON remote_calls (next_ms) WHERE next_ms IS NOT NULL;

CREATE TABLE remote_threads (
    room       TEXT NOT NULL,
    remote     TEXT NOT NULL REFERENCES principals (id),
    context_id TEXT,
    task_id    TEXT,
    ping       TEXT,
    asker      TEXT,
    mention    TEXT,
    PRIMARY KEY (room, remote)
);
