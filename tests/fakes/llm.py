"""Wire-level fakes of the LLM providers' HTTP APIs, for the real SDKs to talk to.

    with FakeLLM("anthropic", [anthropic_reply(text="hi")]) as fake:
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="x", max_retries=0)
        ...
        fake.requests[0].body   # exactly what the SDK sent

A FakeLLM serves one API on 127.0.0.1 (stdlib http.server in a thread), plays its script of
replies in order (one per request) and records every request's path, headers and JSON body.
Replies are built by the functions below in each API's documented shape, errors included.
A request past the end of the script gets a 500 and is recorded in `unexpected`, so a test that
sends more than it planned fails loudly instead of looping.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATHS = {
    "openai": re.compile(r"^/v1/chat/completions$"),
    "openai-responses": re.compile(r"^/v1/responses$"),
    "anthropic": re.compile(r"^/v1/messages$"),
    "gemini": re.compile(r"^/(v1beta|v1)/models/(?P<model>[^/:]+):(generateContent|streamGenerateContent)$"),
}
PATHS["text"] = PATHS["openai"]  # the text protocol talks to a plain chat endpoint

_ids = itertools.count(1)


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (timeouts)
    # Streamed replies only: after the first piece of text the fake waits for this event (set by
    # the test once it saw that piece arrive), so a test proves streaming without timing.
    gate: threading.Event | None = None
    # A server that ignores `stream: true` (some proxies and local servers): the whole reply as
    # one JSON document, content-type application/json.
    unstreamed: bool = False


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any


class FakeLLM:
    def __init__(self, api: str, script: list[Reply] | None = None) -> None:
        if api not in PATHS:
            raise ValueError(f"unknown api {api}")
        self.api = api
        self.script = list(script or [])
        self.requests: list[Request] = []
        self.unexpected: list[Request] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # One segment per reply and no Nagle: otherwise headers and body go out apart and
            # delayed ACKs add ~40 ms to every request (it would swamp the agent benchmark).
            wbufsize = 1 << 16
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                request = Request("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = fake._next(request)
                if reply.delay:
                    time.sleep(reply.delay)
                streamed = (isinstance(body, dict) and body.get("stream") is True) or ":streamGenerateContent" in self.path
                if streamed and reply.status == 200 and not reply.unstreamed:
                    self._stream(reply)
                    return
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def _stream(self, reply: Reply) -> None:
                """The reply as the API's server-sent events, text cut into pieces."""
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    gated = False
                    # A body of None: an event stream that ends at once (an answer lost on the way).
                    for name, data in STREAMS[fake.api](reply.body) if reply.body is not None else []:
                        event = (
                            f"event: {name}\n" if name else ""
                        ) + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
                        self.wfile.write(event.encode())
                        self.wfile.flush()
                        if reply.gate is not None and not gated and _has_text(fake.api, data):
                            gated = True
                            reply.gate.wait(30)
                    self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _next(self, request: Request) -> Reply:
        path = request.path.split("?", 1)[0]
        with self._lock:
            if not PATHS[self.api].match(path):
                self.unexpected.append(request)
                return Reply(404, {"error": {"message": f"fake {self.api}: no route {path}"}})
            self.requests.append(request)
            if not self.script:
                self.unexpected.append(request)
                return Reply(500, {"error": {"message": "fake script exhausted"}})
            return self.script.pop(0)

    @property
    def base_url(self) -> str:
        """What the provider's SDK takes as base URL (OpenAI's includes /v1)."""
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if self.api in ("openai", "openai-responses", "text") else root

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


# --- OpenAI Chat Completions -----------------------------------------------------------------


def chat_reply(
    content: str | None = None,
    tool_calls: list[tuple[str, str, Any]] = (),
    finish: str | None = None,
    usage: tuple[int, int] = (11, 7),
    model: str = "gpt-fake",
) -> Reply:
    """tool_calls: (id, name, arguments as a dict or a raw string)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
            for i, n, a in tool_calls
        ]
    return Reply(
        200,
        {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish or ("tool_calls" if tool_calls else "stop"),
                }
            ],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        },
    )


def openai_error(
    status: int,
    message: str,
    type_: str,
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    return Reply(status, {"error": {"message": message, "type": type_, "param": param, "code": code}}, headers or {})


OPENAI_ERRORS = {
    "auth": lambda: openai_error(
        401,
        "Incorrect API key provided: sk-fake***. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    ),
    "rate_limit": lambda retry="1": openai_error(
        429,
        "Rate limit reached for gpt-fake on requests per min (RPM): Limit 3, Used 3, Requested 1.",
        "requests",
        "rate_limit_exceeded",
        headers={"retry-after": retry},
    ),
    "server": lambda: openai_error(
        500, "The server had an error while processing your request. Sorry about that!", "server_error"
    ),
    "overloaded": lambda: openai_error(503, "The engine is currently overloaded, please try again later.", "server_error"),
    "context_length": lambda: openai_error(
        400,
        "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 130001 tokens. Please reduce the length of the "
        "messages.",
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
    ),
}


# --- OpenAI Responses ------------------------------------------------------------------------


def responses_reply(
    text: str | None = None,
    calls: list[tuple[str, str, Any]] = (),
    reasoning: bool = False,
    status: str = "completed",
    usage: tuple[int, int] = (13, 9),
    model: str = "gpt-fake",
) -> Reply:
    """calls: (call_id, name, arguments dict). `reasoning` adds an encrypted reasoning item that a
    client must send back unchanged."""
    output: list[dict[str, Any]] = []
    if reasoning:
        output.append(
            {"type": "reasoning", "id": f"rs_{next(_ids)}", "summary": [], "encrypted_content": "gAAAAB-opaque-reasoning-state"}
        )
    if text is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_{next(_ids)}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for call_id, name, args in calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{next(_ids)}",
                "call_id": call_id,
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
                "status": "completed",
            }
        )
    body = {
        "id": f"resp_{next(_ids)}",
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "total_tokens": sum(usage),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    if status == "incomplete":
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    return Reply(200, body)


# --- Anthropic Messages ----------------------------------------------------------------------


def anthropic_reply(
    text: str | None = None,
    tool_uses: list[tuple[str, str, Any]] = (),
    thinking: str | None = None,
    stop: str | None = None,
    usage: tuple[int, int] = (21, 8),
    model: str = "claude-fake",
) -> Reply:
    """tool_uses: (id, name, input dict). `thinking` adds a signed thinking block that must come
    back unchanged."""
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking, "signature": "EqQBCkYIARgCIkBsig=="})
    if text is not None:
        content.append({"type": "text", "text": text})
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in tool_uses]
    return Reply(
        200,
        {
            "id": f"msg_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop or ("tool_use" if tool_uses else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        },
    )


def anthropic_error(status: int, type_: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status, {"type": "error", "error": {"type": type_, "message": message}, "request_id": f"req_{next(_ids)}"}, headers or {}
    )


ANTHROPIC_ERRORS = {
    "auth": lambda: anthropic_error(401, "authentication_error", "invalid x-api-key"),
    "rate_limit": lambda retry="1": anthropic_error(
        429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", {"retry-after": retry}
    ),
    "server": lambda: anthropic_error(500, "api_error", "Internal server error"),
    "overloaded": lambda: anthropic_error(529, "overloaded_error", "Overloaded"),
    "context_length": lambda: anthropic_error(400, "invalid_request_error", "prompt is too long: 210012 tokens > 200000 maximum"),
}


# --- Gemini generateContent ------------------------------------------------------------------


def gemini_reply(
    text: str | None = None,
    calls: list[tuple[str | None, str, Any]] = (),
    signature: str | None = None,
    finish: str = "STOP",
    usage: tuple[int, int] = (17, 6),
    model: str = "gemini-fake",
) -> Reply:
    """calls: (id or None, name, args dict). `signature` (base64) is put on the first function
    call part as thoughtSignature, as Gemini 3 does; it must come back unchanged."""
    parts: list[dict[str, Any]] = [{"text": text}] if text is not None else []
    for n, (call_id, name, args) in enumerate(calls):
        fc: dict[str, Any] = {"name": name, "args": args}
        if call_id:
            fc["id"] = call_id
        part: dict[str, Any] = {"functionCall": fc}
        if signature and n == 0:
            part["thoughtSignature"] = signature
        parts.append(part)
    return Reply(
        200,
        {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
            "usageMetadata": {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1], "totalTokenCount": sum(usage)},
            "modelVersion": model,
            "responseId": f"r{next(_ids)}",
        },
    )


def gemini_error(status: int, grpc_status: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"error": {"code": status, "message": message, "status": grpc_status}}, headers or {})


GEMINI_ERRORS = {
    "auth": lambda: gemini_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
    "rate_limit": lambda retry="1": gemini_error(
        429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).", {"retry-after": retry}
    ),
    "server": lambda: gemini_error(500, "INTERNAL", "An internal error has occurred."),
    "overloaded": lambda: gemini_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
    "context_length": lambda: gemini_error(
        400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    ),
}

ERRORS = {
    "openai": OPENAI_ERRORS,
    "openai-responses": OPENAI_ERRORS,
    "text": OPENAI_ERRORS,
    "anthropic": ANTHROPIC_ERRORS,
    "gemini": GEMINI_ERRORS,
}


# --- streamed replies: each API's server-sent events for a whole reply body ------------------


def _pieces(text: str) -> list[str]:
    """Text in three pieces (fewer for short text), as a model streams it."""
    size = max(1, -(-len(text) // 3))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chat_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    choice = body["choices"][0]
    message = choice["message"]
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in _pieces(message.get("content") or "")]
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        events += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            for piece in _pieces(call["function"]["arguments"])
        ]
    events.append(chunk({}, choice["finish_reason"]))
    events.append((None, {**base, "choices": [], "usage": body["usage"]}))
    return [*events, (None, "[DONE]")]


def _anthropic_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    start = {
        **body,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": body["usage"]["input_tokens"], "output_tokens": 0},
    }
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(body["content"]):
        if block["type"] == "text":
            first, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        elif block["type"] == "tool_use":
            first = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(json.dumps(block["input"]))]
        else:  # thinking
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": first}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": body["usage"]["output_tokens"]},
            },
        )
    )
    return [*events, ("message_stop", {"type": "message_stop"})]


def _responses_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    seq = itertools.count()
    events: list[tuple[str | None, Any]] = []

    def add(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": next(seq), **fields}))

    add("response.created", response={**body, "status": "in_progress", "output": [], "usage": None})
    for n, item in enumerate(body["output"]):
        if item["type"] == "message":
            add("response.output_item.added", output_index=n, item={**item, "status": "in_progress", "content": []})
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            add("response.content_part.added", item_id=item["id"], output_index=n, content_index=0, part=part)
            for piece in _pieces(text):
                add("response.output_text.delta", item_id=item["id"], output_index=n, content_index=0, delta=piece, logprobs=[])
            add("response.output_text.done", item_id=item["id"], output_index=n, content_index=0, text=text, logprobs=[])
            add("response.content_part.done", item_id=item["id"], output_index=n, content_index=0, part={**part, "text": text})
        elif item["type"] == "function_call":
            add("response.output_item.added", output_index=n, item={**item, "arguments": "", "status": "in_progress"})
            add("response.function_call_arguments.delta", item_id=item["id"], output_index=n, delta=item["arguments"])
            add(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=n,
                arguments=item["arguments"],
                name=item["name"],
            )
        else:
            add("response.output_item.added", output_index=n, item=item)
        add("response.output_item.done", output_index=n, item=item)
    add("response.incomplete" if body["status"] == "incomplete" else "response.completed", response=body)
    return events


def _gemini_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    candidate = body["candidates"][0]
    parts = candidate["content"]["parts"]
    texts = [p for p in parts if "text" in p and "thoughtSignature" not in p]
    rest = [p for p in parts if p not in texts]

    def chunk(chunk_parts: list[dict[str, Any]], last: bool) -> tuple[None, dict[str, Any]]:
        c: dict[str, Any] = {"content": {"role": "model", "parts": chunk_parts}, "index": 0}
        out: dict[str, Any] = {"candidates": [c], "modelVersion": body["modelVersion"], "responseId": body["responseId"]}
        if last:
            c["finishReason"] = candidate["finishReason"]
            out["usageMetadata"] = body["usageMetadata"]
        return None, out

    pieces = [{"text": piece} for p in texts for piece in _pieces(p["text"])]
    events = [chunk([piece], False) for piece in pieces]
    return [*events, chunk(rest, True)]


STREAMS = {
    "openai": _chat_events,
    "text": _chat_events,
    "anthropic": _anthropic_events,
    "openai-responses": _responses_events,
    "gemini": _gemini_events,
}


def _has_text(api: str, data: Any) -> bool:
    """Whether this event carried a piece of the reply's text."""
    if not isinstance(data, dict):
        return False
    if api in ("openai", "text"):
        return any((c.get("delta") or {}).get("content") for c in data.get("choices") or [])
    if api == "anthropic":
        return (data.get("delta") or {}).get("type") == "text_delta"
    if api == "openai-responses":
        return data.get("type") == "response.output_text.delta"
    return any("text" in p for c in data.get("candidates") or [] for p in c["content"]["parts"])
