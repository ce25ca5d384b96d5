"""uvicorn's httptools protocol with what the gateway needs of a connection and uvicorn does not
do (a small subclass; everything else, parsing, keep-alive, pipelining, 100-continue and flow
control, is uvicorn's):

- Deadlines for request heads. uvicorn times out idle kept-alive connections only: a client that
  sends a request head a byte at a time, or nothing at all, holds its connection for as long as
  it likes (slowloris). Here a connection must present its first request head within
  --pending-timeout (it has shown nobody's token yet), and a head once begun must be whole within
  --request-timeout; a connection never admitted waits --pending-timeout for its next request.
  (Bodies: the app's own deadline, asgi.py.) One timer per connection watches every deadline,
  the idle wait between requests included (uvicorn's keep-alive timer, made per response, is not
  used): a request only moves the deadline, and the timer, when it fires early, sleeps on to it.
- Limits on heads: llhttp has none. A head past 64 KiB, or with more than 100 fields, is answered
  431 and the connection closed.
- The ASGI TLS extension (scope["extensions"]["tls"]): uvicorn leaves it out, and a verified
  client certificate (mutual TLS) proves a principal ([serve.principals.X] tls_subject). Besides
  the extension's own keys, "llmc.client_subject" holds the subject as config/tls_subject.py
  matches it.
- scope["extensions"]["llmc.connection"]: the connection's exchange.Seen, where the app marks it
  admitted, reads whether the request's body is whole, and holds a response's head until its
  body (one write, one TCP segment, for a whole reply).
- scope["extensions"]["llmc.loop"]: the connection's event loop.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from llmc_cli.config.tls_subject import subject_of
from llmc_cli.gateway.exchange import Seen

MAX_HEAD_BYTES = 64 * 1024
MAX_FIELDS = 100


class HeadTooLarge(Exception):
    pass


class Held:
    """The connection's transport as uvicorn sees it: writes go through, except while the app
    holds them (Seen.hold: a whole reply's head waits for its body, then both go in one write).
    Closing writes what is held first."""

    __slots__ = ("held", "transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.held: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        if self.held is not None:
            self.held.append(data)
        else:
            self.transport.write(data)

    def flush(self) -> None:
        held, self.held = self.held, None
        if held:
            self.transport.write(b"".join(held))

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class GatewayProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, pending_seconds: float, request_seconds: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending_seconds, self.request_seconds = pending_seconds, request_seconds
        self.seen = Seen()
        self.timer: asyncio.TimerHandle | None = None
        self.due: float | None = None  # when the connection is closed unless something moves it; None: a request runs
        self.head_bytes: int | None = 0  # bytes of a request head so far; None: not in a head
        self.first = True  # no request head yet: the deadline counts from the connection's start
        self.too_large = False
        # The loop for the app: asyncio.get_running_loop() is a getpid() system call per request on Python 3.11.
        self.extensions: dict[str, Any] = {"llmc.connection": self.seen, "llmc.loop": self.loop}

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        held = Held(transport)
        self.transport = held  # type: ignore[assignment]
        self.seen.writer = held
        self._watch(min(self.pending_seconds, self.request_seconds))
        if self.scheme == "https":
            self.extensions["tls"] = tls_extension(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.due = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.head_bytes is not None:  # in a head: what of `data` belongs to it
            end = data.find(b"\r\n\r\n")
            self.head_bytes += len(data) if end < 0 else end + 4
            if self.head_bytes > MAX_HEAD_BYTES:
                self.too_large = True
                self.send_400_response("")
                return
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = self.extensions
        self.seen.whole = False
        self.head_bytes = self.head_bytes or 0
        if not self.first:  # a kept-alive connection's next request: its head's own deadline
            self._watch(self.request_seconds if self.seen.admitted else min(self.pending_seconds, self.request_seconds))

    def on_headers_complete(self) -> None:
        # Counted once the head is whole (it is at most MAX_HEAD_BYTES), not by a call per field.
        if len(self.headers) > MAX_FIELDS:
            self.too_large = True
            raise HeadTooLarge  # llhttp stops; uvicorn answers through send_400_response
        self.due = None  # the head is whole: the request's own deadlines take over
        self.first = False
        self.head_bytes = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.seen.whole = True  # this request's body, and every earlier one's, is whole
        self.head_bytes = 0

    def on_response_complete(self) -> None:
        """uvicorn's, with the connection's one timer for the wait for the next request: the
        keep-alive wait once a request was admitted, --pending-timeout before."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:  # a request that came while this one was answered
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self.due is None:  # (not None: the next request's head has begun, under its own deadline)
            self._watch(self.timeout_keep_alive if self.seen.admitted else self.pending_seconds)

    def send_400_response(self, msg: str) -> None:
        if not self.too_large:
            super().send_400_response(msg)
            return
        if self.transport.is_closing():
            return
        body = b"Request Header Fields Too Large\n"
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()

    def _watch(self, seconds: float) -> None:
        """Close the connection `seconds` from now unless something moves the deadline first.
        The timer is made anew only when none is pending or the one pending is due later."""
        due = self.loop.time() + seconds
        self.due = due
        timer = self.timer
        if timer is not None:
            if timer.when() <= due:
                return  # it fires first, and sleeps on to `due` then
            timer.cancel()
        self.timer = self.loop.call_at(due, self._late)

    def _late(self) -> None:
        """A deadline may have passed: no whole request head in time, or no next request."""
        self.timer = None
        due = self.due
        if due is None:
            return  # a request runs: the next deadline arms the timer again
        if self.loop.time() < due:
            self.timer = self.loop.call_at(due, self._late)
        elif not self.transport.is_closing():
            self.transport.close()


def tls_extension(transport: asyncio.Transport) -> dict[str, Any]:
    """The ASGI TLS extension's keys for a TLS connection, and the verified client certificate's
    subject (mutual TLS) under "llmc.client_subject"."""
    ssl_object: ssl.SSLObject | None = transport.get_extra_info("ssl_object")
    peercert = transport.get_extra_info("peercert")
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    cipher = ssl_object.cipher() if ssl_object is not None else None
    subject = subject_of(peercert) if peercert else {}
    return {
        "server_cert": None,
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)] if der else [],
        "client_cert_name": ",".join(f"{k}={v}" for k, v in reversed(list(subject.items()))) or None,
        "client_cert_error": None,
        "tls_version": None,
        "cipher_suite": None,
        "llmc.cipher": cipher[0] if cipher else None,
        "llmc.client_subject": subject,
    }
