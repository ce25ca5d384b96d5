"""The gateway's tool search (`[serve] tool_search = true`): hosts see `llmc.search_tools`,
`llmc.call_tool` and the `[serve] pinned` tools instead of every tool of the profile. A search
ranks the tools the host could call directly (services/search.py over Listings.tools(): the
policy's visible ones, less the drifted); `llmc.call_tool {name, arguments}` is answered as a
tools/call of the named tool itself, so policy, confirmation, audit (which names the real
tool) and rate limits are those of a direct call. A principal's toolbox is its own profile's,
so it finds only that profile's tools. Calling a found tool by its own name works too."""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from llmc_cli.errors import ConfigError
from llmc_cli.mcp.messages import object_at
from llmc_cli.model import JSON, JSONObject, Tool
from llmc_cli.services.search import ToolIndex
from llmc_cli.services.semantic import SemanticIndex, search_index

if TYPE_CHECKING:
    from llmc_cli.gateway.toolbox import Toolbox

SEARCH, CALL = "llmc.search_tools", "llmc.call_tool"
DEFAULT_LIMIT, MAX_LIMIT = 5, 20


def meta(toolbox: Toolbox, name: str) -> str | None:
    """SEARCH or CALL for a name of one of them, in the dotted spelling or the toolbox's
    (`[serve] name_separator`); None for any other name."""
    for tool in (SEARCH, CALL):
        if name in (tool, toolbox.routes.names.meta(tool.partition(".")[2])):
            return tool
    return None


def pinned(toolbox: Toolbox, tool: Tool) -> bool:
    """Whether a `[serve] pinned` glob names the tool, in the dotted spelling or as hosts see it."""
    names = {tool.qualified_name, toolbox.routes.tool_name(tool)}
    return any(fnmatchcase(name, pattern) for pattern in toolbox.serve.pinned for name in names)


def listing(toolbox: Toolbox, clearance: str | None = None) -> list[JSONObject]:
    """tools/list under tool search: the two tools of llmc, then the pinned tools of the profile
    (of the servers `clearance` covers)."""
    tools = toolbox.listing.tools(clearance)
    search_name, call_name = toolbox.routes.names.meta("search_tools"), toolbox.routes.names.meta("call_tool")
    return [
        {
            "name": search_name,
            "title": "Search tools",
            "description": f"Find tools for a task among the {len(tools)} tools of this gateway, best first, each "
            f"with its input schema. Run one with {call_name}.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do, in a few words."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LIMIT,
                        "description": f"How many tools at most (default {DEFAULT_LIMIT}).",
                    },
                },
                "required": ["query"],
            },
            "annotations": {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False},
        },
        {
            "name": call_name,
            "title": "Call a tool",
            "description": f"Run a tool {search_name} found: its name and its arguments, as its input schema says.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": f"The tool's name, as {search_name} gave it."},
                    "arguments": {"type": "object", "description": "The tool's arguments."},
                },
                "required": ["name"],
            },
        },
        *(toolbox.listing.describe(t) for t in tools if pinned(toolbox, t)),
    ]


def search(toolbox: Toolbox, arguments: Mapping[str, object], clearance: str | None = None) -> JSONObject:
    """A llmc.search_tools call's result (a tool error for bad arguments)."""
    query, limit = arguments.get("query"), arguments.get("limit", DEFAULT_LIMIT)
    if not isinstance(query, str) or not query.strip():
        return tool_error(f"{toolbox.routes.names.meta('search_tools')} needs a non-empty string `query`")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        return tool_error(f"`limit` must be an integer from 1 to {MAX_LIMIT}")
    try:
        matches = _index(toolbox, clearance).search(query, limit)
    except ConfigError as e:  # [search] semantic = true without the extra (`llmc serve` refuses it at start)
        return tool_error(e.message)
    rows: list[JSON] = [
        {
            "name": toolbox.routes.tool_name(m.tool),
            "score": round(m.score, 3),
            "description": m.tool.description,
            "inputSchema": m.tool.input_schema,
        }
        for m in matches
    ]
    return {
        "content": [{"type": "text", "text": json.dumps({"tools": rows}, ensure_ascii=False)}],
        "structuredContent": {"tools": rows},
    }


_INDEXES: weakref.WeakKeyDictionary[Toolbox, tuple[tuple[str | int | None, ...], ToolIndex | SemanticIndex]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def _index(toolbox: Toolbox, clearance: str | None = None) -> ToolIndex | SemanticIndex:
    """The index of the toolbox's tools (of the servers `clearance` covers), built again only when
    its tool list changed (the catalog keeps the same Tool objects until a server's list is fetched
    anew); fused with the semantic stage as the toolbox's profile says ([search] semantic)."""
    tools = toolbox.listing.tools(clearance)
    key = (clearance, *(id(t) for t in tools))
    with _LOCK:
        cached = _INDEXES.get(toolbox)
        if cached is not None and cached[0] == key:
            return cached[1]
    index = search_index(tools, toolbox.profile.profile.search.semantic)
    with _LOCK:
        _INDEXES[toolbox] = (key, index)
    return index


@dataclass(frozen=True)
class Call:
    """A llmc.call_tool request as the tools/call of the tool it names."""

    params: JSONObject


def answer(toolbox: Toolbox, name: str, params: JSONObject, clearance: str | None = None) -> JSONObject | Call | None:
    """A tools/call of one of llmc's own tools (either spelling): llmc.search_tools' result, or
    llmc.call_tool's named call (a tool error when it names none); None for any other tool."""
    own = meta(toolbox, name)
    if own == SEARCH:
        return search(toolbox, object_at(params, "arguments"), clearance)
    if own != CALL:
        return None
    unwrapped = unwrap(toolbox, params)
    return tool_error(unwrapped) if isinstance(unwrapped, str) else Call(unwrapped)


def unwrap(toolbox: Toolbox, params: JSONObject) -> JSONObject | str:
    """A llmc.call_tool request as the tools/call of the tool it names (its _meta, progress token
    and 2026-07-28 round state kept), or what is wrong with it."""
    arguments = object_at(params, "arguments")
    name, inner = arguments.get("name"), arguments.get("arguments", {})
    if not isinstance(name, str) or not name or meta(toolbox, name) is not None:
        return f"{toolbox.routes.names.meta('call_tool')} needs `name`: a tool's name as {toolbox.routes.names.meta('search_tools')} gave it"
    if not isinstance(inner, dict):
        return "`arguments` must be an object"
    return {**params, "name": name, "arguments": inner}


def tool_error(text: str) -> JSONObject:
    return {"content": [{"type": "text", "text": text}], "isError": True}
