"""The gateway as an ASGI application (served by uvicorn: http_server.py). The event loop reads
each request's head and body, within their limits and deadline, then hands the request to a
worker thread of a bounded pool, where http.py's Handler answers it through the synchronous core
(hosts.py and below); the reply comes back as messages (exchange.py) handed to the event loop one
call_soon_threadsafe each, and goes out through the server; a whole reply's head and body in one
write. A host that closes its connection sets the exchange's `gone`: its stream's next write
fails there, which ends the request (and cancels a 2026-07-28 call)."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from llmc_cli.gateway.admission import Quotas
from llmc_cli.gateway.exchange import DONE, Out, Seen
from llmc_cli.gateway.hosts import HttpGateway
from llmc_cli.gateway.http import MAX_BODY_BYTES, Handler
from llmc_cli.gateway.workpool import WorkPool
from llmc_cli.mcp import jsonrpc

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class GatewayApp:
    """ASGI 3: HTTP requests only (uvicorn runs with lifespan off)."""

    def __init__(self, gateway: HttpGateway, *, max_requests: int, request_seconds: float) -> None:
        self.gateway = gateway
        self.quotas = Quotas(max_requests)
        self.request_seconds = request_seconds
        # A thread for every admitted request the gateway may have in flight, and a few for the
        # ones being refused: --max-connections bounds the pool as it bounds admission.
        self.pool = WorkPool(max_requests + 16, "llmc-gateway")
        # In flight, with how to wake each one's relay: told to stop when the gateway stops.
        self.exchanges: dict[Handler, Callable[[], None]] = {}
        self.outbox: Outbox | None = None  # made on the event loop, with the first request

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        refusal = framing_problem(scope)
        if refusal is not None:
            await plain(send, *refusal)
            return
        body = await read_body(scope, receive, send, self.request_seconds)
        if body is None:
            return
        loop: asyncio.AbstractEventLoop = (scope.get("extensions") or {}).get("llmc.loop") or asyncio.get_running_loop()
        outbox = self.outbox
        if outbox is None or outbox.loop is not loop:
            outbox = self.outbox = Outbox(loop)
        replies = Replies(loop, outbox)
        handler = Handler(scope, body, replies.emit, self.quotas)
        handler.gateway = self.gateway
        watchers: list[asyncio.Task[None]] = []  # a stream's: who watches for its host leaving

        def streaming() -> None:
            watchers.append(loop.create_task(watch(receive, handler)))

        self.exchanges[handler] = replies.stop
        self.pool.submit(handler.serve)  # no future to wait on: the handler hands over DONE itself
        try:
            await relay(replies, send, handler, streaming)
        finally:
            handler.gone = True  # cancelled, or the gateway stopping: the worker's next write fails
            del self.exchanges[handler]
            for watcher in watchers:
                watcher.cancel()

    def stop(self) -> None:
        """On the event loop, when the gateway stops: replies still being written end now (their
        workers' next write fails), so the server's shutdown finds every connection done."""
        for handler, wake in list(self.exchanges.items()):
            handler.gone = True
            wake()


def framing_problem(scope: dict[str, Any]) -> tuple[int, str] | None:
    """Where a message ends must be read the way any proxy in front reads it, or the rest of a
    body becomes a request of its own (request smuggling, RFC 9112 6.1 and 6.3). llhttp refuses
    a Content-Length that is not one number, and one beside Transfer-Encoding (400); on top of
    it: HTTP/1.x, one Host (RFC 9112 3.2), no Transfer-Encoding (this endpoint reads none), a
    Content-Length on every POST, within the limit. (status, message) to refuse with."""
    hosts = length = 0
    size = ""
    chunked = False
    for name, value in scope["headers"]:
        if name == b"host":
            hosts += 1
        elif name == b"content-length":
            length += 1
            size = value.decode("latin-1").strip()
        elif name == b"transfer-encoding":
            chunked = True
    if scope.get("http_version") not in ("1.0", "1.1"):  # llhttp takes any digit.digit
        return 505, f"HTTP Version Not Supported: HTTP/{scope.get('http_version')}"
    if hosts > 1:
        return 400, "Bad Request: more than one Host header"
    if scope["method"] != "POST":
        return None
    if chunked:
        return 501, "Not Implemented: Transfer-Encoding; send the message with a Content-Length"
    if not length:
        return 411, "Length Required"
    if not size.isdigit():
        return 400, "Bad Request: Content-Length is not a number"
    if int(size) > MAX_BODY_BYTES:
        return 413, f"Payload Too Large: at most {MAX_BODY_BYTES} bytes per message"
    return None


async def read_body(scope: dict[str, Any], receive: Receive, send: Send, seconds: float) -> bytes | None:
    """The request's body, whole within `seconds` (--request-timeout) of its head (else 408 and
    the connection closes); None: refused, or the host went away. The gateway's app and the
    relay to another worker (forward.py) read bodies through here."""
    if scope["method"] != "POST":
        return b""
    seen: Seen | None = (scope.get("extensions") or {}).get("llmc.connection")
    if seen is not None and seen.whole:  # all here (the usual case): no deadline to arm
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        if not message.get("more_body", False):
            body: bytes = message.get("body", b"")
            return body
        chunks = [message.get("body", b"")]
    else:
        chunks = []
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        await plain(send, 408, "Request Timeout: the body did not arrive in time")
        return None
    return b"".join(chunks)


async def plain(send: Send, status: int, message: str) -> None:
    """A refusal before the handler: its JSON-RPC error, and the connection closes."""
    data = json.dumps(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def watch(receive: Receive, handler: Handler) -> None:
    """Mark the exchange gone when its host closes the connection."""
    while (await receive())["type"] != "http.disconnect":
        pass
    handler.gone = True


class Outbox:
    """How worker threads hand replies to the event loop: a thread-safe deque, and one wake-up of
    the loop (call_soon_threadsafe: a write to its self-pipe, a system call that also lets go of
    the GIL) for however many replies pile up before it runs, not one per reply. Order is kept
    (a stream's messages arrive as they were put). No lock: deque appends and pops are atomic, the
    loop clears `signalled` before it takes what is there, so an item put meanwhile either is
    taken by that drain or finds `signalled` clear and wakes the loop again (at worst a wake-up
    finds nothing)."""

    __slots__ = ("items", "loop", "signalled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.items: deque[tuple[Replies, Out]] = deque()
        self.signalled = False

    def put(self, replies: Replies, item: Out) -> None:  # from a worker thread
        self.items.append((replies, item))
        if not self.signalled:
            self.signalled = True
            try:
                self.loop.call_soon_threadsafe(self.drain)
            except RuntimeError:  # the loop has closed (the gateway stopped): nobody writes any more
                self.signalled = False
                raise ConnectionError("the gateway has stopped") from None  # as a host gone mid-reply

    def drain(self) -> None:  # on the event loop
        self.signalled = False
        items = self.items
        while items:
            replies, item = items.popleft()
            replies.put(item)


class Replies:
    """What the worker thread hands over for the event loop to write, in order (through the
    app's Outbox), and a wait only when nothing is there yet."""

    __slots__ = ("items", "loop", "outbox", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, outbox: Outbox) -> None:
        self.loop = loop
        self.outbox = outbox
        self.items: deque[Out] = deque()
        self.waiter: asyncio.Future[None] | None = None

    def emit(self, item: Out) -> None:  # from the worker thread
        self.outbox.put(self, item)

    def put(self, item: Out) -> None:
        self.items.append(item)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def stop(self) -> None:
        """On the event loop: the relay ends (the gateway stops)."""
        self.put(DONE)

    async def get(self) -> Out:
        while not self.items:
            self.waiter = self.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.items.popleft()


async def relay(replies: Replies, send: Send, handler: Handler, streaming: Callable[[], None]) -> None:
    """Write what the worker thread hands over until the reply is whole or the worker returns
    (DONE); end a stream it left open. A whole reply (head and body in one item) goes out in one
    write; a reply that starts as a stream calls `streaming` (a whole reply needs no watching: a
    host gone meanwhile only makes its write go nowhere)."""
    started = ended = False
    while not ended and (item := await replies.get()) is not DONE:
        # Written even when the exchange is `gone`: what the worker handed over before the gateway
        # began to stop (a listen stream's `complete`) still goes out, and for a host that left,
        # the server's send does nothing.
        status, headers, data, more = item
        if status is not None and not more:  # a whole reply
            seen = handler.seen
            seen.hold()
            try:
                await send({"type": "http.response.start", "status": status, "headers": headers or []})
                await send({"type": "http.response.body", "body": data, "more_body": False})
            finally:
                seen.flush()
            return
        if status is not None:
            await send({"type": "http.response.start", "status": status, "headers": headers or []})
            started = True
            if more:
                streaming()
        if data or not more:
            await send({"type": "http.response.body", "body": data, "more_body": more})
            ended = not more  # the reply is whole: the worker may still tidy up, nobody waits for it
    # A stream the worker left (or the gateway stopping cut short) ends; the server's send does
    # nothing for a host that has gone.
    if started and not ended:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif not started:
        await plain(send, 503, "Service Unavailable: the gateway is stopping")
