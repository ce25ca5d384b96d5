"""Tool arguments from the command line: KEY=VALUE typed by the tool's inputSchema, KEY:=JSON,
or a whole object with --json '{...}' | @file | - (stdin). The pipeline checks them against that
schema (services/pipeline.py, its validate stage)."""

from __future__ import annotations

import sys

from llmc_cli.errors import UsageError
from llmc_cli.model import JSON, MAX_ARGUMENT_DEPTH, JSONObject, parse_json

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def read_input(source: str, what: str) -> str:
    """The text of `-` (stdin) or a file, which must be UTF-8: UsageError (exit 2) otherwise.
    Read as bytes and decoded strictly, so no undecodable byte travels on as a lone surrogate."""
    where = "stdin" if source == "-" else source
    try:
        if source == "-":
            data = sys.stdin.buffer.read() if sys.stdin is not None else b""
        else:
            with open(source, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        raise UsageError(f"{what}: {where}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UsageError(f"{what}: {where} is not UTF-8 text (line {line}, byte {exc.start + 1})") from None


def load_json(text: str, where: str, max_depth: int = MAX_ARGUMENT_DEPTH) -> JSON:
    """Parse JSON a person supplied: UsageError for invalid or too deeply nested JSON."""
    try:
        return parse_json(text, max_depth)
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None


def parse_json_option(value: str) -> JSONObject:
    """--json '{...}' | @FILE | - (stdin): one JSON object, the tool's arguments."""
    if value == "-" or value.startswith("@"):
        where = "stdin" if value == "-" else value[1:]
        text = read_input(value if value == "-" else value[1:], "--json")
    else:
        where, text = "--json", value
    data = load_json(text, where)
    if not isinstance(data, dict):
        raise UsageError(f"{where}: tool arguments must be a JSON object")
    return data


def needs_schema(pairs: tuple[str, ...]) -> bool:
    """KEY=VALUE pairs are typed by the tool's schema; KEY:=JSON pairs carry their own type."""
    return any(not p.partition("=")[0].endswith(":") for p in pairs)


def parse_pairs(pairs: tuple[str, ...], schema: JSONObject | None) -> JSONObject:
    properties = (schema or {}).get("properties")
    properties = properties if isinstance(properties, dict) else {}
    out: JSONObject = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"argument {pair!r} is not KEY=VALUE or KEY:=JSON")
        if key.endswith(":"):
            key = key[:-1]
            out[key] = load_json(value, f"argument {key}")
            continue
        prop = properties.get(key)
        out[key] = coerce(key, value, prop if isinstance(prop, dict) else {})
    return out


def coerce(key: str, value: str, prop: JSONObject) -> JSON:
    declared = prop.get("type")
    if declared is None and isinstance(options := prop.get("anyOf"), list):
        declared = [t.get("type") for t in options if isinstance(t, dict) and t.get("type")]
    types = [declared] if isinstance(declared, str) else [str(t) for t in declared] if isinstance(declared, list) else []
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
                parsed = load_json(value, f"argument {key}")
                if isinstance(parsed, dict if kind == "object" else list):
                    return parsed
                continue
            if kind == "string":
                return value
        except (ValueError, UsageError):
            continue
    raise UsageError(f"argument {key}: {value!r} is not a valid {' or '.join(types)}")
