-- Read markers, task history and who works on which component.

-- Per stream: the highest seq this principal has read (its own, or one of its other
-- devices' as the hub reported it). `sent` = 0 while the hub has not been told.
CREATE TABLE read_markers (
    stream TEXT PRIMARY KEY,
    seq    INTEGER NOT NULL,
    sent   INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Per room, how many messages others wrote, and how many of those we have read (at or
-- below our read marker); the same for messages that mention us. Kept as events arrive
-- and as the marker moves, so an unread count costs one row, however long the backlog.
CREATE TABLE room_counts (
    room          TEXT PRIMARY KEY,
    others        INTEGER NOT NULL DEFAULT 0,
    others_read   INTEGER NOT NULL DEFAULT 0,
    mentions      INTEGER NOT NULL DEFAULT 0,
    mentions_read INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Every status each task of each session had, per `tasks` snapshot, so views can say when a
-- task changed state. `task` is the task's id, or its title when it has none. Snapshots of
-- one session may come from several rooms: they are ordered by (ts_ms, room, seq).
CREATE TABLE task_states (
    agent      TEXT NOT NULL,
    framework  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    task       TEXT NOT NULL,
    ts_ms      INTEGER NOT NULL,
    room       TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    status     TEXT NOT NULL,
    PRIMARY KEY (agent, framework, session_id, task, ts_ms, room, seq)
) STRICT, WITHOUT ROWID;

-- Per component, the latest status each agent reported on it, so a board shows everyone
-- working on it, not only the last to speak.
CREATE TABLE component_agents (
    room      TEXT NOT NULL,
    component TEXT NOT NULL,
    agent     TEXT NOT NULL,
    status    TEXT NOT NULL,
    note      TEXT,
    files     TEXT,
    seq       INTEGER NOT NULL,
    ts_ms     INTEGER NOT NULL,
    PRIMARY KEY (room, component, agent)
) STRICT, WITHOUT ROWID;

-- When a component's overall status was set.
ALTER TABLE components ADD COLUMN status_ms INTEGER;

-- A room's messages in order, with their senders: unread counts read the index alone.
CREATE INDEX events_stream_kind ON events (stream, kind, seq, sender);

-- Projections added here cannot be rebuilt from the events already cached without the code
-- that projects them: forgetting the epoch makes the next sync rebuild the cache from the
-- hub (the outbox stays, as for any new epoch).
DELETE FROM meta WHERE key = 'epoch';
