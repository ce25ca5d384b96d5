"""What the protocol package remembers between runs, behind small protocols.

mcp/ never decides where state lives (the layout rule: it depends on nothing but errors and
model). The caller hands implementations to connect() and OAuth: llmc_cli/store/ has the
file-backed ones. Without them an era is probed every time, no HTTP session is remembered, and
tokens last as long as the process (MemoryTokenStore).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from llmc_cli.model import dataclass

if TYPE_CHECKING:
    from llmc_cli.mcp.auth.records import TokenRecord


if TYPE_CHECKING:  # protocols, for the type checker only: ~0.1 M instructions each to create at import

    class EraCache(Protocol):
        """Per server (ServerSpec.cache_key()): what connect() found (era, transport, version) and,
        for a legacy HTTP server, its remembered HTTP session (mcp/session_ids.py). Best effort
        both ways: a cache that cannot be read or written costs a probe, never a failure."""

        def load(self) -> dict[str, dict[str, Any]]:
            """Every entry, by cache key ({} when there is nothing or it cannot be read)."""
            ...

        def save(self, changes: Mapping[str, dict[str, Any] | None]) -> None:
            """Replace these entries in one write (None removes one)."""
            ...

    class TokenStore(Protocol):
        """OAuth records (mcp/auth/records.py), one per authorization server and resource; each
        names the MCP server URL it serves (canonical, mcp.auth.canonical_uri), so a connection
        finds its tokens before any discovery."""

        def records(self) -> list[TokenRecord]: ...

        def find(self, server_url: str) -> TokenRecord | None:
            """The newest record for this canonical server URL."""
            ...

        def save(self, record: TokenRecord) -> None:
            """Store a record; it replaces any other for the same server URL."""
            ...

        def delete(self, server_url: str) -> int:
            """Remove the server's records; how many there were."""
            ...

        def refresh_lock(self, timeout: float) -> AbstractContextManager[Any]:
            """Held while refreshing a token: another llmc process may be refreshing the same
            (rotating) refresh token. Raises TimeoutError when not acquired within `timeout`."""
            ...


@dataclass(frozen=True)
class Stores:
    """The state connect() may use; each part optional."""

    era_cache: EraCache | None = None
    tokens: TokenStore | None = None
    # False: an initialize-era HTTP session belongs to this connection alone (a gateway's host
    # session): none is resumed or remembered in the era cache, and each is ended on close.
    remember_session_ids: bool = True


class MemoryTokenStore:
    """Tokens for the life of one process: what OAuth uses when no store is handed in."""

    def __init__(self) -> None:
        self._records: list[TokenRecord] = []
        self._lock = threading.Lock()

    def records(self) -> list[TokenRecord]:
        return list(self._records)

    def find(self, server_url: str) -> TokenRecord | None:
        found = [r for r in self._records if r.server_url == server_url]
        return found[-1] if found else None

    def save(self, record: TokenRecord) -> None:
        self._records = [r for r in self._records if r.server_url != record.server_url] + [record]

    def delete(self, server_url: str) -> int:
        before = len(self._records)
        self._records = [r for r in self._records if r.server_url != server_url]
        return before - len(self._records)

    def refresh_lock(self, timeout: float) -> AbstractContextManager[Any]:
        return self._lock
