"""google-genai: one `{"function_declarations": [...]}` Tool dict, each declaration with
`parameters_json_schema` (JSON Schema the service reads, cleaned of what it rejects)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmc_cli.model import Tool

from .description import describe
from .dialects import gemini_json
from .findings import Report
from .schema import prepare

NAMES = "gemini"
MAX_TOOLS = 128


def definition(tool: Tool, name: str, report: Report, strict: bool) -> dict[str, Any]:
    path = "$.parameters_json_schema"
    return {
        "name": name,
        "description": describe(tool),
        "parameters_json_schema": gemini_json(prepare(tool.input_schema, report, path), report, path),
    }


def document(definitions: Sequence[object]) -> list[Any]:
    return [{"function_declarations": definitions}]  # a `tools` list as the API takes it
