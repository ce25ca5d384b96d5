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
from typing import Any, Iterator

import httpx2

READ_CHUNK = 64 * 1024


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


def _framed(response: http.client.HTTPResponse) -> bool:
    """A Content-Length http.client can trust: absent, or one string of ASCII digits however
    often it is repeated. It reads an unparsable one as absent (the body then ends only when the
    server closes) and the first of several that differ (RFC 9112 6.3: unrecoverable; h11
    refuses both)."""
    values = {v.strip() for field in response.headers.get_all("Content-Length") or [] for v in field.split(",")}
    if not values:
        return True
    value = values.pop()  # int() would also take "+1", "1_0" and non-ASCII digits
    return not values and value.isascii() and value.isdigit() and response.length is not None


class _Response(http.client.HTTPResponse):
    """http.client's reply, past any number of interim (1xx) replies, as RFC 9110 15.2 requires
    of a client "even if the client does not expect one" (http.client skips only 100 Continue,
    and would take a 103 Early Hints for the reply). At most MAX_INTERIM of them: a server
    sending them for ever is not waited on for ever."""

    MAX_INTERIM = 16

    def _read_status(self) -> tuple[str, int, str]:
        for _ in range(self.MAX_INTERIM + 1):
            version, status, reason = super()._read_status()  # type: ignore[misc]  # not in typeshed; in http.client since 2.x
            if not 100 <= status < 200 or status == 101:  # 101: a switch nobody asked for, final
                return version, status, reason
            http.client.parse_headers(self.fp)  # the interim reply's header fields, within the same limits
        raise http.client.HTTPException(f"more than {self.MAX_INTERIM} interim (1xx) replies")


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
                chunk = response.read1(READ_CHUNK)
                if not chunk:
                    if not response.chunked and response.length:  # http.client takes a cut-off body as whole
                        raise httpx2.RemoteProtocolError(
                            f"peer closed connection without sending complete message body "
                            f"({response.length} bytes missing)")
                    return
                yield chunk
                if response.length == 0 and not response.chunked:
                    response.read()  # the last byte is in: this marks the reply read whole (read1 does not)
                    return
        except (TimeoutError, socket.timeout) as exc:
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
        except (TimeoutError, socket.timeout) as exc:
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
        except (TimeoutError, socket.timeout) as exc:
            self.drop()
            raise httpx2.WriteTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            # A server may answer before reading the whole request and close (413 for a body too
            # large): its reply is read all the same, as httpcore does, and explains the failure.
            unsent = exc
        response = _Response(sock, method=request.method)
        try:
            response.begin()
        except (TimeoutError, socket.timeout) as exc:
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
        if not response.chunked and not _framed(response):
            response.close()
            self.drop()
            raise httpx2.RemoteProtocolError("the reply's Content-Length is not one whole number")
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.getheaders()]
        return httpx2.Response(
            response.status, headers=headers, stream=_Body(self, response),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": response.reason.encode("latin-1"),
                        "network_stream": _Socket(sock)})


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
