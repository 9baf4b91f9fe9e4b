"""One connection to a hub that stays up: it authenticates, syncs from the cursors it keeps in
a file, hands events over once and in order, and after any drop (the network, a hub
restart) connects again and resumes where the program stopped, so nothing is lost or
repeated. A `send` carries a `client_key` and is retried with the same key until the hub
acknowledges it: one message, however many tries.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import random
import secrets
import ssl
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, AsyncIterator

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from .types import Event, Gap, Principal, Registration

VERSION = "0.1.0"

_log = logging.getLogger("roundtable")

# Close codes after which connecting again cannot help (docs/protocol.md, section 7).
_FINAL_CLOSES = {4001: "unauthorized", 4010: "token_revoked", 4011: "stopped"}

# Errors a retry with the same `client_key` settles (the outcome was unknown, or the hub
# was busy).
_RETRYABLE = {"internal", "busy", "rate_limited"}


class HubError(Exception):
    """The hub refused a command (`code` is stable: branch on it) or ended the session."""

    def __init__(self, code: str, msg: str, retry_after_ms: int | None = None):
        super().__init__(f"{code}: {msg}")
        self.code = code
        self.msg = msg
        self.retry_after_ms = retry_after_ms


class _ConnectionLost(Exception):
    pass


# The commands, as the protocol spells them (the hub adds nothing; `id` is added when sent).


def auth_frame(token: str, device: str, client_name: str) -> dict[str, Any]:
    return {
        "t": "auth",
        "token": token,
        "device": device,
        "client": {"name": client_name, "version": VERSION},
    }


def sync_frame(cursors: dict[str, int]) -> dict[str, Any]:
    return {"t": "sync", "cursors": dict(cursors)}


def send_frame(room: str, client_key: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"t": "send", "room": room, "client_key": client_key, "kind": kind, "body": body}


def register_agent_frame(name: str, description: str | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "register_agent", "name": name}
    if description is not None:
        frame["description"] = description
    return frame


def signup(base_url: str, handle: str, name: str | None = None) -> tuple[Principal, str]:
    """Creates a user on a hub that lets anyone sign up (`POST /v1/signup`); returns it and
    its token. `base_url` is `http://host:port` (or `https://…`)."""
    body = json.dumps({"handle": handle, "name": name or handle}).encode()
    request = urllib.request.Request(
        base_url.rstrip("/") + "/v1/signup",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            created = json.load(response)
    except urllib.error.HTTPError as error:
        refused = json.loads(error.read() or b"{}")
        raise HubError(refused.get("code", "internal"), refused.get("msg", str(error))) from None
    return Principal.from_json(created["principal"]), created["token"]


def _split_pin(url: str) -> tuple[str, bytes | None]:
    """A hub URL and the certificate it pins, if any: `wss://host:port/v1/ws#sha256=<hex>`
    (as the hub prints it for a certificate of its own)."""
    base, _, fragment = url.partition("#")
    if not fragment:
        return url, None
    hexdigest = fragment.removeprefix("sha256=")
    if fragment == hexdigest or len(hexdigest) != 64:
        raise ValueError(
            f"the hub address ends in #{fragment}: a pin is #sha256= and 64 hex digits, as the hub prints it"
        )
    if not base.startswith("wss://"):
        raise ValueError("a certificate pin needs a wss:// address")
    return base, bytes.fromhex(hexdigest)


class Client:
    """A principal's session with a hub.

    `url` is the hub's WebSocket endpoint (`ws://host:port/v1/ws` or `wss://…`; a hub with a
    certificate of its own is reached as `wss://…#sha256=<hex>`, its certificate pinned),
    `token` a user's or an agent's. `cursors` names a file where the position of every stream is kept
    as the program takes events: give one, and a restarted program goes on from where it
    stopped. Use it as `async with Client(...) as client:`.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        device: str = "python",
        cursors: str | os.PathLike[str] | None = None,
        client_name: str = "roundtable-python",
    ):
        self.url = url
        self._endpoint, self._pin = _split_pin(url)
        self._token = token
        self.device = device
        self._client_name = client_name
        self._cursors_path = Path(cursors) if cursors is not None else None
        self._cursors: dict[str, int] = self._read_cursors()
        # Per stream, the highest seq handed to the queue (a replay after a reconnect sends
        # some again: they are dropped here).
        self._queued: dict[str, int] = dict(self._cursors)
        self._incoming: asyncio.Queue[Event | Gap | HubError] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_id = 1
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self.principal: Principal | None = None
        self.hello: dict[str, Any] = {}

    # -- the session ---------------------------------------------------------------------

    async def __aenter__(self) -> "Client":
        await self.connect()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Connects, authenticates and syncs; raises `HubError` when the hub refuses the
        token. From then on the session reconnects by itself until `close`."""
        await self._open()
        self._keeper = asyncio.create_task(self._keep_connected())

    async def close(self) -> None:
        self._closing = True
        for task in (self._keeper, self._reader):
            if task is not None:
                task.cancel()
        if self._ws is not None:
            await self._ws.close()

    async def _open(self) -> None:
        context = None
        if self._pin is not None:
            # Exactly the pinned certificate, whoever signed it; the TLS handshake still
            # proves the hub holds its key. Checked before the token is sent.
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        ws = await connect(self._endpoint, max_size=None, open_timeout=30, ssl=context)
        try:
            if self._pin is not None:
                peer = ws.transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
                if peer is None or hashlib.sha256(peer).digest() != self._pin:
                    raise HubError(
                        "certificate",
                        "the hub's certificate is not the one pinned in its address; no token "
                        "was sent. Ask the hub's owner for its current address",
                    )
            self.hello = json.loads(await ws.recv())
            self._ws = ws
            self._reader = asyncio.create_task(self._read(ws))
            ok = await self._call_now(auth_frame(self._token, self.device, self._client_name))
            self.principal = Principal.from_json(ok["principal"])
            await self._call_now(sync_frame(self._cursors))
        except BaseException:
            await ws.close()
            raise
        self._connected.set()

    async def _keep_connected(self) -> None:
        """Waits for the connection to drop, then connects again with full-jitter backoff
        (0.5 s up to 30 s), until the session closes or the hub ends it for good."""
        while not self._closing:
            assert self._reader is not None
            await asyncio.gather(self._reader, return_exceptions=True)
            if self._closing:
                return
            delay = 0.5
            while not self._closing:
                try:
                    await self._open()
                    break
                except HubError as error:
                    self._incoming.put_nowait(error)
                    return
                except Exception as error:  # the network, a hub starting or stopping
                    _log.info("cannot reach the hub yet (%s: %s); trying again", type(error).__name__, error)
                    await asyncio.sleep(random.uniform(0, delay))
                    delay = min(delay * 2, 30.0)

    async def _read(self, ws: ClientConnection) -> None:
        final: HubError | None = None
        try:
            async for text in ws:
                frame = json.loads(text)
                kind = frame.get("t")
                if kind in ("ok", "err") and frame.get("re") in self._pending:
                    future = self._pending.pop(frame["re"])
                    if not future.done():
                        if kind == "ok":
                            future.set_result(frame)
                        else:
                            future.set_exception(
                                HubError(frame["code"], frame.get("msg", ""), frame.get("retry_after_ms"))
                            )
                elif kind == "evt":
                    self._offer(Event.from_json(frame))
                elif kind == "gap":
                    self._incoming.put_nowait(Gap.from_json(frame))
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else None
            if code in _FINAL_CLOSES:
                final = HubError(_FINAL_CLOSES[code], f"the hub closed the session ({code})")
        finally:
            self._connected.clear()
            self._ws = None
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(_ConnectionLost())
            self._pending.clear()
            if final is not None:
                self._closing = True
                self._incoming.put_nowait(final)

    def _offer(self, event: Event) -> None:
        if event.seq <= self._queued.get(event.stream, 0):
            return
        self._queued[event.stream] = event.seq
        self._incoming.put_nowait(event)

    async def _call_now(self, frame: dict[str, Any]) -> dict[str, Any]:
        ws = self._ws
        if ws is None:
            raise _ConnectionLost()
        frame = dict(frame, id=self._next_id)
        self._next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[frame["id"]] = future
        try:
            await ws.send(json.dumps(frame))
        except ConnectionClosed:
            self._pending.pop(frame["id"], None)
            raise _ConnectionLost() from None
        return await future

    async def call(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Sends one command (a dict with `t` and its fields; the id is added) once the
        session is connected, and returns its `ok` (raises `HubError` on `err`)."""
        while True:
            await self._connected.wait()
            try:
                return await self._call_now(frame)
            except _ConnectionLost:
                if self._closing:
                    raise HubError("closed", "the session is closed") from None

    # -- what a program does -------------------------------------------------------------

    async def send(
        self,
        room: str,
        text: str | None = None,
        *,
        kind: str = "message",
        body: dict[str, Any] | None = None,
        client_key: str | None = None,
    ) -> Event:
        """Sends an event to a room (a message by default) and returns it as stored. Until
        the hub acknowledges it, it is sent again with the same `client_key` (across
        reconnects and hub restarts), so it is stored once."""
        if body is None:
            body = {"text": text or ""}
        key = client_key or secrets.token_hex(16)
        delay = 0.2
        while True:
            try:
                ok = await self.call(send_frame(room, key, kind, body))
                return Event.from_json(ok["event"])
            except HubError as error:
                if error.code not in _RETRYABLE:
                    raise
                wait = (error.retry_after_ms or 0) / 1000 or random.uniform(0, delay)
                delay = min(delay * 2, 10.0)
                await asyncio.sleep(wait)

    async def events(self) -> AsyncIterator[Event | Gap]:
        """Every event this principal may see, once and in order per stream: first what it
        missed since its cursors, then live. An event counts as taken (and its stream's
        cursor moves, in the cursors file too) when the program asks for the next one. A
        `Gap` says a room's older events were not replayed."""
        while True:
            item = await self._incoming.get()
            if isinstance(item, HubError):
                raise item
            yield item
            if isinstance(item, Event):
                self._cursors[item.stream] = max(self._cursors.get(item.stream, 0), item.seq)
                self._write_cursors()

    async def messages(self) -> AsyncIterator[Event]:
        """The messages of others this principal receives (for an agent, those that mention
        it, or all in a room where it asked for all), once each."""
        async for item in self.events():
            if (
                isinstance(item, Event)
                and item.kind == "message"
                and self.principal is not None
                and item.sender != self.principal.id
            ):
                yield item

    async def register_agent(self, name: str, description: str | None = None) -> Registration:
        """Registers an agent of this user; its token is in the result, shown once."""
        ok = await self.call(register_agent_frame(name, description))
        room = ok.get("room")
        return Registration(
            agent=Principal.from_json(ok["agent"]),
            token=ok["token"],
            room=room.get("id") if isinstance(room, dict) else room,
        )

    async def create_room(self, members: list[str], title: str | None = None) -> str:
        """Creates a room with these handles (kin or contacts); returns its id."""
        frame: dict[str, Any] = {"t": "room_create", "members": members}
        if title is not None:
            frame["title"] = title
        ok = await self.call(frame)
        return ok["room"]["id"]

    async def answer(
        self, room: str, ping: str, text: str | None = None, choice: str | None = None
    ) -> Event:
        """Answers a person's ping (users only): the first answer wins."""
        body: dict[str, Any] = {"ping": ping}
        if text is not None:
            body["text"] = text
        if choice is not None:
            body["choice"] = choice
        return await self.send(room, kind="answer", body=body)

    # -- cursors -------------------------------------------------------------------------

    def _read_cursors(self) -> dict[str, int]:
        if self._cursors_path is None or not self._cursors_path.exists():
            return {}
        stored = json.loads(self._cursors_path.read_text() or "{}")
        return {str(stream): int(seq) for stream, seq in stored.items()}

    def _write_cursors(self) -> None:
        if self._cursors_path is None:
            return
        # Whole or not at all: a crash mid-write leaves the previous file.
        self._cursors_path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self._cursors_path.parent, prefix=".cursors-")
        with os.fdopen(fd, "w") as file:
            json.dump(self._cursors, file, sort_keys=True)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self._cursors_path)
