"""A paginated list method read to its end (2025-11-25 and 2026-07-28 server/utilities/
pagination), and how long the list stays fresh (2026-07-28 server/utilities/caching)."""

from __future__ import annotations

from collections.abc import Callable

from llmc_cli.errors import ProtocolError
from llmc_cli.model import JSONObject

MAX_PAGES = 1000  # a server that paginates forever is lying


def all_pages(
    request: Callable[[str, JSONObject], JSONObject], name: str, method: str, key: str, params: JSONObject | None, modern: bool
) -> tuple[list[JSONObject], float | None]:
    """Every page of `method` (`request(method, params)` asks the server `name` for one), and
    how many seconds the list stays fresh: the shortest `ttlMs` of its pages (absent or negative
    is 0, stale at once), or None in the initialize era (`modern` False: fresh until the server
    announces a change). A repeated cursor is a lying server."""
    items: list[JSONObject] = []
    ttls: list[float] = []
    seen: set[str] = set()
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = request(method, {**(params or {}), **({"cursor": cursor} if cursor else {})})
        batch = page.get(key)
        if not isinstance(batch, list):
            raise ProtocolError(f"{name}: {method} result has no '{key}' list")
        items.extend(x for x in batch if isinstance(x, dict))
        if modern:
            ttl = page.get("ttlMs")
            ttls.append(max(ttl, 0) / 1000 if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else 0.0)
        next_cursor = page.get("nextCursor")
        if not next_cursor:
            return items, min(ttls) if ttls else None
        if not isinstance(next_cursor, str):
            raise ProtocolError(f"{name}: {method} returned a nextCursor that is not a string")
        cursor = next_cursor
        if cursor in seen:
            raise ProtocolError(f"{name}: {method} returned the same cursor twice")
        seen.add(cursor)
    raise ProtocolError(f"{name}: {method} returned more than {MAX_PAGES} pages")
