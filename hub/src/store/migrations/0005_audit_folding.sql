-- Refusals with the same (principal, action, code) within one second are folded into one
-- audit entry (protocol amendment 9): how many it stands for, when more than one, or NULL.
-- The canonical JSON an entry's hash covers includes "count" only when it is set, so the
-- hashes of earlier entries do not change.
ALTER TABLE audit ADD COLUMN count INTEGER CHECK (count IS NULL OR count >= 2);
