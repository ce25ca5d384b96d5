"""OpenAI Responses API: flat `{"type": "function", name, description, parameters, strict}`;
`parameters` and `strict` must be present (an omitted `strict` means true there)."""

from __future__ import annotations

from typing import Any

from llmc_cli.model import Tool

from .description import describe
from .findings import Report
from .openai import parameters

NAMES = "openai"
MAX_TOOLS = 128


def definition(tool: Tool, name: str, report: Report, strict: bool) -> dict[str, Any]:
    params = parameters(tool, report, strict, "$.parameters")
    return {"type": "function", "name": name, "description": describe(tool), "parameters": params, "strict": report.strict}


def document(definitions: list[Any]) -> list[Any]:
    return definitions
