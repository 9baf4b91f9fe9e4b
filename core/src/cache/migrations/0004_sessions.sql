-- The agent CLI sessions this profile's agent runs (or ran), as its hooks and its runner
-- learn of them: which framework, where its transcript is, and, for a session the runner
-- resumes for a room's messages, which room it serves.

CREATE TABLE sessions (
    framework  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    transcript TEXT,
    cwd        TEXT,
    -- The room whose messages this session answers (the runner's binding), if any.
    room       TEXT,
    started_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (framework, session_id)
) STRICT;

CREATE UNIQUE INDEX sessions_room ON sessions (room, framework) WHERE room IS NOT NULL;
