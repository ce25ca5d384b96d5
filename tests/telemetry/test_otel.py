"""OpenTelemetry end to end: the installed llmc with the real SDK and OTLP/HTTP exporter, sending
to a receiver that decodes the protobuf payloads; real MCP servers (the SDK test server reads the
W3C trace context from params._meta and returns it); the gateway as a real child process."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import turn
from tests.helpers import audit_trail, free_port, llmc, llmc_executable, wait_listening
from tests.telemetry.conftest import SERVER, otel_env, profile
from tests.transports.conftest import sdk

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
# The conventions' explicit bucket boundaries (gen-ai/mcp.md, gen-ai/gen-ai-metrics.md), written
# out here rather than imported: the test checks the code against the conventions.
MCP_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]
GENAI_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
GENAI_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]


def by_id(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["spanId"]: s for s in spans}


def test_a_call_is_one_trace_from_the_ci_parent_through_the_server(isolated_dirs, receiver):
    traceparent = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"
    proc = llmc(
        "--otel",
        "call",
        "--stdio",
        SERVER,
        "trace_context",
        env=otel_env(
            receiver,
            TRACEPARENT=traceparent,
            TRACESTATE="ci=1",
            BAGGAGE="team=platform",
            OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer t0ken",
        ),
    )
    assert proc.returncode == 0, proc.stderr
    seen_by_server = proc.json()["structuredContent"]
    got = receiver.got
    assert got.wait_for(
        lambda g: (
            any(s["name"] == "llmc call" for s in g.spans) and any(p["name"] == "mcp.client.operation.duration" for p in g.points)
        )
    )
    root = got.named("llmc call")[0]
    assert (root["traceId"], root["parentSpanId"], root["kind"]) == (PARENT_TRACE, PARENT_SPAN, "internal")
    assert root["attributes"]["process.exit.code"] == 0 and root["status"] == "unset"
    call = got.named("tools/call trace_context")[0]
    assert call["kind"] == "client" and call["traceId"] == PARENT_TRACE and call["parentSpanId"] == root["spanId"]
    attributes = call["attributes"]
    assert attributes["mcp.method.name"] == "tools/call" and attributes["gen_ai.tool.name"] == "trace_context"
    assert attributes["gen_ai.operation.name"] == "execute_tool" and attributes["network.transport"] == "pipe"
    assert attributes["jsonrpc.request.id"].isdigit() and attributes["mcp.protocol.version"]
    assert "error.type" not in attributes and call["status"] != "error"
    assert "gen_ai.tool.call.arguments" not in attributes and "gen_ai.tool.call.result" not in attributes  # opt-in
    # The server saw this very span as its parent, and the tracestate of the CI system (SEP-414 keys, unprefixed).
    assert seen_by_server["traceparent"].split("-")[1:3] == [PARENT_TRACE, call["spanId"]]
    assert seen_by_server.get("tracestate") == "ci=1" and seen_by_server.get("baggage") == "team=platform"
    assert got.headers and all(h.get("authorization") == "Bearer t0ken" for h in got.headers)
    decision = [e for e in root["events"] if e["name"] == "llmc.policy.decision"]
    assert decision and decision[0]["attributes"]["llmc.policy.decision"] == "allow"
    assert root["service"] == "llmc-test"
    durations = [
        p
        for p in got.points
        if p["name"] == "mcp.client.operation.duration" and p["attributes"]["mcp.method.name"] == "tools/call"
    ]
    assert durations and durations[0]["bounds"] == MCP_BUCKETS and durations[0]["unit"] == "s"
    assert "jsonrpc.request.id" not in durations[0]["attributes"]  # no high-cardinality metric attributes
    counts = [p for p in got.points if p["name"] == "llmc.policy.decisions"]
    assert counts and counts[0]["value"] == 1 and counts[0]["attributes"]["llmc.policy.decision"] == "allow"
    assert any(p["name"] == "mcp.client.session.duration" for p in got.points)


def test_a_tool_error_a_json_rpc_error_and_a_denial_are_errors_on_their_spans(isolated_dirs, receiver):
    profile(isolated_dirs, "enabled = true", extra='[policy]\ndeny = ["sdk.add"]\n')
    failed = llmc("call", "sdk.fail", "reason=nope", env=otel_env(receiver))
    denied = llmc("call", "sdk.add", "a=1", "b=2", env=otel_env(receiver))
    missing = llmc("resources", "read", "test://nowhere", "--server", "sdk", env=otel_env(receiver))
    assert (failed.returncode, denied.returncode, missing.returncode) == (1, 4, 6), failed.stderr + denied.stderr + missing.stderr
    got = receiver.got
    assert got.wait_for(lambda g: len(g.named("llmc call")) == 2 and g.named("resources/read"))
    span = got.named("tools/call fail")[0]
    assert span["status"] == "error" and span["attributes"]["error.type"] == "tool_error"
    assert "rpc.response.status_code" not in span["attributes"]  # the JSON-RPC call itself succeeded
    read = got.named("resources/read")[0]  # the URI is an attribute, never part of the name
    code = read["attributes"]["error.type"]
    assert read["status"] == "error" and code.lstrip("-").isdigit() and code != "0"
    assert read["attributes"]["rpc.response.status_code"] == code
    assert read["attributes"]["mcp.resource.uri"] == "test://nowhere"
    assert got.wait_for(
        lambda g: any(
            p["name"] == "mcp.client.operation.duration" and p["attributes"].get("error.type") == code for p in g.points
        )
    )
    metric = next(
        p for p in got.points if p["name"] == "mcp.client.operation.duration" and p["attributes"].get("error.type") == code
    )
    assert metric["attributes"]["rpc.response.status_code"] == code
    assert "mcp.resource.uri" not in metric["attributes"]  # opt-in on metrics (high cardinality)
    assert not got.named("tools/call add")  # a denied call never reaches the server
    # The command's root span carries its exit status; a failed command is an error span.
    roots = {s["attributes"]["process.exit.code"]: s for s in got.named("llmc call")}
    assert set(roots) == {1, 4} and all(r["status"] == "error" for r in roots.values())
    assert roots[4]["attributes"]["error.type"] == "4"
    events = [e["attributes"] for s in got.named("llmc call") for e in s["events"]]
    assert {"llmc.policy.decision": "deny", "llmc.policy.rule": "deny: sdk.add"}.items() <= next(
        e for e in events if e["llmc.policy.decision"] == "deny"
    ).items()


def test_captured_content_is_opt_in_and_masked_like_the_audit_log(isolated_dirs, receiver):
    profile(isolated_dirs, "enabled = true\ncapture_content = true")
    secret = "s3cr3t-value-for-the-test"
    proc = llmc("call", "sdk.echo", f"message=key {secret} here", env=otel_env(receiver, SERVICE_API_KEY=secret))
    assert proc.returncode == 0, proc.stderr
    got = receiver.got
    assert got.wait_for(lambda g: g.named("tools/call echo"))
    attributes = got.named("tools/call echo")[0]["attributes"]
    assert json.loads(attributes["gen_ai.tool.call.arguments"]) == {"message": "key *** here"}
    assert "key *** here" in attributes["gen_ai.tool.call.result"] and secret not in attributes["gen_ai.tool.call.result"]
    audit = audit_trail(isolated_dirs / "state")
    assert audit[0]["arguments"] == json.loads(attributes["gen_ai.tool.call.arguments"])  # the same masking


def test_a_batch_is_one_trace(isolated_dirs, receiver):
    lines = "\n".join(json.dumps({"tool": "sdk.add", "arguments": {"a": i, "b": 1}}) for i in range(3))
    profile(isolated_dirs)
    proc = llmc("call", "--batch", "-", stdin=lines + "\n", env=otel_env(receiver, LLMC_OTEL="1"))
    assert proc.returncode == 0, proc.stderr
    got = receiver.got
    assert got.wait_for(lambda g: len(g.named("tools/call add")) == 3 and g.named("llmc call"))
    root = got.named("llmc call")[0]
    calls = got.named("tools/call add")
    assert {(s["traceId"], s["parentSpanId"], s["kind"]) for s in calls} == {(root["traceId"], root["spanId"], "client")}
    assert len({s["attributes"]["jsonrpc.request.id"] for s in calls}) == 3
    decisions = [e for e in root["events"] if e["name"] == "llmc.policy.decision"]
    assert [e["attributes"]["llmc.policy.decision"] for e in decisions] == ["allow"] * 3
    assert got.wait_for(lambda g: any(p["name"] == "llmc.policy.decisions" for p in g.points))
    assert sum(p["value"] for p in got.points if p["name"] == "llmc.policy.decisions") == 3
    durations = [
        p for p in got.points if p["name"] == "mcp.client.operation.duration" and p["attributes"].get("gen_ai.tool.name") == "add"
    ]
    assert sum(p["count"] for p in durations) == 3


def test_ask_traces_the_agent_the_model_and_each_tool(isolated_dirs, receiver):
    script = [turn("openai", calls=[("c1", "trace_context", {})]), turn("openai", text="done")]
    with FakeLLM("openai", script) as fake:
        profile(
            isolated_dirs,
            "enabled = true",
            extra=f'[llm]\nprovider = "openai"\nmodel = "model-fake"\nbase_url = "{fake.base_url}"\n'
            "[policy]\nconfirm_destructive = false\n",
        )  # a model's call; no terminal to confirm on
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
    assert chats[0]["attributes"]["gen_ai.operation.name"] == "chat"
    assert chats[0]["attributes"]["gen_ai.conversation.id"] == agent["attributes"]["gen_ai.conversation.id"]
    assert chats[0]["attributes"]["server.address"] == "127.0.0.1" and chats[0]["attributes"]["server.port"] > 0
    assert isinstance(chats[0]["attributes"].get("gen_ai.usage.input_tokens"), int)
    assert isinstance(chats[0]["attributes"].get("gen_ai.usage.output_tokens"), int)
    assert agent["kind"] == "internal" and agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    tool = got.named("execute_tool trace_context")[0]
    assert tool["parentSpanId"] == agent["spanId"] and tool["attributes"]["gen_ai.tool.call.id"] == "c1"
    assert tool["kind"] == "internal" and tool["attributes"]["gen_ai.tool.name"] == "trace_context"
    mcp = got.named("tools/call trace_context")[0]
    assert spans[mcp["parentSpanId"]]["name"] == "execute_tool trace_context"
    assert got.wait_for(lambda g: any(p["name"] == "gen_ai.client.token.usage" for p in g.points))
    usage = [p for p in got.points if p["name"] == "gen_ai.client.token.usage"]
    assert {p["attributes"]["gen_ai.token.type"] for p in usage} == {"input", "output"}
    assert all(p["bounds"] == GENAI_TOKEN_BUCKETS and p["unit"] == "{token}" for p in usage)
    durations = [p for p in got.points if p["name"] == "gen_ai.client.operation.duration"]
    assert durations and all(p["bounds"] == GENAI_DURATION_BUCKETS and p["unit"] == "s" for p in durations)
    assert durations[0]["attributes"]["gen_ai.provider.name"] == "openai"
    assert "gen_ai.conversation.id" not in durations[0]["attributes"]  # not a metric attribute


def test_the_gateway_continues_the_hosts_trace_to_the_upstream(isolated_dirs, receiver):
    """llmc as the host, `llmc serve -p` as the gateway (both exporting): host CLIENT span ->
    gateway SERVER span -> gateway CLIENT span -> the upstream server sees the last one."""
    profile(isolated_dirs, extra="[policy]\nconfirm_destructive = false\n")  # the host's model would be asked
    # A stdio server gets an allow-listed environment: the gateway is told where things are.
    gateway = (
        f"env OTEL_EXPORTER_OTLP_ENDPOINT={receiver.endpoint} LLMC_STATE_DIR={isolated_dirs / 'gw-state'} "
        f"{llmc_executable()} --otel serve -p {isolated_dirs / 'config' / 'profiles' / 'default.toml'}"
    )
    proc = llmc("call", "--stdio", gateway, "sdk.trace_context", env=otel_env(receiver, LLMC_OTEL="1"))
    assert proc.returncode == 0, proc.stderr
    seen = proc.json()["structuredContent"]
    got = receiver.got
    assert got.wait_for(lambda g: len(g.named("tools/call sdk.trace_context")) == 2 and g.named("tools/call trace_context"))
    host = next(s for s in got.named("tools/call sdk.trace_context") if s["kind"] == "client")
    served = next(s for s in got.named("tools/call sdk.trace_context") if s["kind"] == "server")
    upstream = got.named("tools/call trace_context")[0]
    assert served["parentSpanId"] == host["spanId"] and upstream["parentSpanId"] == served["spanId"]
    assert host["traceId"] == served["traceId"] == upstream["traceId"]
    assert served["attributes"]["mcp.method.name"] == "tools/call"
    assert seen["traceparent"].split("-")[2] == upstream["spanId"]
    assert served["attributes"]["gen_ai.tool.name"] == "sdk.trace_context"
    assert served["attributes"]["jsonrpc.request.id"] == host["attributes"]["jsonrpc.request.id"]
    assert served["attributes"]["network.transport"] == "pipe" and served["attributes"]["mcp.protocol.version"]
    # The gateway exports when its host closes it, which may be after the host itself exported.
    assert got.wait_for(
        lambda g: {"mcp.server.operation.duration", "mcp.server.session.duration"} <= {p["name"] for p in g.points}
    )
    server_ops = [p for p in got.points if p["name"] == "mcp.server.operation.duration"]
    assert all(p["bounds"] == MCP_BUCKETS for p in server_ops)
    assert any(p["attributes"].get("gen_ai.tool.name") == "sdk.trace_context" for p in server_ops)


def test_the_gateway_over_http_names_its_host_peer(isolated_dirs, receiver):
    """`llmc serve -p --http`: the SERVER span of a host's request says it came over TCP from the
    host's address and port, continues the host's trace, and carries no gateway session id."""
    profile(isolated_dirs, extra="[policy]\nconfirm_destructive = false\n")
    port = free_port()
    gateway = subprocess.Popen(
        [
            llmc_executable(),
            "--otel",
            "serve",
            "-p",
            str(isolated_dirs / "config" / "profiles" / "default.toml"),
            "--http",
            f"127.0.0.1:{port}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **otel_env(receiver), "LLMC_STATE_DIR": str(isolated_dirs / "gw-state")},
    )
    try:
        wait_listening(gateway, port, "the gateway")
        for transport in ("auto", "http"):  # a 2026-07-28 request, then an initialize-era session
            proc = llmc(
                "call",
                "--url",
                f"http://127.0.0.1:{port}/mcp",
                "--transport",
                transport,
                "sdk.echo",
                "message=hi",
                env=otel_env(receiver, LLMC_OTEL="1"),
            )
            assert proc.returncode == 0, proc.stderr
        got = receiver.got
        assert got.wait_for(lambda g: len([s for s in g.named("tools/call sdk.echo") if s["kind"] == "server"]) == 2)
        hosts = {s["spanId"]: s for s in got.named("tools/call sdk.echo") if s["kind"] == "client"}
        for served in (s for s in got.named("tools/call sdk.echo") if s["kind"] == "server"):
            attributes = served["attributes"]
            assert (attributes["network.transport"], attributes["network.protocol.name"]) == ("tcp", "http")
            assert attributes["client.address"] == "127.0.0.1" and 0 < attributes["client.port"] < 65536
            assert "mcp.session.id" not in attributes
            assert served["parentSpanId"] in hosts
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        if gateway.stderr:
            gateway.stderr.close()


@pytest.mark.parametrize("switch", ["profile", "flag"])
def test_audit_records_leave_as_log_records(isolated_dirs, receiver, switch):
    """[telemetry] audit_logs, whether the profile or --otel (read before the profile) turned
    telemetry on."""
    profile(isolated_dirs, "enabled = true\naudit_logs = true" if switch == "profile" else "audit_logs = true")
    flag = ("--otel",) if switch == "flag" else ()
    proc = llmc(*flag, "call", "sdk.add", "a=1", "b=2", env=otel_env(receiver))
    assert proc.returncode == 0, proc.stderr
    got = receiver.got
    assert got.wait_for(lambda g: len(g.logs) >= 2)
    events = [json.loads(r["body"])["event"] for r in got.logs]
    assert events == ["decision", "outcome"]
    assert got.wait_for(lambda g: g.named("llmc call"))  # the records sit in the call's trace
    assert all(r["eventName"] == "llmc.audit" and r["traceId"] == got.named("llmc call")[0]["traceId"] for r in got.logs)
    assert {r["attributes"]["llmc.audit.tool"] for r in got.logs} == {"add"}
    local = audit_trail(isolated_dirs / "state")
    assert [json.loads(r["body"])["hash"] for r in got.logs] == [r["hash"] for r in local]


def test_the_workspace_server_continues_the_trace_from_meta(isolated_dirs, receiver, tmp_path):
    """No profile: the built-in workspace server, in process. Its SERVER span's parent is the
    CLIENT span whose context the request carried in _meta (that span is never current)."""
    (tmp_path / "seen.txt").write_text("x")
    proc = llmc("--otel", "call", "workspace.list_directory", "path=.", env=otel_env(receiver), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = receiver.got
    assert got.wait_for(lambda g: len(g.named("tools/call list_directory")) == 2)
    client = next(s for s in got.named("tools/call list_directory") if s["kind"] == "client")
    served = next(s for s in got.named("tools/call list_directory") if s["kind"] == "server")
    assert served["parentSpanId"] == client["spanId"] and served["traceId"] == client["traceId"]
    assert served["attributes"]["mcp.method.name"] == "tools/call"
    assert served["attributes"]["gen_ai.tool.name"] == "list_directory"
    assert served["attributes"]["jsonrpc.request.id"] == client["attributes"]["jsonrpc.request.id"]
    assert "error.type" not in served["attributes"] and served["status"] != "error"
    assert got.wait_for(
        lambda g: {"mcp.server.operation.duration", "mcp.server.session.duration"} <= {p["name"] for p in g.points}
    )


def test_over_http_the_context_travels_in_meta_and_the_span_names_the_server(isolated_dirs, receiver):
    """Streamable HTTP with Mcp-Session-Id sessions (the SDK server, initialize era):
    network.transport tcp, the server's address and port, the session id."""
    for base in sdk("streamable-http", "--legacy"):
        proc = llmc("--otel", "call", "--url", base + "/mcp", "trace_context", env=otel_env(receiver))
        port = int(base.rsplit(":", 1)[1])
    assert proc.returncode == 0, proc.stderr
    seen = proc.json()["structuredContent"]
    got = receiver.got
    assert got.wait_for(lambda g: g.named("tools/call trace_context") and g.named("initialize"))
    call = got.named("tools/call trace_context")[0]
    attributes = call["attributes"]
    assert (attributes["network.transport"], attributes["network.protocol.name"]) == ("tcp", "http")
    assert (attributes["server.address"], attributes["server.port"]) == ("127.0.0.1", port)
    assert attributes["mcp.session.id"] and attributes["mcp.protocol.version"]
    assert seen["traceparent"].split("-")[2] == call["spanId"]
    assert got.named("initialize")[0]["attributes"]["mcp.session.id"] == attributes["mcp.session.id"]


def test_a_request_the_gateway_sends_its_host_is_a_client_span_with_its_context_in_meta(isolated_dirs, receiver):
    """An initialize-era host (the mcp SDK client) calls a tool the policy has the host's user
    confirm: the gateway's elicitation/create is a CLIENT span, child of the tools/call SERVER
    span it serves, and that span's context arrives in the request's _meta (SEP-414)."""
    import os

    import anyio
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp_types import ElicitResult, Implementation

    profile(isolated_dirs)  # sdk.echo has no read-only hint: confirm_destructive asks the host
    seen: list[dict[str, Any]] = []

    async def answer(context: Any, params: Any) -> Any:
        meta = getattr(params, "meta", None)
        seen.append(meta if isinstance(meta, dict) else meta.model_dump(by_alias=True) if meta is not None else {})
        return ElicitResult(action="accept")

    env = {
        **{k: v for k, v in os.environ.items() if k.startswith("LLMC_") or k == "PATH"},
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
    }
    gateway = StdioServerParameters(
        command=llmc_executable(),
        env=env,
        args=["--otel", "serve", "-p", str(isolated_dirs / "config" / "profiles" / "default.toml")],
    )

    async def work() -> None:
        with anyio.fail_after(90):
            async with Client(
                gateway, mode="legacy", client_info=Implementation(name="host", version="1"), elicitation_callback=answer
            ) as client:
                result = await client.call_tool("sdk.echo", {"message": "hi"})
                assert result.is_error is False

    anyio.run(work)
    got = receiver.got
    assert got.wait_for(lambda g: g.named("elicitation/create") and g.named("tools/call sdk.echo"))
    asked = got.named("elicitation/create")[0]
    served = next(s for s in got.named("tools/call sdk.echo") if s["kind"] == "server")
    assert asked["kind"] == "client" and asked["parentSpanId"] == served["spanId"]
    assert asked["attributes"]["mcp.method.name"] == "elicitation/create"
    assert len(seen) == 1 and seen[0]["traceparent"].split("-")[1:3] == [asked["traceId"], asked["spanId"]]
