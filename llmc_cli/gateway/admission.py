"""Which HTTP connections the gateway serves, so that nobody can crowd the others out.

A connection costs a thread from the moment it is accepted, but who sent it is known only when
a request arrives with its token. So connections are served from two pools:

- pending: accepted, no request admitted yet (--max-pending-connections, default 64). Such a
  connection must present a request head within --pending-timeout (default 5 s); when the pool
  is full the connection that has waited longest is closed to make room, so idle or trickling
  connections, however many, cannot keep a host with a valid token out (it sends its request
  at once, they never do).
- admitted: a connection whose request was authenticated (or needs none), while the request
  runs, then kept alive for the next one (--max-connections, default 1024, both together). Each
  principal may have at most its `max_requests` in flight; past that it is answered 429 and the
  others go on. When the pool is full a kept-alive connection with no request is closed first;
  only requests in flight, every one, make a request wait (503, Retry-After).

Credentials come with each request, not with the connection: a kept-alive connection is
admitted again, as whoever its next request says.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Protocol

MAX_PENDING = 64
PENDING_SECONDS = 5.0


@dataclass(frozen=True)
class Ticket:
    """An admitted request: what `done` gives back."""

    sock: socket.socket
    principal: str | None  # None: a request that needs no principal (loopback without auth, /healthz)


class Refused(Exception):
    """A request refused before it is answered: the HTTP status, the message, headers to send."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.headers = headers if headers is not None else {"Retry-After": "1"} if status in (429, 503) else {}


class Admission:
    def __init__(self, max_connections: int, max_pending: int = MAX_PENDING, pending_seconds: float = PENDING_SECONDS) -> None:
        self.max_connections, self.max_pending, self.pending_seconds = max_connections, max_pending, pending_seconds
        self.lock = threading.Lock()
        self.pending: dict[socket.socket, None] = {}  # oldest first
        self.idle: dict[socket.socket, None] = {}  # admitted before, waiting for their next request; oldest first
        self.busy = 0  # requests in flight
        self.requests: dict[str, int] = {}  # principal -> its requests in flight

    def connected(self, sock: socket.socket) -> None:
        """A new connection waits for its first request among the pending ones."""
        victim = None
        with self.lock:
            if len(self.pending) >= self.max_pending:
                victim = next(iter(self.pending))
                del self.pending[victim]
            self.pending[sock] = None
        if victim is not None:
            _hang_up(victim)

    def admit(self, sock: socket.socket, principal: str | None, max_requests: int) -> Ticket:
        """Admit a request authenticated as `principal`, or raise Refused (429: that principal has
        its share in flight; 503: the gateway has every slot in flight)."""
        victim = None
        with self.lock:
            self.pending.pop(sock, None)
            self.idle.pop(sock, None)
            if principal is not None and self.requests.get(principal, 0) >= max_requests:
                raise Refused(
                    429, f"Too Many Requests: principal {principal} has {max_requests} requests in flight (its max_requests)"
                )
            if self.busy + len(self.idle) >= self.max_connections:
                if not self.idle:
                    raise Refused(503, "Service Unavailable: every connection is busy; try again later")
                victim = next(iter(self.idle))
                del self.idle[victim]
            self.busy += 1
            if principal is not None:
                self.requests[principal] = self.requests.get(principal, 0) + 1
        if victim is not None:
            _hang_up(victim)
        return Ticket(sock, principal)

    def done(self, ticket: Ticket, *, keep: bool) -> None:
        """The admitted request is answered; `keep`: its connection waits for another."""
        with self.lock:
            self.busy -= 1
            if ticket.principal is not None:
                left = self.requests[ticket.principal] - 1
                if left:
                    self.requests[ticket.principal] = left
                else:
                    del self.requests[ticket.principal]
            if keep:
                self.idle[ticket.sock] = None

    def closed(self, sock: socket.socket) -> None:
        """The connection ended: it leaves whichever pool it was in."""
        with self.lock:
            self.pending.pop(sock, None)
            self.idle.pop(sock, None)


def _hang_up(sock: socket.socket) -> None:
    """End a connection whose thread waits for a request: its read returns at once, with nothing."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # closed already


class Late(Protocol):
    def cut_off(self) -> None: ...


class Arrivals:
    """Whole-request deadlines (--request-timeout), kept by one thread for every connection. The
    socket's timeout bounds each read, not a request: a client sending a byte now and then, even
    inside one header line, never trips it, and held its connection and thread as long as it
    liked. A connection whose request has not arrived whole by its deadline is shut down, which
    ends the read waiting on it at once, whatever it reads (request line, a header, the body). The
    wait for the next request on a kept-alive connection is one such wait: idle ones end too."""

    TICK = 0.1  # seconds: how late past its deadline a connection may be cut off

    def __init__(self) -> None:
        self._due: dict[Late, float] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def expect(self, handler: Late, seconds: float) -> None:
        with self._lock:
            self._due[handler] = time.monotonic() + seconds

    def arrived(self, handler: Late) -> None:
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
