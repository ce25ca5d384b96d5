"""JSON-RPC 2.0 messages as MCP uses them: shared by the client session and the built-in server."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from typing import TypeVar, cast

from llmc_cli import lazy_pattern, model
from llmc_cli.errors import ProtocolError
from llmc_cli.mcp.messages import JSON, JSONObject, RequestId
from llmc_cli.model import (
    ARGUMENTS_TOO_DEEP,
    MAX_ARGUMENT_DEPTH,
    MAX_MESSAGE_DEPTH,
    arguments_too_deep,
    compact_json,
    json_loads,
    nesting_depth,
)

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


def request(id: RequestId, method: str, params: JSONObject | None = None) -> JSONObject:
    """The builders below make the envelopes mcp/messages.py describes (JSONRPCRequest,
    JSONRPCNotification, JSONRPCResultResponse, JSONRPCErrorResponse) as plain JSON objects: the
    transports and matchers that carry a message treat every kind alike."""
    msg: JSONObject = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: JSONObject | None = None) -> JSONObject:
    msg: JSONObject = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result(id: RequestId | None, value: JSONObject) -> JSONObject:
    return {"jsonrpc": "2.0", "id": id, "result": value}


def error(id: RequestId | None, code: int, message: str, data: JSON = None) -> JSONObject:
    err: JSONObject = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": err}


def encode(message: JSONObject) -> str:
    """One message on one line (stdio forbids embedded newlines; json.dumps escapes them)."""
    return compact_json(message)


def kind_of(message: object) -> str:
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


_UNREAD = object()  # decode's value before a parser read it
_NINETEEN_ZEROS = b"0" * 19  # 19 digits in a row, translated (model.FAST_LOADS)
_DIGITS = b"0123456789"
_SHALLOW = 2 * MAX_MESSAGE_DEPTH  # a message nested N deep is N openers and N closers: at least 2N long


def decode(line: str | bytes) -> list[JSONObject]:
    """Parse one line or HTTP body; a JSON array is a batch (2025-03-26 allowed them)."""
    value: object = _UNREAD
    fast = model.FAST_LOADS  # orjson's, where its value is json's (model.py): a batch reads a reply a call
    # (fewer than 19 digits in all, counted by deleting them: no search for a run of them, as
    # bytes.find parses its arguments, ~2,000 instructions a search)
    if (
        fast is not None
        and type(line) is bytes
        and (len(line) - len(line.translate(None, _DIGITS)) < 19 or line.translate(fast[1]).find(_NINETEEN_ZEROS) < 0)
    ):
        try:
            value = fast[0](line)
        except ValueError:  # orjson.JSONDecodeError: json reads it (NaN, a lone surrogate) or refuses it below
            pass
        else:  # a reply with a result (a batch reads one a call) that cannot nest too deep, no escape in it
            if (
                type(value) is dict
                and "result" in value
                and "id" in value
                and "method" not in value
                and value.get("jsonrpc") == "2.0"
                and (len(line) <= _SHALLOW or line.count(b"[") + line.count(b"{") <= MAX_MESSAGE_DEPTH)
                and (92 not in line or line.find(b"\\u") < 0)  # (a backslash at all: a memchr)
            ):
                return [value]  # what the rest below makes of it
    if value is _UNREAD:
        try:
            # bytes as json.loads reads them (UTF-8, surrogates passed), without its encoding detection
            # when the message starts as every UTF-8 one does ("{" or "[", then no NUL)
            text = (
                line.decode("utf-8", "surrogatepass")
                if isinstance(line, bytes) and line.startswith((b"{", b"[")) and line[1:2] != b"\x00"
                else line
            )
            value = json_loads(text) if isinstance(text, str) else json.loads(text)
        except RecursionError:  # nested past the parser's own limit (~1,000 levels): it gives up
            reply = _too_deep_reply(line if isinstance(line, str) else line.decode("utf-8", "replace"))
            if reply is None:
                raise ProtocolError(f"invalid JSON: nested more than {MAX_MESSAGE_DEPTH} levels deep") from None
            return [reply]
        except ValueError as exc:
            raise ProtocolError(f"invalid JSON from server: {_preview(line)}") from exc
    checked: list[JSONObject] = []
    for m in value if isinstance(value, list) else [value]:
        # a reply with a result needs no kind_of call (a batch reads one a call); else it raises
        # unless m is a JSON-RPC 2.0 object: json.loads made it a JSONObject
        if not (type(m) is dict and "result" in m and "id" in m and "method" not in m and m.get("jsonrpc") == "2.0"):
            kind_of(m)
        checked.append(m)  # type: ignore[arg-type]  # (no typing.cast: a call a message)
    messages = checked
    if (
        len(line) > _SHALLOW
        and (  # the line is JSON: a message nested N deep is N openers and N closers, at least 2N long
            line.count("[") + line.count("{") if isinstance(line, str) else line.count(b"[") + line.count(b"{")
        )
        > MAX_MESSAGE_DEPTH
    ):  # only then can it be that deep: most messages are not walked at all
        messages = [bounded for m in messages if (bounded := _bounded(m)) is not None]
    # only an escape makes a lone surrogate (bytes.find, not `in`: CPython 3.11's `bytes in
    # bytes` tries its operand as an integer first and formats the TypeError it then drops)
    if ("\\u" in line) if isinstance(line, str) else (92 in line and line.find(b"\\u") >= 0):  # (a backslash at all: a memchr)
        messages = [_without_lone_surrogates(m) for m in messages]
    return messages


def too_deep(params: JSONObject) -> str | None:
    """Why a request's params cannot be served, if they nest too deep: tool or prompt arguments
    deeper than MAX_ARGUMENT_DEPTH (the message every path gives), else anything deeper than
    MAX_MESSAGE_DEPTH. Checked without recursion before anything walks the params: in one walk
    when they nest no deeper than arguments may (then the arguments within them do not either)."""
    if nesting_depth(params, MAX_ARGUMENT_DEPTH + 1) <= MAX_ARGUMENT_DEPTH:
        return None
    if arguments_too_deep(params.get("arguments")):
        return ARGUMENTS_TOO_DEEP
    if nesting_depth(params, MAX_MESSAGE_DEPTH + 1) > MAX_MESSAGE_DEPTH:
        return f"the params are nested more than {MAX_MESSAGE_DEPTH} levels deep"
    return None


def _bounded(message: JSONObject) -> JSONObject | None:
    """A reply nested deeper than MAX_MESSAGE_DEPTH becomes an error reply for its request, a
    notification that deep is dropped; a request is left to whoever serves it (too_deep)."""
    kind = kind_of(message)
    if kind == "request" or nesting_depth(message, MAX_MESSAGE_DEPTH + 1) <= MAX_MESSAGE_DEPTH:
        return message
    if kind in ("response", "error"):
        return error(
            message["id"] if isinstance(message["id"], (str, int)) else None,
            INTERNAL_ERROR,
            f"the reply is nested more than {MAX_MESSAGE_DEPTH} levels deep",
        )
    return None


# The tokens of JSON text that matter to find an object's top-level keys: strings and punctuation.
# (compiled on first use: a reply this deep is rare)
_TOKEN = lazy_pattern(r'"(?:[^"\\]|\\.)*"|[][{}:,]', re.S)
_SCALAR_ID = lazy_pattern(r'\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*[,}]', re.S)


def _too_deep_reply(text: str) -> JSONObject | None:
    """A reply nested too deep for the parser is, like one over MAX_MESSAGE_DEPTH (_bounded), an
    error reply for its request, not a line dropped as garbage that leaves its caller waiting
    until its timeout. Its top-level keys are found by a scan without recursion; None unless it
    is an object with an "id" (an integer or a string) and a "result" or "error", and no "method"."""
    if not text.lstrip().startswith("{"):
        return None
    depth, expect_key, keys, ident = 0, False, set(), None
    for token in _TOKEN.finditer(text):
        t = token.group()
        if t in "{[":
            depth += 1
            expect_key = depth == 1
        elif t in "}]":
            depth -= 1
        elif depth == 1 and t == ",":
            expect_key = True
        elif depth == 1 and expect_key and t.startswith('"'):
            expect_key = False
            keys.add(t)
            if t == '"id"' and (value := _SCALAR_ID.match(text, text.find(":", token.end()) + 1)):
                ident = json.loads(value.group(1))
    if ident is None or '"method"' in keys or not keys & {'"result"', '"error"'}:
        return None
    return error(ident, INTERNAL_ERROR, f"the reply is nested more than {MAX_MESSAGE_DEPTH} levels deep")


_V = TypeVar("_V")
# Compiled on first use: only text that is not ASCII is searched (its compile walks the 2,048
# surrogates one by one, ~0.4 ms).
LONE_SURROGATE = lazy_pattern("[\ud800-\udfff]")


def _without_lone_surrogates(message: JSONObject) -> JSONObject:
    """A JSON escape such as "\\ud800" alone decodes to text that no UTF-8 writer accepts (the
    audit log, stdout, the next request): a reply carrying it becomes an error reply for its
    request; in a notification it becomes U+FFFD. Requests stay as they are: whoever answers
    them refuses such arguments (services.authorize)."""
    if kind_of(message) == "request" or not has_lone_surrogate(message):
        return message
    if kind_of(message) in ("response", "error"):
        id = message["id"]
        return error(
            id if isinstance(id, (str, int)) and not has_lone_surrogate(id) else None,
            INTERNAL_ERROR,
            "the reply contains a lone surrogate (a \\uD800-\\uDFFF escape without its pair): not valid Unicode text",
        )
    return replace_lone_surrogates(message)


def has_lone_surrogate(value: object) -> bool:
    """Anywhere in a JSON value, keys included."""
    if isinstance(value, str):
        return LONE_SURROGATE.search(value) is not None
    if isinstance(value, (dict, list)):
        try:  # one pass in C over the whole value (dumps keeps surrogates as they are), not one call per node
            return LONE_SURROGATE.search(json.dumps(value, ensure_ascii=False)) is not None
        except (TypeError, ValueError, RecursionError):
            pass  # not plain JSON (a key that is no string, a value of another type), or deep: walk it
    return _has_lone_surrogate(value)


def _has_lone_surrogate(value: object) -> bool:
    stack: list[object] = [value]  # without recursion: the value is untrusted JSON of any depth
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


def replace_lone_surrogates(value: _V) -> _V:
    """The same JSON value with each lone surrogate replaced by U+FFFD (built without recursion).
    Its shape is kept (a dict stays a dict, a str a str), so the result has the argument's type."""
    root: list[object] = [None]
    stack: list[tuple[object, Callable[[object], None]]] = [(value, partial(root.__setitem__, 0))]
    while stack:
        item, put = stack.pop()
        if isinstance(item, str):
            put(LONE_SURROGATE.sub("\ufffd", item))
        elif isinstance(item, dict):
            out: dict[object, object] = {}
            put(out)
            for k, v in item.items():
                key = LONE_SURROGATE.sub("\ufffd", k) if isinstance(k, str) else k
                out[key] = None
                stack.append((v, partial(out.__setitem__, key)))
        elif isinstance(item, list):
            copy: list[object] = [None] * len(item)
            put(copy)
            stack.extend((v, partial(copy.__setitem__, n)) for n, v in enumerate(item))
        else:
            put(item)
    return cast(_V, root[0])


def _preview(value: object, limit: int = 120) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value if isinstance(value, str) else repr(value)
    text = text.strip().replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "..."
