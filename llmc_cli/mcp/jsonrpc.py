"""JSON-RPC 2.0 messages as MCP uses them: shared by the client session and the built-in server."""

from __future__ import annotations

import json
import re
from typing import Any

from llmc_cli.errors import ProtocolError
from llmc_cli.model import ARGUMENTS_TOO_DEEP, MAX_MESSAGE_DEPTH, arguments_too_deep, compact_json, nesting_depth

# Standard JSON-RPC codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# MCP codes
RESOURCE_NOT_FOUND = -32002
# 2026-07-28 ("modern") codes: a reply carrying one of these comes from a modern server
UNSUPPORTED_PROTOCOL_VERSION = -32022
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
HEADER_MISMATCH = -32020
MODERN_ERROR_CODES = frozenset({UNSUPPORTED_PROTOCOL_VERSION, MISSING_REQUIRED_CLIENT_CAPABILITY, HEADER_MISMATCH})


def request(id: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result(id: int | str | None, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": value}


def error(id: int | str | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": err}


def encode(message: dict[str, Any]) -> str:
    """One message on one line (stdio forbids embedded newlines; json.dumps escapes them)."""
    return compact_json(message)


def kind_of(message: Any) -> str:
    """'request' | 'notification' | 'response' | 'error'; ProtocolError for anything else."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise ProtocolError(f"not a JSON-RPC 2.0 message: {_preview(message)}")
    if "method" in message:
        if not isinstance(message["method"], str):
            raise ProtocolError(f"JSON-RPC method is not a string: {_preview(message)}")
        return "request" if "id" in message else "notification"
    if "id" in message:
        if "result" in message:
            return "response"
        if isinstance(message.get("error"), dict):
            return "error"
    raise ProtocolError(f"JSON-RPC message is neither request, notification nor response: {_preview(message)}")


def decode(line: str | bytes) -> list[dict[str, Any]]:
    """Parse one line or HTTP body; a JSON array is a batch (2025-03-26 allowed them)."""
    try:
        value = json.loads(line)
    except RecursionError:  # arrays nested a hundred thousand deep: the parser gives up
        raise ProtocolError(f"invalid JSON: nested more than {MAX_MESSAGE_DEPTH} levels deep") from None
    except ValueError as exc:
        raise ProtocolError(f"invalid JSON from server: {_preview(line)}") from exc
    messages = value if isinstance(value, list) else [value]
    for m in messages:
        kind_of(m)
    if (line.count("[") + line.count("{") if isinstance(line, str) else line.count(b"[") + line.count(b"{")) \
            > MAX_MESSAGE_DEPTH:  # only then can it be that deep: most messages are not walked at all
        messages = [bounded for m in messages if (bounded := _bounded(m)) is not None]
    if (isinstance(line, str) and "\\u" in line) or (isinstance(line, bytes) and b"\\u" in line):  # only an escape makes a lone surrogate
        messages = [_without_lone_surrogates(m) for m in messages]
    return messages


def too_deep(params: dict[str, Any]) -> str | None:
    """Why a request's params cannot be served, if they nest too deep: tool or prompt arguments
    deeper than MAX_ARGUMENT_DEPTH (the message every path gives), else anything deeper than
    MAX_MESSAGE_DEPTH. Checked without recursion before anything walks the params."""
    if arguments_too_deep(params.get("arguments")):
        return ARGUMENTS_TOO_DEEP
    if nesting_depth(params, MAX_MESSAGE_DEPTH + 1) > MAX_MESSAGE_DEPTH:
        return f"the params are nested more than {MAX_MESSAGE_DEPTH} levels deep"
    return None


def _bounded(message: dict[str, Any]) -> dict[str, Any] | None:
    """A reply nested deeper than MAX_MESSAGE_DEPTH becomes an error reply for its request, a
    notification that deep is dropped; a request is left to whoever serves it (too_deep)."""
    kind = kind_of(message)
    if kind == "request" or nesting_depth(message, MAX_MESSAGE_DEPTH + 1) <= MAX_MESSAGE_DEPTH:
        return message
    if kind in ("response", "error"):
        return error(message["id"] if isinstance(message["id"], (str, int)) else None, INTERNAL_ERROR,
                     f"the reply is nested more than {MAX_MESSAGE_DEPTH} levels deep")
    return None


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(message: dict[str, Any]) -> dict[str, Any]:
    """A JSON escape such as "\\ud800" alone decodes to text that no UTF-8 writer accepts (the
    audit log, stdout, the next request): a reply carrying it becomes an error reply for its
    request; in a notification it becomes U+FFFD. Requests stay as they are: whoever answers
    them refuses such arguments (services.authorize)."""
    if kind_of(message) == "request" or not has_lone_surrogate(message):
        return message
    if kind_of(message) in ("response", "error"):
        return error(message["id"] if not has_lone_surrogate(message["id"]) else None, INTERNAL_ERROR,
                     "the reply contains a lone surrogate (a \\uD800-\\uDFFF escape without its pair): "
                     "not valid Unicode text")
    replaced: dict[str, Any] = replace_lone_surrogates(message)  # a dict stays a dict
    return replaced


def has_lone_surrogate(value: Any) -> bool:
    """Anywhere in a JSON value, keys included."""
    if isinstance(value, str):
        return LONE_SURROGATE.search(value) is not None
    if isinstance(value, (dict, list)):
        try:  # one pass in C over the whole value (dumps keeps surrogates as they are), not one call per node
            return LONE_SURROGATE.search(json.dumps(value, ensure_ascii=False)) is not None
        except (TypeError, ValueError, RecursionError):
            pass  # not plain JSON (a key that is no string, a value of another type), or deep: walk it
    return _has_lone_surrogate(value)


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]  # without recursion: the value is untrusted JSON of any depth
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if LONE_SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def replace_lone_surrogates(value: Any) -> Any:
    """The same JSON value with each lone surrogate replaced by U+FFFD (built without recursion)."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, str):
            parent[slot] = LONE_SURROGATE.sub("\ufffd", item)
        elif isinstance(item, dict):
            out: dict[Any, Any] = {}
            parent[slot] = out
            for k, v in item.items():
                key = LONE_SURROGATE.sub("\ufffd", k) if isinstance(k, str) else k
                out[key] = None
                stack.append((v, out, key))
        elif isinstance(item, list):
            copy: list[Any] = [None] * len(item)
            parent[slot] = copy
            stack.extend((v, copy, n) for n, v in enumerate(item))
        else:
            parent[slot] = item
    return root[0]


def _preview(value: Any, limit: int = 120) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value if isinstance(value, str) else repr(value)
    text = text.strip().replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "..."
