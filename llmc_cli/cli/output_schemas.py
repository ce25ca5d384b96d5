"""The output contract as data: a JSON Schema (draft 2020-12) for what each command prints.

scripts/gen_schemas.py writes these to schemas/COMMAND-PATH.schema.json (a test fails when the
files are stale), and the test runner validates every JSON output the tests see against them.
One rule for readers: a JSON document is valid against a file's root; each line of JSON Lines
(`--format jsonl`, `call --batch`, `audit tail`, `session stop|forget`) against its `$defs/line`.

Objects llmc shapes are closed (`additionalProperties: false`, every field it always writes
`required`), so a renamed or snake_case key fails; objects that come from servers or providers
(MCP tools, content blocks, a provider's tool definitions, a profile's TOML) stay open.
Nothing imports this module at run time: only the generator and the tests do.
"""

from __future__ import annotations

import json

from llmc_cli.cli.output_schema_parts import (
    ANY,
    BOOL,
    CALL_RESULT,
    CALL_RESULT_OPTIONAL,
    CAMEL_KEYS,
    COMMON,
    DECISION_FIELDS,
    DRAFT,
    INT,
    NUM,
    OPEN,
    STR,
    STRS,
    Schema,
    array,
    common,
    document,
    enum,
    lines,
    listing,
    local,
    null,
    obj,
    translated,
)

SERVER_TABLE = obj(
    {},
    {  # a server as the profile has it (profile keys; secrets masked)
        "command": STR,
        "args": STRS,
        "env": {"type": "object", "additionalProperties": STR},
        "cwd": STR,
        "url": STR,
        "headers": {"type": "object", "additionalProperties": STR},
        "transport": enum("auto", "http", "sse"),
        "oauth": OPEN,
        "builtin": STR,
        "options": OPEN,
        "timeout": NUM,
        "connect_timeout": NUM,
        "enabled": BOOL,
        "description": STR,
        "per_session": BOOL,
        "sandbox": enum("auto", "bwrap", "none"),
        "network": BOOL,
        "read_paths": STRS,
        "write_paths": STRS,
    },
)
SERVER_ROW_FIELDS = {"name": STR, "kind": enum("stdio", "remote", "builtin"), "enabled": BOOL}
SERVER_ENTRY = obj(SERVER_ROW_FIELDS, SERVER_TABLE["properties"])
LOGIN = obj(
    {
        "server": STR,
        "serverUrl": STR,
        "resource": STR,
        "issuer": STR,
        "clientId": null(STR),
        "registration": null(STR),
        "scope": null(STR),
        "hasAccessToken": BOOL,
        "hasRefreshToken": BOOL,
        "expiresAt": null(STR),
        "expired": BOOL,
    }
)
HELD_SERVER = obj(
    {"name": STR, "state": enum("starting", "running", "failed", "unusable")},
    {"restarts": INT, "timeout": NUM, "protocolVersion": null(STR), "error": STR},
)
SESSION = obj(
    {
        "name": STR,
        "pid": INT,
        "profile": null(STR),
        "started": STR,
        "idleTimeout": NUM,
        "idleFor": NUM,
        "clients": INT,
        "servers": array(HELD_SERVER),
        "socket": STR,
        "log": STR,
    }
)
TOOL_NAME = {"server": STR, "tool": STR}
CALL = obj(
    {**TOOL_NAME, **CALL_RESULT, "durationMs": NUM}, {**CALL_RESULT_OPTIONAL, "cached": BOOL, "warnings": common("warnings")}
)
BATCH_LINE = {
    "anyOf": [
        obj({"id": ANY, **TOOL_NAME, **CALL_RESULT, "durationMs": null(NUM)}, {**CALL_RESULT_OPTIONAL, "cached": BOOL}),
        obj({"id": ANY, "error": common("error"), "durationMs": null(NUM)}, TOOL_NAME),
    ]
}
STEP = obj(
    {
        "step": INT,
        "callId": STR,
        "tool": STR,
        "providerName": STR,
        "arguments": OPEN,
        "outcome": enum("ok", "error", "denied", "failed", "invalid", "unknown_tool", "timeout"),
        "durationMs": null(NUM),
        "seen": STR,
    },
    {
        "error": common("error"),
        "result": obj(CALL_RESULT, CALL_RESULT_OPTIONAL),
        "compacted": obj({"characters": INT, "charactersShown": INT, "lines": INT, "linesShown": INT}),
        "cached": BOOL,
    },
)
USAGE = obj({"step": INT, "inputTokens": null(INT), "outputTokens": null(INT), "stopReason": STR, "durationMs": NUM, "text": STR})
RUN = {
    "conversation": STR,
    "provider": STR,
    "model": null(STR),
    "prompt": STR,
    "answer": STR,
    "stopReason": enum("end", "max_steps", "timeout", "length", "other"),
    "steps": array(STEP),
    "usage": array(USAGE),
    "usageTotal": obj({"inputTokens": INT, "outputTokens": INT}),
    "durationMs": NUM,
    "warnings": STRS,
}
PROFILE_ROW = obj({"name": STR, "path": STR, "description": null(STR), "servers": STRS})
TOOL_ROW = {
    **common("tool"),
    "required": ["server", "name", "inputSchema"],
    "properties": {"server": STR, "denied": {"const": True}},
}
FINDING = obj({"tool": STR, "target": STR, "path": STR, "what": STR, "why": STR}, {"server": STR})
TOOL_REF = obj(TOOL_NAME)
FIELD_SCORES = {"type": "object", "additionalProperties": NUM}  # field -> its share of a term's score
SEARCH_TERM = obj(
    {"term": STR, "query_word": STR, "synonym": BOOL, "score": NUM, "idf": NUM, "fields": FIELD_SCORES},
    {"boilerplate": NUM},
)
SEARCH_WHY = obj(
    {"terms": array(SEARCH_TERM), "length": NUM},
    {"semantic": null(obj({"rank": INT, "similarity": NUM})), "lexical_rank": null(INT)},
)
EXPORTED = obj({"file": STR, "format": STR, "toolCount": INT, "warnings": common("warnings")})
ARGUMENT = obj({"name": STR, "type": STR, "required": BOOL}, {"default": ANY, "enum": array(ANY), "description": ANY})
PRINCIPAL = obj({"principal": STR, "profile": null(STR), "token": STR})


def _mcp_row(*required: str) -> Schema:
    """A server's MCP object (resource, prompt, ...) with the server's name beside its own fields."""
    return obj({"server": STR, **dict.fromkeys(required, STR)}, closed=False)


# A server's data classification and the caller's clearance (guard/clearance.py).
_LEVEL = enum("public", "internal", "confidential", "restricted")
LEVEL_FIELDS = {"classification": _LEVEL, "clearance": _LEVEL}

SCHEMAS: dict[str, Schema] = {
    "ask": document(obj({**RUN, "saved": STR}), "llmc ask (without --text)"),
    "audit-head": document(obj({"head": STR, "records": INT, "anchor": null(STR)}), "llmc audit head"),
    "audit-verify": document(
        obj(
            {"ok": BOOL, "records": INT},
            {
                "files": STRS,
                "last": STR,
                "anchor": null(obj({"head": STR, "records": INT})),
                "expect": STR,
                "file": STR,
                "line": null(INT),
                "reason": STR,
            },
        ),
        "llmc audit verify",
    ),
    "audit-tail": lines(
        {
            **obj(
                {"time": STR, "prev": STR, "hash": STR},
                {"event": STR, "server": STR, "tool": STR, "resource": STR, "prompt": STR, "completion": STR},
                closed=False,
            ),
            "propertyNames": CAMEL_KEYS,
        },
        "llmc audit tail: one audit record per line",
    ),
    "auth-login": document(LOGIN, "llmc auth login"),
    "auth-logout": document(obj({"server": STR, "removedCount": INT}), "llmc auth logout"),
    "auth-status": listing("logins", LOGIN, "llmc auth status"),
    "call": document(CALL, "llmc call (without --text); $defs/line: a line of llmc call --batch", BATCH_LINE),
    "conversations-list": listing(
        "conversations",
        obj(
            {
                "name": STR,
                "id": STR,
                "provider": STR,
                "model": null(STR),
                "turns": INT,
                "messageCount": INT,
                "firstPrompt": null(STR),
                "created": STR,
                "updated": STR,
            }
        ),
        "llmc conversations list",
    ),
    "conversations-rm": document(obj({"removed": STRS}), "llmc conversations rm"),
    "conversations-show": document(
        obj(
            {
                "name": STR,
                "version": INT,
                "id": STR,
                "provider": STR,
                "model": null(STR),
                "system": null(STR),
                "created": NUM,
                "messages": array(obj({"kind": enum("user", "assistant", "toolResults")}, closed=False)),
                "runs": array(OPEN),
            },
            {"baseUrl": STR},
        ),
        "llmc conversations show",
    ),
    "ping": listing(
        "servers",
        obj({"server": STR, "era": STR, "protocolVersion": null(STR), "serverInfo": null(OPEN), "connectMs": NUM, "pingMs": NUM}),
        "llmc ping",
    ),
    "policy-approve": document(
        obj({"profile": STR, **TOOL_NAME, "arguments": OPEN, "callHash": STR, "written": BOOL}), "llmc policy approve"
    ),
    "policy-check": document(
        {
            "oneOf": [
                obj(
                    {
                        "profile": STR,
                        **TOOL_NAME,
                        "arguments": OPEN,
                        "caller": enum("human", "model"),
                        **LEVEL_FIELDS,
                        **DECISION_FIELDS,
                        "hints": common("hints"),
                    },
                    {"callHash": STR, "cache": STR},
                ),
                obj(
                    {
                        "profile": STR,
                        "server": STR,
                        "resource": STR,
                        "caller": enum("human", "model"),
                        **LEVEL_FIELDS,
                        **DECISION_FIELDS,
                    }
                ),
                obj(
                    {
                        "profile": STR,
                        "server": STR,
                        "prompt": STR,
                        "arguments": OPEN,
                        "caller": enum("human", "model"),
                        **LEVEL_FIELDS,
                        **DECISION_FIELDS,
                    }
                ),
            ]
        },
        "llmc policy check",
    ),
    "profiles-init": document(obj({"created": STR}), "llmc profiles init"),
    "profiles-list": {
        **listing("profiles", PROFILE_ROW, "llmc profiles list", "profileError"),
        **obj({"directory": STR, "profiles": array(local("row")), "errors": array(common("profileError"))}),
    },
    "profiles-show": document(obj({"name": STR, "path": null(STR), "profile": OPEN}), "llmc profiles show"),
    "prompts-get": document(obj({"server": STR, "messages": array(OPEN)}, closed=False), "llmc prompts get"),
    "prompts-list": listing("prompts", _mcp_row("name"), "llmc prompts list"),
    "resources-list": listing("resources", _mcp_row("uri", "name"), "llmc resources list"),
    "resources-read": document(
        obj({"server": STR, "contents": array(obj({"uri": STR}, closed=False))}, closed=False), "llmc resources read"
    ),
    "resources-templates": listing("resourceTemplates", _mcp_row("uriTemplate", "name"), "llmc resources templates"),
    "serve-token-create": document(obj({"principal": STR, "profile": null(STR), "token": STR}), "llmc serve token create"),
    "serve-token-list": listing("principals", PRINCIPAL, "llmc serve token list"),
    "serve-token-revoke": document(obj({"principal": STR, "revoked": BOOL}), "llmc serve token revoke"),
    "servers-add": document(obj({"added": STR, "profile": STR, "path": STR, "server": SERVER_TABLE}), "llmc servers add"),
    "servers-disable": document(
        obj({"server": STR, "enabled": BOOL, "changed": BOOL, "profile": STR, "path": STR}), "llmc servers disable"
    ),
    "servers-enable": document(
        obj({"server": STR, "enabled": BOOL, "changed": BOOL, "profile": STR, "path": STR}), "llmc servers enable"
    ),
    "servers-import": document(
        obj(
            {
                "profile": STR,
                "path": STR,
                "source": STR,
                "dryRun": BOOL,
                "added": STRS,
                "replaced": STRS,
                "skipped": STRS,
                "servers": {"type": "object", "additionalProperties": SERVER_TABLE},
                "placeholders": array(obj({"server": STR, "variable": STR, "reason": STR})),
            }
        ),
        "llmc servers import",
    ),
    "servers-install": document(
        obj(
            {
                "client": STR,
                "config": STR,
                "name": STR,
                "entry": OPEN,
                "nameSeparator": enum(".", "__", "_"),
                "action": enum("add", "replace", "unchanged"),
                "dryRun": BOOL,
            }
        ),
        "llmc servers install",
    ),
    "servers-list": {
        **listing("servers", SERVER_ENTRY, "llmc servers list"),
        **obj({"profile": STR, "path": null(STR), "servers": array(local("row")), "errors": array(common("serverError"))}),
    },
    "servers-remove": document(obj({"removed": STRS, "profile": STR, "path": STR}), "llmc servers remove"),
    "servers-show": document(
        obj({"profile": STR, **SERVER_ROW_FIELDS}, {**SERVER_TABLE["properties"], "runs": STR}), "llmc servers show"
    ),
    "session-forget": lines(
        obj({"server": STR, "url": STR, "session": STR, "forgotten": BOOL}),
        "llmc session forget: one remembered HTTP session per line",
    ),
    "session-list": listing("sessions", SESSION, "llmc session list", "sessionError"),
    "session-start": document(SESSION, "llmc session start"),
    "session-stop": lines(
        obj({"name": STR, "pid": INT, "stopped": BOOL}, {"forced": BOOL}), "llmc session stop: one stopped session per line"
    ),
    "cache-clear": document(obj({"cleared": INT, "server": null(STR), "store": enum("files", "database")}), "llmc cache clear"),
    "state-migrate": document(obj({"database": STR, "version": INT, "applied": array(INT)}), "llmc state migrate"),
    "tools-diff": document(
        obj(
            {
                "drift": BOOL,
                "added": array(TOOL_REF),
                "removed": array(TOOL_REF),
                "changed": array(
                    obj(
                        TOOL_NAME,
                        {"description": obj({"old": null(STR), "new": null(STR)}), "scan": obj({"old": STRS, "new": STRS})},
                    )
                ),
            }
        ),
        "llmc tools diff",
    ),
    "tools-export": document(
        {"anyOf": [EXPORTED, common("translation")]}, "llmc tools export: the summary, or with -o - the translation itself"
    ),
    "tools-lint": listing("findings", FINDING, "llmc tools lint"),
    "tools-list": translated(
        listing(
            "tools",
            TOOL_ROW,
            "llmc tools list: the listing (--format json|jsonl), or "
            "with a provider's --format (mcp, openai, ...) its tool definitions",
        )
    ),
    "tools-scan": listing(
        "findings",
        obj(
            {
                "server": STR,
                "tool": null(STR),
                "field": STR,
                "rule": enum(
                    "model_instruction",
                    "cross_server",
                    "exfiltration_link",
                    "hidden_unicode",
                    "terminal_escape",
                    "padding",
                    "confusable_name",
                    "encoded_blob",
                ),
                "severity": enum("high", "medium"),
                "excerpt": STR,
            }
        ),
        "llmc tools scan: attacks found in server metadata (tool null: the server's instructions)",
    ),
    "tools-lock": document(obj({"file": STR, "serverCount": INT, "toolCount": INT}), "llmc tools lock"),
    "tools-search": listing(
        "tools",
        obj({**TOOL_NAME, "score": NUM, "title": null(STR), "description": STR}, {"why": SEARCH_WHY}),
        "llmc tools search: the best-fitting tools, best first (with --explain, why each ranked)",
    ),
    "tools-show": document(
        obj(
            {
                **TOOL_NAME,
                "title": null(STR),
                "description": null(STR),
                "arguments": array(ARGUMENT),
                "inputSchema": OPEN,
                "outputSchema": null(OPEN),
                "annotations": OPEN,
                "hints": common("hints"),
                "policy": obj({"human": local("decision"), "model": local("decision")}),
                "example": STR,
            }
        ),
        "llmc tools show",
        decision=obj(DECISION_FIELDS),
    ),
}

# Commands whose stdout is not JSON: a shell script, or MCP itself.
NOT_JSON = ("completion", "serve", "serve-workspace")


def files() -> dict[str, str]:
    """schemas/NAME -> its text: common.schema.json and one file per command."""

    out = {"common.schema.json": COMMON}
    out.update({f"{name}.schema.json": {"$schema": DRAFT, **schema} for name, schema in SCHEMAS.items()})
    return {name: json.dumps(schema, indent=2, ensure_ascii=False) + "\n" for name, schema in sorted(out.items())}
