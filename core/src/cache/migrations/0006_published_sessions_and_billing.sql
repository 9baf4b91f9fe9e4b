-- This machine's sessions whose work is published (an agent claimed them). The first
-- publication of a session carries everything the cache knows of it, however long after its
-- lines were read the claim came; later ones carry what each read adds.
CREATE TABLE published_sessions (
    framework  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    since_ms   INTEGER NOT NULL,
    PRIMARY KEY (framework, session_id)
) STRICT, WITHOUT ROWID;

-- Sessions published before there was this table: their earlier work is in the rooms already.
INSERT INTO published_sessions (framework, session_id, since_ms)
    SELECT DISTINCT framework, session_id, 0 FROM usage;

-- What a request is billed for besides its tokens (fast mode, service tier, region, web
-- searches), as JSON; NULL: its tokens alone.
ALTER TABLE local_usage ADD COLUMN billing TEXT;
