-- Invites can be withdrawn (protocol amendment 5): when its creator revoked it, or NULL.
-- A revoked invite stays, so its code redeems as withdrawn rather than unknown, and its
-- uses remain counted.
ALTER TABLE invites ADD COLUMN revoked_ms INTEGER;
