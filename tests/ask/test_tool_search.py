"""`llmc ask --tool-search` through the real CLI, each provider's real SDK against a wire-level fake
of its API, real MCP servers: the model first sees only llmc's search_tools; what it finds joins
its tools from the next turn; calls still go through policy and audit under their real names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import APIS, sent_results, turn
from tests.helpers import audit_trail, llmc, node_tool, profile_file
from tests.profiles.runner import toml_str

pytestmark = pytest.mark.e2e  # the npm reference servers (everything, filesystem)

KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "text": "OPENAI_API_KEY",
}


def write_profile(isolated_dirs: Path, api: str, base_url: str, llm: str = "") -> None:
    data = isolated_dirs / "data"
    data.mkdir(exist_ok=True)
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.everything]
command = {toml_str(node_tool("mcp-server-everything"))}

[servers.fs]
command = {toml_str(node_tool("mcp-server-filesystem"))}
args = [{toml_str(str(data))}]

[llm]
provider = "{api}"
model = "{"gemini-fake" if api == "gemini" else "model-fake"}"
base_url = "{base_url}"
max_steps = 5
{llm}

[policy]
deny = ["everything.get-env"]
""",
    )


def offered(api: str, body: dict) -> list[str]:
    """The tool names a request offered the model."""
    if api == "text":
        system = " ".join(m["content"] for m in body["messages"] if m["role"] == "system")
        return re.findall(r"^## (\S+)$", system, re.M)
    tools = body.get("tools") or []
    if api == "gemini":
        return [d["name"] for t in tools for d in t.get("functionDeclarations") or t.get("function_declarations") or []]
    if api == "openai":
        return [t["function"]["name"] for t in tools]
    return [t["name"] for t in tools]


@pytest.mark.parametrize("api", APIS)
def test_the_model_finds_a_tool_then_calls_it(isolated_dirs, api):
    script = [
        turn(
            api,
            calls=[
                ("c1", "search_tools", {"query": "add two numbers", "limit": 3}),
                ("c2", "search_tools", {"query": "environment variables"}),
            ],
        ),
        turn(api, calls=[("c3", "everything_get-sum", {"a": 2, "b": 3})]),
        turn(api, text="2 + 3 = 5."),
    ]
    with FakeLLM(api, script) as fake:
        write_profile(isolated_dirs, api, fake.base_url)
        run = llmc("ask", "What is 2 plus 3?", "--tool-search", env={KEY_ENV[api]: "test-key"})
    assert run.returncode == 0, run.stderr
    out = run.json()
    assert [s["tool"] for s in out["steps"]] == ["llmc.search_tools", "llmc.search_tools", "everything.get-sum"]
    assert all(s["outcome"] == "ok" for s in out["steps"]) and "5" in out["steps"][2]["seen"]
    bodies = [r.body for r in fake.requests]
    assert offered(api, bodies[0]) == ["search_tools"]  # 29 tools, one definition
    found = [json.loads(r["text"]) for r in sent_results(api, bodies[1])]
    assert found[0]["tools"][0] == {**found[0]["tools"][0], "name": "everything_get-sum", "tool": "everything.get-sum"}
    assert len(found[0]["tools"]) <= 3
    assert "everything.get-env" not in [t["tool"] for t in found[1]["tools"]]  # denied: never found
    second = offered(api, bodies[1])
    assert second[0] == "search_tools" and "everything_get-sum" in second and len(second) < 10
    assert offered(api, bodies[2]) == second
    audit = audit_trail(isolated_dirs / "state")
    assert [(r["server"], r["tool"], r["outcome"]) for r in audit if r["event"] == "outcome"] == [("everything", "get-sum", "ok")]


def test_a_tool_not_found_yet_is_not_callable_and_the_profile_can_switch_search_on(isolated_dirs):
    api = "openai"
    script = [turn(api, calls=[("c1", "everything_get-sum", {"a": 1, "b": 1})]), turn(api, text="I could not.")]
    with FakeLLM(api, script) as fake:
        write_profile(isolated_dirs, api, fake.base_url, "tool_search = true")
        run = llmc("ask", "What is 1 plus 1?", env={KEY_ENV[api]: "test-key"})
    assert run.returncode == 0, run.stderr
    [step] = run.json()["steps"]
    assert step["outcome"] == "unknown_tool" and "search_tools" in step["seen"]
    assert offered(api, fake.requests[0].body) == ["search_tools"]


def test_without_search_below_the_threshold_the_model_sees_every_tool(isolated_dirs):
    api = "anthropic"
    with FakeLLM(api, [turn(api, text="Hello.")]) as fake:
        write_profile(isolated_dirs, api, fake.base_url)
        assert llmc("ask", "Hi", env={KEY_ENV[api]: "test-key"}).returncode == 0
        first = offered(api, fake.requests[0].body)
        assert "search_tools" not in first and "everything_get-sum" in first and "everything_get-env" not in first
    with FakeLLM(api, [turn(api, text="Hello.")]) as fake:
        write_profile(isolated_dirs, api, fake.base_url, "tool_search = true")
        assert llmc("ask", "Hi", "--no-tool-search", env={KEY_ENV[api]: "test-key"}).returncode == 0
        assert "search_tools" not in offered(api, fake.requests[0].body)


@pytest.mark.parametrize("count,searching", [(40, False), (41, True)])
def test_search_is_automatic_past_40_tools(count, searching):
    from llmc_cli.agent import ask
    from llmc_cli.model import Tool
    from llmc_cli.providers.base import ProviderSettings, make_provider

    tools = [Tool(f"s{i % 3}", f"tool_{i}", {"type": "object"}, description=f"does thing {i}") for i in range(count)]
    api = "openai"
    with FakeLLM(api, [turn(api, text="Hi.")]) as fake:
        provider = make_provider(api, ProviderSettings(model="m", api_key="k", base_url=fake.base_url))
        ask("Hi", provider=provider, tools=tools, call_tool=lambda call: pytest.fail("no call expected"))
    first = offered(api, fake.requests[0].body)
    assert first == ["search_tools"] if searching else len(first) == count


def test_anthropic_searches_server_side_where_the_model_can(isolated_dirs):
    """claude-opus-4-6: every tool goes with defer_loading after Anthropic's search tool (the
    beta's header set); the search blocks go back unchanged; a paused turn is sent again; the
    tool the model found is called through the policy and the audit."""
    from tests.fakes.llm import Reply

    search_blocks = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": "sum"}},
        {
            "type": "tool_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": "everything_get-sum"}],
            },
        },
    ]

    def reply(content, stop):
        return Reply(
            200,
            {
                "id": f"msg_{stop}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 5, "output_tokens": 5},
            },
        )

    script = [
        reply(search_blocks, "pause_turn"),
        reply([{"type": "tool_use", "id": "toolu_1", "name": "everything_get-sum", "input": {"a": 2, "b": 3}}], "tool_use"),
        turn("anthropic", text="5."),
    ]
    with FakeLLM("anthropic", script) as fake:
        write_profile(isolated_dirs, "anthropic", fake.base_url)
        run = llmc(
            "ask", "What is 2 plus 3?", "--tool-search", "--model", "claude-opus-4-6", env={"ANTHROPIC_API_KEY": "test-key"}
        )
    assert run.returncode == 0, run.stderr
    out = run.json()
    assert out["answer"] == "5." and [(s["tool"], s["outcome"]) for s in out["steps"]] == [("everything.get-sum", "ok")]
    first = fake.requests[0]
    assert "advanced-tool-use-2025-11-20" in first.headers.get("anthropic-beta", "")
    tools = first.body["tools"]
    assert tools[0] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert len(tools) > 20 and all(t["defer_loading"] is True for t in tools[1:])
    assert "everything_get-env" not in [t["name"] for t in tools]  # denied: not even deferred
    assert fake.requests[1].body["messages"][-1] == {"role": "assistant", "content": search_blocks}  # paused: sent again
    assert sent_results("anthropic", fake.requests[2].body)[0]["text"] == "The sum of 2 and 3 is 5."
    audit = audit_trail(isolated_dirs / "state")
    assert [(r["tool"], r["outcome"]) for r in audit if r["event"] == "outcome"] == [("get-sum", "ok")]


@pytest.mark.parametrize(
    "provider,model,expected",
    [
        ("anthropic", "claude-sonnet-4-5-20250929", True),
        ("anthropic", "claude-opus-4-5", True),
        ("anthropic", "claude-opus-5", True),
        ("anthropic", "claude-sonnet-4-20250514", False),
        ("anthropic", "claude-opus-4-1", False),
        ("anthropic", "claude-haiku-4-5", False),
        ("anthropic", None, False),
        ("openai", "claude-opus-4-5", False),
    ],
)
def test_which_models_search_server_side(provider, model, expected):
    from llmc_cli.agent.tool_search import native

    assert native(provider, model) is expected


def test_a_continued_conversation_keeps_the_tools_it_called():
    from llmc_cli.agent import ask
    from llmc_cli.agent.conversations import Conversation
    from llmc_cli.model import Tool, ToolResult
    from llmc_cli.providers.base import ProviderSettings, make_provider

    tools = [Tool(f"s{i % 3}", f"tool_{i}", {"type": "object"}, description=f"does thing {i}") for i in range(50)]
    tools.append(Tool("calc", "sum", {"type": "object"}, description="Add two numbers"))
    api = "openai"
    conv = Conversation.new(api, "m", None)
    script = [
        turn(api, calls=[("c1", "search_tools", {"query": "add numbers"})]),
        turn(api, calls=[("c2", "calc_sum", {})]),
        turn(api, text="Done."),
        turn(api, text="Again."),
    ]
    with FakeLLM(api, script) as fake:
        provider = make_provider(api, ProviderSettings(model="m", api_key="k", base_url=fake.base_url))

        def result(call):
            return ToolResult(content=[{"type": "text", "text": "3"}])

        first = ask("Add", provider=provider, tools=tools, call_tool=result, conversation=conv)
        assert [s["tool"] for s in first.steps] == ["llmc.search_tools", "calc.sum"]
        ask("And again?", provider=provider, tools=tools, call_tool=result, conversation=conv)
    assert offered(api, fake.requests[0].body) == ["search_tools"]
    assert offered(api, fake.requests[3].body) == ["search_tools", "calc_sum"]  # the next run starts with it
