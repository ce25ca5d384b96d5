"""Sampling: a server's sampling/createMessage answered by the profile's model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from llmc_cli.model import ToolResult
from llmc_cli.providers.base import LENGTH, AssistantTurn, Message, Provider, UserMessage, make_provider


def sampler(provider: Provider, *, max_tokens: int = 1024, timeout: float = 120.0) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ClientHooks.sample handler: a server's sampling/createMessage answered by the profile's
    model, with no tools (only when the profile sets [llm] allow_sampling). Text content only;
    other parts reach the model as placeholders."""

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        history: list[Message] = []
        for m in params.get("messages") or []:
            parts = m.get("content")
            parts = parts if isinstance(parts, list) else [parts]
            text = ToolResult(content=[p for p in parts if isinstance(p, dict)]).text
            history.append(UserMessage(text) if m.get("role") == "user" else AssistantTurn(text=text))
        wanted = params.get("maxTokens")
        cap = min(int(wanted), max_tokens) if isinstance(wanted, int) and wanted > 0 else max_tokens
        temperature = params.get("temperature")
        # A provider of its own: a server may sample while the loop's provider is in use.
        settings = replace(
            provider.settings,
            max_tokens=cap,
            temperature=float(temperature) if isinstance(temperature, (int, float)) else provider.settings.temperature,
        )
        turn = make_provider(provider.name, settings).complete(params.get("systemPrompt"), history, None, timeout=timeout)
        return {
            "role": "assistant",
            "content": {"type": "text", "text": turn.text},
            "model": settings.model,
            "stopReason": "maxTokens" if turn.stop_reason == LENGTH else "endTurn",
        }

    return sample
