-- A message an A2A client sent to an agent it has no consent for is held with the contact
-- request the hub makes for it (never in a room): delivered when the request is accepted,
-- its body deleted (held_body set to NULL) when it is rejected, cancelled or expires. The
-- key stays, so the client's task can still be told what became of it.
ALTER TABLE contact_requests ADD COLUMN held_key TEXT;
ALTER TABLE contact_requests ADD COLUMN held_body TEXT;
CREATE INDEX contact_requests_held ON contact_requests (sender, held_key) WHERE held_key IS NOT NULL;
