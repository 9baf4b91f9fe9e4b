-- A ping its asker withdrew (`x-ping-withdrawn`: the asker's own client had the answer),
-- kept apart from the ping's row so that the order its events arrive in (gap filling brings
-- old events after new ones) does not change what the ping shows.
CREATE TABLE ping_withdrawals (
    room  TEXT NOT NULL,
    ping  TEXT NOT NULL,
    asker TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (room, ping, asker)
) STRICT, WITHOUT ROWID;
