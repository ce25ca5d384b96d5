"""httpx2's wire layer for one keep-alive HTTP/1.1 connection, on the standard library's
`http.client` instead of httpcore2 + h11.

Why: an MCP request through httpcore2 + h11 costs about 0.5 ms of CPU on loopback, `http.client`
about 0.2 ms (measured: bench/gateway_ab.py, and the per-request cost alone in
tests/transports/test_http11.py's docstring). At the gateway every host's call is one such request,
and the gateway is one process under one GIL, so this is its throughput. httpx2 stays the client:
its Request/Response, headers, cookies, content decoding and timeouts are unchanged; only the
bytes on the wire go through `http.client`, which parses, frames (Content-Length, chunked) and
bounds (line and header count) the reply. What httpcore did that http.client does not is done
here: interim replies skipped, a dead kept-alive connection noticed before reuse, a cut-off body
or an untrustworthy length refused, a reply sent before the request was read whole still read.
A URL the environment proxies keeps httpx2's own transport (HttpChannel decides: proxied()).

One connection per transport, as HttpChannel leases one client per request in flight.
"""

from __future__ import annotations

import http.client
import re
import select
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import httpx2

READ_CHUNK = 64 * 1024
# A request extension: called with the request's socket before it is sent and with None once the
# reply's head is in (or the exchange failed), so that another thread may shut it down meanwhile.
SOCKET_WATCH = "llmc.socket_watch"


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


class _Response(http.client.HTTPResponse):
    """A reply read off the socket: its head parsed here, its body framed and read by
    http.client (Content-Length, chunked, until close). http.client's own head parsing goes
    through the email package (a twentieth of the gateway's CPU per call) and is lax where a
    client must not be: it takes a 103 Early Hints for the reply (RFC 9110 15.2: a client must
    skip interim replies), the first of differing Content-Lengths, an unparsable one as none,
    and "gzip, chunked" as unframed. Here, as h11 did: interim replies skipped (at most
    MAX_INTERIM), a Content-Length is one run of ASCII digits however often repeated, chunked
    must be the only coding, obs-fold becomes a space (RFC 9112 5.2), and anything else that is
    not a header field is refused, within http.client's limits (line length, field count)."""

    MAX_INTERIM = 16
    MAX_LINE = 65536  # http.client's limits
    MAX_FIELDS = 100
    fields: list[tuple[bytes, bytes]]  # the header fields, as sent (names not lower-cased)

    def begin(self) -> None:
        for _ in range(self.MAX_INTERIM + 1):
            version, status, reason = self._status_line()
            fields = self._fields()
            if not 100 <= status < 200 or status == 101:  # 101: a switch nobody asked for, final
                break
        else:
            raise http.client.HTTPException(f"more than {self.MAX_INTERIM} interim (1xx) replies")
        self.code = self.status = status
        self.reason = reason
        self.version = 10 if version == b"HTTP/1.0" else 11
        self.fields = fields
        named: dict[bytes, list[bytes]] = {}
        for name, value in fields:
            named.setdefault(name.lower(), []).append(value)
        codings = _tokens(named.get(b"transfer-encoding", []))
        lengths = {v.strip() for field in named.get(b"content-length", []) for v in field.split(b",")}
        self.chunked, self.chunk_left, self.length = False, None, None
        if status in (204, 304) or self._method == "HEAD":  # type: ignore[attr-defined]  # set by __init__
            self.length = 0
        elif codings:
            if codings != [b"chunked"]:
                raise http.client.HTTPException("the reply's Transfer-Encoding is not chunked alone")
            self.chunked = True
        elif lengths:
            value = lengths.pop()
            if lengths or not value.isdigit():  # bytes.isdigit: ASCII digits only ("+1", "1_0" fail)
                raise http.client.HTTPException("the reply's Content-Length is not one whole number")
            self.length = int(value)
        connection = _tokens(named.get(b"connection", []))
        self.will_close = (b"close" in connection if self.version == 11 else b"keep-alive" not in connection)
        if (codings and lengths) or (not self.chunked and self.length is None):
            self.will_close = True  # read until close; or both framings (RFC 9112 6.3): never reused

    def _read_next_chunk_size(self) -> int:
        """A chunk's size: hexadecimal digits (RFC 9112 7.1), extensions ignored. http.client
        takes whatever int(x, 16) takes: "-1" (then reads on without framing), "0x10", "1_0"."""
        line = self.fp.readline(self.MAX_LINE + 1)
        if len(line) > self.MAX_LINE:
            raise http.client.LineTooLong("chunk size")
        size = line.split(b";", 1)[0].strip(b" \t\r\n")
        if not _HEX.fullmatch(size):
            self._close_conn()  # type: ignore[attr-defined]  # http.client's own
            raise ValueError(f"invalid chunk size {size[:20]!r}")  # http.client reports it as IncompleteRead
        return int(size, 16)

    def _read_and_discard_trailer(self) -> None:
        """A chunked body's trailer fields, skipped: at most MAX_FIELDS of them (http.client reads
        any number, so a server sending trailer lines for ever held the call for ever)."""
        for _ in range(self.MAX_FIELDS + 1):
            line = self.fp.readline(self.MAX_LINE + 1)
            if len(line) > self.MAX_LINE:
                raise http.client.LineTooLong("trailer line")
            if line in (b"\r\n", b"\n", b""):
                return
        raise http.client.HTTPException(f"more than {self.MAX_FIELDS} trailer fields")

    def _status_line(self) -> tuple[bytes, int, str]:
        line = self.fp.readline(self.MAX_LINE + 1)
        if not line:
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        if len(line) > self.MAX_LINE:
            raise http.client.LineTooLong("status line")
        match = _STATUS_LINE.fullmatch(line.rstrip(b"\r\n"))
        if match is None:
            raise http.client.BadStatusLine(line[:80].decode("latin-1"))
        return match[1], int(match[2]), (match[3] or b"").decode("latin-1")

    def _fields(self) -> list[tuple[bytes, bytes]]:
        fields: list[tuple[bytes, bytes]] = []
        for _ in range(self.MAX_FIELDS + 1):
            line = self.fp.readline(self.MAX_LINE + 1)
            if len(line) > self.MAX_LINE:
                raise http.client.LineTooLong("header line")
            if line in (b"\r\n", b"\n"):
                return fields
            if not line.endswith(b"\n"):
                raise http.client.IncompleteRead(line)  # the head was cut short
            line = line.rstrip(b"\r\n")
            if line[:1] in (b" ", b"\t") and fields:  # obs-fold: a continuation, one space (RFC 9112 5.2)
                name, value = fields[-1]
                fields[-1] = (name, (value + b" " + line.strip(b" \t")).strip(b" "))
                continue
            name, colon, value = line.partition(b":")
            value = value.strip(b" \t")
            if not colon or not _TOKEN.fullmatch(name) or _FIELD_VALUE_BREAK.search(value):
                raise http.client.HTTPException(f"not a header field: {line[:80]!r}")
            fields.append((name, value))
        raise http.client.HTTPException(f"more than {self.MAX_FIELDS} header fields")


def _tokens(fields: list[bytes]) -> list[bytes]:
    """The comma-separated tokens of a field's values, lower-cased: ["chunked"], ["close"]."""
    return [t.strip().lower() for field in fields for t in field.split(b",") if t.strip()]


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

    def __init__(self, transport: Http11Transport, response: http.client.HTTPResponse) -> None:
        self._transport = transport
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        response = self._response
        try:
            while True:
                if response.length == 0 and not response.chunked:
                    response.read()  # all of it is in (or none was to come): marks it read whole, as read1 does not
                    return
                chunk = response.read1(READ_CHUNK)
                if not chunk:
                    if not response.chunked and response.length:  # http.client takes a cut-off body as whole
                        raise httpx2.RemoteProtocolError(
                            f"peer closed connection without sending complete message body "
                            f"({response.length} bytes missing)")
                    return
                yield chunk
        except TimeoutError as exc:
            raise httpx2.ReadTimeout(str(exc) or "timed out") from exc
        except http.client.HTTPException as exc:
            raise httpx2.RemoteProtocolError(str(exc) or type(exc).__name__) from exc
        except (OSError, ValueError) as exc:  # ValueError: read on a socket another thread shut and closed
            raise httpx2.ReadError(str(exc) or type(exc).__name__) from exc

    def close(self) -> None:
        response = self._response
        reusable = response.isclosed() and not response.will_close  # http.client closes a reply once read whole
        response.close()
        if not reusable:
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

    def _exchange(self, request: httpx2.Request, sock: socket.socket, head: bytes,
                  timeouts: dict[str, Any]) -> httpx2.Response:
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
        response = _Response(sock, method=request.method)
        try:
            response.begin()
        except TimeoutError as exc:
            response.close()
            self.drop()
            raise httpx2.ReadTimeout(str(exc) or "timed out") from exc
        except http.client.HTTPException as exc:  # a reply that is not HTTP/1.x, or headers past the limits
            response.close()
            self.drop()
            if unsent is not None:
                raise httpx2.WriteError(str(unsent) or type(unsent).__name__) from unsent
            raise httpx2.RemoteProtocolError(str(exc) or type(exc).__name__) from exc
        except OSError as exc:
            response.close()
            self.drop()
            raise httpx2.ReadError(str(unsent or exc) or type(exc).__name__) from exc
        if unsent is not None:
            response.will_close = True  # the request was not sent whole: this connection is done
        return httpx2.Response(
            response.status, headers=response.fields, stream=_Body(self, response),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": response.reason.encode("latin-1"),
                        "network_stream": _Socket(sock)})


_STATUS_LINE = re.compile(rb"(HTTP/1\.[0-9]) ([1-9][0-9][0-9])(?: ([^\x00\r\n]*))?")  # RFC 9112 4
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 5.1: a field name, a method
_TARGET = re.compile(rb"[!-~]+")  # visible ASCII: no space, no control character (RFC 9112 3.2)
_FIELD_VALUE_BREAK = re.compile(rb"[\x00\r\n]")  # RFC 9110 5.5: a value MUST NOT hold CR, LF or NUL


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
