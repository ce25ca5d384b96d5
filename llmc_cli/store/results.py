"""Cached tool results ([cache]): the ResultCache protocol, and one 0600 file per entry under the
state directory's `results/` (0700); the `[state] url` database's table is store/postgres/results.py
(gateway replicas share it).

An entry is keyed by a digest the caller makes (services/caching.py: server, tool, the tool
definition's hash, the call's keyed hash, profile, principal), and holds only the server's
result, when it was stored and when it expires: never the arguments, and never a result that
holds a secret value (services/caching.secret_free: such calls are not cached), so no secret
is on disk. An entry's age is judged when it is read, against the TTL configured then: lowering
`ttl_seconds` shortens entries stored under the old one. `dropped` says why the last lookup
missed an entry that was there (expired, older than the TTL now, damaged): what -v tells."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from llmc_cli.config import files
from llmc_cli.config.paths import ensure_private_dir
from llmc_cli.errors import ConfigError
from llmc_cli.model import JSONObject, compact_json, sha256

# The directory's bound: past it, the oldest entries go first.
MAX_TOTAL_BYTES = 64 * 1024 * 1024


if TYPE_CHECKING:  # protocols, for the type checker only: ~0.1 M instructions each to create at import

    class ResultCache(Protocol):
        dropped: str | None

        def get(self, key: str, server: str, ttl: float | None = None) -> JSONObject | None:
            """The result stored under key, unless it is missing, expired, or (with `ttl`, the TTL
            configured now) stored longer ago than that."""

        def put(self, key: str, server: str, result: JSONObject, ttl: float) -> None:
            """Store a result for ttl seconds (best effort: a cache that cannot be written costs a call)."""

        def clear(self, server: str | None = None) -> int:
            """Drop every entry (or a server's); the number dropped."""


def server_tag(server: str) -> str:
    """A server's part of an entry's file name (names may hold characters a file name cannot)."""
    return sha256(server.encode("utf-8")).hexdigest()[:16]


class FileResultCache:
    def __init__(self, directory: Path, max_total_bytes: int = MAX_TOTAL_BYTES) -> None:
        self.directory = directory
        self.max_total_bytes = max_total_bytes
        self.dropped: str | None = None

    def _path(self, key: str, server: str) -> Path:
        return self.directory / f"{server_tag(server)}-{key}.json"

    def get(self, key: str, server: str, ttl: float | None = None) -> JSONObject | None:
        self.dropped = None
        path = self._path(key, server)
        try:
            entry = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError):
            entry = None
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), dict):
            self.dropped = "damaged"
            path.unlink(missing_ok=True)
            return None
        expires, stored, now = entry.get("expiresAt"), entry.get("storedAt"), time.time()
        if not isinstance(expires, (int, float)) or expires <= now:
            self.dropped = "expired"
        elif ttl is not None and (not isinstance(stored, (int, float)) or stored + ttl <= now):
            self.dropped = f"older than ttl_seconds = {ttl:g} (stored under a longer one)"
        if self.dropped is not None:
            path.unlink(missing_ok=True)
            return None
        result: JSONObject = entry["result"]
        return result

    def put(self, key: str, server: str, result: JSONObject, ttl: float) -> None:
        now = time.time()
        text = compact_json({"storedAt": now, "expiresAt": now + ttl, "result": result})
        path = self._path(key, server)
        try:
            ensure_private_dir(self.directory)
            files.write_atomic(path, text, mode=0o600, durable=False)
            os.utime(path, (now, now + ttl), follow_symlinks=False)  # its mtime is its expiry: eviction needs no reading
            self._evict(now)
        except (OSError, ConfigError):
            pass

    def _evict(self, now: float) -> None:
        """Expired entries out, then those expiring soonest (the oldest, under one TTL) until the
        directory is within its bound."""
        entries = []
        for path in self.directory.glob("*.json"):
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        for expires, size, path in sorted(entries):
            if total <= self.max_total_bytes and expires > now:
                break
            path.unlink(missing_ok=True)
            total -= size

    def clear(self, server: str | None = None) -> int:
        pattern = f"{server_tag(server)}-*.json" if server is not None else "*.json"
        dropped = 0
        for path in self.directory.glob(pattern):
            try:
                path.unlink()
                dropped += 1
            except OSError:
                pass
        return dropped
