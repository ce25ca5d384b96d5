"""OpenAI Chat Completions: `{"type": "function", "function": {name, description, parameters, strict}}`.

`strict` is always sent: Chat treats an omitted one as false, Responses as true."""

from __future__ import annotations

from typing import Any

from llmc_cli.model import Tool

from .description import describe
from .dialects import openai_strict
from .findings import Path, Report
from .schema import Schema, prepare

NAMES = "openai"
MAX_TOOLS = 128


def parameters(tool: Tool, report: Report, strict: bool, path: Path) -> Schema:
    """The JSON Schema passed through, or its strict-mode form when asked and possible
    (`report.strict` says which went out). Shared with the Responses API."""
    schema = prepare(tool.input_schema, report, path)
    if strict:
        converted = openai_strict(schema, report, path)
        if converted is not None:
            report.strict = True
            return converted
    return schema


def definition(tool: Tool, name: str, report: Report, strict: bool) -> dict[str, Any]:
    params = parameters(tool, report, strict, "$.function.parameters")
    return {
        "type": "function",
        "function": {"name": name, "description": describe(tool), "parameters": params, "strict": report.strict},
    }


def document(definitions: list[Any]) -> list[Any]:
    return definitions
