"""An OTLP/HTTP receiver for the tests: a threaded HTTP server on 127.0.0.1 that decodes the
protobuf payloads the real OpenTelemetry exporters send (opentelemetry-proto), keeping spans,
metric data points and log records as plain dicts to assert on."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


@dataclass
class Received:
    spans: list[dict[str, Any]] = field(default_factory=list)
    points: list[dict[str, Any]] = field(default_factory=list)  # one per metric data point
    logs: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)  # of every export request, names lowercased
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            for rs in request.resource_spans:
                self.resources.append(attributes(rs.resource.attributes))
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(
                            {
                                "name": s.name,
                                "kind": KINDS.get(s.kind, str(s.kind)),
                                "traceId": s.trace_id.hex(),
                                "spanId": s.span_id.hex(),
                                "parentSpanId": s.parent_span_id.hex(),
                                "attributes": attributes(s.attributes),
                                "status": {0: "unset", 1: "ok", 2: "error"}[s.status.code],
                                "statusMessage": s.status.message,
                                "events": [{"name": e.name, "attributes": attributes(e.attributes)} for e in s.events],
                                "service": attributes(rs.resource.attributes).get("service.name"),
                            }
                        )

    def add_metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        with self.lock:
            for rm in request.resource_metrics:
                self.resources.append(attributes(rm.resource.attributes))
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        data = MessageToDict(m)
                        kind = next(k for k in ("histogram", "sum", "gauge", "exponentialHistogram") if k in data)
                        for p in getattr(m, kind if kind != "exponentialHistogram" else "exponential_histogram").data_points:
                            point = {"name": m.name, "unit": m.unit, "kind": kind, "attributes": attributes(p.attributes)}
                            if kind == "histogram":
                                point.update(count=p.count, sum=p.sum, bounds=list(p.explicit_bounds))
                            elif kind == "sum":
                                point.update(value=p.as_int if p.WhichOneof("value") == "as_int" else p.as_double)
                            self.points.append(point)

    def add_logs(self, body: bytes) -> None:
        request = ExportLogsServiceRequest.FromString(body)
        with self.lock:
            for rl in request.resource_logs:
                for sl in rl.scope_logs:
                    for r in sl.log_records:
                        self.logs.append(
                            {
                                "body": _value(r.body),
                                "attributes": attributes(r.attributes),
                                "severity": r.severity_text,
                                "eventName": r.event_name,
                                "traceId": r.trace_id.hex(),
                                "spanId": r.span_id.hex(),
                            }
                        )

    def wait_for(self, predicate: Callable[[Received], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self):
                    return True
            time.sleep(0.05)
        return False

    def named(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"] == name]


class QuietServer(ThreadingHTTPServer):
    """An exporter that gave up waiting (its timeout, on a loaded machine) closes the connection
    before the reply is written: socketserver would print that BrokenPipeError's traceback to the
    test process's stderr, where the llmc run under test is being checked for tracebacks. What
    arrived is what the tests look at; a reply nobody reads is no error."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Receiver:
    """`with Receiver() as r:` r.endpoint for OTEL_EXPORTER_OTLP_ENDPOINT, r.got for what came."""

    def __init__(self) -> None:
        self.got = Received()
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with got.lock:
                    got.headers.append({k.lower(): v for k, v in self.headers.items()})
                route = {"/v1/traces": got.add_traces, "/v1/metrics": got.add_metrics, "/v1/logs": got.add_logs}
                handler = route.get(self.path)
                if handler is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                handler(body)
                reply = ExportTraceServiceResponse().SerializeToString()  # all three replies are empty messages
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
