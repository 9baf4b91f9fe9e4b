#!/usr/bin/env python3
"""Independent conformance client for the Roundtable wire protocol, version 1.

Written from the protocol contract only (docs/protocol.md; no knowledge of the hub's source).
Python 3.11, standard library only. Usage:

    python3 client.py HOST:PORT [--keep-going]

Runs one scenario, printing one line per step. Exit status: 0 when the hub behaved as the
spec says, 1 on the first deviation from the spec (or, with --keep-going, after the run when
any deviation was recorded), 2 when the client itself broke or the scenario could not go on.

Ambiguities in the spec and what this client assumes
----------------------------------------------------
A1. `hello.hub` (section 3) and the `hub` of /.well-known/roundtable.json (section 6) are both
    described as the hub's id; `hello.epoch` and /v1/health `epoch` both as the hub's epoch.
    Assumed: equal values on one hub.
A2. `register_agent` "ok carries agent, token" (section 5) does not say whether `agent` is an id
    or a principal object. Section 5 says "fields named agent take ids" but that is about
    command fields. Assumed: a principal object {id, kind, handle, name, owner}; an id string
    is accepted too (then the handle is learned from the agent's own `auth` ok).
A3. The default `routing` of an agent member is not stated. The client reads it from the room
    reply and asserts the "no mention => not delivered" filtering only when it is "mentions".
A4. Whether `room_create` writes `member`/`room` events into the new room's log is not stated;
    the client makes no assumption on the room's initial head beyond it being an integer >= 0
    and equal to the `sync` head until somebody writes.
A5. The error for an invalid JSON text frame or a binary frame cannot carry `re` (no id can be
    read); the client accepts `re` absent or null there.
A6. `client_key` on an event is "to its sender only": read as the sending principal (all its
    devices); the client asserts only that another principal (the agent) does not get it.
A7. "The connection that wrote an event with send gets it back in ok, not live": asserted as
    "no evt with the seq of an own send arrives on the writing connection".
A8. `history` returns `events`; whether each element has `"t":"evt"` is not stated; the client
    checks only seq/id/room of history elements.
A9. Live delivery starts only after the first `sync` completes: the client treats an `evt`
    received before its first `sync` as a deviation.
A10. The ts format: the example is RFC 3339 UTC with milliseconds ("...09:00:00.123Z"); the
    client accepts any RFC 3339 timestamp.
A12. The `event` inside a send `ok` is "the stored event": the client does not require it to carry
    `"t":"evt"` (that marks a frame), only the event fields of section 4.
A13. `routing` is listed for every room member, but section 5 says users always see all; the spec
    does not say what a user's `routing` value must be, so any of mentions|all is accepted.
A11. "inbox: <its inbox head>" for the resume in step 10 is taken as the highest inbox seq the
    old connection had seen; the client then checks the inbox replay is dense from there.
"""

import base64
import hashlib
import http.client
import json
import os
import re
import secrets
import socket
import struct
import sys
import time

KEEP_GOING = False
DEVIATIONS = []
STEP = "0"

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
USER_HANDLE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{1,31}$")
TS_RE = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
TIMEOUT = 10.0


class Deviation(Exception):
    pass


class ScenarioError(Exception):
    """The client cannot continue (not necessarily a hub deviation)."""


def log(msg):
    print(f"[step {STEP}] {msg}", flush=True)


def deviation(msg):
    text = f"DEVIATION at step {STEP}: {msg}"
    if KEEP_GOING:
        DEVIATIONS.append(text)
        print(text, flush=True)
    else:
        raise Deviation(text)


def check(cond, msg):
    if not cond:
        deviation(msg)
    return bool(cond)


def short(obj, n=600):
    s = json.dumps(obj, sort_keys=True) if not isinstance(obj, str) else obj
    return s if len(s) <= n else s[:n] + "..."


# --------------------------------------------------------------------------- HTTP


def http_req(addr, method, path, body=None):
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT)
    headers = {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    ctype = resp.getheader("Content-Type", "")
    conn.close()
    try:
        parsed = json.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, UnicodeDecodeError):
        parsed = None
    return resp.status, parsed, raw, ctype


# --------------------------------------------------------------------------- WebSocket


class Closed(Exception):
    def __init__(self, code, reason):
        super().__init__(f"closed with code {code} reason {reason!r}")
        self.code = code
        self.reason = reason


class WS:
    """Minimal RFC 6455 client: masked frames, fragmentation, ping/pong, close."""

    def __init__(self, addr, path="/v1/ws", name="ws"):
        self.addr = addr
        self.name = name
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        self.buf = b""
        self.pending = []          # parsed JSON frames not consumed yet
        self.events = []           # every evt seen on this connection, in arrival order
        self.others = []           # non-evt, non-reply frames (gap, ...)
        self.closed = None         # (code, reason) once the peer closed
        self.close_sent = False
        self.synced = False
        self.next_id = 1
        key = base64.b64encode(os.urandom(16)).decode()
        req = (
            f"GET {path} HTTP/1.1\r\n"
            f"Host: {addr}\r\n"
            "Upgrade: websocket\r\n"
            "Connection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n"
            "\r\n"
        )
        self.sock.sendall(req.encode())
        head = b""
        deadline = time.monotonic() + TIMEOUT
        while b"\r\n\r\n" not in head:
            if time.monotonic() > deadline:
                raise Deviation(f"{name}: no HTTP response to the WebSocket upgrade")
            chunk = self.sock.recv(4096)
            if not chunk:
                raise Deviation(f"{name}: connection closed during the upgrade; got {head!r}")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        lines = head.decode("iso-8859-1").split("\r\n")
        status = lines[0].split(" ", 2)
        if len(status) < 2 or status[1] != "101":
            raise Deviation(f"{name}: GET {path} upgrade: expected 101 (section 2), got {lines[0]!r}")
        hdrs = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        expect = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        if hdrs.get("sec-websocket-accept") != expect:
            raise Deviation(f"{name}: bad Sec-WebSocket-Accept {hdrs.get('sec-websocket-accept')!r}, expected {expect!r} (RFC 6455)")
        if hdrs.get("upgrade", "").lower() != "websocket":
            raise Deviation(f"{name}: Upgrade header is {hdrs.get('upgrade')!r} (RFC 6455)")

    # -- raw frames

    def _send_frame(self, opcode, payload, fin=True):
        b0 = (0x80 if fin else 0) | opcode
        n = len(payload)
        if n < 126:
            hdr = struct.pack("!BB", b0, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", b0, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", b0, 0x80 | 127, n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(hdr + mask + masked)

    def _read_exact(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError()
            except (ConnectionResetError, BrokenPipeError) as e:
                raise Closed(None, f"TCP error without close frame: {e}")
            if not chunk:
                raise Closed(None, "TCP closed without a close frame")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _read_frame(self, deadline):
        b0, b1 = self._read_exact(2, deadline)
        fin = bool(b0 & 0x80)
        opcode = b0 & 0x0F
        if b0 & 0x70:
            raise Deviation(f"{self.name}: server frame with RSV bits set (RFC 6455)")
        if b1 & 0x80:
            raise Deviation(f"{self.name}: server frame is masked (RFC 6455 5.1)")
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._read_exact(2, deadline))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._read_exact(8, deadline))
        payload = self._read_exact(n, deadline) if n else b""
        return fin, opcode, payload

    def _read_message(self, deadline):
        """Returns (opcode, payload) of the next data message; handles control frames."""
        frag_op, frags = None, []
        while True:
            fin, op, payload = self._read_frame(deadline)
            if op == 0x9:  # ping
                self._send_frame(0xA, payload)
                continue
            if op == 0xA:  # pong
                continue
            if op == 0x8:  # close
                code, reason = None, ""
                if len(payload) >= 2:
                    (code,) = struct.unpack("!H", payload[:2])
                    reason = payload[2:].decode("utf-8", "replace")
                self.closed = (code, reason)
                if not self.close_sent:
                    try:
                        self._send_frame(0x8, payload[:2])
                        self.close_sent = True
                    except OSError:
                        pass
                raise Closed(code, reason)
            if op in (0x1, 0x2):
                if not fin:
                    frag_op, frags = op, [payload]
                    continue
                return op, payload
            if op == 0x0:
                frags.append(payload)
                if fin:
                    return frag_op, b"".join(frags)
                continue
            raise Deviation(f"{self.name}: unknown opcode {op} from server")

    # -- JSON level

    def send_json(self, obj):
        self._send_frame(0x1, json.dumps(obj).encode())

    def send_text(self, text):
        self._send_frame(0x1, text.encode())

    def send_binary(self, data):
        self._send_frame(0x2, data)

    def recv_json(self, timeout=TIMEOUT):
        if self.pending:
            return self.pending.pop(0)
        deadline = time.monotonic() + timeout
        op, payload = self._read_message(deadline)
        if op != 0x1:
            raise Deviation(f"{self.name}: server sent a binary frame (section 2: one JSON object per text frame)")
        try:
            obj = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise Deviation(f"{self.name}: server text frame is not JSON: {payload[:200]!r}")
        if not isinstance(obj, dict) or "t" not in obj:
            raise Deviation(f"{self.name}: server frame is not an object with t: {short(obj)}")
        return obj

    def _note(self, frame):
        if frame.get("t") == "evt":
            if not self.synced:
                deviation(f"{self.name}: evt before the first sync completed (section 3: live delivery "
                          f"starts when the first sync completes): {short(frame)}")
            self.events.append(frame)
        else:
            self.others.append(frame)

    def request(self, obj, timeout=TIMEOUT):
        """Sends a command with a fresh id; returns its ok/err reply. Other frames are kept."""
        rid = self.next_id
        self.next_id += 1
        obj = dict(obj)
        obj["id"] = rid
        self.send_json(obj)
        return self.wait_reply(rid, timeout)

    def wait_reply(self, rid, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Deviation(f"{self.name}: no reply with re={rid} within {timeout}s (section 2: every reply carries re)")
            try:
                f = self.recv_json(left)
            except TimeoutError:
                continue
            except Closed as c:
                raise Deviation(f"{self.name}: connection closed (code {c.code}, {c.reason!r}) while waiting for re={rid}")
            if f.get("t") in ("ok", "err") and f.get("re") == rid:
                return f
            self._note(f)

    def drain(self, seconds):
        """Reads whatever arrives for `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                f = self.recv_json(left)
            except TimeoutError:
                return
            self._note(f)

    def wait_event(self, pred, timeout=TIMEOUT):
        """Waits until an evt matching pred has been seen (already or newly)."""
        for e in self.events:
            if pred(e):
                return e
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                f = self.recv_json(left)
            except TimeoutError:
                return None
            self._note(f)
            if f.get("t") == "evt" and pred(f):
                return f

    def close(self, code=1000):
        try:
            self._send_frame(0x8, struct.pack("!H", code))
            self.close_sent = True
            deadline = time.monotonic() + 3
            while self.closed is None:
                try:
                    self._read_message(deadline)
                except (Closed, TimeoutError):
                    break
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------- helpers


def check_err(reply, code, rid=None, require_re=True, what=""):
    ok = check(reply.get("t") == "err" and reply.get("code") == code,
               f"{what}: expected err {code} (section 7), got {short(reply)}")
    if ok:
        check(isinstance(reply.get("msg"), str) and reply["msg"].strip() != "",
              f"{what}: err without a plain-words msg (section 2/7): {short(reply)}")
        if require_re:
            check(reply.get("re") == rid, f"{what}: err re is {reply.get('re')!r}, expected {rid} (section 2)")
    return ok


def expect_ok(reply, what):
    if reply.get("t") != "ok":
        deviation(f"{what}: expected ok, got {short(reply)}")
        raise ScenarioError(f"cannot continue after failed {what}")
    return reply


def check_principal(p, what, kind=None, handle=None, pid=None, owner="any"):
    if not check(isinstance(p, dict), f"{what}: principal is not an object: {short(p)}"):
        return
    for k in ("id", "kind", "handle", "name", "owner"):
        check(k in p, f"{what}: principal lacks {k!r} (section 3): {short(p)}")
    check(isinstance(p.get("id"), str) and p.get("id"), f"{what}: principal id not a non-empty string: {short(p)}")
    check(p.get("kind") in ("user", "agent"), f"{what}: principal kind {p.get('kind')!r} not user|agent")
    if kind is not None:
        check(p.get("kind") == kind, f"{what}: kind {p.get('kind')!r}, expected {kind!r}")
    if handle is not None:
        check(p.get("handle") == handle, f"{what}: handle {p.get('handle')!r}, expected {handle!r}")
    if pid is not None:
        check(p.get("id") == pid, f"{what}: id {p.get('id')!r}, expected {pid!r}")
    if owner != "any":
        check(p.get("owner") == owner, f"{what}: owner {p.get('owner')!r}, expected {owner!r}")


def check_token(tok, what):
    if not check(isinstance(tok, str) and tok.startswith("rt_"), f"{what}: token {tok!r} does not start with rt_ (section 1)"):
        return
    rest = tok[3:]
    is_hex = re.fullmatch(r"[0-9a-fA-F]+", rest) is not None and len(rest) >= 64
    is_b64 = re.fullmatch(r"[A-Za-z0-9_-]+=*", rest) is not None and len(rest.rstrip("=")) >= 43
    check(is_hex or is_b64, f"{what}: token body {len(rest)} chars is not >=32 bytes of base64url/hex (section 1)")


def stream_of(e):
    if "room" in e and e.get("room") is not None:
        return e["room"]
    return e.get("stream")


def check_evt(e, what, frame=True):
    # frame=False for the `event` carried inside an ok: the spec shows `t: evt` only on frames.
    if frame:
        check(e.get("t") == "evt", f"{what}: not an evt: {short(e)}")
    has_room = isinstance(e.get("room"), str)
    has_stream = e.get("stream") == "inbox"
    check(has_room or has_stream, f"{what}: evt without room or stream inbox (section 4): {short(e)}")
    check(isinstance(e.get("seq"), int) and e["seq"] >= 1, f"{what}: evt seq not an int >= 1: {short(e)}")
    check(isinstance(e.get("id"), str) and e["id"], f"{what}: evt id missing: {short(e)}")
    check(isinstance(e.get("ts"), str) and TS_RE.match(e["ts"] or ""), f"{what}: evt ts not RFC 3339: {short(e)}")
    check(isinstance(e.get("from"), str), f"{what}: evt from missing: {short(e)}")
    check(isinstance(e.get("kind"), str), f"{what}: evt kind missing: {short(e)}")
    check(isinstance(e.get("body"), dict), f"{what}: evt body not an object: {short(e)}")


def check_room_shape(room, what):
    if not check(isinstance(room, dict), f"{what}: room not an object: {short(room)}"):
        return
    for k in ("id", "title", "topic", "head", "creator", "members"):
        check(k in room, f"{what}: room lacks {k!r} (section 5: room is {{id,title,topic,head,creator,members}}): {short(room)}")
    check(isinstance(room.get("id"), str) and room.get("id"), f"{what}: room id not a string")
    check(isinstance(room.get("head"), int) and room.get("head") >= 0, f"{what}: room head not an int >= 0: {room.get('head')!r}")
    members = room.get("members")
    if check(isinstance(members, list), f"{what}: members not a list"):
        for m in members:
            for k in ("id", "kind", "handle", "name", "routing"):
                check(isinstance(m, dict) and k in m, f"{what}: member lacks {k!r} (section 5): {short(m)}")
            if isinstance(m, dict) and "routing" in m:
                check(m["routing"] in ("mentions", "all"), f"{what}: member routing {m['routing']!r} not mentions|all")


def collect_sync(ws, cursors, what):
    """Sends sync; returns (ok reply, list of evts received before the ok)."""
    start = len(ws.events)
    rid = ws.next_id
    ws.next_id += 1
    ws.send_json({"t": "sync", "id": rid, "cursors": cursors})
    deadline = time.monotonic() + TIMEOUT
    replay = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Deviation(f"{what}: no ok for sync re={rid} within {TIMEOUT}s")
        try:
            f = ws.recv_json(left)
        except TimeoutError:
            continue
        except Closed as c:
            raise Deviation(f"{what}: closed (code {c.code}) during sync")
        if f.get("re") == rid and f.get("t") in ("ok", "err"):
            if f.get("t") != "ok":
                deviation(f"{what}: sync got {short(f)}")
                raise ScenarioError("sync failed")
            ws.synced = True
            return f, replay
        if f.get("t") == "evt":
            ws.events.append(f)
            replay.append(f)
        else:
            ws.others.append(f)


def check_ordering(evts, what):
    """Per stream: ascending seq, no duplicates (section 3)."""
    last = {}
    for e in evts:
        s = stream_of(e)
        if s in last:
            check(e["seq"] > last[s], f"{what}: stream {s}: seq {e['seq']} after {last[s]} (section 3: ascending, no duplicates)")
        last[s] = e["seq"]


def per_stream(evts):
    out = {}
    for e in evts:
        out.setdefault(stream_of(e), []).append(e)
    return out


def ws_connect_auth(addr, token, device, name, expect_kind, expect_handle, expect_id, expect_owner="any"):
    ws = WS(addr, name=name)
    hello = ws.recv_json()
    check(hello.get("t") == "hello", f"{name}: first server frame is not hello (section 3): {short(hello)}")
    rid = ws.next_id
    ws.next_id += 1
    ws.send_json({"t": "auth", "id": rid, "token": token, "device": device,
                  "client": {"name": "independent-conformance", "version": "0.0.1"}})
    ok = ws.wait_reply(rid)
    if ok.get("t") != "ok":
        deviation(f"{name}: auth got {short(ok)}")
        raise ScenarioError("auth failed")
    check_principal(ok.get("principal"), f"{name} auth ok", kind=expect_kind, handle=expect_handle,
                    pid=expect_id, owner=expect_owner)
    return ws, hello, ok


# --------------------------------------------------------------------------- scenario


def step(n, title):
    global STEP
    STEP = str(n)
    log(title)


def run(addr):
    sfx = secrets.token_hex(4)

    # ---------------------------------------------------------------- 1
    step(1, "GET /v1/health and /.well-known/roundtable.json")
    st, health, raw, _ = http_req(addr, "GET", "/v1/health")
    check(st == 200, f"GET /v1/health: status {st}, expected 200 (section 6); body {raw[:200]!r}")
    if not isinstance(health, dict):
        raise Deviation(f"GET /v1/health: body is not a JSON object: {raw[:200]!r}")
    check(health.get("ok") is True, f"GET /v1/health: ok is {health.get('ok')!r}, expected true (section 6)")
    check(isinstance(health.get("version"), str) and health.get("version"), f"GET /v1/health: version missing: {short(health)}")
    check(isinstance(health.get("epoch"), str) and health.get("epoch"), f"GET /v1/health: epoch missing: {short(health)}")
    log(f"health {short(health)}")
    st, wk, raw, _ = http_req(addr, "GET", "/.well-known/roundtable.json")
    check(st == 200, f"GET /.well-known/roundtable.json: status {st} (section 6)")
    if not isinstance(wk, dict):
        raise Deviation(f"GET /.well-known/roundtable.json: not a JSON object: {raw[:200]!r}")
    check(isinstance(wk.get("hub"), str) and wk.get("hub"), f"well-known: hub missing: {short(wk)}")
    check(isinstance(wk.get("proto"), list) and 1 in wk.get("proto"), f"well-known: proto {wk.get('proto')!r} does not list 1 (section 6: \"proto\":[1])")
    check(wk.get("signup") in ("open", "invite", "closed"), f"well-known: signup {wk.get('signup')!r} not open|invite|closed (section 6)")
    log(f"well-known {short(wk)}")
    if wk.get("signup") != "open":
        raise ScenarioError(f"signup is {wk.get('signup')!r}; this scenario needs an open hub")

    # ---------------------------------------------------------------- 2
    step(2, "POST /v1/signup for two users, duplicate handle, invalid handle")
    ha, hb = f"ita-{sfx}", f"itb-{sfx}"
    for h in (ha, hb):
        assert USER_HANDLE_RE.match(h)
    users = {}
    for h, nm in ((ha, "Alice Indep"), (hb, "Bob Indep")):
        st, body, raw, _ = http_req(addr, "POST", "/v1/signup", {"handle": h, "name": nm})
        if st != 200 or not isinstance(body, dict):
            raise Deviation(f"POST /v1/signup {h}: expected 200 {{principal, token}} (section 6), got {st} {raw[:300]!r}")
        check_principal(body.get("principal"), f"signup {h}", kind="user", handle=h, owner=None)
        check(body.get("principal", {}).get("name") == nm, f"signup {h}: name {body.get('principal', {}).get('name')!r}, expected {nm!r}")
        check_token(body.get("token"), f"signup {h}")
        users[h] = body
        log(f"signed up {h} id={body['principal']['id']}")
    st, body, raw, _ = http_req(addr, "POST", "/v1/signup", {"handle": ha, "name": "Dup"})
    check(st == 409, f"POST /v1/signup duplicate {ha}: status {st}, expected 409 (section 6); body {raw[:300]!r}")
    check(isinstance(body, dict) and body.get("code") == "conflict" and isinstance(body.get("msg"), str) and body.get("msg"),
          f"POST /v1/signup duplicate: body {raw[:300]!r}, expected {{code: conflict, msg}} (section 6)")
    log(f"duplicate handle -> {st} {short(body)}")
    # extra: upper case is refused, never normalized (section 1), 400 bad_frame (section 6)
    bad = f"Itc-{sfx}"
    st, body, raw, _ = http_req(addr, "POST", "/v1/signup", {"handle": bad, "name": "Upper"})
    check(st == 400 and isinstance(body, dict) and body.get("code") == "bad_frame",
          f"POST /v1/signup handle {bad!r} (upper case): expected 400 {{code: bad_frame}} (sections 1, 6), got {st} {raw[:300]!r}")
    log(f"upper-case handle -> {st} {short(body)}")
    A, B = users[ha], users[hb]
    a_id = A["principal"]["id"]

    # ---------------------------------------------------------------- 3
    step(3, "WebSocket /v1/ws: hello, auth")
    dev_a = f"dev-a-{sfx}"
    wa = WS(addr, name="A")
    hello = wa.recv_json()
    check(hello.get("t") == "hello", f"first frame is not hello (section 3): {short(hello)}")
    check(hello.get("proto") == 1, f"hello proto {hello.get('proto')!r}, expected 1 (section 3)")
    check(isinstance(hello.get("hub"), str) and hello.get("hub"), f"hello hub missing (section 3): {short(hello)}")
    check(isinstance(hello.get("epoch"), str) and hello.get("epoch"), f"hello epoch missing (section 3): {short(hello)}")
    for k in ("hb_ms", "max_frame", "max_queue"):
        check(isinstance(hello.get(k), int) and not isinstance(hello.get(k), bool) and hello.get(k) > 0,
              f"hello {k} = {hello.get(k)!r}, expected a positive integer (section 3)")
    check(hello.get("hub") == wk.get("hub"), f"hello hub {hello.get('hub')!r} != well-known hub {wk.get('hub')!r} (assumption A1)")
    check(hello.get("epoch") == health.get("epoch"), f"hello epoch {hello.get('epoch')!r} != health epoch {health.get('epoch')!r} (assumption A1)")
    log(f"hello {short(hello)}")
    rid = wa.next_id
    wa.next_id += 1
    wa.send_json({"t": "auth", "id": rid, "token": A["token"], "device": dev_a,
                  "client": {"name": "independent-conformance", "version": "0.0.1"}})
    ok = wa.wait_reply(rid)
    expect_ok(ok, "auth A")
    check_principal(ok.get("principal"), "auth A ok", kind="user", handle=ha, pid=a_id, owner=None)
    log(f"auth ok principal {short(ok.get('principal'))}")

    # ---------------------------------------------------------------- 4
    step(4, "wrong token -> err unauthorized (re) then close 4001")
    wx = WS(addr, name="X")
    wx.recv_json()
    wrong = "rt_" + secrets.token_hex(32)
    wx.send_json({"t": "auth", "id": 5, "token": wrong, "device": f"dev-x-{sfx}",
                  "client": {"name": "independent-conformance", "version": "0.0.1"}})
    got_err, close_code = None, None
    try:
        while True:
            f = wx.recv_json()
            if f.get("t") == "err":
                got_err = f
            else:
                deviation(f"wrong token: unexpected frame {short(f)}")
    except Closed as c:
        close_code = c.code
    except TimeoutError:
        deviation("wrong token: connection not closed within 10 s (section 3: close 4001)")
    if got_err is None:
        deviation("wrong token: no err frame before close (section 3: err unauthorized then close 4001)")
    else:
        check_err(got_err, "unauthorized", 5, what="auth with wrong token")
    check(close_code == 4001, f"wrong token: close code {close_code!r}, expected 4001 (sections 3, 7)")
    log(f"wrong token -> {short(got_err)} close {close_code}")
    wx.sock.close()

    # ---------------------------------------------------------------- 5
    step(5, "register_agent helper")
    r = expect_ok(wa.request({"t": "register_agent", "name": "helper"}), "register_agent helper")
    agent = r.get("agent")
    agent_handle = f"{ha}/helper"
    if isinstance(agent, dict):
        check_principal(agent, "register_agent agent", kind="agent", handle=agent_handle, owner=a_id)
        agent_id = agent.get("id")
    else:
        check(isinstance(agent, str), f"register_agent: agent is neither a principal nor an id: {short(r)}")
        agent_id = agent
    check_token(r.get("token"), "register_agent")
    agent_token = r.get("token")
    log(f"agent {short(agent)}")

    # ---------------------------------------------------------------- 6
    step(6, "room_create with the agent")
    title = f"Indep room {sfx}"
    r = expect_ok(wa.request({"t": "room_create", "title": title, "members": [agent_handle]}), "room_create")
    room = r.get("room")
    check_room_shape(room, "room_create")
    room_id = room["id"]
    check(room.get("title") == title, f"room_create: title {room.get('title')!r}, expected {title!r}")
    check(room.get("creator") == a_id, f"room_create: creator {room.get('creator')!r}, expected A's id {a_id!r}")
    mids = {m.get("id") for m in room.get("members", []) if isinstance(m, dict)}
    mh = {m.get("handle") for m in room.get("members", []) if isinstance(m, dict)}
    check(mids == {a_id, agent_id}, f"room_create: members ids {sorted(map(str, mids))}, expected creator and agent")
    check(mh == {ha, agent_handle}, f"room_create: member handles {sorted(map(str, mh))}, expected {[ha, agent_handle]}")
    log(f"room {short(room)}")

    # ---------------------------------------------------------------- 7
    step(7, "sync from empty cursors")
    ok, replay = collect_sync(wa, {}, "sync A")
    heads = ok.get("heads")
    if not isinstance(heads, dict):
        raise Deviation(f"sync ok without heads object (section 3): {short(ok)}")
    check(room_id in heads, f"sync heads lack the room {room_id} (section 3): {short(heads)}")
    check("inbox" in heads, f"sync heads lack inbox (section 3): {short(heads)}")
    for e in replay:
        check_evt(e, "sync A replay")
    check_ordering(replay, "sync A replay")
    ps = per_stream(replay)
    for s, h in heads.items():
        got = [e["seq"] for e in ps.get(s, [])]
        check(got == list(range(1, h + 1)),
              f"sync A from empty: stream {s} replayed seqs {got}, expected 1..{h} (section 3/8.2: none missing)")
    check(set(ps) <= set(heads), f"sync A: replay has streams {sorted(ps)} not in heads {sorted(heads)}")
    check(heads.get(room_id) == room.get("head"), f"sync head of room {heads.get(room_id)} != room_create head {room.get('head')}")
    inbox = ps.get("inbox", [])
    added = [e for e in inbox if e.get("kind") == "room_added" and e.get("body", {}).get("room") == room_id]
    if check(added, f"sync A: inbox has no room_added for room {room_id} (section 5 room_create): {short(inbox)}"):
        check(added[0]["body"].get("by") == a_id, f"room_added by {added[0]['body'].get('by')!r}, expected {a_id!r}")
    known = {}  # room seq -> event id, room R
    for e in ps.get(room_id, []):
        known[e["seq"]] = e["id"]
    inbox_head = heads.get("inbox", 0)
    log(f"heads {short(heads)}; replayed {len(replay)} events; room kinds {[e['kind'] for e in ps.get(room_id, [])]}")

    # ---------------------------------------------------------------- 8
    step(8, "send 5 messages, then a retransmit of the 3rd")
    sent = []
    prev = heads.get(room_id, 0)
    for i in range(5):
        ck = f"ck-{sfx}-{i}-" + secrets.token_hex(6)
        assert 8 <= len(ck) <= 64
        text = f"message {i + 1} from A"
        r = expect_ok(wa.request({"t": "send", "room": room_id, "client_key": ck, "kind": "message",
                                  "body": {"text": text}}), f"send {i + 1}")
        ev = r.get("event")
        if not isinstance(ev, dict):
            raise Deviation(f"send {i + 1}: ok without event (section 5): {short(r)}")
        check_evt(ev, f"send {i + 1} ok event", frame=False)
        check(ev.get("room") == room_id, f"send {i + 1}: event room {ev.get('room')!r}, expected {room_id!r}")
        check(ev.get("seq") == prev + 1, f"send {i + 1}: event seq {ev.get('seq')!r}, expected {prev + 1} (section 4: dense)")
        check(ev.get("client_key") == ck, f"send {i + 1}: event client_key {ev.get('client_key')!r}, expected {ck!r} (section 4)")
        check(ev.get("kind") == "message" and ev.get("body", {}).get("text") == text, f"send {i + 1}: event kind/body {short(ev)}")
        check(ev.get("from") == a_id, f"send {i + 1}: event from {ev.get('from')!r}, expected {a_id!r}")
        check(r.get("dup") is False, f"send {i + 1}: dup is {r.get('dup')!r}, expected false (section 5)")
        prev = ev.get("seq", prev + 1)
        sent.append((ck, ev))
        known[ev["seq"]] = ev["id"]
    ck3, ev3 = sent[2]
    r = expect_ok(wa.request({"t": "send", "room": room_id, "client_key": ck3, "kind": "message",
                              "body": {"text": "message 3 from A"}}), "send retransmit 3")
    check(r.get("dup") is True, f"retransmit of client_key {ck3}: dup {r.get('dup')!r}, expected true (section 5)")
    check(r.get("event") == ev3, f"retransmit: event differs from the original (section 5): {short(r.get('event'))} vs {short(ev3)}")
    log(f"sent seqs {[e['seq'] for _, e in sent]}; retransmit dup={r.get('dup')}")
    own = {e["seq"] for _, e in sent}
    wa.drain(0.3)
    live_own = [e for e in wa.events if e.get("room") == room_id and e.get("seq") in own]
    check(not live_own, f"writer connection got its own sends live (section 4: in ok, not live): {short(live_own)}")

    # ---------------------------------------------------------------- 9
    step(9, "agent connection, mentions and routing")
    r = expect_ok(wa.request({"t": "register_agent", "name": "helper2"}), "register_agent helper2")
    agent2 = r.get("agent")
    agent2_handle = f"{ha}/helper2"
    if isinstance(agent2, dict):
        check_principal(agent2, "register_agent helper2", kind="agent", handle=agent2_handle, owner=a_id)
    r = expect_ok(wa.request({"t": "room_create", "title": f"Three {sfx}", "members": [agent_handle, agent2_handle]}),
                  "room_create three members")
    room3 = r.get("room")
    check_room_shape(room3, "room_create (3 members)")
    room3_id = room3["id"]
    check(len(room3.get("members", [])) == 3, f"3-member room has {len(room3.get('members', []))} members")
    routing = next((m.get("routing") for m in room3.get("members", []) if m.get("id") == agent_id), None)
    log(f"3-member room {room3_id}; agent routing there {routing!r}")

    dev_g = f"dev-g-{sfx}"
    wg, _, gok = ws_connect_auth(addr, agent_token, dev_g, "agent", "agent", agent_handle,
                                 agent_id if not isinstance(agent, str) else None, a_id)
    agent_id = gok["principal"]["id"]
    gsync, greplay = collect_sync(wg, {}, "sync agent")
    gheads = gsync.get("heads", {})
    check(room_id in gheads and room3_id in gheads and "inbox" in gheads,
          f"agent sync heads {short(gheads)} lack room/3-room/inbox (section 3)")
    check_ordering(greplay, "sync agent replay")
    # the agent sees every message of the two-member room: its replay must hold all 5 sends
    gps = per_stream(greplay)
    got5 = {e["id"] for e in gps.get(room_id, [])}
    check(all(e["id"] in got5 for _, e in sent),
          "agent replay of the two-member room lacks some messages (section 4: room had exactly two members)")
    leaked = [e for e in greplay if "client_key" in e and e.get("from") != agent_id]
    check(not leaked, f"agent sees client_key of another sender's events (section 4: to its sender only): {short(leaked[:1])}")
    log(f"agent synced, heads {short(gheads)}")

    def a_send(rid_, text, tag):
        r_ = expect_ok(wa.request({"t": "send", "room": rid_, "client_key": f"ck-{sfx}-{tag}-" + secrets.token_hex(4),
                                   "kind": "message", "body": {"text": text}}), f"send {tag}")
        return r_["event"]

    # two-member room: plain and mention both reach the agent
    p1 = a_send(room_id, "plain in the two-member room", "p1")
    m1 = a_send(room_id, f"hey @{agent_handle}, look at this", "m1")
    known[p1["seq"]] = p1["id"]
    known[m1["seq"]] = m1["id"]
    check(agent_id in (m1.get("body", {}).get("mentions") or []),
          f"stored mention event lacks the agent id in body.mentions (section 4): {short(m1)}")
    gm1 = wg.wait_event(lambda e: e.get("id") == m1["id"])
    if check(gm1 is not None, f"agent did not receive live the message mentioning @{agent_handle} (section 4)"):
        check_evt(gm1, "agent live mention")
        check(agent_id in (gm1.get("body", {}).get("mentions") or []),
              f"agent's live evt body.mentions lacks its id (section 4): {short(gm1)}")
        check("client_key" not in gm1, f"agent got A's client_key (section 4: to its sender only): {short(gm1)}")
        check(gm1.get("seq") == m1["seq"] and gm1.get("room") == room_id, f"agent live evt seq/room differ: {short(gm1)}")
    gp1 = wg.wait_event(lambda e: e.get("id") == p1["id"], timeout=0.5)
    check(gp1 is not None, "agent did not receive a plain message of a room with exactly two members (section 4)")
    log(f"two-member room: agent got mention={gm1 is not None} plain={gp1 is not None}")

    # three-member room: the mention reaches the agent; the plain message only if routing is all
    p2 = a_send(room3_id, "plain in the three-member room", "p2")
    m2 = a_send(room3_id, f"ping @{agent_handle}, please review", "m2")
    m2_mentions = m2.get("body", {}).get("mentions") or []
    check(agent_id in m2_mentions, f"3-room mention not resolved: {short(m2)}")
    a2_id = agent2.get("id") if isinstance(agent2, dict) else agent2
    check(a2_id not in m2_mentions, f"3-room: @{agent_handle} also resolved to {agent2_handle} (section 4: longest match): {short(m2)}")
    gm2 = wg.wait_event(lambda e: e.get("id") == m2["id"])
    if check(gm2 is not None, f"agent did not receive live a mention in the three-member room (section 4)"):
        check(agent_id in (gm2.get("body", {}).get("mentions") or []),
              f"3-room live evt body.mentions lacks agent id: {short(gm2)}")
    wg.drain(0.3)
    gp2 = [e for e in wg.events if e.get("id") == p2["id"]]
    if routing == "mentions":
        check(not gp2, f"agent with routing 'mentions' got a message not mentioning it in a 3-member room (section 4): {short(gp2)}")
    log(f"three-member room: agent got mention={gm2 is not None}, plain={bool(gp2)} (routing {routing!r})")
    check_ordering(wg.events, "agent connection")
    r = expect_ok(wg.request({"t": "history", "room": room3_id}), "agent history 3-room")
    hids = {e.get("id") for e in r.get("events", [])}
    check(m2["id"] in hids, "agent history of the 3-member room lacks the mention (section 5 history, section 4 filter)")
    if routing == "mentions":
        check(p2["id"] not in hids, "agent history shows a message it may not see (section 4: history applies the same filter)")

    # ---------------------------------------------------------------- 10
    step(10, "resume: reconnect A with the same device, sync from the 3rd message")
    wa.drain(0.3)
    check_ordering(wa.events, "A connection (live)")
    for e in wa.events:
        if e.get("stream") == "inbox":
            inbox_head = max(inbox_head, e["seq"])
    wa.close()
    wa, _, _ = ws_connect_auth(addr, A["token"], dev_a, "A2", "user", ha, a_id, None)
    cur_room = ev3["seq"]
    ok, replay = collect_sync(wa, {room_id: cur_room, "inbox": inbox_head}, "resume A")
    heads2 = ok.get("heads", {})
    check(room_id in heads2 and "inbox" in heads2, f"resume heads {short(heads2)}")
    for e in replay:
        check_evt(e, "resume replay")
    check_ordering(replay, "resume replay")
    ps = per_stream(replay)
    got = [(e["seq"], e["id"]) for e in ps.get(room_id, [])]
    exp = [(s, known[s]) for s in sorted(known) if s > cur_room]
    check(got == exp, f"resume with cursor {room_id}:{cur_room}: replay {got}, expected exactly {exp} (section 3)")
    check(heads2.get(room_id) == max(known), f"resume head {heads2.get(room_id)} != last known seq {max(known)}")
    for s, h in heads2.items():
        start = cur_room if s == room_id else (inbox_head if s == "inbox" else 0)
        seqs = [e["seq"] for e in ps.get(s, [])]
        check(seqs == list(range(start + 1, h + 1)),
              f"resume: stream {s} from cursor {start}: seqs {seqs}, expected {start + 1}..{h} (section 3)")
    log(f"resume replayed room seqs {[s for s, _ in got]}, inbox {[e['seq'] for e in ps.get('inbox', [])]}, heads {short(heads2)}")

    # ---------------------------------------------------------------- 11
    step(11, "history")
    r = expect_ok(wa.request({"t": "history", "room": room_id, "limit": 2}), "history limit 2")
    evs = r.get("events")
    top = max(known)
    check(isinstance(evs, list) and [(e.get("seq"), e.get("id")) for e in evs] == [(top - 1, known[top - 1]), (top, known[top])],
          f"history limit 2: got {[(e.get('seq'), e.get('id')) for e in evs or []]}, expected the last 2 ascending {[top - 1, top]} (section 5)")
    r = expect_ok(wa.request({"t": "history", "room": room_id, "after": 0, "limit": 3}), "history after 0 limit 3")
    evs = r.get("events")
    check(isinstance(evs, list) and [(e.get("seq"), e.get("id")) for e in evs] == [(s, known[s]) for s in (1, 2, 3)],
          f"history after=0 limit=3: got {[(e.get('seq'), e.get('id')) for e in evs or []]}, expected seqs 1,2,3 (section 5)")
    log("history ok")

    # ---------------------------------------------------------------- 12
    step(12, "errors keep the connection open")

    def still_open(what):
        rr = wa.request({"t": "rooms"})
        if check(rr.get("t") == "ok" and isinstance(rr.get("rooms"), list),
                 f"after {what}: rooms got {short(rr)}; connection should stay open (section 7)"):
            check(room_id in {x.get("id") for x in rr["rooms"]}, f"rooms lacks {room_id}")

    r = wa.request({"t": "frobnicate-" + sfx})
    check_err(r, "unsupported", wa.next_id - 1, what="unknown frame type")
    still_open("unknown type")
    log(f"unknown t -> {short(r)}")

    def next_non_evt():
        while True:
            f = wa.recv_json()
            if f.get("t") == "evt":
                wa._note(f)
                continue
            return f

    wa.send_text('{"t":"rooms","id":')
    try:
        r = next_non_evt()
    except TimeoutError:
        r = {"t": "<none within 10s>"}
    except Closed as c:
        r = {"t": f"<closed {c.code}>"}
    check_err(r, "bad_frame", require_re=False, what="invalid JSON text frame")
    check(r.get("re") is None, f"invalid JSON: err carries re {r.get('re')!r}")
    still_open("invalid JSON")
    log(f"invalid JSON -> {short(r)}")

    bogus = "no-such-room-" + sfx
    r = wa.request({"t": "send", "room": bogus, "client_key": f"ck-{sfx}-bogus-room", "kind": "message", "body": {"text": "x"}})
    check_err(r, "not_found", wa.next_id - 1, what="send to an unknown room id")
    still_open("send to unknown room")
    log(f"unknown room -> {short(r)}")

    wa.send_binary(b'{"t":"rooms","id":999}')
    try:
        r = next_non_evt()
    except TimeoutError:
        r = {"t": "<none within 10s>"}
    except Closed as c:
        r = {"t": f"<closed {c.code}>"}
    check_err(r, "bad_frame", require_re=False, what="binary frame")
    still_open("binary frame")
    log(f"binary frame -> {short(r)}")

    # ---------------------------------------------------------------- 13 (extra)
    step(13, "extra: a second connection with the same device replaces the first (4009)")
    wa2, _, _ = ws_connect_auth(addr, A["token"], dev_a, "A3", "user", ha, a_id, None)
    code = None
    try:
        while True:
            f = wa.recv_json(5)
            wa._note(f)
    except Closed as c:
        code = c.code
    except TimeoutError:
        pass
    check(code == 4009, f"older connection of (principal, device) closed with {code!r}, expected 4009 replaced (section 3)")
    log(f"old connection closed with {code}")
    wa2.close()
    wg.close()


def main():
    global KEEP_GOING
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    KEEP_GOING = "--keep-going" in sys.argv
    if len(args) != 1 or ":" not in args[0]:
        print("usage: client.py HOST:PORT [--keep-going]", file=sys.stderr)
        return 2
    addr = args[0]
    if addr.startswith("ws://"):
        addr = addr[5:]
    try:
        run(addr)
    except Deviation as d:
        print(str(d), flush=True)
        print("FAIL", flush=True)
        return 1
    except ScenarioError as s:
        print(f"ABORT at step {STEP}: {s}", flush=True)
        return 1 if DEVIATIONS else 2
    if DEVIATIONS:
        print(f"FAIL: {len(DEVIATIONS)} deviation(s)", flush=True)
        return 1
    print("PASS: the hub followed the spec in every checked step", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
