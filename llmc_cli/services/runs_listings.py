"""The tools an `ask` run first offers its model, without starting a server: each server's
listing as an earlier run saw it, cached in the state directory. A server starts when the model
calls one of its tools (its live listing then judges the call: policy, hints, drift), or before
the first model request when no listing of it is cached. So a plain answer, a wrong API key or a
dead provider costs no server start-up.

An entry is one server's tools/list result as the server sent it (the raw definitions, so every
tool's definition hash is the one a live listing gives), keyed by what makes it that server's:
the profile (by identity), the server's table in it (its command, arguments, environment,
sandbox: another table is another server) and llmc's version (the built-in servers' tools). The
entry carries the digest of its tools; an entry that does not match it, or cannot be read, is
no entry. A server whose live listing differs from its entry (an upgraded package) has the entry
rewritten when the run ends; until then the model may call a tool as it was, and the call is
judged against the tool as it is now (a tool that is gone is an error the model reads).

Only a profile's own servers are cached: not an ad-hoc server (--stdio/--url), not the servers
of a session keeper (already running), not one that cannot be configured (an unset ${VAR}: it
fails at once and is reported as unavailable). A cache: failing to read or write it costs a
server start, never a wrong answer."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc_cli import __version__
from llmc_cli.config import files, paths
from llmc_cli.errors import ConfigError
from llmc_cli.model import Tool, canonical_json
from llmc_cli.services.caching import profile_identity

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile

VERSION = 1


def cached(catalog: Catalog, profile: LoadedProfile, servers: list[str]) -> dict[str, list[Tool]]:
    """The cached listings of those of `servers` that have a current entry."""
    found: dict[str, list[Tool]] = {}
    for server in servers:
        key = entry_key(catalog, profile, server)
        raw = _read(key) if key is not None else None
        if raw is not None:
            found[server] = [Tool.from_mcp(server, t) for t in raw]
    return found


def remember(catalog: Catalog, profile: LoadedProfile, seen: dict[str, list[Tool]]) -> list[str]:
    """Write the entries of the servers the catalog listed live in this run whose listing is not
    what `seen` (the cached listings the run began with) holds. Returns the servers written."""
    written = []
    for server, tools in list(catalog.tools.by_server.items()):
        key = entry_key(catalog, profile, server)
        raw = [t.raw for t in tools]
        if key is None or (server in seen and [t.raw for t in seen[server]] == raw):
            continue
        body = {"version": VERSION, "server": server, "tools": raw, "digest": _digest(raw)}
        try:
            files.write_atomic(_dir() / f"{key}.json", json.dumps(body, ensure_ascii=False), durable=False)
        except (ConfigError, OSError, TypeError, ValueError):
            continue
        written.append(server)
    return written


def entry_key(catalog: Catalog, profile: LoadedProfile, server: str) -> str | None:
    """The entry's file name for a server of this catalog, or None when it is not cached."""
    table = profile.profile.servers.get(server)
    if (
        catalog.keeper is not None
        or server in catalog.pool.unusable
        or server not in catalog.specs
        or catalog.specs[server].adhoc
        or table is None
        or not dataclasses.is_dataclass(table)
    ):
        return None
    parts = {
        "profile": profile_identity(profile),
        "server": server,
        "table": dataclasses.asdict(table),
        "llmc": __version__,
    }
    try:
        return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()
    except (TypeError, ValueError):
        return None


def _read(key: str) -> list[dict[str, Any]] | None:
    try:
        body = json.loads((_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(body, dict) or body.get("version") != VERSION:
        return None
    tools = body.get("tools")
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        return None
    return tools if body.get("digest") == _digest(tools) else None


def _digest(tools: list[dict[str, Any]]) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(tools).encode("utf-8")).hexdigest()


def _dir() -> Path:
    return paths.state_dir() / "tool-listings"
