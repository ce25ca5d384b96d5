"""The protocol package's observation hooks: every request a ClientSession sends, and every request a
server core (mcp/server.py) serves or sends its client, can be watched.

The protocol knows nothing of OpenTelemetry (mcp/ imports only errors and model); telemetry,
above it, installs an Observer and a ServerObserver when it is enabled. With none installed (the
default) a request costs one attribute read. An observer may add keys to the request's `_meta`
(W3C trace context, as the 2026-07-28 spec's SEP-414 places it) and hears how the request ended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from llmc_cli.model import JSONObject

if TYPE_CHECKING:
    from llmc_cli.mcp.session import ClientSession


if TYPE_CHECKING:  # protocols, for the type checker only: ~0.1 M instructions each to create at import

    class RequestWatch(Protocol):
        def meta(self) -> dict[str, str]:
            """Keys to put into the request's `params._meta` (traceparent, tracestate, baggage)."""

        def finish(self, result: JSONObject | None, error: BaseException | None) -> None:
            """The request ended: a result (which may carry isError) or the error it raised."""

    class Observer(Protocol):
        def request(self, session: ClientSession, request_id: int, method: str, params: JSONObject) -> RequestWatch | None:
            """A request is about to be sent by `session`."""

        def session_ended(self, session: ClientSession, seconds: float) -> None:
            """`session` was closed after living this long."""


Send = Callable[[JSONObject], None]
P = ParamSpec("P")
R = TypeVar("R")


if TYPE_CHECKING:  # protocols, for the type checker only: ~0.1 M instructions each to create at import

    class ServedRequest(Protocol):
        """A served request's span: current while it is dispatched, ended by its reply."""

        def current(self) -> AbstractContextManager[Any]:
            """The span as the current context, while the request is dispatched."""

        def sending(self, send: Send) -> Send:
            """`send`, which ends the span when the reply to this request goes through it."""

    class ServerObserver(Protocol):
        def server_span(
            self, method: str, params: Mapping[str, Any], request_id: Any, attributes: Mapping[str, Any]
        ) -> ServedRequest | None:
            """A request a server received, parented from the trace context in its `_meta`."""

        def in_context(self, function: Callable[P, R]) -> Callable[P, R]:
            """`function`, run in the caller's trace context wherever it runs (a pool thread)."""

        def client_span(self, method: str, request_id: str) -> AbstractContextManager[dict[str, str]]:
            """A request a server sends its client: its span, around a block given the `_meta` keys
            that carry its trace context."""

        def server_session_ended(self, seconds: float, attributes: Mapping[str, Any]) -> None:
            """A connection a server served has closed after living this long."""


OBSERVER: Observer | None = None
SERVER_OBSERVER: ServerObserver | None = None


def install(observer: Observer | None, server_observer: ServerObserver | None = None) -> None:
    """Watch every request from now on (None: stop watching)."""
    global OBSERVER, SERVER_OBSERVER
    OBSERVER, SERVER_OBSERVER = observer, server_observer
