"""Compaction: a tool result over the budget is cut before the model sees it, with a note saying
how to get the rest (the run record keeps it whole)."""

from __future__ import annotations

from typing import Any

from llmc_cli.model import JSONObject, Tool, ToolResult

PAGING_PARAMS = (
    "offset",
    "start",
    "start_line",
    "line",
    "lines",
    "page",
    "cursor",
    "skip",
    "head",
    "tail",
    "limit",
    "range",
    "from",
)


def compact(result: ToolResult, budget: int, tool: Tool | None = None) -> tuple[ToolResult, dict[str, Any] | None]:
    """The result the model sees: text over `budget` characters is cut at a line boundary with a
    note saying how much was left out and how to get the rest. Non-text parts are kept."""
    texts: list[str] = []
    others: list[JSONObject] = []
    for c in result.content:
        if c.get("type") == "text":
            texts.append(str(c.get("text", "")))
        elif c.get("type") == "resource" and isinstance(resource := c.get("resource"), dict) and "text" in resource:
            texts.append(str(resource["text"]))
        else:
            others.append(c)
    text = "\n".join(texts)
    if len(text) <= budget:
        return result, None
    lines = text.splitlines(keepends=True)
    kept, size = 0, 0
    while kept < len(lines) and size + len(lines[kept]) <= budget:
        size += len(lines[kept])
        kept += 1
    shown = "".join(lines[:kept]) if kept else text[:budget]  # one huge line: cut inside it
    left_lines = len(lines) - kept
    note = (
        f"\n[llmc: output cut to {len(shown)} of {len(text)} characters; "
        f"{left_lines} of {len(lines)} lines ({len(text) - len(shown)} characters) left out. "
    )
    paging = [p for p in PAGING_PARAMS if tool and p in tool.properties]
    if paging:
        note += (
            f"To get the rest, call {tool.name if tool else 'the tool'} again with "
            f"{', '.join(paging)} to read from line {kept + 1} on.]"
        )
    else:
        note += "To get the rest, call the tool again for a smaller part (a narrower query, a range or an offset).]"
    cut: JSONObject = {"type": "text", "text": shown.rstrip("\n") + note}
    seen = ToolResult(
        content=[cut, *others],
        structured_content=None,
        is_error=result.is_error,
        meta=result.meta,
        duration_ms=result.duration_ms,
    )
    info = {"characters": len(text), "charactersShown": len(shown), "lines": len(lines), "linesShown": kept}
    return seen, info
