"""OpenTelemetry for llmc: off by default and free when off.

This module is the only face the rest of llmc sees. It imports nothing from OpenTelemetry: while
telemetry is off every function here is a check of one global and a return. `enable()` (the
`--otel` flag, `LLMC_OTEL=1` or the profile's `[telemetry] enabled = true`) loads
`telemetry.otel`, which needs the `otel` extra, and installs the MCP request observer, so every
request llmc sends gets a CLIENT span and carries W3C trace context in `params._meta`.

What is recorded follows the OpenTelemetry semantic conventions for MCP and GenAI (see the
README's "Observability" section for the attribute list); `llmc.policy.decision` span events and
the `llmc.policy.decisions` counter are llmc's own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from llmc_cli.errors import optional_module
from llmc_cli.mcp import observe
from llmc_cli.model import dataclass

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

    from llmc_cli.config.schema import TelemetryConfig
    from llmc_cli.config.secrets import Masker
    from llmc_cli.mcp.messages import JSONObject
    from llmc_cli.telemetry.otel import Otel

ENV_FLAG = "LLMC_OTEL"
# Span, event and metric attributes: OpenTelemetry's values (str, bool, int, float, or a
# sequence of one of them); opentelemetry is imported only when telemetry is on.
Attributes = Mapping[str, "AttributeValue"]
_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclass(frozen=True)
class Settings:
    # The audit's masking (the environment's and the profile's secrets): every string that
    # leaves in a span, an event or a log record goes through it, with the values of the
    # secret-looking arguments of the calls seen so far.
    mask: Masker
    audit_logs: bool = False
    capture_content: bool = False
    flush_timeout: float = 2.0


class Span:
    """What a caller may do with a span it opened; the no-op one when telemetry is off."""

    def set(self, key: str, value: AttributeValue) -> None:
        pass

    def event(self, name: str, attributes: Attributes) -> None:
        pass

    def error(self, error_type: str, description: str = "") -> None:
        pass


NO_SPAN = Span()
_NO_SPAN_CM: AbstractContextManager[Span] = nullcontext(NO_SPAN)
_ACTIVE: Otel | None = None


def env_requested() -> bool:
    return os.environ.get(ENV_FLAG, "").strip().lower() in ("1", "true", "yes", "on")


def enabled() -> bool:
    return _ACTIVE is not None


def enable(command: str, mask: Masker, config: TelemetryConfig | None = None) -> None:
    """Start exporting (idempotent). `command`: the root span's name ('llmc call'); a server
    (`llmc serve ...`) has none: each request it serves starts or continues its own trace.
    Raises ConfigError naming the extra when the OpenTelemetry SDK is not installed."""
    global _ACTIVE
    if _ACTIVE is not None:
        return

    Otel = optional_module("llmc_cli.telemetry.otel", "otel", "telemetry").Otel
    settings = (
        Settings(mask, audit_logs=config.audit_logs, capture_content=config.capture_content, flush_timeout=config.flush_timeout)
        if config is not None
        else Settings(mask)
    )
    _ACTIVE = Otel(command, settings)

    observe.install(_ACTIVE.mcp_observer(), ServerWatch())


def enable_for_profile(command: str, mask: Masker, config: TelemetryConfig) -> None:
    """The profile's [telemetry]: enables telemetry, or configures it when --otel or LLMC_OTEL
    enabled it before the profile was read (its audit_logs, capture_content, flush_timeout)."""
    if _ACTIVE is not None:
        _ACTIVE.configure(command, config, mask)
    elif config.enabled or env_requested():
        enable(command, mask, config)


def shutdown(exit_code: int = 0) -> str | None:
    """End the root span (with the command's exit status) and export what is left, within the
    flush timeout. Returns a warning for people (the collector could not be reached in time) or
    None."""
    global _ACTIVE
    active, _ACTIVE = _ACTIVE, None
    if active is None:
        return None

    observe.install(None)
    return active.shutdown(exit_code)


def span(
    name: str, kind: str = "internal", attributes: Attributes | None = None, parent_meta: Mapping[str, object] | None = None
) -> AbstractContextManager[Span]:
    """A span around a block, child of the current one (or of the trace context in
    `parent_meta`, a request's `_meta` as a server receives it). kind: internal|client|server."""
    if _ACTIVE is None:
        return _NO_SPAN_CM
    scope: AbstractContextManager[Span] = _ACTIVE.span(name, kind, attributes or {}, parent_meta)
    return scope


def server_span(method: str, params: Mapping[str, object], request_id: object, attributes: Attributes) -> ServerSpan | None:
    """A SERVER span for a request one of llmc's servers (the gateway, the workspace server)
    received, parented from the trace context in its `_meta`; None when telemetry is off."""
    if _ACTIVE is None:
        return None
    return _ACTIVE.server_span(method, params, request_id, attributes)


class ServerSpan:
    """A served request's span: current while it is dispatched, ended by its reply."""

    def current(self) -> AbstractContextManager[object]:
        raise NotImplementedError

    def sending(self, send: Callable[[JSONObject], None]) -> Callable[[JSONObject], None]:
        """`send`, which ends the span when the reply to this request goes through it."""
        raise NotImplementedError


def policy_decision(tool: str, decision: str, rule: str, caller: str) -> None:
    """A policy decision: an event on the current span, and the llmc.policy.decisions counter."""
    if _ACTIVE is not None:
        _ACTIVE.policy_decision(tool, decision, rule, caller)


def audit_record(record: Mapping[str, object]) -> None:
    """An audit record as it was written (secrets already masked): an OTLP log record when
    [telemetry] audit_logs is on. The hash-chained log stays the record of truth."""
    if _ACTIVE is not None:
        _ACTIVE.audit_record(record)


def chat_usage(attributes: Attributes, input_tokens: int | None, output_tokens: int | None, seconds: float) -> None:
    """One model call: gen_ai.client.operation.duration and gen_ai.client.token.usage, with the
    metric attributes of its `chat` span (operation, provider, models, server, error.type)."""
    if _ACTIVE is not None:
        _ACTIVE.chat_usage(attributes, input_tokens, output_tokens, seconds)


def server_session_ended(seconds: float, attributes: Attributes) -> None:
    """A connection one of llmc's servers served has closed: mcp.server.session.duration."""
    if _ACTIVE is not None:
        _ACTIVE.server_session_ended(seconds, attributes)


def capture_content() -> bool:
    """Tool arguments and results may go on spans (opt-in, masked like the audit log)."""
    return _ACTIVE is not None and _ACTIVE.settings.capture_content


def trace_context() -> dict[str, str]:
    """The current trace context as `_meta` keys (traceparent, tracestate, baggage), for a
    request llmc relays itself (the gateway forwarding a host's call)."""
    return _ACTIVE.inject() if _ACTIVE is not None else {}


def in_context(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """`function`, run in the caller's trace context wherever it runs (a worker thread: Python
    threads do not inherit context)."""
    if _ACTIVE is None:
        return function
    return _ACTIVE.bind(function)


class ServerWatch:
    """mcp.observe.ServerObserver: what llmc's servers (the gateway, the workspace server) serve
    and ask their clients, as spans and metrics. Installed while telemetry is enabled."""

    def server_span(
        self, method: str, params: Mapping[str, Any], request_id: Any, attributes: Mapping[str, Any]
    ) -> ServerSpan | None:
        return server_span(method, params, request_id, attributes)

    def in_context(self, function: Callable[_P, _R]) -> Callable[_P, _R]:
        return in_context(function)

    @contextmanager
    def client_span(self, method: str, request_id: str) -> Iterator[dict[str, str]]:
        with span(method, "client", {"mcp.method.name": method, "jsonrpc.request.id": request_id}):
            yield trace_context()

    def server_session_ended(self, seconds: float, attributes: Mapping[str, Any]) -> None:
        server_session_ended(seconds, attributes)
