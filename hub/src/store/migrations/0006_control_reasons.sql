-- A control may say why (a `control`'s `reason`, a Roundtable extension: "budget
-- reached"): the control in force keeps it, so a refused write can tell the agent, and the
-- audit log keeps it. The canonical JSON an entry's hash covers includes "reason" only when
-- it is set, so the hashes of earlier entries do not change.
ALTER TABLE audit ADD COLUMN reason TEXT;
ALTER TABLE controls ADD COLUMN reason TEXT;
