-- How a command reached the hub, for commands that came through a gateway: 'a2a' (an A2A
-- client at /a2a/…) or 'mcp' (an MCP client at /mcp). NULL for the WebSocket, which every
-- entry before the gateways came through. The canonical JSON an entry's hash covers
-- includes "via" only when it is set, so older entries hash as they did.
ALTER TABLE audit ADD COLUMN via TEXT CHECK (via IS NULL OR via IN ('a2a', 'mcp'));
