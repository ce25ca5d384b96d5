"""Anthropic Messages API: `{name, description, input_schema}`; the schema passes through (Claude
reads JSON Schema as MCP servers write it), with an object root."""

from __future__ import annotations

from typing import Any

from llmc_cli.model import Tool

from .description import describe
from .findings import Report
from .schema import prepare

NAMES = "anthropic"
MAX_TOOLS = None  # no documented per-request limit


def definition(tool: Tool, name: str, report: Report, strict: bool) -> dict[str, Any]:
    return {"name": name, "description": describe(tool), "input_schema": prepare(tool.input_schema, report, "$.input_schema")}


def document(definitions: list[Any]) -> list[Any]:
    return definitions


# Anthropic's server-side tool search (BM25 variant; the advanced-tool-use-2025-11-20 beta): the
# model searches the tools that have defer_loading and sees only those it found.
TOOL_SEARCH = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}


def deferred(definitions: list[Any]) -> list[Any]:
    """The definitions for the server-side tool search: its tool, then each with defer_loading."""
    return [dict(TOOL_SEARCH), *({**d, "defer_loading": True} for d in definitions)]
