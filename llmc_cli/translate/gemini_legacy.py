"""Older Gemini/Vertex SDKs: function declarations whose `parameters` use the OpenAPI subset
(type, format, description, nullable, enum of strings, items, properties, required, min/maxItems)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmc_cli.model import Tool

from .description import describe
from .dialects import openapi_subset
from .findings import Report
from .schema import prepare

NAMES = "gemini-legacy"
MAX_TOOLS = 128


def definition(tool: Tool, name: str, report: Report, strict: bool) -> dict[str, Any]:
    path = "$.parameters"
    return {
        "name": name,
        "description": describe(tool),
        "parameters": openapi_subset(prepare(tool.input_schema, report, path), report, path),
    }


def document(definitions: Sequence[object]) -> list[Any]:
    return [{"function_declarations": definitions}]
