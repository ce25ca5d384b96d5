"""What every provider shares: neutral conversation types, settings, the Provider protocol,
error mapping with bounded retries, and the factory that imports only the SDK that runs.

A conversation is a list of messages: `UserMessage`, `AssistantTurn` (the model's text and tool
calls, plus its raw payload so the same provider can be sent it back unchanged), and
`ToolResults` (one message holding the results of every call of the previous turn). Everything
here serialises to JSON so a conversation can be saved and continued.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from types import ModuleType
from typing import Any, Protocol, TypeVar

from llmc_cli.errors import ConfigError, ProviderError, UsageError
from llmc_cli.model import ARGUMENTS_TOO_DEEP, PROVIDERS, JSONObject, ToolResult, arguments_too_deep, dataclass

# The provider's usual environment variables for its key, when the profile names none.
DEFAULT_KEY_ENV = {
    "openai": ("OPENAI_API_KEY",),
    "openai-responses": ("OPENAI_API_KEY",),
    "text": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),  # google-genai reads both
}

# Stop reasons of one model turn, the same words for every provider.
END, TOOL_CALLS, LENGTH, OTHER = "end", "tool_calls", "length", "other"
PAUSE = "pause"  # a provider's server-side tool paused the turn: send the conversation again to go on


@dataclass
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None

    def to_json(self) -> JSONObject:
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens}


@dataclass
class ProviderToolCall:
    """One call the model asked for, in the provider's own names.

    `error` is set when the call could not be read (arguments that are not a JSON object, a
    malformed text block): the agent sends the error back instead of running anything."""

    id: str
    name: str
    arguments: JSONObject = field(default_factory=dict)
    error: str | None = None
    echo_id: bool = True  # False when the provider gave no id and llmc made one up (Gemini)

    def __post_init__(self) -> None:
        # Checked here, for every provider, before anything walks the arguments (the agent, the
        # policy, audit masking, the conversation file): deep nesting would overflow the stack.
        if arguments_too_deep(self.arguments):
            self.arguments = {}
            self.error = self.error or ARGUMENTS_TOO_DEEP

    def to_json(self) -> JSONObject:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "error": self.error, "echoId": self.echo_id}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProviderToolCall:
        return cls(
            id=d["id"],
            name=d["name"],
            arguments=d.get("arguments") or {},
            error=d.get("error"),
            echo_id=d.get("echoId", d.get("echo_id", True)),
        )


@dataclass
class UserMessage:
    text: str

    def to_json(self) -> JSONObject:
        return {"kind": "user", "text": self.text}


@dataclass
class AssistantTurn:
    text: str = ""
    tool_calls: list[ProviderToolCall] = field(default_factory=list)
    stop_reason: str = END
    usage: Usage = field(default_factory=Usage)
    provider: str = ""
    raw: Any = None  # the provider's own payload (JSON-able), echoed back to that provider only

    def to_json(self) -> JSONObject:
        return {
            "kind": "assistant",
            "text": self.text,
            "toolCalls": [c.to_json() for c in self.tool_calls],
            "stopReason": self.stop_reason,
            "usage": self.usage.to_json(),
            "provider": self.provider,
            "raw": self.raw,
        }


@dataclass
class ToolResultItem:
    call_id: str
    name: str  # the provider's tool name
    result: ToolResult  # what the model sees (already compacted by the agent)
    echo_id: bool = True

    def to_json(self) -> JSONObject:
        return {"callId": self.call_id, "name": self.name, "result": self.result.to_json(), "echoId": self.echo_id}


@dataclass
class ToolResults:
    items: list[ToolResultItem]

    def to_json(self) -> JSONObject:
        return {"kind": "toolResults", "items": [i.to_json() for i in self.items]}


Message = UserMessage | AssistantTurn | ToolResults


def message_from_json(d: dict[str, Any]) -> Message:
    """A saved message; conversations saved before the output contract went camelCase
    (tool_calls, stop_reason, call_id, echo_id, input_tokens, kind tool_results) still load."""

    def get(camel: str, snake: str, default: Any = None) -> Any:
        return d.get(camel, d.get(snake, default)) if isinstance(d, dict) else default

    kind = d.get("kind")
    if kind == "user":
        return UserMessage(str(d.get("text", "")))
    if kind == "assistant":
        usage = d.get("usage") or {}
        return AssistantTurn(
            text=d.get("text") or "",
            tool_calls=[ProviderToolCall.from_json(c) for c in get("toolCalls", "tool_calls") or []],
            stop_reason=get("stopReason", "stop_reason") or END,
            usage=Usage(
                usage.get("inputTokens", usage.get("input_tokens")), usage.get("outputTokens", usage.get("output_tokens"))
            ),
            provider=d.get("provider") or "",
            raw=d.get("raw"),
        )
    if kind in ("toolResults", "tool_results"):
        return ToolResults(
            [
                ToolResultItem(
                    i.get("callId", i.get("call_id")),
                    i["name"],
                    ToolResult.from_mcp(i["result"]),
                    i.get("echoId", i.get("echo_id", True)),
                )
                for i in d.get("items") or []
            ]
        )
    raise ValueError(f"unknown message kind {kind!r}")


@dataclass
class ProviderSettings:
    model: str | None = None
    api_key: str | None = None  # resolved from the environment by make_provider; never logged
    api_key_env: str | None = None
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float = 120.0  # seconds per HTTP request
    max_retries: int = 3  # llmc's own retries of transient errors (the SDKs' are turned off)
    max_backoff: float = 30.0  # cap on one wait, retry-after included


OnText = Callable[[str], None]  # pieces of a model turn's text as they arrive (streaming)


class Provider(Protocol):
    name: str
    format: str  # the translate format of its tool definitions
    settings: ProviderSettings

    def complete(
        self,
        system: str | None,
        history: list[Message],
        tools: Any | None,
        timeout: float | None = None,
        on_text: OnText | None = None,
    ) -> AssistantTurn:
        """One model turn. `tools` is a translate.Translation in this provider's format (or None).
        `timeout` (seconds) bounds this call, retries included. With `on_text`, the reply is
        streamed and its text handed to on_text piece by piece as it arrives (the turn returned
        is the same). Raises ProviderError."""
        ...


def make_provider(name: str, settings: ProviderSettings) -> Provider:
    """The provider named `name`; its SDK is imported here, only for the provider that runs."""
    if name not in PROVIDERS:
        raise ProviderError(f"unknown provider {name!r} (choose from {', '.join(PROVIDERS)})", provider=name)
    if not settings.model:
        raise UsageError(f"{name}: no model given (--model or [llm] model)")
    if settings.api_key is None:
        envs = (settings.api_key_env,) if settings.api_key_env else DEFAULT_KEY_ENV[name]
        settings.api_key = next((os.environ[e] for e in envs if os.environ.get(e)), None)
        if settings.api_key is None and not (name in ("openai", "text") and settings.base_url):
            # A local OpenAI-compatible server usually needs no key; the hosted APIs always do.
            local = " (or --base-url for a local OpenAI-compatible server)" if name in ("openai", "text") else ""
            raise ConfigError(f"{name}: no API key: set ${envs[0]}{local}")
    if name == "openai":
        from llmc_cli.providers.openai import OpenAIChat

        return OpenAIChat(settings)
    if name == "openai-responses":
        from llmc_cli.providers.openai_responses import OpenAIResponses

        return OpenAIResponses(settings)
    if name == "anthropic":
        from llmc_cli.providers.anthropic import AnthropicMessages

        return AnthropicMessages(settings)
    if name == "gemini":
        from llmc_cli.providers.gemini import Gemini

        return Gemini(settings)
    from llmc_cli.providers.text import TextProtocol

    return TextProtocol(settings)


# --- errors and retries -------------------------------------------------------------------

TRANSIENT = {"rate_limit", "overloaded", "server", "connection", "timeout"}


@dataclass
class Failure:
    """A provider error, classified: `reason` is one of auth, rate_limit, overloaded,
    context_length, bad_request, not_found, server, connection, timeout, other."""

    reason: str
    message: str
    status: int | None = None
    retry_after: float | None = None
    final: bool = False  # not worth another attempt though of a transient kind (a refused connection)


def reason_for_status(status: int | None, message: str) -> str:
    low = message.lower()
    if status in (401, 403) or (status == 400 and "api key not valid" in low):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status == 529 or "overloaded" in low:
        return "overloaded"
    if status in (400, 413) and any(
        s in low for s in ("context length", "context_length", "too long", "maximum context", "token count", "too many tokens")
    ):
        return "context_length"
    if status == 404:
        return "not_found"
    if status is not None and status >= 500:
        return "server"
    if status is not None and 400 <= status < 500:
        return "bad_request"
    return "other"


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds; an HTTP date is ignored)."""
    if headers is None:
        return None
    try:
        if milliseconds := headers.get("retry-after-ms"):
            return float(milliseconds) / 1000
        if seconds := headers.get("retry-after"):
            return float(seconds)
    except (TypeError, ValueError):
        return None
    return None


T = TypeVar("T")


def call_with_retries(
    provider: str,
    settings: ProviderSettings,
    send: Callable[[float], T],
    classify: Callable[[BaseException], Failure | None],
    timeout: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run send(per_request_timeout); retry transient failures with exponential backoff (honouring
    retry-after, capped) at most settings.max_retries times and never past `timeout`.
    Every failure leaves as ProviderError with the provider's message, the API key masked."""
    deadline = time.monotonic() + (timeout if timeout is not None else float("inf"))
    attempt = 0
    while True:
        remaining = deadline - time.monotonic()
        try:
            return send(max(0.1, min(settings.timeout, remaining)))
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
        wait = min(
            settings.max_backoff,
            failure.retry_after if failure.retry_after is not None else 0.5 * 2**attempt * (1 + random.random() / 4),
        )
        if (
            failure.final
            or failure.reason not in TRANSIENT
            or attempt >= settings.max_retries
            or time.monotonic() + wait >= deadline
        ):
            tries = f" (after {attempt + 1} attempts)" if attempt else ""
            where = f" to {provider_endpoint(provider, settings.base_url)}" if failure.reason in ("connection", "timeout") else ""
            raise ProviderError(
                _mask(f"{provider}: {failure.reason.replace('_', ' ')}{where}: {failure.message}{tries}", settings.api_key),
                provider=provider,
                reason=failure.reason,
                status=failure.status,
            ) from None
        attempt += 1
        sleep(wait)


PUBLIC_ENDPOINTS = {
    "openai": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "text": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}


def provider_endpoint(provider: str, base_url: str | None) -> str:
    """Where a provider's requests go, for an error message: the base URL without userinfo,
    query or fragment (which may hold a key), else the provider's public API."""
    if not base_url:
        return PUBLIC_ENDPOINTS.get(provider, provider)
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(base_url)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "the --base-url given"


def _mask(text: str, secret: str | None) -> str:
    text = " ".join(text.split())  # one line
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


def classify_sdk_failure(exc: BaseException, sdk: ModuleType, status_failure: Callable[[Any], Failure]) -> Failure | None:
    """A failure of the openai or anthropic SDK (both generated by Stainless, with the same four
    exception classes); `status_failure` reads the provider's error body of an HTTP status error."""
    if isinstance(exc, sdk.APITimeoutError):
        return Failure("timeout", "the request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        return connection_failure(exc)
    if isinstance(exc, sdk.APIStatusError):
        return status_failure(exc)
    if isinstance(exc, sdk.APIError):
        return Failure("other", exc.message)
    return None


def connection_failure(exc: BaseException) -> Failure:
    """A request that never reached the API. A refused connection (nothing listens at the base
    URL: a local server that is not running, a wrong port) is said as such and not retried: the
    next attempts would be refused the same, seconds later."""
    seen: BaseException | None = exc
    for _ in range(8):  # the SDK's error, then httpx's, httpcore's, the socket's
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return Failure("connection", "Connection refused", final=True)
        seen = seen.__cause__ or seen.__context__
    return Failure("connection", str(exc.__cause__ or exc) or "connection error")


def http_failure(status: int | None, body: object, fallback: str, headers: Mapping[str, str] | None = None) -> Failure:
    """A Failure from an HTTP error: the message the provider put in its error body."""
    message = None
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            message = err.get("message")
        elif isinstance(err, str):
            message = err
    message = str(message or fallback or f"HTTP {status}")
    return Failure(reason_for_status(status, message), message, status, retry_after_seconds(headers))


# --- shared rendering helpers -------------------------------------------------------------


def unstreamed(response: Any) -> dict[str, Any] | None:
    """The whole reply as JSON when a server asked to stream answered one JSON document instead
    (some OpenAI-compatible proxies and local servers ignore `stream: true`): its SSE parser would
    find no event in it and the answer would be lost. None for a real event stream. `response`:
    the SDK stream's httpx response, headers read, body not yet."""
    kind = str(response.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if kind == "text/event-stream" or not kind.endswith("json"):
        return None

    response.read()
    try:
        whole = json.loads(response.content)
    except ValueError:
        return None
    return whole if isinstance(whole, dict) else None


def empty_stream(provider: str) -> ProviderError:
    """A stream that ended with no text, no tool call and no final message: the answer was lost
    on the way, and saying nothing with exit 0 would hide that."""
    return ProviderError(f"{provider}: the streamed reply carried no answer (no text, no tool call)", provider=provider)


def result_text(result: ToolResult) -> str:
    """The text of a result for an API that takes only text; errors say so since not every API
    has an error flag."""
    text = result.text
    return f"[tool error] {text}" if result.is_error else text


def images(result: ToolResult) -> list[dict[str, Any]]:
    return [c for c in result.content if c.get("type") == "image" and c.get("data")]


def text_besides_images(result: ToolResult) -> str:
    """The text of every part but the images, for APIs that take the images natively."""
    return ToolResult(content=[c for c in result.content if c not in images(result)]).text
