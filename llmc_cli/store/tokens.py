"""OAuth records as files (mcp.stores.TokenStore): one JSON file per (authorization server,
resource) in a 0700 directory, each 0600. No token ever leaves these files for a message."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from llmc_cli.config import files, paths
from llmc_cli.config.files import LockTimeout, file_lock
from llmc_cli.model import sha256

if TYPE_CHECKING:  # the auth package loads only when a token is read: not before a stdio server starts
    from llmc_cli.mcp.auth.records import TokenRecord


class FileTokenStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, issuer: str, resource: str) -> Path:
        key = sha256(f"{issuer}\n{resource}".encode()).hexdigest()[:32]
        return self.directory / f"{key}.json"

    def records(self) -> list[TokenRecord]:
        from llmc_cli.mcp.auth.records import TokenRecord

        out = []
        for path in sorted(self.directory.glob("*.json")) if self.directory.is_dir() else []:
            try:
                record = TokenRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, RecursionError):
                continue
            if record is not None:
                out.append(record)
        return out

    def find(self, server_url: str) -> TokenRecord | None:
        found = [r for r in self.records() if r.server_url == server_url]
        return max(found, key=lambda r: r.updated_at) if found else None

    def save(self, record: TokenRecord) -> None:
        """Atomic, 0600 in a 0700 directory; the record replaces any other for the same server
        (a migrated authorization server leaves no stale tokens behind)."""

        record.updated_at = time.time()
        self._private_dir()
        target = self._path(record.issuer, record.resource)
        files.write_atomic(target, json.dumps(record.to_json(), indent=1, sort_keys=True))
        for other in self.directory.glob("*.json"):
            if other != target and self._server_of(other) == record.server_url:
                other.unlink(missing_ok=True)

    def delete(self, server_url: str) -> int:
        removed = 0
        for path in self.directory.glob("*.json") if self.directory.is_dir() else []:
            if self._server_of(path) == server_url:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    @contextmanager
    def refresh_lock(self, timeout: float) -> Iterator[None]:

        self._private_dir()
        try:
            with file_lock(self.directory / ".refresh.lock", timeout):
                yield
        except LockTimeout:
            raise TimeoutError(f"token refresh lock held for more than {timeout:g}s") from None

    def _private_dir(self) -> None:
        paths.ensure_private_dir(self.directory)
        paths.private_dir_mode(self.directory)

    @staticmethod
    def _server_of(path: Path) -> str | None:
        try:
            server = json.loads(path.read_text(encoding="utf-8")).get("server_url")
            return server if isinstance(server, str) else None
        except (OSError, ValueError, AttributeError, RecursionError):
            return None
