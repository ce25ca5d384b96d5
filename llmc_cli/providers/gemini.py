"""Gemini through google-genai. Automatic function calling is off (llmc runs the tools); the
model's content is appended unchanged so thought signatures survive; each result goes back as a
FunctionResponse part with the call's id (when the model gave one), its name and
{"output": ...} or {"error": ...}; images ride in the FunctionResponse's own parts."""

from __future__ import annotations

import base64
import uuid
from typing import Any

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
    connection_failure,
    empty_stream,
    http_failure,
    images,
    text_besides_images,
)

FINISH = {"STOP": END, "MAX_TOKENS": LENGTH}


def classify_gemini(exc: BaseException) -> Failure | None:
    from google.genai import errors

    if isinstance(exc, errors.APIError):
        headers = getattr(getattr(exc, "response", None), "headers", None)
        failure = http_failure(exc.code, {"error": {"message": exc.message}}, str(exc), headers)
        if exc.code == 503 and failure.reason == "server":
            failure.reason = "overloaded"  # UNAVAILABLE: "The model is overloaded"
        return failure
    # google-genai lets httpx/httpx2 transport errors through unchanged.
    names = {c.__name__ for c in type(exc).__mro__}
    if type(exc).__module__.split(".")[0] in ("httpx", "httpx2"):
        if "TimeoutException" in names:
            return Failure("timeout", "the request timed out")
        if "TransportError" in names:
            failure = connection_failure(exc)
            return failure if failure.final else Failure("connection", str(exc) or type(exc).__name__)
    return None


def tool_list(definitions: object) -> list[Any]:
    """translate's Gemini definitions as a `tools` list: function declarations get one Tool."""
    defs = definitions if isinstance(definitions, list) else [definitions]
    if all(isinstance(d, dict) and ("function_declarations" in d or "functionDeclarations" in d) for d in defs):
        return defs
    return [{"function_declarations": defs}]


class Gemini:
    name = "gemini"
    format = "gemini"

    def __init__(self, settings: ProviderSettings) -> None:
        from google import genai
        from google.genai import types

        self.settings = settings
        # attempts=1: no SDK retries (llmc retries itself); the default api_version is v1.
        options = types.HttpOptions(
            base_url=settings.base_url, api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1)
        )
        self.client = genai.Client(api_key=settings.api_key, http_options=options)

    def contents(self, history: list[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for m in history:
            if isinstance(m, UserMessage):
                out.append({"role": "user", "parts": [{"text": m.text}]})
            elif isinstance(m, AssistantTurn):
                if m.provider == self.name and isinstance(m.raw, dict):
                    out.append(m.raw)
                else:
                    parts: list[dict[str, Any]] = [{"text": m.text}] if m.text else []
                    parts += [{"function_call": {"name": c.name, "args": c.arguments}} for c in m.tool_calls]
                    if parts:  # an empty model turn (e.g. a blocked prompt) is not sent back
                        out.append({"role": "model", "parts": parts})
            elif isinstance(m, ToolResults):
                out.append({"role": "user", "parts": [self.function_response(i) for i in m.items]})
            if len(out) > 1 and out[-1]["role"] == out[-2]["role"] == "user":
                # results, then a new question (a continued conversation): one user turn
                last = out.pop()
                out[-1] = {"role": "user", "parts": out[-1]["parts"] + last["parts"]}
        return out

    @staticmethod
    def function_response(item: Any) -> dict[str, Any]:
        result = item.result
        text = text_besides_images(result) if images(result) else result.text
        response = {"error": text} if result.is_error else {"output": text}
        fr: dict[str, Any] = {"name": item.name, "response": response}
        if item.echo_id:
            fr["id"] = item.call_id
        pics = images(result)
        if pics:
            fr["parts"] = [
                {"inline_data": {"mime_type": p.get("mimeType", "image/png"), "data": base64.b64decode(p["data"])}} for p in pics
            ]
        return {"function_response": fr}

    def complete(
        self,
        system: str | None,
        history: list[Message],
        tools: Any | None,
        timeout: float | None = None,
        on_text: OnText | None = None,
    ) -> AssistantTurn:
        from google.genai import types

        s = self.settings
        model = s.model or ""  # never empty: make_provider refuses a provider without a model
        contents = self.contents(history)

        def send(t: float) -> Any:
            config = types.GenerateContentConfig(
                system_instruction=system or None,
                temperature=s.temperature,
                max_output_tokens=s.max_tokens,
                tools=tool_list(tools.definitions) if tools is not None and tools.definitions else None,
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
                http_options=types.HttpOptions(timeout=int(t * 1000), retry_options=types.HttpRetryOptions(attempts=1)),
            )
            if on_text is None:
                return self.client.models.generate_content(model=model, contents=contents, config=config)
            # Streamed: text parts go to on_text as they come; every chunk's parts, in order, make
            # the one candidate of a whole response (finish reason and usage from the last).
            parts, last = [], None
            for chunk in self.client.models.generate_content_stream(model=model, contents=contents, config=config):
                last = chunk
                content = chunk.candidates[0].content if chunk.candidates else None
                for part in (content.parts if content is not None else None) or []:
                    parts.append(part)
                    if part.text and not part.thought and part.function_call is None:
                        on_text(part.text)
            if last is None:
                raise empty_stream(self.name)
            finish = last.candidates[0].finish_reason if last.candidates else None
            return types.GenerateContentResponse(
                candidates=[types.Candidate(content=types.Content(role="model", parts=parts), finish_reason=finish)],
                usage_metadata=last.usage_metadata,
            )

        resp = call_with_retries(self.name, s, send, classify_gemini, timeout)
        u = resp.usage_metadata
        usage = Usage(getattr(u, "prompt_token_count", None), getattr(u, "candidates_token_count", None))
        if not resp.candidates or resp.candidates[0].content is None:
            return AssistantTurn(text="", stop_reason=OTHER, usage=usage, provider=self.name)
        candidate = resp.candidates[0]
        content = candidate.content
        texts, calls = [], []
        for part in content.parts or []:
            if part.function_call is not None:
                fc = part.function_call
                args = fc.args if isinstance(fc.args, dict) else {}
                calls.append(ProviderToolCall(fc.id or f"llmc-{uuid.uuid4().hex[:12]}", fc.name or "", args, echo_id=bool(fc.id)))
            elif part.text and not part.thought:
                texts.append(part.text)
        finish = getattr(candidate.finish_reason, "value", candidate.finish_reason) or ""
        stop = TOOL_CALLS if calls else FINISH.get(str(finish), OTHER)
        # The content exactly as received (thought_signature bytes as base64 in JSON mode).
        raw = content.model_dump(mode="json", exclude_none=True)
        raw.setdefault("role", "model")
        return AssistantTurn(text="".join(texts), tool_calls=calls, stop_reason=stop, usage=usage, provider=self.name, raw=raw)
