"""servers.json in the state directory: what connect() found per server (mcp.stores.EraCache).

{ServerSpec.cache_key(): {"era", "version", "transport"?, "url"?, "session"?}}; keys are digests
(a URL's query may hold an expanded ${SECRET})."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from llmc_cli.config import files
from llmc_cli.errors import ConfigError
from llmc_cli.model import JSONObject

_HEX = "0123456789abcdef"


def is_key(key: str) -> bool:
    """re.fullmatch(r"(stdio|remote):[0-9a-f]{32}|builtin:.+", key), without compiling the pattern
    in every command's start-up (~0.12 ms)."""
    kind, _, rest = key.partition(":")
    if kind == "builtin":
        return bool(rest) and "\n" not in rest  # `.` is any character but a newline
    return kind in ("stdio", "remote") and len(rest) == 32 and not rest.strip(_HEX)


class FileEraCache:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, JSONObject]:
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError, RecursionError):  # not there, not JSON, not UTF-8, nested too deep
            return {}
        if not isinstance(data, dict):
            return {}
        # Entries written under keys of another form (older llmc: the URL itself) are dropped.
        return {k: v for k, v in data.items() if is_key(k) and isinstance(v, dict)}

    def save(self, changes: Mapping[str, JSONObject | None]) -> None:
        """Read, change and write under the file's lock (concurrent llmc processes keep each
        other's entries). Best effort: a cache that cannot be written only costs a probe."""

        if all(self.load().get(key) == entry for key, entry in changes.items()):
            return  # the common case: nothing new, no lock taken
        try:
            with files.locked(self.path):
                cache = self.load()
                for key, entry in changes.items():
                    if entry is None:
                        cache.pop(key, None)
                    else:
                        cache[key] = entry
                files.write_atomic(self.path, json.dumps(cache, indent=1, sort_keys=True), durable=False)
        except ConfigError:
            pass
