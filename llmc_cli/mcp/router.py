"""The router of a client session that relays for many callers (the gateway's hosts, the session
keeper's attached llmc processes): which caller a server's own message is about.

Each relayed request goes upstream under a progress token of the relay's own, registered here with
its caller. Progress names its token; any other message the server sends while requests run (a
log message, elicitation, sampling, roots) is tied by the client session to the requests it may
belong to (mcp/hooks.RELATED_TOKENS: the token it names, the request on whose HTTP stream or in
whose input_required result it came, else every request in flight on the connection). It reaches
a caller only when every request it may belong to is that one caller's: never another caller's.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import os
import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from llmc_cli.mcp.hooks import RELATED_TOKENS

Route = TypeVar("Route")


def unguessable(key: bytes, n: int) -> str:
    """The n-th token of a 32-byte secret key: 96 bits of BLAKE2b keyed by it over n (a PRF:
    without the key, one token says nothing of another), URL-safe, as secrets.token_urlsafe(12)."""
    digest = hashlib.blake2b(n.to_bytes(8, "big"), digest_size=12, key=key).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")


class Router(Generic[Route]):
    """Thread-safe. `party(route)`: who a route's messages go to (a host connection, an attached
    caller); routes of one party share whatever cannot be tied to one of its requests."""

    def __init__(self, prefix: str, party: Callable[[Route], Hashable]) -> None:
        self._prefix = prefix
        self._party = party
        self._lock = threading.Lock()
        self._routes: dict[str, Route] = {}
        # Tokens are a keyed hash of a counter: as unguessable as random ones without the key,
        # never repeated, and no getrandom system call per request (each one lets go of the GIL:
        # a thread hand-off when the gateway's other requests are waiting for it).
        self._key = os.urandom(32)
        self._counter = itertools.count()

    def open(self, route: Route) -> str:
        """A new progress token for a request relayed for `route`: unpredictable, so that an
        upstream serving several callers learns nothing from it (a counter would tell it how many
        requests others made) and cannot guess another caller's."""
        token = f"{self._prefix}-{unguessable(self._key, next(self._counter))}"
        with self._lock:
            self._routes[token] = route
        return token

    def close(self, token: Any) -> Route | None:
        """The request is answered or abandoned: messages naming its token reach nobody now."""
        with self._lock:
            return self._routes.pop(token, None) if isinstance(token, str) else None

    @contextmanager
    def routing(self, route: Route) -> Iterator[str]:
        """`open` for the duration of a block; yields the token."""
        token = self.open(route)
        try:
            yield token
        finally:
            self.close(token)

    def by_token(self, token: Any) -> Route | None:
        """The route a progress notification names, while its request runs."""
        with self._lock:
            return self._routes.get(token) if isinstance(token, str) else None

    def related(self) -> tuple[Route | None, list[Route | None]]:
        """The route the server's message being handled belongs to, and the routes of every
        request it may belong to (None: a request relayed for nobody, a listing of the relay's
        own). The route is None when it may belong to none or to more than one party's."""
        tokens = RELATED_TOKENS.get()
        with self._lock:
            routes = [self._routes.get(t) if isinstance(t, str) else None for t in tokens]
        first = routes[0] if routes else None
        if first is None:
            return None, routes
        party = self._party(first)
        if all(r is not None and self._party(r) == party for r in routes):
            return first, routes
        return None, routes

    def routes(self) -> list[Route]:
        with self._lock:
            return list(self._routes.values())
