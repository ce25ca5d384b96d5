"""Tool names to servers for the commands a person types (call, call --batch, tools show, policy
approve): SERVER.TOOL starts no server; a bare name asks only the servers that the tool names
earlier listings left behind name as its owners (or know nothing about). Those names are a cache
in the state directory, one list of SERVER.TOOL per profile, that shell completion reads too.
A cache: a missing, unreadable or stale one costs a listing, never a wrong answer."""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc_cli.catalog import routing
from llmc_cli.config import files, paths
from llmc_cli.errors import ConfigError, UsageError, did_you_mean

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog


class ToolResolver:
    """One command's resolution of tool names against its catalog: the cache is read once, on
    the first bare name that needs it, and what had to be listed is written back for the next
    command. `profile`: the profile as the command was given it (-p NAME or PATH, or None)."""

    def __init__(self, catalog: Catalog, profile: str | None, disabled: Collection[str] = ()) -> None:
        self.catalog = catalog
        self.profile = profile
        self.disabled = disabled  # the profile's disabled servers (a SERVER.TOOL naming one says so)
        self._key: str | None = None
        self._known: dict[str, list[str]] | None = None

    def __call__(self, name: str) -> tuple[str, str]:

        catalog = self.catalog
        if len(catalog.specs) == 1 or routing.qualified(name, catalog.specs):
            return routing.resolve_tool(catalog, name)  # nothing to look up (one server, or SERVER.TOOL)
        if self._key is None or self._known is None:
            self._key = profile_key(self.profile)
            self._known = known_tools(self._key)
        if "." in name and catalog.keeper is None:
            self._no_such_server(name, self._known)
        before = set(catalog.tools.by_server)
        resolved = routing.resolve_tool(catalog, name, self._known)
        fresh = {s: names for s, names in catalog.tools.names().items() if s not in before}
        if fresh:
            remember_tools(self._key, [f"{s}.{n}" for s, names in fresh.items() for n in names], list(fresh))
            self._known.update(fresh)
        return resolved

    def _no_such_server(self, name: str, known: dict[str, list[str]]) -> None:
        """SERVER.TOOL whose SERVER is no server here, found before any server starts: a
        disabled server says so and how to enable it; one close to a server's name is a usage
        error with did-you-mean; and so is any other once the tool-name cache knows every
        server's tools and none has that name (tool names may hold dots: the cache is asked
        first, and servers start only when it cannot answer)."""
        server = name.partition(".")[0]
        if any(name in tools for tools in known.values()):
            return  # a bare tool name with a dot, as the cache knows it
        if server in self.disabled:
            raise UsageError(
                f"server {server} is disabled in this profile: enable it (llmc servers enable {server}) "
                f"or name it for one command (-s {server})"
            )
        specs = self.catalog.specs
        answered = all(s in known for s in specs)  # the cache knows every server's tools
        # Without the cache's answer, only a near miss (`everythin`) is taken for a typo at once.
        close = did_you_mean(server, specs) if answered or did_you_mean(server, specs, cutoff=0.8) else ""
        if close or answered:
            tools = [f"{s}.{t}" for s, names in known.items() if s in specs for t in names]
            hint = did_you_mean(name, tools) if close else ""
            raise UsageError(routing.missing_tool_message(self.catalog, server, f"no server has a tool named {name!r}{hint}"))


def remember_tools(key: str, qualified_names: list[str], servers: list[str]) -> None:
    """Record the tool names just listed from `servers` of a profile (other servers' names stay).
    A cache: failures to write it are ignored."""
    cache = read_cache()
    kept = [n for n in cache.get(key, []) if isinstance(n, str) and n.split(".", 1)[0] not in servers]
    cache[key] = sorted(set(kept) | set(qualified_names))
    try:
        files.write_atomic(_cache_path(), json.dumps(cache), durable=False)
    except ConfigError:
        pass


def known_tools(key: str) -> dict[str, list[str]]:
    """The cached tool names of a profile, per server (servers never listed are absent)."""
    known: dict[str, list[str]] = {}
    for qualified in read_cache().get(key, []):
        if isinstance(qualified, str) and "." in qualified:
            server, _, tool = qualified.partition(".")
            known.setdefault(server, []).append(tool)
    return known


def cached_names(key: str) -> list[str]:
    """The cached SERVER.TOOL names of a profile, as stored (for shell completion)."""
    names = read_cache().get(key, [])
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def profile_key(name_or_path: str | None) -> str:
    """The cache key of a profile: its file, or the built-in default."""
    path = profile_file(name_or_path)
    return str(path.resolve()) if path.exists() else "builtin:default"


def profile_file(name_or_path: str | None) -> Path:
    """The file a profile given as -p NAME or PATH (or LLMC_PROFILE, or none) would be read from."""
    name = name_or_path or os.environ.get("LLMC_PROFILE") or "default"
    if "/" in name or name.endswith(".toml"):
        return Path(name).expanduser()
    return paths.profiles_dir() / f"{name}.toml"


def read_cache() -> dict[str, Any]:
    try:
        data = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _cache_path() -> Path:
    return paths.state_dir() / "completion-tools.json"
