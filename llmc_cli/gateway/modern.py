"""What makes a 2026-07-28 request over HTTP malformed (basic/index.mdx _meta; transports,
Server Validation): the version, capabilities and the headers that repeat the body. Plain
functions of the message and a header lookup: no socket."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import TYPE_CHECKING

from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSON, JSONObject, object_at
from llmc_cli.mcp.versions import LEGACY_VERSIONS, MODERN_VERSIONS
from llmc_cli.mcp.versions import META_PREFIX as META

if TYPE_CHECKING:
    from llmc_cli.gateway.connection import GatewayConnection

OPEN_ENDED = "subscriptions/listen"  # its stream lasts until the host drops it: no reply deadline
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # what Mcp-Name repeats
REMOVED = {"initialize", "ping", "logging/setLevel"}  # initialize-era methods a 2026-07-28 request cannot use


def params_of(message: JSONObject) -> JSONObject:
    """A message's params object; {} when it has none (or something else in their place)."""
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def modern_problem(message: JSONObject, header: Callable[[str], str | None]) -> tuple[int, str, JSON] | None:
    """(JSON-RPC code, message, data) to answer with 400; None when the request is well formed."""
    method = message["method"]
    params = params_of(message)
    stated = params.get("_meta")
    meta: JSONObject = stated if isinstance(stated, dict) else {}
    header_version = (header("MCP-Protocol-Version") or "").strip()
    version = meta.get(META + "protocolVersion")
    if not isinstance(version, str):
        return jsonrpc.INVALID_PARAMS, f"missing _meta['{META}protocolVersion']", None
    if header_version != version:
        return (
            jsonrpc.HEADER_MISMATCH,
            f"Header mismatch: MCP-Protocol-Version {header_version or '(missing)'} does not match the body's {version}",
            None,
        )
    if version not in MODERN_VERSIONS:
        return (
            jsonrpc.UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(MODERN_VERSIONS + LEGACY_VERSIONS), "requested": version},
        )
    if not isinstance(meta.get(META + "clientCapabilities"), dict):
        return jsonrpc.INVALID_PARAMS, f"missing _meta['{META}clientCapabilities']", None
    header_method = (header("Mcp-Method") or "").strip()
    if header_method != method:
        return (
            jsonrpc.HEADER_MISMATCH,
            f"Header mismatch: Mcp-Method {header_method or '(missing)'} does not match the body's {method}",
            None,
        )
    field = NAMED.get(method)
    if field and isinstance(params.get(field), str):
        header_name = decoded(header("Mcp-Name"))
        if header_name != params[field]:
            return (
                jsonrpc.HEADER_MISMATCH,
                f"Header mismatch: Mcp-Name {header_name!r} does not match the body's {field} {params[field]!r}",
                None,
            )
    return None


def decoded(value: str | None) -> str | None:
    """A header value as sent: surrounding whitespace is not part of it (RFC 9110 5.5), and the
    =?base64?...?= form carries what a header cannot (2026-07-28 transports, Value Encoding)."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


def status_of(reply: JSONObject) -> int:
    """2026-07-28 on HTTP: an unknown method is 404; a request refused for its protocol fields 400."""
    code = object_at(reply, "error").get("code")
    if code == jsonrpc.METHOD_NOT_FOUND:
        return 404
    if code in jsonrpc.MODERN_ERROR_CODES:
        return 400
    return 200


def may_send_first(connection: GatewayConnection, message: JSONObject) -> bool:
    """Could anything reach the host before this call's result? Progress it asked for, log
    messages it opted into (2026-07-28), requests to it (elicitation, sampling: initialize era).
    Otherwise the result goes as plain JSON, and the connection stays open for the next request."""
    params = params_of(message)
    stated = params.get("_meta")
    meta: JSONObject = stated if isinstance(stated, dict) else {}
    if "progressToken" in meta or meta.get("io.modelcontextprotocol/logLevel") or message["method"] == OPEN_ENDED:
        return True
    return connection.legacy_version is not None  # a session: upstream logs, elicitation, sampling
