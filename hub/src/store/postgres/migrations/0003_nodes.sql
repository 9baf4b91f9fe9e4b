-- Roundtable hub on PostgreSQL, schema 3: how far each hub process of a cluster has fanned
-- out the shared batches, and when it last said so. A revocation's `ok` waits (a second at
-- most) until every live process has fanned out the batch that closes the token's
-- connections. Written without waiting for the disk: it is news, not data.
CREATE TABLE nodes (
    node       text PRIMARY KEY,
    dispatched bigint NOT NULL,
    seen_ms    bigint NOT NULL
);
