"""The OpenTelemetry SDK behind llmc_cli.telemetry: imported only when telemetry is enabled.

Configuration is the SDK's own: OTEL_EXPORTER_OTLP_ENDPOINT (and the per-signal variants),
OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER,
OTEL_PROPAGATORS. Only OTLP over HTTP with protobuf is exported (the `otel` extra).

A command's telemetry must never hold it: the exporters' timeout is the flush timeout, the
final flush runs in a thread the command waits for at most that long, and the SDK's own exit
hooks are off (they would wait again, unbounded by us).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

from llmc_cli import __version__
from llmc_cli.errors import ConfigError, LlmcError, RpcError, TimeoutExpired
from llmc_cli.telemetry import ServerSpan, Settings, Span

# Bucket boundaries the conventions give (gen-ai/mcp.md, gen-ai/gen-ai-metrics.md).
MCP_DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]
GENAI_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
GENAI_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}
TARGET_PARAM = {"tools/call": ("name", "gen_ai.tool.name"), "prompts/get": ("name", "gen_ai.prompt.name")}
RESOURCE_METHODS = ("resources/read", "resources/subscribe", "resources/unsubscribe")
META_KEYS = ("traceparent", "tracestate", "baggage")
SCOPE = "llmc"


class WatchedSpanExporter(SpanExporter):
    """The OTLP exporter, remembering whether an export failed (the SDK only logs it)."""

    def __init__(self, inner: OTLPSpanExporter, failures: list[str]) -> None:
        self._inner, self._failures = inner, failures

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        result = self._inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self._failures.append("traces")
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()  # type: ignore[no-untyped-call]


class WatchedMetricExporter(MetricExporter):
    def __init__(self, inner: OTLPMetricExporter, failures: list[str]) -> None:
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self._inner, self._failures = inner, failures

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        result = self._inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        if result is not MetricExportResult.SUCCESS:
            self._failures.append("metrics")
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown(timeout_millis=timeout_millis)


class WatchedLogExporter(LogRecordExporter):
    def __init__(self, inner: OTLPLogExporter, failures: list[str]) -> None:
        self._inner, self._failures = inner, failures

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        result = self._inner.export(batch)
        if result is not LogRecordExportResult.SUCCESS:
            self._failures.append("logs")
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        self._inner.shutdown()  # type: ignore[no-untyped-call]


class OtelSpan(Span):
    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self.marked = False  # error() was called: the block's own verdict stands

    def set(self, key: str, value: Any) -> None:
        self._span.set_attribute(key, value)

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        self._span.add_event(name, dict(attributes))

    def error(self, error_type: str, description: str = "") -> None:
        self.marked = True
        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, description or None))


def error_type(error: BaseException) -> str:
    """error.type for an exception: the JSON-RPC code when there is one (the MCP conventions),
    'timeout' for a timeout, else the class name (low cardinality)."""
    if isinstance(error, RpcError):
        return str(error.code)
    if isinstance(error, TimeoutExpired):
        return "timeout"
    return type(error).__name__


class Otel:
    def __init__(self, command: str, settings: Settings) -> None:
        protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                    or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
        if protocol != "http/protobuf":
            raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: llmc exports OTLP over http/protobuf only")
        # The SDK logs export failures itself, on stderr, once per batch: llmc says it once.
        logging.getLogger("opentelemetry").addHandler(logging.NullHandler())
        logging.getLogger("opentelemetry").propagate = False
        self.settings = settings
        self.failures: list[str] = []
        resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or "llmc",
                                    "service.version": __version__})
        timeout = settings.flush_timeout
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(BatchSpanProcessor(
            WatchedSpanExporter(OTLPSpanExporter(timeout=timeout), self.failures),
            schedule_delay_millis=1000))
        self.meter_provider = MeterProvider(resource=resource, shutdown_on_exit=False, metric_readers=[
            PeriodicExportingMetricReader(WatchedMetricExporter(OTLPMetricExporter(timeout=timeout), self.failures),
                                          export_interval_millis=60_000, export_timeout_millis=timeout * 1000)])
        self.logger_provider: LoggerProvider | None = None
        if settings.audit_logs:
            self.logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
            self.logger_provider.add_log_record_processor(BatchLogRecordProcessor(
                WatchedLogExporter(OTLPLogExporter(timeout=timeout), self.failures)))
        self.tracer = self.tracer_provider.get_tracer(SCOPE, __version__)
        meter = self.meter_provider.get_meter(SCOPE, __version__)
        self.mcp_client_duration = meter.create_histogram(
            "mcp.client.operation.duration", "s", "Duration of an MCP request as observed by llmc",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS)
        self.mcp_client_session = meter.create_histogram(
            "mcp.client.session.duration", "s", "Duration of an MCP client session",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS)
        self.mcp_server_duration = meter.create_histogram(
            "mcp.server.operation.duration", "s", "Duration of an MCP request llmc served",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS)
        self.mcp_server_session = meter.create_histogram(
            "mcp.server.session.duration", "s", "Duration of an MCP session llmc served",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS)
        self.genai_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", "s", "GenAI operation duration",
            explicit_bucket_boundaries_advisory=GENAI_DURATION_BUCKETS)
        self.genai_tokens = meter.create_histogram(
            "gen_ai.client.token.usage", "{token}", "Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=GENAI_TOKEN_BUCKETS)
        self.decisions = meter.create_counter("llmc.policy.decisions", "{decision}",
                                              "Policy decisions by decision and rule")
        # The command's root span: a child of TRACEPARENT when a CI system or a caller set one.
        # A server runs for days: no root span; each request continues its host's trace.
        carrier = {key: os.environ[key.upper()] for key in META_KEYS if os.environ.get(key.upper())}
        parent = propagate.extract(carrier) if carrier else None
        self.root: trace.Span | None = None
        self.root_context = otel_context.Context()
        if not command.startswith("llmc serve"):
            self.root = self.tracer.start_span(command, kind=SpanKind.INTERNAL, context=parent)
            self.root_context = trace.set_span_in_context(self.root, parent)
        self._token = otel_context.attach(self.root_context)

    def configure(self, config: Any) -> None:
        """The profile's [telemetry] arrived after --otel/LLMC_OTEL enabled it: take its content
        setting (audit logs need their provider from the start and stay as enabled)."""
        self.settings = Settings(self.settings.mask, audit_logs=self.settings.audit_logs,
                                 capture_content=config.capture_content, flush_timeout=self.settings.flush_timeout)

    # -- spans -------------------------------------------------------------------------------

    def _parent(self, meta: Mapping[str, Any] | None = None) -> otel_context.Context:
        """A request's `_meta` trace context if it has one; else the current span; else (a thread
        that did not inherit the context) the command's root span."""
        if meta:
            carrier = {k: v for k in META_KEYS if isinstance(v := meta.get(k), str)}
            if carrier:
                return propagate.extract(carrier)
        current = otel_context.get_current()
        if trace.get_current_span(current).get_span_context().is_valid:
            return current
        return self.root_context

    def span(self, name: str, kind: str, attributes: Mapping[str, Any],
             parent_meta: Mapping[str, Any] | None) -> Any:
        return _SpanScope(self, name, KINDS[kind], attributes, self._parent(parent_meta))

    def inject(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=self._parent())
        return carrier

    def bind(self, function: Callable[..., Any]) -> Callable[..., Any]:
        context = self._parent()

        def bound(*args: Any, **kwargs: Any) -> Any:
            token = otel_context.attach(context)
            try:
                return function(*args, **kwargs)
            finally:
                otel_context.detach(token)

        return bound

    def server_span(self, method: str, params: Mapping[str, Any], request_id: Any,
                    attributes: Mapping[str, Any]) -> "OtelServerSpan":
        return OtelServerSpan(self, method, params, request_id, attributes)

    def policy_decision(self, tool: str, decision: str, rule: str, caller: str) -> None:
        attributes = {"llmc.policy.decision": decision, "llmc.policy.rule": rule, "gen_ai.tool.name": tool,
                      "llmc.caller": caller}
        trace.get_current_span(self._parent()).add_event("llmc.policy.decision", attributes)
        self.decisions.add(1, {"llmc.policy.decision": decision, "llmc.policy.rule": rule})

    def audit_record(self, record: Mapping[str, Any]) -> None:
        if self.logger_provider is None:
            return
        attributes = {f"llmc.audit.{k}": v if isinstance(v, (str, int, float, bool)) else json.dumps(v, default=str)
                      for k, v in record.items() if v is not None}
        denied = record.get("decision") == "deny" or record.get("outcome") not in (None, "ok")
        self.logger_provider.get_logger(SCOPE + ".audit", __version__).emit(
            event_name="llmc.audit", body=json.dumps(dict(record), default=str, sort_keys=True),
            attributes=attributes, context=self._parent(),
            severity_number=SeverityNumber.WARN if denied else SeverityNumber.INFO,
            severity_text="WARN" if denied else "INFO")

    def chat_usage(self, provider: str, model: str, input_tokens: int | None, output_tokens: int | None,
                   seconds: float, failed: str | None) -> None:
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                                      "gen_ai.request.model": model}
        if failed:
            attributes["error.type"] = failed
        self.genai_duration.record(seconds, attributes, context=self._parent())
        for kind, count in (("input", input_tokens), ("output", output_tokens)):
            if count is not None:
                self.genai_tokens.record(count, {**attributes, "gen_ai.token.type": kind}, context=self._parent())

    def server_request(self, method: str, seconds: float, attributes: Mapping[str, Any]) -> None:
        self.mcp_server_duration.record(seconds, {"mcp.method.name": method, **attributes})

    def server_session_ended(self, seconds: float, attributes: Mapping[str, Any]) -> None:
        self.mcp_server_session.record(seconds, dict(attributes))

    # -- the MCP client observer --------------------------------------------------------------

    def mcp_observer(self) -> "McpObserver":
        return McpObserver(self)

    # -- the end -------------------------------------------------------------------------------

    def shutdown(self) -> str | None:
        """End the root span, flush every signal within the flush timeout (in a thread: a
        collector that never answers must not hold the command), and say so if it failed."""
        if self.root is not None:
            self.root.end()
        try:
            otel_context.detach(self._token)
        except ValueError:  # detached in another context (a signal handler's exit path)
            pass
        bound = self.settings.flush_timeout
        providers: list[Any] = [self.tracer_provider, self.meter_provider]
        if self.logger_provider is not None:
            providers.append(self.logger_provider)

        def flush() -> None:
            for provider in providers:
                try:
                    provider.shutdown()
                except Exception:  # noqa: BLE001 - an exporter's own bug must not fail the command
                    self.failures.append("shutdown")

        worker = threading.Thread(target=flush, name="llmc-otel-flush", daemon=True)
        started = time.monotonic()
        worker.start()
        worker.join(bound)
        endpoint = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                    or "http://localhost:4318")
        if worker.is_alive():
            return f"telemetry: the collector at {endpoint} did not take the data within {bound:g}s; it was dropped"
        if self.failures:
            failed = ", ".join(sorted(set(self.failures)))
            return (f"telemetry: could not export {failed} to {endpoint} "
                    f"(in {time.monotonic() - started:.1f}s); the data was dropped")
        return None


class _SpanScope:
    """A span made current for a block; an exception leaving the block marks it as an error."""

    def __init__(self, otel: Otel, name: str, kind: SpanKind, attributes: Mapping[str, Any],
                 parent: otel_context.Context) -> None:
        self._span = otel.tracer.start_span(name, kind=kind, attributes=dict(attributes), context=parent)
        self._token: object | None = None
        self._handle = OtelSpan(self._span)

    @property
    def _marked(self) -> bool:
        return self._handle.marked

    def __enter__(self) -> OtelSpan:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._handle

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        if error is not None and not self._marked:
            self._span.set_attribute("error.type", error_type(error))
            self._span.set_status(Status(StatusCode.ERROR, str(error)[:200] or None))
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
        self._span.end()


class OtelServerSpan(ServerSpan):
    def __init__(self, otel: Otel, method: str, params: Mapping[str, Any], request_id: Any,
                 attributes: Mapping[str, Any]) -> None:
        self.otel = otel
        self.method = method
        self.request_id = request_id
        name, described = describe_request(method, params)
        self.attributes: dict[str, Any] = {**described, **attributes}
        if request_id is not None:
            self.attributes["jsonrpc.request.id"] = str(request_id)
        meta = params.get("_meta")
        carrier = {k: v for k in META_KEYS if isinstance(meta, Mapping) and isinstance(v := meta.get(k), str)}
        # The host's trace context when it sent one; else a trace of its own (the conventions:
        # the context from _meta is the parent).
        parent = propagate.extract(carrier) if carrier else otel._parent()
        self.span = otel.tracer.start_span(name, kind=SpanKind.SERVER, attributes=self.attributes, context=parent)
        self.started = time.monotonic()
        self._ended = False

    def current(self) -> Any:
        return trace.use_span(self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    def sending(self, send: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
        def traced(message: dict[str, Any]) -> None:
            if not self._ended and message.get("id") == self.request_id and ("result" in message or "error" in message):
                self.end(message)
            send(message)

        return traced

    def end(self, reply: dict[str, Any]) -> None:
        self._ended = True
        failure: str | None = None
        error = reply.get("error")
        if isinstance(error, dict):
            failure = str(error.get("code"))
            self.span.set_attribute("rpc.response.status_code", failure)
            self.span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))[:200]))
        elif isinstance(reply.get("result"), dict) and reply["result"].get("isError") is True:
            failure = "tool_error"
            self.span.set_status(Status(StatusCode.ERROR, "the tool reported an error"))
        if failure:
            self.span.set_attribute("error.type", failure)
        self.span.end()
        metric = {k: v for k, v in self.attributes.items()
                  if k not in ("jsonrpc.request.id", "mcp.session.id", "mcp.resource.uri")}
        if failure:
            metric["error.type"] = failure
        self.otel.mcp_server_duration.record(time.monotonic() - self.started, metric)


class McpObserver:
    """mcp.observe.Observer: a CLIENT span per request, trace context into `_meta`, metrics."""

    def __init__(self, otel: Otel) -> None:
        self.otel = otel

    def request(self, session: Any, request_id: int, method: str, params: dict[str, Any]) -> "_RequestWatch":
        name, attributes = describe_request(method, params)
        attributes["jsonrpc.request.id"] = str(request_id)
        version = session.protocol_version or (params.get("protocolVersion") if method == "initialize" else None)
        if isinstance(version, str):
            attributes["mcp.protocol.version"] = version
        attributes.update(transport_attributes(session.transport))
        if method == "tools/call" and self.otel.settings.capture_content:
            masked = self.otel.settings.mask(params.get("arguments"))
            attributes["gen_ai.tool.call.arguments"] = json.dumps(masked, default=str)
        span = self.otel.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes,
                                           context=self.otel._parent())
        return _RequestWatch(self.otel, span, method, attributes, session.transport)

    def session_ended(self, session: Any, seconds: float) -> None:
        attributes = transport_attributes(session.transport)
        if session.protocol_version:
            attributes["mcp.protocol.version"] = session.protocol_version
        self.otel.mcp_client_session.record(seconds, attributes)


class _RequestWatch:
    def __init__(self, otel: Otel, span: trace.Span, method: str, attributes: dict[str, Any],
                 transport: Any) -> None:
        self.otel = otel
        self.transport = transport
        self.span = span
        self.method = method
        self.attributes = attributes
        self.started = time.monotonic()

    def meta(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(self.span))
        return carrier

    def finish(self, result: dict[str, Any] | None, error: BaseException | None) -> None:
        failure: str | None = None
        if error is not None:
            failure = error_type(error)
            if isinstance(error, RpcError):
                self.span.set_attribute("rpc.response.status_code", str(error.code))
            message = error.message if isinstance(error, LlmcError) else str(error)
            self.span.set_status(Status(StatusCode.ERROR, message[:200]))
        elif result is not None and result.get("isError") is True:
            failure = "tool_error"
            self.span.set_status(Status(StatusCode.ERROR, "the tool reported an error"))
        elif result is not None and self.method == "tools/call" and self.otel.settings.capture_content:
            masked = self.otel.settings.mask(result)
            self.span.set_attribute("gen_ai.tool.call.result", json.dumps(masked, default=str)[:8192])
        if failure:
            self.span.set_attribute("error.type", failure)
        session_id = getattr(self.transport, "session_id", None)
        if isinstance(session_id, str) and "mcp.session.id" not in self.attributes:
            self.span.set_attribute("mcp.session.id", session_id)  # the initialize reply brought it
        self.span.end()
        metric = {k: v for k, v in self.attributes.items()
                  if k not in ("jsonrpc.request.id", "mcp.session.id", "mcp.resource.uri", "gen_ai.tool.call.arguments")}
        if failure:
            metric["error.type"] = failure
        self.otel.mcp_client_duration.record(time.monotonic() - self.started, metric)


def describe_request(method: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A request's span name `{mcp.method.name} {target}` and the attributes its method and
    params give, the same on the client and the server side (gen-ai/mcp.md)."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    name = method
    if method in TARGET_PARAM:
        key, attribute = TARGET_PARAM[method]
        target = params.get(key)
        if isinstance(target, str):
            name = f"{method} {target}"
            attributes[attribute] = target
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
    if method in RESOURCE_METHODS and isinstance(params.get("uri"), str):
        attributes["mcp.resource.uri"] = params["uri"]
    return name, attributes


def transport_attributes(transport: Any) -> dict[str, Any]:
    """network.transport (pipe for stdio, tcp for HTTP, unix for a session keeper's socket),
    server.address/port, and the HTTP session id, from whatever the transport exposes."""
    url = getattr(transport, "url", None)
    if isinstance(url, str):
        parts = urlsplit(url)
        attributes: dict[str, Any] = {"network.transport": "tcp", "network.protocol.name": "http"}
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
