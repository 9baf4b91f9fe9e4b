"""The protocol's records, as the hub writes them (checked against the Rust types' own
serialisations in CI: tests/check_contract.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Principal:
    id: str
    kind: str  # "user" or "agent"
    handle: str
    name: str
    owner: str | None = None

    @staticmethod
    def from_json(value: dict[str, Any]) -> "Principal":
        return Principal(
            id=value["id"],
            kind=value["kind"],
            handle=value["handle"],
            name=value["name"],
            owner=value.get("owner"),
        )


@dataclass(frozen=True)
class Event:
    """An event of a room's log or of the principal's inbox."""

    stream: str  # the room id, or "inbox"
    seq: int
    id: str
    ts: str
    sender: str  # the wire's `from`
    kind: str
    body: dict[str, Any]
    client_key: str | None = None
    room: str | None = None

    @staticmethod
    def from_json(value: dict[str, Any]) -> "Event":
        room = value.get("room")
        stream = room if room is not None else value.get("stream", "inbox")
        return Event(
            stream=stream,
            seq=int(value["seq"]),
            id=value["id"],
            ts=value["ts"],
            sender=value["from"],
            kind=value["kind"],
            body=value.get("body", {}),
            client_key=value.get("client_key"),
            room=room,
        )

    @property
    def text(self) -> str:
        """A message's text ("" for other kinds)."""
        text = self.body.get("text")
        return text if isinstance(text, str) else ""

    @property
    def mentions(self) -> list[str]:
        mentions = self.body.get("mentions")
        return list(mentions) if isinstance(mentions, list) else []


@dataclass(frozen=True)
class Gap:
    """Events of a room `sync` did not replay (fetch them with `history` if needed)."""

    room: str
    first: int
    last: int

    @staticmethod
    def from_json(value: dict[str, Any]) -> "Gap":
        return Gap(room=value["room"], first=int(value["from"]), last=int(value["to"]))


@dataclass(frozen=True)
class Registration:
    """An agent just registered: its principal, its token (shown once), its home room."""

    agent: Principal
    token: str
    room: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
