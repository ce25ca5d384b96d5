"""One HTTP request as the gateway's handler (http.py, replies.py) answers it on a worker thread:
its head and body (read on the event loop by asgi.py), whether the host has gone, its admission
(admission.Quotas), and its reply, handed to the event loop as messages (an asyncio queue fed
through loop.call_soon_threadsafe) that asgi.py writes through the server (uvicorn)."""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from llmc_cli.gateway.admission import Quotas

# (status or None, headers or None, body bytes, more to come): a response head (status set)
# and/or a piece of its body; more=False ends the response.
Out = tuple[int | None, list[tuple[bytes, bytes]] | None, bytes, bool]
DONE: Any = object()  # handed over after the last part when the worker returns without ending the reply


class Headers:
    """A request's header fields by name, case-insensitively; the first of repeated ones. Made
    on the event loop for every request, so nothing is decoded there: a field is decoded when
    it is asked for (a handler asks for a few of them)."""

    __slots__ = ("_fields",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        # The server gives names in lower case; reversed, so that the first of repeated ones wins.
        self._fields: dict[bytes, bytes] = dict(reversed(raw))

    def get(self, name: str, default: str | None = None) -> str | None:
        value = self._fields.get(_key(name))
        return default if value is None else value.decode("latin-1").strip()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _key(name) in self._fields


_KEYS: dict[str, bytes] = {}  # a name as asked for -> its lower-case bytes (the handlers' few names)


def _key(name: str) -> bytes:
    key = _KEYS.get(name)
    if key is None:
        key = name.lower().encode("latin-1", "replace")
        if len(_KEYS) < 256:
            _KEYS[name] = key
    return key


class Writer(Protocol):
    """A connection's writer that can hold writes (protocol.Held)."""

    held: list[bytes] | None

    def flush(self) -> None: ...


class Seen:
    """What the server's protocol (protocol.py) keeps for a connection: whether a request of it
    was admitted (its next one then gets --request-timeout to arrive, not --pending-timeout),
    whether the latest request's body has arrived whole (then every earlier one's has too), and
    its writer, which can hold a response's head until its body (one write for both)."""

    admitted = False
    whole = False
    writer: Writer | None = None

    def hold(self) -> None:
        """Writes wait until flush(): a whole reply's head and body go out as one."""
        if self.writer is not None:
            self.writer.held = []

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()


class Exchange:
    """A request and its reply, from the worker thread's side."""

    def __init__(self, scope: dict[str, Any], body: bytes, emit: Callable[[Out], None], quotas: Quotas) -> None:
        self.command: str = scope["method"]
        self.path: str = scope["path"] + ("?" + scope["query_string"].decode("latin-1") if scope.get("query_string") else "")
        self.headers = Headers(scope["headers"])
        client = scope.get("client") or ("", 0)
        self.client_address: tuple[str, int] = (str(client[0]), int(client[1]))
        extensions = scope.get("extensions") or {}
        self.tls: dict[str, Any] | None = extensions.get("tls")
        self.seen: Seen = extensions.get("llmc.connection") or Seen()
        self.body = body
        self.arrived = time.monotonic()  # made on the event loop once the request is whole (access.Door)
        self.quotas = quotas
        self.gone = False  # the host closed the connection (asgi.py watches for it)
        self._emit = emit
        self._ticket: tuple[str | None] | None = None  # the admitted request's principal
        self._ended = False  # the reply's last part was handed over
        self._whole: Out | None = None  # a whole reply, handed over once run() has returned

    def serve(self) -> None:
        """run() on a worker thread of the app's pool; then the whole reply it kept, or DONE for
        the event loop unless the reply was handed over whole (its relay has stopped waiting
        then: no wake-up for nothing). While other requests are in flight a whole reply is
        handed over only once the handler has tidied up: the event loop, woken by it, then finds
        the GIL free (the worker waits for its next request) instead of taking turns with this
        thread's last steps, each turn a futex wake and a context switch."""
        try:
            self.run()
        except Exception:  # noqa: BLE001 - a bug of the handler's own: the trace goes to stderr
            traceback.print_exc(file=sys.stderr)
        finally:
            with contextlib.suppress(ConnectionError):  # the gateway stopped meanwhile: nobody to tell
                if self._whole is not None:
                    self._emit(self._whole)
                elif not self._ended:
                    self._emit(DONE)

    def run(self) -> None:
        """Answer the request (on a worker thread); a host that went away ends it quietly."""
        answer = getattr(self, "do_" + self.command, None)
        try:
            if answer is None:
                self.refuse_method()
            else:
                answer()
        except ConnectionError:
            pass  # the host went away mid-reply (emit)
        finally:
            self.release()

    def refuse_method(self) -> None:
        self.emit(501, [(b"content-type", b"text/plain"), (b"content-length", b"16")], b"Not Implemented\n", False)

    def admit(self, principal: str | None, max_requests: int) -> None:
        """Count this request against its principal's share and the gateway's (raises Refused)."""
        self.quotas.admit(principal, max_requests)
        self._ticket = (principal,)
        self.seen.admitted = True

    def release(self) -> None:
        """The admitted request stops counting against its principal. Called before its final reply
        is written: a host that reads the reply and at once sends its next request must find the
        slot free (max_requests = 1 means one at a time, not one per round trip)."""
        if self._ticket is not None:
            self.quotas.done(self._ticket[0])
            self._ticket = None

    def tls_subject(self) -> dict[str, str] | None:
        """The verified client certificate's subject (mutual TLS), or None."""
        if self.tls is None:
            return None
        subject: dict[str, str] | None = self.tls.get("llmc.client_subject")
        return subject or None

    def _hung_up(self) -> bool:
        """Whether the host closed the connection."""
        return self.gone

    def emit(self, status: int | None, headers: list[tuple[bytes, bytes]] | None, data: bytes, more: bool) -> None:
        """Hand part of the reply to the event loop; OSError once the host has gone."""
        if self.gone:
            raise BrokenPipeError("the host closed the connection")
        self._ended = not more
        if status is not None and not more and self.quotas.busy:
            # Others in flight: serve() hands it over, once this thread has tidied up. Alone, it
            # goes at once: nobody else wants the GIL, and the host waits for it.
            self._whole = (status, headers, data, more)
            return
        self._emit((status, headers, data, more))
