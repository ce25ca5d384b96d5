"""A plain-text tool listing for models with no native tool calling. It goes into a system
prompt that asks for `<mcp:tool>` blocks (a `name:` line, then a JSON `parameters:` object), so
each tool shows the exact name to write and its parameters in words a small model follows;
parameters too intricate for words are shown as compact JSON Schema."""

from __future__ import annotations

from typing import Any

from llmc_cli.model import Tool, compact_json

from .description import describe
from .findings import Report
from .schema import Schema, inline_refs, prepare

NAMES = "text"
MAX_TOOLS = None
SCALARS = ("string", "number", "integer", "boolean", "null")


def _compact(value: object) -> str:
    return compact_json(value)


def label(schema: object) -> str | None:
    """A short type in words (`string`, `array of integer`, `one of "a", "b"`), or None."""
    if not isinstance(schema, dict) or "properties" in schema:
        return None
    if isinstance(schema.get("enum"), list) and all(not isinstance(v, (dict, list)) for v in schema["enum"]):
        return "one of " + ", ".join(_compact(v) for v in schema["enum"])
    if "const" in schema and not isinstance(schema["const"], (dict, list)):
        return f"always {_compact(schema['const'])}"
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and "type" not in schema:
        words = [label(o) for o in options]
        return None if None in words else " or ".join(w for w in words if w)
    kind = schema.get("type")
    if isinstance(kind, list) and all(k in SCALARS for k in kind):
        return " or ".join(kind)
    if kind in SCALARS:
        return f"{kind} ({schema['format']})" if isinstance(schema.get("format"), str) else kind
    if kind == "array":
        item = label(schema.get("items")) if "items" in schema else "any"
        return f"array of {item}" if item else None
    return None


def parameter_lines(schema: Schema) -> list[str]:
    required = set(schema.get("required") or [])
    lines = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        words = label(prop)
        facts = [words] if words else []
        facts.append("required" if name in required else "optional")
        if "default" in prop:
            facts.append(f"default {_compact(prop['default'])}")
        line = f"- {name} ({', '.join(facts)})"
        if prop.get("description"):
            line += f": {prop['description']}"
        if words is None:
            line += f"\n  schema: {_compact({k: v for k, v in prop.items() if k not in ('description', 'default')})}"
        lines.append(line)
    return lines


def definition(tool: Tool, name: str, report: Report, strict: bool) -> str:
    schema = prepare(tool.input_schema, report, "$.parameters")
    schema = inline_refs(schema, schema, report, "$.parameters")
    lines = parameter_lines(schema)
    description = describe(tool)
    block = [f"## {name}"] + ([description] if description else [])
    return "\n".join(block + (["parameters:", *lines] if lines else ["parameters: none"]))


def document(definitions: list[Any]) -> str:
    return "\n\n".join(definitions)
