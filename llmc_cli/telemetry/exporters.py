"""Where telemetry goes: the OTLP/HTTP exporters and the resource, from the standard OTEL_*
variables. Imported only when telemetry is enabled (it needs the `otel` extra).

The SDK's exporters read OTEL_EXPORTER_OTLP_ENDPOINT (and the per-signal variants),
OTEL_EXPORTER_OTLP_HEADERS and the certificate variables themselves; the resource detector reads
OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the tracer provider reads OTEL_TRACES_SAMPLER.
What llmc adds: a check that the protocol is the one it ships (http/protobuf), a default service
name, and exporters that remember a failed export (the SDK only logs it) so llmc can say so once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, overload

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from llmc_cli import __version__
from llmc_cli.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.metrics.export import MetricsData
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.util.types import AttributeValue


class Mask(Protocol):
    """Masking (Otel.mask: config.secrets.Masker.strings): a copy of a span's text or attributes
    with every known secret masked; a str stays a str, a mapping keeps its keys' kinds of value."""

    @overload
    def __call__(self, value: str, /) -> str: ...

    @overload
    def __call__(self, value: dict[str, AttributeValue], /) -> dict[str, AttributeValue]: ...


SIGNALS = ("TRACES", "METRICS", "LOGS")


def check_protocol() -> None:
    """The `otel` extra carries the OTLP/HTTP protobuf exporter only: another protocol (grpc,
    http/json) for any signal is a configuration error, not a silent switch."""
    general = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    for signal in SIGNALS:
        variable = f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"
        protocol = os.environ.get(variable) or general
        if protocol != "http/protobuf":
            name = variable if os.environ.get(variable) else "OTEL_EXPORTER_OTLP_PROTOCOL"
            raise ConfigError(f"{name}={protocol}: llmc exports OTLP over http/protobuf only")


def endpoint() -> str:
    """Where traces go, for the warning when they could not be delivered."""
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or "http://localhost:4318"
    )


def resource() -> Resource:
    """The SDK's resource (OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME over its service.name),
    with llmc's name and version filling only what the user did not set."""
    detected = Resource.create()
    name = str(detected.attributes.get(SERVICE_NAME, ""))
    fill: dict[str, AttributeValue] = {}
    if not name or name.startswith("unknown_service"):  # the SDK's placeholder: nobody named it
        fill[SERVICE_NAME] = "llmc"
    if SERVICE_VERSION not in detected.attributes:
        fill[SERVICE_VERSION] = __version__
    return detected.merge(Resource(fill))


def masked_span(span: ReadableSpan, mask: Mask) -> ReadableSpan:
    """A finished span with every string that leaves llmc masked: its name, attributes, status
    description and events (an upstream's error message may quote a secret argument or the
    environment, whatever capture_content says)."""
    from opentelemetry.trace import Status

    status = span.status
    if status.description:
        status = Status(status.status_code, mask(status.description))
    events = [Event(mask(e.name), mask(dict(e.attributes or {})), e.timestamp) for e in span.events]
    return ReadableSpan(
        name=mask(span.name),
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=mask(dict(span.attributes or {})),
        events=events,
        links=span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class WatchedSpanExporter(SpanExporter):
    """The OTLP exporter, masking each span (masked_span) and remembering whether an export failed."""

    def __init__(self, timeout: float, failures: list[str], mask: Mask) -> None:
        self.inner, self._failures, self.mask = OTLPSpanExporter(timeout=timeout), failures, mask

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export([masked_span(span, self.mask) for span in spans])
        if result is not SpanExportResult.SUCCESS:
            self._failures.append("traces")
        return result

    def retime(self, timeout: float) -> None:
        """A new HTTP timeout (the profile's flush_timeout, read after telemetry started)."""
        self.inner = OTLPSpanExporter(timeout=timeout)

    def shutdown(self) -> None:
        self.inner.shutdown()  # type: ignore[no-untyped-call]


class WatchedMetricExporter(MetricExporter):
    def __init__(self, timeout: float, failures: list[str]) -> None:
        inner = OTLPMetricExporter(timeout=timeout)
        super().__init__(preferred_temporality=inner._preferred_temporality, preferred_aggregation=inner._preferred_aggregation)
        self.inner, self._failures = inner, failures

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object) -> MetricExportResult:
        result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        if result is not MetricExportResult.SUCCESS:
            self._failures.append("metrics")
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def retime(self, timeout: float) -> None:
        self.inner = OTLPMetricExporter(timeout=timeout)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis)


class WatchedLogExporter(LogRecordExporter):
    def __init__(self, timeout: float, failures: list[str]) -> None:
        self.inner, self._failures = OTLPLogExporter(timeout=timeout), failures

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = self.inner.export(batch)
        if result is not LogRecordExportResult.SUCCESS:
            self._failures.append("logs")
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        self.inner.shutdown()  # type: ignore[no-untyped-call]
