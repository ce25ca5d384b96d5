"""A gateway connection's requests as llhttp parses them (httptools; RFC 9112): the request
line, the header fields, where a body ends and whether it came whole are the parser's. What a
parser leaves to its user is here: how many bytes a head and how many fields it may have (431
past either), and reading from the socket only when the request being served needs more.

Pipelined requests are parsed as their bytes arrive, each kept whole (head, body so far) until
its turn; at most one read (READ_BYTES) past the request being served is ever taken in."""

from __future__ import annotations

from collections import deque
from typing import Protocol

import httptools

READ_BYTES = 1 << 16
MAX_HEAD_BYTES = 65536  # a request line and its header fields together
MAX_FIELDS = 100  # header fields in one request (http.client's limit)


class _Readable(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...


class BadRequest(Exception):
    """A request that cannot be parsed or is past the limits: answered with `status`, after
    which nothing more is read from the connection."""

    def __init__(self, status: int, message: str, version: str = "1.1") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.version = version  # the request's HTTP version, as far as the parser read it


class RequestHeaders:
    """A request's header fields by lower-cased name, in the order sent: what the handler asks of
    them (get: the first, get_all)."""

    __slots__ = ("_fields",)

    def __init__(self, fields: list[tuple[bytes, bytes]]) -> None:
        self._fields: dict[str, list[str]] = {}
        for name, value in fields:
            # The parser drops the whitespace before a value, not after it (RFC 9112 5: OWS on both sides)
            self._fields.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1").rstrip(" \t"))

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._fields.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str, failobj: list[str] | None = None) -> list[str] | None:
        values = self._fields.get(name.lower())
        return list(values) if values else failobj

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def __getitem__(self, name: str) -> str | None:
        return self.get(name)


class Request:
    """One request as parsed so far: its head once `head_done`, its body whole once `done`."""

    __slots__ = ("body", "done", "fields", "head_done", "method", "target", "upgrade", "version")

    def __init__(self) -> None:
        self.method = ""
        self.target: list[bytes] = []  # the parser hands the target over in pieces as they arrive
        self.version = ""  # "1.1", "1.0", "0.9" (a request line without one), or whatever else was sent
        self.fields: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.head_done = False
        self.done = False
        self.upgrade = False  # it asked to switch protocols (Connection: upgrade, or CONNECT)

    def head_bytes(self) -> int:
        """The head's size, less its line breaks and the spaces the parser dropped."""
        return sum(map(len, self.target)) + sum(len(name) + len(value) + 2 for name, value in self.fields)


class RequestParser:
    """The requests of one connection, in order. Ask for the next one's head (next_request), then
    its body if the handler reads it (body), then say it was served (served)."""

    def __init__(self, rfile: _Readable) -> None:
        self._rfile = rfile
        self._parser = httptools.HttpRequestParser(self)
        # Transfer-Encoding beside Content-Length is parsed rather than refused, so that a request
        # with a Transfer-Encoding is answered alike however it is framed (the handler reads no
        # such body: 501, and the connection closes, so no body is framed either way).
        self._parser.set_dangerous_leniencies(lenient_chunked_length=True)
        self._queue: deque[Request] = deque()
        self._broken: BadRequest | None = None  # the parser stopped: this answers what comes next
        self._ended = False  # the client closed its side, or the connection is done with

    # -- llhttp's callbacks ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._queue.append(Request())

    def on_url(self, url: bytes) -> None:
        self._queue[-1].target.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._queue[-1].fields.append((name, value))

    def on_headers_complete(self) -> None:
        request = self._queue[-1]
        request.method = self._parser.get_method().decode("ascii")
        request.version = self._parser.get_http_version()
        request.head_done = True

    def on_body(self, body: bytes) -> None:
        self._queue[-1].body.append(body)

    def on_message_complete(self) -> None:
        self._queue[-1].done = True

    # -- the handler's side ----------------------------------------------------------------------

    def next_request(self) -> Request | None:
        """The next request, its head whole (its body may still be on its way); None when the
        client closed the connection before a request's head was whole (nothing to answer).
        Raises BadRequest for a head the parser refused or one past the limits."""
        waited = 0  # bytes read while this head was not whole
        while not (self._queue and self._queue[0].head_done):
            if self._queue and waited > MAX_HEAD_BYTES:
                raise BadRequest(431, "Request header fields too large", self._version())
            if self._broken is not None:
                raise self._broken
            read = self._feed()
            if not read:
                if self._broken is not None:
                    raise self._broken
                return None
            waited += read
        request = self._queue[0]
        if request.head_bytes() > MAX_HEAD_BYTES:
            raise BadRequest(431, "Request header fields too large", request.version)
        if len(request.fields) > MAX_FIELDS:
            raise BadRequest(431, "Too many headers", request.version)
        if request.upgrade and any(
            name.lower() in (b"content-length", b"transfer-encoding") and value.strip() != b"0" for name, value in request.fields
        ):
            # httptools hands an upgrade request's body over as the new protocol's bytes: it
            # never reaches the request, so such a request cannot be served as HTTP/1.1 either
            raise BadRequest(
                400, "Bad request: an Upgrade request with a body (no other protocol is spoken here)", request.version
            )
        return request

    def body(self, request: Request) -> bytes:
        """The request's body: whole, or what came before the client stopped sending (the request
        is then not `done`)."""
        while not request.done and self._feed():
            pass
        return b"".join(request.body)

    def served(self, request: Request) -> bool:
        """The request was answered: whether the connection may carry the next one (not when its
        body was not read whole: the rest would be taken for a request)."""
        if self._queue and self._queue[0] is request:
            self._queue.popleft()
        return request.done and not self._ended

    def _feed(self) -> int:
        """Read what has arrived (one read) and parse it: the bytes read, 0 at the end of the
        stream or once the parser has stopped."""
        if self._ended or self._broken is not None:
            return 0
        data = self._rfile.read1(READ_BYTES)
        if not data:
            self._ended = True
            return 0
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # An Upgrade or CONNECT request: the gateway switches to no other protocol (RFC 9110
            # 7.8 lets a server ignore Upgrade), so it is answered as any request, and the
            # connection ends after it (the parser reads nothing past it).
            self._queue[-1].upgrade = True
            self._ended = True
        except httptools.HttpParserError as exc:
            self._broken = BadRequest(400, f"Bad request: {exc}", self._version())
        return len(data)

    def _version(self) -> str:
        version = self._parser.get_http_version()
        return version if version in ("1.0", "1.1") else "1.1"
