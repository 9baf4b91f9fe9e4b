-- Controls this principal put on agents (its own, or members of rooms it created), once the
-- hub accepted them. The hub tells only the agent (a `control` event in its inbox), so this
-- is how the person's own views know that an agent they paused is paused. One row per
-- (agent, room); room '' is every room. A resume removes what it lifts.
CREATE TABLE issued_controls (
    agent  TEXT NOT NULL,
    room   TEXT NOT NULL,
    action TEXT NOT NULL,
    ts_ms  INTEGER NOT NULL,
    PRIMARY KEY (agent, room)
) STRICT;
