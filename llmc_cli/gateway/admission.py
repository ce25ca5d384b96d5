"""How much of the gateway each may take, so that nobody can crowd the others out.

The server (uvicorn, http_server.py) holds the connections: at most --max-connections plus
--max-pending-connections of them with a request in hand (past that it answers 503 itself), and
a connection must present its first request head within --pending-timeout (later ones within
--request-timeout; protocol.py), so connections that show no token cannot hold the door.

What is counted here are admitted requests, those whose token (or certificate) was accepted:
at most --max-connections in flight at once (503, Retry-After), and each principal at most its
`max_requests` (429); past that one principal is refused and the others go on. Credentials come
with each request, not with the connection: a kept-alive connection is admitted again, as
whoever its next request says.
"""

from __future__ import annotations

import threading

MAX_PENDING = 64
PENDING_SECONDS = 5.0


class Refused(Exception):
    """A request refused before it is answered: the HTTP status, the message, headers to send."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.headers = headers if headers is not None else {"Retry-After": "1"} if status in (429, 503) else {}


class Quotas:
    """Admitted requests in flight: the gateway's and each principal's."""

    def __init__(self, max_requests: int) -> None:
        self.max_requests = max_requests
        self.lock = threading.Lock()
        self.busy = 0
        self.requests: dict[str, int] = {}  # principal -> its requests in flight

    def admit(self, principal: str | None, max_requests: int) -> None:
        """Count a request authenticated as `principal`, or raise Refused (429: that principal has
        its share in flight; 503: the gateway has every slot in flight). Pair with done()."""
        with self.lock:
            if principal is not None and self.requests.get(principal, 0) >= max_requests:
                raise Refused(
                    429, f"Too Many Requests: principal {principal} has {max_requests} requests in flight (its max_requests)"
                )
            if self.busy >= self.max_requests:
                raise Refused(503, "Service Unavailable: every connection is busy; try again later")
            self.busy += 1
            if principal is not None:
                self.requests[principal] = self.requests.get(principal, 0) + 1

    def done(self, principal: str | None) -> None:
        with self.lock:
            self.busy -= 1
            if principal is not None:
                left = self.requests[principal] - 1
                if left:
                    self.requests[principal] = left
                else:
                    del self.requests[principal]
