"""The one Transport protocol every transport implements.

A transport is started with two callbacks. Every message that arrives (responses, server
notifications, server requests, whether on a POST reply or a standalone stream) goes to
`deliver`, from whatever thread the transport reads on; `closed` is called once when the
connection ends, with the error that ended it or None. The session correlates replies by id,
so a transport never has to know which request a message answers; a transport that carries a
server's messages on a request's own channel (an HTTP POST's SSE stream) says which request
they came with (`related`), so that a client with many users can route them to the right one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from llmc_cli.errors import LlmcError, ProtocolError
from llmc_cli.mcp.messages import JSONObject

Closed = Callable[[LlmcError | None], None]

# The protocols below are for mypy: at run time only annotations name them (strings here, under
# `from __future__ import annotations`), and making a Protocol class costs ~0.3 M instructions at
# every start-up (session 16); none is runtime_checkable, so no isinstance can tell the difference.
if TYPE_CHECKING:

    class Deliver(Protocol):
        def __call__(self, message: JSONObject, /, related: int | str | None = None) -> None:
            """`related`: the id of the client's request on whose stream the message arrived."""

    class AuthHook(Protocol):
        """What an HTTP transport asks of its authorization (mcp/auth/oauth.OAuth): the header for the
        next request, and whether to send a refused one again."""

        def authorization_header(self) -> str | None:
            """The Authorization header value for the next request ("Bearer ..."), or None."""

        def on_unauthorized(self, status: int, www_authenticate: str | None) -> bool:
            """After a 401/403: True when authorized anew (send the request again), False when it is
            no auth matter; raises AuthError when authorization failed."""

    class Transport(Protocol):
        #: Negotiated protocol version; HTTP transports send it as `MCP-Protocol-Version`.
        protocol_version: str | None

        def start(self, deliver: Deliver, closed: Closed) -> None:
            """Connect (spawn, open streams). Raises ConnectionFailed/TimeoutExpired."""

        def send(self, message: JSONObject) -> None:
            """Send one message. HTTP transports may raise HttpStatusError for a non-JSON-RPC reply;
            replies themselves always arrive through `deliver`."""

        def close(self) -> None:
            """Release everything (child process, streams, HTTP session) within a bounded time."""

        def diagnostics(self) -> str:
            """What may help a user when the connection fails (e.g. the server's stderr tail)."""
else:
    Deliver = AuthHook = Transport = object


# One message (a stdio line, an HTTP body, an SSE event) may be at most this big, on every
# transport: a server that streams without end must not take the machine's memory with it.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MESSAGE_LIMIT_VAR = "LLMC_MAX_MESSAGE_BYTES"  # lower it to bound memory further (tests do)


def max_message_bytes() -> int:
    """The limit in force: $LLMC_MAX_MESSAGE_BYTES when it is a positive number, else 64 MiB."""
    value = os.environ.get(MESSAGE_LIMIT_VAR, "")
    return int(value) if value.isdigit() and int(value) > 0 else MAX_MESSAGE_BYTES


def too_large(limit: int, what: str = "a message") -> ProtocolError:
    """The error (exit 6) for a message over the limit; it names the limit and how to change it."""
    size = f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit} bytes"
    return ProtocolError(
        f"the server sent {what} larger than the {size} limit (set {MESSAGE_LIMIT_VAR} to change it)", limit=limit
    )
