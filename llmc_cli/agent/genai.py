"""The `ask` loop as the OpenTelemetry GenAI conventions trace it (gen-ai-agent-spans.md,
gen-ai-spans.md, gen-ai-metrics.md): `invoke_agent llmc` (INTERNAL) around the run, one
`chat {model}` (CLIENT) per model call with the GenAI client metrics, and `execute_tool {name}`
(INTERNAL) around each tool call, the parent of that call's MCP client span. Each is a no-op
while telemetry is off (telemetry.span returns a shared null context)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import urlsplit

from llmc_cli import telemetry
from llmc_cli.agent.conversations import Conversation
from llmc_cli.model import Tool
from llmc_cli.providers.base import AssistantTurn, Provider

# gen_ai.provider.name for llmc's providers (`text` speaks Chat Completions, as the
# OpenAI-compatible local servers do; the conventions name the Gemini API gcp.gemini).
PROVIDER_NAMES = {"openai-responses": "openai", "text": "openai", "gemini": "gcp.gemini"}
DEFAULT_HOSTS = {
    "openai": "api.openai.com",
    "openai-responses": "api.openai.com",
    "anthropic": "api.anthropic.com",
    "gemini": "generativelanguage.googleapis.com",
}


def provider_name(name: str) -> str:
    return PROVIDER_NAMES.get(name, name)


def _model_attributes(provider: Provider, operation: str) -> dict[str, Any]:
    """The attributes a span and its metrics share: operation, provider, model, server."""
    settings = provider.settings
    attributes: dict[str, Any] = {"gen_ai.operation.name": operation, "gen_ai.provider.name": provider_name(provider.name)}
    if settings.model:
        attributes["gen_ai.request.model"] = settings.model
    url = urlsplit(settings.base_url) if settings.base_url else None
    host = url.hostname if url is not None else DEFAULT_HOSTS.get(provider.name)
    if host:
        attributes["server.address"] = host
        attributes["server.port"] = (
            url.port if url is not None and url.port else 80 if url is not None and url.scheme == "http" else 443
        )
    return attributes


def agent_span(provider: Provider, conv: Conversation) -> AbstractContextManager[telemetry.Span]:
    attributes = {**_model_attributes(provider, "invoke_agent"), "gen_ai.agent.name": "llmc", "gen_ai.conversation.id": conv.id}
    return telemetry.span("invoke_agent llmc", "internal", attributes)


def traced_chat(provider: Provider, conv: Conversation, complete: Callable[[], AssistantTurn]) -> AssistantTurn:
    """One model call (`complete`), as a `chat {model}` CLIENT span and the GenAI client metrics."""
    if not telemetry.enabled():
        return complete()
    metric = _model_attributes(provider, "chat")
    settings = provider.settings
    attributes = {
        **metric,
        "gen_ai.conversation.id": conv.id,
        **({"gen_ai.request.temperature": settings.temperature} if settings.temperature is not None else {}),
        **({"gen_ai.request.max_tokens": settings.max_tokens} if settings.max_tokens is not None else {}),
    }
    t0 = time.monotonic()
    with telemetry.span(f"chat {settings.model or ''}".strip(), "client", attributes) as span:
        try:
            turn = complete()
        except Exception as exc:
            telemetry.chat_usage({**metric, "error.type": type(exc).__name__}, None, None, time.monotonic() - t0)
            raise
        usage = turn.usage
        for key, value in (
            ("gen_ai.usage.input_tokens", usage.input_tokens),
            ("gen_ai.usage.output_tokens", usage.output_tokens),
        ):
            if value is not None:
                span.set(key, value)
        if turn.stop_reason:
            span.set("gen_ai.response.finish_reasons", [turn.stop_reason])
        telemetry.chat_usage(metric, usage.input_tokens, usage.output_tokens, time.monotonic() - t0)
    return turn


def tool_span(tool: Tool, call_id: str) -> AbstractContextManager[telemetry.Span]:
    """`execute_tool {name}`: gen_ai.tool.type `extension`, a tool the agent calls in an external
    system (an MCP server); `llmc.server` says which."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool.name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "extension",
        "llmc.server": tool.server,
        **({"gen_ai.tool.description": tool.description[:1000]} if tool.description else {}),
    }
    return telemetry.span(f"execute_tool {tool.name}", "internal", attributes)
