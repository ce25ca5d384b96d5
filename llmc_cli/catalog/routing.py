"""Tool names to servers: SERVER.TOOL, or a bare name when exactly one server has that tool,
and the errors that say which server or tool is missing and how to go on."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from llmc_cli.errors import UsageError, did_you_mean
from llmc_cli.model import Tool

if TYPE_CHECKING:
    from llmc_cli.catalog.shared import Catalog


def qualified(name: str, servers: Collection[str]) -> tuple[str, str] | None:
    """'server.tool' -> (server, tool) when `server` is one of `servers`; otherwise None."""
    server, dot, tool = name.partition(".")
    return (server, tool) if dot and server in servers else None


def resolve_tool(catalog: Catalog, name: str, known: Mapping[str, Collection[str]] | None = None) -> tuple[str, str]:
    """'server.tool' -> (server, tool), starting no server; a bare name when exactly one
    server has that tool. `known`: tool names per server from an earlier listing (a cache
    handed in from above). Only the servers the cache names as owners, or knows nothing
    about, are asked; all of them only when those do not have the tool (a stale cache)."""
    specs = catalog.specs
    named = qualified(name, specs)
    if named is not None:
        return named
    if len(specs) == 1:
        return next(iter(specs)), name
    known = known or {}
    candidates = [s for s in specs if s not in known or name in known[s]]
    tools, failures = catalog.list_tools(candidates) if candidates else ([], [])
    owners = [t.server for t in tools if t.name == name]
    if not owners and len(candidates) < len(specs):
        tools, failures = catalog.list_tools()
        owners = [t.server for t in tools if t.name == name]
    if len(owners) == 1:
        return owners[0], name
    if not owners:
        unreachable = f" ({len(failures)} server(s) unreachable)" if failures else ""
        hint = did_you_mean(name, {t.name for t in tools} | {t.qualified_name for t in tools})
        server, dot, _ = name.partition(".")
        if dot and server not in specs and (catalog.keeper is not None or not hint):  # a server not here
            raise UsageError(missing_tool_message(catalog, server, f"no server has a tool named {name!r}{unreachable}"))
        raise UsageError(f"no server has a tool named {name!r}{unreachable}{hint}")
    raise UsageError(f"tool name {name!r} is ambiguous: " + ", ".join(f"{s}.{name}" for s in owners))


def find_tool(catalog: Catalog, server: str, tool: str) -> Tool | None:
    return catalog.tools.find(server, tool, catalog.root().session)


def require_tool(catalog: Catalog, server: str, tool: str) -> Tool:
    """The tool, or a UsageError naming the server and the closest names it has; for a
    SERVER.TOOL whose SERVER is not here (the one server of a session or an ad-hoc target
    was asked for a dotted name), that SERVER is what is missing, and the error says so."""
    found = find_tool(catalog, server, tool)
    if found is None:
        hint = did_you_mean(tool, [t.name for t in catalog.tools_of(server)])
        named, dot, _ = tool.partition(".")
        if dot and named not in catalog.specs and (catalog.keeper is not None or not hint):
            raise UsageError(missing_tool_message(catalog, named, f"server {server} has no tool named {tool!r}"))
        raise UsageError(f"server {server} has no tool named {tool!r}{hint}")
    return found


def missing_tool_message(catalog: Catalog, name: str, missing: str) -> str:
    """`missing` (no such tool), said of a SERVER.TOOL whose SERVER this catalog does not
    hold: that the server is not here, and how to go on."""
    held = ", ".join(catalog.specs) or "none"
    hint = did_you_mean(name, catalog.specs)
    if catalog.keeper is not None:
        session = catalog.keeper[1]
        return (
            f"session {session} (in use) does not hold server {name!r}{hint} (it holds: {held}): "
            f"start a session that does (llmc session start NAME -s {name}) or leave this one "
            "(unset LLMC_SESSION, or no --session)"
        )
    return f"{missing}, and there is no server {name!r}{hint} (servers: {held})"
