"""What each provider's real SDK puts on the wire, checked against what that API documents:
tool call ids matched by results, argument encodings, is_error, function_call_output items,
FunctionResponse parts, echoed reasoning state, images or placeholders."""

from __future__ import annotations

import json

import pytest
from pydantic import TypeAdapter

from llmc_cli.model import ToolResult
from llmc_cli.providers.base import AssistantTurn, ToolResultItem, ToolResults, UserMessage
from tests.fakes.llm import FakeLLM, anthropic_reply, chat_reply, gemini_reply, responses_reply
from tests.fakes.scripts import APIS
from tests.providers.wire_helpers import DEFINITIONS, KEY, provider, tools

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def text_result(text: str, is_error: bool = False) -> ToolResult:
    return ToolResult(content=[{"type": "text", "text": text}], is_error=is_error)


def round_trip(api: str, first, results, second=None):
    """Question -> model turn with calls -> our results -> the second request body."""
    with FakeLLM(api, [first, second or _final(api)]) as fake:
        p = provider(api, fake.base_url)
        history = [UserMessage("What is in the logs?")]
        turn = p.complete("Be brief.", history, tools(api), timeout=10)
        history += [
            turn,
            ToolResults([ToolResultItem(c.id, c.name, results[n], c.echo_id) for n, c in enumerate(turn.tool_calls)]),
        ]
        final = p.complete("Be brief.", history, tools(api), timeout=10)
        assert not fake.unexpected
        return turn, final, fake.requests


def _final(api: str):
    return {
        "openai": chat_reply,
        "text": chat_reply,
        "openai-responses": responses_reply,
        "anthropic": anthropic_reply,
        "gemini": gemini_reply,
    }[api]("All quiet.")


def test_openai_chat_wire():
    first = chat_reply(
        None, [("call_a", "fs_read", '{"path": "/var/log/a.log"}'), ("call_b", "fs_read", '{"path":"/var/log/b.log"}')]
    )
    results = [text_result("line a"), ToolResult(content=[{"type": "text", "text": "no such file"}], is_error=True)]
    turn, final, reqs = round_trip("openai", first, results)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_a", "fs_read", {"path": "/var/log/a.log"}),
        ("call_b", "fs_read", {"path": "/var/log/b.log"}),
    ]
    assert turn.stop_reason == "tool_calls" and turn.usage.input_tokens == 11
    body = reqs[1].body
    assert body["model"] == "model-x" and body["tools"] == DEFINITIONS["openai"]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is in the logs?"},
        # the arguments go back byte for byte as the model wrote them
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "fs_read", "arguments": '{"path": "/var/log/a.log"}'}},
                {"id": "call_b", "type": "function", "function": {"name": "fs_read", "arguments": '{"path":"/var/log/b.log"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "line a"},
        {"role": "tool", "tool_call_id": "call_b", "content": "[tool error] no such file"},
    ]
    from openai.types.chat import ChatCompletionMessageParam

    for m in body["messages"]:
        TypeAdapter(ChatCompletionMessageParam).validate_python(m)
    assert reqs[1].headers["authorization"] == f"Bearer {KEY}"
    assert final.text == "All quiet." and final.stop_reason == "end"


def test_openai_chat_image_becomes_placeholder():
    first = chat_reply(None, [("call_1", "fs_read", {"path": "/img.png"})])
    result = ToolResult(content=[{"type": "text", "text": "a chart"}, {"type": "image", "data": PNG, "mimeType": "image/png"}])
    _, _, reqs = round_trip("openai", first, [result])
    assert reqs[1].body["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "a chart\n[image image/png]"}


def test_openai_chat_bad_arguments_become_a_readable_error():
    with FakeLLM("openai", [chat_reply(None, [("call_1", "fs_read", '{"path": "/a",')])]) as fake:
        turn = provider("openai", fake.base_url).complete(None, [UserMessage("q")], tools("openai"), timeout=10)
    assert turn.tool_calls[0].arguments == {} and "not valid JSON" in turn.tool_calls[0].error


def test_openai_max_tokens_name_depends_on_endpoint():
    """api.openai.com wants max_completion_tokens; a compatible server gets max_tokens."""
    with FakeLLM("openai", [chat_reply("ok")]) as fake:
        provider("openai", fake.base_url, max_tokens=50, temperature=0.2).complete(None, [UserMessage("q")], None, timeout=10)
    body = fake.requests[0].body
    assert body["max_tokens"] == 50 and body["temperature"] == 0.2 and "tools" not in body


def test_responses_wire():
    first = responses_reply(None, [("call_a", "fs_read", {"path": "/a.log"})], reasoning=True)
    image = ToolResult(content=[{"type": "text", "text": "a chart"}, {"type": "image", "data": PNG, "mimeType": "image/png"}])
    _turn, final, reqs = round_trip("openai-responses", first, [image])
    body = reqs[1].body
    assert body["instructions"] == "Be brief." and body["tools"] == DEFINITIONS["openai-responses"]
    first_output = first.body["output"]
    # the prior output items (the encrypted reasoning item included) are re-sent unchanged
    assert body["input"][0] == {"role": "user", "content": "What is in the logs?"}
    assert body["input"][1:3] == first_output
    assert body["input"][3] == {
        "type": "function_call_output",
        "call_id": "call_a",
        "output": [
            {"type": "input_text", "text": "a chart"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
        ],
    }
    from openai.types.responses import ResponseInputItemParam

    for item in body["input"]:
        TypeAdapter(ResponseInputItemParam).validate_python(item)
    assert final.text == "All quiet." and final.usage.output_tokens == 9


def test_responses_incomplete_is_length():
    with FakeLLM("openai-responses", [responses_reply("partial", status="incomplete")]) as fake:
        turn = provider("openai-responses", fake.base_url).complete(None, [UserMessage("q")], None, timeout=10)
    assert turn.stop_reason == "length" and turn.text == "partial"


def test_anthropic_wire():
    first = anthropic_reply(
        "Let me look.",
        [("toolu_1", "fs_read", {"path": "/a.log"}), ("toolu_2", "fs_read", {"path": "/b.png"})],
        thinking="Two files.",
    )
    results = [
        text_result("permission denied", is_error=True),
        ToolResult(content=[{"type": "image", "data": PNG, "mimeType": "image/png"}]),
    ]
    turn, final, reqs = round_trip("anthropic", first, results)
    assert turn.text == "Let me look." and [c.id for c in turn.tool_calls] == ["toolu_1", "toolu_2"]
    body = reqs[1].body
    assert body["system"] == "Be brief." and body["max_tokens"] == 4096 and body["tools"] == DEFINITIONS["anthropic"]
    # the assistant content, signed thinking block included, goes back unchanged
    assert body["messages"][1] == {"role": "assistant", "content": first.body["content"]}
    # ONE user message holds every result, with is_error; images are allowed inside tool_result
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "permission denied"}],
                "is_error": True,
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}],
                "is_error": False,
            },
        ],
    }
    from anthropic.types import MessageParam

    for m in body["messages"]:
        TypeAdapter(MessageParam).validate_python(m)
    assert final.text == "All quiet."


def test_anthropic_results_and_next_question_share_one_user_message():
    """A saved conversation that ended on tool results continues with a question: the API wants
    alternating roles, so both go in one user message."""
    with FakeLLM("anthropic", [anthropic_reply("ok")]) as fake:
        history = [
            UserMessage("q1"),
            AssistantTurn(
                tool_calls=[], provider="anthropic", raw=[{"type": "tool_use", "id": "t1", "name": "fs_read", "input": {}}]
            ),
            ToolResults([ToolResultItem("t1", "fs_read", text_result("x"))]),
            UserMessage("q2"),
        ]
        provider("anthropic", fake.base_url).complete(None, history, None, timeout=10)
    assert [m["role"] for m in fake.requests[0].body["messages"]] == ["user", "assistant", "user"]
    assert fake.requests[0].body["messages"][2]["content"][-1] == {"type": "text", "text": "q2"}


def test_gemini_wire_echoes_signature_and_ids():
    sig = "c2lnbmF0dXJlLWJ5dGVz"
    first = gemini_reply(None, [("fc-1", "fs_read", {"path": "/a.log"}), (None, "fs_read", {"path": "/b.log"})], signature=sig)
    results = [text_result("line a"), text_result("gone", is_error=True)]
    _turn, final, reqs = round_trip("gemini", first, results)
    assert reqs[0].path == "/v1beta/models/model-x:generateContent"
    assert reqs[0].headers["x-goog-api-key"] == KEY
    body = reqs[1].body
    # automatic function calling is a client-side SDK feature: nothing of it reaches the wire,
    # and the model content (thoughtSignature included) comes back unchanged
    assert body["contents"][1] == first.body["candidates"][0]["content"]
    assert body["contents"][2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "fc-1", "name": "fs_read", "response": {"output": "line a"}}},
            {"functionResponse": {"name": "fs_read", "response": {"error": "gone"}}},
        ],
    }  # no id given, none sent
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}], "role": "user"}
    assert body["tools"] == [{"functionDeclarations": DEFINITIONS["gemini"]}]
    assert final.text == "All quiet."


def test_gemini_image_in_function_response_parts():
    first = gemini_reply(None, [("fc-1", "fs_read", {"path": "/p.png"})])
    result = ToolResult(content=[{"type": "text", "text": "a chart"}, {"type": "image", "data": PNG, "mimeType": "image/png"}])
    _, _, reqs = round_trip("gemini", first, [result])
    fr = reqs[1].body["contents"][2]["parts"][0]["functionResponse"]
    # google-genai 3.4 copies these nested parts in proto field names (snake_case); the API's
    # proto3 JSON parser accepts the original field names as well as the lowerCamelCase ones.
    assert fr["parts"] == [{"inline_data": {"mime_type": "image/png", "data": PNG}}]
    assert fr["response"] == {"output": "a chart"}


def test_text_protocol_wire():
    answer = (
        'I will read both.\n<mcp:tool>\nname: fs_read\nparameters: {"path": "/a.log"}\n</mcp:tool>\n'
        "<mcp:tool>\nname: fs_read\nparameters: {'path': '/b.log',}\n</mcp:tool>"
    )
    turn, _final, reqs = round_trip("text", chat_reply(answer), [text_result("line a"), text_result("gone", True)])
    assert turn.text == "I will read both."
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [("t1-1", {"path": "/a.log"}), ("t1-2", {"path": "/b.log"})]
    body = reqs[0].body
    assert "tools" not in body
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be brief.\n\n")
    assert "<mcp:tool>" in system["content"] and system["content"].endswith(DEFINITIONS["text"])
    second = reqs[1].body["messages"]
    assert second[2] == {"role": "assistant", "content": answer}  # the model's own words, blocks included
    assert second[3] == {
        "role": "user",
        "content": '<mcp:tool_result name="fs_read" id="t1-1" status="ok">\nline a\n</mcp:tool_result>\n'
        '<mcp:tool_result name="fs_read" id="t1-2" status="error">\ngone\n</mcp:tool_result>',
    }


@pytest.mark.parametrize("api", APIS)
def test_history_serialises_and_replays_identically(api):
    """A conversation saved as JSON and loaded again sends the very same request."""
    from llmc_cli.providers.base import message_from_json
    from tests.fakes.scripts import turn as model_turn

    with FakeLLM(api, [model_turn(api, None, [("c1", "fs_read", {"path": "/a"})]), _final(api), _final(api)]) as fake:
        p = provider(api, fake.base_url)
        history = [UserMessage("q")]
        t = p.complete(None, history, tools(api), timeout=10)
        history += [t, ToolResults([ToolResultItem(c.id, c.name, text_result("x"), c.echo_id) for c in t.tool_calls])]
        p.complete(None, history, tools(api), timeout=10)
        reloaded = [message_from_json(json.loads(json.dumps(m.to_json()))) for m in history]
        p.complete(None, reloaded, tools(api), timeout=10)
    assert fake.requests[1].body == fake.requests[2].body


def test_anthropic_temperature_is_not_sent_but_reported():
    """anthropic 2.12's Messages.create has no temperature: sending one would raise TypeError."""
    with FakeLLM("anthropic", [anthropic_reply("ok")]) as fake:
        p = provider("anthropic", fake.base_url, temperature=0.3, max_tokens=99)
        p.complete(None, [UserMessage("q")], None, timeout=10)
    assert "temperature" not in fake.bodies[0] and fake.bodies[0]["max_tokens"] == 99
    assert p.warnings == ["anthropic: temperature is not supported by the Messages API; ignored"]


def test_gemini_results_and_next_question_share_one_user_turn():
    with FakeLLM("gemini", [gemini_reply("ok")]) as fake:
        history = [
            UserMessage("q1"),
            AssistantTurn(
                tool_calls=[],
                provider="gemini",
                raw={"role": "model", "parts": [{"function_call": {"id": "f1", "name": "fs_read", "args": {}}}]},
            ),
            ToolResults([ToolResultItem("f1", "fs_read", text_result("x"))]),
            UserMessage("q2"),
        ]
        provider("gemini", fake.base_url).complete(None, history, None, timeout=10)
    contents = fake.bodies[0]["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[2]["parts"] == [
        {"functionResponse": {"id": "f1", "name": "fs_read", "response": {"output": "x"}}},
        {"text": "q2"},
    ]
