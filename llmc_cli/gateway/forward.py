"""Sessions across the workers of `llmc serve --http ADDR --workers N` (supervisor.py): every
worker accepts connections on the one listening socket, and the kernel hands a host's next
connection to any of them, but an initialize-era session lives in the worker that opened it (its
upstream connections, its GET stream, its calls in flight, the questions it was asked). So a
session id names its owner (`<random>.<worker>`, as unguessable as before), and a worker that gets
a request for another worker's session relays it, whole, to the owner over a private Unix socket
(a 0700 directory of the supervisor's), and streams the reply back as it comes (SSE included);
a host that leaves ends the relayed request at the owner too. The owner answers it as if the
host had connected to it: the host's address and TLS client subject travel in headers only the
private socket believes (Private).

A session whose owner is gone (killed, restarting) is served where the request landed, as a
replica serves a session it does not hold: 404, or resumed from the state database when one is
shared. A request for a session that the owner could not answer whole is 502, never replayed
(a call may have run). 2026-07-28 requests, health pages and requests without a session are
served by whichever worker got them. GET /status gathers every worker's sessions (status.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httptools

from llmc_cli.gateway.asgi import framing_problem, plain, read_body

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]

SESSION = b"mcp-session-id"
WORKER = b"llmc-worker"  # on every reply of a worker set: the worker that accepted the connection
PEER = b"x-llmc-forwarded-peer"  # believed on the private socket only
TLS_SUBJECT = b"x-llmc-forwarded-tls-subject"
OURS = {PEER, TLS_SUBJECT}
# Hop-by-hop fields (RFC 9110 7.6.1) and what the front's server writes itself.
HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"proxy-connection", b"trailer"}
WRITTEN_BY_SERVER = {b"server", b"date"}
READ_BYTES = 64 * 1024
MAX_IDLE = 16  # kept-alive connections to each other worker
# The methods a session's requests use; others (HEAD: a reply whose length says what its body
# would be, with none) are answered here.
RELAYED = {"GET", "POST", "DELETE"}


@dataclass(frozen=True)
class WorkerSlot:
    """Worker `index` of `count`; `rundir`: the supervisor's private directory of Unix sockets."""

    index: int
    count: int
    rundir: str

    def socket_path(self, index: int) -> str:
        return os.path.join(self.rundir, f"w{index}.sock")

    @property
    def suffix(self) -> str:
        """What ends the id of a session this worker opens."""
        return f".{self.index}"


def owner_of(session_id: bytes, count: int) -> int | None:
    """The worker a session id names (None: none of the `count`, or not one of ours)."""
    _, dot, tail = session_id.rpartition(b".")
    if not dot or not tail.isdigit() or len(tail) > 4:
        return None
    index = int(tail)
    return index if index < count else None


class Front:
    """The app on the public socket: relays a request of another worker's session to its owner,
    serves the rest here; every reply says which worker accepted the connection."""

    def __init__(
        self, app: App, slot: WorkerSlot, *, request_seconds: float, pending_seconds: float, status: App | None = None
    ) -> None:
        self.app, self.slot, self.request_seconds, self.status = app, slot, request_seconds, status
        self.tag = (WORKER, str(slot.index).encode())
        self.relays: set[asyncio.StreamWriter] = set()  # open to owners: closed when this worker stops
        # Connections to each owner kept alive between relayed requests (with when each was last
        # used), for at most half the shortest wait the owner's server gives an idle one.
        self.idle: dict[int, list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]]] = {}
        self.idle_seconds = min(5.0, pending_seconds / 2, max(1, int(request_seconds)) / 2)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tagged = self._tagged(send)
        owner = None
        for name, value in scope["headers"]:
            if name == SESSION:
                owner = owner_of(value, self.slot.count)
                break
        if owner is not None and owner != self.slot.index and scope["method"] in RELAYED and framing_problem(scope) is None:
            relayed = await self.relay(owner, scope, receive, tagged)
            if relayed:
                return
        elif self.status is not None and scope["method"] == "GET" and scope["path"] == "/status":
            await self.status(scope, receive, tagged)
            return
        await self.app(scope, receive, tagged)

    def _tagged(self, send: Send) -> Send:
        tag = self.tag

        async def tagged(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), tag]}
            await send(message)

        return tagged

    async def relay(self, owner: int, scope: dict[str, Any], receive: Receive, send: Send) -> bool:
        """Relay the request to worker `owner`; False: it is not there (served here instead)."""
        try:
            reader, writer = await self._connect(owner)
        except OSError:
            return False
        self.relays.add(writer)
        kept = False
        try:
            body = await read_body(scope, receive, send, self.request_seconds)
            if body is None:
                return True
            writer.write(request_head(scope, len(body)) + body)
            kept, status = await relay_reply(reader, writer, receive, send)
            seen = (scope.get("extensions") or {}).get("llmc.connection")
            if seen is not None and admitted(status):
                seen.admitted = True  # the owner admitted it: this connection's next request gets --request-timeout
            return True
        finally:
            self.relays.discard(writer)
            idle = self.idle.setdefault(owner, [])
            if kept and len(idle) < MAX_IDLE and not writer.is_closing():
                idle.append((reader, writer, time.monotonic()))
            else:
                writer.close()

    async def _connect(self, owner: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to the owner: a kept-alive one used within the last `idle_seconds` (well
        inside the owner's own keep-alive wait, so it never closes one as a request goes out:
        a request is never sent twice), else a new one."""
        idle = self.idle.get(owner) or []
        while idle:
            reader, writer, since = idle.pop()
            if time.monotonic() - since < self.idle_seconds and not writer.is_closing() and not reader.at_eof():
                return reader, writer
            writer.close()
        return await asyncio.open_unix_connection(self.slot.socket_path(owner))

    def stop(self) -> None:
        """This worker stops: relayed replies end now (their hosts see the stream close)."""
        for writer in list(self.relays):
            writer.close()
        for idle in self.idle.values():
            for _, writer, _ in idle:
                writer.close()
        self.idle.clear()


def request_head(scope: dict[str, Any], length: int) -> bytes:
    """The request as the owner reads it: the host's own fields (hop-by-hop ones and ours
    dropped), and who the host is."""
    target = scope.get("raw_path") or scope["path"].encode("utf-8")
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    lines = [b"%s %s HTTP/1.1" % (scope["method"].encode("ascii"), target)]
    for name, value in scope["headers"]:
        if name not in HOP and name not in OURS and name != b"content-length":
            lines.append(name + b": " + value)
    client = scope.get("client") or ("", 0)
    lines.append(PEER + b": " + json.dumps([str(client[0]), int(client[1])]).encode())
    subject = ((scope.get("extensions") or {}).get("tls") or {}).get("llmc.client_subject")
    if subject:
        lines.append(TLS_SUBJECT + b": " + json.dumps(subject, ensure_ascii=True).encode())
    if scope["method"] == "POST" or length:
        lines.append(b"content-length: %d" % length)
    # Kept alive as far as the owner knows (its reply says `Connection: close` only when the
    # gateway means it for the host); the relay closes the connection after the reply.
    return b"\r\n".join(lines) + b"\r\n\r\n"


class Reply:
    """The owner's reply as llhttp parses it."""

    def __init__(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.head_done = self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


async def relay_reply(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, receive: Receive, send: Send
) -> tuple[bool, int]:
    """Stream the owner's reply to the host as it arrives; a host that leaves closes the relay
    (the owner sees its host gone). (whether the reply came whole and the connection may carry
    the next one, the reply's status)."""

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        writer.close()

    reply = Reply()
    parser = httptools.HttpResponseParser(reply)
    watcher = asyncio.get_running_loop().create_task(watch())
    started = False
    try:
        while not reply.complete:
            try:
                data = await reader.read(READ_BYTES)
            except OSError:
                data = b""
            if not data:
                break
            try:
                parser.feed_data(data)
            except httptools.HttpParserError:
                break
            if reply.head_done and not started:
                started = True
                headers = [(n, v) for n, v in reply.headers if n not in WRITTEN_BY_SERVER and (n not in HOP or _closes(n, v))]
                await send({"type": "http.response.start", "status": parser.get_status_code(), "headers": headers})
            if started and (reply.body or reply.complete):
                body, reply.body = b"".join(reply.body), []
                await send({"type": "http.response.body", "body": body, "more_body": not reply.complete})
    finally:
        watcher.cancel()
    if not started:
        await plain(
            send,
            502,
            "Bad Gateway: the gateway worker holding this session ended while answering; the "
            "request may have run there; send initialize to start a new session if this one is gone",
        )
    elif not reply.complete:
        with contextlib.suppress(Exception):  # the host may have gone: nothing to end then
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    reusable = reply.complete and parser.should_keep_alive() and not any(_closes(n, v) for n, v in reply.headers)
    return reusable, parser.get_status_code() if started else 502


def admitted(status: int) -> bool:
    """Whether the owner admitted a relayed request that got `status` (a refusal of the door or
    of admission is 401, 403, 429 or 503)."""
    return status < 500 and status not in (401, 403, 429)


def _closes(name: bytes, value: bytes) -> bool:
    """`Connection: close` from the owner goes on to the host: a refused host starts afresh."""
    return name == b"connection" and value.strip().lower() == b"close"


class Private:
    """The app on a worker's private socket: requests another worker relayed, from hosts of this
    worker's sessions; who the host is comes from the relaying worker's headers."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        peer: Any = ("", 0)
        subject: Any = None
        headers = []
        for name, value in scope["headers"]:
            if name == PEER:
                with contextlib.suppress(ValueError):
                    peer = json.loads(value)
            elif name == TLS_SUBJECT:
                with contextlib.suppress(ValueError):
                    subject = json.loads(value)
            else:
                headers.append((name, value))
        scope = {**scope, "headers": headers}
        if isinstance(peer, list) and len(peer) == 2 and isinstance(peer[1], int):
            scope["client"] = (str(peer[0]), peer[1])
        if isinstance(subject, dict) and all(isinstance(v, str) for v in subject.values()):
            extensions = dict(scope.get("extensions") or {})
            extensions["tls"] = {"llmc.client_subject": subject}
            scope["extensions"] = extensions
        await self.app(scope, receive, send)
