-- Who is on what. An agent may claim a component (`arch` status with `claim`, an
-- extension): others editing it are told who holds it; advisory, never a lock. And what an
-- agent was told of others editing the components it edits, so each is told once a window.
ALTER TABLE component_agents ADD COLUMN claimed INTEGER NOT NULL DEFAULT 0;

CREATE TABLE overlaps_told (
    room      TEXT NOT NULL,
    component TEXT NOT NULL,
    -- The other agent (id).
    other     TEXT NOT NULL,
    told_ms   INTEGER NOT NULL,
    PRIMARY KEY (room, component, other)
) STRICT, WITHOUT ROWID;
