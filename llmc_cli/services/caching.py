"""Cached results ([cache]): which calls may be answered from the cache, under which key, and
the lookup and store call_tool makes (after the policy's decision and the rate limit: a cached
answer is a decided, counted call whose result is not asked of the server again).

A call is cacheable when its tool matches a `[cache] tools` glob AND is read-only and not
destructive by its effective hints (annotations with [policy.hints] on top; unannotated means
not read-only): a listed tool that is not is never cached. The key is a digest of the profile,
the principal (the gateway's authenticated one; none for a local command), the server, the
tool, the hash of the tool's current definition (a drifted tool never meets an old entry) and
the call's keyed hash (policy.call_hash: an HMAC, so no secret argument is in the key). The
profile counts by identity (its resolved path) with the server's table and how the server is
reached now (its ${VAR}s expanded, under an HMAC: another token or host is another server); a `per_session` server's
entries are its host session's own (a local command has none: such servers are not cached).
A result holding a secret value (secret_free) is not stored, and an entry's age is judged at
read time against the TTL configured now (store/results.py)."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from llmc_cli import policy
from llmc_cli.model import JSONObject, ServerSpec, Tool, ToolCall, canonical_json, sha256
from llmc_cli.policy import effective_hints, glob_match

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.config.schema import Profile
    from llmc_cli.config.secrets import Masker
    from llmc_cli.store.results import ResultCache

# Results larger than this (canonical JSON) are never cached.
MAX_RESULT_BYTES = 256 * 1024


def verdict(tool: Tool | None, qualified: str, profile: Profile) -> str | None:
    """What [cache] does with this tool, in words (policy check, tools lint); None when not listed."""

    config = profile.cache
    if not any(glob_match(pattern, qualified) for pattern in config.tools):
        return None
    hints = effective_hints(tool, qualified, profile.policy)
    if not hints["readOnly"] or hints["destructive"]:
        return "listed in [cache] tools but not read-only: never cached"
    return f"cached for {config.ttl_seconds:g} s"


def cacheable(tool: Tool | None, qualified: str, profile: Profile) -> bool:
    return (verdict(tool, qualified, profile) or "").startswith("cached")


def key(
    profile: LoadedProfile,
    principal: str | None,
    tool: Tool,
    call: ToolCall,
    call_hash: str | None,
    *,
    session: str | None = None,
    reach: str | None = None,
) -> str:
    """The entry's key: what makes two answers different. The profile by identity (its resolved
    path, not its name: `-p DIR/default.toml` is not the `default` profile) and the server's
    table in it (another command, URL or env is another server), and `reach`: how the server is
    reached now, its ${VAR}s expanded (reach(): the same table with another token or host is
    another server); the principal; for a server marked `per_session`, the host `session` (its
    state is that session's own); the tool's current definition and the call's keyed hash."""
    from llmc_cli.lockfile import tool_hash

    parts = {
        "profile": profile_identity(profile),
        "serverTable": _server_config(profile, call.server),
        "reach": reach,
        "principal": principal,
        "session": session,
        "server": call.server,
        "tool": call.tool,
        "definition": tool_hash(tool),
        "call": call_hash or policy.call_hash(call),
    }
    return sha256(canonical_json(parts).encode("utf-8")).hexdigest()


def reach(spec: ServerSpec, secret: bytes) -> str:
    """How a server is reached, as the catalog runs it (ServerSpec.reach: ${VAR}s expanded, under
    an HMAC with `secret`, the approval key): an entry's name is a file name anyone may read."""
    return spec.reach(secret)


def profile_identity(profile: LoadedProfile) -> str:
    """A profile file by its resolved path; the built-in default by its name (it has no file)."""
    return f"file:{os.path.realpath(profile.path)}" if profile.path is not None else f"builtin:{profile.name}"


def _server_config(profile: LoadedProfile, server: str) -> str | None:
    table = profile.profile.servers.get(server)
    return canonical_json(dataclasses.asdict(table)) if table is not None and dataclasses.is_dataclass(table) else None


def secret_free(result: JSONObject, masker: Masker) -> bool:
    """Whether a result holds no secret the call's masking knows (the environment's, the
    profile's, the call's secret arguments) and nothing under a secret-looking key: only such a
    result is stored. A masked copy would be a wrong answer from the cache, a clear one a secret
    on disk; such calls go to their server every time instead."""
    return bool(masker(result) == result)


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
