"""Tool arguments from the command line: KEY=VALUE typed by the tool's inputSchema, KEY:=JSON,
or a whole object with --json '{...}' | @file | - (stdin)."""

from __future__ import annotations

import json
import sys
from typing import Any

from llmc_cli.errors import UsageError

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def parse_json_option(value: str) -> dict[str, Any]:
    if value == "-":
        text, where = sys.stdin.read(), "stdin"
    elif value.startswith("@"):
        try:
            with open(value[1:], encoding="utf-8") as fh:
                text, where = fh.read(), value[1:]
        except OSError as exc:
            raise UsageError(f"--json {value}: {exc.strerror}") from None
    else:
        text, where = value, "--json"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{where}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: tool arguments must be a JSON object")
    return data


def needs_schema(pairs: tuple[str, ...]) -> bool:
    """KEY=VALUE pairs are typed by the tool's schema; KEY:=JSON pairs carry their own type."""
    return any(not p.partition("=")[0].endswith(":") for p in pairs)


def parse_pairs(pairs: tuple[str, ...], schema: dict[str, Any] | None) -> dict[str, Any]:
    properties = (schema or {}).get("properties") or {}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"argument {pair!r} is not KEY=VALUE or KEY:=JSON")
        if key.endswith(":"):
            key = key[:-1]
            try:
                out[key] = json.loads(value)
            except ValueError:
                raise UsageError(f"argument {key}: invalid JSON: {value!r}") from None
            continue
        out[key] = coerce(key, value, properties.get(key) or {})
    return out


def coerce(key: str, value: str, prop: dict[str, Any]) -> Any:
    types = prop.get("type")
    if types is None and isinstance(prop.get("anyOf"), list):
        types = [t.get("type") for t in prop["anyOf"] if isinstance(t, dict) and t.get("type")]
    types = [types] if isinstance(types, str) else list(types or [])
    if "null" in types and value == "null":
        return None
    for kind in [t for t in types if t != "null"] or ["string"]:
        try:
            if kind == "integer":
                return int(value)
            if kind == "number":
                number = float(value)
                return int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number
            if kind == "boolean":
                lowered = value.lower()
                if lowered in _TRUE | _FALSE:
                    return lowered in _TRUE
                continue
            if kind in ("object", "array"):
                parsed = json.loads(value)
                if isinstance(parsed, dict if kind == "object" else list):
                    return parsed
                continue
            if kind == "string":
                return value
        except ValueError:
            continue
    raise UsageError(f"argument {key}: {value!r} is not a valid {' or '.join(types)}")
