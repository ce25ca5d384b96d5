"""OpenTelemetry end to end: the installed llmc with the real SDK and OTLP/HTTP exporter, sending
to a receiver that decodes the protobuf payloads; real MCP servers (the SDK test server reads the
W3C trace context from params._meta and returns it); the gateway as a real child process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import turn
from tests.helpers import llmc, llmc_executable, profile_file, sdk_server
from tests.telemetry.receiver import Receiver

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
SERVER = " ".join(sdk_server("sdk_server.py"))
MCP_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


def otel_env(receiver: Receiver, **extra: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "llmc-test", **extra}


def profile(isolated_dirs: Path, telemetry: str = "", extra: str = "") -> None:
    profile_file(isolated_dirs / "config", f"""
[servers.sdk]
command = "{sys.executable}"
args = ["{sdk_server('sdk_server.py')[1]}"]
{extra}
[telemetry]
{telemetry}
""")


def by_id(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["spanId"]: s for s in spans}


def test_a_call_is_one_trace_from_the_ci_parent_through_the_server(isolated_dirs, receiver):
    traceparent = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"
    proc = llmc("--otel", "call", "--stdio", SERVER, "trace_context",
                env=otel_env(receiver, TRACEPARENT=traceparent, TRACESTATE="ci=1"))
    assert proc.returncode == 0, proc.stderr
    seen_by_server = proc.json()["structuredContent"]
    got = receiver.got
    assert got.wait_for(lambda g: any(s["name"] == "llmc call" for s in g.spans)
                        and any(p["name"] == "mcp.client.operation.duration" for p in g.points))
    root = got.named("llmc call")[0]
    assert (root["traceId"], root["parentSpanId"], root["kind"]) == (PARENT_TRACE, PARENT_SPAN, "internal")
    call = got.named("tools/call trace_context")[0]
    assert call["kind"] == "client" and call["traceId"] == PARENT_TRACE and call["parentSpanId"] == root["spanId"]
    attributes = call["attributes"]
    assert attributes["mcp.method.name"] == "tools/call" and attributes["gen_ai.tool.name"] == "trace_context"
    assert attributes["gen_ai.operation.name"] == "execute_tool" and attributes["network.transport"] == "pipe"
    assert attributes["jsonrpc.request.id"].isdigit() and attributes["mcp.protocol.version"]
    assert "error.type" not in attributes and call["status"] != "error"
    # The server saw this very span as its parent, and the tracestate of the CI system (SEP-414 keys, unprefixed).
    assert seen_by_server["traceparent"].split("-")[1:3] == [PARENT_TRACE, call["spanId"]]
    assert seen_by_server.get("tracestate") == "ci=1"
    decision = [e for e in root["events"] if e["name"] == "llmc.policy.decision"]
    assert decision and decision[0]["attributes"]["llmc.policy.decision"] == "allow"
    assert root["service"] == "llmc-test"
    durations = [p for p in got.points if p["name"] == "mcp.client.operation.duration"
                 and p["attributes"]["mcp.method.name"] == "tools/call"]
    assert durations and durations[0]["bounds"] == MCP_BUCKETS and durations[0]["unit"] == "s"
    assert "jsonrpc.request.id" not in durations[0]["attributes"]  # no high-cardinality metric attributes
    counts = [p for p in got.points if p["name"] == "llmc.policy.decisions"]
    assert counts and counts[0]["value"] == 1 and counts[0]["attributes"]["llmc.policy.decision"] == "allow"
    assert any(p["name"] == "mcp.client.session.duration" for p in got.points)


def test_a_tool_error_and_a_denial_are_errors_on_their_spans(isolated_dirs, receiver):
    profile(isolated_dirs, "enabled = true", extra='[policy]\ndeny = ["sdk.add"]\n')
    failed = llmc("call", "sdk.fail", "reason=nope", env=otel_env(receiver))
    denied = llmc("call", "sdk.add", "a=1", "b=2", env=otel_env(receiver))
    assert (failed.returncode, denied.returncode) == (1, 4), failed.stderr + denied.stderr
    got = receiver.got
    assert got.wait_for(lambda g: len(g.named("llmc call")) == 2)
    span = got.named("tools/call fail")[0]
    assert span["status"] == "error" and span["attributes"]["error.type"] == "tool_error"
    assert not got.named("tools/call add")  # a denied call never reaches the server
    events = [e["attributes"] for s in got.named("llmc call") for e in s["events"]]
    assert {"llmc.policy.decision": "deny", "llmc.policy.rule": "deny: sdk.add"}.items() <= \
        next(e for e in events if e["llmc.policy.decision"] == "deny").items()


def test_a_batch_is_one_trace(isolated_dirs, receiver):
    lines = "\n".join(json.dumps({"tool": "sdk.add", "arguments": {"a": i, "b": 1}}) for i in range(3))
    profile(isolated_dirs)
    proc = llmc("call", "--batch", "-", stdin=lines + "\n", env=otel_env(receiver, LLMC_OTEL="1"))
    assert proc.returncode == 0, proc.stderr
    got = receiver.got
    assert got.wait_for(lambda g: len(g.named("tools/call add")) == 3 and g.named("llmc call"))
    root = got.named("llmc call")[0]
    assert {s["traceId"] for s in got.named("tools/call add")} == {root["traceId"]}


def test_ask_traces_the_agent_the_model_and_each_tool(isolated_dirs, receiver):
    script = [turn("openai", calls=[("c1", "trace_context", {})]), turn("openai", text="done")]
    with FakeLLM("openai", script) as fake:
        profile(isolated_dirs, "enabled = true",
                extra=f'[llm]\nprovider = "openai"\nmodel = "model-fake"\nbase_url = "{fake.base_url}"\n'
                      '[policy]\nconfirm_destructive = false\n')  # a model's call; no terminal to confirm on
        proc = llmc("ask", "trace it", env=otel_env(receiver, OPENAI_API_KEY="test-key"))
    assert proc.returncode == 0, proc.stderr
    got = receiver.got
    assert got.wait_for(lambda g: g.named("llmc ask") and len(g.named("chat model-fake")) == 2)
    spans = by_id(got.spans)
    agent = got.named("invoke_agent llmc")[0]
    assert agent["attributes"]["gen_ai.conversation.id"] == proc.json()["conversation"]
    chats = got.named("chat model-fake")
    assert all(c["kind"] == "client" and c["parentSpanId"] == agent["spanId"] for c in chats)
    assert chats[0]["attributes"]["gen_ai.provider.name"] == "openai"
    assert chats[0]["attributes"]["gen_ai.request.model"] == "model-fake"
    assert isinstance(chats[0]["attributes"].get("gen_ai.usage.input_tokens"), int)
    tool = got.named("execute_tool trace_context")[0]
    assert tool["parentSpanId"] == agent["spanId"] and tool["attributes"]["gen_ai.tool.call.id"] == "c1"
    mcp = got.named("tools/call trace_context")[0]
    assert spans[mcp["parentSpanId"]]["name"] == "execute_tool trace_context"
    assert got.wait_for(lambda g: any(p["name"] == "gen_ai.client.token.usage" for p in g.points))
    usage = [p for p in got.points if p["name"] == "gen_ai.client.token.usage"]
    assert {p["attributes"]["gen_ai.token.type"] for p in usage} == {"input", "output"}
    assert any(p["name"] == "gen_ai.client.operation.duration" for p in got.points)


def test_the_gateway_continues_the_hosts_trace_to_the_upstream(isolated_dirs, receiver):
    """llmc as the host, `llmc serve -p` as the gateway (both exporting): host CLIENT span ->
    gateway SERVER span -> gateway CLIENT span -> the upstream server sees the last one."""
    profile(isolated_dirs, extra="[policy]\nconfirm_destructive = false\n")  # the host's model would be asked
    # A stdio server gets an allow-listed environment: the gateway is told where things are.
    gateway = (f"env OTEL_EXPORTER_OTLP_ENDPOINT={receiver.endpoint} LLMC_STATE_DIR={isolated_dirs / 'gw-state'} "
               f"{llmc_executable()} --otel serve -p {isolated_dirs / 'config' / 'profiles' / 'default.toml'}")
    proc = llmc("call", "--stdio", gateway, "sdk.trace_context", env=otel_env(receiver, LLMC_OTEL="1"))
    assert proc.returncode == 0, proc.stderr
    seen = proc.json()["structuredContent"]
    got = receiver.got
    assert got.wait_for(lambda g: len(g.named("tools/call sdk.trace_context")) == 2
                        and g.named("tools/call trace_context"))
    host = next(s for s in got.named("tools/call sdk.trace_context") if s["kind"] == "client")
    served = next(s for s in got.named("tools/call sdk.trace_context") if s["kind"] == "server")
    upstream = got.named("tools/call trace_context")[0]
    assert served["parentSpanId"] == host["spanId"] and upstream["parentSpanId"] == served["spanId"]
    assert host["traceId"] == served["traceId"] == upstream["traceId"]
    assert served["attributes"]["mcp.method.name"] == "tools/call"
    assert seen["traceparent"].split("-")[2] == upstream["spanId"]
    assert any(p["name"] == "mcp.server.operation.duration" for p in got.points) or \
        got.wait_for(lambda g: any(p["name"] == "mcp.server.operation.duration" for p in g.points))


def test_audit_records_leave_as_log_records(isolated_dirs, receiver):
    profile(isolated_dirs, "enabled = true\naudit_logs = true")
    proc = llmc("call", "sdk.add", "a=1", "b=2", env=otel_env(receiver))
    assert proc.returncode == 0, proc.stderr
    got = receiver.got
    assert got.wait_for(lambda g: len(g.logs) >= 2)
    events = [json.loads(r["body"])["event"] for r in got.logs]
    assert events == ["decision", "outcome"]
    assert all(r["eventName"] == "llmc.audit" and r["traceId"] for r in got.logs)
    local = [json.loads(line) for line in (isolated_dirs / "state" / "audit.jsonl").read_text().splitlines()]
    assert [json.loads(r["body"])["hash"] for r in got.logs] == [r["hash"] for r in local]


def test_nothing_is_sent_and_nothing_imported_when_off(isolated_dirs, receiver):
    """No flag, no LLMC_OTEL, no [telemetry]: no request reaches the collector and no
    OpenTelemetry module is even imported (the same entry point, in one process)."""
    script = textwrap.dedent(f"""
        import sys
        from llmc_cli.cli.main import main
        try:
            main(["call", "--stdio", {SERVER!r}, "add", "a=1", "b=2"])
        except SystemExit as exc:
            code = exc.code
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")), file=sys.stderr)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**__import__("os").environ, **otel_env(receiver)})
    assert json.loads(proc.stdout)["structuredContent"] == {"result": 3}
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr
    time.sleep(0.5)  # an exporter would have posted by the command's exit: it flushes before leaving
    assert not receiver.got.spans and not receiver.got.points


def test_a_collector_that_never_answers_costs_at_most_the_flush_bound(isolated_dirs):
    """A collector that accepts and never replies: the call's output and exit code are unchanged,
    one warning line says telemetry was dropped, and the command ends within its bound."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    try:
        profile(isolated_dirs, "enabled = true\nflush_timeout = 1")
        started = time.monotonic()
        proc = llmc("call", "sdk.add", "a=1", "b=2", timeout=60,
                    env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{listener.getsockname()[1]}"})
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        for conn in held:
            conn.close()
        listener.close()
    assert proc.returncode == 0 and proc.json()["structuredContent"] == {"result": 3}
    warnings = [line for line in proc.stderr.splitlines() if "telemetry" in line]
    assert len(warnings) == 1 and "dropped" in warnings[0], proc.stderr
    assert elapsed < 30, elapsed  # the bound is 1 s of flush; the rest is start-up on a loaded machine


def test_enabled_without_the_extra_is_one_line_naming_it(isolated_dirs, tmp_path):
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "opentelemetry.py").write_text("# not the SDK: stands for an install without the otel extra\n")
    proc = llmc("--otel", "call", "--stdio", SERVER, "add", "a=1", "b=2", env={"PYTHONPATH": str(shadow)})
    assert proc.returncode == 3
    assert proc.stderr.strip().count("\n") == 0 and "llmc-cli[otel]" in proc.stderr, proc.stderr
