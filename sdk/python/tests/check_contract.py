"""Checks the SDK against the hub's own serialisations: every frame, reply and HTTP body the
Rust protocol crate pins in its snapshots (protocol/tests/it/snapshots/) decodes into the
SDK's types with nothing required missing, and the commands the SDK writes have exactly
the fields of the Rust client frames. Run by the Rust test `sdk_python` in CI."""

import json
import sys
from pathlib import Path

from roundtable import Event, Gap, Principal
from roundtable.client import auth_frame, register_agent_frame, send_frame, sync_frame

snapshots = Path(sys.argv[1])


def lines(name: str) -> list[dict]:
    text = (snapshots / f"it__snapshots__{name}.snap").read_text()
    body = text.split("---\n", 2)[2]
    return [json.loads(line) for line in body.splitlines() if line.strip()]


checked = 0
for frame in lines("server_frames"):
    if frame["t"] == "evt":
        event = Event.from_json(frame)
        assert event.stream in (frame.get("room"), "inbox"), frame
        checked += 1
    elif frame["t"] == "gap":
        gap = Gap.from_json(frame)
        assert gap.first <= gap.last
        checked += 1
for reply in lines("ok_payloads"):
    for event in ([reply["event"]] if "event" in reply else []) + reply.get("events", []):
        Event.from_json(event)
        checked += 1
    for field in ("agent", "principal"):
        if isinstance(reply.get(field), dict):
            Principal.from_json(reply[field])
            checked += 1
signup = lines("http_bodies")[0]
Principal.from_json(signup["principal"])
assert isinstance(signup["token"], str)

# The commands the SDK writes, against the Rust client frames of the same type.
ours = {
    "auth": auth_frame("rt_x", "laptop", "roundtable-desktop"),
    "sync": sync_frame({"inbox": 7, "r_1": 41}),
    "send": send_frame("r_1", "k-00000001", "message", {"text": "hi"}),
    "register_agent": register_agent_frame("writer", "writes code"),
}
theirs = {frame["t"]: frame for frame in lines("client_frames") if "t" in frame}
for kind, frame in ours.items():
    expected = {key for key in theirs[kind] if key != "id"}
    optional = {"register_agent": {"card", "discoverable"}}.get(kind, set())
    assert set(frame) <= expected, (kind, set(frame) - expected)
    assert expected - set(frame) <= optional, (kind, expected - set(frame))
    checked += 1
print(f"PASS: {checked} records and commands match the hub's")
