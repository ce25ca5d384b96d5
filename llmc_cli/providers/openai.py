"""OpenAI Chat Completions, and any OpenAI-compatible endpoint (Ollama, vLLM, LM Studio, ...)
through base_url. Tool results are text only in this API: images become a placeholder."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS
from typing import Any

from llmc_cli.model import ARGUMENTS_TOO_DEEP
from llmc_cli.providers.base import (
    END,
    LENGTH,
    OTHER,
    TOOL_CALLS,
    AssistantTurn,
    Failure,
    Message,
    OnText,
    ProviderSettings,
    ProviderToolCall,
    ToolResults,
    Usage,
    UserMessage,
    call_with_retries,
    classify_sdk_failure,
    empty_stream,
    http_failure,
    result_text,
    unstreamed,
)

FINISH = {"stop": END, "tool_calls": TOOL_CALLS, "function_call": TOOL_CALLS, "length": LENGTH}


def openai_client(settings: ProviderSettings) -> Any:
    import openai

    # max_retries=0: llmc retries itself (bounded, retry-after honoured, one error shape).
    return openai.OpenAI(
        api_key=settings.api_key or "not-needed", base_url=settings.base_url, max_retries=0, timeout=settings.timeout
    )


def classify_openai(exc: BaseException) -> Failure | None:
    import openai

    return classify_sdk_failure(exc, openai, _openai_status_failure)


def _openai_status_failure(exc: Any) -> Failure:
    failure = http_failure(
        exc.status_code, exc.body if isinstance(exc.body, dict) else {"error": exc.body}, exc.message, exc.response.headers
    )
    code = exc.body.get("code") if isinstance(exc.body, dict) else None
    if code == "context_length_exceeded":
        failure.reason = "context_length"
    return failure


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """Arguments arrive as a JSON string; anything but an object is an error for the model."""
    if not raw or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc.msg} at position {exc.pos}): {raw[:200]}"
    except RecursionError:
        return {}, ARGUMENTS_TOO_DEEP
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got: {raw[:200]}"
    return value, None


def chat_create(client: Any, kwargs: dict[str, Any], timeout: float, on_text: OnText | None, provider: str = "openai") -> Any:
    """One Chat Completions request. With `on_text`, streamed: each piece of text goes to on_text as
    it arrives, and the pieces are put together into the shape of a whole ChatCompletion
    (choices[0].message.content/tool_calls, finish_reason, usage), so one parser reads both. A
    server that answers one JSON completion instead of a stream is read as that completion; a
    stream with no text and no tool call is a ProviderError (`provider` names it)."""
    if on_text is None:
        return client.chat.completions.create(**kwargs, timeout=timeout)

    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish, usage, seen = None, None, False
    stream = client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}, timeout=timeout)
    whole = unstreamed(stream.response)
    if whole is not None:  # one JSON completion instead of a stream: use it, and show its text
        from openai.types.chat import ChatCompletion

        completion = ChatCompletion.construct(**whole)  # as the SDK reads a reply: unvalidated
        content = completion.choices[0].message.content if completion.choices else None
        if content:
            on_text(content)
        return completion
    for chunk in stream:
        usage = getattr(chunk, "usage", None) or usage
        for choice in chunk.choices or []:
            seen = True
            finish = choice.finish_reason or finish
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                text.append(delta.content)
                on_text(delta.content)
            for tc in delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = tc.id or call["id"]
                if tc.function is not None:
                    call["name"] += tc.function.name or ""
                    call["arguments"] += tc.function.arguments or ""
    if not text and not calls:
        raise empty_stream(provider)
    tool_calls = [
        NS(id=c["id"] or f"call_{i}", function=NS(name=c["name"], arguments=c["arguments"])) for i, c in sorted(calls.items())
    ]
    message = NS(content="".join(text), tool_calls=tool_calls)
    return NS(choices=[NS(message=message, finish_reason=finish)] if seen else [], usage=usage)


def chat_options(s: ProviderSettings) -> dict[str, Any]:
    """The model and its settings as Chat Completions takes them (the openai and text providers)."""
    options: dict[str, Any] = {"model": s.model}
    if s.temperature is not None:
        options["temperature"] = s.temperature
    if s.max_tokens is not None:
        # api.openai.com wants max_completion_tokens (max_tokens fails on reasoning models);
        # compatible servers mostly know only max_tokens.
        options["max_tokens" if s.base_url else "max_completion_tokens"] = s.max_tokens
    return options


class ChatCompletions:
    """What the providers that speak Chat Completions share (openai; text, which has the model
    write tool calls as text): the client, and a conversation as its messages. Each says how an
    assistant turn and a turn's tool results are sent."""

    name: str

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self.client = openai_client(settings)

    def messages(self, system: str | None, history: list[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for m in history:
            if isinstance(m, UserMessage):
                out.append({"role": "user", "content": m.text})
            elif isinstance(m, AssistantTurn):
                out.append(self.assistant_message(m))
            elif isinstance(m, ToolResults):
                out.extend(self.results_messages(m))
        return out

    def assistant_message(self, turn: AssistantTurn) -> dict[str, Any]:
        raise NotImplementedError

    def results_messages(self, results: ToolResults) -> list[dict[str, Any]]:
        raise NotImplementedError


class OpenAIChat(ChatCompletions):
    name = "openai"
    format = "openai"

    def assistant_message(self, turn: AssistantTurn) -> dict[str, Any]:
        # content is optional beside tool_calls; an explicit null only costs the SDK time
        msg: dict[str, Any] = {"role": "assistant"}
        if turn.text or not turn.tool_calls:
            msg["content"] = turn.text
        if turn.tool_calls:
            raw_args = (turn.raw or {}).get("arguments", {}) if turn.provider == self.name else {}
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": raw_args.get(c.id, json.dumps(c.arguments))},
                }
                for c in turn.tool_calls
            ]
        return msg

    def results_messages(self, results: ToolResults) -> list[dict[str, Any]]:
        return [{"role": "tool", "tool_call_id": i.call_id, "content": result_text(i.result)} for i in results.items]

    def complete(
        self,
        system: str | None,
        history: list[Message],
        tools: Any | None,
        timeout: float | None = None,
        on_text: OnText | None = None,
    ) -> AssistantTurn:
        s = self.settings
        kwargs = {**chat_options(s), "messages": self.messages(system, history)}
        if tools is not None and tools.definitions:
            kwargs["tools"] = tools.definitions
        resp = call_with_retries(self.name, s, lambda t: chat_create(self.client, kwargs, t, on_text), classify_openai, timeout)
        if not resp.choices:
            return AssistantTurn(stop_reason=OTHER, provider=self.name, usage=usage_of(resp))
        choice = resp.choices[0]
        msg = choice.message
        calls, raw_args = [], {}
        for tc in msg.tool_calls or []:
            fn = getattr(tc, "function", None)
            if fn is None:  # a custom (non-function) tool call: not something llmc offered
                continue
            args, error = parse_arguments(fn.arguments)
            calls.append(ProviderToolCall(tc.id, fn.name, args, error))
            raw_args[tc.id] = fn.arguments or "{}"
        stop = TOOL_CALLS if calls else FINISH.get(choice.finish_reason or "", OTHER)
        if stop == TOOL_CALLS and not calls:
            stop = OTHER
        return AssistantTurn(
            text=msg.content or "",
            tool_calls=calls,
            stop_reason=stop,
            usage=usage_of(resp),
            provider=self.name,
            raw={"arguments": raw_args},
        )


def usage_of(resp: Any) -> Usage:
    u = getattr(resp, "usage", None)
    return Usage(getattr(u, "prompt_tokens", None), getattr(u, "completion_tokens", None))
