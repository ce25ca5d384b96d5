"""One neutral way to script a model turn for any provider's fake, and to read back which tool
results a provider sent, so one test body can run against every API."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.llm import Reply, anthropic_reply, chat_reply, gemini_reply, responses_reply

APIS = ("openai", "openai-responses", "anthropic", "gemini", "text")


def turn(api: str, text: str | None = None, calls: list[tuple[str, str, Any]] = (), **kw: Any) -> Reply:
    """A model turn: some text and/or tool calls (call_id, provider tool name, arguments)."""
    if api == "openai":
        return chat_reply(text, list(calls), **kw)
    if api == "openai-responses":
        return responses_reply(text, list(calls), **kw)
    if api == "anthropic":
        return anthropic_reply(text, list(calls), **kw)
    if api == "gemini":
        return gemini_reply(text, list(calls), **kw)
    blocks = [
        f"<mcp:tool>\nname: {name}\nparameters: {args if isinstance(args, str) else json.dumps(args)}\n</mcp:tool>"
        for _, name, args in calls
    ]
    return chat_reply("\n".join(([text] if text else []) + blocks), **kw)


FENCE = re.compile(r'<tool-result id="([0-9a-f]{16})">\n(.*)\n</tool-result id="\1">', re.S)


def unfenced(text: Any) -> Any:
    """A result's text without the block `ask` puts it in (agent/fence.py): the server's text as
    it came, with llmc's own marks around it ("[tool error] ") kept. The block must be whole."""
    if not isinstance(text, str) or not text:
        return text
    m = FENCE.search(text)
    if m is None:  # an image-only result: nothing of the server's text, only llmc's placeholders
        assert re.fullmatch(r"(\[tool error\] )?(\[image[^\]]*\]\n?)+", text), f"a result outside its block: {text!r}"
        return text
    return text[: m.start()] + m.group(2) + text[m.end() :]


def sent_results(api: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results at the end of a request body: [{id, text, is_error}] in the API's order,
    each text as the server gave it (the fence checked and taken off; sent_results_raw keeps it).
    (For APIs without an error flag, is_error is read from llmc's text marker.)"""
    return [{**r, "text": unfenced(r["text"])} for r in sent_results_raw(api, body)]


def sent_results_raw(api: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results at the end of a request body, as the model reads them."""
    if api == "openai":
        tail = []
        for m in reversed(body["messages"]):
            if m["role"] != "tool":
                break
            tail.insert(0, {"id": m["tool_call_id"], "text": m["content"], "is_error": m["content"].startswith("[tool error]")})
        return tail
    if api == "openai-responses":
        tail = []
        for item in reversed(body["input"]):
            if item.get("type") != "function_call_output":
                break
            out = item["output"]
            text = out if isinstance(out, str) else "".join(p.get("text", "") for p in out)
            tail.insert(0, {"id": item["call_id"], "text": text, "is_error": text.startswith("[tool error]")})
        return tail
    if api == "anthropic":
        last = body["messages"][-1]
        assert last["role"] == "user"
        return [
            {"id": b["tool_use_id"], "text": "".join(c.get("text", "") for c in b["content"]), "is_error": b["is_error"]}
            for b in last["content"]
            if b["type"] == "tool_result"
        ]
    if api == "gemini":
        last = body["contents"][-1]
        out = []
        for part in last["parts"]:
            fr = part.get("functionResponse")
            if fr:
                resp = fr["response"]
                out.append(
                    {
                        "id": fr.get("id"),
                        "name": fr["name"],
                        "text": resp.get("output", resp.get("error")),
                        "is_error": "error" in resp,
                    }
                )
        return out
    last = body["messages"][-1]["content"]
    return [
        {"id": m.group(2), "name": m.group(1), "text": m.group(4), "is_error": m.group(3) == "error"}
        for m in re.finditer(
            r'<mcp:tool_result name="([^"]*)" id="([^"]*)" status="(ok|error)">\n(.*?)\n</mcp:tool_result>(?=\n<mcp:tool_result |\Z)',
            last,
            re.S,
        )
    ]
