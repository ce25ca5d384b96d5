"""A hand-written stdio MCP server whose tools declare an outputSchema, some of them keeping to
it and some not (the spec: a server MUST return structuredContent that conforms to it; a client
SHOULD check). Raw JSON-RPC on purpose: the SDK's own server checks its results before sending.
"""

from __future__ import annotations

import json
import sys

COUNT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
# Outside the subset mcp/schema_subset.py compiles (a $ref): jsonschema decides.
REFERRING = {
    "type": "object",
    "$defs": {"when": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
    "properties": {"day": {"$ref": "#/$defs/when"}},
    "required": ["day"],
}
TEXT = [{"type": "text", "text": "result"}]
# tool name -> (its outputSchema, its result)
TOOLS: dict[str, tuple[dict, dict]] = {
    "good": (COUNT, {"content": TEXT, "structuredContent": {"n": 1}}),
    "wrong_type": (COUNT, {"content": TEXT, "structuredContent": {"n": "one"}}),
    "missing_field": (COUNT, {"content": TEXT, "structuredContent": {"m": 1}}),
    "no_structured": (COUNT, {"content": TEXT}),
    "failed": (COUNT, {"content": [{"type": "text", "text": "it broke"}], "isError": True}),
    "good_ref": (REFERRING, {"content": TEXT, "structuredContent": {"day": "2026-11-28"}}),
    "bad_ref": (REFERRING, {"content": TEXT, "structuredContent": {"day": "yesterday"}}),
    "broken_schema": ({"type": "object", "properties": {"n": {"type": 7}}}, {"content": TEXT, "structuredContent": {"n": 1}}),
}
LISTING = [
    {"name": name, "inputSchema": {"type": "object"}, "outputSchema": schema, "annotations": {"readOnlyHint": True}}
    for name, (schema, _) in TOOLS.items()
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue  # notifications
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "schema-liar", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": LISTING}
        elif method == "tools/call":
            result = TOOLS[message["params"]["name"]][1]
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "Method not found"}})
            continue
        send({"jsonrpc": "2.0", "id": ident, "result": result})


if __name__ == "__main__":
    main()
