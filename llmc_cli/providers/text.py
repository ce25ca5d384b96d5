"""Tool use for models with no native tool calling, over an OpenAI-compatible chat endpoint sent
no `tools`. The tool listing goes into the system prompt; the model calls tools by writing

    <mcp:tool>
    name: server.tool
    parameters: {"path": "/var/log"}
    </mcp:tool>

(several blocks per answer allowed); llmc answers with <mcp:tool_result> blocks. Small models
write almost-JSON, so the parameters get a small repair before they are refused."""

from __future__ import annotations

import json
import re
from typing import Any

from llmc_cli import jsonish
from llmc_cli.model import ARGUMENTS_TOO_DEEP, JSONObject
from llmc_cli.providers.base import (
    END,
    TOOL_CALLS,
    AssistantTurn,
    Message,
    OnText,
    ProviderToolCall,
    ToolResults,
    call_with_retries,
)
from llmc_cli.providers.openai import FINISH, ChatCompletions, chat_create, chat_options, classify_openai, usage_of

PROTOCOL = """\
You can use the tools listed below. To call a tool, write a block exactly like this:

<mcp:tool>
name: TOOL_NAME
parameters: {"argument": "value"}
</mcp:tool>

`parameters` is one JSON object with the tool's arguments. You may write several blocks in one
answer. Then stop and wait: the results come back in <mcp:tool_result> blocks. When you can
answer the question, answer in plain text without any <mcp:tool> block.

Tools:
"""

# `<mcp:tool>name: ...` as the protocol says, and `<mcp:tool name="...">{...}</mcp:tool>`, which
# models write too (the name as an attribute, the arguments as the body).
BLOCK = re.compile(r"<mcp:tool(\s[^>]*)?>(.*?)(?:</mcp:tool>|(?=<mcp:tool[\s>])|\Z)", re.S | re.I)
ATTRIBUTE_NAME = re.compile(r"""\bname\s*=\s*["']([^"']+)["']""", re.I)
NAME = re.compile(r"^\s*name\s*:\s*[\"'`]?([^\s\"'`]+)[\"'`]?\s*$", re.M | re.I)
PARAMS = re.compile(r"^\s*(?:parameters|arguments|params)\s*:", re.M | re.I)


def system_prompt(system: str | None, tools: Any | None) -> str | None:
    if tools is None or not tools.definitions:
        return system
    listing = tools.definitions if isinstance(tools.definitions, str) else json.dumps(tools.definitions, indent=1)
    return (system + "\n\n" if system else "") + PROTOCOL + listing


def parse_answer(text: str, prefix: str = "call") -> tuple[str, list[ProviderToolCall]]:
    """(the text outside the blocks, one call per block). A block that cannot be read becomes a
    call with `error` set, so the model hears what was wrong."""
    calls = []
    for n, match in enumerate(BLOCK.finditer(text), 1):
        attributes, body = match.group(1) or "", match.group(2)
        call_id = f"{prefix}-{n}"
        named = ATTRIBUTE_NAME.search(attributes)
        if named:  # <mcp:tool name="x">{...}</mcp:tool>: the body is the arguments
            params = PARAMS.search(body)
            args, error = parse_parameters(body[params.end() :] if params else body)
            calls.append(ProviderToolCall(call_id, named.group(1), args, error))
            continue
        name = NAME.search(body)
        if not name:
            calls.append(ProviderToolCall(call_id, "", {}, "the block has no `name:` line"))
            continue
        params = PARAMS.search(body)
        args, error = ({}, None) if params is None else parse_parameters(body[params.end() :])
        calls.append(ProviderToolCall(call_id, name.group(1), args, error))
    outside = re.sub(r"\n{3,}", "\n\n", BLOCK.sub("", text)).strip()
    if re.search(r"<mcp:tool(?!_result)", outside, re.I):  # a tool block of some other shape: the model hears so
        calls.append(
            ProviderToolCall(
                f"{prefix}-{len(calls) + 1}",
                "",
                {},
                "a tool block could not be read: write <mcp:tool> name: SERVER.TOOL, then parameters: {JSON}, then </mcp:tool>",
            )
        )
    return outside, calls


def parse_parameters(raw: str) -> tuple[JSONObject, str | None]:
    raw = re.sub(r"^\s*```(?:json)?|```\s*$", "", raw.strip()).strip()
    if not raw:
        return {}, None
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end < start:
        return {}, f"`parameters:` must be a JSON object, got: {raw[:200]}"
    candidate = raw[start : end + 1]
    for attempt in (candidate, repair_json(candidate)):
        try:
            value = json.loads(attempt)
        except json.JSONDecodeError:
            continue
        except RecursionError:
            return {}, ARGUMENTS_TOO_DEEP
        if isinstance(value, dict):
            return value, None
    return {}, f"`parameters:` is not valid JSON: {candidate[:200]}"


LITERALS = {"True": "true", "False": "false", "None": "null"}


def repair_json(s: str) -> str:
    """Almost-JSON to JSON: single-quoted strings, unquoted keys, Python literals, trailing
    commas. Only what small models commonly write; anything else stays broken."""
    toks = jsonish.tokens(s, quotes="\"'")
    out: list[str] = []
    for i, token in enumerate(toks):
        if token.kind == "string":
            out.append(_double_quoted(token.text))
        elif token.kind == "word":  # a key, or a Python literal
            after = jsonish.next_significant(toks, i)
            key = after is not None and after.text == ":"
            out.append(json.dumps(token.text) if key else LITERALS.get(token.text, token.text))
        elif not jsonish.is_trailing_comma(toks, i):
            out.append(token.text)
    return "".join(out)


def _double_quoted(raw: str) -> str:
    """A string token (either quote, maybe unterminated) re-emitted double-quoted."""
    quote, j, n, chars = raw[0], 1, len(raw), []
    while j < n and raw[j] != quote:
        if raw[j] == "\\" and j + 1 < n:
            chars.append(raw[j : j + 2] if raw[j + 1] != "'" else "'")
            j += 2
            continue
        chars.append('\\"' if raw[j] == '"' else raw[j])
        j += 1
    return '"' + "".join(chars) + '"'


def results_message(results: ToolResults) -> str:
    blocks = []
    for item in results.items:
        status = "error" if item.result.is_error else "ok"
        blocks.append(
            f'<mcp:tool_result name="{item.name}" id="{item.call_id}" status="{status}">\n{item.result.text}\n</mcp:tool_result>'
        )
    return "\n".join(blocks)


class TextProtocol(ChatCompletions):
    name = "text"
    format = "text"

    def assistant_message(self, turn: AssistantTurn) -> JSONObject:
        # Our own turn goes back as the model wrote it, tool blocks included.
        text = turn.raw if turn.provider == self.name and isinstance(turn.raw, str) else turn.text
        return {"role": "assistant", "content": text}

    def results_messages(self, results: ToolResults) -> list[JSONObject]:
        return [{"role": "user", "content": results_message(results)}]

    def complete(
        self,
        system: str | None,
        history: list[Message],
        tools: Any | None,
        timeout: float | None = None,
        on_text: OnText | None = None,
    ) -> AssistantTurn:
        s = self.settings
        kwargs = {**chat_options(s), "messages": self.messages(system_prompt(system, tools), history)}
        shown = _ProseOnly(on_text) if on_text else None
        resp = call_with_retries(
            self.name, s, lambda t: chat_create(self.client, kwargs, t, shown, self.name), classify_openai, timeout
        )
        content = (resp.choices[0].message.content or "") if resp.choices else ""
        turn_no = 1 + sum(isinstance(m, AssistantTurn) for m in history)
        text, calls = parse_answer(content, prefix=f"t{turn_no}")
        stop = TOOL_CALLS if calls else FINISH.get((resp.choices[0].finish_reason if resp.choices else "") or "", END)
        return AssistantTurn(text=text, tool_calls=calls, stop_reason=stop, usage=usage_of(resp), provider=self.name, raw=content)


class _ProseOnly:
    """Streams a text-protocol reply's prose and holds back its tool blocks: text is passed on up
    to the first '<mcp:' (a piece that could be the start of one waits for the next piece)."""

    MARK = "<mcp:"

    def __init__(self, on_text: OnText) -> None:
        self.on_text = on_text
        self.pending = ""
        self.done = False

    def __call__(self, piece: str) -> None:
        if self.done:
            return
        text = self.pending + piece
        at = text.find(self.MARK)
        if at >= 0:
            self.done = True
            if text[:at]:
                self.on_text(text[:at])
            return
        keep = next((n for n in range(len(self.MARK) - 1, 0, -1) if text.endswith(self.MARK[:n])), 0)
        self.pending = text[len(text) - keep :] if keep else ""
        if text[: len(text) - keep]:
            self.on_text(text[: len(text) - keep])
