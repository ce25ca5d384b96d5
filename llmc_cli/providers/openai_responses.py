"""OpenAI Responses API: the model's output items are re-sent unchanged (reasoning items
included), tool results go back as function_call_output items (text, or text + images)."""

from __future__ import annotations

import json
from typing import Any

from llmc_cli.errors import ProviderError
from llmc_cli.model import JSONObject
from llmc_cli.providers.base import (
    END,
    LENGTH,
    OTHER,
    TOOL_CALLS,
    AssistantTurn,
    Message,
    OnText,
    ProviderSettings,
    ProviderToolCall,
    ToolResults,
    Usage,
    UserMessage,
    call_with_retries,
    empty_stream,
    images,
    result_text,
    text_besides_images,
    unstreamed,
)
from llmc_cli.providers.openai import classify_openai, openai_client, parse_arguments


class OpenAIResponses:
    name = "openai-responses"
    format = "openai-responses"

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self.client = openai_client(settings)

    def input_items(self, history: list[Message]) -> list[JSONObject]:
        out: list[JSONObject] = []
        for m in history:
            if isinstance(m, UserMessage):
                out.append({"role": "user", "content": m.text})
            elif isinstance(m, AssistantTurn):
                if m.provider == self.name and isinstance(m.raw, list):
                    out.extend(m.raw)
                    continue
                if m.text:
                    out.append({"role": "assistant", "content": m.text})
                out.extend(
                    {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": json.dumps(c.arguments)}
                    for c in m.tool_calls
                )
            elif isinstance(m, ToolResults):
                for i in m.items:
                    pics = images(i.result)
                    output: Any = result_text(i.result)
                    if pics:  # this API takes images in a tool's output
                        text = text_besides_images(i.result)
                        output = ([{"type": "input_text", "text": text}] if text else []) + [
                            {"type": "input_image", "image_url": f"data:{p.get('mimeType', 'image/png')};base64,{p['data']}"}
                            for p in pics
                        ]
                    out.append({"type": "function_call_output", "call_id": i.call_id, "output": output})
        return out

    def complete(
        self,
        system: str | None,
        history: list[Message],
        tools: Any | None,
        timeout: float | None = None,
        on_text: OnText | None = None,
    ) -> AssistantTurn:
        kwargs = self._request(system, history, tools)

        def send(t: float) -> Any:
            if on_text is None:
                return self.client.responses.create(**kwargs, timeout=t)
            return self._streamed(kwargs, t, on_text)

        return self._turn(call_with_retries(self.name, self.settings, send, classify_openai, timeout))

    def _request(self, system: str | None, history: list[Message], tools: Any | None) -> dict[str, Any]:
        s = self.settings
        kwargs: dict[str, Any] = {"model": s.model, "input": self.input_items(history)}
        if system:
            kwargs["instructions"] = system
        if tools is not None and tools.definitions:
            kwargs["tools"] = tools.definitions
        if s.temperature is not None:
            kwargs["temperature"] = s.temperature
        if s.max_tokens is not None:
            kwargs["max_output_tokens"] = s.max_tokens
        return kwargs

    def _streamed(self, kwargs: dict[str, Any], t: float, on_text: OnText) -> Any:
        """The Response of a streamed request, its text shown as it comes."""
        final = None
        stream = self.client.responses.create(**kwargs, stream=True, timeout=t)
        whole = unstreamed(stream.response)
        if whole is not None:  # one JSON Response instead of a stream: use it, and show its text
            from openai.types.responses import Response

            final = Response.construct(**whole)  # as the SDK reads a reply: unvalidated
            if final.output_text:
                on_text(final.output_text)
            return final
        for event in stream:
            if event.type == "response.output_text.delta":
                on_text(event.delta)
            elif event.type in ("response.completed", "response.incomplete"):
                final = event.response  # the whole Response, as create() returns it
            elif event.type in ("response.failed", "error"):
                message = getattr(getattr(getattr(event, "response", None), "error", None), "message", None)
                raise ProviderError(
                    f"{self.name}: {message or getattr(event, 'message', None) or event.type}", provider=self.name
                )
        if final is None:
            raise empty_stream(self.name)
        return final

    def _turn(self, resp: Any) -> AssistantTurn:
        texts: list[str] = []
        calls: list[ProviderToolCall] = []
        raw: list[JSONObject] = []
        for item in resp.output or []:
            raw.append(item.model_dump(mode="json", exclude_none=True))
            if item.type == "message":
                texts.extend(getattr(part, "text", "") for part in item.content or [] if part.type == "output_text")
            elif item.type == "function_call":
                args, error = parse_arguments(item.arguments)
                calls.append(ProviderToolCall(item.call_id, item.name, args, error))
        if calls:
            stop = TOOL_CALLS
        elif resp.status == "incomplete":
            reason = getattr(resp.incomplete_details, "reason", None)
            stop = LENGTH if reason == "max_output_tokens" else OTHER
        else:
            stop = END
        u = resp.usage
        return AssistantTurn(
            text="".join(texts),
            tool_calls=calls,
            stop_reason=stop,
            usage=Usage(getattr(u, "input_tokens", None), getattr(u, "output_tokens", None)),
            provider=self.name,
            raw=raw,
        )
