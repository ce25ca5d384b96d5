"""httpx2's wire layer for one keep-alive HTTP/1.1 connection: a socket and llhttp
(httptools.HttpResponseParser) instead of httpcore2 + h11.

Why: the gateway is one process under one GIL and every host's call is one upstream request,
so the per-request CPU of the client is the gateway's throughput; httpcore2 + h11 costs several
times what a socket write and an llhttp parse cost. httpx2 stays the client: its
Request/Response, headers, cookies, content decoding and timeouts are unchanged; only the bytes
on the wire go through here. The reply is parsed and framed (Content-Length, chunked, until
close) by llhttp; _Reply adds what a parser leaves to its user (interim replies skipped, limits
on the head and trailers, whether the connection may be reused); the transport notices a dead
kept-alive connection before reuse and still reads a reply sent before the request was read
whole. A URL the environment proxies keeps httpx2's own transport (HttpChannel decides: proxied()).

One connection per transport, as HttpChannel leases one client per request in flight.
"""

from __future__ import annotations

import re
import select
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import httptools
import httpx2

READ_CHUNK = 64 * 1024
# A request extension: called with the request's socket before it is sent and with None once the
# reply's head is in (or the exchange failed), so that another thread may shut it down meanwhile.
SOCKET_WATCH = "llmc.socket_watch"
# A request extension: a time.monotonic() by which the reply's head, and a body that is not an
# event stream, must be in (the call's deadline: a server dripping bytes does not extend it). An
# event stream's reads are bounded per read; its deadline is the session's (progress may extend it).
DEADLINE = "llmc.deadline"


def _recv_by(sock: socket.socket, deadline: float | None, read_timeout: float | None) -> bytes:
    """One recv, ending at `deadline` whatever trickles in before it (TimeoutError)."""
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the call's deadline passed")
        sock.settimeout(left if read_timeout is None else min(left, read_timeout))
    return sock.recv(READ_CHUNK)


def _stale(sock: socket.socket | None) -> bool:
    """An idle keep-alive socket that is readable has been closed by the server (or holds bytes
    nobody asked for): not reusable. What httpcore checks before reusing a connection."""
    if sock is None:
        return True
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


class _Reply:
    """One reply as llhttp parses it (httptools.HttpResponseParser; RFC 9112): status line,
    header fields, Content-Length or chunked framing, chunk sizes and trailers are the parser's,
    which refuses a length that is not one number, a length beside chunked, a chunk size that
    is not hexadecimal, a folded or malformed field. What a parser leaves to its user is here,
    as httpcore + h11 did it: interim (1xx) replies skipped (at most MAX_INTERIM), a head within
    MAX_HEAD_BYTES and MAX_FIELDS, trailers within MAX_FIELDS, chunked the only coding, a body
    without framing read until the server closes, and whether the connection may be reused."""

    MAX_INTERIM = 16
    MAX_HEAD_BYTES = 65536  # a status line and its header fields together
    MAX_FIELDS = 100  # header fields, and trailer fields (http.client's limit)
    MAX_TRAILER_BYTES = 65536  # the trailer section, like the head (llhttp hands a field over only whole)
    CHUNK_FRAMING = 64  # bytes allowed per chunk for its size line and CRLF (extensions included)

    def __init__(self, method: str) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._method = method
        self.status = 0
        self.reason = ""
        self.fields: list[tuple[bytes, bytes]] = []  # the final reply's header fields, as sent
        self.body: list[bytes] = []  # parsed, not yet handed on
        self.head_done = False  # the final reply's head is in
        self.done = False  # and its body, whole
        self.will_close = False  # the connection carries no other exchange after this one
        self.until_close = False  # no framing: the body ends when the server closes
        self.failed: httpx2.RemoteProtocolError | None = None  # the body was not HTTP/1.x past what was parsed
        self._interim = 0
        self._waited = 0  # bytes read while the head was not whole
        self._head_bytes = 0  # the head's header fields, as parsed
        self._trailers = 0
        self._chunks = 0  # chunk headers parsed (chunked framing)
        self._body_bytes = 0  # body bytes parsed in all
        self._framing = 0  # bytes after the head that were not body: chunk lines and trailers

    def feed(self, data: bytes) -> None:
        """Parse what arrived. What is not HTTP/1.x raises httpx2.RemoteProtocolError while the
        head is read; in the body it is kept in `failed`, raised once the body before it is read."""
        if not self.head_done:
            self._waited += len(data)
        framed = self.head_done and not self.done
        body_before = self._body_bytes
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # a 101: a switch nobody asked for, taken as final
            self.done = self.will_close = True
        except httptools.HttpParserError as exc:
            cause = exc.__context__ if isinstance(exc, httptools.HttpParserCallbackError) else None
            failed = (
                cause
                if isinstance(cause, httpx2.RemoteProtocolError)
                else httpx2.RemoteProtocolError(str(exc) or type(exc).__name__)
            )
            if not self.head_done:
                raise failed from None
            self.failed, self.will_close = failed, True
        if not self.head_done and self._waited > self.MAX_HEAD_BYTES:
            raise httpx2.RemoteProtocolError(f"the reply's head is longer than {self.MAX_HEAD_BYTES} bytes")
        if framed and self.failed is None:
            # Trailers (and chunk lines) have a bound, as the head has: llhttp keeps a field until
            # it is whole, so an endless trailer would otherwise grow without limit until the timeout.
            self._framing += len(data) - (self._body_bytes - body_before)
            if self._framing > self.MAX_TRAILER_BYTES + self.CHUNK_FRAMING * self._chunks:
                self.failed = httpx2.RemoteProtocolError(
                    f"the reply's trailer section is longer than {self.MAX_TRAILER_BYTES} bytes"
                )
                self.will_close = True

    def end(self) -> None:
        """The server closed the connection: the end of a body read until close, else a reply cut off."""
        self.will_close = True
        if self.until_close and self.head_done:
            self.done = True
        elif not self.head_done:
            raise httpx2.RemoteProtocolError("the server closed the connection without a whole reply")
        elif not self.done:
            raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")

    # -- llhttp's callbacks ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.head_done:  # bytes after the reply that no request asked for: never reuse this connection
            self.will_close = True
        self.fields = []
        self._head_bytes = 0

    def on_status(self, reason: bytes) -> None:
        if not self.head_done:
            self.reason += reason.decode("latin-1")  # in pieces, as it arrives

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.head_done:
            self._trailers += 1
            if self._trailers > self.MAX_FIELDS:
                raise httpx2.RemoteProtocolError(f"more than {self.MAX_FIELDS} trailer fields")
            return
        self.fields.append((name, value.rstrip(b" \t")))
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > self.MAX_HEAD_BYTES:
            raise httpx2.RemoteProtocolError(f"the reply's head is longer than {self.MAX_HEAD_BYTES} bytes")
        if len(self.fields) > self.MAX_FIELDS:
            raise httpx2.RemoteProtocolError(f"more than {self.MAX_FIELDS} header fields")

    def on_headers_complete(self) -> None:
        if self.head_done:  # a reply after the reply (on_message_begin marked the connection)
            return
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # RFC 9110 15.2: a client skips interim replies
            self._interim += 1
            if self._interim > self.MAX_INTERIM:
                raise httpx2.RemoteProtocolError(f"more than {self.MAX_INTERIM} interim (1xx) replies")
            self.reason = ""
            return
        self.status, self.head_done = status, True
        named: dict[bytes, list[bytes]] = {}
        for name, value in self.fields:
            named.setdefault(name.lower(), []).append(value)
        codings = _tokens(named.get(b"transfer-encoding", []))
        if codings and codings != [b"chunked"]:  # llhttp reads "gzip, chunked" as chunked, "chunked, gzip" until close
            raise httpx2.RemoteProtocolError("the reply's Transfer-Encoding is not chunked alone")
        bodiless = status in (204, 304) or self._method == "HEAD"
        self.until_close = not bodiless and not codings and b"content-length" not in named
        self.will_close = self.until_close or not self._parser.should_keep_alive()
        if self._method == "HEAD":
            self.done = True  # llhttp cannot be told the request was HEAD: it would wait for a body

    def on_body(self, body: bytes) -> None:
        if self.head_done and not self.done:
            self.body.append(body)
            self._body_bytes += len(body)

    def on_chunk_header(self) -> None:
        self._chunks += 1

    def on_message_complete(self) -> None:
        if self.head_done:
            self.done = True

    def take(self) -> bytes:
        """The body parsed since the last take."""
        body, self.body = b"".join(self.body), []
        return body


class _Socket:
    """The `network_stream` extension: lets another thread find the socket to shut down a blocked read."""

    def __init__(self, sock: socket.socket | None) -> None:
        self._sock = sock

    def get_extra_info(self, name: str) -> Any:
        return self._sock if name == "socket" else None


class _Body(httpx2.SyncByteStream):
    """A reply body as it arrives. Read to its end, the connection is kept for the next request
    (unless the reply or a failed send ends it); closed before that, the connection is closed (the
    unread rest would be taken for the next reply)."""

    def __init__(
        self,
        transport: Http11Transport,
        sock: socket.socket,
        reply: _Reply,
        deadline: float | None = None,
        read: float | None = None,
    ) -> None:
        self._transport = transport
        self._sock = sock
        self._reply = reply
        self._deadline = deadline
        self._read = read

    def __iter__(self) -> Iterator[bytes]:
        reply = self._reply
        try:
            while True:
                chunk = reply.take()
                if chunk:
                    yield chunk
                if reply.failed is not None:
                    raise reply.failed
                if reply.done:
                    return
                data = (
                    _recv_by(self._sock, self._deadline, self._read)
                    if self._deadline is not None
                    else self._sock.recv(READ_CHUNK)
                )
                if data:
                    reply.feed(data)
                else:
                    reply.end()
        except TimeoutError as exc:
            raise httpx2.ReadTimeout(str(exc) or "timed out") from exc
        except OSError as exc:  # a socket another thread shut down, or the server reset
            raise httpx2.ReadError(str(exc) or type(exc).__name__) from exc

    def close(self) -> None:
        if not (self._reply.done and not self._reply.will_close):
            self._transport.drop()


class Http11Transport(httpx2.BaseTransport):
    """One keep-alive HTTP/1.1 connection to whichever origin the request names (it is
    reopened when the origin changes, the server closed it, or a reply was not read whole)."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self._ssl_context = ssl_context
        self._sock: socket.socket | None = None
        self._origin: tuple[str, str, int] | None = None

    def drop(self) -> None:
        sock, self._sock, self._origin = self._sock, None, None
        if sock is not None:
            sock.close()  # a reply still being read keeps the descriptor open until it is closed

    def close(self) -> None:
        self.drop()

    def _connect(self, scheme: str, host: str, port: int, timeout: float | None) -> socket.socket:
        if scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        try:
            sock = socket.create_connection((host, port), timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request goes out in one write
            if scheme == "https":
                try:
                    sock = self._ssl_context.wrap_socket(sock, server_hostname=host)
                except BaseException:
                    sock.close()
                    raise
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(str(exc) or "timed out") from exc
        except OSError as exc:  # refused, unreachable, name not resolved, TLS failed
            raise httpx2.ConnectError(str(exc) or type(exc).__name__) from exc
        return sock

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        scheme = url.scheme
        port = url.port or (443 if scheme == "https" else 80)
        origin = (scheme, url.host, port)
        head = _head(request)  # before connecting: a request that cannot be sent opens nothing
        if self._sock is not None and (self._origin != origin or _stale(self._sock)):
            self.drop()
        if self._sock is None:
            self._sock = self._connect(scheme, url.host, port, timeouts.get("connect"))
            self._origin = origin
        sock = self._sock
        watch = request.extensions.get(SOCKET_WATCH)
        if watch is not None:
            watch(sock)
        try:
            return self._exchange(request, sock, head, timeouts)
        finally:
            if watch is not None:
                watch(None)  # the head is in: from here the reply is the caller's to close

    def _exchange(self, request: httpx2.Request, sock: socket.socket, head: bytes, timeouts: dict[str, Any]) -> httpx2.Response:
        # The read timeout bounds the send as well: one setting, not two, each a system call
        # (ioctl). A send that stalls is still bounded (a GET stream's read timeout is none, but
        # a GET has no body to stall on).
        if sock.gettimeout() != timeouts.get("read"):
            sock.settimeout(timeouts.get("read"))
        unsent: OSError | None = None
        try:
            # Head and body in one write: sent apart, the server wakes and reads twice (http.client
            # sends them apart), and each write is a system call and a turn of the GIL here.
            sock.sendall(head + request.read())
        except TimeoutError as exc:
            self.drop()
            raise httpx2.WriteTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            # A server may answer before reading the whole request and close (413 for a body too
            # large): its reply is read all the same, as httpcore does, and explains the failure.
            unsent = exc
        reply = _Reply(request.method)
        deadline = request.extensions.get(DEADLINE)
        try:
            while not reply.head_done:
                data = _recv_by(sock, deadline, timeouts.get("read"))
                if not data:
                    reply.end()
                reply.feed(data)
        except TimeoutError as exc:
            self.drop()
            raise httpx2.ReadTimeout(str(exc) or "timed out") from exc
        except httpx2.RemoteProtocolError:  # a reply that is not HTTP/1.x, or a head past the limits
            self.drop()
            if unsent is not None:
                raise httpx2.WriteError(str(unsent) or type(unsent).__name__) from unsent
            raise
        except OSError as exc:
            self.drop()
            raise httpx2.ReadError(str(unsent or exc) or type(exc).__name__) from exc
        if unsent is not None:
            reply.will_close = True  # the request was not sent whole: this connection is done
        return httpx2.Response(
            reply.status,
            headers=reply.fields,
            stream=_Body(self, sock, reply, None if _event_stream(reply.fields) else deadline, timeouts.get("read")),
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": reply.reason.encode("latin-1"),
                "network_stream": _Socket(sock),
            },
        )


_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 5.1: a field name, a method
_TARGET = re.compile(rb"[!-~]+")  # visible ASCII: no space, no control character (RFC 9112 3.2)
_FIELD_VALUE_BREAK = re.compile(rb"[\x00\r\n]")  # RFC 9110 5.5: a value MUST NOT hold CR, LF or NUL


def _event_stream(fields: list[tuple[bytes, bytes]]) -> bool:
    # find, not `in`: 3.11's bytes `in` first tries its operand as an int (an error formatted per search)
    return any(name.lower() == b"content-type" and value.lower().find(b"text/event-stream") >= 0 for name, value in fields)


def _tokens(fields: list[bytes]) -> list[bytes]:
    """The comma-separated tokens of a field's values, lower-cased: ["chunked"], ["close"]."""
    return [t.strip().lower() for field in fields for t in field.split(b",") if t.strip()]


def _head(request: httpx2.Request) -> bytes:
    """The request line and header fields, checked as h11 and http.client check them: a name,
    value, method or target that would split the head (a CR or LF from a configured header or
    a tool name) is refused, never sent."""
    method, target = request.method.encode("ascii"), request.url.raw_path
    if not _TOKEN.fullmatch(method) or not _TARGET.fullmatch(target):
        raise httpx2.LocalProtocolError(f"cannot send {request.method} {target!r}: not a valid request line")
    lines = [b"%s %s HTTP/1.1\r\n" % (method, target)]
    for name, value in request.headers.raw:
        if not _TOKEN.fullmatch(name) or _FIELD_VALUE_BREAK.search(value):
            raise httpx2.LocalProtocolError(f"cannot send the header field {name!r}: invalid name or value")
        lines.append(b"%s: %s\r\n" % (name, value))
    lines.append(b"\r\n")
    return b"".join(lines)
