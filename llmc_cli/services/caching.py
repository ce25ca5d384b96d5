"""Cached results ([cache]): which calls may be answered from the cache, under which key, and
the lookup and store call_tool makes (after the policy's decision and the rate limit: a cached
answer is a decided, counted call whose result is not asked of the server again).

A call is cacheable when its tool matches a `[cache] tools` glob AND is read-only and not
destructive by its effective hints (annotations with [policy.hints] on top; unannotated means
not read-only): a listed tool that is not is never cached. The key is a digest of the profile,
the principal (the gateway's authenticated one; none for a local command), the server, the
tool, the hash of the tool's current definition (a drifted tool never meets an old entry) and
the call's keyed hash (policy.call_hash: an HMAC, so no secret argument is in the key)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from llmc_cli.model import Tool, ToolCall, canonical_json

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.config.schema import Profile
    from llmc_cli.store.results import ResultCache

# Results larger than this (canonical JSON) are never cached.
MAX_RESULT_BYTES = 256 * 1024


def verdict(tool: Tool | None, qualified: str, profile: Profile) -> str | None:
    """What [cache] does with this tool, in words (policy check, tools lint); None when not listed."""
    from llmc_cli.policy import effective_hints, glob_match

    config = profile.cache
    if not any(glob_match(pattern, qualified) for pattern in config.tools):
        return None
    hints = effective_hints(tool, qualified, profile.policy)
    if not hints["readOnly"] or hints["destructive"]:
        return "listed in [cache] tools but not read-only: never cached"
    return f"cached for {config.ttl_seconds:g} s"


def cacheable(tool: Tool | None, qualified: str, profile: Profile) -> bool:
    return (verdict(tool, qualified, profile) or "").startswith("cached")


def key(profile: LoadedProfile, principal: str | None, tool: Tool, call: ToolCall, call_hash: str | None) -> str:
    from llmc_cli import policy
    from llmc_cli.lockfile import tool_hash

    parts = {
        "profile": profile.name,
        "principal": principal,
        "server": call.server,
        "tool": call.tool,
        "definition": tool_hash(tool),
        "call": call_hash or policy.call_hash(call),
    }
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()


def forget_changed(catalog: Catalog, cache: ResultCache, server: str) -> None:
    """Drop a server's entries once it announced notifications/tools/list_changed."""
    root = catalog.root()
    if server in root.tools_changed:
        root.tools_changed.discard(server)
        dropped = cache.clear(server)
        say = root.say or catalog.say
        if dropped and say is not None:
            say(f"llmc: cache: dropped {dropped} cached result(s) of {server}: it announced notifications/tools/list_changed")


def storable(raw: dict[str, Any], body: bytes) -> bool:
    """Only a successful result within the size bound is kept."""
    return not raw.get("isError") and len(body) <= MAX_RESULT_BYTES
