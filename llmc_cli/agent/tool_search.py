"""Tool search for the `ask` loop: instead of every tool of a big toolbox, the model first sees
one tool llmc answers itself, `search_tools` {query, limit}; the tools it finds join the model's
tool list from its next turn. Their calls go through the loop's call_tool like any other.

Names stay the same for the whole run (`server_tool`, made legal for the provider), so a tool
the model saw in a search result is called by the name the result gave, whatever joins later.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from llmc_cli.model import Tool, ToolResult
from llmc_cli.services.semantic import search_index
from llmc_cli.translate import translate

if TYPE_CHECKING:
    from llmc_cli.translate import Translation

SEARCH_TOOL = "search_tools"
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
THRESHOLD = 40  # [llm] tool_search unset: on when the model would see more tools than this
LLMC = "llmc"  # the search tool's "server" in records and progress (llmc answers it, no server does)


# Models that run Anthropic's server-side tool search (Claude Opus and Sonnet from 4.5 on).
NATIVE_MODELS = re.compile(r"^claude-(opus|sonnet)-(4-[5-9]|[5-9])(\b|-)")


def native(provider: str, model: str | None) -> bool:
    """Whether the provider searches the tools itself (Anthropic's tool search, defer_loading)."""
    return provider == "anthropic" and bool(model and NATIVE_MODELS.match(model))


def wanted(setting: bool | None, tools: int) -> bool:
    """Whether a run searches: as set (--tool-search, [llm] tool_search), else past THRESHOLD tools."""
    return setting if setting is not None else tools > THRESHOLD


class ToolSearch:
    """The tools one run offers its model: the search tool, then whatever searches found, in the
    provider's format `fmt`."""

    def __init__(self, tools: list[Tool], fmt: str, strict: bool = False, semantic: bool | None = None) -> None:
        self.index = search_index(tools, semantic)  # [search] semantic: fused with the semantic stage
        self.fmt, self.strict = fmt, strict
        self.tool = Tool(
            LLMC,
            SEARCH_TOOL,
            {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": 'What the tool should do, in a few words (e.g. "create a github issue", "read a file").',
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LIMIT,
                        "description": f"How many tools at most (default {DEFAULT_LIMIT}).",
                    },
                },
                "required": ["query"],
            },
            description=(
                f"Find tools for a task among the {len(tools)} tools available. The tools found "
                "are added to your tools from your next turn: call them by the name given here."
            ),
            annotations={"readOnlyHint": True},
        )
        self.found: dict[tuple[str, str], Tool] = {}
        self._lock = threading.Lock()
        self._translation: tuple[int, Translation] | None = None

    def restore(self, called: Iterable[str]) -> None:
        """Offer again the tools a continued conversation called (by the names this run gives
        them), so the model can go on with them without searching anew."""
        by_name = {f"{t.server}_{t.name}": t for t in self.index.tools}
        with self._lock:
            for name in called:
                tool = by_name.get(name)
                if tool is not None:
                    self.found.setdefault((tool.server, tool.name), tool)

    def translation(self) -> Translation:
        """The offered tools translated (again only when a tool joined since). Each asks for a
        name that never changes in the run: `search_tools`, `server_tool` (made legal)."""

        with self._lock:
            if self._translation is None or self._translation[0] != len(self.found):
                offered = [self.tool, *self.found.values()]
                names = {(t.server, t.name): SEARCH_TOOL if t is self.tool else f"{t.server}_{t.name}" for t in offered}
                self._translation = (len(self.found), translate(offered, self.fmt, strict=self.strict, names=names))
            return self._translation[1]

    def answer(self, arguments: Mapping[str, object]) -> ToolResult:
        """A search call: the matches (each with the name to call it by), which join the offered tools."""
        query = arguments.get("query")
        limit = arguments.get("limit", DEFAULT_LIMIT)
        if not isinstance(query, str) or not query.strip():
            return _error("search_tools needs a non-empty string `query`")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            return _error(f"`limit` must be an integer from 1 to {MAX_LIMIT}")
        matches = self.index.search(query, limit)
        with self._lock:
            for m in matches:
                self.found.setdefault((m.tool.server, m.tool.name), m.tool)
        names = self.translation().names
        rows = [
            {
                "name": names.provider_name(m.tool.server, m.tool.name),
                "tool": m.tool.qualified_name,
                "score": round(m.score, 3),
                "description": m.tool.description,
            }
            for m in matches
        ]
        text = json.dumps(
            {"tools": rows, "note": "these tools are yours from your next turn" if rows else "no tool matches: try other words"},
            ensure_ascii=False,
        )
        return ToolResult(content=[{"type": "text", "text": text}], is_error=False)


def _error(text: str) -> ToolResult:
    return ToolResult(content=[{"type": "text", "text": text}], is_error=True)
