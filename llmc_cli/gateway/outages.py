"""Upstreams in trouble: one that cannot be reached is said once on stderr (its items left out of
the listings), and one that crashed or could not start is started again on next use, at most
every RETRY_SECONDS: a gateway outlives its upstreams' troubles."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from llmc_cli.model import clean_line

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog

RETRY_SECONDS = 5.0


class Outages:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog  # the shared upstream connections
        self._reported: set[str] = set()
        self._revived: dict[str, float] = {}  # server -> when it was last set to start again

    def revive(self, server: str | None = None, upstreams: Catalog | None = None) -> None:
        """Start again, on next use, an upstream that crashed or could not start (one server, or
        all; the shared connection and a host's own), at most every RETRY_SECONDS."""
        now = time.monotonic()
        chain: list[Catalog] = []  # the host's own connections, its principal's, the shared ones
        catalog: Catalog | None = upstreams or self.catalog
        while catalog is not None:
            chain.append(catalog)
            catalog = catalog.shared
        for name in [server] if server else list(self.catalog.specs):
            if now - self._revived.get(name, 0.0) < RETRY_SECONDS:
                continue
            restarted = [c.restart(name) for c in chain]
            if any(restarted):
                self._revived[name] = now
                self._reported.discard(name)
                _note_upstream(f"{name} will be started again (what it kept in memory is lost)")

    def report(self, failures: list[Any]) -> None:
        """An upstream that cannot be reached: said once on stderr, its items left out."""
        for failure in failures:
            if failure.server not in self._reported:
                self._reported.add(failure.server)
                _note_upstream(
                    f"{failure.server} is unavailable: {failure.error.message}"
                )  # the upstream's words: one clean line


def _note_upstream(message: str) -> None:
    """A line of the gateway's log about an upstream (its error's words: one clean line)."""
    print(f"llmc serve: {clean_line(message)}", file=sys.stderr, flush=True)
