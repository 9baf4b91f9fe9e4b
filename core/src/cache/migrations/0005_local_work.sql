-- The work view of this machine: what the agent CLIs' own logs say, as the watcher reads
-- them. Each file's offset moves in the same transaction as what its lines said (and the
-- events published from them), so a restart neither reads a line twice nor loses one.

CREATE TABLE log_files (
    path        TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    -- Which file it was: a replaced file (another inode) is read from the start.
    device      INTEGER NOT NULL,
    inode       INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    "offset"    INTEGER NOT NULL,
    -- The parser's state after the last complete line read (JSON).
    parser      TEXT,
    skipped     INTEGER NOT NULL DEFAULT 0,
    read_ms     INTEGER NOT NULL
) STRICT;

CREATE TABLE local_sessions (
    framework  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    cwd        TEXT,
    model      TEXT,
    first_ms   INTEGER,
    last_ms    INTEGER,
    PRIMARY KEY (framework, session_id)
) STRICT;

-- Tokens per model request (a request reported by several lines or files counts once, its
-- largest report); a Codex delta is its own "request", named by its file and offset.
CREATE TABLE local_usage (
    framework      TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    message_id     TEXT NOT NULL,
    request_id     TEXT NOT NULL,
    sidechain      INTEGER NOT NULL,
    model          TEXT NOT NULL,
    input          INTEGER NOT NULL,
    output         INTEGER NOT NULL,
    cache_write_5m INTEGER NOT NULL,
    cache_write_1h INTEGER NOT NULL,
    cache_read     INTEGER NOT NULL,
    at_ms          INTEGER,
    PRIMARY KEY (framework, session_id, message_id, request_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX local_usage_time ON local_usage (at_ms);

-- The last task list of each lane ('' : the session's own; else a subagent's id).
CREATE TABLE local_tasks (
    framework  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    lane       TEXT NOT NULL,
    source     TEXT NOT NULL,
    tasks      TEXT NOT NULL,
    at_ms      INTEGER,
    PRIMARY KEY (framework, session_id, lane)
) STRICT;

CREATE TABLE local_files (
    framework  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    path       TEXT NOT NULL,
    tool       TEXT NOT NULL,
    at_ms      INTEGER,
    PRIMARY KEY (framework, session_id, path)
) STRICT, WITHOUT ROWID;
