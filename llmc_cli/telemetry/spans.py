"""What the spans record: MCP client and server spans by the OpenTelemetry semantic conventions
for MCP (gen-ai/mcp.md), and the generic span scope the agent's GenAI spans use. Imported only
when telemetry is enabled (through telemetry.otel).

Client span: one per request a ClientSession sends, kind CLIENT, named `{mcp.method.name} {target}`
(target: gen_ai.tool.name or gen_ai.prompt.name; never the resource URI, which is high
cardinality), its W3C trace context injected into `params._meta` (SEP-414). Server span: one per
request one of llmc's servers receives, kind SERVER, parented from the context in its `_meta`.
Both set error.type to the JSON-RPC code, or `tool_error` for a result with isError, and the
matching metric (mcp.{client,server}.operation.duration) with the low-cardinality attributes only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from llmc_cli.errors import LlmcError, RpcError, TimeoutExpired
from llmc_cli.mcp.messages import JSONObject
from llmc_cli.telemetry import Attributes, ServerSpan, Span

if TYPE_CHECKING:
    from llmc_cli.mcp.session import ClientSession
    from llmc_cli.telemetry.otel import Otel

TARGET_PARAM = {"tools/call": ("name", "gen_ai.tool.name"), "prompts/get": ("name", "gen_ai.prompt.name")}
KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}
RESOURCE_METHODS = ("resources/read", "resources/subscribe", "resources/unsubscribe")
META_KEYS = ("traceparent", "tracestate", "baggage")
# The attributes the conventions list for mcp.{client,server}.operation.duration: nothing per
# request (ids, URIs, arguments) goes on a metric.
METRIC_ATTRIBUTES = frozenset(
    {
        "mcp.method.name",
        "error.type",
        "gen_ai.prompt.name",
        "gen_ai.tool.name",
        "rpc.response.status_code",
        "gen_ai.operation.name",
        "mcp.protocol.version",
        "network.protocol.name",
        "network.protocol.version",
        "network.transport",
        "server.address",
        "server.port",
    }
)
RESULT_LIMIT = 8192  # characters of a captured tool result on a span


def error_type(error: BaseException) -> str:
    """error.type for an exception: the JSON-RPC code when there is one (the MCP conventions),
    'timeout' for a timeout, else the class name (low cardinality)."""
    if isinstance(error, RpcError):
        return str(error.code)
    if isinstance(error, TimeoutExpired):
        return "timeout"
    return type(error).__name__


def describe_request(method: str, params: Mapping[str, object]) -> tuple[str, dict[str, AttributeValue]]:
    """A request's span name `{mcp.method.name} {target}` and the attributes its method and
    params give, the same on the client and the server side."""
    attributes: dict[str, AttributeValue] = {"mcp.method.name": method}
    name = method
    if method in TARGET_PARAM:
        key, attribute = TARGET_PARAM[method]
        target = params.get(key)
        if isinstance(target, str):
            name = f"{method} {target}"
            attributes[attribute] = target
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
    if method in RESOURCE_METHODS and isinstance(uri := params.get("uri"), str):
        attributes["mcp.resource.uri"] = uri
    return name, attributes


def transport_attributes(transport: object) -> dict[str, AttributeValue]:
    """network.transport (pipe for stdio, tcp for HTTP, unix for a session keeper's socket),
    server.address/port, and the HTTP session id, from whatever the transport exposes."""
    url = getattr(transport, "url", None)
    if isinstance(url, str):
        parts = urlsplit(url)
        attributes: dict[str, AttributeValue] = {"network.transport": "tcp", "network.protocol.name": "http"}
        if parts.hostname:
            attributes["server.address"] = parts.hostname
            attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
        session_id = getattr(transport, "session_id", None)
        if isinstance(session_id, str):
            attributes["mcp.session.id"] = session_id
        return attributes
    path = getattr(transport, "path", None)
    if isinstance(path, str):  # the session keeper's socket
        return {"network.transport": "unix", "server.address": path}
    return {"network.transport": "pipe"}


def trace_carrier(meta: object) -> dict[str, str]:
    """The W3C trace context keys of a request's `_meta` (SEP-414: unprefixed)."""
    if not isinstance(meta, Mapping):
        return {}
    return {k: v for k in META_KEYS if isinstance(v := meta.get(k), str)}


def _reply_failure(span: trace.Span, reply: Mapping[str, object]) -> tuple[str | None, dict[str, AttributeValue]]:
    """error.type (and rpc.response.status_code) of a JSON-RPC reply, set on the span with an
    error status; (None, {}) for a success."""
    error = reply.get("error")
    result = reply.get("result")
    if isinstance(error, Mapping):
        code = str(error.get("code"))
        span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))[:200]))
        return code, {"error.type": code, "rpc.response.status_code": code}
    if isinstance(result, Mapping) and result.get("isError") is True:
        span.set_status(Status(StatusCode.ERROR, "the tool reported an error"))
        return "tool_error", {"error.type": "tool_error"}
    return None, {}


class OtelSpan(Span):
    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self.marked = False  # error() was called: the block's own verdict stands

    def set(self, key: str, value: AttributeValue) -> None:
        self._span.set_attribute(key, value)

    def event(self, name: str, attributes: Attributes) -> None:
        self._span.add_event(name, dict(attributes))

    def error(self, error_type: str, description: str = "") -> None:
        self.marked = True
        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, description or None))


class SpanScope:
    """A span made current for a block; an exception leaving the block marks it as an error."""

    def __init__(self, otel: Otel, name: str, kind: SpanKind, attributes: Attributes, parent: otel_context.Context) -> None:
        self._span = otel.tracer.start_span(name, kind=kind, attributes=dict(attributes), context=parent)
        self._token: object | None = None
        self._handle = OtelSpan(self._span)

    def __enter__(self) -> OtelSpan:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._handle

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        if error is not None and not self._handle.marked:
            self._span.set_attribute("error.type", error_type(error))
            self._span.set_status(Status(StatusCode.ERROR, str(error)[:200] or None))
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
        self._span.end()


class OtelServerSpan(ServerSpan):
    """A request one of llmc's servers received: current while it is dispatched, ended by its
    reply (which may be sent from a pool thread, or much later for a long tool call)."""

    def __init__(self, otel: Otel, method: str, params: Mapping[str, object], request_id: object, attributes: Attributes) -> None:
        self.otel = otel
        self.method = method
        self.request_id = request_id
        name, described = describe_request(method, params)
        self.attributes: dict[str, AttributeValue] = {**described, **attributes}
        if request_id is not None:
            self.attributes["jsonrpc.request.id"] = str(request_id)
        masked = otel.learn(params.get("arguments"))
        if method == "tools/call" and otel.settings.capture_content:
            self.attributes["gen_ai.tool.call.arguments"] = json.dumps(masked, default=str)
        # The host's trace context when it sent one (the conventions: the context from _meta is
        # the parent); else the current one, or a trace of its own.
        carrier = trace_carrier(params.get("_meta"))
        parent = propagate.extract(carrier) if carrier else otel.parent()
        self.span = otel.tracer.start_span(name, kind=SpanKind.SERVER, attributes=self.attributes, context=parent)
        # Current while dispatched: the host's baggage comes along to the gateway's upstream calls.
        self.context = trace.set_span_in_context(self.span, parent)
        self.started = time.monotonic()
        self._ended = False

    @contextmanager
    def current(self) -> Iterator[None]:
        token = otel_context.attach(self.context)
        try:
            yield
        finally:
            otel_context.detach(token)

    def sending(self, send: Callable[[JSONObject], None]) -> Callable[[JSONObject], None]:
        def traced(message: JSONObject) -> None:
            if not self._ended and message.get("id") == self.request_id and ("result" in message or "error" in message):
                self.end(message)
            send(message)

        return traced

    def end(self, reply: JSONObject) -> None:
        self._ended = True
        failure, failed = _reply_failure(self.span, reply)
        self.span.set_attributes(failed)
        if failure is None and self.method == "tools/call" and self.otel.settings.capture_content:
            masked = self.otel.masker(reply.get("result"))
            self.span.set_attribute("gen_ai.tool.call.result", json.dumps(masked, default=str)[:RESULT_LIMIT])
        self.span.end()
        metric = {k: v for k, v in {**self.attributes, **failed}.items() if k in METRIC_ATTRIBUTES}
        self.otel.mcp_server_duration.record(time.monotonic() - self.started, metric)


class McpObserver:
    """mcp.observe.Observer: a CLIENT span per request, trace context into `_meta`, metrics."""

    def __init__(self, otel: Otel) -> None:
        self.otel = otel

    def request(self, session: ClientSession, request_id: int, method: str, params: JSONObject) -> RequestSpan:
        name, attributes = describe_request(method, params)
        attributes["jsonrpc.request.id"] = str(request_id)
        version = session.protocol_version or (params.get("protocolVersion") if method == "initialize" else None)
        if isinstance(version, str):
            attributes["mcp.protocol.version"] = version
        attributes.update(transport_attributes(session.transport))
        masked = self.otel.learn(params.get("arguments"))
        if method == "tools/call" and self.otel.settings.capture_content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(masked, default=str)
        span = self.otel.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes, context=self.otel.parent())
        return RequestSpan(self.otel, span, method, attributes, session.transport)

    def session_ended(self, session: ClientSession, seconds: float) -> None:
        attributes = transport_attributes(session.transport)
        if session.protocol_version:
            attributes["mcp.protocol.version"] = session.protocol_version
        self.otel.mcp_client_session.record(seconds, {k: v for k, v in attributes.items() if k in METRIC_ATTRIBUTES})


class RequestSpan:
    """One request in flight: its CLIENT span, ended with the reply or the error."""

    def __init__(self, otel: Otel, span: trace.Span, method: str, attributes: Attributes, transport: object) -> None:
        self.otel = otel
        self.transport = transport
        self.span = span
        self.method = method
        self.attributes = attributes
        self.started = time.monotonic()

    def meta(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(self.span, self.otel.parent()))
        return carrier

    def finish(self, result: Mapping[str, object] | None, error: BaseException | None) -> None:
        failed: dict[str, AttributeValue] = {}
        if error is not None:
            failed["error.type"] = error_type(error)
            if isinstance(error, RpcError):
                failed["rpc.response.status_code"] = str(error.code)
            message = error.message if isinstance(error, LlmcError) else str(error)
            self.span.set_status(Status(StatusCode.ERROR, message[:200]))
        elif result is not None:
            failure, failed = _reply_failure(self.span, {"result": result})
            if failure is None and self.method == "tools/call" and self.otel.settings.capture_content:
                masked = self.otel.masker(result)
                self.span.set_attribute("gen_ai.tool.call.result", json.dumps(masked, default=str)[:RESULT_LIMIT])
        self.span.set_attributes(failed)
        session_id = getattr(self.transport, "session_id", None)
        if isinstance(session_id, str) and "mcp.session.id" not in self.attributes:
            self.span.set_attribute("mcp.session.id", session_id)  # the initialize reply brought it
        self.span.end()
        metric = {k: v for k, v in {**self.attributes, **failed}.items() if k in METRIC_ATTRIBUTES}
        self.otel.mcp_client_duration.record(time.monotonic() - self.started, metric)
