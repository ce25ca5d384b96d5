"""Anthropic Messages. The model's content blocks (thinking blocks with their signatures
included) are sent back unchanged; every tool result of a turn goes in ONE user message as
tool_result blocks with is_error; images are allowed inside a tool_result."""

from __future__ import annotations

from typing import Any

from llmc_cli.model import ToolResult
from llmc_cli.providers.base import (
    END,
    LENGTH,
    OTHER,
    PAUSE,
    TOOL_CALLS,
    AssistantTurn,
    Failure,
    Message,
    OnText,
    ProviderSettings,
    ProviderToolCall,
    Usage,
    UserMessage,
    call_with_retries,
    classify_sdk_failure,
    empty_stream,
    http_failure,
    images,
    text_besides_images,
    unstreamed,
)

STOP = {"end_turn": END, "stop_sequence": END, "tool_use": TOOL_CALLS, "max_tokens": LENGTH, "pause_turn": PAUSE}
# The beta of Anthropic's server-side tool search (tools with defer_loading, found by its search tool).
TOOL_SEARCH_BETA = "advanced-tool-use-2025-11-20"
DEFAULT_MAX_TOKENS = 4096  # the API requires max_tokens


def classify_anthropic(exc: BaseException) -> Failure | None:
    import anthropic

    return classify_sdk_failure(exc, anthropic, _anthropic_status_failure)


def _anthropic_status_failure(exc: Any) -> Failure:
    failure = http_failure(exc.status_code, exc.body, exc.message, exc.response.headers)
    err = exc.body.get("error") if isinstance(exc.body, dict) else None
    if isinstance(err, dict) and err.get("type") == "overloaded_error":
        failure.reason = "overloaded"
    elif isinstance(err, dict) and "prompt is too long" in str(err.get("message", "")):
        failure.reason = "context_length"
    return failure


class AnthropicMessages:
    name = "anthropic"
    format = "anthropic"

    def __init__(self, settings: ProviderSettings) -> None:
        import anthropic

        self.settings = settings
        # The Messages API of anthropic 2.12 has no temperature parameter.
        self.warnings = (
            ["anthropic: temperature is not supported by the Messages API; ignored"] if settings.temperature is not None else []
        )
        self.client = anthropic.Anthropic(
            api_key=settings.api_key, base_url=settings.base_url, max_retries=0, timeout=settings.timeout
        )

    def messages(self, history: list[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for m in history:
            blocks: list[dict[str, Any]]
            if isinstance(m, UserMessage):
                role, blocks = "user", [{"type": "text", "text": m.text}]
            elif isinstance(m, AssistantTurn):
                role = "assistant"
                if m.provider == self.name and isinstance(m.raw, list):
                    blocks = m.raw
                else:
                    blocks = ([{"type": "text", "text": m.text}] if m.text else []) + [
                        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls
                    ]
            else:
                role, blocks = "user", [self.tool_result(i.call_id, i.result) for i in m.items]
            # Consecutive user messages (tool results, then a new question) merge into one.
            if out and out[-1]["role"] == role == "user":
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": list(blocks)})
        return out

    @staticmethod
    def tool_result(call_id: str, result: ToolResult) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        text = text_besides_images(result)
        if text or not images(result):
            content.append({"type": "text", "text": text or "(no output)"})
        content.extend(
            {"type": "image", "source": {"type": "base64", "media_type": p.get("mimeType", "image/png"), "data": p["data"]}}
            for p in images(result)
        )
        return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": result.is_error}

    def complete(
        self,
        system: str | None,
        history: list[Message],
        tools: Any | None,
        timeout: float | None = None,
        on_text: OnText | None = None,
    ) -> AssistantTurn:
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": s.model,
            "messages": self.messages(history),
            "max_tokens": s.max_tokens or DEFAULT_MAX_TOKENS,
        }
        if system:
            kwargs["system"] = system
        if tools is not None and tools.definitions:
            kwargs["tools"] = tools.definitions
        api: Any = self.client.messages
        if any(isinstance(d, dict) and d.get("defer_loading") for d in kwargs.get("tools") or []):
            api = self.client.beta.messages  # server-side tool search: its blocks come back as they are
            kwargs["betas"] = [TOOL_SEARCH_BETA]

        def send(t: float) -> Any:
            if on_text is None:
                return api.create(**kwargs, timeout=t)
            with api.stream(**kwargs, timeout=t) as stream:
                whole = unstreamed(stream.response)
                if whole is not None:  # one JSON Message instead of a stream: use it, and show its text
                    from anthropic.types import Message as Reply

                    message = Reply.construct(**whole)  # as the SDK reads a reply: unvalidated
                    for block in message.content:
                        if block.type == "text" and block.text:
                            on_text(block.text)
                    return message
                started = False
                for event in stream:
                    started = started or event.type == "message_start"
                    if event.type == "text":
                        on_text(event.text)
                if not started:
                    raise empty_stream(self.name)
                return stream.get_final_message()  # the same Message a create() returns

        resp = call_with_retries(self.name, s, send, classify_anthropic, timeout)
        texts, calls, raw = [], [], []
        for block in resp.content or []:
            raw.append(block.model_dump(mode="json", exclude_none=True))
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                args = block.input if isinstance(block.input, dict) else {}
                error = None if isinstance(block.input, dict) else f"the input must be an object, got {block.input!r:.200}"
                calls.append(ProviderToolCall(block.id, block.name, args, error))
        stop = TOOL_CALLS if calls else STOP.get(resp.stop_reason or "", OTHER)
        u = resp.usage
        return AssistantTurn(
            text="".join(texts),
            tool_calls=calls,
            stop_reason=stop,
            usage=Usage(getattr(u, "input_tokens", None), getattr(u, "output_tokens", None)),
            provider=self.name,
            raw=raw,
        )
