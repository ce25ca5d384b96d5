"""Tool arguments checked against the tool's inputSchema before anything is sent. `llmc call`
runs this in its own process, or asks the session keeper that holds the server to run it
(keeper/transport.py validate_in_keeper): jsonschema is slow to import, which a call
through a keeper should not pay every time."""

from __future__ import annotations

import json
from typing import Any

from llmc_cli.errors import UsageError, did_you_mean


def validate_arguments(arguments: dict[str, Any], schema: Any, tool: str) -> None:
    """Check arguments against the tool's inputSchema before anything is sent: UsageError (exit 2)
    naming the argument and what was expected. A name the schema does not declare is refused when
    the schema forbids extra names, or when it is close to a declared one (a typo is far likelier
    than a deliberate undeclared argument). A schema that is itself broken, or refers to other
    documents, is the server's business: the call goes ahead unchecked.

    A null given for an optional property counts as leaving it out (it is still sent as given):
    models in strict mode send null for every optional property, and the spec asks clients to
    treat a null x-mcp-header value as absent, so servers commonly read null as "not provided"."""
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
    import jsonschema
    from jsonschema.exceptions import best_match

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
