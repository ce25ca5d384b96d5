"""What `llmc tools show` says about one tool: its arguments as a list people can read, the
policy's decision on calling it, and a `llmc call` line to start from."""

from __future__ import annotations

import json
import shlex
from typing import Any

from llmc_cli.model import JSONObject

# A placeholder value per JSON type for the example line: one that `llmc call` parses back into
# that type (KEY:=JSON for objects and arrays).
_PLACEHOLDER = {"integer": 1, "number": 1, "boolean": True, "object": {}, "array": []}


def arguments(schema: JSONObject) -> list[dict[str, Any]]:
    """The top-level properties of an inputSchema, one entry each: name, type, required, and
    default, enum and description when the schema gives them."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    listed = schema.get("required")
    required = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
    rows = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, dict) else {}
        row: dict[str, Any] = {"name": name, "type": type_name(prop), "required": name in required}
        for key in ("default", "enum", "description"):
            if key in prop:
                row[key] = prop[key]
        if "const" in prop and "enum" not in prop:
            row["enum"] = [prop["const"]]
        rows.append(row)
    return rows


def type_name(prop: JSONObject, depth: int = 0) -> str:
    """A JSON Schema's type in a few characters: string, integer|null, array<string>, object."""
    kind = prop.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array" and isinstance(items := prop.get("items"), dict) and depth < 3:
        return f"array<{type_name(items, depth + 1)}>"
    if isinstance(kind, str):
        return kind
    for combinator in ("anyOf", "oneOf"):
        options = prop.get(combinator)
        if isinstance(options, list) and depth < 3:
            return "|".join(dict.fromkeys(type_name(o, depth + 1) for o in options if isinstance(o, dict)))
    if "enum" in prop or "const" in prop:
        values = prop.get("enum") or [prop.get("const")]
        values = values if isinstance(values, list) else [values]
        return "|".join(dict.fromkeys(type(v).__name__.replace("str", "string") for v in values))
    return "any"


def example_call(qualified: str, rows: list[dict[str, Any]]) -> str:
    """`llmc call SERVER.TOOL` with every required argument set to a value of its type."""
    words = ["llmc", "call", qualified]
    for row in rows:
        if not row["required"]:
            continue
        if row.get("enum"):
            value: Any = row["enum"][0]
        elif "default" in row:
            value = row["default"]
        else:
            first = row["type"].split("|")[0].split("<")[0]
            value = _PLACEHOLDER.get(first, row["name"].upper())
        if isinstance(value, str):
            words.append(f"{row['name']}={value}")
        elif isinstance(value, (dict, list)):
            words.append(f"{row['name']}:={json.dumps(value, ensure_ascii=False)}")
        else:  # a number or boolean: `call` types KEY=VALUE by the schema
            words.append(f"{row['name']}={json.dumps(value)}")
    return shlex.join(words)


def readable(info: dict[str, Any]) -> str:
    """`tools show` for people. The caller cleans the text (it comes from a server)."""
    lines = [info["server"] + "." + info["tool"] + (f"  ({info['title']})" if info.get("title") else "")]
    if info.get("description"):
        lines += ["", *(f"  {line}" for line in info["description"].splitlines())]
    lines += ["", "Arguments:", *_field_lines(info["arguments"])]
    if info.get("outputSchema") is not None:
        lines += ["", "Output (structuredContent):", *_field_lines(arguments(info["outputSchema"]))]
    if info["annotations"]:
        lines += ["", "Annotations:", *(f"  {k}: {json.dumps(v, ensure_ascii=False)}" for k, v in info["annotations"].items())]
    hints = ", ".join(k for k, v in info["hints"].items() if v) or "none"
    lines += ["", f"Effective hints: {hints}", "Policy:"]
    for who, decision in info["policy"].items():
        lines.append(f"  {_CALLERS.get(who, who)}: {decision['decision']} ({decision['rule']}: {decision['reason']})")
    lines += ["", "Example:", f"  {info['example']}"]
    return "\n".join(lines)


_CALLERS = {"human": "you (llmc call)", "model": "a model (ask)"}


def _field_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [] if rows else ["  (none)"]
    for row in rows:
        facts = [row["type"], "required" if row["required"] else "optional"]
        if "default" in row:
            facts.append(f"default {json.dumps(row['default'], ensure_ascii=False)}")
        if row.get("enum"):
            facts.append("one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in row["enum"]))
        lines.append(f"  {row['name']} ({'; '.join(facts)})")
        if row.get("description"):
            lines += [f"      {line}" for line in str(row["description"]).splitlines()]
    return lines
