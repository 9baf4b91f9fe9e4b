-- A2A tasks are found by their first message's key among their sender's events (keys
-- `a2a:…`): only these keys are indexed, so an A2A client's lookups never scan the events
-- and no other send pays for the index.
CREATE INDEX events_a2a_keys ON events (sender, client_key COLLATE "C")
    WHERE starts_with(client_key, 'a2a:');
