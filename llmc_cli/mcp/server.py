"""A small synchronous MCP server core: a registry of tools and the protocol around them.

Dual-era, as basic/versioning.mdx (2026-07-28) describes: an `initialize` request selects legacy
semantics (2024-11-05 .. 2025-11-25) for this connection; a request whose `_meta` names
`io.modelcontextprotocol/protocolVersion` is served statelessly under that modern version.
The transport is not our business: `handle(message, send)` is all a host calls (server/stdio.py,
the gateway's connections, or the client's in-memory transport), and `send` may be called later
from a worker thread. Requests it sends its client (elicitation, sampling, roots) await their
replies on the request matcher (mcp/inflight.py). OpenTelemetry, when enabled, watches through
mcp/observe.py: this package imports none of it.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, cast

from llmc_cli.errors import ProtocolError, RpcError, TimeoutExpired
from llmc_cli.mcp import jsonrpc, observe
from llmc_cli.mcp.inflight import InFlight
from llmc_cli.mcp.messages import RequestId, object_at, request_id
from llmc_cli.mcp.schema_subset import Check, compile_check
from llmc_cli.mcp.tool_error import ToolError as ToolError  # re-exported: handlers import it from here
from llmc_cli.mcp.validation import CompiledSchemas
from llmc_cli.mcp.versions import LEGACY_VERSIONS, MODERN_VERSIONS
from llmc_cli.mcp.versions import META_PREFIX as META
from llmc_cli.mcp.workers import Workers
from llmc_cli.model import JSON, JSONObject, dataclass

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

Send = Callable[[JSONObject], None]


@dataclass
class ToolDef:
    name: str
    description: str
    input_schema: JSONObject
    handler: Callable[[JSONObject], object]  # returns the structured result (a JSON object) or text
    output_schema: JSONObject | None = None
    annotations: JSONObject = field(default_factory=dict)
    title: str | None = None
    # The text blocks of a structured result for people and models (a file's text rather than a
    # JSON object); None: the structured result serialized as JSON.
    text: Callable[[Any], list[str]] | None = None

    def describe(self) -> JSONObject:
        out: JSONObject = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        if self.title:
            out["title"] = self.title
        if self.output_schema:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        return out


class RequestError(Exception):
    """Raised while serving a request: the reply is this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: JSON = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class McpServer:
    """One connection's server. Tool calls (and `pooled` methods) run on a small pool so a slow
    one never stops the server from answering ping or honouring a cancellation; everything else
    answers inline."""

    pooled: frozenset[str] = frozenset()  # methods besides tools/call that may take long
    # Set by a caller whose thread serves one request alone and waits for its reply anyway (the
    # HTTP gateway's 2026-07-28 requests answered with JSON): pooled work then runs on that
    # thread, as a hand-off to a pool thread and back only adds two thread switches.
    inline_calls = False
    # Set by a host with one client per connection (stdio): once a 2026-07-28 request was served,
    # a later `initialize` is refused with UnsupportedProtocolVersion naming the modern versions,
    # as the mcp SDK's own server does. A dual-era client whose server/discover probe timed out
    # (a slow start, a loaded machine) falls back to initialize although the probe was answered;
    # the refusal tells it to probe again and stay modern, instead of downgrading the connection.
    era_by_first_request = False

    def __init__(
        self,
        name: str,
        version: str,
        tools: list[ToolDef],
        *,
        instructions: str | None = None,
        page_size: int = 100,
        workers: int = 4,
        on_close: Callable[[], None] | None = None,
        shared_workers: Workers | None = None,
    ) -> None:
        """`shared_workers`: threads shared with other connections (the gateway, whose HTTP hosts
        may get a connection per request), instead of a pool of `workers` threads of its own."""
        self.server_info: JSONObject = {"name": name, "version": version}
        self.instructions = instructions
        self.tools = {t.name: t for t in tools}
        self.page_size = page_size
        self.legacy_version: str | None = None  # set by `initialize`
        self.modern_served = False  # a request with the 2026-07-28 envelope was taken (era_by_first_request)
        self.client_info: JSONObject = {}  # from `initialize`; modern requests carry theirs in _meta
        self.client_capabilities: JSONObject = {}
        # Where messages that answer no request go (list_changed): set by the host (stdio: stdout).
        self.channel: Send | None = None
        # A pool of its own is started at the first request that needs one (a listing needs none).
        self._pool: ThreadPoolExecutor | Workers | None = shared_workers
        self._workers = workers
        self._lock = threading.Lock()
        self._cancelled: set[RequestId | None] = set()
        self._running: set[RequestId | None] = set()
        self._on_close = on_close
        self._closed = False
        self._born = time.monotonic()
        self._asked = InFlight()  # our requests to the client
        self._ask_ids = itertools.count(1)

    def attach(self, channel: Send) -> None:
        """The connection's own way to the client, for notifications that answer no request."""
        self.channel = channel

    # ------------------------------------------------------------------ entry point
    def handle(self, message: JSONObject, send: Send) -> None:
        try:
            kind = jsonrpc.kind_of(message)
        except ProtocolError as exc:
            msg_id = request_id(message) if isinstance(message, dict) else None
            send(jsonrpc.error(msg_id, jsonrpc.INVALID_REQUEST, exc.message))
            return
        if kind == "notification":
            self._notification(message)
            return
        if kind != "request":
            self._on_reply(message)
            return
        # kind_of checked that method is a string; an id JSON-RPC does not allow is answered as null.
        msg_id, method = request_id(message), str(message["method"])
        params = message.get("params") or {}
        watcher = observe.SERVER_OBSERVER
        span = (
            watcher.server_span(method, params, msg_id, self.span_attributes(params))
            if watcher is not None and isinstance(params, dict)
            else None
        )
        if span is None:
            self._request(msg_id, method, params, send)
            return
        with span.current():  # pool threads take the context along (run_in_pool)
            self._request(msg_id, method, params, span.sending(send))

    def span_attributes(self, params: JSONObject) -> dict[str, object]:
        """What the transport and era say about a request, for its SERVER span (telemetry on)."""
        meta = params.get("_meta")
        version = meta.get(META + "protocolVersion") if isinstance(meta, dict) else None
        version = version if isinstance(version, str) else self.legacy_version or params.get("protocolVersion")
        return {"network.transport": "pipe", **({"mcp.protocol.version": version} if isinstance(version, str) else {})}

    def _request(self, msg_id: RequestId | None, method: str, params: JSON, send: Send) -> None:
        try:
            if not isinstance(params, dict):
                raise RequestError(jsonrpc.INVALID_PARAMS, "params must be an object")
            too_deep = jsonrpc.too_deep(params)
            if too_deep:
                raise RequestError(jsonrpc.INVALID_PARAMS, too_deep)
            modern = self._era(method, params)
            if modern:
                self.modern_served = True
            if method == "tools/call":
                self._start_call(msg_id, params, modern, send)
                return
            if method in self.pooled:
                self.run_in_pool(msg_id, lambda: self._dispatch(method, params, modern), modern, send, method)
                return
            value = self._dispatch(method, params, modern)
            send(jsonrpc.result(msg_id, self.finish(value, modern)))
        except RequestError as exc:
            send(jsonrpc.error(msg_id, exc.code, exc.message, exc.data))
        except Exception as exc:  # noqa: BLE001 - a bug: answer the request, keep serving, log the trace to stderr
            traceback.print_exc(file=sys.stderr)
            send(jsonrpc.error(msg_id, jsonrpc.INTERNAL_ERROR, f"internal error: {exc}"))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        watcher = observe.SERVER_OBSERVER
        if watcher is not None:  # mcp.server.session.duration: this connection's life
            attributes = {k: v for k, v in self.span_attributes({}).items() if k != "mcp.session.id"}
            watcher.server_session_ended(time.monotonic() - self._born, attributes)
        if self._on_close is not None:
            self._on_close()  # stop processes and searches first, so running calls return
        with self._lock:
            pool, self._pool = self._pool, self._pool if isinstance(self._pool, Workers) else None
        if pool is not None and not isinstance(pool, Workers):
            pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ eras
    def _era(self, method: str, params: JSONObject) -> str | None:
        """The modern version this request is served under, or None for the legacy session."""
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        version = meta.get(META + "protocolVersion")
        if method in ("initialize", "ping") and version is None:
            return None
        if version is None:
            if self.legacy_version is not None:
                return None
            raise RequestError(
                jsonrpc.INVALID_PARAMS,
                f"missing _meta['{META}protocolVersion']: send initialize first (MCP up to "
                f"2025-11-25) or put the version in every request's _meta ({MODERN_VERSIONS[0]})",
            )
        if version in LEGACY_VERSIONS and self.legacy_version is not None:
            return None
        if version not in MODERN_VERSIONS:
            raise RequestError(
                jsonrpc.UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(MODERN_VERSIONS + LEGACY_VERSIONS), "requested": str(version)},
            )
        if not isinstance(meta.get(META + "clientCapabilities"), dict):
            raise RequestError(jsonrpc.INVALID_PARAMS, f"missing _meta['{META}clientCapabilities']")
        return str(version)

    def finish(self, value: JSONObject, modern: str | None) -> JSONObject:
        """Modern results name their type and the server on every reply (basic/index.mdx)."""
        if modern:
            value = {"resultType": "complete", **value}
            value["_meta"] = {**object_at(value, "_meta"), META + "serverInfo": self.server_info}
        return value

    # ------------------------------------------------------------------ methods
    def _capabilities(self) -> JSONObject:
        return {"tools": {"listChanged": False}}

    def _dispatch(self, method: str, params: JSONObject, modern: str | None) -> JSONObject:
        if method == "initialize":
            requested = params.get("protocolVersion")
            if self.era_by_first_request and self.modern_served:
                raise RequestError(
                    jsonrpc.UNSUPPORTED_PROTOCOL_VERSION,
                    f"this connection serves MCP {MODERN_VERSIONS[0]} (a request of that version came first): "
                    "initialize is not accepted on it",
                    {"supported": list(MODERN_VERSIONS), **({"requested": requested} if isinstance(requested, str) else {})},
                )
            info, caps = params.get("clientInfo"), params.get("capabilities")
            self.client_info = info if isinstance(info, dict) else {}
            self.client_capabilities = caps if isinstance(caps, dict) else {}
            # Same version when we speak it, else our latest legacy one (lifecycle.mdx).
            self.legacy_version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
            out: JSONObject = {
                "protocolVersion": self.legacy_version,
                "capabilities": self._capabilities(),
                "serverInfo": self.server_info,
            }
            if self.instructions:
                out["instructions"] = self.instructions
            return out
        if method == "server/discover":
            out = {
                "supportedVersions": list(MODERN_VERSIONS + LEGACY_VERSIONS),
                "capabilities": self._capabilities(),
                "ttlMs": 0,
                "cacheScope": "private",
            }
            if self.instructions:
                out["instructions"] = self.instructions
            return out
        if method == "ping":
            return {}
        if method == "tools/list":
            return self._list_tools(params, modern)
        raise RequestError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}")

    def _list_tools(self, params: JSONObject, modern: str | None) -> JSONObject:
        # registration order: deterministic (tools.mdx)
        out = self.page("tools", [t.describe() for t in self.tools.values()], params)
        if modern:
            # The list depends on the server's configuration only; "private": it names local paths.
            out.update(ttlMs=0, cacheScope="private")
        return out

    def page(self, key: str, items: Sequence[JSON], params: JSONObject) -> JSONObject:
        """One page of a list result; the cursor is the index of the page's first item."""
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            if not (isinstance(cursor, str) and cursor.isdigit() and int(cursor) < len(items)):
                raise RequestError(jsonrpc.INVALID_PARAMS, f"invalid cursor: {cursor!r}")
            start = int(cursor)
        out: JSONObject = {key: list(items[start : start + self.page_size])}
        if start + self.page_size < len(items):
            out["nextCursor"] = str(start + self.page_size)
        return out

    def _start_call(self, msg_id: RequestId | None, params: JSONObject, modern: str | None, send: Send) -> None:
        tool = self._tool_for(params)
        self.run_in_pool(msg_id, lambda: self._run_tool(tool, object_at(params, "arguments")), modern, send, tool.name)

    def _tool_for(self, params: JSONObject) -> ToolDef:
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise RequestError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name}")
        if not isinstance(params.get("arguments", {}), dict):
            raise RequestError(jsonrpc.INVALID_PARAMS, "arguments must be an object")
        return tool

    def run_in_pool(
        self, msg_id: RequestId | None, work: Callable[[], JSONObject], modern: str | None, send: Send, label: str
    ) -> None:
        """Answer a request from a pool thread: a slow one never holds up ping or a cancellation."""
        with self._lock:
            self._running.add(msg_id)
        if self.inline_calls:
            self._answer_from_pool(msg_id, work, modern, send, label)
            return
        watcher = observe.SERVER_OBSERVER
        answer = self._answer_from_pool if watcher is None else watcher.in_context(self._answer_from_pool)
        self._threads().submit(answer, msg_id, work, modern, send, label)

    def _threads(self) -> ThreadPoolExecutor | Workers:
        with self._lock:
            if self._pool is None:
                if self._closed:
                    raise RuntimeError("the server is closed")
                from concurrent.futures import ThreadPoolExecutor  # it imports logging: only once a tool runs

                self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="llmc-tool")
            return self._pool

    def _answer_from_pool(
        self, msg_id: RequestId | None, work: Callable[[], JSONObject], modern: str | None, send: Send, label: str
    ) -> None:
        try:
            reply = jsonrpc.result(msg_id, self.finish(work(), modern))
        except RequestError as exc:
            reply = jsonrpc.error(msg_id, exc.code, exc.message, exc.data)
        except Exception as exc:  # noqa: BLE001 - a bug: the request still gets an answer, the trace goes to stderr
            traceback.print_exc(file=sys.stderr)
            reply = jsonrpc.error(msg_id, jsonrpc.INTERNAL_ERROR, f"internal error in {label}: {exc}")
        with self._lock:
            self._running.discard(msg_id)
            cancelled = msg_id in self._cancelled
            self._cancelled.discard(msg_id)
        if not cancelled:  # a cancelled request gets no further messages (cancellation.mdx)
            send(reply)

    @staticmethod
    def _run_tool(tool: ToolDef, arguments: JSONObject) -> JSONObject:
        try:
            problem = check_arguments(tool.input_schema, arguments, owner=tool.name)
            if problem:
                raise ToolError(f"invalid arguments for {tool.name}: {problem}")
            value = tool.handler(arguments)
        except ToolError as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        if isinstance(value, str):
            return {"content": [{"type": "text", "text": value}], "isError": False}
        # Not text: the structured result, a JSON object by the handler's contract (ToolDef.handler;
        # the workspace's are TypedDicts of JSON values, which mypy cannot see as JSON).
        structured = cast(JSON, value)
        if tool.text is not None:
            blocks: list[JSON] = [{"type": "text", "text": text} for text in tool.text(value)]
            return {"content": blocks, "structuredContent": structured, "isError": False}
        # Otherwise structured results also go out as serialized JSON text, for clients that
        # ignore structuredContent (tools.mdx, "Structured Content").
        text = json.dumps(value, ensure_ascii=False)
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}

    def cancelled(self, msg_id: RequestId | None) -> bool:
        """Has the client cancelled this request (its reply will be dropped)?"""
        with self._lock:
            return msg_id in self._cancelled

    # ------------------------------------------------------------------ requests to the client
    def ask_client(self, method: str, params: JSONObject, send: Send, timeout: float = 600.0) -> JSONObject:
        """A request to the client (initialize era: elicitation, sampling, roots), sent where the
        request being served is answered; waits for the reply. RpcError for an error reply."""
        ask_id = f"llmc-{next(self._ask_ids)}"
        watcher = observe.SERVER_OBSERVER
        if watcher is None:
            return self._ask_client(ask_id, method, params, send, timeout)
        # A request llmc sends: a CLIENT span of its own (the conventions: a server reports the
        # operations it initiates as client spans) whose context goes in _meta (SEP-414).
        with watcher.client_span(method, ask_id) as context:
            if context:
                params = {**params, "_meta": {**object_at(params, "_meta"), **context}}
            return self._ask_client(ask_id, method, params, send, timeout)

    def _ask_client(self, ask_id: str, method: str, params: JSONObject, send: Send, timeout: float) -> JSONObject:
        try:
            reply = self._asked.exchange(ask_id, lambda: send(jsonrpc.request(ask_id, method, params)), timeout)
        except TimeoutError:
            raise TimeoutExpired(f"the client did not answer {method} within {timeout:g}s") from None
        if "error" in reply:
            err = object_at(reply, "error")
            code = err.get("code", 0)
            raise RpcError(
                f"the client refused {method}: {err.get('message', 'error')}",
                code=code if isinstance(code, int) else 0,
                data=err.get("data"),
            )
        result = reply.get("result")
        if not isinstance(result, dict):
            raise RpcError(f"the client's reply to {method} is not an object", code=jsonrpc.INVALID_REQUEST)
        return result

    def _on_reply(self, message: JSONObject) -> None:
        self._asked.resolve(message)  # a reply to nothing we asked (late, after a timeout) is dropped

    def _notification(self, message: JSONObject) -> None:
        if message["method"] == "notifications/cancelled":
            cancelled = object_at(message, "params").get("requestId")
            with self._lock:
                if isinstance(cancelled, (int, str)) and cancelled in self._running:
                    self._cancelled.add(cancelled)
        # notifications/initialized and anything unknown need no answer


# ---------------------------------------------------------------------- argument checks
def _lenient(schema: Any) -> Check:
    check = compile_check(schema, exact=False)
    assert check is not None  # lenient compilation raises rather than giving up
    return check


# Our own tools' schemas, each compiled once (mcp/validation.py's seam).
_CHECKS: CompiledSchemas[Check] = CompiledSchemas(_lenient)


def check_arguments(schema: Mapping[str, Any], value: object, where: str = "", owner: str | None = None) -> str | None:
    """The subset of JSON Schema our own tool schemas use (mcp/schema_subset.py: type, required,
    properties, additionalProperties: false, items, enum, minimum, maximum, minItems, maxItems,
    minLength, ...), compiled once per schema. Returns the first problem as one line, or None."""
    return _CHECKS.get(schema, owner)(value, where)
