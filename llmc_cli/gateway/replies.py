"""How the gateway's HTTP handler takes each request from the parser (request_parser.py) and
writes replies: plain JSON, a call's SSE stream (resumable in a session: every event kept with an id, a
GET with Last-Event-ID takes the stream over), and a session's GET stream. http.py decides what
is admitted and which connection answers; this module only moves bytes between it and the host."""

from __future__ import annotations

import json
import math
import queue
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

from llmc_cli.gateway.admission import Admission, Ticket
from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.hosts import REQUEST_SECONDS, HostSession, ResumableStream
from llmc_cli.gateway.request_parser import BadRequest, Request, RequestHeaders, RequestParser
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import object_at, request_id
from llmc_cli.model import JSONObject

REPLY_SECONDS = 3600.0  # the longest a request may take (upstream timeouts end calls long before)
KEEPALIVE_SECONDS = 15.0
HANGUP_SECONDS = 1.0  # how often an idle GET stream looks whether its host has gone
RETRY_MS = 500  # how soon a host whose stream broke should resume it (SSE retry field)
STREAMED = {"tools/call", "subscriptions/listen"}  # answered on SSE when the client accepts it: messages come first
OPEN_ENDED = "subscriptions/listen"  # its stream lasts until the host drops it: no reply deadline
_date: tuple[int, str] = (0, "")  # (second, its Date header) last formatted


class Arrivals:
    """Whole-request deadlines (--request-timeout), kept by one thread for every connection. The
    socket's timeout bounds each read, not a request: a client sending a byte now and then, even
    inside one header line, never trips it, and held its connection and thread as long as it
    liked. A connection whose request has not arrived whole by its deadline is shut down, which
    ends the read waiting on it at once, whatever it reads (request line, a header, the body). The
    wait for the next request on a kept-alive connection is one such wait: idle ones end too."""

    TICK = 0.1  # seconds: how late past its deadline a connection may be cut off

    def __init__(self) -> None:
        self._due: dict[ReplyWriter, float] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def expect(self, handler: ReplyWriter, seconds: float) -> None:
        with self._lock:
            self._due[handler] = time.monotonic() + seconds

    def arrived(self, handler: ReplyWriter) -> None:
        with self._lock:
            self._due.pop(handler, None)

    def run(self) -> None:
        """Cut off late connections until stop()."""
        while not self._stopped.wait(self.TICK):
            now = time.monotonic()
            with self._lock:
                late = [handler for handler, due in self._due.items() if due <= now]
                for handler in late:
                    del self._due[handler]
            for handler in late:
                handler.cut_off()

    def stop(self) -> None:
        self._stopped.set()


class ReplyWriter(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout: ClassVar[float] = REQUEST_SECONDS  # to send a whole request, head and body (--request-timeout)
    arrivals: ClassVar[Arrivals]  # set on the subclass serve() makes
    admission: ClassVar[Admission]  # likewise
    late = False  # cut off by `arrivals`: nothing more is read or answered on this connection
    ticket: Ticket | None = None  # the request being answered was admitted (admission.py)
    admitted_before = False  # a request of this connection was admitted: it waits as a kept-alive one
    requests: RequestParser  # the connection's requests (setup)
    parsed: Request  # the one being answered

    def handle_one_request(self) -> None:
        # The first request's head must come within the pending deadline: a connection that has
        # shown nobody's token yet gets seconds, not the --request-timeout an admitted one gets.
        first = min(self.timeout, self.admission.pending_seconds)
        self.arrivals.expect(self, self.timeout if self.admitted_before else first)
        try:
            self.serve_one()
        except TimeoutError:  # a read past the socket's timeout: the client is gone
            self.close_connection = True
        finally:
            self.arrivals.arrived(self)
            self.release()

    def release(self) -> None:
        """The admitted request stops counting against its principal. Called before its final reply
        is written: a host that reads the reply and at once sends its next request must find the
        slot free (max_requests = 1 means one at a time, not one per round trip)."""
        if self.ticket is not None:
            self.admission.done(self.ticket, keep=not self.close_connection)
            self.ticket = None

    def admit(self, principal: str | None, max_requests: int) -> None:
        """Count this request against its principal's share and the gateway's (raises Refused);
        a POST's body then has --request-timeout to arrive."""
        self.ticket = self.admission.admit(self.connection, principal, max_requests)
        self.admitted_before = True
        if self.command == "POST":
            self.arrivals.expect(self, self.timeout)

    def cut_off(self) -> None:
        self.late = True
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed

    def setup(self) -> None:
        super().setup()
        self.requests = RequestParser(self.rfile)
        # Headers and body go out in separate writes; with Nagle's algorithm the body would wait
        # for the client's delayed ACK (~40 ms) on a kept-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no access log on stderr: request lines carry session ids

    def serve_one(self) -> None:
        """Parse the connection's next request (request_parser.py) and answer it: a request the
        parser refused or that is past its limits with its error, then the connection closes."""
        self.command = self.requestline = ""  # send_error reads these before a request is known
        self.request_version = "HTTP/1.1"
        self.close_connection = True
        try:
            request = self.requests.next_request()
        except BadRequest as exc:
            self.request_version = f"HTTP/{exc.version}"
            self.send_error(exc.status, exc.message)
            return
        if request is None:
            return  # the client left, or was cut off, before a whole head: no answer
        self.parsed = request
        if not self._take(request):
            return
        answer = getattr(self, "do_" + self.command, None)
        if answer is None:
            self.send_error(501, f"Unsupported method ({self.command!r})")
            return
        answer()
        self.wfile.flush()
        if not self.requests.served(request):
            self.close_connection = True

    def _take(self, request: Request) -> bool:
        """The parsed head as http.server's handler holds it (command, path, request_version,
        headers, close_connection), and what the parser leaves to a server (RFC 9112 2.3, 3.2,
        9.3; RFC 9110 10.1.1). False: refused, the error sent."""
        self.command = request.method
        self.path = b"".join(request.target).decode("latin-1")
        self.request_version = f"HTTP/{request.version}"
        self.requestline = f"{self.command} {self.path} {self.request_version}"
        if request.version == "0.9":  # a request line without a version: a bare `GET /path`, body alone in reply
            if self.command != "GET":
                self.request_version = "HTTP/1.1"
                self.send_error(400, f"Bad request syntax ({self.command} {self.path!r})")
                return False
        elif request.version not in ("1.0", "1.1"):
            self.request_version = "HTTP/1.1"
            self.send_error(505, f"Invalid HTTP version ({request.version})")
            return False
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")
        if self.command != "POST":
            self.arrivals.arrived(self)  # no body to wait for (the endpoint reads none but a POST's)
        headers = RequestHeaders(request.fields)
        if len(headers.get_all("Host") or []) > 1:  # RFC 9112 3.2: MUST be 400; which one would count?
            self.send_error(400, "More than one Host header")
            return False
        self.headers = headers  # type: ignore[assignment]  # http.server's own parse is not used
        connection = (headers.get("Connection") or "").lower()
        self.close_connection = request.version != "1.1"
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive" and request.version != "0.9":
            self.close_connection = False
        if (headers.get("Expect") or "").lower() == "100-continue" and request.version == "1.1":
            return self.handle_expect_100()
        return True

    def read_body(self) -> bytes:
        """The request's body as the parser framed it: whole, or what came before the client
        stopped sending (or was cut off)."""
        return self.requests.body(self.parsed)

    # -- responses -------------------------------------------------------------------------------

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header, formatted once a second rather than for every reply."""
        global _date
        if timestamp is not None:
            return super().date_time_string(timestamp)
        now = int(time.time())
        cached = _date  # a tuple, replaced whole: threads see the old one or the new one
        if cached[0] != now:
            cached = _date = (now, super().date_time_string(now))
        return cached[1]

    def _send(self, status: int, body: JSONObject | None, headers: dict[str, str] | None = None) -> None:
        """A whole reply in one write: head and body written apart cost the gateway two more
        system calls per reply (each a turn of the GIL among the threads of busy hosts) and
        the host a second wake-up. What send_response/send_header would write, Connection's
        effect on the connection included."""
        data = json.dumps(body, ensure_ascii=False).encode("utf-8") if body is not None else b""
        head = [
            f"{self.protocol_version} {status} {self.responses[status][0]}",
            f"Server: {self.version_string()}",
            f"Date: {self.date_time_string()}",
        ]
        if body is not None:
            head.append("Content-Type: application/json")
        head.append(f"Content-Length: {len(data)}")
        for name, value in (headers or {}).items():
            head.append(f"{name}: {value}")
            if name.lower() == "connection":
                self.close_connection = value.lower() == "close" or (self.close_connection and value.lower() != "keep-alive")
        self.release()
        if self.request_version == "HTTP/0.9":  # a bare `GET /path`: the body alone, as http.server answers
            self.wfile.write(data)
            return
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1", "strict") + data)

    def _answer(
        self,
        connection: GatewayConnection,
        message: JSONObject,
        extra: dict[str, str],
        *,
        modern: bool = False,
        session: HostSession | None = None,
        alone: bool = False,
        settle: Callable[[JSONObject], None] | None = None,
    ) -> JSONObject | None:
        """The final reply, once written (None: on a session's resumable stream, or the host went
        away first). `alone`: the connection serves only this request (2026-07-28, no session).
        An Mcp-Session-Id in `extra` goes out only with a result (initialize's): an error starts
        no session. `settle` sees the final reply before it is written: what the reply implies
        (a refused initialize ends its session) holds by the time the host reads it."""
        # SimpleQueue: a queue per request, and queue.Queue builds three Conditions for each
        replies: queue.SimpleQueue[JSONObject] = queue.SimpleQueue()
        msg_id = request_id(message)  # as the connection answers it
        streamed = (
            message["method"] in STREAMED
            and "text/event-stream" in (self.headers.get("Accept") or "")
            and _may_send_first(connection, message)
        )
        # Nothing but the reply can reach the host, and this thread only waits for it: the call
        # runs here (McpServer.inline_calls), not on a pool thread, saving two thread switches.
        connection.inline_calls = alone and not streamed
        connection.handle(message, replies.put)
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
                try:
                    reply = replies.get(timeout=min(KEEPALIVE_SECONDS, max(0.1, deadline - time.monotonic())))
                except queue.Empty:
                    if time.monotonic() >= deadline:
                        reply = jsonrpc.error(msg_id, jsonrpc.INTERNAL_ERROR, "no reply in time")
                    elif streamed:
                        self._write(b": keepalive\n\n")  # also finds a client that went away
                        continue
                    else:
                        continue
                final = "method" not in reply and reply.get("id") == msg_id
                if final and settle is not None:
                    settle(reply)
                if streamed:
                    if final:
                        self.release()
                    self._event(reply)
                elif final:
                    headers = extra if "result" in reply else {k: v for k, v in extra.items() if k != "Mcp-Session-Id"}
                    self._send(_status_of(reply) if modern else 200, reply, headers)
                if final:
                    return reply
        except OSError:
            # The client dropped the stream: that cancels its request (2026-07-28 transports).
            connection.handle(
                jsonrpc.notification("notifications/cancelled", {"requestId": msg_id, "reason": "the client disconnected"}),
                lambda reply: None,
            )
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
                with stream.lock:
                    stream.events.append(reply)
                    stream.done = stream.done or ("method" not in reply and reply.get("id") == stream.msg_id)
        except OSError:
            pass  # the host lost the stream: the call goes on, its events wait for a GET with Last-Event-ID

    def _start_stream(self, extra: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True  # an SSE body ends when the connection does

    def _event(self, message: JSONObject, event_id: str | None = None) -> None:
        head = f"id: {event_id}\n".encode() if event_id else b""
        self._write(head + b"event: message\ndata: " + json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n\n")

    def _write(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

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

    def _hung_up(self) -> bool:
        """Whether the host closed the connection: a stream it dropped ends within a second, so
        the request stops counting against its principal (admission.py), not at the next write."""
        poller = select.poll()  # not select.select: a gateway's descriptors may pass FD_SETSIZE
        try:
            poller.register(self.connection, select.POLLIN)
            return bool(poller.poll(0)) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


def _status_of(reply: JSONObject) -> int:
    """2026-07-28 on HTTP: an unknown method is 404; a request refused for its protocol fields 400."""
    code = object_at(reply, "error").get("code")
    if code == jsonrpc.METHOD_NOT_FOUND:
        return 404
    if code in jsonrpc.MODERN_ERROR_CODES:
        return 400
    return 200


def params_of(message: JSONObject) -> JSONObject:
    """A message's params object; {} when it has none (or something else in their place)."""
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def _may_send_first(connection: GatewayConnection, message: JSONObject) -> bool:
    """Could anything reach the host before this call's result? Progress it asked for, log
    messages it opted into (2026-07-28), requests to it (elicitation, sampling: initialize era).
    Otherwise the result goes as plain JSON, and the connection stays open for the next request."""
    params = params_of(message)
    stated = params.get("_meta")
    meta: JSONObject = stated if isinstance(stated, dict) else {}
    if "progressToken" in meta or meta.get("io.modelcontextprotocol/logLevel") or message["method"] == OPEN_ENDED:
        return True
    return connection.legacy_version is not None  # a session: upstream logs, elicitation, sampling
