"""MCP itself: the tools exactly as the servers sent them (`Tool.raw`)."""

from __future__ import annotations

from typing import Any

from llmc_cli.model import Tool

from .findings import Report

NAMES = None
MAX_TOOLS = None


def definition(tool: Tool, name: str, report: Report, strict: bool) -> dict[str, Any]:
    return tool.raw


def document(definitions: list[Any]) -> list[Any]:
    return definitions
