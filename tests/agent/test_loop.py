"""The ask loop, per provider: real SDK -> wire-level fake model, real MCP servers for the tools."""

from __future__ import annotations

import json
import re
import threading

import pytest

from llmc_cli.agent import Conversation, Limits, ask, load_conversation, save_conversation
from llmc_cli.errors import PolicyDenied, ProviderError
from llmc_cli.model import ToolCall, ToolResult
from llmc_cli.providers.base import ProviderSettings, make_provider
from tests.fakes.llm import ERRORS, FakeLLM
from tests.fakes.scripts import APIS, sent_results, turn


def provider_for(api, fake, **settings):
    return make_provider(
        api, ProviderSettings(model="model-x", api_key="k", base_url=fake.base_url, max_backoff=0.05, **settings)
    )


def call_id(api, n, step=1):
    """The id the provider's results carry for the n-th call (1-based) of a step."""
    return f"t{step}-{n}" if api == "text" else f"call_{step}_{n}"


def calls(api, *pairs, step=1):
    return [(call_id(api, n, step), name, args) for n, (name, args) in enumerate(pairs, 1)]


def result_ids(api, results):
    return [r["id"] for r in results]


@pytest.mark.parametrize("api", APIS)
def test_single_tool_call(api, toolbox):
    add = toolbox.name(api, "sdk.add")
    with FakeLLM(api, [turn(api, None, calls(api, (add, {"a": 2, "b": 3}))), turn(api, "2 + 3 = 5")]) as fake:
        record = ask(
            "What is 2 + 3?", provider=provider_for(api, fake), tools=toolbox.tools, call_tool=toolbox.call_tool
        ).to_json()
    assert record["answer"] == "2 + 3 = 5" and record["stopReason"] == "end"
    [step] = record["steps"]
    assert step["tool"] == "sdk.add" and step["arguments"] == {"a": 2, "b": 3}
    assert step["outcome"] == "ok" and step["seen"] == "5" and step["durationMs"] >= 0
    assert step["result"]["content"] == [{"type": "text", "text": "5"}]
    assert [u["step"] for u in record["usage"]] == [1, 2] and record["usage"][0]["inputTokens"] > 0
    results = sent_results(api, fake.bodies[1])
    assert [(r["text"], r["is_error"]) for r in results] == [("5", False)]
    if api != "gemini":  # gemini: the fake's call carried the id, so it comes back
        assert result_ids(api, results) == [call_id(api, 1)]
    assert json.loads(json.dumps(record)) == record  # JSON-able


@pytest.mark.parametrize("api", APIS)
def test_parallel_read_only_calls(api, toolbox):
    read = toolbox.name(api, "fs.read_text_file")
    paths = [str(toolbox.logs / "app-2026-11-20.log"), str(toolbox.logs / "app-2026-11-21.log")]
    script = [
        turn(api, None, calls(api, (read, {"path": paths[0]}), (read, {"path": paths[1]}))),
        turn(api, "Two errors: disk quota and a reset connection."),
    ]
    with FakeLLM(api, script) as fake:
        record = ask("Errors?", provider=provider_for(api, fake), tools=toolbox.tools, call_tool=toolbox.call_tool)
    results = sent_results(api, fake.bodies[1])
    assert ["disk quota" in results[0]["text"], "connection reset" in results[1]["text"]] == [True, True]
    assert [s["outcome"] for s in record.steps] == ["ok", "ok"]


def test_read_only_batches_run_concurrently_others_in_order(toolbox):
    """Two 0.6 s calls: concurrent when the profile's policy says the tool is read-only (here a
    [policy.hints] override contradicting the server's annotation), one after the other otherwise."""
    from llmc_cli import policy
    from llmc_cli.config.schema import PolicyConfig, ToolHints

    api = "openai"
    slow = toolbox.name(api, "sdk.slow")
    for read_only in (True, False):
        tools = [t for t in toolbox.tools if t.qualified_name != "sdk.slow"] + [toolbox.tool("sdk.slow")]
        tools[-1] = type(tools[-1])(**{**tools[-1].__dict__, "annotations": {"readOnlyHint": not read_only}})
        config = PolicyConfig(hints={"sdk.slow": ToolHints(readOnly=read_only)})
        events = []
        script = [turn(api, None, calls(api, (slow, {"seconds": 0.6}), (slow, {"seconds": 0.6}))), turn(api, "done")]
        with FakeLLM(api, script) as fake:
            ask(
                "wait",
                provider=provider_for(api, fake),
                tools=tools,
                call_tool=toolbox.call_tool,
                read_only=lambda t, config=config: policy.is_read_only(t, t.qualified_name, config),
                progress=events.append,
            )
        kinds = [e["event"] for e in events if e["event"].startswith("tool")]
        assert kinds == (
            ["tool_start", "tool_start", "tool_end", "tool_end"]
            if read_only
            else ["tool_start", "tool_end", "tool_start", "tool_end"]
        )


@pytest.mark.parametrize("api", APIS)
def test_multi_step_chain_across_two_servers(api, toolbox):
    ls, read, echo = (toolbox.name(api, n) for n in ("fs.list_directory", "fs.read_text_file", "sdk.echo"))
    newest = str(toolbox.logs / "app-2026-11-21.log")
    script = [
        turn(api, None, calls(api, (ls, {"path": str(toolbox.logs)}))),
        turn(api, None, calls(api, (read, {"path": newest}), step=2)),
        turn(api, None, calls(api, (echo, {"message": "connection reset by peer"}), step=3)),
        turn(api, "The latest log shows a connection reset by peer."),
    ]
    with FakeLLM(api, script) as fake:
        record = ask(
            "What's in the latest error log?", provider=provider_for(api, fake), tools=toolbox.tools, call_tool=toolbox.call_tool
        ).to_json()
    assert [s["tool"] for s in record["steps"]] == ["fs.list_directory", "fs.read_text_file", "sdk.echo"]
    assert "[FILE] app-2026-11-21.log" in record["steps"][0]["seen"]
    assert "ERROR connection reset by peer" in record["steps"][1]["seen"]
    assert "app-2026-11-21.log" in sent_results(api, fake.bodies[1])[0]["text"]
    assert "connection reset" in sent_results(api, fake.bodies[2])[0]["text"]
    assert len(fake.requests) == 4 and record["stopReason"] == "end"
    assert record["answer"] == "The latest log shows a connection reset by peer."


@pytest.mark.parametrize("api", APIS)
def test_tool_error_goes_back_and_the_model_recovers(api, toolbox):
    fail, echo = toolbox.name(api, "sdk.fail"), toolbox.name(api, "sdk.echo")
    script = [
        turn(api, None, calls(api, (fail, {"reason": "disk on fire"}))),
        turn(api, None, calls(api, (echo, {"message": "fallback"}), step=2)),
        turn(api, "Recovered with the fallback."),
    ]
    with FakeLLM(api, script) as fake:
        record = ask("go", provider=provider_for(api, fake), tools=toolbox.tools, call_tool=toolbox.call_tool)
    assert [s["outcome"] for s in record.steps] == ["error", "ok"]
    [result] = sent_results(api, fake.bodies[1])
    assert result["is_error"] is True and "Error executing tool fail" in result["text"]
    assert record.answer == "Recovered with the fallback." and record.stop_reason == "end"


@pytest.mark.parametrize("api", APIS)
def test_policy_denial_goes_back_to_the_model(api, toolbox):
    add, echo = toolbox.name(api, "sdk.add"), toolbox.name(api, "sdk.echo")

    def guarded(call: ToolCall) -> ToolResult:  # what services.call_tool does when policy says no
        if call.tool == "add":
            raise PolicyDenied("sdk.add is not allowed by profile 'test'", tool="sdk.add")
        return toolbox.call_tool(call)

    script = [
        turn(api, None, calls(api, (add, {"a": 1, "b": 1}), (echo, {"message": "hi"}))),
        turn(api, "I am not allowed to add numbers."),
    ]
    with FakeLLM(api, script) as fake:
        record = ask("1+1?", provider=provider_for(api, fake), tools=toolbox.tools, call_tool=guarded).to_json()
    denied, ok = record["steps"]
    assert denied["outcome"] == "denied" and denied["error"]["exitCode"] == 4 and "result" not in denied
    assert ok["outcome"] == "ok" and ok["seen"] == "hi"
    results = sent_results(api, fake.bodies[1])
    assert results[0]["is_error"] and "policy denied this call: sdk.add is not allowed" in results[0]["text"]
    assert results[1] == {**results[1], "text": "hi", "is_error": False}


@pytest.mark.parametrize("api", APIS)
def test_large_result_is_compacted_for_the_model_but_kept_whole(api, toolbox):
    big = toolbox.logs / "big.log"
    big.write_text("".join(f"line {i:04d} some repeated log text\n" for i in range(1, 401)))
    read = toolbox.name(api, "fs.read_text_file")
    script = [turn(api, None, calls(api, (read, {"path": str(big)}))), turn(api, "It is long.")]
    with FakeLLM(api, script) as fake:
        record = ask(
            "read",
            provider=provider_for(api, fake),
            tools=toolbox.tools,
            call_tool=toolbox.call_tool,
            limits=Limits(result_budget=500),
        ).to_json()
    [step] = record["steps"]
    seen = sent_results(api, fake.bodies[1])[0]["text"]
    assert seen.removeprefix("[tool error] ") == step["seen"]
    kept, note = step["seen"].split("\n[llmc: ")
    assert kept.endswith("line 0015 some repeated log text") and len(kept) <= 500  # cut at a line end
    assert "385 of 400 lines" in note and "head, tail" in note and "from line 16" in note
    assert step["compacted"]["linesShown"] == 15
    assert step["result"]["content"][0]["text"].count("\n") == 400  # the record keeps it all


@pytest.mark.parametrize("api", APIS)
def test_max_steps_ends_the_run(api, toolbox):
    echo = toolbox.name(api, "sdk.echo")
    script = [turn(api, None, calls(api, (echo, {"message": f"again {n}"}), step=n)) for n in (1, 2, 3, 4)]
    with FakeLLM(api, script) as fake:
        record = ask(
            "loop", provider=provider_for(api, fake), tools=toolbox.tools, call_tool=toolbox.call_tool, limits=Limits(max_steps=3)
        )
    assert record.stop_reason == "max_steps" and len(fake.requests) == 3 and len(record.steps) == 3


def test_total_timeout_stops_a_slow_tool(toolbox):
    api = "anthropic"
    slow = toolbox.name(api, "sdk.slow")
    conv = Conversation.new(api, "model-x")
    records: list = []
    with FakeLLM(api, [turn(api, None, calls(api, (slow, {"seconds": 300})))]) as fake:
        # The tool would take five minutes: the run must end at its own limit, not wait for it.
        runner = threading.Thread(
            target=lambda: records.append(
                ask(
                    "wait",
                    provider=provider_for(api, fake),
                    tools=toolbox.tools,
                    call_tool=toolbox.call_tool,
                    limits=Limits(timeout=1.0),
                    conversation=conv,
                )
            ),
            daemon=True,
        )
        runner.start()
        runner.join(60)
    assert not runner.is_alive(), "ask waited for the slow tool"
    record = records[0]
    assert record.stop_reason == "timeout"
    assert record.steps[0]["outcome"] == "timeout"
    # every tool_use still has its tool_result, so the conversation can go on
    assert conv.messages[-1].items[0].call_id == call_id(api, 1)


@pytest.mark.parametrize("api", ["openai", "text"])
def test_unknown_tool_and_unreadable_arguments(api, toolbox):
    echo = toolbox.name(api, "sdk.echo")
    bad_args = '{"message": "x",,' if api == "openai" else "{message: x y z"
    script = [turn(api, None, calls(api, ("no_such_tool", {}), (echo, bad_args))), turn(api, "Sorry.")]
    with FakeLLM(api, script) as fake:
        record = ask("go", provider=provider_for(api, fake), tools=toolbox.tools, call_tool=toolbox.call_tool)
    assert [s["outcome"] for s in record.steps] == ["unknown_tool", "invalid"]
    unknown, invalid = sent_results(api, fake.bodies[1])
    assert "no tool named 'no_such_tool'" in unknown["text"] and echo in unknown["text"]
    assert "could not read this tool call" in invalid["text"] and invalid["is_error"]


def test_text_protocol_malformed_blocks_in_the_loop(toolbox):
    api = "text"
    add = toolbox.name(api, "sdk.add")
    answer = (
        f'<mcp:tool>\nparameters: {{"a": 1}}\n</mcp:tool>\n'
        f"<mcp:tool>\nname: {add}\nparameters: {{a: 20, 'b': 22,}}\n</mcp:tool>"
    )
    from tests.fakes.llm import chat_reply

    with FakeLLM(api, [chat_reply(answer), chat_reply("42")]) as fake:
        record = ask("sum", provider=provider_for(api, fake), tools=toolbox.tools, call_tool=toolbox.call_tool)
    first, second = sent_results(api, fake.bodies[1])
    assert first["is_error"] and "no `name:` line" in first["text"]
    assert second == {"id": "t1-2", "name": add, "text": "42", "is_error": False}
    assert record.answer == "42"


@pytest.mark.parametrize("api", APIS)
def test_provider_error_mid_run_keeps_the_record(api, toolbox):
    echo = toolbox.name(api, "sdk.echo")
    script = [turn(api, None, calls(api, (echo, {"message": "one"}))), ERRORS[api]["auth"]()]
    with FakeLLM(api, script) as fake, pytest.raises(ProviderError) as info:
        ask("go", provider=provider_for(api, fake), tools=toolbox.tools, call_tool=toolbox.call_tool)
    assert info.value.exit_code == 8 and info.value.details["reason"] == "auth"
    assert info.value.record["steps"][0]["seen"] == "one" and info.value.record["stopReason"] == "error"


def unbound(body):
    """A request body with the run's fence boundary replaced by a fixed one."""
    text = json.dumps(body)
    return json.loads(re.sub(r'(tool-result id=\\")[0-9a-f]{16}', r"\g<1>BOUNDARY", text))


@pytest.mark.parametrize("api", APIS)
def test_conversation_saved_and_continued(api, toolbox):
    add = toolbox.name(api, "sdk.add")
    script = [turn(api, None, calls(api, (add, {"a": 2, "b": 2}))), turn(api, "4"), turn(api, "8")]
    with FakeLLM(api, script) as fake:
        p = provider_for(api, fake)
        conv = Conversation.new(api, "model-x", system="Answer with a number.")
        ask("2+2?", provider=p, tools=toolbox.tools, call_tool=toolbox.call_tool, conversation=conv)
        path = save_conversation(conv, "sums")
        assert path.stat().st_mode & 0o777 == 0o600
        again = load_conversation("last")
        record = ask("and doubled?", provider=p, tools=toolbox.tools, call_tool=toolbox.call_tool, conversation=again)
        save_conversation(again, "sums")
    assert record.answer == "8" and record.conversation == conv.id
    # the continued request carries the whole first exchange as first sent, but for the boundary
    # its tool results are fenced with (agent/fence.py: new each run)
    first_exchange, continued = (unbound(body) for body in fake.bodies[1:3])
    assert fake.bodies[1] != first_exchange and fake.bodies[2] != continued
    key = {"openai": "messages", "text": "messages", "openai-responses": "input", "anthropic": "messages", "gemini": "contents"}[
        api
    ]
    assert continued[key][: len(first_exchange[key])] == first_exchange[key]
    assert len(load_conversation("sums").runs) == 2


def test_no_tools_means_no_tool_definitions(toolbox):
    with FakeLLM("anthropic", [turn("anthropic", "Hello.")]) as fake:
        record = ask("hi", provider=provider_for("anthropic", fake), tools=[], call_tool=toolbox.call_tool)
    assert record.answer == "Hello." and "tools" not in fake.bodies[0]


def test_bad_conversation_names():
    from llmc_cli.errors import UsageError

    with pytest.raises(UsageError):
        load_conversation("last")
    with pytest.raises(UsageError):
        load_conversation("../etc/passwd")
    with pytest.raises(UsageError):
        save_conversation(Conversation.new("openai", "m"), "last")
