"""One exception tree. Each class carries the exit code documented in README and `llmc --help`;
ExitCode names them, so no code says a bare 4 or 130.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

    from llmc_cli.model import JSONObject


class ExitCode(IntEnum):
    OK = 0
    TOOL_ERROR = 1  # the tool reported an error (isError), or a check failed
    USAGE = 2
    CONFIG = 3  # config or profile
    DENIED = 4  # by policy, or a confirmation needed without a terminal
    CONNECTION = 5  # cannot spawn, refused, crashed
    PROTOCOL = 6  # bad JSON-RPC, no common version, message too large
    TIMEOUT = 7
    PROVIDER = 8  # the LLM provider
    AUTH = 9
    DRIFT = 10  # tool manifest drift
    INTERRUPTED = 130  # SIGINT (128 + 2)
    TERMINATED = 143  # SIGTERM (128 + 15), and SIGHUP: stopped from outside, unwound like Ctrl-C


class LlmcError(Exception):
    """Base of every error llmc reports to a user: one line, one exit code."""

    exit_code: ExitCode = ExitCode.TOOL_ERROR
    kind = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.kind, "message": self.message, "exitCode": int(self.exit_code)}
        out.update({k: v for k, v in self.details.items() if v is not None})
        return out


class ToolFailed(LlmcError):
    """The tool ran and reported an error (isError), or a check such as `audit verify` failed."""

    exit_code = ExitCode.TOOL_ERROR
    kind = "tool_error"


class UsageError(LlmcError):
    exit_code = ExitCode.USAGE
    kind = "usage"


class SkippedAfterFailure(LlmcError):
    """A call of a batch that stops at its first failure, not run because an earlier call failed
    (the CLI names the option that asked for it)."""

    def __init__(self) -> None:
        super().__init__("skipped: an earlier call failed")


class SessionHoldsServers(UsageError):
    """An ad-hoc server asked for in a keeper's session, which runs the servers it holds and no
    other. `session`: its name (the CLI says which options to drop)."""

    def __init__(self, session: str) -> None:
        super().__init__(f"session {session} runs the servers its keeper holds, not an ad-hoc server")
        self.session = session


class ConfigError(LlmcError):
    exit_code = ExitCode.CONFIG
    kind = "config"


class PolicyDenied(LlmcError):
    exit_code = ExitCode.DENIED
    kind = "denied"
    # A confirmation nobody could give: what pre-approving the call takes (policy.approval.Approval),
    # for a front end to tell a person (policy.approval.hint). Not part of the error's JSON.
    approval: Any = None


class ConnectionFailed(LlmcError):
    """Cannot spawn, connection refused, the server crashed or closed the stream."""

    exit_code = ExitCode.CONNECTION
    kind = "connection"


class HttpStatusError(ConnectionFailed):
    """An HTTP reply with a status the transport could not turn into a JSON-RPC message."""

    def __init__(self, message: str, status: int, body: str = "", headers: dict[str, str] | None = None) -> None:
        super().__init__(message, status=status)
        self.status = status
        self.body = body
        self.headers = headers or {}


class HttpSessionExpired(ConnectionFailed):
    """The server no longer knows the HTTP session (404 to a request carrying Mcp-Session-Id)."""


class ProtocolError(LlmcError):
    """The peer broke the protocol: bad JSON-RPC, no common version, a lying reply."""

    exit_code = ExitCode.PROTOCOL
    kind = "protocol"


class RpcError(ProtocolError):
    """A JSON-RPC error object returned by the server."""

    kind = "rpc_error"

    def __init__(self, message: str, code: int, data: Any = None) -> None:
        super().__init__(message, code=code, data=data)
        self.code = code
        self.data = data


class TimeoutExpired(LlmcError):
    exit_code = ExitCode.TIMEOUT
    kind = "timeout"


class InputRequired(LlmcError):
    """A call paused for its caller's answers (2026-07-28 input_required, relayed by the gateway to
    its host): `requests` are the input requests by key; the caller retries with the answers."""

    kind = "input_required"

    def __init__(self, message: str = "input required from the MCP host", *, requests: JSONObject | None = None) -> None:
        super().__init__(message, requests=requests)
        self.requests: JSONObject = requests or {}


class Cancelled(LlmcError):
    """The caller withdrew the request (an MCP host's notifications/cancelled, relayed upstream)."""

    exit_code = ExitCode.INTERRUPTED
    kind = "cancelled"


class ProviderError(LlmcError):
    exit_code = ExitCode.PROVIDER
    kind = "provider"


class AuthError(LlmcError):
    exit_code = ExitCode.AUTH
    kind = "auth"


class DriftError(LlmcError):
    exit_code = ExitCode.DRIFT
    kind = "drift"


JSON_RPC_INTERNAL_ERROR = -32603  # what an rpc_error without its code is taken for (mcp.jsonrpc has the rest)


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """' (did you mean 'x'?)' for a misspelt name, or '' when nothing is as close as `cutoff`
    (difflib's ratio)."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=cutoff)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


def optional_module(module: str, extra: str, purpose: str) -> ModuleType:
    """Import an optional dependency (`module`, from the `extra` of llmc-cli); its absence, or a
    missing module it needs, is one ConfigError (exit 3) naming the extra to install, never an
    ImportError traceback. `purpose`: what needs it ("[state] url (LLMC_STATE_URL)")."""

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = exc.name or module
        raise ConfigError(f"{purpose} needs {missing}, which is not installed: pip install 'llmc-cli[{extra}]'") from None


def from_json(data: Mapping[str, object]) -> LlmcError:
    """The error another llmc process reported with `LlmcError.to_json()` (the session keeper),
    with its class, message and details (a server's stderr, an HTTP status, a JSON-RPC code)."""
    message = str(data.get("message") or "the session keeper reported an error")
    details = {k: v for k, v in data.items() if k not in ("llmc", "error", "message", "exitCode")}
    kind = str(data.get("error"))
    if kind == RpcError.kind:
        code = details.pop("code", None)
        error: LlmcError = RpcError(
            message, code if isinstance(code, int) else JSON_RPC_INTERNAL_ERROR, details.pop("data", None)
        )
        error.details.update(details)
        return error
    return _KINDS.get(kind, ConnectionFailed)(message, **details)


_KINDS: dict[str, type[LlmcError]] = {
    cls.kind: cls
    for cls in (
        LlmcError,
        ToolFailed,
        UsageError,
        ConfigError,
        PolicyDenied,
        ConnectionFailed,
        ProtocolError,
        TimeoutExpired,
        InputRequired,
        Cancelled,
        ProviderError,
        AuthError,
        DriftError,
    )
}
