-- Several processes may use one profile at once (a `tail --follow` and a `send`). Each
-- entry belongs to the process that queued or claimed it (its lock file's id), so that one
-- process never sends, fails or requeues what another live process is handling. NULL: no
-- live owner, any process may send it.
ALTER TABLE outbox ADD COLUMN owner TEXT;

-- When a finished entry finished: its reply is kept a while for whoever waits on it, then
-- the entry is forgotten.
ALTER TABLE outbox ADD COLUMN done_ms INTEGER;
