-- A2A tasks are found by their first message's key among their sender's events (keys
-- `a2a:…`). Keys in general are remembered in memory (0003); only these are indexed, so an
-- A2A client's lookups never scan the events and no other send pays for the index. (The
-- rows are marked with substr, which SQLite does not turn into a range of its own, so the
-- lookups' ranges bound the scan: one row for one key.)
CREATE INDEX events_a2a_keys ON events (sender, client_key)
    WHERE substr(client_key, 1, 4) = 'a2a:';
