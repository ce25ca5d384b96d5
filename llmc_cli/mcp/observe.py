"""The protocol package's one observation hook: every request a Session sends can be watched.

The protocol knows nothing of OpenTelemetry (mcp/ imports only errors and model); telemetry,
above it, installs an Observer when it is enabled. With none installed (the default) a request
costs one attribute read. An observer may add keys to the request's `_meta` (W3C trace
context, as the 2026-07-28 spec's SEP-414 places it) and hears how the request ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from llmc_cli.mcp.session import Session


class RequestWatch(Protocol):
    def meta(self) -> dict[str, str]:
        """Keys to put into the request's `params._meta` (traceparent, tracestate, baggage)."""

    def finish(self, result: dict[str, Any] | None, error: BaseException | None) -> None:
        """The request ended: a result (which may carry isError) or the error it raised."""


class Observer(Protocol):
    def request(self, session: Session, request_id: int, method: str, params: dict[str, Any]) -> RequestWatch | None:
        """A request is about to be sent by `session`."""

    def session_ended(self, session: Session, seconds: float) -> None:
        """`session` was closed after living this long."""


OBSERVER: Observer | None = None


def install(observer: Observer | None) -> None:
    """Watch every request from now on (None: stop watching)."""
    global OBSERVER
    OBSERVER = observer
