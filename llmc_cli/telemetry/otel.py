"""The OpenTelemetry SDK behind llmc_cli.telemetry: imported only when telemetry is enabled.

One Otel per process: the three providers (traces, metrics, and logs when audit records are
exported), the instruments, the command's root span, and the bounded exit. Where data goes and
what the service is called come from the standard OTEL_* variables (telemetry/exporters.py);
what a span records is telemetry/spans.py.

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
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from llmc_cli import __version__
from llmc_cli.config.secrets import Masker, argument_secrets
from llmc_cli.telemetry import Attributes, Settings
from llmc_cli.telemetry.exporters import (
    WatchedLogExporter,
    WatchedMetricExporter,
    WatchedSpanExporter,
    check_protocol,
    endpoint,
    resource,
)
from llmc_cli.telemetry.spans import KINDS, McpObserver, OtelServerSpan, SpanScope, trace_carrier

if TYPE_CHECKING:
    from llmc_cli.config.schema import TelemetryConfig
    from llmc_cli.config.secrets import Masker

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Bucket boundaries the conventions give (gen-ai/mcp.md, gen-ai/gen-ai-metrics.md).
MCP_DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]
GENAI_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
GENAI_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
SCOPE = "llmc"
LEARNED_SECRETS = 256  # secret argument values a long-running process remembers for masking


class Otel:
    def __init__(self, command: str, settings: Settings) -> None:
        check_protocol()
        # The SDK logs export failures itself, on stderr, once per batch: llmc says it once.
        logging.getLogger("opentelemetry").addHandler(logging.NullHandler())
        logging.getLogger("opentelemetry").propagate = False
        self.settings = settings
        self.masker = settings.mask  # and the secret arguments of calls seen since (learn)
        self._learning = threading.Lock()
        self.failures: list[str] = []
        self.resource: Resource = resource()
        timeout = settings.flush_timeout
        self.span_exporter = WatchedSpanExporter(timeout, self.failures, self.mask)
        self.metric_exporter = WatchedMetricExporter(timeout, self.failures)
        self.tracer_provider = TracerProvider(resource=self.resource, shutdown_on_exit=False)  # sampler: OTEL_TRACES_SAMPLER
        self.tracer_provider.add_span_processor(BatchSpanProcessor(self.span_exporter, schedule_delay_millis=1000))
        self.meter_provider = MeterProvider(
            resource=self.resource,
            shutdown_on_exit=False,
            metric_readers=[
                PeriodicExportingMetricReader(
                    self.metric_exporter, export_interval_millis=60_000, export_timeout_millis=timeout * 1000
                )
            ],
        )
        self.logger_provider: LoggerProvider | None = None
        if settings.audit_logs:
            self._start_logs()
        self.tracer = self.tracer_provider.get_tracer(SCOPE, __version__)
        meter = self.meter_provider.get_meter(SCOPE, __version__)
        self.mcp_client_duration = meter.create_histogram(
            "mcp.client.operation.duration",
            "s",
            "Duration of an MCP request as observed by llmc",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS,
        )
        self.mcp_client_session = meter.create_histogram(
            "mcp.client.session.duration",
            "s",
            "Duration of an MCP client session",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS,
        )
        self.mcp_server_duration = meter.create_histogram(
            "mcp.server.operation.duration",
            "s",
            "Duration of an MCP request llmc served",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS,
        )
        self.mcp_server_session = meter.create_histogram(
            "mcp.server.session.duration",
            "s",
            "Duration of an MCP session llmc served",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS,
        )
        self.genai_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            "s",
            "GenAI operation duration",
            explicit_bucket_boundaries_advisory=GENAI_DURATION_BUCKETS,
        )
        self.genai_tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            "{token}",
            "Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=GENAI_TOKEN_BUCKETS,
        )
        self.decisions = meter.create_counter("llmc.policy.decisions", "{decision}", "Policy decisions by decision and rule")
        # The command's root span: a child of TRACEPARENT when a CI system or a caller set one
        # (TRACESTATE and BAGGAGE come along). A server runs for days: no root span; each
        # request continues its host's trace.
        carrier = {
            key: os.environ[key.upper()] for key in ("traceparent", "tracestate", "baggage") if os.environ.get(key.upper())
        }
        parent = propagate.extract(carrier) if carrier else None
        self.root: trace.Span | None = None
        self.root_context = otel_context.Context()
        if not command.startswith("llmc serve"):
            self.root = self.tracer.start_span(command, kind=SpanKind.INTERNAL, context=parent)
            self.root_context = trace.set_span_in_context(self.root, parent)
        self._token = otel_context.attach(self.root_context)

    def _start_logs(self) -> None:
        self.logger_provider = LoggerProvider(resource=self.resource, shutdown_on_exit=False)
        self.logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(WatchedLogExporter(self.settings.flush_timeout, self.failures))
        )

    def mask(self, value: Any) -> Any:
        """Every string of `value` with every known secret masked (config.secrets.Masker.strings)."""
        return self.masker.strings(value)

    def learn(self, arguments: Any) -> Any:
        """Remember the values of a call's secret-looking arguments, so that spans exported later
        mask them wherever they are quoted (an upstream's error message); returns the arguments
        masked. A gateway runs for days: past LEARNED_SECRETS values it starts over from the
        profile's, which costs only calls whose spans were exported already."""

        found = argument_secrets(arguments)
        if found - self.masker.secrets:
            with self._learning:
                known = self.masker.secrets | found
                if len(known) > len(self.settings.mask.secrets) + LEARNED_SECRETS:
                    known = self.settings.mask.secrets | found
                self.masker = Masker(known)
        return self.masker(arguments)

    def configure(self, command: str, config: TelemetryConfig, mask: Masker | None = None) -> None:
        """The profile's [telemetry] arrived after --otel/LLMC_OTEL enabled telemetry (before any
        profile was read): its settings apply from now on, and the root span takes the full
        command name ('llmc tools list', where the flag only knew 'llmc tools')."""
        if config.flush_timeout != self.settings.flush_timeout:
            self.span_exporter.retime(config.flush_timeout)
            self.metric_exporter.retime(config.flush_timeout)
        self.settings = replace(
            self.settings,
            audit_logs=self.settings.audit_logs or config.audit_logs,
            capture_content=config.capture_content,
            flush_timeout=config.flush_timeout,
        )
        if mask is not None:  # the profile's secrets, now that it is read
            self.settings = replace(self.settings, mask=mask)
            with self._learning:
                self.masker = mask.with_secrets(self.masker.secrets)
        if self.settings.audit_logs and self.logger_provider is None:
            self._start_logs()
        if self.root is not None:
            self.root.update_name(command)

    # -- spans -------------------------------------------------------------------------------

    def parent(self, meta: Mapping[str, object] | None = None) -> otel_context.Context:
        """A request's `_meta` trace context if it has one; else the current span; else (a thread
        that did not inherit the context) the command's root span."""
        carrier = trace_carrier(meta)
        if carrier:
            return propagate.extract(carrier)
        current = otel_context.get_current()
        if trace.get_current_span(current).get_span_context().is_valid:
            return current
        return self.root_context

    def span(self, name: str, kind: str, attributes: Attributes, parent_meta: Mapping[str, object] | None) -> SpanScope:
        return SpanScope(self, name, KINDS[kind], attributes, self.parent(parent_meta))

    def inject(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=self.parent())
        return carrier

    def bind(self, function: Callable[_P, _R]) -> Callable[_P, _R]:
        context = self.parent()

        def bound(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            token = otel_context.attach(context)
            try:
                return function(*args, **kwargs)
            finally:
                otel_context.detach(token)

        return bound

    def server_span(
        self, method: str, params: Mapping[str, object], request_id: object, attributes: Attributes
    ) -> OtelServerSpan:
        return OtelServerSpan(self, method, params, request_id, attributes)

    def mcp_observer(self) -> McpObserver:
        return McpObserver(self)

    # -- events, logs and metrics --------------------------------------------------------------

    def policy_decision(self, tool: str, decision: str, rule: str, caller: str) -> None:
        attributes = {"llmc.policy.decision": decision, "llmc.policy.rule": rule, "gen_ai.tool.name": tool, "llmc.caller": caller}
        trace.get_current_span(self.parent()).add_event("llmc.policy.decision", attributes)
        self.decisions.add(1, {"llmc.policy.decision": decision, "llmc.policy.rule": rule})

    def audit_record(self, record: Mapping[str, object]) -> None:
        if self.logger_provider is None:
            return
        record = self.mask(dict(record))  # masked as it was written; and by what telemetry learnt since
        attributes = {
            f"llmc.audit.{k}": v if isinstance(v, (str, int, float, bool)) else json.dumps(v, default=str)
            for k, v in record.items()
            if v is not None
        }
        denied = record.get("decision") == "deny" or record.get("outcome") not in (None, "ok", "cached")
        self.logger_provider.get_logger(SCOPE + ".audit", __version__).emit(
            event_name="llmc.audit",
            body=json.dumps(dict(record), default=str, sort_keys=True),
            attributes=attributes,
            context=self.parent(),
            severity_number=SeverityNumber.WARN if denied else SeverityNumber.INFO,
            severity_text="WARN" if denied else "INFO",
        )

    def chat_usage(self, attributes: Attributes, input_tokens: int | None, output_tokens: int | None, seconds: float) -> None:
        context = self.parent()
        self.genai_duration.record(seconds, dict(attributes), context=context)
        for kind, count in (("input", input_tokens), ("output", output_tokens)):
            if count is not None:
                self.genai_tokens.record(count, {**attributes, "gen_ai.token.type": kind}, context=context)

    def server_session_ended(self, seconds: float, attributes: Attributes) -> None:
        self.mcp_server_session.record(seconds, dict(attributes))

    # -- the end -------------------------------------------------------------------------------

    def shutdown(self, exit_code: int = 0) -> str | None:
        """End the root span, flush every signal within the flush timeout (in a thread: a
        collector that never answers must not hold the command), and say so if it failed."""
        if self.root is not None:
            # A command that failed is an error span: what a CI or cron dashboard looks for.
            # error.type is the documented exit status (4: denied by policy, 7: timeout, ...).
            self.root.set_attribute("process.exit.code", exit_code)
            if exit_code != 0:
                self.root.set_attribute("error.type", str(exit_code))
                self.root.set_status(Status(StatusCode.ERROR, f"exit status {exit_code}"))
            self.root.end()
        try:
            otel_context.detach(self._token)
        except ValueError:  # detached in another context (a signal handler's exit path)
            pass
        bound = self.settings.flush_timeout
        providers: list[TracerProvider | MeterProvider | LoggerProvider] = [self.tracer_provider, self.meter_provider]
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
        if worker.is_alive():
            return f"telemetry: the collector at {endpoint()} did not take the data within {bound:g}s; it was dropped"
        if self.failures:
            failed = ", ".join(sorted(set(self.failures)))
            return (
                f"telemetry: could not export {failed} to {endpoint()} "
                f"(in {time.monotonic() - started:.1f}s); the data was dropped"
            )
        return None
