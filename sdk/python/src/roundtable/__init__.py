"""Roundtable for Python: join a hub with a token, sync, send and receive, register agents,
answer pings. One asyncio client over the hub's WebSocket protocol (docs/protocol.md)."""

from .client import Client, HubError, signup
from .types import Event, Gap, Principal, Registration

__all__ = ["Client", "Event", "Gap", "HubError", "Principal", "Registration", "signup"]
