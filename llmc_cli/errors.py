"""One exception tree. Each class carries the exit code documented in README and `llmc --help`.

Exit codes: 0 ok, 1 tool error / failed check, 2 usage, 3 config, 4 policy, 5 connection,
6 protocol, 7 timeout, 8 LLM provider, 9 auth, 10 manifest drift, 130 interrupted.
"""

from __future__ import annotations

from typing import Any


class LlmcError(Exception):
    """Base of every error llmc reports to a user: one line, one exit code."""

    exit_code = 1
    kind = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.kind, "message": self.message, "exitCode": self.exit_code}
        out.update({k: v for k, v in self.details.items() if v is not None})
        return out


class ToolFailed(LlmcError):
    """The tool ran and reported an error (isError), or a check such as `audit verify` failed."""

    exit_code = 1
    kind = "tool_error"


class UsageError(LlmcError):
    exit_code = 2
    kind = "usage"


class ConfigError(LlmcError):
    exit_code = 3
    kind = "config"


class PolicyDenied(LlmcError):
    exit_code = 4
    kind = "denied"


class ConnectionFailed(LlmcError):
    """Cannot spawn, connection refused, the server crashed or closed the stream."""

    exit_code = 5
    kind = "connection"


class HttpStatusError(ConnectionFailed):
    """An HTTP reply with a status the transport could not turn into a JSON-RPC message."""

    def __init__(self, message: str, status: int, body: str = "", headers: dict[str, str] | None = None) -> None:
        super().__init__(message, status=status)
        self.status = status
        self.body = body
        self.headers = headers or {}


class SessionExpired(ConnectionFailed):
    """The server no longer knows the HTTP session (404 to a request carrying Mcp-Session-Id)."""


class ProtocolError(LlmcError):
    """The peer broke the protocol: bad JSON-RPC, no common version, a lying reply."""

    exit_code = 6
    kind = "protocol"


class RpcError(ProtocolError):
    """A JSON-RPC error object returned by the server."""

    kind = "rpc_error"

    def __init__(self, message: str, code: int, data: Any = None) -> None:
        super().__init__(message, code=code, data=data)
        self.code = code
        self.data = data


class TimeoutExpired(LlmcError):
    exit_code = 7
    kind = "timeout"


class Cancelled(LlmcError):
    """The caller withdrew the request (an MCP host's notifications/cancelled, relayed upstream)."""

    exit_code = 130
    kind = "cancelled"


class ProviderError(LlmcError):
    exit_code = 8
    kind = "provider"


class AuthError(LlmcError):
    exit_code = 9
    kind = "auth"


class DriftError(LlmcError):
    exit_code = 10
    kind = "drift"


INTERRUPTED_EXIT_CODE = 130


def from_json(data: dict[str, Any]) -> LlmcError:
    """The error another llmc process reported with `LlmcError.to_json()` (the session keeper)."""
    kinds = {cls.kind: cls for cls in (ToolFailed, UsageError, ConfigError, PolicyDenied, ConnectionFailed,
                                       ProtocolError, TimeoutExpired, ProviderError, AuthError, DriftError)}
    kinds["rpc_error"] = ProtocolError
    cls = kinds.get(str(data.get("error")), ConnectionFailed)
    return cls(str(data.get("message") or "the session keeper reported an error"))
