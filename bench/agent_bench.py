"""llmc's own overhead per agent step, in one run, against a minimal loop written directly
against the openai SDK. Both talk to the same wire-level fake Chat Completions server (answering
instantly) and run the same tool (`echo` of tests/peers/sdk_server.py, a real stdio MCP server)
through the same session, so the difference is what llmc's loop adds: translation, neutral
history, compaction, the run record, threads for tool calls.

    .venv/bin/python bench/agent_bench.py [--steps N] [--runs R] [--json]

A run = N model turns with one tool call each, then a final answer. Reports the median time per
step over R runs (the first run is a warm-up and is not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmc_cli import services  # noqa: E402
from llmc_cli.agent import ask, provider_tool_names  # noqa: E402
from llmc_cli.catalog import Catalog  # noqa: E402
from llmc_cli.config.profiles import LoadedProfile  # noqa: E402
from llmc_cli.config.schema import Profile  # noqa: E402
from llmc_cli.model import ServerSpec, ToolCall, ToolResult  # noqa: E402
from llmc_cli.providers.base import ProviderSettings, make_provider  # noqa: E402
from tests.fakes.llm import FakeLLM, chat_reply  # noqa: E402


def script(steps: int, tool_name: str) -> list:
    return [chat_reply(None, [(f"call_{n}", tool_name, {"message": f"step {n}"})]) for n in range(steps)] + [
        chat_reply("done")]


def llmc_run(fake: FakeLLM, tools: list, call_tool, steps: int) -> float:
    provider = make_provider("openai", ProviderSettings(model="bench", api_key="x", base_url=fake.base_url))
    started = time.perf_counter()
    record = ask("go", provider=provider, tools=tools, call_tool=call_tool, max_steps=steps + 1)
    elapsed = time.perf_counter() - started
    assert record.stop_reason == "end" and len(record.steps) == steps, record.to_json()
    return elapsed


def minimal_run(fake: FakeLLM, definitions: list, owner: dict, call_tool, steps: int) -> float:
    """The loop a user would write by hand with the openai SDK: no retries, records or limits."""
    import openai

    client = openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=0)
    started = time.perf_counter()
    messages: list = [{"role": "user", "content": "go"}]
    while True:
        msg = client.chat.completions.create(model="bench", messages=messages, tools=definitions).choices[0].message
        if not msg.tool_calls:
            break
        messages.append(msg.model_dump(exclude_none=True))
        for tc in msg.tool_calls:
            server, tool = owner[tc.function.name]
            result: ToolResult = call_tool(ToolCall(server, tool, json.loads(tc.function.arguments), tc.id))
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": result.text})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("LLMC_STATE_DIR", tempfile.mkdtemp(prefix="llmc-bench-"))
    from llmc_cli.translate import translate

    spec = ServerSpec("sdk", command=(sys.executable, str(ROOT / "tests" / "peers" / "sdk_server.py")))
    # assume_yes: an unattended run allowed every tool of the test server (echo has no annotations).
    invocation = services.Invocation(profile=LoadedProfile("bench", None, Profile()), command="ask", assume_yes=True)
    with Catalog([spec]) as catalog:
        tools = [t for t in catalog.tools_of("sdk") if t.name == "echo"]
        translation = translate(tools, "openai")
        owner = provider_tool_names(translation)
        name = next(iter(owner))

        def call_tool(call: ToolCall) -> ToolResult:
            return services.call_tool(catalog, invocation, call)

        times: dict[str, list[float]] = {"llmc": [], "minimal": []}
        for i in range(args.runs + 1):
            for label in ("llmc", "minimal"):  # interleaved, so drift hits both alike
                with FakeLLM("openai", script(args.steps, name)) as fake:
                    t = (llmc_run(fake, tools, call_tool, args.steps) if label == "llmc"
                         else minimal_run(fake, translation.definitions, owner, call_tool, args.steps))
                if i:
                    times[label].append(t / (args.steps + 1))
        # the tool call alone, for scale
        t0 = time.perf_counter()
        for n in range(args.steps):
            call_tool(ToolCall("sdk", "echo", {"message": f"{n}"}))
        tool_ms = (time.perf_counter() - t0) / args.steps * 1000

    per_step = {k: statistics.median(v) * 1000 for k, v in times.items()}
    report = {"steps_per_run": args.steps, "runs": args.runs, "ms_per_step": {k: round(v, 2) for k, v in per_step.items()},
              "llmc_overhead_ms_per_step": round(per_step["llmc"] - per_step["minimal"], 2),
              "tool_call_ms": round(tool_ms, 2)}
    if args.json:
        print(json.dumps(report))
        return
    print(f"per agent step (median of {args.runs} runs of {args.steps} tool steps + answer; fake model, stdio server):")
    for k, v in per_step.items():
        print(f"  {k:8} {v:7.2f} ms")
    print(f"  llmc overhead {report['llmc_overhead_ms_per_step']:.2f} ms/step; the MCP tool call alone: {tool_ms:.2f} ms")


if __name__ == "__main__":
    main()
