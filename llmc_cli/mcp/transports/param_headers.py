"""The request headers of 2026-07-28 Streamable HTTP (basic/transports/streamable-http.mdx):
`Mcp-Method`, `Mcp-Name` and `Mcp-Param-{Name}` for the parameters a tool's inputSchema marks with
`x-mcp-header`, values in the Base64 sentinel form when not plain ASCII."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping

from llmc_cli.mcp.messages import JSON, JSONObject

NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # -> Mcp-Name
X_MCP_HEADER = "x-mcp-header"
HTTP_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 field-name token
SCHEMA_DATA_KEYS = frozenset({"default", "examples", "const", "enum"})


def header_value(value: str) -> str:
    """A header-safe value: plain printable ASCII as is, anything else in the Base64 sentinel form
    (2026-07-28 streamable-http, Value Encoding)."""
    plain = (
        all(0x20 <= ord(c) <= 0x7E for c in value)
        and value == value.strip()
        and not (value.startswith("=?base64?") and value.endswith("?="))
    )
    return value if plain else "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def annotated_parameters(schema: object) -> dict[tuple[str, ...], str]:
    """The `x-mcp-header` annotations of an inputSchema: property path -> header name token.
    ValueError (the reason) when one is invalid: off a plain chain of `properties`, not an HTTP
    token, not on a string/integer/boolean property, or a duplicate (case-insensitive)."""
    found: dict[tuple[str, ...], str] = {}
    seen: dict[str, str] = {}

    def walk(node: object, path: tuple[str, ...] | None) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, None)
            return
        if not isinstance(node, dict):
            return
        if X_MCP_HEADER in node:
            token, where = node[X_MCP_HEADER], ".".join(path or ())
            if not path:
                raise ValueError("an annotation outside a plain chain of `properties`")
            if not isinstance(token, str) or not HTTP_TOKEN.fullmatch(token):
                raise ValueError(f"property {where!r}: {str(token)[:40]!r} is not an HTTP header token")
            if node.get("type") not in ("string", "integer", "boolean"):
                raise ValueError(f"property {where!r}: only string, integer and boolean properties may be mirrored")
            if token.lower() in seen:
                raise ValueError(f"property {where!r}: {token!r} is also used by {seen[token.lower()]!r}")
            seen[token.lower()], found[path] = where, token
        for key, value in node.items():
            if key in SCHEMA_DATA_KEYS or key == X_MCP_HEADER:
                continue  # instance data, not schemas
            if key == "properties" and isinstance(value, dict):
                for prop, sub in value.items():
                    walk(sub, (*path, prop) if path is not None else None)
            else:
                walk(value, None)

    walk(schema, ())
    return found


def mirrored_arguments(annotated: dict[tuple[str, ...], str], arguments: Mapping[str, object]) -> dict[str, str]:
    """`Mcp-Param-{Name}` headers for a tools/call; a parameter without a value sends none."""
    headers = {}
    for path, token in annotated.items():
        value: object = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            headers[f"Mcp-Param-{token}"] = "true" if value else "false"
        elif isinstance(value, (str, int)):
            headers[f"Mcp-Param-{token}"] = header_value(str(value))
    return headers


def valid_tools_listing(
    message: JSONObject, request: JSONObject, learned: dict[str, dict[tuple[str, ...], str]], note: Callable[[str], None]
) -> JSONObject:
    """A modern tools/list reply: each tool's `x-mcp-header` parameters learned (into `learned`),
    and the tools whose annotations are invalid dropped, each with a note (2026-07-28
    streamable-http, Custom Headers: the client MUST exclude them from the tools/list result).
    Any other message comes back as it is."""
    result = message.get("result")
    tools = result.get("tools") if isinstance(result, dict) else None
    if (
        request.get("method") != "tools/list"
        or message.get("id") != request.get("id")
        or not isinstance(result, dict)
        or not isinstance(tools, list)
    ):
        return message
    kept: list[JSON] = []
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else None
        try:
            found = annotated_parameters(tool.get("inputSchema") if isinstance(tool, dict) else None)
        except ValueError as exc:
            note(f"warning: tool {name!r} left out: invalid x-mcp-header: {exc}")
            continue
        if isinstance(name, str):
            learned[name] = found
        kept.append(tool)
    return {**message, "result": {**result, "tools": kept}}
