"""The gateway's tool search (`[serve] tool_search = true`): hosts see `llmc.search_tools`,
`llmc.call_tool` and the `[serve] pinned` tools instead of every tool of the profile. A search
ranks the tools the host could call directly (services/search.py over Toolbox.tools(): the
policy's visible ones, less the drifted); `llmc.call_tool {name, arguments}` is answered as a
tools/call of the named tool itself, so policy, confirmation, audit (which names the real
tool) and rate limits are those of a direct call. A principal's toolbox is its own profile's,
so it finds only that profile's tools. Calling a found tool by its own name works too."""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from llmc_cli.mcp.messages import object_at
from llmc_cli.model import JSON, JSONObject
from llmc_cli.services.search import ToolIndex

if TYPE_CHECKING:
    from llmc_cli.gateway.toolbox import Toolbox

SEARCH, CALL = "llmc.search_tools", "llmc.call_tool"
DEFAULT_LIMIT, MAX_LIMIT = 5, 20


def listing(toolbox: Toolbox, clearance: str | None = None) -> list[JSONObject]:
    """tools/list under tool search: the two tools of llmc, then the pinned tools of the profile."""
    tools = toolbox.tools(clearance)
    pinned = [toolbox.describe(t) for t in tools if any(fnmatchcase(t.qualified_name, p) for p in toolbox.serve.pinned)]
    return [
        {
            "name": SEARCH,
            "title": "Search tools",
            "description": f"Find tools for a task among the {len(tools)} tools of this gateway, best first, each "
            f"with its input schema. Run one with {CALL}.",
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
            "name": CALL,
            "title": "Call a tool",
            "description": f"Run a tool {SEARCH} found: its name and its arguments, as its input schema says.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": f"The tool's name, as {SEARCH} gave it."},
                    "arguments": {"type": "object", "description": "The tool's arguments."},
                },
                "required": ["name"],
            },
        },
        *pinned,
    ]


def search(toolbox: Toolbox, arguments: Mapping[str, object], clearance: str | None = None) -> JSONObject:
    """A llmc.search_tools call's result (a tool error for bad arguments)."""
    query, limit = arguments.get("query"), arguments.get("limit", DEFAULT_LIMIT)
    if not isinstance(query, str) or not query.strip():
        return tool_error(f"{SEARCH} needs a non-empty string `query`")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        return tool_error(f"`limit` must be an integer from 1 to {MAX_LIMIT}")
    matches = _index(toolbox, clearance).search(query, limit)
    rows: list[JSON] = [
        {
            "name": toolbox.expose(m.tool.server, m.tool.name),
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


_INDEXES: weakref.WeakKeyDictionary[Toolbox, tuple[tuple[str | int | None, ...], ToolIndex]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _index(toolbox: Toolbox, clearance: str | None = None) -> ToolIndex:
    """The index of the toolbox's tools (of the servers `clearance` covers), built again only when
    its tool list changed (the catalog keeps the same Tool objects until a server's list is fetched anew)."""
    tools = toolbox.tools(clearance)
    key = (clearance, *(id(t) for t in tools))
    with _LOCK:
        cached = _INDEXES.get(toolbox)
        if cached is not None and cached[0] == key:
            return cached[1]
    index = ToolIndex(tools)
    with _LOCK:
        _INDEXES[toolbox] = (key, index)
    return index


def unwrap(params: JSONObject) -> JSONObject | str:
    """A llmc.call_tool request as the tools/call of the tool it names (its _meta, progress token
    and 2026-07-28 round state kept), or what is wrong with it."""
    arguments = object_at(params, "arguments")
    name, inner = arguments.get("name"), arguments.get("arguments", {})
    if not isinstance(name, str) or not name or name in (SEARCH, CALL):
        return f"{CALL} needs `name`: a tool's name as {SEARCH} gave it"
    if not isinstance(inner, dict):
        return "`arguments` must be an object"
    return {**params, "name": name, "arguments": inner}


def tool_error(text: str) -> JSONObject:
    return {"content": [{"type": "text", "text": text}], "isError": True}
