-- Roundtable hub on PostgreSQL, schema 2: several hub processes sharing the database.
-- Every batch a process commits takes one lock first and leaves a row here, numbered in the
-- order the batches took it: dense, and a row is visible before the next batch can start,
-- so a reader of `n > x` never skips one still committing. The others catch up from here
-- before their next batch and fan its events out to their connections. Rows are kept a
-- few minutes.
CREATE TABLE shared_batches (
    n            bigint PRIMARY KEY CHECK (n >= 1),
    node         text NOT NULL,
    committed_ms bigint NOT NULL,
    -- The batch's changes and deliveries, as JSON (hub/src/replication.rs).
    batch        text NOT NULL
);

CREATE INDEX shared_batches_age ON shared_batches (committed_ms);
