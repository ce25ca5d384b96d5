"""Both HTTP transports against servers built with the official `mcp` SDK (2.3): Streamable HTTP
stateful (SSE replies), stateless and JSON replies, and the deprecated HTTP+SSE transport."""

from __future__ import annotations

import json
import time

import pytest

from llmc_cli.errors import TimeoutExpired
from llmc_cli.mcp.client import connect
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.transports.legacy_sse import LegacySseTransport
from llmc_cli.mcp.transports.streamable_http import StreamableHttpTransport
from llmc_cli.model import ServerSpec
from tests.helpers import llmc

STREAMABLE = ["sdk_stateful", "sdk_stateless", "sdk_json"]


@pytest.mark.parametrize("server", STREAMABLE)
def test_auto_picks_the_modern_era_served_by_mcp_2_3(server, request):
    url = request.getfixturevalue(server)
    with connect(ServerSpec("sdk", url=url, timeout=20)) as session:
        assert (session.era, session.protocol_version) == ("modern", "2026-07-28")
        assert isinstance(session.transport, StreamableHttpTransport)
        assert session.transport.session_id is None  # modern: no sessions
        assert {"echo", "add", "weather"} <= {t["name"] for t in session.list_tools()}
        # The SDK checks Mcp-Method and Mcp-Name against the body (HeaderMismatch otherwise).
        assert session.call_tool("add", {"a": 2, "b": 3})["structuredContent"] == {"result": 5}
        assert session.call_tool("echo", {"message": "grüße\nzwei"})["content"][0]["text"] == "grüße\nzwei"


@pytest.mark.parametrize("server", STREAMABLE)
def test_legacy_streamable_http_handshake_session_progress_and_logs(server, request):
    url = request.getfixturevalue(server)
    progress, logs = [], []
    hooks = ClientHooks(on_progress=progress.append, on_log=logs.append)
    transport = StreamableHttpTransport(url, timeout=20)
    with ClientSession(transport, name="sdk", timeout=20, hooks=hooks) as session:
        session.initialize()
        assert (session.era, session.protocol_version) == ("legacy", "2025-11-25")
        assert (transport.session_id is not None) == (server != "sdk_stateless")
        assert session.call_tool("add", {"a": 40, "b": 2})["structuredContent"] == {"result": 42}
        assert session.call_tool("slow", {"seconds": 0.3})["content"][0]["text"] == "slept 0.3"
        assert session.call_tool("log", {"message": "hello log"})["content"][0]["text"] == "logged"
        session.ping()
    if server != "sdk_json":  # SSE replies carry notifications; JSON replies cannot
        assert progress and progress[-1]["progress"] == progress[-1]["total"]
        assert any(entry.get("data") == "hello log" for entry in logs)


def test_modern_timeout_cancels_by_closing_the_stream_and_the_session_goes_on(sdk_stateful):
    with connect(ServerSpec("sdk", url=sdk_stateful, timeout=20)) as session:
        assert session.era == "modern"
        started = time.monotonic()
        with pytest.raises(TimeoutExpired):
            # slow reports progress, which extends the 0.5s timeout up to 10x: cut at 5s, not 30s
            session.call_tool("slow", {"seconds": 30}, timeout=0.5)
        assert time.monotonic() - started < 20
        assert session.call_tool("add", {"a": 1, "b": 1})["structuredContent"] == {"result": 2}


def test_http_sse_transport_of_2024_11_05(sdk_sse):
    # auto: the POST to the SSE URL fails with 405 -> the deprecated transport.
    with connect(ServerSpec("sdk", url=sdk_sse, timeout=20)) as session:
        assert isinstance(session.transport, LegacySseTransport)
        assert session.era == "legacy"
        assert session.transport.endpoint and session.transport.endpoint.startswith(sdk_sse.rsplit("/", 1)[0])
        assert session.call_tool("add", {"a": 2, "b": 3})["structuredContent"] == {"result": 5}
        assert session.call_tool("fail", {"reason": "nope"})["isError"] is True


@pytest.mark.parametrize("server", [*STREAMABLE, "sdk_sse"])
def test_llmc_tools_list_and_call_with_auto_transport(server, request, isolated_dirs):
    url = request.getfixturevalue(server)
    listed = llmc("tools", "list", "--url", url)
    assert listed.returncode == 0, listed.stderr
    assert "add" in {t["name"] for t in json.loads(listed.stdout)["tools"]}
    called = llmc("call", "add", "a=2", "b=3", "--yes", "--url", url)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["structuredContent"] == {"result": 5}
    cache = json.loads((isolated_dirs / "state" / "servers.json").read_text())
    entry = cache[ServerSpec(name="s", url=url).cache_key()]
    assert (entry["transport"], entry["era"]) == (("sse", "legacy") if server == "sdk_sse" else ("http", "modern"))
    # The next run uses what was detected (no probe) and still works.
    again = llmc("call", "add", "a=1", "b=1", "--yes", "--url", url, "--text")
    assert again.returncode == 0 and again.stdout.strip() == "2", again.stderr
