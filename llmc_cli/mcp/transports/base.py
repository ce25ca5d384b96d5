"""The one Transport protocol every transport implements.

A transport is started with two callbacks. Every message that arrives (responses, server
notifications, server requests, whether on a POST reply or a standalone stream) goes to
`deliver`, from whatever thread the transport reads on; `closed` is called once when the
connection ends, with the error that ended it or None. The session correlates replies by id,
so a transport never has to know which request a message answers.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from llmc_cli.errors import LlmcError

Deliver = Callable[[dict[str, Any]], None]
Closed = Callable[[LlmcError | None], None]


class Transport(Protocol):
    #: Negotiated protocol version; HTTP transports send it as `MCP-Protocol-Version`.
    protocol_version: str | None

    def start(self, deliver: Deliver, closed: Closed) -> None:
        """Connect (spawn, open streams). Raises ConnectionFailed/TimeoutExpired."""

    def send(self, message: dict[str, Any]) -> None:
        """Send one message. HTTP transports may raise HttpStatusError for a non-JSON-RPC reply;
        replies themselves always arrive through `deliver`."""

    def close(self) -> None:
        """Release everything (child process, streams, HTTP session) within a bounded time."""

    def diagnostics(self) -> str:
        """What may help a user when the connection fails (e.g. the server's stderr tail)."""
