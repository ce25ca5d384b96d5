"""Tool arguments from the command line: KEY=VALUE typed by the tool's inputSchema, KEY:=JSON,
or a whole object with --json '{...}' | @file | - (stdin)."""

from __future__ import annotations

import json
import sys
from typing import Any

from llmc_cli.errors import UsageError, did_you_mean
from llmc_cli.model import parse_json

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


def load_json(text: str, where: str) -> Any:
    """Parse JSON a person supplied: UsageError for invalid or too deeply nested JSON."""
    try:
        return parse_json(text)
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None


def parse_json_option(value: str) -> dict[str, Any]:
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


def parse_pairs(pairs: tuple[str, ...], schema: dict[str, Any] | None) -> dict[str, Any]:
    properties = (schema or {}).get("properties") or {}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"argument {pair!r} is not KEY=VALUE or KEY:=JSON")
        if key.endswith(":"):
            key = key[:-1]
            out[key] = load_json(value, f"argument {key}")
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
                parsed = load_json(value, f"argument {key}")
                if isinstance(parsed, dict if kind == "object" else list):
                    return parsed
                continue
            if kind == "string":
                return value
        except (ValueError, UsageError):
            continue
    raise UsageError(f"argument {key}: {value!r} is not a valid {' or '.join(types)}")


def validate_arguments(arguments: dict[str, Any], schema: Any, tool: str) -> None:
    """Check arguments against the tool's inputSchema before anything is sent: UsageError (exit 2)
    naming the argument and what was expected. A name the schema does not declare is refused when
    the schema forbids extra names, or when it is close to a declared one (a typo is far likelier
    than a deliberate undeclared argument). A schema that is itself broken, or refers to other
    documents, is the server's business: the call goes ahead unchecked.

    A null given for an optional property counts as leaving it out (it is still sent as given):
    models in strict mode send null for every optional property, and the spec asks clients to
    treat a null x-mcp-header value as absent, so servers commonly read null as "not provided"."""
    import jsonschema
    from jsonschema.exceptions import best_match

    if not isinstance(schema, dict):
        return
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    for key in arguments:
        if properties and key not in properties:
            hint = did_you_mean(key, properties)
            if hint or schema.get("additionalProperties") is False:
                raise UsageError(f"{tool}: unknown argument {key!r}{hint or ' (arguments: ' + ', '.join(properties) + ')'}")
    declared = schema.get("required")
    required: list[Any] = declared if isinstance(declared, list) else []
    checked = {k: v for k, v in arguments.items() if v is not None or k in required}
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        error = best_match(cls(schema).iter_errors(checked))
    except Exception:  # noqa: BLE001 - an unusable schema (invalid, unresolvable $ref) is not the user's error
        return
    if error is None:
        return
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = next((name for name in error.validator_value if name not in (error.instance or {})), "?")
        where = f"{where}.{missing}" if where else missing
        raise UsageError(f"{tool}: missing required argument {where!r}")
    expected = _expected(error)
    raise UsageError(f"{tool}: argument {where or '(all)'}: {expected}")


def _expected(error: Any) -> str:
    """What the schema wanted, in a few words ('expected integer, got \"x\"')."""
    got = json.dumps(error.instance, ensure_ascii=False)
    got = got if len(got) <= 60 else got[:57] + "..."
    if error.validator == "type":
        wanted = error.validator_value
        wanted = " or ".join(wanted) if isinstance(wanted, list) else wanted
        return f"expected {wanted}, got {got}"
    if error.validator == "enum":
        return f"expected one of {', '.join(json.dumps(v) for v in error.validator_value)}, got {got}"
    message = str(error.message)
    return message if len(message) <= 200 else message[:197] + "..."
