"""How the gateway's HTTP handler writes replies: plain JSON, a call's SSE stream (resumable in a
session: every event kept with an id, a GET with Last-Event-ID takes the stream over), and a
session's GET stream. http.py decides what is admitted and which connection answers; this module
only turns messages into a reply, handed to the server through exchange.Exchange.emit."""

from __future__ import annotations

import json
import math
import queue
import secrets
import threading
import time
from collections.abc import Callable

from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.exchange import Exchange
from llmc_cli.gateway.inline import WATCHDOG, InlineReply
from llmc_cli.gateway.modern import OPEN_ENDED, may_send_first, status_of
from llmc_cli.gateway.sessions import CANCELLED, HostSession, ResumableStream
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import RequestId, request_id
from llmc_cli.model import JSONObject

REPLY_SECONDS = 3600.0  # the longest a request may take (upstream timeouts end calls long before)
KEEPALIVE_SECONDS = 15.0
HANGUP_SECONDS = 1.0  # how often an idle GET stream looks whether its host has gone
RETRY_MS = 500  # how soon a host whose stream broke should resume it (SSE retry field)
STREAMED = {"tools/call", "subscriptions/listen"}  # answered on SSE when the client accepts it: messages come first
JSON_TYPE = (b"content-type", b"application/json")


class ReplyWriter(Exchange):
    """Replies: plain JSON, a call's SSE stream (resumable in a session), a session's GET stream."""

    def _send(self, status: int, body: JSONObject | None, headers: dict[str, str] | None = None) -> None:
        """A whole reply, handed over at once (one wake-up of the event loop)."""
        data = json.dumps(body, ensure_ascii=False).encode("utf-8") if body is not None else b""
        head = [JSON_TYPE] if body is not None else []
        head.append((b"content-length", str(len(data)).encode("ascii")))
        head.extend((name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items())
        self.release()
        self.emit(status, head, data, False)

    def _answer(
        self,
        connection: GatewayConnection,
        message: JSONObject,
        extra: dict[str, str],
        *,
        modern: bool = False,
        session: HostSession | None = None,
        settle: Callable[[JSONObject], None] | None = None,
    ) -> JSONObject | None:
        """The final reply, once written (None: on a session's resumable stream, or the host went
        away first). An Mcp-Session-Id in `extra` goes out only with a result (initialize's): an error starts
        no session. `settle` sees the final reply before it is written: what the reply implies
        (a refused initialize ends its session) holds by the time the host reads it."""
        msg_id = request_id(message)  # as the connection answers it
        streamed = (
            message["method"] in STREAMED
            and "text/event-stream" in (self.headers.get("Accept") or "")
            and may_send_first(connection, message)
        )
        # The call runs here (McpServer.inline_calls), not on a pool thread: this thread would
        # only wait for it. A writer thread takes the reply over only when something must reach
        # the host while the call runs (inline.py); otherwise the reply goes out as JSON.
        connection.inline_calls = True

        def write() -> JSONObject | None:
            return self._reply(
                connection, message, replies, extra, modern=modern, session=session, streamed=streamed, settle=settle
            )

        replies = InlineReply(msg_id, streamed, write)
        if session is not None and msg_id is not None:
            session.waiting[msg_id] = replies  # a notifications/cancelled for it ends the wait (HostSession.cancel)
        WATCHDOG.watch(replies)
        try:
            connection.handle(message, replies.put)
            WATCHDOG.forget(replies)
            final = replies.settle()
            if final is None:
                return replies.outcome()
            if settle is not None:
                settle(final)
            headers = extra if "result" in final else {k: v for k, v in extra.items() if k != "Mcp-Session-Id"}
            self._send(status_of(final) if modern else 200, final, headers)
            return final
        finally:
            WATCHDOG.forget(replies)
            if session is not None and msg_id is not None and session.waiting.get(msg_id) is replies:
                del session.waiting[msg_id]

    def _reply(
        self,
        connection: GatewayConnection,
        message: JSONObject,
        inline: InlineReply,
        extra: dict[str, str],
        *,
        modern: bool,
        session: HostSession | None,
        streamed: bool,
        settle: Callable[[JSONObject], None] | None,
    ) -> JSONObject | None:
        """The reply as a writer thread writes it, once the call (running on the handler's
        thread) had something to send before its result, or took long."""
        msg_id = request_id(message)
        replies = inline.queue
        deadline = time.monotonic() + (math.inf if message["method"] == OPEN_ENDED else REPLY_SECONDS)
        if streamed and session is not None and session.connection.legacy_version is not None:
            stream_id = secrets.token_hex(8)
            resumable = ResumableStream(msg_id, replies)
            session.keep_stream(stream_id, resumable)
            self._start_stream(extra)
            if session.connection.legacy_version >= "2025-11-25":  # SEP-1699: an id to resume from at once
                self._write(f"id: {stream_id}-0\nretry: {RETRY_MS}\ndata: \n\n".encode())
            self._pump(resumable, stream_id, 0, deadline)
            return None
        if streamed:
            self._start_stream(extra)
        try:
            while True:
                reply = self._next(replies, deadline, msg_id, streamed=streamed)
                if reply is None:
                    continue
                if reply is CANCELLED:  # the host cancelled it: no reply (cancellation.mdx), the response ends
                    if not streamed:
                        self._send(200, jsonrpc.error(msg_id, 0, "Request cancelled"), {"Connection": "close"})
                    return None
                final = "method" not in reply and reply.get("id") == msg_id
                if final and settle is not None:
                    settle(reply)
                if streamed:
                    if final:
                        self.release()
                    self._event(reply)
                elif final:
                    headers = extra if "result" in reply else {k: v for k, v in extra.items() if k != "Mcp-Session-Id"}
                    self._send(status_of(reply) if modern else 200, reply, headers)
                if final:
                    return reply
        except OSError:
            # The client dropped the stream: that cancels its request (2026-07-28 transports).
            connection.handle(
                jsonrpc.notification("notifications/cancelled", {"requestId": msg_id, "reason": "the client disconnected"}),
                lambda reply: None,
            )
            return None

    def _next(
        self, replies: queue.SimpleQueue[JSONObject], deadline: float, msg_id: RequestId | None, *, streamed: bool
    ) -> JSONObject | None:
        """The request's next message, or an error past its deadline; None after a quiet spell
        (on a stream, a keep-alive comment went out: it also finds a client that went away)."""
        try:
            return replies.get(timeout=min(KEEPALIVE_SECONDS, max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            if time.monotonic() >= deadline:
                return jsonrpc.error(msg_id, jsonrpc.INTERNAL_ERROR, "no reply in time")
            if streamed:
                self._write(b": keepalive\n\n")
            return None

    def _pump(self, stream: ResumableStream, stream_id: str, seen: int, deadline: float) -> None:
        """Write a session's call stream from event `seen` on until its final reply, taking it over
        from any other writer. A broken connection just stops: the host may resume again."""
        me = threading.get_ident()
        with stream.lock:
            stream.owner = me
        cursor = seen
        try:
            while True:
                with stream.lock:
                    if stream.owner != me:
                        return  # resumed elsewhere
                    pending = stream.events[cursor:]
                    done = stream.done
                if done:
                    self.release()
                for offset, event in enumerate(pending, start=cursor + 1):
                    self._event(event, f"{stream_id}-{offset}")
                cursor += len(pending)
                if done and cursor >= len(stream.events):
                    return
                try:
                    reply = stream.replies.get(timeout=min(KEEPALIVE_SECONDS, max(0.1, deadline - time.monotonic())))
                except queue.Empty:
                    if time.monotonic() >= deadline:
                        reply = jsonrpc.error(stream.msg_id, jsonrpc.INTERNAL_ERROR, "no reply in time")
                    else:
                        self._write(b": keepalive\n\n")  # also finds a client that went away
                        continue
                if reply is CANCELLED:  # the host cancelled the call: the stream ends without a reply
                    with stream.lock:
                        stream.done = True
                    self.release()
                    return
                with stream.lock:
                    stream.events.append(reply)
                    stream.done = stream.done or ("method" not in reply and reply.get("id") == stream.msg_id)
        except OSError:
            pass  # the host lost the stream: the call goes on, its events wait for a GET with Last-Event-ID

    def _start_stream(self, extra: dict[str, str]) -> None:
        head = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        head.extend((name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in extra.items())
        self.emit(200, head, b"", True)

    def _event(self, message: JSONObject, event_id: str | None = None) -> None:
        head = f"id: {event_id}\n".encode() if event_id else b""
        self._write(head + b"event: message\ndata: " + json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n\n")

    def _write(self, data: bytes) -> None:
        self.emit(None, None, data, True)

    def _session_stream(self, session: HostSession, stopped: threading.Event) -> None:
        """The session's GET stream: messages that answer no request (list_changed, resource
        updates), until a newer GET replaces it, the session ends or the gateway stops."""
        stream: queue.Queue[JSONObject | None] = queue.Queue()
        if session.stream is not None:
            session.stream.put(None)  # one stream per session: the newer one wins
        session.stream = stream
        self._start_stream({})
        quiet = 0.0  # seconds without a message
        try:
            while not stopped.is_set():
                try:
                    message = stream.get(timeout=HANGUP_SECONDS)
                except queue.Empty:
                    if self._hung_up():
                        break
                    quiet += HANGUP_SECONDS
                    if quiet >= KEEPALIVE_SECONDS:
                        quiet = 0.0
                        self._write(b": keepalive\n\n")
                    continue
                quiet = 0.0
                if message is None:
                    break
                self._event(message)
        except OSError:
            pass  # the client went away
        finally:
            if session.stream is stream:
                session.stream = None
