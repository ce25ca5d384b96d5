"""The vocabulary of the output contract (cli/output_schemas.py): JSON Schema building blocks, the
shared definitions written to common.schema.json, and the shapes every listing and document takes.
Like output_schemas, imported only by the schema generator and the tests."""

from __future__ import annotations

from typing import Any

from llmc_cli.errors import ExitCode, LlmcError

Schema = dict[str, Any]

DRAFT = "https://json-schema.org/draft/2020-12/schema"
STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
NUM: Schema = {"type": "number"}
BOOL: Schema = {"type": "boolean"}
ANY: Schema = {}
OPEN: Schema = {"type": "object"}  # an object whose keys are not ours (arguments, server info)
STRS: Schema = {"type": "array", "items": STR}
# Top-level keys of an open object that is still ours (audit records): camelCase (or MCP's _meta).
CAMEL_KEYS: Schema = {"pattern": "^(_meta|[a-z][A-Za-z0-9]*)$"}


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None, *, closed: bool = True) -> Schema:
    """An object with these fields (always written) and these (sometimes written)."""
    out: Schema = {"type": "object", "properties": {**required, **(optional or {})}, "required": list(required)}
    if closed:
        out["additionalProperties"] = False
    return out


def null(schema: Schema) -> Schema:
    """The schema, or null."""
    if set(schema) == {"type"} and isinstance(schema["type"], str):
        return {"type": [schema["type"], "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def enum(*values: object) -> Schema:
    return {"enum": list(values)}


def common(name: str) -> Schema:
    return {"$ref": f"common.schema.json#/$defs/{name}"}


def local(name: str) -> Schema:
    return {"$ref": f"#/$defs/{name}"}


# -- shared definitions (common.schema.json) -----------------------------------------------------


def _kinds() -> list[str]:
    """Every error kind an output can carry: the `kind` of each class of the exception tree."""
    found, todo = set(), [LlmcError]
    while todo:
        cls = todo.pop()
        found.add(cls.kind)
        todo.extend(cls.__subclasses__())
    return sorted(found)


# LlmcError.to_json: the kind, the message, the exit code, and details some errors carry.
ERROR_DETAILS: dict[str, Schema] = {
    "stderr": STRS,  # the last lines a stdio server wrote before it failed
    "status": INT,  # HTTP status
    "code": INT,
    "data": ANY,  # JSON-RPC error
    "requests": ANY,  # InputRequired: what the server asked for
    "provider": STR,
    "reason": STR,  # ProviderError: auth, rate_limit, overloaded, ...
    "rule": STR,
    "callHash": STR,
    "retryAfter": NUM,  # PolicyDenied
    "limit": INT,  # a message over the size limit
    "oauthError": STR,
}


def error(**subject: Schema) -> Schema:
    """An error, with the fields saying what it is about (`server`, `session`) when it is one of many."""
    return obj(
        {**subject, "error": enum(*_kinds()), "message": STR, "exitCode": enum(*sorted({int(c) for c in ExitCode if c}))},
        ERROR_DETAILS,
    )


HINTS = obj({"readOnly": BOOL, "destructive": BOOL, "idempotent": BOOL, "openWorld": BOOL})
DECISION_FIELDS = {"decision": enum("allow", "deny", "confirm"), "rule": STR, "reason": STR}
CALL_RESULT = {"content": array(common("content")), "isError": BOOL}
CALL_RESULT_OPTIONAL = {"structuredContent": ANY, "_meta": OPEN}

COMMON: Schema = {
    "$schema": DRAFT,
    "title": "Definitions shared by llmc's output schemas",
    "$defs": {
        "error": error(),
        "serverError": error(server=STR),
        "sessionError": error(session=STR),
        "profileError": error(profile=STR, path=STR),
        "warnings": {**STRS, "description": "notices for scripts that do not read stderr (a restarted server)"},
        "content": obj({"type": STR}, closed=False),  # an MCP content block, as the server sent it
        "tool": obj({"name": STR, "inputSchema": OPEN}, closed=False),  # an MCP tool, as the server sent it
        "hints": HINTS,
        "translation": {
            "description": "tools translated for a provider's API (its own format and field names)",
            "anyOf": [array(OPEN), obj({"text": STR})],
        },
    },
}


def listing(key: str, row: Schema, title: str, error_def: str = "serverError") -> Schema:
    """The one envelope of listings (output.emit_listing): {KEY: [rows], "errors": [...]}; in JSON
    Lines one line per row, then one per error."""
    return {
        "title": title,
        **obj({key: array(local("row")), "errors": array(common(error_def))}),
        "$defs": {"row": row, "line": {"anyOf": [local("row"), common(error_def)]}},
    }


def translated(envelope: Schema) -> Schema:
    """A listing that a provider's --format replaces with the translated tools: either document."""
    defs = envelope.pop("$defs")
    title = envelope.pop("title")
    return {"title": title, "anyOf": [local("listing"), common("translation")], "$defs": {**defs, "listing": envelope}}


def document(schema: Schema, title: str, line: Schema | None = None, **defs: Schema) -> Schema:
    """A command that prints one JSON document (and, with --format jsonl, `line` per line)."""
    extra = {**defs, **({"line": line} if line is not None else {})}
    return {"title": title, **schema, **({"$defs": extra} if extra else {})}


def lines(line: Schema, title: str) -> Schema:
    """A command that prints only JSON Lines: the root and $defs/line are the line."""
    return {"title": title, **line, "$defs": {"line": {"$ref": "#"}}}


# -- the commands ----------------------------------------------------------------------------------
