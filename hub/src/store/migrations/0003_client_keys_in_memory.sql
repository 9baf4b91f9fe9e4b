-- Idempotency moves to the hub's memory (see hub/src/sent_keys.rs): the keys are rebuilt
-- at start from events.client_key, which stays. The unique index cost every commit one
-- rewritten page per active sender.
DROP INDEX events_client_key;
